//! `--summary`: socket counts by protocol, family and state instead of rows (counting sockets,
//! not (socket, holder) rows, so a socket shared by two processes counts once).

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use super::Options;
use crate::model::{Family, Proto, Snapshot, State};

/// One line of the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Count {
    /// Protocol (`icmp6` for IPv6 ping sockets in JSON, as in the listing).
    #[serde(serialize_with = "proto_in_family", rename = "proto")]
    pub proto: (Proto, Family),
    /// Address family.
    pub family: Family,
    /// State.
    pub state: State,
    /// Sockets.
    pub count: u64,
}

/// Counts the snapshot's sockets by (protocol, family, state), in output order.
pub fn counts(snap: &Snapshot) -> Vec<Count> {
    let mut m: BTreeMap<(Proto, Family, State), u64> = BTreeMap::new();
    for s in &snap.sockets {
        *m.entry((s.proto, s.family, s.state)).or_default() += 1;
    }
    m.into_iter()
        .map(|((proto, family, state), count)| Count {
            proto: (proto, family),
            family,
            state,
            count,
        })
        .collect()
}

fn proto_in_family<S: serde::Serializer>(p: &(Proto, Family), s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.0.name_in(p.1))
}

fn label(proto: Proto, family: Family) -> String {
    match family {
        Family::Inet => format!("{proto}4"),
        Family::Inet6 => format!("{proto}6"),
        _ => proto.to_string(),
    }
}

/// Writes the summary as a table.
pub fn write_table(snap: &Snapshot, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let c = counts(snap);
    let total: u64 = c.iter().map(|x| x.count).sum();
    let sw = c
        .iter()
        .map(|x| x.state.name().len())
        .max()
        .unwrap_or(0)
        .max(5);
    if opts.header {
        writeln!(out, "{:<8} {:<sw$} {:>8}", "PROTO", "STATE", "COUNT")?;
    }
    for x in &c {
        writeln!(
            out,
            "{:<8} {:<sw$} {:>8}",
            label(x.proto.0, x.family),
            x.state.name(),
            x.count
        )?;
    }
    writeln!(out, "{:<8} {:<sw$} {:>8}", "total", "", total)
}

/// Writes the summary as JSON: `{"version":1,"summary":[...],"total":N,"warnings":[...]}`.
pub fn write_json(snap: &Snapshot, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let c = counts(snap);
    let total: u64 = c.iter().map(|x| x.count).sum();
    write!(
        out,
        "{{\"version\":{},\"summary\":",
        super::json::SCHEMA_VERSION
    )?;
    serde_json::to_writer(&mut *out, &c)?;
    write!(out, ",\"total\":{total},")?;
    super::json::write_warnings(&snap.warnings, opts.verbose, out)?;
    out.write_all(b"}\n")
}

/// Writes the summary as CSV: `proto,family,state,count`.
pub fn write_csv(snap: &Snapshot, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    if opts.header {
        writeln!(out, "proto,family,state,count")?;
    }
    for x in counts(snap) {
        writeln!(
            out,
            "{},{},{},{}",
            x.proto.0.name_in(x.family),
            x.family.name(),
            x.state,
            x.count
        )?;
    }
    Ok(())
}
