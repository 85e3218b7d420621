//! The connection-events use case (`sockstat events`, the exporter's event metrics, the
//! connects `diagnose` and `ports` measure over their interval): the tracer that loads the
//! probe and reads its records, the [`Stream`] of the events a query selects (decoded, matched
//! against its filters and zones, each with its peer and user names, summed when asked), the
//! network namespaces a query selects, and the user names of the processes events name. The
//! records are decoded by the pure [`crate::events`]; the renderers write what [`Stream`]
//! returns.

use std::collections::HashMap;
use std::time::Duration;

pub use crate::sys::tcp_events::{BackgroundReader, Tracer, Unavailable, CONNS_MAX, RING_BYTES};

use crate::events::stats::Stats;
use crate::events::{Clock, ConnEvent, Lost, Peers, Record};
use crate::query::Query;

/// How a [`Stream`] reads.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct StreamOptions {
    /// Records the reading thread may hold for the caller before it drops more (counted as
    /// lost to a full ring).
    pub max_backlog: usize,
    /// Fill in the user names of the events' processes.
    pub resolve_users: bool,
    /// Sum the events the query selects per side, command and destination ([`Stats`]).
    pub stats: bool,
}

impl Default for StreamOptions {
    fn default() -> StreamOptions {
        StreamOptions {
            max_backlog: 500_000,
            resolve_users: true,
            stats: false,
        }
    }
}

/// An event a [`Stream`] selected, with its zone's name when the query names every zone (`-Z`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ZonedEvent {
    /// The event, its process's and peer's user names filled when asked.
    pub event: ConnEvent,
    /// Its zone's name, with `-Z`.
    pub zone: Option<String>,
}

/// What a [`Stream`] read since the last batch.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Batch {
    /// The events the query selects, in the order the kernel wrote them.
    pub events: Vec<ZonedEvent>,
    /// What was lost since the last batch (zero when nothing was).
    pub lost: Lost,
    /// Records that did not decode since the last batch (a bug: none are expected).
    pub undecodable: u64,
}

/// What a [`Stream`] leaves when it ends.
#[non_exhaustive]
pub struct Finished {
    /// What the kernel wrote up to the end.
    pub rest: Batch,
    /// The sums, with [`StreamOptions::stats`].
    pub stats: Option<Stats>,
    /// What was lost over the whole stream.
    pub lost: Lost,
    /// The tracer, for its programs' run statistics (`None` when its thread panicked).
    pub tracer: Option<Tracer>,
}

/// The connection events a query selects, as they happen (`sockstat events`): a thread reads
/// the tracer's ring buffer, and each [`Stream::next`] decodes what it read, remembers every
/// connection's ends so that each event names its peer ([`Peers`], from every event, selected
/// or not), and keeps the events of the query's zones that pass its filters.
pub struct Stream {
    reader: BackgroundReader,
    q: Query,
    zones: ZoneScope,
    clock: Clock,
    users: Option<UserNames>,
    peers: Peers,
    stats: Option<Stats>,
    lost: Lost,
    bad: u64,
}

impl Stream {
    /// Starts reading `tracer`'s events for `q`, in the namespaces `zones` selects
    /// ([`ZoneScope::new`] of the same query). Fails when the reading thread cannot start.
    pub fn new(
        q: &Query,
        zones: ZoneScope,
        tracer: Tracer,
        opts: StreamOptions,
    ) -> std::io::Result<Stream> {
        Ok(Stream {
            reader: tracer.spawn_reader(opts.max_backlog)?,
            q: q.clone(),
            zones,
            clock: Clock::now(),
            users: opts.resolve_users.then(UserNames::default),
            peers: Peers::default(),
            stats: opts.stats.then(Stats::default),
            lost: Lost::default(),
            bad: 0,
        })
    }

    /// True with `-Z`: every namespace's events, each with its zone's name.
    pub fn every_zone(&self) -> bool {
        self.zones.all()
    }

    /// The events read within `wait` (at once when some are waiting), and what was lost.
    pub fn next(&mut self, wait: Duration) -> Batch {
        let batches = self.reader.recv(wait);
        self.batch(batches)
    }

    /// Stops reading: what the kernel wrote up to now, and what the stream leaves.
    pub fn finish(mut self) -> Finished {
        let (tracer, rest) = self.reader.stop();
        let rest = self.batch(rest);
        Finished {
            rest,
            stats: self.stats,
            lost: self.lost,
            tracer,
        }
    }

