#!/bin/sh
# CPU of the live view under connection churn (issue 30; doc/reference/BENCHMARKS.md, "The live
# view"), and whether it counts the short connections: in a fresh network and pid namespace,
# sockchurn opens RATE connections per second over loopback (each writes BYTES bytes each way,
# the server closes first), and beside it `sockstat top --batch --json --interval 1 --count N`
# runs under /usr/bin/time. As root the view traces connection events (BPF), so a connection
# opened and closed within one refresh counts. Prints the view's CPU share, sockchurn's achieved
# rate, and per refresh the short connections and bytes the view counted against the sockets the
# kernel opened over the same interval (the namespace's TCP ActiveOpens + PassiveOpens, read
# every 10 ms): the connections live about a millisecond, so each socket opened is one short
# connection of that interval, with BYTES sent and BYTES received. Run as root from the
# workspace root after `cargo build --release -p sockstat-cli -p sockstat-bench`:
#   sh bench/top-churn.sh 10000 20 [BYTES]         # 10k connections/s, 20 refreshes
# SOCKSTAT names another sockstat binary.
ROOT=$(pwd)
S=${SOCKSTAT:-$ROOT/target/release/sockstat}
rate=$1; count=$2; bytes=${3:-100}
unshare --net --pid --fork --mount --mount-proc sh -c '
  ROOT=$1; rate=$2; count=$3; bytes=$4; S=$5
  ip link set lo up
  mkdir -p /tmp/sgchurn && mount -t tmpfs tmpfs /tmp/sgchurn && cd /tmp/sgchurn
  $ROOT/target/release/sockchurn --rate $rate --seconds $((count + 4)) --clients 4 --servers 4 \
    --bytes $bytes > churn.out 2> churn.err &
  c=$!
  python3 $ROOT/bench/top-churn.py opens opens.log &
  o=$!
  sleep 1
  echo "load before: $(uptime)"
  /usr/bin/time -f "%U %S %e %M" -o t.out $S top --batch --json \
    --interval 1 --count $count > top.out 2> err.out
  echo "load after: $(uptime)"
  wait $c
  kill $o
  read u s e m < t.out
  echo "churn $(cat churn.out)"
  echo "top refreshes $(wc -l < top.out) user_s $u sys_s $s wall_s $e" \
       "cpu_share_of_one_core $(echo "scale=4; ($u + $s) / $e" | bc) peak_rss_kib $m stderr_lines $(wc -l < err.out)"
  python3 $ROOT/bench/top-churn.py analyse "$rate" "$bytes" churn.out top.out opens.log
' sh "$ROOT" "$rate" "$count" "$bytes" "$S"
