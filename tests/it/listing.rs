//! Issue 2 item 9.1: one holder with every kind of socket, checked through `--json` and the
//! table, with `--pid` and with `-p`.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::common::*;

/// Specs of the big holder; the indices are used below.
fn big_holder(dir: &std::path::Path, abstract_name: &str) -> Holder {
    let listen = dir.join("listen.sock");
    let specs = vec![
        "tcp4-listen:127.0.0.1:0".to_string(), // 0 shared with the child
        "fork".to_string(),                    // 1
        "tcp6-listen:[::1]:0".to_string(),     // 2
        "tcp4-pair".to_string(),               // 3
        "udp4:127.0.0.1:0".to_string(),        // 4
        "udp6:[::1]:0".to_string(),            // 5
        "udp4-connected:127.0.0.1:0->127.0.0.1:#4".to_string(), // 6
        "udp6-connected:[::1]:0->[::1]:#5".to_string(), // 7
        format!("unix-listen:{}", listen.display()), // 8
        format!("unix-abstract-listen:{abstract_name}"), // 9
        "unix-pair".to_string(),               // 10
        "timewait:127.0.0.1".to_string(),      // 11
        "tcp6-pair".to_string(),               // 12
    ];
    Holder::spawn(&specs)
}

/// What one socket of the holder must look like in JSON (owners checked separately).
fn expected_socket(s: &Sock, proto: &str, family: &str, ty: &str, state: &str) -> Value {
    let local = s.local.as_ref().map(addr_json).unwrap_or(json!({}));
    json!({
        "id": s.inode(),
        "proto": proto,
        "family": family,
        "type": ty,
        "state": state,
        "local": local,
        "uid": me().0,
        "user": me().1,
        "owners_status": "known",
    })
}

fn check_fields(got: &Value, want: &Value) {
    for (k, v) in want.as_object().unwrap() {
        assert_eq!(&got[k], v, "field {k} of {got}");
    }
}

