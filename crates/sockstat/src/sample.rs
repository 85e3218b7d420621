//! One moment of the system as the analyses need it ([`Sample`]): per zone (network namespace)
//! its sockets, its kernel counters and its sysctls, read inside that zone. Plain data, filled by
//! [`crate::Sampler`]; the diagnosis, the port report, the counter view and the exporter read
//! it, so that each of them judges the same numbers the same way.

use std::time::Instant;

use crate::counters::CounterSet;
use crate::model::{Snapshot, Warning};
use crate::sysctl::Sysctls;
use crate::zone::Zone;

/// How a zone's counters and sysctls were reached.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Reach {
    /// From a thread in the zone (or this process's own namespace): everything.
    #[default]
    Joined,
    /// Not permitted to join (the reason): its counters were read through `/proc/PID/net` of
    /// this member process, its sysctls not at all.
    Member(u32, String),
}

/// One zone at one moment.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ZoneSample {
    /// The zone; `None` for the namespace sockstat runs in when zones were not asked for.
    pub zone: Option<Zone>,
    /// The zone's key in `Socket::netns` (`None` with `zone`).
    pub key: Option<u64>,
    /// Its sockets, as [`crate::collect`] gathers them (empty when sockets were not sampled).
    pub snapshot: Snapshot,
    /// Its TCP/IP counters; `None` when not asked for or unreadable (a warning says which).
    pub counters: Option<CounterSet>,
    /// Its sysctls, with the global ones from the host; all `None` when not asked for or when
    /// the zone could not be joined (`reach` says so).
    pub sysctls: Sysctls,
    /// Pages of memory TCP sockets use, system-wide (`/proc/net/sockstat`, "TCP: ... mem N").
    pub tcp_mem_pages: Option<u64>,
    /// TIME-WAIT entries in the zone (`tw` of `/proc/net/sockstat`).
    pub time_wait_total: Option<u64>,
    /// How its counters and sysctls were read.
    pub reach: Reach,
}

impl ZoneSample {
    /// The zone's name: its [`Zone::name`], or `None` for the namespace sockstat runs in.
    pub fn zone_name(&self) -> Option<&str> {
        self.zone.as_ref().map(|z| z.name.as_str())
    }
}

/// Every selected zone at one moment.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Sample {
    /// When the socket dump started (rates divide by the time between two of these).
    pub taken: Instant,
    /// The zones, in the listing's order (global first, then by name).
    pub zones: Vec<ZoneSample>,
    /// What could not be seen: the gathering's warnings, then the zones'.
    pub warnings: Vec<Warning>,
    /// True when zones were asked for (`-z`/`-Z`): findings and reports then carry their zone.
    pub zoned: bool,
    /// How old the holders are: `None` when they were found for this sample; else the age of
    /// the walk the live view kept and used again (doc/top.md, "Holders between walks").
    pub holders_age: Option<std::time::Duration>,
}

impl Sample {
    /// The zone of `other` in this sample (the same key), when it is here.
    pub fn matching(&self, other: &ZoneSample) -> Option<&ZoneSample> {
        self.zones.iter().find(|z| z.key == other.key)
    }

    /// Seconds from `earlier` to this sample.
    pub fn seconds_since(&self, earlier: &Sample) -> f64 {
        self.taken
            .saturating_duration_since(earlier.taken)
            .as_secs_f64()
    }
}
