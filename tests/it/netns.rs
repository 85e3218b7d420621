//! Issue 2 item 9.6: in a private network namespace, sockstat agrees with `ss`, and the /proc
//! fallback agrees with netlink.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::Value;

use crate::common::*;

type Ep = Option<(IpAddr, u16)>;
/// (proto, local, remote, state, inode; 0 = none).
type Key = (String, Ep, Ep, String, u64);

fn ss_endpoint(s: &str) -> Ep {
    let (host, port) = s
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("ss endpoint {s:?}"));
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = host.split('%').next().unwrap();
    if port == "*" {
        return None;
    }
    let ip: IpAddr = host.parse().unwrap_or_else(|_| panic!("ss address {s:?}"));
    Some((ip, port.parse().unwrap()))
}

fn ss_state(proto: &str, s: &str) -> String {
    match s {
        "ESTAB" => "ESTABLISHED",
        "UNCONN" if proto == "tcp" => "CLOSE",
        "UNCONN" => "UNCONN",
        "LISTEN" => "LISTEN",
        "TIME-WAIT" => "TIME_WAIT",
        "SYN-SENT" => "SYN_SENT",
        "SYN-RECV" => "SYN_RECV",
        "FIN-WAIT-1" => "FIN_WAIT1",
        "FIN-WAIT-2" => "FIN_WAIT2",
        "CLOSE-WAIT" => "CLOSE_WAIT",
        "LAST-ACK" => "LAST_ACK",
        "CLOSING" => "CLOSING",
        other => panic!("unknown ss state {other}"),
    }
    .to_string()
}

fn parse_ss(text: &str) -> BTreeSet<Key> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let proto = t[0].to_string();
            let ino = t
                .iter()
                .find_map(|x| x.strip_prefix("ino:"))
                .unwrap_or_else(|| panic!("no ino: in {l:?}"))
                .parse()
                .unwrap();
            let state = ss_state(&proto, t[1]);
            (proto, ss_endpoint(t[4]), ss_endpoint(t[5]), state, ino)
        })
        .collect()
}

fn json_ep(e: &Value) -> Ep {
    if e.is_null() {
        return None;
    }
    Some((
        e["address"].as_str()?.parse().ok()?,
        e["port"].as_u64()? as u16,
    ))
}

