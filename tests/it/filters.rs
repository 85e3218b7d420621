//! Issue 2 item 9.2: every filter, alone and combined (AND).

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::common::*;

fn set(socks: &[&Sock]) -> BTreeSet<u64> {
    socks.iter().map(|s| s.inode()).collect()
}

/// The ids sockstat lists for these arguments (JSON, schema-checked).
fn listed(args: &[&str]) -> BTreeSet<u64> {
    ids(&sockstat(args).json())
}

/// `listed` restricted to one holder with `--pid`.
fn listed_for(h: &Holder, args: &[&str]) -> BTreeSet<u64> {
    let pids = h.pids();
    let mut a = vec!["--pid", pids.as_str()];
    a.extend_from_slice(args);
    listed(&a)
}

#[test]
fn families_ipv4_ipv6_unix() {
    let dir = tempdir();
    let d = dir.path().display();
    let h = Holder::spawn(&[
        "tcp4-listen:127.0.0.1:0".to_string(),
        "tcp6-listen:[::1]:0".to_string(),
        "udp4:127.0.0.1:0".to_string(),
        "udp6:[::1]:0".to_string(),
        format!("unix-listen:{d}/u.sock"),
        format!("unix-dgram:{d}/d.sock"),
    ]);
    let s = |i: usize| h.item(i).sock();
    let v4 = set(&[s(0), s(2)]);
    let v6 = set(&[s(1), s(3)]);
    let ux = set(&[s(4), s(5)]);
    let all: BTreeSet<u64> = v4.iter().chain(&v6).chain(&ux).copied().collect();
    let u =
        |a: &BTreeSet<u64>, b: &BTreeSet<u64>| -> BTreeSet<u64> { a.union(b).copied().collect() };
    assert_eq!(listed_for(&h, &[]), all);
    assert_eq!(listed_for(&h, &["-4"]), v4);
    assert_eq!(listed_for(&h, &["-6"]), v6);
    assert_eq!(listed_for(&h, &["-u"]), ux);
    assert_eq!(listed_for(&h, &["-4", "-6"]), u(&v4, &v6));
    assert_eq!(listed_for(&h, &["-4", "-u"]), u(&v4, &ux));
    assert_eq!(listed_for(&h, &["-6", "-u"]), u(&v6, &ux));
    assert_eq!(listed_for(&h, &["-4", "-6", "-u"]), all);
    // Combined with -P: AND.
    assert_eq!(listed_for(&h, &["-6", "-P", "udp"]), set(&[s(3)]));
    assert_eq!(listed_for(&h, &["-u", "-P", "tcp"]), BTreeSet::new());
}

#[test]
fn connected_and_listening() {
    let dir = tempdir();
    let d = dir.path().display();
    let h = Holder::spawn(&[
        "tcp4-pair".to_string(),                                // 0
        "udp4:127.0.0.1:0".to_string(),                         // 1
        "udp4-connected:127.0.0.1:0->127.0.0.1:#1".to_string(), // 2
        format!("unix-listen:{d}/l.sock"),                      // 3
        "unix-pair".to_string(),                                // 4
        format!("unix-dgram:{d}/d.sock"),                       // 5
        format!("unix-conn:{d}/c.sock"),                        // 6
        "timewait:127.0.0.1".to_string(),                       // 7
        "tcp6-pair".to_string(),                                // 8
    ]);
    let it = |i: usize| h.item(i);
    let listening = set(&[
        it(0).role("listener"),
        it(1).sock(),
        it(3).sock(),
        it(5).sock(),
        it(6).role("listener"),
        it(8).role("listener"),
    ]);
    let connected = set(&[
        it(0).role("client"),
        it(0).role("server"),
        it(2).sock(),
        it(4).role("a"),
        it(4).role("b"),
        it(6).role("client"),
        it(6).role("server"),
        it(8).role("client"),
        it(8).role("server"),
    ]);
    let all: BTreeSet<u64> = listening.union(&connected).copied().collect();
    assert_eq!(all, h.inodes());
    assert_eq!(listed_for(&h, &["-l"]), listening);
    assert_eq!(listed_for(&h, &["-c"]), connected);
    assert_eq!(
        listed_for(&h, &["-c", "-l"]),
        all,
        "-c -l together is no filter"
    );
    assert_eq!(listed_for(&h, &["-l", "-c"]), all);
    assert_eq!(listed_for(&h, &[]), all);
    // With other filters.
    assert_eq!(
        listed_for(&h, &["-l", "-u"]),
        set(&[it(3).sock(), it(5).sock(), it(6).role("listener")])
    );
    assert_eq!(
        listed_for(&h, &["-c", "-6"]),
        set(&[it(8).role("client"), it(8).role("server")])
    );

    // TIME_WAIT has a remote end: connected, not listening. Other tests may take this ephemeral
    // port once the entry's connection closed (a listener, a connection to it), so the entry
    // is told by its local end.
    let tw_port = it(7).sock().port();
    let tw = tw_port.to_string();
    let mine = |v: &Value| -> Vec<Value> {
        sockets(v)
            .iter()
            .filter(|s| s["local"]["port"] == tw_port && s["state"] == "TIME_WAIT")
            .cloned()
            .collect()
    };
    let v = sockstat(&["-c", "-p", &tw, "--no-owners"]).json();
    assert_eq!(mine(&v).len(), 1, "{v:#}");
    let v = sockstat(&["-l", "-p", &tw, "--no-owners"]).json();
    assert_eq!(mine(&v).len(), 0, "{v:#}");
}

