//! `sockstat diagnose` flags, exit statuses and JSON contract, on whatever this host runs
//! (no root, no namespaces needed). The cases with real traffic are in tests/diagnose_live.rs.

use crate::diagnose_support::*;

#[test]
fn json_matches_the_schema_and_the_exit_status() {
    let out = run(&["diagnose", "--json", "--interval", "0.2"]);
    let v = parse(&out);
    assert_eq!(v["version"], 1);
    assert!(v["interval_s"].as_f64().unwrap() >= 0.2);
}

#[test]
fn text_ends_with_a_verdict() {
    let out = run(&["diagnose", "--interval", "0.1", "--color", "never"]);
    assert!(matches!(out.status.code(), Some(0) | Some(1)), "{out:?}");
    let t = String::from_utf8(out.stdout).unwrap();
    let last = t.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("No problems found:") || last.contains(" finding"),
        "{t}"
    );
}

#[test]
fn bad_bandwidth_is_one_line_and_status_2() {
    let out = run(&["diagnose", "--bandwidth", "fast"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8(out.stderr).unwrap();
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("invalid bandwidth 'fast'"), "{e}");
}

#[test]
fn bad_interval_and_protocol_are_status_2() {
    let out = run(&["diagnose", "--interval", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["diagnose", "-P", "udp", "--interval", "0.1"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.contains("TCP connections only"), "{e}");
}

#[test]
fn help_lists_the_rules() {
    let out = run(&["diagnose", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let t = String::from_utf8(out.stdout).unwrap();
    for r in [
        "send-buffer-limited",
        "--bandwidth",
        "--interval",
        "Exit status",
    ] {
        assert!(t.contains(r), "{r} missing from help:\n{t}");
    }
}
