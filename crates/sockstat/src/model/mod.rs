//! The snapshot model: sockets, their endpoints and the processes that hold them.
//!
//! Everything here is plain data filled by the gatherers in `sys` and read by the filters,
//! the renderers and library users. Nothing in this module does I/O. Names carry their units
//! (`expires_ms`); a value the kernel did not provide is `None`, never 0.

pub(crate) mod changes;
pub mod tcp;
mod warning;

pub use warning::{counted, Severity, Warning, WarningCode};

pub use changes::{carry_owners, diff, Changes, SocketKey};

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use serde::Serialize;

/// Transport protocol of a socket, as `-P` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Proto {
    /// TCP (IPPROTO_TCP).
    Tcp,
    /// UDP (IPPROTO_UDP).
    Udp,
    /// UDP-Lite (IPPROTO_UDPLITE).
    Udplite,
    /// Raw IP sockets.
    Raw,
    /// ICMP datagram ("ping") sockets: `socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)` and its
    /// IPv6 twin (IPPROTO_ICMPV6), what unprivileged `ping` uses. No sock_diag module lists
    /// them; they come from `/proc/net/icmp` and `/proc/net/icmp6`, which show them once bound
    /// or used (an unbound one is in no table). In JSON the IPv6 ones are `icmp6`.
    Icmp,
    /// SCTP.
    Sctp,
    /// Multipath TCP (the MPTCP socket itself; its subflows are TCP sockets).
    Mptcp,
    /// Unix domain sockets.
    Unix,
    /// AF_PACKET sockets.
    Packet,
    /// AF_NETLINK sockets (from netlink_diag): channels between processes and the kernel.
    Netlink,
    /// A socket no table sockstat reads lists, known only from the fd a process holds: a ping
    /// socket never bound or used, a TCP or UDP socket never bound, a vsock, XDP or AF_ALG
    /// socket. Its local end is [`Endpoint::Unlisted`], with the kernel's name of its protocol.
    /// Not a `-P` kind: `-P` and the family filters select it by the kind and family the
    /// kernel names ([`Socket::selected_as`]: an unbound UDP socket is one of `-P udp -4`'s),
    /// and with no `-P` every one is listed but unbound netlink sockets (doc/reference/linux.md,
    /// "Socket kinds").
    Other,
}

impl Proto {
    /// Every protocol `-P` names, in output order ([`Proto::Other`] comes last, and is not one).
    pub const ALL: [Proto; 10] = [
        Proto::Tcp,
        Proto::Udp,
        Proto::Udplite,
        Proto::Raw,
        Proto::Icmp,
        Proto::Sctp,
        Proto::Mptcp,
        Proto::Unix,
        Proto::Packet,
        Proto::Netlink,
    ];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Udplite => "udplite",
            Proto::Raw => "raw",
            Proto::Icmp => "icmp",
            Proto::Sctp => "sctp",
            Proto::Mptcp => "mptcp",
            Proto::Unix => "unix",
            Proto::Packet => "packet",
            Proto::Netlink => "netlink",
            Proto::Other => "other",
        }
    }

    /// The name in JSON for a socket of this protocol in `family`: [`Proto::name`], except
    /// `icmp6` for an IPv6 ping socket (ICMPv6 is a protocol of its own).
    pub fn name_in(self, family: Family) -> &'static str {
        match (self, family) {
            (Proto::Icmp, Family::Inet6) => "icmp6",
            (p, _) => p.name(),
        }
    }

    /// Parses a protocol name (case-insensitive).
    pub fn from_name(s: &str) -> Option<Proto> {
        Proto::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
    }

    /// True for the protocols carried over IPv4/IPv6.
    pub fn is_inet(self) -> bool {
        !matches!(
            self,
            Proto::Unix | Proto::Packet | Proto::Netlink | Proto::Other
        )
    }

    /// True for connectionless protocols whose "unconnected" state is shown as UNCONN.
    pub fn is_datagram(self) -> bool {
        matches!(self, Proto::Udp | Proto::Udplite | Proto::Raw | Proto::Icmp)
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Family {
    /// AF_INET.
    Inet,
    /// AF_INET6.
    Inet6,
    /// AF_UNIX.
    Unix,
    /// AF_PACKET.
    Packet,
    /// AF_NETLINK.
    Netlink,
    /// Another family, or one not known: a socket of [`Proto::Other`] whose kernel protocol
    /// name does not say.
    Other,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Family {
    /// The name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Family::Inet => "inet",
            Family::Inet6 => "inet6",
            Family::Unix => "unix",
            Family::Packet => "packet",
            Family::Netlink => "netlink",
            Family::Other => "other",
        }
    }
}

