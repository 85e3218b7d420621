//! `netlink_diag`: AF_NETLINK sockets over `NETLINK_SOCK_DIAG`
//! (`include/uapi/linux/netlink_diag.h`, filled by `sk_diag_fill` in `net/netlink/diag.c`,
//! 3.10+). Dump only: a request without `NLM_F_DUMP` gets `-EOPNOTSUPP`. Attributes are
//! numbered from 0 (`NETLINK_DIAG_MEMINFO = 0`). No privilege is needed.

use crate::bytes::{cookie_at, u32_ne};
use crate::meminfo::SkMemInfo;
use crate::netlink::{self, encode_request};
use crate::DecodeError;

/// `AF_NETLINK`.
pub const AF_NETLINK: u8 = 16;
/// `NDIAG_PROTO_ALL`: every netlink protocol in one dump.
pub const NDIAG_PROTO_ALL: u8 = 0xff;
/// Size of `struct netlink_diag_req`.
pub const NETLINK_DIAG_REQ_LEN: usize = 20;
/// Size of `struct netlink_diag_msg`.
pub const NETLINK_DIAG_MSG_LEN: usize = 28;

/// `NDIAG_SHOW_*`: which attributes to send.
pub mod show {
    /// `NDIAG_SHOW_MEMINFO`: `NETLINK_DIAG_MEMINFO`.
    pub const MEMINFO: u32 = 0x01;
    /// `NDIAG_SHOW_GROUPS`: `NETLINK_DIAG_GROUPS`, the multicast groups joined.
    pub const GROUPS: u32 = 0x02;
    /// `NDIAG_SHOW_RING_CFG`: ring configuration (the mmap rings are gone since 4.6).
    pub const RING_CFG: u32 = 0x04;
    /// `NDIAG_SHOW_FLAGS` (4.12): `NETLINK_DIAG_FLAGS`.
    pub const FLAGS: u32 = 0x08;
}

/// Reply attribute types (`NETLINK_DIAG_*`), numbered from 0.
pub mod attr {
    /// `NETLINK_DIAG_MEMINFO`: `u32[SK_MEMINFO_VARS]`.
    pub const MEMINFO: u16 = 0;
    /// `NETLINK_DIAG_GROUPS`: a bitmap of `u32` words, group N at bit N-1.
    pub const GROUPS: u16 = 1;
    /// `NETLINK_DIAG_RX_RING`.
    pub const RX_RING: u16 = 2;
    /// `NETLINK_DIAG_TX_RING`.
    pub const TX_RING: u16 = 3;
    /// `NETLINK_DIAG_FLAGS`: `u32` of [`super::flag`] bits.
    pub const FLAGS: u16 = 4;
}

/// `NDIAG_FLAG_*` bits of `NETLINK_DIAG_FLAGS`.
pub mod flag {
    /// A dump is in progress on the socket.
    pub const CB_RUNNING: u32 = 0x01;
    /// `NETLINK_PKTINFO`.
    pub const PKTINFO: u32 = 0x02;
    /// `NETLINK_BROADCAST_ERROR`.
    pub const BROADCAST_ERROR: u32 = 0x04;
    /// `NETLINK_NO_ENOBUFS`.
    pub const NO_ENOBUFS: u32 = 0x08;
    /// `NETLINK_LISTEN_ALL_NSID`.
    pub const LISTEN_ALL_NSID: u32 = 0x10;
    /// `NETLINK_CAP_ACK`.
    pub const CAP_ACK: u32 = 0x20;
}

/// `ndiag_state` of a socket that called `connect()` (`NETLINK_CONNECTED`). An unconnected one
/// reports what `sock_init_data` left there, `TCP_CLOSE` (7), on 6.18 (measured), though the
/// header calls it `NETLINK_UNCONNECTED` (0): anything but 1 is unconnected.
pub const NETLINK_CONNECTED: u8 = 1;

