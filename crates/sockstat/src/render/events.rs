//! The sockets that opened and closed between two snapshots (`sockstat --events`), from the
//! [`Changes`] that [`crate::model::diff`] found: one line per socket for people, or one JSON
//! object per line (`doc/json-schema.md`, "Events"; `doc/events.schema.json`). Closed sockets
//! come first, as the older snapshot saw them (with the holders they had), then the opened ones.

use std::cell::OnceCell;
use std::io::{self, Write};
use std::time::SystemTime;

use serde::Serialize;

use super::json::{self, JsonSocket};
use super::{sanitize, unix_holders, Options};
use crate::model::{Changes, Endpoint, OwnersStatus, Snapshot, Socket};
use crate::text::fmt::{self, UnixHolders};

/// Version of the event record. Adding fields keeps it; renaming or removing one bumps it.
pub const VERSION: u32 = 1;

/// One event line: `+ tcp4 127.0.0.1:80 *:* LISTEN nginx[812] fd 6` (`sign` is `+` for an
/// opened socket, `-` for a closed one), with the zone first when `zone`. Every holder is listed
/// (`, `-separated), then `?` when others may hold it too (`partial`); `?` alone when none is
/// known, `-` when the owner scan was not asked for.
pub fn line(sign: char, snap: &Snapshot, s: &Socket, zone: bool) -> String {
    let mut out = String::new();
    push_line(&mut out, sign, snap, s, zone, &OnceCell::new());
    out
}

fn push_line(
    out: &mut String,
    sign: char,
    snap: &Snapshot,
    s: &Socket,
    zone: bool,
    holders: &OnceCell<UnixHolders>,
) {
    use std::fmt::Write as _;
    out.push(sign);
    out.push(' ');
    if zone {
        if let Some(z) = snap.zone_of(s) {
            out.push_str(&sanitize::for_terminal(z.name.as_bytes()));
            out.push(' ');
        }
    }
    fmt::write_proto(out, s);
    out.push(' ');
    fmt::write_local(out, s, snap, &UnixHolders::default());
    out.push(' ');
    if s.proto == crate::model::Proto::Other {
        fmt::write_foreign(out, s, &UnixHolders::default());
    } else {
        push_endpoint(out, s.remote.as_ref(), snap, holders);
    }
    out.push(' ');
    out.push_str(&s.state.name());
    out.push(' ');
    if s.owners.is_empty() {
        out.push(match s.owners_status {
            OwnersStatus::NotRequested => '-',
            _ => '?',
        });
    }
    for (i, o) in s.owners.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match snap.process(o.pid).and_then(|p| p.command.as_ref()) {
            Some(c) => out.push_str(&sanitize::for_terminal(c.as_bytes())),
            None => out.push('?'),
        }
        let _ = write!(out, "[{}] fd {}", o.pid, o.fd);
    }
    // As the table's `?` row after the holders: a process we cannot inspect may hold it too.
    if s.owners_status == OwnersStatus::Partial {
        out.push_str(", ?");
    }
}

/// An end as the listing writes it; the snapshot's unix holders are looked up only for an
/// unnamed unix peer, and then once per snapshot.
fn push_endpoint(
    out: &mut String,
    ep: Option<&Endpoint>,
    snap: &Snapshot,
    holders: &OnceCell<UnixHolders>,
) {
    let none = UnixHolders::default();
    let h = match ep {
        Some(Endpoint::UnixPeer { name: None, .. }) => holders.get_or_init(|| unix_holders(snap)),
        _ => &none,
    };
    fmt::write_endpoint(out, ep, h);
}

/// Writes one line per closed socket (`-`, from `prev`), then one per opened socket (`+`, from
/// `next`), as [`line()`] spells them.
pub fn write_text(
    prev: &Snapshot,
    next: &Snapshot,
    changes: &Changes,
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut buf = String::new();
    for (sign, snap, picked) in [('-', prev, &changes.closed), ('+', next, &changes.opened)] {
        let holders = OnceCell::new();
        for &i in picked {
            buf.clear();
            push_line(&mut buf, sign, snap, &snap.sockets[i], opts.zone, &holders);
            buf.push('\n');
            out.write_all(buf.as_bytes())?;
        }
    }
    Ok(())
}

/// One event as JSON: `{"version":1,"event":"open","time":"...","socket":{...}}`.
#[derive(Serialize)]
struct JsonEvent<'a> {
    version: u32,
    event: &'static str,
    time: &'a str,
    socket: JsonSocket<'a>,
}