#[test]
fn ports_lists_ranges_and_the_remote_side() {
    let h = Holder::spawn(&[
        "tcp4-pair",
        "udp4:127.0.0.1:0",
        "unix-pair",
        "tcp6-listen:[::1]:0",
    ]);
    let pair = h.item(0);
    let (l, c, srv) = (
        pair.role("listener"),
        pair.role("client"),
        pair.role("server"),
    );
    let (lp, cp) = (l.port(), c.port());
    let udp = h.item(1).sock();
    let l6 = h.item(3).sock();

    // A listener port matches the listener, the server end (local) and the client (remote).
    assert_eq!(listed_for(&h, &["-p", &lp.to_string()]), set(&[l, c, srv]));
    // The client's ephemeral port: the client (local) and the server (remote side only).
    assert_eq!(listed_for(&h, &["-p", &cp.to_string()]), set(&[c, srv]));
    // Without --pid too: these ports are ours alone.
    assert_eq!(listed(&["-p", &cp.to_string()]), set(&[c, srv]));
    // Lists.
    let list = format!("{},{}", udp.port(), l6.port());
    assert_eq!(listed_for(&h, &["-p", &list]), set(&[udp, l6]));
    let list = format!(" {} , {lp}", udp.port());
    assert_eq!(listed_for(&h, &["-p", &list]), set(&[udp, l, c, srv]));
    // Ranges (inclusive), and a range holding exactly one port.
    let (lo, hi) = (lp.min(cp), lp.max(cp));
    let want: BTreeSet<u64> = [l, c, srv, udp, l6]
        .into_iter()
        .filter(|s| {
            let lp = s.port();
            let rp = s.peer.as_ref().map(|p| p.port());
            (lo..=hi).contains(&lp) || rp.is_some_and(|p| (lo..=hi).contains(&p))
        })
        .map(|s| s.inode())
        .collect();
    assert_eq!(listed_for(&h, &["-p", &format!("{lo}-{hi}")]), want);
    assert_eq!(
        listed_for(&h, &["-p", &format!("{}-{}", l6.port(), l6.port())]),
        set(&[l6])
    );
    // Every port: every inet socket, and no unix socket (-p selects Internet sockets only).
    let inet = set(&[l, c, srv, udp, l6]);
    assert_eq!(listed_for(&h, &["-p", "0-65535"]), inet);
    assert_eq!(listed_for(&h, &["-p", "1-65535", "-u"]), BTreeSet::new());
    // Combined with a family and a protocol.
    assert_eq!(listed_for(&h, &["-p", "0-65535", "-6"]), set(&[l6]));
    assert_eq!(listed_for(&h, &["-p", "0-65535", "-P", "udp"]), set(&[udp]));
}

