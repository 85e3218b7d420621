//! `inet_diag`: TCP, UDP, UDP-Lite, RAW, SCTP and MPTCP sockets over `NETLINK_SOCK_DIAG`
//! (`include/uapi/linux/inet_diag.h`; filled by `inet_sk_diag_fill` and
//! `inet_diag_msg_attrs_fill` in `net/ipv4/inet_diag.c`, `net/ipv4/tcp_diag.c`).
//!
//! Requests are encoded to complete netlink messages; replies are decoded from the payload of
//! one `SOCK_DIAG_BY_FAMILY` message into borrowed views (no allocation per socket).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::bytes::{arr, c_str, cookie_at, u16_be, u32_ne, u64_ne, u8_at};
use crate::meminfo::SkMemInfo;
use crate::netlink::{self, encode_request, push_attr};
use crate::DecodeError;

/// `INET_DIAG_NOCOOKIE`: "any socket" in a request's `idiag_cookie` (both words all-ones).
pub const INET_DIAG_NOCOOKIE: u64 = u64::MAX;

/// `AF_INET`.
pub const AF_INET: u8 = 2;
/// `AF_INET6`.
pub const AF_INET6: u8 = 10;

/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u16 = 6;
/// `IPPROTO_UDP`.
pub const IPPROTO_UDP: u16 = 17;
/// `IPPROTO_UDPLITE`.
pub const IPPROTO_UDPLITE: u16 = 136;
/// `IPPROTO_RAW`: selects the RAW handler (`net/ipv4/raw_diag.c`); the IP protocol to match
/// goes in [`InetDiagReq::raw_protocol`].
pub const IPPROTO_RAW: u16 = 255;
/// `IPPROTO_SCTP`.
pub const IPPROTO_SCTP: u16 = 132;
/// `IPPROTO_MPTCP`: does not fit the 8-bit `sdiag_protocol`, so it is sent as
/// `INET_DIAG_REQ_PROTOCOL` (5.9+).
pub const IPPROTO_MPTCP: u16 = 262;

/// Size of `struct inet_diag_req_v2`.
pub const INET_DIAG_REQ_V2_LEN: usize = 56;

/// `TCPDIAG_GETSOCK` (`include/uapi/linux/inet_diag.h`): the request type of inet_diag's first
/// interface, still served (`inet_diag_rcv_msg_compat` in `net/ipv4/inet_diag.c`). Its dump
/// asks with `sdiag_family = AF_UNSPEC`, so the kernel walks its TCP tables once for both
/// families, where `SOCK_DIAG_BY_FAMILY` walks them once per family; the replies carry this
/// type and each socket's own family.
pub const TCPDIAG_GETSOCK: u16 = 18;

/// `sizeof(struct inet_diag_req)`, the request of [`TCPDIAG_GETSOCK`]: family, source and
/// destination prefix lengths, `idiag_ext`, the 48-byte `inet_diag_sockid`, `idiag_states`,
/// `idiag_dbs`.
pub const INET_DIAG_REQ_LEN: usize = 60;
/// Size of `struct inet_diag_msg`.
pub const INET_DIAG_MSG_LEN: usize = 72;

/// Request attribute types (`INET_DIAG_REQ_*`).
pub mod req_attr {
    /// `INET_DIAG_REQ_BYTECODE`: a filter program (see [`crate::bytecode`]).
    pub const BYTECODE: u16 = 1;
    /// `INET_DIAG_REQ_SK_BPF_STORAGES` (5.7+, needs `CAP_BPF`).
    pub const SK_BPF_STORAGES: u16 = 2;
    /// `INET_DIAG_REQ_PROTOCOL` (5.9+): a `u32` protocol that overrides `sdiag_protocol`.
    pub const PROTOCOL: u16 = 3;
}

