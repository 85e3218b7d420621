//! The exporter's collection (`sockstat serve`): one sample of every zone, the holders of the
//! listening sockets from an owner cache, the ports report of each zone, the diagnosis against
//! the previous collection, and the connection events summed meanwhile: what the metrics
//! renderer (`render::metrics`) writes. The command keeps HTTP, TLS, privileges and its threads;
//! this keeps what one collection reuses from the last (the previous sample, trimmed to what a
//! diagnosis reads, and the owner cache).
//!
//! The owner cache holds (zone, socket inode) -> holders for the listening sockets, the only
//! sockets whose owners the metrics show, so the owner scan (one for every zone: it reads every
//! process's fds) runs only when a listener appears that the cache does not know, or the cache
//! is older than [`OWNER_REFRESH`] (doc/serve.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::diagnose::Finding;
use crate::error::Error;
use crate::events::drops::Drops;
use crate::events::metrics::EventMetrics;
use crate::join::{self, Unseen};
use crate::model::{
    Endpoint, Owner, OwnersStatus, Process, Proto, Socket, State, Warning, WarningCode,
};
use crate::ports::{analyze_zone, PortsReport};
use crate::query::{OwnerScan, Query, ZoneSelect};
use crate::run::diagnose::{judge, Diagnosis};
use crate::run::drops::DropCounter;
use crate::run::sampler::Sampler;
use crate::sample::{Sample, ZoneSample};

/// The owner cache is refreshed at least this often, so a listener handed to another process
/// (or whose holder exited while a child kept it) gets its `command` label corrected.
pub const OWNER_REFRESH: Duration = Duration::from_secs(300);

/// Owners of the listening sockets, by zone key and socket inode, with the processes they
/// name. One owner scan serves every zone: it reads the fds of every process on the host.
struct OwnerCache {
    by_listener: HashMap<(Option<u64>, u64), Vec<Owner>>,
    processes: HashMap<u32, Process>,
    /// What the last scan could not see: a listener's owner status is decided from it, as the
    /// listing decides it (`sockstat::join`).
    unseen: Unseen,
    /// The last scan failed as a whole.
    scan_failed: bool,
    refreshed: Option<Instant>,
    scans: u64,
    /// How the scan reads fd tables: the BPF iterator when the capabilities kept allow it
    /// (CAP_SYS_ADMIN, kept with -Z, or CAP_BPF and CAP_PERFMON), until it fails once (a
    /// system-call filter, an old kernel); else `/proc`, so that the iterator is not tried and
    /// given up at every scan.
    scan: OwnerScan,
}

fn listener_inode(s: &Socket) -> Option<u64> {
    (s.state == State::Listen && matches!(s.local, Endpoint::Inet { .. }))
        .then_some(s.id)
        .flatten()
}

impl OwnerCache {
    fn new(scan: OwnerScan) -> OwnerCache {
        OwnerCache {
            by_listener: HashMap::new(),
            processes: HashMap::new(),
            unseen: Unseen::default(),
            scan_failed: false,
            refreshed: None,
            scans: 0,
            scan,
        }
    }

