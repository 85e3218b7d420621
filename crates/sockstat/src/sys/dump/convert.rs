//! Sockets from sock_diag records: inet_diag, unix_diag, packet_diag and netlink_diag
//! messages into model [`Socket`]s.

use super::AF_INET6;
use crate::model::tcp::{Memory, TcpDetails, TcpInfo};
use crate::model::{
    Endpoint, Family, OwnersStatus, Proto, SockType, Socket, State, Timer, UnixName,
};
use sockstat_wire::inet_diag;
use sockstat_wire::{netlink_diag, packet_diag, unix_diag};
use std::net::IpAddr;

pub(super) fn family_of(af: u8) -> Family {
    if af == AF_INET6 {
        Family::Inet6
    } else {
        Family::Inet
    }
}

pub(super) fn inet_remote(addr: IpAddr, port: u16) -> Option<Endpoint> {
    if port == 0 && addr.is_unspecified() {
        None
    } else {
        Some(Endpoint::Inet { addr, port })
    }
}

/// True for TIME_WAIT and request minisocks, whose uid field means "none".
pub(super) fn is_minisock(inode: u32, state: u8, timer: u8) -> bool {
    inode == 0 && (timer == 3 || matches!(state, 3 | 6 | 12))
}

/// Builds a socket from an inet_diag record.
pub(crate) fn socket_from_inet(m: &inet_diag::InetDiagMsg<'_>, proto: Proto) -> Socket {
    let family = family_of(m.family);
    let datagram = proto.is_datagram();
    let state = State::from_kernel(m.state, datagram);
    // TIME_WAIT sockets (substate TIME_WAIT or FIN_WAIT2, reported with the TIME_WAIT timer 3)
    // and request minisocks (SYN_RECV) carry uid 0 and inode 0 that mean "none"
    // (tcp_twsk_diag_fill, tcp_req_diag_fill). An orphaned full socket also has inode 0 but
    // keeps its real uid.
    let minisock = is_minisock(m.inode, m.state, m.timer);
    Socket {
        id: (m.inode != 0).then_some(u64::from(m.inode)),
        cookie: Some(m.cookie),
        proto,
        family,
        sock_type: match proto {
            Proto::Udp | Proto::Udplite => SockType::Dgram,
            Proto::Raw => SockType::Raw,
            Proto::Sctp => SockType::Seqpacket,
            _ => SockType::Stream,
        },
        state,
        local: Endpoint::Inet {
            addr: m.src,
            port: m.sport,
        },
        remote: inet_remote(m.dst, m.dport),
        recv_q: m.rqueue,
        send_q: m.wqueue,
        uid: (!minisock).then_some(m.uid),
        owners_status: OwnersStatus::None,
        owners: Vec::new(),
        timer: Some(Timer {
            kind: m.timer,
            expires_ms: m.expires_ms,
            retrans: m.retrans,
        }),
        netns: None,
        // INET_DIAG_INFO is a tcp_info only for TCP (MPTCP sends mptcp_info, SCTP sctp_info).
        tcp: match (proto, m.attrs.info, m.attrs.cong) {
            (Proto::Tcp, Some(info), cong) => Some(Box::new(TcpDetails {
                info: TcpInfo::from_bytes(info),
                congestion: cong.map(str::to_string),
                bbr: m.attrs.bbr,
                // The dump stamps it (`dump_target`): a decoder reads no clock.
                read_at: None,
            })),
            (Proto::Tcp | Proto::Mptcp, None, Some(cong)) => Some(Box::new(TcpDetails {
                info: TcpInfo::from_bytes(&[]),
                congestion: Some(cong.to_string()),
                bbr: None,
                read_at: None,
            })),
            _ => None,
        },
        memory: m.attrs.skmeminfo.map(|x| Box::new(Memory::from(x))),
        cgroup_id: m.attrs.cgroup_id,
        bound_ifindex: std::num::NonZeroU32::new(m.ifindex),
    }
}

/// Builds a socket from a unix_diag record (the peer's name is filled in later).
pub(crate) fn socket_from_unix(m: &unix_diag::UnixDiagMsg<'_>) -> Socket {
    let state = State::from_kernel(m.state, true);
    let (recv_q, send_q) = m.rqlen.unwrap_or((0, 0));
    Socket {
        id: (m.inode != 0).then_some(u64::from(m.inode)),
        cookie: Some(m.cookie),
        proto: Proto::Unix,
        family: Family::Unix,
        sock_type: SockType::from_kernel(m.sock_type).unwrap_or(SockType::Stream),
        state,
        local: Endpoint::Unix(m.name.and_then(UnixName::from_sun_path)),
        remote: m.peer.filter(|&p| p != 0).map(|p| Endpoint::UnixPeer {
            peer: u64::from(p),
            name: None,
        }),
        recv_q,
        send_q,
        uid: m.uid,
        owners_status: OwnersStatus::None,
        owners: Vec::new(),
        timer: None,
        netns: None,
        tcp: None,
        memory: m.meminfo.map(|x| Box::new(Memory::from(x))),
        cgroup_id: None,
        bound_ifindex: None,
    }
}

/// Builds a socket from a packet_diag record.
pub(crate) fn socket_from_packet(m: &packet_diag::PacketDiagMsg) -> Socket {
    Socket {
        id: (m.inode != 0).then_some(u64::from(m.inode)),
        cookie: Some(m.cookie),
        proto: Proto::Packet,
        family: Family::Packet,
        sock_type: SockType::from_kernel(m.sock_type).unwrap_or(SockType::Raw),
        state: State::Unconn,
        local: Endpoint::Packet {
            protocol: m.num,
            ifindex: m.info.as_ref().map(|i| i.ifindex).unwrap_or(0),
        },
        remote: None,
        recv_q: m.meminfo.map(|mi| mi.rmem_alloc).unwrap_or(0),
        send_q: m.meminfo.map(|mi| mi.wmem_alloc).unwrap_or(0),
        uid: m.uid,
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

/// Builds a socket from a netlink_diag record. netlink_diag gives no uid (the owner scan reads
/// a held one's from its holder's fd: `sys::unlisted`).
pub(crate) fn socket_from_netlink(m: &netlink_diag::NetlinkDiagMsg) -> Socket {
    let memory = m.meminfo.map(Memory::from);
    Socket {
        id: (m.inode != 0).then_some(u64::from(m.inode)),
        cookie: Some(m.cookie),
        recv_q: memory.as_ref().map_or(0, |x| x.rmem_alloc_bytes),
        send_q: memory.as_ref().map_or(0, |x| x.wmem_alloc_bytes),
        memory: memory.map(Box::new),
        ..Socket::new(
            Proto::Netlink,
            Family::Netlink,
            SockType::from_kernel(m.sock_type).unwrap_or(SockType::Raw),
            if m.connected() {
                State::Established
            } else {
                State::Unconn
            },
            Endpoint::Netlink {
                protocol: m.protocol,
                port_id: m.portid,
                group: 0,
            },
            m.connected().then_some(Endpoint::Netlink {
                protocol: m.protocol,
                port_id: m.dst_portid,
                group: m.dst_group,
            }),
        )
    }
}
