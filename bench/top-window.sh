#!/bin/bash
# A paced flow's rate in `sockstat top` on a big table, two builds compared
# (doc/reference/BENCHMARKS.md, "The live view", "Rates on a big table"). In the network
# namespace of a running sockgen (run with --netns; COORD_PID its coordinator), a TCP flow over
# loopback paced at 2,000,000 bytes/s (bench/top-vs-capture.py send, by bytes per elapsed time),
# then `sockstat top --batch --json --by connection --interval 1 --count 16` twice with each
# binary, alternating; from each run's 4th refresh on, the flow's send rate against the paced
# rate: median, worst and standard deviation of the error, in %.
#   target/release/sockgen -n 60000 -p 20 --netns --max-seconds 1500 &
#   bench/top-window.sh COORD_PID BEFORE/sockstat AFTER/sockstat
set -u
P=$1; BEFORE=$2; AFTER=$3
B=$(dirname "$0")/top-vs-capture.py
D=$(mktemp -d /tmp/top-window.XXXXXX)
trap 'pkill -f "top-vs-capture.py send 127.0.0.1 7711"; pkill -f "top-vs-capture.py recv 7711"; rm -rf "$D"' EXIT
nsenter -t "$P" -n python3 "$B" recv 7711 "$D/truth" > /dev/null 2>&1 &
sleep 0.5
nsenter -t "$P" -n python3 "$B" send 127.0.0.1 7711 2000000 200 > /dev/null 2>&1 &
sleep 3
for round in 1 2; do
  for which in before after; do
    bin=$BEFORE; [ $which = after ] && bin=$AFTER
    nsenter -t "$P" -n "$bin" top --batch --json --by connection --interval 1 --count 16 \
      > "$D/$which.$round.json"
  done
done
python3 - "$D" <<'PY'
import glob, json, statistics, sys
d = sys.argv[1]
for which in ["before", "after"]:
    errs = []
    for f in sorted(glob.glob(f"{d}/{which}.*.json")):
        for line in open(f).read().splitlines()[3:]:
            for r in json.loads(line)["rows"]:
                if (r.get("remote") or {}).get("port") == 7711:
                    errs.append((r["send_bytes_per_sec"] - 2e6) / 2e6 * 100)
    print(f"{which:<6} refreshes {len(errs)}  median {statistics.median(errs):+.2f} %  "
          f"worst {max(errs, key=abs):+.2f} %  stdev {statistics.pstdev(errs):.2f}")
PY
