//! [`measure`]: two samples and the close events between them, joined by cookie, into a
//! [`Report`] of what each connection moved over the interval (the counting rules are in the
//! module's documentation, `crate::top`).

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::time::SystemTime;

use crate::diagnose;
use crate::events::{ConnEvent, EventKind};
use crate::model::tcp::TcpInfo;
use crate::model::{counted, Family, Socket, State, Warning, WarningCode};
use crate::sample::Sample;

use super::{Conn, EventCoverage, Report, Seen, SocketAt};

/// What one interval gave, beside its two samples.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Interval {
    /// The close events of the interval (those of connections still in the later sample are
    /// left for the next interval: [`Report::carried`]).
    pub closes: Vec<Close>,
    /// What connection events covered.
    pub events: EventCoverage,
    /// The diagnosis rules' verdicts on the same two samples.
    pub diagnosis: diagnose::Report,
    /// When the later sample was taken (wall clock).
    pub time: Option<SystemTime>,
    /// When the later sample was taken on the monotonic clock of the events' timestamps
    /// ([`ConnEvent::monotonic_ns`]): a connection in neither sample that closed at or after it
    /// opened and closed after the later dump began, and waits for the next interval
    /// ([`Report::carried`]). `None`: every such close counts in this interval.
    pub taken_monotonic_ns: Option<u64>,
    /// The zone name of the namespace sockstat runs in, for samples taken without zones.
    pub own_zone: Option<String>,
}

/// A close event, with the index of the zone it happened in (in the later sample).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Close {
    /// The event.
    pub event: ConnEvent,
    /// Its zone: an index into the later sample's zones.
    pub zone: usize,
}

/// True for the sockets the view shows as connections: Internet sockets other than TCP
/// listeners and TIME-WAIT entries (which belong to no process and carry no counters).
pub fn shown(s: &Socket) -> bool {
    matches!(s.family, Family::Inet | Family::Inet6)
        && s.state != State::TimeWait
        && !(s.state == State::Listen && s.proto == crate::model::Proto::Tcp)
}

/// Payload the peer acknowledged: `bytes_acked` less the byte of sequence space the SYN took
/// (the kernel counts it once the handshake completes; a FIN acknowledged adds one more, which
/// this leaves in: at most one byte per connection's life).
fn payload_acked(i: &TcpInfo) -> Option<u64> {
    i.bytes_acked().map(|b| b.saturating_sub(1))
}

/// Payload received in order (`bytes_received` counts no SYN; a FIN adds one byte at the end,
/// left in as for [`payload_acked`]).
fn payload_received(i: &TcpInfo) -> Option<u64> {
    i.bytes_received()
}

fn info(s: &Socket) -> Option<&TcpInfo> {
    s.tcp.as_ref().map(|t| &t.info)
}

fn drops(s: &Socket) -> Option<u64> {
    s.memory.as_ref().and_then(|m| m.drops).map(u64::from)
}

