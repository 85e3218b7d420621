//! Connection events: every TCP connect, accept, close and failed connect, as the kernel saw
//! it happen, with the process that called `connect()` or `accept()`.
//!
//! The records come from BPF programs on kernel tracepoints, loaded and read by the use case's tracer (`crate::run::events::Tracer`); this
//! module turns one raw record into a [`ConnEvent`] (what happened, to which connection, by
//! whom, how long it took, how it ended), decides which events a [`Query`] selects, and tells
//! who is on the other end of a connection whose both ends are on this host ([`Peers`]).
//! [`stats`] aggregates events per side, command and destination. Nothing here does I/O: the tracer, the
//! namespaces a query selects and the user names are gathered by the use case
//! (`crate::run::events`).
//!
//! How a close is classified (the kernel's own bookkeeping, read when the socket moves to
//! CLOSE; see doc/events.md):
//!
//! | state left | `sk_err` | end |
//! |---|---|---|
//! | SYN_SENT | ECONNREFUSED / ETIMEDOUT / EHOSTUNREACH, ... | `failed`: refused / timeout / unreachable |
//! | SYN_SENT | 0, no local port | `failed`: no-local-port (connect() found no free port) |
//! | SYN_SENT | 0 | `failed`: aborted (closed before the handshake finished) |
//! | any | ECONNRESET, EPIPE | reset-received |
//! | any | ETIMEDOUT, EHOSTUNREACH, ... | timeout |
//! | any | ECONNABORTED | aborted (`sockstat kill`, `ss -K`) |
//! | FIN_WAIT1, FIN_WAIT2, CLOSING | 0 | local-close (this end holds the TIME-WAIT) |
//! | LAST_ACK | 0 | remote-close |
//! | ESTABLISHED, CLOSE_WAIT | 0 | reset-sent (closed with unread data, or SO_LINGER 0) |

pub mod drops;
pub mod metrics;
pub mod openers;
pub mod stats;

/// One raw record as the kernel programs write it.
pub use sockstat_wire::tcp_events::Record;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use sockstat_wire::tcp_events::{flag, kind, side, state};

use crate::model::{Endpoint, Family, Owner, OwnersStatus, Process, Proto, RawString, SockType};
use crate::model::{Socket, State};
use crate::query::Query;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum EventKind {
    /// A connect() completed (SYN_SENT -> ESTABLISHED).
    Connect,
    /// accept() took the connection off a listener's queue.
    Accept,
    /// An established connection ended.
    Close,
    /// A connect() ended without a connection.
    Failed,
}

impl EventKind {
    /// The name in JSON and text.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Connect => "connect",
            EventKind::Accept => "accept",
            EventKind::Close => "close",
            EventKind::Failed => "failed",
        }
    }
}

/// Which end of the connection this socket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// This end called connect().
    Client,
    /// This end was accepted from a listener.
    Server,
}

impl Side {
    /// The name in JSON and text.
    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// How an established connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum End {
    /// This end sent its FIN first: the TIME-WAIT entry is here.
    LocalClose,
    /// The other end sent its FIN first.
    RemoteClose,
    /// This end reset the connection (closed with unread data, or SO_LINGER 0).
    ResetSent,
    /// The other end reset it.
    ResetReceived,
    /// Retransmissions or keepalives ran out.
    Timeout,
    /// Destroyed from outside (`sockstat kill`, `ss -K`: ECONNABORTED).
    Aborted,
}

impl End {
    /// The name in JSON and text.
    pub fn name(self) -> &'static str {
        match self {
            End::LocalClose => "local-close",
            End::RemoteClose => "remote-close",
            End::ResetSent => "reset-sent",
            End::ResetReceived => "reset-received",
            End::Timeout => "timeout",
            End::Aborted => "aborted",
        }
    }
}

/// Why a connect() failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FailReason {
    /// The other end answered with a reset: nothing listens there (ECONNREFUSED).
    Refused,
    /// No answer before the SYN retransmissions ran out (ETIMEDOUT).
    Timeout,
    /// An ICMP error said the host or network cannot be reached.
    Unreachable,
    /// connect() found no free local port for this destination (EADDRNOTAVAIL).
    NoLocalPort,
    /// The socket was closed before the handshake finished.
    Aborted,
    /// Another error (the errno is in the event).
    Error,
}

