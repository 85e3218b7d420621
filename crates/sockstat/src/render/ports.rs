//! `sockstat ports`: the port and TIME-WAIT report as a table or JSON. Reads a finished
//! [`PortsReport`]; writes to any `io::Write` and nothing else.

use std::io::{self, Write};

use super::Options;
use crate::model::{Severity, Warning};
use crate::ports::{Finding, PortsReport, TimeLeft, TIME_WAIT_S};
use crate::text::fmt::inet;
use crate::text::sanitize::for_terminal;

/// Version of the ports JSON document.
pub const SCHEMA_VERSION: u32 = 1;

const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const RESET: &str = "\x1b[0m";

fn left(t: Option<TimeLeft>) -> String {
    match t {
        Some(t) => {
            let (a, b) = (t.min_ms.div_ceil(1000), t.max_ms.div_ceil(1000));
            if a == b {
                format!("{a} s")
            } else {
                format!("{a}-{b} s")
            }
        }
        None => "-".into(),
    }
}

fn setting(v: Option<impl ToString>) -> String {
    v.map_or("?".into(), |v| v.to_string())
}

fn columns(out: &mut dyn Write, rows: &[Vec<String>], right: &[bool]) -> io::Result<()> {
    let n = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..n)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let w = widths[i];
            if right.get(i).copied().unwrap_or(false) {
                line.push_str(&format!("{cell:>w$}"));
            } else {
                line.push_str(&format!("{cell:<w$}"));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// The processes that opened connections to each destination during the interval, when
/// connection events named them.
fn write_openers(out: &mut dyn Write, r: &PortsReport) -> io::Result<()> {
    let named: Vec<_> = r
        .destinations
        .iter()
        .filter(|d| d.opened_by.as_ref().is_some_and(|v| !v.is_empty()))
        .collect();
    if named.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "Opened during the interval (connect() calls, from connection events):"
    )?;
    for d in named {
        let who: Vec<String> = d
            .opened_by
            .iter()
            .flatten()
            .map(|o| {
                let mut s = format!(
                    "{}[{}] {}",
                    for_terminal(o.command.as_bytes()),
                    o.pid,
                    o.connections
                );
                if o.failed > 0 {
                    s.push_str(&format!(" ({} failed)", o.failed));
                }
                s
            })
            .collect();
        writeln!(
            out,
            "  {} -> {}: {}",
            d.local_address,
            inet(d.remote_address, d.remote_port),
            who.join(", ")
        )?;
    }
    Ok(())
}