/// The netlink protocols of `include/uapi/linux/netlink.h`, by number (17, once `NETLINK_DM`,
/// has none).
const PROTOCOLS: [(u8, &str); 22] = [
    (0, "NETLINK_ROUTE"),
    (1, "NETLINK_UNUSED"),
    (2, "NETLINK_USERSOCK"),
    (3, "NETLINK_FIREWALL"),
    (4, "NETLINK_SOCK_DIAG"),
    (5, "NETLINK_NFLOG"),
    (6, "NETLINK_XFRM"),
    (7, "NETLINK_SELINUX"),
    (8, "NETLINK_ISCSI"),
    (9, "NETLINK_AUDIT"),
    (10, "NETLINK_FIB_LOOKUP"),
    (11, "NETLINK_CONNECTOR"),
    (12, "NETLINK_NETFILTER"),
    (13, "NETLINK_IP6_FW"),
    (14, "NETLINK_DNRTMSG"),
    (15, "NETLINK_KOBJECT_UEVENT"),
    (16, "NETLINK_GENERIC"),
    (18, "NETLINK_SCSITRANSPORT"),
    (19, "NETLINK_ECRYPTFS"),
    (20, "NETLINK_RDMA"),
    (21, "NETLINK_CRYPTO"),
    (22, "NETLINK_SMC"),
];

/// The kernel's name of netlink protocol `n` (`NETLINK_ROUTE` for 0), when it is one of
/// `include/uapi/linux/netlink.h`.
pub fn protocol_name(n: u8) -> Option<&'static str> {
    PROTOCOLS
        .iter()
        .find(|(p, _)| *p == n)
        .map(|(_, name)| *name)
}

/// A netlink_diag dump request (`struct netlink_diag_req`, `ndiag_ino` 0, cookie
/// `INET_DIAG_NOCOOKIE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetlinkDiagReq {
    /// `sdiag_protocol`: one netlink protocol, or [`NDIAG_PROTO_ALL`].
    pub protocol: u8,
    /// `ndiag_show`: [`show`] bits.
    pub show: u32,
}

impl NetlinkDiagReq {
    /// The full netlink message (`SOCK_DIAG_BY_FAMILY`, `NLM_F_REQUEST|NLM_F_DUMP`).
    pub fn encode(&self, seq: u32) -> Vec<u8> {
        let mut b = Vec::with_capacity(NETLINK_DIAG_REQ_LEN);
        b.push(AF_NETLINK);
        b.push(self.protocol);
        b.extend_from_slice(&[0, 0]); // pad
        b.extend_from_slice(&0u32.to_ne_bytes()); // ndiag_ino
        b.extend_from_slice(&self.show.to_ne_bytes());
        b.extend_from_slice(&u32::MAX.to_ne_bytes());
        b.extend_from_slice(&u32::MAX.to_ne_bytes());
        encode_request(seq, &b)
    }
}

/// One AF_NETLINK socket: `struct netlink_diag_msg` and its attributes.
#[derive(Debug, Clone)]
pub struct NetlinkDiagMsg {
    /// `ndiag_type`: `SOCK_RAW` 3 or `SOCK_DGRAM` 2.
    pub sock_type: u8,
    /// `ndiag_protocol`: the netlink protocol (`NETLINK_ROUTE` 0, ...; [`protocol_name`]).
    pub protocol: u8,
    /// `ndiag_state`: [`NETLINK_CONNECTED`], or anything else for unconnected.
    pub state: u8,
    /// `ndiag_portid`: the socket's port id (its address); 0 for the kernel's own sockets.
    pub portid: u32,
    /// `ndiag_dst_portid`: the port id `connect()` named (0: the kernel).
    pub dst_portid: u32,
    /// `ndiag_dst_group`: the multicast group `connect()` named (0: none).
    pub dst_group: u32,
    /// `ndiag_ino`: socket inode.
    pub inode: u32,
    /// `ndiag_cookie[0] | ndiag_cookie[1] << 32`.
    pub cookie: u64,
    /// `NETLINK_DIAG_MEMINFO`.
    pub meminfo: Option<SkMemInfo>,
    /// `NETLINK_DIAG_FLAGS`.
    pub flags: Option<u32>,
    /// The groups of `NETLINK_DIAG_GROUPS` (numbered from 1), when sent.
    pub groups: Option<Vec<u32>>,
}

