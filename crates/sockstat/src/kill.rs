//! Closing sockets from outside the processes that hold them (`sockstat kill`): which of the
//! sockets a listing selected may be closed, the request that names each one exactly, what
//! became of each, and the command line that closes the sockets a finding is about.
//!
//! The kernel side is sock_diag's `SOCK_DESTROY` (doc/kill.md). Each request carries the
//! socket's addresses, ports, bound interface and cookie; the kernel finds the socket by the
//! addresses and refuses when its cookie is another one, so a socket that closed after the
//! listing and was replaced by a new one with the same addresses is never touched: it is
//! reported [`Outcome::Gone`].
//!
//! Safety rules decided here, not in the command: a kill needs at least one filter that names
//! what to close ([`is_narrowed`]); sockets without a remote end (TCP LISTEN, bound UDP
//! sockets, TCP sockets bound and not listening) are only closed when the filters ask for them
//! by `-l` or by state ([`select`]).
//!
//! This module does no I/O except in [`close`], which talks to the kernel through the crate's
//! `sys::destroy` (and enters other network namespaces as the listing does).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use serde::Serialize;
use sockstat_wire::inet_diag::{AF_INET, AF_INET6, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_UDPLITE};
use sockstat_wire::sock_destroy::DestroyReq;

use crate::error::ErrorKind;
use crate::model::{
    counted, Endpoint, Family, Proto, Snapshot, Socket, State, Warning, WarningCode,
};
use crate::query::{Query, ZoneSelect};
use crate::sys::destroy::{self, Destroyer};
pub use crate::text::kill_command::{command_for, Target};

/// The protocols the kernel can close from outside (`diag_destroy` in `tcp_prot`, `udp_prot`,
/// `udplite_prot`).
pub const PROTOCOLS: [Proto; 2] = [Proto::Tcp, Proto::Udp];

/// What became of one socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Outcome {
    /// The kernel closed it: a TCP connection was reset (its process's next call fails with
    /// ECONNABORTED, the peer gets a RST); a UDP socket's pending call fails with ECONNABORTED
    /// and it loses its remote end; a TIME-WAIT entry is dropped.
    Killed,
    /// It was not there any more: closed since the listing, or replaced by another socket with
    /// the same addresses (another cookie), which is left alone.
    Gone,
    /// The kernel refused: closing needs CAP_NET_ADMIN over the socket's network namespace.
    NotPermitted,
    /// This kernel cannot close it (no `CONFIG_INET_DIAG_DESTROY`, no `SOCK_DESTROY` before
    /// Linux 4.5, TIME-WAIT entries before 6.0).
    Unsupported,
    /// Anything else: the request could not be sent, or the kernel gave an unexpected error.
    Failed,
}

impl Outcome {
    /// The name in the text and JSON output (`killed`, `gone`, `not-permitted`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Killed => "killed",
            Outcome::Gone => "gone",
            Outcome::NotPermitted => "not-permitted",
            Outcome::Unsupported => "unsupported",
            Outcome::Failed => "failed",
        }
    }

    /// The outcome of the kernel's answer to one request: 0 or a positive errno.
    ///
    /// ENOENT: no socket with these addresses (a UDP socket with another cookie too; a TCP
    /// socket already closed, 6.11+). ESTALE: a TCP socket with these addresses but another
    /// cookie. EPERM: no CAP_NET_ADMIN. EOPNOTSUPP: the protocol or this kernel cannot close
    /// it. EINVAL: a kernel without `SOCK_DESTROY` (before 4.5) rejects the message type.
    pub fn from_errno(errno: i32) -> Outcome {
        match errno {
            0 => Outcome::Killed,
            libc::ENOENT | libc::ESTALE => Outcome::Gone,
            libc::EPERM | libc::EACCES => Outcome::NotPermitted,
            libc::EOPNOTSUPP | libc::EINVAL => Outcome::Unsupported,
            _ => Outcome::Failed,
        }
    }

    /// True when the socket is closed now (killed here, or gone already): what the operator
    /// asked for holds.
    pub fn is_closed(self) -> bool {
        matches!(self, Outcome::Killed | Outcome::Gone)
    }
}

