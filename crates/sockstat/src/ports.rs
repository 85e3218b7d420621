//! Ephemeral-port use and TIME-WAIT accumulation (doc/reference/calibration.md, R7 and R8; the
//! incident of doc/reference/cases.md#case-003-an-illumos-time-wait-review): which destinations use how much of
//! `net.ipv4.ip_local_port_range`, how long their TIME-WAIT entries stay, how fast new ones appear,
//! and, on the server side, which clients leave TIME-WAIT entries on a listening port.
//!
//! Pure: takes snapshots, sysctl values and counter sets gathered elsewhere
//! (`sys::sysctl`, `sys::counters`) and returns a [`PortsReport`]. No I/O.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use serde::Serialize;

use crate::counters::CounterSet;
use crate::model::{Endpoint, Proto, Severity, Snapshot, Socket, State};
use crate::query::{PortSet, Query};
use crate::sample::ZoneSample;
use crate::sysctl::Sysctls;
use crate::text::fmt;
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

/// What a [`Finding`] is about, so that other views (the diagnosis's R7 and R8) can take its
/// numbers from the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Subject {
    /// The namespace (the range, the TIME-WAIT table, the counters).
    #[default]
    Namespace,
    /// `destinations[i]`.
    Destination(usize),
    /// `servers[i]`.
    Server(usize),
}

/// Something the report found, with what to do about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Finding {
    /// Stable code: `ephemeral-ports-critical`, `ephemeral-ports-warning`,
    /// `ephemeral-ports-rate`, `no-ephemeral-ports`, `time-wait-buckets`, `time-wait-overflow`,
    /// `time-wait-syn-rejects`, `time-wait-reused`, `server-time-wait`, or a collection
    /// warning's code.
    pub code: &'static str,
    /// How serious.
    pub level: Severity,
    /// What was seen.
    pub message: String,
    /// What to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
    /// Details (shown with `-v`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    /// What it is about.
    #[serde(skip)]
    pub subject: Subject,
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

fn inet(ep: &Endpoint) -> Option<(IpAddr, u16)> {
    match ep {
        Endpoint::Inet { addr, port } => Some((*addr, *port)),
        _ => None,
    }
}

fn remote(s: &Socket) -> Option<(IpAddr, u16)> {
    s.remote
        .as_ref()
        .and_then(inet)
        .filter(|(a, p)| *p != 0 && !a.is_unspecified())
}

fn time_wait_left(s: &Socket) -> Option<u32> {
    s.timer
        .filter(|t| t.kind == TIMER_TIME_WAIT || s.state == State::TimeWait)
        .map(|t| t.expires_ms)
}

/// Identity of a TIME-WAIT entry across two samples: its 4-tuple and cookie (a port reused
/// within the interval gets a new cookie).
type EntryKey = (Endpoint, Option<Endpoint>, Option<u64>);

fn entry_key(s: &Socket) -> EntryKey {
    (s.local.clone(), s.remote.clone(), s.cookie)
}

/// Listeners: (address, port), deduplicated (SO_REUSEPORT groups list one socket each), sorted
/// by port so that [`listener_of`] finds a port's listeners by binary search (it runs once per
/// TCP socket: a linear search over a host's thousands of listeners was most of the exporter's
/// port analysis).
fn listeners(snap: &Snapshot) -> Vec<(IpAddr, u16)> {
    let mut v: Vec<(IpAddr, u16)> = snap
        .sockets
        .iter()
        .filter(|s| s.proto == Proto::Tcp && s.state == State::Listen)
        .filter_map(|s| inet(&s.local))
        .collect();
    v.sort_by_key(|&(a, p)| (p, a));
    v.dedup();
    v
}

/// The listener a socket was accepted from: same port, and the same address or a wildcard
/// listener. An exact address wins over a wildcard. `listeners` as [`listeners`] sorts them.
fn listener_of(listeners: &[(IpAddr, u16)], local: (IpAddr, u16)) -> Option<(IpAddr, u16)> {
    let from = listeners.partition_point(|&(_, p)| p < local.1);
    let same_port = listeners[from..].iter().take_while(|(_, p)| *p == local.1);
    let mut wildcard = None;
    for &(a, p) in same_port {
        if a == local.0 {
            return Some((a, p));
        }
        if a.is_unspecified() && wildcard.is_none() {
            wildcard = Some((a, p));
        }
    }
    wildcard
}

fn delta(counters: Option<(&CounterSet, &CounterSet)>, group: &str, name: &str) -> Option<i64> {
    let (a, b) = counters?;
    a.change(b, group, name)?.delta()
}

