//! Issue 15 item 3: every kind of socket the kernel shows. Ping sockets (ICMP datagram sockets,
//! what unprivileged `ping` uses) are in no sock_diag table; they come from /proc/net/icmp and
//! /proc/net/icmp6 and must be listed with their holders, selected by `-P icmp`, counted by
//! `--summary` and listed under `-Z`.

use serde_json::Value;

use crate::common::*;

/// A namespace whose ping_group_range lets root make ping sockets (the default "1 0" lets no
/// group), with a holder of an IPv4 and an IPv6 ping socket.
fn ping_sockets() -> (Netns, Holder) {
    let ns = Netns::new();
    ns.allow_ping();
    let h = Holder::spawn_in(&ns, &["icmp4:127.0.0.1:0", "icmp6:[::1]:0"]);
    (ns, h)
}

fn by_inode(v: &Value, inode: u64) -> &Value {
    sockets(v)
        .iter()
        .find(|s| s["id"] == inode)
        .unwrap_or_else(|| panic!("socket {inode} not listed: {v:#}"))
}

#[test]
fn ping_sockets_are_listed_with_their_holders() {
    require_root!("ping_sockets_are_listed_with_their_holders (network namespace)");
    let (ns, h) = ping_sockets();
    let (v4, v6) = (h.item(0).sock(), h.item(1).sock());

    // The default listing has them (as it has raw sockets), with their holder.
    let v = sockstat(&["--json"]).netns(&ns).ok().json();
    for (s, proto, family, addr) in [
        (v4, "icmp", "inet", "127.0.0.1"),
        (v6, "icmp6", "inet6", "::1"),
    ] {
        let j = by_inode(&v, s.inode());
        assert_eq!(j["proto"], proto, "{j}");
        assert_eq!(j["family"], family, "{j}");
        assert_eq!(j["type"], "dgram", "{j}");
        assert_eq!(j["state"], "UNCONN", "{j}");
        assert_eq!(j["local"]["address"], addr, "{j}");
        assert_eq!(j["local"]["port"], u64::from(s.port()), "{j}");
        assert_eq!(j["owners_status"], "known", "{j}");
        assert_eq!(owners(j), vec![(u64::from(h.pid()), s.fd() as u64)], "{j}");
    }

    // -P icmp selects both and nothing else; -4 only the IPv4 one.
    let v = sockstat(&["--json", "-P", "icmp"]).netns(&ns).ok().json();
    let protos: Vec<&str> = sockets(&v)
        .iter()
        .map(|s| s["proto"].as_str().unwrap())
        .collect();
    assert_eq!(protos, ["icmp", "icmp6"], "{v:#}");
    let v = sockstat(&["--json", "-P", "icmp", "-4"])
        .netns(&ns)
        .ok()
        .json();
    assert_eq!(ids(&v), [v4.inode()].into_iter().collect(), "{v:#}");

    // The table names them icmp4 / icmp6.
    let out = sockstat(&["-P", "icmp", "-s"]).netns(&ns).ok();
    let t = out.table();
    let c = t.col("PROTO");
    let protos: Vec<&str> = t.rows.iter().map(|r| r[c].as_str()).collect();
    assert_eq!(protos, ["icmp4", "icmp6"], "{}", out.stdout);

    // --summary counts them.
    let v = sockstat(&["--summary", "--json"]).netns(&ns).ok().json();
    let count = |proto: &str| {
        v["summary"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["proto"] == proto)
            .map(|r| r["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!((count("icmp"), count("icmp6")), (1, 1), "{v:#}");

    // -Z lists them in their zone (read from the namespace's own /proc/net/icmp).
    let v = sockstat(&["--json", "-Z", "-P", "icmp"]).ok().json();
    let j = by_inode(&v, v4.inode());
    assert_eq!(j["zone"]["name"], ns.name.as_str(), "{j}");
    assert_eq!(owners(j), vec![(u64::from(h.pid()), v4.fd() as u64)], "{j}");
}

/// Issue 15 item 4: a packet socket names its interface and protocol, and a socket bound to a
/// device shows it as `ss` does (`127.0.0.1%lo:PORT`), with the index and the name in JSON.
#[test]
fn interfaces_are_named() {
    require_root!("interfaces_are_named (network namespace, AF_PACKET)");
    let ns = Netns::new();
    let h = Holder::spawn_in(
        &ns,
        &[
            "packet:0003:lo",
            "packet:0806:*",
            "udp4-bound-dev:127.0.0.1:0%lo",
        ],
    );
    let (all, arp, bound) = (h.item(0).sock(), h.item(1).sock(), h.item(2).sock());
    let v = sockstat(&["--json", "-P", "packet,udp"])
        .netns(&ns)
        .ok()
        .json();
    let j = by_inode(&v, all.inode());
    assert_eq!(j["local"]["protocol"], 3, "{j}");
    assert_eq!(j["local"]["protocol_name"], "ALL", "{j}");
    assert_eq!(j["local"]["ifindex"], 1, "{j}");
    assert_eq!(j["local"]["interface"], "lo", "{j}");
    let j = by_inode(&v, arp.inode());
    assert_eq!(j["local"]["protocol_name"], "ARP", "{j}");
    assert_eq!(j["local"]["ifindex"], 0, "{j}");
    assert!(j["local"].get("interface").is_none(), "{j}");
    let j = by_inode(&v, bound.inode());
    assert_eq!(j["bound_ifindex"], 1, "{j}");
    assert_eq!(j["bound_interface"], "lo", "{j}");

    let out = sockstat(&["-P", "packet,udp", "-i"]).netns(&ns).ok();
    let t = out.table();
    let local = |inode: u64| {
        let row = t.rows_where("ID", &inode.to_string());
        assert_eq!(row.len(), 1, "{}", out.stdout);
        row[0][t.col("LOCAL ADDRESS")].clone()
    };
    assert_eq!(local(all.inode()), "ALL:lo", "{}", out.stdout);
    assert_eq!(local(arp.inode()), "ARP:*", "{}", out.stdout);
    assert_eq!(
        local(bound.inode()),
        format!("127.0.0.1%lo:{}", bound.port()),
        "{}",
        out.stdout
    );
}

/// Issue 15 item 4: "who is connected to this listener", whatever the transport: the clients
/// of a TCP port and of a unix socket, seen from both ends, in one listing.
#[test]
fn connected_to_a_listener_whatever_the_transport() {
    let dir = tempdir();
    let path = dir.path().join("db.sock");
    let h = Holder::spawn(&[
        "tcp4-pair".to_string(),
        format!("unix-conn:{}", path.display()),
        "tcp4-pair".to_string(),
        "unix-pair".to_string(),
    ]);
    let (tcp, unix, other) = (h.item(0), h.item(1), h.item(2));
    let port = tcp.role("listener").port();
    let arg = format!("{port},{}", path.display());
    let v = sockstat(&["--json", "--connected-to", &arg]).ok().json();
    let want: std::collections::BTreeSet<u64> = [
        tcp.role("client"),
        tcp.role("server"),
        unix.role("client"),
        unix.role("server"),
    ]
    .iter()
    .map(|s| s.inode())
    .collect();
    assert_eq!(ids(&v), want, "{v:#}");
    // Only the unix listener's connections with the path alone; nothing from the other pair.
    let v = sockstat(&["--json", "--connected-to", &path.display().to_string()])
        .ok()
        .json();
    let unix_only: std::collections::BTreeSet<u64> = [unix.role("client"), unix.role("server")]
        .iter()
        .map(|s| s.inode())
        .collect();
    assert_eq!(ids(&v), unix_only, "{v:#}");
    assert!(!ids(&v).contains(&other.role("client").inode()));
    // A bad item is named.
    let out = sockstat(&["--connected-to", "5432,x"]).run();
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(out.stderr.contains("'x'"), "{}", out.stderr);
}

/// Issue 15 item 4: a TIME-WAIT entry is recognisable without -s (its state as COMMAND, `-` for
/// user, pid and fd), and -T leaves TIME-WAIT entries out unless asked, saying how many.
#[test]
fn time_wait_rows_are_recognisable_and_kept_out_of_tcp_internals() {
    let h = Holder::spawn(&["timewait:127.0.0.1"]);
    let tw = h.item(0).role("timewait");
    let port = tw.port().to_string();
    // `-p` matches either end: another test's connection to a listener that took this port once
    // the entry's own connection closed is also listed (seen in CI). The entry is ours by its
    // local end.
    let local = format!("127.0.0.1:{port}");
    let ours = |t: &crate::common::Table| -> Vec<Vec<String>> {
        let c = t.col("LOCAL ADDRESS");
        t.rows_where("COMMAND", "(time-wait)")
            .into_iter()
            .filter(|r| r[c] == local)
            .cloned()
            .collect()
    };
    let out = sockstat(&["-4", "-p", &port]).ok();
    let t = out.table();
    let rows = ours(&t);
    assert_eq!(rows.len(), 1, "{}", out.stdout);
    assert_eq!(
        (
            rows[0][t.col("USER")].as_str(),
            rows[0][t.col("PID")].as_str(),
            rows[0][t.col("FD")].as_str()
        ),
        ("-", "-", "-"),
        "{}",
        out.stdout
    );
    // -T: the entry is left out, with one line saying so; --time-wait brings it back.
    let out = sockstat(&["-T", "-4", "-p", &port]).ok();
    assert!(
        out.table().rows_where("COMMAND", "(time-wait)").is_empty(),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("TIME-WAIT entr") && out.stderr.contains("--time-wait"),
        "{}",
        out.stderr
    );
    let v = sockstat(&["-T", "-4", "-p", &port, "--json"]).ok().json();
    assert!(
        warnings(&v).iter().any(|w| w["code"] == "time-wait-hidden"),
        "{v:#}"
    );
    assert!(
        sockets(&v).iter().all(|s| s["state"] != "TIME_WAIT"),
        "{v:#}"
    );
    for extra in [&["--time-wait"][..], &["--state", "TIME_WAIT"][..]] {
        let mut args = vec!["-T", "-4", "-p", &port];
        args.extend_from_slice(extra);
        let out = sockstat(&args).ok();
        assert_eq!(ours(&out.table()).len(), 1, "{extra:?}: {}", out.stdout);
        assert!(
            !out.stderr.contains("--time-wait"),
            "{extra:?}: {}",
            out.stderr
        );
    }
}

/// The tables a gathering skips when `/proc/net/protocols` counts none of their sockets in the
/// namespace (MPTCP, UDP-Lite, raw; ping sockets above): once one exists it is listed, with its
/// holder, read in the namespace itself and from outside it as a zone.
#[test]
fn sockets_of_the_rarely_used_protocols_are_listed_once_they_exist() {
    require_root!(
        "sockets_of_the_rarely_used_protocols_are_listed_once_they_exist (network namespace)"
    );
    let ns = Netns::new();
    let protos = "mptcp,udplite,raw";
    let v = sockstat(&["--json", "-P", protos]).netns(&ns).ok().json();
    assert!(sockets(&v).is_empty(), "{v:#}");
    let h = Holder::spawn_in(
        &ns,
        &[
            "mptcp4-listen:127.0.0.1:0",
            "mptcp6-listen:[::1]:0",
            "udplite4:127.0.0.1:0",
            "udplite6:[::1]:0",
            "raw4:127.0.0.1:0",
            "raw6:[::1]:0",
        ],
    );
    let want = [
        ("mptcp", "inet", "LISTEN"),
        ("mptcp", "inet6", "LISTEN"),
        ("udplite", "inet", "UNCONN"),
        ("udplite", "inet6", "UNCONN"),
        ("raw", "inet", "UNCONN"),
        ("raw", "inet6", "UNCONN"),
    ];
    let zone = ns.name.clone();
    for args in [
        vec!["--json", "-P", protos],
        vec!["--json", "-P", protos, "-z", zone.as_str()],
    ] {
        let run = sockstat(&args);
        let v = if args.contains(&"-z") {
            run.ok().json()
        } else {
            run.netns(&ns).ok().json()
        };
        assert_eq!(sockets(&v).len(), want.len(), "{args:?}: {v:#}");
        for (i, (proto, family, state)) in want.iter().enumerate() {
            let s = h.item(i).sock();
            let j = by_inode(&v, s.inode());
            assert_eq!(j["proto"], *proto, "{args:?}: {j}");
            assert_eq!(j["family"], *family, "{args:?}: {j}");
            assert_eq!(j["state"], *state, "{args:?}: {j}");
            assert_eq!(j["local"]["port"], u64::from(s.port()), "{args:?}: {j}");
            assert_eq!(
                owners(j),
                vec![(u64::from(h.pid()), s.fd() as u64)],
                "{args:?}: {j}"
            );
        }
    }
}