/// `--sport` and `--dport` (issue 28): the local port alone and the remote port alone, where
/// `-p` takes either end, so that a server's connections and a client's can be told apart.
/// Each listing is compared with the sockets whose own ends, as the holder reports them, have
/// the port on that side.
#[test]
fn sport_and_dport_select_one_end() {
    let h = Holder::spawn(&[
        "tcp4-pair",
        "udp4:127.0.0.1:0",
        "unix-pair",
        "tcp6-listen:[::1]:0",
        "tcp4-pair",
    ]);
    let pair = h.item(0);
    let (l, c, srv) = (
        pair.role("listener"),
        pair.role("client"),
        pair.role("server"),
    );
    let other = h.item(4);
    let inet = [
        l,
        c,
        srv,
        h.item(1).sock(),
        h.item(3).sock(),
        other.role("listener"),
        other.role("client"),
        other.role("server"),
    ];
    let local = |p: u16| -> BTreeSet<u64> {
        inet.iter()
            .filter(|s| s.port() == p)
            .map(|s| s.inode())
            .collect()
    };
    let remote = |p: u16| -> BTreeSet<u64> {
        inet.iter()
            .filter(|s| s.peer.as_ref().is_some_and(|a| a.port() == p))
            .map(|s| s.inode())
            .collect()
    };
    for s in &inet {
        let p = s.port();
        assert_eq!(
            listed_for(&h, &["--sport", &p.to_string()]),
            local(p),
            "--sport {p}"
        );
        assert_eq!(
            listed_for(&h, &["--dport", &p.to_string()]),
            remote(p),
            "--dport {p}"
        );
    }
    // The server's port: the listener and the accepted end locally, the client remotely; -p
    // takes all three.
    let (lp, cp) = (l.port().to_string(), c.port().to_string());
    assert_eq!(listed_for(&h, &["--sport", &lp]), set(&[l, srv]));
    assert_eq!(listed_for(&h, &["--dport", &lp]), set(&[c]));
    assert_eq!(listed_for(&h, &["-p", &lp]), set(&[l, c, srv]));
    // Both ends named: one socket of the connection.
    assert_eq!(listed_for(&h, &["--sport", &cp, "--dport", &lp]), set(&[c]));
    assert_eq!(
        listed_for(&h, &["--sport", &lp, "--dport", &cp]),
        set(&[srv])
    );
    assert_eq!(
        listed_for(&h, &["--sport", &lp, "--dport", &lp]),
        BTreeSet::new()
    );
    // Lists and ranges, with -p, and never a unix socket.
    let (lo, hi) = (
        l.port().min(other.role("listener").port()),
        l.port().max(other.role("listener").port()),
    );
    let range = format!("{lo}-{hi}");
    let want: BTreeSet<u64> = inet
        .iter()
        .filter(|s| {
            s.peer
                .as_ref()
                .is_some_and(|a| (lo..=hi).contains(&a.port()))
        })
        .map(|s| s.inode())
        .collect();
    assert_eq!(listed_for(&h, &["--dport", &range]), want);
    let list = format!("{lp},{}", other.role("listener").port());
    assert_eq!(
        listed_for(&h, &["--sport", &list, "-c"]),
        set(&[srv, other.role("server")])
    );
    assert_eq!(
        listed_for(&h, &["--sport", &lp, "-p", &cp]),
        set(&[srv]),
        "-p ANDs with --sport"
    );
    assert_eq!(
        listed_for(&h, &["--sport", "0-65535", "-u"]),
        BTreeSet::new()
    );
    assert_eq!(listed_for(&h, &["--dport", "0-65535"]), {
        let mut connected = set(&[c, srv]);
        connected.extend(set(&[other.role("client"), other.role("server")]));
        connected
    });
}

#[test]
fn addresses_and_prefixes_on_loopback() {
    let h = Holder::spawn(&[
        "tcp4-pair",
        "tcp6-pair",
        "udp4:127.0.0.1:0",
        "udp6:[::1]:0",
        "unix-pair",
    ]);
    let p4 = h.item(0);
    let p6 = h.item(1);
    let all4 = set(&[
        p4.role("listener"),
        p4.role("client"),
        p4.role("server"),
        h.item(2).sock(),
    ]);
    let all6 = set(&[
        p6.role("listener"),
        p6.role("client"),
        p6.role("server"),
        h.item(3).sock(),
    ]);
    assert_eq!(listed_for(&h, &["--src", "127.0.0.0/8"]), all4);
    assert_eq!(listed_for(&h, &["--src", "127.0.0.1"]), all4);
    assert_eq!(listed_for(&h, &["--src", "::1"]), all6);
    assert_eq!(listed_for(&h, &["--src", "[::1]"]), all6);
    assert_eq!(listed_for(&h, &["--src", "::1/128"]), all6);
    assert_eq!(
        listed_for(&h, &["--dst", "127.0.0.1/32"]),
        set(&[p4.role("client"), p4.role("server")])
    );
    assert_eq!(
        listed_for(&h, &["--dst", "::1"]),
        set(&[p6.role("client"), p6.role("server")])
    );
    assert_eq!(listed_for(&h, &["--src", "192.0.2.0/24"]), BTreeSet::new());
    assert_eq!(listed_for(&h, &["--dst", "2001:db8::/32"]), BTreeSet::new());
    // AND of both.
    assert_eq!(
        listed_for(
            &h,
            &[
                "--src",
                "127.0.0.1",
                "--dst",
                "127.0.0.0/8",
                "-p",
                &p4.role("client").port().to_string()
            ]
        ),
        set(&[p4.role("client"), p4.role("server")])
    );
}

