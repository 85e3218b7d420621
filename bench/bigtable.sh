#!/bin/sh
# Peak memory of sockstat on big tables (issue 7 item 5; doc/reference/BENCHMARKS.md, "Big tables").
# For each scale, a fresh socket table from sockgen in its own network and pid namespace, then
# the peak RSS (/usr/bin/time %M) of: the table, --json, --no-owners (all to /dev/null), and
# the socket count sockstat listed. Run as root from the workspace root after
# `cargo build --release -p sockstat-cli -p sockstat-bench`:
#   sh bench/bigtable.sh 10k 500k 1M
ROOT=$(pwd)
for n in "$@"; do
  unshare --net --pid --fork --mount --mount-proc sh -c '
    ROOT=$1; n=$2
    . "$ROOT/bench/table.sh"
    table "$ROOT" "$n" /tmp/sgbig
    S=$ROOT/target/release/sockstat
    count=$($S --no-owners --json | grep -c "\"proto\"")
    for v in "" "--json" "--no-owners"; do
      /usr/bin/time -f "%M %e" -o t.out $S $v > /dev/null 2> err.out
      echo "scale $n sockets $count variant [${v:-table}] peak_rss_kib $(cut -d" " -f1 t.out) wall_s $(cut -d" " -f2 t.out) warnings $(wc -l < err.out)"
    done
    kill $g; wait
  ' sh "$ROOT" "$n"
done
