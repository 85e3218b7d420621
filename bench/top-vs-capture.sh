#!/bin/sh
# `sockstat top` beside two packet-capture tools, nethogs and bandwhich, on the same paced TCP
# flows (issue 30; doc/reference/BENCHMARKS.md, "The live view"): each tool's own CPU and its
# per-flow rates against the bytes the receivers actually read.
#
# Two network namespaces made for the run (tvc<pid>-a, tvc<pid>-b) joined by a veth pair
# (192.0.2.1/24 in -a, 192.0.2.2/24 in -b), so that every flow has one end in -a, where the
# tools run, as a host talking to another host: f1 and f2 are sent from -a (3,000,000 and
# 1,000,000 bytes/s), f3 is received in -a (2,000,000 bytes/s). With "lo" as second argument
# everything runs in -a over 127.0.0.1 instead: both ends of each flow are then local, which is
# where the packet tools cannot tell the sender's bytes from the receiver's.
#
# The senders pace by bytes per elapsed time, in writes of 5 ms of their rate; the truth is each
# receiver's log, every 20 ms with the wall time, of the bytes its kernel took (read, plus
# waiting to be read: FIONREAD). Senders and receivers run SCHED_FIFO (chrt -f 10; they sleep
# most of the time), so that a busy machine neither stalls a flow nor leaves a hole in its log
# (a sender held up for 90 ms and then catching up put a burst beside an interval's end, which
# the log, interpolated, could not place). The tools then run one after the other over the same
# flows, SECONDS refreshes of 1 s each, under /usr/bin/time (user + system CPU over wall):
#   sockstat top --batch --json --interval 1 --by connection --count SECONDS
#   nethogs -t -d 1 -c SECONDS DEV               (trace mode, -a on lo; KB/s, KB = 1024 bytes)
#   bandwhich -r -n -c -i DEV                    (raw mode, connections; bytes/s; SIGINT after SECONDS)
# Each output line is stamped with the wall time it was read at; sockstat's JSON carries the
# time of its dump and the interval measured. A tool's rate is compared with the receiver's over
# the tool's own window (sockstat: interval_s; nethogs and bandwhich: the last 5 s, over which
# both average), from its 6th refresh on. Run as root from the workspace root after
# `cargo build --release -p sockstat-cli`:
#   sh bench/top-vs-capture.sh [SECONDS [veth|lo [own|host]]]   # default 25 veth own; ~80 s at 25
# The tools find each socket's process by reading every process's descriptors, so their CPU
# grows with what else runs: by default the run is in a pid namespace of its own, where the
# flows' six processes are all there is ("host": beside every process of the host).
# NETHOGS and BANDWHICH name the binaries if they are not on PATH; SOCKSTAT the sockstat binary.
# The packet tools' cost grows with packets, sockstat's does not: SCALE=N multiplies the three
# rates by N, and SEGMENTS=mtu makes every packet one MTU-sized segment (gso_max_segs 1 on the
# veth pair: without it the sender's stack hands the veth 64 KB packets, and a capture sees one
# packet where a real NIC would send 45), so that a run carries a busy host's packet rate:
#   SCALE=10 SEGMENTS=mtu sh bench/top-vs-capture.sh 25 veth   # 60 MB/s in ~45,000 packets/s
set -eu
ROOT=$(pwd)
D=${1:-25}
LINK=${2:-veth}
PROCS=${3:-own}
case $PROCS in own|host) ;; *) echo "top-vs-capture: processes must be own or host, not '$PROCS'" >&2; exit 2 ;; esac
if [ "$PROCS" = own ] && [ -z "${TVC_INNER:-}" ]; then
  TVC_INNER=1 exec unshare --pid --fork --mount --mount-proc sh "$0" "$@"
fi
S=${SOCKSTAT:-$ROOT/target/release/sockstat}
NH=${NETHOGS:-nethogs}
BW=${BANDWHICH:-bandwhich}
PY="$(python3 -c "import sys; print(sys.executable)") $ROOT/bench/top-vs-capture.py"
case $LINK in veth|lo) ;; *) echo "top-vs-capture: link must be veth or lo, not '$LINK'" >&2; exit 2 ;; esac
SCALE=${SCALE:-1}
SEGMENTS=${SEGMENTS:-gso}
case $SCALE in ''|*[!0-9]*|0) echo "top-vs-capture: SCALE must be a whole number from 1, not '$SCALE'" >&2; exit 2 ;; esac
case $SEGMENTS in gso|mtu) ;; *) echo "top-vs-capture: SEGMENTS must be gso or mtu, not '$SEGMENTS'" >&2; exit 2 ;; esac
[ "$SEGMENTS" = mtu ] && [ "$LINK" = lo ] && { echo "top-vs-capture: SEGMENTS=mtu is for veth" >&2; exit 2; }
for b in "$S" "$NH" "$BW" python3 /usr/bin/time stdbuf timeout chrt; do
  command -v "$b" >/dev/null || { echo "top-vs-capture: $b not found" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "top-vs-capture: run as root (namespaces, packet capture)" >&2; exit 2; }