/// A namespace with documentation addresses on `lo` next to loopback ones, and a holder using
/// both.
fn doc_namespace() -> (Netns, Holder) {
    let ns = Netns::new();
    ns.add_addr("192.0.2.1/32");
    ns.add_addr("198.51.100.7/32");
    ns.add_addr("2001:db8::1/128");
    let h = Holder::spawn_in(
        &ns,
        &[
            "tcp4-listen:192.0.2.1:0",                     // 0
            "tcp4-pair:192.0.2.1",                         // 1
            "tcp6-listen:[2001:db8::1]:0",                 // 2
            "tcp4-listen:127.0.0.1:0",                     // 3
            "tcp6-listen:[::1]:0",                         // 4
            "udp4:0.0.0.0:0",                              // 5
            "unix-pair",                                   // 6
            "tcp6-pair:2001:db8::1",                       // 7
            "tcp4-pair:127.0.0.1",                         // 8
            "udp4-connected:198.51.100.7:0->192.0.2.1:#5", // 9
            "udp4-connected:192.0.2.1:0->127.0.0.1:#5",    // 10
        ],
    );
    (ns, h)
}

fn pair(h: &Holder, i: usize) -> Vec<&Sock> {
    let p = h.item(i);
    vec![p.role("listener"), p.role("client"), p.role("server")]
}

fn cat(parts: Vec<Vec<&Sock>>) -> BTreeSet<u64> {
    parts.into_iter().flatten().map(|s| s.inode()).collect()
}

#[test]
fn documentation_prefixes_in_a_namespace() {
    require_root!("documentation_prefixes_in_a_namespace (ip netns)");
    let (ns, h) = doc_namespace();
    let it = |i: usize| h.item(i);
    let ins = |args: &[&str]| ids(&sockstat(args).arg("--no-owners").netns(&ns).json());

    assert_eq!(ins(&[]), h.inodes());
    assert_eq!(
        ins(&["--src", "192.0.2.0/24"]),
        cat(vec![vec![it(0).sock(), it(10).sock()], pair(&h, 1)])
    );
    assert_eq!(
        ins(&["--src", "192.0.2.1"]),
        cat(vec![vec![it(0).sock(), it(10).sock()], pair(&h, 1)])
    );
    assert_eq!(
        ins(&["--dst", "192.0.2.1/32"]),
        cat(vec![vec![
            it(1).role("client"),
            it(1).role("server"),
            it(9).sock()
        ]])
    );
    assert_eq!(
        ins(&["--src", "198.51.100.0/24"]),
        cat(vec![vec![it(9).sock()]])
    );
    assert_eq!(ins(&["--dst", "198.51.100.0/24"]), BTreeSet::new());
    assert_eq!(
        ins(&["--src", "2001:db8::/32"]),
        cat(vec![vec![it(2).sock()], pair(&h, 7)])
    );
    assert_eq!(
        ins(&["--dst", "2001:db8::1/128"]),
        cat(vec![vec![it(7).role("client"), it(7).role("server")]])
    );
    assert_eq!(
        ins(&["--src", "127.0.0.0/8"]),
        cat(vec![vec![it(3).sock()], pair(&h, 8)])
    );
    assert_eq!(ins(&["--src", "::1"]), cat(vec![vec![it(4).sock()]]));
    assert_eq!(ins(&["--src", "0.0.0.0/32"]), cat(vec![vec![it(5).sock()]]));
    assert_eq!(
        ins(&["--dst", "127.0.0.1"]),
        cat(vec![vec![
            it(8).role("client"),
            it(8).role("server"),
            it(10).sock()
        ]])
    );
    // Prefix + port + family, all ANDed.
    let lp = it(1).role("listener").port().to_string();
    assert_eq!(
        ins(&["--src", "192.0.2.0/24", "-p", &lp]),
        cat(vec![pair(&h, 1)])
    );
    assert_eq!(ins(&["--src", "192.0.2.0/24", "-6"]), BTreeSet::new());
    assert_eq!(
        ins(&["--src", "192.0.2.0/24", "--dst", "127.0.0.0/8"]),
        cat(vec![vec![it(10).sock()]])
    );
}

#[test]
fn no_loopback_hides_loopback_inet_sockets_only() {
    require_root!("no_loopback_hides_loopback_inet_sockets_only (ip netns)");
    let (ns, h) = doc_namespace();
    let it = |i: usize| h.item(i);
    let ins = |args: &[&str]| ids(&sockstat(args).arg("--no-owners").netns(&ns).json());
    // No loopback on either end; unix sockets unaffected; 0.0.0.0 is not loopback.
    let want = cat(vec![
        vec![it(0).sock()],
        pair(&h, 1),
        vec![it(2).sock(), it(5).sock(), it(6).role("a"), it(6).role("b")],
        pair(&h, 7),
        vec![it(9).sock()],
    ]);
    assert_eq!(ins(&["-L", "--source", "proc"]), want, "the /proc path");
    assert_eq!(ins(&["-L"]), want, "the netlink path");
    assert_eq!(
        ins(&["-L", "-4"]),
        cat(vec![
            vec![it(0).sock()],
            pair(&h, 1),
            vec![it(5).sock(), it(9).sock()]
        ])
    );
    assert_eq!(
        ins(&["-L", "-P", "udp"]),
        cat(vec![vec![it(5).sock(), it(9).sock()]])
    );
    assert_eq!(
        ins(&["-L", "-u"]),
        cat(vec![vec![it(6).role("a"), it(6).role("b")]])
    );
}

