//! The TCP time series (`sockstat -T --json --watch`): for each refresh, one JSON object per
//! line for every TCP connection that has `tcp_info`, flat so that a line is one sample: the
//! time, the connection's identity (join samples on `cookie`), its ends and holders, then every
//! field of the listing's `"tcp"` object at the top level. The record is documented in
//! `doc/json-schema.md` ("The TCP time series") and `doc/series.schema.json`, version
//! [`VERSION`].

use std::borrow::Cow;
use std::io::{self, Write};
use std::time::SystemTime;

use serde::Serialize;

use super::json::{self, JsonCgroup, JsonEndpoint, JsonOwner, JsonTimer};
use super::Options;
use crate::model::tcp::{Memory, TcpDetails};
use crate::model::{Proto, Snapshot, Socket, State};
use crate::text::fmt;
use crate::zone::Zone;

/// Version of the series record. Adding fields keeps it; renaming or removing one bumps it.
pub const VERSION: u32 = 1;

/// One sample of one connection.
#[derive(Serialize)]
struct Record<'a> {
    version: u32,
    time: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    zone: Option<&'a Zone>,
    cookie: Option<String>,
    id: Option<u64>,
    proto: &'static str,
    family: &'static str,
    state: Cow<'static, str>,
    local: JsonEndpoint<'a>,
    remote: Option<JsonEndpoint<'a>>,
    recv_q: u32,
    send_q: u32,
    owners: Vec<JsonOwner<'a>>,
    #[serde(flatten)]
    tcp: &'a TcpDetails,
    #[serde(skip_serializing_if = "Option::is_none")]
    timer: Option<JsonTimer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<&'a Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cgroup: Option<JsonCgroup<'a>>,
}

/// The sockets the series follows: TCP and MPTCP connections (not listeners) for which the
/// kernel sent `tcp_info` (not TIME_WAIT or request sockets).
pub fn follows(s: &Socket) -> bool {
    matches!(s.proto, Proto::Tcp | Proto::Mptcp) && s.state != State::Listen && s.tcp.is_some()
}

