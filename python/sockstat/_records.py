"""The objects sockstat returns.

Every JSON object of sockstat's documents (``sockstat --json``, ``sockstat ports --json``, ...)
becomes a :class:`Record`: a ``dict`` with exactly the JSON object's keys and values, whose keys
also read as attributes (``s.local.port`` is ``s["local"]["port"]``). The documented subclasses
below name their fields; a documented field that the document leaves out (an optional part not
asked for, a value the kernel does not provide) reads as ``None`` as an attribute and is absent
as a key, exactly as in the JSON. ``json.dumps(record)`` gives the command's JSON back.

``sconn`` and ``addr`` are the named tuples of :func:`sockstat.net_connections`, shaped as
psutil's.
"""

from __future__ import annotations

import collections
from typing import Any, ClassVar, Dict, List

__all__ = [
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
]


def _field(name: str, doc: str) -> property:
    def get(self: Record) -> Any:
        return self.get(name)

    get.__name__ = name
    return property(get, doc=doc)


class Record(Dict[str, Any]):
    """A JSON object of sockstat's documents: a dict whose keys also read as attributes.

    Keys are the JSON contract's names (doc/json-schema.md), values its values. A key that is
    also the name of a dict method (none is, in schema version 1) is reachable with ``[]``.
    """

    __slots__ = ()

    #: Documented fields, with their meaning: they read as ``None`` when absent.
    _fields: ClassVar[Dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, doc in cls.__dict__.get("_fields", {}).items():
            if not hasattr(dict, name):
                setattr(cls, name, _field(name, doc))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            pass
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | {k for k in self if k.isidentifier()})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"

    def __reduce__(self) -> Any:
        return (type(self), (dict(self),))


class Endpoint(Record):
    """One end of a socket: ``local``, or ``remote`` (``None`` when there is no remote end).

    inet: ``address`` and ``port``; unix: ``path`` (``"@name"`` for an abstract name; no key
    when unnamed), and for ``remote`` the ``peer`` socket's id; packet: ``protocol`` and
    ``ifindex``; netlink: ``protocol`` and ``port_id`` (and ``group`` for a remote end); no key
    for a socket of proto ``other`` (its addresses are not known).
    """

    __slots__ = ()
    _fields = {
        "address": "IP address, as text ('127.0.0.1', '::1', '::ffff:192.0.2.1')",
        "port": "port (for raw sockets, the IP protocol number)",
        "path": "unix socket name: a path, or '@name' for an abstract name",
        "path_hex": "the name's exact bytes in hex, only when they are not UTF-8",
        "peer": "unix: the id (inode) of the socket at the other end",
        "protocol": "packet: the ETH_P_* protocol number; netlink: the NETLINK_* number",
        "protocol_name": "packet: the protocol's name (ALL, IP, ARP, ...); netlink: "
        "NETLINK_ROUTE, ...; when known",
        "port_id": "netlink: the port id (0 for the kernel)",
        "group": "netlink, remote end: the multicast group connect() named, when not 0",
        "ifindex": "packet: the interface index the socket is bound to (0 = any)",
        "interface": "packet: that interface's name, when known",
    }

    def __str__(self) -> str:
        if "port" in self:
            a = self["address"]
            return f"[{a}]:{self['port']}" if ":" in a else f"{a}:{self['port']}"
        if "path" in self:
            return str(self["path"])
        if "peer" in self:
            return f"[peer {self['peer']}]"
        if "protocol" in self:
            return f"proto 0x{self['protocol']:04x} if {self['ifindex']}"
        return "*"


class Owner(Record):
    """One (process, file descriptor) holding a socket."""

    __slots__ = ()
    _fields = {
        "pid": "process id",
        "fd": "file descriptor number in that process",
        "command": "/proc/PID/comm, exact (None if it could not be read)",
        "command_hex": "the command's exact bytes in hex, only when they are not UTF-8",
        "uid": "the process's effective uid",
        "user": "its user name (None when unknown or with resolve_users=False)",
        "args": "with args=True: the arguments (/proc/PID/cmdline)",
        "args_hex": "with args=True, when some argument is not UTF-8: each one's bytes in hex",
    }


