"""sockstat: which process holds which socket on Linux, and how each TCP connection is doing.

Every socket comes from the kernel's sock_diag netlink interface, joined with every
(process, file descriptor) holding it from one pass over /proc: the same library as the
``sockstat`` command, without starting it.

    >>> import sockstat
    >>> for s in sockstat.sockets(listening=True, protos="tcp"):
    ...     print(s.local.address, s.local.port, [(o.pid, o.command) for o in s.owners])

Functions:

- :func:`sockets`: every socket with all its holders, filtered as the command filters; the
  objects follow ``sockstat --json`` (schema version 1) name for name.
- :func:`net_connections`: a drop-in for ``psutil.net_connections()``, one row per (socket,
  holder).
- :func:`listening_ports`: every listening inet socket and the processes behind it.
- :func:`ports`, :func:`counters`, :func:`diagnose`: ``sockstat ports``, ``counters`` and
  ``diagnose`` as their JSON documents.

What could not be seen (owners hidden from an unprivileged caller, a protocol the kernel lacks)
is reported through Python's :mod:`warnings` module as :class:`SockstatWarning`, once per call
and warning, and on the returned list or document as ``.warnings``. Gathering runs with the GIL
released. A bad filter value raises ``ValueError`` with the command's message; a failed read
raises ``OSError`` (``PermissionError`` for a denied one).
"""

from __future__ import annotations

import math
import warnings as _warnings
from typing import Any, Dict, Iterable, List, Optional, TypeVar, Union

from . import _native
from ._records import (
    Cgroup,
    Counter,
    CountersReport,
    Destination,
    DiagnoseReport,
    Endpoint,
    ListeningPort,
    Memory,
    Owner,
    PortsReport,
    Record,
    Server,
    Socket,
    Timer,
    WarningRecord,
    Zone,
    addr,
    sconn,
)

__version__: str = _native.__version__

__all__ = [
    "sockets",
    "net_connections",
    "listening_ports",
    "ports",
    "counters",
    "diagnose",
    "Listing",
    "SockstatWarning",
    "Record",
    "Socket",
    "Endpoint",
    "Owner",
    "Timer",
    "Cgroup",
    "Zone",
    "Memory",
    "WarningRecord",
    "ListeningPort",
    "PortsReport",
    "Destination",
    "Server",
    "CountersReport",
    "Counter",
    "DiagnoseReport",
    "sconn",
    "addr",
    "CONN_ESTABLISHED",
    "CONN_SYN_SENT",
    "CONN_SYN_RECV",
    "CONN_FIN_WAIT1",
    "CONN_FIN_WAIT2",
    "CONN_TIME_WAIT",
    "CONN_CLOSE",
    "CONN_CLOSE_WAIT",
    "CONN_LAST_ACK",
    "CONN_LISTEN",
    "CONN_CLOSING",
    "CONN_NONE",
]

# psutil's status constants (plain strings, as psutil's).
CONN_ESTABLISHED = "ESTABLISHED"
CONN_SYN_SENT = "SYN_SENT"
CONN_SYN_RECV = "SYN_RECV"
CONN_FIN_WAIT1 = "FIN_WAIT1"
CONN_FIN_WAIT2 = "FIN_WAIT2"
CONN_TIME_WAIT = "TIME_WAIT"
CONN_CLOSE = "CLOSE"
CONN_CLOSE_WAIT = "CLOSE_WAIT"
CONN_LAST_ACK = "LAST_ACK"
CONN_LISTEN = "LISTEN"
CONN_CLOSING = "CLOSING"
CONN_NONE = "NONE"

T = TypeVar("T")


class SockstatWarning(UserWarning):
    """Something sockstat could not see, and how to see it.

    Raised through :func:`warnings.warn`: shown once per place by default, silenced with
    ``warnings.simplefilter("ignore", sockstat.SockstatWarning)``, made an error with
    ``"error"``. ``code`` is the stable identifier (``owners-hidden``, ``proto-unavailable``,
    ...; doc/json-schema.md), ``count`` how many sockets it concerns when countable,
    ``details`` the specifics, ``record`` the warning as the document holds it.
    """

    def __init__(self, record: WarningRecord) -> None:
        super().__init__(record["message"])
        self.record = record
        self.code: str = record["code"]
        self.count: Optional[int] = record.get("count")
        self.details: List[str] = list(record.get("details", ()))


