//! Ephemeral-port use and TIME-WAIT accumulation (doc/reference/calibration.md, R7 and R8; the
//! incident of doc/reference/cases.md#case-003-an-illumos-time-wait-review): which destinations use how much of
//! `net.ipv4.ip_local_port_range`, how long their TIME-WAIT entries stay, how fast new ones appear,
//! and, on the server side, which clients leave TIME-WAIT entries on a listening port.
//!
//! Pure: takes snapshots, sysctl values and counter sets gathered elsewhere
//! (`sys::sysctl`, `sys::counters`) and returns a [`PortsReport`]. No I/O.
//!
//! This file holds the report's types; `analyze` makes a report, `findings` says what it means
//! (the findings, their advice and commands).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Serialize;

use crate::counters::CounterSet;
pub use crate::finding::{Finding, Subject};
use crate::model::{Severity, Snapshot};
use crate::query::{PortSet, Query};
use crate::sysctl::Sysctls;
use crate::zone::Zone;

/// How long a TIME-WAIT entry lasts: `TCP_TIMEWAIT_LEN`, 60 s, fixed in the kernel
/// (`include/net/tcp.h`); `tcp_fin_timeout` does not shorten it.
pub const TIME_WAIT_S: u32 = 60;

/// The range Linux uses when the sysctl cannot be read (`inet_init_net`, net/ipv4/af_inet.c).
pub const DEFAULT_RANGE: (u16, u16) = (32768, 60999);

/// `idiag_timer` value of a TIME-WAIT entry.
const TIMER_TIME_WAIT: u8 = 3;

/// The level of a destination using `count` of `usable` ports: warning from 50%, critical from
/// 80% (R7), computed in integers so the boundaries are exact.
pub fn usage_level(count: u64, usable: u64) -> Option<Severity> {
    if usable == 0 {
        return (count > 0).then_some(Severity::Critical);
    }
    if count * 5 >= usable * 4 {
        Some(Severity::Critical)
    } else if count * 2 >= usable {
        Some(Severity::Warning)
    } else {
        None
    }
}

/// The ephemeral range as the kernel uses it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PortRange {
    /// First port (`ip_local_port_range`).
    pub low: u16,
    /// Last port, inclusive.
    pub high: u16,
    /// Ports of the range listed in `ip_local_reserved_ports`.
    pub reserved: u32,
    /// Ports connect() can pick: `high - low + 1 - reserved`.
    pub usable: u32,
    /// Connections per second one destination can sustain: `usable / 60 s`.
    pub sustainable_rate_per_s: f64,
    /// False when the sysctl could not be read and the kernel default was assumed.
    pub from_sysctl: bool,
}

impl PortRange {
    /// The range from the sysctls (the kernel default when unreadable).
    pub fn new(range: Option<(u16, u16)>, reserved: Option<&PortSet>) -> PortRange {
        let (low, high) = range.unwrap_or(DEFAULT_RANGE);
        let size = if high >= low {
            u32::from(high) - u32::from(low) + 1
        } else {
            0
        };
        let reserved_n = match reserved {
            Some(set) if size > 0 => set
                .ranges()
                .iter()
                .map(|&(a, b)| {
                    let (a, b) = (a.max(low), b.min(high));
                    if a <= b {
                        u32::from(b) - u32::from(a) + 1
                    } else {
                        0
                    }
                })
                .sum(),
            _ => 0,
        };
        let usable = size - reserved_n;
        PortRange {
            low,
            high,
            reserved: reserved_n,
            usable,
            sustainable_rate_per_s: f64::from(usable) / f64::from(TIME_WAIT_S),
            from_sysctl: range.is_some(),
        }
    }

    /// True when connect() may pick `port` (in the range, not reserved).
    pub fn is_ephemeral(&self, port: u16, reserved: Option<&PortSet>) -> bool {
        self.low <= port && port <= self.high && !reserved.is_some_and(|r| r.contains(port))
    }
}