/// Writes one record per line for each socket of `snap` that the series [`follows`], in the
/// listing's order, stamped `time` (UTC, RFC 3339). `timer`, `memory` and `cgroup` are there
/// when `opts` asks for them, as in the listing.
pub fn write(
    snap: &Snapshot,
    time: SystemTime,
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    let time = fmt::utc_timestamp(time);
    for s in snap.sockets.iter().filter(|s| follows(s)) {
        let Some(tcp) = s.tcp.as_deref() else {
            continue;
        };
        let r = Record {
            version: VERSION,
            time: &time,
            zone: snap.zone_of(s),
            cookie: s.cookie.map(|c| c.to_string()),
            id: s.id,
            proto: s.proto_name(),
            family: s.family.name(),
            state: s.state.name(),
            local: json::endpoint(&s.local),
            remote: s.remote.as_ref().map(json::endpoint),
            recv_q: s.recv_q,
            send_q: s.send_q,
            owners: json::owners(snap, s, opts),
            tcp,
            timer: json::timer(s, opts),
            memory: s.memory.as_deref().filter(|_| opts.memory),
            cgroup: json::cgroup(snap, s, opts),
        };
        serde_json::to_writer(&mut *out, &r)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::changes::tests::tcp;
    use crate::model::tcp::TcpInfo;
    use crate::model::{Endpoint, Owner, OwnersStatus, Process, RawString, Timer};
    use serde_json::Value;
    use std::time::Duration;

    fn details() -> Box<TcpDetails> {
        // A 6.18-length tcp_info: state ESTABLISHED, rtt 250 us, cwnd 10.
        let mut raw = vec![0u8; 280];
        raw[0] = 1;
        raw[68..72].copy_from_slice(&250u32.to_ne_bytes());
        raw[80..84].copy_from_slice(&10u32.to_ne_bytes());
        Box::new(TcpDetails {
            info: TcpInfo::from_bytes(&raw),
            congestion: Some("cubic".into()),
            bbr: None,
            read_at: None,
        })
    }

    fn connection(cookie: u64, port: u16) -> Socket {
        let mut s = tcp(Some(cookie), port, cookie + 100);
        s.state = State::Established;
        s.remote = Some(Endpoint::Inet {
            addr: "127.0.0.1".parse().unwrap(),
            port: 40000,
        });
        s.tcp = Some(details());
        s.timer = Some(Timer {
            kind: 2,
            expires_ms: 7000,
            retrans: 0,
        });
        s.owners = vec![Owner { pid: 42, fd: 5 }];
        s.owners_status = OwnersStatus::Known;
        s
    }

    /// The lines written, as text and parsed.
    fn records(
        snap: &Snapshot,
        opts: &Options,
    ) -> (Vec<String>, Vec<serde_json::Map<String, Value>>) {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_358_401_123);
        let mut out = Vec::new();
        write(snap, t, opts, &mut out).unwrap();
        let text: Vec<String> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        let parsed = text
            .iter()
            .map(|l| match serde_json::from_str(l).unwrap() {
                Value::Object(m) => m,
                other => panic!("not an object: {other}"),
            })
            .collect();
        (text, parsed)
    }

    #[test]
    fn one_flat_record_per_connection_with_tcp_info() {
        let mut listener = tcp(Some(1), 5432, 1);
        listener.tcp = Some(details());
        let mut time_wait = tcp(Some(2), 5432, 2);
        time_wait.state = State::TimeWait;
        let mut snap = Snapshot {
            sockets: vec![listener, time_wait, connection(3, 5432)],
            ..Snapshot::default()
        };
        snap.processes.insert(
            42,
            Process {
                pid: 42,
                command: Some(RawString::new(b"postgres")),
                uid: Some(0),
                args: None,
            },
        );
        let mut opts = Options::new();
        opts.tcp = true;
        let (text, r) = records(&snap, &opts);
        assert_eq!(r.len(), 1, "only the connection: {text:?}");
        assert!(
            text[0].starts_with(
                r#"{"version":1,"time":"2026-11-22T14:40:01.123Z","cookie":"3","id":103,"proto":"tcp","family":"inet","state":"ESTABLISHED","local":{"address":"127.0.0.1","port":5432},"remote":{"address":"127.0.0.1","port":40000},"recv_q":0,"send_q":128,"owners":[{"pid":42,"fd":5,"command":"postgres","uid":0,"user":null}],"ca_state":"open","#
            ),
            "{}",
            text[0]
        );
        let r = &r[0];
        assert_eq!(r["version"], 1);
        assert_eq!(r["time"], "2026-11-22T14:40:01.123Z");
        assert_eq!(r["cookie"], "3");
        assert_eq!(r["state"], "ESTABLISHED");
        assert_eq!(r["local"]["port"], 5432);
        assert_eq!(r["owners"][0]["command"], "postgres");
        assert_eq!(r["rtt_us"], 250);
        assert_eq!(r["cwnd_pkts"], 10);
        assert_eq!(r["congestion"], "cubic");
        assert_eq!(r["tcp_info_bytes"], 280);
        assert_eq!(r["timer"]["kind"], "keepalive");
        assert!(!r.contains_key("tcp") && !r.contains_key("memory") && !r.contains_key("zone"));
    }

    #[test]
    fn the_tcp_fields_are_the_listings() {
        let snap = Snapshot {
            sockets: vec![connection(3, 5432)],
            ..Snapshot::default()
        };
        let mut opts = Options::new();
        opts.tcp = true;
        let r = &records(&snap, &opts).1[0];
        let mut listing = Vec::new();
        json::write(&snap, &opts, &mut listing).unwrap();
        let listing: Value = serde_json::from_slice(&listing).unwrap();
        let Value::Object(tcp) = &listing["sockets"][0]["tcp"] else {
            panic!("no tcp object: {listing}");
        };
        for (k, v) in tcp {
            assert_eq!(r.get(k), Some(v), "{k}");
        }
    }
}
