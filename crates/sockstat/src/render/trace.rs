//! A [`Trace`] drawn as an SVG picture: bytes acknowledged over time on top; below, on one byte
//! scale, the congestion window, the peer's window, the bytes in flight, the send buffer's limit
//! and what is queued against it. A send-buffer plateau is the orange send queue held at the
//! purple limit (the kernel lets it overshoot by up to one TSO packet) while the red in-flight
//! line stays well under the blue and green windows; a zero-window stall is the green line on
//! the floor with the acked line flat.
//!
//! The file is self-contained SVG 1.1 (no scripts, no external references), with one
//! `<polyline id="SERIES">` per series and the [`Summary`](crate::trace::Summary) as JSON in
//! `<metadata>`, so tests and tools can read the numbers back.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::text::fmt::{byte_rate, bytes};
use crate::text::sanitize;
use crate::trace::{Point, Trace};

const W: f64 = 1000.0;
const H: f64 = 720.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 160.0;
const TOP_Y0: f64 = 90.0;
const TOP_Y1: f64 = 300.0;
const BOT_Y0: f64 = 360.0;
const BOT_Y1: f64 = 660.0;

/// One line of the lower panel.
struct Series {
    id: &'static str,
    label: &'static str,
    color: &'static str,
    dash: Option<&'static str>,
    value: fn(&Point) -> Option<u64>,
}

const WINDOWS: [Series; 5] = [
    Series {
        id: "peer_window",
        label: "peer window",
        color: "#2ca02c",
        dash: None,
        value: |p| p.peer_window_bytes,
    },
    Series {
        id: "cwnd",
        label: "cwnd",
        color: "#1f77b4",
        dash: None,
        value: |p| p.cwnd_bytes,
    },
    Series {
        id: "sndbuf",
        label: "send buffer",
        color: "#9467bd",
        dash: Some("6 4"),
        value: |p| p.sndbuf_bytes,
    },
    Series {
        id: "send_queued",
        label: "send queue",
        color: "#ff7f0e",
        dash: Some("2 3"),
        value: |p| p.send_queued_bytes,
    },
    Series {
        id: "in_flight",
        label: "in flight",
        color: "#d62728",
        dash: None,
        value: |p| p.in_flight_bytes,
    },
];