/// Reply attribute types (`INET_DIAG_*`).
pub mod attr {
    /// `INET_DIAG_MEMINFO`: `struct inet_diag_meminfo`.
    pub const MEMINFO: u16 = 1;
    /// `INET_DIAG_INFO`: `struct tcp_info` / `mptcp_info` / `sctp_info`, by protocol.
    pub const INFO: u16 = 2;
    /// `INET_DIAG_VEGASINFO`: `struct tcpvegas_info`.
    pub const VEGASINFO: u16 = 3;
    /// `INET_DIAG_CONG`: congestion-control name, NUL-terminated.
    pub const CONG: u16 = 4;
    /// `INET_DIAG_TOS`: `u8`.
    pub const TOS: u16 = 5;
    /// `INET_DIAG_TCLASS`: `u8`.
    pub const TCLASS: u16 = 6;
    /// `INET_DIAG_SKMEMINFO`: `u32[SK_MEMINFO_VARS]`.
    pub const SKMEMINFO: u16 = 7;
    /// `INET_DIAG_SHUTDOWN`: `u8` `sk_shutdown`.
    pub const SHUTDOWN: u16 = 8;
    /// `INET_DIAG_DCTCPINFO`: `struct tcp_dctcp_info`.
    pub const DCTCPINFO: u16 = 9;
    /// `INET_DIAG_PROTOCOL`: `u8`, for RAW sockets.
    pub const PROTOCOL: u16 = 10;
    /// `INET_DIAG_SKV6ONLY`: `u8`.
    pub const SKV6ONLY: u16 = 11;
    /// `INET_DIAG_LOCALS` (SCTP).
    pub const LOCALS: u16 = 12;
    /// `INET_DIAG_PEERS` (SCTP).
    pub const PEERS: u16 = 13;
    /// `INET_DIAG_PAD`: alignment padding before a 64-bit-aligned attribute.
    pub const PAD: u16 = 14;
    /// `INET_DIAG_MARK`: `u32` `sk_mark`, only for `CAP_NET_ADMIN`.
    pub const MARK: u16 = 15;
    /// `INET_DIAG_BBRINFO`: `struct tcp_bbr_info`.
    pub const BBRINFO: u16 = 16;
    /// `INET_DIAG_CLASS_ID`: `u32`.
    pub const CLASS_ID: u16 = 17;
    /// `INET_DIAG_MD5SIG`: `struct tcp_diag_md5sig[]`.
    pub const MD5SIG: u16 = 18;
    /// `INET_DIAG_ULP_INFO`: nested `INET_ULP_INFO_*`.
    pub const ULP_INFO: u16 = 19;
    /// `INET_DIAG_SK_BPF_STORAGES`: nested.
    pub const SK_BPF_STORAGES: u16 = 20;
    /// `INET_DIAG_CGROUP_ID`: `u64` cgroup v2 id.
    pub const CGROUP_ID: u16 = 21;
    /// `INET_DIAG_SOCKOPT`: `struct inet_diag_sockopt` (2 bytes of bitfields).
    pub const SOCKOPT: u16 = 22;
    /// `INET_ULP_INFO_NAME`, inside `INET_DIAG_ULP_INFO`: the ULP name string.
    pub const ULP_INFO_NAME: u16 = 1;
}

/// Bits of `idiag_ext`: bit `ATTR - 1` asks for attribute `ATTR` (1..=8 only; the field has
/// 8 bits, `include/uapi/linux/inet_diag.h`).
pub mod ext {
    /// Request `INET_DIAG_MEMINFO`.
    pub const MEMINFO: u8 = 1 << 0;
    /// Request `INET_DIAG_INFO` (also brings `ULP_INFO`, and `MD5SIG` for `CAP_NET_ADMIN`).
    pub const INFO: u8 = 1 << 1;
    /// Request `INET_DIAG_VEGASINFO` (and with it `DCTCPINFO`/`BBRINFO` from the CC module).
    pub const VEGASINFO: u8 = 1 << 2;
    /// Request `INET_DIAG_CONG`.
    pub const CONG: u8 = 1 << 3;
    /// Request `INET_DIAG_TOS`.
    pub const TOS: u8 = 1 << 4;
    /// Request `INET_DIAG_TCLASS` (AF_INET6) and `INET_DIAG_CLASS_ID`.
    pub const TCLASS: u8 = 1 << 5;
    /// Request `INET_DIAG_SKMEMINFO`.
    pub const SKMEMINFO: u8 = 1 << 6;
    /// `INET_DIAG_SHUTDOWN`'s bit (the kernel sends SHUTDOWN regardless).
    pub const SHUTDOWN: u8 = 1 << 7;
}

