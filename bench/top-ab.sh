#!/bin/sh
# Two builds of `sockstat top` side by side (doc/reference/BENCHMARKS.md, "Holders between
# walks"): on a shared machine whose speed moves within minutes, runs a minute apart differ more
# than two builds do, so both run at the same moments on one sockgen table, in a network and pid
# namespace of their own; each `top --batch --json --interval 1 --count COUNT` under
# /usr/bin/time, ROUNDS times. Prints each build's share of one core and peak RSS per round. Run
# as root from the workspace root after `cargo build --release -p sockstat-bench`:
#   sh bench/top-ab.sh BEFORE_BINARY AFTER_BINARY 60k [COUNT [ROUNDS]]
set -eu
[ $# -ge 3 ] || { echo "usage: top-ab.sh BEFORE AFTER SCALE [COUNT [ROUNDS]]" >&2; exit 2; }
ROOT=$(pwd)
for b in "$1" "$2"; do
  [ -x "$b" ] || { echo "top-ab: $b is not an executable" >&2; exit 2; }
done
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2")
exec unshare --net --pid --fork --mount --mount-proc sh -c '
  set -u
  ROOT=$1; A=$2; B=$3; n=$4; count=$5; rounds=$6
  . "$ROOT/bench/table.sh"
  table "$ROOT" "$n" /tmp/sgab
  sleep 2
  share() { awk "{printf \"%.2f %% (peak RSS %d MiB)\", (\$1 + \$2) / \$3 * 100, \$4 / 1024}" "$1"; }
  for r in $(seq 1 $rounds); do
    /usr/bin/time -f "%U %S %e %M" -o a.t "$A" top --batch --json --interval 1 --count $count > a.out 2> /dev/null &
    a=$!
    /usr/bin/time -f "%U %S %e %M" -o b.t "$B" top --batch --json --interval 1 --count $count > b.out 2> /dev/null &
    b=$!
    wait $a $b
    echo "scale $n round $r before $(share a.t) after $(share b.t) load $(cut -d" " -f1 /proc/loadavg)"
  done
  kill $g; wait
  cd / && umount /tmp/sgab
 ' sh "$ROOT" "$BEFORE" "$AFTER" "$3" "${4:-30}" "${5:-3}"
