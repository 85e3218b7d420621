//! Prometheus text exposition format (version 0.0.4) for `sockstat serve`: per zone (network
//! namespace), sockets by protocol, family and state; listen queues; ephemeral-port use (the
//! busiest destinations over every zone); diagnosis findings by rule and severity; the kernel
//! counters that signal trouble; and the exporter's own health.
//!
//! Pure: takes finished zone samples and the reports derived from them, writes text. Every label
//! value is escaped as the format requires (backslash, double quote, newline), so a process that
//! names itself `a"b\` cannot forge a series. Every family is written whole (HELP, TYPE, then its
//! samples), with samples in a stable order. doc/serve.md lists every metric and its
//! cardinality bound.
//!
//! Every per-zone family has a `zone` label. The zone sockstat runs in gets everything it got
//! before zones were exported (every trouble counter, every rule × severity with zeros); each
//! other zone gets the same socket, listener and port families, but only the counters of
//! [`ZONE_COUNTERS`] and only its non-zero findings, so that a node with hundreds of containers
//! stays within a few tens of series per container.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Write};

use crate::counters::{describe, CounterSet};
use crate::diagnose::{Finding, RuleId, Severity};
use crate::events::drops::Drops;
use crate::events::metrics::EventMetrics;
use crate::model::{Endpoint, Family, OwnersStatus, Proto, Snapshot, Socket, State};
use crate::ports::{Destination, PortsReport};
use crate::render::event_metrics::EventZone;
pub use crate::render::exposition::escape_label;
use crate::render::exposition::{header, sample};
use crate::sample::ZoneSample;
use crate::zone::Zone;

/// Content-Type of the text format this module writes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Default number of destinations `sockstat_ephemeral_ports_*` reports.
pub const DEFAULT_TOP: usize = 20;

/// The kernel counters written for a zone other than the one sockstat runs in (which gets every
/// counter `sockstat counters` marks as trouble): those the alert rules and the diagnosis read
/// (listen overflows, retransmissions, TIME-WAIT rejects, timeouts, memory pressure), and the
/// drops a container's owner would page on.
pub const ZONE_COUNTERS: [(&str, &str); 19] = [
    ("Tcp", "InErrs"),
    ("Tcp", "RetransSegs"),
    ("TcpExt", "ListenDrops"),
    ("TcpExt", "ListenOverflows"),
    ("TcpExt", "PAWSTimewait"),
    ("TcpExt", "TCPACKSkippedTimeWait"),
    ("TcpExt", "TCPAbortOnMemory"),
    ("TcpExt", "TCPAbortOnTimeout"),
    ("TcpExt", "TCPBacklogDrop"),
    ("TcpExt", "TCPMemoryPressures"),
    ("TcpExt", "TCPRcvQDrop"),
    ("TcpExt", "TCPReqQFullDrop"),
    ("TcpExt", "TCPSynRetrans"),
    ("TcpExt", "TCPTimeWaitOverflow"),
    ("TcpExt", "TCPTimeouts"),
    ("Udp", "InErrors"),
    ("Udp", "RcvbufErrors"),
    ("Udp6", "InErrors"),
    ("Udp6", "RcvbufErrors"),
];

/// One zone of a collection, for [`write_snapshot`].
#[derive(Debug, Clone, Copy)]
pub struct ZoneMetrics<'a> {
    /// The zone as sampled: its sockets (owners needed only on listening sockets, for the
    /// `command` label) and its counters (`None`: that family is left out for it).
    pub sample: &'a ZoneSample,
    /// Ephemeral-port analysis of the zone; `None` leaves it out of those families.
    pub ports: Option<&'a PortsReport>,
}

/// What one collection produced, for [`write_snapshot`].
#[derive(Debug, Clone, Copy)]
pub struct MetricsInput<'a> {
    /// The zones, in the sample's order.
    pub zones: &'a [ZoneMetrics<'a>],
    /// The zone sockstat runs in, as `-Z` names it (`global` on the host): the label of a zone
    /// sampled without zones, and the zone that gets every trouble counter and every rule ×
    /// severity.
    pub own: &'a Zone,
    /// How many destinations the ephemeral-port families show, over all zones (highest usage
    /// ratio first).
    pub top: usize,
    /// Findings of a diagnosis between the previous collection and this one (each with its
    /// zone when the samples were zoned); `None` when there is no previous collection yet (the
    /// family is then left out, not written as zeros).
    pub findings: Option<&'a [Finding]>,
    /// Connection events summed since the exporter started (`serve --events`), and the host's
    /// dropped packets; `None` leaves those families out.
    pub events: Option<(&'a EventMetrics, Option<&'a Drops>)>,
}

impl<'a> MetricsInput<'a> {
    /// Whether zone `z` is the one sockstat runs in.
    fn is_own(&self, z: &ZoneSample) -> bool {
        match (&z.zone, z.key) {
            (None, _) => true,
            (Some(_), Some(key)) if self.own.netns_inode == Some(key) => true,
            (Some(zone), _) => zone == self.own,
        }
    }

