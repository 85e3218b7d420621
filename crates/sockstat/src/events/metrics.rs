//! Connection events summed for the Prometheus exporter (`sockstat serve --events`): connect
//! latency by remote port and accept wait by local port as histograms, connections by side,
//! failures by reason, closes by side and end, and what was lost. Label sets are bounded: the
//! first [`MAX_PORT_LABELS`] ports seen get a `port` label of their own, every later one is
//! summed under `port="other"` (doc/serve.md).

use std::collections::BTreeMap;

use super::{ConnEvent, EventKind, Lost, Side};

/// Ports with a label of their own, per histogram.
pub const MAX_PORT_LABELS: usize = 32;

/// Histogram bucket bounds, seconds. 1.5, 2.5 and 3.5 fall between the modes lost SYNs make
/// (each costs the 1 s retransmission timeout; Linux 6.5+ keeps 1 s for the first four).
pub const BUCKETS_S: [f64; 18] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5,
    2.5, 3.5, 5.0, 10.0,
];

/// A port label: one port, or the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PortLabel {
    /// A port with its own label.
    Port(u16),
    /// Every port after the first [`MAX_PORT_LABELS`].
    Other,
}

/// One Prometheus histogram: counts per bucket (not cumulative), sum and count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromHistogram {
    /// Count per bucket of [`BUCKETS_S`], and the last for values above them all.
    pub buckets: [u64; BUCKETS_S.len() + 1],
    /// Sum of the values, seconds.
    pub sum_s: f64,
    /// Values.
    pub count: u64,
}

impl PromHistogram {
    fn add(&mut self, us: u64) {
        let s = us as f64 / 1e6;
        let i = BUCKETS_S
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(BUCKETS_S.len());
        self.buckets[i] += 1;
        self.sum_s += s;
        self.count += 1;
    }

    /// Cumulative counts per bound (`le`), as the exposition format writes them.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut n = 0;
        BUCKETS_S
            .iter()
            .zip(self.buckets.iter())
            .map(|(&b, &c)| {
                n += c;
                (b, n)
            })
            .collect()
    }
}

/// One zone's connections, failed connects and closes.
#[derive(Debug, Clone, Default)]
pub struct ZoneEvents {
    /// Connections by side (completed connects, accepts).
    pub connections: BTreeMap<&'static str, u64>,
    /// Failed connects by reason.
    pub failures: BTreeMap<&'static str, u64>,
    /// Closes by (side, end).
    pub closes: BTreeMap<(&'static str, &'static str), u64>,
}

/// Everything `serve --events` exports, summed since it started: per zone (network namespace)
/// the counts, and for the zone the exporter runs in the latency histograms by port (every
/// other zone would multiply them by its ports: doc/serve.md, "Cardinality").
#[derive(Debug, Clone, Default)]
pub struct EventMetrics {
    /// The network namespace (inode) the exporter runs in: the histograms' zone (`None`: every
    /// event counts in them).
    pub own_netns: Option<u64>,
    /// Client connect latency by remote port, in the exporter's zone.
    pub connect_latency: BTreeMap<PortLabel, PromHistogram>,
    /// Server accept wait by local port, in the exporter's zone.
    pub accept_wait: BTreeMap<PortLabel, PromHistogram>,
    /// Counts by network namespace (inode).
    pub zones: BTreeMap<u64, ZoneEvents>,
    /// What the kernel could not hand over.
    pub lost: Lost,
}

fn label(map: &BTreeMap<PortLabel, PromHistogram>, port: u16) -> PortLabel {
    let own = PortLabel::Port(port);
    let named = map.keys().filter(|k| **k != PortLabel::Other).count();
    if map.contains_key(&own) || named < MAX_PORT_LABELS {
        own
    } else {
        PortLabel::Other
    }
}

impl EventMetrics {
    /// Metrics whose histograms are those of the network namespace `own_netns`.
    pub fn new(own_netns: Option<u64>) -> EventMetrics {
        EventMetrics {
            own_netns,
            ..EventMetrics::default()
        }
    }