/// Socket type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SockType {
    /// SOCK_STREAM.
    Stream,
    /// SOCK_DGRAM.
    Dgram,
    /// SOCK_SEQPACKET.
    Seqpacket,
    /// SOCK_RAW.
    Raw,
    /// Not known: a socket of [`Proto::Other`] whose kernel protocol name does not say.
    Unknown,
}

impl fmt::Display for SockType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl SockType {
    /// Decodes the kernel's `SOCK_*` value.
    pub fn from_kernel(t: u8) -> Option<SockType> {
        match t {
            1 => Some(SockType::Stream),
            2 => Some(SockType::Dgram),
            3 => Some(SockType::Raw),
            5 => Some(SockType::Seqpacket),
            _ => None,
        }
    }

    /// The name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            SockType::Stream => "stream",
            SockType::Dgram => "dgram",
            SockType::Seqpacket => "seqpacket",
            SockType::Raw => "raw",
            SockType::Unknown => "unknown",
        }
    }
}

/// Socket state, named as the kernel names it (`include/net/tcp_states.h`).
///
/// Datagram and unix sockets use the TCP numbering too: connected is `Established`, unconnected is
/// shown as `Unconn` (kernel `TCP_CLOSE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum State {
    /// TCP_ESTABLISHED (1); connected datagram and unix sockets.
    Established,
    /// TCP_SYN_SENT (2); a unix stream socket in the middle of connect().
    SynSent,
    /// TCP_SYN_RECV (3), and the NEW_SYN_RECV request minisocks (12).
    SynRecv,
    /// TCP_FIN_WAIT1 (4).
    FinWait1,
    /// TCP_FIN_WAIT2 (5).
    FinWait2,
    /// TCP_TIME_WAIT (6).
    TimeWait,
    /// TCP_CLOSE (7) for TCP: closed, or bound and not listening (BOUND_INACTIVE).
    Close,
    /// TCP_CLOSE_WAIT (8).
    CloseWait,
    /// TCP_LAST_ACK (9).
    LastAck,
    /// TCP_LISTEN (10).
    Listen,
    /// TCP_CLOSING (11).
    Closing,
    /// An unconnected datagram or unix socket (kernel TCP_CLOSE).
    Unconn,
    /// A value this version does not know; kept so nothing is lost.
    Unknown(u8),
    /// No table told it: a socket of [`Proto::Other`], known only from a holder's fd.
    Untold,
}

impl State {
    /// The states `--state` accepts, with their names.
    pub const NAMED: [(State, &'static str); 12] = [
        (State::Established, "ESTABLISHED"),
        (State::SynSent, "SYN_SENT"),
        (State::SynRecv, "SYN_RECV"),
        (State::FinWait1, "FIN_WAIT1"),
        (State::FinWait2, "FIN_WAIT2"),
        (State::TimeWait, "TIME_WAIT"),
        (State::Close, "CLOSE"),
        (State::CloseWait, "CLOSE_WAIT"),
        (State::LastAck, "LAST_ACK"),
        (State::Listen, "LISTEN"),
        (State::Closing, "CLOSING"),
        (State::Unconn, "UNCONN"),
    ];

    /// Maps a kernel state number; `datagram` selects UNCONN for TCP_CLOSE.
    pub fn from_kernel(s: u8, datagram: bool) -> State {
        match s {
            1 => State::Established,
            2 => State::SynSent,
            3 | 12 => State::SynRecv,
            4 => State::FinWait1,
            5 => State::FinWait2,
            6 => State::TimeWait,
            7 if datagram => State::Unconn,
            7 | 13 => State::Close,
            8 => State::CloseWait,
            9 => State::LastAck,
            10 => State::Listen,
            11 => State::Closing,
            other => State::Unknown(other),
        }
    }

    /// The kernel state bits (`1 << TCP_*`) this state corresponds to, for the dump request.
    pub fn kernel_mask(self) -> u32 {
        match self {
            State::Established => 1 << 1,
            State::SynSent => 1 << 2,
            State::SynRecv => (1 << 3) | (1 << 12),
            State::FinWait1 => 1 << 4,
            State::FinWait2 => 1 << 5,
            State::TimeWait => 1 << 6,
            State::Close => (1 << 7) | (1 << 13),
            State::Unconn => 1 << 7,
            State::CloseWait => 1 << 8,
            State::LastAck => 1 << 9,
            State::Listen => 1 << 10,
            State::Closing => 1 << 11,
            State::Unknown(n) if n < 32 => 1 << n,
            State::Unknown(_) | State::Untold => 0,
        }
    }

    /// The kernel name (`ESTABLISHED`, `TIME_WAIT`, ...), or `UNKNOWN(n)`.
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        match State::NAMED.iter().find(|(s, _)| *s == self) {
            Some((_, n)) => std::borrow::Cow::Borrowed(n),
            None => match self {
                State::Unknown(n) => std::borrow::Cow::Owned(format!("UNKNOWN({n})")),
                // State::Untold, and nothing else.
                _ => std::borrow::Cow::Borrowed("UNKNOWN"),
            },
        }
    }

