"""ports(), counters() and diagnose() are the command's use cases: given the same sockets (or
the same counter files), Python and `sockstat ... --json` make the same documents."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from typing import Any, Iterator

import pytest

import sockstat
from conftest import is_root, run_json, skip_loudly, time_waits


def plain(x: Any) -> Any:
    return json.loads(json.dumps(x))


def without(doc: Any, *keys: str) -> Any:
    return {k: v for k, v in plain(doc).items() if k not in keys}


@pytest.fixture
def counter_files(tmp_path) -> str:
    """This host's counter files, frozen: both sides read the very same numbers."""
    net = tmp_path / "net"
    net.mkdir()
    for name in ("snmp", "netstat", "snmp6"):
        src = f"/proc/net/{name}"
        if os.path.exists(src):
            shutil.copyfile(src, net / name)
    return str(tmp_path)


def test_counters_documents_are_the_commands(sockstat_bin, counter_files):
    cli = run_json(sockstat_bin, "counters", "--all", "--proc-root", counter_files)
    doc = sockstat.counters(all=True, _proc_root=counter_files)
    assert plain(doc) == cli
    cli = run_json(sockstat_bin, "counters", "--proc-root", counter_files)
    assert plain(sockstat.counters(_proc_root=counter_files)) == cli
    # Over an interval the frozen files give every delta 0: only the time taken differs.
    cli = run_json(sockstat_bin, "counters", "0.2", "--all", "--proc-root", counter_files)
    doc = sockstat.counters(0.2, all=True, _proc_root=counter_files)
    assert without(doc, "interval_s") == without(cli, "interval_s")
    assert doc.interval_s >= 0.2 and cli["interval_s"] >= 0.2


@contextlib.contextmanager
def connecting(lst: socket.socket) -> Iterator[None]:
    """Clients of `lst` that connect and close every 20 ms while the block runs (bounded: at
    most 1000 connections, 60 s), each leaving a TIME-WAIT entry."""
    port = lst.getsockname()[1]
    lst.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                a, _ = lst.accept()
            except OSError:
                continue
            a.close()

    def connect() -> None:
        deadline = time.monotonic() + 60
        for _ in range(1000):
            if stop.is_set() or time.monotonic() > deadline:
                return
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    pass
            except OSError:
                pass
            time.sleep(0.02)

    threads = [threading.Thread(target=f, daemon=True) for f in (accept, connect)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)


def destination(doc: Any, port: int) -> dict:
    found = [d for d in plain(doc)["destinations"] if d["remote_port"] == port]
    assert len(found) == 1, plain(doc)["destinations"]
    return found[0]


def test_ports_documents_are_the_commands(sockstat_bin, closing):
    lst, port = time_waits(closing)
    cli = run_json(sockstat_bin, "ports", "-p", str(port), "--dst", "127.0.0.1")
    doc = sockstat.ports(ports=port, dst="127.0.0.1")
    assert list(doc) == list(cli)
    # All but the seconds each TIME-WAIT entry has left, which run down between the two.
    left = "time_wait_left"
    strip = lambda ds: [{k: v for k, v in d.items() if k != left} for d in ds]  # noqa: E731
    assert strip(plain(doc)["destinations"]) == strip(cli["destinations"])
    assert without(doc, "destinations", "time_wait") == without(cli, "destinations", "time_wait")
    if not is_root():
        skip_loudly("needs root (CAP_BPF, CAP_PERFMON) to trace who opens the connections")
    # Over an interval both name the processes that opened connections meanwhile: this one.
    with connecting(lst):
        cli = run_json(sockstat_bin, "ports", "-p", str(port), "--dst", "127.0.0.1",
                       "--interval", "0.5")
        doc = sockstat.ports(ports=port, dst="127.0.0.1", interval=0.5)
    assert list(doc) == list(cli)
    mine, theirs = destination(doc, port), destination(cli, port)
    assert sorted(mine) == sorted(theirs)
    openers = lambda d: sorted((o["pid"], o["command"]) for o in d["opened_by"])  # noqa: E731
    assert openers(mine) == openers(theirs)
    assert os.getpid() in {pid for pid, _ in openers(mine)}, mine


def test_diagnose_documents_are_the_commands(sockstat_bin, closing):
    """A server that never closes the connections its clients closed: ten in CLOSE_WAIT, a
    state no timer ends, so both see the same sockets over their intervals. The same
    findings, about the same sockets, and the same warnings from both (connect latencies
    traced alike where allowed)."""
    lst = closing(socket.socket())
    lst.bind(("127.0.0.1", 0))
    lst.listen(16)
    port = lst.getsockname()[1]
    for _ in range(10):
        c = socket.create_connection(("127.0.0.1", port))
        closing(lst.accept()[0])
        c.close()
    time.sleep(0.1)
    out = subprocess.run(
        [str(sockstat_bin), "diagnose", "--json", "-p", str(port), "--interval", "0.3"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode in (0, 1), out.stderr
    cli = json.loads(out.stdout)
    doc = sockstat.diagnose(0.3, ports=port)
    assert list(doc) == list(cli)
    assert doc.connections == cli["connections"]
    key = lambda f: json.dumps(  # noqa: E731
        {k: f[k] for k in ("rule", "severity", "socket", "summary", "advice")}, sort_keys=True)
    assert sorted(map(key, plain(doc.findings))) == sorted(map(key, cli["findings"]))
    assert [w["code"] for w in doc.warnings] == [w["code"] for w in cli["warnings"]]
    assert "close-wait" in {f["rule"] for f in cli["findings"]}, cli["findings"]
