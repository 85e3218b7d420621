//! `sockstat events --stats`: connection events summed per side, command and destination
//! (client: the remote address and port; server: the local address and port it accepted on).
//!
//! Each row keeps a log2 histogram of connect latency (client) or accept wait (server), in
//! microseconds, exact per power of two so that the modes a lost SYN makes stand apart (each
//! lost SYN costs the retransmission timeout: 1 s, then 1 s again for the first
//! `net.ipv4.tcp_syn_linear_timeouts` retransmissions on Linux 6.5+, doubling after that), with
//! the SYN retransmissions of the connections in each bucket, so the summary says which modes
//! are retransmissions instead of guessing from the kernel's timers; and a finer histogram (16
//! steps per power of two) for the percentiles, which are therefore exact to within 1/16 of
//! their value. Memory is bounded: at most [`MAX_ROWS`] rows (the rest
//! are summed in one row per side whose command is `(other)`), at most [`MAX_PIDS`] pids per
//! row.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::{ConnEvent, End, EventKind, FailReason, ProcessStatus, Side};
use crate::model::RawString;

/// Rows kept; further (side, command, destination) groups are summed into `(other)`.
pub const MAX_ROWS: usize = 1000;
/// Pids listed per row; further ones are counted in `more_pids`.
pub const MAX_PIDS: usize = 32;
/// log2 buckets: values up to 2^39 µs (6 days).
const LOG2_BUCKETS: usize = 40;

/// A latency histogram in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Count per log2 bucket: index 0 holds values <= 1, index k values in (2^(k-1), 2^k].
    log2: Vec<u64>,
    /// SYN retransmissions of the values in each log2 bucket.
    syn: Vec<u64>,
    /// Count per fine bucket (see [`fine_index`]).
    fine: BTreeMap<u32, u64>,
    count: u64,
    max: u64,
}

/// The fine bucket of a value: exact below 16, then 16 steps per power of two.
fn fine_index(v: u64) -> u32 {
    if v < 16 {
        return v as u32;
    }
    let e = 63 - v.leading_zeros(); // >= 4
    let sub = ((v >> (e - 4)) & 15) as u32;
    16 + (e - 4) * 16 + sub
}

/// The largest value of a fine bucket.
fn fine_upper(i: u32) -> u64 {
    if i < 16 {
        return u64::from(i);
    }
    let e = (i - 16) / 16 + 4;
    let sub = u64::from((i - 16) % 16);
    let shift = e - 4;
    ((16 + sub) << shift) + (1u64 << shift) - 1
}

/// The log2 bucket of a value.
fn log2_index(v: u64) -> usize {
    if v <= 1 {
        0
    } else {
        ((64 - (v - 1).leading_zeros()) as usize).min(LOG2_BUCKETS - 1)
    }
}

impl Histogram {
    /// Adds one value.
    pub fn add(&mut self, v: u64) {
        self.add_with_retransmits(v, 0);
    }

    /// Adds one latency, of a connection whose SYN (or SYN-ACK) was sent `syn` extra times.
    pub fn add_with_retransmits(&mut self, v: u64, syn: u32) {
        if self.log2.is_empty() {
            self.log2 = vec![0; LOG2_BUCKETS];
            self.syn = vec![0; LOG2_BUCKETS];
        }
        self.log2[log2_index(v)] += 1;
        self.syn[log2_index(v)] += u64::from(syn);
        *self.fine.entry(fine_index(v)).or_default() += 1;
        self.count += 1;
        self.max = self.max.max(v);
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest value.
    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// The value at quantile `q` (0-1), to within 1/16; never above the maximum.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (&i, &n) in &self.fine {
            seen += n;
            if seen >= rank {
                return Some(fine_upper(i).min(self.max));
            }
        }
        Some(self.max)
    }

    /// (upper bound in µs, count) of every log2 bucket from 1 µs up to the highest non-empty
    /// one; the counts sum to [`Histogram::count`].
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.buckets_with_retransmits()
            .into_iter()
            .map(|(le, n, _)| (le, n))
            .collect()
    }

    /// As [`Histogram::buckets`], with the SYN retransmissions of each bucket's connections.
    pub fn buckets_with_retransmits(&self) -> Vec<(u64, u64, u64)> {
        let Some(last) = self.log2.iter().rposition(|&n| n > 0) else {
            return Vec::new();
        };
        (0..=last)
            .map(|k| (1u64 << k, self.log2[k], self.syn[k]))
            .collect()
    }
}

