//! CSV: a header row, then one row per (socket, holder) like the table, with every column
//! (`user,command,pid,fd,proto,local_address,foreign_address,state,recv_q,send_q,id,uid`, plus
//! `args` with `-a`). Quoting follows RFC 4180; cells a spreadsheet would run as a formula are
//! neutralized with a leading `'`. Empty cells mean "unknown" (the table's `?`).

use std::io::{self, Write};

use super::{row_uid, rows, sanitize, unix_holders, user_label, Options};
use crate::model::Snapshot;

fn cell(out: &mut Vec<u8>, text: &str) {
    let text = sanitize::for_csv_cell(text);
    if text.contains([',', '"', '\n', '\r']) {
        out.push(b'"');
        out.extend_from_slice(text.replace('"', "\"\"").as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(text.as_bytes());
    }
}

/// Writes the CSV.
pub fn write(snap: &Snapshot, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let holders = unix_holders(snap);
    let mut header = String::new();
    if opts.zone {
        header.push_str("zone,");
    }
    header.push_str(
        "user,command,pid,fd,proto,local_address,foreign_address,state,recv_q,send_q,id,uid",
    );
    if opts.args {
        header.push_str(",args");
    }
    header.push('\n');
    if opts.header {
        out.write_all(header.as_bytes())?;
    }
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut tmp = String::new();
    for (s, o) in rows(snap) {
        line.clear();
        let process = o.and_then(|o| snap.process(o.pid));
        let uid = row_uid(snap, s, o);
        if opts.zone {
            cell(
                &mut line,
                snap.zone_of(s).map(|z| z.name.as_str()).unwrap_or(""),
            );
            line.push(b',');
        }
        let fields: [String; 12] = [
            uid.map(|u| user_label(snap, u)).unwrap_or_default(),
            process
                .and_then(|p| p.command.as_ref())
                .map(|c| sanitize::for_terminal(c.as_bytes()).into_owned())
                .unwrap_or_default(),
            o.map(|o| o.pid.to_string()).unwrap_or_default(),
            o.map(|o| o.fd.to_string()).unwrap_or_default(),
            {
                tmp.clear();
                crate::text::fmt::write_proto(&mut tmp, s);
                tmp.clone()
            },
            {
                tmp.clear();
                crate::text::fmt::write_local(&mut tmp, s, snap, &holders);
                tmp.clone()
            },
            {
                tmp.clear();
                crate::text::fmt::write_foreign(&mut tmp, s, &holders);
                tmp.clone()
            },
            s.state.name().into_owned(),
            s.recv_q.to_string(),
            s.send_q.to_string(),
            s.id.map(|i| i.to_string()).unwrap_or_default(),
            uid.map(|u| u.to_string()).unwrap_or_default(),
        ];
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                line.push(b',');
            }
            cell(&mut line, f);
        }
        if opts.args {
            line.push(b',');
            let args = process
                .and_then(|p| p.args.as_ref())
                .map(|a| {
                    a.iter()
                        .map(|x| sanitize::for_terminal(x.as_bytes()).into_owned())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            cell(&mut line, &args);
        }
        line.push(b'\n');
        out.write_all(&line)?;
    }
    Ok(())
}