/// Writes the report as text: the range and settings, the destinations, the servers, then the
/// findings with their advice.
pub fn write_table(r: &PortsReport, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let g = &r.range;
    if let Some(z) = &r.zone {
        writeln!(
            out,
            "Zone {} ({})",
            for_terminal(z.name.as_bytes()),
            z.kind.name()
        )?;
    }
    if opts.header {
        writeln!(
            out,
            "Ephemeral ports {}-{}{}: {} usable ({} reserved); one destination sustains {:.1} new \
             connections/s ({} ports / {TIME_WAIT_S} s TIME-WAIT)",
            g.low,
            g.high,
            if g.from_sysctl {
                ""
            } else {
                " (kernel default; sysctl unreadable)"
            },
            g.usable,
            g.reserved,
            g.sustainable_rate_per_s,
            g.usable
        )?;
        let s = &r.settings;
        let t = &r.time_wait;
        let mut tw = format!(
            "TIME-WAIT {} of {} buckets",
            t.count,
            setting(t.max_buckets)
        );
        if let Some(rate) = t.new_per_s {
            tw.push_str(&format!(", {rate:.1} new/s"));
        }
        if let Some(o) = t.overflow_delta {
            tw.push_str(&format!(", overflow +{o}"));
        }
        if let Some(o) = t.recycled_delta {
            tw.push_str(&format!(", reused +{o}"));
        }
        writeln!(
            out,
            "tcp_tw_reuse {}, tcp_tw_reuse_delay {} ms, tcp_timestamps {}; {tw}{}",
            setting(s.tcp_tw_reuse),
            setting(s.tcp_tw_reuse_delay_ms),
            setting(s.tcp_timestamps),
            match r.interval_s {
                Some(i) => format!(" (over {i:.1} s)"),
                None => String::new(),
            }
        )?;
        writeln!(out)?;
    }
    if r.destinations.is_empty() {
        writeln!(out, "No TCP connections from ephemeral ports.")?;
    } else {
        let mut rows = Vec::with_capacity(r.destinations.len() + 1);
        if opts.header {
            rows.push(
                [
                    "LOCAL ADDRESS",
                    "DESTINATION",
                    "PORTS",
                    "USAGE",
                    "TIME-WAIT",
                    "TW LEFT",
                    "NEW TW/S",
                    "STATES",
                ]
                .map(String::from)
                .to_vec(),
            );
        }
        for d in &r.destinations {
            let states: Vec<String> = d.states.iter().map(|(k, v)| format!("{k} {v}")).collect();
            rows.push(vec![
                d.local_address.to_string(),
                inet(d.remote_address, d.remote_port).to_string(),
                d.count.to_string(),
                format!(
                    "{:.0}%{}",
                    d.usage * 100.0,
                    match d.level {
                        Some(Severity::Critical) => "!!",
                        Some(Severity::Warning) => "!",
                        _ => "",
                    }
                ),
                d.time_wait.to_string(),
                left(d.time_wait_left),
                d.new_time_wait_per_s
                    .map_or("-".into(), |x| format!("{x:.1}")),
                states.join(", "),
            ]);
        }
        columns(
            out,
            &rows,
            &[false, false, true, true, true, true, true, false],
        )?;
        write_openers(out, r)?;
    }
    if !r.servers.is_empty() {
        writeln!(out)?;
        let mut rows = Vec::new();
        if opts.header {
            rows.push(
                [
                    "LISTENING PORT",
                    "TIME-WAIT",
                    "CONNS",
                    "CLIENT",
                    "TW",
                    "PORTS",
                    "TW LEFT",
                ]
                .map(String::from)
                .to_vec(),
            );
        }
        for s in &r.servers {
            for (i, c) in s.clients.iter().enumerate() {
                let first = i == 0;
                rows.push(vec![
                    if first {
                        inet(s.local_address, s.local_port).to_string()
                    } else {
                        String::new()
                    },
                    if first {
                        s.time_wait.to_string()
                    } else {
                        String::new()
                    },
                    if first {
                        s.connections.to_string()
                    } else {
                        String::new()
                    },
                    c.address.to_string(),
                    c.time_wait.to_string(),
                    c.ports.to_string(),
                    left(c.time_wait_left),
                ]);
            }
        }
        columns(out, &rows, &[false, true, true, false, true, true, true])?;
        if !r.server_counters.is_empty() {
            let parts: Vec<String> = r
                .server_counters
                .iter()
                .map(|c| match c.delta {
                    Some(d) => format!("{} +{d}", c.counter),
                    None => format!("{} reset", c.counter),
                })
                .collect();
            writeln!(out, "Server counters: {}", parts.join(", "))?;
        }
    }
    if !r.findings.is_empty() {
        writeln!(out)?;
    }
    for w in &r.findings {
        let label = w.severity.name();
        let color = match w.severity {
            Severity::Critical => RED,
            Severity::Warning => YELLOW,
            Severity::Info => "",
        };
        if opts.color && !color.is_empty() {
            writeln!(out, "{color}{label}{RESET}: {}", w.summary)?;
        } else {
            writeln!(out, "{label}: {}", w.summary)?;
        }
        if !w.advice.is_empty() {
            writeln!(out, "  fix: {}", w.advice)?;
        }
    }
    Ok(())
}

/// One entry of a port document's `"warnings"`: a finding, or a gathering warning (level
/// `info`, no advice) so that one list carries both.
#[derive(serde::Serialize)]
struct JsonFinding<'a> {
    code: &'a str,
    level: Severity,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    advice: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    details: &'a [String],
}

fn json_findings<'a>(findings: &'a [Finding], gathering: &'a [Warning]) -> Vec<JsonFinding<'a>> {
    let found = findings.iter().map(|f| JsonFinding {
        code: f.code,
        level: f.severity,
        message: &f.summary,
        advice: Some(f.advice.as_str()).filter(|a| !a.is_empty()),
        details: &[],
    });
    let seen = gathering.iter().map(|w| JsonFinding {
        code: w.code.name(),
        level: Severity::Info,
        message: &w.message,
        advice: None,
        details: &w.details,
    });
    found.chain(seen).collect()
}

/// Writes `{"version":1,"range":{...},"settings":{...},"time_wait":{...},"interval_s",
/// "destinations":[...],"servers":[...],"server_counters":[...],"warnings":[...]}`: the
/// findings, then what the gathering could not see.
pub fn write_json(
    r: &PortsReport,
    gathering: &[Warning],
    _opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &ReportDoc::new(r, gathering))?;
    out.write_all(b"\n")
}

/// The report as the document [`write_json`] prints (`"version"` first, the findings and the
/// gathering's warnings in `"warnings"`), ready for any serde serializer (the Python package
/// makes its objects from it).
pub fn report_object<'a>(
    r: &'a PortsReport,
    gathering: &'a [Warning],
) -> impl serde::Serialize + 'a {
    ReportDoc::new(r, gathering)
}