#[test]
fn listening_excludes_unbound_unix_datagram_sockets() {
    let dir = tempdir();
    let h = Holder::spawn(&[
        format!("unix-dgram:{}/d.sock", dir.path().display()),
        "unix-dgram-unbound".to_string(),
    ]);
    let bound = set(&[h.item(0).sock()]);
    assert_eq!(
        listed_for(&h, &["-l", "--source", "proc"]),
        bound,
        "the /proc path"
    );
    assert_eq!(listed_for(&h, &["-l"]), bound, "the netlink path");
}

#[test]
fn protocols() {
    let dir = tempdir();
    let d = dir.path().display();
    let h = Holder::spawn(&[
        "tcp4-listen:127.0.0.1:0".to_string(),
        "udp4:127.0.0.1:0".to_string(),
        format!("unix-listen:{d}/u.sock"),
        "udp6:[::1]:0".to_string(),
        "tcp6-listen:[::1]:0".to_string(),
    ]);
    let s = |i: usize| h.item(i).sock();
    assert_eq!(listed_for(&h, &["-P", "tcp"]), set(&[s(0), s(4)]));
    assert_eq!(listed_for(&h, &["-P", "udp"]), set(&[s(1), s(3)]));
    assert_eq!(listed_for(&h, &["-P", "unix"]), set(&[s(2)]));
    assert_eq!(
        listed_for(&h, &["-P", "tcp,udp"]),
        set(&[s(0), s(1), s(3), s(4)])
    );
    assert_eq!(
        listed_for(&h, &["-P", "udp,unix"]),
        set(&[s(1), s(2), s(3)])
    );
    assert_eq!(
        listed_for(&h, &["-P", "TCP,unix"]),
        set(&[s(0), s(2), s(4)])
    );
    assert_eq!(listed_for(&h, &["-P", "tcp,udp,unix"]), h.inodes());
    assert_eq!(listed_for(&h, &["-P", "udp", "-6"]), set(&[s(3)]));
    assert_eq!(listed_for(&h, &["-P", "udplite,raw"]), BTreeSet::new());
    let v = sockstat(&["--pid", &h.pids(), "-P", "tcp"]).json();
    for x in sockets(&v) {
        assert_eq!(x["proto"], "tcp");
    }
}

#[test]
fn states() {
    let dir = tempdir();
    let d = dir.path().display();
    let h = Holder::spawn(&[
        "tcp4-pair".to_string(),                                // 0
        "udp4:127.0.0.1:0".to_string(),                         // 1
        "udp4-connected:127.0.0.1:0->127.0.0.1:#1".to_string(), // 2
        format!("unix-listen:{d}/l.sock"),                      // 3
        "unix-pair".to_string(),                                // 4
        format!("unix-dgram:{d}/d.sock"),                       // 5
        "timewait:127.0.0.1".to_string(),                       // 6
    ]);
    let it = |i: usize| h.item(i);
    let listen = set(&[it(0).role("listener"), it(3).sock()]);
    let estab = set(&[
        it(0).role("client"),
        it(0).role("server"),
        it(2).sock(),
        it(4).role("a"),
        it(4).role("b"),
    ]);
    let unconn = set(&[it(1).sock(), it(5).sock()]);
    assert_eq!(listed_for(&h, &["--state", "LISTEN"]), listen);
    assert_eq!(listed_for(&h, &["--state", "ESTABLISHED"]), estab);
    assert_eq!(listed_for(&h, &["--state", "established"]), estab);
    assert_eq!(listed_for(&h, &["--state", "UNCONN"]), unconn);
    assert_eq!(
        listed_for(&h, &["--state", "LISTEN,UNCONN"]),
        listen.union(&unconn).copied().collect()
    );
    assert_eq!(
        listed_for(&h, &["--state", "CLOSE_WAIT,SYN_SENT"]),
        BTreeSet::new()
    );
    assert_eq!(
        listed_for(&h, &["--state", "LISTEN", "-P", "unix"]),
        set(&[it(3).sock()])
    );
    // --state with -l: AND (ESTABLISHED sockets are not listening).
    assert_eq!(
        listed_for(&h, &["--state", "ESTABLISHED", "-l"]),
        BTreeSet::new()
    );
    // Other tests may reuse this ephemeral port towards other destinations, so look at the
    // TIME_WAIT's own 4-tuple: local port tw, and the remote port it had.
    let tw_port = it(6).sock().port();
    let tw = tw_port.to_string();
    let v = sockstat(&["--state", "time-wait", "-p", &tw, "--no-owners"]).json();
    let mine: Vec<&serde_json::Value> = sockets(&v)
        .iter()
        .filter(|s| s["local"]["port"] == tw_port)
        .collect();
    assert_eq!(mine.len(), 1, "{v:#}");
    assert_eq!(mine[0]["state"], "TIME_WAIT");
    let remote_port = mine[0]["remote"]["port"].clone();
    let v = sockstat(&["--state", "ESTABLISHED", "-p", &tw, "--no-owners"]).json();
    assert!(
        !sockets(&v)
            .iter()
            .any(|s| s["local"]["port"] == tw_port && s["remote"]["port"] == remote_port),
        "{v:#}"
    );
}

