//! One TCP connection over time, from the kernel's own numbers: what `sockstat trace` samples
//! and draws (doc/reference/cases.md#case-001-tcp-windows-and-buffers needed a packet capture and Wireshark's tcptrace graph for
//! this).
//!
//! A [`Point`] is taken from one [`Socket`] gathered with `tcp_info` and socket memory
//! ([`Gathering::tcp_info`](crate::query::Gathering::tcp_info), [`Gathering::memory`](crate::query::Gathering::memory)); a
//! [`Trace`] is the points of one connection (same cookie) in time order, and
//! [`Trace::summary`] says, from the kernel's limited-time chronographs, what held the sender
//! back over the trace. The rendering is `render::trace`.
//!
//! ```no_run
//! use std::time::{Duration, Instant};
//! use sockstat::trace::{Point, Trace};
//! use sockstat::{PortSet, Proto, Query};
//!
//! let mut q = Query::new();
//! q.select.protos = Some(vec![Proto::Tcp]);
//! q.select.connected = true;
//! q.select.ports = Some(PortSet::parse("5001")?);
//! q.gather.tcp_info = true;
//! q.gather.memory = true;
//! q.gather.owners = false;
//! let start = Instant::now();
//! let mut trace: Option<Trace> = None;
//! while start.elapsed() < Duration::from_secs(5) {
//!     let snap = sockstat::collect(&q)?;
//!     let t = start.elapsed().as_secs_f64();
//!     if let Some(s) = snap.sockets.iter().find(|s| s.tcp.is_some()) {
//!         let tr = trace.get_or_insert_with(|| Trace::new(s));
//!         if let Some(p) = Point::of(s, t) {
//!             tr.push(s, p);
//!         }
//!     }
//!     std::thread::sleep(Duration::from_millis(20));
//! }
//! if let Some(tr) = trace {
//!     println!("{:?}", tr.summary());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::Serialize;

use crate::model::{Endpoint, Socket, State};

/// One sample of a connection. Byte counts are the kernel's; a value the running kernel does
/// not report is `None` (and absent from JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Point {
    /// Seconds since the trace started.
    pub t_s: f64,
    /// State at this sample.
    pub state: State,
    /// Bytes the peer acknowledged since the connection began (`tcpi_bytes_acked`, 4.1+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_acked: Option<u64>,
    /// Bytes received since the connection began (`tcpi_bytes_received`, 4.1+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_received: Option<u64>,
    /// Congestion window in bytes (`snd_cwnd` × `snd_mss`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwnd_bytes: Option<u64>,
    /// The peer's advertised receive window, scaled (`tcpi_snd_wnd`, 5.4+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_window_bytes: Option<u64>,
    /// Bytes in flight: the kernel's `packets_in_flight` (`unacked - sacked - lost + retrans`)
    /// × `snd_mss`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_flight_bytes: Option<u64>,
    /// Bytes written by the application and not sent yet (`tcpi_notsent_bytes`, 4.6+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_sent_bytes: Option<u64>,
    /// The send buffer limit (`SK_MEMINFO_SNDBUF`, which counts packet overhead too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sndbuf_bytes: Option<u64>,
    /// Memory queued for sending, against that limit (`SK_MEMINFO_WMEM_QUEUED`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_queued_bytes: Option<u64>,
    /// Smoothed RTT, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_us: Option<u32>,
    /// Time the connection had data to send, microseconds (`tcpi_busy_time`, 4.10+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_time_us: Option<u64>,
    /// Of which, stalled by the peer's receive window (`tcpi_rwnd_limited`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_us: Option<u64>,
    /// Of which, stalled by the send buffer (`tcpi_sndbuf_limited`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_us: Option<u64>,
}

impl Point {
    /// The sample of `s` at `t_s`; `None` when it carries no `tcp_info` (not TCP, TIME_WAIT,
    /// or gathered without [`Gathering::tcp_info`](crate::query::Gathering::tcp_info)).
    pub fn of(s: &Socket, t_s: f64) -> Option<Point> {
        let i = &s.tcp.as_ref()?.info;
        let mss = i.snd_mss().map(u64::from);
        let in_flight = match (i.unacked(), i.sacked(), i.lost(), i.retrans(), mss) {
            (Some(out), Some(sacked), Some(lost), Some(retrans), Some(mss)) => Some(
                u64::from(
                    out.saturating_sub(sacked.saturating_add(lost))
                        .saturating_add(retrans),
                ) * mss,
            ),
            _ => None,
        };
        Some(Point {
            t_s,
            state: s.state,
            bytes_acked: i.bytes_acked(),
            bytes_received: i.bytes_received(),
            cwnd_bytes: i.snd_cwnd().zip(mss).map(|(c, m)| u64::from(c) * m),
            peer_window_bytes: i.snd_wnd().map(u64::from),
            in_flight_bytes: in_flight,
            not_sent_bytes: i.notsent_bytes().map(u64::from),
            sndbuf_bytes: s.memory.as_ref().map(|m| u64::from(m.sndbuf_bytes)),
            send_queued_bytes: s.memory.as_ref().map(|m| u64::from(m.wmem_queued_bytes)),
            rtt_us: i.rtt_us(),
            busy_time_us: i.busy_time_us(),
            rwnd_limited_us: i.rwnd_limited_us(),
            sndbuf_limited_us: i.sndbuf_limited_us(),
        })
    }
}