#[test]
fn every_socket_kind_is_listed_with_its_holders_json() {
    let dir = tempdir();
    let abs = unique("sst-abs");
    let h = big_holder(dir.path(), &abs);
    let (p, c) = (u64::from(h.pid()), u64::from(h.child_pid()));
    let v = sockstat(&["--pid", &h.pids()]).json();
    let socks = by_id(&v);

    // Exactly the holder's sockets: nothing more, nothing less.
    assert_eq!(ids(&v), h.inodes(), "{v:#}");
    assert!(warnings(&v).is_empty(), "{v:#}");

    let get = |s: &Sock| {
        *socks
            .get(&s.inode())
            .unwrap_or_else(|| panic!("{s:?} missing"))
    };
    let fd = |s: &Sock| s.fd() as u64;

    // The listener shared with the forked child: both (pid, fd), sorted by pid then fd.
    let shared = h.item(0).sock();
    let got = get(shared);
    check_fields(
        got,
        &expected_socket(shared, "tcp", "inet", "stream", "LISTEN"),
    );
    assert_eq!(got["remote"], Value::Null);
    let mut want = vec![(p, fd(shared)), (c, fd(shared))];
    want.sort();
    assert_eq!(owners(got), want);
    for o in got["owners"].as_array().unwrap() {
        assert_eq!(o["command"], "sockholder");
        assert_eq!(o["uid"], me().0);
        assert_eq!(o["user"], me().1);
    }

    // Everything opened after the fork has exactly one holder: the parent.
    let single = |s: &Sock| {
        assert_eq!(owners(get(s)), vec![(p, fd(s))], "{s:?}");
    };

    let l6 = h.item(2).sock();
    check_fields(
        get(l6),
        &expected_socket(l6, "tcp", "inet6", "stream", "LISTEN"),
    );
    assert_eq!(get(l6)["local"]["address"], "::1");
    assert_eq!(get(l6)["remote"], Value::Null);
    single(l6);

    for (item, family) in [(3, "inet"), (12, "inet6")] {
        let pair = h.item(item);
        for role in ["client", "server"] {
            let s = pair.role(role);
            let got = get(s);
            check_fields(
                got,
                &expected_socket(s, "tcp", family, "stream", "ESTABLISHED"),
            );
            assert_eq!(got["remote"], addr_json(s.peer.as_ref().unwrap()));
            single(s);
        }
        assert_eq!(
            pair.role("client").peer.as_ref().unwrap().port(),
            pair.role("listener").port()
        );
        check_fields(
            get(pair.role("listener")),
            &expected_socket(pair.role("listener"), "tcp", family, "stream", "LISTEN"),
        );
    }

    for (item, family) in [(4, "inet"), (5, "inet6")] {
        let s = h.item(item).sock();
        check_fields(
            get(s),
            &expected_socket(s, "udp", family, "dgram", "UNCONN"),
        );
        assert_eq!(get(s)["remote"], Value::Null);
        single(s);
    }
    for (item, target, family) in [(6, 4, "inet"), (7, 5, "inet6")] {
        let s = h.item(item).sock();
        let got = get(s);
        check_fields(
            got,
            &expected_socket(s, "udp", family, "dgram", "ESTABLISHED"),
        );
        assert_eq!(
            got["remote"],
            addr_json(h.item(target).sock().local.as_ref().unwrap())
        );
        single(s);
    }

    let ul = h.item(8).sock();
    check_fields(
        get(ul),
        &expected_socket(ul, "unix", "unix", "stream", "LISTEN"),
    );
    assert_eq!(
        get(ul)["local"],
        json!({"path": dir.path().join("listen.sock").to_str().unwrap()})
    );
    assert_eq!(get(ul)["remote"], Value::Null);
    single(ul);

    let ua = h.item(9).sock();
    check_fields(
        get(ua),
        &expected_socket(ua, "unix", "unix", "stream", "LISTEN"),
    );
    assert_eq!(get(ua)["local"], json!({ "path": format!("@{abs}") }));
    single(ua);

    let (a, b) = (h.item(10).role("a"), h.item(10).role("b"));
    for (x, y) in [(a, b), (b, a)] {
        let got = get(x);
        check_fields(
            got,
            &expected_socket(x, "unix", "unix", "stream", "ESTABLISHED"),
        );
        assert_eq!(got["local"], json!({}));
        assert_eq!(got["remote"]["peer"], json!(y.inode()));
        // The peer's holder, so a script need not look the peer up by inode.
        let peer_owners: Vec<(u64, u64)> = got["remote"]["peer_owners"]
            .as_array()
            .expect("remote.peer_owners")
            .iter()
            .map(|o| (o["pid"].as_u64().unwrap(), o["fd"].as_u64().unwrap()))
            .collect();
        assert_eq!(peer_owners, [(u64::from(h.pid()), y.fd() as u64)]);
        single(x);
    }

    // Cookies are decimal strings on the netlink path.
    for s in sockets(&v) {
        assert!(
            s["cookie"]
                .as_str()
                .is_some_and(|c| c.parse::<u64>().is_ok()),
            "{s}"
        );
    }
    check_order(&v);
}

/// Output order: protocol, family, local address, local port, remote, then first holder.
pub fn check_order(v: &Value) {
    let proto_rank = |p: &str| {
        [
            "tcp", "udp", "udplite", "raw", "sctp", "mptcp", "unix", "packet",
        ]
        .iter()
        .position(|x| *x == p)
        .unwrap()
    };
    let fam_rank = |f: &str| {
        ["inet", "inet6", "unix", "packet"]
            .iter()
            .position(|x| *x == f)
            .unwrap()
    };
    type Key = (
        usize,
        usize,
        Option<(std::net::IpAddr, u64)>,
        Option<(std::net::IpAddr, u64)>,
    );
    let key = |s: &Value| -> Key {
        let ep = |e: &Value| -> Option<(std::net::IpAddr, u64)> {
            Some((e["address"].as_str()?.parse().ok()?, e["port"].as_u64()?))
        };
        (
            proto_rank(s["proto"].as_str().unwrap()),
            fam_rank(s["family"].as_str().unwrap()),
            ep(&s["local"]),
            ep(&s["remote"]),
        )
    };
    let keys: Vec<Key> = sockets(v).iter().map(key).collect();
    for w in keys.windows(2) {
        assert!(
            w[0] <= w[1],
            "out of order: {:?} before {:?}\n{v:#}",
            w[0],
            w[1]
        );
    }
    for s in sockets(v) {
        let o = owners(s);
        let mut sorted = o.clone();
        sorted.sort();
        assert_eq!(o, sorted, "owners not sorted by pid then fd: {s}");
    }
}