/// Text for SVG: no control characters (XML 1.0 forbids most of them; they are escaped as the
/// table escapes them), markup characters as entities.
fn xml(s: &str) -> String {
    let s = sanitize::for_terminal(s.as_bytes());
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A tick step of 1, 2 or 5 × 10^k giving about `n` intervals up to `max`.
fn nice_step(max: f64, n: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// Byte ticks at 1, 2 or 5 × 10^k of the unit the scale reads in (B, KiB or MiB), so the
/// labels are round: `0.5 MiB, 1 MiB, 1.5 MiB`, not `1000 KiB, 1.9 MiB`.
fn byte_step(max: f64) -> f64 {
    let unit = if max >= 1024.0 * 1024.0 {
        1024.0 * 1024.0
    } else if max >= 1024.0 {
        1024.0
    } else {
        1.0
    };
    nice_step(max / unit, 5.0) * unit
}

struct Axis {
    max: f64,
    y0: f64,
    y1: f64,
}

impl Axis {
    fn y(&self, v: f64) -> f64 {
        let v = v.clamp(0.0, self.max);
        self.y1 - (v / self.max) * (self.y1 - self.y0)
    }
}

fn polyline(
    svg: &mut String,
    id: &str,
    color: &str,
    dash: Option<&str>,
    pts: &[(f64, f64)],
) -> fmt::Result {
    write!(
        svg,
        r#"<polyline id="{id}" fill="none" stroke="{color}" stroke-width="1.8""#
    )?;
    if let Some(d) = dash {
        write!(svg, r#" stroke-dasharray="{d}""#)?;
    }
    write!(svg, r#" data-points="{}" points=""#, pts.len())?;
    for (i, (x, y)) in pts.iter().enumerate() {
        if i > 0 {
            svg.push(' ');
        }
        write!(svg, "{x:.1},{y:.1}")?;
    }
    svg.push_str("\"/>\n");
    Ok(())
}

use std::fmt;

/// Writes `trace` as an SVG document. `title` names the connection (addresses, process); it is
/// escaped.
pub fn write_svg(trace: &Trace, title: &str, out: &mut impl Write) -> io::Result<()> {
    let svg = svg(trace, title).map_err(|_| io::Error::other("formatting the SVG"))?;
    out.write_all(svg.as_bytes())
}

/// The trace in short phrases, for the picture's header and the command's last line: the acked
/// (and received) rate, the share of busy time each limit held the sender back, zero-window
/// samples, how many samples over how long, the congestion control, when the connection
/// closed. Not escaped: the congestion name came from the kernel.
pub fn summary_facts(trace: &Trace) -> Vec<String> {
    let summary = trace.summary();
    let mut facts = Vec::new();
    if let Some(r) = summary.acked_bytes_per_sec {
        facts.push(format!("acked {}", byte_rate(r)));
    }
    if let Some(r) = summary.received_bytes_per_sec.filter(|&r| r > 0.0) {
        facts.push(format!("received {}", byte_rate(r)));
    }
    if let Some(sh) = summary.sndbuf_limited_share {
        facts.push(format!("send-buffer limited {:.0}%", sh * 100.0));
    }
    if let Some(sh) = summary.rwnd_limited_share {
        facts.push(format!("peer-window limited {:.0}%", sh * 100.0));
    }
    if summary.zero_window_samples > 0 {
        facts.push(format!(
            "zero window in {} of {} samples",
            summary.zero_window_samples, summary.samples
        ));
    }
    facts.push(format!(
        "{} samples over {:.1} s",
        summary.samples, summary.duration_s
    ));
    if let Some(cc) = &trace.congestion {
        facts.push(cc.clone());
    }
    if let Some(c) = trace.closed_at_s {
        facts.push(format!("closed at {c:.1} s"));
    }
    facts
}

fn svg(trace: &Trace, title: &str) -> Result<String, fmt::Error> {
    let pts = &trace.points;
    let summary = trace.summary();
    let t_max = pts.last().map_or(1.0, |p| p.t_s).max(1e-3);
    let x = |t: f64| LEFT + (t / t_max) * (W - LEFT - RIGHT);

    let base_acked = pts.iter().find_map(|p| p.bytes_acked).unwrap_or(0);
    let acked: Vec<(f64, f64)> = pts
        .iter()
        .filter_map(|p| {
            p.bytes_acked
                .map(|b| (p.t_s, b.saturating_sub(base_acked) as f64))
        })
        .collect();
    let top = Axis {
        max: acked.iter().map(|&(_, b)| b).fold(0.0, f64::max).max(1.0) * 1.05,
        y0: TOP_Y0,
        y1: TOP_Y1,
    };
    // The lower scale fits everything the sender controls; the peer's window (often far larger)
    // is cut at the top, with its largest value written beside it.
    let own_max = pts
        .iter()
        .flat_map(|p| {
            [
                p.cwnd_bytes,
                p.in_flight_bytes,
                p.sndbuf_bytes,
                p.send_queued_bytes,
            ]
        })
        .flatten()
        .max()
        .unwrap_or(0) as f64;
    let window_max = pts
        .iter()
        .filter_map(|p| p.peer_window_bytes)
        .max()
        .unwrap_or(0) as f64;
    let mut bot_max = (own_max * 1.25).max(1024.0);
    if window_max <= bot_max * 1.5 {
        bot_max = bot_max.max(window_max * 1.05);
    }
    let bot = Axis {
        max: bot_max,
        y0: BOT_Y0,
        y1: BOT_Y1,
    };

    let mut s = String::with_capacity(16 * 1024 + pts.len() * 80);
    writeln!(s, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    )?;
    writeln!(s, "<title>{}</title>", xml(title))?;
    writeln!(
        s,
        r#"<metadata id="summary">{}</metadata>"#,
        xml(&serde_json::to_string(&summary).map_err(|_| fmt::Error)?)
    )?;
    writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#)?;
    writeln!(
        s,
        r#"<text x="{LEFT}" y="28" font-size="15" font-weight="bold">{}</text>"#,
        xml(title)
    )?;
    writeln!(
        s,
        r##"<text x="{LEFT}" y="50" fill="#333">{}</text>"##,
        xml(&summary_facts(trace).join(" · "))
    )?;
    writeln!(
        s,
        r##"<text x="{LEFT}" y="68" fill="#666" font-size="11">limited shares: of the time the sender had data to send (tcpi_busy_time), the part stalled by each limit</text>"##
    )?;

    // Frames, grids and tick labels.
    for (axis, label) in [(&top, "bytes acked"), (&bot, "bytes")] {
        writeln!(
            s,
            r##"<rect x="{LEFT}" y="{}" width="{}" height="{}" fill="none" stroke="#999"/>"##,
            axis.y0,
            W - LEFT - RIGHT,
            axis.y1 - axis.y0
        )?;
        let step = byte_step(axis.max);
        let mut v = 0.0;
        while v <= axis.max {
            let y = axis.y(v);
            writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{}</text>"##,
                W - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                bytes(v)
            )?;
            v += step;
        }
        writeln!(
            s,
            r##"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle" fill="#444">{label}</text>"##,
            (axis.y0 + axis.y1) / 2.0
        )?;
    }
    let tstep = nice_step(t_max, 8.0);
    let mut t = 0.0;
    while t <= t_max + 1e-9 {
        for axis in [&top, &bot] {
            writeln!(
                s,
                r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#f2f2f2"/>"##,
                x(t),
                axis.y0,
                axis.y1
            )?;
        }
        writeln!(
            s,
            r##"<text x="{:.1}" y="{}" text-anchor="middle" fill="#444">{}</text>"##,
            x(t),
            BOT_Y1 + 18.0,
            if tstep < 1.0 {
                format!("{t:.1}")
            } else {
                format!("{t:.0}")
            }
        )?;
        t += tstep;
    }
    writeln!(
        s,
        r##"<text x="{:.1}" y="{}" text-anchor="middle" fill="#444">seconds</text>"##,
        (LEFT + W - RIGHT) / 2.0,
        BOT_Y1 + 40.0
    )?;

    // Data.
    let acked_xy: Vec<(f64, f64)> = acked.iter().map(|&(t, b)| (x(t), top.y(b))).collect();
    polyline(&mut s, "bytes_acked", "#000", None, &acked_xy)?;
    let mut legend_y = BOT_Y0 + 10.0;
    for ser in &WINDOWS {
        let xy: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|p| (ser.value)(p).map(|v| (x(p.t_s), bot.y(v as f64))))
            .collect();
        polyline(&mut s, ser.id, ser.color, ser.dash, &xy)?;
        if xy.is_empty() {
            continue;
        }
        let mut label = ser.label.to_string();
        if ser.id == "peer_window" && window_max > bot.max {
            label = format!("{label} (to {}, cut)", bytes(window_max));
        }
        writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{2:.1}" y2="{1:.1}" stroke="{3}" stroke-width="2"{4}/><text x="{5:.1}" y="{6:.1}">{7}</text>"#,
            W - RIGHT + 10.0,
            legend_y,
            W - RIGHT + 34.0,
            ser.color,
            ser.dash
                .map(|d| format!(r#" stroke-dasharray="{d}""#))
                .unwrap_or_default(),
            W - RIGHT + 40.0,
            legend_y + 4.0,
            xml(&label)
        )?;
        legend_y += 20.0;
    }
    writeln!(
        s,
        r#"<line x1="{0:.1}" y1="{1:.1}" x2="{2:.1}" y2="{1:.1}" stroke="black" stroke-width="2"/><text x="{3:.1}" y="{4:.1}">bytes acked</text>"#,
        W - RIGHT + 10.0,
        TOP_Y0 + 10.0,
        W - RIGHT + 34.0,
        W - RIGHT + 40.0,
        TOP_Y0 + 14.0
    )?;
    if pts.is_empty() {
        writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#a00">no samples</text>"##,
            (LEFT + W - RIGHT) / 2.0,
            (TOP_Y0 + TOP_Y1) / 2.0
        )?;
    }
    writeln!(s, "</svg>")?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, State};

    fn point(t: f64, acked: u64, wnd: u64) -> Point {
        Point {
            t_s: t,
            state: State::Established,
            bytes_acked: Some(acked),
            bytes_received: Some(0),
            cwnd_bytes: Some(40_000),
            peer_window_bytes: Some(wnd),
            in_flight_bytes: Some(16_000),
            not_sent_bytes: Some(1000),
            sndbuf_bytes: Some(32_768),
            send_queued_bytes: Some(30_000),
            rtt_us: Some(20_000),
            busy_time_us: Some((t * 1e6) as u64),
            rwnd_limited_us: Some(0),
            sndbuf_limited_us: Some((t * 0.9e6) as u64),
        }
    }

    fn trace(points: Vec<Point>) -> Trace {
        Trace {
            cookie: Some(1),
            local: Endpoint::Inet {
                addr: "192.0.2.1".parse().unwrap(),
                port: 40000,
            },
            remote: None,
            congestion: Some("cubic".into()),
            points,
            closed_at_s: None,
        }
    }

    #[test]
    fn every_series_is_drawn_with_every_sample() {
        let t = trace(
            (0..50)
                .map(|i| point(i as f64 * 0.1, i * 100_000, 3 << 20))
                .collect(),
        );
        let svg = svg(&t, "tcp 192.0.2.1:40000 -> 198.51.100.2:5001 <x & \"y\">").unwrap();
        for id in [
            "bytes_acked",
            "cwnd",
            "peer_window",
            "in_flight",
            "sndbuf",
            "send_queued",
        ] {
            assert!(
                svg.contains(&format!(r#"id="{id}""#)) && svg.contains(r#"data-points="50""#),
                "{id}"
            );
        }
        assert!(svg.contains("&lt;x &amp; &quot;y&quot;&gt;"));
        assert!(svg.contains("send-buffer limited 90%"), "{svg}");
        assert!(svg.contains("peer window (to 3 MiB, cut)"), "{svg}");
        assert!(svg.contains("acked 1 MB/s"), "{svg}");
    }

    #[test]
    fn hostile_titles_are_escaped_and_the_document_stays_xml() {
        let t = trace(vec![point(0.0, 0, 0)]);
        let svg = svg(&t, "evil\u{1b}[31m\u{0}</title><script>").unwrap();
        assert!(!svg.contains('\u{1b}') && !svg.contains('\u{0}'));
        assert!(!svg.contains("<script>"));
        assert!(svg.contains(r"evil\x1b[31m\x00&lt;/title&gt;&lt;script&gt;"));
    }

    #[test]
    fn an_empty_trace_still_draws() {
        let svg = svg(&trace(vec![]), "nothing").unwrap();
        assert!(svg.contains("no samples") && svg.ends_with("</svg>\n"));
    }

    #[test]
    fn ticks_and_labels() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(0.35, 8.0), 0.05);
        assert_eq!(byte_step(100.0 * 1024.0), 20.0 * 1024.0);
        assert_eq!(byte_step(3.1 * 1048576.0), 1048576.0);
        assert_eq!(byte_step(1.5 * 1048576.0), 0.5 * 1048576.0);
    }
}
