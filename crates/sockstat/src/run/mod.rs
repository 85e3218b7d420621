//! The use cases (doc/architecture.md): each subcommand's work as one library function that
//! gathers (through `sys`), analyses (through the pure modules) and returns a report, for the
//! command, the Python binding and the exporter to render. Nothing below this floor imports it;
//! the renderers read the reports it returns.
//!
//! - [`list`]: the listing (`sockstat`, [`crate::collect`], Python's `sockets()`);
//! - `sampler`: one sample of every zone a query selects, the listing and each zone's counters
//!   ([`crate::Sampler`]), which the two-sample views below take;
//! - [`diagnose`]: the two-sample diagnosis (`sockstat diagnose`, `sockstat.diagnose()`);
//! - [`ports`]: ephemeral ports and TIME-WAIT (`sockstat ports`, `sockstat.ports()`);
//! - [`counters`]: the kernel's counters (`sockstat counters`, `sockstat.counters()`);
//! - [`events`] and [`drops`]: the probes' readers (`sockstat events`, `sockstat drops`, the
//!   exporter's event metrics);
//! - [`exporter`]: the exporter's collection (`sockstat serve`);
//! - [`top`]: the live view's refreshes (`sockstat top`);
//! - [`trace`]: one connection followed over time (`sockstat trace`).

pub mod counters;
pub mod diagnose;
pub mod drops;
pub mod events;
pub mod exporter;
pub(crate) mod holders;
pub mod list;
pub mod ports;
pub(crate) mod sampler;
pub mod top;
pub mod trace;

use std::time::{Duration, Instant};

use crate::error::Error;
use crate::events::{Clock, ConnEvent};
use crate::query::FilterError;
use crate::run::sampler::Sampler;
use crate::sample::Sample;

/// Waits until `until`, handing every connection event `tracer` reads meanwhile to `each`
/// (every 50 ms, so the ring buffer does not fill); without a tracer, sleeps.
fn trace_until(
    until: Instant,
    mut tracer: Option<&mut events::Tracer>,
    mut each: impl FnMut(&ConnEvent),
) {
    let clock = Clock::now();
    loop {
        if let Some(t) = tracer.as_mut() {
            t.drain(|r| {
                if let Some(e) = ConnEvent::from_record(&r, &clock) {
                    each(&e);
                }
            });
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(if tracer.is_some() {
            left.min(Duration::from_millis(50))
        } else {
            left
        });
    }
}

/// The second sample, `interval` after `first` was taken, with the connection events `tracer`
/// reads meanwhile handed to `each`: the "sample, drain the tracer, sample again" of every
/// two-sample view.
fn second_sample(
    sampler: &Sampler,
    first: &Sample,
    interval: Duration,
    tracer: Option<&mut events::Tracer>,
    each: impl FnMut(&ConnEvent),
) -> Result<Sample, Error> {
    trace_until(first.taken + interval, tracer, each);
    sampler.sample()
}

/// The zone sockstat runs in ([`crate::current_zone`]).
pub(crate) fn current_zone(proc_root: &std::path::Path) -> Option<crate::zone::Zone> {
    let (targets, _) = crate::sys::netns::discover(proc_root);
    targets.into_iter().find(|t| t.own).map(|t| t.zone)
}

/// A user by name or number, as `--user` takes it ([`crate::resolve_user`]).
pub(crate) fn resolve_user(name_or_uid: &str) -> Result<u32, FilterError> {
    if let Ok(n) = name_or_uid.parse::<u32>() {
        return Ok(n);
    }
    crate::sys::users::uid_of(name_or_uid).ok_or_else(|| {
        FilterError::from_message(format!(
            "unknown user '{name_or_uid}': give a user name from the user database or a numeric uid"
        ))
    })
}
