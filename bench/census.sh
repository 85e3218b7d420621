#!/bin/bash
# Two sockstat binaries side by side on the same table: each query run N times, the two
# binaries interleaved, the median wall time of each printed (ms, output to /dev/null).
# Used for doc/reference/BENCHMARKS.md, "The census of the tables a filter leaves out".
# usage: bench/census.sh COORD_PID BEFORE AFTER [RUNS]
#   COORD_PID: sockgen's coordinator, run with --netns (the queries run in its namespace):
#     target/release/sockgen -n 60000 -p 20 --netns --max-seconds 1500 &
set -u
P=$1; OLD=$2; NEW=$3; N=${4:-11}
t() { local s=$(date +%s%N); nsenter -t $P -n "$@" >/dev/null 2>&1; local e=$(date +%s%N); echo $(( (e-s)/100000 )); }
for a in "" "-P udp" "-P tcp" "-4" "-6" "-u" "-l" "--pid $P -P udp"; do
  o=(); n=()
  for i in $(seq $N); do o+=($(t $OLD $a)); n+=($(t $NEW $a)); done
  mo=$(printf "%s\n" "${o[@]}" | sort -n | sed -n "$(( (N+1)/2 ))p")
  mn=$(printf "%s\n" "${n[@]}" | sort -n | sed -n "$(( (N+1)/2 ))p")
  printf "%-22s before %6.1f ms   after %6.1f ms\n" "sockstat $a" $(echo "$mo/10" | bc -l) $(echo "$mn/10" | bc -l)
done