impl FailReason {
    /// The name in JSON and text.
    pub fn name(self) -> &'static str {
        match self {
            FailReason::Refused => "refused",
            FailReason::Timeout => "timeout",
            FailReason::Unreachable => "unreachable",
            FailReason::NoLocalPort => "no-local-port",
            FailReason::Aborted => "aborted",
            FailReason::Error => "error",
        }
    }
}

/// The process that called connect() or accept().
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EventProcess {
    /// Process id (the thread group).
    pub pid: u32,
    /// Command name (`comm`, at most 15 bytes).
    pub command: RawString,
    /// Its uid.
    pub uid: u32,
    /// Its user name, when the user database has one.
    pub user: Option<String>,
}

/// Why an event names no process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ProcessStatus {
    /// A server connection that closed before any process accepted it.
    NeverAccepted,
    /// Not seen: the connection was opened before tracing started, accepted by a means the
    /// tracer does not see (io_uring), or its entry did not fit the kernel's table.
    Unknown,
}

impl ProcessStatus {
    /// The name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            ProcessStatus::NeverAccepted => "never-accepted",
            ProcessStatus::Unknown => "unknown",
        }
    }
}

/// One connection event.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConnEvent {
    /// What happened.
    pub kind: EventKind,
    /// When the kernel saw it.
    pub time: SystemTime,
    /// The same instant on the monotonic clock (ns), for ordering and intervals.
    pub monotonic_ns: u64,
    /// Kernel socket cookie.
    pub cookie: u64,
    /// IPv4 or IPv6.
    pub family: Family,
    /// This end.
    pub local: SocketAddr,
    /// The other end.
    pub remote: SocketAddr,
    /// Network namespace inode.
    pub netns: u64,
    /// The socket's uid (`sk_uid`: the creator's, or the listener's for an accepted socket).
    pub socket_uid: u32,
    /// Which end this is; `None` for a connection opened before tracing started.
    pub side: Option<Side>,
    /// Who called connect() (client) or accept() (server).
    pub process: Option<EventProcess>,
    /// Why `process` is `None`.
    pub process_status: Option<ProcessStatus>,
    /// The process on the other end, when it is on this host and was seen.
    pub peer: Option<EventProcess>,
    /// close: from ESTABLISHED to the end (µs).
    pub duration_us: Option<u64>,
    /// client: connect() to ESTABLISHED; failed: how long it tried (µs).
    pub connect_latency_us: Option<u64>,
    /// server: ESTABLISHED to accept() (µs).
    pub accept_wait_us: Option<u64>,
    /// client: SYNs sent again; server: SYN-ACKs sent again.
    pub syn_retransmits: Option<u32>,
    /// close: payload acknowledged by the peer (bytes).
    pub bytes_sent: Option<u64>,
    /// close: payload received in order (bytes).
    pub bytes_received: Option<u64>,
    /// close: how it ended.
    pub end: Option<End>,
    /// failed: why.
    pub reason: Option<FailReason>,
    /// failed with [`FailReason::Error`], or a close by an unexpected error: the errno.
    pub errno: Option<i32>,
}

/// Converts the kernel's monotonic timestamps into wall-clock time.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Wall-clock time at monotonic 0, in ns since the epoch.
    realtime_at_zero_ns: i128,
}

impl Clock {
    /// Reads both clocks now.
    pub fn now() -> Clock {
        let mono_ns = Clock::monotonic_now();
        let real = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        Clock {
            realtime_at_zero_ns: real.as_nanos() as i128 - i128::from(mono_ns),
        }
    }

    /// A clock whose monotonic 0 is `epoch_ns` of wall-clock time (for tests).
    pub fn fixed(epoch_ns: i128) -> Clock {
        Clock {
            realtime_at_zero_ns: epoch_ns,
        }
    }

    /// The wall-clock time of a monotonic timestamp.
    pub fn wall(&self, monotonic_ns: u64) -> SystemTime {
        let ns = (self.realtime_at_zero_ns + i128::from(monotonic_ns)).max(0);
        SystemTime::UNIX_EPOCH + Duration::from_nanos(ns.min(u64::MAX as i128) as u64)
    }