/// The samples of one connection.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Trace {
    /// The socket cookie the samples were matched on (`None` from `/proc/net`, which has none).
    pub cookie: Option<u64>,
    /// Local end.
    pub local: Endpoint,
    /// Remote end.
    pub remote: Option<Endpoint>,
    /// Congestion control algorithm, when reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// Samples in time order.
    pub points: Vec<Point>,
    /// When the connection was last seen, if it closed during the trace (seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_at_s: Option<f64>,
}

/// What the trace shows, in numbers: rates over the trace, and the share of the sender's busy
/// time each limit held it back (the kernel's chronographs, as `diagnose` reads them).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Summary {
    /// Seconds from the first sample to the last.
    pub duration_s: f64,
    /// Samples taken.
    pub samples: usize,
    /// Bytes acknowledged per second over the trace (goodput of the sending side).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acked_bytes_per_sec: Option<f64>,
    /// Bytes received per second over the trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_bytes_per_sec: Option<f64>,
    /// Share (0-1) of the busy time during the trace stalled by the send buffer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_share: Option<f64>,
    /// Share (0-1) of the busy time during the trace stalled by the peer's receive window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_share: Option<f64>,
    /// Samples at which the peer advertised a zero window while data waited to be sent.
    pub zero_window_samples: usize,
}

impl Trace {
    /// An empty trace of the connection `s`.
    pub fn new(s: &Socket) -> Trace {
        Trace {
            cookie: s.cookie,
            local: s.local.clone(),
            remote: s.remote.clone(),
            congestion: s.tcp.as_ref().and_then(|t| t.congestion.clone()),
            points: Vec::new(),
            closed_at_s: None,
        }
    }

    /// True when `s` is this trace's connection: the same cookie, or (without cookies) the same
    /// two ends.
    pub fn is_of(&self, s: &Socket) -> bool {
        match (self.cookie, s.cookie) {
            (Some(a), Some(b)) => a == b,
            _ => self.local == s.local && self.remote == s.remote,
        }
    }

    /// Adds a sample of `s` (which must be this connection) in time order.
    pub fn push(&mut self, s: &Socket, p: Point) {
        debug_assert!(self.is_of(s));
        if self.congestion.is_none() {
            self.congestion = s.tcp.as_ref().and_then(|t| t.congestion.clone());
        }
        self.points.push(p);
    }

    /// The rates and limits over the whole trace (between its first and last sample).
    pub fn summary(&self) -> Summary {
        let (first, last) = match (self.points.first(), self.points.last()) {
            (Some(f), Some(l)) => (f, l),
            _ => {
                return Summary {
                    duration_s: 0.0,
                    samples: 0,
                    acked_bytes_per_sec: None,
                    received_bytes_per_sec: None,
                    sndbuf_limited_share: None,
                    rwnd_limited_share: None,
                    zero_window_samples: 0,
                }
            }
        };
        let dt = last.t_s - first.t_s;
        let rate = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) if dt > 0.0 && b >= a => Some((b - a) as f64 / dt),
            _ => None,
        };
        let busy = delta(first.busy_time_us, last.busy_time_us);
        let share = |a: Option<u64>, b: Option<u64>| match (delta(a, b), busy) {
            (Some(x), Some(busy)) if busy > 0 => Some((x as f64 / busy as f64).min(1.0)),
            _ => None,
        };
        Summary {
            duration_s: dt,
            samples: self.points.len(),
            acked_bytes_per_sec: rate(first.bytes_acked, last.bytes_acked),
            received_bytes_per_sec: rate(first.bytes_received, last.bytes_received),
            sndbuf_limited_share: share(first.sndbuf_limited_us, last.sndbuf_limited_us),
            rwnd_limited_share: share(first.rwnd_limited_us, last.rwnd_limited_us),
            zero_window_samples: self
                .points
                .iter()
                .filter(|p| {
                    p.peer_window_bytes == Some(0)
                        && p.not_sent_bytes.unwrap_or(0) + p.in_flight_bytes.unwrap_or(0) > 0
                })
                .count(),
        }
    }
}

