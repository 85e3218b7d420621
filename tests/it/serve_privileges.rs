//! The capabilities `sockstat serve` needs and keeps. It names the holders of listening sockets,
//! which takes CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE: run as nobody with exactly those (as the
//! systemd unit runs it), it names a listener root holds; with either one alone it cannot, and
//! says which one is missing. Whatever else it starts with is dropped once it listens, from
//! every thread: root's full set, or a service manager's ambient extras.

use std::collections::BTreeMap;

use crate::common::*;
use crate::serve::{get, serve, serve_with, value, Served};

/// CAP_DAC_READ_SEARCH (2) and CAP_SYS_PTRACE (19).
const KEPT: u64 = (1 << 2) | (1 << 19);

/// The capability sets (`CapInh`, `CapPrm`, `CapEff`, `CapBnd`, `CapAmb`) of every thread of a
/// process, by thread id.
fn caps(pid: u32) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let t = t.expect("task");
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue; // a thread that ended meanwhile
        };
        let sets = status
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.starts_with("Cap")
                    .then(|| (k.to_string(), u64::from_str_radix(v.trim(), 16).ok()))
            })
            .filter_map(|(k, v)| Some((k, v?)))
            .collect();
        out.insert(t.file_name().to_string_lossy().into_owned(), sets);
    }
    out
}

fn as_nobody_with(caps: &str) -> Vec<String> {
    let mut p = vec![
        "setpriv".to_string(),
        "--reuid=65534".into(),
        "--regid=65534".into(),
        "--clear-groups".into(),
    ];
    if caps.is_empty() {
        p.push("--inh-caps=-all".into());
    } else {
        p.push(format!("--inh-caps=-all,{caps}"));
        p.push(format!("--ambient-caps=-all,{caps}"));
        p.push(format!("--bounding-set=-all,{caps}"));
    }
    p
}

fn start_as_nobody(caps: &str) -> Served {
    let prefix = as_nobody_with(caps);
    let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
    serve_with(&prefix, &["--scrape-budget", "10s"])
}

/// The `command` label the exporter gives the listener on `port`.
fn command_of(server: &Served, port: u16) -> String {
    let body = get(&server.addr, "/metrics").expect("scrape").body;
    let needle = format!("address=\"127.0.0.1\",port=\"{port}\",command=\"");
    let at = body
        .find(&needle)
        .unwrap_or_else(|| panic!("no listener on {port} in\n{body}"));
    let rest = &body[at + needle.len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

#[test]
fn as_root_it_keeps_only_the_two_capabilities_in_every_thread() {
    require_root!("as_root_it_keeps_only_the_two_capabilities_in_every_thread");
    let h = Holder::spawn(&["comm:capprobe", "tcp4-listen:127.0.0.1:0"]);
    let server = serve();
    // A scrape runs the collection thread and the owner scan's threads.
    assert_eq!(command_of(&server, h.item(1).sock().port()), "capprobe");
    let all = caps(server.pid);
    assert!(
        all.len() >= 2,
        "the accept loop and the collection thread: {all:?}"
    );
    for (tid, sets) in &all {
        assert_eq!(sets["CapEff"], KEPT, "thread {tid}: {sets:x?}");
        assert_eq!(sets["CapPrm"], KEPT, "thread {tid}: {sets:x?}");
        assert_eq!(sets["CapInh"], 0, "thread {tid}: {sets:x?}");
        assert_eq!(sets["CapAmb"], 0, "thread {tid}: {sets:x?}");
        // Root has CAP_SETPCAP at start: the bounding set is trimmed too.
        assert_eq!(sets["CapBnd"], KEPT, "thread {tid}: {sets:x?}");
    }
    assert!(!server.log().contains("without CAP_"), "{}", server.log());
}

#[test]
fn as_nobody_the_two_capabilities_name_roots_listener_and_extras_are_dropped() {
    require_root!(
        "as_nobody_the_two_capabilities_name_roots_listener_and_extras_are_dropped (setpriv)"
    );
    let h = Holder::spawn(&["comm:capprobe", "tcp4-listen:127.0.0.1:0"]);
    let port = h.item(1).sock().port();
    // The unit's set plus two more a careless service file might grant.
    let server = start_as_nobody("+dac_read_search,+sys_ptrace,+net_admin,+net_raw");
    assert_eq!(command_of(&server, port), "capprobe");
    let extra: u64 = (1 << 12) | (1 << 13); // CAP_NET_ADMIN, CAP_NET_RAW
    for (tid, sets) in caps(server.pid) {
        assert_eq!(sets["CapEff"], KEPT, "thread {tid}: {sets:x?}");
        assert_eq!(sets["CapPrm"], KEPT, "thread {tid}: {sets:x?}");
        assert_eq!(sets["CapAmb"], 0, "thread {tid}: {sets:x?}");
        assert_eq!(sets["CapInh"], 0, "thread {tid}: {sets:x?}");
        // Without CAP_SETPCAP the bounding set stays as the parent bounded it.
        assert_eq!(sets["CapBnd"], KEPT | extra, "thread {tid}: {sets:x?}");
    }
    let body = get(&server.addr, "/metrics").expect("scrape").body;
    assert!(body.contains("sockstat_up 1\n"), "{body}");
    assert!(!server.log().contains("without CAP_"), "{}", server.log());
}

#[test]
fn either_capability_alone_is_not_enough_and_the_warning_names_the_other() {
    require_root!(
        "either_capability_alone_is_not_enough_and_the_warning_names_the_other (setpriv)"
    );
    let h = Holder::spawn(&["comm:capprobe", "tcp4-listen:127.0.0.1:0"]);
    let port = h.item(1).sock().port();
    for (have, missing) in [
        ("+dac_read_search", "without CAP_SYS_PTRACE,"),
        ("+sys_ptrace", "without CAP_DAC_READ_SEARCH,"),
        ("", "without CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE,"),
    ] {
        let server = start_as_nobody(have);
        assert_eq!(command_of(&server, port), "?", "with [{have}]");
        let body = get(&server.addr, "/metrics").expect("scrape").body;
        assert!(
            value(&body, "sockstat_listeners_command_unknown{zone=\"global\"}") >= 1.0,
            "{body}"
        );
        let log = server.log_with(&[missing]);
        assert!(log.contains(missing), "with [{have}]: {log}");
        assert_eq!(log.matches("warning: without").count(), 1, "{log}");
    }
}
