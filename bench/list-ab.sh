#!/bin/sh
# Two builds' listings side by side (doc/reference/BENCHMARKS.md, "The view's allocator"): on
# one sockgen table in a network and pid namespace of its own, RUNS rounds of the table,
# `--json` and `-p 2000 -4 -6`, each build in turn under /usr/bin/time, output to /dev/null.
# Prints per run the variant, the build (A before, B after), wall and CPU seconds and peak RSS
# in KiB. Run as root from the workspace root after `cargo build --release -p sockstat-bench`:
#   sh bench/list-ab.sh BEFORE_BINARY AFTER_BINARY 100k [RUNS]
set -eu
[ $# -ge 3 ] || { echo "usage: list-ab.sh BEFORE AFTER SCALE [RUNS]" >&2; exit 2; }
ROOT=$(pwd)
for b in "$1" "$2"; do
  [ -x "$b" ] || { echo "list-ab: $b is not an executable" >&2; exit 2; }
done
exec unshare --net --pid --fork --mount --mount-proc sh -c '
  set -u
  ROOT=$1; A=$2; B=$3; n=$4; runs=$5
  . "$ROOT/bench/table.sh"
  table "$ROOT" "$n" /tmp/sglist
  sleep 2
  for r in $(seq 1 $runs); do
    for v in "" "--json" "-p 2000 -4 -6"; do
      for x in A B; do
        eval S=\$$x
        /usr/bin/time -f "%e %U %S %M" -o t.out $S $v > /dev/null 2> /dev/null
        read e u s m < t.out
        echo "[${v:-table}] $x wall $e cpu $(echo "$u + $s" | bc) rss $m"
      done
    done
  done
  kill $g; wait
  cd / && umount /tmp/sglist
' sh "$ROOT" "$(realpath "$1")" "$(realpath "$2")" "$3" "${4:-7}"