    /// The monotonic time now (ns).
    pub fn monotonic_now() -> u64 {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid out-parameter; CLOCK_MONOTONIC always exists on Linux, and on
        // the impossible failure `t` stays zero.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
        (t.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec as u64)
    }
}

const ECONNREFUSED: i32 = 111;
const ETIMEDOUT: i32 = 110;
const ECONNRESET: i32 = 104;
const EPIPE: i32 = 32;
const ECONNABORTED: i32 = 103;
const EHOSTUNREACH: i32 = 113;
const ENETUNREACH: i32 = 101;
const EHOSTDOWN: i32 = 112;
const ENETDOWN: i32 = 100;
const ENONET: i32 = 64;
const EPROTO: i32 = 71;

fn unreachable_errno(e: i32) -> bool {
    matches!(
        e,
        EHOSTUNREACH | ENETUNREACH | EHOSTDOWN | ENETDOWN | ENONET | EPROTO
    )
}

fn addr(family: u16, raw: &[u8; 16], port: u16) -> SocketAddr {
    let ip = if family == 2 {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(*raw))
    };
    SocketAddr::new(ip, port)
}

fn micros(from: u64, to: u64) -> Option<u64> {
    (from != 0 && to >= from).then(|| (to - from) / 1000)
}

/// The command name of a record: `comm` up to its first NUL.
fn comm(raw: &[u8; 16]) -> RawString {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    RawString::new(&raw[..end])
}

/// How an established connection ended, from the state it left and `sk_err`.
pub fn classify_end(old_state: u8, sk_err: i32) -> End {
    match sk_err {
        ECONNRESET | EPIPE => End::ResetReceived,
        ECONNABORTED => End::Aborted,
        0 => match old_state {
            state::FIN_WAIT1 | state::FIN_WAIT2 | state::CLOSING | state::TIME_WAIT => {
                End::LocalClose
            }
            state::LAST_ACK => End::RemoteClose,
            _ => End::ResetSent,
        },
        // ETIMEDOUT, or the soft ICMP error the retransmission timer gave up on.
        _ => End::Timeout,
    }
}

/// Why a connect failed, from `sk_err` and whether a local port had been assigned.
pub fn classify_failure(sk_err: i32, has_local_port: bool) -> FailReason {
    match sk_err {
        ECONNREFUSED => FailReason::Refused,
        ETIMEDOUT => FailReason::Timeout,
        e if unreachable_errno(e) => FailReason::Unreachable,
        0 if !has_local_port => FailReason::NoLocalPort,
        0 => FailReason::Aborted,
        _ => FailReason::Error,
    }
}