#[test]
fn pid_filter() {
    let a = Holder::spawn(&["tcp4-listen:127.0.0.1:0", "fork", "udp4:127.0.0.1:0"]);
    let b = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let (ap, ac, bp) = (
        u64::from(a.pid()),
        u64::from(a.child_pid()),
        u64::from(b.pid()),
    );
    let shared = a.item(0).sock();
    let fd = shared.fd() as u64;

    let v = sockstat(&["--pid", &ap.to_string()]).json();
    assert_eq!(ids(&v), a.inodes());
    // Only the matching holder stays in the owners list of a shared socket.
    assert_eq!(owners(by_id(&v)[&shared.inode()]), vec![(ap, fd)]);

    let v = sockstat(&["--pid", &ac.to_string()]).json();
    assert_eq!(
        ids(&v),
        set(&[shared]),
        "the child holds only what existed at fork"
    );
    assert_eq!(owners(by_id(&v)[&shared.inode()]), vec![(ac, fd)]);

    let v = sockstat(&["--pid", &format!("{ap},{bp}")]).json();
    let want: BTreeSet<u64> = a.inodes().union(&b.inodes()).copied().collect();
    assert_eq!(ids(&v), want);

    let v = sockstat(&["--pid", &format!("{bp},{ac},{ap}")]).json();
    let mut w = vec![(ap, fd), (ac, fd)];
    w.sort();
    assert_eq!(owners(by_id(&v)[&shared.inode()]), w);

    // A pid that holds nothing: an empty, successful listing.
    let out = sockstat(&["--pid", "4194304"]).ok();
    assert_eq!(out.table().rows.len(), 0, "{}", out.stdout);
    let v = sockstat(&["--pid", "4194304"]).json();
    assert_eq!(sockets(&v).len(), 0);

    // With a port: AND.
    let v = sockstat(&["--pid", &bp.to_string(), "-p", &shared.port().to_string()]).json();
    assert_eq!(sockets(&v).len(), 0, "{v:#}");
}

#[test]
fn user_filter_by_name_and_uid_and_kernel_uid_of_unowned_sockets() {
    require_root!("user_filter_by_name_and_uid_and_kernel_uid_of_unowned_sockets (setuid)");
    let nobody = Holder::spawn(&["setuid:65534", "tcp4-listen:127.0.0.1:0", "tcp4-pending"]);
    let root = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    assert_eq!(nobody.report.uid, 65534);
    let nl = nobody.item(1).sock();
    let pend = nobody.item(2);
    let rl = root.item(0).sock();
    let ports = format!(
        "{},{},{}",
        nl.port(),
        pend.role("listener").port(),
        rl.port()
    );

    for user in ["nobody", "65534"] {
        let v = sockstat(&["--user", user, "-p", &ports]).json();
        let s = sockets(&v);
        assert_eq!(s.len(), 4, "{v:#}");
        let want = set(&[nl, pend.role("listener"), pend.role("client")]);
        assert_eq!(ids(&v), want);
        for x in s.iter().filter(|x| x["id"].is_u64()) {
            assert_eq!(x["owners_status"], "known");
            for o in x["owners"].as_array().unwrap() {
                assert_eq!(o["uid"], 65534);
                assert_eq!(o["user"], "nobody");
                assert_eq!(o["pid"], nobody.pid());
            }
        }
        // The accepted-but-never-accept()ed end: no holder, the kernel's uid is nobody's.
        let p = pend.role("pending");
        let unowned: Vec<&Value> = s.iter().filter(|x| x["id"].is_null()).collect();
        assert_eq!(unowned.len(), 1, "{v:#}");
        let u = unowned[0];
        assert_eq!(u["state"], "ESTABLISHED");
        assert_eq!(u["local"], addr_json(p.local.as_ref().unwrap()));
        assert_eq!(u["remote"], addr_json(p.peer.as_ref().unwrap()));
        assert_eq!(u["uid"], 65534);
        assert_eq!(u["user"], "nobody");
        assert_eq!(u["owners_status"], "none");
        assert_eq!(u["owners"], json!([]));
    }
    for user in ["root", "0"] {
        let v = sockstat(&["--user", user, "-p", &ports]).json();
        assert_eq!(ids(&v), set(&[rl]), "{v:#}");
        assert_eq!(sockets(&v).len(), 1, "{v:#}");
    }
    // Table: the USER column is the holder's user.
    let out = sockstat(&["--user", "nobody", "-p", &ports]).ok();
    let t = out.table();
    assert_eq!(t.rows.len(), 4, "{}", out.stdout);
    assert!(t.rows.iter().all(|r| r[0] == "nobody"), "{}", out.stdout);
    // The connection waiting in the accept queue: no process can hold it yet.
    let unowned = t.rows_where("PID", "-");
    assert_eq!(unowned.len(), 1, "{}", out.stdout);
    assert_eq!(
        unowned[0][t.col("COMMAND")],
        "(accept-queue)",
        "{}",
        out.stdout
    );
    // AND with --pid: the unowned socket has no holder, so it goes.
    let v = sockstat(&["--user", "nobody", "--pid", &nobody.pids(), "-p", &ports]).json();
    assert_eq!(sockets(&v).len(), 3, "{v:#}");
}

