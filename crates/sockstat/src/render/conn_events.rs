//! Connection events (`sockstat events`) as text lines or JSON Lines, and their summary
//! (`--stats`) as text or one JSON object. Schema: doc/json-schema.md, "Connection events";
//! doc/connection-events.schema.json.

use std::fmt::Write as _;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::events::stats::{Histogram, Row, RowKey, Stats};
use crate::events::{ConnEvent, EventKind, EventProcess, Lost, Side};
use crate::model::Family;
use crate::text::fmt::{self, utc_timestamp};
use crate::text::sanitize::for_terminal;

/// The UTC time of day with milliseconds, `14:50:01.123`.
fn time_of_day(t: SystemTime) -> String {
    let full = utc_timestamp(t);
    full.get(11..23).unwrap_or(&full).to_string()
}

fn human_us(out: &mut String, us: u64) {
    let _ = write!(out, "{}", fmt::duration_us_cell(us));
}

fn human_bytes(out: &mut String, n: u64) {
    let _ = write!(out, "{}", fmt::bytes_cell(n));
}

fn write_inet(out: &mut String, addr: &std::net::IpAddr, port: u16) {
    let _ = write!(out, "{}", fmt::inet(*addr, port));
}

/// JSON schema version of every events object.
pub const VERSION: u32 = 1;

/// How the lines look.
#[derive(Debug, Clone, Copy, Default)]
pub struct LineOptions {
    /// Show uids, not user names.
    pub numeric: bool,
    /// A ZONE column first.
    pub zone: bool,
}

/// The header of the text lines.
pub fn header(o: &LineOptions) -> String {
    let mut s = String::new();
    if o.zone {
        let _ = write!(s, "{:<12} ", "ZONE");
    }
    let _ = write!(
        s,
        "{:<12} {:<7} {:<6} {:<21} {:<21} {:<24} DETAILS",
        "TIME(UTC)", "EVENT", "SIDE", "LOCAL", "REMOTE", "PROCESS"
    );
    s
}

fn process_label(p: &EventProcess, numeric: bool) -> String {
    let mut s = String::new();
    s.push_str(&for_terminal(p.command.as_bytes()));
    let _ = write!(s, "[{}] ", p.pid);
    match (&p.user, numeric) {
        (Some(u), false) => s.push_str(&for_terminal(u.as_bytes())),
        _ => {
            let _ = write!(s, "{}", p.uid);
        }
    }
    s
}

fn retransmits(out: &mut String, n: Option<u32>, what: &str) {
    if let Some(n) = n.filter(|&n| n > 0) {
        let _ = write!(
            out,
            ", {n} {what} retransmit{}",
            if n == 1 { "" } else { "s" }
        );
    }
}

/// One event as a text line (no newline). `zone` is the ZONE column's value when shown.
pub fn line(e: &ConnEvent, zone: Option<&str>, o: &LineOptions) -> String {
    let mut s = String::new();
    if o.zone {
        let _ = write!(s, "{:<12} ", for_terminal(zone.unwrap_or("?").as_bytes()));
    }
    let mut local = String::new();
    write_inet(&mut local, &e.local.ip(), e.local.port());
    let mut remote = String::new();
    write_inet(&mut remote, &e.remote.ip(), e.remote.port());
    let who = match (&e.process, e.process_status) {
        (Some(p), _) => process_label(p, o.numeric),
        (None, Some(st)) => format!("({})", st.name()),
        (None, None) => "?".into(),
    };
    let _ = write!(
        s,
        "{:<12} {:<7} {:<6} {:<21} {:<21} {:<24} ",
        time_of_day(e.time),
        e.kind.name(),
        e.side.map_or("?", Side::name),
        local,
        remote,
        who
    );
    let syn = match e.side {
        Some(Side::Server) => "SYN-ACK",
        _ => "SYN",
    };
    match e.kind {
        EventKind::Connect => {
            match e.connect_latency_us {
                Some(us) => {
                    s.push_str("connected in ");
                    human_us(&mut s, us);
                }
                None => s.push_str("connected"),
            }
            retransmits(&mut s, e.syn_retransmits, syn);
        }
        EventKind::Accept => {
            match e.accept_wait_us {
                Some(us) => {
                    s.push_str("accepted after ");
                    human_us(&mut s, us);
                    s.push_str(" in the queue");
                }
                None => s.push_str("accepted"),
            }
            retransmits(&mut s, e.syn_retransmits, syn);
        }
        EventKind::Close => {
            s.push_str(e.end.map_or("closed", |x| x.name()));
            if let Some(us) = e.duration_us {
                s.push_str(" after ");
                human_us(&mut s, us);
            }
            if let (Some(tx), Some(rx)) = (e.bytes_sent, e.bytes_received) {
                s.push_str(", sent ");
                human_bytes(&mut s, tx);
                s.push_str(" received ");
                human_bytes(&mut s, rx);
            }
            retransmits(&mut s, e.syn_retransmits, syn);
        }
        EventKind::Failed => {
            s.push_str(e.reason.map_or("failed", |r| r.name()));
            if let Some(errno) = e.errno {
                let _ = write!(s, " (errno {errno})");
            }
            if let Some(us) = e.connect_latency_us {
                s.push_str(" after ");
                human_us(&mut s, us);
            }
            retransmits(&mut s, e.syn_retransmits, syn);
        }
    }
    if let Some(p) = &e.peer {
        s.push_str(", peer ");
        s.push_str(&process_label(p, o.numeric));
    }
    s.trim_end().to_string()
}