fn reuse_text(s: &Settings) -> String {
    let reuse = match s.tcp_tw_reuse {
        Some(0) => "tcp_tw_reuse=0 (off)".to_string(),
        Some(1) => "tcp_tw_reuse=1 (on)".to_string(),
        Some(2) => "tcp_tw_reuse=2 (loopback only, the default)".to_string(),
        Some(n) => format!("tcp_tw_reuse={n}"),
        None => "tcp_tw_reuse unknown".to_string(),
    };
    let ts = match s.tcp_timestamps {
        Some(0) => "tcp_timestamps=0 (off: reuse cannot work)".to_string(),
        Some(n) => format!("tcp_timestamps={n}"),
        None => "tcp_timestamps unknown".to_string(),
    };
    format!("{reuse}, {ts}")
}

/// Builds the report.
pub fn analyze(input: &PortsInput<'_>) -> PortsReport {
    let sys = input.sysctls;
    let reserved = sys.ip_local_reserved_ports.as_ref();
    let range = PortRange::new(sys.ip_local_port_range, reserved);
    let settings = Settings {
        tcp_tw_reuse: sys.tcp_tw_reuse,
        tcp_tw_reuse_delay_ms: sys.tcp_tw_reuse_delay_ms,
        tcp_timestamps: sys.tcp_timestamps,
    };
    let snap = input.snapshot;
    let wanted = |s: &Socket| input.filter.is_none_or(|q| q.matches_socket(s));
    let lst = listeners(snap);

    // TIME-WAIT entries of the earlier sample, to tell the new ones.
    let earlier_tw: Option<HashSet<EntryKey>> = input.earlier.map(|e| {
        e.sockets
            .iter()
            .filter(|s| s.proto == Proto::Tcp && s.state == State::TimeWait)
            .map(entry_key)
            .collect()
    });

    #[derive(Default)]
    struct Acc {
        count: u32,
        states: BTreeMap<std::borrow::Cow<'static, str>, u32>,
        time_wait: u32,
        left: Option<TimeLeft>,
        new_tw: u32,
    }
    let mut dests: HashMap<(IpAddr, IpAddr, u16), Acc> = HashMap::new();
    #[derive(Default)]
    struct ClientAcc {
        time_wait: u32,
        connections: u32,
        ports: HashSet<u16>,
        left: Option<TimeLeft>,
    }
    let mut servers: BTreeMap<(IpAddr, u16), BTreeMap<IpAddr, ClientAcc>> = BTreeMap::new();
    let mut tw_seen = 0u64;

    for s in &snap.sockets {
        if s.proto != Proto::Tcp || s.state == State::Listen {
            continue;
        }
        if s.state == State::TimeWait {
            tw_seen += 1;
        }
        let (Some(local), Some(rem)) = (inet(&s.local), remote(s)) else {
            continue;
        };
        if !wanted(s) {
            continue;
        }
        let is_tw = s.state == State::TimeWait;
        if let Some(l) = listener_of(&lst, local) {
            let c = servers.entry(l).or_default().entry(rem.0).or_default();
            if is_tw {
                c.time_wait += 1;
                c.ports.insert(rem.1);
                if let Some(ms) = time_wait_left(s) {
                    TimeLeft::add(&mut c.left, ms);
                }
            } else {
                c.connections += 1;
            }
            continue;
        }
        if !range.is_ephemeral(local.1, reserved) {
            continue;
        }
        let d = dests.entry((local.0, rem.0, rem.1)).or_default();
        d.count += 1;
        *d.states.entry(s.state.name()).or_default() += 1;
        if is_tw {
            d.time_wait += 1;
            if let Some(ms) = time_wait_left(s) {
                TimeLeft::add(&mut d.left, ms);
            }
            if earlier_tw
                .as_ref()
                .is_some_and(|e| !e.contains(&entry_key(s)))
            {
                d.new_tw += 1;
            }
        }
    }

    let interval = input.interval_s.filter(|s| *s > 0.0);
    let usable = u64::from(range.usable);
    let mut destinations: Vec<Destination> = dests
        .into_iter()
        .map(|((la, ra, rp), a)| {
            let usage = if usable == 0 {
                1.0
            } else {
                (f64::from(a.count) / usable as f64).min(1.0)
            };
            let new_tw = earlier_tw.as_ref().map(|_| a.new_tw);
            Destination {
                local_address: la,
                remote_address: ra,
                remote_port: rp,
                count: a.count,
                states: a
                    .states
                    .into_iter()
                    .map(|(k, n)| (k.into_owned(), n))
                    .collect(),
                usage,
                time_wait: a.time_wait,
                time_wait_left: a.left,
                new_time_wait: new_tw,
                new_time_wait_per_s: new_tw.zip(interval).map(|(n, s)| f64::from(n) / s),
                level: usage_level(u64::from(a.count), usable),
                opened_by: None,
            }
        })
        .collect();
    destinations.sort_by(|a, b| {
        (b.count, a.local_address, a.remote_address, a.remote_port).cmp(&(
            a.count,
            b.local_address,
            b.remote_address,
            b.remote_port,
        ))
    });

    let mut server_list: Vec<Server> = servers
        .into_iter()
        .map(|((addr, port), clients)| {
            let mut clients: Vec<ServerClient> = clients
                .into_iter()
                .map(|(address, c)| ServerClient {
                    address,
                    time_wait: c.time_wait,
                    connections: c.connections,
                    ports: c.ports.len() as u32,
                    time_wait_left: c.left,
                })
                .collect();
            clients.sort_by(|a, b| (b.time_wait, a.address).cmp(&(a.time_wait, b.address)));
            Server {
                local_address: addr,
                local_port: port,
                time_wait: clients.iter().map(|c| c.time_wait).sum(),
                connections: clients.iter().map(|c| c.connections).sum(),
                clients,
            }
        })
        .filter(|s| s.time_wait > 0)
        .collect();
    server_list.sort_by(|a, b| {
        (b.time_wait, a.local_address, a.local_port).cmp(&(
            a.time_wait,
            b.local_address,
            b.local_port,
        ))
    });

    let c = input.counters;
    let new_tw_total = match (delta(c, "TcpExt", "TW"), delta(c, "TcpExt", "TWKilled")) {
        (Some(a), b) => Some(a.saturating_add(b.unwrap_or(0))),
        (None, _) => None,
    };
    let max_buckets = sys.tcp_max_tw_buckets;
    let tw_count = input.time_wait_total.unwrap_or(tw_seen);
    let time_wait = TimeWaitTotals {
        count: tw_count,
        max_buckets,
        usage: max_buckets
            .filter(|m| *m > 0)
            .map(|m| tw_count as f64 / m as f64),
        new_per_s: new_tw_total.zip(interval).map(|(n, s)| n as f64 / s),
        overflow_delta: delta(c, "TcpExt", "TCPTimeWaitOverflow"),
        recycled_delta: delta(c, "TcpExt", "TWRecycled"),
    };
    let mut server_counters = Vec::new();
    if let Some((a, b)) = c {
        for name in ["PAWSEstab", "PAWSTimewait", "TCPACKSkippedTimeWait"] {
            if let Some(ch) = a.change(b, "TcpExt", name) {
                server_counters.push(CounterDelta {
                    counter: format!("TcpExt.{name}"),
                    delta: ch.delta(),
                });
            }
        }
    }

    let mut report = PortsReport {
        range,
        settings,
        time_wait,
        interval_s: interval,
        destinations,
        servers: server_list,
        server_counters,
        findings: Vec::new(),
        zone: None,
    };
    report.findings = findings(&report);
    report
}

