//! The JSON contract, schema version 1 (`doc/json-schema.md`, `doc/sockstat.schema.json`).
//!
//! The document is streamed: the envelope is written by hand and each socket is serialized on
//! its own line as it is reached, so a listing of a million sockets is never held in memory as
//! one JSON value. Text that came from other processes is emitted as a JSON string; when it is
//! not valid UTF-8, the string has U+FFFD in place of the bad bytes and a sibling `<name>_hex`
//! field carries the exact bytes.

use std::io::{self, Write};
use std::net::IpAddr;

use serde::Serialize;

use super::Options;
use crate::model::tcp::{Memory, TcpDetails};
use crate::model::{Endpoint, OwnersStatus, RawString, Snapshot, Socket, UnixName, Warning};

/// Version of the JSON document. Adding fields keeps it; renaming or removing one bumps it.
pub const SCHEMA_VERSION: u32 = 1;

/// A string from another process, with its exact bytes when they are not UTF-8.
struct Text<'a> {
    text: std::borrow::Cow<'a, str>,
    hex: Option<String>,
}

fn text(b: &[u8]) -> Text<'_> {
    match std::str::from_utf8(b) {
        Ok(s) => Text {
            text: s.into(),
            hex: None,
        },
        Err(_) => Text {
            text: String::from_utf8_lossy(b),
            hex: Some(b.iter().map(|x| format!("{x:02x}")).collect()),
        },
    }
}

#[derive(Serialize, Default)]
struct JsonEndpoint<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peer: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<std::borrow::Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_hex: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ifindex: Option<u32>,
}

fn unix_path(name: &UnixName) -> (std::borrow::Cow<'_, str>, Option<String>) {
    match name {
        UnixName::Path(p) => {
            let t = text(p.as_bytes());
            (t.text, t.hex)
        }
        UnixName::Abstract(a) => {
            let t = text(a.as_bytes());
            let hex = t.hex.map(|h| format!("40{h}"));
            (format!("@{}", t.text).into(), hex)
        }
    }
}

fn endpoint(ep: &Endpoint) -> JsonEndpoint<'_> {
    match ep {
        Endpoint::Inet { addr, port } => JsonEndpoint {
            address: Some(*addr),
            port: Some(*port),
            ..Default::default()
        },
        Endpoint::Unix(None) => JsonEndpoint::default(),
        Endpoint::Unix(Some(name)) => {
            let (path, path_hex) = unix_path(name);
            JsonEndpoint {
                path: Some(path),
                path_hex,
                ..Default::default()
            }
        }
        Endpoint::UnixPeer { peer, name } => {
            let (path, path_hex) = match name {
                Some(n) => {
                    let (p, h) = unix_path(n);
                    (Some(p), h)
                }
                None => (None, None),
            };
            JsonEndpoint {
                peer: Some(*peer),
                path,
                path_hex,
                ..Default::default()
            }
        }
        Endpoint::Packet { protocol, ifindex } => JsonEndpoint {
            protocol: Some(*protocol),
            ifindex: Some(*ifindex),
            ..Default::default()
        },
    }
}

#[derive(Serialize)]
struct JsonOwner<'a> {
    pid: u32,
    fd: u32,
    command: Option<std::borrow::Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command_hex: Option<String>,
    uid: Option<u32>,
    user: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<Vec<std::borrow::Cow<'a, str>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args_hex: Option<Vec<Option<String>>>,
}

#[derive(Serialize)]
pub(crate) struct JsonSocket<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    zone: Option<&'a crate::zone::Zone>,
    id: Option<u64>,
    cookie: Option<String>,
    proto: &'static str,
    family: &'static str,
    #[serde(rename = "type")]
    sock_type: &'static str,
    state: std::borrow::Cow<'static, str>,
    local: JsonEndpoint<'a>,
    remote: Option<JsonEndpoint<'a>>,
    recv_q: u32,
    send_q: u32,
    uid: Option<u32>,
    user: Option<&'a str>,
    owners_status: OwnersStatus,
    owners: Vec<JsonOwner<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timer: Option<JsonTimer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp: Option<&'a TcpDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<&'a Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cgroup: Option<JsonCgroup<'a>>,
}

