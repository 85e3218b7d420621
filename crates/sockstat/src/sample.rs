//! One moment of the system as the analyses need it ([`Sample`]): per zone (network namespace)
//! its sockets, its kernel counters and its sysctls, read inside that zone. Plain data, filled by
//! [`crate::Sampler`]; the diagnosis, the port report, the counter view and the exporter read
//! it, so that each of them judges the same numbers the same way.

use std::sync::OnceLock;
use std::time::Instant;

use rustc_hash::FxHashMap;

use crate::counters::CounterSet;
use crate::model::{Snapshot, Socket, Warning};
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
    /// Its sockets' places by cookie, made at the first look-up ([`ZoneSample::by_cookie`]).
    pub(crate) cookies: OnceLock<Cookies>,
}

/// [`ZoneSample::by_cookie`]'s index: the place of each cookie's first socket, and how many
/// sockets there were when it was made.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cookies {
    places: FxHashMap<u64, u32>,
    made_for: usize,
}

impl ZoneSample {
    /// The zone's name: its [`Zone::name`], or `None` for the namespace sockstat runs in.
    pub fn zone_name(&self) -> Option<&str> {
        self.zone.as_ref().map(|z| z.name.as_str())
    }

    /// The socket with this cookie. The index is made once per sample, at the first look-up,
    /// and serves every analysis that joins this sample with another by cookie: the diagnosis
    /// and the live view's measure, when it is the later sample and when it is the earlier.
    pub(crate) fn by_cookie(&self, cookie: u64) -> Option<&Socket> {
        let sockets = &self.snapshot.sockets;
        let index = self.cookies.get_or_init(|| {
            let mut places = FxHashMap::default();
            places.reserve(sockets.len());
            for (i, s) in sockets.iter().enumerate() {
                if let Some(c) = s.cookie {
                    places.entry(c).or_insert(i as u32);
                }
            }
            Cookies {
                places,
                made_for: sockets.len(),
            }
        });
        if index.made_for != sockets.len() {
            // Sockets added or taken away since the index was made (the fields are public).
            return sockets.iter().find(|s| s.cookie == Some(cookie));
        }
        index
            .places
            .get(&cookie)
            .and_then(|&i| sockets.get(i as usize))
            .filter(|s| s.cookie == Some(cookie))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, Family, Proto, SockType, State};

    fn socket(cookie: Option<u64>, port: u16) -> Socket {
        let mut s = Socket::new(
            Proto::Tcp,
            Family::Inet,
            SockType::Stream,
            State::Established,
            Endpoint::Inet {
                addr: [127, 0, 0, 1].into(),
                port,
            },
            None,
        );
        s.cookie = cookie;
        s
    }

    #[test]
    fn sockets_are_found_by_cookie_also_after_the_list_changed() {
        let mut z = ZoneSample::default();
        z.snapshot.sockets = vec![socket(Some(7), 1), socket(None, 2), socket(Some(9), 3)];
        assert_eq!(z.by_cookie(9).map(|s| s.local.port()), Some(Some(3)));
        assert_eq!(z.by_cookie(7).map(|s| s.local.port()), Some(Some(1)));
        assert!(z.by_cookie(8).is_none());
        // The index was made for three sockets: one more is looked for in the list itself.
        z.snapshot.sockets.push(socket(Some(8), 4));
        assert_eq!(z.by_cookie(8).map(|s| s.local.port()), Some(Some(4)));
        assert_eq!(z.by_cookie(9).map(|s| s.local.port()), Some(Some(3)));
        // A socket replaced in place is not taken for the one that was there.
        z.snapshot.sockets[2] = socket(Some(10), 5);
        assert!(z.by_cookie(9).is_none());
    }
}
