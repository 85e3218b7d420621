//! What a [`PortsReport`] says: its findings (R7, R8 and the TIME-WAIT rules), their advice
//! and the commands they print, and the SYN rejects counted in TIME-WAIT.

use super::SynRejects;

use super::{Finding, PortsReport, Settings, Subject, TIME_WAIT_S};
use crate::model::Severity;
use crate::text::fmt;

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