/// What a row groups by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    /// Client or server.
    pub side: Side,
    /// The command that called connect() or accept(); `None` when not seen.
    pub command: Option<RawString>,
    /// Client: the remote end; server: the local end.
    pub endpoint: SocketAddr,
    /// True for the row that sums the groups beyond [`MAX_ROWS`].
    pub other: bool,
}

/// One row of the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// Processes seen (at most [`MAX_PIDS`]).
    pub pids: BTreeSet<u32>,
    /// Pids beyond [`MAX_PIDS`].
    pub more_pids: u64,
    /// Connections made (client: connect completed; server: accepted, or closed never
    /// accepted).
    pub connections: u64,
    /// Connects that failed (client only).
    pub failed: u64,
    /// Failures by reason.
    pub failed_by_reason: BTreeMap<&'static str, u64>,
    /// Connect latency (client) or accept wait (server).
    pub latency: Histogram,
    /// Connections whose latency was not measured (opened before tracing, or the kernel's
    /// table was full).
    pub unmeasured: u64,
    /// Server connections that closed before anyone accepted them.
    pub never_accepted: u64,
    /// SYNs (client) or SYN-ACKs (server) sent again.
    pub syn_retransmits: u64,
    /// Payload sent, over the connections that closed.
    pub bytes_sent: u64,
    /// Payload received, over the connections that closed.
    pub bytes_received: u64,
    /// Connections that closed.
    pub closed: u64,
    /// Closed connections that ended local-close: their TIME-WAIT entry is on this side.
    pub time_wait_here: u64,
}

/// The summary of a run of events.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    rows: HashMap<RowKey, Row>,
    /// Events by kind.
    pub events: BTreeMap<&'static str, u64>,
    /// Events that named no side (connections opened before tracing started).
    pub unattributed: u64,
}

impl Stats {
    /// Adds one event (already filtered).
    pub fn add(&mut self, e: &ConnEvent) {
        *self.events.entry(e.kind.name()).or_default() += 1;
        let Some(side) = e.side else {
            self.unattributed += 1;
            return;
        };
        let endpoint = match side {
            Side::Client => e.remote,
            Side::Server => e.local,
        };
        let key = RowKey {
            side,
            command: e.process.as_ref().map(|p| p.command.clone()),
            endpoint,
            other: false,
        };
        let key = if self.rows.contains_key(&key) || self.rows.len() < MAX_ROWS {
            key
        } else {
            RowKey {
                side,
                command: None,
                endpoint: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
                other: true,
            }
        };
        let row = self.rows.entry(key).or_default();
        if let Some(p) = &e.process {
            if row.pids.len() < MAX_PIDS || row.pids.contains(&p.pid) {
                row.pids.insert(p.pid);
            } else {
                row.more_pids += 1;
            }
        }
        let latency = match side {
            Side::Client => e.connect_latency_us,
            Side::Server => e.accept_wait_us,
        };
        match e.kind {
            EventKind::Connect | EventKind::Accept => {
                row.connections += 1;
                match latency {
                    Some(v) => row
                        .latency
                        .add_with_retransmits(v, e.syn_retransmits.unwrap_or(0)),
                    None => row.unmeasured += 1,
                }
                row.syn_retransmits += u64::from(e.syn_retransmits.unwrap_or(0));
            }
            EventKind::Failed => {
                row.failed += 1;
                let reason = e.reason.unwrap_or(FailReason::Error).name();
                *row.failed_by_reason.entry(reason).or_default() += 1;
                row.syn_retransmits += u64::from(e.syn_retransmits.unwrap_or(0));
            }
            EventKind::Close => {
                if e.process_status == Some(ProcessStatus::NeverAccepted) {
                    row.never_accepted += 1;
                    row.connections += 1;
                    row.unmeasured += 1;
                    row.syn_retransmits += u64::from(e.syn_retransmits.unwrap_or(0));
                }
                row.closed += 1;
                row.bytes_sent += e.bytes_sent.unwrap_or(0);
                row.bytes_received += e.bytes_received.unwrap_or(0);
                if e.end == Some(End::LocalClose) {
                    row.time_wait_here += 1;
                }
            }
        }
    }

