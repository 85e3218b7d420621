//! `sockstat diagnose -z ZONE` / `-Z` read each zone's own sysctls and counters (root only;
//! skipped loudly otherwise): a namespace with window scaling off gets the host-setting
//! finding, tagged with its zone, while the host does not.

use std::process::Command;

use crate::diagnose_support::{findings, parse, run};

/// A namespace made with `ip netns add`, removed on drop.
struct Netns(String);

impl Netns {
    fn create(test: &str) -> Option<Netns> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: needs root ({test} creates a network namespace)");
            return None;
        }
        let name = format!("sockstat-dz-{}", std::process::id());
        let ok = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&["netns", "add", &name]) {
            eprintln!("SKIPPED: {test}: 'ip netns add' failed");
            return None;
        }
        let ns = Netns(name);
        assert!(ok(&["-n", &ns.0, "link", "set", "lo", "up"]));
        Some(ns)
    }

    fn sysctl(&self, name: &str, value: &str) {
        let st = Command::new("ip")
            .args(["netns", "exec", &self.0, "sysctl", "-q", "-w"])
            .arg(format!("{name}={value}"))
            .status()
            .unwrap();
        assert!(st.success(), "sysctl {name}={value} in {}", self.0);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn host_window_scaling_off(v: &serde_json::Value) -> Vec<&serde_json::Value> {
    findings(v, "window-scaling-missing")
        .into_iter()
        .filter(|f| f["socket"].is_null())
        .collect()
}

#[test]
fn diagnose_zone_reads_that_zones_sysctls() {
    let Some(ns) = Netns::create("diagnose_zone_reads_that_zones_sysctls") else {
        return;
    };
    ns.sysctl("net.ipv4.tcp_window_scaling", "0");

    let v = parse(&run(&[
        "diagnose",
        "-z",
        &ns.0,
        "--interval",
        "0.2",
        "--json",
    ]));
    let host = host_window_scaling_off(&v);
    assert_eq!(host.len(), 1, "{v:#}");
    assert_eq!(host[0]["zone"]["name"], ns.0.as_str());
    assert_eq!(host[0]["evidence"]["tcp_window_scaling"], 0);
    assert!(
        !v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "other-namespaces"),
        "{v:#}"
    );

    // Without -z: the host's own sysctls (scaling on here), so no such finding.
    let on = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_window_scaling").unwrap();
    if on.trim() == "1" {
        let v = parse(&run(&["diagnose", "--interval", "0.2", "--json"]));
        assert!(host_window_scaling_off(&v).is_empty(), "{v:#}");
    }

    // -Z: every zone judged with its own sysctls, each finding with its zone.
    let v = parse(&run(&["diagnose", "-Z", "--interval", "0.2", "--json"]));
    let host = host_window_scaling_off(&v);
    assert!(
        host.iter().any(|f| f["zone"]["name"] == ns.0.as_str()),
        "{v:#}"
    );
    for f in v["findings"].as_array().unwrap() {
        assert!(f["zone"]["name"].is_string(), "{f}");
    }

    // The text names the zone.
    let out = run(&["diagnose", "-z", &ns.0, "--interval", "0.2"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("window-scaling-missing  [zone {}] host", ns.0)),
        "{text}"
    );
}