#[derive(Serialize)]
struct JsonCgroup<'a> {
    id: u64,
    path: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonTimer {
    kind: &'static str,
    expires_ms: u32,
    retrans: u8,
}

/// `idiag_timer` names (`inet_sk_diag_fill`; 7.1+ adds 5 = delayed ACK).
fn timer_kind(k: u8) -> &'static str {
    match k {
        0 => "off",
        1 => "retransmit",
        2 => "keepalive",
        3 => "time_wait",
        4 => "persist",
        5 => "delack",
        _ => "other",
    }
}

#[derive(Serialize)]
struct JsonWarning<'a> {
    code: &'a str,
    count: Option<u64>,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a [String]>,
}

/// One socket of the listing document (also the base of `sockstat kill`'s socket objects).
pub(crate) fn socket<'a>(snap: &'a Snapshot, s: &'a Socket, opts: &Options) -> JsonSocket<'a> {
    let owners = s
        .owners
        .iter()
        .map(|o| {
            let p = snap.process(o.pid);
            let cmd = p
                .and_then(|p| p.command.as_ref())
                .map(|c| text(c.as_bytes()));
            let uid = p.and_then(|p| p.uid);
            let (args, args_hex) = match p.and_then(|p| p.args.as_ref()).filter(|_| opts.args) {
                Some(a) => {
                    let texts: Vec<Text<'_>> =
                        a.iter().map(|x| text(RawString::as_bytes(x))).collect();
                    let any_hex = texts.iter().any(|t| t.hex.is_some());
                    let hex = any_hex.then(|| texts.iter().map(|t| t.hex.clone()).collect());
                    (Some(texts.into_iter().map(|t| t.text).collect()), hex)
                }
                None => (None, None),
            };
            let (command, command_hex) = match cmd {
                Some(t) => (Some(t.text), t.hex),
                None => (None, None),
            };
            JsonOwner {
                pid: o.pid,
                fd: o.fd,
                command,
                command_hex,
                uid,
                user: uid.and_then(|u| snap.user_name(u)),
                args,
                args_hex,
            }
        })
        .collect();
    JsonSocket {
        zone: snap.zone_of(s),
        id: s.id,
        cookie: s.cookie.map(|c| c.to_string()),
        proto: s.proto.name(),
        family: s.family.name(),
        sock_type: s.sock_type.name(),
        state: s.state.name(),
        local: endpoint(&s.local),
        remote: s.remote.as_ref().map(endpoint),
        recv_q: s.recv_q,
        send_q: s.send_q,
        uid: s.uid,
        user: s.uid.and_then(|u| snap.user_name(u)),
        owners_status: s.owners_status,
        owners,
        timer: s.timer.filter(|_| opts.tcp).map(|t| JsonTimer {
            kind: timer_kind(t.kind),
            expires_ms: t.expires_ms,
            retrans: t.retrans,
        }),
        tcp: s.tcp.as_deref().filter(|_| opts.tcp || opts.congestion),
        memory: s.memory.as_deref().filter(|_| opts.memory),
        cgroup: s.cgroup_id.filter(|_| opts.cgroup).map(|id| JsonCgroup {
            id,
            path: snap.cgroups.get(&id).map(String::as_str),
        }),
    }
}

/// Writes the warnings array (shared by every JSON document sockstat prints).
pub fn write_warnings(warnings: &[Warning], verbose: bool, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(b"\"warnings\":[")?;
    for (i, w) in warnings.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let jw = JsonWarning {
            code: w.code.name(),
            count: w.count,
            message: &w.message,
            details: (verbose && !w.details.is_empty()).then_some(&w.details[..]),
        };
        serde_json::to_writer(&mut *out, &jw)?;
    }
    out.write_all(b"]")
}

/// Writes the listing document: `{"version":1,"sockets":[...],"warnings":[...]}`.
pub fn write(snap: &Snapshot, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    write!(out, "{{\"version\":{SCHEMA_VERSION},\"sockets\":[")?;
    for (i, s) in snap.sockets.iter().enumerate() {
        out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut *out, &socket(snap, s, opts))?;
    }
    if !snap.sockets.is_empty() {
        out.write_all(b"\n")?;
    }
    out.write_all(b"],\n")?;
    write_warnings(&snap.warnings, opts.verbose, out)?;
    out.write_all(b"}\n")
}
