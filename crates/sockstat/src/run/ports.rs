//! The ports use case (`sockstat ports`, `sockstat.ports()`): the TCP sockets of the selected
//! zones sampled once, or twice over an interval with the processes that opened connections
//! meanwhile, and analysed per zone by [`crate::ports`].

use std::time::Duration;

use crate::error::Error;
use crate::events::openers::Openers;
use crate::model::{Proto, Warning};
use crate::ports::{analyze_zone, PortsReport};
use crate::query::Query;
use crate::run::sampler::Sampler;

/// What [`run`] found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Ports {
    /// One report per zone sampled, in the sample's order (one, the own zone, without `-z`/`-Z`).
    pub reports: Vec<PortsReport>,
    /// The gathering's warnings.
    pub warnings: Vec<Warning>,
    /// Whether zones were asked for (`-z`, `-Z`).
    pub zoned: bool,
}

/// What is gathered for `asked`: every TCP socket of its families in its zones, listeners
/// included (the server view needs them), no owner scan (TIME-WAIT entries have no owner).
fn gathering(asked: &Query) -> Query {
    let mut q = Query::new();
    q.select.families.inet = asked.select.families.inet;
    q.select.families.inet6 = asked.select.families.inet6;
    q.select.families.unix = false;
    q.select.zones = asked.select.zones.clone();
    q.gather.proc_root = asked.gather.proc_root.clone();
    q.select.protos = Some(vec![Proto::Tcp]);
    q.gather.owners = false;
    q.gather.resolve_users = false;
    q
}

/// What is reported of it: `asked`'s ends ([`crate::query::Selection::take_ends`]).
fn selection(gathered: &Query, asked: &Query) -> Query {
    let mut q = gathered.clone();
    q.select.take_ends(&asked.select);
    q
}

/// Samples the TCP sockets `asked` selects (its families, zones and ends; the rest of it is
/// not read), once, or twice `interval` apart with each zone's counters; with an interval, and
/// where this process may trace connection events (CAP_BPF and CAP_PERFMON, or root), each
/// destination also names the processes that opened connections to it meanwhile.
pub fn run(asked: &Query, interval: Option<Duration>) -> Result<Ports, Error> {
    let gather = gathering(asked);
    let filter = selection(&gather, asked);
    let sampler = Sampler::new(&gather)
        .sysctls(true)
        .counters(interval.is_some());
    let mut tracer =
        interval.and_then(|_| super::events::Tracer::start(false, super::events::RING_BYTES).ok());
    let mut openers = Openers::default();
    let (first, last) = match interval {
        None => (None, sampler.sample()?),
        Some(d) => {
            let a = sampler.sample()?;
            let b = super::second_sample(&sampler, &a, d, tracer.as_mut(), |e| openers.add(e))?;
            (Some(a), b)
        }
    };
    let interval_s = first.as_ref().map(|f| last.seconds_since(f));
    let own_netns = super::events::own_netns();
    let reports = last
        .zones
        .iter()
        .map(|z| {
            let before = first.as_ref().and_then(|f| f.matching(z));
            let mut r = analyze_zone(z, before, interval_s, Some(&filter));
            let netns = z.zone.as_ref().and_then(|z| z.netns_inode).or(own_netns);
            if let (Some(_), Some(netns)) = (&tracer, netns) {
                openers.attach(&mut r, netns);
            }
            r
        })
        .collect();
    Ok(Ports {
        reports,
        warnings: last.warnings,
        zoned: last.zoned,
    })
}
