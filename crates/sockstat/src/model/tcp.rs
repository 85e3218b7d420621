//! TCP internals (`-T`) and socket memory (`-m`) of one socket, as the kernel reported them.
//!
//! [`TcpDetails`] keeps the kernel's `tcp_info` exactly as received (any length: fields a kernel
//! does not have are `None`) and derives the values people read from it. It serializes to the
//! `"tcp"` object of the JSON contract, units in the names; a field the running kernel does not
//! provide is absent, never 0.

use serde::ser::SerializeMap;
use serde::Serialize;
pub use sockstat_wire::inet_diag::BbrInfo;
pub use sockstat_wire::tcp_info::{opt, TcpInfo};

/// `tcpi_snd_ssthresh` when no threshold has been set yet (initial slow start).
pub const SSTHRESH_INFINITE: u32 = 0x7fff_ffff;
/// The largest window a header can carry without scaling (RFC 7323 section 2.2).
pub const MAX_UNSCALED_WINDOW: u32 = 65_535;

/// TCP internals of one socket.
#[derive(Clone)]
#[non_exhaustive]
pub struct TcpDetails {
    /// The kernel's `struct tcp_info`, as long as the kernel sent it.
    pub info: TcpInfo,
    /// Congestion control algorithm (`INET_DIAG_CONG`), e.g. `cubic`, `bbr`.
    pub congestion: Option<String>,
    /// BBR's own estimates (`INET_DIAG_BBRINFO`) when the algorithm is BBR.
    pub bbr: Option<BbrInfo>,
    /// When sockstat read `info` (the receive that brought its dump message): a dump of
    /// 60k sockets takes 60 ms or more, so two samples' reads of one connection are not the
    /// samples' interval apart; rates divide by the time between its own two reads
    /// (`top::Conn::window_s`). `None` where the counters did not come from a live dump.
    pub read_at: Option<std::time::Instant>,
}

impl std::fmt::Debug for TcpDetails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpDetails")
            .field("len", &self.info.len())
            .field("rtt_us", &self.info.rtt_us())
            .field("congestion", &self.congestion)
            .finish_non_exhaustive()
    }
}

impl PartialEq for TcpDetails {
    fn eq(&self, other: &Self) -> bool {
        self.info.raw() == other.info.raw() && self.congestion == other.congestion
    }
}

/// Congestion-avoidance state names (`enum tcp_ca_state`, `include/uapi/linux/tcp.h`).
pub fn ca_state_name(s: u8) -> &'static str {
    match s {
        0 => "open",
        1 => "disorder",
        2 => "cwr",
        3 => "recovery",
        4 => "loss",
        _ => "unknown",
    }
}

impl TcpDetails {
    /// True when window scaling was negotiated by both ends (then the wscale fields are valid).
    pub fn wscale_ok(&self) -> Option<bool> {
        self.info.options().map(|o| o & opt::WSCALE != 0)
    }

    /// Our receive window as it can actually be advertised: `tcpi_rcv_wnd` is stored before the
    /// clamp to `65535 << rcv_wscale` (`tcp_select_window`, doc/reference/linux.md#windows), so a connection
    /// without window scaling can show 1.7 MB while advertising at most 64 KiB.
    pub fn rcv_wnd_advertised(&self) -> Option<u32> {
        let raw = self.info.rcv_wnd()?;
        let shift = if self.wscale_ok()? {
            u32::from(self.info.rcv_wscale().unwrap_or(0)).min(14)
        } else {
            0
        };
        Some(raw.min(MAX_UNSCALED_WINDOW << shift))
    }

    /// The slow-start threshold in packets; `None` when unset (infinite) or not reported.
    pub fn ssthresh(&self) -> Option<u32> {
        self.info.snd_ssthresh().filter(|&s| s < SSTHRESH_INFINITE)
    }

    /// Share of busy time the sender was limited by the peer's receive window (0..1).
    pub fn rwnd_limited_share(&self) -> Option<f64> {
        share(self.info.rwnd_limited_us()?, self.info.busy_time_us()?)
    }

    /// Share of busy time the sender was limited by its own send buffer (0..1).
    pub fn sndbuf_limited_share(&self) -> Option<f64> {
        share(self.info.sndbuf_limited_us()?, self.info.busy_time_us()?)
    }
}

/// `part / busy`, where `busy_time` counts all three chronographs (doc/reference/linux.md#chronographs).
fn share(part: u64, busy: u64) -> Option<f64> {
    (busy > 0).then(|| (part as f64 / busy as f64).min(1.0))
}