fn endpoint_json(a: &std::net::SocketAddr) -> Value {
    json!({"address": a.ip().to_string(), "port": a.port()})
}

#[derive(Serialize)]
struct EndpointOut {
    address: std::net::IpAddr,
    port: u16,
}

#[derive(Serialize)]
struct ProcessOut<'a> {
    pid: u32,
    command: std::borrow::Cow<'a, str>,
    uid: u32,
    user: Option<&'a str>,
}

impl<'a> ProcessOut<'a> {
    fn of(p: &'a EventProcess) -> ProcessOut<'a> {
        ProcessOut {
            pid: p.pid,
            command: p.command.to_string_lossy(),
            uid: p.uid,
            user: p.user.as_deref(),
        }
    }
}

/// One event in the schema's shape. `Option<Option<T>>`: the outer `None` leaves a field out
/// (it does not apply to this kind of event), `Some(None)` writes `null` (it applies, but is
/// not known).
#[derive(Serialize)]
struct EventOut<'a> {
    version: u32,
    event: &'static str,
    time: String,
    cookie: String,
    proto: &'static str,
    family: &'static str,
    netns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    zone: Option<&'a str>,
    local: EndpointOut,
    remote: EndpointOut,
    side: Option<&'static str>,
    process: Option<ProcessOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    process_status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peer: Option<ProcessOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_us: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    connect_latency_us: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    accept_wait_us: Option<Option<u64>>,
    syn_retransmits: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_sent: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_received: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<Option<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<Option<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    errno: Option<i32>,
}

fn event_out<'a>(e: &'a ConnEvent, zone: Option<&'a str>) -> EventOut<'a> {
    let client = e.side == Some(Side::Client);
    let server = e.side == Some(Side::Server);
    let kind = e.kind;
    let when = |on: bool, v: Option<u64>| on.then_some(v);
    EventOut {
        version: VERSION,
        event: kind.name(),
        time: utc_timestamp(e.time),
        cookie: e.cookie.to_string(),
        proto: "tcp",
        family: match e.family {
            Family::Inet6 => "inet6",
            _ => "inet",
        },
        netns: e.netns,
        zone,
        local: EndpointOut {
            address: e.local.ip(),
            port: e.local.port(),
        },
        remote: EndpointOut {
            address: e.remote.ip(),
            port: e.remote.port(),
        },
        side: e.side.map(Side::name),
        process: e.process.as_ref().map(ProcessOut::of),
        process_status: e.process_status.map(|s| s.name()),
        peer: e.peer.as_ref().map(ProcessOut::of),
        duration_us: when(kind == EventKind::Close, e.duration_us),
        connect_latency_us: when(
            matches!(kind, EventKind::Connect | EventKind::Failed)
                || (kind == EventKind::Close && client),
            e.connect_latency_us,
        ),
        accept_wait_us: when(
            kind == EventKind::Accept || (kind == EventKind::Close && server),
            e.accept_wait_us,
        ),
        syn_retransmits: e.syn_retransmits,
        bytes_sent: when(kind == EventKind::Close, e.bytes_sent),
        bytes_received: when(kind == EventKind::Close, e.bytes_received),
        end: (kind == EventKind::Close).then_some(e.end.map(|x| x.name())),
        reason: (kind == EventKind::Failed).then_some(e.reason.map(|r| r.name())),
        errno: e.errno,
    }
}

/// Writes one event as a JSON object (the schema's `connect`, `accept`, `close` or `failed`)
/// on one line. `zone` is the zone's name, included when given.
pub fn write_json(
    out: &mut impl std::io::Write,
    e: &ConnEvent,
    zone: Option<&str>,
) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, &event_out(e, zone))?;
    out.write_all(b"\n")
}

