//! What a [`PortsReport`] says: its findings (R7, R8 and the TIME-WAIT rules), their advice
//! and the commands they print, and the SYN rejects counted in TIME-WAIT.

use serde_json::Value;

use super::SynRejects;

use super::{PortsReport, Settings, TIME_WAIT_S};
use crate::finding::{Confidence, Evidence, Finding, RuleId, Subject};
use crate::model::Severity;
use crate::text::fmt;

/// The port findings that are R7's, `ephemeral-ports` (the diagnosis reports them as its own,
/// with the finding's code as the evidence's `finding`).
const R7_CODES: [&str; 6] = [
    "no-ephemeral-ports",
    "ephemeral-ports-critical",
    "ephemeral-ports-warning",
    "ephemeral-ports-rate",
    "time-wait-overflow",
    "time-wait-buckets",
];

/// The port finding that is R8's, `timewait-syn-rejected`.
const R8_CODE: &str = "time-wait-syn-rejects";

/// A finding of the report: its rule (R7, R8 or none), the numbers behind it and how sure it is.
fn finding(
    r: &PortsReport,
    code: &'static str,
    severity: Severity,
    summary: String,
    advice: String,
    subject: Subject,
) -> Finding {
    let (rule, evidence, confidence) = if R7_CODES.contains(&code) {
        (
            Some(RuleId::EphemeralPorts),
            exhaustion_evidence(r, code, subject),
            Confidence::counted(
                "every socket of the group, TIME-WAIT included, holds one of the range's ports",
            ),
        )
    } else if code == R8_CODE {
        (
            Some(RuleId::TimewaitSynRejected),
            syn_reject_evidence(r, subject),
            Confidence::counted(
                "the kernel counted the SYNs it refused for TIME-WAIT tuples (PAWSTimewait, \
                 TCPACKSkippedTimeWait)",
            ),
        )
    } else {
        let mut ev = Evidence::default();
        ev.text("finding", code)
            .int("server_time_wait", u64::from(server_time_wait(r)))
            .int("listening_ports", r.servers.len() as u64)
            .put(
                "tw_recycled_delta",
                r.time_wait.recycled_delta.map(Value::from),
            )
            .int("tcp_tw_reuse", r.settings.tcp_tw_reuse)
            .int("tcp_timestamps", r.settings.tcp_timestamps);
        (
            None,
            ev,
            Confidence::counted("the kernel's own table and counters"),
        )
    };
    Finding {
        rule,
        code,
        severity,
        socket: None,
        subject,
        summary,
        evidence,
        advice,
        count: None,
        confidence,
        zone: r.zone.clone(),
    }
}

/// The TIME-WAIT entries on this host's listening ports (the server side).
fn server_time_wait(r: &PortsReport) -> u32 {
    r.servers.iter().map(|s| s.time_wait).sum()
}

/// R7's numbers: the destination's use of the range, the range, the TIME-WAIT table.
fn exhaustion_evidence(r: &PortsReport, code: &str, subject: Subject) -> Evidence {
    let mut ev = Evidence::default();
    ev.text("finding", code);
    if let Subject::Destination(i) = subject {
        let d = &r.destinations[i];
        ev.text("source", d.local_address.to_string())
            .text(
                "destination",
                fmt::inet(d.remote_address, d.remote_port).to_string(),
            )
            .int("ports_in_use", u64::from(d.count))
            .int("time_wait", u64::from(d.time_wait))
            .num("usage_share", d.usage)
            .num("new_time_wait_per_sec", d.new_time_wait_per_s);
    }
    ev.int("usable_ports", u64::from(r.range.usable))
        .int("reserved_ports", u64::from(r.range.reserved))
        .text("port_range", format!("{}-{}", r.range.low, r.range.high))
        .num(
            "sustainable_connections_per_sec",
            r.range.sustainable_rate_per_s,
        )
        .int("time_wait_total", r.time_wait.count)
        .int("tcp_max_tw_buckets", r.time_wait.max_buckets)
        .num("time_wait_created_per_sec", r.time_wait.new_per_s)
        .put(
            "time_wait_overflow_delta",
            r.time_wait.overflow_delta.map(Value::from),
        )
        .put(
            "tw_recycled_delta",
            r.time_wait.recycled_delta.map(Value::from),
        )
        .int("tcp_tw_reuse", r.settings.tcp_tw_reuse);
    ev
}

/// R8's numbers: the reject counters over the interval and the busiest listening port.
fn syn_reject_evidence(r: &PortsReport, subject: Subject) -> Evidence {
    let rejects = syn_rejects(r);
    let busiest = match subject {
        Subject::Server(i) => r.servers.get(i),
        _ => None,
    };
    let mut ev = Evidence::default();
    ev.num("interval_s", r.interval_s)
        .put(
            "paws_timewait_delta",
            rejects.paws_timewait.map(Value::from),
        )
        .put(
            "ack_skipped_timewait_delta",
            rejects.ack_skipped_timewait.map(Value::from),
        )
        .put("paws_estab_delta", rejects.paws_estab.map(Value::from))
        .int("server_time_wait", u64::from(server_time_wait(r)))
        .int("busiest_port", busiest.map(|s| u64::from(s.local_port)))
        .int(
            "busiest_port_time_wait",
            busiest.map(|s| u64::from(s.time_wait)),
        )
        .int("tcp_timestamps", r.settings.tcp_timestamps);
    ev
}