#[test]
fn fin_wait2_orphan_is_not_attributed_to_root() {
    require_root!("fin_wait2_orphan_is_not_attributed_to_root (setuid)");
    let h = Holder::spawn(&["setuid:65534", "finwait2:127.0.0.1"]);
    let orphan = h.item(1).role("finwait2");
    let port = orphan.port().to_string();
    let v = sockstat(&["-p", &port]).json();
    let fw: Vec<&Value> = sockets(&v)
        .iter()
        .filter(|s| s["state"] == "FIN_WAIT2")
        .collect();
    assert_eq!(fw.len(), 1, "{v:#}");
    assert_eq!(fw[0]["id"], Value::Null);
    assert_eq!(fw[0]["owners_status"], "none");
    // The kernel reports uid 0 for timewait minisocks (tcp_twsk_diag_fill) whatever their
    // real owner was: nobody made this one, root did not.
    assert_eq!(fw[0]["uid"], Value::Null, "{v:#}");
    assert_eq!(fw[0]["user"], Value::Null, "{v:#}");
    let v = sockstat(&["-p", &port, "--user", "root"]).json();
    assert!(
        sockets(&v).iter().all(|s| s["state"] != "FIN_WAIT2"),
        "nobody's orphan attributed to root: {v:#}"
    );
}

#[test]
fn command_filter_exact_and_glob() {
    let name = format!(
        "sc{}x{}",
        std::process::id() % 100_000,
        unique("").rsplit('-').next().unwrap()
    );
    let h = Holder::spawn(&[
        "tcp4-listen:127.0.0.1:0".to_string(),
        "unix-pair".to_string(),
        format!("comm:{name}"),
    ]);
    let other = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let v = sockstat(&["--command", &name]).json();
    assert_eq!(ids(&v), h.inodes(), "{v:#}");
    for s in sockets(&v) {
        for o in s["owners"].as_array().unwrap() {
            assert_eq!(o["command"], name.as_str());
        }
    }
    // Globs.
    let prefix = &name[..name.len() - 1];
    assert_eq!(listed(&["--command", &format!("{prefix}*")]), h.inodes());
    assert_eq!(listed(&["--command", &format!("{prefix}?")]), h.inodes());
    assert_eq!(
        listed(&["--command", &format!("*{}", &name[1..])]),
        h.inodes()
    );
    // Exact means exact: a prefix does not match.
    assert_eq!(listed(&["--command", prefix]), BTreeSet::new());
    // AND with other filters.
    assert_eq!(
        listed(&["--command", &name, "-P", "tcp"]),
        set(&[h.item(0).sock()])
    );
    assert_eq!(
        listed(&["--command", &name, "--pid", &other.pids()]),
        BTreeSet::new()
    );
    assert_eq!(
        listed_for(&other, &["--command", "sockholder"]),
        other.inodes()
    );
    assert_eq!(
        listed_for(&other, &["--command", "sockhold"]),
        BTreeSet::new()
    );
    assert_eq!(listed_for(&other, &["--command", "sock*"]), other.inodes());
    assert_eq!(
        listed_for(&other, &["--command", "*holder"]),
        other.inodes()
    );
}