run=tvc$$
A=$run-a
B=$run-b
dir=$(mktemp -d "/tmp/$run.XXXXXX")
pids=""
cleanup() {
  for f in "$dir"/send.*.pid "$dir"/recv.*.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ip netns add "$A"
ip netns exec "$A" ip link set lo up
if [ "$LINK" = veth ]; then
  ip netns add "$B"
  ip netns exec "$B" ip link set lo up
  ip link add "$run-va" netns "$A" type veth peer name "$run-vb" netns "$B"
  ip netns exec "$A" ip addr add 192.0.2.1/24 dev "$run-va"
  ip netns exec "$B" ip addr add 192.0.2.2/24 dev "$run-vb"
  if [ "$SEGMENTS" = mtu ]; then
    ip netns exec "$A" ip link set "$run-va" gso_max_segs 1
    ip netns exec "$B" ip link set "$run-vb" gso_max_segs 1
  fi
  ip netns exec "$A" ip link set "$run-va" up
  ip netns exec "$B" ip link set "$run-vb" up
  DEV=$run-va; AADDR=192.0.2.1; BADDR=192.0.2.2; NB=$B
else
  DEV=lo; AADDR=127.0.0.1; BADDR=127.0.0.1; NB=$A
fi

# flow name, port, bytes/s, the namespace of its receiver and of its sender, the address the
# sender connects to, and the side the tools in $A see (send: its sender is in $A).
flows="f1 5001 $((3000000 * SCALE)) $NB $A $BADDR send
f2 5002 $((1000000 * SCALE)) $NB $A $BADDR send
f3 5003 $((2000000 * SCALE)) $A $NB $AADDR recv"
total=$((3 * (D + 5) + 8))
echo "$flows" | while read -r name port rate rns sns addr side; do
  PIDFILE=$dir/recv.$name.pid ip netns exec "$rns" chrt -f 10 $PY recv "$port" "$dir/truth.$name" 2> "$dir/recv.$name.err" &
done
for name in f1 f2 f3; do
  for i in $(seq 1 100); do [ -f "$dir/truth.$name.ready" ] && break; sleep 0.1; done
  [ -f "$dir/truth.$name.ready" ] || { echo "top-vs-capture: receiver $name did not start" >&2; exit 1; }
done
echo "$flows" | while read -r name port rate rns sns addr side; do
  PIDFILE=$dir/send.$name.pid ip netns exec "$sns" chrt -f 10 $PY send "$addr" "$port" "$rate" "$total" 2> "$dir/send.$name.err" &
done
for name in f1 f2 f3; do
  for i in $(seq 1 100); do [ -f "$dir/send.$name.pid" ] && break; sleep 0.1; done
done
# The side seen from $A: its sender's pid (send) or its receiver's (recv), for nethogs' rows.
echo "$flows" | while read -r name port rate rns sns addr side; do
  if [ "$side" = send ]; then p=$(cat "$dir/send.$name.pid"); else p=$(cat "$dir/recv.$name.pid"); fi
  echo "\"$name\": {\"port\": $port, \"rate\": $rate, \"side\": \"$side\", \"pid\": $p}"
done | paste -sd, | sed 's/^/{/;s/$/}/' > "$dir/flows.json"

echo "top-vs-capture: $LINK, flows $(cat "$dir/flows.json")"
echo "load before: $(uptime)"
echo "processes the tools see: $(ls /proc | grep -c '^[0-9]'), their descriptors: $(ls /proc/[0-9]*/fd 2>/dev/null | grep -c '^[0-9]')"
sleep 3

packets() { ip netns exec "$A" cat "/sys/class/net/$DEV/statistics/tx_packets" "/sys/class/net/$DEV/statistics/rx_packets" | paste -sd' '; }
measure() { # tool, command...
  tool=$1; shift
  p0=$(packets); t0=$(date +%s.%N)
  ip netns exec "$A" /usr/bin/time -f "%U %S %e" -o "$dir/$tool.time" "$@" 2> "$dir/$tool.err" \
    | $PY stamp > "$dir/$tool.out" || true
  p1=$(packets); t1=$(date +%s.%N)
  echo "$p0 $p1 $t0 $t1" | awk -v t="$tool" -v dev="$DEV" \
    '{ printf "%s: %s carried %.0f packets/s out, %.0f in while it ran\n", t, dev, ($3-$1)/($6-$5), ($4-$2)/($6-$5) }'
}
measure sockstat "$S" top --batch --json --interval 1 --by connection --count "$D"
# nethogs leaves out loopback devices unless -a.
all=""; [ "$LINK" = lo ] && all=-a
measure nethogs stdbuf -oL "$NH" -t $all -d 1 -c "$D" "$DEV"
measure bandwhich timeout -s INT "$D" "$BW" -r -n -c -i "$DEV"
echo "load after: $(uptime)"
for t in sockstat nethogs bandwhich; do
  [ -s "$dir/$t.err" ] && { echo "$t stderr (last 3 lines):"; tail -3 "$dir/$t.err"; }
done
echo
$PY analyse "$dir"