impl ConnEvent {
    /// The event a record describes; `None` for a record of an unknown kind (which the
    /// programs never write). User names are filled later (`crate::run::events::UserNames`).
    pub fn from_record(r: &Record, clock: &Clock) -> Option<ConnEvent> {
        let known = r.flags & flag::KNOWN != 0;
        let established = r.flags & flag::ESTABLISHED != 0;
        let side = match r.side {
            side::CLIENT => Some(Side::Client),
            side::SERVER => Some(Side::Server),
            _ => None,
        };
        let kind = match r.kind {
            kind::CONNECT => EventKind::Connect,
            kind::ACCEPT => EventKind::Accept,
            kind::CLOSE if r.old_state == state::SYN_SENT => EventKind::Failed,
            kind::CLOSE => EventKind::Close,
            _ => return None,
        };
        let process = (r.flags & flag::PROCESS != 0).then(|| EventProcess {
            pid: r.pid,
            command: comm(&r.comm),
            uid: r.uid,
            user: None,
        });
        let process_status = match (&process, side) {
            (Some(_), _) => None,
            (None, Some(Side::Server)) if r.flags & flag::ACCEPTED == 0 && known => {
                Some(ProcessStatus::NeverAccepted)
            }
            (None, _) => Some(ProcessStatus::Unknown),
        };
        let mut e = ConnEvent {
            kind,
            time: clock.wall(r.now_ns),
            monotonic_ns: r.now_ns,
            cookie: r.cookie,
            family: if r.family == 2 {
                Family::Inet
            } else {
                Family::Inet6
            },
            local: addr(r.family, &r.local_addr, r.local_port),
            remote: addr(r.family, &r.remote_addr, r.remote_port),
            netns: u64::from(r.netns),
            socket_uid: r.sk_uid,
            side,
            process,
            process_status,
            peer: None,
            duration_us: None,
            connect_latency_us: None,
            accept_wait_us: None,
            syn_retransmits: None,
            bytes_sent: None,
            bytes_received: None,
            end: None,
            reason: None,
            errno: None,
        };
        let client = side == Some(Side::Client);
        let server = side == Some(Side::Server);
        match kind {
            EventKind::Connect => {
                if known && established {
                    e.connect_latency_us = micros(r.start_ns, r.established_ns);
                    e.syn_retransmits = Some(r.syn_retrans);
                }
            }
            EventKind::Accept => {
                if established {
                    e.accept_wait_us = micros(r.established_ns, r.accepted_ns);
                    e.syn_retransmits = Some(r.syn_retrans);
                }
            }
            EventKind::Failed => {
                // The SYN_SENT -> CLOSE of a connect that never completed.
                e.side = Some(Side::Client);
                e.process_status = e.process.is_none().then_some(ProcessStatus::Unknown);
                let reason = classify_failure(r.sk_err, r.local_port != 0);
                e.errno = (reason == FailReason::Error).then_some(r.sk_err);
                e.reason = Some(reason);
                if known {
                    e.connect_latency_us = micros(r.start_ns, r.now_ns);
                }
                e.syn_retransmits = Some(r.total_retrans);
            }
            EventKind::Close => {
                let end = classify_end(r.old_state, r.sk_err);
                e.end = Some(end);
                if end == End::Timeout && r.sk_err != ETIMEDOUT {
                    e.errno = Some(r.sk_err);
                }
                if known && established {
                    e.duration_us = micros(r.established_ns, r.now_ns);
                    if client {
                        e.connect_latency_us = micros(r.start_ns, r.established_ns);
                    }
                    if server && r.flags & flag::ACCEPTED != 0 {
                        e.accept_wait_us = micros(r.established_ns, r.accepted_ns);
                    }
                    e.syn_retransmits = Some(r.syn_retrans);
                    // bytes_acked counts our FIN once the peer acknowledged it, and
                    // bytes_received the peer's FIN once it arrived: neither is payload.
                    let our_fin_acked = r.old_state == state::FIN_WAIT2
                        || (matches!(r.old_state, state::CLOSING | state::LAST_ACK)
                            && r.sk_err == 0);
                    let peer_fin = r.flags & flag::PEER_FIN != 0;
                    e.bytes_sent = Some(
                        r.bytes_acked
                            .saturating_sub(r.bytes_acked_at_establish)
                            .saturating_sub(u64::from(our_fin_acked)),
                    );
                    e.bytes_received = Some(
                        r.bytes_received
                            .saturating_sub(r.bytes_received_at_establish)
                            .saturating_sub(u64::from(peer_fin)),
                    );
                }
            }
        }
        Some(e)
    }

    /// The connection as a [`Socket`], for the listing's socket filters.
    fn as_socket(&self) -> Socket {
        Socket {
            id: None,
            cookie: Some(self.cookie),
            proto: Proto::Tcp,
            family: self.family,
            sock_type: SockType::Stream,
            state: State::Established,
            local: Endpoint::Inet {
                addr: self.local.ip(),
                port: self.local.port(),
            },
            remote: Some(Endpoint::Inet {
                addr: self.remote.ip(),
                port: self.remote.port(),
            }),
            recv_q: 0,
            send_q: 0,
            uid: Some(self.socket_uid),
            owners_status: OwnersStatus::NotRequested,
            owners: Vec::new(),
            timer: None,
            netns: Some(self.netns),
            tcp: None,
            memory: None,
            cgroup_id: None,
            bound_ifindex: None,
        }
    }