/// One event as a JSON value (see [`write_json`]).
pub fn json(e: &ConnEvent, zone: Option<&str>) -> Value {
    serde_json::to_value(event_out(e, zone)).unwrap_or(Value::Null)
}

/// A `lost` event: what the kernel could not hand over since the last one.
pub fn lost_json(time: SystemTime, lost: &Lost) -> Value {
    json!({
        "version": VERSION,
        "event": "lost",
        "time": utc_timestamp(time),
        "count": lost.events(),
        "ring_full": lost.ring_full,
        "missed_runs": lost.missed_runs,
        "table_full": lost.table_full,
    })
}

/// A `lost` event as a text line.
pub fn lost_line(time: SystemTime, lost: &Lost, o: &LineOptions) -> String {
    let mut s = String::new();
    if o.zone {
        let _ = write!(s, "{:<12} ", "");
    }
    let _ = write!(s, "{:<12} {:<7} ", time_of_day(time), "lost");
    let mut parts = Vec::new();
    if lost.ring_full > 0 {
        parts.push(format!(
            "{} events the ring buffer had no room for",
            lost.ring_full
        ));
    }
    if lost.missed_runs > 0 {
        parts.push(format!(
            "{} state changes the kernel skipped (program busy on that CPU)",
            lost.missed_runs
        ));
    }
    if lost.table_full > 0 {
        parts.push(format!(
            "{} connections not followed (the kernel table was full): their events lack process and timing",
            lost.table_full
        ));
    }
    s.push_str(&parts.join("; "));
    s
}

fn histogram_json(h: &Histogram) -> Value {
    json!({
        "p50": h.quantile(0.5),
        "p99": h.quantile(0.99),
        "max": h.max(),
        "buckets": h
            .buckets_with_retransmits()
            .into_iter()
            .map(|(le, n, syn)| json!({"le_us": le, "count": n, "syn_retransmits": syn}))
            .collect::<Vec<_>>(),
    })
}

fn row_json(k: &RowKey, r: &Row) -> Value {
    let mut m = Map::new();
    m.insert("side".into(), k.side.name().into());
    m.insert(
        "command".into(),
        match (&k.command, k.other) {
            (_, true) => "(other)".into(),
            (Some(c), _) => c.to_string_lossy().into(),
            (None, _) => Value::Null,
        },
    );
    m.insert(
        "pids".into(),
        r.pids.iter().copied().collect::<Vec<_>>().into(),
    );
    if r.more_pids > 0 {
        m.insert("more_pids".into(), r.more_pids.into());
    }
    let ep = if k.other {
        Value::Null
    } else {
        endpoint_json(&k.endpoint)
    };
    m.insert(
        match k.side {
            Side::Client => "remote",
            Side::Server => "local",
        }
        .into(),
        ep,
    );
    m.insert("connections".into(), r.connections.into());
    if k.side == Side::Client {
        m.insert("failed".into(), r.failed.into());
        if !r.failed_by_reason.is_empty() {
            m.insert("failed_by_reason".into(), json!(r.failed_by_reason));
        }
    } else {
        m.insert("never_accepted".into(), r.never_accepted.into());
    }
    m.insert(
        match k.side {
            Side::Client => "connect_latency_us",
            Side::Server => "accept_wait_us",
        }
        .into(),
        histogram_json(&r.latency),
    );
    m.insert("unmeasured".into(), r.unmeasured.into());
    m.insert("syn_retransmits".into(), r.syn_retransmits.into());
    m.insert("closed".into(), r.closed.into());
    m.insert("bytes_sent".into(), r.bytes_sent.into());
    m.insert("bytes_received".into(), r.bytes_received.into());
    m.insert("time_wait_here".into(), r.time_wait_here.into());
    Value::Object(m)
}

/// The summary as one JSON object.
pub fn stats_json(stats: &Stats, lost: &Lost, duration_s: f64) -> Value {
    json!({
        "version": VERSION,
        "duration_s": (duration_s * 1000.0).round() / 1000.0,
        "lost": lost.events(),
        "lost_detail": lost,
        "events": stats.events,
        "unattributed": stats.unattributed,
        "stats": stats.rows().into_iter().map(|(k, r)| row_json(k, r)).collect::<Vec<_>>(),
    })
}

