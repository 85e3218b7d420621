//! `sockstat ports` against real sockets, each test in a network namespace it creates (root
//! only; skipped loudly otherwise). The sockets are made by this test binary re-run inside the
//! namespace (see ports_support.rs), the report by the real `sockstat` binary run
//! there too.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::time::Duration;

use crate::common::test_path;
use crate::ports_support::{
    hear, ports_json, say, sockstat, wait_for_eof, wait_output, Netns, HELPER_ENV,
};

const SERVER_PORT: u16 = 8080;
const LIMIT: Duration = Duration::from_secs(30);

/// Accepts one connection and ends it as `client_first` says: the client closes first (TIME-WAIT
/// lands on the client) or the server does (TIME-WAIT lands on the server).
fn round_trip(listener: &TcpListener, client: TcpStream, client_first: bool) {
    let (mut server, _) = listener.accept().expect("accept");
    let mut buf = [0u8; 16];
    if client_first {
        drop(client);
        // Wait for the client's FIN before closing, so the server goes through CLOSE_WAIT and
        // LAST_ACK and the client ends in TIME-WAIT.
        assert_eq!(server.read(&mut buf).expect("read EOF"), 0);
        drop(server);
    } else {
        drop(server);
        let mut client = client;
        assert_eq!(client.read(&mut buf).expect("read EOF"), 0);
        drop(client);
    }
}

/// A client socket bound to 127.0.0.1:`port` with SO_REUSEADDR, then connected (std cannot
/// bind before connect).
fn connect_from(port: u16, to: u16) -> std::io::Result<TcpStream> {
    // SAFETY: plain socket calls on a descriptor this function owns; sockaddr_in is fully
    // initialised.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        // Bound a connect that a rejected SYN would stall.
        stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        let addr = |p: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: p.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let local = addr(port);
        if libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let remote = addr(to);
        if libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// Runs inside the namespace when `SOCKSTAT_TEST_HELPER` is set; a no-op otherwise.
#[test]
fn ports_helper() {
    let Ok(action) = std::env::var(HELPER_ENV) else {
        return;
    };
    let listener =
        TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, SERVER_PORT)).expect("listen");
    match action.as_str() {
        // Connect to one destination, client closing first, until connect() fails.
        "exhaust" => {
            let mut n = 0;
            let mut errno = 0;
            for _ in 0..1000 {
                match TcpStream::connect((Ipv4Addr::LOCALHOST, SERVER_PORT)) {
                    Ok(c) => {
                        round_trip(&listener, c, true);
                        n += 1;
                    }
                    Err(e) => {
                        errno = e.raw_os_error().unwrap_or(-1);
                        break;
                    }
                }
            }
            say(&format!("DONE connections={n} errno={errno}"));
        }
        // The server closes first, so TIME-WAIT lands on the server; then the client binds the
        // same local ports again and reconnects into those TIME-WAIT entries.
        "server-tw" => {
            say("LISTENING");
            if hear().is_none() {
                return;
            }
            for port in 45000..45010 {
                let c = connect_from(port, SERVER_PORT).expect("connect");
                round_trip(&listener, c, false);
            }
            let mut reused = 0;
            for port in 45000..45003 {
                // The SYN lands on the server's TIME-WAIT entry for this 4-tuple; with
                // timestamps it is accepted (tcp_timewait_state_process returns TCP_TW_SYN).
                if let Ok(c) = connect_from(port, SERVER_PORT) {
                    round_trip(&listener, c, false);
                    reused += 1;
                }
            }
            say(&format!("DONE reused={reused}"));
            // Keep listening while the test samples.
            wait_for_eof();
        }
        other => panic!("unknown helper action {other}"),
    }
}

fn field<'a>(msg: &'a str, key: &str) -> &'a str {
    msg.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {msg:?}"))
}

fn exhaust(ns: &Netns) -> (u32, i32) {
    let mut h = ns.helper(&test_path(module_path!(), "ports_helper"), "exhaust");
    let msg = h.expect_line(LIMIT);
    h.finish(LIMIT);
    (
        field(&msg, "connections").parse().unwrap(),
        field(&msg, "errno").parse().unwrap(),
    )
}