/// The result for one socket: the outcome and, when there is more to say, why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// What happened.
    pub outcome: Outcome,
    /// Why, in one line, when the outcome alone does not say it (the errno, a namespace that
    /// could not be entered, a peer whose kill closed this one).
    pub reason: Option<String>,
}

impl Attempt {
    fn of(outcome: Outcome, reason: impl Into<Option<String>>) -> Attempt {
        Attempt {
            outcome,
            reason: reason.into(),
        }
    }
}

/// True when the filters name what to close: a port, an address, a process, a user, a
/// command, a state, listeners (`-l`), the connections to a listener, a zone, or cookies.
/// Family, protocol, `-c` and `-L` alone only say what kind of socket, and would close every
/// connection of that kind: a kill with nothing more is refused.
pub fn is_narrowed(q: &Query, cookies: Option<&[u64]>) -> bool {
    q.select.ports.is_some()
        || q.select.sport.is_some()
        || q.select.dport.is_some()
        || q.select.connected_to.is_some()
        || q.select.src.is_some()
        || q.select.dst.is_some()
        || q.select.pids.is_some()
        || q.select.uid.is_some()
        || q.select.command.is_some()
        || q.select.states.is_some()
        || q.select.listening
        || matches!(q.select.zones, ZoneSelect::Named(_))
        || cookies.is_some()
}

/// True for a socket that serves others rather than carries one connection: a TCP listener,
/// a UDP socket with no remote end, a TCP socket bound and not listening.
fn serves(s: &Socket) -> bool {
    !s.is_connected()
}

/// Whether the filters ask for this serving socket explicitly: `-l`, or its state named with
/// `--state`.
fn asked_for(s: &Socket, q: &Query) -> bool {
    q.select.listening
        || q.select
            .states
            .as_ref()
            .is_some_and(|st| st.contains(&s.state))
}

/// Narrows a listing to the sockets a kill may close, in listing order: TCP and UDP sockets
/// (with `cookies`, only those), and of the sockets that serve others (listeners, unconnected
/// UDP) only those the filters ask for by `-l` or state. The ones held back are counted in a
/// `listeners-kept` warning, so the operator knows they matched and how to include them. The
/// warnings that count sockets (`owners-hidden`, `column-unavailable`, ...) count those kept.
pub fn select(mut snap: Snapshot, q: &Query, cookies: Option<&[u64]>) -> Snapshot {
    let mut kept = 0u64;
    snap.sockets.retain(|s| {
        if !PROTOCOLS.contains(&s.proto) {
            return false;
        }
        if let Some(c) = cookies {
            if !s.cookie.is_some_and(|x| c.contains(&x)) {
                return false;
            }
        }
        if serves(s) && !asked_for(s, q) {
            kept += 1;
            return false;
        }
        true
    });
    if kept > 0 {
        snap.warnings.push(
            Warning::new(
                WarningCode::ListenersKept,
                format!(
                    "{} the filters too and {} left alone; add -l or name {} state with --state \
                     (LISTEN, UNCONN) to close {}",
                    counted(
                        kept as usize,
                        "listening or unconnected socket matches",
                        "listening or unconnected sockets match"
                    ),
                    if kept == 1 { "is" } else { "are" },
                    if kept == 1 { "its" } else { "their" },
                    if kept == 1 { "it" } else { "them" },
                ),
            )
            .count(kept),
        );
    }
    let referenced: std::collections::HashSet<u32> = snap
        .sockets
        .iter()
        .flat_map(|s| s.owners.iter().map(|o| o.pid))
        .collect();
    snap.processes.retain(|pid, _| referenced.contains(pid));
    // The warnings that count sockets count the ones kept.
    crate::run::list::recount_shown_warnings(q, &mut snap);
    snap
}