    /// Parses a state name: kernel spelling, case-insensitive, `-` accepted for `_`.
    pub fn from_name(s: &str) -> Option<State> {
        let norm: String = s
            .chars()
            .map(|c| {
                if c == '-' {
                    '_'
                } else {
                    c.to_ascii_uppercase()
                }
            })
            .collect();
        let norm = match norm.as_str() {
            "ESTAB" => "ESTABLISHED",
            "SYN_RECEIVED" => "SYN_RECV",
            "CLOSED" => "CLOSE",
            "UNCONNECTED" => "UNCONN",
            other => other,
        }
        .to_string();
        State::NAMED
            .iter()
            .find(|(_, n)| *n == norm)
            .map(|(st, _)| *st)
    }
}

impl Serialize for State {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Bytes that came from the kernel or another process (a unix path, a command name): usually
/// UTF-8, not always. Kept whole; renderers decide how to show them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RawString(pub Box<[u8]>);

impl RawString {
    /// Wraps bytes.
    pub fn new(b: &[u8]) -> RawString {
        RawString(b.into())
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The text, with invalid UTF-8 replaced by U+FFFD and control characters kept: for a
    /// program that matches on names. To print one, use its `Display` (`{}`), which escapes
    /// as the listing does (`text::sanitize`).
    pub fn to_string_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

/// A unix socket name, as the kernel holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnixName {
    /// A filesystem path.
    Path(RawString),
    /// An abstract name (the kernel's leading NUL removed); shown as `@name`.
    Abstract(RawString),
}

impl UnixName {
    /// Decodes a `sun_path` as unix_diag sends it (abstract names start with NUL).
    pub fn from_sun_path(b: &[u8]) -> Option<UnixName> {
        match b.split_first() {
            None => None,
            Some((0, rest)) => Some(UnixName::Abstract(RawString::new(rest))),
            Some(_) => {
                // A path is NUL-terminated when shorter than sun_path.
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                Some(UnixName::Path(RawString::new(&b[..end])))
            }
        }
    }

    /// The name as users write it: the path, or `@` + the abstract name, as bytes.
    pub fn display_bytes(&self) -> Vec<u8> {
        match self {
            UnixName::Path(p) => p.as_bytes().to_vec(),
            UnixName::Abstract(a) => {
                let mut v = Vec::with_capacity(a.0.len() + 1);
                v.push(b'@');
                v.extend_from_slice(a.as_bytes());
                v
            }
        }
    }
}

/// One end of a socket. It serializes to the endpoint object of the JSON contract
/// (`doc/json-schema.md`): `{"address","port"}`, `{"path"}`, `{"peer","path"}`,
/// `{"protocol","ifindex"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Endpoint {
    /// An IP address and port. For raw sockets `port` is the IP protocol number, as in
    /// `/proc/net/raw` and `ss`.
    Inet {
        /// The address (IPv4-mapped IPv6 addresses are kept as IPv6).
        addr: IpAddr,
        /// The port, host order.
        port: u16,
    },
    /// A unix socket's own name (`None` when unnamed).
    Unix(Option<UnixName>),
    /// The far end of a connected unix socket: the peer's inode and, when the peer is bound,
    /// its name.
    UnixPeer {
        /// The peer socket's inode.
        peer: u64,
        /// The peer's name when it has one.
        name: Option<UnixName>,
    },
    /// An AF_PACKET socket: ethernet protocol and interface index (0 = all).
    Packet {
        /// ETH_P_* protocol number.
        protocol: u16,
        /// Interface index the socket is bound to, 0 for any.
        ifindex: u32,
    },
    /// An AF_NETLINK address: the socket's netlink protocol and port id (0: the kernel's own
    /// socket); as the remote end of a socket that called `connect()`, the port id and
    /// multicast group it named.
    Netlink {
        /// `NETLINK_*` protocol number (`NETLINK_ROUTE` 0).
        protocol: u8,
        /// Port id (`nl_pid`); 0 is the kernel.
        port_id: u32,
        /// Multicast group (remote end only; 0 = none).
        group: u32,
    },
    /// The local end of a socket no table lists ([`Proto::Other`]): the kernel's name of its
    /// protocol (`PINGv6`, `TCP`, `AF_VSOCK`: `sk_prot_creator->name`, read through a holder's
    /// fd), or `None` when it could not be read. Its addresses are not known.
    Unlisted(Option<RawString>),
}

impl Endpoint {
    /// The IP address, for inet endpoints.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Endpoint::Inet { addr, .. } => Some(*addr),
            _ => None,
        }
    }

    /// The port, for inet endpoints.
    pub fn port(&self) -> Option<u16> {
        match self {
            Endpoint::Inet { port, .. } => Some(*port),
            _ => None,
        }
    }
}