impl Serialize for TcpDetails {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let i = &self.info;
        let mut m = s.serialize_map(None)?;
        macro_rules! put {
            ($name:expr, $v:expr) => {
                if let Some(v) = $v {
                    m.serialize_entry($name, &v)?;
                }
            };
        }
        put!("ca_state", i.ca_state().map(ca_state_name));
        if let Some(o) = i.options() {
            m.serialize_entry(
                "options",
                &Options {
                    timestamps: o & opt::TIMESTAMPS != 0,
                    sack: o & opt::SACK != 0,
                    wscale: o & opt::WSCALE != 0,
                    ecn: o & opt::ECN != 0,
                    ecn_seen: o & opt::ECN_SEEN != 0,
                    syn_data: o & opt::SYN_DATA != 0,
                },
            )?;
        }
        if self.wscale_ok() == Some(true) {
            put!("snd_wscale", i.snd_wscale());
            put!("rcv_wscale", i.rcv_wscale());
        }
        put!("congestion", self.congestion.as_deref());
        put!("rtt_us", i.rtt_us());
        put!("rttvar_us", i.rttvar_us());
        put!("min_rtt_us", i.min_rtt_us());
        put!("rto_us", i.rto_us());
        put!("ato_us", i.ato_us());
        put!("rcv_rtt_us", i.rcv_rtt_us());
        put!("cwnd_pkts", i.snd_cwnd());
        put!("ssthresh_pkts", self.ssthresh());
        put!("snd_mss_bytes", i.snd_mss());
        put!("rcv_mss_bytes", i.rcv_mss());
        put!("advmss_bytes", i.advmss());
        put!("pmtu_bytes", i.pmtu());
        put!("snd_wnd_bytes", i.snd_wnd());
        put!("rcv_wnd_bytes", self.rcv_wnd_advertised());
        put!("rcv_space_bytes", i.rcv_space());
        put!("rcv_ssthresh_bytes", i.rcv_ssthresh());
        put!("unacked_pkts", i.unacked());
        put!("sacked_pkts", i.sacked());
        put!("lost_pkts", i.lost());
        put!("retrans_pkts", i.retrans());
        put!("retransmits", i.retransmits());
        put!("total_retrans_pkts", i.total_retrans());
        put!("notsent_bytes", i.notsent_bytes());
        put!("delivery_rate_bytes_per_sec", i.delivery_rate());
        put!("delivery_rate_app_limited", i.delivery_rate_app_limited());
        put!("pacing_rate_bytes_per_sec", i.pacing_rate());
        // ~0 means "no SO_MAX_PACING_RATE set": not a rate.
        put!(
            "max_pacing_rate_bytes_per_sec",
            i.max_pacing_rate().filter(|&r| r != u64::MAX)
        );
        put!("bytes_acked", i.bytes_acked());
        put!("bytes_received", i.bytes_received());
        put!("bytes_sent", i.bytes_sent());
        put!("bytes_retrans", i.bytes_retrans());
        put!("segs_out", i.segs_out());
        put!("segs_in", i.segs_in());
        put!("data_segs_out", i.data_segs_out());
        put!("data_segs_in", i.data_segs_in());
        put!("delivered_pkts", i.delivered());
        put!("delivered_ce_pkts", i.delivered_ce());
        put!("busy_time_us", i.busy_time_us());
        put!("rwnd_limited_us", i.rwnd_limited_us());
        put!("sndbuf_limited_us", i.sndbuf_limited_us());
        put!("rwnd_limited_share", self.rwnd_limited_share());
        put!("sndbuf_limited_share", self.sndbuf_limited_share());
        put!("probes", i.probes());
        put!("backoff", i.backoff());
        put!("last_data_sent_ms", i.last_data_sent_ms());
        put!("last_data_recv_ms", i.last_data_recv_ms());
        put!("last_ack_recv_ms", i.last_ack_recv_ms());
        put!("reordering", i.reordering());
        put!("reord_seen", i.reord_seen());
        put!("dsack_dups", i.dsack_dups());
        put!("rcv_ooopack", i.rcv_ooopack());
        put!("rehash", i.rehash());
        put!("total_rto", i.total_rto());
        put!("total_rto_recoveries", i.total_rto_recoveries());
        put!("total_rto_time_ms", i.total_rto_time_ms());
        if let Some(b) = &self.bbr {
            m.serialize_entry(
                "bbr",
                &Bbr {
                    bw_bytes_per_sec: b.bw_bytes_per_sec,
                    min_rtt_us: b.min_rtt_us,
                    pacing_gain: f64::from(b.pacing_gain) / 256.0,
                    cwnd_gain: f64::from(b.cwnd_gain) / 256.0,
                },
            )?;
        }
        put!("tcp_info_bytes", Some(i.len()));
        m.end()
    }
}

#[derive(Serialize)]
struct Options {
    timestamps: bool,
    sack: bool,
    wscale: bool,
    ecn: bool,
    ecn_seen: bool,
    syn_data: bool,
}

#[derive(Serialize)]
struct Bbr {
    bw_bytes_per_sec: u64,
    min_rtt_us: u32,
    pacing_gain: f64,
    cwnd_gain: f64,
}

