//! The live view (`sockstat top`) as text or JSON, from a finished [`Report`] and its
//! [`Group`]. No I/O other than writing the output; every string from another process is
//! sanitized before it reaches a terminal.
//!
//! The cells ([`headers`], [`cells`]) and the summary lines ([`summary`]) are shared by the
//! batch text and the full-screen view, so both show the same numbers the same way.
//!
//! JSON (version 1, one object per refresh and line):
//! `{"version":1,"time":...,"interval_s":1.0,"by":"process","rows":[...],"totals":{...},
//! "findings":[...],"warnings":[...]}` (doc/top.md lists every field).

use std::io::{self, Write};

use serde_json::{json, Map, Value};

use super::fmt;
use super::sanitize::for_terminal;
use super::Options;
use crate::model::{counted, Endpoint, Socket, Warning, WarningCode};
use crate::top::{By, Conn, Group, Holder, Report, Row, RowKey};

/// The JSON version of a refresh object.
pub const VERSION: u32 = 1;

/// The warnings of one refresh: the report's, and what the rows shown leave unknown.
pub fn warnings(report: &Report, group: &Group) -> Vec<Warning> {
    let mut w = report.warnings.clone();
    let n = group.totals.rates_unknown;
    if n > 0 {
        w.push(
            Warning::new(
                WarningCode::RatesUnknown,
                format!(
                    "{} of protocols without byte counters (UDP, raw, ...): their rates are \
                     unknown, their queues and drops are shown",
                    counted(n, "socket", "sockets")
                ),
            )
            .count(n as u64),
        );
    }
    w
}

/// A process's label: (user, command, pid), sanitized.
fn holder_cells(report: &Report, h: Holder) -> (String, String, String) {
    match h {
        Holder::Process(pid) => {
            let p = report.process(pid);
            let cmd = p
                .and_then(|p| p.command.as_ref())
                .map_or("?".into(), |c| for_terminal(c.as_bytes()).into_owned());
            let user = p
                .and_then(|p| p.uid)
                .map_or("?".into(), |u| user(report, u));
            (user, cmd, pid.to_string())
        }
        Holder::Hidden(uid) => (
            uid.map_or("?".into(), |u| user(report, u)),
            "(hidden)".into(),
            "?".into(),
        ),
        Holder::Nobody => ("-".into(), "(no process)".into(), "-".into()),
    }
}

fn user(report: &Report, uid: u32) -> String {
    report.user_name(uid).map_or_else(
        || uid.to_string(),
        |n| for_terminal(n.as_bytes()).into_owned(),
    )
}

fn rate_cell(v: Option<u64>) -> String {
    match v {
        // Decimal units, as the summary line and link speeds give them: `840kB/s`, `2.1MB/s`.
        Some(v) => fmt::byte_rate(v as f64).to_string().replace(' ', ""),
        None => "?".into(),
    }
}

fn address(a: Option<std::net::IpAddr>) -> String {
    a.map_or("*".into(), |a| match a {
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        a => a.to_string(),
    })
}

/// The column titles of a grouping (ZONE first when `zoned`).
pub fn headers(by: By, zoned: bool) -> Vec<&'static str> {
    let mut h: Vec<&'static str> = if zoned { vec!["ZONE"] } else { vec![] };
    h.extend_from_slice(match by {
        By::Process => &["USER", "COMMAND", "PID", "CONNS"][..],
        By::Connection => &[
            "PROTO", "LOCAL", "REMOTE", "STATE", "USER", "COMMAND", "PID",
        ][..],
        By::Remote => &["REMOTE", "CONNS"][..],
        By::Port => &["LOCAL", "CONNS"][..],
    });
    h.extend_from_slice(&["SEND", "RECV", "RETR/S", "RTT", "FINDINGS"]);
    h
}

