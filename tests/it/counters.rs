//! `sockstat counters` against the real kernel counters of a network namespace the test
//! creates (root only; skipped loudly otherwise), and against captured counter files in a fake
//! /proc (no privileges needed).

use std::net::{Ipv4Addr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::test_path;
use crate::ports_support::{
    counters_json, first_sample_taken, hear, say, sockstat, wait_output, Netns, HELPER_ENV,
};

const LIMIT: Duration = Duration::from_secs(30);
const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/wire/tests/fixtures/proc"
);

/// Runs inside the namespace when `SOCKSTAT_TEST_HELPER` is set; a no-op otherwise.
#[test]
fn counters_helper() {
    let Ok(action) = std::env::var(HELPER_ENV) else {
        return;
    };
    match action.strip_prefix("refused ") {
        // Connect N times to a port nobody listens on: each is refused with a RST.
        Some(n) => {
            let n: u32 = n.parse().expect("count");
            say("READY");
            if hear().is_none() {
                return;
            }
            let mut refused = 0;
            for _ in 0..n {
                match TcpStream::connect((Ipv4Addr::LOCALHOST, 9)) {
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => refused += 1,
                    other => panic!("expected a refusal, got {other:?}"),
                }
            }
            say(&format!("DONE refused={refused}"));
        }
        None => panic!("unknown helper action {action}"),
    }
}

fn delta(v: &serde_json::Value, group: &str, name: &str) -> Option<i64> {
    v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["group"] == group && c["name"] == name)
        .and_then(|c| c["delta"].as_i64())
}

#[test]
fn counters_interval_sees_refused_connects() {
    const N: i64 = 25;
    let Some(ns) = Netns::create("counters_interval_sees_refused_connects") else {
        return;
    };
    let mut h = ns.helper(
        &test_path(module_path!(), "counters_helper"),
        &format!("refused {N}"),
    );
    assert_eq!(h.expect_line(LIMIT), "READY");
    let bg = crate::ports_support::spawn_sockstat(&ns, &["counters", "2", "--json"]);
    // Once sockstat has its first reading, make the connections inside the interval.
    first_sample_taken(&bg);
    h.send("go");
    assert_eq!(h.expect_line(LIMIT), format!("DONE refused={N}"));
    h.finish(LIMIT);
    let v = counters_json(&wait_output(bg, LIMIT));
    assert_eq!(v["version"], 1);
    assert!(v["interval_s"].as_f64().unwrap() >= 2.0, "{v}");
    let fails = delta(&v, "Tcp", "AttemptFails").expect("Tcp.AttemptFails moved");
    let rsts = delta(&v, "Tcp", "OutRsts").expect("Tcp.OutRsts moved");
    assert!(fails >= N, "AttemptFails +{fails}");
    assert!(rsts >= N, "OutRsts +{rsts}");
    let row = v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "AttemptFails")
        .unwrap();
    assert_eq!(row["trouble"], true);
    assert!(row["meaning"].as_str().unwrap().contains("connect"));
    assert!(row.get("value").is_none());
    // Smallest first; no zero deltas without --all.
    let amounts: Vec<i64> = v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["delta"].as_i64())
        .collect();
    assert!(amounts.windows(2).all(|w| w[0] <= w[1]), "{amounts:?}");
    assert!(!amounts.contains(&0), "{amounts:?}");
}

fn fake_proc(snmp: &str, netstat: &str, snmp6: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let net = dir.path().join("net");
    std::fs::create_dir(&net).unwrap();
    std::fs::write(net.join("snmp"), snmp).unwrap();
    std::fs::write(net.join("netstat"), netstat).unwrap();
    if let Some(t) = snmp6 {
        std::fs::write(net.join("snmp6"), t).unwrap();
    }
    dir
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(FIXTURES).join(name)).unwrap()
}

fn counters_at(root: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(sockstat())
        .arg("counters")
        .args(extra)
        .arg("--proc-root")
        .arg(root)
        .output()
        .unwrap()
}

fn value(v: &serde_json::Value, group: &str, name: &str) -> Option<i64> {
    v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["group"] == group && c["name"] == name)
        .and_then(|c| c["value"].as_i64())
}