#[test]
fn no_owners_skips_the_scan() {
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0", "tcp4-pair"]);
    let l = h.item(0).sock();
    let port = l.port().to_string();
    // -p matches either end, and the port numbers are the host's: other tests' connections
    // leave TIME-WAIT entries with any of them (seen on a loaded host). This test's sockets
    // are listeners and connections.
    let mine = "LISTEN,ESTABLISHED";
    let v = sockstat(&["--no-owners", "-p", &port, "--state", mine]).json();
    let s = sockets(&v);
    assert_eq!(s.len(), 1, "{v:#}");
    assert_eq!(s[0]["id"], l.inode());
    assert_eq!(s[0]["owners_status"], "not_requested");
    assert_eq!(s[0]["owners"], json!([]));
    assert_eq!(s[0]["uid"], me().0);
    assert!(warnings(&v).is_empty(), "{v:#}");

    let out = sockstat(&["--no-owners", "-p", &port, "--state", mine]).ok();
    let t = out.table();
    assert_eq!(
        t.rows,
        vec![row(&[&me().1, "tcp4", &format!("127.0.0.1:{port}"), "*:*"])],
        "\n{}",
        out.stdout
    );
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    // The same sockets with and without the scan.
    let pair = h.item(1);
    let ports = format!(
        "{},{}",
        pair.role("listener").port(),
        pair.role("client").port()
    );
    let with = sockstat(&["-p", &ports, "--state", mine]).json();
    let without = sockstat(&["-p", &ports, "--no-owners", "--state", mine]).json();
    assert_eq!(ids(&with), ids(&without));
    assert_eq!(
        ids(&with),
        set(&[
            pair.role("listener"),
            pair.role("client"),
            pair.role("server")
        ])
    );
}

/// `(label, state, count)` lines of a summary table, and its total.
fn summary_table(out: &Out) -> (Vec<(String, String, u64)>, u64) {
    let mut lines = out.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["PROTO", "STATE", "COUNT"], "{}", out.stdout);
    let mut rows = Vec::new();
    let mut total = None;
    for l in lines {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["total", n] => total = Some(n.parse().unwrap()),
            [p, s, n] => rows.push((p.to_string(), s.to_string(), n.parse().unwrap())),
            _ => panic!("bad summary line {l:?}"),
        }
    }
    (rows, total.expect("a total line"))
}

#[test]
fn summary_counts_sockets_not_rows() {
    let dir = tempdir();
    let d = dir.path().display();
    let h = Holder::spawn(&[
        "tcp4-listen:127.0.0.1:0".to_string(),
        "unix-pair".to_string(),
        "fork".to_string(),
        "tcp4-pair".to_string(),
        format!("unix-listen:{d}/s.sock"),
        "udp6:[::1]:0".to_string(),
    ]);
    let pids = h.pids();
    // The table has one row per (socket, holder): the shared listener and pair twice.
    let rows = sockstat(&["--pid", &pids, "-q"]).ok();
    assert_eq!(rows.stdout.lines().count(), 11, "{}", rows.stdout);

    let out = sockstat(&["--pid", &pids, "--summary"]).ok();
    let (rows, total) = summary_table(&out);
    let r = |p: &str, s: &str, n: u64| (p.to_string(), s.to_string(), n);
    assert_eq!(
        rows,
        vec![
            r("tcp4", "ESTABLISHED", 2),
            r("tcp4", "LISTEN", 2),
            r("udp6", "UNCONN", 1),
            r("unix", "ESTABLISHED", 2),
            r("unix", "LISTEN", 1),
        ],
        "\n{}",
        out.stdout
    );
    assert_eq!(total, 8);

    let out = sockstat(&["--pid", &pids, "--summary", "-P", "tcp"]).ok();
    assert_eq!(summary_table(&out).1, 4, "{}", out.stdout);

    let out = sockstat(&["--pid", &pids, "--summary", "--csv"]).ok();
    assert_eq!(
        out.stdout,
        "proto,family,state,count\n\
         tcp,inet,ESTABLISHED,2\n\
         tcp,inet,LISTEN,2\n\
         udp,inet6,UNCONN,1\n\
         unix,unix,ESTABLISHED,2\n\
         unix,unix,LISTEN,1\n"
    );

    let out = sockstat(&["--pid", &pids, "--summary", "--json"]).ok();
    let v: Value = serde_json::from_str(&out.stdout).expect("summary JSON");
    assert_eq!(v["version"], 1);
    assert_eq!(v["total"], 8);
    assert_eq!(
        v["summary"],
        json!([
            {"proto": "tcp", "family": "inet", "state": "ESTABLISHED", "count": 2},
            {"proto": "tcp", "family": "inet", "state": "LISTEN", "count": 2},
            {"proto": "udp", "family": "inet6", "state": "UNCONN", "count": 1},
            {"proto": "unix", "family": "unix", "state": "ESTABLISHED", "count": 2},
            {"proto": "unix", "family": "unix", "state": "LISTEN", "count": 1},
        ])
    );
    assert_eq!(v["warnings"], json!([]));
}

#[test]
fn summary_json_matches_the_schema() {
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let out = sockstat(&["--pid", &h.pids(), "--summary", "--json"]).ok();
    // Every JSON document sockstat prints must validate against the published schema.
    out.json();
}