fn histogram_text(out: &mut String, h: &Histogram, syn: &str) {
    let buckets = h.buckets_with_retransmits();
    let Some(first) = buckets.iter().position(|&(_, n, _)| n > 0) else {
        return;
    };
    let top = buckets.iter().map(|&(_, n, _)| n).max().unwrap_or(1).max(1);
    let _ = writeln!(out, "    {:>10}  {:>8}  distribution", "<= us", "count");
    for &(le, n, retrans) in &buckets[first..] {
        let width = ((n as f64 / top as f64) * 40.0).ceil() as usize;
        let _ = write!(out, "    {le:>10}  {n:>8}  |{:<40}|", "*".repeat(width));
        // A mode made of retransmissions says so: these waited for the kernel's timer.
        if n > 0 && retrans > 0 {
            let per = retrans as f64 / n as f64;
            let _ = write!(
                out,
                " <- {} {syn} retransmit{} per connection",
                if per.fract() == 0.0 {
                    format!("{per:.0}")
                } else {
                    format!("{per:.1}")
                },
                if per == 1.0 { "" } else { "s" }
            );
        }
        out.push('\n');
    }
}

/// The summary as text.
pub fn stats_text(stats: &Stats, lost: &Lost, duration_s: f64) -> String {
    let mut out = String::new();
    let total: u64 = stats.events.values().sum();
    let _ = writeln!(
        out,
        "=== {total} events in {duration_s:.1} s: {} ===",
        stats
            .events
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !lost.is_zero() {
        let _ = writeln!(
            out,
            "LOST: {}",
            lost_line(SystemTime::UNIX_EPOCH, lost, &LineOptions::default())
                .split_once("lost")
                .map_or("", |(_, rest)| rest.trim())
        );
    }
    if stats.unattributed > 0 {
        let _ = writeln!(
            out,
            "{} events of connections opened before tracing started are not in the rows below",
            stats.unattributed
        );
    }
    for (k, r) in stats.rows() {
        out.push('\n');
        let cmd = match (&k.command, k.other) {
            (_, true) => "(other)".to_string(),
            (Some(c), _) => for_terminal(c.as_bytes()).into_owned(),
            (None, _) => "?".to_string(),
        };
        let mut ep = String::new();
        if k.other {
            ep.push_str("(more destinations)");
        } else {
            write_inet(&mut ep, &k.endpoint.ip(), k.endpoint.port());
        }
        let pids: Vec<String> = r.pids.iter().map(u32::to_string).collect();
        let more = if r.more_pids > 0 {
            format!(" and {} more", r.more_pids)
        } else {
            String::new()
        };
        let (arrow, what) = match k.side {
            Side::Client => ("->", "connect latency"),
            Side::Server => ("on", "accept wait"),
        };
        let _ = writeln!(
            out,
            "{} {cmd} {arrow} {ep}  pids {}{more}",
            k.side.name().to_uppercase(),
            if pids.is_empty() {
                "?".into()
            } else {
                pids.join(",")
            },
        );
        let mut line = format!("  connections {}", r.connections);
        if k.side == Side::Client {
            let _ = write!(line, "  failed {}", r.failed);
            if !r.failed_by_reason.is_empty() {
                let reasons: Vec<String> = r
                    .failed_by_reason
                    .iter()
                    .map(|(k, v)| format!("{v} {k}"))
                    .collect();
                let _ = write!(line, " ({})", reasons.join(", "));
            }
        } else if r.never_accepted > 0 {
            let _ = write!(line, "  never accepted {}", r.never_accepted);
        }
        let _ = write!(
            line,
            "  {} retransmits {}  closed {}  sent ",
            if k.side == Side::Client {
                "SYN"
            } else {
                "SYN-ACK"
            },
            r.syn_retransmits,
            r.closed
        );
        human_bytes(&mut line, r.bytes_sent);
        line.push_str("  received ");
        human_bytes(&mut line, r.bytes_received);
        let _ = write!(line, "  TIME-WAIT here {}", r.time_wait_here);
        let _ = writeln!(out, "{line}");
        if let (Some(p50), Some(p99), Some(max)) = (
            r.latency.quantile(0.5),
            r.latency.quantile(0.99),
            r.latency.max(),
        ) {
            let mut l = format!("  {what}: p50 ");
            human_us(&mut l, p50);
            l.push_str("  p99 ");
            human_us(&mut l, p99);
            l.push_str("  max ");
            human_us(&mut l, max);
            if r.unmeasured > 0 {
                let _ = write!(l, "  ({} not measured)", r.unmeasured);
            }
            let _ = writeln!(out, "{l}");
            let syn = if k.side == Side::Client {
                "SYN"
            } else {
                "SYN-ACK"
            };
            histogram_text(&mut out, &r.latency, syn);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::tests::record;
    use crate::events::Clock;
    use sockstat_wire::tcp_events::{flag, kind, side, state};

    fn event(kind: u8, old: u8, side: u8) -> ConnEvent {
        let mut r = record(kind, old, side);
        r.flags |= flag::PEER_FIN;
        ConnEvent::from_record(&r, &Clock::fixed(1_795_358_401_123_000_000)).unwrap()
    }

    #[test]
    fn a_close_line() {
        let mut e = event(kind::CLOSE, state::FIN_WAIT2, side::CLIENT);
        e.process.as_mut().unwrap().user = Some("alice".into());
        let l = line(&e, None, &LineOptions::default());
        assert!(
            l.starts_with("14:40:03.123 close   client 127.0.0.1:51370"),
            "{l}"
        );
        assert!(l.contains("python3[5446] alice"), "{l}");
        assert!(
            l.contains("local-close after 1s, sent 100 received 200"),
            "{l}"
        );
        let n = line(
            &e,
            Some("global"),
            &LineOptions {
                numeric: true,
                zone: true,
            },
        );
        assert!(n.starts_with("global       14:40:03.123"), "{n}");
        assert!(n.contains("python3[5446] 1000"), "{n}");
        // Control characters in a command name do not reach the terminal.
        e.process.as_mut().unwrap().command = crate::RawString::new(b"ev\x1b[2Jil");
        assert!(!line(&e, None, &LineOptions::default()).contains('\x1b'));
    }

    #[test]
    fn json_fields_by_kind() {
        let e = event(kind::CLOSE, state::FIN_WAIT2, side::CLIENT);
        let v = json(&e, None);
        assert_eq!(v["event"], "close");
        assert_eq!(v["cookie"], "8812");
        assert_eq!(v["time"], "2026-11-22T14:40:03.123Z");
        assert_eq!(v["local"]["port"], 51370);
        assert_eq!(v["process"]["command"], "python3");
        assert_eq!(v["end"], "local-close");
        assert_eq!(v["bytes_sent"], 100);
        assert_eq!(v["connect_latency_us"], 95);
        assert!(v.get("accept_wait_us").is_none());
        assert!(v.get("reason").is_none());
        let mut f = record(kind::CLOSE, state::SYN_SENT, side::CLIENT);
        f.sk_err = 111;
        let v = json(
            &ConnEvent::from_record(&f, &Clock::fixed(0)).unwrap(),
            Some("global"),
        );
        assert_eq!(
            (v["event"].as_str(), v["reason"].as_str()),
            (Some("failed"), Some("refused"))
        );
        assert_eq!(v["zone"], "global");
        let l = lost_json(
            SystemTime::UNIX_EPOCH,
            &Lost {
                ring_full: 3,
                table_full: 1,
                missed_runs: 2,
            },
        );
        assert_eq!(
            (l["event"].as_str(), l["count"].as_u64()),
            (Some("lost"), Some(5))
        );
    }

    #[test]
    fn stats_text_marks_the_syn_retransmission_modes() {
        let c = Clock::fixed(0);
        let mut s = Stats::default();
        for (i, lat_ms) in [0u64, 0, 0, 1003, 3011].into_iter().enumerate() {
            let mut r = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
            r.established_ns = r.start_ns + lat_ms * 1_000_000 + 90_000;
            r.syn_retrans = if lat_ms > 2000 {
                2
            } else {
                u32::from(lat_ms > 0)
            };
            r.cookie = i as u64;
            s.add(&ConnEvent::from_record(&r, &c).unwrap());
        }
        let t = stats_text(&s, &Lost::default(), 10.0);
        assert!(
            t.contains("CLIENT python3 -> 127.0.0.1:47001  pids 5446"),
            "{t}"
        );
        assert!(
            t.contains("connections 5  failed 0  SYN retransmits 3"),
            "{t}"
        );
        let line = |le: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with(&format!("{le} ")))
                .unwrap_or_else(|| panic!("no {le} bucket: {t}"))
        };
        assert!(
            line("1048576").ends_with("| <- 1 SYN retransmit per connection"),
            "{t}"
        );
        assert!(
            line("4194304").ends_with("| <- 2 SYN retransmits per connection"),
            "{t}"
        );
        assert!(line("128").ends_with('|'), "{t}");
        let v = stats_json(&s, &Lost::default(), 10.0);
        let row = &v["stats"][0];
        let sum: u64 = row["connect_latency_us"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, row["connections"].as_u64().unwrap());
        assert_eq!(row["connect_latency_us"]["max"], 3_011_090);
        let b = &row["connect_latency_us"]["buckets"];
        assert_eq!(b[22]["le_us"], 1 << 22);
        assert_eq!(
            (b[22]["count"].as_u64(), b[22]["syn_retransmits"].as_u64()),
            (Some(1), Some(2))
        );
    }
}
