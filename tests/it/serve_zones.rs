//! `sockstat serve -Z`: every zone (network namespace) from one exporter. Two namespaces made
//! here and the host each hold a listener on the same port, held by processes with different
//! command names, so only the zone label tells the series apart; a real Prometheus scrapes the
//! exporter over TLS with a password and a client certificate (the PKI of serve_tls.rs), and the
//! series it stored, read back through its HTTP API, carry the right zone and command. Zones
//! that go away between scrapes leave no series and no log line; zones created and removed
//! while collections run never fail one or make it warn. As nobody with the unit's capabilities,
//! -Z keeps exactly CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE and CAP_SYS_ADMIN and names a root
//! process's listener inside a namespace; without CAP_SYS_ADMIN it says so once.
//! All of it needs root (namespaces, setpriv): skipped loudly otherwise.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::serve::{get, results, serve_with, value, which, Prometheus, Served};
use crate::serve_privileges::{check_thread_caps, check_thread_caps_with_a_connection};
use crate::serve_tls::{pki, web_config, write_pki};

/// Starts a holder named `comm` listening on 127.0.0.1:`port` (0: any), in `ns` or on the host.
fn listener(ns: Option<&Netns>, comm: &str, port: u16) -> Holder {
    let specs = [
        format!("comm:{comm}"),
        format!("tcp4-listen:127.0.0.1:{port}"),
    ];
    match ns {
        Some(ns) => Holder::spawn_in(ns, &specs),
        None => Holder::spawn(&specs),
    }
}

/// `zone` → `command` of the listen-queue series on `port` in a scrape.
fn listeners_on(body: &str, port: u16) -> BTreeMap<String, String> {
    let needle = format!(
        "sockstat_listen_queue{{proto=\"tcp\",address=\"127.0.0.1\",port=\"{port}\",command=\""
    );
    body.lines()
        .filter_map(|l| l.strip_prefix(needle.as_str()))
        .filter_map(|rest| {
            let (command, rest) = rest.split_once("\",zone=\"")?;
            let (zone, _) = rest.split_once('"')?;
            Some((zone.to_string(), command.to_string()))
        })
        .collect()
}