    /// Whether the query's filters select this event: family, ports, addresses and loopback
    /// as the listing applies them; `--pid`, `--user` and `--command` on the process that
    /// called connect() or accept() (`--user` on the socket's uid when there is none).
    pub fn matches(&self, q: &Query) -> bool {
        if !q.matches_socket(&self.as_socket()) {
            return false;
        }
        if q.select.pids.is_none() && q.select.uid.is_none() && q.select.command.is_none() {
            return true;
        }
        match &self.process {
            Some(p) => q.matches_owner(
                &Owner { pid: p.pid, fd: 0 },
                Some(&Process {
                    pid: p.pid,
                    command: Some(p.command.clone()),
                    uid: Some(p.uid),
                    args: None,
                }),
            ),
            None => {
                q.select.pids.is_none()
                    && q.select.command.is_none()
                    && q.select.uid.is_none_or(|u| u == self.socket_uid)
            }
        }
    }
}

/// Events the kernel could not hand over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[non_exhaustive]
pub struct Lost {
    /// Records the ring buffer had no room for.
    pub ring_full: u64,
    /// Connections the kernel's table had no room for: their events carry no process or
    /// timing.
    pub table_full: u64,
    /// Tracepoint hits the kernel skipped because the program was already running on that CPU
    /// (a softirq interrupting it).
    pub missed_runs: u64,
}

impl Lost {
    /// Every event lost outright (the table-full ones are reported, only poorer).
    pub fn events(&self) -> u64 {
        self.ring_full + self.missed_runs
    }

    /// The increase from `before` to `self` (counters only grow).
    pub fn since(&self, before: &Lost) -> Lost {
        Lost {
            ring_full: self.ring_full.saturating_sub(before.ring_full),
            table_full: self.table_full.saturating_sub(before.table_full),
            missed_runs: self.missed_runs.saturating_sub(before.missed_runs),
        }
    }

    /// True when nothing was lost.
    pub fn is_zero(&self) -> bool {
        *self == Lost::default()
    }
}

/// The processes behind the open connections seen so far, to name the other end of a
/// connection whose both ends are on this host. Ends that closed are kept for a short while
/// ([`Peers::RETAIN`]), since the other end often closes a moment later.
#[derive(Debug, Default)]
pub struct Peers {
    open: rustc_hash::FxHashMap<(u64, SocketAddr, SocketAddr), (EventProcess, Option<u64>)>,
    /// When [`Peers::expire`] last swept (ns): it sweeps at most every [`Peers::RETAIN`] / 4.
    swept: u64,
}

impl Peers {
    /// How long a closed end is remembered (ns).
    pub const RETAIN: u64 = 2_000_000_000;

    /// Learns from `e` and fills in its peer, if the other end is known.
    pub fn observe(&mut self, e: &mut ConnEvent) {
        let here = (e.netns, e.local, e.remote);
        let there = (e.netns, e.remote, e.local);
        if let Some((p, _)) = self.open.get(&there) {
            e.peer = Some(p.clone());
        }
        match e.kind {
            EventKind::Connect | EventKind::Accept => {
                if let Some(p) = &e.process {
                    self.open.insert(here, (p.clone(), None));
                }
            }
            EventKind::Close | EventKind::Failed => {
                if let Some(entry) = self.open.get_mut(&here) {
                    entry.1 = Some(e.monotonic_ns);
                } else if let Some(p) = &e.process {
                    self.open.insert(here, (p.clone(), Some(e.monotonic_ns)));
                }
            }
        }
    }

    /// Forgets ends that closed more than [`Peers::RETAIN`] before `now_ns` (sweeping at most
    /// four times per [`Peers::RETAIN`], so an end may be remembered a quarter longer).
    pub fn expire(&mut self, now_ns: u64) {
        if now_ns.saturating_sub(self.swept) < Self::RETAIN / 4 {
            return;
        }
        self.swept = now_ns;
        self.open.retain(|_, (_, closed)| {
            closed.is_none_or(|t| now_ns.saturating_sub(t) < Self::RETAIN)
        });
    }

    /// Connections remembered.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// True when none are remembered.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sockstat_wire::tcp_events::Record;

