#!/usr/bin/env python3
"""Helpers of bench/top-vs-capture.sh (doc/reference/BENCHMARKS.md, "The live view"): paced
TCP flows, their ground truth, a line stamper for the tools' output, and the comparison.

  top-vs-capture.py recv PORT LOG          accept one connection on PORT, read it to the end;
                                           every 20 ms log "wall_time bytes", the bytes the
                                           kernel took so far (read + waiting to be read)
  top-vs-capture.py send HOST PORT RATE S  connect, write RATE bytes/s for S seconds, paced by
                                           bytes per elapsed time (it catches up after a late wake)
  top-vs-capture.py stamp                  copy stdin to stdout, each line prefixed by the wall
                                           time it was read at
  top-vs-capture.py analyse DIR            compare every tool's rates with the receivers' logs

recv and send write their pid to the file named by $PIDFILE, so that the shell kills exactly
what it started and nethogs' per-process rows can be told apart.
"""

import bisect
import fcntl
import json
import os
import select
import socket
import statistics
import struct
import sys
import termios
import time


def write_pid():
    path = os.environ.get("PIDFILE")
    if path:
        with open(path, "w") as f:
            f.write(f"{os.getpid()}\n")


def recv(port, log):
    write_pid()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", int(port)))
    ls.listen(1)
    with open(log + ".ready", "w"):
        pass
    s, _ = ls.accept()
    ls.close()
    total, last = 0, 0.0
    with open(log, "w", buffering=1) as out:
        out.write(f"{time.time():.6f} 0\n")
        while True:
            r, _, _ = select.select([s], [], [], 0.02)
            if r:
                b = s.recv(1 << 20)
                if not b:
                    break
                total += len(b)
            now = time.time()
            if now - last >= 0.02:
                # What the kernel took: read, plus what waits to be read (FIONREAD), so that a
                # read this process makes late on a busy machine does not move bytes between
                # intervals.
                queued = struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0" * 4))[0]
                out.write(f"{now:.6f} {total + queued}\n")
                last = now
        out.write(f"{time.time():.6f} {total}\n")


def send(host, port, rate, seconds):
    write_pid()
    rate, seconds = float(rate), float(seconds)
    for _ in range(100):
        try:
            s = socket.create_connection((host, int(port)))
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit(f"send: cannot connect to {host}:{port}")
    chunk = b"x" * 65536
    # Writes of at least 5 ms of the rate, as a bulk sender makes: a write of whatever is due the
    # moment it is due makes segments of a hundred bytes, whose headers a packet tool counts.
    quantum = min(len(chunk), max(1448, int(rate * 0.005)))
    start = time.monotonic()
    sent = 0
    while True:
        el = time.monotonic() - start
        if el >= seconds:
            break
        due = int(rate * el) - sent
        if due < quantum:
            time.sleep((quantum - due) / rate)
            continue
        sent += s.send(chunk[: min(due, len(chunk))])
    s.close()


def stamp():
    for line in sys.stdin:
        sys.stdout.write(f"{time.time():.6f} {line}")
        sys.stdout.flush()


class Truth:
    """A receiver's log: cumulative bytes read against wall time, interpolated."""

    def __init__(self, path):
        self.t, self.b = [], []
        with open(path) as f:
            for line in f:
                t, b = line.split()
                self.t.append(float(t))
                self.b.append(int(b))

    def at(self, t):
        i = bisect.bisect_left(self.t, t)
        if i == 0:
            return self.b[0]
        if i >= len(self.t):
            return self.b[-1]
        t0, t1, b0, b1 = self.t[i - 1], self.t[i], self.b[i - 1], self.b[i]
        return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b1

    def rate(self, t0, t1):
        return (self.at(t1) - self.at(t0)) / (t1 - t0)

    def covers(self, t0, t1):
        return self.t and self.t[0] <= t0 and t1 <= self.t[-1]

    def gap(self, t):
        """The time between the log's lines on either side of t: what interpolation spans."""
        i = bisect.bisect_left(self.t, t)
        return self.t[i] - self.t[i - 1] if 0 < i < len(self.t) else float("inf")


def parse_sockstat(path, flows):
    """(end time, window s, flow, bytes/s) from `sockstat top --batch --json --by connection`."""
    from datetime import datetime

    out = []
    with open(path) as f:
        for line in f:
            _, js = line.split(" ", 1)
            d = json.loads(js)
            end = datetime.fromisoformat(d["time"].replace("Z", "+00:00")).timestamp()
            for row in d["rows"]:
                lp = (row.get("local") or {}).get("port")
                rp = (row.get("remote") or {}).get("port")
                for name, fl in flows.items():
                    if fl["side"] == "send" and rp == fl["port"]:
                        out.append((end, d["interval_s"], name, row["send_bytes_per_sec"]))
                    if fl["side"] == "recv" and lp == fl["port"]:
                        out.append((end, d["interval_s"], name, row["recv_bytes_per_sec"]))
    return out


