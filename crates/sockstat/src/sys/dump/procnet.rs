//! The `/proc/net` fallback: a target's sockets from its text files, when its dump fails, the
//! kernel has no dump for it (ping sockets), or `--source proc` asks for them.

use super::plan::Target;
use super::Gathered;
use crate::model::{
    Endpoint, Family, OwnersStatus, Proto, RawString, SockType, Socket, State, Timer, UnixName,
    Warning, WarningCode,
};
use crate::query::Query;
use sockstat_wire::proc_net;
use std::path::Path;

use super::convert::{inet_remote, is_minisock};

pub(super) fn proc_file(t: Target) -> Vec<&'static str> {
    match t {
        Target::Inet(Proto::Tcp, Family::Inet) => vec!["tcp"],
        Target::Inet(Proto::Tcp, _) => vec!["tcp6"],
        Target::Inet(Proto::Udp, Family::Inet) => vec!["udp"],
        Target::Inet(Proto::Udp, _) => vec!["udp6"],
        Target::Inet(Proto::Udplite, Family::Inet) => vec!["udplite"],
        Target::Inet(Proto::Udplite, _) => vec!["udplite6"],
        Target::Inet(Proto::Raw, Family::Inet) => vec!["raw"],
        Target::Inet(Proto::Raw, _) => vec!["raw6"],
        Target::Inet(Proto::Icmp, Family::Inet) => vec!["icmp"],
        Target::Inet(Proto::Icmp, _) => vec!["icmp6"],
        Target::Unix => vec!["unix"],
        Target::Packet => vec!["packet"],
        Target::Netlink => vec!["netlink"],
        _ => vec![],
    }
}

/// Reads one family from `/proc/net` text and applies the filters the kernel would have applied.
pub(super) fn from_proc_net(q: &Query, t: Target, net: &Path, g: &mut Gathered) {
    let files = proc_file(t);
    if files.is_empty() {
        // SCTP and MPTCP have no /proc/net table of this shape.
        if let Target::Inet(proto, family) = t {
            let explicit = q.select.protos.as_ref().is_some_and(|p| p.contains(&proto));
            // Report once per protocol, on its IPv4 pass (or IPv6 when IPv4 is not asked for).
            let first = family == Family::Inet || !q.select.families.inet;
            if explicit && first {
                g.warnings.push(Warning {
                    code: WarningCode::ProtoUnavailable,
                    count: None,
                    message: format!(
                        "this kernel does not provide {} sockets to sock_diag (module not loaded or not built); none are listed",
                        proto.name()
                    ),
                    details: vec![],
                });
            }
        }
        return;
    }
    for name in files {
        let path = net.join(name);
        let text = match crate::sys::procfs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The kernel lacks this protocol (no udplite, no IPv6): nothing to list.
                continue;
            }
            Err(e) => {
                g.warnings.push(Warning {
                    code: WarningCode::ProcNetUnreadable,
                    count: None,
                    message: format!(
                        "cannot read {}: {e}; its sockets are not listed",
                        path.display()
                    ),
                    details: vec![],
                });
                continue;
            }
        };
        let before = g.sockets.len();
        let bad = match t {
            Target::Inet(proto, family) => read_proc_inet(&text, proto, family, g),
            // No file of its own (`proc_file`): `gather_target` reads each family's instead.
            Target::TcpBothFamilies => 0,
            Target::Unix => read_proc_unix(&text, g),
            Target::Packet => read_proc_packet(&text, g),
            Target::Netlink => read_proc_netlink(&text, g),
        };
        if bad > 0 {
            g.warnings.push(Warning {
                code: WarningCode::ProcNetMalformed,
                count: Some(bad as u64),
                message: format!(
                    "{bad} lines of {} could not be parsed and were skipped",
                    path.display()
                ),
                details: vec![],
            });
        }
        // The kernel applied the state mask and the filter program; do it here too.
        let mut left_out = Vec::new();
        let kept: Vec<Socket> = g
            .sockets
            .drain(before..)
            .filter(|s| {
                let proto = s.proto;
                let keep =
                    s.state.kernel_mask() & q.kernel_states(proto) != 0 && q.matches_socket(s);
                if !keep {
                    left_out.extend(s.id);
                }
                keep
            })
            .collect();
        g.sockets.extend(kept);
        g.left_out.append(&mut left_out);
    }
}

