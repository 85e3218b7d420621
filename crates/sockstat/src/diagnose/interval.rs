//! What a connection saw over the interval, beyond one sample: the RTT it actually experienced
//! (a ceiling judged against `min_rtt` alone assumes an idle path, doc/reference/calibration.md#ceilings),
//! how full its send queue was in each sample, and whether its congestion window was full in
//! both. Also [`Confidence`], how sure a finding is and why.

use super::Flow;
use crate::model::tcp::TcpInfo;
use crate::model::Socket;

fn srtt_us(s: &Socket) -> Option<u32> {
    s.tcp.as_ref()?.info.rtt_us().filter(|&r| r > 0)
}

fn rcv_rtt_us(s: &Socket) -> Option<u32> {
    s.tcp.as_ref()?.info.rcv_rtt_us().filter(|&r| r > 0)
}

fn queued(s: &Socket) -> Option<u64> {
    s.memory.as_deref().map(|m| u64::from(m.wmem_queued_bytes))
}

fn inflight_cwnd(s: &Socket) -> Option<(u64, u64)> {
    let i = &s.tcp.as_ref()?.info;
    let mss = u64::from(i.snd_mss()?);
    Some((
        u64::from(i.unacked()?) * mss,
        u64::from(i.snd_cwnd()?) * mss,
    ))
}

impl<'a> Flow<'a> {
    /// The RTT the sender saw over the interval, µs: the mean of the smoothed RTT in the two
    /// samples (each an average of the last several RTT samples, queueing delay included), and
    /// never below `min_rtt`. Behind a shared queue this is 2-5 × `min_rtt`
    /// (doc/reference/calibration.md#shared-path-matrix).
    pub fn rtt_seen_us(&self) -> Option<u32> {
        let mean = match (srtt_us(self.before), srtt_us(self.after)) {
            (Some(a), Some(b)) => (u64::from(a) + u64::from(b)) / 2,
            (None, Some(b)) => u64::from(b),
            _ => return self.min_rtt_us(),
        };
        let mean = mean.min(u64::from(u32::MAX)) as u32;
        Some(self.min_rtt_us().map_or(mean, |m| mean.max(m)))
    }

    /// The RTT a receiver saw over the interval, µs: the mean of its receive-side RTT estimate
    /// (`tcpi_rcv_rtt`, measured from the data it receives, so queueing delay included) in the
    /// two samples; else its `min_rtt`.
    pub fn rcv_rtt_seen_us(&self) -> Option<u32> {
        match (rcv_rtt_us(self.before), rcv_rtt_us(self.after)) {
            (Some(a), Some(b)) => Some(((u64::from(a) + u64::from(b)) / 2) as u32),
            (None, Some(b)) | (Some(b), None) => Some(b),
            (None, None) => self.min_rtt_us(),
        }
    }

    /// Bytes charged to the send queue (`skmem w`, write and retransmit queues) in the earlier
    /// and the later sample.
    pub fn queued(&self) -> Option<(u64, u64)> {
        Some((queued(self.before)?, queued(self.after)?))
    }

    /// True when the send queue went more than `margin` bytes past the send buffer in either
    /// sample: the kernel let writes append past `sk_sndbuf` (a blocking writer can overshoot
    /// it by one skb at most; doc/reference/calibration.md#r1-send-buffer, "escape").
    pub fn send_queue_escaped(&self, margin: u64) -> bool {
        [self.before, self.after].iter().any(|s| {
            s.memory.as_deref().is_some_and(|m| {
                u64::from(m.wmem_queued_bytes) > u64::from(m.sndbuf_bytes) + margin
            })
        })
    }

    /// True when the flight filled `share` of the congestion window in **both** samples: one
    /// sample's flight above its cwnd is no proof (BBR cuts cwnd below the flight after a loss
    /// and drops it to 4 packets for PROBE_RTT, doc/reference/calibration.md#shared-path-matrix).
    pub fn cwnd_full_in_both(&self, share: f64) -> bool {
        [self.before, self.after]
            .iter()
            .all(|s| inflight_cwnd(s).is_some_and(|(f, c)| c > 0 && f as f64 >= share * c as f64))
    }

    /// True when the flight filled `share` of the peer's window in at least one sample.
    pub fn window_full_in_either(&self, share: f64) -> bool {
        [self.before, self.after].iter().any(|s| {
            let Some(t) = s.tcp.as_ref() else {
                return false;
            };
            let (Some(u), Some(mss), Some(w)) =
                (t.info.unacked(), t.info.snd_mss(), t.info.snd_wnd())
            else {
                return false;
            };
            w > 0 && (u64::from(u) * u64::from(mss)) as f64 >= share * f64::from(w)
        })
    }

    /// The larger of the peer's window in the two samples, bytes.
    pub fn snd_wnd_max(&self) -> Option<u32> {
        Some(self.info0()?.snd_wnd()?.max(self.info()?.snd_wnd()?))
    }

    /// Bytes retransmitted over bytes sent in the interval, when enough was sent to judge.
    pub fn retrans_share(&self, min_sent: u64) -> Option<f64> {
        let sent = self.d(TcpInfo::bytes_sent)?;
        let re = self.d(TcpInfo::bytes_retrans)?;
        (sent >= min_sent).then(|| re as f64 / sent as f64)
    }
}