fn secs(ms: u32) -> String {
    format!("{}", ms.div_ceil(1000))
}

/// The advice of R7, with this namespace's settings.
pub fn exhaustion_advice(r: &PortsReport) -> String {
    format!(
        "use connection pooling or keep-alive; let the server close first (TIME-WAIT then lands \
         on the server); enable tcp_tw_reuse=1 (needs tcp_timestamps on both ends; now {}); \
         widen net.ipv4.ip_local_port_range (now {}-{}, {} usable); add source addresses or \
         destination ports",
        reuse_text(&r.settings),
        r.range.low,
        r.range.high,
        r.range.usable
    )
}

fn findings(r: &PortsReport) -> Vec<Finding> {
    let mut out = Vec::new();
    let n = r.range.usable;
    if n == 0 {
        out.push(Finding {
            code: "no-ephemeral-ports",
            level: Severity::Critical,
            message: format!(
                "the ephemeral range {}-{} has no usable port ({} reserved): every connect() \
                 without bind() fails with EADDRNOTAVAIL",
                r.range.low, r.range.high, r.range.reserved
            ),
            advice: Some(
                "widen net.ipv4.ip_local_port_range or shrink net.ipv4.ip_local_reserved_ports"
                    .into(),
            ),
            details: vec![],
            subject: Subject::Namespace,
        });
    }
    for (i, d) in r.destinations.iter().enumerate() {
        let Some(level) = d.level else { continue };
        let code = match level {
            Severity::Critical => "ephemeral-ports-critical",
            _ => "ephemeral-ports-warning",
        };
        let left = match d.time_wait_left {
            Some(t) => format!(
                "; the first frees in {} s, the last in {} s",
                secs(t.min_ms),
                secs(t.max_ms)
            ),
            None => String::new(),
        };
        out.push(Finding {
            code,
            level,
            message: format!(
                "client {} -> {} uses {} of {} ephemeral ports ({:.0}%, {} in TIME-WAIT{left}). \
                 At {:.1} new connections/s x {TIME_WAIT_S} s TIME-WAIT the range is exhausted, \
                 and connect() fails with EADDRNOTAVAIL; no kernel counter counts that failure",
                d.local_address,
                fmt::inet(d.remote_address, d.remote_port),
                d.count,
                n,
                d.usage * 100.0,
                d.time_wait,
                r.range.sustainable_rate_per_s
            ),
            advice: Some(match level {
                Severity::Critical if d.time_wait > 0 => format!(
                    "{}; to free the {} ports held in TIME-WAIT now (Linux 6.0+): {}",
                    exhaustion_advice(r),
                    d.time_wait,
                    crate::text::kill_command::command_for(
                        &crate::text::kill_command::Target::TimeWaitTo {
                            local: Some(d.local_address),
                            remote: d.remote_address,
                            remote_port: d.remote_port,
                        },
                        r.zone.as_ref()
                    )
                ),
                _ => exhaustion_advice(r),
            }),
            details: vec![],
            subject: Subject::Destination(i),
        });
    }
    for (i, d) in r.destinations.iter().enumerate() {
        let (Some(rate), Some(_)) = (d.new_time_wait_per_s, r.interval_s) else {
            continue;
        };
        if d.level.is_none() && rate > r.range.sustainable_rate_per_s && n > 0 {
            out.push(Finding {
                code: "ephemeral-ports-rate",
                level: Severity::Warning,
                message: format!(
                    "client {} -> {} opens {:.1} connections/s that end in TIME-WAIT, more than \
                     the {:.1}/s its {} ports sustain: the range runs out in about {:.0} s",
                    d.local_address,
                    fmt::inet(d.remote_address, d.remote_port),
                    rate,
                    r.range.sustainable_rate_per_s,
                    n,
                    f64::from(n.saturating_sub(d.count)) / (rate - r.range.sustainable_rate_per_s)
                ),
                advice: Some(exhaustion_advice(r)),
                details: vec![],
                subject: Subject::Destination(i),
            });
        }
    }
    if let Some(o) = r.time_wait.overflow_delta.filter(|o| *o > 0) {
        out.push(Finding {
            code: "time-wait-overflow",
            level: Severity::Critical,
            message: format!(
                "TIME-WAIT table full: {o} connections were closed without TIME-WAIT protection \
                 (TcpExt.TCPTimeWaitOverflow; {} entries, tcp_max_tw_buckets {})",
                r.time_wait.count,
                r.time_wait
                    .max_buckets
                    .map_or("unknown".into(), |m| m.to_string())
            ),
            advice: Some(
                "raise net.ipv4.tcp_max_tw_buckets, or open fewer short connections (keep-alive, \
                 pooling)"
                    .into(),
            ),
            details: vec![],
            subject: Subject::Namespace,
        });
    } else if let Some(u) = r.time_wait.usage.filter(|u| *u >= 0.8) {
        out.push(Finding {
            code: "time-wait-buckets",
            level: Severity::Warning,
            message: format!(
                "{} TIME-WAIT entries use {:.0}% of tcp_max_tw_buckets ({}); past it, connections \
                 close without TIME-WAIT protection",
                r.time_wait.count,
                u * 100.0,
                r.time_wait.max_buckets.unwrap_or(0)
            ),
            advice: Some("raise net.ipv4.tcp_max_tw_buckets, or use keep-alive".into()),
            details: vec![],
            subject: Subject::Namespace,
        });
    }
    let server_tw: u32 = r.servers.iter().map(|s| s.time_wait).sum();
    let rejects = syn_rejects(r);
    if rejects.fired(server_tw) {
        let busiest = match r.servers.first() {
            Some(top) => format!(
                "; {} holds {} TIME-WAIT entries from {} clients",
                fmt::inet(top.local_address, top.local_port),
                top.time_wait,
                top.clients.len()
            ),
            None => String::new(),
        };
        out.push(Finding {
            code: "time-wait-syn-rejects",
            level: Severity::Warning,
            message: format!(
                "SYNs arrived for connections this host still holds in TIME-WAIT and were \
                 rejected ({}){busiest}: those clients' connect() stalls for a SYN retransmit \
                 (1 s, 3 s, 7 s)",
                rejects.text()
            ),
            advice: Some(
                "clients reuse source ports while this server still holds them in TIME-WAIT (the \
                 server closes first): keep TCP timestamps on at both ends \
                 (net.ipv4.tcp_timestamps=1) so a newer SYN is accepted; let clients close \
                 first; use keep-alive or pooling; or widen the clients' port range so ports \
                 come back less often"
                    .into(),
            ),
            details: vec![],
            subject: if r.servers.is_empty() {
                Subject::Namespace
            } else {
                Subject::Server(0)
            },
        });
    } else if server_tw > 0 && r.interval_s.is_none() {
        out.push(Finding {
            code: "server-time-wait",
            level: Severity::Info,
            message: format!(
                "{server_tw} TIME-WAIT {} on {} (the server closed first); a client that \
                 reuses one of those ports within 60 s may have its SYN rejected",
                if server_tw == 1 {
                    "entry sits"
                } else {
                    "entries sit"
                },
                match r.servers.len() {
                    1 => "1 listening port".to_string(),
                    n => format!("{n} listening ports"),
                }
            ),
            advice: Some(
                "run with --interval SECONDS to see the PAWS and TIME-WAIT ACK counters".into(),
            ),
            details: vec![],
            subject: Subject::Namespace,
        });
    }
    if let Some(d) = r.time_wait.recycled_delta.filter(|d| *d > 0) {
        out.push(Finding {
            code: "time-wait-reused",
            level: Severity::Info,
            message: format!(
                "connect() reused a port still in TIME-WAIT {d} times during the interval \
                 (TcpExt.TWRecycled; {})",
                reuse_text(&r.settings)
            ),
            advice: None,
            details: vec![],
            subject: Subject::Namespace,
        });
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.level));
    out
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

