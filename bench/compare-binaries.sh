#!/bin/sh
# Two sockstat binaries timed against each other on one sockgen table: each runs 5 times with
# the table and 5 with --json, alternated, wall time and peak RSS from /usr/bin/time; then a perf
# profile of the new one. How the big-table changes were costed (doc/reference/BENCHMARKS.md, "Big
# tables"). As root, from the workspace root, after building the old binary elsewhere, e.g.
#   git worktree add /tmp/old 324a9fe && (cd /tmp/old && cargo build --release -p sockstat-cli --target-dir /tmp/oldtarget)
#   OLD=/tmp/oldtarget/release/sockstat unshare --net --pid --fork --mount --mount-proc sh bench/compare-binaries.sh 500k 510
ROOT=$(pwd)
NEW=${NEW:-$ROOT/target/release/sockstat}
: "${OLD:?set OLD to the other sockstat binary}"
ip link set lo up
mkdir -p /tmp/sgc && mount -t tmpfs tmpfs /tmp/sgc && cd /tmp/sgc
$ROOT/target/release/sockgen -n "$1" -p "$2" --tw-period 0 --max-seconds 1200 > gen.out 2>&1 &
g=$!
for i in $(seq 1 3000); do grep -q READY gen.out && break; sleep 0.2; done
grep READY gen.out
$NEW > /dev/null 2>&1; $OLD > /dev/null 2>&1
for i in 1 2 3 4 5; do
  for b in OLD NEW; do
    eval B=\$$b
    /usr/bin/time -f "$b %e %M" -a -o times.txt $B > /dev/null 2>/dev/null
    /usr/bin/time -f "$b-json %e %M" -a -o times.txt $B --json > /dev/null 2>/dev/null
  done
done
sort times.txt | awk '{a[$1]=a[$1]" "$2; m[$1]=$3} END {for (k in a) print k, "wall_s" a[k], "peak_rss_kib", m[k]}'
if command -v perf >/dev/null; then
  perf record -q -g -o perf.data $NEW > /dev/null 2>&1
  perf report -i perf.data --no-children --percent-limit 3 --stdio 2>/dev/null | grep -E "^ +[0-9]"
fi
kill $g; wait