/// The `SOCK_DESTROY` request that names `s` exactly, or why there is none (a socket listed
/// without a cookie, from `/proc/net` text; a protocol the kernel cannot close).
pub fn request_for(s: &Socket) -> Result<DestroyReq, &'static str> {
    let protocol = match s.proto {
        Proto::Tcp => IPPROTO_TCP,
        Proto::Udp => IPPROTO_UDP,
        Proto::Udplite => IPPROTO_UDPLITE,
        _ => return Err("only TCP and UDP sockets can be closed from outside"),
    } as u8;
    let family = match s.family {
        Family::Inet => AF_INET,
        Family::Inet6 => AF_INET6,
        _ => return Err("not an Internet socket"),
    };
    let Endpoint::Inet {
        addr: src,
        port: sport,
    } = s.local
    else {
        return Err("not an Internet socket");
    };
    let (dst, dport) = match &s.remote {
        Some(Endpoint::Inet { addr, port }) => (*addr, *port),
        _ if family == AF_INET => (IpAddr::from([0u8; 4]), 0),
        _ => (IpAddr::from([0u8; 16]), 0),
    };
    let cookie = s
        .cookie
        .ok_or("listed from /proc/net text, without the kernel cookie that names it exactly")?;
    Ok(DestroyReq {
        family,
        protocol,
        src,
        sport,
        dst,
        dport,
        ifindex: s.bound_ifindex.map_or(0, |i| i.get()),
        cookie,
    })
}

/// Why the kernel refused, in words, for the outcomes whose name does not say it all.
fn reason_for(outcome: Outcome, errno: i32, s: &Socket) -> Option<String> {
    match outcome {
        Outcome::Killed => None,
        Outcome::Gone if errno == libc::ESTALE => {
            Some("another socket has these addresses now; it was left alone".into())
        }
        Outcome::Gone => None,
        Outcome::NotPermitted => Some(
            "closing a socket needs CAP_NET_ADMIN in its network namespace (run as root)".into(),
        ),
        Outcome::Unsupported if errno == libc::EINVAL => {
            Some("this kernel has no SOCK_DESTROY (Linux 4.5 and later have)".into())
        }
        Outcome::Unsupported if s.state == State::TimeWait => Some(
            "this kernel cannot drop TIME-WAIT entries (Linux 6.0 and later can, with \
             CONFIG_INET_DIAG_DESTROY)"
                .into(),
        ),
        Outcome::Unsupported => Some(format!(
            "this kernel cannot close {} sockets from outside (it needs CONFIG_INET_DIAG_DESTROY)",
            s.proto.name()
        )),
        Outcome::Failed => Some(format!(
            "the kernel answered: {}",
            std::io::Error::from_raw_os_error(errno)
        )),
    }
}

/// Closes `sockets`, all in the network namespace `destroyer` acts on, one request each, in
/// order. A socket whose local peer (the other end of a connection on this host) was killed
/// just before is usually gone by its turn, closed by the peer's reset: its reason says so.
pub(crate) fn close_with(sockets: &[&Socket], destroyer: &mut dyn Destroyer) -> Vec<Attempt> {
    let mut out: Vec<Attempt> = Vec::with_capacity(sockets.len());
    for (i, s) in sockets.iter().enumerate() {
        let req = match request_for(s) {
            Ok(r) => r,
            Err(why) => {
                out.push(Attempt::of(Outcome::Failed, why.to_string()));
                continue;
            }
        };
        let attempt = match destroyer.destroy(&req) {
            Ok(errno) => {
                let outcome = Outcome::from_errno(errno);
                let mut reason = reason_for(outcome, errno, s);
                if outcome == Outcome::Gone && errno == libc::ENOENT {
                    // ENOENT also when a socket has these addresses under another cookie: ask
                    // which, if any, so the report can say it was left alone.
                    if let Ok(Some(other)) = destroyer.lookup(&req) {
                        if other.cookie != req.cookie && other.same_addresses(&req) {
                            reason = Some(format!(
                                "another socket has these addresses now (cookie {}); it was \
                                 left alone",
                                other.cookie
                            ));
                        }
                    }
                    let peer_killed = sockets[..i].iter().zip(&out).any(|(p, a)| {
                        a.outcome == Outcome::Killed
                            && p.proto == s.proto
                            && p.remote.as_ref() == Some(&s.local)
                            && s.remote.as_ref() == Some(&p.local)
                    });
                    if peer_killed && reason.is_none() {
                        reason = Some(
                            "its local peer was killed just before, and the reset closed it".into(),
                        );
                    }
                }
                Attempt::of(outcome, reason)
            }
            Err(e) => Attempt::of(Outcome::Failed, format!("cannot ask the kernel: {e}")),
        };
        out.push(attempt);
    }
    out
}

