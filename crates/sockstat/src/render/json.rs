//! The JSON contract, schema version 1 (`doc/json-schema.md`, `doc/sockstat.schema.json`).
//!
//! The document is streamed: the envelope is written by hand and each socket is serialized on
//! its own line as it is reached, so a listing of a million sockets is never held in memory as
//! one JSON value. Text that came from other processes is emitted as a JSON string; when it is
//! not valid UTF-8, the string has U+FFFD in place of the bad bytes and a sibling `<name>_hex`
//! field carries the exact bytes.
//!
//! This is also the library's serde form of the model: a [`Snapshot`] serializes to the listing
//! document and an [`Endpoint`] to the endpoint object, so there is one JSON shape, not two.

use std::io::{self, Write};
use std::net::IpAddr;

use serde::Serialize;

use super::Options;
use crate::model::tcp::{Memory, TcpDetails};
use crate::model::{Endpoint, Owner, OwnersStatus, RawString, Snapshot, Socket, UnixName, Warning};

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
pub(crate) struct JsonEndpoint<'a> {
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
    protocol_name: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ifindex: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interface: Option<&'a str>,
    /// A netlink address's port id.
    #[serde(skip_serializing_if = "Option::is_none")]
    port_id: Option<u32>,
    /// The multicast group a connected netlink socket named (remote end, when not 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<u32>,
    /// Every holder of a unix peer (`remote` only), whatever the filters selected.
    #[serde(skip_serializing_if = "Option::is_none")]
    peer_owners: Option<Vec<JsonOwner<'a>>>,
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

pub(crate) fn endpoint(ep: &Endpoint) -> JsonEndpoint<'_> {
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
            protocol_name: crate::text::fmt::ethertype_name(*protocol),
            ifindex: Some(*ifindex),
            ..Default::default()
        },
        Endpoint::Netlink {
            protocol,
            port_id,
            group,
        } => JsonEndpoint {
            protocol: Some(u16::from(*protocol)),
            protocol_name: sockstat_wire::netlink_diag::protocol_name(*protocol),
            port_id: Some(*port_id),
            group: (*group != 0).then_some(*group),
            ..Default::default()
        },
        // No address is known; the kernel's protocol name is the socket's `kernel_protocol`.
        Endpoint::Unlisted(_) => JsonEndpoint::default(),
    }
}

#[derive(Serialize)]
pub(crate) struct JsonOwner<'a> {
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
    /// Kind `other` only: the kernel's name of its protocol.
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_protocol: Option<std::borrow::Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_protocol_hex: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timer: Option<JsonTimer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp: Option<&'a TcpDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<&'a Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cgroup: Option<JsonCgroup<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bound_ifindex: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bound_interface: Option<&'a str>,
}

#[derive(Serialize)]
pub(crate) struct JsonCgroup<'a> {
    id: u64,
    path: Option<&'a str>,
}

#[derive(Serialize)]
pub(crate) struct JsonTimer {
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

/// One warning as every document's `warnings` array holds it.
#[derive(Serialize)]
pub(crate) struct JsonWarning<'a> {
    code: &'a str,
    count: Option<u64>,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a [String]>,
}

/// Every holder of `s` as the contract's owner objects.
pub(crate) fn owners<'a>(snap: &'a Snapshot, s: &'a Socket, opts: &Options) -> Vec<JsonOwner<'a>> {
    owner_objects(snap, &s.owners, opts)
}

/// Holders as the contract's owner objects.
fn owner_objects<'a>(
    snap: &'a Snapshot,
    owners: &'a [Owner],
    opts: &Options,
) -> Vec<JsonOwner<'a>> {
    owners
        .iter()
        .map(|o| {
            let h = snap.holder(o);
            let cmd = h.command.map(|c| text(c.as_bytes()));
            let (args, args_hex) = match h
                .process
                .and_then(|p| p.args.as_ref())
                .filter(|_| opts.args)
            {
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
                pid: h.pid,
                fd: h.fd,
                command,
                command_hex,
                uid: h.uid,
                user: h.user,
                args,
                args_hex,
            }
        })
        .collect()
}

/// The socket's `"timer"` object, when asked for (`-T`) and reported.
pub(crate) fn timer(s: &Socket, opts: &Options) -> Option<JsonTimer> {
    s.timer.filter(|_| opts.tcp).map(|t| JsonTimer {
        kind: timer_kind(t.kind),
        expires_ms: t.expires_ms,
        retrans: t.retrans,
    })
}

/// The socket's `"cgroup"` object, when asked for (`--cgroup`) and reported.
pub(crate) fn cgroup<'a>(snap: &'a Snapshot, s: &Socket, opts: &Options) -> Option<JsonCgroup<'a>> {
    s.cgroup_id.filter(|_| opts.cgroup).map(|id| JsonCgroup {
        id,
        path: snap.cgroups.get(&id).map(String::as_str),
    })
}

