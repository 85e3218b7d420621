//! What a query dumps: its targets (one per family and protocol, in output order), the
//! kernel filter program of its ports and prefixes, and the fixed sequence number and name of
//! each dump.

use crate::model::{Family, Proto};
use crate::query::Query;
use sockstat_wire::bytecode::{self, Cond, Expr, Side};
use sockstat_wire::{inet_diag, netlink_diag, packet_diag, unix_diag};

/// One dump to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    Inet(Proto, Family),
    /// The TCP sockets of both families in one walk of the kernel's tables
    /// (`TCPDIAG_GETSOCK`), which a live gathering asks for instead of `Inet(Tcp, Inet)` and
    /// `Inet(Tcp, Inet6)` ([`both_tcp_families`]); where it fails, they are asked apart.
    TcpBothFamilies,
    Unix,
    Packet,
    Netlink,
}

/// What a dump asks of the kernel beside its target: the state mask, inet_diag's extensions
/// and filter program, and the other families' `show` flags.
pub(super) struct Ask<'a> {
    pub states: u32,
    pub ext: u8,
    pub bytecode: Option<&'a [u8]>,
    pub unix_show: u32,
    pub packet_show: u32,
    pub netlink_show: u32,
}

impl Target {
    /// The netlink sequence number of this target's dump: fixed per target (not a running
    /// count), so a recording replays under any other selection of families and protocols.
    pub(super) fn seq(self) -> u32 {
        match self {
            Target::Inet(p, f) => {
                // Fixed per protocol (recordings name dumps by it); ICMP is never dumped.
                let i = match p {
                    Proto::Tcp => 0,
                    Proto::Udp => 1,
                    Proto::Udplite => 2,
                    Proto::Raw => 3,
                    Proto::Sctp => 4,
                    Proto::Mptcp => 5,
                    Proto::Icmp => 8,
                    Proto::Unix | Proto::Packet | Proto::Netlink | Proto::Other => 9,
                };
                10 + 2 * i + u32::from(f == Family::Inet6)
            }
            Target::Unix => 50,
            Target::Packet => 51,
            Target::Netlink => 52,
            // Never recorded: a recording asks for each family apart.
            Target::TcpBothFamilies => 53,
        }
    }

    /// The protocol of an Internet socket dump.
    pub(super) fn inet_proto(self) -> Option<Proto> {
        match self {
            Target::Inet(p, _) => Some(p),
            Target::TcpBothFamilies => Some(Proto::Tcp),
            Target::Unix | Target::Packet | Target::Netlink => None,
        }
    }

    /// The request of this target's dump, numbered `seq`.
    pub(super) fn request(self, seq: u32, ask: &Ask<'_>) -> Vec<u8> {
        match self {
            Target::Inet(..) | Target::TcpBothFamilies => {
                let proto = self.inet_proto().unwrap_or(Proto::Tcp);
                let req = inet_diag::InetDiagReq {
                    // Not sent by the request for both families.
                    family: match self {
                        Target::Inet(_, Family::Inet) => super::AF_INET,
                        _ => super::AF_INET6,
                    },
                    protocol: ipproto(proto),
                    ext: ask.ext,
                    raw_protocol: if proto == Proto::Raw { 255 } else { 0 },
                    states: ask.states,
                    sport: 0,
                    dport: 0,
                    bytecode: ask.bytecode.map(<[u8]>::to_vec),
                };
                if self == Target::TcpBothFamilies {
                    req.encode_tcp_both_families(seq)
                } else {
                    req.encode(seq)
                }
            }
            Target::Unix => unix_diag::UnixDiagReq {
                states: ask.states,
                show: ask.unix_show,
            }
            .encode(seq),
            Target::Packet => packet_diag::PacketDiagReq {
                show: ask.packet_show,
            }
            .encode(seq),
            Target::Netlink => netlink_diag::NetlinkDiagReq {
                protocol: netlink_diag::NDIAG_PROTO_ALL,
                show: ask.netlink_show,
            }
            .encode(seq),
        }
    }

    pub(super) fn key(self) -> String {
        match self {
            Target::Inet(p, Family::Inet) => format!("{}4", p.name()),
            Target::Inet(p, _) => format!("{}6", p.name()),
            Target::TcpBothFamilies => "tcp".into(),
            Target::Unix => "unix".into(),
            Target::Packet => "packet".into(),
            Target::Netlink => "netlink".into(),
        }
    }
}