/// Closes every socket of `snap` (the output of [`select`]), each in its own network
/// namespace: this one, or the zone it was listed in, entered as the listing entered it. The
/// result has one [`Attempt`] per socket, in order.
pub fn close(snap: &Snapshot, proc_root: &Path) -> Vec<Attempt> {
    let mut by_zone: BTreeMap<Option<u64>, Vec<usize>> = BTreeMap::new();
    for (i, s) in snap.sockets.iter().enumerate() {
        by_zone.entry(s.netns).or_default().push(i);
    }
    let mut out: Vec<Option<Attempt>> = vec![None; snap.sockets.len()];
    let discovered = if by_zone.keys().any(Option::is_some) {
        crate::sys::netns::discover(proc_root).0
    } else {
        Vec::new()
    };
    for (zone, idx) in by_zone {
        let sockets: Vec<&Socket> = idx.iter().map(|&i| &snap.sockets[i]).collect();
        let attempts = match zone {
            None => close_with(&sockets, &mut destroy::Kernel::default()),
            Some(key) => {
                let name = snap
                    .zones
                    .get(&key)
                    .map_or_else(|| key.to_string(), |z| z.name.clone());
                match discovered.iter().find(|t| t.key == key) {
                    None => {
                        vec![
                            Attempt::of(Outcome::Gone, format!("its zone {name} no longer exists"));
                            sockets.len()
                        ]
                    }
                    Some(t) => match crate::sys::netns::run_in(t, || {
                        close_with(&sockets, &mut destroy::Kernel::default())
                    }) {
                        Ok(a) => a,
                        Err(why) => {
                            let outcome = match why.kind() {
                                ErrorKind::Gone => Outcome::Gone,
                                ErrorKind::Denied => Outcome::NotPermitted,
                                _ => Outcome::Failed,
                            };
                            vec![
                                Attempt::of(outcome, format!("cannot enter zone {name}: {why}"));
                                sockets.len()
                            ]
                        }
                    },
                }
            }
        };
        for (i, a) in idx.into_iter().zip(attempts) {
            out[i] = Some(a);
        }
    }
    out.into_iter()
        .map(|a| a.unwrap_or_else(|| Attempt::of(Outcome::Failed, "not attempted".to_string())))
        .collect()
}

/// How many sockets had each outcome.
pub fn tally(attempts: &[Attempt]) -> BTreeMap<Outcome, usize> {
    let mut t = BTreeMap::new();
    for a in attempts {
        *t.entry(a.outcome).or_insert(0) += 1;
    }
    t
}

/// True when every socket is closed now (killed, or gone already), or there were none: exit
/// status 0; otherwise 1.
pub fn all_closed(attempts: &[Attempt]) -> bool {
    attempts.iter().all(|a| a.outcome.is_closed())
}

