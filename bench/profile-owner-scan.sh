#!/bin/sh
# Syscall profile of the two owner scans at 100k sockets (doc/reference/BENCHMARKS.md, "Profile").
# Run as root from the workspace root after `cargo build --release -p sockstat-cli -p sockstat-bench`:
#   unshare --net --pid --fork --mount --mount-proc sh bench/profile-owner-scan.sh
ROOT=$(pwd)
ip link set lo up
mkdir -p /tmp/sgwd && mount -t tmpfs tmpfs /tmp/sgwd && cd /tmp/sgwd
$ROOT/target/release/sockgen -n 100k -p 300 --truth truth.json > gen.out 2>&1 &
g=$!
for i in $(seq 1 600); do grep -q READY gen.out && break; sleep 0.1; done
S=$ROOT/target/release/sockstat
$S >/dev/null 2>&1
for m in proc bpf; do
  echo "== $m"
  strace -c -f -o strace-$m.txt $S --owner-scan $m > /dev/null 2>&1
  head -12 strace-$m.txt
  /usr/bin/time -f "wall %e s user %U s sys %S s" $S --owner-scan $m > /dev/null
done
kill $g; wait