class Timer(Record):
    """The kernel's timer of an inet socket (with ``tcp_info=True``)."""

    __slots__ = ()
    _fields = {
        "kind": "off, retransmit, keepalive, time_wait, persist, delack or other",
        "expires_ms": "milliseconds until it fires",
        "retrans": "retransmits or unanswered probes counted by it",
    }


class Cgroup(Record):
    """The cgroup (v2) of the process that created an inet socket (with ``cgroup=True``)."""

    __slots__ = ()
    _fields = {
        "id": "the kernel's cgroup id (the inode of the cgroup directory)",
        "path": "that directory below the cgroup2 mount, or None when unknown",
    }


class Zone(Record):
    """A zone: a network namespace, named after its container when it has one."""

    __slots__ = ()
    _fields = {
        "name": "'global' for the host's namespace, else a container, pod, netns name or inode",
        "kind": "global, netns, docker, podman, kubernetes, containerd, nspawn, lxc or unnamed",
        "netns_inode": "the namespace inode (None when it could not be read)",
        "container_id": "the container id, when a runtime owns the namespace",
        "runtime": "docker, podman, containerd, cri-o, systemd-nspawn or lxc",
        "pod": "Kubernetes namespace/name, when known",
    }


class Memory(Record):
    """Socket memory (``memory=True``): what ``ss -m`` shows as ``skmem``."""

    __slots__ = ()
    _fields = {
        "rmem_alloc_bytes": "queued for reading (r)",
        "rcvbuf_bytes": "receive buffer limit (rb; twice an SO_RCVBUF value)",
        "wmem_alloc_bytes": "queued for sending, in the stack (t)",
        "sndbuf_bytes": "send buffer limit (tb; twice an SO_SNDBUF value)",
        "fwd_alloc_bytes": "forward-allocated (f)",
        "wmem_queued_bytes": "queued for sending, charged to the socket (w)",
        "optmem_bytes": "option memory (o)",
        "backlog_bytes": "backlog queue (bl; kernels 3.6+)",
        "drops": "packets dropped (d; kernels 4.7+)",
    }


