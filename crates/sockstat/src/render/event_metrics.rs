//! The families `sockstat serve --events` adds to the exposition (doc/serve.md): connection
//! events summed since the exporter started ([`crate::events::metrics::EventMetrics`]) and the
//! packets the kernel dropped ([`crate::events::drops::Drops`]). Pure: writes text.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::exposition::{header, sample};
use crate::events::drops::Drops;
use crate::events::metrics::{EventMetrics, PortLabel, PromHistogram};

/// One zone of the exposition, as the event families label it.
#[derive(Debug, Clone, Copy)]
pub struct EventZone<'a> {
    /// The `zone` label, as every other per-zone family writes it.
    pub label: &'a str,
    /// The zone's network namespace (inode), when known.
    pub netns: Option<u64>,
    /// The zone the exporter runs in (its histograms are the only ones).
    pub own: bool,
}

fn histogram(
    out: &mut impl Write,
    name: &str,
    help: &str,
    zone: Option<&str>,
    series: &BTreeMap<PortLabel, PromHistogram>,
) -> io::Result<()> {
    header(out, name, "histogram", help)?;
    let Some(zone) = zone else {
        return Ok(());
    };
    for (port, h) in series {
        let port = match port {
            PortLabel::Port(p) => p.to_string(),
            PortLabel::Other => "other".to_string(),
        };
        let bucket = format!("{name}_bucket");
        for (le, n) in h.cumulative() {
            sample(
                out,
                &bucket,
                &[("port", &port), ("zone", zone), ("le", &le.to_string())],
                n,
            )?;
        }
        sample(
            out,
            &bucket,
            &[("port", &port), ("zone", zone), ("le", "+Inf")],
            h.count,
        )?;
        let labels = [("port", port.as_str()), ("zone", zone)];
        sample(out, &format!("{name}_sum"), &labels, h.sum_s)?;
        sample(out, &format!("{name}_count"), &labels, h.count)?;
    }
    Ok(())
}

/// Writes the event families for `zones` (the exposition's zones, labelled as its other
/// families label them: [`crate::render::metrics::write_snapshot`] calls this); `drops` adds
/// the drop families, which are the host's.
pub fn write(
    m: &EventMetrics,
    zones: &[EventZone<'_>],
    drops: Option<&Drops>,
    out: &mut impl Write,
) -> io::Result<()> {
    let own = zones.iter().find(|z| z.own).map(|z| z.label);
    histogram(
        out,
        "sockstat_connect_latency_seconds",
        "Time from connect() to ESTABLISHED of the connections the exporter's namespace opened, by remote port (the first 32 ports seen, the rest as other).",
        own,
        &m.connect_latency,
    )?;
    histogram(
        out,
        "sockstat_accept_wait_seconds",
        "Time accepted connections waited in the accept queue (ESTABLISHED to accept()) in the exporter's namespace, by local port (the first 32 ports seen, the rest as other).",
        own,
        &m.accept_wait,
    )?;
    let counts = |z: &EventZone<'_>| {
        z.netns
            .or(if z.own { m.own_netns } else { None })
            .and_then(|n| m.zone(n))
    };
    header(
        out,
        "sockstat_connections_total",
        "counter",
        "TCP connections made, by side: client (connect() completed) or server (accept() returned), and zone.",
    )?;
    for z in zones {
        for side in ["client", "server"] {
            let n = counts(z)
                .and_then(|c| c.connections.get(side).copied())
                .unwrap_or(0);
            sample(
                out,
                "sockstat_connections_total",
                &[("side", side), ("zone", z.label)],
                n,
            )?;
        }
    }
    header(
        out,
        "sockstat_connect_failures_total",
        "counter",
        "connect() calls that ended without a connection, by reason (refused, timeout, unreachable, no-local-port, aborted, error) and zone.",
    )?;
    for z in zones {
        for (reason, n) in counts(z).map(|c| &c.failures).into_iter().flatten() {
            sample(
                out,
                "sockstat_connect_failures_total",
                &[("reason", reason), ("zone", z.label)],
                n,
            )?;
        }
    }
    header(
        out,
        "sockstat_connection_closes_total",
        "counter",
        "Established connections that ended, by side, how (local-close: this side holds the TIME-WAIT) and zone.",
    )?;
    for z in zones {
        for ((side, end), n) in counts(z).map(|c| &c.closes).into_iter().flatten() {
            sample(
                out,
                "sockstat_connection_closes_total",
                &[("side", side), ("end", end), ("zone", z.label)],
                n,
            )?;
        }
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
        let e = ConnEvent::from_record(&record(kind::CONNECT, state::SYN_SENT, side::CLIENT), &c)
            .unwrap();
        let mut m = EventMetrics::new(Some(e.netns));
        m.add(&e);
        let mut other = e.clone();
        other.netns = e.netns + 1;
        m.add(&other);
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
        let zones = [
            EventZone {
                label: "global",
                netns: None,
                own: true,
            },
            EventZone {
                label: "pod-a",
                netns: Some(e.netns + 1),
                own: false,
            },
            EventZone {
                label: "idle",
                netns: Some(e.netns + 2),
                own: false,
            },
        ];
        write(&m, &zones, Some(&d), &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        for want in [
            "sockstat_connect_latency_seconds_bucket{port=\"47001\",zone=\"global\",le=\"0.0001\"} 1\n",
            "sockstat_connect_latency_seconds_bucket{port=\"47001\",zone=\"global\",le=\"+Inf\"} 1\n",
            "sockstat_connect_latency_seconds_count{port=\"47001\",zone=\"global\"} 1\n",
            "sockstat_connections_total{side=\"client\",zone=\"global\"} 1\n",
            "sockstat_connections_total{side=\"server\",zone=\"global\"} 0\n",
            "sockstat_connections_total{side=\"client\",zone=\"pod-a\"} 1\n",
            "sockstat_connections_total{side=\"client\",zone=\"idle\"} 0\n",
        ] {
            assert!(t.contains(want), "{want} missing from {t}");
        }
        // Only the exporter's zone has histograms.
        assert!(!t.contains("zone=\"pod-a\",le="), "{t}");
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
