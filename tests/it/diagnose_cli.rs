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
    // diagnose looks at TCP alone: it takes no -P (nor -u), and says so.
    let out = run(&["diagnose", "-P", "udp", "--interval", "0.1"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8(out.stderr).unwrap();
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("-P does not apply to 'diagnose'"), "{e}");
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

/// Options given before `diagnose` are diagnose's, as if given after it: the filters select
/// what it examines (they were once silently ignored), `--json` gives JSON (it was ignored), one
/// given on both sides is given twice (the last wins, as after it), and an option diagnose does
/// not take is refused with its name, wherever it is given.
#[test]
fn options_before_the_subcommand_are_the_subcommands() {
    use std::net::{TcpListener, TcpStream};
    let l1 = TcpListener::bind("127.0.0.1:0").unwrap();
    let l2 = TcpListener::bind("127.0.0.1:0").unwrap();
    let (p1, p2) = (
        l1.local_addr().unwrap().port().to_string(),
        l2.local_addr().unwrap().port().to_string(),
    );
    let _c1 = TcpStream::connect(l1.local_addr().unwrap()).unwrap();
    let _a1 = l1.accept().unwrap();
    let _c2 = TcpStream::connect(l2.local_addr().unwrap()).unwrap();
    let _a2 = l2.accept().unwrap();
    let connections = |args: &[&str]| {
        let out = run(args);
        assert!(matches!(out.status.code(), Some(0) | Some(1)), "{out:?}");
        parse(&out)["connections"].as_u64().unwrap()
    };
    let both = format!("{p1},{p2}");
    let before = connections(&["-p", &p1, "--json", "diagnose", "--interval", "0.1"]);
    let after = connections(&["diagnose", "-p", &p1, "--json", "--interval", "0.1"]);
    let all_before = connections(&["--interval", "0.1", "-p", &p1, "--json", "diagnose"]);
    let two = connections(&["diagnose", "-p", &both, "--json", "--interval", "0.1"]);
    let twice = connections(&[
        "-p",
        &p2,
        "diagnose",
        "-p",
        &p1,
        "--json",
        "--interval",
        "0.1",
    ]);
    assert!(before >= 2, "{before}");
    assert_eq!(before, after);
    assert_eq!(all_before, after);
    assert_eq!(twice, after, "the last -p wins, as 'diagnose -p A -p B'");
    assert_eq!(two, 2 * after, "{two} {after}");

    for (args, flag) in [
        (vec!["-T", "diagnose"], "-T does not apply to 'diagnose'"),
        (vec!["diagnose", "-T"], "-T does not apply to 'diagnose'"),
        (vec!["-u", "ports"], "-u does not apply to 'ports'"),
        (
            vec!["--no-owners", "counters"],
            "--no-owners does not apply to 'counters'",
        ),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let e = String::from_utf8(out.stderr).unwrap();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains(flag), "{args:?}: {e}");
    }
}