    fn batch(&mut self, batches: Vec<Vec<Record>>) -> Batch {
        let mut events = Vec::new();
        for r in batches.iter().flatten() {
            let Some(mut e) = ConnEvent::from_record(r, &self.clock) else {
                continue;
            };
            self.peers.observe(&mut e);
            if !self.zones.wants(e.netns) || !e.matches(&self.q) {
                continue;
            }
            if let Some(u) = self.users.as_mut() {
                u.fill(&mut e);
            }
            if let Some(s) = self.stats.as_mut() {
                s.add(&e);
            }
            let zone = self.zones.all().then(|| self.zones.name(e.netns));
            events.push(ZonedEvent { event: e, zone });
        }
        let (lost, bad) = self.reader.lost();
        let undecodable = bad.saturating_sub(self.bad);
        self.bad = self.bad.max(bad);
        self.peers.expire(Clock::monotonic_now());
        let new = lost.since(&self.lost);
        self.lost = lost;
        Batch {
            events,
            lost: new,
            undecodable,
        }
    }
}

/// The inode of the network namespace this thread runs in (what events carry as `netns`).
pub fn own_netns() -> Option<u64> {
    let link = std::fs::read_link("/proc/thread-self/ns/net").ok()?;
    sockstat_wire::fd_link::netns_inode(link.as_os_str().as_encoded_bytes())
}

/// Which network namespaces' events a query selects, and their zone names (for `-Z`).
///
/// Like the listing: the namespace this process runs in unless the query says `-z` or `-Z`.
/// The tracepoints see every namespace, so this is a filter on the events' `netns`.
#[derive(Debug)]
pub struct ZoneScope {
    /// `None`: every namespace.
    only: Option<std::collections::HashSet<u64>>,
    names: HashMap<u64, String>,
    /// When the names were last discovered (ns, monotonic).
    refreshed: Option<u64>,
    proc_root: std::path::PathBuf,
    all: bool,
}

impl ZoneScope {
    /// The namespaces `q.select.zones` selects. A `-z` name that matches no zone is
    /// [`crate::Error::UnknownZone`].
    pub fn new(q: &Query) -> Result<ZoneScope, crate::error::Error> {
        let mut z = ZoneScope {
            only: None,
            names: HashMap::new(),
            refreshed: None,
            proc_root: q.gather.proc_root.clone(),
            all: q.select.zones == crate::query::ZoneSelect::All,
        };
        match crate::sys::netns::select(&q.gather.proc_root, &q.select.zones)? {
            None => {
                let own = own_netns().ok_or_else(|| {
                    crate::error::Error::from(crate::error::SysError::other(
                        "reading this process's network namespace (/proc/thread-self/ns/net)",
                        crate::error::ErrorKind::Unsupported,
                        "no net:[inode] link",
                    ))
                })?;
                z.only = Some(std::collections::HashSet::from([own]));
            }
            Some((targets, _)) => {
                for t in &targets {
                    if let Some(ino) = t.zone.netns_inode {
                        z.names.insert(ino, t.zone.name.clone());
                    }
                }
                z.refreshed = Some(Clock::monotonic_now());
                if !z.all {
                    z.only = Some(targets.iter().filter_map(|t| t.zone.netns_inode).collect());
                }
            }
        }
        Ok(z)
    }

    /// True when events of namespace `netns` are wanted.
    pub fn wants(&self, netns: u64) -> bool {
        self.only.as_ref().is_none_or(|s| s.contains(&netns))
    }

    /// True with `-Z`: events of every namespace, each named.
    pub fn all(&self) -> bool {
        self.all
    }

    /// The zone name of a namespace, discovering the host's namespaces again (at most once a
    /// second) when it is new; its inode when nothing names it.
    pub fn name(&mut self, netns: u64) -> String {
        let now = Clock::monotonic_now();
        if !self.names.contains_key(&netns)
            && self
                .refreshed
                .is_none_or(|t| now.saturating_sub(t) >= 1_000_000_000)
        {
            if let Ok(Some((targets, _))) =
                crate::sys::netns::select(&self.proc_root, &crate::query::ZoneSelect::All)
            {
                for t in targets {
                    if let Some(ino) = t.zone.netns_inode {
                        self.names.insert(ino, t.zone.name.clone());
                    }
                }
            }
            self.refreshed = Some(now);
        }
        self.names
            .get(&netns)
            .cloned()
            .unwrap_or_else(|| netns.to_string())
    }
}

/// User names by uid, looked up once each.
#[derive(Debug, Default)]
pub struct UserNames {
    cache: HashMap<u32, Option<String>>,
}

impl UserNames {
    /// The name of `uid`, from the user database the first time.
    pub fn name(&mut self, uid: u32) -> Option<String> {
        self.cache
            .entry(uid)
            .or_insert_with(|| crate::sys::users::name_of(uid))
            .clone()
    }

    /// Fills the user names of an event's processes.
    pub fn fill(&mut self, e: &mut ConnEvent) {
        for p in [e.process.as_mut(), e.peer.as_mut()].into_iter().flatten() {
            if p.user.is_none() {
                p.user = self.name(p.uid);
            }
        }
    }
}