/// Bits of [`InetDiagAttrs::sockopt`], as assembled by this crate (`byte0 | byte1 << 8` of
/// `struct inet_diag_sockopt`). C bitfields are allocated from the low bit on little-endian
/// ABIs and from the high bit on big-endian ones, hence the two tables.
pub mod sockopt {
    macro_rules! bits {
        ($($name:ident = $le:expr, $be:expr, $doc:literal;)*) => {$(
            #[doc = $doc]
            pub const $name: u16 = 1 << (if cfg!(target_endian = "little") { $le } else { $be });
        )*};
    }
    bits! {
        RECVERR = 0, 7, "`IP_RECVERR` set.";
        IS_ICSK = 1, 6, "A connection-oriented (`inet_connection_sock`) socket.";
        FREEBIND = 2, 5, "`IP_FREEBIND` set.";
        HDRINCL = 3, 4, "`IP_HDRINCL` set.";
        MC_LOOP = 4, 3, "`IP_MULTICAST_LOOP` set.";
        TRANSPARENT = 5, 2, "`IP_TRANSPARENT` set.";
        MC_ALL = 6, 1, "`IP_MULTICAST_ALL` set.";
        NODEFRAG = 7, 0, "`IP_NODEFRAG` set.";
        BIND_ADDRESS_NO_PORT = 8, 15, "`IP_BIND_ADDRESS_NO_PORT` set.";
        RECVERR_RFC4884 = 9, 14, "`IP_RECVERR_RFC4884` set.";
        DEFER_CONNECT = 10, 13, "`TCP_FASTOPEN_CONNECT`-style deferred connect.";
    }
}

/// A dump request: `struct inet_diag_req_v2` plus request attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InetDiagReq {
    /// `sdiag_family`: [`AF_INET`] (2) or [`AF_INET6`] (10). Each family is a separate dump.
    pub family: u8,
    /// The protocol (`IPPROTO_*`). Values above 255 (MPTCP) are also sent as
    /// `INET_DIAG_REQ_PROTOCOL`.
    pub protocol: u16,
    /// `idiag_ext`: [`ext`] bits.
    pub ext: u8,
    /// `sdiag_raw_protocol` (the `pad` byte; `struct inet_diag_req_raw`): for RAW dumps, the IP
    /// protocol to match. 0 otherwise.
    pub raw_protocol: u8,
    /// `idiag_states`: bit `1 << TCP_STATE` per state to dump; `u32::MAX` for all (on 6.8+ that
    /// includes bound-inactive TCP sockets, doc/reference/linux.md#state-mask).
    pub states: u32,
    /// `id.idiag_sport`: if non-zero, only sockets with this local port (a cheap kernel
    /// prefilter).
    pub sport: u16,
    /// `id.idiag_dport`: if non-zero, only sockets with this remote port (skips listeners).
    pub dport: u16,
    /// An `INET_DIAG_REQ_BYTECODE` program from [`crate::bytecode::compile`], which never
    /// exceeds [`crate::bytecode::MAX_PROGRAM_LEN`]. A longer hand-made program cannot travel in
    /// a netlink attribute and is left out, so the dump is unfiltered (a superset).
    pub bytecode: Option<Vec<u8>>,
}