    /// The rows, clients first, each side by connections (most first), then by command and
    /// endpoint; the `(other)` row last in its side.
    pub fn rows(&self) -> Vec<(&RowKey, &Row)> {
        let mut v: Vec<_> = self.rows.iter().collect();
        v.sort_by(|(ka, ra), (kb, rb)| {
            ka.side
                .cmp(&kb.side)
                .then(ka.other.cmp(&kb.other))
                .then((rb.connections + rb.failed).cmp(&(ra.connections + ra.failed)))
                .then(ka.command.cmp(&kb.command))
                .then(ka.endpoint.cmp(&kb.endpoint))
        });
        v
    }

    /// Rows kept.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True before the first attributed event.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::tests::record;
    use crate::events::Clock;
    use sockstat_wire::tcp_events::{kind, side, state};

    #[test]
    fn buckets_split_powers_of_two_and_sum_to_the_count() {
        let mut h = Histogram::default();
        for v in [0, 1, 2, 3, 4, 5, 95, 1_003_500, 1_010_000, 3_011_000] {
            h.add(v);
        }
        let b = h.buckets();
        assert_eq!(b.iter().map(|(_, n)| n).sum::<u64>(), h.count());
        let at = |le: u64| b.iter().find(|(l, _)| *l == le).map(|(_, n)| *n);
        assert_eq!(at(1), Some(2)); // 0, 1
        assert_eq!(at(2), Some(1));
        assert_eq!(at(4), Some(2)); // 3, 4
        assert_eq!(at(8), Some(1));
        assert_eq!(at(128), Some(1));
        // One SYN retransmitted (1 s) and two (3 s) fall in different buckets.
        assert_eq!(at(1 << 20), Some(2));
        assert_eq!(at(1 << 22), Some(1));
        assert_eq!(b.last(), Some(&(1 << 22, 1)));
    }

    #[test]
    fn quantiles_within_a_sixteenth() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.add(v * 1000);
        }
        let p50 = h.quantile(0.5).unwrap();
        let p99 = h.quantile(0.99).unwrap();
        assert!((500_000..=500_000 + 500_000 / 16).contains(&p50), "{p50}");
        assert!((990_000..=990_000 + 990_000 / 16).contains(&p99), "{p99}");
        assert_eq!(h.quantile(1.0), Some(1_000_000));
        assert_eq!(h.max(), Some(1_000_000));
        assert_eq!(Histogram::default().quantile(0.5), None);
        // Every value's fine bucket contains it.
        for v in [0u64, 15, 16, 17, 31, 32, 1000, 1 << 40, u64::MAX / 2] {
            let i = fine_index(v);
            assert!(
                fine_upper(i) >= v && (i == 0 || fine_upper(i - 1) < v),
                "{v}"
            );
        }
    }

    #[test]
    fn rows_by_side_command_and_destination() {
        let c = Clock::fixed(0);
        let mut s = Stats::default();
        let connect = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
        let close = record(kind::CLOSE, state::FIN_WAIT2, side::CLIENT);
        let mut failed = record(kind::CLOSE, state::SYN_SENT, side::CLIENT);
        failed.sk_err = 111;
        for r in [connect, connect, close, failed] {
            s.add(&ConnEvent::from_record(&r, &c).unwrap());
        }
        let mut other = connect;
        other.remote_port = 80;
        s.add(&ConnEvent::from_record(&other, &c).unwrap());
        let rows = s.rows();
        assert_eq!(rows.len(), 2);
        let (k, r) = rows[0];
        assert_eq!((k.side, k.endpoint.port()), (Side::Client, 47001));
        assert_eq!(
            (r.connections, r.failed, r.closed, r.time_wait_here),
            (2, 1, 1, 1)
        );
        assert_eq!(r.latency.count(), 2);
        assert_eq!(r.failed_by_reason.get("refused"), Some(&1));
        assert_eq!(r.pids.iter().copied().collect::<Vec<_>>(), vec![5446]);
        assert_eq!(s.events.get("connect"), Some(&3));
    }

    #[test]
    fn rows_are_bounded() {
        let c = Clock::fixed(0);
        let mut s = Stats::default();
        for port in 0..(MAX_ROWS as u16 + 10) {
            let mut r = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
            r.remote_port = port;
            s.add(&ConnEvent::from_record(&r, &c).unwrap());
        }
        assert_eq!(s.len(), MAX_ROWS + 1);
        let (k, r) = s.rows().into_iter().find(|(k, _)| k.other).unwrap();
        assert!(k.other);
        assert_eq!(r.connections, 10);
    }
}