    /// The `zone` label of each zone: its name, or, when several zones share a name (an
    /// `ip netns` called like a container), its namespace inode for all but the zone sockstat
    /// runs in (`-z` takes either).
    fn labels(&self) -> Vec<Cow<'a, str>> {
        let own = self.own;
        let name = |z: &ZoneMetrics<'a>| -> &'a str {
            match &z.sample.zone {
                Some(zone) => zone.name.as_str(),
                None => own.name.as_str(),
            }
        };
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for z in self.zones {
            *seen.entry(name(z)).or_default() += 1;
        }
        self.zones
            .iter()
            .map(|z| {
                let n = name(z);
                if seen[n] > 1 && !self.is_own(z.sample) {
                    let id = z
                        .sample
                        .zone
                        .as_ref()
                        .and_then(|zone| zone.netns_inode)
                        .or(z.sample.key);
                    if let Some(id) = id {
                        return Cow::Owned(id.to_string());
                    }
                }
                Cow::Borrowed(n)
            })
            .collect()
    }
}

/// The exporter's own health, for [`write_self`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SelfMetrics {
    /// The metrics served come from a successful collection (false: it failed, or none has
    /// finished yet).
    pub up: bool,
    /// Seconds this scrape took, waiting for a fresh collection included.
    pub scrape_duration_s: f64,
    /// Seconds since the collection served was taken (0 for a fresh one).
    pub snapshot_age_s: f64,
    /// Seconds the collection served took.
    pub collect_duration_s: f64,
    /// Scrapes answered from an earlier collection because a fresh one exceeded the budget.
    pub budget_exceeded_total: u64,
    /// Full owner scans of /proc run since start.
    pub owner_scans_total: u64,
    /// Zones (network namespaces) in the collection served.
    pub zones: usize,
}

/// A float as the format spells it (`NaN`, `+Inf`, or the shortest decimal).
struct Float(f64);

impl std::fmt::Display for Float {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        if v.is_nan() {
            f.write_str("NaN")
        } else if v.is_infinite() {
            f.write_str(if v > 0.0 { "+Inf" } else { "-Inf" })
        } else {
            write!(f, "{v}")
        }
    }
}

/// The `command` label of a listener no holder of which could be named.
pub const UNKNOWN_COMMAND: &str = "?";

/// The holders' distinct command names, sorted, joined with `,`; [`UNKNOWN_COMMAND`] when none
/// is known (no process the collector could read holds it: another user's process without the
/// privilege to read its file descriptors, or a socket held by the kernel only).
fn commands(snap: &Snapshot, s: &Socket) -> String {
    let names: BTreeSet<Cow<'_, str>> = s
        .owners
        .iter()
        .filter_map(|o| snap.process(o.pid)?.command.as_ref())
        .map(|c| c.to_string_lossy())
        .collect();
    if names.is_empty() {
        return UNKNOWN_COMMAND.to_string();
    }
    names.into_iter().collect::<Vec<_>>().join(",")
}

/// Writes every family derived from one collection.
pub fn write_snapshot(input: &MetricsInput<'_>, out: &mut impl Write) -> io::Result<()> {
    let labels = input.labels();
    write_sockets(input, &labels, out)?;
    write_listeners(input, &labels, out)?;
    if input.zones.iter().any(|z| z.ports.is_some()) {
        write_ports(input, &labels, out)?;
    }
    if let Some(findings) = input.findings {
        write_findings(input, &labels, findings, out)?;
    }
    if input.zones.iter().any(|z| z.sample.counters.is_some()) {
        write_counters(input, &labels, out)?;
    }
    if let Some((events, drops)) = input.events {
        let zones: Vec<EventZone<'_>> = input
            .zones
            .iter()
            .zip(&labels)
            .map(|(z, label)| EventZone {
                label,
                netns: z
                    .sample
                    .zone
                    .as_ref()
                    .and_then(|z| z.netns_inode)
                    .or(z.sample.key),
                own: input.is_own(z.sample),
            })
            .collect();
        super::event_metrics::write(events, &zones, drops, out)?;
    }
    Ok(())
}

