//! `sockstat counters`: the counters report as a table or JSON. Reads a finished
//! [`CounterReport`]; writes to any `io::Write` and nothing else.
//!
//! The table is sorted smallest first so the biggest movers end just above the prompt, as the
//! seed's DTrace aggregation prints (doc/reference/cases.md#case-003-an-illumos-time-wait-review). A `!` marks counters whose rise
//! signals trouble.

use std::io::{self, Write};

use super::Options;
use serde::Serialize;

use super::json::{warning, JsonWarning};
use crate::counters::{CounterReport, CounterRow};
use crate::text::sanitize::for_terminal;

/// Version of the counters JSON document.
pub const SCHEMA_VERSION: u32 = 1;

const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[0m";

/// Writes the table: a title line (unless `-q`), a header, then one counter per line; with
/// `opts.zone` (`-Z`), a ZONE column first.
pub fn write_table(r: &CounterReport, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let amount_title = if r.interval_s.is_some() {
        "DELTA"
    } else {
        "VALUE"
    };
    let names: Vec<String> = r
        .counters
        .iter()
        .map(|c| format!("{}.{}", c.group, c.name))
        .collect();
    let amounts: Vec<String> = r
        .counters
        .iter()
        .map(|c| match c.amount() {
            Some(n) => n.to_string(),
            None => "reset".to_string(),
        })
        .collect();
    let zones: Vec<String> = r
        .counters
        .iter()
        .map(|c| {
            c.zone.as_ref().map_or_else(
                || "-".to_string(),
                |z| for_terminal(z.name.as_bytes()).into_owned(),
            )
        })
        .collect();
    let zw = zones
        .iter()
        .map(|z| z.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let zone_cell = |z: &str| {
        if opts.zone {
            format!("{z:<zw$}  ")
        } else {
            String::new()
        }
    };
    let nw = names.iter().map(String::len).max().unwrap_or(0).max(7);
    let aw = amounts
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(0)
        .max(amount_title.len());
    if opts.header {
        let hidden = match r.hidden_zero {
            0 => String::new(),
            n => format!("; {n} zero counters hidden, --all shows them"),
        };
        match r.interval_s {
            Some(s) => writeln!(
                out,
                "TCP/IP counter deltas over {s:.1} s, smallest first{hidden}"
            )?,
            None => writeln!(
                out,
                "TCP/IP counters since boot (or since the network namespace was created), smallest first{hidden}"
            )?,
        }
        writeln!(
            out,
            "! {}{:<nw$}  {:>aw$}  MEANING",
            zone_cell("ZONE"),
            "COUNTER",
            amount_title
        )?;
    }
    for (((c, name), amount), zone) in r.counters.iter().zip(&names).zip(&amounts).zip(&zones) {
        let mark = if c.trouble { "!" } else { " " };
        let meaning = c.meaning.unwrap_or("");
        let zone = zone_cell(zone);
        let line = format!("{mark} {zone}{name:<nw$}  {amount:>aw$}  {meaning}");
        let moved = c.reset || c.amount().is_some_and(|n| n != 0);
        if opts.color && c.trouble && moved {
            writeln!(out, "{RED}{}{RESET}", line.trim_end())?;
        } else {
            writeln!(out, "{}", line.trim_end())?;
        }
    }
    Ok(())
}

/// The `sockstat counters --json` document (doc/counters.schema.json), declared once:
/// [`write_json`] writes it (one counter a line; a test holds the two equal) and Python's
/// `counters()` builds its `CountersReport` from it.
#[derive(Serialize)]
pub struct Document<'a> {
    version: u32,
    interval_s: Option<f64>,
    counters: &'a [CounterRow],
    hidden_zero: usize,
    warnings: Vec<JsonWarning<'a>>,
}

/// The document of `r`; the warnings' details with `verbose`.
pub fn document(r: &CounterReport, verbose: bool) -> Document<'_> {
    Document {
        version: SCHEMA_VERSION,
        interval_s: r.interval_s,
        counters: &r.counters,
        hidden_zero: r.hidden_zero,
        warnings: r.warnings.iter().map(|w| warning(w, verbose)).collect(),
    }
}