/// Joins `before` and `after` by cookie with the interval's close events into a [`Report`].
pub fn measure(before: &Sample, after: Arc<Sample>, interval: Interval) -> Report {
    let interval_s = after.seconds_since(before);
    let zones: Vec<String> = after
        .zones
        .iter()
        .map(|z| {
            z.zone_name()
                .map(str::to_string)
                .or_else(|| interval.own_zone.clone())
                .unwrap_or_else(|| "global".to_string())
        })
        .collect();
    // Both samples are joined by cookie through their zones' indices (`ZoneSample::by_cookie`),
    // which the diagnosis of the same interval uses too. A cookie names one socket on the whole
    // host, whatever its namespace.
    let shows = |sample: &Sample, cookie: u64| {
        sample
            .zones
            .iter()
            .any(|z| z.by_cookie(cookie).is_some_and(shown))
    };
    let mut conns = Vec::with_capacity(after.zones.iter().map(|z| z.snapshot.sockets.len()).sum());
    let mut time_wait = 0u64;
    for (zi, z) in after.zones.iter().enumerate() {
        let before_zone = before.matching(z);
        for (index, s) in z.snapshot.sockets.iter().enumerate() {
            if s.state == State::TimeWait {
                time_wait += 1;
            }
            if !shown(s) {
                continue;
            }
            let at = SocketAt::After { zone: zi, index };
            let prior = s
                .cookie
                .and_then(|c| before_zone?.by_cookie(c))
                .filter(|p| shown(p));
            conns.push(counted_conn(at, zi, prior, s));
        }
    }
    // Close events by cookie: those of connections still in the later sample wait for the
    // next interval (they closed after its dump), and so do those of connections in neither
    // sample that closed after the later dump began: the events are drained after the sample,
    // which takes a while (a tenth of a second at 10k connections per second on a busy
    // machine), and counting them here would move them into the interval before their own.
    // A connection of the earlier sample is this interval's whenever it closed: the next
    // interval's earlier sample does not have it.
    let mut carried = Vec::new();
    let mut closes: FxHashMap<u64, Close> = FxHashMap::default();
    for c in interval.closes {
        if c.event.kind != EventKind::Close {
            continue;
        }
        let after_dump = interval
            .taken_monotonic_ns
            .is_some_and(|t| c.event.monotonic_ns >= t)
            && !shows(before, c.event.cookie);
        if shows(&after, c.event.cookie) || after_dump {
            carried.push(c);
        } else {
            closes.insert(c.event.cookie, c);
        }
    }
    let zone_of_key = |key: Option<u64>| {
        after
            .zones
            .iter()
            .position(|z| z.key == key)
            .unwrap_or_default()
    };
    let mut closed = Vec::new();
    let mut processes = HashMap::new();
    let mut users = HashMap::new();
    let events_on = interval.events.unavailable.is_none();
    let mut uncounted_closes = 0usize;
    // The earlier sample's shown sockets that the later one does not have: closed.
    let mut earlier_gone: Vec<(u64, &Socket, Option<u64>)> = before
        .zones
        .iter()
        .flat_map(|z| {
            z.snapshot
                .sockets
                .iter()
                .filter(|s| shown(s))
                .filter_map(move |s| Some((s.cookie?, s, z.key)))
        })
        .filter(|&(c, _, _)| !shows(&after, c))
        .collect();
    // One row per cookie (a snapshot lists a socket once, whatever its holders).
    earlier_gone.sort_by_key(|(c, _, _)| *c);
    earlier_gone.dedup_by_key(|(c, _, _)| *c);
    for (cookie, s, key) in earlier_gone {
        let close = closes.remove(&cookie);
        let (sent, received) = match (&close, info(s)) {
            (Some(c), Some(i)) => (
                c.event
                    .bytes_sent
                    .zip(payload_acked(i))
                    .map(|(end, start)| end.saturating_sub(start)),
                c.event
                    .bytes_received
                    .zip(payload_received(i))
                    .map(|(end, start)| end.saturating_sub(start)),
            ),
            _ => (None, None),
        };
        if s.proto == crate::model::Proto::Tcp && sent.is_none() {
            uncounted_closes += 1;
        }
        for o in &s.owners {
            if after
                .zones
                .iter()
                .all(|z| z.snapshot.process(o.pid).is_none())
            {
                if let Some(p) = before.zones.iter().find_map(|z| z.snapshot.process(o.pid)) {
                    if let Some(uid) = p.uid {
                        let name = before.zones.iter().find_map(|z| z.snapshot.users.get(&uid));
                        users.insert(uid, name.cloned().flatten());
                    }
                    processes.insert(o.pid, p.clone());
                }
            }
        }
        let rates = s.proto == crate::model::Proto::Tcp;
        conns.push(Conn {
            at: SocketAt::Closed(closed.len()),
            seen: Seen::Closed,
            zone: zone_of_key(key),
            sent: sent.filter(|_| rates),
            received: received.filter(|_| rates),
            retransmits: None,
            drops: None,
            findings: vec![],
            window_s: None,
            rtt_us: None,
        });
        closed.push((*s).clone());
    }
    // What is left closed in neither sample: opened and closed within the interval.
    let mut short = Vec::new();
    let mut short_process = Vec::new();
    let mut left: Vec<Close> = closes.into_values().collect();
    left.sort_by_key(|c| c.event.monotonic_ns);
    for c in left {
        let e = &c.event;
        let mut s = Socket::new(
            crate::model::Proto::Tcp,
            e.family,
            crate::model::SockType::Stream,
            State::Close,
            crate::model::Endpoint::Inet {
                addr: e.local.ip(),
                port: e.local.port(),
            },
            Some(crate::model::Endpoint::Inet {
                addr: e.remote.ip(),
                port: e.remote.port(),
            }),
        );
        s.cookie = Some(e.cookie);
        s.uid = Some(e.socket_uid);
        s.netns = Some(e.netns);
        conns.push(Conn {
            at: SocketAt::Short(short.len()),
            seen: Seen::Short,
            zone: c.zone,
            sent: e.bytes_sent.or(Some(0)),
            received: e.bytes_received.or(Some(0)),
            retransmits: None,
            drops: None,
            findings: vec![],
            window_s: None,
            rtt_us: None,
        });
        short.push(s);
        short_process.push(e.process.clone());
        if let Some(p) = &e.process {
            if after
                .zones
                .iter()
                .all(|z| z.snapshot.process(p.pid).is_none())
            {
                users.entry(p.uid).or_insert_with(|| p.user.clone());
                processes
                    .entry(p.pid)
                    .or_insert_with(|| crate::model::Process {
                        pid: p.pid,
                        command: Some(p.command.clone()),
                        uid: Some(p.uid),
                        args: None,
                    });
            }
        }
    }
    let mut report = Report {
        time: interval.time.unwrap_or_else(SystemTime::now),
        interval_s,
        sample: after,
        closed,
        short,
        short_process,
        conns,
        zones,
        findings: interval.diagnosis.findings,
        warnings: interval.diagnosis.warnings,
        processes,
        users,
        events: interval.events,
        time_wait,
        carried,
    };
    attach_findings(&mut report);
    if !events_on {
        let why = report.events.unavailable.clone().unwrap_or_default();
        report.warnings.push(Warning::new(
            WarningCode::ShortConnectionsUncounted,
            format!(
                "short connections not counted: connections that open and close between two \
                 refreshes are not seen, and the last bytes of those that close are not \
                 counted (connection events unavailable: {why}; run as root, or with \
                 CAP_BPF and CAP_PERFMON)"
            ),
        ));
    }
    if uncounted_closes > 0 && events_on {
        report.warnings.push(
            Warning::new(
                WarningCode::ClosedUncounted,
                format!(
                    "the last bytes of {} that closed during the interval are not counted \
                     (their close events were lost)",
                    counted(uncounted_closes, "TCP connection", "TCP connections")
                ),
            )
            .count(uncounted_closes as u64),
        );
    }
    if !report.events.lost.is_zero() {
        let n = report.events.lost.events();
        report.warnings.push(
            Warning::new(
                WarningCode::ClosedUncounted,
                format!(
                    "{n} connection events were lost during the interval: some short \
                     connections are not counted"
                ),
            )
            .count(n),
        );
    }
    report
}