/// The TIME-WAIT reject counters of a report (measured over its interval).
pub fn syn_rejects(r: &PortsReport) -> SynRejects {
    let get = |name: &str| {
        r.server_counters
            .iter()
            .find(|c| c.counter == name)
            .and_then(|c| c.delta)
    };
    let has_paws_tw = r
        .server_counters
        .iter()
        .any(|c| c.counter == "TcpExt.PAWSTimewait");
    SynRejects {
        paws_timewait: get("TcpExt.PAWSTimewait"),
        paws_estab: if has_paws_tw {
            None
        } else {
            get("TcpExt.PAWSEstab")
        },
        ack_skipped_timewait: get("TcpExt.TCPACKSkippedTimeWait"),
    }
}

/// Analyses one zone of a [`crate::Sample`] (against the same zone of an earlier one, when given),
/// with the zone's own sysctls, counters and TIME-WAIT total; `filter` picks what is reported.
pub fn analyze_zone(
    after: &ZoneSample,
    before: Option<&ZoneSample>,
    interval_s: Option<f64>,
    filter: Option<&Query>,
) -> PortsReport {
    let counters = match (before.and_then(|b| b.counters.as_ref()), &after.counters) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    let report = analyze(&PortsInput {
        snapshot: &after.snapshot,
        earlier: before.map(|b| &b.snapshot),
        interval_s,
        sysctls: &after.sysctls,
        counters,
        time_wait_total: after.time_wait_total,
        filter,
    });
    report.in_zone(after.zone.clone())
}