fn delta(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => b.checked_sub(a),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tcp::{Memory, TcpDetails, TcpInfo};
    use crate::model::{Family, OwnersStatus, Proto, SockType};

    /// A socket whose tcp_info has the given fields set (offsets of `struct tcp_info`).
    fn sock(cookie: u64, fields: &[(usize, u64, usize)], sndbuf: u32) -> Socket {
        let mut raw = vec![0u8; 232];
        for &(off, v, len) in fields {
            raw[off..off + len].copy_from_slice(&v.to_le_bytes()[..len]);
        }
        Socket {
            id: Some(1),
            cookie: Some(cookie),
            uid: Some(0),
            owners_status: OwnersStatus::NotRequested,
            tcp: Some(Box::new(TcpDetails {
                info: TcpInfo::from_bytes(&raw),
                congestion: Some("cubic".into()),
                bbr: None,
                read_at: None,
            })),
            memory: Some(Box::new(Memory {
                rmem_alloc_bytes: 0,
                rcvbuf_bytes: 0,
                wmem_alloc_bytes: 0,
                sndbuf_bytes: sndbuf,
                fwd_alloc_bytes: 0,
                wmem_queued_bytes: sndbuf / 2,
                optmem_bytes: 0,
                backlog_bytes: None,
                drops: None,
            })),
            ..Socket::new(
                Proto::Tcp,
                Family::Inet,
                SockType::Stream,
                State::Established,
                Endpoint::Inet {
                    addr: "192.0.2.1".parse().unwrap(),
                    port: 40000,
                },
                Some(Endpoint::Inet {
                    addr: "198.51.100.2".parse().unwrap(),
                    port: 5001,
                }),
            )
        }
    }

    // Offsets in struct tcp_info: snd_mss 16, unacked 24, sacked 28, lost 32, retrans 36,
    // snd_cwnd 80, bytes_acked 120, notsent 144, busy 168, rwnd_limited 176,
    // sndbuf_limited 184, snd_wnd 228.
    #[test]
    fn a_point_derives_bytes_from_packets() {
        let s = sock(
            7,
            &[
                (16, 1000, 4),
                (24, 10, 4),
                (28, 2, 4),
                (32, 1, 4),
                (36, 1, 4),
                (80, 20, 4),
                (120, 5_000_000, 8),
                (144, 300, 4),
                (228, 65_536, 4),
            ],
            32768,
        );
        let p = Point::of(&s, 1.5).unwrap();
        assert_eq!(p.cwnd_bytes, Some(20_000));
        assert_eq!(p.in_flight_bytes, Some(8_000)); // (10 - 3 + 1) × 1000
        assert_eq!(p.peer_window_bytes, Some(65_536));
        assert_eq!(p.bytes_acked, Some(5_000_000));
        assert_eq!(p.sndbuf_bytes, Some(32_768));
        assert_eq!(p.send_queued_bytes, Some(16_384));
        assert_eq!(p.not_sent_bytes, Some(300));
    }

    #[test]
    fn a_short_tcp_info_leaves_newer_fields_out() {
        let mut s = sock(7, &[(16, 1000, 4), (80, 10, 4)], 1);
        let raw = s.tcp.as_ref().unwrap().info.raw()[..104].to_vec();
        s.tcp.as_mut().unwrap().info = TcpInfo::from_bytes(&raw);
        let p = Point::of(&s, 0.0).unwrap();
        assert_eq!(p.cwnd_bytes, Some(10_000));
        assert_eq!(p.bytes_acked, None);
        assert_eq!(p.peer_window_bytes, None);
        let j = serde_json::to_value(&p).unwrap();
        assert!(j.get("bytes_acked").is_none(), "absent, not 0: {j}");
    }

    #[test]
    fn summary_rates_and_limited_shares() {
        let a = sock(
            7,
            &[(120, 1_000_000, 8), (168, 1_000_000, 8), (184, 100_000, 8)],
            1,
        );
        let b = sock(
            7,
            &[
                (120, 3_000_000, 8),
                (168, 3_000_000, 8),
                (184, 1_700_000, 8),
                (176, 100_000, 8),
            ],
            1,
        );
        let mut t = Trace::new(&a);
        t.push(&a, Point::of(&a, 0.0).unwrap());
        t.push(&b, Point::of(&b, 2.0).unwrap());
        let s = t.summary();
        assert_eq!(s.samples, 2);
        assert_eq!(s.acked_bytes_per_sec, Some(1_000_000.0));
        assert_eq!(s.sndbuf_limited_share, Some(0.8)); // 1.6 s of 2 s busy
        assert_eq!(s.rwnd_limited_share, Some(0.05)); // 0.1 s of 2 s busy
        assert_eq!(s.zero_window_samples, 0);
    }

    #[test]
    fn zero_window_samples_need_data_waiting() {
        let idle = sock(7, &[(228, 0, 4)], 1);
        let stalled = sock(7, &[(228, 0, 4), (144, 4096, 4)], 1);
        let mut t = Trace::new(&idle);
        t.push(&idle, Point::of(&idle, 0.0).unwrap());
        t.push(&stalled, Point::of(&stalled, 0.1).unwrap());
        assert_eq!(t.summary().zero_window_samples, 1);
    }

    #[test]
    fn a_trace_follows_its_cookie() {
        let a = sock(7, &[], 1);
        let b = sock(8, &[], 1);
        let t = Trace::new(&a);
        assert!(t.is_of(&a));
        assert!(!t.is_of(&b));
    }
}
