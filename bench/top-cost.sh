#!/bin/sh
# CPU of the live view itself (`sockstat top`, issue 30; doc/reference/BENCHMARKS.md, "The live view"):
# for each scale, a fresh socket table from sockgen in its own network and pid namespace, then
# `sockstat top --batch --json --interval 1 --count N` (every refresh dumps, joins, judges and
# writes one JSON object) under /usr/bin/time: user+system CPU seconds over the wall seconds,
# i.e. the share of one core the view takes at 1 s refresh. Run as root from the workspace root
# after `cargo build --release -p sockstat-cli -p sockstat-bench`:
#   sh bench/top-cost.sh 30 1k 10k        # 30 refreshes at each scale
ROOT=$(pwd)
count=$1; shift
for n in "$@"; do
  unshare --net --pid --fork --mount --mount-proc sh -c '
    ROOT=$1; n=$2; count=$3
    . "$ROOT/bench/table.sh"
    table "$ROOT" "$n" /tmp/sgtop
    S=$ROOT/target/release/sockstat
    sockets=$($S --no-owners --json -4 -6 | grep -o "\"proto\"" | wc -l)
    /usr/bin/time -f "%U %S %e %M" -o t.out $S top --batch --json --interval 1 --count $count > top.out 2> err.out
    read u s e m < t.out
    conns=$(tail -1 top.out | grep -o "\"totals\":{[^}]*}")
    echo "scale $n inet_sockets $sockets refreshes $(wc -l < top.out) user_s $u sys_s $s wall_s $e" \
         "cpu_share_of_one_core $(echo "scale=4; ($u + $s) / $e" | bc) peak_rss_kib $m last_totals $conns" \
         "stderr_lines $(wc -l < err.out)"
    kill $g; wait
    cd / && umount /tmp/sgtop && rmdir /tmp/sgtop
  ' sh "$ROOT" "$n" "$count"
done