/// Whether the owner columns could be filled: a property of the socket and of what these
/// privileges can see, decided the same way whatever the filters (`sockstat::join::join` says
/// how; doc/json-schema.md, `owners_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OwnersStatus {
    /// Holders were found, and no process that could not be read may hold it too: `owners`
    /// lists every one.
    Known,
    /// Holders were found (`owners`), and a process whose fd table could not be read may hold
    /// it too.
    Partial,
    /// No process holds it: every process that could was read (TIME_WAIT, orphans, the
    /// kernel's own sockets).
    #[default]
    None,
    /// No holder was found, and a process whose fd table could not be read may hold it.
    Hidden,
    /// The owner scan was not asked for (`--no-owners`).
    NotRequested,
}

/// One (process, file descriptor) holding a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Owner {
    /// Process id (thread-group leader).
    pub pid: u32,
    /// File descriptor number in that process.
    pub fd: u32,
}

impl Owner {
    /// Descriptor `fd` of process `pid`.
    pub fn new(pid: u32, fd: u32) -> Owner {
        Owner { pid, fd }
    }
}

/// What is known of a process that holds sockets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// `/proc/PID/comm` (at most 15 bytes, set by the process itself: untrusted).
    pub command: Option<RawString>,
    /// Effective uid from `/proc/PID/status`.
    pub uid: Option<u32>,
    /// Arguments from `/proc/PID/cmdline`, when asked for (`-a`).
    pub args: Option<Vec<RawString>>,
}

impl Process {
    /// Process `pid`, nothing else known yet (no command, uid or arguments).
    pub fn new(pid: u32) -> Process {
        Process {
            pid,
            ..Process::default()
        }
    }
}

/// Queue sizes and timers the kernel reports with every inet socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Timer {
    /// `idiag_timer`: 0 off, 1 retransmit/probe, 2 keepalive, 3 TIME_WAIT, 4 persist (zero window).
    pub kind: u8,
    /// Milliseconds until it fires.
    pub expires_ms: u32,
    /// Retransmits or unanswered probes counted by that timer.
    pub retrans: u8,
}

/// One socket, with everything the listing shows.
///
/// Not `Serialize` on its own: the contract's socket object names each holder's command and
/// user, which live in the [`Snapshot`]; serialize the snapshot.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Socket {
    /// Socket inode (`socket:[N]`); `None` for TIME_WAIT and request sockets (the kernel reports 0).
    pub id: Option<u64>,
    /// Kernel socket cookie, the identity used to join samples over time (`None` from /proc text).
    pub cookie: Option<u64>,
    /// Protocol.
    pub proto: Proto,
    /// Address family.
    pub family: Family,
    /// Socket type.
    pub sock_type: SockType,
    /// State.
    pub state: State,
    /// Local end.
    pub local: Endpoint,
    /// Remote end; `None` when there is none.
    pub remote: Option<Endpoint>,
    /// Bytes waiting to be read; for LISTEN, the accept queue length.
    pub recv_q: u32,
    /// Bytes not yet acknowledged or sent; for LISTEN, the backlog.
    pub send_q: u32,
    /// The socket's uid as the kernel reports it (`None` for TIME_WAIT and request sockets).
    pub uid: Option<u32>,
    /// Whether `owners` could be filled.
    pub owners_status: OwnersStatus,
    /// Every (process, fd) that holds it, sorted by pid then fd.
    pub owners: Vec<Owner>,
    /// The kernel's timer for this socket, when reported (inet sockets).
    pub timer: Option<Timer>,
    /// The zone key of the namespace the socket lives in (see [`Snapshot::zones`]); `None` unless
    /// zones were read.
    pub netns: Option<u64>,
    /// TCP internals, when asked for (`-T`, `-C`) and the kernel sent them (not for TIME_WAIT).
    pub tcp: Option<Box<tcp::TcpDetails>>,
    /// Socket memory, when asked for (`-m`).
    pub memory: Option<Box<tcp::Memory>>,
    /// cgroup-v2 id of the socket (`INET_DIAG_CGROUP_ID`, 5.8+): the cgroup of the process that
    /// created it; see [`Snapshot::cgroups`] for its path. Inet sockets only.
    pub cgroup_id: Option<u64>,
    /// Index of the interface the socket is bound to (`SO_BINDTODEVICE`, a VRF; sock_diag's
    /// `idiag_if`): `None` when unbound, or not known (the /proc fallback). Closing a bound
    /// socket needs it (`sockstat kill`).
    pub bound_ifindex: Option<std::num::NonZeroU32>,
}