    pub(crate) fn record(kind: u8, old: u8, side: u8) -> Record {
        let mut comm = [0u8; 16];
        comm[..7].copy_from_slice(b"python3");
        Record {
            kind,
            old_state: old,
            family: 2,
            flags: flag::KNOWN | flag::PROCESS | flag::ESTABLISHED,
            pid: 5446,
            uid: 1000,
            comm,
            netns: 4026531840,
            local_port: 51370,
            remote_port: 47001,
            local_addr: [127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            remote_addr: [127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            sk_err: 0,
            sk_uid: 1000,
            cookie: 8812,
            now_ns: 2_000_000_000,
            start_ns: 1_000_000_000,
            established_ns: 1_000_095_000,
            accepted_ns: 0,
            bytes_acked: 102,
            bytes_received: 201,
            bytes_acked_at_establish: 1,
            bytes_received_at_establish: 0,
            total_retrans: 0,
            syn_retrans: 0,
            side,
        }
    }

    fn clock() -> Clock {
        Clock::fixed(1_700_000_000_000_000_000)
    }

    #[test]
    fn a_client_close_carries_its_whole_life() {
        // FIN_WAIT2 -> CLOSE: we closed first, our FIN was acknowledged, the peer's arrived.
        let mut r = record(kind::CLOSE, state::FIN_WAIT2, side::CLIENT);
        r.flags |= flag::PEER_FIN;
        let e = ConnEvent::from_record(&r, &clock()).unwrap();
        assert_eq!(e.kind, EventKind::Close);
        assert_eq!(e.end, Some(End::LocalClose));
        assert_eq!(e.side, Some(Side::Client));
        assert_eq!(e.connect_latency_us, Some(95));
        assert_eq!(e.duration_us, Some(999_905));
        // 102 acked = SYN + 100 payload + FIN; 201 received = 200 payload + FIN.
        assert_eq!((e.bytes_sent, e.bytes_received), (Some(100), Some(200)));
        assert_eq!(e.local, "127.0.0.1:51370".parse().unwrap());
        let p = e.process.unwrap();
        assert_eq!(
            (p.pid, p.command.to_string_lossy().as_ref()),
            (5446, "python3")
        );
        assert_eq!(e.process_status, None);
    }

    #[test]
    fn a_server_close_after_the_peer_closed() {
        // CLOSE_WAIT -> LAST_ACK -> CLOSE: the peer closed first; our FIN was acknowledged.
        let mut r = record(kind::CLOSE, state::LAST_ACK, side::SERVER);
        r.flags |= flag::PEER_FIN | flag::ACCEPTED;
        r.accepted_ns = r.established_ns + 40_000;
        (r.bytes_acked, r.bytes_received) = (201, 101);
        r.bytes_acked_at_establish = 0;
        let e = ConnEvent::from_record(&r, &clock()).unwrap();
        assert_eq!(e.end, Some(End::RemoteClose));
        assert_eq!(e.accept_wait_us, Some(40));
        assert_eq!(e.connect_latency_us, None);
        assert_eq!((e.bytes_sent, e.bytes_received), (Some(200), Some(100)));
    }

    #[test]
    fn never_accepted_and_unknown_processes_say_so() {
        let mut r = record(kind::CLOSE, state::ESTABLISHED, side::SERVER);
        r.flags = flag::KNOWN | flag::ESTABLISHED;
        let e = ConnEvent::from_record(&r, &clock()).unwrap();
        assert_eq!(e.process, None);
        assert_eq!(e.process_status, Some(ProcessStatus::NeverAccepted));
        assert_eq!(e.end, Some(End::ResetSent));
        // Opened before tracing: nothing known but what the socket says.
        r.flags = 0;
        r.side = side::UNKNOWN;
        let e = ConnEvent::from_record(&r, &clock()).unwrap();
        assert_eq!(e.process_status, Some(ProcessStatus::Unknown));
        assert_eq!((e.side, e.duration_us, e.bytes_sent), (None, None, None));
    }

    #[test]
    fn failures_by_reason() {
        for (err, port, want) in [
            (ECONNREFUSED, 40000, FailReason::Refused),
            (ETIMEDOUT, 40000, FailReason::Timeout),
            (EHOSTUNREACH, 40000, FailReason::Unreachable),
            (0, 0, FailReason::NoLocalPort),
            (0, 40000, FailReason::Aborted),
            (12, 40000, FailReason::Error),
        ] {
            let mut r = record(kind::CLOSE, state::SYN_SENT, side::CLIENT);
            r.flags = flag::KNOWN | flag::PROCESS;
            r.sk_err = err;
            r.local_port = port;
            r.total_retrans = 2;
            r.now_ns = r.start_ns + 3_000_000_000;
            let e = ConnEvent::from_record(&r, &clock()).unwrap();
            assert_eq!(e.kind, EventKind::Failed);
            assert_eq!(e.reason, Some(want), "{err}");
            assert_eq!(e.connect_latency_us, Some(3_000_000));
            assert_eq!(e.syn_retransmits, Some(2));
            assert_eq!(e.errno, (want == FailReason::Error).then_some(12));
        }
    }

    #[test]
    fn ends_by_state_and_error() {
        assert_eq!(classify_end(state::FIN_WAIT2, 0), End::LocalClose);
        assert_eq!(classify_end(state::CLOSING, 0), End::LocalClose);
        assert_eq!(classify_end(state::LAST_ACK, 0), End::RemoteClose);
        assert_eq!(classify_end(state::ESTABLISHED, 0), End::ResetSent);
        assert_eq!(classify_end(state::CLOSE_WAIT, 0), End::ResetSent);
        assert_eq!(
            classify_end(state::ESTABLISHED, ECONNRESET),
            End::ResetReceived
        );
        assert_eq!(classify_end(state::CLOSE_WAIT, EPIPE), End::ResetReceived);
        assert_eq!(classify_end(state::ESTABLISHED, ETIMEDOUT), End::Timeout);
        assert_eq!(classify_end(state::ESTABLISHED, ECONNABORTED), End::Aborted);
    }

    #[test]
    fn filters_apply_to_the_connection_and_its_process() {
        let e = ConnEvent::from_record(
            &record(kind::CONNECT, state::SYN_SENT, side::CLIENT),
            &clock(),
        )
        .unwrap();
        let mut q = Query::new();
        assert!(e.matches(&q));
        q.select.ports = Some(crate::PortSet::parse("47001").unwrap());
        assert!(e.matches(&q));
        q.select.ports = Some(crate::PortSet::parse("80").unwrap());
        assert!(!e.matches(&q));
        q.select.ports = None;
        q.select.no_loopback = true;
        assert!(!e.matches(&q));
        q.select.no_loopback = false;
        q.select.command = Some(crate::query::CommandMatch::parse("py*").unwrap());
        assert!(e.matches(&q));
        q.select.pids = Some(vec![1]);
        assert!(!e.matches(&q));
        q.select.pids = None;
        q.select.families.inet = false;
        assert!(!e.matches(&q));
    }

    #[test]
    fn peers_name_the_other_end() {
        let c = clock();
        let mut peers = Peers::default();
        let mut connect =
            ConnEvent::from_record(&record(kind::CONNECT, state::SYN_SENT, side::CLIENT), &c)
                .unwrap();
        peers.observe(&mut connect);
        assert_eq!(connect.peer, None);
        let mut r = record(kind::ACCEPT, state::ESTABLISHED, side::SERVER);
        (r.local_port, r.remote_port, r.pid) = (47001, 51370, 7000);
        let mut accept = ConnEvent::from_record(&r, &c).unwrap();
        peers.observe(&mut accept);
        assert_eq!(accept.peer.as_ref().map(|p| p.pid), Some(5446));
        let mut close =
            ConnEvent::from_record(&record(kind::CLOSE, state::FIN_WAIT2, side::CLIENT), &c)
                .unwrap();
        peers.observe(&mut close);
        assert_eq!(close.peer.as_ref().map(|p| p.pid), Some(7000));
        // The closed end is remembered for a while, then forgotten.
        peers.expire(close.monotonic_ns + 1);
        assert_eq!(peers.len(), 2);
        peers.expire(close.monotonic_ns + Peers::RETAIN);
        assert_eq!(peers.len(), 1);
    }
}
