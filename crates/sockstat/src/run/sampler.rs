//! [`Sampler`]: takes a [`Sample`] of the zones a query selects: their sockets in one gathering
//! (as [`crate::collect`] does), and each zone's counters and sysctls read inside that zone.
//! `sockstat diagnose`, `ports`, `counters`, `serve`, `trace` and
//! [`crate::diagnose_connections`] all sample through it, so they read the same things the same
//! way and say the same things about what they could not read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind};
use crate::model::{counted, Snapshot, Warning, WarningCode};
use crate::query::Query;
use crate::run::holders::HolderCache;
use crate::sample::{Reach, Sample, ZoneSample};
use crate::sys::counters::{self, CounterRead, ProcPaths};
use crate::sys::netns::{self, ZoneTarget};
use crate::sys::sysctl::{self, SysctlRead};
use crate::sysctl::Sysctls;

/// Takes samples of the zones a query selects (`query.select.zones`: the namespace sockstat runs in,
/// one zone, or every zone, discovered again at every sample so that zones may come and go).
#[derive(Debug, Clone)]
pub struct Sampler {
    query: Query,
    sockets: bool,
    counters: bool,
    sysctls: bool,
    /// The last walk of the holders, kept for the next sample ([`Sampler::keep_holders`]).
    holders: Option<Arc<HolderCache>>,
}

/// What one zone's counter and sysctl files gave.
struct ZoneReads {
    counters: Option<Result<CounterRead, Error>>,
    sysctls: Option<SysctlRead>,
}

impl Sampler {
    /// A sampler of the sockets `query` selects, with each zone's counters and sysctls.
    pub fn new(query: &Query) -> Sampler {
        Sampler {
            query: query.clone(),
            sockets: true,
            counters: true,
            sysctls: true,
            holders: None,
        }
    }

    /// Whether to keep each walk of the holders for the next samples, for at most `max_age`
    /// (`run::holders`: the live view's). A listing walks every time.
    pub(crate) fn keep_holders(mut self, max_age: Duration) -> Sampler {
        self.holders = (!max_age.is_zero()).then(|| Arc::new(HolderCache::new(max_age)));
        self
    }

    /// Whether to gather sockets (the counter view needs none).
    pub fn sockets(mut self, on: bool) -> Sampler {
        self.sockets = on;
        self
    }

    /// Whether to read each zone's counters (`/proc/net/snmp`, `netstat`, `snmp6`, `sockstat`).
    pub fn counters(mut self, on: bool) -> Sampler {
        self.counters = on;
        self
    }

    /// Whether to read each zone's sysctls.
    pub fn sysctls(mut self, on: bool) -> Sampler {
        self.sysctls = on;
        self
    }

    /// The query sockets are gathered with.
    pub fn query(&self) -> &Query {
        &self.query
    }

    /// Takes one sample.
    pub fn sample(&self) -> Result<Sample, Error> {
        self.sample_with(&self.query)
    }

    /// Takes one sample, gathering sockets with `q` instead of the sampler's query (e.g. without
    /// the owner scan for the first of two samples); zones still follow the sampler's query.
    pub fn sample_with(&self, q: &Query) -> Result<Sample, Error> {
        let root = &self.query.gather.proc_root;
        let taken = Instant::now();
        let selected = netns::select(root, &self.query.select.zones)?;
        let targets: Option<Vec<ZoneTarget>> = selected.as_ref().map(|(t, _)| t.clone());
        let (mut snapshot, holders_age) = if self.sockets {
            let mut q = q.clone();
            q.select.zones = self.query.select.zones.clone();
            crate::run::list::collect_in(&q, selected, self.holders.as_deref())?
        } else {
            let snapshot = Snapshot {
                warnings: selected.map(|(_, w)| w).unwrap_or_default(),
                ..Snapshot::default()
            };
            (snapshot, None)
        };
        let mut warnings = std::mem::take(&mut snapshot.warnings);
        let reads = |p: &ProcPaths| ZoneReads {
            counters: self.counters.then(|| counters::read(p)),
            sysctls: self.sysctls.then(|| sysctl::read(p)),
        };
        let own = ProcPaths::new(root);
        let Some(targets) = targets else {
            let mut notes = Notes::default();
            let mut zone = notes.zone_sample(None, None, reads(&own), Reach::Joined, None);
            zone.snapshot = snapshot;
            warnings.extend(notes.warnings());
            return Ok(Sample {
                taken,
                zones: vec![zone],
                warnings,
                zoned: false,
                holders_age,
            });
        };
        // The global sysctls are the host's: read once, from this process's namespace.
        let host = self.sysctls.then(|| sysctl::read(&own).sysctls);
        let mut by_key = split_by_zone(snapshot, &targets);
        let mut notes = Notes::default();
        let mut zones = Vec::with_capacity(targets.len());
        for t in &targets {
            let (r, reach) = match netns::in_zone(t, root, reads) {
                // Gone since discovery (a container that stopped): not in this sample, and no
                // warning, since nothing is missing from what exists.
                Err(why) if why.kind() == ErrorKind::Gone => continue,
                Err(why) => {
                    notes.not_read.push(format!("zone {}: {why}", t.zone.name));
                    continue;
                }
                Ok(v) => v,
            };
            // Read through a member process that exited meanwhile: gone the same way.
            if matches!(reach, Reach::Member(..))
                && matches!(&r.counters, Some(Err(e)) if e.kind() == ErrorKind::Gone)
            {
                continue;
            }
            let mut z = notes.zone_sample(Some(t), Some(&t.zone.name), r, reach, host.as_ref());
            z.snapshot = by_key.remove(&t.key).unwrap_or_default();
            zones.push(z);
        }
        warnings.extend(notes.warnings());
        Ok(Sample {
            taken,
            zones,
            warnings,
            zoned: true,
            holders_age,
        })
    }
}

