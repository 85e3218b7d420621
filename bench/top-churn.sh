#!/bin/sh
# CPU of the live view under connection churn (issue 30; doc/reference/BENCHMARKS.md, "The live
# view"), and whether its totals count the short connections: in a fresh network and pid
# namespace, sockchurn opens RATE connections per second over loopback (each writes BYTES bytes
# each way, the server closes first), and beside it
# `sockstat top --batch --json --interval 1 --count N` runs under /usr/bin/time. As root the view
# traces connection events (BPF), so a connection opened and closed within one refresh counts.
# Each connection is two sockets, so at R connections/s the view should see 2R short
# connections/s and 2 x R x BYTES bytes/s sent and as many received. Prints the view's CPU share,
# sockchurn's achieved rate, and per refresh the median and range of short connections/s and of
# bytes/s against those expectations, with the warnings of the last refresh. Run as root from the
# workspace root after `cargo build --release -p sockstat-cli -p sockstat-bench`:
#   sh bench/top-churn.sh 10000 20 [BYTES]         # 10k connections/s, 20 refreshes
ROOT=$(pwd)
rate=$1; count=$2; bytes=${3:-100}
unshare --net --pid --fork --mount --mount-proc sh -c '
  ROOT=$1; rate=$2; count=$3; bytes=$4
  ip link set lo up
  mkdir -p /tmp/sgchurn && mount -t tmpfs tmpfs /tmp/sgchurn && cd /tmp/sgchurn
  $ROOT/target/release/sockchurn --rate $rate --seconds $((count + 4)) --clients 4 --servers 4 \
    --bytes $bytes > churn.out 2> churn.err &
  c=$!
  sleep 1
  echo "load before: $(uptime)"
  /usr/bin/time -f "%U %S %e %M" -o t.out $ROOT/target/release/sockstat top --batch --json \
    --interval 1 --count $count > top.out 2> err.out
  echo "load after: $(uptime)"
  wait $c
  read u s e m < t.out
  echo "churn $(cat churn.out)"
  echo "top refreshes $(wc -l < top.out) user_s $u sys_s $s wall_s $e" \
       "cpu_share_of_one_core $(echo "scale=4; ($u + $s) / $e" | bc) peak_rss_kib $m stderr_lines $(wc -l < err.out)"
  python3 - "$rate" "$bytes" churn.out top.out <<"EOF"
import json, statistics, sys
rate, nbytes = float(sys.argv[1]), float(sys.argv[2])
achieved = json.load(open(sys.argv[3]))["rate"]
rows = [json.loads(l) for l in open(sys.argv[4])]
def show(name, vals, expect):
    vals = sorted(vals)
    print(f"{name}: median {statistics.median(vals):.0f} range {vals[0]:.0f}..{vals[-1]:.0f}"
          f" per s; expected {expect:.0f} (from the achieved {achieved:.0f} connections/s),"
          f" median {(statistics.median(vals) / expect - 1) * 100:+.1f} %")
tot = [r["totals"] for r in rows]
print("short_connections_counted", {r["short_connections_counted"] for r in rows})
show("short connections", [t["short_connections"] / r["interval_s"] for t, r in zip(tot, rows)], 2 * achieved)
show("sent bytes", [t["send_bytes_per_sec"] for t in tot], 2 * achieved * nbytes)
show("received bytes", [t["recv_bytes_per_sec"] for t in tot], 2 * achieved * nbytes)
print("closed_uncounted (sum)", sum(t["closed_uncounted"] for t in tot),
      "time_wait (last)", tot[-1]["time_wait"], "connections (last)", tot[-1]["connections"])
print("warnings of the last refresh", json.dumps(rows[-1]["warnings"])[:600])
EOF
' sh "$ROOT" "$rate" "$count" "$bytes"
