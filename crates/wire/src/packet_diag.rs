//! `packet_diag`: AF_PACKET sockets over `NETLINK_SOCK_DIAG`
//! (`include/uapi/linux/packet_diag.h`, filled by `sk_diag_fill` in `net/packet/diag.c`,
//! 3.10+). Dump only. Attributes are numbered from 0 (`PACKET_DIAG_INFO = 0`).

use crate::bytes::{cookie_at, u16_ne, u32_ne};
use crate::meminfo::SkMemInfo;
use crate::netlink::{self, encode_request};
use crate::DecodeError;

/// `AF_PACKET`.
pub const AF_PACKET: u8 = 17;
/// Size of `struct packet_diag_req`.
pub const PACKET_DIAG_REQ_LEN: usize = 16;
/// Size of `struct packet_diag_msg`.
pub const PACKET_DIAG_MSG_LEN: usize = 16;

/// `PACKET_SHOW_*`: which attributes to send.
pub mod show {
    /// `PACKET_SHOW_INFO`: `PACKET_DIAG_INFO` and `PACKET_DIAG_UID`.
    pub const INFO: u32 = 0x01;
    /// `PACKET_SHOW_MCLIST`: multicast memberships.
    pub const MCLIST: u32 = 0x02;
    /// `PACKET_SHOW_RING_CFG`: rx/tx ring configuration.
    pub const RING_CFG: u32 = 0x04;
    /// `PACKET_SHOW_FANOUT`: `PACKET_DIAG_FANOUT`.
    pub const FANOUT: u32 = 0x08;
    /// `PACKET_SHOW_MEMINFO`: `PACKET_DIAG_MEMINFO`.
    pub const MEMINFO: u32 = 0x10;
    /// `PACKET_SHOW_FILTER`: the classic BPF filter (only for `CAP_NET_ADMIN`).
    pub const FILTER: u32 = 0x20;
}

/// Reply attribute types (`PACKET_DIAG_*`), numbered from 0.
pub mod attr {
    /// `PACKET_DIAG_INFO`: `struct packet_diag_info`.
    pub const INFO: u16 = 0;
    /// `PACKET_DIAG_MCLIST`.
    pub const MCLIST: u16 = 1;
    /// `PACKET_DIAG_RX_RING`.
    pub const RX_RING: u16 = 2;
    /// `PACKET_DIAG_TX_RING`.
    pub const TX_RING: u16 = 3;
    /// `PACKET_DIAG_FANOUT`: `u32` `id | type << 16`.
    pub const FANOUT: u16 = 4;
    /// `PACKET_DIAG_UID`: `u32`.
    pub const UID: u16 = 5;
    /// `PACKET_DIAG_MEMINFO`.
    pub const MEMINFO: u16 = 6;
    /// `PACKET_DIAG_FILTER`: `struct sock_filter[]`.
    pub const FILTER: u16 = 7;
}

/// `PDI_*` bits of [`PacketInfo::flags`].
pub mod pdi {
    /// `PDI_RUNNING`: bound and receiving.
    pub const RUNNING: u32 = 0x1;
    /// `PDI_AUXDATA`: `PACKET_AUXDATA` set.
    pub const AUXDATA: u32 = 0x2;
    /// `PDI_ORIGDEV`: `PACKET_ORIGDEV` set.
    pub const ORIGDEV: u32 = 0x4;
    /// `PDI_VNETHDR`: `PACKET_VNET_HDR` set.
    pub const VNETHDR: u32 = 0x8;
    /// `PDI_LOSS`: `PACKET_LOSS` set.
    pub const LOSS: u32 = 0x10;
}

/// A packet_diag dump request (`struct packet_diag_req`, `pdiag_ino` 0, cookie
/// `INET_DIAG_NOCOOKIE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketDiagReq {
    /// `pdiag_show`: [`show`] bits.
    pub show: u32,
}

impl PacketDiagReq {
    /// The full netlink message (`SOCK_DIAG_BY_FAMILY`, `NLM_F_REQUEST|NLM_F_DUMP`).
    pub fn encode(&self, seq: u32) -> Vec<u8> {
        let mut b = Vec::with_capacity(PACKET_DIAG_REQ_LEN);
        b.push(AF_PACKET);
        b.push(0); // sdiag_protocol
        b.extend_from_slice(&[0, 0]); // pad
        b.extend_from_slice(&0u32.to_ne_bytes()); // pdiag_ino
        b.extend_from_slice(&self.show.to_ne_bytes());
        b.extend_from_slice(&u32::MAX.to_ne_bytes());
        b.extend_from_slice(&u32::MAX.to_ne_bytes());
        encode_request(seq, &b)
    }
}