/// True when the host refused the whole kill: nothing was killed, and every socket not closed
/// was refused for want of CAP_NET_ADMIN or of kernel support (not-permitted, unsupported).
/// The command then exits as for any missing privilege or kernel feature, not as for a kill
/// that closed some sockets and failed on others.
pub fn refused_by_host(attempts: &[Attempt]) -> bool {
    let refused = |o: Outcome| matches!(o, Outcome::NotPermitted | Outcome::Unsupported);
    attempts.iter().any(|a| refused(a.outcome))
        && attempts
            .iter()
            .all(|a| a.outcome == Outcome::Gone || refused(a.outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SockType;
    use std::net::Ipv4Addr;

    fn sock(proto: Proto, state: State, local: (&str, u16), remote: Option<(&str, u16)>) -> Socket {
        let ep = |(a, p): (&str, u16)| Endpoint::Inet {
            addr: a.parse().unwrap(),
            port: p,
        };
        Socket {
            id: Some(1),
            cookie: Some(local.1 as u64 * 1000 + remote.map_or(0, |r| r.1 as u64)),
            uid: Some(0),
            ..Socket::new(
                proto,
                Family::Inet,
                if proto == Proto::Tcp {
                    SockType::Stream
                } else {
                    SockType::Dgram
                },
                state,
                ep(local),
                remote.map(ep),
            )
        }
    }

    fn snap(sockets: Vec<Socket>) -> Snapshot {
        Snapshot {
            sockets,
            ..Snapshot::default()
        }
    }

    #[test]
    fn errnos_map_to_outcomes() {
        assert_eq!(Outcome::from_errno(0), Outcome::Killed);
        assert_eq!(Outcome::from_errno(libc::ENOENT), Outcome::Gone);
        assert_eq!(Outcome::from_errno(libc::ESTALE), Outcome::Gone);
        assert_eq!(Outcome::from_errno(libc::EPERM), Outcome::NotPermitted);
        assert_eq!(Outcome::from_errno(libc::EOPNOTSUPP), Outcome::Unsupported);
        assert_eq!(Outcome::from_errno(libc::ENOMEM), Outcome::Failed);
        assert!(Outcome::Gone.is_closed() && !Outcome::NotPermitted.is_closed());
    }

    #[test]
    fn a_kill_needs_a_filter_that_names_something() {
        let mut q = Query::new();
        q.select.families.inet6 = false;
        q.select.connected = true;
        q.select.no_loopback = true;
        assert!(!is_narrowed(&q, None), "-4 -c -L name nothing");
        assert!(is_narrowed(&q, Some(&[1])));
        q.select.ports = Some(crate::PortSet::parse("80").unwrap());
        assert!(is_narrowed(&q, None));
        let mut q = Query::new();
        q.select.zones = ZoneSelect::All;
        assert!(!is_narrowed(&q, None), "-Z widens");
        q.select.zones = ZoneSelect::Named("web".into());
        assert!(is_narrowed(&q, None));
    }

    #[test]
    fn listeners_and_unconnected_udp_only_when_asked() {
        let all = || {
            snap(vec![
                sock(Proto::Tcp, State::Listen, ("0.0.0.0", 80), None),
                sock(
                    Proto::Tcp,
                    State::Established,
                    ("10.0.0.1", 80),
                    Some(("10.0.0.2", 5000)),
                ),
                sock(Proto::Udp, State::Unconn, ("0.0.0.0", 80), None),
                sock(
                    Proto::Udp,
                    State::Established,
                    ("10.0.0.1", 80),
                    Some(("10.0.0.2", 53)),
                ),
                sock(Proto::Raw, State::Unconn, ("0.0.0.0", 1), None),
            ])
        };
        let mut q = Query::new();
        q.select.ports = Some(crate::PortSet::parse("80").unwrap());
        let s = select(all(), &q, None);
        let states: Vec<State> = s.sockets.iter().map(|s| s.state).collect();
        assert_eq!(states, [State::Established, State::Established]);
        let w = s
            .warnings
            .iter()
            .find(|w| w.code == WarningCode::ListenersKept)
            .unwrap();
        assert_eq!(w.count, Some(2));
        assert!(
            w.message
                .starts_with("2 listening or unconnected sockets match"),
            "{}",
            w.message
        );

        // The listing applied the state filter already; select adds only the safety rule: the
        // TCP listener is named by state, the unconnected UDP socket is not.
        q.select.states = Some(vec![State::Listen]);
        let s = select(all(), &q, None);
        let states: Vec<State> = s.sockets.iter().map(|s| s.state).collect();
        assert_eq!(
            states,
            [State::Listen, State::Established, State::Established]
        );
        assert!(s
            .warnings
            .iter()
            .any(|w| w.count == Some(1) && w.message.contains("is left")));

        let mut q = Query::new();
        q.select.listening = true;
        let s = select(all(), &q, None);
        assert_eq!(s.sockets.len(), 4, "raw sockets are never selected");
        assert!(s.warnings.is_empty());

        let s = select(all(), &Query::new(), Some(&[80_000 + 5000]));
        assert_eq!(s.sockets.len(), 1);
        assert_eq!(
            s.sockets[0].remote.as_ref().and_then(Endpoint::port),
            Some(5000)
        );
    }

    #[test]
    fn requests_name_the_socket_with_its_cookie_and_interface() {
        let mut s = sock(
            Proto::Tcp,
            State::Established,
            ("192.0.2.1", 51000),
            Some(("198.51.100.2", 443)),
        );
        s.bound_ifindex = std::num::NonZeroU32::new(7);
        let r = request_for(&s).unwrap();
        assert_eq!(r.family, AF_INET);
        assert_eq!(r.protocol, 6);
        assert_eq!((r.sport, r.dport, r.ifindex), (51000, 443, 7));
        assert_eq!(r.dst, IpAddr::V4(Ipv4Addr::new(198, 51, 100, 2)));
        assert_eq!(r.cookie, s.cookie.unwrap());

        let mut l = sock(Proto::Udp, State::Unconn, ("::", 53), None);
        l.family = Family::Inet6;
        l.local = Endpoint::Inet {
            addr: "::".parse().unwrap(),
            port: 53,
        };
        let r = request_for(&l).unwrap();
        assert_eq!((r.family, r.protocol, r.dport), (AF_INET6, 17, 0));
        assert!(r.dst.is_ipv6() && r.dst.is_unspecified());

        l.cookie = None;
        assert!(request_for(&l).unwrap_err().contains("cookie"));
    }

    use sockstat_wire::sock_destroy::Found;

    /// A kernel that answers from tables: cookie -> errno, and (addresses -> cookie) for the
    /// sockets now at some addresses.
    struct Scripted(Vec<(u64, i32)>, Vec<DestroyReq>, Vec<(u16, u16, u64)>);

    impl Destroyer for Scripted {
        fn destroy(&mut self, req: &DestroyReq) -> std::io::Result<i32> {
            self.1.push(*req);
            Ok(self
                .0
                .iter()
                .find(|(c, _)| *c == req.cookie)
                .map_or(libc::ENOENT, |(_, e)| *e))
        }

        fn lookup(&mut self, req: &DestroyReq) -> std::io::Result<Option<Found>> {
            // Like the kernel: the socket at these ports, else the listener on the local port.
            let at = |sport: u16, dport: u16| {
                self.2
                    .iter()
                    .find(|(s, d, _)| (*s, *d) == (sport, dport))
                    .map(|(s, d, c)| Found {
                        cookie: *c,
                        src: req.src,
                        sport: *s,
                        dst: if *d == 0 {
                            IpAddr::from([0u8; 4])
                        } else {
                            req.dst
                        },
                        dport: *d,
                    })
            };
            Ok(at(req.sport, req.dport).or_else(|| at(req.sport, 0)))
        }
    }

    #[test]
    fn each_socket_gets_its_own_result() {
        let client = sock(
            Proto::Tcp,
            State::Established,
            ("127.0.0.1", 40000),
            Some(("127.0.0.1", 8080)),
        );
        let server = sock(
            Proto::Tcp,
            State::Established,
            ("127.0.0.1", 8080),
            Some(("127.0.0.1", 40000)),
        );
        let replaced = sock(
            Proto::Tcp,
            State::Established,
            ("127.0.0.1", 40001),
            Some(("127.0.0.1", 8080)),
        );
        let closed = sock(
            Proto::Tcp,
            State::Established,
            ("127.0.0.1", 40003),
            Some(("127.0.0.1", 8080)),
        );
        let tw = sock(
            Proto::Tcp,
            State::TimeWait,
            ("127.0.0.1", 40002),
            Some(("127.0.0.1", 8080)),
        );
        let denied = sock(
            Proto::Udp,
            State::Established,
            ("127.0.0.1", 5353),
            Some(("127.0.0.1", 53)),
        );
        let mut k = Scripted(
            vec![
                (client.cookie.unwrap(), 0),
                (tw.cookie.unwrap(), libc::EOPNOTSUPP),
                (denied.cookie.unwrap(), libc::EPERM),
            ],
            vec![],
            // The replaced connection's addresses hold a socket with another cookie now; the
            // listener on 8080 is what a lookup of the server end finds.
            vec![(40001, 8080, 99), (8080, 0, 7)],
        );
        let a = close_with(
            &[&client, &server, &replaced, &closed, &tw, &denied],
            &mut k,
        );
        let got: Vec<Outcome> = a.iter().map(|a| a.outcome).collect();
        assert_eq!(
            got,
            [
                Outcome::Killed,
                Outcome::Gone,
                Outcome::Gone,
                Outcome::Gone,
                Outcome::Unsupported,
                Outcome::NotPermitted
            ]
        );
        assert!(a[1]
            .reason
            .as_deref()
            .unwrap()
            .contains("local peer was killed"));
        assert_eq!(
            a[2].reason.as_deref(),
            Some("another socket has these addresses now (cookie 99); it was left alone")
        );
        assert_eq!(a[3].reason, None, "closed since the listing");
        assert!(a[4].reason.as_deref().unwrap().contains("TIME-WAIT"));
        assert!(a[5].reason.as_deref().unwrap().contains("CAP_NET_ADMIN"));
        assert_eq!(k.1.len(), 6, "one request per socket");
        assert!(!all_closed(&a));
        assert!(all_closed(&a[..3]));
        // One killed: not the host refusing the kill, whatever else was refused.
        assert!(!refused_by_host(&a));
        // Nothing killed, the rest gone or refused for want of privilege or kernel support.
        assert!(refused_by_host(&a[1..]));
        assert!(refused_by_host(&a[4..]));
        assert!(!refused_by_host(&a[1..4]), "all closed: nothing refused");
        let mut failed = a[1..].to_vec();
        failed[0].outcome = Outcome::Failed;
        assert!(!refused_by_host(&failed), "a failure is no refusal");
        let t = tally(&a);
        assert_eq!(t[&Outcome::Gone], 3);
    }

    #[test]
    fn commands_for_findings() {
        let c = sock(
            Proto::Tcp,
            State::Established,
            ("192.0.2.1", 40000),
            Some(("198.51.100.9", 5432)),
        );
        assert_eq!(
            command_for(&Target::Connection(&c), None),
            "sockstat kill --cookie 40005432"
        );
        let mut no_cookie = c.clone();
        no_cookie.cookie = None;
        assert_eq!(
            command_for(&Target::Connection(&no_cookie), None),
            "sockstat kill --src 192.0.2.1 --sport 40000 --dst 198.51.100.9 --dport 5432 --state ESTABLISHED"
        );
        assert_eq!(
            command_for(
                &Target::StateOnPort {
                    state: State::CloseWait,
                    local: Some("0.0.0.0".parse().unwrap()),
                    port: 8080,
                    server: true,
                    pid: Some(812),
                },
                None
            ),
            "sockstat kill --state CLOSE_WAIT --sport 8080 --pid 812"
        );
        assert_eq!(
            command_for(
                &Target::StateOnPort {
                    state: State::CloseWait,
                    local: None,
                    port: 6379,
                    server: false,
                    pid: None,
                },
                None
            ),
            "sockstat kill --state CLOSE_WAIT --dport 6379"
        );
        let mut zone = crate::zone::Zone {
            name: "web 1".into(),
            kind: crate::zone::ZoneKind::Docker,
            netns_inode: Some(4026532000),
            container_id: None,
            runtime: None,
            pod: None,
        };
        assert_eq!(
            command_for(
                &Target::TimeWaitTo {
                    local: Some("192.0.2.1".parse().unwrap()),
                    remote: "198.51.100.9".parse().unwrap(),
                    remote_port: 443,
                },
                Some(&zone)
            ),
            "sockstat kill --state TIME_WAIT --src 192.0.2.1 --dst 198.51.100.9 --dport 443 -z 'web 1'"
        );
        zone.name = "it's\x1b[31m".into();
        assert!(command_for(&Target::Connection(&c), Some(&zone)).ends_with("-z 4026532000"));
        zone.name = "it's".into();
        assert!(command_for(&Target::Connection(&c), Some(&zone)).ends_with(r"-z 'it'\''s'"));
    }
}
