//! The counters use case (`sockstat counters`, `sockstat.counters()`): the kernel's counters of
//! the selected zones, since boot or as deltas over an interval, in one report
//! ([`crate::counters`] does the arithmetic).

use std::time::Duration;

use crate::counters::{self, CounterReport};
use crate::error::Error;
use crate::query::Query;
use crate::run::sampler::Sampler;
use crate::sample::Sample;

/// The counters of the zones `asked` selects (its zones and `proc_root`; the rest of it is not
/// read), since boot, or their deltas over `interval`; every counter with `all`, else the
/// non-zero ones. One report, whose rows carry their zone when zones were asked for. An error
/// when no zone's counters could be read, since then there is nothing to show.
pub fn run(asked: &Query, interval: Option<Duration>, all: bool) -> Result<CounterReport, Error> {
    let mut q = Query::new();
    q.select.zones = asked.select.zones.clone();
    q.gather.proc_root = asked.gather.proc_root.clone();
    let sampler = Sampler::new(&q).sockets(false).sysctls(false);
    let first = sampler.sample()?;
    let mut report = match interval {
        None => report(None, &first, all)?,
        Some(d) => {
            let second = super::second_sample(&sampler, &first, d, None, |_| {})?;
            report(Some(&first), &second, all)?
        }
    };
    report.warnings.dedup();
    Ok(report)
}

/// The counters of every zone of `now` (their deltas since `before`, when given).
fn report(before: Option<&Sample>, now: &Sample, all: bool) -> Result<CounterReport, Error> {
    let mut reports = Vec::new();
    for z in &now.zones {
        let Some(set) = &z.counters else { continue };
        let r = match before {
            None => counters::since_boot(set, all),
            Some(b) => match b.matching(z).and_then(|b| b.counters.as_ref()) {
                Some(earlier) => counters::deltas(earlier, set, now.seconds_since(b), all),
                None => continue,
            },
        };
        reports.push((z.zone.clone(), r));
    }
    if reports.is_empty() {
        // Why: each warning's details, or its message when it has none.
        let why: Vec<&str> = now
            .warnings
            .iter()
            .flat_map(|w| {
                if w.details.is_empty() {
                    vec![w.message.as_str()]
                } else {
                    w.details.iter().map(String::as_str).collect()
                }
            })
            .collect();
        return Err(Error::Unreadable {
            what: "the counters".into(),
            why: why.join("; "),
        });
    }
    let mut report = if now.zoned {
        counters::merge_zones(
            reports
                .into_iter()
                .filter_map(|(z, r)| Some((z?, r)))
                .collect(),
        )
    } else {
        reports.remove(0).1
    };
    report.warnings.extend(now.warnings.iter().cloned());
    Ok(report)
}
