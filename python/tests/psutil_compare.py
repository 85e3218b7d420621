"""Compares sockstat.net_connections() with psutil.net_connections() on one table.

Imported by test_net_connections.py, and run as a script inside a fresh network namespace
(`unshare --net python psutil_compare.py DIR`), where the table holds only the sockets the
script makes: it builds them, forks a holder, compares every kind and prints the problems found
as JSON (an empty list when the two agree).

The agreement asked for: the same sockets (family, type, addresses, status) for every kind;
every (pid, fd) psutil gives for a socket is among sockstat's rows for it; sockstat has a row for
every holder, so a socket held by two processes has two rows where psutil has one.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

KINDS = ("inet", "inet4", "inet6", "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6", "unix", "all")


def key(row: Any) -> Tuple[Any, ...]:
    """A socket's identity in a row. Unix rows leave out raddr: psutil cannot read it (always
    ''), sockstat gives the peer's path."""
    laddr = tuple(row.laddr) if isinstance(row.laddr, tuple) else row.laddr
    if row.family == socket.AF_UNIX:
        return (int(row.family), int(row.type), laddr, row.status)
    raddr = tuple(row.raddr) if isinstance(row.raddr, tuple) else row.raddr
    return (int(row.family), int(row.type), laddr, raddr, row.status)


def compare(
    kind: str, ours: Iterable[Any], theirs: Iterable[Any], mine: Optional[Callable[[Any], bool]] = None
) -> List[str]:
    """Problems with `ours` against psutil's `theirs` (restricted to rows `mine` accepts)."""
    ours = [r for r in ours if mine is None or mine(r)]
    theirs = [r for r in theirs if mine is None or mine(r)]
    problems = []
    for r in ours:
        if type(r).__name__ != "sconn" or r._fields != (
            "fd", "family", "type", "laddr", "raddr", "status", "pid"
        ):
            problems.append(f"{kind}: not an sconn row: {r!r}")
            break
    holders: Dict[Tuple[Any, ...], Set[Tuple[Any, int]]] = collections.defaultdict(set)
    for r in ours:
        holders[key(r)].add((r.pid, r.fd))
    theirs_keys = {key(r) for r in theirs}
    if set(holders) != theirs_keys:
        problems.append(
            f"{kind}: sockets only in sockstat {sorted(map(repr, set(holders) - theirs_keys))}, "
            f"only in psutil {sorted(map(repr, theirs_keys - set(holders)))}"
        )
    for r in theirs:
        if r.pid is not None and (r.pid, r.fd) not in holders.get(key(r), ()):
            problems.append(f"{kind}: psutil's holder {(r.pid, r.fd)} of {key(r)} not in sockstat")
    return problems


class Table:
    """Sockets of every kind psutil reports, in the current network namespace."""

    def __init__(self, tmpdir: str, ipv6: bool) -> None:
        self.socks: List[socket.socket] = []
        self.ports: Set[int] = set()
        self.paths: Set[str] = set()
        self.children: List[int] = []
        # TCP over IPv4: a loopback and a wildcard listener, connections, one in TIME_WAIT.
        for host in ("127.0.0.1", "0.0.0.0"):
            lst = self.keep(socket.socket())
            lst.bind((host, 0))
            lst.listen(16)
            for _ in range(2):
                self.keep(socket.create_connection(("127.0.0.1", lst.getsockname()[1])))
                self.keep(lst.accept()[0])
        c = socket.create_connection(("127.0.0.1", lst.getsockname()[1]))
        a, _ = lst.accept()
        self.ports.add(c.getsockname()[1])
        c.close()  # the client closes first: its end stays in TIME_WAIT
        a.close()
        # UDP: bound, and bound + connected.
        u1 = self.keep(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        u1.bind(("127.0.0.1", 0))
        u2 = self.keep(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        u2.bind(("127.0.0.1", 0))
        u2.connect(u1.getsockname())
        if ipv6:
            l6 = self.keep(socket.socket(socket.AF_INET6))
            l6.bind(("::1", 0))
            l6.listen()
            self.keep(socket.create_connection(("::1", l6.getsockname()[1])))
            self.keep(l6.accept()[0])
            # A dual-stack listener and an IPv4 client: the accepted end is IPv4-mapped.
            dual = self.keep(socket.socket(socket.AF_INET6))
            dual.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            dual.bind(("::", 0))
            dual.listen()
            self.keep(socket.create_connection(("127.0.0.1", dual.getsockname()[1])))
            self.keep(dual.accept()[0])
            u6 = self.keep(socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
            u6.bind(("::1", 0))
        # Unix: a listener on a path and a client, an abstract datagram socket, pairs.
        path = os.path.join(tmpdir, "cmp.sock")
        srv = self.keep(socket.socket(socket.AF_UNIX))
        srv.bind(path)
        srv.listen()
        self.paths.add(path)
        self.keep(socket.socket(socket.AF_UNIX)).connect(path)
        self.keep(srv.accept()[0])
        name = f"sockstat-cmp-{os.getpid()}"
        self.keep(socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)).bind("\0" + name)
        self.paths.add("@" + name)
        for t in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
            for s in socket.socketpair(socket.AF_UNIX, t):
                self.keep(s)

    def keep(self, s: socket.socket) -> socket.socket:
        self.socks.append(s)
        if s.family != socket.AF_UNIX:
            self.ports.add(s.getsockname()[1])
        return s

    def fork_holder(self) -> int:
        """A child holding every socket of the table (as after fork)."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, b"x")
            while True:
                time.sleep(60)
        os.close(w)
        os.read(r, 1)
        os.close(r)
        self.children.append(pid)
        return pid

    def close(self) -> None:
        for pid in self.children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        for s in self.socks:
            s.close()

    def mine(self, row: Any) -> bool:
        """A row of this table: one of its ports at either end, or one of its unix sockets."""
        if row.family == socket.AF_UNIX:
            fds = {s.fileno() for s in self.socks if s.family == socket.AF_UNIX}
            return row.laddr in self.paths or (row.pid == os.getpid() and row.fd in fds) or (
                row.pid in self.children and row.fd in fds
            )
        ports = {getattr(row.laddr, "port", None), getattr(row.raddr, "port", None)}
        return bool(ports & self.ports)


def main(tmpdir: str) -> None:
    import psutil

    import sockstat

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    table = Table(tmpdir, ipv6=True)
    holder = table.fork_holder()
    problems: List[str] = []
    counts = {}
    try:
        for kind in KINDS:
            ours = sockstat.net_connections(kind)
            theirs = psutil.net_connections(kind)
            problems += compare(kind, ours, theirs)
            counts[kind] = (len(ours), len(theirs))
        # Every socket the holder shares with us has its row too.
        ours = sockstat.net_connections("all")
        shared = [r for r in ours if r.pid == holder]
        if len(shared) != len([r for r in ours if r.pid == os.getpid()]):
            problems.append("the forked holder's rows are missing")
    finally:
        table.close()
    print(json.dumps({"problems": problems, "counts": counts, "holder": holder}))


if __name__ == "__main__":
    main(sys.argv[1])