/// Socket memory (`-m`): `SK_MEMINFO_*` as `ss -m` shows it (`skmem:(r,rb,t,tb,f,w,o,bl,d)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Memory {
    /// Bytes queued for reading (`r`, `sk_rmem_alloc`).
    pub rmem_alloc_bytes: u32,
    /// Receive buffer limit (`rb`, `sk_rcvbuf`): twice an SO_RCVBUF value when the application set one.
    pub rcvbuf_bytes: u32,
    /// Bytes handed to lower layers and not yet freed (`t`, `sk_wmem_alloc`).
    pub wmem_alloc_bytes: u32,
    /// Send buffer limit (`tb`, `sk_sndbuf`): twice an SO_SNDBUF value when the application set one.
    pub sndbuf_bytes: u32,
    /// Reserved but unused memory (`f`, `sk_forward_alloc`).
    pub fwd_alloc_bytes: u32,
    /// Bytes in the write queue (`w`, `sk_wmem_queued`).
    pub wmem_queued_bytes: u32,
    /// Option memory (`o`, `sk_omem_alloc`).
    pub optmem_bytes: u32,
    /// Backlog queue length (`bl`, 3.6+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog_bytes: Option<u32>,
    /// Packets dropped before reaching the socket (`d`, 4.7+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops: Option<u32>,
}

impl From<sockstat_wire::meminfo::SkMemInfo> for Memory {
    fn from(m: sockstat_wire::meminfo::SkMemInfo) -> Memory {
        Memory {
            rmem_alloc_bytes: m.rmem_alloc,
            rcvbuf_bytes: m.rcvbuf,
            wmem_alloc_bytes: m.wmem_alloc,
            sndbuf_bytes: m.sndbuf,
            fwd_alloc_bytes: m.fwd_alloc,
            wmem_queued_bytes: m.wmem_queued,
            optmem_bytes: m.optmem,
            backlog_bytes: m.backlog,
            drops: m.drops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info_with(len: usize, set: &[(usize, &[u8])]) -> TcpInfo {
        let mut b = vec![0u8; len];
        for (off, bytes) in set {
            b[*off..*off + bytes.len()].copy_from_slice(bytes);
        }
        TcpInfo::from_bytes(&b)
    }

    #[test]
    fn rcv_wnd_is_clamped_without_wscale() {
        // 1779592 stored, no WSCALE option: can advertise at most 65535
        // (doc/reference/calibration.md#experiment-d).
        let i = info_with(
            280,
            &[(232, &1_779_592u32.to_ne_bytes()), (5, &[opt::TIMESTAMPS])],
        );
        let t = TcpDetails {
            info: i,
            congestion: None,
            bbr: None,
            read_at: None,
        };
        assert_eq!(t.rcv_wnd_advertised(), Some(65_535));
    }

    #[test]
    fn rcv_wnd_with_wscale_uses_the_shift() {
        #[cfg(target_endian = "little")]
        let ws = 0x70u8; // rcv_wscale 7 in the high nibble, snd 0
        #[cfg(target_endian = "big")]
        let ws = 0x07u8;
        let i = info_with(
            280,
            &[
                (232, &10_000_000u32.to_ne_bytes()),
                (5, &[opt::WSCALE]),
                (6, &[ws]),
            ],
        );
        let t = TcpDetails {
            info: i,
            congestion: None,
            bbr: None,
            read_at: None,
        };
        assert_eq!(t.rcv_wnd_advertised(), Some(65_535 << 7));
    }

    #[test]
    fn fields_a_kernel_lacks_are_absent_in_json() {
        // A 5.4 kernel (232 bytes): snd_wnd present, rcv_wnd absent.
        let i = info_with(
            232,
            &[
                (228, &4096u32.to_ne_bytes()),
                (68, &20_000u32.to_ne_bytes()),
                (76, &SSTHRESH_INFINITE.to_ne_bytes()),
            ],
        );
        let t = TcpDetails {
            info: i,
            congestion: Some("cubic".into()),
            bbr: None,
            read_at: None,
        };
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["snd_wnd_bytes"], 4096);
        assert_eq!(v["rtt_us"], 20_000);
        assert!(v.get("rcv_wnd_bytes").is_none());
        assert!(v.get("total_rto").is_none());
        assert_eq!(v["congestion"], "cubic");
        // An infinite ssthresh is not a number of packets.
        assert!(v.get("ssthresh_pkts").is_none());
    }

    #[test]
    fn limited_shares() {
        let i = info_with(
            280,
            &[
                (168, &1_000_000u64.to_ne_bytes()),
                (176, &250_000u64.to_ne_bytes()),
                (184, &500_000u64.to_ne_bytes()),
            ],
        );
        let t = TcpDetails {
            info: i,
            congestion: None,
            bbr: None,
            read_at: None,
        };
        assert_eq!(t.rwnd_limited_share(), Some(0.25));
        assert_eq!(t.sndbuf_limited_share(), Some(0.5));
    }
}
