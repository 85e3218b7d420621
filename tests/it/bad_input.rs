//! Issue 2 item 9.7: bad input gets exit status 2 and exactly one stderr line naming the bad
//! value; nothing panics.

use crate::common::*;

fn bad(args: &[&str]) -> String {
    let out = sockstat(args).run().no_panic();
    assert_eq!(out.code, Some(2), "{args:?}: {out:#?}");
    assert!(
        out.stdout.is_empty(),
        "{args:?} printed on stdout: {}",
        out.stdout
    );
    let lines = out.stderr_lines();
    assert_eq!(
        lines.len(),
        1,
        "{args:?}: one stderr line, got {:?}",
        out.stderr
    );
    lines[0].to_string()
}

#[test]
fn exact_messages() {
    assert_eq!(
        bad(&["-P", "igmp"]),
        "sockstat: invalid value 'igmp' for '-P <PROTOS>': unknown protocol 'igmp': choose from tcp, \
         udp, udplite, raw, icmp, sctp, mptcp, packet, unix, netlink (see 'sockstat --help')"
    );
    assert_eq!(
        bad(&["-P", "icmp6"]),
        "sockstat: invalid value 'icmp6' for '-P <PROTOS>': unknown protocol 'icmp6': -P icmp \
         selects the ping sockets of both families; add -6 for the ICMPv6 ones (see 'sockstat \
         --help')"
    );
    assert_eq!(
        bad(&["-p", "65536"]),
        "sockstat: invalid value '65536' for '-p <PORTS>': invalid port '65536' in '65536': ports \
         are 0-65535 (see 'sockstat --help')"
    );
    assert_eq!(
        bad(&["-p", "90-80"]),
        "sockstat: invalid value '90-80' for '-p <PORTS>': invalid port range '90-80': the range \
         goes backwards (90 > 80); write it low-high (see 'sockstat --help')"
    );
    assert_eq!(
        bad(&["--user", "no-such-user-sockstat-test"]),
        "sockstat: unknown user 'no-such-user-sockstat-test': give a user name from the user \
         database or a numeric uid"
    );
    assert_eq!(
        bad(&["--pid", "12a"]),
        "sockstat: invalid value '12a' for '--pid <PIDS>': invalid pid '12a': give process ids \
         (1-4194304), comma-separated (see 'sockstat --help')"
    );
    assert_eq!(
        bad(&["--frobnicate"]),
        "sockstat: unexpected argument '--frobnicate' found (see 'sockstat --help')"
    );
    assert_eq!(
        bad(&["--src", "10.0.0.300"]),
        "sockstat: invalid value '10.0.0.300' for '--src <ADDR[/LEN]>': invalid address \
         '10.0.0.300': give an IPv4 or IPv6 address, optionally with a prefix length \
         (192.0.2.0/24, 2001:db8::/32) (see 'sockstat --help')"
    );
    assert_eq!(
        bad(&["--no-owners", "--pid", "1"]),
        "sockstat: --pid and --command need the owner scan; drop --no-owners"
    );
}

/// The views that see Internet sockets only refuse a unix listener in `--connected-to` (it would
/// match nothing: an empty answer that looks like "no connections"), and their help does not
/// offer unix sockets; the listing takes both.
#[test]
fn views_of_internet_sockets_refuse_unix_listeners_and_do_not_offer_them() {
    for view in ["kill", "diagnose", "events"] {
        assert_eq!(
            bad(&[view, "--connected-to", "5432,@sockstat-test"]),
            format!(
                "sockstat: --connected-to @sockstat-test: '{view}' sees Internet sockets only; \
                 name listening ports"
            )
        );
    }
    assert_eq!(
        bad(&[
            "trace",
            "--json",
            "--connected-to",
            "/run/sockstat-test.sock"
        ]),
        "sockstat: --connected-to /run/sockstat-test.sock: 'trace' sees Internet sockets only; \
         name listening ports"
    );
    for view in ["kill", "diagnose", "events", "trace", "ports"] {
        let out = sockstat(&[view, "--help"]).run().no_panic();
        assert_eq!(out.code, Some(0), "{view}: {out:#?}");
        assert!(out.stdout.contains("\n  -L\n"), "{view}: {}", out.stdout);
        assert!(
            !out.stdout.to_lowercase().contains("unix"),
            "{view} --help offers unix sockets:\n{}",
            out.stdout
        );
    }
    let out = sockstat(&["--help"]).run().no_panic();
    let words = out.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("unix listeners by path"), "{words}");
    assert!(words.contains("Unix sockets are not affected"), "{words}");
}

