//! `struct tcp_info` (`include/uapi/linux/tcp.h`), as sent in `INET_DIAG_INFO` for TCP
//! sockets and returned by `getsockopt(TCP_INFO)`; filled by `tcp_get_info()` in
//! `net/ipv4/tcp.c`.
//!
//! The struct is append-only, so its length tells which fields exist: a 4.9 kernel sends 168
//! bytes, 6.18 sends 280. [`TcpInfo::from_bytes`] accepts any length, zero-fills the rest, and
//! every accessor returns `Some` iff the field lies entirely inside the bytes received, so
//! "absent on this kernel" is never confused with 0 (the trap in `ss`'s `tcp_show_info`).
//!
//! Bytes 276..280 are deliberately not decoded: on 6.18 they are two `__u16`
//! (`tcpi_accecn_fail_mode`, `tcpi_accecn_opt_seen`), but 7.0 redefined the same four bytes
//! as one `__u32` bitfield word (`tcpi_ecn_mode:2, tcpi_accecn_opt_seen:2,
//! tcpi_accecn_fail_mode:4, tcpi_options2:24`) without changing the struct size. A length check
//! cannot tell the two layouts apart, so any decoding would be wrong on one of them.
//! [`TcpInfo::raw`] still exposes the bytes for a caller that knows the kernel version.

/// `TCPI_OPT_*` bits of [`TcpInfo::options`] (`include/uapi/linux/tcp.h`).
pub mod opt {
    /// `TCPI_OPT_TIMESTAMPS`: timestamps negotiated.
    pub const TIMESTAMPS: u8 = 1;
    /// `TCPI_OPT_SACK`: SACK negotiated.
    pub const SACK: u8 = 2;
    /// `TCPI_OPT_WSCALE`: window scaling negotiated by both ends; the wscale nibbles are only
    /// meaningful when this is set.
    pub const WSCALE: u8 = 4;
    /// `TCPI_OPT_ECN`: ECN negotiated.
    pub const ECN: u8 = 8;
    /// `TCPI_OPT_ECN_SEEN`: at least one ECT packet received.
    pub const ECN_SEEN: u8 = 16;
    /// `TCPI_OPT_SYN_DATA`: SYN-ACK acknowledged data in the SYN (Fast Open).
    pub const SYN_DATA: u8 = 32;
    /// `TCPI_OPT_USEC_TS`: microsecond timestamps (6.7+).
    pub const USEC_TS: u8 = 64;
    /// `TCPI_OPT_TFO_CHILD`: child socket created from a Fast Open SYN (6.16+).
    pub const TFO_CHILD: u8 = 128;
}

/// `sizeof(struct tcp_info)` by the kernel release that last grew it (doc/reference/linux.md#size-by-kernel;
/// the version is the first iproute2 release whose UAPI header had the field).
///
/// Use the length received, never `uname`, to decide what exists: distributions backport.
pub const HISTORICAL_SIZES: &[(&str, usize)] = &[
    ("<3.15", 104),
    ("3.15", 120),
    ("4.1", 136),
    ("4.2", 144),
    ("4.6", 160),
    ("4.9", 168),
    ("4.10", 192),
    ("4.18", 200),
    ("4.19", 224),
    ("5.4", 232),
    ("6.2", 240),
    ("6.7", 248),
    ("6.18", 280),
];

/// A decoded-on-demand `struct tcp_info` of any length.
///
/// Holds a zero-filled copy of the first 280 bytes and the length the kernel sent.
#[derive(Clone)]
pub struct TcpInfo {
    buf: [u8; TcpInfo::SIZE_6_18],
    len: usize,
}