    /// Gives the listeners of every zone their holders and owner status: from the cache when
    /// every listener is known to it and it is fresh, else from one full owner scan that refills
    /// it. Returns what the metrics cannot show of them: the scan failed or could not use the
    /// BPF iterator, or processes that could not be read may hold listeners (the listing's
    /// `owners-hidden`, counted over the listeners, the sockets whose holders the metrics name).
    fn fill(&mut self, zones: &mut [ZoneSample], proc_root: &Path) -> Vec<Warning> {
        let listeners: Vec<(Option<u64>, u64)> = zones
            .iter()
            .flat_map(|z| {
                z.snapshot
                    .sockets
                    .iter()
                    .filter_map(listener_inode)
                    .map(move |i| (z.key, i))
            })
            .collect();
        let stale = self.refreshed.is_none_or(|t| t.elapsed() >= OWNER_REFRESH);
        let mut warnings = Vec::new();
        if stale || listeners.iter().any(|l| !self.by_listener.contains_key(l)) {
            self.scans += 1;
            self.refreshed = Some(Instant::now());
            let mut q = Query::new();
            q.gather.proc_root = proc_root.to_path_buf();
            q.gather.owner_scan = self.scan;
            match crate::run::list::scan_owners(&q) {
                Ok(scan) => {
                    if let Some(why) = scan.bpf_unavailable {
                        // Say it once, and scan /proc from now on without trying again.
                        warnings.push(Warning::new(
                            WarningCode::OwnerScanBpfUnavailable,
                            format!(
                                "the BPF owner scan cannot run here ({why}); scanning /proc \
                                 instead"
                            ),
                        ));
                        self.scan = OwnerScan::Proc;
                    }
                    self.unseen = scan.unseen;
                    self.scan_failed = false;
                    self.by_listener = listeners
                        .iter()
                        .map(|&(zone, id)| {
                            let holders = scan.index.holders_of(id);
                            ((zone, id), holders.iter().map(|x| x.owner).collect())
                        })
                        .collect();
                    let mut procs = scan.processes;
                    self.processes = self
                        .by_listener
                        .values()
                        .flatten()
                        .filter_map(|o| Some((o.pid, procs.remove(&o.pid)?)))
                        .collect();
                }
                Err(e) => {
                    // Remember the listeners anyway: a failing scan is retried at the refresh.
                    self.by_listener = listeners.iter().map(|&l| (l, Vec::new())).collect();
                    self.processes.clear();
                    self.scan_failed = true;
                    warnings.push(Warning::new(
                        WarningCode::OwnersUnavailable,
                        format!("no process information for listeners: {e}"),
                    ));
                }
            }
        } else {
            // Forget listeners that closed (and zones that went away), so the cache stays as
            // small as the listener set.
            let live: std::collections::HashSet<(Option<u64>, u64)> =
                listeners.iter().copied().collect();
            self.by_listener.retain(|l, _| live.contains(l));
        }
        let mut shown: Vec<Socket> = Vec::new();
        for z in zones {
            let snap = &mut z.snapshot;
            for s in &mut snap.sockets {
                let owners = listener_inode(s).and_then(|i| self.by_listener.get(&(z.key, i)));
                if let Some(owners) = owners {
                    s.owners = owners.clone();
                    s.owners_status = if self.failed() {
                        OwnersStatus::Hidden
                    } else {
                        join::status_of(s, &self.unseen, &self.processes)
                    };
                    for o in owners {
                        if let Some(p) = self.processes.get(&o.pid) {
                            snap.processes.entry(o.pid).or_insert_with(|| p.clone());
                        }
                    }
                    shown.push(s.clone());
                }
            }
        }
        if !self.failed() {
            warnings.extend(join::warnings(
                &shown,
                &self.unseen,
                crate::privilege::reads_every_fd_table(),
            ));
        }
        warnings
    }

    /// Whether the last scan failed as a whole (its listeners then have no holder, and may
    /// have any).
    fn failed(&self) -> bool {
        self.scan_failed
    }
}

/// What the exporter keeps between collections: the sampler, the owner cache, the previous
/// sample (a diagnosis needs two) and, with `--events`, the events summed meanwhile.
pub struct Collector {
    proc_root: PathBuf,
    owners: OwnerCache,
    sampler: Sampler,
    previous: Option<Sample>,
    /// The sample just taken, being trimmed to what the next collection's diagnosis reads
    /// (and the one before it dropped) off the scrape's path: the next collection's previous.
    trimming: Option<std::thread::JoinHandle<Sample>>,
    events: Option<EventsFeed>,
}

/// What `--events` adds to each collection.
struct EventsFeed {
    metrics: Arc<Mutex<EventMetrics>>,
    drops: DropCounter,
}

/// One collection, as the metrics renderer reads it.
#[non_exhaustive]
pub struct Collection<'a> {
    /// Every zone's sample; listeners carry their holders.
    pub sample: &'a Sample,
    /// The ports report of each zone, in the sample's order.
    pub ports: &'a [PortsReport],
    /// The diagnosis between the previous collection and this one; `None` for the first.
    pub findings: Option<&'a [Finding]>,
    /// With events: the events summed since the exporter started (less the namespaces no
    /// longer in the collection) and the host's dropped packets.
    pub events: Option<(&'a EventMetrics, &'a Drops)>,
    /// What the collection could not read (counters, sysctls, zones, listeners' holders).
    pub warnings: &'a [Warning],
}

