//! Prometheus text exposition format (version 0.0.4) for `sockstat serve`: sockets by protocol,
//! family, state and zone; listen queues; ephemeral-port use per destination (top N); diagnosis
//! findings by rule and severity; the kernel counters that signal trouble; and the exporter's
//! own health.
//!
//! Pure: takes a finished snapshot and the reports derived from it, writes text. Every label
//! value is escaped as the format requires (backslash, double quote, newline), so a process that
//! names itself `a"b\` cannot forge a series. Every family is written whole (HELP, TYPE, then its
//! samples), with samples in a stable order. doc/serve.md lists every metric and its
//! cardinality bound.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use crate::counters::{describe, CounterSet};
use crate::diagnose::{Finding, RuleId, Severity};
use crate::model::{Endpoint, Family, Proto, Snapshot, Socket, State};
use crate::ports::PortsReport;

/// Content-Type of the text format this module writes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Default number of destinations `sockstat_ephemeral_ports_*` reports.
pub const DEFAULT_TOP: usize = 20;

/// What one collection produced, for [`write_snapshot`].
#[derive(Debug, Clone, Copy)]
pub struct MetricsInput<'a> {
    /// The sockets (owners needed only on listening sockets, for the `command` label).
    pub snapshot: &'a Snapshot,
    /// The `zone` label of sockets that carry no zone (the namespace sockstat runs in).
    pub zone: &'a str,
    /// Ephemeral-port analysis of the snapshot; `None` leaves those families out.
    pub ports: Option<&'a PortsReport>,
    /// How many destinations the ephemeral-port families show (largest use first).
    pub top: usize,
    /// Findings of a diagnosis between the previous collection and this one; `None` when there
    /// is no previous collection yet (the family is then left out, not written as zeros).
    pub findings: Option<&'a [Finding]>,
    /// The namespace's kernel counters; only those [`crate::counters::MEANINGS`] marks as
    /// trouble are written.
    pub counters: Option<&'a CounterSet>,
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
}

/// Escapes a label value: `\` → `\\`, `"` → `\"`, newline → `\n` (the exposition format's three
/// escapes; everything else is taken literally, and the text is UTF-8 by construction).
pub fn escape_label(v: &str) -> Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len() + 8);
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

pub(crate) fn header(out: &mut impl Write, name: &str, kind: &str, help: &str) -> io::Result<()> {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} {kind}")
}

pub(crate) fn sample(
    out: &mut impl Write,
    name: &str,
    labels: &[(&str, &str)],
    value: impl std::fmt::Display,
) -> io::Result<()> {
    out.write_all(name.as_bytes())?;
    if !labels.is_empty() {
        out.write_all(b"{")?;
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{k}=\"{}\"", escape_label(v))?;
        }
        out.write_all(b"}")?;
    }
    writeln!(out, " {value}")
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

fn zone_of<'a>(snap: &'a Snapshot, s: &Socket, default: &'a str) -> &'a str {
    snap.zone_of(s).map_or(default, |z| z.name.as_str())
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
    write_sockets(input, out)?;
    write_listeners(input, out)?;
    if let Some(report) = input.ports {
        write_ports(report, input.top, out)?;
    }
    if let Some(findings) = input.findings {
        write_findings(findings, out)?;
    }
    if let Some(counters) = input.counters {
        write_counters(counters, out)?;
    }
    Ok(())
}