impl PortsReport {
    /// The report as made in `zone`: its findings' commands close sockets there
    /// (`sockstat kill ... -z ZONE`).
    pub fn in_zone(mut self, zone: Option<Zone>) -> PortsReport {
        self.zone = zone;
        self.findings = findings(&self);
        self
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{Family, SockType, Timer};

    pub(crate) fn sock(state: State, local: (&str, u16), remote: Option<(&str, u16)>) -> Socket {
        Socket {
            timer: (state == State::TimeWait).then_some(Timer {
                kind: TIMER_TIME_WAIT,
                expires_ms: 30_000,
                retrans: 0,
            }),
            ..Socket::new(
                Proto::Tcp,
                Family::Inet,
                SockType::Stream,
                state,
                Endpoint::Inet {
                    addr: local.0.parse().unwrap(),
                    port: local.1,
                },
                remote.map(|(a, p)| Endpoint::Inet {
                    addr: a.parse().unwrap(),
                    port: p,
                }),
            )
        }
    }

    fn tw(local_port: u16, dst: (&str, u16), left_ms: u32, cookie: u64) -> Socket {
        let mut s = sock(State::TimeWait, ("10.0.0.1", local_port), Some(dst));
        s.timer.as_mut().unwrap().expires_ms = left_ms;
        s.cookie = Some(cookie);
        s
    }

    fn sysctls(lo: u16, hi: u16, reserved: &str) -> Sysctls {
        Sysctls {
            ip_local_port_range: Some((lo, hi)),
            ip_local_reserved_ports: sockstat_wire::sysctl::port_list(reserved)
                .ok()
                .map(PortSet::from_ranges),
            tcp_tw_reuse: Some(0),
            tcp_tw_reuse_delay_ms: Some(1000),
            tcp_timestamps: Some(1),
            tcp_max_tw_buckets: Some(1000),
            ..Sysctls::default()
        }
    }

    fn snap(sockets: Vec<Socket>) -> Snapshot {
        Snapshot {
            sockets,
            ..Snapshot::default()
        }
    }

    fn run(s: &Snapshot, sys: &Sysctls) -> PortsReport {
        analyze(&PortsInput {
            snapshot: s,
            earlier: None,
            interval_s: None,
            sysctls: sys,
            counters: None,
            time_wait_total: None,
            filter: None,
        })
    }

    fn n_to(n: u16, dst: (&str, u16)) -> Vec<Socket> {
        (0..n)
            .map(|i| tw(40000 + i, dst, 1000 + u32::from(i) * 100, u64::from(i)))
            .collect()
    }

    #[test]
    fn boundaries_exactly_50_and_80_percent() {
        assert_eq!(usage_level(49, 100), None);
        assert_eq!(usage_level(50, 100), Some(Severity::Warning));
        assert_eq!(usage_level(79, 100), Some(Severity::Warning));
        assert_eq!(usage_level(80, 100), Some(Severity::Critical));
        assert_eq!(usage_level(0, 0), None);
        assert_eq!(usage_level(1, 0), Some(Severity::Critical));

        let sys = sysctls(40000, 40009, "");
        let r = run(&snap(n_to(5, ("10.0.0.2", 80))), &sys);
        assert_eq!(r.destinations[0].usage, 0.5);
        assert_eq!(r.destinations[0].level, Some(Severity::Warning));
        assert_eq!(r.findings[0].code, "ephemeral-ports-warning");
        let r = run(&snap(n_to(8, ("10.0.0.2", 80))), &sys);
        assert_eq!(r.destinations[0].usage, 0.8);
        assert_eq!(r.destinations[0].level, Some(Severity::Critical));
        assert_eq!(r.findings[0].code, "ephemeral-ports-critical");
        assert!(
            r.findings[0].message.contains("uses 8 of 10"),
            "{:?}",
            r.findings
        );
        assert!(r.findings[0]
            .advice
            .as_ref()
            .unwrap()
            .contains("tcp_tw_reuse=0"));
        assert!(
            r.findings[0].advice.as_ref().unwrap().ends_with(
                "; to free the 8 ports held in TIME-WAIT now (Linux 6.0+): sockstat kill --state \
                 TIME_WAIT --src 10.0.0.1 --dst 10.0.0.2 --dport 80"
            ),
            "{:?}",
            r.findings
        );
        let r = run(&snap(n_to(4, ("10.0.0.2", 80))), &sys);
        assert_eq!(r.destinations[0].level, None);
        assert!(r.findings.is_empty(), "{:?}", r.findings);
    }

    /// In a zone, the command that frees the TIME-WAIT ports closes them in that zone.
    #[test]
    fn the_kill_command_names_the_zone() {
        let zone = ZoneSample {
            zone: Some(Zone {
                name: "web-1".into(),
                kind: crate::zone::ZoneKind::Docker,
                netns_inode: Some(4026532000),
                container_id: None,
                runtime: None,
                pod: None,
            }),
            snapshot: snap(n_to(8, ("10.0.0.2", 80))),
            sysctls: sysctls(40000, 40009, ""),
            ..ZoneSample::default()
        };
        let r = analyze_zone(&zone, None, None, None);
        assert_eq!(r.findings[0].code, "ephemeral-ports-critical");
        assert!(
            r.findings[0].advice.as_ref().unwrap().ends_with(
                "sockstat kill --state TIME_WAIT --src 10.0.0.1 --dst 10.0.0.2 --dport 80 -z web-1"
            ),
            "{:?}",
            r.findings
        );
    }

    #[test]
    fn reserved_ports_leave_the_range() {
        let sys = sysctls(40000, 40009, "40000-40004,50000");
        let r = run(&snap(n_to(10, ("10.0.0.2", 80))), &sys);
        assert_eq!(r.range.reserved, 5);
        assert_eq!(r.range.usable, 5);
        // Sockets on reserved ports (bound explicitly) are not counted.
        assert_eq!(r.destinations[0].count, 5);
        assert_eq!(r.destinations[0].usage, 1.0);
        assert_eq!(r.range.sustainable_rate_per_s, 5.0 / 60.0);
    }

    #[test]
    fn a_range_of_one_port() {
        let sys = sysctls(40000, 40000, "");
        let r = run(&snap(n_to(1, ("10.0.0.2", 80))), &sys);
        assert_eq!(r.range.usable, 1);
        assert_eq!(r.destinations[0].count, 1);
        assert_eq!(r.destinations[0].level, Some(Severity::Critical));
        // All of it reserved: nothing usable, one critical finding.
        let sys = sysctls(40000, 40000, "40000");
        let r = run(&snap(vec![]), &sys);
        assert_eq!(r.range.usable, 0);
        assert_eq!(r.findings[0].code, "no-ephemeral-ports");
    }

    #[test]
    fn grouping_states_and_time_left() {
        let sys = sysctls(40000, 40099, "");
        let mut v = n_to(3, ("10.0.0.2", 80));
        v.push(sock(
            State::Established,
            ("10.0.0.1", 40050),
            Some(("10.0.0.2", 80)),
        ));
        v.push(sock(
            State::Established,
            ("10.0.0.1", 40051),
            Some(("10.0.0.2", 443)),
        ));
        // Outside the range, a listener and an unconnected socket: not counted.
        v.push(sock(
            State::Established,
            ("10.0.0.1", 1000),
            Some(("10.0.0.2", 80)),
        ));
        v.push(sock(State::Listen, ("0.0.0.0", 22), None));
        v.push(sock(State::Close, ("10.0.0.1", 40060), None));
        let r = run(&snap(v), &sys);
        assert_eq!(r.destinations.len(), 2);
        let d = &r.destinations[0];
        assert_eq!((d.remote_port, d.count, d.time_wait), (80, 4, 3));
        assert_eq!(d.states["TIME_WAIT"], 3);
        assert_eq!(d.states["ESTABLISHED"], 1);
        assert_eq!(
            d.time_wait_left,
            Some(TimeLeft {
                min_ms: 1000,
                max_ms: 1200
            })
        );
        assert_eq!(d.new_time_wait, None);
        assert_eq!(r.destinations[1].remote_port, 443);
        assert_eq!(r.time_wait.count, 3);
        assert_eq!(r.time_wait.max_buckets, Some(1000));
    }

    #[test]
    fn server_view_groups_time_wait_by_client() {
        let sys = sysctls(40000, 40099, "");
        let mut v = vec![sock(State::Listen, ("0.0.0.0", 40010), None)];
        // Server-side TIME-WAIT on the listening port (which is inside the range: still a
        // server, not a client).
        for (i, client) in [("10.0.0.7", 5000), ("10.0.0.7", 5001), ("10.0.0.8", 6000)]
            .into_iter()
            .enumerate()
        {
            let mut s = sock(State::TimeWait, ("10.0.0.1", 40010), Some(client));
            s.cookie = Some(i as u64);
            v.push(s);
        }
        v.push(sock(
            State::Established,
            ("10.0.0.1", 40010),
            Some(("10.0.0.8", 6001)),
        ));
        let r = run(&snap(v), &sys);
        assert!(r.destinations.is_empty(), "{:?}", r.destinations);
        assert_eq!(r.servers.len(), 1);
        let s = &r.servers[0];
        assert_eq!((s.local_port, s.time_wait, s.connections), (40010, 3, 1));
        assert_eq!(s.clients[0].address, "10.0.0.7".parse::<IpAddr>().unwrap());
        assert_eq!((s.clients[0].time_wait, s.clients[0].ports), (2, 2));
        assert_eq!(s.clients[1].connections, 1);
        assert_eq!(r.findings[0].code, "server-time-wait");
    }

    #[test]
    fn interval_counts_new_entries_and_counter_deltas() {
        let sys = sysctls(40000, 40099, "");
        let before = snap(n_to(2, ("10.0.0.2", 80)));
        let mut later = n_to(2, ("10.0.0.2", 80));
        // Port 40000 reused: the same tuple with a new cookie is a new entry.
        later[0].cookie = Some(99);
        later.extend((2..20).map(|i| tw(40000 + i, ("10.0.0.2", 80), 59_000, 100 + u64::from(i))));
        let later = snap(later);
        let a = CounterSet::from_values([
            ("TcpExt", "TW", 10),
            ("TcpExt", "TCPTimeWaitOverflow", 0),
            ("TcpExt", "PAWSEstab", 1),
            ("TcpExt", "PAWSTimewait", 0),
            ("TcpExt", "TCPACKSkippedTimeWait", 0),
        ]);
        let b = CounterSet::from_values([
            ("TcpExt", "TW", 29),
            ("TcpExt", "TCPTimeWaitOverflow", 2),
            ("TcpExt", "PAWSEstab", 1),
            ("TcpExt", "PAWSTimewait", 3),
            ("TcpExt", "TCPACKSkippedTimeWait", 0),
        ]);
        let r = analyze(&PortsInput {
            snapshot: &later,
            earlier: Some(&before),
            interval_s: Some(2.0),
            sysctls: &sys,
            counters: Some((&a, &b)),
            time_wait_total: Some(25),
            filter: None,
        });
        let d = &r.destinations[0];
        assert_eq!(d.new_time_wait, Some(19));
        assert_eq!(d.new_time_wait_per_s, Some(9.5));
        assert_eq!(r.time_wait.new_per_s, Some(9.5));
        assert_eq!(r.time_wait.overflow_delta, Some(2));
        assert_eq!(r.time_wait.count, 25);
        // 9.5/s is above the 100/60 the range sustains: a rate warning although usage is 20%.
        // PAWSTimewait +3: this host dropped SYNs against its TIME-WAIT entries (a server-side
        // TIME-WAIT that has since expired still made a client stall).
        let codes: Vec<&str> = r.findings.iter().map(|w| w.code).collect();
        assert_eq!(
            codes,
            [
                "time-wait-overflow",
                "ephemeral-ports-rate",
                "time-wait-syn-rejects"
            ]
        );
        assert_eq!(
            r.server_counters
                .iter()
                .map(|c| (c.counter.as_str(), c.delta))
                .collect::<Vec<_>>(),
            [
                ("TcpExt.PAWSEstab", Some(0)),
                ("TcpExt.PAWSTimewait", Some(3)),
                ("TcpExt.TCPACKSkippedTimeWait", Some(0))
            ]
        );
    }

    #[test]
    fn paws_rejects_with_server_time_wait_warn() {
        let sys = sysctls(40000, 40099, "");
        let mut v = vec![sock(State::Listen, ("0.0.0.0", 8080), None)];
        v.push(sock(
            State::TimeWait,
            ("10.0.0.1", 8080),
            Some(("10.0.0.7", 5000)),
        ));
        let s = snap(v);
        // A 6.15 kernel: no PAWSTimewait, the rejects land in PAWSEstab.
        let a = CounterSet::from_values([("TcpExt", "PAWSEstab", 1)]);
        let b = CounterSet::from_values([("TcpExt", "PAWSEstab", 4)]);
        let r = analyze(&PortsInput {
            snapshot: &s,
            earlier: Some(&s),
            interval_s: Some(1.0),
            sysctls: &sys,
            counters: Some((&a, &b)),
            time_wait_total: None,
            filter: None,
        });
        assert_eq!(r.findings[0].code, "time-wait-syn-rejects");
        assert!(r.findings[0].message.contains("PAWSEstab +3"));
    }

    #[test]
    fn filter_selects_destinations() {
        let sys = sysctls(40000, 40099, "");
        let mut v = n_to(3, ("10.0.0.2", 80));
        v.push(tw(40090, ("10.0.0.3", 443), 1, 1000));
        let mut q = Query::new();
        q.ports = Some(PortSet::parse("443").unwrap());
        let s = snap(v);
        let r = analyze(&PortsInput {
            snapshot: &s,
            earlier: None,
            interval_s: None,
            sysctls: &sys,
            counters: None,
            time_wait_total: None,
            filter: Some(&q),
        });
        assert_eq!(r.destinations.len(), 1);
        assert_eq!(r.destinations[0].remote_port, 443);
    }

    #[test]
    fn json_shape() {
        let sys = sysctls(40000, 40009, "");
        let r = run(&snap(n_to(9, ("10.0.0.2", 80))), &sys);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["range"]["usable"], 10);
        let d = &v["destinations"][0];
        assert_eq!(d["local_address"], "10.0.0.1");
        assert_eq!(d["remote_address"], "10.0.0.2");
        assert_eq!(d["remote_port"], 80);
        assert_eq!(d["count"], 9);
        assert_eq!(d["states"]["TIME_WAIT"], 9);
        assert_eq!(d["usage"], 0.9);
        assert_eq!(d["level"], "critical");
        // The findings are written by render::ports, after the report's fields.
        assert!(v.get("warnings").is_none());
        assert_eq!(r.findings[0].level, Severity::Critical);
    }
}
