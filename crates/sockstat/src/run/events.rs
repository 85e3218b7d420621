//! The connection-events use case (`sockstat events`, the exporter's event metrics, the
//! connects `diagnose` and `ports` measure over their interval): the tracer that loads the
//! probe and reads its records, the network namespaces a query selects, and the user names of
//! the processes events name. The records are decoded by the pure [`crate::events`].

use std::collections::HashMap;

pub use crate::sys::tcp_events::{BackgroundReader, Tracer, Unavailable, CONNS_MAX, RING_BYTES};

use crate::events::{Clock, ConnEvent};
use crate::query::Query;

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
    /// The namespaces `q.zones` selects. A `-z` name that matches no zone is
    /// [`crate::Error::UnknownZone`].
    pub fn new(q: &Query) -> Result<ZoneScope, crate::error::Error> {
        let mut z = ZoneScope {
            only: None,
            names: HashMap::new(),
            refreshed: None,
            proc_root: q.proc_root.clone(),
            all: q.zones == crate::query::ZoneSelect::All,
        };
        match crate::sys::netns::select(&q.proc_root, &q.zones)? {
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
