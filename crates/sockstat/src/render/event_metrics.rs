//! The families `sockstat serve --events` adds to the exposition (doc/serve.md): connection
//! events summed since the exporter started ([`crate::events::metrics::EventMetrics`]) and the
//! packets the kernel dropped ([`crate::events::drops::Drops`]). Pure: writes text.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::metrics::{header, sample};
use crate::events::drops::Drops;
use crate::events::metrics::{EventMetrics, PortLabel, PromHistogram};

fn histogram(
    out: &mut impl Write,
    name: &str,
    help: &str,
    series: &BTreeMap<PortLabel, PromHistogram>,
) -> io::Result<()> {
    header(out, name, "histogram", help)?;
    for (port, h) in series {
        let port = match port {
            PortLabel::Port(p) => p.to_string(),
            PortLabel::Other => "other".to_string(),
        };
        let bucket = format!("{name}_bucket");
        for (le, n) in h.cumulative() {
            sample(out, &bucket, &[("port", &port), ("le", &le.to_string())], n)?;
        }
        sample(out, &bucket, &[("port", &port), ("le", "+Inf")], h.count)?;
        sample(out, &format!("{name}_sum"), &[("port", &port)], h.sum_s)?;
        sample(out, &format!("{name}_count"), &[("port", &port)], h.count)?;
    }
    Ok(())
}

/// Writes the event families; `drops` adds the drop families.
pub fn write(m: &EventMetrics, drops: Option<&Drops>, out: &mut impl Write) -> io::Result<()> {
    histogram(
        out,
        "sockstat_connect_latency_seconds",
        "Time from connect() to ESTABLISHED of the connections this namespace opened, by remote port (the first 32 ports seen, the rest as other).",
        &m.connect_latency,
    )?;
    histogram(
        out,
        "sockstat_accept_wait_seconds",
        "Time accepted connections waited in the accept queue (ESTABLISHED to accept()), by local port (the first 32 ports seen, the rest as other).",
        &m.accept_wait,
    )?;
    header(
        out,
        "sockstat_connections_total",
        "counter",
        "TCP connections made, by side: client (connect() completed) or server (accept() returned).",
    )?;
    for side in ["client", "server"] {
        let n = m.connections.get(side).copied().unwrap_or(0);
        sample(out, "sockstat_connections_total", &[("side", side)], n)?;
    }
    header(
        out,
        "sockstat_connect_failures_total",
        "counter",
        "connect() calls that ended without a connection, by reason (refused, timeout, unreachable, no-local-port, aborted, error).",
    )?;
    for (reason, n) in &m.failures {
        sample(
            out,
            "sockstat_connect_failures_total",
            &[("reason", reason)],
            n,
        )?;
    }
    header(
        out,
        "sockstat_connection_closes_total",
        "counter",
        "Established connections that ended, by side and how (local-close: this side holds the TIME-WAIT).",
    )?;
    for ((side, end), n) in &m.closes {
        sample(
            out,
            "sockstat_connection_closes_total",
            &[("side", side), ("end", end)],
            n,
        )?;
    }
    header(
        out,
        "sockstat_events_lost_total",
        "counter",
        "Connection events the kernel could not hand over (ring_full, missed_runs) and connections it could not follow (table_full).",
    )?;
    for (why, n) in [
        ("ring_full", m.lost.ring_full),
        ("missed_runs", m.lost.missed_runs),
        ("table_full", m.lost.table_full),
    ] {
        sample(out, "sockstat_events_lost_total", &[("reason", why)], n)?;
    }
    if let Some(d) = drops {
        header(
            out,
            "sockstat_drops_total",
            "counter",
            "Packets the kernel dropped, by drop reason and IP protocol, in every namespace of the host.",
        )?;
        let mut by: BTreeMap<(&str, String), u64> = BTreeMap::new();
        for c in &d.counts {
            *by.entry((c.reason.as_str(), c.proto_name())).or_default() += c.count;
        }
        for ((reason, proto), n) in &by {
            sample(
                out,
                "sockstat_drops_total",
                &[("reason", reason), ("proto", proto)],
                n,
            )?;
        }
        header(
            out,
            "sockstat_drops_uncounted_total",
            "counter",
            "Dropped packets not broken down because the kernel's table of reasons and ports was full.",
        )?;
        sample(out, "sockstat_drops_uncounted_total", &[], d.uncounted)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::drops::{DropCount, PortFrom};
    use crate::events::tests::record;
    use crate::events::{Clock, ConnEvent};
    use sockstat_wire::tcp_events::{kind, side, state};

    #[test]
    fn exposition() {
        let c = Clock::fixed(0);
        let mut m = EventMetrics::default();
        m.add(
            &ConnEvent::from_record(&record(kind::CONNECT, state::SYN_SENT, side::CLIENT), &c)
                .unwrap(),
        );
        let d = Drops::new(
            vec![DropCount {
                reason: "NO_SOCKET".into(),
                proto: 6,
                port: Some((9, PortFrom::PacketDestination)),
                count: 3,
            }],
            0,
            std::time::Duration::from_secs(1),
        );
        let mut out = Vec::new();
        write(&m, Some(&d), &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(
            t.contains("sockstat_connect_latency_seconds_bucket{port=\"47001\",le=\"0.0001\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("sockstat_connect_latency_seconds_bucket{port=\"47001\",le=\"+Inf\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("sockstat_connect_latency_seconds_count{port=\"47001\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("sockstat_connections_total{side=\"client\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("sockstat_connections_total{side=\"server\"} 0\n"),
            "{t}"
        );
        assert!(
            t.contains("sockstat_drops_total{reason=\"NO_SOCKET\",proto=\"tcp\"} 3\n"),
            "{t}"
        );
        assert!(
            t.contains("# TYPE sockstat_accept_wait_seconds histogram\n"),
            "{t}"
        );
    }
}
