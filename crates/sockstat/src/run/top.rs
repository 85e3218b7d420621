//! [`Live`]: the use case of the live view (`sockstat top`); what it measures and how rows are
//! grouped is [`crate::top`]. It keeps the last sample and the connection events
//! since, and at every refresh takes a new sample, judges the two with the diagnosis rules
//! (`run::diagnose::judge`, as `sockstat diagnose` does) and measures what every connection moved
//! ([`measure`]). The caller owns the clock: it calls [`Live::drain`] while it waits (so the
//! kernel's event ring never fills) and [`Live::refresh`] when a refresh is due.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::events::{ConnEvent, EventKind, Lost};
use crate::query::Query;
use crate::run::diagnose::Diagnosis;
use crate::run::events::{Tracer, UserNames};
use crate::run::sampler::Sampler;
use crate::sample::Sample;

use crate::top::{measure, Close, EventCoverage, Interval, Report};

/// How the live view samples.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LiveOptions {
    /// Trace connection events (CAP_BPF and CAP_PERFMON, or root) to count the connections
    /// that open or close between two refreshes; when they cannot be traced, each report says
    /// why ([`EventCoverage::unavailable`]).
    pub events: bool,
    /// The path's bottleneck bandwidth for the diagnosis rules (bytes/s), when known.
    pub bandwidth: Option<f64>,
    /// The longest one walk of every process's descriptors gives the holders (zero: a walk at
    /// every refresh); a socket no walk has seen makes a new walk at once. Default
    /// [`RESCAN_DEFAULT`] (doc/top.md, "Holders between walks").
    pub rescan: Duration,
}

/// How long the live view uses one walk's holders by default (`sockstat top --rescan`).
pub const RESCAN_DEFAULT: Duration = Duration::from_secs(5);

impl Default for LiveOptions {
    fn default() -> LiveOptions {
        LiveOptions {
            events: false,
            bandwidth: None,
            rescan: RESCAN_DEFAULT,
        }
    }
}

/// The live view's state between refreshes.
pub struct Live {
    query: Query,
    sampler: Sampler,
    tracer: Option<Tracer>,
    untraced: Option<String>,
    lost: Lost,
    users: UserNames,
    pending: Vec<ConnEvent>,
    own_netns: Option<u64>,
    own_zone: Option<String>,
    last: Arc<Sample>,
    how: Diagnosis,
    rescan: Duration,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("query", &self.query)
            .field("traced", &self.tracer.is_some())
            .finish_non_exhaustive()
    }
}

/// The query the view samples with: `query`'s filters, Internet sockets only (unix sockets
/// carry no counters and name no remote host), with `tcp_info` and socket memory, without the
/// congestion control's name and estimates, which nothing in the view reads (at 60k sockets
/// 11.8 -> 10.9 % of a core: doc/reference/BENCHMARKS.md, "Memory kept between refreshes").
/// Sockets no table lists are not looked for (they move nothing, and finding them under a family
/// filter reads every other table's inodes each refresh).
pub fn sampling_query(query: &Query) -> Query {
    let mut q = query.clone();
    q.narrow_to_inet_internals();
    q.gather.tcp_estimates = false;
    q.gather.congestion = false;
    q
}

impl Live {
    /// Starts the view: connection events (when asked for and permitted), then the first
    /// sample. The first [`Live::refresh`] measures from it.
    pub fn start(query: &Query, opts: &LiveOptions) -> Result<Live, Error> {
        let q = sampling_query(query);
        let sampler = Sampler::new(&q).keep_holders(opts.rescan);
        let (tracer, untraced) = if opts.events {
            match Tracer::start(false, crate::run::events::RING_BYTES) {
                Ok(t) => (Some(t), None),
                Err(u) => (None, Some(u.message)),
            }
        } else {
            (None, Some("not asked for".to_string()))
        };
        let lost = tracer
            .as_ref()
            .and_then(|t| t.lost().ok())
            .unwrap_or_default();
        let first = sampler.sample()?;
        Ok(Live {
            own_netns: crate::run::events::own_netns(),
            own_zone: crate::sys::netns::discover(&q.gather.proc_root)
                .0
                .into_iter()
                .find(|t| t.own)
                .map(|t| t.zone.name),
            query: q,
            sampler,
            tracer,
            untraced,
            lost,
            users: UserNames::default(),
            pending: Vec::new(),
            last: Arc::new(first),
            how: Diagnosis {
                bandwidth: opts.bandwidth,
                exact_locks: false,
                connect_events: false,
            },
            rescan: opts.rescan,
        })
    }