#[test]
fn prometheus_stores_every_zones_series_scraped_over_tls_with_a_password() {
    require_root!("prometheus_stores_every_zones_series_scraped_over_tls_with_a_password");
    if !which("prometheus") {
        eprintln!("SKIPPED: prometheus not found (Debian package prometheus)");
        return;
    }
    let (a, b) = (Netns::new(), Netns::new());
    // A host setting the diagnosis flags in one zone only: its finding must carry that zone.
    a.exec("sysctl", &["-q", "-w", "net.ipv4.tcp_window_scaling=0"])
        .ok();
    let host = listener(None, "zhost", 0);
    let port = host.item(1).sock().port();
    let _ha = listener(Some(&a), "zonea", port);
    let _hb = listener(Some(&b), "zoneb", port);

    let p = pki();
    let dir = tempdir();
    write_pki(dir.path(), &p);
    let config = web_config(dir.path(), &bcrypt::hash("s3cret", 4).unwrap());
    // The budget keeps a late scrape within the job's timeout on a busy machine: it is then
    // answered from the previous collection.
    let server = serve_with(
        &[],
        &["-Z", "--web.config.file", &config, "--scrape-budget", "2s"],
    );
    let job = format!(
        "  - job_name: sockstat\n    scrape_interval: 3s\n    scrape_timeout: 3s\n    scheme: https\n    \
         tls_config:\n      ca_file: ca.pem\n      cert_file: client.pem\n      key_file: client-key.pem\n    \
         basic_auth:\n      username: prometheus\n      password: s3cret\n    \
         static_configs:\n      - targets: ['{}']\n",
        server.addr
    );
    let prom = Prometheus::start(
        &job,
        &[
            ("ca.pem", &p.ca),
            ("client.pem", &p.client.cert),
            ("client-key.pem", &p.client.key),
        ],
    );

    // One series per zone, told apart by zone, each with its own holder's command.
    let q = format!("sockstat_listen_queue{{job=\"sockstat\",port=\"{port}\"}}");
    let v = prom.query_until(&q, |v| results(v).len() >= 3);
    let got: BTreeMap<String, String> = results(&v)
        .iter()
        .map(|r| {
            (
                r["metric"]["zone"].as_str().unwrap_or("").to_string(),
                r["metric"]["command"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want: BTreeMap<String, String> = [
        ("global".to_string(), "zhost".to_string()),
        (a.name.clone(), "zonea".to_string()),
        (b.name.clone(), "zoneb".to_string()),
    ]
    .into();
    assert_eq!(got, want, "{v}");
    assert_eq!(results(&v).len(), 3, "{v}");

    // The zone's own families: its sockets, its port range, its counters (read inside it).
    for zone in [&a.name, &b.name] {
        for family in [
            "sockstat_sockets{job=\"sockstat\",proto=\"tcp\",state=\"LISTEN\"",
            "sockstat_ephemeral_ports_usable{job=\"sockstat\"",
            "sockstat_kernel_trouble_total{job=\"sockstat\",group=\"TcpExt\",name=\"ListenOverflows\"",
            "sockstat_listeners_command_unknown{job=\"sockstat\"",
        ] {
            let q = format!("{family},zone=\"{zone}\"}}");
            let v = prom.query_until(&q, |v| !results(v).is_empty());
            assert_eq!(results(&v).len(), 1, "{q}: {v}");
        }
    }
    // The diagnosis per zone: window scaling off in a, not in b (nor on the host, where it is
    // on unless the machine turned it off).
    let q = format!(
        "sockstat_findings{{job=\"sockstat\",rule=\"window-scaling-missing\",zone=\"{}\"}} > 0",
        a.name
    );
    let v = prom.query_until(&q, |v| !results(v).is_empty());
    assert_eq!(results(&v).len(), 1, "{v}");
    let v = prom.query_until(
        "sockstat_findings{job=\"sockstat\",rule=\"window-scaling-missing\"} > 0",
        |_| true,
    );
    assert!(
        !results(&v)
            .iter()
            .any(|r| r["metric"]["zone"] == b.name.as_str()),
        "{v}"
    );
    let v = prom.query_until("sockstat_zones{job=\"sockstat\"}", |v| {
        !results(v).is_empty()
    });
    let zones: f64 = results(&v)[0]["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0);
    assert!(zones >= 3.0, "{v}");
    let v = prom.query_until("sockstat_up{job=\"sockstat\"}", |v| !results(v).is_empty());
    assert_eq!(results(&v)[0]["value"][1], "1", "{v}");
}

/// Waits for a scrape for which `done` holds (at most 20 s); returns it.
fn scrape_until(server: &Served, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let body = get(&server.addr, "/metrics").expect("scrape").body;
        if done(&body) || Instant::now() > deadline {
            return body;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the exporter logged that is about zones or failed collections (nothing is expected).
fn zone_complaints(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.contains("zone") || l.contains("namespace") || l.contains("collection failed")
        })
        // Not about zones: listeners whose holders these privileges cannot read (a machine
        // where even root cannot read some process names "a user namespace boundary").
        .filter(|l| !l.contains("fd tables"))
        .collect()
}

#[test]
fn a_zone_that_goes_away_between_scrapes_leaves_no_series_and_no_log_line() {
    require_root!("a_zone_that_goes_away_between_scrapes_leaves_no_series_and_no_log_line");
    let host = listener(None, "vhost", 0);
    let port = host.item(1).sock().port();
    let a = Netns::new();
    let ha = listener(Some(&a), "vanishing", port);
    let server = serve_with(&[], &["-Z", "--scrape-budget", "20s"]);
    let body = get(&server.addr, "/metrics").expect("scrape").body;
    assert_eq!(
        listeners_on(&body, port).get(&a.name).map(String::as_str),
        Some("vanishing"),
        "{body}"
    );
    let zone_label = format!("zone=\"{}\"", a.name);
    assert!(body.contains(&zone_label));

    // Gone: its process, then the namespace itself. The next scrape has none of its series
    // (of any family) and is a fresh, successful one.
    drop(ha);
    drop(a);
    let body = get(&server.addr, "/metrics").expect("scrape").body;
    assert!(!body.contains(&zone_label), "{body}");
    assert_eq!(value(&body, "sockstat_up"), 1.0);
    assert_eq!(
        listeners_on(&body, port).get("global").map(String::as_str),
        Some("vhost")
    );
    // A zone that appears is in the next scrape, with its findings from the one after (the
    // diagnosis needs it in two collections).
    let b = Netns::new();
    let _hb = listener(Some(&b), "arriving", port);
    let body = get(&server.addr, "/metrics").expect("scrape").body;
    assert_eq!(
        listeners_on(&body, port).get(&b.name).map(String::as_str),
        Some("arriving"),
        "{body}"
    );
    assert_eq!(value(&body, "sockstat_up"), 1.0);
    let log = server.log();
    assert!(zone_complaints(&log).is_empty(), "{log}");
}

/// Creates and removes namespaces until `stop`, at most `rounds` times: `ip netns` ones with a
/// listener, and short-lived processes in namespaces of their own (`unshare --net`), so that
/// zones vanish between discovery and reading, mounted and not.
fn churn(stop: &AtomicBool, rounds: usize) -> usize {
    let mut done = 0;
    while !stop.load(Ordering::SeqCst) && done < rounds {
        let ns = Netns::new();
        let h = listener(Some(&ns), "churn", 0);
        let mut brief = Command::new("unshare")
            .args(["--net", "sleep", "0.03"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unshare");
        std::thread::sleep(Duration::from_millis(20));
        drop(h);
        drop(ns);
        let _ = brief.wait();
        done += 1;
    }
    done
}

#[test]
fn zones_created_and_removed_during_collections_never_fail_one_or_warn() {
    require_root!("zones_created_and_removed_during_collections_never_fail_one_or_warn");
    if !which("unshare") {
        eprintln!("SKIPPED: unshare not found (util-linux)");
        return;
    }
    let server = serve_with(&[], &["-Z", "--scrape-budget", "20s"]);
    let stop = Arc::new(AtomicBool::new(false));
    let churner = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || churn(&stop, 200))
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut scrapes = 0;
    while Instant::now() < deadline && scrapes < 30 {
        let body = get(&server.addr, "/metrics").expect("scrape").body;
        assert_eq!(value(&body, "sockstat_up"), 1.0, "{body}");
        assert_eq!(value(&body, "sockstat_scrape_budget_exceeded_total"), 0.0);
        scrapes += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let rounds = churner.join().expect("churn thread");
    assert!(
        rounds > 0 && scrapes > 0,
        "{rounds} rounds, {scrapes} scrapes"
    );
    let log = server.log();
    assert!(
        zone_complaints(&log).is_empty(),
        "{rounds} namespaces came and went during {scrapes} scrapes:\n{log}"
    );
}

/// CAP_DAC_READ_SEARCH (2), CAP_SYS_PTRACE (19), CAP_SYS_ADMIN (21).
const KEPT_Z: u64 = (1 << 2) | (1 << 19) | (1 << 21);

/// Effective and permitted capabilities of every thread of `pid`.
fn as_nobody_with(caps: &str) -> Vec<String> {
    vec![
        "setpriv".into(),
        "--reuid=65534".into(),
        "--regid=65534".into(),
        "--clear-groups".into(),
        format!("--inh-caps=-all,{caps}"),
        format!("--ambient-caps=-all,{caps}"),
        format!("--bounding-set=-all,{caps}"),
    ]
}

#[test]
fn as_nobody_with_the_units_capabilities_it_names_roots_listener_in_a_namespace() {
    require_root!(
        "as_nobody_with_the_units_capabilities_it_names_roots_listener_in_a_namespace (setpriv)"
    );
    let a = Netns::new();
    let h = listener(Some(&a), "rootinns", 0);
    let port = h.item(1).sock().port();
    // The drop-in's set, plus one the exporter must drop.
    let prefix = as_nobody_with("+dac_read_search,+sys_ptrace,+sys_admin,+net_admin");
    let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
    let server = serve_with(&prefix, &["-Z", "--scrape-budget", "20s"]);
    let body = scrape_until(&server, |b| listeners_on(b, port).contains_key(&a.name));
    assert_eq!(
        listeners_on(&body, port).get(&a.name).map(String::as_str),
        Some("rootinns"),
        "{body}"
    );
    // Read from inside (joined): its counters are there.
    assert!(body.contains(&format!(
        "sockstat_kernel_trouble_total{{group=\"TcpExt\",name=\"ListenOverflows\",zone=\"{}\"}}",
        a.name
    )));
    // The collection keeps the three; the threads that talk to the network none.
    let roles = check_thread_caps_with_a_connection(&server, KEPT_Z, KEPT_Z | (1 << 12));
    assert_eq!(roles, ["accept", "collect", "http"], "{roles:?}");
    assert!(!server.log().contains("without CAP_"), "{}", server.log());

    // Without CAP_SYS_ADMIN: one warning at start saying what -Z lacks; the zone is still
    // listed (from its process's /proc/PID/net), and the owner is still named.
    let prefix = as_nobody_with("+dac_read_search,+sys_ptrace");
    let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
    let server = serve_with(&prefix, &["-Z", "--scrape-budget", "20s"]);
    let body = scrape_until(&server, |b| listeners_on(b, port).contains_key(&a.name));
    assert_eq!(
        listeners_on(&body, port).get(&a.name).map(String::as_str),
        Some("rootinns"),
        "{body}"
    );
    get(&server.addr, "/metrics").expect("second scrape");
    let log = server.log_with(&["without CAP_SYS_ADMIN"]);
    assert_eq!(log.matches("without CAP_SYS_ADMIN").count(), 1, "{log}");
    assert!(!log.contains("without CAP_DAC"), "{log}");

    // Without -Z, CAP_SYS_ADMIN is dropped like any other extra.
    let prefix = as_nobody_with("+dac_read_search,+sys_ptrace,+sys_admin");
    let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
    let server = serve_with(&prefix, &["--scrape-budget", "20s"]);
    get(&server.addr, "/metrics").expect("scrape");
    let kept = (1 << 2) | (1 << 19);
    check_thread_caps(server.pid, kept, kept | (1 << 21));
}

#[test]
fn serve_refuses_one_zone_and_takes_every_zone_twice() {
    let out = sockstat(&["-z", "global", "serve", "--listen", "127.0.0.1:0"]).run();
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("-z does not apply to 'serve'"),
        "{}",
        out.stderr
    );
    // Given twice (the drop-in's -Z and one in ARGS) it is still -Z.
    let server = serve_with(&[], &["-Z", "-Z", "--scrape-budget", "20s"]);
    let body = get(&server.addr, "/metrics").expect("scrape").body;
    assert_eq!(value(&body, "sockstat_up"), 1.0, "{body}");
}

#[test]
fn an_owner_scan_that_cannot_use_bpf_says_so_once_and_scans_proc_from_then_on() {
    require_root!("an_owner_scan_that_cannot_use_bpf_says_so_once_and_scans_proc_from_then_on");
    // As root with -Z the exporter keeps CAP_SYS_ADMIN, so it asks for the BPF iterator; through
    // a /proc reached by another path, the iterator's pids could not be trusted and it refuses.
    let dir = tempdir();
    let proc_link = dir.path().join("proc");
    std::os::unix::fs::symlink("/proc", &proc_link).unwrap();
    let first = listener(None, "bpfless1", 0);
    let server = serve_with(
        &[],
        &[
            "-Z",
            "--scrape-budget",
            "20s",
            "--proc-root",
            proc_link.to_str().unwrap(),
        ],
    );
    let body = get(&server.addr, "/metrics").expect("scrape").body;
    let port1 = first.item(1).sock().port();
    assert_eq!(
        listeners_on(&body, port1).get("global").map(String::as_str),
        Some("bpfless1"),
        "{body}"
    );
    // A new listener: a second scan, from /proc, with no second message.
    let second = listener(None, "bpfless2", 0);
    let body = get(&server.addr, "/metrics").expect("scrape").body;
    let port2 = second.item(1).sock().port();
    assert_eq!(
        listeners_on(&body, port2).get("global").map(String::as_str),
        Some("bpfless2"),
        "{body}"
    );
    assert_eq!(value(&body, "sockstat_owner_scans_total"), 2.0, "{body}");
    let log = server.log_with(&["BPF owner scan cannot run here"]);
    assert_eq!(
        log.matches("BPF owner scan cannot run here").count(),
        1,
        "{log}"
    );
    assert!(log.contains("scanning /proc instead"), "{log}");
}