impl InetDiagReq {
    /// `struct inet_diag_sockid`, as both requests carry it: ports `__be16`, addresses zero,
    /// interface 0, cookie `INET_DIAG_NOCOOKIE`.
    fn push_sockid(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.sport.to_be_bytes());
        b.extend_from_slice(&self.dport.to_be_bytes());
        b.extend_from_slice(&[0u8; 32]);
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&u32::MAX.to_ne_bytes());
        b.extend_from_slice(&u32::MAX.to_ne_bytes());
    }

    /// The filter program as `INET_DIAG_REQ_BYTECODE`, if any. compile() never produces a
    /// program too long for the 16-bit nla_len, so this cannot drop a filter this crate made.
    fn push_bytecode(&self, b: &mut Vec<u8>) {
        if let Some(prog) = &self.bytecode {
            let fits = push_attr(b, req_attr::BYTECODE, prog);
            debug_assert!(
                fits,
                "bytecode of {} bytes does not fit nla_len",
                prog.len()
            );
        }
    }

    /// The 56-byte `inet_diag_req_v2` followed by the request attributes, without the netlink
    /// header.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(
            INET_DIAG_REQ_V2_LEN + 8 + self.bytecode.as_ref().map_or(0, |p| p.len() + 4),
        );
        b.push(self.family);
        // Same as `ss` (`sockdiag_send` in misc/ss.c), which stores the int protocol into the
        // u8 field: 262 (MPTCP) becomes 6, and the real value travels in INET_DIAG_REQ_PROTOCOL.
        b.push((self.protocol & 0xff) as u8);
        b.push(self.ext);
        b.push(self.raw_protocol);
        b.extend_from_slice(&self.states.to_ne_bytes());
        self.push_sockid(&mut b);
        debug_assert_eq!(b.len(), INET_DIAG_REQ_V2_LEN);
        self.push_bytecode(&mut b);
        if self.protocol > 255 {
            push_attr(
                &mut b,
                req_attr::PROTOCOL,
                &u32::from(self.protocol).to_ne_bytes(),
            );
        }
        b
    }

    /// The full netlink message: `nlmsghdr` (`SOCK_DIAG_BY_FAMILY`, `NLM_F_REQUEST|NLM_F_DUMP`),
    /// then the 56-byte `inet_diag_req_v2` (ports big-endian, cookie = `INET_DIAG_NOCOOKIE`),
    /// then `INET_DIAG_REQ_BYTECODE` if any, then `INET_DIAG_REQ_PROTOCOL` (u32) when
    /// `protocol > 255`.
    pub fn encode(&self, seq: u32) -> Vec<u8> {
        encode_request(seq, &self.encode_body())
    }

    /// The [`TCPDIAG_GETSOCK`] message: TCP sockets of both families in one dump. `nlmsghdr`
    /// (`TCPDIAG_GETSOCK`, `NLM_F_REQUEST|NLM_F_DUMP`), the 60-byte `struct inet_diag_req`
    /// (family 0, `idiag_ext`, the ports, `idiag_states`), then `INET_DIAG_REQ_BYTECODE` if
    /// any. `family`, `protocol` and `raw_protocol` are not sent: the message type says TCP.
    pub fn encode_tcp_both_families(&self, seq: u32) -> Vec<u8> {
        let mut b = Vec::with_capacity(
            INET_DIAG_REQ_LEN + self.bytecode.as_ref().map_or(0, |p| p.len() + 4),
        );
        // idiag_family (AF_UNSPEC is what the kernel asks anyway), src_len, dst_len, ext.
        b.extend_from_slice(&[0, 0, 0, self.ext]);
        self.push_sockid(&mut b);
        b.extend_from_slice(&self.states.to_ne_bytes());
        // idiag_dbs: unused.
        b.extend_from_slice(&0u32.to_ne_bytes());
        debug_assert_eq!(b.len(), INET_DIAG_REQ_LEN);
        self.push_bytecode(&mut b);
        netlink::encode_message(
            TCPDIAG_GETSOCK,
            netlink::NLM_F_REQUEST | netlink::NLM_F_DUMP,
            seq,
            &b,
        )
    }
}

/// `struct tcp_bbr_info` (`INET_DIAG_BBRINFO`), from `bbr_get_info` in `net/ipv4/tcp_bbr.c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BbrInfo {
    /// Max-filtered bandwidth estimate, bytes per second (`bbr_bw_lo | bbr_bw_hi << 32`).
    pub bw_bytes_per_sec: u64,
    /// `bbr_min_rtt`: min-filtered RTT, microseconds.
    pub min_rtt_us: u32,
    /// `bbr_pacing_gain`, fixed point `<< 8` (256 = 1.0).
    pub pacing_gain: u32,
    /// `bbr_cwnd_gain`, fixed point `<< 8` (256 = 1.0).
    pub cwnd_gain: u32,
}