impl Socket {
    /// A socket with these identifying fields and nothing else known yet: no inode or cookie,
    /// empty queues, no uid, no holders (`none`), no timer, zone or details. Gatherers and
    /// tests fill in the rest.
    pub fn new(
        proto: Proto,
        family: Family,
        sock_type: SockType,
        state: State,
        local: Endpoint,
        remote: Option<Endpoint>,
    ) -> Socket {
        Socket {
            id: None,
            cookie: None,
            proto,
            family,
            sock_type,
            state,
            local,
            remote,
            recv_q: 0,
            send_q: 0,
            uid: None,
            owners_status: OwnersStatus::None,
            owners: Vec::new(),
            timer: None,
            netns: None,
            tcp: None,
            memory: None,
            cgroup_id: None,
            bound_ifindex: None,
        }
    }

    /// True when the socket has a remote end (connected, or in a connection state).
    pub fn is_connected(&self) -> bool {
        match self.state {
            State::Listen | State::Unconn | State::Close | State::Untold => false,
            State::Unknown(_) => self.remote.is_some(),
            _ => true,
        }
    }

    /// True when the socket waits for peers: TCP/unix LISTEN, or a bound unconnected datagram
    /// socket.
    pub fn is_listening(&self) -> bool {
        match self.state {
            State::Listen => true,
            State::Unconn => match &self.local {
                Endpoint::Inet { port, .. } => *port != 0 || self.proto == Proto::Raw,
                Endpoint::Unix(name) => name.is_some(),
                // Packet sockets; netlink sockets, which have a port id (the kernel's, or one
                // bound) once they are in the table.
                _ => true,
            },
            _ => false,
        }
    }

    /// The protocol as JSON names it: [`Proto::name`], except `icmp6` for an IPv6 ping socket
    /// (ICMPv6 is a protocol of its own).
    pub fn proto_name(&self) -> &'static str {
        self.proto.name_in(self.family)
    }

    /// The PROTO column: `tcp4`, `udp6`, `stream`, `dgram`, `seqpac`, `packet`, ...
    pub fn proto_label(&self) -> &'static str {
        let v6 = self.family == Family::Inet6;
        match (self.proto, v6) {
            (Proto::Tcp, false) => "tcp4",
            (Proto::Tcp, true) => "tcp6",
            (Proto::Udp, false) => "udp4",
            (Proto::Udp, true) => "udp6",
            (Proto::Udplite, false) => "udplite4",
            (Proto::Udplite, true) => "udplite6",
            (Proto::Raw, false) => "raw4",
            (Proto::Raw, true) => "raw6",
            (Proto::Icmp, false) => "icmp4",
            (Proto::Icmp, true) => "icmp6",
            (Proto::Sctp, false) => "sctp4",
            (Proto::Sctp, true) => "sctp6",
            (Proto::Mptcp, false) => "mptcp4",
            (Proto::Mptcp, true) => "mptcp6",
            (Proto::Unix, _) => match self.sock_type {
                SockType::Stream => "stream",
                SockType::Dgram => "dgram",
                SockType::Seqpacket => "seqpac",
                SockType::Raw => "raw",
                SockType::Unknown => "unix",
            },
            (Proto::Packet, _) => match self.sock_type {
                SockType::Dgram => "pkt_dg",
                _ => "packet",
            },
            (Proto::Netlink, _) => "netlink",
            // The table shows the kernel's name of its protocol instead (text::fmt).
            (Proto::Other, _) => "other",
        }
    }

    /// The kernel's name of the protocol of a socket of [`Proto::Other`] (`PINGv6`), when it
    /// could be read.
    pub fn kernel_protocol(&self) -> Option<&RawString> {
        match &self.local {
            Endpoint::Unlisted(name) => name.as_ref(),
            _ => None,
        }
    }

    /// The kind `-P` selects this socket as: its own, or for a socket of [`Proto::Other`] the
    /// kind the kernel's name of its protocol says (an unbound UDP socket is one `-P udp`
    /// asks for, `PINGv6` one of `-P icmp`); `None` for a protocol no `-P` kind names.
    pub fn selected_as(&self) -> Option<Proto> {
        match self.proto {
            Proto::Other => self
                .kernel_protocol()
                .and_then(|n| kernel_kind(n.as_bytes()).listed_as),
            p => Some(p),
        }
    }

    /// True for the kernel's own sockets, which no process holds: a netlink socket with port id
    /// 0 (`netlink_kernel_create`; a process's socket gets a port id when it binds, and an
    /// unbound one is in no table).
    pub fn is_kernel_socket(&self) -> bool {
        matches!(self.local, Endpoint::Netlink { port_id: 0, .. })
    }
}