/// A report with its `"warnings"`.
#[derive(serde::Serialize)]
struct ReportDoc<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
    #[serde(flatten)]
    report: &'a PortsReport,
    warnings: Vec<JsonFinding<'a>>,
}

impl<'a> ReportDoc<'a> {
    fn new(r: &'a PortsReport, gathering: &'a [Warning]) -> ReportDoc<'a> {
        ReportDoc {
            version: Some(SCHEMA_VERSION),
            report: r,
            warnings: json_findings(&r.findings, gathering),
        }
    }
}

/// Writes one report per zone (`-Z`), each under its `Zone NAME (kind)` line, a blank line
/// between them.
pub fn write_zones_table(
    reports: &[PortsReport],
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        write_table(r, opts, out)?;
    }
    Ok(())
}

/// Writes the `-Z` document: `{"version":1,"zones":[<one report per zone, each with its
/// "zone" and its findings as "warnings">],"warnings":[<what the gathering could not see>]}`.
pub fn write_zones_json(
    reports: &[PortsReport],
    gathering: &[Warning],
    out: &mut dyn Write,
) -> io::Result<()> {
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        version: u32,
        zones: Vec<ReportDoc<'a>>,
        warnings: Vec<JsonFinding<'a>>,
    }
    let zones = reports
        .iter()
        .map(|r| ReportDoc {
            version: None,
            report: r,
            warnings: json_findings(&r.findings, &[]),
        })
        .collect();
    serde_json::to_writer(
        &mut *out,
        &Doc {
            version: SCHEMA_VERSION,
            zones,
            warnings: json_findings(&[], gathering),
        },
    )?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Snapshot, State};
    use crate::ports::tests::sock;
    use crate::ports::{analyze, PortsInput};
    use crate::sysctl::Sysctls;

    fn report() -> PortsReport {
        let sockets = (0..9u16)
            .map(|i| {
                let mut s = sock(
                    State::TimeWait,
                    ("127.0.0.1", 40000 + i),
                    Some(("127.0.0.2", 8080)),
                );
                s.cookie = Some(u64::from(i));
                s.timer.as_mut().unwrap().expires_ms = 59_500;
                s
            })
            .collect();
        let snap = Snapshot {
            sockets,
            ..Snapshot::default()
        };
        let sys = Sysctls {
            ip_local_port_range: Some((40000, 40009)),
            tcp_tw_reuse: Some(0),
            ..Sysctls::default()
        };
        analyze(&PortsInput {
            snapshot: &snap,
            earlier: None,
            interval_s: None,
            sysctls: &sys,
            counters: None,
            time_wait_total: None,
            filter: None,
        })
    }

    #[test]
    fn table_shows_destination_and_advice() {
        let mut out = Vec::new();
        write_table(&report(), &Options::new(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("Ephemeral ports 40000-40009: 10 usable"),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.starts_with("127.0.0.1"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(row.contains("127.0.0.2:8080"), "{row}");
        assert!(
            row.contains(" 9 ") && row.contains("90%!!") && row.contains("60 s"),
            "{row}"
        );
        assert!(text.contains("critical: client 127.0.0.1 -> 127.0.0.2:8080 uses 9 of 10"));
        assert!(text.contains("  fix: use connection pooling"), "{text}");
    }

    #[test]
    fn json_document() {
        let mut out = Vec::new();
        write_json(&report(), &[], &Options::new(), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["range"]["low"], 40000);
        assert_eq!(v["destinations"][0]["count"], 9);
        assert_eq!(v["destinations"][0]["time_wait_left"]["max_ms"], 59_500);
        assert!(v["servers"].as_array().unwrap().is_empty());
        assert_eq!(v["warnings"][0]["code"], "ephemeral-ports-critical");
        assert!(v.get("zone").is_none());
    }

    #[test]
    fn zones_table_and_json() {
        use crate::zone::{Zone, ZoneKind};
        let mut a = report();
        a.zone = Some(Zone {
            name: "web\x1b[2J".into(),
            kind: ZoneKind::Netns,
            netns_inode: Some(4026532000),
            container_id: None,
            runtime: None,
            pod: None,
        });
        let mut b = a.clone();
        b.zone.as_mut().unwrap().name = "db".into();
        let mut out = Vec::new();
        write_zones_table(&[a.clone(), b.clone()], &Options::new(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains('\x1b'), "{text:?}");
        assert!(
            text.starts_with("Zone web\\x1b[2J (netns)\nEphemeral ports 40000-40009"),
            "{text}"
        );
        assert!(text.contains("\n\nZone db (netns)\n"), "{text}");
        let mut out = Vec::new();
        write_zones_json(&[a, b], &[], &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["zones"][1]["zone"]["name"], "db");
        assert_eq!(v["zones"][1]["range"]["usable"], 10);
        assert!(v["warnings"].as_array().unwrap().is_empty());
    }
}