impl BbrInfo {
    /// Decodes the 20-byte `struct tcp_bbr_info`; `None` if shorter.
    pub fn from_bytes(b: &[u8]) -> Option<BbrInfo> {
        let lo = u32_ne(b, 0)?;
        let hi = u32_ne(b, 4)?;
        Some(BbrInfo {
            bw_bytes_per_sec: u64::from(lo) | (u64::from(hi) << 32),
            min_rtt_us: u32_ne(b, 8)?,
            pacing_gain: u32_ne(b, 12)?,
            cwnd_gain: u32_ne(b, 16)?,
        })
    }
}

/// The attributes of one `inet_diag_msg`. Every field is `None` when the attribute was absent
/// (not requested, not applicable to this socket, or not sent by this kernel) or shorter than
/// its fixed size.
#[derive(Debug, Clone, Default)]
pub struct InetDiagAttrs<'a> {
    /// `INET_DIAG_MEMINFO`: `[rmem, wmem (queued), fmem (forward alloc), tmem (wmem_alloc)]`.
    pub meminfo: Option<[u32; 4]>,
    /// `INET_DIAG_INFO` raw payload: `tcp_info` for TCP (decode with
    /// [`crate::tcp_info::TcpInfo::from_bytes`]), `mptcp_info` for MPTCP, `sctp_info` for SCTP.
    /// Decode by the protocol you asked for.
    pub info: Option<&'a [u8]>,
    /// `INET_DIAG_VEGASINFO` raw payload (`struct tcpvegas_info`).
    pub vegas: Option<&'a [u8]>,
    /// `INET_DIAG_CONG`: congestion-control name, NUL stripped; `None` if not UTF-8.
    pub cong: Option<&'a str>,
    /// `INET_DIAG_TOS`.
    pub tos: Option<u8>,
    /// `INET_DIAG_TCLASS` (AF_INET6).
    pub tclass: Option<u8>,
    /// `INET_DIAG_SKMEMINFO`.
    pub skmeminfo: Option<SkMemInfo>,
    /// `INET_DIAG_SHUTDOWN`: `sk_shutdown` (bit 0 = no more receives, bit 1 = no more sends).
    pub shutdown: Option<u8>,
    /// `INET_DIAG_PROTOCOL`: the socket's protocol (RAW sockets).
    pub protocol: Option<u8>,
    /// `INET_DIAG_SKV6ONLY`: `IPV6_V6ONLY` (AF_INET6 sockets in LISTEN or CLOSE).
    pub v6only: Option<bool>,
    /// `INET_DIAG_MARK`: `sk_mark`, only sent to `CAP_NET_ADMIN` callers.
    pub mark: Option<u32>,
    /// `INET_DIAG_BBRINFO`.
    pub bbr: Option<BbrInfo>,
    /// `INET_DIAG_CLASS_ID`: net_cls class id, or `sk_priority` when that is 0.
    pub class_id: Option<u32>,
    /// `INET_ULP_INFO_NAME` inside `INET_DIAG_ULP_INFO` (`"tls"`, `"mptcp"`).
    pub ulp_name: Option<&'a str>,
    /// `INET_DIAG_CGROUP_ID`: cgroup v2 id (= inode of the cgroup directory).
    pub cgroup_id: Option<u64>,
    /// `INET_DIAG_SOCKOPT`: [`sockopt`] bits.
    pub sockopt: Option<u16>,
}

