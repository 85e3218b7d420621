# Sourced by the benchmark scripts inside the network and pid namespace they made (unshare
# --net --pid --mount): brings up lo, mounts a tmpfs work directory DIR and cd's into it, and
# starts a sockgen table of N sockets (one worker process per 1,000, plus 10) in the background,
# returning once it is READY; its pid in $g. Usage: . "$ROOT/bench/table.sh"; table ROOT N DIR
table() {
  ip link set lo up
  mkdir -p "$3" && mount -t tmpfs tmpfs "$3" && cd "$3"
  procs=$(( $(echo "$2" | sed "s/k$/000/;s/M$/000000/") / 1000 + 10 ))
  "$1/target/release/sockgen" -n "$2" -p "$procs" --tw-period 0 --max-seconds 1800 > gen.out 2>&1 &
  g=$!
  for i in $(seq 1 3000); do grep -q READY gen.out && break; sleep 0.2; done
  grep -q READY gen.out || { echo "sockgen failed at $2:" >&2; tail -5 gen.out >&2; kill $g; exit 1; }
}