/// The listed unix sockets by inode, to find a peer's holders.
pub(crate) type Listed<'a> = rustc_hash::FxHashMap<u64, &'a Socket>;

/// Indexes the snapshot's unix sockets by inode (empty when no socket has a unix peer).
pub(crate) fn listed_unix(snap: &Snapshot) -> Listed<'_> {
    if !snap
        .sockets
        .iter()
        .any(|s| matches!(s.remote, Some(Endpoint::UnixPeer { .. })))
    {
        return Listed::default();
    }
    snap.sockets
        .iter()
        .filter(|s| s.proto == crate::model::Proto::Unix)
        .filter_map(|s| Some((s.id?, s)))
        .collect()
}

/// One socket as the contract's socket object (the listing's, and the `"socket"` of an event).
pub(crate) fn socket<'a>(snap: &'a Snapshot, s: &'a Socket, opts: &Options) -> JsonSocket<'a> {
    socket_in(snap, s, opts, None)
}

/// [`socket`], finding a unix peer's holders through `listed` (else by a search of the
/// snapshot's sockets).
pub(crate) fn socket_in<'a>(
    snap: &'a Snapshot,
    s: &'a Socket,
    opts: &Options,
    listed: Option<&Listed<'a>>,
) -> JsonSocket<'a> {
    let mut local = endpoint(&s.local);
    if let Endpoint::Packet { ifindex, .. } = s.local {
        local.interface = snap.interface_name(s, ifindex);
    }
    let bound_ifindex = s.bound_ifindex.map(|i| i.get());
    let mut remote = s.remote.as_ref().map(endpoint);
    if let (Some(r), Some(Endpoint::UnixPeer { peer, .. })) = (remote.as_mut(), &s.remote) {
        let held = snap.peer_holders(*peer, |p| match listed {
            Some(l) => l.get(&p).copied(),
            None => snap
                .sockets
                .iter()
                .find(|x| x.proto == crate::model::Proto::Unix && x.id == Some(p)),
        });
        if !held.is_empty() {
            r.peer_owners = Some(owner_objects(snap, held, opts));
        }
    }
    let (kernel_protocol, kernel_protocol_hex) = match s.kernel_protocol() {
        Some(name) => {
            let t = text(name.as_bytes());
            (Some(t.text), t.hex)
        }
        None => (None, None),
    };
    JsonSocket {
        zone: snap.zone_of(s),
        id: s.id,
        cookie: s.cookie.map(|c| c.to_string()),
        proto: s.proto_name(),
        family: s.family.name(),
        sock_type: s.sock_type.name(),
        state: s.state.name(),
        local,
        remote,
        recv_q: s.recv_q,
        send_q: s.send_q,
        uid: s.uid,
        user: s.uid.and_then(|u| snap.user_name(u)),
        owners_status: s.owners_status,
        owners: owners(snap, s, opts),
        kernel_protocol,
        kernel_protocol_hex,
        timer: timer(s, opts),
        tcp: s.tcp.as_deref().filter(|_| opts.tcp || opts.congestion),
        memory: s.memory.as_deref().filter(|_| opts.memory),
        cgroup: cgroup(snap, s, opts),
        bound_ifindex,
        bound_interface: bound_ifindex.and_then(|i| snap.interface_name(s, i)),
    }
}

/// One warning as the contract's object; its details only when `verbose`.
pub(crate) fn warning(w: &Warning, verbose: bool) -> JsonWarning<'_> {
    JsonWarning {
        code: w.code.name(),
        count: w.count,
        message: &w.message,
        details: (verbose && !w.details.is_empty()).then_some(&w.details[..]),
    }
}

/// The listing document's socket objects of one snapshot, ready for any serde serializer: what
/// [`write()`] prints for each socket, for callers that build them one at a time or in other
/// representations of the same contract (the Python package, event streams). The lookups they share are made once, so a unix
/// socket's peer holders are found through an index instead of a search of every socket (a
/// search per socket made 100,000 objects quadratic).
pub struct SocketObjects<'a> {
    snap: &'a Snapshot,
    opts: Options,
    listed: Listed<'a>,
}