/// One socket from an inet_diag dump: `struct inet_diag_msg` and its attributes.
#[derive(Debug, Clone)]
pub struct InetDiagMsg<'a> {
    /// `idiag_family`: [`AF_INET`] or [`AF_INET6`].
    pub family: u8,
    /// `idiag_state`: TCP state number (`TCP_ESTABLISHED` = 1 ...; UDP uses 7 for unconnected
    /// and 1 for connected; TIME-WAIT sockets report `tw_substate`).
    pub state: u8,
    /// `idiag_timer`: 0 none, 1 retransmit/TLP/reorder, 2 keepalive, 3 TIME-WAIT, 4 zero-window
    /// probe (7.1+ adds 5 delayed ACK). Unknown values should be shown as "other".
    pub timer: u8,
    /// `idiag_retrans`: retransmits (timer 1) or unanswered probes (timers 2, 4).
    pub retrans: u8,
    /// Local port (`id.idiag_sport`, converted from big-endian).
    pub sport: u16,
    /// Remote port (`id.idiag_dport`, converted from big-endian).
    pub dport: u16,
    /// Local address: the first 4 bytes of `idiag_src` for AF_INET, all 16 for AF_INET6
    /// (v4-mapped addresses stay `IpAddr::V6`).
    pub src: IpAddr,
    /// Remote address, same rules as `src`.
    pub dst: IpAddr,
    /// `id.idiag_if`: bound interface index (`sk_bound_dev_if`), 0 if none.
    pub ifindex: u32,
    /// Socket cookie: `idiag_cookie[0] | idiag_cookie[1] << 32`. The stable identity of a
    /// socket across samples.
    pub cookie: u64,
    /// `idiag_expires`: time until the timer fires, milliseconds.
    pub expires_ms: u32,
    /// `idiag_rqueue`: TCP: bytes received but unread; LISTEN: accept-queue length.
    pub rqueue: u32,
    /// `idiag_wqueue`: TCP: bytes unacked + unsent; LISTEN: accept backlog limit.
    pub wqueue: u32,
    /// `idiag_uid`: owner uid (0 for TIME-WAIT and SYN-RECV minisockets).
    pub uid: u32,
    /// `idiag_inode`: socket inode (0 for TIME-WAIT and SYN-RECV minisockets).
    pub inode: u32,
    /// Decoded attributes.
    pub attrs: InetDiagAttrs<'a>,
}

fn addr(family: u8, b: &[u8]) -> Option<IpAddr> {
    match family {
        AF_INET => arr::<4>(b, 0).map(|a| IpAddr::V4(Ipv4Addr::from(a))),
        AF_INET6 => arr::<16>(b, 0).map(|a| IpAddr::V6(Ipv6Addr::from(a))),
        _ => None,
    }
}

/// The attribute stream of an inet_diag reply payload (everything after the 72-byte header),
/// for attributes [`InetDiagAttrs`] does not decode.
pub fn raw_attrs(payload: &[u8]) -> netlink::Attrs<'_> {
    netlink::attrs(payload.get(INET_DIAG_MSG_LEN..).unwrap_or(&[]))
}

