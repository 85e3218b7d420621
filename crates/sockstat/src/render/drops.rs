//! `sockstat drops`: packets the kernel dropped over an interval, by reason, protocol and port,
//! as a table or one JSON document (doc/drops.schema.json).

use std::fmt::Write as _;

use serde::Serialize;

use crate::events::drops::{DropCount, Drops, PortFrom};
use crate::text::sanitize::for_terminal;

/// JSON schema version.
pub const VERSION: u32 = 1;

fn port_label(c: &DropCount) -> String {
    match c.port {
        Some((p, PortFrom::Socket)) => p.to_string(),
        Some((p, PortFrom::PacketDestination)) => format!("dst {p}"),
        None => "-".into(),
    }
}

/// The drops as text: a summary line, then one row per (reason, protocol, port), most first.
pub fn text(d: &Drops) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "=== {} packets dropped in {:.1} s ===",
        d.total(),
        d.interval.as_secs_f64()
    );
    if d.counts.is_empty() && d.uncounted == 0 {
        return s;
    }
    let _ = writeln!(s, "{:>10}  {:<28} {:<6} PORT", "PACKETS", "REASON", "PROTO");
    for c in &d.counts {
        let _ = writeln!(
            s,
            "{:>10}  {:<28} {:<6} {}",
            c.count,
            for_terminal(c.reason.as_bytes()),
            c.proto_name(),
            port_label(c)
        );
    }
    if d.uncounted > 0 {
        let _ = writeln!(
            s,
            "{:>10}  (not broken down: the kernel's table of reasons and ports was full)",
            d.uncounted
        );
    }
    s.push_str("PORT: the local port of the socket the packet was for; 'dst N': no socket, the packet's destination port\n");
    s
}

#[derive(Serialize)]
struct Row<'a> {
    reason: &'a str,
    proto: String,
    port: Option<u16>,
    port_from: Option<&'static str>,
    count: u64,
}

#[derive(Serialize)]
struct Doc<'a> {
    version: u32,
    interval_s: f64,
    total: u64,
    uncounted: u64,
    drops: Vec<Row<'a>>,
}

/// The drops as one JSON document.
pub fn json(d: &Drops) -> serde_json::Value {
    let doc = Doc {
        version: VERSION,
        interval_s: (d.interval.as_secs_f64() * 1000.0).round() / 1000.0,
        total: d.total(),
        uncounted: d.uncounted,
        drops: d
            .counts
            .iter()
            .map(|c| Row {
                reason: &c.reason,
                proto: c.proto_name(),
                port: c.port.map(|(p, _)| p),
                port_from: c.port.map(|(_, f)| f.name()),
                count: c.count,
            })
            .collect(),
    };
    serde_json::to_value(doc).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn table_and_json() {
        let d = Drops::new(
            vec![
                DropCount {
                    reason: "NO_SOCKET".into(),
                    proto: 6,
                    port: Some((9, PortFrom::PacketDestination)),
                    count: 3,
                },
                DropCount {
                    reason: "SOCKET_RCVBUFF".into(),
                    proto: 17,
                    port: Some((53, PortFrom::Socket)),
                    count: 7,
                },
            ],
            2,
            Duration::from_secs(5),
        );
        let t = text(&d);
        assert!(t.starts_with("=== 12 packets dropped in 5.0 s ==="), "{t}");
        assert!(
            t.contains("         7  SOCKET_RCVBUFF               udp    53\n"),
            "{t}"
        );
        assert!(
            t.contains("         3  NO_SOCKET                    tcp    dst 9\n"),
            "{t}"
        );
        assert!(t.contains("         2  (not broken down"), "{t}");
        let v = json(&d);
        assert_eq!(v["total"], 12);
        assert_eq!(v["drops"][1]["port_from"], "packet-destination");
        assert_eq!(v["drops"][0]["proto"], "udp");
    }
}