def parse_nethogs(path, flows):
    """nethogs -t: "program/pid/uid<TAB>sent<TAB>received" in KB/s, KB = 1024 bytes, each the
    bytes of the packets of the last 5 whole seconds of the clock (the current one partly
    elapsed) over 5 (nethogs.h PERIOD, process.cpp tokbps)."""
    out = []
    by_pid = {fl["pid"]: name for name, fl in flows.items()}
    with open(path) as f:
        for line in f:
            ts, rest = line.split(" ", 1)
            cols = rest.rstrip("\n").split("\t")
            if len(cols) != 3:
                continue
            try:
                pid = int(cols[0].rsplit("/", 2)[1])
                sent, recvd = float(cols[1]), float(cols[2])
            except (ValueError, IndexError):
                continue
            name = by_pid.get(pid)
            if name:
                v = sent if flows[name]["side"] == "send" else recvd
                out.append((float(ts), 5.0, name, v * 1024))
    return out


def parse_bandwhich(path, flows):
    """bandwhich -r -c: "connection: <ts> <iface>:LPORT => RHOST:RPORT (tcp) up/down Bps: U/D
    process: ..." in bytes/s, each the bytes of the last (up to) 5 ticks of ~1 s over the number
    of ticks (ui_state.rs RECALL_LENGTH)."""
    out = []
    with open(path) as f:
        for line in f:
            ts, rest = line.split(" ", 1)
            if not rest.startswith("connection:"):
                continue
            try:
                conn = rest.split("> ", 1)[1]
                lhs, rhs = conn.split(" => ", 1)
                lp = int(lhs.rsplit(":", 1)[1])
                rp = int(rhs.split(" ", 1)[0].rsplit(":", 1)[1])
                up, down = rest.split("Bps: ", 1)[1].split(" ", 1)[0].split("/")
            except (ValueError, IndexError):
                continue
            for name, fl in flows.items():
                if fl["side"] == "send" and rp == fl["port"]:
                    out.append((float(ts), 5.0, name, float(up)))
                if fl["side"] == "recv" and lp == fl["port"]:
                    out.append((float(ts), 5.0, name, float(down)))
    return out


def analyse(d):
    with open(os.path.join(d, "flows.json")) as f:
        flows = json.load(f)
    truths = {name: Truth(os.path.join(d, f"truth.{name}")) for name in flows}
    parsers = {"sockstat": parse_sockstat, "nethogs": parse_nethogs, "bandwhich": parse_bandwhich}
    units = {
        "sockstat": "B/s (JSON)",
        "nethogs": "KB/s, KB=1024",
        "bandwhich": "B/s (raw)",
    }
    print(
        f"{'tool':<10} {'units':<14} {'cpu user+sys s':>14} {'wall s':>7} {'core %':>7}  "
        f"{'flow':<22} {'true B/s':>10} {'n':>3} {'median err':>10} {'worst err':>10} {'left out':>8}"
    )
    for tool, parse in parsers.items():
        path = os.path.join(d, f"{tool}.out")
        if not os.path.exists(path):
            continue
        try:
            with open(os.path.join(d, f"{tool}.time")) as f:
                u, s, e = (float(x) for x in f.read().split()[-3:])
        except (OSError, ValueError):
            u = s = e = float("nan")
        share = (u + s) / e * 100 if e > 0 else float("nan")
        samples = parse(path, flows)
        # The capture tools average over 5 s: their first 5 refreshes hold less than 5 s of
        # traffic. Compare every tool from its 6th refresh on.
        first = {}
        for end, _, name, _ in samples:
            first.setdefault(name, []).append(end)
        for name, fl in flows.items():
            ends = sorted(set(first.get(name, [])))
            skip = set(ends[:5])
            errs, trues, holes = [], [], 0
            for end, win, n, v in samples:
                if n != name or end in skip or v is None:
                    continue
                t = truths[name]
                if not t.covers(end - win, end):
                    continue
                # An end the log cannot place (its process held up for over 100 ms): left out,
                # and counted.
                if max(t.gap(end - win), t.gap(end)) > 0.1:
                    holes += 1
                    continue
                true = t.rate(end - win, end)
                trues.append(true)
                errs.append((v - true) / true * 100 if true else float("nan"))
            label = f"{name} {fl['side']} {fl['rate']:.0f}"
            if errs:
                worst = max(errs, key=abs)
                print(
                    f"{tool:<10} {units[tool]:<14} {u:>6.2f}+{s:<6.2f}  {e:>7.1f} "
                    f"{share:>6.1f}%  {label:<22} {statistics.median(trues):>10.0f} "
                    f"{len(errs):>3} {statistics.median(errs):>+9.1f}% {worst:>+9.1f}% {holes:>8}"
                )
            else:
                print(
                    f"{tool:<10} {units[tool]:<14} {u:>6.2f}+{s:<6.2f}  {e:>7.1f} "
                    f"{share:>6.1f}%  {label:<22} {'-':>10} {0:>3} "
                    f"{'no row':>10} {'':>10}"
                )


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"recv": recv, "send": send, "stamp": stamp, "analyse": analyse}[cmd](*args)


if __name__ == "__main__":
    main()