/// The cells of a row, in [`headers`]' order.
pub fn cells(report: &Report, row: &Row, zoned: bool) -> Vec<String> {
    let mut c = Vec::new();
    if zoned {
        c.push(zone(report, row.zone));
    }
    let conns = || {
        let n = row.conns.len();
        if row.shared > 0 {
            format!("{n} ({} shared)", row.shared)
        } else {
            n.to_string()
        }
    };
    match &row.key {
        RowKey::Process(h) => {
            let (u, cmd, pid) = holder_cells(report, *h);
            c.extend([u, cmd, pid, conns()]);
        }
        RowKey::Connection(i) => {
            let conn = &report.conns[*i];
            let s = report.socket(conn);
            c.push(s.proto_label().to_string());
            c.push(fmt::endpoint(&s.local).to_string());
            c.push(
                s.remote
                    .as_ref()
                    .map_or("*:*".into(), |r| fmt::endpoint(r).to_string()),
            );
            c.push(state(conn, s));
            let h = first_holder(report, conn);
            let (u, cmd, pid) = holder_cells(report, h);
            c.extend([u, cmd, pid]);
        }
        RowKey::Remote(_, a) => c.extend([address(*a), conns()]),
        RowKey::Port(_, a, p) => c.extend([
            format!(
                "{}:{}",
                address(*a),
                p.map_or("*".into(), |p| p.to_string())
            ),
            conns(),
        ]),
    }
    c.push(rate_cell(row.send));
    c.push(rate_cell(row.recv));
    c.push(
        row.retransmits_per_sec
            .map_or("-".into(), |r| format!("{r:.1}")),
    );
    c.push(
        row.max_rtt_us
            .map_or("-".into(), |r| fmt::duration_us_cell(r).to_string()),
    );
    let f: Vec<&str> = row
        .findings
        .iter()
        .map(|&i| report.findings[i].code)
        .collect();
    c.push(if f.is_empty() {
        "-".into()
    } else {
        f.join(",")
    });
    c
}

fn state(conn: &Conn, s: &Socket) -> String {
    match conn.seen {
        crate::top::Seen::Closed => "CLOSED".into(),
        crate::top::Seen::Short => "SHORT".into(),
        _ => s.state.name().into_owned(),
    }
}

fn first_holder(report: &Report, c: &Conn) -> Holder {
    let s = report.socket(c);
    if let Some(o) = s.owners.first() {
        return Holder::Process(o.pid);
    }
    if let Some(p) = report.short_process(c) {
        return Holder::Process(p.pid);
    }
    match s.owners_status {
        crate::OwnersStatus::Hidden | crate::OwnersStatus::Partial => Holder::Hidden(s.uid),
        _ => Holder::Nobody,
    }
}

fn zone(report: &Report, i: usize) -> String {
    report
        .zones
        .get(i)
        .map_or("?".into(), |z| for_terminal(z.as_bytes()).into_owned())
}

/// The summary lines above the rows: time and interval, totals, and what is not counted.
pub fn summary(report: &Report, group: &Group) -> Vec<String> {
    let t = &group.totals;
    let mut first = format!(
        "sockstat top - {}, {:.2} s measured, by {}",
        fmt::utc_timestamp(report.time),
        report.interval_s,
        group.by.name()
    );
    if let Some(age) = report.sample.holders_age {
        first.push_str(&format!(", holders as of {:.1} s ago", age.as_secs_f64()));
    }
    let mut l = vec![first];
    let mut conns = counted(t.connections, "connection", "connections");
    if report.events.unavailable.is_none() {
        conns.push_str(&format!(" ({} opened and closed in the interval)", t.short));
    }
    l.push(format!(
        "{conns}, sending {}, receiving {}, {} TIME-WAIT",
        fmt::byte_rate(t.send as f64),
        fmt::byte_rate(t.recv as f64),
        report.time_wait
    ));
    if report.events.unavailable.is_some() {
        l.push("short connections not counted (connection events need root)".into());
    }
    if t.rates_unknown > 0 {
        l.push(format!(
            "{}: rates unknown (no byte counters)",
            counted(t.rates_unknown, "non-TCP socket", "non-TCP sockets")
        ));
    }
    if t.holders_hidden > 0 {
        l.push(format!(
            "{} hidden from these privileges (run as root to see them)",
            counted(
                t.holders_hidden,
                "connection's holders",
                "connections' holders"
            )
        ));
    }
    // The findings no row carries (a listen queue, a pile-up of several connections, the
    // host's ports or memory): one line each, most severe first, so that they are not lost
    // because they name no single connection.
    let host: Vec<&crate::diagnose::Finding> = report.host_findings().collect();
    for f in host.iter().take(HOST_FINDINGS_SHOWN) {
        l.push(format!(
            "{} {}: {}",
            super::diagnose::severity_label(f.severity, false).trim_end(),
            f.code,
            for_terminal(f.summary.as_bytes())
        ));
    }
    if host.len() > HOST_FINDINGS_SHOWN {
        l.push(format!(
            "{} more about no single connection (sockstat diagnose, or --json, shows them all)",
            counted(host.len() - HOST_FINDINGS_SHOWN, "finding", "findings")
        ));
    }
    l
}