/// Writes `{"version":1,"interval_s":...,"counters":[...],"hidden_zero":N,"warnings":[...]}`,
/// one counter per line (doc/counters.schema.json); with zones each counter has a `"zone"`.
pub fn write_json(r: &CounterReport, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    write!(out, "{{\"version\":{SCHEMA_VERSION},\"interval_s\":")?;
    serde_json::to_writer(&mut *out, &r.interval_s)?;
    out.write_all(b",\"counters\":[")?;
    for (i, c) in r.counters.iter().enumerate() {
        out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut *out, c)?;
    }
    if !r.counters.is_empty() {
        out.write_all(b"\n")?;
    }
    writeln!(out, "],\"hidden_zero\":{},", r.hidden_zero)?;
    super::json::write_warnings(&r.warnings, opts.verbose, out)?;
    out.write_all(b"}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{deltas, since_boot, CounterSet};

    fn report() -> CounterReport {
        let a = CounterSet::from_values([
            ("Tcp", "OutRsts", 10),
            ("Tcp", "InSegs", 100),
            ("TcpExt", "Unheard", 0),
            ("TcpExt", "TW", 5),
        ]);
        let b = CounterSet::from_values([
            ("Tcp", "OutRsts", 13),
            ("Tcp", "InSegs", 1100),
            ("TcpExt", "Unheard", 2),
            ("TcpExt", "TW", 1),
        ]);
        deltas(&a, &b, 2.0, false)
    }

    #[test]
    fn table_biggest_last_with_marks() {
        let mut out = Vec::new();
        write_table(&report(), &Options::new(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("TCP/IP counter deltas over 2.0 s"),
            "{text}"
        );
        assert!(lines[1].starts_with("! COUNTER"), "{text}");
        assert!(
            lines[2].starts_with("  TcpExt.TW") && lines[2].contains("reset"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("  TcpExt.Unheard") && lines[3].ends_with(" 2"),
            "{text}"
        );
        assert!(lines[4].starts_with("! Tcp.OutRsts"), "{text}");
        assert!(
            lines[5].starts_with("  Tcp.InSegs") && lines[5].contains("1000"),
            "{text}"
        );
        assert_eq!(lines.len(), 6);
    }

    #[test]
    fn the_written_document_is_the_declared_one() {
        let set = CounterSet::from_values([("Tcp", "ActiveOpens", 7)]);
        for r in [
            report(),
            since_boot(&set, false),
            since_boot(&CounterSet::default(), false),
        ] {
            for verbose in [false, true] {
                let mut opts = Options::new();
                opts.verbose = verbose;
                let mut out = Vec::new();
                write_json(&r, &opts, &mut out).unwrap();
                // The writer's newlines are its layout alone (a string's are escaped).
                let written = String::from_utf8(out).unwrap().replace('\n', "");
                let declared = serde_json::to_string(&document(&r, verbose)).unwrap();
                assert_eq!(written, declared);
            }
        }
    }

    #[test]
    fn json_contract() {
        let mut out = Vec::new();
        write_json(&report(), &Options::new(), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["interval_s"], 2.0);
        let c = v["counters"].as_array().unwrap();
        assert_eq!(c.len(), 4);
        let rst = c.iter().find(|c| c["name"] == "OutRsts").unwrap();
        assert_eq!(rst["group"], "Tcp");
        assert_eq!(rst["delta"], 3);
        assert_eq!(rst["trouble"], true);
        assert!(rst["meaning"].as_str().unwrap().contains("reset"));
        assert!(rst.get("value").is_none());
        let unheard = c.iter().find(|c| c["name"] == "Unheard").unwrap();
        assert!(unheard["meaning"].is_null());
        assert_eq!(v["warnings"][0]["code"], "counters-reset");

        let set = CounterSet::from_values([("Tcp", "ActiveOpens", 7)]);
        let mut out = Vec::new();
        write_json(&since_boot(&set, false), &Options::new(), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(v["interval_s"].is_null());
        assert_eq!(v["counters"][0]["value"], 7);
        assert!(v["counters"][0].get("delta").is_none());
    }
}