class Socket(Record):
    """One socket, as an object of ``sockstat --json``'s ``sockets`` array.

    ``owners`` lists every (process, fd) holding it; ``owners_status`` says whether that list
    is complete. The optional parts are ``None`` unless asked for: ``tcp`` and ``timer``
    (``tcp_info=True``; ``tcp`` also with ``congestion=True``), ``memory``
    (``memory=True``), ``cgroup`` (``cgroup=True``), ``zone`` (``zone=``/``all_zones=``).
    ``tcp`` is a Record holding the kernel's ``tcp_info`` (``rtt_us``, ``cwnd_pkts``,
    ``snd_wnd_bytes``, ... see doc/json-schema.md): a field the running kernel does not report
    is absent, so read those with ``s.tcp.get("rcv_wnd_bytes")``.
    """

    __slots__ = ()
    _fields = {
        "id": "socket inode (the N of socket:[N] in /proc/PID/fd); None for TIME_WAIT and "
        "request sockets",
        "cookie": "the kernel's socket cookie as a decimal string, the identity to join "
        "samples on; None when read from /proc/net",
        "proto": "tcp, udp, udplite, raw, icmp, icmp6, sctp, mptcp, unix, packet, netlink, or "
        "other: a socket a process holds that no table lists (see kernel_protocol)",
        "family": "inet, inet6, unix, packet, netlink, or other (proto other, family not known)",
        "type": "stream, dgram, seqpacket or raw; unknown (proto other, type not known)",
        "state": "kernel state: ESTABLISHED, LISTEN, TIME_WAIT, ...; UNCONN for unconnected "
        "datagram, unix and netlink sockets; UNKNOWN for proto other",
        "local": "the local end (an Endpoint)",
        "remote": "the remote end (an Endpoint), or None when there is none",
        "recv_q": "bytes received and not read; for LISTEN, the accept queue length",
        "send_q": "bytes not yet acknowledged or sent; for LISTEN, the backlog",
        "uid": "the socket's uid as the kernel reports it (None for TIME_WAIT)",
        "user": "the user name of uid (None when unknown or with resolve_users=False)",
        "owners_status": "known, none (no process holds it), partial (holders shown; a process "
        "these privileges cannot read may hold it too), hidden (no holder visible; such a "
        "process may hold it) or not_requested (owners=False); the same whatever the filters",
        "owners": "every Owner (pid, fd, command, uid, user) holding it, by pid then fd",
        "kernel_protocol": "proto other: the kernel's name of its protocol (PINGv6, TCP, "
        "AF_VSOCK), read through a holder's fd",
        "kernel_protocol_hex": "its exact bytes in hex, only when they are not UTF-8",
        "zone": "with zone= or all_zones=True: the Zone it lives in",
        "cgroup": "with cgroup=True, inet sockets: the Cgroup that created it",
        "timer": "with tcp_info=True, inet sockets: the kernel's Timer",
        "tcp": "with tcp_info=True (or congestion=True), TCP: the kernel's tcp_info",
        "memory": "with memory=True: socket Memory",
        "bound_ifindex": "inet: the interface the socket is bound to (SO_BINDTODEVICE), if any",
        "bound_interface": "that interface's name, when known",
    }

    def __repr__(self) -> str:
        who = ", ".join(
            f"{o.get('command')}[{o.get('pid')}] fd {o.get('fd')}" for o in self.get("owners", ())
        )
        remote = self.get("remote")
        return (
            f"<Socket {self.get('proto')} {self.get('family')} {self.get('local')}"
            f" -> {'*' if remote is None else remote} {self.get('state')}"
            f" owners={self.get('owners_status')}{': ' + who if who else ''}>"
        )


class WarningRecord(Record):
    """What could not be seen, and how to see it (the documents' ``warnings``)."""

    __slots__ = ()
    _fields = {
        "code": "stable identifier: owners-hidden, proto-unavailable, dump-failed, ...",
        "count": "how many sockets (or things) it concerns, when countable",
        "message": "one line for a person: what is missing and how to get it",
        "details": "the specifics (e.g. each process that could not be read)",
    }


class ListeningPort(Record):
    """A listening inet socket (TCP LISTEN, bound unconnected UDP) and who holds it."""

    __slots__ = ()
    _fields = {
        "proto": "tcp, udp, udplite, sctp or mptcp",
        "address": "local address ('0.0.0.0' or '::' for all addresses)",
        "port": "port",
        "inode": "socket inode (the id of sockets())",
        "processes": "every holder as [pid, command] (command None if unreadable); empty when "
        "not visible with these privileges",
    }


class PortsReport(Record):
    """``sockstat ports --json``: ephemeral ports and TIME-WAIT, by destination and server."""

    __slots__ = ()
    _fields = {
        "version": "1",
        "range": "net.ipv4.ip_local_port_range: low, high, reserved, usable, "
        "sustainable_rate_per_s, from_sysctl",
        "settings": "tcp_tw_reuse, tcp_tw_reuse_delay_ms, tcp_timestamps",
        "time_wait": "count, max_buckets, usage, new_per_s, overflow_delta, recycled_delta",
        "interval_s": "seconds between the two samples with interval=, else None",
        "destinations": "one Destination per (local address, remote address, remote port), "
        "most ports first",
        "servers": "listening ports with TIME-WAIT entries or connections (Server)",
        "server_counters": "with interval=: {counter, delta} of the TIME-WAIT and PAWS counters",
        "warnings": "findings, most serious first: {code, level, message, advice, details}",
        "zone": "the zone this report is about (with zones)",
    }