/// How many findings about no single connection the summary lines show.
const HOST_FINDINGS_SHOWN: usize = 3;

/// Lays out rows of cells in columns of measured width (the last column unpadded).
pub fn layout(rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = Vec::new();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            let w = c.chars().count();
            if widths.len() <= i {
                widths.push(w);
            } else {
                widths[i] = widths[i].max(w);
            }
        }
    }
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                if i + 1 == r.len() {
                    line.push_str(c);
                } else {
                    line.push_str(c);
                    line.extend(std::iter::repeat_n(' ', widths[i] - c.chars().count() + 2));
                }
            }
            line
        })
        .collect()
}

/// Writes one refresh as text, as `top -b` does: the summary, a blank line, the table.
pub fn write_text(
    report: &Report,
    group: &Group,
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    for l in summary(report, group) {
        writeln!(out, "{l}")?;
    }
    writeln!(out)?;
    let zoned = report.sample.zoned;
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(group.rows.len() + 1);
    if opts.header {
        rows.push(
            headers(group.by, zoned)
                .iter()
                .map(|h| h.to_string())
                .collect(),
        );
    }
    rows.extend(group.rows.iter().map(|r| cells(report, r, zoned)));
    for l in layout(&rows) {
        writeln!(out, "{}", l.trim_end())?;
    }
    Ok(())
}

fn endpoint_json(ep: &Endpoint) -> Value {
    match ep {
        Endpoint::Inet { addr, port } => json!({"address": addr.to_string(), "port": port}),
        _ => json!({}),
    }
}

fn owners_json(report: &Report, c: &Conn) -> Value {
    let s = report.socket(c);
    let mut v: Vec<Value> = s
        .owners
        .iter()
        .map(|o| process_json(report, o.pid, Some(o.fd)))
        .collect();
    if let Some(p) = report.short_process(c) {
        v.push(process_json(report, p.pid, None));
    }
    Value::Array(v)
}

fn process_json(report: &Report, pid: u32, fd: Option<u32>) -> Value {
    let mut m = Map::new();
    who(&mut m, report, Some(pid), None);
    if let Some(fd) = fd {
        m.insert("fd".into(), fd.into());
    }
    Value::Object(m)
}

/// `pid`, `command`, `uid` and `user` of a process (`None`: hidden or no process, with the
/// socket's uid `uid`).
fn who(m: &mut Map<String, Value>, report: &Report, pid: Option<u32>, uid: Option<u32>) {
    let p = pid.and_then(|pid| report.process(pid));
    let uid = p.and_then(|p| p.uid).or(uid);
    m.insert("pid".into(), pid.into());
    m.insert(
        "command".into(),
        p.and_then(|p| p.command.as_ref())
            .map(|c| c.to_string_lossy().into_owned())
            .into(),
    );
    m.insert("uid".into(), uid.into());
    m.insert(
        "user".into(),
        uid.and_then(|u| report.user_name(u))
            .map(str::to_string)
            .into(),
    );
}

