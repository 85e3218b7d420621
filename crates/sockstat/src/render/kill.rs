//! `sockstat kill`'s output: the listing's table with a RESULT column first and a summary, or
//! the listing's JSON document with `"result"` (and `"reason"`) on every socket
//! (`doc/kill.schema.json`). Before the kill (the list to confirm, a dry run) there is no result
//! yet: the table is the listing's own.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use super::json::{self, JsonSocket, SCHEMA_VERSION};
use super::{table, Options};
use crate::kill::{tally, Attempt, Outcome};
use crate::model::Snapshot;

/// `"result"` of every socket in a dry run: nothing was attempted.
pub const WOULD_KILL: &str = "would-kill";

/// Writes the sockets as the listing's table; with `attempts` (one per socket, in order), a
/// RESULT column first.
pub fn write_table(
    snap: &Snapshot,
    attempts: Option<&[Attempt]>,
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    match attempts {
        None => table::write(snap, opts, out),
        Some(a) => {
            let cell = |i: usize| a.get(i).map_or("?", |a| a.outcome.name());
            let lead = table::Lead {
                title: "RESULT",
                cell: &cell,
            };
            table::write_with_lead(snap, opts, Some(&lead), out)
        }
    }
}

fn sockets(n: usize) -> String {
    crate::model::counted(n, "socket", "sockets")
}

/// The line after the table: what was done, in counts (`killed 3 sockets`, `killed 1 of 4
/// sockets; 2 gone already; 1 not permitted`).
pub fn summary(attempts: &[Attempt]) -> String {
    let t = tally(attempts);
    let n = |o: Outcome| t.get(&o).copied().unwrap_or(0);
    let total = attempts.len();
    let killed = n(Outcome::Killed);
    let mut line = if killed == total {
        format!("killed {}", sockets(total))
    } else if killed == 0 {
        format!("killed none of {}", sockets(total))
    } else {
        format!("killed {killed} of {}", sockets(total))
    };
    for (o, what) in [
        (Outcome::Gone, "gone already"),
        (Outcome::NotPermitted, "not permitted"),
        (Outcome::Unsupported, "not supported by this kernel"),
        (Outcome::Failed, "failed"),
    ] {
        if n(o) > 0 && killed != total {
            line.push_str(&format!("; {} {what}", n(o)));
        }
    }
    line
}

/// The reasons behind the outcomes, each once with how many sockets it concerns, in outcome
/// order: `  2 not permitted: closing a socket needs CAP_NET_ADMIN ...`.
pub fn reasons(attempts: &[Attempt]) -> Vec<String> {
    let mut by: BTreeMap<(Outcome, &str), usize> = BTreeMap::new();
    for a in attempts {
        if let Some(r) = &a.reason {
            *by.entry((a.outcome, r.as_str())).or_insert(0) += 1;
        }
    }
    by.into_iter()
        .map(|((o, r), n)| format!("{n} {}: {r}", o.name()))
        .collect()
}

#[derive(Serialize)]
struct KilledSocket<'a> {
    #[serde(flatten)]
    socket: JsonSocket<'a>,
    result: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

#[derive(Serialize)]
struct Summary {
    matched: usize,
    killed: usize,
    gone: usize,
    not_permitted: usize,
    unsupported: usize,
    failed: usize,
}

/// Writes the kill document: `{"version":1,"dry_run":..,"sockets":[...],"summary":{...},
/// "warnings":[...]}`. Each socket is the listing's object with `"result"` (`would-kill` in a
/// dry run, when `attempts` is `None`) and, when there is one, `"reason"`.
pub fn write_json(
    snap: &Snapshot,
    attempts: Option<&[Attempt]>,
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    write!(
        out,
        "{{\"version\":{SCHEMA_VERSION},\"dry_run\":{},\"sockets\":[",
        attempts.is_none()
    )?;
    for (i, s) in snap.sockets.iter().enumerate() {
        out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        let a = attempts.and_then(|a| a.get(i));
        let k = KilledSocket {
            socket: json::socket(snap, s, opts),
            result: a.map_or(WOULD_KILL, |a| a.outcome.name()),
            reason: a.and_then(|a| a.reason.as_deref()),
        };
        serde_json::to_writer(&mut *out, &k)?;
    }
    if !snap.sockets.is_empty() {
        out.write_all(b"\n")?;
    }
    let t = attempts.map(tally).unwrap_or_default();
    let n = |o: Outcome| t.get(&o).copied().unwrap_or(0);
    let summary = Summary {
        matched: snap.sockets.len(),
        killed: n(Outcome::Killed),
        gone: n(Outcome::Gone),
        not_permitted: n(Outcome::NotPermitted),
        unsupported: n(Outcome::Unsupported),
        failed: n(Outcome::Failed),
    };
    out.write_all(b"],\n\"summary\":")?;
    serde_json::to_writer(&mut *out, &summary)?;
    out.write_all(b",\n")?;
    json::write_warnings(&snap.warnings, opts.verbose, out)?;
    out.write_all(b"}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(o: Outcome, r: Option<&str>) -> Attempt {
        Attempt {
            outcome: o,
            reason: r.map(str::to_string),
        }
    }

    #[test]
    fn summaries() {
        assert_eq!(summary(&[a(Outcome::Killed, None)]), "killed 1 socket");
        assert_eq!(
            summary(&[
                a(Outcome::Killed, None),
                a(Outcome::Gone, None),
                a(Outcome::NotPermitted, Some("cap")),
                a(Outcome::NotPermitted, Some("cap")),
            ]),
            "killed 1 of 4 sockets; 1 gone already; 2 not permitted"
        );
        assert_eq!(
            summary(&[a(Outcome::Unsupported, Some("tw"))]),
            "killed none of 1 socket; 1 not supported by this kernel"
        );
        assert_eq!(
            reasons(&[
                a(Outcome::NotPermitted, Some("cap")),
                a(Outcome::Killed, None),
                a(Outcome::NotPermitted, Some("cap")),
                a(Outcome::Gone, Some("peer")),
            ]),
            ["1 gone: peer", "2 not-permitted: cap"]
        );
    }
}