#[test]
fn every_bad_value_is_named() {
    let cases: &[(&[&str], &str)] = &[
        (&["-P", "tcp,igmp"], "'igmp'"),
        (&["-P", ""], "''"),
        (&["-p", "65536"], "65536"),
        (&["-p", "22,70000"], "70000"),
        (&["-p", "90-80"], "90-80"),
        (&["-p", "ssh"], "'ssh'"),
        (&["-p", "1-"], "1-"),
        (&["-p", ""], "port"),
        (&["-p", "-5"], "-5"),
        (&["--user", "nosuchuser-sst"], "nosuchuser-sst"),
        (&["--user", ""], "''"),
        (&["--pid", "abc"], "'abc'"),
        (&["--pid", "0"], "'0'"),
        (&["--pid", "1,,2"], "pid"),
        (&["--pid", "99999999999"], "99999999999"),
        (&["--bogus"], "--bogus"),
        (&["-Y"], "-Y"),
        (&["--src", "300.1.1.1"], "300.1.1.1"),
        (&["--src", "192.0.2.0/33"], "192.0.2.0/33"),
        (&["--dst", "2001:db8::/129"], "2001:db8::/129"),
        (&["--dst", "::zz"], "::zz"),
        (&["--dst", "example.com"], "example.com"),
        (&["--state", "BOGUS"], "'BOGUS'"),
        (&["--color", "sometimes"], "sometimes"),
        (&["--source", "kernel"], "kernel"),
        (&["--command", ""], "command"),
        (&["--json", "--csv"], "--csv"),
        (&["--no-owners", "--command", "sshd"], "--no-owners"),
    ];
    for (args, needle) in cases {
        let line = bad(args);
        assert!(line.starts_with("sockstat: "), "{args:?}: {line}");
        assert!(
            line.contains(needle),
            "{args:?}: {line:?} should name {needle}"
        );
    }
}

#[test]
fn hostile_bad_values_stay_one_escaped_line() {
    // A value with a line break, a terminal escape or a bidi override is named escaped, on one
    // line, and nothing raw reaches stderr.
    for (args, shown) in [
        (&["-p", "8\n0"][..], r"'8\n0'"),
        (
            &["-p", "\u{1b}]0;owned\u{7}80"][..],
            r"'\x1b]0;owned\x0780'",
        ),
        (&["--state", "listen\u{202e}"][..], r"'listen\u{202e}'"),
        (&["--color", "al\nways"][..], r"'al\nways'"),
        (&["-p", "a\\b"][..], r"'a\\b'"),
    ] {
        let line = bad(args);
        assert!(
            line.contains(shown),
            "{args:?}: {line:?} should show {shown}"
        );
        assert!(!line.chars().any(char::is_control), "{args:?}: {line:?}");
        assert!(!line.contains('\u{202e}'), "{args:?}: {line:?}");
    }
}

#[test]
fn good_edge_values_are_accepted() {
    for args in [
        &["-p", "0"][..],
        &["-p", "65535"],
        &["-p", "80-80"],
        &["-p", "0-65535"],
        &["--pid", "4194304"],
        &["--user", "0"],
        &["--user", "4294967294"],
        &["--src", "0.0.0.0/0"],
        &["--dst", "::/0"],
        &["--state", "syn-recv,CLOSE"],
        &["-P", "packet"],
        &["--command", "["],
    ] {
        let out = sockstat(args).arg("-q").run().no_panic();
        assert_eq!(out.code, Some(0), "{args:?}: {out:#?}");
    }
}

#[test]
fn help_and_version_succeed_on_stdout() {
    let out = sockstat(&["--help"]).ok();
    assert!(out.stdout.contains("Usage"), "{}", out.stdout);
    assert!(out.stdout.contains("--no-owners"));
    assert!(
        !out.stdout.contains("--replay-netlink"),
        "hidden flags stay hidden"
    );
    assert!(out.stderr.is_empty());
    let out = sockstat(&["-h"]).ok();
    assert!(out.stdout.contains("Usage"));
    let out = sockstat(&["--version"]).ok();
    assert!(out.stdout.starts_with("sockstat "), "{}", out.stdout);
}