/// Why a collection failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum CollectError {
    /// The sample could not be taken.
    Sample(Error),
    /// The drop counter's map could not be read.
    Drops(std::io::Error),
}

impl std::fmt::Display for CollectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CollectError::Sample(_) => "listing sockets",
            CollectError::Drops(_) => "reading the drops map",
        })
    }
}

impl std::error::Error for CollectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CollectError::Sample(e) => Some(e),
            CollectError::Drops(e) => Some(e),
        }
    }
}

impl Collector {
    /// A collector of the zones `zones` selects, under `proc_root`, naming listeners' holders
    /// with scans of kind `owner_scan` (given up for `/proc` the first time BPF cannot run).
    pub fn new(proc_root: PathBuf, zones: ZoneSelect, owner_scan: OwnerScan) -> Collector {
        let mut q = Query::new();
        q.gather.owners = false;
        q.gather.resolve_users = false;
        q.gather.tcp_info = true;
        q.gather.memory = true;
        q.gather.congestion = true;
        // Every family is keyed by its labels and written in their order, and the diagnosis is
        // exported as counts by rule and severity: nothing here depends on the sockets' order,
        // so they are not sorted (render::metrics' test `the_exposition_does_not_depend_on_the_order_of_sockets`).
        q.gather.sorted = false;
        // Unix sockets are only counted by state: their names, peers and memory go unread.
        q.gather.unix_details = false;
        q.gather.proc_root = proc_root.clone();
        q.select.zones = zones;
        Collector {
            proc_root,
            owners: OwnerCache::new(owner_scan),
            sampler: Sampler::new(&q),
            previous: None,
            trimming: None,
            events: None,
        }
    }

    /// Adds the connection events `metrics` sums (filled by the caller's reader of the
    /// tracer) and the drop counter to every collection.
    pub fn with_events(
        mut self,
        metrics: Arc<Mutex<EventMetrics>>,
        drops: DropCounter,
    ) -> Collector {
        self.events = Some(EventsFeed { metrics, drops });
        self
    }

    /// How many owner scans the cache has run.
    pub fn owner_scans(&self) -> u64 {
        self.owners.scans
    }