fn json_keys(v: &Value) -> BTreeSet<Key> {
    sockets(v)
        .iter()
        .map(|s| {
            (
                s["proto"].as_str().unwrap().to_string(),
                json_ep(&s["local"]),
                json_ep(&s["remote"]),
                s["state"].as_str().unwrap().to_string(),
                s["id"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn populate(ns: &Netns, dir: &std::path::Path) -> (Holder, Holder) {
    ns.add_addr("192.0.2.1/32");
    ns.add_addr("2001:db8::1/128");
    let d = dir.display();
    let h1 = Holder::spawn_in(
        ns,
        &[
            "tcp4-listen:127.0.0.1:0".to_string(),
            "tcp6-listen:[::1]:0".to_string(),
            "tcp4-pair".to_string(),
            "tcp6-pair:2001:db8::1".to_string(),
            "udp4:127.0.0.1:0".to_string(),
            "udp6:[::1]:0".to_string(),
            "udp4-connected:192.0.2.1:0->127.0.0.1:#4".to_string(),
            "udp6-connected:[::1]:0->[2001:db8::1]:53".to_string(),
            "timewait:127.0.0.1".to_string(),
            "timewait:::1".to_string(),
            "tcp4-pending:192.0.2.1".to_string(),
            "finwait2:192.0.2.1".to_string(),
            "tcp4-listen:0.0.0.0:0".to_string(),
            "tcp6-listen:[::]:0".to_string(),
            "udp4:0.0.0.0:0".to_string(),
            format!("unix-listen:{d}/l.sock"),
            format!("unix-dgram:{d}/d.sock"),
            format!("unix-conn:{d}/c.sock"),
            format!("unix-abstract-listen:{}", unique("sst-ns")),
            "unix-pair".to_string(),
        ],
    );
    let h2 = Holder::spawn_in(
        ns,
        &[
            "tcp4-listen:192.0.2.1:0",
            "fork",
            "udp6:[2001:db8::1]:0",
            "unix-pair",
        ],
    );
    (h1, h2)
}

#[test]
fn sockstat_and_ss_see_the_same_sockets() {
    require_root!("sockstat_and_ss_see_the_same_sockets (ip netns)");
    let ns = Netns::new();
    let dir = tempdir();
    let (h1, h2) = populate(&ns, dir.path());
    let v = sockstat(&["-P", "tcp,udp", "-4", "-6", "--no-owners"])
        .netns(&ns)
        .json();
    let ss = ns.exec("ss", &["-tuanHe"]);
    assert_eq!(ss.code, Some(0), "{ss:#?}");
    let theirs = parse_ss(&ss.stdout);
    let ours = json_keys(&v);
    assert_eq!(sockets(&v).len(), ours.len(), "duplicate keys? {v:#}");
    let missing: Vec<&Key> = theirs.difference(&ours).collect();
    let extra: Vec<&Key> = ours.difference(&theirs).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "ss has, sockstat lacks: {missing:#?}\nsockstat has, ss lacks: {extra:#?}\nss:\n{}",
        ss.stdout
    );
    // Sanity: the comparison covered what the holders made (2 TIME_WAIT, 1 FIN_WAIT2, the
    // pending connection, the shared listener once).
    let inet_inodes: BTreeSet<u64> = h1
        .report
        .items
        .iter()
        .chain(h2.report.items.iter())
        .filter(|i| !i.kind.starts_with("unix"))
        .flat_map(|i| i.socks.iter().filter_map(|s| s.inode))
        .collect();
    let listed: BTreeSet<u64> = ours.iter().map(|k| k.4).filter(|&i| i != 0).collect();
    assert_eq!(listed, inet_inodes);
    let states: Vec<&str> = ours.iter().map(|k| k.3.as_str()).collect();
    assert_eq!(states.iter().filter(|s| **s == "TIME_WAIT").count(), 2);
    assert_eq!(states.iter().filter(|s| **s == "FIN_WAIT2").count(), 1);
    assert_eq!(states.iter().filter(|s| **s == "CLOSE_WAIT").count(), 1);
}

/// Identity of a socket as both sources can tell it: unix remote ends are not in /proc/net/unix.
fn identity(s: &Value) -> String {
    let remote = if s["proto"] == "unix" {
        Value::Null
    } else {
        s["remote"].clone()
    };
    format!(
        "{} {} {} {} {} {} {} {}",
        s["proto"],
        s["family"],
        s["type"],
        s["state"],
        s["local"],
        remote,
        s["id"],
        serde_json::to_string(&s["owners"]).unwrap()
    )
}

#[test]
fn proc_fallback_agrees_with_netlink() {
    require_root!("proc_fallback_agrees_with_netlink (ip netns)");
    let ns = Netns::new();
    let dir = tempdir();
    let (h1, h2) = populate(&ns, dir.path());
    // Owners restricted to the holders (one /proc pass over two processes, not the machine).
    let pids = format!("{},{}", h1.pids(), h2.pids());
    for (proto, owners) in [
        ("tcp", false),
        ("udp", false),
        ("unix", false),
        ("tcp,udp,unix", true),
    ] {
        let extra: Vec<&str> = if owners {
            vec!["--pid", &pids]
        } else {
            vec!["--no-owners"]
        };
        let nl = sockstat(&["-P", proto]).args(&extra).netns(&ns).json();
        let pr = sockstat(&["-P", proto, "--source", "proc"])
            .args(&extra)
            .netns(&ns)
            .json();
        let a: Vec<String> = sockets(&nl).iter().map(identity).collect();
        let b: Vec<String> = sockets(&pr).iter().map(identity).collect();
        let sa: BTreeSet<&String> = a.iter().collect();
        let sb: BTreeSet<&String> = b.iter().collect();
        assert_eq!(
            sa,
            sb,
            "{proto}: netlink only: {:#?}\nproc only: {:#?}",
            sa.difference(&sb).collect::<Vec<_>>(),
            sb.difference(&sa).collect::<Vec<_>>()
        );
        assert_eq!(a.len(), b.len(), "{proto}");
        assert!(a.len() >= 5, "{proto}: {nl:#}");
        // netlink gives cookies, /proc does not.
        assert!(sockets(&nl).iter().all(|s| s["cookie"].is_string()));
        assert!(sockets(&pr).iter().all(|s| s["cookie"].is_null()));
    }
    // Forcing netlink works here too.
    let forced = sockstat(&["-P", "tcp,udp,unix", "--source", "netlink", "--no-owners"])
        .netns(&ns)
        .json();
    let auto = sockstat(&["-P", "tcp,udp,unix", "--no-owners"])
        .netns(&ns)
        .json();
    assert_eq!(ids(&forced), ids(&auto));
}