/// A socket of the later sample, with what it moved since `prior` (its earlier sample), or
/// since it was created when there is none.
fn counted_conn(at: SocketAt, zone: usize, prior: Option<&Socket>, s: &Socket) -> Conn {
    let now = info(s);
    let was = prior.and_then(info);
    let delta = |f: fn(&TcpInfo) -> Option<u64>| -> Option<u64> {
        let n = f(now?)?;
        match prior {
            Some(_) => Some(n.saturating_sub(f(was?)?)),
            None => Some(n),
        }
    };
    let tcp = s.proto == crate::model::Proto::Tcp;
    Conn {
        at,
        seen: if prior.is_some() {
            Seen::Throughout
        } else {
            Seen::Opened
        },
        zone,
        sent: delta(payload_acked).filter(|_| tcp),
        received: delta(payload_received).filter(|_| tcp),
        retransmits: delta(|i| i.total_retrans().map(u64::from)).filter(|_| tcp),
        drops: match (drops(s), prior) {
            (Some(n), Some(p)) => drops(p).map(|b| n.saturating_sub(b)),
            (Some(n), None) => Some(n),
            (None, _) => None,
        },
        findings: vec![],
        window_s: read_at(s)
            .zip(prior.and_then(read_at))
            .map(|(now, was)| now.saturating_duration_since(was).as_secs_f64())
            .filter(|&w| w > 0.0),
        rtt_us: now.and_then(TcpInfo::rtt_us).filter(|&v| v > 0),
    }
}

/// When the sample read a socket's TCP counters.
fn read_at(s: &Socket) -> Option<std::time::Instant> {
    s.tcp.as_ref()?.read_at
}

/// Indexes each connection's findings (by cookie).
fn attach_findings(report: &mut Report) {
    let mut by_cookie: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
    for (i, f) in report.findings.iter().enumerate() {
        if let Some(c) = f.socket.as_ref().and_then(|s| s.cookie) {
            by_cookie.entry(c).or_default().push(i);
        }
    }
    let cookies: Vec<Option<u64>> = report
        .conns
        .iter()
        .map(|c| report.socket(c).cookie)
        .collect();
    for (c, cookie) in report.conns.iter_mut().zip(cookies) {
        if let Some(v) = cookie.and_then(|k| by_cookie.get(&k)) {
            c.findings = v.clone();
        }
    }
}