/// Everything one query saw, ready to filter and render.
///
/// It serializes to the listing document of the JSON contract, schema version 1
/// (`doc/json-schema.md`, `doc/sockstat.schema.json`): what `sockstat --json` prints, with every
/// detail the snapshot holds (TCP internals, memory, timers, cgroups, arguments and warning
/// details when they were gathered). See [`crate::render::json`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Snapshot {
    /// The sockets, in output order.
    pub sockets: Vec<Socket>,
    /// Every process named in some `owners` list, by pid.
    pub processes: HashMap<u32, Process>,
    /// User names by uid, for every uid in the snapshot (`None`: no such user in the user
    /// database); empty when numeric uids were asked for.
    pub users: HashMap<u32, Option<String>>,
    /// What could not be seen.
    pub warnings: Vec<Warning>,
    /// cgroup paths by id, filled when asked for (`--cgroup`) and a cgroup2 hierarchy is mounted.
    pub cgroups: HashMap<u64, String>,
    /// The zones (network namespaces) read, by the key found in `Socket::netns`; empty unless
    /// zones were asked for (`-Z`, `-z`).
    pub zones: std::collections::BTreeMap<u64, crate::zone::Zone>,
    /// Interface names by (the socket's `netns` key, interface index), for the interfaces
    /// sockets are bound to (packet sockets, `SO_BINDTODEVICE`); an index missing here is shown
    /// as a number (the interface went away, or the zone was read from outside).
    pub interfaces: HashMap<(Option<u64>, u32), String>,
    /// The holders of unix sockets that are the peers of sockets listed, by inode, for peers
    /// whose holders the listing does not show itself: a peer the filters left out, or, with an
    /// owner filter (`--pid`, `--command`, `--user`), any peer. Every holder, whatever the
    /// filter. [`Snapshot::peer_owners`] looks a peer up here first, then among the sockets.
    pub peer_owners: HashMap<u64, Vec<Owner>>,
    /// What the owner scan could not see (the evidence the owner statuses were decided from),
    /// when it ran: kept so that a consumer that narrows the sockets further
    /// ([`crate::kill::select`]) counts the warnings again over what it keeps
    /// ([`crate::join::warnings`]).
    pub owners_unseen: Option<Unseen>,
}

/// Whether `/proc` hides other users' processes from the reader (`hidepid`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HidePid {
    /// It does not (or the reader may see through it: CAP_SYS_PTRACE, the `gid=` group).
    #[default]
    No,
    /// It does: `mount_point` is mounted with `option` (`hidepid=2`, `hidepid=invisible`, ...).
    Hides {
        /// Where that proc is mounted.
        mount_point: std::path::PathBuf,
        /// The option, as in mountinfo.
        option: String,
    },
    /// It could not be told (the mount table could not be read: the reason): other users'
    /// processes may be invisible.
    Unknown(String),
}

