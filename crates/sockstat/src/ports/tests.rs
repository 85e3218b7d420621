//! Unit tests of the port analysis, and the socket builder other modules' tests share.

use super::*;
use crate::model::{Endpoint, Family, Proto, SockType, Socket, State, Timer};
use crate::sample::ZoneSample;

pub(crate) fn sock(state: State, local: (&str, u16), remote: Option<(&str, u16)>) -> Socket {
    Socket {
        timer: (state == State::TimeWait).then_some(Timer {
            kind: TIMER_TIME_WAIT,
            expires_ms: 30_000,
            retrans: 0,
        }),
        ..Socket::new(
            Proto::Tcp,
            Family::Inet,
            SockType::Stream,
            state,
            Endpoint::Inet {
                addr: local.0.parse().unwrap(),
                port: local.1,
            },
            remote.map(|(a, p)| Endpoint::Inet {
                addr: a.parse().unwrap(),
                port: p,
            }),
        )
    }
}

fn tw(local_port: u16, dst: (&str, u16), left_ms: u32, cookie: u64) -> Socket {
    let mut s = sock(State::TimeWait, ("10.0.0.1", local_port), Some(dst));
    s.timer.as_mut().unwrap().expires_ms = left_ms;
    s.cookie = Some(cookie);
    s
}

fn sysctls(lo: u16, hi: u16, reserved: &str) -> Sysctls {
    Sysctls {
        ip_local_port_range: Some((lo, hi)),
        ip_local_reserved_ports: sockstat_wire::sysctl::port_list(reserved)
            .ok()
            .map(PortSet::from_ranges),
        tcp_tw_reuse: Some(0),
        tcp_tw_reuse_delay_ms: Some(1000),
        tcp_timestamps: Some(1),
        tcp_max_tw_buckets: Some(1000),
        ..Sysctls::default()
    }
}

fn snap(sockets: Vec<Socket>) -> Snapshot {
    Snapshot {
        sockets,
        ..Snapshot::default()
    }
}

fn run(s: &Snapshot, sys: &Sysctls) -> PortsReport {
    analyze(&PortsInput {
        snapshot: s,
        earlier: None,
        interval_s: None,
        sysctls: sys,
        counters: None,
        time_wait_total: None,
        filter: None,
    })
}

fn n_to(n: u16, dst: (&str, u16)) -> Vec<Socket> {
    (0..n)
        .map(|i| tw(40000 + i, dst, 1000 + u32::from(i) * 100, u64::from(i)))
        .collect()
}

#[test]
fn boundaries_exactly_50_and_80_percent() {
    assert_eq!(usage_level(49, 100), None);
    assert_eq!(usage_level(50, 100), Some(Severity::Warning));
    assert_eq!(usage_level(79, 100), Some(Severity::Warning));
    assert_eq!(usage_level(80, 100), Some(Severity::Critical));
    assert_eq!(usage_level(0, 0), None);
    assert_eq!(usage_level(1, 0), Some(Severity::Critical));

    let sys = sysctls(40000, 40009, "");
    let r = run(&snap(n_to(5, ("10.0.0.2", 80))), &sys);
    assert_eq!(r.destinations[0].usage, 0.5);
    assert_eq!(r.destinations[0].level, Some(Severity::Warning));
    assert_eq!(r.findings[0].code, "ephemeral-ports-warning");
    let r = run(&snap(n_to(8, ("10.0.0.2", 80))), &sys);
    assert_eq!(r.destinations[0].usage, 0.8);
    assert_eq!(r.destinations[0].level, Some(Severity::Critical));
    assert_eq!(r.findings[0].code, "ephemeral-ports-critical");
    assert!(
        r.findings[0].summary.contains("uses 8 of 10"),
        "{:?}",
        r.findings
    );
    assert!(r.findings[0].advice.contains("tcp_tw_reuse=0"));
    assert!(
        r.findings[0].advice.ends_with(
            "; to free the 8 ports held in TIME-WAIT now (Linux 6.0+): sockstat kill --state \
             TIME_WAIT --src 10.0.0.1 --dst 10.0.0.2 --dport 80"
        ),
        "{:?}",
        r.findings
    );
    let r = run(&snap(n_to(4, ("10.0.0.2", 80))), &sys);
    assert_eq!(r.destinations[0].level, None);
    assert!(r.findings.is_empty(), "{:?}", r.findings);
}

/// In a zone, the command that frees the TIME-WAIT ports closes them in that zone.
#[test]
fn the_kill_command_names_the_zone() {
    let zone = ZoneSample {
        zone: Some(Zone {
            name: "web-1".into(),
            kind: crate::zone::ZoneKind::Docker,
            netns_inode: Some(4026532000),
            container_id: None,
            runtime: None,
            pod: None,
        }),
        snapshot: snap(n_to(8, ("10.0.0.2", 80))),
        sysctls: sysctls(40000, 40009, ""),
        ..ZoneSample::default()
    };
    let r = analyze_zone(&zone, None, None, None);
    assert_eq!(r.findings[0].code, "ephemeral-ports-critical");
    assert!(
        r.findings[0].advice.ends_with(
            "sockstat kill --state TIME_WAIT --src 10.0.0.1 --dst 10.0.0.2 --dport 80 -z web-1"
        ),
        "{:?}",
        r.findings
    );
}