/// Writes one JSON object per line for each closed socket (`"close"`, as `prev` saw it), then
/// for each opened one (`"open"`); `socket` is the listing's socket object, `time` is `time` in
/// UTC (RFC 3339).
pub fn write_json(
    prev: &Snapshot,
    next: &Snapshot,
    changes: &Changes,
    time: SystemTime,
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    let time = fmt::utc_timestamp(time);
    for (event, snap, picked) in [
        ("close", prev, &changes.closed),
        ("open", next, &changes.opened),
    ] {
        if picked.is_empty() {
            continue;
        }
        let objects = json::SocketObjects::new(snap, opts);
        for &i in picked {
            let e = JsonEvent {
                version: VERSION,
                event,
                time: &time,
                socket: objects.json(&snap.sockets[i]),
            };
            serde_json::to_writer(&mut *out, &e)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::changes::tests::tcp;
    use crate::model::{diff, Family, Owner, Process, RawString, UnixName};
    use serde_json::Value;
    use std::time::Duration;

    fn process(pid: u32, command: &[u8]) -> Process {
        Process {
            pid,
            command: Some(RawString::new(command)),
            uid: Some(0),
            args: None,
        }
    }

    #[test]
    fn a_line_names_every_holder() {
        let mut s = tcp(Some(1), 80, 10);
        s.owners = vec![Owner { pid: 812, fd: 6 }, Owner { pid: 813, fd: 6 }];
        s.owners_status = OwnersStatus::Known;
        let mut snap = Snapshot::default();
        snap.processes.insert(812, process(812, b"nginx"));
        assert_eq!(
            line('+', &snap, &s, false),
            "+ tcp4 127.0.0.1:80 *:* LISTEN nginx[812] fd 6, ?[813] fd 6"
        );
        let mut s = tcp(Some(1), 0, 10);
        s.family = Family::Inet6;
        s.local = Endpoint::Inet {
            addr: "::".parse().unwrap(),
            port: 0,
        };
        assert_eq!(line('-', &snap, &s, false), "- tcp6 *:* *:* LISTEN ?");
        s.owners_status = OwnersStatus::NotRequested;
        assert_eq!(line('-', &snap, &s, false), "- tcp6 *:* *:* LISTEN -");
        s.owners = vec![Owner { pid: 812, fd: 6 }];
        s.owners_status = OwnersStatus::Partial;
        assert_eq!(
            line('+', &snap, &s, false),
            "+ tcp6 *:* *:* LISTEN nginx[812] fd 6, ?"
        );
    }

    #[test]
    fn a_line_escapes_hostile_names() {
        let mut s = tcp(Some(1), 80, 10);
        s.owners = vec![Owner { pid: 5, fd: 3 }];
        let mut snap = Snapshot::default();
        snap.processes.insert(5, process(5, b"evil\x1b[2J"));
        let l = line('+', &snap, &s, false);
        assert!(!l.contains('\x1b'), "{l:?}");
        assert!(l.contains("evil\\x1b[2J[5] fd 3"), "{l:?}");
    }

    #[test]
    fn an_unnamed_unix_peer_is_named_by_its_holder() {
        let unix = |id: u64, peer: u64, pid: u32| {
            let mut s = tcp(Some(id), 0, id);
            s.proto = crate::model::Proto::Unix;
            s.family = Family::Unix;
            s.state = crate::model::State::Established;
            s.local = Endpoint::Unix(Some(UnixName::Path(RawString::new(b"/run/a.sock"))));
            s.remote = Some(Endpoint::UnixPeer { peer, name: None });
            s.owners = vec![Owner { pid, fd: 4 }];
            s.owners_status = OwnersStatus::Known;
            s
        };
        let snap = Snapshot {
            sockets: vec![unix(100, 101, 7), unix(101, 100, 8)],
            ..Snapshot::default()
        };
        let opened = Changes {
            opened: vec![0],
            closed: vec![],
        };
        let mut out = Vec::new();
        write_text(
            &Snapshot::default(),
            &snap,
            &opened,
            &Options::new(),
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "+ stream /run/a.sock [8 4] ESTABLISHED ?[7] fd 4\n"
        );
    }

    #[test]
    fn closed_sockets_come_first_as_the_older_snapshot_saw_them() {
        let mut gone = tcp(Some(1), 80, 10);
        gone.owners = vec![Owner { pid: 7, fd: 3 }];
        gone.owners_status = OwnersStatus::Known;
        let mut prev = Snapshot {
            sockets: vec![gone, tcp(Some(2), 81, 11)],
            ..Snapshot::default()
        };
        prev.processes.insert(7, process(7, b"web"));
        let next = Snapshot {
            sockets: vec![tcp(Some(2), 81, 11), tcp(Some(3), 82, 12)],
            ..Snapshot::default()
        };
        let ch = diff(&prev, &next);
        let mut out = Vec::new();
        write_text(&prev, &next, &ch, &Options::new(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "- tcp4 127.0.0.1:80 *:* LISTEN web[7] fd 3\n+ tcp4 127.0.0.1:82 *:* LISTEN ?\n"
        );

        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_358_401_123);
        let mut out = Vec::new();
        write_json(&prev, &next, &ch, t, &Options::new(), &mut out).unwrap();
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["version"], 1);
        assert_eq!(lines[0]["event"], "close");
        assert_eq!(lines[0]["time"], "2026-11-22T14:40:01.123Z");
        assert_eq!(lines[0]["socket"]["cookie"], "1");
        assert_eq!(lines[0]["socket"]["owners"][0]["command"], "web");
        assert_eq!(lines[1]["event"], "open");
        assert_eq!(lines[1]["socket"]["local"]["port"], 82);
        // The socket object is the listing's, byte for byte.
        let mut listing = Vec::new();
        json::write(&next, &Options::new(), &mut listing).unwrap();
        let listing: Value = serde_json::from_slice(&listing).unwrap();
        assert_eq!(lines[1]["socket"], listing["sockets"][1]);
    }
}