impl<'a> SocketObjects<'a> {
    /// Prepares the objects of `snap`'s sockets, rendered with `opts`.
    pub fn new(snap: &'a Snapshot, opts: &Options) -> SocketObjects<'a> {
        SocketObjects {
            snap,
            opts: opts.clone(),
            listed: listed_unix(snap),
        }
    }

    /// One socket of the snapshot as the listing's socket object.
    pub fn object(&self, s: &'a Socket) -> impl Serialize + 'a {
        self.json(s)
    }

    pub(crate) fn json(&self, s: &'a Socket) -> JsonSocket<'a> {
        socket_in(self.snap, s, &self.opts, Some(&self.listed))
    }
}

/// One warning as the documents' `warnings` array holds it (`details` only when `verbose`).
pub fn warning_object(w: &Warning, verbose: bool) -> impl Serialize + '_ {
    warning(w, verbose)
}

/// Writes the warnings array (shared by every JSON document sockstat prints).
pub fn write_warnings(warnings: &[Warning], verbose: bool, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(b"\"warnings\":[")?;
    for (i, w) in warnings.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &warning(w, verbose))?;
    }
    out.write_all(b"]")
}

/// Writes the listing document: `{"version":1,"sockets":[...],"warnings":[...]}`.
pub fn write(snap: &Snapshot, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    write!(out, "{{\"version\":{SCHEMA_VERSION},\"sockets\":[")?;
    let listed = listed_unix(snap);
    for (i, s) in snap.sockets.iter().enumerate() {
        out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut *out, &socket_in(snap, s, opts, Some(&listed)))?;
    }
    if !snap.sockets.is_empty() {
        out.write_all(b"\n")?;
    }
    out.write_all(b"],\n")?;
    write_warnings(&snap.warnings, opts.verbose, out)?;
    out.write_all(b"}\n")
}

/// Options that show every detail a snapshot holds (the serde form of a [`Snapshot`]).
fn everything() -> Options {
    Options {
        args: true,
        verbose: true,
        tcp: true,
        congestion: true,
        memory: true,
        cgroup: true,
        ..Options::new()
    }
}

impl Serialize for Snapshot {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        struct Sockets<'a>(&'a Snapshot, &'a Options);
        impl Serialize for Sockets<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let listed = listed_unix(self.0);
                s.collect_seq(
                    self.0
                        .sockets
                        .iter()
                        .map(|x| socket_in(self.0, x, self.1, Some(&listed))),
                )
            }
        }
        let opts = everything();
        let mut m = s.serialize_struct("Listing", 3)?;
        m.serialize_field("version", &SCHEMA_VERSION)?;
        m.serialize_field("sockets", &Sockets(self, &opts))?;
        m.serialize_field(
            "warnings",
            &self
                .warnings
                .iter()
                .map(|w| warning(w, true))
                .collect::<Vec<_>>(),
        )?;
        m.end()
    }
}

impl Serialize for Endpoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        endpoint(self).serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::changes::tests::tcp;
    use crate::model::{Owner, Process, UnixName, WarningCode};
    use serde_json::{json, Value};

    #[test]
    fn the_serde_form_of_a_snapshot_is_the_listing_document() {
        let mut s = tcp(Some(u64::MAX), 80, 10);
        s.owners = vec![Owner { pid: 7, fd: 3 }];
        s.owners_status = OwnersStatus::Known;
        let mut snap = Snapshot {
            sockets: vec![s],
            ..Snapshot::default()
        };
        snap.processes.insert(
            7,
            Process {
                pid: 7,
                command: Some(RawString::new(b"web\xff")),
                uid: Some(0),
                args: None,
            },
        );
        snap.warnings.push(Warning {
            code: WarningCode::OwnersHidden,
            count: Some(1),
            message: "one hidden".into(),
            details: vec!["pid 9".into()],
        });
        let serde = serde_json::to_value(&snap).unwrap();
        let mut written = Vec::new();
        write(&snap, &everything(), &mut written).unwrap();
        let written: Value = serde_json::from_slice(&written).unwrap();
        assert_eq!(serde, written);
        // The contract's spelling, not the model's field names: a cookie past 2^53 as a string.
        assert_eq!(serde["sockets"][0]["cookie"], u64::MAX.to_string());
        assert_eq!(serde["sockets"][0]["owners"][0]["command_hex"], "776562ff");
        assert_eq!(serde["warnings"][0]["details"][0], "pid 9");
    }

    #[test]
    fn an_endpoint_serializes_to_the_contracts_endpoint_object() {
        let v = |e: &Endpoint| serde_json::to_value(e).unwrap();
        assert_eq!(
            v(&Endpoint::Inet {
                addr: "2001:db8::1".parse().unwrap(),
                port: 443
            }),
            json!({"address": "2001:db8::1", "port": 443})
        );
        assert_eq!(
            v(&Endpoint::Unix(Some(UnixName::Abstract(RawString::new(
                b"bus"
            ))))),
            json!({"path": "@bus"})
        );
        assert_eq!(
            v(&Endpoint::UnixPeer {
                peer: 5,
                name: None
            }),
            json!({"peer": 5})
        );
        assert_eq!(v(&Endpoint::Unix(None)), json!({}));
    }
}
