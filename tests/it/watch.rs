//! `sockstat --watch`, `--events`, `--count` against real sockets held by sockholder (this test
//! binary re-executes itself as the holder, as tests/it does), piped and on a pseudo-terminal.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{
    run_on_pty, schema_errors, sockstat, timing_sensitive, validate, validate_against, Holder,
};
use serde_json::{json, Value};

/// Starts sockstat with `args`, then calls `during` while it runs, then returns its stdout
/// lines and exit status (the run must end by itself, through --count, within 30 s).
fn run_while(args: &[&str], during: impl FnOnce()) -> (Vec<String>, Option<i32>, String) {
    let mut c = sockstat(args).command();
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn sockstat");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let lines: Vec<String> = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect();
        let _ = tx.send(lines);
    });
    during();
    let lines = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("sockstat {args:?} did not stop within 30 s");
        });
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (lines, out.status.code(), stderr)
}

/// A listener that lives only between refreshes: opened after the baseline (the first
/// refresh), closed a second later, before the run ends.
fn short_lived_listener() -> impl FnOnce() -> (u16, u32, i32) {
    || {
        std::thread::sleep(Duration::from_millis(1200));
        let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
        let sock = h.item(0).sock();
        let found = (sock.port(), h.pid(), sock.fd());
        std::thread::sleep(Duration::from_millis(1200));
        drop(h);
        found
    }
}