#[test]
fn reserved_ports_leave_the_range() {
    let sys = sysctls(40000, 40009, "40000-40004,50000");
    let r = run(&snap(n_to(10, ("10.0.0.2", 80))), &sys);
    assert_eq!(r.range.reserved, 5);
    assert_eq!(r.range.usable, 5);
    // Sockets on reserved ports (bound explicitly) are not counted.
    assert_eq!(r.destinations[0].count, 5);
    assert_eq!(r.destinations[0].usage, 1.0);
    assert_eq!(r.range.sustainable_rate_per_s, 5.0 / 60.0);
}

#[test]
fn a_range_of_one_port() {
    let sys = sysctls(40000, 40000, "");
    let r = run(&snap(n_to(1, ("10.0.0.2", 80))), &sys);
    assert_eq!(r.range.usable, 1);
    assert_eq!(r.destinations[0].count, 1);
    assert_eq!(r.destinations[0].level, Some(Severity::Critical));
    // All of it reserved: nothing usable, one critical finding.
    let sys = sysctls(40000, 40000, "40000");
    let r = run(&snap(vec![]), &sys);
    assert_eq!(r.range.usable, 0);
    assert_eq!(r.findings[0].code, "no-ephemeral-ports");
}

#[test]
fn grouping_states_and_time_left() {
    let sys = sysctls(40000, 40099, "");
    let mut v = n_to(3, ("10.0.0.2", 80));
    v.push(sock(
        State::Established,
        ("10.0.0.1", 40050),
        Some(("10.0.0.2", 80)),
    ));
    v.push(sock(
        State::Established,
        ("10.0.0.1", 40051),
        Some(("10.0.0.2", 443)),
    ));
    // Outside the range, a listener and an unconnected socket: not counted.
    v.push(sock(
        State::Established,
        ("10.0.0.1", 1000),
        Some(("10.0.0.2", 80)),
    ));
    v.push(sock(State::Listen, ("0.0.0.0", 22), None));
    v.push(sock(State::Close, ("10.0.0.1", 40060), None));
    let r = run(&snap(v), &sys);
    assert_eq!(r.destinations.len(), 2);
    let d = &r.destinations[0];
    assert_eq!((d.remote_port, d.count, d.time_wait), (80, 4, 3));
    assert_eq!(d.states["TIME_WAIT"], 3);
    assert_eq!(d.states["ESTABLISHED"], 1);
    assert_eq!(
        d.time_wait_left,
        Some(TimeLeft {
            min_ms: 1000,
            max_ms: 1200
        })
    );
    assert_eq!(d.new_time_wait, None);
    assert_eq!(r.destinations[1].remote_port, 443);
    assert_eq!(r.time_wait.count, 3);
    assert_eq!(r.time_wait.max_buckets, Some(1000));
}

#[test]
fn server_view_groups_time_wait_by_client() {
    let sys = sysctls(40000, 40099, "");
    let mut v = vec![sock(State::Listen, ("0.0.0.0", 40010), None)];
    // Server-side TIME-WAIT on the listening port (which is inside the range: still a
    // server, not a client).
    for (i, client) in [("10.0.0.7", 5000), ("10.0.0.7", 5001), ("10.0.0.8", 6000)]
        .into_iter()
        .enumerate()
    {
        let mut s = sock(State::TimeWait, ("10.0.0.1", 40010), Some(client));
        s.cookie = Some(i as u64);
        v.push(s);
    }
    v.push(sock(
        State::Established,
        ("10.0.0.1", 40010),
        Some(("10.0.0.8", 6001)),
    ));
    let r = run(&snap(v), &sys);
    assert!(r.destinations.is_empty(), "{:?}", r.destinations);
    assert_eq!(r.servers.len(), 1);
    let s = &r.servers[0];
    assert_eq!((s.local_port, s.time_wait, s.connections), (40010, 3, 1));
    assert_eq!(s.clients[0].address, "10.0.0.7".parse::<IpAddr>().unwrap());
    assert_eq!((s.clients[0].time_wait, s.clients[0].ports), (2, 2));
    assert_eq!(s.clients[1].connections, 1);
    assert_eq!(r.findings[0].code, "server-time-wait");
}

