//! Issue 28: a long wait says, on the terminal, what it waits for and how to stop it (drops,
//! events, trace, counters SECONDS, ports --interval, diagnose --interval), one line on
//! standard error through one helper; never when standard error is not a terminal (a script,
//! a log, this test's pipes), never on standard output, and not under --watch, whose screen
//! title says it. Run with standard error on a real pseudo-terminal.

use std::net::TcpListener;

use crate::common::*;

/// Runs `args` with standard error on a terminal, then with it piped; returns what the
/// terminal showed, after checking that the wait line went only there: not on standard output,
/// and not on a piped standard error.
fn on_a_terminal_only(args: &[&str], line: &str) -> String {
    let (code, stdout, tty) = run_with_stderr_on_pty(sockstat(args));
    assert!(
        matches!(code, Some(0) | Some(1)),
        "{args:?}: status {code:?}: {tty}"
    );
    assert!(tty.contains(line), "{args:?}: the terminal showed {tty:?}");
    assert!(
        tty.contains("Ctrl-C"),
        "{args:?}: says how to stop: {tty:?}"
    );
    assert!(
        !stdout.contains("Ctrl-C") && !stdout.contains(line),
        "{args:?}: not on standard output: {stdout}"
    );
    let piped = sockstat(args).run().no_panic();
    assert!(
        !piped.stderr.contains(line) && !piped.stderr.contains("Ctrl-C"),
        "{args:?}: nothing about waiting off a terminal: {}",
        piped.stderr
    );
    tty
}

#[test]
fn counters_over_an_interval_say_what_they_wait_for() {
    let tty = on_a_terminal_only(
        &["counters", "0.3"],
        "sockstat: measuring the counters' deltas over 0.3 s; Ctrl-C cancels",
    );
    // The line comes before the result is written, and once.
    assert_eq!(tty.matches("measuring").count(), 1, "{tty}");
    // Without SECONDS nothing is waited for, and nothing is said.
    let (_, _, tty) = run_with_stderr_on_pty(sockstat(&["counters"]));
    assert!(!tty.contains("Ctrl-C"), "{tty}");
}

#[test]
fn ports_and_diagnose_with_an_interval_say_what_they_wait_for() {
    on_a_terminal_only(
        &["ports", "--interval", "0.2"],
        "sockstat: sampling the TCP sockets twice, 0.2 s apart; Ctrl-C cancels",
    );
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    on_a_terminal_only(
        &["diagnose", "--interval", "0.2", "--sport", &port],
        "sockstat: sampling the TCP connections twice, 0.2 s apart; Ctrl-C cancels",
    );
}

/// Under --watch the screen's title says the interval: no line per refresh.
#[test]
fn a_watched_view_does_not_repeat_it() {
    let _timing = timing_sensitive();
    let (code, stdout, tty) = run_with_stderr_on_pty(sockstat(&[
        "counters", "0.1", "--watch", "0.2", "--count", "2",
    ]));
    assert_eq!(code, Some(0), "{tty}");
    assert_eq!(stdout.matches("=== ").count(), 2, "{stdout}");
    assert!(!tty.contains("Ctrl-C"), "{tty:?}");
}

#[test]
fn trace_says_it_waits_for_a_connection() {
    // A port nothing is connected to: trace waits for a connection until --duration ends, and
    // then finds none (status 4).
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port().to_string();
    drop(free);
    let args = ["trace", "--json", "--dport", &port, "--duration", "0.3"];
    let (code, stdout, tty) = run_with_stderr_on_pty(sockstat(&args));
    assert_eq!(code, Some(4), "{tty}");
    assert!(
        tty.contains(
            "no TCP connection matches the filters yet; waiting up to 0.3 s for one; Ctrl-C stops"
        ),
        "{tty:?}"
    );
    assert!(stdout.is_empty(), "{stdout}");
    let piped = sockstat(&args).run().no_panic();
    assert!(!piped.stderr.contains("waiting"), "{}", piped.stderr);
}

#[test]
fn drops_and_events_say_what_they_wait_for() {
    require_root!("drops_and_events_say_what_they_wait_for (BPF programs)");
    let _machine = loads_the_machine();
    on_a_terminal_only(
        &["drops", "0.3"],
        "sockstat: counting dropped packets for 0.3 s; Ctrl-C stops early and shows what was counted",
    );
    on_a_terminal_only(
        &["events", "--duration", "0.3"],
        "sockstat: tracing TCP connection events for 0.3 s; Ctrl-C stops early",
    );
    on_a_terminal_only(
        &["events", "--duration", "0.3", "--stats", "-q"],
        "sockstat: tracing TCP connection events for 0.3 s; Ctrl-C stops early and prints the summary",
    );
}

/// Where the wait cannot begin (no privileges for BPF), nothing is announced: the one line is
/// the error.
#[test]
fn a_wait_that_cannot_begin_is_not_announced() {
    require_root!("a_wait_that_cannot_begin_is_not_announced (setpriv)");
    let dir = tempdir();
    let bin = dir.path().join("sockstat");
    copy_sockstat(&bin);
    for args in [&["drops", "5"][..], &["events", "--duration", "5"][..]] {
        let (code, _, tty) = run_with_stderr_on_pty(sockstat(args).program(&bin).prefix(&[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]));
        assert_eq!(code, Some(3), "{args:?}: {tty}");
        assert!(!tty.contains("Ctrl-C"), "{args:?}: {tty:?}");
        assert_eq!(tty.trim_end().lines().count(), 1, "{args:?}: {tty:?}");
    }
}