class Listing(List[T]):
    """A list of results, with ``warnings``: what the gathering could not see (a list of
    :class:`WarningRecord`, as the JSON document's ``warnings``)."""

    warnings: List[WarningRecord]

    def __init__(self, items: Iterable[T], warnings: List[WarningRecord]) -> None:
        super().__init__(items)
        self.warnings = warnings


def _warn(records: Iterable[WarningRecord]) -> None:
    for r in records:
        _warnings.warn(SockstatWarning(r), stacklevel=3)


def _csv(name: str, value: Any) -> Optional[str]:
    """A filter value in the command line's comma-separated form."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a str, an int or a list of them, not a bool")
    if isinstance(value, (str, int)):
        return str(value)
    try:
        items = list(value)
    except TypeError:
        raise TypeError(
            f"{name}: expected a str, an int or a list of them, not {type(value).__name__}"
        ) from None
    for x in items:
        if isinstance(x, bool) or not isinstance(x, (str, int)):
            raise TypeError(f"{name}: expected str or int items, not {type(x).__name__}")
    return ",".join(str(x) for x in items)


def _text(name: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, (bool, bytes)):
        raise TypeError(f"{name}: expected a str, not {type(value).__name__}")
    return str(value)


def _families(value: Union[str, Iterable[str], None]) -> Optional[List[str]]:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    items = list(value)
    for x in items:
        if not isinstance(x, str):
            raise TypeError(f"families: expected str items, not {type(x).__name__}")
    return items


def _filters(
    families: Union[str, Iterable[str], None] = None,
    protos: Union[str, Iterable[str], None] = None,
    connected: bool = False,
    listening: bool = False,
    no_loopback: bool = False,
    ports: Union[int, str, Iterable[Union[int, str]], None] = None,
    src: Any = None,
    dst: Any = None,
    states: Union[str, Iterable[str], None] = None,
    pids: Union[int, str, Iterable[Union[int, str]], None] = None,
    user: Union[str, int, None] = None,
    command: Optional[str] = None,
    owners: bool = True,
    zone: Optional[str] = None,
    all_zones: bool = False,
    source: str = "auto",
    owner_scan: str = "auto",
    connected_to: Union[int, str, Iterable[Union[int, str]], None] = None,
    sport: Union[int, str, Iterable[Union[int, str]], None] = None,
    dport: Union[int, str, Iterable[Union[int, str]], None] = None,
) -> Dict[str, Any]:
    return {
        "families": _families(families),
        "protos": _csv("protos", protos),
        "connected": bool(connected),
        "listening": bool(listening),
        "no_loopback": bool(no_loopback),
        "ports": _csv("ports", ports),
        "sport": _csv("sport", sport),
        "dport": _csv("dport", dport),
        "src": _text("src", src),
        "dst": _text("dst", dst),
        "states": _csv("states", states),
        "pids": _csv("pids", pids),
        "user": _csv("user", user),
        "command": _text("command", command),
        "connected_to": _csv("connected_to", connected_to),
        "owners": bool(owners),
        "zone": _text("zone", zone),
        "all_zones": bool(all_zones),
        "source": str(source),
        "owner_scan": str(owner_scan),
    }


def sockets(
    *,
    families: Union[str, Iterable[str], None] = None,
    protos: Union[str, Iterable[str], None] = None,
    connected: bool = False,
    listening: bool = False,
    no_loopback: bool = False,
    ports: Union[int, str, Iterable[Union[int, str]], None] = None,
    sport: Union[int, str, Iterable[Union[int, str]], None] = None,
    dport: Union[int, str, Iterable[Union[int, str]], None] = None,
    src: Any = None,
    dst: Any = None,
    states: Union[str, Iterable[str], None] = None,
    pids: Union[int, str, Iterable[Union[int, str]], None] = None,
    user: Union[str, int, None] = None,
    command: Optional[str] = None,
    connected_to: Union[int, str, Iterable[Union[int, str]], None] = None,
    owners: bool = True,
    args: bool = False,
    resolve_users: bool = True,
    tcp_info: bool = False,
    time_wait: bool = False,
    congestion: bool = False,
    memory: bool = False,
    cgroup: bool = False,
    zone: Optional[str] = None,
    all_zones: bool = False,
    source: str = "auto",
    owner_scan: str = "auto",
) -> Listing[Socket]:
    """Every socket the filters select, with every (process, fd) holding it.

    The result is a list of :class:`Socket`, in the command's order (protocol, family, local
    address and port, remote address and port), each the object ``sockstat --json`` prints for
    it: ``s.id``, ``s.cookie``, ``s.proto``, ``s.family``, ``s.type``, ``s.state``,
    ``s.local`` / ``s.remote`` (:class:`Endpoint`), ``s.recv_q``, ``s.send_q``, ``s.uid``,
    ``s.user``, ``s.owners_status``, ``s.owners`` (:class:`Owner`: pid, fd, command, uid,
    user). The list's ``warnings`` say what could not be seen; each is also issued as a
    :class:`SockstatWarning`.

    Filters (combined with AND; the command's flag in brackets):

    - ``families``: "inet", "inet6", "unix" or a list of them (-4 -6 -u); default all three.
    - ``protos``: "tcp", "udp", "udplite", "raw", "icmp", "sctp", "mptcp", "packet", "unix",
      "netlink", or a list or comma-separated string of them (-P); default every protocol but
      packet and netlink, and the sockets no table lists (proto "other").
    - ``connected`` (-c), ``listening`` (-l): sockets with a remote end, or waiting for peers.
    - ``no_loopback`` (-L): leave out inet sockets with a loopback end.
    - ``ports`` (-p): local or remote port: 22, "22,80,8000-8100" or [22, "8000-8100"].
    - ``sport``, ``dport`` (--sport, --dport): local / remote port, in the same forms: a
      server's connections by its own port (``sport=5432``), a client's by the port it
      connected to (``dport=5432``).
    - ``src``, ``dst`` (--src, --dst): local / remote address or prefix ("192.0.2.0/24").
    - ``states`` (--state): kernel state names, e.g. "ESTABLISHED" or ["LISTEN", "TIME_WAIT"].
    - ``pids`` (--pid), ``user`` (--user: a name or uid), ``command`` (--command: exact, or a
      glob with * and ?): sockets held by such processes (only those holders are listed).
    - ``connected_to`` (--connected-to): the connections to these listeners, seen from both
      ends: ports, unix paths and "@abstract" names, e.g. [5432, "/run/postgresql/.s.PGSQL.5432"].
    - ``zone`` (-z: a zone name, container id prefix or namespace inode), ``all_zones`` (-Z):
      other network namespaces; each socket then has ``zone``.

    What to gather: ``owners=False`` skips the /proc scan (--no-owners), ``args`` adds each
    owner's arguments (-a), ``resolve_users=False`` leaves user names out (-n), ``tcp_info``
    adds ``tcp`` and ``timer`` (-T; TIME-WAIT entries, which have no TCP internals, are then
    left out with a ``time-wait-hidden`` warning unless ``time_wait`` or ``states`` asks for
    them), ``congestion`` the congestion control in ``tcp`` (-C),
    ``memory`` socket ``memory`` (-m), ``cgroup`` each inet socket's ``cgroup`` (--cgroup).
    ``source`` is "auto", "netlink" or "proc" (--source), ``owner_scan`` "auto", "proc" or
    "bpf" (--owner-scan).

    Raises ValueError for a bad filter value (the command's message), OSError when the socket
    table or /proc cannot be read.
    """
    f = _filters(
        families, protos, connected, listening, no_loopback, ports, src, dst, states, pids,
        user, command, owners, zone, all_zones, source, owner_scan, connected_to,
        sport=sport, dport=dport,
    )
    f.update(
        time_wait=bool(time_wait),
        args=bool(args),
        resolve_users=bool(resolve_users),
        tcp_info=bool(tcp_info),
        congestion=bool(congestion),
        memory=bool(memory),
        cgroup=bool(cgroup),
    )
    found, warned = _native.sockets(f, f)
    _warn(warned)
    return Listing(found, warned)


# psutil's kinds, in psutil's order (its error message lists them so):
# kind: (inet, inet6, unix, tcp, udp)
_KINDS = {
    "all": (True, True, True, True, True),
    "tcp": (True, True, False, True, False),
    "tcp4": (True, False, False, True, False),
    "udp": (True, True, False, False, True),
    "udp4": (True, False, False, False, True),
    "inet": (True, True, False, True, True),
    "inet4": (True, False, False, True, True),
    "inet6": (False, True, False, True, True),
    "tcp6": (False, True, False, True, False),
    "udp6": (False, True, False, False, True),
    "unix": (False, False, True, False, False),
}


def net_connections(kind: str = "inet") -> List[sconn]:
    """System-wide sockets as ``psutil.net_connections(kind)`` returns them, every holder kept.

    A list of :class:`sconn` named tuples ``(fd, family, type, laddr, raddr, status, pid)``
    with psutil's kinds ("inet", "inet4", "inet6", "tcp", "tcp4", "tcp6", "udp", "udp4",
    "udp6", "unix", "all"), field types and ``CONN_*`` status constants, but one row per
    (socket, process, fd): a socket held by several processes (after fork, or passed over a
    unix socket) gets a row for each, where psutil keeps one. A socket no visible process holds
    has ``fd`` -1 and ``pid`` None, as in psutil. Other differences from psutil (rows come in
    the listing's order; a connected unix socket's ``raddr`` is its peer's path when the peer
    is bound): see the package's README.

    Without the privilege to read other processes' fds, their sockets are still listed with
    ``pid`` None, and a :class:`SockstatWarning` (code ``owners-hidden``) says how many.
    """
    try:
        inet, inet6, unix, tcp, udp = _KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(
            f"invalid kind argument {kind!r}; valid ones are: {tuple(_KINDS)}"
        ) from None
    rows, warned = _native.net_connections(inet=inet, inet6=inet6, unix=unix, tcp=tcp, udp=udp)
    _warn(warned)
    return rows


def listening_ports() -> Listing[ListeningPort]:
    """Every listening inet socket (TCP LISTEN, bound unconnected UDP) and who holds it.

    A list of :class:`ListeningPort` (``proto``, ``address``, ``port``, ``inode``,
    ``processes``: every holder as ``[pid, command]``), by protocol, address and port: the
    listeners of ``sockstat -l -4 -6 --json`` (raw sockets left out), every holder of each.
    """
    found, warned = _native.listening_ports()
    _warn(warned)
    return Listing(found, warned)


def _seconds(name: str, value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected seconds as a number, not {type(value).__name__}")
    return float(value)


def ports(
    *,
    families: Union[str, Iterable[str], None] = None,
    no_loopback: bool = False,
    ports: Union[int, str, Iterable[Union[int, str]], None] = None,
    sport: Union[int, str, Iterable[Union[int, str]], None] = None,
    dport: Union[int, str, Iterable[Union[int, str]], None] = None,
    src: Any = None,
    dst: Any = None,
    interval: Optional[float] = None,
) -> PortsReport:
    """Ephemeral-port use and TIME-WAIT, by destination and by listening port.

    The document ``sockstat ports --json`` prints (:class:`PortsReport`): the port range and
    reuse settings, each destination's share of the range (``destinations``), TIME-WAIT on the
    server side (``servers``) and ``warnings`` (findings such as ``ephemeral-ports-critical``,
    and, as findings of level info, what could not be seen; only the latter are also issued as
    :class:`SockstatWarning`). ``families`` ("inet", "inet6"), ``no_loopback``, ``ports``,
    ``sport``, ``dport``, ``src``, ``dst`` filter as in :func:`sockets`; ``interval`` (seconds)
    samples twice and adds the rate of new TIME-WAIT entries and the PAWS and TIME-WAIT
    counters. Reads the network namespace this process runs in.
    """
    fams = _families(families)
    if fams is not None and "unix" in fams:
        raise ValueError("families: ports() looks at TCP; give inet, inet6 or both")
    f = _filters(
        families=fams, no_loopback=no_loopback, ports=ports, sport=sport, dport=dport, src=src,
        dst=dst,
    )
    doc, warned = _native.ports(f, _seconds("interval", interval))
    _warn(warned)
    return doc


def counters(
    interval: Optional[float] = None,
    *,
    all: bool = False,  # noqa: A002 - the command's --all
    _proc_root: Optional[str] = None,  # tests: read counter files from this directory
) -> CountersReport:
    """The kernel's TCP/IP counters (/proc/net/snmp, netstat, snmp6), by name.

    The document ``sockstat counters [SECONDS] --json`` prints (:class:`CountersReport`):
    without ``interval``, each counter's value since boot; with it (seconds), the change over
    that interval, measured by sleeping between two reads (with the GIL released). Counters
    that are zero or did not move are left out (counted in ``hidden_zero``) unless ``all``.
    Each :class:`Counter` has its ``meaning`` and whether a rise means ``trouble``.
    """
    doc = _native.counters(_seconds("interval", interval), bool(all), _proc_root)
    _warn(doc["warnings"])
    return doc


def diagnose(
    interval: float = 1.0,
    *,
    bandwidth: Union[str, float, None] = None,
    families: Union[str, Iterable[str], None] = None,
    connected: bool = False,
    listening: bool = False,
    no_loopback: bool = False,
    ports: Union[int, str, Iterable[Union[int, str]], None] = None,
    sport: Union[int, str, Iterable[Union[int, str]], None] = None,
    dport: Union[int, str, Iterable[Union[int, str]], None] = None,
    src: Any = None,
    dst: Any = None,
    states: Union[str, Iterable[str], None] = None,
    pids: Union[int, str, Iterable[Union[int, str]], None] = None,
    user: Union[str, int, None] = None,
    command: Optional[str] = None,
    owners: bool = True,
) -> DiagnoseReport:
    """What limits each TCP connection the filters select, and what to change.

    The document ``sockstat diagnose --json`` prints (:class:`DiagnoseReport`): two samples
    ``interval`` seconds apart of every selected connection's ``tcp_info`` and socket memory,
    with this namespace's counters and sysctls, judged by the rules of doc/diagnose.md
    (send buffer, peer window, window scaling, a receiver that does not read, delayed ACKs,
    retransmissions, listen queue, TIME-WAIT, ephemeral ports, memory pressure). Each finding
    has its ``rule``, ``severity``, ``socket``, ``summary``, ``evidence`` and ``advice``.
    ``bandwidth``, the path's bottleneck ("100Mbit", "12.5MB/s", or a number of bytes per
    second), sizes buffers for it. The filters are those of :func:`sockets` that apply to TCP
    connections, as ``sockstat diagnose`` takes them: no ``protos``, and ``families`` "inet",
    "inet6" or both.
    """
    if isinstance(bandwidth, str):
        bw: Optional[float] = _native.parse_bandwidth(bandwidth)
    elif bandwidth is None:
        bw = None
    elif isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)):
        raise TypeError(f"bandwidth: expected a str or a number, not {type(bandwidth).__name__}")
    elif not (math.isfinite(bandwidth) and bandwidth > 0):
        raise ValueError(f"invalid bandwidth {bandwidth!r}: give bytes per second above 0")
    else:
        bw = float(bandwidth)
    secs = _seconds("interval", interval)
    if secs is None:
        raise TypeError("interval: expected seconds as a number, not None")
    fams = _families(families)
    if fams is not None and "unix" in fams:
        raise ValueError("families: diagnose() looks at TCP; give inet, inet6 or both")
    f = _filters(
        fams, None, connected, listening, no_loopback, ports, src, dst, states, pids,
        user, command, owners, sport=sport, dport=dport,
    )
    doc = _native.diagnose(f, secs, bw)
    _warn(doc["warnings"])
    return doc