/// What the scan could not see, the evidence [`crate::join::join`] decides owner statuses from: a census of
/// every process, whatever the filters (a scan that reads only some processes' fds still
/// learns which of the others it could not have read: `sys::owners::scan_candidates`).
#[derive(Debug, Clone, Default)]
pub struct Unseen {
    /// Processes whose fd tables these privileges may not read, with their uid when known.
    pub unreadable: Vec<(u32, Option<u32>)>,
    /// Processes whose fd tables could not be read for another reason (too many open files, no
    /// memory), with their uid when known and the error.
    pub failed: Vec<(u32, Option<u32>, String)>,
    /// Whether other users' processes are invisible altogether.
    pub hidepid: HidePid,
    /// The reader's effective uid.
    pub euid: u32,
}

impl Snapshot {
    /// The user name for a uid, if it was resolved.
    pub fn user_name(&self, uid: u32) -> Option<&str> {
        self.users.get(&uid).and_then(|n| n.as_deref())
    }

    /// The zone a socket lives in, when zones were read.
    pub fn zone_of(&self, s: &Socket) -> Option<&crate::zone::Zone> {
        self.zones.get(&s.netns?)
    }

    /// The name of interface `ifindex` in the namespace of socket `s`, when known.
    pub fn interface_name(&self, s: &Socket, ifindex: u32) -> Option<&str> {
        self.interfaces.get(&(s.netns, ifindex)).map(String::as_str)
    }

    /// Every holder of the unix socket `peer` (the peer of a listed socket) as far as the
    /// listing knows them: from [`Snapshot::peer_owners`], else from the listed socket with
    /// that inode (`listed`, e.g. an index of the listed unix sockets by inode).
    pub fn peer_holders<'a>(
        &'a self,
        peer: u64,
        listed: impl FnOnce(u64) -> Option<&'a Socket>,
    ) -> &'a [Owner] {
        match self.peer_owners.get(&peer) {
            Some(o) => o,
            None => listed(peer).map_or(&[], |s| &s.owners[..]),
        }
    }

    /// The process record of a pid.
    pub fn process(&self, pid: u32) -> Option<&Process> {
        self.processes.get(&pid)
    }

    /// Every holder of `socket` with its process: pid, fd, command, uid and user name, in the
    /// order of [`Socket::owners`]. An owner names a process by pid; its command and user live
    /// in [`Snapshot::processes`] and [`Snapshot::users`], joined here as the listing joins
    /// them (the USER column and the JSON owner object).
    ///
    /// ```
    /// # fn show(snap: &sockstat::Snapshot) {
    /// for s in &snap.sockets {
    ///     for h in snap.holders(s) {
    ///         let cmd = h.command.map(|c| c.to_string()).unwrap_or_else(|| "?".into());
    ///         println!("{} {cmd}[{}] fd {} user {:?}", s.local, h.pid, h.fd, h.user);
    ///     }
    /// }
    /// # }
    /// ```
    pub fn holders<'a>(
        &'a self,
        socket: &'a Socket,
    ) -> impl ExactSizeIterator<Item = Holder<'a>> + DoubleEndedIterator + 'a {
        socket.owners.iter().map(|o| self.holder(o))
    }

    /// One owner joined with its process (see [`Snapshot::holders`]).
    pub fn holder(&self, owner: &Owner) -> Holder<'_> {
        let process = self.process(owner.pid);
        let uid = process.and_then(|p| p.uid);
        Holder {
            pid: owner.pid,
            fd: owner.fd,
            command: process.and_then(|p| p.command.as_ref()),
            uid,
            user: uid.and_then(|u| self.user_name(u)),
            process,
        }
    }
}

/// What a kernel protocol name (`sk_prot_creator->name`) says of a socket: its family, its
/// type where the name settles it, and the kind `-P` lists it as when sockstat has a table for
/// it. Names from `net/ipv4`, `net/ipv6`, `net/unix`, `net/packet`, `net/netlink` (6.18).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KernelKind {
    /// The family the name belongs to ([`Family::Other`] for a name not in the list).
    pub family: Family,
    /// The socket type, where the name settles it.
    pub sock_type: SockType,
    /// The kind `-P` lists it as, when sockstat has a table for that kind.
    pub listed_as: Option<Proto>,
}

