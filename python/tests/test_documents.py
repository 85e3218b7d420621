"""listening_ports(), ports(), counters(), diagnose(): the facts of the command's JSON."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

import sockstat
from conftest import (
    full_listen_queue,
    is_root,
    run_error,
    run_json,
    skip_loudly,
    tcp_pair,
    time_waits,
)


def plain(x):
    return json.loads(json.dumps(x))


def test_listening_ports(sockstat_bin, closing, fork_holder):
    lst = closing(socket.socket())
    lst.bind(("127.0.0.1", 0))
    lst.listen()
    u = closing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    u.bind(("127.0.0.1", 0))
    child = fork_holder()
    found = sockstat.listening_ports()
    assert isinstance(found, sockstat.Listing)
    mine = {(p.proto, p.port): p for p in found if p.port in (lst.getsockname()[1], u.getsockname()[1])}
    t = mine[("tcp", lst.getsockname()[1])]
    assert type(t) is sockstat.ListeningPort
    assert (t.address, t.inode) == ("127.0.0.1", os.fstat(lst.fileno()).st_ino)
    assert sorted(pid for pid, _ in t.processes) == sorted([os.getpid(), child.pid])
    assert ("udp", u.getsockname()[1]) in mine
    # The same facts as the listeners of `sockstat -l -4 -6 --json`.
    doc = run_json(sockstat_bin, "-l", "-4", "-6")
    cli = {
        (s["proto"], s["local"]["address"], s["local"]["port"], s["id"]): sorted(
            (o["pid"], o["command"]) for o in s["owners"]
        )
        for s in doc["sockets"]
        if s["proto"] != "raw"
    }
    ours = {(p.proto, p.address, p.port, p.inode): sorted(map(tuple, p.processes)) for p in found}
    # Only this test's listeners: other sockets of the machine (and their holders) may come
    # and go between the two looks.
    for p in mine.values():
        k = (p.proto, p.address, p.port, p.inode)
        assert cli[k] == ours[k], k


def test_counters_since_boot_and_over_an_interval(sockstat_bin):
    doc = sockstat.counters(all=True)
    assert type(doc) is sockstat.CountersReport and doc.version == 1 and doc.interval_s is None
    assert all(type(c) is sockstat.Counter for c in doc.counters)
    cli = run_json(sockstat_bin, "counters", "--all")
    assert list(doc) == list(cli)  # the same keys in the same order
    names = {(c["group"], c["name"]): c for c in cli["counters"]}
    assert {(c.group, c.name) for c in doc.counters} == set(names)
    for c in doc.counters:
        want = names[(c.group, c.name)]
        assert (c.meaning, c.trouble, sorted(c)) == (want["meaning"], want["trouble"], sorted(want))
    listen_drops = [c for c in doc.counters if (c.group, c.name) == ("TcpExt", "ListenDrops")]
    assert listen_drops and listen_drops[0].trouble is True and listen_drops[0].value >= 0
    over = sockstat.counters(0.2)
    assert 0.2 <= over.interval_s < 5
    assert all("delta" in c or c.get("reset") for c in over.counters)
    assert over.hidden_zero > 0


def test_ports_time_wait_by_destination(sockstat_bin, closing):
    _, port = time_waits(closing)
    doc = sockstat.ports(ports=port)
    assert type(doc) is sockstat.PortsReport and doc.version == 1 and doc.interval_s is None
    [d] = [d for d in doc.destinations if d.remote_port == port]
    assert type(d) is sockstat.Destination
    assert (d.local_address, d.remote_address, d.count, d.time_wait) == ("127.0.0.1", "127.0.0.1", 3, 3)
    assert d.states == {"TIME_WAIT": 3} and 0 < d.usage < 0.01
    cli = run_json(sockstat_bin, "ports", "-p", str(port))
    assert list(doc) == list(cli)
    for k in ("range", "settings", "servers", "server_counters"):
        assert plain(doc[k]) == cli[k], k
    strip = lambda ds: [{k: v for k, v in x.items() if k != "time_wait_left"} for x in ds]  # noqa: E731
    assert strip(plain(doc.destinations)) == strip(cli["destinations"])
    assert [w["code"] for w in doc.warnings] == [w["code"] for w in cli["warnings"]]
    sampled = sockstat.ports(ports=port, interval=0.2)
    assert sampled.interval_s >= 0.2
    assert {c.counter for c in sampled.server_counters} >= {"TcpExt.PAWSEstab"}
    assert sampled.time_wait.new_per_s is not None


def test_diagnose_a_healthy_connection(sockstat_bin, closing):
    lst, cli, acc = tcp_pair(closing)
    cli.sendall(b"ping")
    acc.recv(4)
    port = str(lst.getsockname()[1])
    doc = sockstat.diagnose(0.2, ports=port, connected=True, bandwidth="100Mbit")
    assert type(doc) is sockstat.DiagnoseReport and doc.version == 1
    assert doc.connections == 2 and doc.findings == [] and doc.interval_s >= 0.2
    out = subprocess.run(
        [str(sockstat_bin), "diagnose", "--json", "-p", port, "-c", "--interval", "0.2"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    cli_doc = json.loads(out.stdout)
    assert list(doc) == list(cli_doc)
    assert (cli_doc["connections"], cli_doc["findings"]) == (doc.connections, plain(doc.findings))


def test_diagnose_finds_a_full_listen_queue(sockstat_bin, closing):
    """A listener whose backlog of 1 is full and never accepted: listen-overflow, in both."""
    port = full_listen_queue(closing)
    doc = sockstat.diagnose(0.5, ports=port)
    rules = {(f.rule, f.severity) for f in doc.findings}
    assert any(r == "listen-overflow" for r, _ in rules), doc.findings
    f = [f for f in doc.findings if f.rule == "listen-overflow"][0]
    assert f.socket.local == {"address": "127.0.0.1", "port": port}
    assert f.socket.owners[0].pid == os.getpid()
    assert f.summary and f.advice and isinstance(f.evidence, dict)
    out = subprocess.run(
        [str(sockstat_bin), "diagnose", "--json", "-p", str(port), "--interval", "0.5"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 1, out.stderr  # a finding at warning level or above
    assert "listen-overflow" in {f["rule"] for f in json.loads(out.stdout)["findings"]}


@pytest.mark.parametrize(
    "call, flags",
    [
        (lambda: sockstat.counters(0), ["counters", "0"]),
        (lambda: sockstat.counters(-1), ["counters", "--interval=-1"]),
        (lambda: sockstat.ports(interval=100000), ["ports", "--interval", "100000"]),
        (lambda: sockstat.diagnose(bandwidth="fast"), ["diagnose", "--bandwidth", "fast"]),
        (lambda: sockstat.diagnose(dport="70000"), ["diagnose", "--dport", "70000"]),
        (lambda: sockstat.ports(ports="1-2-3"), ["ports", "-p", "1-2-3"]),
    ],
)
def test_bad_values_raise_valueerror_with_the_command_message(sockstat_bin, call, flags):
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value) in run_error(sockstat_bin, *flags)


def test_diagnose_takes_the_filters_of_tcp_connections_only():
    # As `sockstat diagnose`, which has no -P and no -u: it looks at TCP connections alone.
    with pytest.raises(TypeError, match="protos"):
        sockstat.diagnose(protos="udp")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="looks at TCP"):
        sockstat.diagnose(families="unix")


UNREADABLE = r"""
import sockstat
try:
    sockstat.counters(_proc_root=__import__("sys").argv[1])
except PermissionError as e:
    print("PermissionError", e.errno)
"""


def test_a_denied_read_is_a_permissionerror(tmp_path):
    if not is_root():
        skip_loudly("needs root to run a check as another user (setpriv)")
    net = tmp_path / "net"
    net.mkdir()
    (net / "snmp").write_text("Tcp: RtoAlgorithm\nTcp: 1\n")
    (net / "snmp").chmod(0)
    tmp_path.chmod(0o755)
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-c", UNREADABLE, str(tmp_path)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert out.stdout.split() == ["PermissionError", "13"], out.stderr
