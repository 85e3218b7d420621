"""sockstat.net_connections(): psutil's rows, every holder kept, checked against psutil itself."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import sockstat
from conftest import has_ipv6, is_root, skip_loudly, tcp_pair
from psutil_compare import KINDS, Table, compare

psutil = pytest.importorskip("psutil")


def test_rows_have_psutils_shape(closing):
    lst, cli, acc = tcp_pair(closing)
    port = lst.getsockname()[1]
    rows = [r for r in sockstat.net_connections("tcp4") if port in (r.laddr.port, getattr(r.raddr, "port", None))]
    listen = [r for r in rows if r.status == sockstat.CONN_LISTEN]
    assert listen == [
        sockstat.sconn(lst.fileno(), socket.AF_INET, socket.SOCK_STREAM,
                       sockstat.addr("127.0.0.1", port), (), "LISTEN", os.getpid())
    ]
    r = listen[0]
    assert r.family is socket.AddressFamily.AF_INET and r.type is socket.SocketKind.SOCK_STREAM
    assert r._fields == ("fd", "family", "type", "laddr", "raddr", "status", "pid")
    assert r.laddr._fields == ("ip", "port") and r._asdict()["pid"] == os.getpid()
    est = sorted((r.laddr.port, r.raddr.port, r.fd) for r in rows if r.status == "ESTABLISHED")
    assert est == sorted([
        (cli.getsockname()[1], port, cli.fileno()),
        (port, cli.getsockname()[1], acc.fileno()),
    ])
    # psutil's own namedtuples have the same fields.
    theirs = psutil.net_connections("tcp4")
    if theirs:
        assert theirs[0]._fields == r._fields


def test_constants_are_psutils():
    for name in dir(psutil):
        if name.startswith("CONN_"):
            assert getattr(sockstat, name) == getattr(psutil, name), name


def test_bad_kind_message_is_psutils():
    with pytest.raises(ValueError) as ours:
        sockstat.net_connections("tcp5")
    with pytest.raises(ValueError) as theirs:
        psutil.net_connections("tcp5")
    assert str(ours.value) == str(theirs.value)


def test_udp_unix_and_holders(tmp_path, closing, fork_holder):
    u = closing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    u.bind(("127.0.0.1", 0))
    path = str(tmp_path / "u.sock")
    srv = closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    srv.bind(path)
    srv.listen()
    cli = closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    cli.connect(path)
    acc = closing(srv.accept()[0])
    child = fork_holder()
    [ur] = [r for r in sockstat.net_connections("udp4") if r.laddr and r.laddr.port == u.getsockname()[1] and r.pid == os.getpid()]
    assert (ur.type, ur.status, ur.raddr) == (socket.SOCK_DGRAM, "NONE", ())
    unix = sockstat.net_connections("unix")
    named = sorted((r.pid, r.fd) for r in unix if r.laddr == path)
    # The listener and the accepted end (which carries the listener's name), each in both.
    assert named == sorted(
        (pid, fd) for pid in (os.getpid(), child.pid) for fd in (srv.fileno(), acc.fileno())
    )
    # A connected client's raddr is the path it connected to (psutil: always '').
    [c] = [r for r in unix if r.pid == os.getpid() and r.fd == cli.fileno()]
    assert (c.laddr, c.raddr, c.status, c.family) == ("", path, "NONE", socket.AF_UNIX)


def test_same_table_as_psutil_here(tmp_path):
    """This namespace, restricted to the sockets this test makes (others come and go)."""
    table = Table(str(tmp_path), ipv6=has_ipv6())
    try:
        holder = table.fork_holder()
        for kind in KINDS:
            ours = sockstat.net_connections(kind)
            theirs = psutil.net_connections(kind)
            assert compare(kind, ours, theirs, table.mine) == [], kind
        listener = [
            r for r in sockstat.net_connections("tcp4")
            if r.status == "LISTEN" and table.mine(r)
        ]
        # Each listener: a row for this process and one for the holder; psutil keeps one.
        assert sorted({r.pid for r in listener}) == sorted({os.getpid(), holder})
        assert len(listener) == 4
    finally:
        table.close()


def test_same_table_as_psutil_in_a_fresh_namespace(tmp_path):
    """Every socket of a network namespace that holds only the table: equal for every kind."""
    if not is_root():
        skip_loudly("needs root for a network namespace (unshare --net)")
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        skip_loudly("needs util-linux (unshare) and iproute2 (ip)")
    here = Path(__file__).parent
    out = subprocess.run(
        ["unshare", "--net", sys.executable, str(here / "psutil_compare.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(here)] + sys.path)},
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["problems"] == []
    ours_all, theirs_all = got["counts"]["all"]
    # Every socket is held by two processes here: psutil keeps one row for most of them.
    assert ours_all > theirs_all > 20