/// What the kernel's protocol name `name` says of a socket ([`KernelKind`]).
pub(crate) fn kernel_kind(name: &[u8]) -> KernelKind {
    use Family::*;
    let (family, sock_type, listed_as) = match name {
        b"TCP" => (Inet, SockType::Stream, Some(Proto::Tcp)),
        b"TCPv6" => (Inet6, SockType::Stream, Some(Proto::Tcp)),
        b"UDP" => (Inet, SockType::Dgram, Some(Proto::Udp)),
        b"UDPv6" => (Inet6, SockType::Dgram, Some(Proto::Udp)),
        b"UDP-Lite" => (Inet, SockType::Dgram, Some(Proto::Udplite)),
        b"UDPLITEv6" => (Inet6, SockType::Dgram, Some(Proto::Udplite)),
        b"RAW" => (Inet, SockType::Raw, Some(Proto::Raw)),
        b"RAWv6" => (Inet6, SockType::Raw, Some(Proto::Raw)),
        b"PING" => (Inet, SockType::Dgram, Some(Proto::Icmp)),
        b"PINGv6" => (Inet6, SockType::Dgram, Some(Proto::Icmp)),
        b"SCTP" => (Inet, SockType::Unknown, Some(Proto::Sctp)),
        b"SCTPv6" => (Inet6, SockType::Unknown, Some(Proto::Sctp)),
        b"MPTCP" => (Inet, SockType::Stream, Some(Proto::Mptcp)),
        b"MPTCPv6" => (Inet6, SockType::Stream, Some(Proto::Mptcp)),
        // unix_dgram_proto; unix_stream_proto serves SOCK_STREAM and SOCK_SEQPACKET.
        b"UNIX" => (Unix, SockType::Dgram, Some(Proto::Unix)),
        b"UNIX-STREAM" => (Unix, SockType::Unknown, Some(Proto::Unix)),
        b"PACKET" => (Packet, SockType::Unknown, Some(Proto::Packet)),
        b"NETLINK" => (Netlink, SockType::Unknown, Some(Proto::Netlink)),
        _ => (Other, SockType::Unknown, None),
    };
    KernelKind {
        family,
        sock_type,
        listed_as,
    }
}

/// A (process, file descriptor) holding a socket, with what the snapshot knows of the process:
/// what [`Snapshot::holders`] gives. Borrowed from the snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Holder<'a> {
    /// Process id (thread-group leader).
    pub pid: u32,
    /// File descriptor number in that process.
    pub fd: u32,
    /// The process's command (`/proc/PID/comm`), when it could be read. Untrusted: its
    /// `Display` escapes control characters as the listing does.
    pub command: Option<&'a RawString>,
    /// The process's effective uid, when it could be read.
    pub uid: Option<u32>,
    /// The user name of `uid`, when it was resolved (not with numeric uids, as `-n` asks).
    pub user: Option<&'a str>,
    /// The whole process record (arguments with `-a`), when the snapshot has it.
    pub process: Option<&'a Process>,
}
#[cfg(test)]
mod holders {
    use super::*;

    #[test]
    fn a_holder_carries_its_process_and_user_and_an_unseen_process_stays_unknown() {
        let mut snap = Snapshot::default();
        let mut s = Socket::new(
            Proto::Tcp,
            Family::Inet,
            SockType::Stream,
            State::Listen,
            Endpoint::Inet {
                addr: IpAddr::from([0, 0, 0, 0]),
                port: 8080,
            },
            None,
        );
        s.owners = vec![Owner { pid: 812, fd: 6 }, Owner { pid: 900, fd: 3 }];
        snap.processes.insert(
            812,
            Process {
                pid: 812,
                command: Some(RawString::new(b"nginx")),
                uid: Some(33),
                args: None,
            },
        );
        snap.users.insert(33, Some("www-data".into()));
        let got: Vec<_> = snap
            .holders(&s)
            .map(|h| (h.pid, h.fd, h.command.map(|c| c.to_string()), h.uid, h.user))
            .collect();
        assert_eq!(
            got,
            [
                (
                    812,
                    6,
                    Some("nginx".to_string()),
                    Some(33),
                    Some("www-data")
                ),
                (900, 3, None, None, None),
            ]
        );
        assert_eq!(snap.holders(&s).len(), 2);
        assert_eq!(snap.holder(&s.owners[0]).process, snap.process(812));
    }
}

#[cfg(test)]
mod size_guard {
    /// The per-socket memory of big tables (doc/reference/BENCHMARKS.md, "Big tables") is mostly this
    /// struct: keep what only some listings carry (memory, tcp_info) boxed.
    #[test]
    fn a_socket_stays_small() {
        assert!(
            std::mem::size_of::<super::Socket>() <= 208,
            "Socket grew to {} bytes",
            std::mem::size_of::<super::Socket>()
        );
    }
}
