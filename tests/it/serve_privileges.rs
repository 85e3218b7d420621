//! The capabilities `sockstat serve` needs and keeps. It names the holders of listening sockets,
//! which takes CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE: run as nobody with exactly those (as the
//! systemd unit runs it), it names a listener root holds; with either one alone it cannot, and
//! says which one is missing. Whatever else it starts with is dropped once it listens, from
//! every thread: root's full set, or a service manager's ambient extras; and the threads that
//! accept connections and speak HTTP and TLS hold none at all (the collection thread keeps
//! the two).

use std::collections::BTreeMap;

use crate::common::*;
use crate::serve::{get, serve, serve_with, value, Served};

/// CAP_DAC_READ_SEARCH (2) and CAP_SYS_PTRACE (19).
const KEPT: u64 = (1 << 2) | (1 << 19);

/// One thread of the exporter: its id, its name (`comm`) and capability sets (`CapInh`,
/// `CapPrm`, `CapEff`, `CapBnd`, `CapAmb`).
#[derive(Debug)]
pub struct Thread {
    pub tid: u32,
    pub name: String,
    pub sets: BTreeMap<String, u64>,
}

impl Thread {
    /// What the thread does, by its name: the collection (`collect`, and the threads it
    /// starts, which take its name), the accepting thread (the main thread, `sockstat`),
    /// connections (`http`), the web configuration reader, the events reader.
    pub fn role(&self, pid: u32) -> &str {
        if self.tid == pid {
            "accept"
        } else {
            self.name.as_str()
        }
    }
}

/// Every thread of a process.
pub fn threads(pid: u32) -> Vec<Thread> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let t = t.expect("task");
        let (Ok(status), Ok(name)) = (
            std::fs::read_to_string(t.path().join("status")),
            std::fs::read_to_string(t.path().join("comm")),
        ) else {
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
        out.push(Thread {
            tid: t.file_name().to_string_lossy().parse().expect("a tid"),
            name: name.trim().to_string(),
            sets,
        });
    }
    out
}

/// Every thread of a process once each has its name. A thread is born with the name of the
/// thread that spawned it and names itself as it starts, so a connection thread the main thread
/// has just spawned shows the process's name for a moment; one that keeps it for 5 s never named
/// itself, and is returned as it is, for the caller to refuse.
pub fn named_threads(pid: u32) -> Vec<Thread> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let all = threads(pid);
        let main = all.iter().find(|t| t.tid == pid).map(|t| t.name.clone());
        let newborn = all
            .iter()
            .any(|t| t.tid != pid && Some(&t.name) == main.as_ref());
        if !newborn || std::time::Instant::now() >= deadline {
            return all;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Holds a connection to the exporter open, sending nothing, so that its thread exists (it
/// waits for a request head until the request deadline).
pub fn idle_connection(server: &Served) -> std::net::TcpStream {
    let c = std::net::TcpStream::connect(&server.addr).expect("connect");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !threads(server.pid).iter().any(|t| t.name == "http") {
        assert!(std::time::Instant::now() < deadline, "no connection thread");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    c
}

/// [`check_thread_caps`] while an idle connection holds a connection thread open, so that the
/// check sees one ("http"). The exporter closes a connection that sends no complete head
/// within 10 s of its accept: on a loaded machine the waits before the check (the thread to
/// appear, threads still naming themselves) can outlast that, and the check then finds no
/// connection thread to examine. Up to three connections are tried; each check is whole.
pub fn check_thread_caps_with_a_connection(
    server: &Served,
    kept: u64,
    bounding: u64,
) -> Vec<String> {
    let mut roles = Vec::new();
    for attempt in 1..=3 {
        let _held = idle_connection(server);
        roles = check_thread_caps(server.pid, kept, bounding);
        if roles.iter().any(|r| r == "http") {
            return roles;
        }
        eprintln!("attempt {attempt}: the idle connection's thread was gone before the check");
    }
    roles
}

/// Checks the capabilities of every thread of the exporter at `pid`: the collection keeps
/// `kept` (effective and permitted), every thread that talks to the network holds none, the
/// web configuration reader at most CAP_DAC_READ_SEARCH; none has inheritable or ambient ones,
/// and every bounding set is `bounding`. Returns the roles seen.
pub fn check_thread_caps(pid: u32, kept: u64, bounding: u64) -> Vec<String> {
    let mut roles = Vec::new();
    for t in named_threads(pid) {
        let role = t.role(pid).to_string();
        let want = match role.as_str() {
            "collect" => kept,
            "accept" | "http" | "events" => 0,
            "web-config" => kept & (1 << 2),
            other => panic!("a thread the test does not know: {other} ({t:x?})"),
        };
        assert_eq!(t.sets["CapEff"], want, "{role} thread: {t:x?}");
        assert_eq!(t.sets["CapPrm"], want, "{role} thread: {t:x?}");
        assert_eq!(t.sets["CapInh"], 0, "{role} thread: {t:x?}");
        assert_eq!(t.sets["CapAmb"], 0, "{role} thread: {t:x?}");
        assert_eq!(t.sets["CapBnd"], bounding, "{role} thread: {t:x?}");
        roles.push(role);
    }
    roles.sort();
    roles.dedup();
    roles
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
fn as_root_it_keeps_only_the_two_capabilities_and_the_network_threads_none() {
    require_root!("as_root_it_keeps_only_the_two_capabilities_and_the_network_threads_none");
    let h = Holder::spawn(&["comm:capprobe", "tcp4-listen:127.0.0.1:0"]);
    let server = serve();
    // A scrape runs the collection thread and the owner scan's threads.
    assert_eq!(command_of(&server, h.item(1).sock().port()), "capprobe");
    // Root has CAP_SETPCAP at start: the bounding set is trimmed too.
    let roles = check_thread_caps_with_a_connection(&server, KEPT, KEPT);
    assert_eq!(roles, ["accept", "collect", "http"], "{roles:?}");
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
                                            // Without CAP_SETPCAP the bounding set stays as the parent bounded it.
    let roles = check_thread_caps_with_a_connection(&server, KEPT, KEPT | extra);
    assert_eq!(roles, ["accept", "collect", "http"], "{roles:?}");
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
