#!/bin/sh
# Two builds of `sockstat top` side by side (doc/reference/BENCHMARKS.md, "Holders between
# walks"): on a shared machine whose speed moves within minutes, runs a minute apart differ more
# than two builds do, so both run at the same moments on one sockgen table, in a network and pid
# namespace of their own; each `top --batch --json --interval 1 --count COUNT` under
# /usr/bin/time, ROUNDS times. Prints each build's share of one core per round. Run as root from
# the workspace root after `cargo build --release -p sockstat-bench`:
#   sh bench/top-ab.sh BEFORE_BINARY AFTER_BINARY 60k [COUNT [ROUNDS]]
set -eu
[ $# -ge 3 ] || { echo "usage: top-ab.sh BEFORE AFTER SCALE [COUNT [ROUNDS]]" >&2; exit 2; }
ROOT=$(pwd)
exec unshare --net --pid --fork --mount --mount-proc sh -c '
  set -eu
  ROOT=$1; A=$2; B=$3; n=$4; count=$5; rounds=$6
  ip link set lo up
  mkdir -p /tmp/sgab && mount -t tmpfs tmpfs /tmp/sgab && cd /tmp/sgab
  procs=$(( $(echo $n | sed "s/k$/000/;s/M$/000000/") / 1000 + 10 ))
  $ROOT/target/release/sockgen -n $n -p $procs --tw-period 0 --max-seconds 1800 > gen.out 2>&1 &
  g=$!
  for i in $(seq 1 3000); do grep -q READY gen.out && break; sleep 0.2; done
  grep -q READY gen.out || { echo "sockgen failed at $n" >&2; kill $g; exit 1; }
  sleep 2
  share() { awk "{printf \"%.2f %%\", (\$1 + \$2) / \$3 * 100}" "$1"; }
  for r in $(seq 1 $rounds); do
    /usr/bin/time -f "%U %S %e" -o a.t "$A" top --batch --json --interval 1 --count $count > a.out 2> /dev/null &
    a=$!
    /usr/bin/time -f "%U %S %e" -o b.t "$B" top --batch --json --interval 1 --count $count > b.out 2> /dev/null &
    b=$!
    wait $a $b
    echo "scale $n round $r before $(share a.t) after $(share b.t) load $(cut -d" " -f1 /proc/loadavg)"
  done
  kill $g; wait
  cd / && umount /tmp/sgab
' sh "$ROOT" "$1" "$2" "$3" "${4:-30}" "${5:-3}"