macro_rules! fields {
    ($( $(#[$doc:meta])* $name:ident : $ty:ident @ $off:expr ;)*) => {
        impl TcpInfo {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $name(&self) -> Option<$ty> {
                    self.get::<{ std::mem::size_of::<$ty>() }>($off).map($ty::from_ne_bytes)
                }
            )*
        }

        /// Every plain (non-bitfield) field: name without the `tcpi_` prefix, byte offset, size.
        /// A field exists iff `offset + size <= len`.
        pub const FIELDS: &[(&str, usize, usize)] = &[
            $( (stringify!($name), $off, std::mem::size_of::<$ty>()), )*
        ];

        impl TcpInfo {
            /// Every plain field as `(name, value widened to u64)`, in struct order: the same
            /// names and availability as the accessors (bitfields not included).
            pub fn fields(&self) -> impl Iterator<Item = (&'static str, Option<u64>)> + '_ {
                [$( (stringify!($name), self.$name().map(u64::from)), )*].into_iter()
            }
        }
    };
}

impl TcpInfo {
    /// `sizeof(struct tcp_info)` on Linux 6.18 (BTF of the running kernel, doc/reference/linux.md#layout).
    pub const SIZE_6_18: usize = 280;

    /// Copies `min(b.len(), 280)` bytes into a zeroed buffer and remembers `b.len()` (capped at
    /// 280). Never fails: any length is a valid `tcp_info` from some kernel.
    pub fn from_bytes(b: &[u8]) -> TcpInfo {
        let len = b.len().min(Self::SIZE_6_18);
        let mut buf = [0u8; Self::SIZE_6_18];
        buf[..len].copy_from_slice(&b[..len]);
        TcpInfo { buf, len }
    }

    /// Bytes received (capped at 280). Compare with [`HISTORICAL_SIZES`] to see the generation.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the kernel sent no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes received (at most 280), for fields this type does not decode.
    pub fn raw(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    #[inline]
    fn get<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        if off.checked_add(N)? > self.len {
            return None;
        }
        crate::bytes::arr(&self.buf, off)
    }

    #[inline]
    fn byte(&self, off: usize) -> Option<u8> {
        self.get::<1>(off).map(|b| b[0])
    }

    /// `tcpi_snd_wscale`: the peer's window shift (`__u8:4` in byte 6). Only meaningful when
    /// [`opt::WSCALE`] is set in [`options`](Self::options).
    ///
    /// GCC allocates bitfields from the least significant bit on little-endian ABIs and from
    /// the most significant bit on big-endian ones, so the nibble depends on `target_endian`.
    pub fn snd_wscale(&self) -> Option<u8> {
        let b = self.byte(6)?;
        Some(if cfg!(target_endian = "little") {
            b & 0x0f
        } else {
            b >> 4
        })
    }

    /// `tcpi_rcv_wscale`: our window shift (`__u8:4` in byte 6, after `snd_wscale`).
    pub fn rcv_wscale(&self) -> Option<u8> {
        let b = self.byte(6)?;
        Some(if cfg!(target_endian = "little") {
            b >> 4
        } else {
            b & 0x0f
        })
    }

    /// `tcpi_delivery_rate_app_limited` (4.9+): the last delivery-rate sample was limited by
    /// the application, so [`delivery_rate`](Self::delivery_rate) is a lower bound. The first
    /// bit of byte 7; on kernels before 4.9 byte 7 was padding and reads `false`.
    pub fn delivery_rate_app_limited(&self) -> Option<bool> {
        let b = self.byte(7)?;
        Some(if cfg!(target_endian = "little") {
            b & 0x01 != 0
        } else {
            b & 0x80 != 0
        })
    }

    /// `tcpi_fastopen_client_fail` (5.5+): why a client's Fast Open failed (`__u8:2`, after
    /// `delivery_rate_app_limited` in byte 7): 0 unspecified, 1 no cookie sent, 2 SYN-ACK
    /// did not ack the data, 3 SYN retransmitted.
    pub fn fastopen_client_fail(&self) -> Option<u8> {
        let b = self.byte(7)?;
        Some(if cfg!(target_endian = "little") {
            (b >> 1) & 0x03
        } else {
            (b >> 5) & 0x03
        })
    }
}

fields! {
    /// `tcpi_state`: TCP state (`TCP_ESTABLISHED` = 1 ... `include/net/tcp_states.h`).
    state: u8 @ 0;
    /// `tcpi_ca_state`: congestion-avoidance state: 0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss.
    ca_state: u8 @ 1;
    /// `tcpi_retransmits`: current run of consecutive RTO retransmissions.
    retransmits: u8 @ 2;
    /// `tcpi_probes`: unanswered zero-window or keepalive probes (`icsk_probes_out`).
    probes: u8 @ 3;
    /// `tcpi_backoff`: exponential RTO/persist backoff count.
    backoff: u8 @ 4;
    /// `tcpi_options`: negotiated options, [`opt`] bits.
    options: u8 @ 5;
    /// `tcpi_rto`: retransmission timeout, microseconds.
    rto_us: u32 @ 8;
    /// `tcpi_ato`: delayed-ACK timeout, microseconds.
    ato_us: u32 @ 12;
    /// `tcpi_snd_mss`: sending MSS, bytes.
    snd_mss: u32 @ 16;
    /// `tcpi_rcv_mss`: receive MSS estimate, bytes.
    rcv_mss: u32 @ 20;
    /// `tcpi_unacked`: packets in flight; for LISTEN, the accept-queue length.
    unacked: u32 @ 24;
    /// `tcpi_sacked`: SACKed packets; for LISTEN, the accept backlog limit.
    sacked: u32 @ 28;
    /// `tcpi_lost`: packets marked lost.
    lost: u32 @ 32;
    /// `tcpi_retrans`: retransmitted packets currently out.
    retrans: u32 @ 36;
    /// `tcpi_fackets`: always 0 since FACK was removed (4.18).
    fackets: u32 @ 40;
    /// `tcpi_last_data_sent`: milliseconds since the last data was sent.
    last_data_sent_ms: u32 @ 44;
    /// `tcpi_last_ack_sent`: never filled by Linux (always 0).
    last_ack_sent_ms: u32 @ 48;
    /// `tcpi_last_data_recv`: milliseconds since the last data was received.
    last_data_recv_ms: u32 @ 52;
    /// `tcpi_last_ack_recv`: milliseconds since the last ACK was received.
    last_ack_recv_ms: u32 @ 56;
    /// `tcpi_pmtu`: path MTU, bytes.
    pmtu: u32 @ 60;
    /// `tcpi_rcv_ssthresh`: current receive-window clamp, bytes.
    rcv_ssthresh: u32 @ 64;
    /// `tcpi_rtt`: smoothed RTT, microseconds.
    rtt_us: u32 @ 68;
    /// `tcpi_rttvar`: RTT mean deviation, microseconds.
    rttvar_us: u32 @ 72;
    /// `tcpi_snd_ssthresh`: slow-start threshold, packets (0x7fffffff = infinite).
    snd_ssthresh: u32 @ 76;
    /// `tcpi_snd_cwnd`: congestion window, packets.
    snd_cwnd: u32 @ 80;
    /// `tcpi_advmss`: advertised MSS, bytes.
    advmss: u32 @ 84;
    /// `tcpi_reordering`: reordering metric, packets.
    reordering: u32 @ 88;
    /// `tcpi_rcv_rtt`: receiver-side RTT estimate, microseconds.
    rcv_rtt_us: u32 @ 92;
    /// `tcpi_rcv_space`: receiver's estimate of bytes read per RTT (DRS), bytes.
    rcv_space: u32 @ 96;
    /// `tcpi_total_retrans`: retransmitted segments over the connection's life.
    total_retrans: u32 @ 100;
    /// `tcpi_pacing_rate` (3.15+): current pacing rate, bytes per second.
    pacing_rate: u64 @ 104;
    /// `tcpi_max_pacing_rate` (3.15+): `SO_MAX_PACING_RATE`, bytes per second (`u64::MAX` = none).
    max_pacing_rate: u64 @ 112;
    /// `tcpi_bytes_acked` (4.1+): bytes acknowledged by the peer (RFC 4898 HCThruOctetsAcked).
    bytes_acked: u64 @ 120;
    /// `tcpi_bytes_received` (4.1+): bytes received (RFC 4898 HCThruOctetsReceived).
    bytes_received: u64 @ 128;
    /// `tcpi_segs_out` (4.2+): segments sent, including retransmissions.
    segs_out: u32 @ 136;
    /// `tcpi_segs_in` (4.2+): segments received.
    segs_in: u32 @ 140;
    /// `tcpi_notsent_bytes` (4.6+): bytes written but not yet sent (`write_seq - snd_nxt`).
    notsent_bytes: u32 @ 144;
    /// `tcpi_min_rtt` (4.6+): windowed minimum RTT, microseconds.
    min_rtt_us: u32 @ 148;
    /// `tcpi_data_segs_in` (4.6+): segments received with payload.
    data_segs_in: u32 @ 152;
    /// `tcpi_data_segs_out` (4.6+): segments sent with payload.
    data_segs_out: u32 @ 156;
    /// `tcpi_delivery_rate` (4.9+): last delivery-rate sample, bytes per second.
    delivery_rate: u64 @ 160;
    /// `tcpi_busy_time` (4.10+): time with data in flight, microseconds (includes the two
    /// limited chronographs below).
    busy_time_us: u64 @ 168;
    /// `tcpi_rwnd_limited` (4.10+): time stalled by the peer's receive window, microseconds.
    rwnd_limited_us: u64 @ 176;
    /// `tcpi_sndbuf_limited` (4.10+): time stalled by our send buffer, microseconds.
    sndbuf_limited_us: u64 @ 184;
    /// `tcpi_delivered` (4.18+): packets delivered, including retransmissions.
    delivered: u32 @ 192;
    /// `tcpi_delivered_ce` (4.18+): delivered packets that were ECN-CE marked.
    delivered_ce: u32 @ 196;
    /// `tcpi_bytes_sent` (4.19+): bytes sent, including retransmissions (RFC 4898 HCThruOctetsSent).
    bytes_sent: u64 @ 200;
    /// `tcpi_bytes_retrans` (4.19+): bytes retransmitted (RFC 4898 OctetsRetrans).
    bytes_retrans: u64 @ 208;
    /// `tcpi_dsack_dups` (4.19+): segments the peer reported as duplicates with DSACK.
    dsack_dups: u32 @ 216;
    /// `tcpi_reord_seen` (4.19+): reordering events seen.
    reord_seen: u32 @ 220;
    /// `tcpi_rcv_ooopack` (5.4+): out-of-order packets received.
    rcv_ooopack: u32 @ 224;
    /// `tcpi_snd_wnd` (5.4+): the peer's advertised window after scaling, bytes.
    snd_wnd: u32 @ 228;
    /// `tcpi_rcv_wnd` (6.2+): our receive window, bytes. Stored before the `65535 << rcv_wscale`
    /// clamp (`tcp_select_window`), so it can exceed what was advertised.
    rcv_wnd: u32 @ 232;
    /// `tcpi_rehash` (6.2+): PLB and timeout rehash count.
    rehash: u32 @ 236;
    /// `tcpi_total_rto` (6.7+): RTO events.
    total_rto: u16 @ 240;
    /// `tcpi_total_rto_recoveries` (6.7+): RTO recovery episodes.
    total_rto_recoveries: u16 @ 242;
    /// `tcpi_total_rto_time` (6.7+): time spent in RTO recovery, milliseconds.
    total_rto_time_ms: u32 @ 244;
    /// `tcpi_received_ce` (6.18+): CE-marked packets received (AccECN).
    received_ce: u32 @ 248;
    /// `tcpi_delivered_e1_bytes` (6.18+): bytes delivered with ECT(1) (AccECN).
    delivered_e1_bytes: u32 @ 252;
    /// `tcpi_delivered_e0_bytes` (6.18+): bytes delivered with ECT(0) (AccECN).
    delivered_e0_bytes: u32 @ 256;
    /// `tcpi_delivered_ce_bytes` (6.18+): bytes delivered with CE (AccECN).
    delivered_ce_bytes: u32 @ 260;
    /// `tcpi_received_e1_bytes` (6.18+): bytes received with ECT(1) (AccECN).
    received_e1_bytes: u32 @ 264;
    /// `tcpi_received_e0_bytes` (6.18+): bytes received with ECT(0) (AccECN).
    received_e0_bytes: u32 @ 268;
    /// `tcpi_received_ce_bytes` (6.18+): bytes received with CE (AccECN).
    received_ce_bytes: u32 @ 272;
}

impl std::fmt::Debug for TcpInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpInfo")
            .field("len", &self.len)
            .field("state", &self.state())
            .field("rtt_us", &self.rtt_us())
            .field("snd_cwnd", &self.snd_cwnd())
            .field("bytes_acked", &self.bytes_acked())
            .field("delivery_rate", &self.delivery_rate())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_contiguous_and_end_at_276() {
        // Every byte 0..276 except the two bitfield bytes (6, 7) is covered exactly once.
        let mut covered = [0u8; 280];
        for &(_, off, size) in FIELDS {
            for c in &mut covered[off..off + size] {
                *c += 1;
            }
        }
        for (i, &c) in covered.iter().enumerate() {
            let expect = u8::from(!(i == 6 || i == 7 || i >= 276));
            assert_eq!(c, expect, "byte {i}");
        }
    }

    #[test]
    fn bitfields_little_endian_layout() {
        let mut b = [0u8; 8];
        // snd_wscale 7, rcv_wscale 9; app_limited 1, fastopen_client_fail 2
        if cfg!(target_endian = "little") {
            b[6] = 0x97;
            b[7] = 0b101;
        } else {
            b[6] = 0x79;
            b[7] = 0b1100_0000;
        }
        let t = TcpInfo::from_bytes(&b);
        assert_eq!(t.snd_wscale(), Some(7));
        assert_eq!(t.rcv_wscale(), Some(9));
        assert_eq!(t.delivery_rate_app_limited(), Some(true));
        assert_eq!(t.fastopen_client_fail(), Some(2));
        let t = TcpInfo::from_bytes(&b[..7]);
        assert_eq!(t.snd_wscale(), Some(7));
        assert_eq!(t.delivery_rate_app_limited(), None);
    }

    #[test]
    fn longer_than_known_is_capped() {
        let b = vec![0xffu8; 400];
        let t = TcpInfo::from_bytes(&b);
        assert_eq!(t.len(), 280);
        assert_eq!(t.received_ce_bytes(), Some(u32::MAX));
    }
}