#[test]
fn counters_captured_files_since_boot() {
    let dir = fake_proc(
        &fixture("snmp"),
        &fixture("netstat"),
        Some(&fixture("snmp6")),
    );
    let v = counters_json(&counters_at(dir.path(), &["--json", "--all"]));
    assert!(v["interval_s"].is_null());
    assert_eq!(value(&v, "Tcp", "ActiveOpens"), Some(5));
    assert_eq!(value(&v, "Tcp", "MaxConn"), Some(-1));
    assert_eq!(value(&v, "TcpExt", "TCPPureAcks"), Some(6));
    assert_eq!(value(&v, "TcpExt", "ListenOverflows"), Some(0));
    assert_eq!(value(&v, "Ip6", "InReceives"), Some(3));
    assert_eq!(v["hidden_zero"], 0);
    // Without --all the zeros are hidden and counted.
    let v = counters_json(&counters_at(dir.path(), &["--json"]));
    assert!(value(&v, "TcpExt", "ListenOverflows").is_none());
    assert!(v["hidden_zero"].as_u64().unwrap() > 300);

    // The table: trouble marked, biggest last.
    let out = counters_at(dir.path(), &["--all"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let overflow = text
        .lines()
        .find(|l| l.contains("TcpExt.ListenOverflows"))
        .unwrap();
    assert!(overflow.starts_with("! "), "{overflow}");
    let last = text.lines().last().unwrap();
    assert!(
        last.contains("Tcp.RtoMax") && last.contains("120000"),
        "{last}"
    );
}

#[test]
fn counters_names_inserted_mid_line_keep_their_values() {
    // A newer kernel inserts PAWSOldAck and PAWSTimewait after PAWSEstab (6.14, 6.16) and a
    // made-up counter in the middle of the Tcp line: every other value must stay with its name.
    let netstat = "TcpExt: TW PAWSEstab NewMidLine ListenOverflows TCPTimeouts\n\
                   TcpExt: 11 12 999 13 14\n";
    let snmp = "Tcp: ActiveOpens Invented AttemptFails OutRsts\nTcp: 1 77 2 3\n";
    let dir = fake_proc(snmp, netstat, None);
    let out = counters_at(dir.path(), &["--json", "--all"]);
    let v = counters_json(&out);
    assert_eq!(value(&v, "TcpExt", "ListenOverflows"), Some(13));
    assert_eq!(value(&v, "TcpExt", "TCPTimeouts"), Some(14));
    assert_eq!(value(&v, "TcpExt", "NewMidLine"), Some(999));
    assert_eq!(value(&v, "Tcp", "AttemptFails"), Some(2));
    assert_eq!(value(&v, "Tcp", "OutRsts"), Some(3));
    let unknown = v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "NewMidLine")
        .unwrap();
    assert!(unknown["meaning"].is_null());
    assert_eq!(unknown["trouble"], false);
    // The missing snmp6 is a warning, not an error.
    assert!(v["warnings"][0]["message"]
        .as_str()
        .unwrap()
        .contains("snmp6"));
}

#[test]
fn counters_a_counter_going_down_is_a_reset_not_a_huge_number() {
    let snmp = |rsts: u64| format!("Tcp: ActiveOpens OutRsts\nTcp: 10 {rsts}\n");
    let dir = fake_proc(&snmp(5000), "TcpExt: TW\nTcpExt: 1\n", None);
    let child = Command::new(sockstat())
        .args(["counters", "--interval", "1", "--json", "--proc-root"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    first_sample_taken(&child);
    // The namespace was "recreated": the counter starts again from a small number.
    std::fs::write(dir.path().join("net/snmp"), snmp(3)).unwrap();
    let v = counters_json(&wait_output(child, LIMIT));
    let rst = v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "OutRsts")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(rst["reset"], true);
    assert!(rst.get("delta").is_none(), "{rst}");
    assert_eq!(v["warnings"][0]["code"], "counters-reset");
    // And in the table: 'reset', never 18446744073709546619.
    let dir = fake_proc(&snmp(5000), "TcpExt: TW\nTcpExt: 1\n", None);
    let child = Command::new(sockstat())
        .args(["counters", "1", "--proc-root"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    first_sample_taken(&child);
    std::fs::write(dir.path().join("net/snmp"), snmp(3)).unwrap();
    let out = wait_output(child, LIMIT);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().find(|l| l.contains("Tcp.OutRsts")).unwrap();
    assert!(line.contains("reset"), "{line}");
    assert!(!text.contains("1844674407"), "{text}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("went down"), "{err}");
}

#[test]
fn counters_bad_input_exits_2_with_one_line() {
    for (args, needle) in [
        (&["counters", "2", "--interval", "3"][..], "differs"),
        (&["counters", "0"], "'0'"),
        (&["counters", "-1"], ""),
        (&["counters", "soon"], "'soon'"),
        (&["counters", "--interval", "1e9"], "'1e9'"),
    ] {
        let out = Command::new(sockstat()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // The same value twice is fine.
    let dir = fake_proc("Tcp: OutRsts\nTcp: 1\n", "TcpExt: TW\nTcpExt: 1\n", None);
    let out = counters_at(dir.path(), &["0.1", "--interval", "0.1", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A missing /proc/net/snmp stops the work: exit 4, one line naming the file.
    let empty = tempfile::tempdir().unwrap();
    let out = counters_at(empty.path(), &[]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("net/snmp"));
}

#[test]
fn counters_of_this_host_since_boot() {
    // No privileges needed: the caller's own namespace.
    let out = Command::new(sockstat())
        .args(["counters", "--json"])
        .output()
        .unwrap();
    let v = counters_json(&out);
    assert!(v["interval_s"].is_null());
    assert!(value(&v, "Tcp", "RtoMin").is_some(), "{v}");
}

/// `counters -z NS SECONDS` run from the host: both samples are read inside NS, so the refused
/// connects made there are counted, and the host's own counters do not see them.
#[test]
fn counters_zone_counts_refused_connects_inside_it() {
    const N: i64 = 200;
    let Some(ns) = Netns::create("counters_zone_counts_refused_connects_inside_it") else {
        return;
    };
    let mut h = ns.helper(
        &test_path(module_path!(), "counters_helper"),
        &format!("refused {N}"),
    );
    assert_eq!(h.expect_line(LIMIT), "READY");
    let spawn = |args: &[&str]| {
        Command::new(sockstat())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let zone = spawn(&["counters", "-z", &ns.name, "2", "--json"]);
    let host = spawn(&["counters", "2", "--json"]);
    let all = spawn(&["counters", "-Z", "2", "--json"]);
    for c in [&zone, &host, &all] {
        first_sample_taken(c);
    }
    h.send("go");
    assert_eq!(h.expect_line(LIMIT), format!("DONE refused={N}"));
    h.finish(LIMIT);
    let v = counters_json(&wait_output(zone, LIMIT));
    let fails = delta(&v, "Tcp", "AttemptFails").expect("Tcp.AttemptFails moved");
    assert!(fails >= N, "AttemptFails +{fails} in the zone");
    for c in v["counters"].as_array().unwrap() {
        assert_eq!(c["zone"]["name"], ns.name.as_str(), "{c}");
    }
    let h = counters_json(&wait_output(host, LIMIT));
    let host_fails = delta(&h, "Tcp", "AttemptFails").unwrap_or(0);
    assert!(
        host_fails < N,
        "the host's AttemptFails moved by {host_fails}: the zone's connects leaked into it"
    );
    assert!(h["counters"][0].get("zone").is_none());
    // -Z: one row per zone and counter, this zone's with the refusals.
    let a = counters_json(&wait_output(all, LIMIT));
    let row = a["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["zone"]["name"] == ns.name.as_str() && c["name"] == "AttemptFails")
        .unwrap_or_else(|| panic!("{a}"));
    assert!(row["delta"].as_i64().unwrap() >= N, "{row}");

    // The table of -Z has a ZONE column.
    let out = Command::new(sockstat())
        .args(["counters", "-Z", "0.2", "--all"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().nth(1).unwrap().starts_with("! ZONE "),
        "{text}"
    );
    assert!(text.lines().any(|l| l.contains(&ns.name)), "{text}");
}