fn write_sockets(input: &MetricsInput<'_>, out: &mut impl Write) -> io::Result<()> {
    let snap = input.snapshot;
    let mut by: BTreeMap<(&str, Proto, Family, Cow<'_, str>), u64> = BTreeMap::new();
    for s in &snap.sockets {
        let key = (
            zone_of(snap, s, input.zone),
            s.proto,
            s.family,
            s.state.name(),
        );
        *by.entry(key).or_default() += 1;
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
fn write_listeners(input: &MetricsInput<'_>, out: &mut impl Write) -> io::Result<()> {
    let snap = input.snapshot;
    type Key<'a> = (&'a str, Proto, String, u16, String);
    let mut by: BTreeMap<Key<'_>, (u64, u64)> = BTreeMap::new();
    let mut unknown: BTreeMap<&str, u64> = BTreeMap::new();
    for s in &snap.sockets {
        let Endpoint::Inet { addr, port } = s.local else {
            continue;
        };
        if s.state != State::Listen || s.proto.is_datagram() {
            continue;
        }
        let key = (
            zone_of(snap, s, input.zone),
            s.proto,
            addr.to_string(),
            port,
            commands(snap, s),
        );
        if key.4 == UNKNOWN_COMMAND {
            *unknown.entry(key.0).or_default() += 1;
        }
        let e = by.entry(key).or_default();
        e.0 += u64::from(s.recv_q);
        e.1 += u64::from(s.send_q);
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
        "Listening sockets whose holding process could not be named (command=\"?\"): another \
         user's process without CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, or a kernel socket.",
    )?;
    // Every zone that has listeners gets a sample, zeros included, so an alert sees it fall.
    let zones: BTreeSet<&str> = by
        .keys()
        .map(|k| k.0)
        .chain(std::iter::once(input.zone))
        .collect();
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

fn write_ports(report: &PortsReport, top: usize, out: &mut impl Write) -> io::Result<()> {
    header(
        out,
        "sockstat_ephemeral_ports_usable",
        "gauge",
        "Ports connect() may pick: net.ipv4.ip_local_port_range minus ip_local_reserved_ports.",
    )?;
    sample(
        out,
        "sockstat_ephemeral_ports_usable",
        &[],
        report.range.usable,
    )?;
    header(
        out,
        "sockstat_ephemeral_destinations",
        "gauge",
        "Destinations (local address, remote address, remote port) using ephemeral ports; \
         the per-destination families show the largest ones only.",
    )?;
    sample(
        out,
        "sockstat_ephemeral_destinations",
        &[],
        report.destinations.len(),
    )?;
    let mut dests: Vec<_> = report.destinations.iter().collect();
    dests.sort_by(|a, b| {
        b.count.cmp(&a.count).then_with(|| {
            (a.local_address, a.remote_address, a.remote_port).cmp(&(
                b.local_address,
                b.remote_address,
                b.remote_port,
            ))
        })
    });
    dests.truncate(top);
    let rows: Vec<_> = dests
        .iter()
        .map(|d| {
            (
                d.local_address.to_string(),
                d.remote_address.to_string(),
                d.remote_port.to_string(),
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
        for (local, remote, port, d) in &rows {
            let labels = [
                ("local_address", local.as_str()),
                ("remote_address", remote.as_str()),
                ("remote_port", port.as_str()),
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

/// Every rule × severity, zeros included, so an alert on a series sees it fall back to 0.
fn write_findings(findings: &[Finding], out: &mut impl Write) -> io::Result<()> {
    let mut by: BTreeMap<(RuleId, Severity), u64> = BTreeMap::new();
    for f in findings {
        *by.entry((f.rule, f.severity)).or_default() += 1;
    }
    header(
        out,
        "sockstat_findings",
        "gauge",
        "Diagnosis findings by rule and severity, between the previous scrape's collection and \
         this one (doc/diagnostics.md).",
    )?;
    for rule in RuleId::ALL {
        for sev in [Severity::Info, Severity::Warning, Severity::Critical] {
            let n = by.get(&(rule, sev)).copied().unwrap_or(0);
            sample(
                out,
                "sockstat_findings",
                &[("rule", rule.id()), ("severity", sev.name())],
                n,
            )?;
        }
    }
    Ok(())
}

fn write_counters(counters: &CounterSet, out: &mut impl Write) -> io::Result<()> {
    header(
        out,
        "sockstat_kernel_trouble_total",
        "counter",
        "Kernel TCP/IP counters whose rise signals trouble (drops, overflows, timeouts, PAWS \
         rejects), since boot or namespace creation; see 'sockstat counters'.",
    )?;
    for (name, value) in counters.iter() {
        let trouble = describe(&name.group, &name.name).is_some_and(|m| m.trouble && !m.gauge);
        if trouble {
            sample(
                out,
                "sockstat_kernel_trouble_total",
                &[("group", &name.group), ("name", &name.name)],
                value,
            )?;
        }
    }
    Ok(())
}

/// Writes the exporter's own families.
pub fn write_self(m: &SelfMetrics, out: &mut impl Write) -> io::Result<()> {
    let gauges: [(&str, &str, Float); 4] = [
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

    fn input(snap: &Snapshot) -> MetricsInput<'_> {
        MetricsInput {
            snapshot: snap,
            zone: "global",
            ports: None,
            top: DEFAULT_TOP,
            findings: None,
            counters: None,
        }
    }

    #[test]
    fn escapes_the_three_characters_the_format_names() {
        assert_eq!(escape_label("nginx"), "nginx");
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape_label("tab\tok"), "tab\tok");
    }

    #[test]
    fn sockets_are_counted_by_labels() {
        let snap = snapshot(b"nginx");
        let text = render(&input(&snap));
        assert!(text.contains(
            "sockstat_sockets{proto=\"tcp\",family=\"inet\",state=\"LISTEN\",zone=\"global\"} 2\n"
        ));
        assert!(text.contains(
            "sockstat_sockets{proto=\"udp\",family=\"inet\",state=\"UNCONN\",zone=\"global\"} 1\n"
        ));
    }

    #[test]
    fn reuseport_listeners_are_summed_and_datagram_sockets_left_out() {
        let snap = snapshot(b"nginx");
        let text = render(&input(&snap));
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
        assert!(render(&input(&snap))
            .contains("sockstat_listeners_command_unknown{zone=\"global\"} 0\n"));
        // The sshd listener's holder could not be read; one of nginx's two has an owner whose
        // process record is gone.
        snap.sockets[2].owners.clear();
        snap.sockets[2].owners_status = OwnersStatus::Hidden;
        snap.sockets[1].owners = vec![Owner { pid: 99, fd: 4 }];
        let text = render(&input(&snap));
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

    #[test]
    fn a_hostile_command_name_cannot_forge_a_series() {
        let snap = snapshot(b"x\"} 1\nevil{a=\"\\");
        let text = render(&input(&snap));
        assert!(
            text.contains("command=\"x\\\"} 1\\nevil{a=\\\"\\\\\""),
            "{text}"
        );
        assert!(!text.lines().any(|l| l.starts_with("evil")), "{text}");
    }

    #[test]
    fn findings_cover_every_rule_and_severity_and_are_absent_before_two_samples() {
        let snap = snapshot(b"x");
        assert!(!render(&input(&snap)).contains("sockstat_findings"));
        let mut i = input(&snap);
        i.findings = Some(&[]);
        let text = render(&i);
        let n = text
            .lines()
            .filter(|l| l.starts_with("sockstat_findings{"))
            .count();
        assert_eq!(n, RuleId::ALL.len() * 3);
        assert!(
            text.contains("sockstat_findings{rule=\"listen-overflow\",severity=\"critical\"} 0\n")
        );
    }

    #[test]
    fn only_trouble_counters_are_written() {
        let set =
            CounterSet::from_values([("TcpExt", "ListenOverflows", 5), ("Tcp", "ActiveOpens", 9)]);
        let snap = snapshot(b"x");
        let mut i = input(&snap);
        i.counters = Some(&set);
        let text = render(&i);
        assert!(text.contains(
            "sockstat_kernel_trouble_total{group=\"TcpExt\",name=\"ListenOverflows\"} 5\n"
        ));
        assert!(!text.contains("ActiveOpens"));
    }

    #[test]
    fn self_metrics_are_written() {
        let mut v = Vec::new();
        write_self(
            &SelfMetrics {
                up: true,
                scrape_duration_s: 0.25,
                ..SelfMetrics::default()
            },
            &mut v,
        )
        .unwrap();
        let text = String::from_utf8(v).unwrap();
        assert!(text.contains("sockstat_up 1\n"));
        assert!(text.contains("sockstat_scrape_duration_seconds 0.25\n"));
        assert!(text.contains("# TYPE sockstat_owner_scans_total counter\n"));
    }
}