/// Decodes the payload of one `SOCK_DIAG_BY_FAMILY` data message from an inet_diag dump: the
/// 72-byte `inet_diag_msg` then attributes. Unknown attributes are skipped; a known attribute
/// shorter than its fixed size yields `None` for that field. Errors: payload shorter than 72
/// bytes, a family other than AF_INET/AF_INET6, or a malformed attribute header.
pub fn decode_msg(payload: &[u8]) -> Result<InetDiagMsg<'_>, DecodeError> {
    const WHAT: &str = "inet_diag_msg";
    if payload.len() < INET_DIAG_MSG_LEN {
        return Err(DecodeError::truncated(
            WHAT,
            INET_DIAG_MSG_LEN,
            payload.len(),
        ));
    }
    let h = &payload[..INET_DIAG_MSG_LEN];
    let short = || DecodeError::truncated(WHAT, INET_DIAG_MSG_LEN, payload.len());
    let family = h[0];
    let src = addr(family, &h[8..24])
        .ok_or_else(|| DecodeError::malformed(WHAT, 0, "idiag_family is not AF_INET/AF_INET6"))?;
    let dst = addr(family, &h[24..40]).ok_or_else(short)?;
    let mut m = InetDiagMsg {
        family,
        state: h[1],
        timer: h[2],
        retrans: h[3],
        sport: u16_be(h, 4).ok_or_else(short)?,
        dport: u16_be(h, 6).ok_or_else(short)?,
        src,
        dst,
        ifindex: u32_ne(h, 40).ok_or_else(short)?,
        cookie: cookie_at(h, 44).ok_or_else(short)?,
        expires_ms: u32_ne(h, 52).ok_or_else(short)?,
        rqueue: u32_ne(h, 56).ok_or_else(short)?,
        wqueue: u32_ne(h, 60).ok_or_else(short)?,
        uid: u32_ne(h, 64).ok_or_else(short)?,
        inode: u32_ne(h, 68).ok_or_else(short)?,
        attrs: InetDiagAttrs::default(),
    };
    let a = &mut m.attrs;
    for item in raw_attrs(payload) {
        let (ty, p) = item?;
        match ty {
            attr::MEMINFO => {
                a.meminfo =
                    (|| Some([u32_ne(p, 0)?, u32_ne(p, 4)?, u32_ne(p, 8)?, u32_ne(p, 12)?]))()
            }
            attr::INFO => a.info = Some(p),
            attr::VEGASINFO => a.vegas = Some(p),
            attr::CONG => a.cong = c_str(p),
            attr::TOS => a.tos = u8_at(p, 0),
            attr::TCLASS => a.tclass = u8_at(p, 0),
            attr::SKMEMINFO => a.skmeminfo = SkMemInfo::from_bytes(p),
            attr::SHUTDOWN => a.shutdown = u8_at(p, 0),
            attr::PROTOCOL => a.protocol = u8_at(p, 0),
            attr::SKV6ONLY => a.v6only = u8_at(p, 0).map(|v| v != 0),
            attr::MARK => a.mark = u32_ne(p, 0),
            attr::BBRINFO => a.bbr = BbrInfo::from_bytes(p),
            attr::CLASS_ID => a.class_id = u32_ne(p, 0),
            attr::ULP_INFO => {
                // Nested; a malformed nest only loses the name, not the socket.
                a.ulp_name = netlink::attrs(p)
                    .map_while(Result::ok)
                    .find(|&(t, _)| t == attr::ULP_INFO_NAME)
                    .and_then(|(_, v)| c_str(v));
            }
            attr::CGROUP_ID => a.cgroup_id = u64_ne(p, 0),
            attr::SOCKOPT => {
                a.sockopt = arr::<2>(p, 0).map(|b| u16::from(b[0]) | (u16::from(b[1]) << 8))
            }
            _ => {}
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::{classify, messages, Control};

    #[test]
    fn tcp_both_families_request_layout() {
        let r = InetDiagReq {
            family: AF_INET6,
            protocol: IPPROTO_TCP,
            ext: ext::INFO | ext::SKMEMINFO,
            raw_protocol: 0,
            states: 0x0fff,
            sport: 0x1234,
            dport: 0x0050,
            bytecode: Some(vec![0, 4, 8, 0]),
        };
        let b = r.encode_tcp_both_families(7);
        let m = messages(&b).next().unwrap().unwrap();
        assert_eq!(m.ty, TCPDIAG_GETSOCK);
        assert_eq!(m.flags, netlink::NLM_F_REQUEST | netlink::NLM_F_DUMP);
        assert_eq!(m.seq, 7);
        let p = m.payload;
        assert_eq!(p.len(), 60 + 8);
        // Family 0 (both), no prefix lengths, the extensions.
        assert_eq!(&p[..4], &[0, 0, 0, ext::INFO | ext::SKMEMINFO]);
        // inet_diag_sockid: ports big-endian, then 32 bytes of addresses, the interface and
        // INET_DIAG_NOCOOKIE.
        assert_eq!(&p[4..8], &[0x12, 0x34, 0x00, 0x50]);
        assert_eq!(&p[8..40], &[0u8; 32]);
        assert_eq!(&p[44..52], &[0xff; 8]);
        assert_eq!(&p[52..56], &0x0fffu32.to_ne_bytes());
        assert_eq!(&p[56..60], &[0; 4]);
        let attrs: Vec<_> = netlink::attrs(&p[60..]).collect::<Result<_, _>>().unwrap();
        assert_eq!(attrs, vec![(1, &[0u8, 4, 8, 0][..])]);
    }

    #[test]
    fn request_layout() {
        let r = InetDiagReq {
            family: AF_INET6,
            protocol: IPPROTO_MPTCP,
            ext: ext::INFO,
            raw_protocol: 0,
            states: 1 << 1,
            sport: 0x1234,
            dport: 0,
            bytecode: Some(vec![0, 4, 8, 0]),
        };
        let b = r.encode(9);
        let m = messages(&b).next().unwrap().unwrap();
        assert_eq!(m.ty, netlink::SOCK_DIAG_BY_FAMILY);
        let p = m.payload;
        assert_eq!(p.len(), 56 + 8 + 8);
        assert_eq!(&p[..4], &[10, 6, 2, 0]);
        assert_eq!(&p[8..10], &[0x12, 0x34]);
        assert_eq!(&p[48..56], &[0xff; 8]);
        let attrs: Vec<_> = netlink::attrs(&p[56..]).collect::<Result<_, _>>().unwrap();
        assert_eq!(attrs[0], (1, &[0u8, 4, 8, 0][..]));
        assert_eq!(attrs[1], (3, &262u32.to_ne_bytes()[..]));
        // TCP: no protocol attribute.
        let r = InetDiagReq {
            protocol: IPPROTO_TCP,
            bytecode: None,
            ..r
        };
        assert_eq!(r.encode_body().len(), 56);
    }

    fn synth(family: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut p = vec![0u8; 72];
        p[0] = family;
        p[1] = 1;
        p[4..6].copy_from_slice(&443u16.to_be_bytes());
        p[8..12].copy_from_slice(&[10, 0, 0, 1]);
        p[44..48].copy_from_slice(&1u32.to_ne_bytes());
        p[48..52].copy_from_slice(&2u32.to_ne_bytes());
        p[68..72].copy_from_slice(&77u32.to_ne_bytes());
        for (t, v) in attrs {
            push_attr(&mut p, *t, v);
        }
        p
    }

    #[test]
    fn decodes_header_and_attrs() {
        let mut ulp = Vec::new();
        push_attr(&mut ulp, attr::ULP_INFO_NAME, b"tls\0");
        let p = synth(
            AF_INET,
            &[
                (attr::CONG, b"bbr\0"),
                (attr::SHUTDOWN, &[3]),
                (attr::PAD, &[]),
                (99, &[1, 2, 3]),
                (attr::MARK, &[1, 2]), // short: None
                (attr::ULP_INFO | 0x8000, &ulp),
                (attr::CGROUP_ID, &25u64.to_ne_bytes()),
                (attr::SOCKOPT, &[0x02, 0x01]),
            ],
        );
        let m = decode_msg(&p).unwrap();
        assert_eq!(m.sport, 443);
        assert_eq!(m.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(m.cookie, 1 | (2 << 32));
        assert_eq!(m.inode, 77);
        assert_eq!(m.attrs.cong, Some("bbr"));
        assert_eq!(m.attrs.shutdown, Some(3));
        assert_eq!(m.attrs.mark, None);
        assert_eq!(m.attrs.ulp_name, Some("tls"));
        assert_eq!(m.attrs.cgroup_id, Some(25));
        let so = m.attrs.sockopt.unwrap();
        if cfg!(target_endian = "little") {
            assert!(so & sockopt::IS_ICSK != 0 && so & sockopt::BIND_ADDRESS_NO_PORT != 0);
            assert!(so & sockopt::RECVERR == 0);
        }
    }

    #[test]
    fn rejects_short_and_unknown_family() {
        assert!(decode_msg(&[0u8; 71]).is_err());
        assert!(decode_msg(&synth(1, &[])).is_err());
        let mut p = synth(AF_INET6, &[]);
        p.extend_from_slice(&[1, 0]);
        assert!(decode_msg(&p).is_err());
    }

    #[test]
    fn classify_roundtrip() {
        let b = netlink::encode_message(20, 2, 1, &synth(AF_INET6, &[]));
        let m = messages(&b).next().unwrap().unwrap();
        match classify(&m).unwrap() {
            Control::Data(p) => assert!(matches!(decode_msg(p).unwrap().src, IpAddr::V6(_))),
            c => panic!("{c:?}"),
        }
    }
}