/// The settings that decide whether ports can be reused early (reported as read; `None` when
/// this kernel lacks the sysctl).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Settings {
    /// `net.ipv4.tcp_tw_reuse`: 0 off, 1 on, 2 loopback only (the default).
    pub tcp_tw_reuse: Option<u64>,
    /// `net.ipv4.tcp_tw_reuse_delay`, ms.
    pub tcp_tw_reuse_delay_ms: Option<u64>,
    /// `net.ipv4.tcp_timestamps` (reuse needs timestamps).
    pub tcp_timestamps: Option<u64>,
}

/// Milliseconds left on TIME-WAIT entries: the soonest and the latest to expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TimeLeft {
    /// The entry that expires first.
    pub min_ms: u32,
    /// The entry that expires last.
    pub max_ms: u32,
}

impl TimeLeft {
    fn add(slot: &mut Option<TimeLeft>, ms: u32) {
        match slot {
            None => {
                *slot = Some(TimeLeft {
                    min_ms: ms,
                    max_ms: ms,
                })
            }
            Some(t) => {
                t.min_ms = t.min_ms.min(ms);
                t.max_ms = t.max_ms.max(ms);
            }
        }
    }
}

/// Sockets from one local address to one remote address and port, on ephemeral local ports.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Destination {
    /// Local (source) address.
    pub local_address: IpAddr,
    /// Remote address.
    pub remote_address: IpAddr,
    /// Remote port.
    pub remote_port: u16,
    /// Sockets (= local ports in use toward this destination).
    pub count: u32,
    /// Sockets by state (`ESTABLISHED`, `TIME_WAIT`, ...).
    pub states: BTreeMap<String, u32>,
    /// `count / usable`: 0.0-1.0.
    pub usage: f64,
    /// Sockets in TIME-WAIT.
    pub time_wait: u32,
    /// Time left on those TIME-WAIT entries.
    pub time_wait_left: Option<TimeLeft>,
    /// TIME-WAIT entries that appeared during the interval (with `--interval`).
    pub new_time_wait: Option<u32>,
    /// `new_time_wait` per second.
    pub new_time_wait_per_s: Option<f64>,
    /// `warning` from 50% of the range, `critical` from 80%; absent below.
    pub level: Option<Severity>,
    /// The processes that called connect() to it during the interval, from connection events
    /// (`sockstat ports --interval` where it may trace them); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened_by: Option<Vec<Opener>>,
}

/// A process that opened connections to one destination (counted by
/// [`crate::events::openers::Openers`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Opener {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub command: String,
    /// connect() calls it made to the destination (completed or failed).
    pub connections: u64,
    /// Of those, the ones that failed.
    pub failed: u64,
}

/// One client of a listening port, as the server sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ServerClient {
    /// The client's address.
    pub address: IpAddr,
    /// TIME-WAIT entries from this client on the port.
    pub time_wait: u32,
    /// Other connections from this client (ESTABLISHED, CLOSE_WAIT, ...).
    pub connections: u32,
    /// Distinct client ports among the TIME-WAIT entries.
    pub ports: u32,
    /// Time left on the TIME-WAIT entries.
    pub time_wait_left: Option<TimeLeft>,
}

/// A local listening port and the TIME-WAIT entries on it (the server closed first).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Server {
    /// The listener's address (unspecified for every address).
    pub local_address: IpAddr,
    /// The listening port.
    pub local_port: u16,
    /// TIME-WAIT entries on the port.
    pub time_wait: u32,
    /// Other accepted connections on the port.
    pub connections: u32,
    /// Clients with TIME-WAIT entries or connections, most TIME-WAIT first.
    pub clients: Vec<ServerClient>,
}

/// TIME-WAIT totals for the namespace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TimeWaitTotals {
    /// TIME-WAIT entries in the namespace (`tw` of /proc/net/sockstat, else those listed).
    pub count: u64,
    /// `net.ipv4.tcp_max_tw_buckets`.
    pub max_buckets: Option<u64>,
    /// `count / max_buckets`.
    pub usage: Option<f64>,
    /// TIME-WAIT entries created per second (`TcpExt.TW` + `TWKilled` delta / interval).
    pub new_per_s: Option<f64>,
    /// `TcpExt.TCPTimeWaitOverflow` delta: connections closed without TIME-WAIT.
    pub overflow_delta: Option<i64>,
    /// `TcpExt.TWRecycled` delta: connect() reused a port in TIME-WAIT.
    pub recycled_delta: Option<i64>,
}