pub(super) fn secs(ms: u32) -> String {
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

pub(super) fn findings(r: &PortsReport) -> Vec<Finding> {
    let mut out = Vec::new();
    let n = r.range.usable;
    if n == 0 {
        out.push(finding(
            r,
            "no-ephemeral-ports",
            Severity::Critical,
            format!(
                "the ephemeral range {}-{} has no usable port ({} reserved): every connect() \
                 without bind() fails with EADDRNOTAVAIL",
                r.range.low, r.range.high, r.range.reserved
            ),
            "widen net.ipv4.ip_local_port_range or shrink net.ipv4.ip_local_reserved_ports"
                .to_string(),
            Subject::Namespace,
        ));
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
        out.push(finding(
            r,
            code,
            level,
            format!(
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
            match level {
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
            },
            Subject::Destination(i),
        ));
    }
    for (i, d) in r.destinations.iter().enumerate() {
        let (Some(rate), Some(_)) = (d.new_time_wait_per_s, r.interval_s) else {
            continue;
        };
        if d.level.is_none() && rate > r.range.sustainable_rate_per_s && n > 0 {
            out.push(finding(
                r,
                "ephemeral-ports-rate",
                Severity::Warning,
                format!(
                    "client {} -> {} opens {:.1} connections/s that end in TIME-WAIT, more than \
                     the {:.1}/s its {} ports sustain: the range runs out in about {:.0} s",
                    d.local_address,
                    fmt::inet(d.remote_address, d.remote_port),
                    rate,
                    r.range.sustainable_rate_per_s,
                    n,
                    f64::from(n.saturating_sub(d.count)) / (rate - r.range.sustainable_rate_per_s)
                ),
                exhaustion_advice(r),
                Subject::Destination(i),
            ));
        }
    }
    if let Some(o) = r.time_wait.overflow_delta.filter(|o| *o > 0) {
        out.push(finding(
            r,
            "time-wait-overflow",
            Severity::Critical,
            format!(
                "TIME-WAIT table full: {o} connections were closed without TIME-WAIT protection \
                 (TcpExt.TCPTimeWaitOverflow; {} entries, tcp_max_tw_buckets {})",
                r.time_wait.count,
                r.time_wait
                    .max_buckets
                    .map_or("unknown".into(), |m| m.to_string())
            ),
            "raise net.ipv4.tcp_max_tw_buckets, or open fewer short connections (keep-alive, \
                 pooling)"
                .into(),
            Subject::Namespace,
        ));
    } else if let Some(u) = r.time_wait.usage.filter(|u| *u >= 0.8) {
        out.push(finding(
            r,
            "time-wait-buckets",
            Severity::Warning,
            format!(
                "{} TIME-WAIT entries use {:.0}% of tcp_max_tw_buckets ({}); past it, connections \
                 close without TIME-WAIT protection",
                r.time_wait.count,
                u * 100.0,
                r.time_wait.max_buckets.unwrap_or(0)
            ),
            "raise net.ipv4.tcp_max_tw_buckets, or use keep-alive".to_string(),
            Subject::Namespace,
        ));
    }
    let server_tw = server_time_wait(r);
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
        out.push(finding(
            r,
            "time-wait-syn-rejects",
            Severity::Warning,
            format!(
                "SYNs arrived for connections this host still holds in TIME-WAIT and were \
                 rejected ({}){busiest}: those clients' connect() stalls for a SYN retransmit \
                 (1 s, 3 s, 7 s)",
                rejects.text()
            ),
            "clients reuse source ports while this server still holds them in TIME-WAIT (the \
                 server closes first): keep TCP timestamps on at both ends \
                 (net.ipv4.tcp_timestamps=1) so a newer SYN is accepted; let clients close \
                 first; use keep-alive or pooling; or widen the clients' port range so ports \
                 come back less often"
                .into(),
            if r.servers.is_empty() {
                Subject::Namespace
            } else {
                Subject::Server(0)
            },
        ));
    } else if server_tw > 0 && r.interval_s.is_none() {
        out.push(finding(
            r,
            "server-time-wait",
            Severity::Info,
            format!(
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
            "run with --interval SECONDS to see the PAWS and TIME-WAIT ACK counters".into(),
            Subject::Namespace,
        ));
    }
    if let Some(d) = r.time_wait.recycled_delta.filter(|d| *d > 0) {
        out.push(finding(
            r,
            "time-wait-reused",
            Severity::Info,
            format!(
                "connect() reused a port still in TIME-WAIT {d} times during the interval \
                 (TcpExt.TWRecycled; {})",
                reuse_text(&r.settings)
            ),
            String::new(),
            Subject::Namespace,
        ));
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.severity));
    out
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