pub(super) fn read_proc_inet(text: &[u8], proto: Proto, family: Family, g: &mut Gathered) -> usize {
    let text = String::from_utf8_lossy(text);
    // USER_HZ: the unit of /proc/net timers (jiffies_delta_to_clock_t).
    // SAFETY: sysconf has no preconditions.
    let clk_tck = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|&t| t > 0)
        .unwrap_or(100);
    let mut bad = 0;
    for entry in proc_net::parse_inet_table(&text) {
        let e = match entry {
            Ok(e) => e,
            Err(_) => {
                bad += 1;
                continue;
            }
        };
        let state = State::from_kernel(e.state, proto.is_datagram());
        let minisock = is_minisock(e.inode.min(u64::from(u32::MAX)) as u32, e.state, e.timer);
        g.sockets.push(Socket {
            id: (e.inode != 0).then_some(e.inode),
            cookie: None,
            proto,
            family,
            sock_type: match proto {
                Proto::Udp | Proto::Udplite | Proto::Icmp => SockType::Dgram,
                Proto::Raw => SockType::Raw,
                _ => SockType::Stream,
            },
            state,
            local: Endpoint::Inet {
                addr: e.local.ip(),
                port: e.local.port(),
            },
            remote: inet_remote(e.remote.ip(), e.remote.port()),
            recv_q: e.rx_queue,
            send_q: e.tx_queue,
            uid: (!minisock).then_some(e.uid),
            owners_status: OwnersStatus::None,
            owners: Vec::new(),
            timer: Some(Timer {
                kind: e.timer,
                // /proc/net/tcp prints jiffies_delta_to_clock_t(): USER_HZ ticks, not kernel jiffies.
                expires_ms: (e.expires_jiffies.saturating_mul(1000) / clk_tck)
                    .min(u64::from(u32::MAX)) as u32,
                retrans: e.retrans.min(255) as u8,
            }),
            netns: None,
            tcp: None,
            memory: None,
            cgroup_id: None,
            bound_ifindex: None,
        });
    }
    bad
}

/// `__SO_ACCEPTCON` in `/proc/net/unix` flags: a listening socket.
pub(super) const SO_ACCEPTCON: u32 = 0x10000;

pub(super) fn read_proc_unix(text: &[u8], g: &mut Gathered) -> usize {
    let mut bad = 0;
    for entry in proc_net::parse_unix_table(text) {
        let e = match entry {
            Ok(e) => e,
            Err(_) => {
                bad += 1;
                continue;
            }
        };
        // St column: SS_UNCONNECTED 1, SS_CONNECTING 2, SS_CONNECTED 3, SS_DISCONNECTING 4.
        let state = if e.flags & SO_ACCEPTCON != 0 {
            State::Listen
        } else {
            match e.state {
                3 => State::Established,
                2 => State::SynSent,
                _ => State::Unconn,
            }
        };
        let local = e.path.map(|p| match p.strip_prefix(b"@") {
            Some(rest) => UnixName::Abstract(RawString::new(rest)),
            None => UnixName::Path(RawString::new(p)),
        });
        g.sockets.push(Socket {
            id: (e.inode != 0).then_some(e.inode),
            cookie: None,
            proto: Proto::Unix,
            family: Family::Unix,
            sock_type: SockType::from_kernel(e.sock_type as u8).unwrap_or(SockType::Stream),
            state,
            local: Endpoint::Unix(local),
            remote: None,
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
        });
    }
    bad
}

pub(super) fn read_proc_packet(text: &[u8], g: &mut Gathered) -> usize {
    let text = String::from_utf8_lossy(text);
    let mut bad = 0;
    for entry in proc_net::parse_packet_table(&text) {
        let e = match entry {
            Ok(e) => e,
            Err(_) => {
                bad += 1;
                continue;
            }
        };
        g.sockets.push(Socket {
            id: (e.inode != 0).then_some(e.inode),
            cookie: None,
            proto: Proto::Packet,
            family: Family::Packet,
            sock_type: SockType::from_kernel(e.sock_type as u8).unwrap_or(SockType::Raw),
            state: State::Unconn,
            local: Endpoint::Packet {
                protocol: e.proto,
                ifindex: e.ifindex,
            },
            remote: None,
            recv_q: e.rmem,
            send_q: 0,
            uid: Some(e.uid),
            owners_status: OwnersStatus::None,
            owners: Vec::new(),
            timer: None,
            netns: None,
            tcp: None,
            memory: None,
            cgroup_id: None,
            bound_ifindex: None,
        });
    }
    bad
}

/// `/proc/net/netlink`: no socket type, state, destination or cookie (netlink_diag has them);
/// every socket is shown unconnected, as a raw socket.
pub(super) fn read_proc_netlink(text: &[u8], g: &mut Gathered) -> usize {
    let text = String::from_utf8_lossy(text);
    let mut bad = 0;
    for entry in proc_net::parse_netlink_table(&text) {
        let Ok(e) = entry else {
            bad += 1;
            continue;
        };
        g.sockets.push(Socket {
            id: (e.inode != 0).then_some(e.inode),
            recv_q: e.rmem,
            send_q: e.wmem,
            ..Socket::new(
                Proto::Netlink,
                Family::Netlink,
                SockType::Raw,
                State::Unconn,
                Endpoint::Netlink {
                    protocol: e.protocol,
                    port_id: e.portid,
                    group: 0,
                },
                None,
            )
        });
    }
    bad
}