/// One row as its JSON object.
pub fn row_json(report: &Report, row: &Row) -> Value {
    let mut m = Map::new();
    match &row.key {
        RowKey::Process(h) => {
            let (holder, pid, uid) = match h {
                Holder::Process(pid) => ("process", Some(*pid), None),
                Holder::Hidden(uid) => ("hidden", None, *uid),
                Holder::Nobody => ("none", None, None),
            };
            m.insert("holder".into(), holder.into());
            who(&mut m, report, pid, uid);
        }
        RowKey::Connection(i) => {
            let c = &report.conns[*i];
            let s = report.socket(c);
            m.insert("cookie".into(), s.cookie.map(|c| c.to_string()).into());
            m.insert("proto".into(), s.proto.name().into());
            m.insert("family".into(), s.family.name().into());
            m.insert("local".into(), endpoint_json(&s.local));
            m.insert(
                "remote".into(),
                s.remote.as_ref().map_or(Value::Null, endpoint_json),
            );
            m.insert("state".into(), s.state.name().into_owned().into());
            m.insert("seen".into(), c.seen.name().into());
            m.insert(
                "owners_status".into(),
                serde_json::to_value(s.owners_status).unwrap_or(Value::Null),
            );
            m.insert("owners".into(), owners_json(report, c));
            if matches!(c.at, crate::top::SocketAt::After { .. }) {
                m.insert("recv_q".into(), s.recv_q.into());
                m.insert("send_q".into(), s.send_q.into());
            }
        }
        RowKey::Remote(_, a) => {
            m.insert(
                "remote".into(),
                json!({"address": a.map(|a| a.to_string())}),
            );
        }
        RowKey::Port(_, a, p) => {
            m.insert(
                "local".into(),
                json!({"address": a.map(|a| a.to_string()), "port": p}),
            );
        }
    }
    m.insert("zone".into(), report.zones.get(row.zone).cloned().into());
    m.insert("connections".into(), row.conns.len().into());
    m.insert("shared".into(), row.shared.into());
    m.insert("send_bytes_per_sec".into(), row.send.into());
    m.insert("recv_bytes_per_sec".into(), row.recv.into());
    m.insert("rates_unknown".into(), row.rates_unknown.into());
    m.insert("closed_uncounted".into(), row.uncounted.into());
    m.insert(
        "retransmits_per_sec".into(),
        row.retransmits_per_sec
            .map(|r| (r * 1000.0).round() / 1000.0)
            .into(),
    );
    m.insert("drops".into(), row.drops.into());
    m.insert("max_rtt_us".into(), row.max_rtt_us.into());
    m.insert("holders_hidden".into(), row.holders_hidden.into());
    m.insert(
        "findings".into(),
        row.findings
            .iter()
            .map(|&i| Value::from(report.findings[i].code))
            .collect::<Vec<_>>()
            .into(),
    );
    Value::Object(m)
}

/// One refresh as its JSON object.
pub fn refresh_json(report: &Report, group: &Group, opts: &Options) -> Value {
    let t = &group.totals;
    let counted_short = report.events.unavailable.is_none();
    json!({
        "version": VERSION,
        "time": fmt::utc_timestamp(report.time),
        "interval_s": (report.interval_s * 1e6).round() / 1e6,
        "by": group.by.name(),
        "rows": group.rows.iter().map(|r| row_json(report, r)).collect::<Vec<_>>(),
        "totals": {
            "connections": t.connections,
            "send_bytes_per_sec": t.send,
            "recv_bytes_per_sec": t.recv,
            "rates_unknown": t.rates_unknown,
            "closed_uncounted": t.uncounted,
            "holders_hidden": t.holders_hidden,
            "short_connections": if counted_short { Value::from(t.short) } else { Value::Null },
            "time_wait": report.time_wait,
        },
        "short_connections_counted": counted_short,
        "holders_age_s": report.sample.holders_age.map(|a| (a.as_secs_f64() * 1e3).round() / 1e3),
        "findings": report.findings.iter().map(super::diagnose::finding_json).collect::<Vec<_>>(),
        "warnings": warnings(report, group)
            .iter()
            .map(|w| serde_json::to_value(super::json::warning_object(w, opts.verbose)).unwrap_or(Value::Null))
            .collect::<Vec<_>>(),
    })
}

/// Writes one refresh as one line of JSON.
pub fn write_json(
    report: &Report,
    group: &Group,
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &refresh_json(report, group, opts))?;
    writeln!(out)
}