/// Splits a snapshot gathered in several zones into one per zone key (each with the processes,
/// users and cgroups its sockets name; warnings stay with the sample).
fn split_by_zone(snapshot: Snapshot, targets: &[ZoneTarget]) -> HashMap<u64, Snapshot> {
    let mut out: HashMap<u64, Snapshot> = targets
        .iter()
        .map(|t| {
            let zones = snapshot
                .zones
                .get(&t.key)
                .map(|z| (t.key, z.clone()))
                .into_iter()
                .collect();
            (
                t.key,
                Snapshot {
                    zones,
                    ..Snapshot::default()
                },
            )
        })
        .collect();
    for s in snapshot.sockets {
        let Some(z) = s.netns.and_then(|k| out.get_mut(&k)) else {
            continue;
        };
        for o in &s.owners {
            if let Some(p) = snapshot.processes.get(&o.pid) {
                z.processes.entry(o.pid).or_insert_with(|| p.clone());
            }
        }
        z.sockets.push(s);
    }
    for z in out.values_mut() {
        let uids = z
            .sockets
            .iter()
            .filter_map(|s| s.uid)
            .chain(z.processes.values().filter_map(|p| p.uid));
        for uid in uids {
            if let Some(n) = snapshot.users.get(&uid) {
                z.users.entry(uid).or_insert_with(|| n.clone());
            }
        }
        for id in z.sockets.iter().filter_map(|s| s.cgroup_id) {
            if let Some(p) = snapshot.cgroups.get(&id) {
                z.cgroups.entry(id).or_insert_with(|| p.clone());
            }
        }
    }
    for ((key, index), name) in snapshot.interfaces {
        if let Some(z) = key.and_then(|k| out.get_mut(&k)) {
            z.interfaces.insert((key, index), name);
        }
    }
    out
}

/// What the zones' reads could not see, gathered into one warning of each kind.
#[derive(Default)]
struct Notes {
    counters_failed: Vec<String>,
    counters_missing: Vec<Warning>,
    sysctls_unreadable: Vec<String>,
    member_only: Vec<String>,
    not_read: Vec<String>,
}

impl Notes {
    fn zone_sample(
        &mut self,
        target: Option<&ZoneTarget>,
        name: Option<&str>,
        r: ZoneReads,
        reach: Reach,
        host: Option<&Sysctls>,
    ) -> ZoneSample {
        let prefix = |m: &str| match name {
            Some(n) => format!("zone {n}: {m}"),
            None => m.to_string(),
        };
        let mut z = ZoneSample {
            zone: target.map(|t| t.zone.clone()),
            key: target.map(|t| t.key),
            ..ZoneSample::default()
        };
        match r.counters {
            None => {}
            Some(Ok(c)) => {
                z.time_wait_total = c.time_wait_total;
                z.tcp_mem_pages = c.tcp_mem_pages;
                z.counters = Some(c.set);
                self.counters_missing
                    .extend(c.warnings.into_iter().map(|w| match name {
                        Some(n) => w.in_zone(n),
                        None => w,
                    }));
            }
            Some(Err(e)) => self.counters_failed.push(prefix(&e.to_string())),
        }
        if let Some(s) = r.sysctls {
            self.sysctls_unreadable
                .extend(s.unreadable.iter().map(|u| prefix(u)));
            z.sysctls = match host {
                Some(h) => s.sysctls.with_globals(h),
                None => s.sysctls,
            };
        }
        if let Reach::Member(pid, why) = &reach {
            self.member_only.push(prefix(&format!(
                "{why}; its counters were read from /proc/{pid}/net"
            )));
        }
        z.reach = reach;
        z
    }

    fn warnings(self) -> Vec<Warning> {
        let mut out = Vec::new();
        if !self.counters_failed.is_empty() {
            out.push(
                Warning::new(
                    WarningCode::CountersUnavailable,
                    format!(
                        "the TCP/IP counters of {} could not be read: what needs them \
                         (rates of drops, overflows, rejects) was left out (-v for why)",
                        counted(self.counters_failed.len(), "namespace", "namespaces")
                    ),
                )
                .count(self.counters_failed.len() as u64)
                .details(self.counters_failed),
            );
        }
        out.extend(self.counters_missing);
        out.extend(sysctl::unreadable_warning(
            self.sysctls_unreadable,
            "what needs them was skipped or assumed the kernel default",
        ));
        if !self.member_only.is_empty() {
            out.push(
                Warning::new(
                    WarningCode::ZoneSysctlsUnreadable,
                    format!(
                        "{} could not be joined with these privileges: their sysctls cannot be \
                         read from outside, so what needs them (port range, buffer limits, \
                         backlog caps) was skipped or assumed the kernel default; run as root \
                         to read them",
                        counted(self.member_only.len(), "zone", "zones")
                    ),
                )
                .count(self.member_only.len() as u64)
                .details(self.member_only),
            );
        }
        if !self.not_read.is_empty() {
            out.push(
                Warning::new(
                    WarningCode::ZonesNotRead,
                    format!(
                        "{} could not be read: they are left out (-v for why)",
                        counted(self.not_read.len(), "zone", "zones")
                    ),
                )
                .count(self.not_read.len() as u64)
                .details(self.not_read),
            );
        }
        out
    }
}