    /// Adds one event, in its namespace's counts (and in the histograms, when it is the
    /// exporter's).
    pub fn add(&mut self, e: &ConnEvent) {
        let own = self.own_netns.is_none_or(|n| n == e.netns);
        let z = self.zones.entry(e.netns).or_default();
        match (e.kind, e.side) {
            (EventKind::Connect, Some(Side::Client)) => {
                *z.connections.entry("client").or_default() += 1;
                if let (Some(us), true) = (e.connect_latency_us, own) {
                    let l = label(&self.connect_latency, e.remote.port());
                    self.connect_latency.entry(l).or_default().add(us);
                }
            }
            (EventKind::Accept, Some(Side::Server)) => {
                *z.connections.entry("server").or_default() += 1;
                if let (Some(us), true) = (e.accept_wait_us, own) {
                    let l = label(&self.accept_wait, e.local.port());
                    self.accept_wait.entry(l).or_default().add(us);
                }
            }
            (EventKind::Failed, _) => {
                *z.failures
                    .entry(e.reason.map_or("error", |r| r.name()))
                    .or_default() += 1;
            }
            (EventKind::Close, side) => {
                let side = side.map_or("unknown", Side::name);
                *z.closes
                    .entry((side, e.end.map_or("unknown", |x| x.name())))
                    .or_default() += 1;
            }
            _ => {}
        }
    }

    /// The counts of namespace `netns`.
    pub fn zone(&self, netns: u64) -> Option<&ZoneEvents> {
        self.zones.get(&netns)
    }

    /// Forgets the namespaces `keep` says are gone: their series end, and a host whose
    /// containers come and go does not accumulate them.
    pub fn retain_zones(&mut self, mut keep: impl FnMut(u64) -> bool) {
        self.zones.retain(|n, _| keep(*n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::tests::record;
    use crate::events::Clock;
    use sockstat_wire::tcp_events::{kind, side, state};

    #[test]
    fn histograms_by_port_bounded_and_counts_by_side() {
        let c = Clock::fixed(0);
        let mut m = EventMetrics::default();
        for port in 0..(MAX_PORT_LABELS as u16 + 3) {
            let mut r = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
            r.remote_port = 1000 + port;
            m.add(&ConnEvent::from_record(&r, &c).unwrap());
        }
        // A 1 s SYN retransmit lands between 1 and 1.5 s.
        let mut slow = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
        slow.remote_port = 1000;
        slow.established_ns = slow.start_ns + 1_010_000_000;
        m.add(&ConnEvent::from_record(&slow, &c).unwrap());
        assert_eq!(m.connect_latency.len(), MAX_PORT_LABELS + 1);
        assert_eq!(m.connect_latency[&PortLabel::Other].count, 3);
        let h = &m.connect_latency[&PortLabel::Port(1000)];
        let cum = h.cumulative();
        assert_eq!(cum.iter().find(|(b, _)| *b == 1.0).unwrap().1, 1);
        assert_eq!(cum.iter().find(|(b, _)| *b == 1.5).unwrap().1, 2);
        let netns = ConnEvent::from_record(&slow, &c).unwrap().netns;
        let z = m.zone(netns).unwrap();
        assert_eq!(z.connections["client"], MAX_PORT_LABELS as u64 + 4);
        let mut f = record(kind::CLOSE, state::SYN_SENT, side::CLIENT);
        f.sk_err = 111;
        m.add(&ConnEvent::from_record(&f, &c).unwrap());
        m.add(
            &ConnEvent::from_record(&record(kind::CLOSE, state::FIN_WAIT2, side::CLIENT), &c)
                .unwrap(),
        );
        let z = m.zone(netns).unwrap();
        assert_eq!(z.failures["refused"], 1);
        assert_eq!(z.closes[&("client", "local-close")], 1);
    }

    /// Events of another namespace are counted under it and stay out of the histograms of the
    /// exporter's own; a namespace that is gone is forgotten.
    #[test]
    fn other_zones_are_counted_apart_and_forgotten() {
        let c = Clock::fixed(0);
        let r = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
        let own = ConnEvent::from_record(&r, &c).unwrap().netns;
        let mut m = EventMetrics::new(Some(own));
        m.add(&ConnEvent::from_record(&r, &c).unwrap());
        let mut other = ConnEvent::from_record(&r, &c).unwrap();
        other.netns = own + 1;
        m.add(&other);
        m.add(&other);
        assert_eq!(m.zone(own).unwrap().connections["client"], 1);
        assert_eq!(m.zone(own + 1).unwrap().connections["client"], 2);
        assert_eq!(m.connect_latency.values().map(|h| h.count).sum::<u64>(), 1);
        m.retain_zones(|n| n == own);
        assert!(m.zone(own + 1).is_none());
        assert!(m.zone(own).is_some());
    }
}