impl NetlinkDiagMsg {
    /// True when the socket called `connect()`.
    pub fn connected(&self) -> bool {
        self.state == NETLINK_CONNECTED
    }
}

/// The group numbers set in a `NETLINK_DIAG_GROUPS` bitmap (bit N-1 of the words is group N).
fn groups(bitmap: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    for (w, word) in bitmap.chunks_exact(4).enumerate() {
        let Some(v) = u32_ne(word, 0) else { continue };
        for bit in 0..32u32 {
            if v & (1 << bit) != 0 {
                // A bitmap the kernel sends is at most a few words; saturate rather than wrap.
                let n = u32::try_from(w)
                    .unwrap_or(u32::MAX)
                    .saturating_mul(32)
                    .saturating_add(bit + 1);
                out.push(n);
            }
        }
    }
    out
}

/// Decodes the payload of one data message from a netlink_diag dump: the 28-byte
/// `netlink_diag_msg`, then attributes (type 0 = `NETLINK_DIAG_MEMINFO`). A socket that joined
/// multicast groups is sent twice in one dump, with the same cookie.
pub fn decode_msg(payload: &[u8]) -> Result<NetlinkDiagMsg, DecodeError> {
    const WHAT: &str = "netlink_diag_msg";
    if payload.len() < NETLINK_DIAG_MSG_LEN {
        return Err(DecodeError::truncated(
            WHAT,
            NETLINK_DIAG_MSG_LEN,
            payload.len(),
        ));
    }
    let short = || DecodeError::truncated(WHAT, NETLINK_DIAG_MSG_LEN, payload.len());
    let mut m = NetlinkDiagMsg {
        sock_type: payload[1],
        protocol: payload[2],
        state: payload[3],
        portid: u32_ne(payload, 4).ok_or_else(short)?,
        dst_portid: u32_ne(payload, 8).ok_or_else(short)?,
        dst_group: u32_ne(payload, 12).ok_or_else(short)?,
        inode: u32_ne(payload, 16).ok_or_else(short)?,
        cookie: cookie_at(payload, 20).ok_or_else(short)?,
        meminfo: None,
        flags: None,
        groups: None,
    };
    for item in netlink::attrs(&payload[NETLINK_DIAG_MSG_LEN..]) {
        let (ty, p) = item?;
        match ty {
            attr::MEMINFO => m.meminfo = SkMemInfo::from_bytes(p),
            attr::FLAGS => m.flags = u32_ne(p, 0),
            attr::GROUPS => m.groups = Some(groups(p)),
            _ => {}
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_uapi_header() {
        assert_eq!(protocol_name(0), Some("NETLINK_ROUTE"));
        assert_eq!(protocol_name(4), Some("NETLINK_SOCK_DIAG"));
        assert_eq!(protocol_name(16), Some("NETLINK_GENERIC"));
        assert_eq!(protocol_name(17), None);
        assert_eq!(protocol_name(22), Some("NETLINK_SMC"));
        assert_eq!(protocol_name(200), None);
    }

    #[test]
    fn a_group_bitmap_names_groups_from_one() {
        let mut b = Vec::new();
        b.extend_from_slice(&0b101u32.to_ne_bytes());
        b.extend_from_slice(&1u32.to_ne_bytes());
        assert_eq!(groups(&b), [1, 3, 33]);
        assert!(groups(&[1, 2]).is_empty(), "a partial word names no group");
    }

    #[test]
    fn a_short_message_is_an_error_not_a_panic() {
        assert!(decode_msg(&[16, 3, 0]).is_err());
        let mut p = vec![0u8; NETLINK_DIAG_MSG_LEN];
        p[0] = AF_NETLINK;
        p[2] = 9;
        assert_eq!(decode_msg(&p).unwrap().protocol, 9);
    }
}