class Destination(Record):
    """Ephemeral ports used toward one destination from one local address."""

    __slots__ = ()
    _fields = {
        "local_address": "local address",
        "remote_address": "remote address",
        "remote_port": "remote port",
        "count": "sockets, i.e. local ports in use toward it",
        "states": "sockets by kernel state name ({'TIME_WAIT': 50})",
        "usage": "count / usable ports (1.0 = the whole range)",
        "time_wait": "of them in TIME-WAIT",
        "time_wait_left": "{min_ms, max_ms} left on those entries, or None",
        "new_time_wait": "with interval=: entries that appeared",
        "new_time_wait_per_s": "with interval=: entries that appeared per second",
        "level": "warning from 50% of the range, critical from 80%, else None",
        "opened_by": "with interval= and the right to trace connection events: the processes "
        "that opened connections to it meanwhile ([{pid, command, connections, failed}])",
    }


class Server(Record):
    """A listening port with TIME-WAIT entries or connections, by client."""

    __slots__ = ()
    _fields = {
        "local_address": "the listener's address (unspecified for a wildcard)",
        "local_port": "the listener's port",
        "time_wait": "TIME-WAIT entries on the port",
        "connections": "other accepted connections",
        "clients": "{address, time_wait, connections, ports, time_wait_left} per client",
    }


class CountersReport(Record):
    """``sockstat counters --json``: the kernel's TCP/IP counters."""

    __slots__ = ()
    _fields = {
        "version": "1",
        "interval_s": "seconds the deltas cover, as measured; None for values since boot",
        "counters": "Counter rows, smallest first (counters that went down first)",
        "hidden_zero": "counters left out for being zero or not moving",
        "warnings": "what could not be read, and counters that went backwards",
    }


class Counter(Record):
    """One kernel counter: its value since boot, or its change over the interval."""

    __slots__ = ()
    _fields = {
        "zone": "with zones: the Zone the counter belongs to",
        "group": "Tcp, TcpExt, Ip, IpExt, Icmp, Udp, Ip6, Udp6, MPTcpExt, ...",
        "name": "the counter's name (ListenOverflows)",
        "value": "without an interval: the value",
        "delta": "with an interval: the change (absent when it went down)",
        "reset": "True when the counter went down during the interval",
        "meaning": "one line for a person; None for counters sockstat does not know",
        "trouble": "True when a rise signals trouble (drops, overflows, timeouts)",
    }


class DiagnoseReport(Record):
    """``sockstat diagnose --json``: what limits each TCP connection, and what to change."""

    __slots__ = ()
    _fields = {
        "version": "1",
        "interval_s": "seconds between the two samples, as measured",
        "connections": "TCP connections examined in both samples",
        "findings": "most severe first: {rule, severity, socket, summary, evidence, advice}; "
        "socket is None for host findings",
        "warnings": "what could not be seen, and how to see it",
    }


# psutil's named tuples, field for field (psutil._ntuples).
sconn = collections.namedtuple("sconn", ["fd", "family", "type", "laddr", "raddr", "status", "pid"])
sconn.__doc__ = """One row of net_connections(): a socket and one process holding it.

fd: the file descriptor in that process (-1 when no process holds it, or none is visible);
family: socket.AF_INET, AF_INET6 or AF_UNIX; type: socket.SOCK_STREAM, SOCK_DGRAM or
SOCK_SEQPACKET; laddr, raddr: addr(ip, port) for inet (an empty tuple for port 0), a path for
unix ('' when unnamed); status: one of the CONN_* constants (TCP only, else CONN_NONE);
pid: the process id, or None."""
addr = collections.namedtuple("addr", ["ip", "port"])
addr.__doc__ = "An inet address of net_connections(): ip (text) and port."