fn write_sockets(
    input: &MetricsInput<'_>,
    labels: &[Cow<'_, str>],
    out: &mut impl Write,
) -> io::Result<()> {
    let mut by: BTreeMap<(&str, Proto, Family, Cow<'_, str>), u64> = BTreeMap::new();
    for (z, zone) in input.zones.iter().zip(labels) {
        for s in &z.sample.snapshot.sockets {
            let key = (zone.as_ref(), s.proto, s.family, s.state.name());
            *by.entry(key).or_default() += 1;
        }
    }
    header(
        out,
        "sockstat_sockets",
        "gauge",
        "Sockets by protocol, address family, state and zone.",
    )?;
    for ((zone, proto, family, state), n) in &by {
        sample(
            out,
            "sockstat_sockets",
            &[
                ("proto", proto.name_in(*family)),
                ("family", family.name()),
                ("state", state),
                ("zone", zone),
            ],
            n,
        )?;
    }
    Ok(())
}

/// Listening inet sockets (TCP, SCTP, MPTCP in LISTEN): accept queue and backlog. Sockets with
/// the same labels (an SO_REUSEPORT group, one listener per worker) are summed into one series.
fn write_listeners(
    input: &MetricsInput<'_>,
    labels: &[Cow<'_, str>],
    out: &mut impl Write,
) -> io::Result<()> {
    type Key<'a> = (&'a str, Proto, String, u16, String);
    let mut by: BTreeMap<Key<'_>, (u64, u64)> = BTreeMap::new();
    let mut unknown: BTreeMap<&str, u64> = BTreeMap::new();
    // Every zone that has listeners gets a sample, zeros included, so an alert sees it fall;
    // the zone sockstat runs in always does.
    let mut zones: BTreeSet<&str> = BTreeSet::new();
    for (z, zone) in input.zones.iter().zip(labels) {
        let snap = &z.sample.snapshot;
        if input.is_own(z.sample) {
            zones.insert(zone);
        }
        for s in &snap.sockets {
            let Endpoint::Inet { addr, port } = s.local else {
                continue;
            };
            if s.state != State::Listen || s.proto.is_datagram() {
                continue;
            }
            let key = (
                zone.as_ref(),
                s.proto,
                addr.to_string(),
                port,
                commands(snap, s),
            );
            zones.insert(zone);
            // Not every holder named: none could be (`?`), or a process that could not be
            // read may hold it besides those named (`partial`, the listing's `?` row).
            if key.4 == UNKNOWN_COMMAND || s.owners_status == OwnersStatus::Partial {
                *unknown.entry(key.0).or_default() += 1;
            }
            let e = by.entry(key).or_default();
            e.0 += u64::from(s.recv_q);
            e.1 += u64::from(s.send_q);
        }
    }
    for (name, help, pick) in [
        (
            "sockstat_listen_queue",
            "Connections waiting in the accept queue of a listening socket (summed over sockets \
             with the same labels).",
            0,
        ),
        (
            "sockstat_listen_backlog",
            "Accept queue limit of a listening socket: min(listen() backlog, net.core.somaxconn) \
             (summed over sockets with the same labels).",
            1,
        ),
    ] {
        header(out, name, "gauge", help)?;
        for ((zone, proto, address, port, command), v) in &by {
            let port = port.to_string();
            sample(
                out,
                name,
                &[
                    ("proto", proto.name()),
                    ("address", address),
                    ("port", &port),
                    ("command", command),
                    ("zone", zone),
                ],
                if pick == 0 { v.0 } else { v.1 },
            )?;
        }
    }
    header(
        out,
        "sockstat_listeners_command_unknown",
        "gauge",
        "Listening sockets not every holder of which could be named: none could (command=\"?\"), \
         or a process that could not be read may hold it besides those named (owners_status \
         partial); without CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, other users' processes \
         cannot be read.",
    )?;
    for zone in zones {
        let n = unknown.get(zone).copied().unwrap_or(0);
        sample(
            out,
            "sockstat_listeners_command_unknown",
            &[("zone", zone)],
            n,
        )?;
    }
    Ok(())
}

fn write_ports(
    input: &MetricsInput<'_>,
    labels: &[Cow<'_, str>],
    out: &mut impl Write,
) -> io::Result<()> {
    let reports: Vec<(&str, &PortsReport)> = input
        .zones
        .iter()
        .zip(labels)
        .filter_map(|(z, zone)| Some((zone.as_ref(), z.ports?)))
        .collect();
    header(
        out,
        "sockstat_ephemeral_ports_usable",
        "gauge",
        "Ports connect() may pick: net.ipv4.ip_local_port_range minus ip_local_reserved_ports.",
    )?;
    for (zone, r) in &reports {
        sample(
            out,
            "sockstat_ephemeral_ports_usable",
            &[("zone", zone)],
            r.range.usable,
        )?;
    }
    header(
        out,
        "sockstat_ephemeral_destinations",
        "gauge",
        "Destinations (local address, remote address, remote port) using ephemeral ports; \
         the per-destination families show the busiest ones over all zones only.",
    )?;
    for (zone, r) in &reports {
        sample(
            out,
            "sockstat_ephemeral_destinations",
            &[("zone", zone)],
            r.destinations.len(),
        )?;
    }
    // The busiest destinations over every zone: by share of the zone's usable range (what
    // exhausts it; zones may have different ranges), then by count, then by zone and address.
    let mut dests: Vec<(&str, &Destination)> = reports
        .iter()
        .flat_map(|(zone, r)| r.destinations.iter().map(move |d| (*zone, d)))
        .collect();
    dests.sort_by(|(za, a), (zb, b)| {
        b.usage
            .total_cmp(&a.usage)
            .then_with(|| b.count.cmp(&a.count))
            .then_with(|| {
                (za, a.local_address, a.remote_address, a.remote_port).cmp(&(
                    zb,
                    b.local_address,
                    b.remote_address,
                    b.remote_port,
                ))
            })
    });
    dests.truncate(input.top);
    let rows: Vec<_> = dests
        .iter()
        .map(|(zone, d)| {
            (
                d.local_address.to_string(),
                d.remote_address.to_string(),
                d.remote_port.to_string(),
                *zone,
                d,
            )
        })
        .collect();
    for (name, help, ratio) in [
        (
            "sockstat_ephemeral_ports_used",
            "Ephemeral local ports used towards one destination, any state (TIME_WAIT included).",
            false,
        ),
        (
            "sockstat_ephemeral_ports_usage_ratio",
            "Ephemeral ports used towards one destination over the usable range (1 = exhausted).",
            true,
        ),
    ] {
        header(out, name, "gauge", help)?;
        for (local, remote, port, zone, d) in &rows {
            let labels = [
                ("local_address", local.as_str()),
                ("remote_address", remote.as_str()),
                ("remote_port", port.as_str()),
                ("zone", zone),
            ];
            if ratio {
                sample(out, name, &labels, Float(d.usage))?;
            } else {
                sample(out, name, &labels, d.count)?;
            }
        }
    }
    Ok(())
}

/// Findings by zone, rule and severity. The zone sockstat runs in gets every rule × severity,
/// zeros included, so an alert on a series sees it fall back to 0; other zones get only what
/// was found (a series that stops appearing is stale to Prometheus, which ends an alert too).
fn write_findings(
    input: &MetricsInput<'_>,
    labels: &[Cow<'_, str>],
    findings: &[Finding],
    out: &mut impl Write,
) -> io::Result<()> {
    let mut by: BTreeMap<(&str, RuleId, Severity), u64> = BTreeMap::new();
    for z in input
        .zones
        .iter()
        .zip(labels)
        .filter(|(z, _)| input.is_own(z.sample))
    {
        for rule in RuleId::ALL {
            for sev in [Severity::Info, Severity::Warning, Severity::Critical] {
                by.insert((z.1.as_ref(), rule, sev), 0);
            }
        }
    }
    for f in findings {
        // A finding names its zone when the samples were zoned; otherwise it is the only one.
        let at = input.zones.iter().position(|z| match &f.zone {
            Some(fz) => z.sample.zone.as_ref() == Some(fz),
            None => input.is_own(z.sample),
        });
        // Every diagnosis finding is of a rule; a port finding of none is not a diagnosis's.
        if let (Some(i), Some(rule)) = (at, f.rule) {
            *by.entry((labels[i].as_ref(), rule, f.severity))
                .or_default() += 1;
        }
    }
    header(
        out,
        "sockstat_findings",
        "gauge",
        "Diagnosis findings by rule and severity, between the previous scrape's collection and \
         this one (doc/diagnose.md).",
    )?;
    for ((zone, rule, sev), n) in &by {
        sample(
            out,
            "sockstat_findings",
            &[
                ("rule", rule.id()),
                ("severity", sev.name()),
                ("zone", zone),
            ],
            n,
        )?;
    }
    Ok(())
}

fn write_counters(
    input: &MetricsInput<'_>,
    labels: &[Cow<'_, str>],
    out: &mut impl Write,
) -> io::Result<()> {
    header(
        out,
        "sockstat_kernel_trouble_total",
        "counter",
        "Kernel TCP/IP counters whose rise signals trouble (drops, overflows, timeouts, PAWS \
         rejects), since boot or namespace creation; see 'sockstat counters'.",
    )?;
    let mut zones: Vec<(&str, &ZoneMetrics<'_>)> = input
        .zones
        .iter()
        .zip(labels)
        .map(|(z, l)| (l.as_ref(), z))
        .collect();
    zones.sort_by_key(|(l, _)| *l);
    for (zone, z) in zones {
        let Some(counters) = &z.sample.counters else {
            continue;
        };
        if input.is_own(z.sample) {
            for (name, value) in counters.iter() {
                let trouble =
                    describe(&name.group, &name.name).is_some_and(|m| m.trouble && !m.gauge);
                if trouble {
                    sample(
                        out,
                        "sockstat_kernel_trouble_total",
                        &[("group", &name.group), ("name", &name.name), ("zone", zone)],
                        value,
                    )?;
                }
            }
        } else {
            write_zone_counters(counters, zone, out)?;
        }
    }
    Ok(())
}

fn write_zone_counters(counters: &CounterSet, zone: &str, out: &mut impl Write) -> io::Result<()> {
    let mut names = ZONE_COUNTERS;
    names.sort_unstable();
    for (group, name) in names {
        if let Some(value) = counters.get(group, name) {
            sample(
                out,
                "sockstat_kernel_trouble_total",
                &[("group", group), ("name", name), ("zone", zone)],
                value,
            )?;
        }
    }
    Ok(())
}

/// Writes the exporter's own families.
pub fn write_self(m: &SelfMetrics, out: &mut impl Write) -> io::Result<()> {
    let gauges: [(&str, &str, Float); 5] = [
        (
            "sockstat_up",
            "1 when the metrics come from a successful collection, 0 when collecting failed or \
             none has finished yet.",
            Float(if m.up { 1.0 } else { 0.0 }),
        ),
        (
            "sockstat_scrape_duration_seconds",
            "Time this scrape took, waiting for a fresh collection (at most the budget) included.",
            Float(m.scrape_duration_s),
        ),
        (
            "sockstat_snapshot_age_seconds",
            "Age of the collection served: 0 when fresh, more when a fresh one exceeded the \
             scrape budget and an earlier one was served.",
            Float(m.snapshot_age_s),
        ),
        (
            "sockstat_collect_duration_seconds",
            "Time the collection served took (socket dump, owner scan when needed, counters, \
             analysis).",
            Float(m.collect_duration_s),
        ),
        (
            "sockstat_zones",
            "Zones (network namespaces) in the collection served: 1 without -Z.",
            Float(m.zones as f64),
        ),
    ];
    for (name, help, v) in gauges {
        header(out, name, "gauge", help)?;
        sample(out, name, &[], v)?;
    }
    for (name, help, v) in [
        (
            "sockstat_scrape_budget_exceeded_total",
            "Scrapes answered from an earlier collection because a fresh one exceeded the budget.",
            m.budget_exceeded_total,
        ),
        (
            "sockstat_owner_scans_total",
            "Full /proc owner scans run (only when a listening socket appears that the owner \
             cache does not know, or the cache is older than its refresh period).",
            m.owner_scans_total,
        ),
    ] {
        header(out, name, "counter", help)?;
        sample(out, name, &[], v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Subject;
    use crate::model::{Family, Owner, OwnersStatus, Process, RawString, SockType};

    fn sock(proto: Proto, state: State, addr: &str, port: u16, q: (u32, u32)) -> Socket {
        Socket {
            id: Some(u64::from(port) + 1000),
            cookie: Some(u64::from(port)),
            recv_q: q.0,
            send_q: q.1,
            uid: Some(0),
            owners_status: OwnersStatus::Known,
            owners: vec![Owner { pid: 7, fd: 3 }],
            ..Socket::new(
                proto,
                if addr.contains(':') {
                    Family::Inet6
                } else {
                    Family::Inet
                },
                SockType::Stream,
                state,
                Endpoint::Inet {
                    addr: addr.parse().unwrap(),
                    port,
                },
                None,
            )
        }
    }

    fn snapshot(command: &[u8]) -> Snapshot {
        let mut snap = Snapshot {
            sockets: vec![
                sock(Proto::Tcp, State::Listen, "0.0.0.0", 80, (3, 128)),
                sock(Proto::Tcp, State::Listen, "0.0.0.0", 80, (1, 128)),
                sock(Proto::Tcp, State::Listen, "::1", 22, (0, 4096)),
                sock(Proto::Tcp, State::Established, "10.0.0.1", 40000, (0, 0)),
                sock(Proto::Udp, State::Unconn, "0.0.0.0", 53, (0, 0)),
            ],
            ..Snapshot::default()
        };
        snap.processes.insert(
            7,
            Process {
                pid: 7,
                command: Some(RawString::new(command)),
                uid: Some(0),
                args: None,
            },
        );
        snap
    }

    fn render(input: &MetricsInput<'_>) -> String {
        let mut v = Vec::new();
        write_snapshot(input, &mut v).unwrap();
        String::from_utf8(v).unwrap()
    }

    fn zone(name: &str, inode: u64, kind: crate::zone::ZoneKind) -> Zone {
        Zone {
            name: name.into(),
            kind,
            netns_inode: Some(inode),
            container_id: None,
            runtime: None,
            pod: None,
        }
    }

    fn global() -> Zone {
        zone("global", 1, crate::zone::ZoneKind::Global)
    }

    /// One zone sampled without zones (no `-Z`): the namespace sockstat runs in.
    fn unzoned(snap: Snapshot) -> ZoneSample {
        ZoneSample {
            snapshot: snap,
            ..ZoneSample::default()
        }
    }

    /// A zone of a zoned sample.
    fn zoned(z: Zone, snap: Snapshot) -> ZoneSample {
        ZoneSample {
            key: z.netns_inode,
            zone: Some(z),
            snapshot: snap,
            ..ZoneSample::default()
        }
    }

    /// Renders one zone sampled without zones, as `sockstat serve` without -Z does.
    fn render_one(z: &ZoneSample, findings: Option<&[Finding]>) -> String {
        let own = global();
        render(&MetricsInput {
            zones: &[ZoneMetrics {
                sample: z,
                ports: None,
            }],
            own: &own,
            top: DEFAULT_TOP,
            findings,
            events: None,
        })
    }

    fn finding(rule: RuleId, severity: Severity, zone: Option<Zone>) -> Finding {
        Finding {
            rule: Some(rule),
            code: rule.id(),
            subject: Subject::Namespace,
            severity,
            socket: None,
            summary: String::new(),
            evidence: crate::diagnose::Evidence(vec![]),
            advice: String::new(),
            count: None,
            confidence: crate::diagnose::Confidence::counted("a test finding"),
            zone,
        }
    }

    /// Series of `family` (lines starting with `family{`).
    fn series<'t>(text: &'t str, family: &str) -> Vec<&'t str> {
        let p = format!("{family}{{");
        text.lines().filter(|l| l.starts_with(&p)).collect()
    }

    #[test]
    fn escapes_the_three_characters_the_format_names() {
        assert_eq!(escape_label("nginx"), "nginx");
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape_label("tab\tok"), "tab\tok");
    }

    #[test]
    fn sockets_are_counted_by_labels() {
        let text = render_one(&unzoned(snapshot(b"nginx")), None);
        assert!(text.contains(
            "sockstat_sockets{proto=\"tcp\",family=\"inet\",state=\"LISTEN\",zone=\"global\"} 2\n"
        ));
        assert!(text.contains(
            "sockstat_sockets{proto=\"udp\",family=\"inet\",state=\"UNCONN\",zone=\"global\"} 1\n"
        ));
    }

    #[test]
    fn reuseport_listeners_are_summed_and_datagram_sockets_left_out() {
        let text = render_one(&unzoned(snapshot(b"nginx")), None);
        let l = "{proto=\"tcp\",address=\"0.0.0.0\",port=\"80\",command=\"nginx\",zone=\"global\"}";
        assert!(
            text.contains(&format!("sockstat_listen_queue{l} 4\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("sockstat_listen_backlog{l} 256\n")),
            "{text}"
        );
        assert!(text.contains("address=\"::1\",port=\"22\""));
        assert!(!text.contains("port=\"53\""));
    }

    #[test]
    fn a_listener_whose_holder_is_unknown_says_so_and_is_counted() {
        let mut snap = snapshot(b"nginx");
        assert!(render_one(&unzoned(snap.clone()), None)
            .contains("sockstat_listeners_command_unknown{zone=\"global\"} 0\n"));
        // The sshd listener's holder could not be read; one of nginx's two has an owner whose
        // process record is gone.
        snap.sockets[2].owners.clear();
        snap.sockets[2].owners_status = OwnersStatus::Hidden;
        snap.sockets[1].owners = vec![Owner { pid: 99, fd: 4 }];
        let text = render_one(&unzoned(snap), None);
        assert!(
            text.contains("sockstat_listen_queue{proto=\"tcp\",address=\"::1\",port=\"22\",command=\"?\",zone=\"global\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("address=\"0.0.0.0\",port=\"80\",command=\"?\""),
            "{text}"
        );
        assert!(
            text.contains("sockstat_listeners_command_unknown{zone=\"global\"} 2\n"),
            "{text}"
        );
        assert!(!text.contains("command=\"\""), "{text}");
    }

    /// Issue 31: a listener `partial` to the scan (its named holders may not be all) is
    /// labelled with the holders named, and counted among those not every holder of which
    /// could be named, as the listing's `?` row after its holders says.
    #[test]
    fn a_partial_listener_is_named_and_counted() {
        let mut snap = snapshot(b"nginx");
        snap.sockets[2].owners_status = OwnersStatus::Partial;
        let text = render_one(&unzoned(snap), None);
        assert!(
            text.contains("address=\"::1\",port=\"22\",command=\"nginx\""),
            "{text}"
        );
        assert!(
            text.contains("sockstat_listeners_command_unknown{zone=\"global\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn a_hostile_command_name_cannot_forge_a_series() {
        let text = render_one(&unzoned(snapshot(b"x\"} 1\nevil{a=\"\\")), None);
        assert!(
            text.contains("command=\"x\\\"} 1\\nevil{a=\\\"\\\\\""),
            "{text}"
        );
        assert!(!text.lines().any(|l| l.starts_with("evil")), "{text}");
    }

    #[test]
    fn findings_cover_every_rule_and_severity_and_are_absent_before_two_samples() {
        let z = unzoned(snapshot(b"x"));
        assert!(!render_one(&z, None).contains("sockstat_findings"));
        let text = render_one(&z, Some(&[]));
        assert_eq!(
            series(&text, "sockstat_findings").len(),
            RuleId::ALL.len() * 3
        );
        assert!(text.contains(
            "sockstat_findings{rule=\"listen-overflow\",severity=\"critical\",zone=\"global\"} 0\n"
        ));
    }

    #[test]
    fn only_trouble_counters_are_written() {
        let set =
            CounterSet::from_values([("TcpExt", "ListenOverflows", 5), ("Tcp", "ActiveOpens", 9)]);
        let mut z = unzoned(snapshot(b"x"));
        z.counters = Some(set);
        let text = render_one(&z, None);
        assert!(text.contains(
            "sockstat_kernel_trouble_total{group=\"TcpExt\",name=\"ListenOverflows\",zone=\"global\"} 5\n"
        ));
        assert!(!text.contains("ActiveOpens"));
    }

    #[test]
    fn every_per_zone_counter_is_a_trouble_counter() {
        for (group, name) in ZONE_COUNTERS {
            let m = describe(group, name).unwrap_or_else(|| panic!("{group}{name} unknown"));
            assert!(m.trouble && !m.gauge, "{group}{name}");
        }
    }

    /// Three zones: the host (where sockstat runs), a container and an `ip netns`, each with a
    /// listener on port 80 held by a different command, counters, port use and findings.
    struct Node {
        zones: Vec<ZoneSample>,
        reports: Vec<PortsReport>,
    }

    fn node() -> Node {
        use crate::ports::tests::sock as psock;
        use crate::zone::ZoneKind;
        let listener = |command: &[u8]| {
            let mut s = snapshot(command);
            s.sockets.truncate(1);
            s
        };
        // `web-1` has 90 of its 100 ports towards 192.0.2.9:443, the host 900 of its 28,232
        // towards 198.51.100.7:5432 (more sockets, a smaller share).
        let mut host = zoned(global(), listener(b"nginx"));
        for p in 0..900u16 {
            host.snapshot.sockets.push(psock(
                State::Established,
                ("10.0.0.1", 32768 + p),
                Some(("198.51.100.7", 5432)),
            ));
        }
        host.sysctls.ip_local_port_range = Some((32768, 60999));
        let mut web = zoned(
            zone("web-1", 4026532001, ZoneKind::Docker),
            listener(b"gunicorn"),
        );
        for p in 0..90u16 {
            web.snapshot.sockets.push(psock(
                State::TimeWait,
                ("172.17.0.2", 40000 + p),
                Some(("192.0.2.9", 443)),
            ));
        }
        web.sysctls.ip_local_port_range = Some((40000, 40099));
        let lab = zoned(
            zone("lab", 4026532002, ZoneKind::Netns),
            listener(b"python3"),
        );
        let all = CounterSet::from_values([
            ("TcpExt", "ListenOverflows", 5),
            ("TcpExt", "TCPOFODrop", 2),
            ("Tcp", "RetransSegs", 40),
        ]);
        let zones: Vec<ZoneSample> = [host, web, lab]
            .into_iter()
            .map(|mut z| {
                z.counters = Some(all.clone());
                z
            })
            .collect();
        let reports = zones
            .iter()
            .map(|z| crate::ports::analyze_zone(z, None, None, None))
            .collect();
        Node { zones, reports }
    }

    fn render_node(n: &Node, top: usize, findings: Option<&[Finding]>) -> String {
        let zones: Vec<ZoneMetrics<'_>> = n
            .zones
            .iter()
            .zip(&n.reports)
            .map(|(z, r)| ZoneMetrics {
                sample: z,
                ports: Some(r),
            })
            .collect();
        let own = global();
        render(&MetricsInput {
            zones: &zones,
            own: &own,
            top,
            findings,
            events: None,
        })
    }

    /// The exporter does not sort its samples (`Gathering::sorted` off): every family must come
    /// out the same whatever order the sockets are in. The node's zones get listeners sharing a
    /// port under two commands, UDP and TCP listeners, and destinations with equal counts (ties
    /// at the `--top` cut), then are rendered with their sockets reversed, rotated and
    /// interleaved, and the ports analysed again each time.
    #[test]
    fn the_exposition_does_not_depend_on_the_order_of_sockets() {
        use crate::ports::tests::sock as psock;
        let mut n = node();
        let host = &mut n.zones[0].snapshot;
        host.sockets
            .extend(snapshot(b"nginx").sockets.into_iter().skip(1));
        let mut other = sock(Proto::Tcp, State::Listen, "0.0.0.0", 80, (2, 64));
        other.owners = vec![Owner { pid: 8, fd: 4 }];
        host.sockets.push(other);
        host.processes.insert(
            8,
            Process {
                pid: 8,
                command: Some(RawString::new(b"haproxy")),
                uid: Some(0),
                args: None,
            },
        );
        for (i, dest) in ["192.0.2.1", "192.0.2.2", "192.0.2.3"].iter().enumerate() {
            for p in 0..5u16 {
                host.sockets.push(psock(
                    State::Established,
                    ("10.0.0.1", 50000 + 10 * i as u16 + p),
                    Some((dest, 443)),
                ));
            }
        }
        let render_all = |n: &Node| {
            let findings = [finding(RuleId::ListenOverflow, Severity::Critical, None)];
            (
                render_node(n, 2, Some(&findings)),
                render_node(n, DEFAULT_TOP, Some(&findings)),
            )
        };
        let reanalysed = |zones: Vec<ZoneSample>| {
            let reports = zones
                .iter()
                .map(|z| crate::ports::analyze_zone(z, None, None, None))
                .collect();
            Node { zones, reports }
        };
        let want = render_all(&reanalysed(n.zones.clone()));
        assert!(want.1.contains("command=\"haproxy\""), "{}", want.1);
        let orders: [fn(&mut Vec<Socket>); 3] = [
            |v| v.reverse(),
            |v| {
                let k = v.len() / 3;
                v.rotate_left(k)
            },
            |v| {
                let (even, odd): (Vec<_>, Vec<_>) =
                    v.drain(..).enumerate().partition(|(i, _)| i % 2 == 0);
                v.extend(odd.into_iter().chain(even).map(|(_, s)| s));
            },
        ];
        for (k, order) in orders.iter().enumerate() {
            let mut zones = n.zones.clone();
            for z in &mut zones {
                order(&mut z.snapshot.sockets);
            }
            assert_ne!(zones[0].snapshot.sockets, n.zones[0].snapshot.sockets);
            let got = render_all(&reanalysed(zones));
            assert_eq!(got, want, "order {k}");
        }
    }

    #[test]
    fn every_zone_has_its_own_series_with_its_zone_label() {
        let n = node();
        let text = render_node(&n, DEFAULT_TOP, Some(&[]));
        for (zone, command) in [
            ("global", "nginx"),
            ("web-1", "gunicorn"),
            ("lab", "python3"),
        ] {
            let l = format!(
                "{{proto=\"tcp\",address=\"0.0.0.0\",port=\"80\",command=\"{command}\",zone=\"{zone}\"}}"
            );
            assert!(
                text.contains(&format!("sockstat_listen_queue{l} 3\n")),
                "{text}"
            );
            assert!(
                text.contains(&format!(
                    "sockstat_sockets{{proto=\"tcp\",family=\"inet\",state=\"LISTEN\",zone=\"{zone}\"}} 1\n"
                )),
                "{text}"
            );
            assert!(text.contains(&format!(
                "sockstat_listeners_command_unknown{{zone=\"{zone}\"}} 0\n"
            )));
            assert!(text.contains(&format!(
                "sockstat_ephemeral_destinations{{zone=\"{zone}\"}} "
            )));
            assert!(text.contains(&format!(
                "sockstat_kernel_trouble_total{{group=\"TcpExt\",name=\"ListenOverflows\",zone=\"{zone}\"}} 5\n"
            )));
        }
        assert!(text.contains("sockstat_ephemeral_ports_usable{zone=\"web-1\"} 100\n"));
        assert!(text.contains("sockstat_ephemeral_ports_usable{zone=\"global\"} 28232\n"));
        // Every sample of every per-zone family names its zone.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(l.contains(",zone=\"") || l.contains("{zone=\""), "{l}");
        }
    }

    #[test]
    fn other_zones_get_the_per_zone_counters_and_only_the_findings_they_have() {
        let n = node();
        let web = n.zones[1].zone.clone();
        let findings = [
            finding(RuleId::ReceiverNotReading, Severity::Warning, web.clone()),
            finding(RuleId::ReceiverNotReading, Severity::Warning, web),
            finding(RuleId::ListenOverflow, Severity::Critical, Some(global())),
        ];
        let text = render_node(&n, DEFAULT_TOP, Some(&findings));
        let f = series(&text, "sockstat_findings");
        // The host: every rule × severity; web-1: its one non-zero series; lab: none.
        assert_eq!(f.len(), RuleId::ALL.len() * 3 + 1, "{f:#?}");
        assert!(f.contains(
            &"sockstat_findings{rule=\"receiver-not-reading\",severity=\"warning\",zone=\"web-1\"} 2"
        ));
        assert!(f.contains(
            &"sockstat_findings{rule=\"listen-overflow\",severity=\"critical\",zone=\"global\"} 1"
        ));
        assert!(!f.iter().any(|l| l.contains("zone=\"lab\"")), "{f:#?}");
        // TCPOFODrop is a trouble counter, but not a per-zone one: the host has it, the others
        // do not; zeros of the per-zone set are written (RetransSegs is there, ListenDrops not).
        let c = series(&text, "sockstat_kernel_trouble_total");
        assert!(c
            .iter()
            .any(|l| l.contains("TCPOFODrop") && l.contains("zone=\"global\"")));
        assert!(!c
            .iter()
            .any(|l| l.contains("TCPOFODrop") && !l.contains("zone=\"global\"")));
        assert!(c.contains(
            &"sockstat_kernel_trouble_total{group=\"Tcp\",name=\"RetransSegs\",zone=\"lab\"} 40"
        ));
        assert!(!c.iter().any(|l| l.contains("ListenDrops")), "{c:#?}");
    }

    #[test]
    fn the_busiest_destinations_are_chosen_over_every_zone_by_share_of_the_range() {
        let n = node();
        let text = render_node(&n, 1, None);
        // web-1's 90 of 100 outrank the host's 900 of 28,232.
        assert_eq!(
            series(&text, "sockstat_ephemeral_ports_used"),
            vec!["sockstat_ephemeral_ports_used{local_address=\"172.17.0.2\",remote_address=\"192.0.2.9\",remote_port=\"443\",zone=\"web-1\"} 90"]
        );
        assert_eq!(
            series(&text, "sockstat_ephemeral_ports_usage_ratio"),
            vec!["sockstat_ephemeral_ports_usage_ratio{local_address=\"172.17.0.2\",remote_address=\"192.0.2.9\",remote_port=\"443\",zone=\"web-1\"} 0.9"]
        );
        let text = render_node(&n, DEFAULT_TOP, None);
        assert_eq!(series(&text, "sockstat_ephemeral_ports_used").len(), 2);
    }

    #[test]
    fn zones_that_share_a_name_are_told_apart_by_their_namespace_inode() {
        use crate::zone::ZoneKind;
        let mut n = node();
        // An `ip netns` called "global", and a second "web-1".
        n.zones[2].zone = Some(zone("global", 4026532002, ZoneKind::Netns));
        n.zones.push(zoned(
            zone("web-1", 4026532003, ZoneKind::Netns),
            snapshot(b"redis"),
        ));
        n.reports
            .push(crate::ports::analyze_zone(&n.zones[3], None, None, None));
        let text = render_node(&n, DEFAULT_TOP, None);
        for l in [
            "command=\"nginx\",zone=\"global\"}",
            "command=\"python3\",zone=\"4026532002\"}",
            "command=\"gunicorn\",zone=\"4026532001\"}",
            "command=\"redis\",zone=\"4026532003\"}",
        ] {
            assert!(text.contains(l), "no {l} in\n{text}");
        }
    }

    #[test]
    fn self_metrics_are_written() {
        let mut v = Vec::new();
        write_self(
            &SelfMetrics {
                up: true,
                scrape_duration_s: 0.25,
                zones: 3,
                ..SelfMetrics::default()
            },
            &mut v,
        )
        .unwrap();
        let text = String::from_utf8(v).unwrap();
        assert!(text.contains("sockstat_up 1\n"));
        assert!(text.contains("sockstat_scrape_duration_seconds 0.25\n"));
        assert!(text.contains("sockstat_zones 3\n"));
        assert!(text.contains("# TYPE sockstat_owner_scans_total counter\n"));
    }
}