#[test]
fn events_show_a_listener_opening_and_closing_with_its_owner() {
    let _timing = timing_sensitive();
    let mut seen = None;
    let listener = short_lived_listener();
    let (lines, code, stderr) = run_while(
        &[
            "--events", "--watch", "0.2", "--count", "25", "-P", "tcp", "-l",
        ],
        || seen = Some(listener()),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let (port, pid, fd) = seen.unwrap();
    let tail = format!("tcp4 127.0.0.1:{port} *:* LISTEN sockholder[{pid}] fd {fd}");
    let opened = lines.iter().position(|l| *l == format!("+ {tail}"));
    let closed = lines.iter().position(|l| *l == format!("- {tail}"));
    assert!(
        matches!((opened, closed), (Some(o), Some(c)) if o < c),
        "want '+ {tail}' then '- {tail}' in:\n{}",
        lines.join("\n")
    );
    for l in &lines {
        assert!(l.starts_with("+ ") || l.starts_with("- "), "{l:?}");
    }
}

#[test]
fn json_events_carry_the_listing_socket_object() {
    let _timing = timing_sensitive();
    let mut seen = None;
    let listener = short_lived_listener();
    let (lines, code, stderr) = run_while(
        &[
            "--events", "--json", "--watch", "0.2", "--count", "25", "-P", "tcp", "-l",
        ],
        || seen = Some(listener()),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let (port, pid, fd) = seen.unwrap();
    let events: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let mut kinds = Vec::new();
    for e in &events {
        assert!(e["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{e}");
        validate_against("events.schema.json", e);
        assert_eq!(e["version"], 1, "{e}");
        // The socket object is the listing's: it validates as one.
        validate(&json!({"version": 1, "sockets": [e["socket"]], "warnings": []}));
        if e["socket"]["local"]["port"] == port {
            assert_eq!(e["socket"]["owners"][0]["pid"], pid, "{e}");
            assert_eq!(e["socket"]["owners"][0]["fd"], fd, "{e}");
            assert_eq!(e["socket"]["owners"][0]["command"], "sockholder", "{e}");
            assert!(e["socket"]["cookie"].is_string(), "{e}");
            kinds.push(e["event"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(kinds, ["open", "close"], "{}", lines.join("\n"));
}

#[test]
fn piped_watch_prints_successive_snapshots() {
    let _timing = timing_sensitive();
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let port = h.item(0).sock().port().to_string();
    let out = sockstat(&["--watch", "0.2", "--count", "2", "-l", "-p", &port]).ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    let stamps: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("=== ") && lines[i].ends_with("Z ==="))
        .collect();
    assert_eq!(stamps.len(), 2, "{}", out.stdout);
    assert_eq!(stamps[0], 0, "{}", out.stdout);
    for &i in &stamps {
        assert!(lines[i + 1].starts_with("USER "), "{}", out.stdout);
        assert!(
            lines[i + 2].contains(&format!("127.0.0.1:{port}")),
            "{}",
            out.stdout
        );
    }
    assert_eq!(lines.len(), 6, "{}", out.stdout);
    assert!(!out.stdout.contains('\x1b'), "no escapes when piped");
}

#[test]
fn json_watch_prints_one_document_per_line() {
    let _timing = timing_sensitive();
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let port = h.item(0).sock().port();
    let out = sockstat(&["--watch", "0.1", "--count", "3", "--json", "-l"])
        .arg("-p")
        .arg(port.to_string())
        .ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    for l in lines {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        validate(&v);
        assert_eq!(v["sockets"][0]["local"]["port"], port);
    }
}

#[test]
fn tcp_info_watch_is_a_time_series_per_connection() {
    let _timing = timing_sensitive();
    let h = Holder::spawn(&["tcp4-pair:127.0.0.1"]);
    let port = h.item(0).role("listener").port().to_string();
    let out = sockstat(&[
        "-T", "-m", "--cgroup", "--json", "--watch", "0.1", "--count", "2", "-P", "tcp",
    ])
    .args(&["-p", &port, "--pid", &h.pid().to_string()])
    .ok();
    let samples: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    // Client and server, twice; the listener is not a connection.
    assert_eq!(samples.len(), 4, "{}", out.stdout);
    let mut cookies = std::collections::BTreeSet::new();
    for s in &samples {
        validate_against("series.schema.json", s);
        assert_eq!(s["version"], 1, "{s}");
        assert!(s["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{s}");
        assert_eq!(s["state"], "ESTABLISHED", "{s}");
        for k in [
            "rtt_us",
            "cwnd_pkts",
            "snd_wnd_bytes",
            "bytes_acked",
            "unacked_pkts",
        ] {
            assert!(s[k].is_u64(), "{k} missing in {s}");
        }
        assert_eq!(s["local"]["address"], "127.0.0.1", "{s}");
        assert_eq!(s["remote"]["address"], "127.0.0.1", "{s}");
        assert_eq!(s["owners"][0]["pid"], h.pid(), "{s}");
        // -T gives the timer, -m the memory and --cgroup the cgroup, as in the listing.
        assert!(s["timer"]["kind"].is_string(), "{s}");
        assert!(s["memory"]["sndbuf_bytes"].as_u64() > Some(0), "{s}");
        assert!(s["cgroup"]["id"].is_u64(), "{s}");
        assert!(s.get("tcp").is_none() && s.get("type").is_none(), "{s}");
        cookies.insert(s["cookie"].as_str().expect("cookie").to_string());
    }
    assert_eq!(cookies.len(), 2, "the same two connections each time");
    assert_ne!(samples[0]["time"], samples[2]["time"]);
}

#[test]
fn the_record_schemas_reject_what_the_contract_does_not_allow() {
    // A series record and an event as sockstat writes them (a loopback connection, trimmed).
    let sample = json!({
        "version": 1, "time": "2026-11-22T14:50:01.123Z", "cookie": "8812", "id": 51231,
        "proto": "tcp", "family": "inet", "state": "ESTABLISHED",
        "local": {"address": "127.0.0.1", "port": 5432},
        "remote": {"address": "127.0.0.1", "port": 40512},
        "recv_q": 0, "send_q": 0,
        "owners": [{"pid": 4121, "fd": 7, "command": "postgres", "uid": 0, "user": "root"}],
        "ca_state": "open", "rtt_us": 52, "cwnd_pkts": 10, "bytes_acked": 1,
        "options": {"timestamps": true, "sack": true, "wscale": true, "ecn": false,
                    "ecn_seen": false, "syn_data": false},
        "tcp_info_bytes": 280
    });
    assert!(schema_errors("series.schema.json", &sample).is_empty());
    let event = json!({
        "version": 1, "event": "close", "time": "2026-11-22T14:50:01.123Z",
        "socket": {
            "id": 51231, "cookie": "8812", "proto": "tcp", "family": "inet", "type": "stream",
            "state": "LISTEN", "local": {"address": "127.0.0.1", "port": 5432}, "remote": null,
            "recv_q": 0, "send_q": 128, "uid": 0, "user": "root", "owners_status": "none",
            "owners": []
        }
    });
    assert!(schema_errors("events.schema.json", &event).is_empty());
    let broken = |schema: &'static str, base: &Value, edit: &dyn Fn(&mut Value)| {
        let mut v = base.clone();
        edit(&mut v);
        assert!(
            !schema_errors(schema, &v).is_empty(),
            "{schema} accepted {v}"
        );
    };
    broken("series.schema.json", &sample, &|v| v["version"] = json!(2));
    broken("series.schema.json", &sample, &|v| {
        v["cookie"] = json!(8812)
    });
    broken("series.schema.json", &sample, &|v| {
        v["time"] = json!("yesterday")
    });
    broken("series.schema.json", &sample, &|v| v["rtt_us"] = json!(-1));
    broken("series.schema.json", &sample, &|v| {
        v["proto"] = json!("udp")
    });
    broken("series.schema.json", &sample, &|v| {
        v.as_object_mut().unwrap().remove("tcp_info_bytes");
    });
    broken("series.schema.json", &sample, &|v| v["nested"] = json!([1]));
    broken("events.schema.json", &event, &|v| {
        v["event"] = json!("moved")
    });
    broken("events.schema.json", &event, &|v| {
        v["socket"]["cookie"] = json!(8812)
    });
    broken("events.schema.json", &event, &|v| v["extra"] = json!(1));
}

/// The output of a watch that ran on a terminal and exited 0: it entered the alternate screen
/// first and restored the terminal last.
fn on_the_alternate_screen(code: Option<i32>, raw: &[u8]) -> String {
    assert_eq!(code, Some(0));
    let text = String::from_utf8_lossy(raw).into_owned();
    assert!(text.starts_with("\x1b[?1049h"), "{text:?}");
    assert!(
        text.trim_end().ends_with("\x1b[?7h\x1b[?25h\x1b[?1049l"),
        "{text:?}"
    );
    text
}

#[test]
fn on_a_terminal_the_screen_is_redrawn_and_restored() {
    let _timing = timing_sensitive();
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let port = h.item(0).sock().port().to_string();
    let (code, raw) = run_on_pty(sockstat(&[
        "--watch", "0.1", "--count", "2", "-l", "-p", &port,
    ]));
    let text = on_the_alternate_screen(code, &raw);
    assert_eq!(text.matches("\x1b[H").count(), 2, "{text:?}");
    assert_eq!(text.matches("Every 0.1s: sockstat --watch").count(), 2);
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text:?}");
}

#[test]
fn a_dumb_terminal_gets_plain_snapshots() {
    let _timing = timing_sensitive();
    let (code, raw) = run_on_pty(
        sockstat(&["--watch", "0.1", "--count", "2", "-l", "-P", "tcp"]).env("TERM", "dumb"),
    );
    assert_eq!(code, Some(0));
    let text = String::from_utf8_lossy(&raw);
    assert!(!text.contains('\x1b'), "{text:?}");
    assert_eq!(text.matches("=== ").count(), 2, "{text:?}");
}

#[test]
fn ctrl_c_restores_the_terminal_and_exits_0() {
    let _timing = timing_sensitive();
    // timeout(1) sends SIGINT after a second; --preserve-status passes sockstat's status on.
    let (code, raw) = run_on_pty(sockstat(&["--watch", "0.2", "-l", "-P", "tcp"]).prefix(&[
        "timeout",
        "--preserve-status",
        "-s",
        "INT",
        "1",
    ]));
    let text = on_the_alternate_screen(code, &raw);
    assert!(text.contains("Every 0.2s: sockstat --watch"), "{text:?}");
}

#[test]
fn sigterm_ends_a_piped_watch_cleanly() {
    let _timing = timing_sensitive();
    let t0 = Instant::now();
    let out = sockstat(&["--watch", "0.2", "-l", "-P", "tcp"])
        .prefix(&["timeout", "--preserve-status", "-s", "TERM", "1"])
        .ok();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(out.stdout.starts_with("=== "), "{}", out.stdout);
}

#[test]
fn bad_watch_input_is_one_line_and_status_2() {
    // Also where watching does not apply: the flag is named, with the subcommand.
    for (args, want) in [
        (
            &["--watch", "0"][..],
            "invalid interval '0': give seconds greater than 0 and at most 86400, like 10 or 0.5",
        ),
        (&["--count", "0", "--watch"][..], "--count"),
        (&["--events", "--summary"][..], "--summary"),
        (
            &["--events", "ports"][..],
            "--events does not apply to 'ports'",
        ),
        (
            &["serve", "--watch", "1"][..],
            "--watch does not apply to 'serve'",
        ),
        (
            &["--count", "2", "kill"][..],
            "--count does not apply to 'kill'",
        ),
    ] {
        let out = sockstat(args).run().no_panic();
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn ports_view_is_watched_like_the_listing() {
    let _timing = timing_sensitive();
    // A real connection whose client end has an ephemeral port: each snapshot's report counts it.
    let h = Holder::spawn(&["tcp4-pair"]);
    let listen_port = h.item(0).sock().port();
    for args in [
        &["ports", "--watch", "0.2", "--count", "2"][..],
        &["--watch", "0.2", "--count", "2", "ports"][..],
    ] {
        let out = sockstat(args).ok();
        let stamps = out
            .stdout
            .lines()
            .filter(|l| l.starts_with("=== ") && l.ends_with("Z ==="))
            .count();
        assert_eq!(stamps, 2, "{args:?}: {}", out.stdout);
        assert!(out.stdout.starts_with("=== "), "{}", out.stdout);
        assert!(!out.stdout.contains('\x1b'), "no escapes when piped");
    }
    let out = sockstat(&["ports", "--watch", "0.2", "--count", "2", "--json", "-v"]).ok();
    let docs: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(docs.len(), 2, "{}", out.stdout);
    for d in &docs {
        validate_against("ports.schema.json", d);
        let dests = d["destinations"].as_array().expect("destinations");
        assert!(
            dests.iter().any(|x| x["remote_port"] == listen_port
                && x["remote_address"] == "127.0.0.1"
                && x["states"]["ESTABLISHED"] == 1),
            "the held connection to port {listen_port} in every refresh: {d}"
        );
    }
}

#[test]
fn counters_view_refreshes_with_deltas_over_the_watch_interval() {
    let _timing = timing_sensitive();
    let out = sockstat(&["counters", "--watch", "0.3", "--count", "3", "--json"]).ok();
    let docs: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(docs.len(), 3, "{}", out.stdout);
    for d in &docs {
        validate_against("counters.schema.json", d);
        // Without SECONDS, each refresh is the deltas over the watch interval (never since boot).
        let i = d["interval_s"]
            .as_f64()
            .expect("interval_s: deltas, not totals");
        assert!((0.29..5.0).contains(&i), "interval {i}");
    }
}

#[test]
fn diagnose_view_is_watched_and_keeps_its_exit_status() {
    let _timing = timing_sensitive();
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let port = h.item(0).sock().port().to_string();
    let out = sockstat(&[
        "--watch",
        "0.1",
        "--count",
        "2",
        "diagnose",
        "--interval",
        "0.1",
        "--json",
        "-p",
        &port,
    ])
    .run()
    .no_panic();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let docs: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(docs.len(), 2, "{}", out.stdout);
    for d in &docs {
        validate_against("diagnose.schema.json", d);
    }
}

#[test]
fn a_subcommand_view_is_redrawn_on_a_terminal() {
    let _timing = timing_sensitive();
    let (code, raw) = run_on_pty(sockstat(&["ports", "--watch", "0.1", "--count", "2"]));
    let text = on_the_alternate_screen(code, &raw);
    assert_eq!(text.matches("\x1b[H").count(), 2, "{text:?}");
    assert_eq!(
        text.matches("Every 0.1s: sockstat ports --watch").count(),
        2,
        "{text:?}"
    );
    assert!(!text.contains("=== "), "{text:?}");
}
