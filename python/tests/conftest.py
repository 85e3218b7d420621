"""Shared fixtures: the sockstat command to compare with, sockets and holders made by the tests.

Tests that need root (network namespaces, switching users) check for it and print a loud
``SKIPPED: ...`` line when they cannot run; CI runs them as root. Every socket is on loopback or
in a namespace the test makes, every port is the kernel's choice (bound to port 0), every path
is under a per-test temporary directory, so the tests can run in parallel with others.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]


def skip_loudly(why: str) -> None:
    """Skips the test with a line that stands out in the log."""
    print(f"\nSKIPPED: {why}", file=sys.stderr)
    pytest.skip(why)


def is_root() -> bool:
    return os.geteuid() == 0


@pytest.fixture(scope="session")
def sockstat_bin() -> Path:
    """The command built from this repository: $SOCKSTAT_BIN, else the newer of
    target/release/sockstat and target/debug/sockstat."""
    env = os.environ.get("SOCKSTAT_BIN")
    built = [REPO / "target" / "release" / "sockstat", REPO / "target" / "debug" / "sockstat"]
    built = sorted((c for c in built if c.is_file()), key=lambda c: c.stat().st_mtime, reverse=True)
    candidates = [Path(env)] if env else built
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    skip_loudly(
        "no sockstat binary to compare with: build it (cargo build) or set SOCKSTAT_BIN"
    )
    raise AssertionError("unreachable")


def run_json(binary: Path, *args: str) -> Any:
    """Runs the command with --json and returns the parsed document."""
    out = subprocess.run(
        [str(binary), *args, "--json"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode in (0, 1), f"sockstat {args} exited {out.returncode}: {out.stderr}"
    return json.loads(out.stdout)


def run_error(binary: Path, *args: str) -> str:
    """Runs the command expecting exit status 2 and returns its stderr."""
    out = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, f"sockstat {args} exited {out.returncode}"
    return out.stderr


class Holder:
    """A child process that holds (inherits) some of our sockets until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def stop(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = 0


@pytest.fixture
def fork_holder() -> Iterator[Callable[..., Holder]]:
    """Forks a child holding every socket this process has open; killed at teardown. With
    ``uid``, the child runs as that user (and group), an ordinary process of it (dumpable)."""
    made: List[Holder] = []

    def fork(*keep: socket.socket, uid: Optional[int] = None) -> Holder:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: keep the sockets, say so, wait to be killed
            try:
                os.close(r)
                if uid is not None:
                    import ctypes

                    os.setgroups([])
                    os.setgid(uid)
                    os.setuid(uid)
                    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE, which setuid cleared
                os.write(w, b"x")
                while True:
                    time.sleep(60)
            finally:
                os._exit(0)
        os.close(w)
        assert os.read(r, 1) == b"x"
        os.close(r)
        h = Holder(pid)
        made.append(h)
        return h

    yield fork
    for h in made:
        h.stop()


@pytest.fixture
def closing() -> Iterator[Callable[[socket.socket], socket.socket]]:
    """Registers sockets to close at teardown."""
    socks: List[socket.socket] = []

    def add(s: socket.socket) -> socket.socket:
        socks.append(s)
        return s

    yield add
    for s in socks:
        s.close()


def tcp_pair(
    closing: Callable[[socket.socket], socket.socket], host: str = "127.0.0.1"
) -> tuple[socket.socket, socket.socket, socket.socket]:
    """A listener and one established connection to it: (listener, client, accepted)."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    lst = closing(socket.socket(fam, socket.SOCK_STREAM))
    lst.bind((host, 0))
    lst.listen(8)
    cli = closing(socket.create_connection(lst.getsockname()[:2]))
    acc, _ = lst.accept()
    closing(acc)
    return lst, cli, acc


def time_waits(
    closing: Callable[[socket.socket], socket.socket], n: int = 3
) -> tuple[socket.socket, int]:
    """A loopback listener and `n` connections to it that the client closed first, each leaving
    a TIME-WAIT entry toward the port: (listener, port)."""
    lst = closing(socket.socket())
    lst.bind(("127.0.0.1", 0))
    lst.listen(128)
    port = lst.getsockname()[1]
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        a, _ = lst.accept()
        c.close()
        time.sleep(0.01)
        a.close()
    return lst, port


def full_listen_queue(closing: Callable[[socket.socket], socket.socket]) -> int:
    """A loopback listener with a backlog of 1, full and never accepted, whose four clients
    keep retrying their SYNs: its port."""
    lst = closing(socket.socket())
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    port = lst.getsockname()[1]
    for _ in range(4):
        c = closing(socket.socket())
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
    time.sleep(0.3)
    return port


def has_ipv6() -> bool:
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def command_name() -> str:
    return Path(f"/proc/{os.getpid()}/comm").read_text().rstrip("\n")


@pytest.fixture
def netns() -> Iterator[Callable[[], str]]:
    """Makes named network namespaces (`ip netns`) with loopback up; deleted at teardown."""
    if not is_root():
        skip_loudly("needs root to create network namespaces")
    if shutil.which("ip") is None:
        skip_loudly("needs iproute2 (ip) to create network namespaces")
    names: List[str] = []

    def make() -> str:
        name = f"sockstat-py-{os.getpid()}-{len(names)}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        names.append(name)
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        return name

    yield make
    for n in names:
        subprocess.run(["ip", "netns", "del", n], check=False)


def wait_for(pred: Callable[[], Optional[Any]], timeout: float = 10.0) -> Any:
    """Polls `pred` until it returns something true (bounded in time)."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)