#[test]
fn interval_counts_new_entries_and_counter_deltas() {
    let sys = sysctls(40000, 40099, "");
    let before = snap(n_to(2, ("10.0.0.2", 80)));
    let mut later = n_to(2, ("10.0.0.2", 80));
    // Port 40000 reused: the same tuple with a new cookie is a new entry.
    later[0].cookie = Some(99);
    later.extend((2..20).map(|i| tw(40000 + i, ("10.0.0.2", 80), 59_000, 100 + u64::from(i))));
    let later = snap(later);
    let a = CounterSet::from_values([
        ("TcpExt", "TW", 10),
        ("TcpExt", "TCPTimeWaitOverflow", 0),
        ("TcpExt", "PAWSEstab", 1),
        ("TcpExt", "PAWSTimewait", 0),
        ("TcpExt", "TCPACKSkippedTimeWait", 0),
    ]);
    let b = CounterSet::from_values([
        ("TcpExt", "TW", 29),
        ("TcpExt", "TCPTimeWaitOverflow", 2),
        ("TcpExt", "PAWSEstab", 1),
        ("TcpExt", "PAWSTimewait", 3),
        ("TcpExt", "TCPACKSkippedTimeWait", 0),
    ]);
    let r = analyze(&PortsInput {
        snapshot: &later,
        earlier: Some(&before),
        interval_s: Some(2.0),
        sysctls: &sys,
        counters: Some((&a, &b)),
        time_wait_total: Some(25),
        filter: None,
    });
    let d = &r.destinations[0];
    assert_eq!(d.new_time_wait, Some(19));
    assert_eq!(d.new_time_wait_per_s, Some(9.5));
    assert_eq!(r.time_wait.new_per_s, Some(9.5));
    assert_eq!(r.time_wait.overflow_delta, Some(2));
    assert_eq!(r.time_wait.count, 25);
    // 9.5/s is above the 100/60 the range sustains: a rate warning although usage is 20%.
    // PAWSTimewait +3: this host dropped SYNs against its TIME-WAIT entries (a server-side
    // TIME-WAIT that has since expired still made a client stall).
    let codes: Vec<&str> = r.findings.iter().map(|w| w.code).collect();
    assert_eq!(
        codes,
        [
            "time-wait-overflow",
            "ephemeral-ports-rate",
            "time-wait-syn-rejects"
        ]
    );
    assert_eq!(
        r.server_counters
            .iter()
            .map(|c| (c.counter.as_str(), c.delta))
            .collect::<Vec<_>>(),
        [
            ("TcpExt.PAWSEstab", Some(0)),
            ("TcpExt.PAWSTimewait", Some(3)),
            ("TcpExt.TCPACKSkippedTimeWait", Some(0))
        ]
    );
}

#[test]
fn paws_rejects_with_server_time_wait_warn() {
    let sys = sysctls(40000, 40099, "");
    let mut v = vec![sock(State::Listen, ("0.0.0.0", 8080), None)];
    v.push(sock(
        State::TimeWait,
        ("10.0.0.1", 8080),
        Some(("10.0.0.7", 5000)),
    ));
    let s = snap(v);
    // A 6.15 kernel: no PAWSTimewait, the rejects land in PAWSEstab.
    let a = CounterSet::from_values([("TcpExt", "PAWSEstab", 1)]);
    let b = CounterSet::from_values([("TcpExt", "PAWSEstab", 4)]);
    let r = analyze(&PortsInput {
        snapshot: &s,
        earlier: Some(&s),
        interval_s: Some(1.0),
        sysctls: &sys,
        counters: Some((&a, &b)),
        time_wait_total: None,
        filter: None,
    });
    assert_eq!(r.findings[0].code, "time-wait-syn-rejects");
    assert!(r.findings[0].summary.contains("PAWSEstab +3"));
}

#[test]
fn filter_selects_destinations() {
    let sys = sysctls(40000, 40099, "");
    let mut v = n_to(3, ("10.0.0.2", 80));
    v.push(tw(40090, ("10.0.0.3", 443), 1, 1000));
    let mut q = Query::new();
    q.select.ports = Some(PortSet::parse("443").unwrap());
    let s = snap(v);
    let r = analyze(&PortsInput {
        snapshot: &s,
        earlier: None,
        interval_s: None,
        sysctls: &sys,
        counters: None,
        time_wait_total: None,
        filter: Some(&q),
    });
    assert_eq!(r.destinations.len(), 1);
    assert_eq!(r.destinations[0].remote_port, 443);
}

#[test]
fn json_shape() {
    let sys = sysctls(40000, 40009, "");
    let r = run(&snap(n_to(9, ("10.0.0.2", 80))), &sys);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["range"]["usable"], 10);
    let d = &v["destinations"][0];
    assert_eq!(d["local_address"], "10.0.0.1");
    assert_eq!(d["remote_address"], "10.0.0.2");
    assert_eq!(d["remote_port"], 80);
    assert_eq!(d["count"], 9);
    assert_eq!(d["states"]["TIME_WAIT"], 9);
    assert_eq!(d["usage"], 0.9);
    assert_eq!(d["level"], "critical");
    // The findings are written by render::ports, after the report's fields.
    assert!(v.get("warnings").is_none());
    assert_eq!(r.findings[0].severity, Severity::Critical);
}