    /// Collects once and hands the collection to `use_it` (the renderer); then keeps the
    /// sample, trimmed on another thread, as the next collection's previous.
    pub fn collect<R>(
        &mut self,
        use_it: impl FnOnce(&Collection<'_>) -> R,
    ) -> Result<R, CollectError> {
        if let Some(t) = self.trimming.take() {
            // A trim that panicked leaves no earlier sample: this collection has no diagnosis.
            self.previous = t.join().ok();
        }
        let mut now = self.sampler.sample().map_err(CollectError::Sample)?;
        let owner_warnings = self.owners.fill(&mut now.zones, &self.proc_root);
        let mut warnings = now.warnings.clone();
        warnings.extend(owner_warnings);
        let reports: Vec<PortsReport> = now
            .zones
            .iter()
            .map(|z| analyze_zone(z, None, None, None))
            .collect();
        let findings = self
            .previous
            .as_ref()
            .map(|before| judge(before, &now, &Diagnosis::default()).findings);
        // The events summed so far, less the namespaces no longer in the collection (their
        // series end, and a host whose containers come and go does not accumulate them).
        let events = match &self.events {
            Some(feed) => {
                let present: Vec<u64> = now
                    .zones
                    .iter()
                    .filter_map(|z| z.zone.as_ref().and_then(|z| z.netns_inode).or(z.key))
                    .collect();
                let mut shared = feed.metrics.lock().unwrap_or_else(|p| p.into_inner());
                let own = shared.own_netns;
                shared.retain_zones(|n| Some(n) == own || present.contains(&n));
                let m = shared.clone();
                drop(shared);
                let drops = feed.drops.read().map_err(CollectError::Drops)?;
                Some((m, drops))
            }
            None => None,
        };
        let out = use_it(&Collection {
            sample: &now,
            ports: &reports,
            findings: findings.as_deref(),
            events: events.as_ref().map(|(m, d)| (m, d)),
            warnings: &warnings,
        });
        // Diagnosis reads the earlier sample only through its counters and the TCP sockets it
        // can join by cookie (those with tcp_info): keep just those, to halve what is held
        // between scrapes on a host full of unix and UDP sockets. Freeing the rest (and the
        // sample before) is 5 ms at 60k sockets, done on another thread while this scrape is
        // answered.
        let before = self.previous.take();
        self.trimming = Some(std::thread::spawn(move || {
            drop(before);
            for z in &mut now.zones {
                z.snapshot
                    .sockets
                    .retain(|s| s.proto == Proto::Tcp && s.cookie.is_some() && s.tcp.is_some());
                z.snapshot.processes.clear();
            }
            now
        }));
        Ok(out)
    }
}

/// The exporter's connection-event metrics: the events of the namespace sockstat runs in (of
/// every namespace with `all_zones`), read from `tracer` every 100 ms on a thread of their own
/// (named `events`), summed into what each collection renders ([`EventMetrics`]). `in_thread`
/// runs first on that thread (the command drops its capabilities there: reading the ring
/// buffer takes none).
pub fn sum_events(
    mut tracer: crate::run::events::Tracer,
    all_zones: bool,
    in_thread: impl FnOnce() + Send + 'static,
) -> std::io::Result<Arc<Mutex<EventMetrics>>> {
    let own = crate::run::events::own_netns();
    let metrics = Arc::new(Mutex::new(EventMetrics::new(own)));
    let sink = Arc::clone(&metrics);
    let clock = crate::events::Clock::now();
    std::thread::Builder::new()
        .name("events".into())
        .spawn(move || {
            in_thread();
            loop {
                let mut batch = Vec::new();
                tracer.drain(|r| {
                    if let Some(e) = crate::events::ConnEvent::from_record(&r, &clock) {
                        if all_zones || Some(e.netns) == own {
                            batch.push(e);
                        }
                    }
                });
                let lost = tracer.lost();
                {
                    let mut m = sink.lock().unwrap_or_else(|p| p.into_inner());
                    for e in &batch {
                        m.add(e);
                    }
                    if let Ok(l) = lost {
                        m.lost = l;
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })?;
    Ok(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Family, RawString, SockType};

    fn socket(inode: u64, state: State) -> Socket {
        let mut s = Socket::new(
            Proto::Tcp,
            Family::Inet,
            SockType::Stream,
            state,
            Endpoint::Inet {
                addr: "127.0.0.1".parse().unwrap(),
                port: 8080,
            },
            None,
        );
        s.id = Some(inode);
        s.cookie = Some(inode);
        s.send_q = 128;
        s.uid = Some(0);
        s.owners_status = OwnersStatus::NotRequested;
        s
    }

    /// The replay fixture's /proc: pid 4242 (sockholder) holds socket:[3331811] as fd 11 and
    /// socket:[3331812] as fd 12, which pid 4444 holds too, as fd 3.
    fn fixture_proc() -> PathBuf {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/replay/basic/proc"
        ))
    }

    /// One zone (key `key`) holding `sockets`.
    fn zone(key: Option<u64>, sockets: Vec<Socket>) -> ZoneSample {
        let mut z = ZoneSample {
            key,
            ..ZoneSample::default()
        };
        z.snapshot.sockets = sockets;
        z
    }

    fn command(z: &ZoneSample, pid: u32) -> Option<String> {
        z.snapshot
            .process(pid)
            .and_then(|p| p.command.as_ref())
            .map(|c| c.to_string_lossy().into_owned())
    }

    #[test]
    fn the_owner_cache_scans_only_for_a_listener_it_does_not_know() {
        let proc_root = fixture_proc();
        let mut cache = OwnerCache::new(OwnerScan::Proc);
        let mut zones = vec![zone(None, vec![socket(3331811, State::Listen)])];
        assert!(cache.fill(&mut zones, &proc_root).is_empty());
        assert_eq!(cache.scans, 1);
        let s = &zones[0].snapshot.sockets[0];
        assert_eq!(s.owners, vec![Owner::new(4242, 11)]);
        assert_eq!(s.owners_status, OwnersStatus::Known);
        assert_eq!(command(&zones[0], 4242).as_deref(), Some("sockholder"));

        // Same listener, plus a connection nobody asked owners for: served from the cache.
        let mut zones = vec![zone(
            None,
            vec![
                socket(3331811, State::Listen),
                socket(999_999, State::Established),
            ],
        )];
        cache.fill(&mut zones, &proc_root);
        assert_eq!(cache.scans, 1);
        assert_eq!(
            zones[0].snapshot.sockets[0].owners,
            vec![Owner::new(4242, 11)]
        );
        assert!(zones[0].snapshot.sockets[1].owners.is_empty());
        assert!(zones[0].snapshot.process(4242).is_some());

        // A new listener inode: one more scan.
        let mut zones = vec![zone(
            None,
            vec![
                socket(3331811, State::Listen),
                socket(3331812, State::Listen),
            ],
        )];
        cache.fill(&mut zones, &proc_root);
        assert_eq!(cache.scans, 2);
        assert_eq!(
            zones[0].snapshot.sockets[1].owners,
            vec![Owner::new(4242, 12), Owner::new(4444, 3)]
        );
    }

    /// Issue 31: a listener's status is the listing's (`sockstat::join`), from what the last
    /// scan could not see: a root-made listener whose only visible holder runs as another user,
    /// beside a root process the scan could not read, is partial; the warning the log gets
    /// counts it among the listeners.
    #[test]
    fn a_listener_is_partial_to_the_exporter_as_to_the_listing() {
        let mut cache = OwnerCache::new(OwnerScan::Proc);
        cache.refreshed = Some(Instant::now());
        cache
            .by_listener
            .insert((None, 7), vec![Owner::new(100, 3)]);
        cache.processes.insert(100, {
            let mut p = Process::new(100);
            p.command = Some(RawString::new(b"worker"));
            p.uid = Some(65534);
            p
        });
        cache.unseen = Unseen {
            unreadable: vec![(1, Some(0))],
            euid: 65534,
            ..Default::default()
        };
        let mut zones = vec![zone(None, vec![socket(7, State::Listen)])];
        let warnings = cache.fill(&mut zones, std::path::Path::new("/nonexistent"));
        assert_eq!(cache.scans, 0, "served from the cache");
        let s = &zones[0].snapshot.sockets[0];
        assert_eq!(s.owners_status, OwnersStatus::Partial);
        let hidden: Vec<_> = warnings
            .iter()
            .filter(|w| w.code == WarningCode::OwnersHidden)
            .collect();
        assert_eq!(hidden.len(), 1, "{warnings:?}");
        assert_eq!(hidden[0].count, Some(1));
        // The same listener created by the worker's user: its creator is in view.
        let mut zones = vec![zone(
            None,
            vec![{
                let mut s = socket(7, State::Listen);
                s.uid = Some(65534);
                s
            }],
        )];
        assert!(cache
            .fill(&mut zones, std::path::Path::new("/nonexistent"))
            .is_empty());
        assert_eq!(
            zones[0].snapshot.sockets[0].owners_status,
            OwnersStatus::Known
        );
    }

    #[test]
    fn one_scan_serves_every_zone_and_listeners_are_known_per_zone() {
        let proc_root = fixture_proc();
        let mut cache = OwnerCache::new(OwnerScan::Proc);
        // Two zones, each with a listener: one scan names both, each zone gets the process
        // records of its own listeners only.
        let mut zones = vec![
            zone(Some(1), vec![socket(3331811, State::Listen)]),
            zone(Some(2), vec![socket(3331812, State::Listen)]),
        ];
        assert!(cache.fill(&mut zones, &proc_root).is_empty());
        assert_eq!(cache.scans, 1);
        assert_eq!(
            zones[1].snapshot.sockets[0].owners,
            vec![Owner::new(4242, 12), Owner::new(4444, 3)]
        );
        assert!(zones[0].snapshot.process(4444).is_none());
        assert!(zones[1].snapshot.process(4444).is_some());
        // The same zones again: no scan. A zone that went away is forgotten.
        let mut zones = vec![zone(Some(2), vec![socket(3331812, State::Listen)])];
        cache.fill(&mut zones, &proc_root);
        assert_eq!(cache.scans, 1);
        assert_eq!(cache.by_listener.len(), 1);
        // A listener inode known in zone 2 but now seen in a new zone 3 is a new listener.
        let mut zones = vec![zone(Some(3), vec![socket(3331812, State::Listen)])];
        cache.fill(&mut zones, &proc_root);
        assert_eq!(cache.scans, 2);
        assert_eq!(zones[0].snapshot.sockets[0].owners.len(), 2);
    }
}