#[test]
fn every_socket_kind_is_listed_with_its_holders_table() {
    let dir = tempdir();
    let abs = unique("sst-abs");
    let h = big_holder(dir.path(), &abs);
    let (p, c) = (h.pid().to_string(), h.child_pid().to_string());
    let user = me().1;
    let out = sockstat(&["--pid", &h.pids()]).ok();
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let first = out.stdout.lines().next().unwrap();
    let words: Vec<&str> = first.split_whitespace().collect();
    assert_eq!(
        words,
        ["USER", "COMMAND", "PID", "FD", "PROTO", "LOCAL", "ADDRESS", "FOREIGN", "ADDRESS"],
        "header: {first:?}"
    );
    let t = out.table();

    let mut want: Vec<Vec<String>> = Vec::new();
    let mut add = |pid: &str, s: &Sock, proto: &str, foreign: String| {
        want.push(row(&[
            &user,
            "sockholder",
            pid,
            &s.fd().to_string(),
            proto,
            &addr_cell(s.local.as_ref()),
            &foreign,
        ]));
    };
    let shared = h.item(0).sock();
    add(&p, shared, "tcp4", "*:*".into());
    add(&c, shared, "tcp4", "*:*".into());
    add(&p, h.item(2).sock(), "tcp6", "*:*".into());
    for (i, proto) in [(3, "tcp4"), (12, "tcp6")] {
        let pair = h.item(i);
        add(&p, pair.role("listener"), proto, "*:*".into());
        for role in ["client", "server"] {
            let s = pair.role(role);
            add(&p, s, proto, addr_cell(s.peer.as_ref()));
        }
    }
    add(&p, h.item(4).sock(), "udp4", "*:*".into());
    add(&p, h.item(5).sock(), "udp6", "*:*".into());
    add(
        &p,
        h.item(6).sock(),
        "udp4",
        addr_cell(h.item(4).sock().local.as_ref()),
    );
    add(
        &p,
        h.item(7).sock(),
        "udp6",
        addr_cell(h.item(5).sock().local.as_ref()),
    );
    add(&p, h.item(8).sock(), "stream", "*:*".into());
    add(&p, h.item(9).sock(), "stream", "*:*".into());
    let (a, b) = (h.item(10).role("a"), h.item(10).role("b"));
    add(&p, a, "stream", format!("[{p} {}]", b.fd()));
    add(&p, b, "stream", format!("[{p} {}]", a.fd()));

    let got: BTreeSet<Vec<String>> = t.rows.iter().cloned().collect();
    let want_set: BTreeSet<Vec<String>> = want.iter().cloned().collect();
    assert_eq!(got, want_set, "\n{}", out.stdout);
    assert_eq!(t.rows.len(), want.len(), "\n{}", out.stdout);

    // Concrete spellings, as the spec shows them.
    let l4 = h.item(0).sock();
    let fd4 = l4.fd().to_string();
    let local4 = format!("127.0.0.1:{}", l4.port());
    assert!(
        out.stdout
            .lines()
            .any(|l| cells(l) == row(&[&user, "sockholder", &p, &fd4, "tcp4", &local4, "*:*"])),
        "{}",
        out.stdout
    );
    let l6 = h.item(2).sock().port();
    assert!(
        out.stdout.contains(&format!("[::1]:{l6}")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!("@{abs}")), "{}", out.stdout);

    // Same order as JSON, one row per (socket, holder).
    let v = sockstat(&["--pid", &h.pids()]).json();
    let json_rows: Vec<(String, String)> = sockets(&v)
        .iter()
        .flat_map(|s| {
            owners(s)
                .into_iter()
                .map(|(pid, fd)| (pid.to_string(), fd.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    let table_rows: Vec<(String, String)> = t
        .rows
        .iter()
        .map(|r| (r[t.col("PID")].clone(), r[t.col("FD")].clone()))
        .collect();
    assert_eq!(table_rows, json_rows);
}

#[test]
fn time_wait_is_listed_without_owner() {
    let h = Holder::spawn(&["timewait:127.0.0.1", "timewait:::1"]);
    for (i, proto) in [(0, "tcp4"), (1, "tcp6")] {
        let tw = h.item(i).sock();
        let port = tw.port().to_string();
        // `-p` matches either end: another test's connection to a listener that took this port
        // once the entry's own connection closed may be listed too. The entry is ours by its
        // local end.
        let local = addr_json(tw.local.as_ref().unwrap());
        let v = sockstat(&["-p", &port]).json();
        let s: Vec<&Value> = sockets(&v).iter().filter(|s| s["local"] == local).collect();
        assert_eq!(s.len(), 1, "{v:#}");
        let s = s[0];
        assert_eq!(s["state"], "TIME_WAIT");
        assert_eq!(s["id"], Value::Null);
        assert_eq!(s["uid"], Value::Null);
        assert_eq!(s["user"], Value::Null);
        assert_eq!(s["owners_status"], "none");
        assert_eq!(s["owners"], json!([]));
        assert_eq!(s["proto"], "tcp");
        assert_eq!(s["local"], addr_json(tw.local.as_ref().unwrap()));
        assert_eq!(s["remote"], addr_json(tw.peer.as_ref().unwrap()));

        // One table run (-s -i), checked column by column: the first seven are the plain table.
        let out = sockstat(&["-p", &port, "-s", "-i"]).ok();
        let mut t = out.table();
        let local_cell = addr_cell(tw.local.as_ref());
        let lc = t.col("LOCAL ADDRESS");
        t.rows.retain(|r| r[lc] == local_cell);
        let plain: Vec<Vec<String>> = t.rows.iter().map(|r| r[..7].to_vec()).collect();
        assert_eq!(
            plain,
            vec![row(&[
                "-",
                "(time-wait)",
                "-",
                "-",
                proto,
                &addr_cell(tw.local.as_ref()),
                &addr_cell(tw.peer.as_ref()),
            ])],
            "\n{}",
            out.stdout
        );
        assert_eq!(t.rows[0][t.col("STATE")], "TIME_WAIT");
        assert_eq!(t.rows[0][t.col("ID")], "-");
    }
}

#[test]
fn port_filter_without_pid_finds_both_holders_of_a_shared_listener() {
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0", "tcp6-listen:[::1]:0", "fork"]);
    let (p, c) = (u64::from(h.pid()), u64::from(h.child_pid()));
    let l4 = h.item(0).sock();
    let l6 = h.item(1).sock();
    // Listeners only (-l): the port numbers are the kernel's pick, and another test's
    // connection may have used the same number before (a TIME-WAIT entry left on it).
    let v = sockstat(&["-l", "-p", &format!("{},{}", l4.port(), l6.port())]).json();
    let s = sockets(&v);
    assert_eq!(s.len(), 2, "{v:#}");
    assert_eq!(s[0]["id"], l4.inode(), "tcp4 sorts before tcp6");
    assert_eq!(s[1]["id"], l6.inode());
    for (got, l) in s.iter().zip([l4, l6]) {
        let fd = l.fd() as u64;
        let mut want = vec![(p, fd), (c, fd)];
        want.sort();
        assert_eq!(owners(got), want);
        assert_eq!(got["owners_status"], "known");
    }

    let out = sockstat(&["-l", "-p", &l4.port().to_string()]).ok();
    let t = out.table();
    let (lo, hi) = (p.min(c).to_string(), p.max(c).to_string());
    let local = format!("127.0.0.1:{}", l4.port());
    let fd = l4.fd().to_string();
    assert_eq!(
        t.rows,
        vec![
            row(&[&me().1, "sockholder", &lo, &fd, "tcp4", &local, "*:*"]),
            row(&[&me().1, "sockholder", &hi, &fd, "tcp4", &local, "*:*"]),
        ],
        "\n{}",
        out.stdout
    );
}