    /// The query the view samples with.
    pub fn query(&self) -> &Query {
        &self.query
    }

    /// The last sample.
    pub fn last(&self) -> &Arc<Sample> {
        &self.last
    }

    /// True when connection events are traced.
    pub fn traced(&self) -> bool {
        self.tracer.is_some()
    }

    /// Takes the close events waiting in the kernel's ring (cheap; call it while waiting);
    /// returns how many records the ring held (0 without events). A caller that waits may
    /// wait longer between calls while this is 0 ([`Live::drain_every`]).
    pub fn drain(&mut self) -> usize {
        let Some(t) = self.tracer.as_mut() else {
            return 0;
        };
        let clock = crate::events::Clock::now();
        let (q, pending, users) = (&self.query, &mut self.pending, &mut self.users);
        let (n, bad) = t.drain(|r| {
            if let Some(mut e) = ConnEvent::from_record(&r, &clock) {
                if e.kind == EventKind::Close && e.matches(q) {
                    users.fill(&mut e);
                    pending.push(e);
                }
            }
        });
        n + bad
    }

    /// How long a caller may wait before the next [`Live::drain`], given what the last one
    /// took: 50 ms while connections come and go, 250 ms while the ring stays empty. Each
    /// wake-up costs the view more than the drain itself (at 1k sockets a tenth of its CPU
    /// went to waking every 50 ms: doc/reference/BENCHMARKS.md, "The view's own passes"), and
    /// the ring holds seconds of the busiest churn
    /// ([`crate::sys::tcp_events::RING_BYTES`]).
    pub fn drain_every(took: usize) -> std::time::Duration {
        std::time::Duration::from_millis(if took == 0 { 250 } else { 50 })
    }

    /// Takes a new sample and measures the interval since the last one.
    pub fn refresh(&mut self) -> Result<Report, Error> {
        self.drain();
        let time = std::time::SystemTime::now();
        let taken_monotonic_ns = crate::events::Clock::monotonic_now();
        let after = Arc::new(self.sampler.sample()?);
        self.drain();
        let lost_now = self
            .tracer
            .as_ref()
            .and_then(|t| t.lost().ok())
            .unwrap_or(self.lost);
        let lost = lost_now.since(&self.lost);
        self.lost = lost_now;
        let zone_of = |netns: u64| -> Option<usize> {
            if after.zoned {
                after
                    .zones
                    .iter()
                    .position(|z| z.zone.as_ref().and_then(|z| z.netns_inode) == Some(netns))
            } else {
                (self.own_netns == Some(netns)).then_some(0)
            }
        };
        let closes: Vec<Close> = std::mem::take(&mut self.pending)
            .into_iter()
            .filter_map(|event| zone_of(event.netns).map(|zone| Close { event, zone }))
            .collect();
        let diagnosis = super::diagnose::judge(&self.last, &after, &self.how);
        let mut report = measure(
            &self.last,
            Arc::clone(&after),
            Interval {
                closes,
                events: EventCoverage {
                    unavailable: self.untraced.clone(),
                    lost,
                },
                diagnosis,
                time: Some(time),
                taken_monotonic_ns: Some(taken_monotonic_ns),
                own_zone: self.own_zone.clone(),
            },
        );
        self.pending.extend(
            std::mem::take(&mut report.carried)
                .into_iter()
                .map(|c| c.event),
        );
        self.last = after;
        Ok(report)
    }

    /// Narrows the view to `query` from the next refresh on (the `/` filter of the view); the
    /// next refresh measures from a new sample.
    pub fn set_query(&mut self, query: &Query) -> Result<(), Error> {
        let q = sampling_query(query);
        self.sampler = Sampler::new(&q).keep_holders(self.rescan);
        self.last = Arc::new(self.sampler.sample()?);
        self.query = q;
        self.pending.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sockstat_wire::inet_diag::ext;

    #[test]
    fn the_view_asks_the_kernel_for_counters_and_memory_only() {
        // What the view reads of each socket: tcp_info and socket memory; the congestion
        // control's name and estimates stay with the listing's -T.
        let q = sampling_query(&Query::new());
        assert_eq!(q.inet_diag_ext(), ext::INFO | ext::SKMEMINFO);
        let mut listing = Query::new();
        listing.gather.tcp_info = true;
        assert_eq!(
            listing.inet_diag_ext(),
            ext::INFO | ext::CONG | ext::VEGASINFO
        );
    }
}
