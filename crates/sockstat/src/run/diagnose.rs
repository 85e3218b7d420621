//! The diagnose use case: the diagnosis's touches of the system beyond sampling
//! (`crate::diagnose` is pure and reads nothing): the exact buffer locks (`--exact-locks`), whether the caller is root, the page
//! size, and [`run`], the whole two-sample diagnosis of the connections a query selects.

use std::collections::HashMap;
use std::time::Duration;

use crate::diagnose::MeasuredConnects;
use crate::diagnose::{self, Options, Report, RuleId};
use crate::error::Error;
use crate::model::{Warning, WarningCode};
use crate::query::Query;
use crate::run::sampler::Sampler;
use crate::sample::Sample;

/// How a diagnosis is run beside its samples.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Diagnosis {
    /// The bottleneck bandwidth the operator gave (`--bandwidth`), bytes/s.
    pub bandwidth: Option<f64>,
    /// Read whether applications set SO_SNDBUF/SO_RCVBUF exactly, as root (`--exact-locks`).
    pub exact_locks: bool,
    /// Trace connection events during the interval (CAP_BPF and CAP_PERFMON, or root) and give
    /// R10 the connect latencies callers saw; a warning says when they could not be traced.
    pub connect_events: bool,
}

/// Samples the TCP connections `query` selects twice, `interval` apart, in the zones it
/// selects, with their counters and sysctls, and judges them with every rule: what `sockstat
/// diagnose` does.
///
/// The query is narrowed to TCP with `tcp_info`, memory and congestion details; the first
/// sample skips the owner scan unless an owner filter needs it (findings name the holders of
/// the second).
pub fn run(query: &Query, interval: Duration, how: &Diagnosis) -> Result<Report, Error> {
    let mut q = query.clone();
    q.narrow_to_tcp_internals()?;
    let sampler = Sampler::new(&q);
    let mut first = q.clone();
    first.gather.owners = q.filters_owners() && q.gather.owners;
    let (mut tracer, untraced) = if how.connect_events {
        match super::events::Tracer::start(false, super::events::RING_BYTES) {
            Ok(t) => (Some(t), None),
            Err(u) => (None, Some(u.message)),
        }
    } else {
        (None, None)
    };
    let before = sampler.sample_with(&first)?;
    let mut measured: HashMap<u64, MeasuredConnects> = HashMap::new();
    let after = super::second_sample(&sampler, &before, interval, tracer.as_mut(), |e| {
        measured.entry(e.netns).or_default().add(e)
    })?;
    let mut report = judge_with_connects(&before, &after, how, measured);
    if let Some(why) = untraced {
        report.warnings.push(Warning::new(
            WarningCode::ConnectEventsUnavailable,
            format!(
                "connect latencies were not measured ({why}): unanswered SYNs are judged only \
                 from the handshakes caught in the two samples"
            ),
        ));
    }
    Ok(report)
}

/// [`diagnose::judge`] with the system's part: the page size, the exact buffer locks of the
/// connections a buffer finding names (as root, when asked), and the warnings that say what
/// these privileges leave inferred.
pub fn judge(before: &Sample, after: &Sample, how: &Diagnosis) -> Report {
    judge_with_connects(before, after, how, HashMap::new())
}

/// [`judge`], with the connects measured over the interval by network namespace.
fn judge_with_connects(
    before: &Sample,
    after: &Sample,
    how: &Diagnosis,
    connects: HashMap<u64, MeasuredConnects>,
) -> Report {
    let root = rustix::process::geteuid().is_root();
    let mut opts = Options {
        bandwidth: how.bandwidth,
        page_size: page_size(),
        buf_locks: Default::default(),
        own_netns: (!connects.is_empty())
            .then(super::events::own_netns)
            .flatten(),
        connects,
    };
    let mut lock_errors = Vec::new();
    if how.exact_locks && root {
        let first = diagnose::judge(before, after, &opts);
        lock_errors = read_locks(&first, &mut opts);
    }
    let mut report = diagnose::judge(before, after, &opts);
    if how.exact_locks && !root {
        report.warnings.push(Warning::new(
            WarningCode::ExactLocksNeedRoot,
            "--exact-locks needs root (pidfd_getfd needs ptrace rights over the holder): buffer \
             locks are inferred",
        ));
    }
    if !lock_errors.is_empty() {
        report.warnings.push(
            Warning::new(
                WarningCode::ExactLocksUnavailable,
                format!(
                    "{} buffer locks could not be read exactly (kernel before 5.15, the process \
                     or socket went away, or access denied); those are inferred",
                    lock_errors.len()
                ),
            )
            .count(lock_errors.len() as u64)
            .details(lock_errors),
        );
    }
    if !root {
        report.warnings.push(Warning::new(
            WarningCode::BufferLocksInferred,
            "not root: whether an application set SO_SNDBUF/SO_RCVBUF is inferred from buffer \
             sizes and window scales (doc/diagnose.md), and processes of other users are not \
             named",
        ));
    }
    report
}

/// For the sockets a buffer finding names, reads the exact lock from the first holder into
/// `opts`; returns what could not be read.
fn read_locks(report: &Report, opts: &mut Options) -> Vec<String> {
    let mut errors = vec![];
    for f in &report.findings {
        if !matches!(
            f.rule,
            Some(RuleId::SendBufferLimited | RuleId::ReceiveBufferLocked)
        ) {
            continue;
        }
        let Some(s) = &f.socket else { continue };
        let (Some(cookie), Some(o)) = (s.cookie, s.owners.first()) else {
            continue;
        };
        if opts.buf_locks.contains_key(&cookie) {
            continue;
        }
        match crate::sys::buflock::read(o.pid, o.fd, cookie) {
            Ok(l) => {
                opts.buf_locks.insert(cookie, l);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    errors
}

/// The page size from the auxiliary vector (`AT_PAGESZ`), 4096 when unreadable.
pub fn page_size() -> u64 {
    crate::sys::auxv(crate::sys::AT_PAGESZ).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_is_sane() {
        let p = page_size();
        assert!(p.is_power_of_two() && p >= 4096, "{p}");
    }
}