#[test]
fn ports_exhaustion_of_a_50_port_range_is_critical() {
    let Some(ns) = Netns::create("ports_exhaustion_of_a_50_port_range_is_critical") else {
        return;
    };
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40049");
    // The default (2) lets loopback connections reuse TIME-WAIT ports.
    ns.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let (connections, errno) = exhaust(&ns);
    assert_eq!(
        errno,
        libc::EADDRNOTAVAIL,
        "connect() should run out of ports"
    );
    assert_eq!(connections, 50);

    let out = ns.run(&[sockstat(), "ports", "--json"]);
    let v = ports_json(&out);
    assert_eq!(v["version"], 1);
    assert_eq!(v["range"]["low"], 40000);
    assert_eq!(v["range"]["high"], 40049);
    assert_eq!(v["range"]["usable"], 50);
    assert_eq!(v["settings"]["tcp_tw_reuse"], 0);
    let dests = v["destinations"].as_array().unwrap();
    assert_eq!(dests.len(), 1, "{v}");
    let d = &dests[0];
    assert_eq!(d["local_address"], "127.0.0.1");
    assert_eq!(d["remote_address"], "127.0.0.1");
    assert_eq!(d["remote_port"], SERVER_PORT);
    assert_eq!(d["count"], 50);
    assert_eq!(d["states"]["TIME_WAIT"], 50);
    assert_eq!(d["time_wait"], 50);
    assert!(d["usage"].as_f64().unwrap() >= 0.8, "{d}");
    assert_eq!(d["level"], "critical");
    let left = d["time_wait_left"]["max_ms"].as_u64().unwrap();
    assert!(left > 30_000 && left <= 60_000, "{d}");
    let w = &v["warnings"][0];
    assert_eq!(w["code"], "ephemeral-ports-critical");
    assert_eq!(w["level"], "critical");
    let msg = w["message"].as_str().unwrap();
    assert!(
        msg.contains("uses 50 of 50") && msg.contains("EADDRNOTAVAIL"),
        "{msg}"
    );
    let advice = w["advice"].as_str().unwrap();
    assert!(
        advice.contains("tcp_tw_reuse=0") && advice.contains("40000-40049"),
        "{advice}"
    );

    // The table says the same, with the advice under the finding.
    let out = ns.run(&[sockstat(), "ports"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Ephemeral ports 40000-40049: 50 usable"),
        "{text}"
    );
    assert!(
        text.contains("127.0.0.1:8080") && text.contains("100%!!"),
        "{text}"
    );
    assert!(text.contains("critical: client 127.0.0.1 -> 127.0.0.1:8080 uses 50 of 50"));
    assert!(text.contains("  fix: "), "{text}");

    // Filters: another destination port selects nothing; -6 selects nothing.
    let v = ports_json(&ns.run(&[sockstat(), "ports", "--json", "-p", "9999"]));
    assert!(v["destinations"].as_array().unwrap().is_empty(), "{v}");
    let v = ports_json(&ns.run(&[sockstat(), "ports", "--json", "-6"]));
    assert!(v["destinations"].as_array().unwrap().is_empty(), "{v}");
    let v = ports_json(&ns.run(&[sockstat(), "ports", "--json", "--dst", "127.0.0.0/8"]));
    assert_eq!(v["destinations"][0]["count"], 50);
}

#[test]
fn ports_reserved_ports_shrink_the_range() {
    let Some(ns) = Netns::create("ports_reserved_ports_shrink_the_range") else {
        return;
    };
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40049");
    ns.sysctl("net.ipv4.ip_local_reserved_ports", "40010-40019");
    ns.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let (connections, errno) = exhaust(&ns);
    assert_eq!(errno, libc::EADDRNOTAVAIL);
    assert_eq!(connections, 40);
    let v = ports_json(&ns.run(&[sockstat(), "ports", "--json"]));
    assert_eq!(v["range"]["reserved"], 10);
    assert_eq!(v["range"]["usable"], 40);
    assert_eq!(v["destinations"][0]["count"], 40);
    assert_eq!(v["destinations"][0]["usage"], 1.0);
}

#[test]
fn ports_server_view_shows_clients_reusing_ports_into_time_wait() {
    let Some(ns) = Netns::create("ports_server_view_shows_clients_reusing_ports_into_time_wait")
    else {
        return;
    };
    let mut h = ns.helper(&test_path(module_path!(), "ports_helper"), "server-tw");
    assert_eq!(h.expect_line(LIMIT), "LISTENING");
    // Sample across the rounds: the interval adds the counters.
    let bg = crate::ports_support::spawn_sockstat(&ns, &["ports", "--interval", "2", "--json"]);
    crate::ports_support::first_sample_taken(&bg);
    h.send("go");
    let done = h.expect_line(LIMIT);
    let reused: u32 = field(&done, "reused").parse().unwrap();
    assert_eq!(reused, 3, "{done}");
    let v = ports_json(&wait_output(bg, LIMIT));
    // And once more without an interval, while the listener is still there.
    let now = ports_json(&ns.run(&[sockstat(), "ports", "--json"]));
    h.finish(LIMIT);

    for (what, v) in [("interval", &v), ("now", &now)] {
        let servers = v["servers"].as_array().unwrap();
        assert_eq!(servers.len(), 1, "{what}: {v}");
        let s = &servers[0];
        assert_eq!(s["local_address"], "127.0.0.1", "{what}");
        assert_eq!(s["local_port"], SERVER_PORT, "{what}");
        assert_eq!(s["time_wait"], 10, "{what}: {s}");
        let c = &s["clients"][0];
        assert_eq!(c["address"], "127.0.0.1", "{what}");
        assert_eq!(c["time_wait"], 10, "{what}");
        assert_eq!(c["ports"], 10, "{what}");
        assert!(
            c["time_wait_left"]["min_ms"].as_u64().unwrap() > 0,
            "{what}"
        );
        // Server-side TIME-WAIT is not client port use.
        assert!(
            v["destinations"].as_array().unwrap().is_empty(),
            "{what}: {v}"
        );
    }
    // With the interval: the PAWS and TIME-WAIT ACK counters, by name.
    let counters: Vec<&str> = v["server_counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["counter"].as_str().unwrap())
        .collect();
    assert!(counters.contains(&"TcpExt.PAWSEstab"), "{counters:?}");
    assert!(
        counters.contains(&"TcpExt.TCPACKSkippedTimeWait"),
        "{counters:?}"
    );
    for c in v["server_counters"].as_array().unwrap() {
        assert!(c["delta"].as_i64().is_some_and(|d| d >= 0), "{c}");
    }
    assert!(v["interval_s"].as_f64().unwrap() >= 2.0);
    // 13 server-side TIME-WAIT entries were created (3 replaced by the reused connections).
    assert!(v["time_wait"]["new_per_s"].as_f64().unwrap() > 0.0, "{v}");
    // Without the interval: the hint to measure one.
    assert_eq!(now["warnings"][0]["code"], "server-time-wait", "{now}");
}

#[test]
fn ports_bad_input_exits_2() {
    for args in [
        &["ports", "-p", "70000"][..],
        &["ports", "--interval", "0"],
        &["ports", "--dst", "300.1.1.1"],
        &["ports", "-u"],
    ] {
        let out = std::process::Command::new(sockstat())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn ports_reads_sysctls_from_a_fake_proc() {
    let dir = tempfile::tempdir().unwrap();
    let v4 = dir.path().join("sys/net/ipv4");
    std::fs::create_dir_all(&v4).unwrap();
    std::fs::write(v4.join("ip_local_port_range"), "50000\t50000\n").unwrap();
    std::fs::write(v4.join("tcp_tw_reuse"), "1\n").unwrap();
    let out = std::process::Command::new(sockstat())
        .args(["ports", "--json", "--proc-root"])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = ports_json(&out);
    assert_eq!(v["range"]["usable"], 1);
    assert_eq!(v["settings"]["tcp_tw_reuse"], 1);
    assert!(v["settings"]["tcp_timestamps"].is_null());
}

/// `ports -z NS` from the host reads NS's sockets with NS's sysctls (the port range is per
/// namespace), not the host's; `-Z` reports every zone on its own.
#[test]
fn ports_zone_reports_that_zones_range() {
    let Some(ns) = Netns::create("ports_zone_reports_that_zones_range") else {
        return;
    };
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40049");
    ns.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let (connections, _) = exhaust(&ns);
    assert_eq!(connections, 50);

    let run = |args: &[&str]| {
        std::process::Command::new(sockstat())
            .args(args)
            .output()
            .unwrap()
    };
    let v = ports_json(&run(&["ports", "-z", &ns.name, "--json"]));
    assert_eq!(v["zone"]["name"], ns.name.as_str(), "{v}");
    assert_eq!(v["zone"]["kind"], "netns");
    assert_eq!(v["range"]["low"], 40000, "{v}");
    assert_eq!(v["range"]["high"], 40049);
    assert_eq!(v["range"]["from_sysctl"], true);
    assert_eq!(v["settings"]["tcp_tw_reuse"], 0);
    assert_eq!(v["destinations"][0]["count"], 50, "{v}");
    assert_eq!(v["warnings"][0]["code"], "ephemeral-ports-critical");

    // The host's own report: its range, none of NS's sockets, no zone.
    let host = ports_json(&run(&["ports", "--json"]));
    assert!(host.get("zone").is_none());
    let host_range = (host["range"]["low"].clone(), host["range"]["high"].clone());
    assert_ne!(host_range, (40000.into(), 40049.into()), "{host}");
    assert!(
        !host["destinations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["count"] == 50 && d["remote_port"] == SERVER_PORT),
        "{host}"
    );

    // Every zone, each with its own range.
    let all = ports_json(&run(&["ports", "-Z", "--json"]));
    let zones = all["zones"].as_array().unwrap();
    let mine = zones
        .iter()
        .find(|z| z["zone"]["name"] == ns.name.as_str())
        .unwrap_or_else(|| panic!("{all}"));
    assert_eq!(mine["range"]["low"], 40000);
    assert_eq!(mine["destinations"][0]["count"], 50);
    let global = zones
        .iter()
        .find(|z| z["zone"]["kind"] == "global")
        .unwrap_or_else(|| panic!("{all}"));
    assert_eq!(
        (
            global["range"]["low"].clone(),
            global["range"]["high"].clone()
        ),
        host_range
    );

    // The table names the zone above its report.
    let out = run(&["ports", "-z", &ns.name]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "Zone {} (netns)\nEphemeral ports 40000-40049: 50 usable",
            ns.name
        )),
        "{text}"
    );
    // An unknown zone is bad usage.
    let out = run(&["ports", "-z", "no-such-zone-here"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown zone 'no-such-zone-here'"));
}