pub(super) fn ipproto(p: Proto) -> u16 {
    match p {
        Proto::Tcp => inet_diag::IPPROTO_TCP,
        Proto::Udp => inet_diag::IPPROTO_UDP,
        Proto::Udplite => inet_diag::IPPROTO_UDPLITE,
        Proto::Raw => inet_diag::IPPROTO_RAW,
        Proto::Sctp => inet_diag::IPPROTO_SCTP,
        Proto::Mptcp => inet_diag::IPPROTO_MPTCP,
        Proto::Icmp | Proto::Unix | Proto::Packet | Proto::Netlink | Proto::Other => 0,
    }
}

/// Protocols sock_diag does not list at all (no diag module exists): always read from
/// `/proc/net`, never asked of the kernel, and no fallback warning.
pub(super) fn proc_only(t: Target) -> bool {
    matches!(t, Target::Inet(Proto::Icmp, _))
}

/// The dumps a query needs, in output order.
pub(super) fn targets(q: &Query) -> Vec<Target> {
    let mut out = Vec::new();
    for proto in Proto::ALL {
        if !q.wants_proto(proto) {
            continue;
        }
        match proto {
            Proto::Unix => {
                if q.select.families.unix && !q.inet_only() {
                    out.push(Target::Unix)
                }
            }
            Proto::Packet => {
                if !q.inet_only() {
                    out.push(Target::Packet)
                }
            }
            Proto::Netlink => {
                if !q.inet_only() {
                    out.push(Target::Netlink)
                }
            }
            // Known only from processes' fds (`sys::unlisted`): no table to dump.
            Proto::Other => {}
            p => {
                if q.select.families.inet {
                    out.push(Target::Inet(p, Family::Inet));
                }
                if q.select.families.inet6 {
                    out.push(Target::Inet(p, Family::Inet6));
                }
            }
        }
    }
    out
}

/// `targets` with the TCP dumps of both families made one ([`Target::TcpBothFamilies`], in
/// the place of the first): half the walks of the kernel's largest table, whose empty buckets
/// alone cost about 1.5 ms a walk on a machine with 262,144 of them
/// (doc/reference/BENCHMARKS.md, "The live view").
pub(super) fn both_tcp_families(mut targets: Vec<Target>) -> Vec<Target> {
    let v4 = targets
        .iter()
        .position(|&t| t == Target::Inet(Proto::Tcp, Family::Inet));
    let v6 = targets
        .iter()
        .position(|&t| t == Target::Inet(Proto::Tcp, Family::Inet6));
    if let (Some(a), Some(b)) = (v4, v6) {
        targets[a.min(b)] = Target::TcpBothFamilies;
        targets.remove(a.max(b));
    }
    targets
}

/// Port in one of `ranges` on `side`, as every kernel's filter machine can test it: GE/LE
/// (EQ needs 4.16).
pub(super) fn port_within(side: Side, ranges: &[(u16, u16)]) -> Expr {
    let within = |lo: u16, hi: u16| match side {
        Side::Src => [Cond::SrcPortGe(lo), Cond::SrcPortLe(hi)],
        Side::Dst => [Cond::DstPortGe(lo), Cond::DstPortLe(hi)],
    };
    Expr::Or(
        ranges
            .iter()
            .map(|&(lo, hi)| Expr::And(within(lo, hi).map(Expr::Cond).to_vec()))
            .collect(),
    )
}

/// The kernel filter program for the query's ports and prefixes, if any.
pub(super) fn filter_program(q: &Query) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    if let Some(ports) = &q.select.ports {
        all.push(Expr::Or(vec![
            port_within(Side::Src, ports.ranges()),
            port_within(Side::Dst, ports.ranges()),
        ]));
    }
    if let Some(ports) = &q.select.sport {
        all.push(port_within(Side::Src, ports.ranges()));
    }
    if let Some(ports) = &q.select.dport {
        all.push(port_within(Side::Dst, ports.ranges()));
    }
    if let Some(net) = &q.select.src {
        all.push(Expr::Cond(Cond::SrcPrefix {
            addr: net.network(),
            prefix_len: net.prefix_len(),
        }));
    }
    if let Some(net) = &q.select.dst {
        all.push(Expr::Cond(Cond::DstPrefix {
            addr: net.network(),
            prefix_len: net.prefix_len(),
        }));
    }
    if all.is_empty() {
        None
    } else {
        Some(bytecode::compile(&Expr::And(all)))
    }
}
