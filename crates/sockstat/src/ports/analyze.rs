//! The analysis: a zone's sockets, sysctls and counters into a [`PortsReport`]: destinations by
//! ephemeral ports used, TIME-WAIT by side and age, listeners' clients.

use super::findings::findings;
use super::{
    usage_level, CounterDelta, Destination, PortRange, PortsInput, PortsReport, Server,
    ServerClient, Settings, TimeLeft, TimeWaitTotals, TIMER_TIME_WAIT,
};
use crate::counters::CounterSet;
use crate::model::{Endpoint, Proto, Snapshot, Socket, State};
use crate::query::Query;
use crate::sample::ZoneSample;
use crate::zone::Zone;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::net::IpAddr;

pub(super) fn inet(ep: &Endpoint) -> Option<(IpAddr, u16)> {
    match ep {
        Endpoint::Inet { addr, port } => Some((*addr, *port)),
        _ => None,
    }
}

pub(super) fn remote(s: &Socket) -> Option<(IpAddr, u16)> {
    s.remote
        .as_ref()
        .and_then(inet)
        .filter(|(a, p)| *p != 0 && !a.is_unspecified())
}

pub(super) fn time_wait_left(s: &Socket) -> Option<u32> {
    s.timer
        .filter(|t| t.kind == TIMER_TIME_WAIT || s.state == State::TimeWait)
        .map(|t| t.expires_ms)
}

/// Identity of a TIME-WAIT entry across two samples: its 4-tuple and cookie (a port reused
/// within the interval gets a new cookie).
type EntryKey = (Endpoint, Option<Endpoint>, Option<u64>);

pub(super) fn entry_key(s: &Socket) -> EntryKey {
    (s.local.clone(), s.remote.clone(), s.cookie)
}

/// Listeners: (address, port), deduplicated (SO_REUSEPORT groups list one socket each), sorted
/// by port so that [`listener_of`] finds a port's listeners by binary search (it runs once per
/// TCP socket: a linear search over a host's thousands of listeners was most of the exporter's
/// port analysis).
pub(super) fn listeners(snap: &Snapshot) -> Vec<(IpAddr, u16)> {
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
pub(super) fn listener_of(
    listeners: &[(IpAddr, u16)],
    local: (IpAddr, u16),
) -> Option<(IpAddr, u16)> {
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

pub(super) fn delta(
    counters: Option<(&CounterSet, &CounterSet)>,
    group: &str,
    name: &str,
) -> Option<i64> {
    let (a, b) = counters?;
    a.change(b, group, name)?.delta()
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
    let earlier_tw: Option<FxHashSet<EntryKey>> = input.earlier.map(|e| {
        e.sockets
            .iter()
            .filter(|s| s.proto == Proto::Tcp && s.state == State::TimeWait)
            .map(entry_key)
            .collect()
    });

    #[derive(Default)]
    struct Acc {
        count: u32,
        /// By state, named when the destination is made (a name per socket was a string
        /// compared in a tree per socket).
        states: Vec<(State, u32)>,
        time_wait: u32,
        left: Option<TimeLeft>,
        new_tw: u32,
    }
    let mut dests: FxHashMap<(IpAddr, IpAddr, u16), Acc> = FxHashMap::default();
    #[derive(Default)]
    struct ClientAcc {
        time_wait: u32,
        connections: u32,
        ports: FxHashSet<u16>,
        left: Option<TimeLeft>,
    }
    // Unordered while counting: the servers and their clients are sorted once made.
    let mut servers: FxHashMap<(IpAddr, u16), FxHashMap<IpAddr, ClientAcc>> = FxHashMap::default();
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
        match d.states.iter_mut().find(|(st, _)| *st == s.state) {
            Some((_, n)) => *n += 1,
            None => d.states.push((s.state, 1)),
        }
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
                states: a.states.into_iter().fold(BTreeMap::new(), |mut m, (k, n)| {
                    *m.entry(k.name().into_owned()).or_default() += n;
                    m
                }),
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