/// `struct packet_diag_info` (`pdiag_put_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// `pdi_index`: bound interface index (0 = all interfaces).
    pub ifindex: u32,
    /// `pdi_version`: `TPACKET_V1` 0, `V2` 1, `V3` 2.
    pub version: u32,
    /// `pdi_reserve`: `PACKET_RESERVE`.
    pub reserve: u32,
    /// `pdi_copy_thresh`: `PACKET_COPY_THRESH`.
    pub copy_thresh: u32,
    /// `pdi_tstamp`: `PACKET_TIMESTAMP` flags.
    pub tstamp: u32,
    /// `pdi_flags`: [`pdi`] bits.
    pub flags: u32,
}

impl PacketInfo {
    /// Decodes the 24-byte struct; `None` if shorter.
    pub fn from_bytes(p: &[u8]) -> Option<PacketInfo> {
        Some(PacketInfo {
            ifindex: u32_ne(p, 0)?,
            version: u32_ne(p, 4)?,
            reserve: u32_ne(p, 8)?,
            copy_thresh: u32_ne(p, 12)?,
            tstamp: u32_ne(p, 16)?,
            flags: u32_ne(p, 20)?,
        })
    }

    /// `PDI_RUNNING`: the socket is bound to a protocol and receiving.
    pub fn running(&self) -> bool {
        self.flags & pdi::RUNNING != 0
    }
}

/// One AF_PACKET socket: `struct packet_diag_msg` and its attributes.
#[derive(Debug, Clone)]
pub struct PacketDiagMsg {
    /// `pdiag_type`: `SOCK_RAW` 3 or `SOCK_DGRAM` 2 (`SOCK_PACKET` 10 for the legacy API).
    pub sock_type: u8,
    /// `pdiag_num`: the bound protocol as a host-order `ETH_P_*` value (the kernel stores
    /// `ntohs(po->num)` in this host-order field; `ETH_P_ALL` = 0x0003).
    pub num: u16,
    /// `pdiag_ino`: socket inode.
    pub inode: u32,
    /// `pdiag_cookie[0] | pdiag_cookie[1] << 32`.
    pub cookie: u64,
    /// `PACKET_DIAG_INFO`.
    pub info: Option<PacketInfo>,
    /// `PACKET_DIAG_UID` (sent with `PACKET_SHOW_INFO`).
    pub uid: Option<u32>,
    /// `PACKET_DIAG_MEMINFO`.
    pub meminfo: Option<SkMemInfo>,
    /// `PACKET_DIAG_FANOUT`: `id | type << 16`.
    pub fanout: Option<u32>,
}

/// Decodes the payload of one data message from a packet_diag dump: the 16-byte
/// `packet_diag_msg`, then attributes (type 0 = `PACKET_DIAG_INFO`).
pub fn decode_msg(payload: &[u8]) -> Result<PacketDiagMsg, DecodeError> {
    const WHAT: &str = "packet_diag_msg";
    if payload.len() < PACKET_DIAG_MSG_LEN {
        return Err(DecodeError::truncated(
            WHAT,
            PACKET_DIAG_MSG_LEN,
            payload.len(),
        ));
    }
    let short = || DecodeError::truncated(WHAT, PACKET_DIAG_MSG_LEN, payload.len());
    let mut m = PacketDiagMsg {
        sock_type: payload[1],
        num: u16_ne(payload, 2).ok_or_else(short)?,
        inode: u32_ne(payload, 4).ok_or_else(short)?,
        cookie: cookie_at(payload, 8).ok_or_else(short)?,
        info: None,
        uid: None,
        meminfo: None,
        fanout: None,
    };
    for item in netlink::attrs(&payload[PACKET_DIAG_MSG_LEN..]) {
        let (ty, p) = item?;
        match ty {
            attr::INFO => m.info = PacketInfo::from_bytes(p),
            attr::UID => m.uid = u32_ne(p, 0),
            attr::MEMINFO => m.meminfo = SkMemInfo::from_bytes(p),
            attr::FANOUT => m.fanout = u32_ne(p, 0),
            _ => {}
        }
    }
    Ok(m)
}