/// A counter delta shown with the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CounterDelta {
    /// `TcpExt.PAWSTimewait` style name.
    pub counter: String,
    /// The rise over the interval (`None`: the counter went backwards).
    pub delta: Option<i64>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PortsReport {
    /// The ephemeral range.
    pub range: PortRange,
    /// Reuse settings.
    pub settings: Settings,
    /// Namespace TIME-WAIT totals.
    pub time_wait: TimeWaitTotals,
    /// The interval between the two samples, seconds (with `--interval`).
    pub interval_s: Option<f64>,
    /// Destinations, most ports used first.
    pub destinations: Vec<Destination>,
    /// Listening ports with TIME-WAIT entries, most first.
    pub servers: Vec<Server>,
    /// Server-side counter deltas: PAWS rejects and ACKs skipped in TIME-WAIT (with an interval).
    pub server_counters: Vec<CounterDelta>,
    /// Findings, most serious first (written as the JSON's `"warnings"`, with the gathering's
    /// warnings after them: `render::ports`).
    #[serde(skip)]
    pub findings: Vec<Finding>,
    /// The zone (network namespace) analysed, with `-z`/`-Z`; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<Zone>,
}

/// What the analysis reads.
#[derive(Debug, Clone, Copy)]
pub struct PortsInput<'a> {
    /// The (last) sample of TCP sockets, listeners included.
    pub snapshot: &'a Snapshot,
    /// The earlier sample, when an interval was measured.
    pub earlier: Option<&'a Snapshot>,
    /// Seconds between the samples.
    pub interval_s: Option<f64>,
    /// The namespace's port sysctls.
    pub sysctls: &'a Sysctls,
    /// Counters before and after the interval.
    pub counters: Option<(&'a CounterSet, &'a CounterSet)>,
    /// `tw` of /proc/net/sockstat.
    pub time_wait_total: Option<u64>,
    /// Which sockets to report (ports, addresses, families); `None` = all.
    pub filter: Option<&'a Query>,
}

/// The counters that say SYNs for TIME-WAIT tuples were turned away over the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SynRejects {
    /// `TcpExt.PAWSTimewait` rise (6.16+): SYNs dropped by PAWS against a TIME-WAIT entry.
    pub paws_timewait: Option<i64>,
    /// `TcpExt.PAWSEstab` rise, read only where `PAWSTimewait` does not exist (before 6.16 the
    /// TIME-WAIT rejects were counted there, with the established ones).
    pub paws_estab: Option<i64>,
    /// `TcpExt.TCPACKSkippedTimeWait` rise: the ACK answering such a SYN was rate-limited.
    pub ack_skipped_timewait: Option<i64>,
}

impl SynRejects {
    /// Fired: a TIME-WAIT PAWS drop or a skipped TIME-WAIT ACK; on old kernels a PAWSEstab rise
    /// counts only while this host holds server-side TIME-WAIT entries (it mixes in
    /// established connections).
    pub fn fired(&self, server_time_wait: u32) -> bool {
        let up = |d: Option<i64>| d.is_some_and(|d| d > 0);
        up(self.paws_timewait)
            || up(self.ack_skipped_timewait)
            || (up(self.paws_estab) && server_time_wait > 0)
    }

    fn text(&self) -> String {
        [
            ("TcpExt.PAWSTimewait", self.paws_timewait),
            ("TcpExt.PAWSEstab", self.paws_estab),
            ("TcpExt.TCPACKSkippedTimeWait", self.ack_skipped_timewait),
        ]
        .iter()
        .filter_map(|(n, d)| d.filter(|d| *d > 0).map(|d| format!("{n} +{d}")))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

mod analyze;
mod findings;
#[cfg(test)]
pub(crate) mod tests;

pub use analyze::{analyze, analyze_zone};
pub use findings::{exhaustion_advice, syn_rejects};
