//! Issue 2 item 9.2 (output side): optional columns, header switches, truncation, CSV, colour.

use serde_json::Value;

use crate::common::*;

#[test]
fn state_id_and_numeric_columns() {
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0", "tcp4-pair", "udp4:127.0.0.1:0"]);
    let pids = h.pids();
    let (uid, user) = me();

    let out = sockstat(&["--pid", &pids, "-s", "-i"]).ok();
    let words: Vec<&str> = out
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        words,
        [
            "USER", "COMMAND", "PID", "FD", "PROTO", "LOCAL", "ADDRESS", "FOREIGN", "ADDRESS",
            "STATE", "ID"
        ]
    );
    let t = out.table();
    assert_eq!(t.rows.len(), 5, "{}", out.stdout);
    let check = |s: &Sock, state: &str| {
        let r = t.rows_where("ID", &s.inode().to_string());
        assert_eq!(r.len(), 1, "{s:?}\n{}", out.stdout);
        assert_eq!(r[0][t.col("STATE")], state);
        assert_eq!(r[0][t.col("FD")], s.fd().to_string());
        assert_eq!(r[0][t.col("USER")], user);
    };
    check(h.item(0).sock(), "LISTEN");
    check(h.item(1).role("listener"), "LISTEN");
    check(h.item(1).role("client"), "ESTABLISHED");
    check(h.item(1).role("server"), "ESTABLISHED");
    check(h.item(2).sock(), "UNCONN");

    // Only -s: STATE is the last column; only -i: ID is.
    for (flag, last) in [("-s", "STATE"), ("-i", "ID")] {
        let out = sockstat(&["--pid", &pids, flag]).ok();
        let words: Vec<&str> = out
            .stdout
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            words[words.len() - 3..],
            ["FOREIGN", "ADDRESS", last],
            "{flag}"
        );
        assert_eq!(out.table().header.len(), 8);
    }

    // -n: numeric uids in the USER column, null user names in JSON.
    let out = sockstat(&["--pid", &pids, "-n"]).ok();
    let t = out.table();
    assert!(
        t.rows.iter().all(|r| r[0] == uid.to_string()),
        "{}",
        out.stdout
    );
    let v = sockstat(&["--pid", &pids, "-n"]).json();
    for s in sockets(&v) {
        assert_eq!(s["uid"], uid);
        assert_eq!(s["user"], Value::Null);
        for o in s["owners"].as_array().unwrap() {
            assert_eq!(o["uid"], uid);
            assert_eq!(o["user"], Value::Null);
        }
    }
}

#[test]
fn header_switches() {
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0", "udp4:127.0.0.1:0"]);
    let pids = h.pids();
    let with = sockstat(&["--pid", &pids]).ok();
    let lines: Vec<&str> = with.stdout.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("USER"));
    for flag in ["-q", "-H"] {
        let out = sockstat(&["--pid", &pids, flag]).ok();
        let got: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(got.len(), 2, "{flag}: {}", out.stdout);
        assert!(!out.stdout.contains("USER"), "{flag}: {}", out.stdout);
        let rows = parse_table(&out.stdout, false).rows;
        assert_eq!(rows, with.table().rows, "{flag}");
    }
    // -q with CSV drops the header row too.
    let out = sockstat(&["--pid", &pids, "--csv", "-q"]).ok();
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
    assert!(!out.stdout.starts_with("user,"), "{}", out.stdout);
    // An empty listing: just the header.
    let out = sockstat(&["--pid", "4194304"]).ok();
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    let out = sockstat(&["--pid", "4194304", "-q"]).ok();
    assert_eq!(out.stdout, "");
}

#[test]
fn args_column_and_json_args() {
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0", "comm:argtest"]);
    let v = sockstat(&["--pid", &h.pids(), "-a"]).json();
    let s = sockets(&v);
    assert_eq!(s.len(), 1);
    let args = s[0]["owners"][0]["args"].as_array().expect("args with -a");
    let args: Vec<&str> = args.iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(args.len(), 3, "{args:?}");
    assert_eq!(args[0], std::env::current_exe().unwrap().to_str().unwrap());
    assert_eq!(&args[1..], ["tcp4-listen:127.0.0.1:0", "comm:argtest"]);
    // Without -a: no args field.
    let v = sockstat(&["--pid", &h.pids()]).json();
    assert!(sockets(&v)[0]["owners"][0].get("args").is_none(), "{v:#}");

    let out = sockstat(&["--pid", &h.pids(), "-a", "-w"]).ok();
    let header = out.stdout.lines().next().unwrap();
    assert!(
        header.trim_end().ends_with("FOREIGN ADDRESS ARGS"),
        "{header}"
    );
    let row = out.stdout.lines().nth(1).unwrap();
    assert!(
        row.ends_with(" tcp4-listen:127.0.0.1:0 comm:argtest"),
        "{row:?}"
    );
    assert!(row.contains(" argtest "), "{row:?}");
}

#[test]
fn wide_never_truncates() {
    let dir = tempdir();
    let long = dir.path().join(format!("{}.sock", "a".repeat(70)));
    let path = long.to_str().unwrap().to_string();
    assert!(path.len() > 48 && path.len() < 108);
    let h = Holder::spawn(&[format!("unix-listen:{path}")]);
    let out = sockstat(&["--pid", &h.pids()]).ok();
    let t = out.table();
    let local = &t.rows[0][t.col("LOCAL ADDRESS")];
    assert!(!out.stdout.contains(&path), "{}", out.stdout);
    assert!(local.ends_with('…'), "{local}");
    assert_eq!(local.chars().count(), 48, "{local}");
    assert!(path.starts_with(local.trim_end_matches('…')), "{local}");

    let out = sockstat(&["--pid", &h.pids(), "-w"]).ok();
    let t = out.table();
    assert_eq!(t.rows[0][t.col("LOCAL ADDRESS")], path, "{}", out.stdout);
}

/// Minimal RFC 4180 reader (quoted cells, doubled quotes, commas and newlines inside quotes).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => cell.push(c),
        }
    }
    assert!(
        cell.is_empty() && row.is_empty(),
        "CSV does not end with a newline"
    );
    rows
}

#[test]
fn csv_rows_and_formula_cells() {
    let abs = unique("=abs");
    let h = Holder::spawn(&[
        "tcp4-listen:127.0.0.1:0".to_string(),
        "unix-listen:=HYPERLINK(1).sock".to_string(), // relative: the holder's cwd
        "unix-listen:+x.sock".to_string(),
        "unix-listen:-x.sock".to_string(),
        format!("unix-abstract-listen:{abs}"),
        "unix-listen:a,\"b\".sock".to_string(),
        "timewait:127.0.0.1".to_string(),
    ]);
    let (uid, user) = me();
    let out = sockstat(&["--pid", &h.pids(), "--csv"]).ok();
    let rows = parse_csv(&out.stdout);
    assert_eq!(
        rows[0].join(","),
        "user,command,pid,fd,proto,local_address,foreign_address,state,recv_q,send_q,id,uid"
    );
    assert_eq!(rows.len(), 7, "{}", out.stdout);
    let find = |s: &Sock| -> &Vec<String> {
        rows.iter()
            .find(|r| r[10] == s.inode().to_string())
            .unwrap_or_else(|| panic!("{s:?} not in\n{}", out.stdout))
    };
    let l = h.item(0).sock();
    assert_eq!(
        find(l).join("|"),
        format!(
            "{user}|sockholder|{}|{}|tcp4|127.0.0.1:{}|*:*|LISTEN|0|128|{}|{uid}",
            h.pid(),
            l.fd(),
            l.port(),
            l.inode()
        )
    );
    // Cells a spreadsheet would run are neutralized with a leading quote.
    assert_eq!(find(h.item(1).sock())[5], "'=HYPERLINK(1).sock");
    assert_eq!(find(h.item(2).sock())[5], "'+x.sock");
    assert_eq!(find(h.item(3).sock())[5], "'-x.sock");
    assert_eq!(find(h.item(4).sock())[5], format!("'@{abs}"));
    // Quoting: a comma and quotes survive a round trip.
    assert_eq!(find(h.item(5).sock())[5], "a,\"b\".sock");
    assert!(
        out.stdout.contains("\"a,\"\"b\"\".sock\""),
        "{}",
        out.stdout
    );
    assert!(!out
        .stdout
        .lines()
        .any(|l| l.contains(",=") || l.starts_with('=')));

    // TIME_WAIT in CSV: unknown cells are empty.
    let tw = h.item(6).sock();
    // Both ends' ports: another test may have left an entry on one of the numbers.
    let (sport, dport) = (
        tw.port().to_string(),
        tw.peer.as_ref().unwrap().port().to_string(),
    );
    let out = sockstat(&[
        "--sport",
        &sport,
        "--dport",
        &dport,
        "--csv",
        "-q",
        "--no-owners",
    ])
    .ok();
    let rows = parse_csv(&out.stdout);
    assert_eq!(rows.len(), 1, "{}", out.stdout);
    assert_eq!(
        rows[0].join("|"),
        format!(
            "||||tcp4|{}|{}|TIME_WAIT|0|0||",
            addr_cell(tw.local.as_ref()),
            addr_cell(tw.peer.as_ref())
        )
    );
}

fn has_esc(b: &[u8]) -> bool {
    b.contains(&0x1b)
}

#[test]
fn color_always_never_auto_and_no_color() {
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0", "timewait:127.0.0.1"]);
    let pids = h.pids();
    let tw = h.item(1).sock().port().to_string();

    let out = sockstat(&["--pid", &pids, "-s", "--color", "always"]).ok();
    assert!(
        out.stdout.contains("\x1b[32mLISTEN\x1b[0m"),
        "{:?}",
        out.stdout
    );
    let out = sockstat(&["-p", &tw, "-s", "--color", "always"]).ok();
    assert!(
        out.stdout.contains("\x1b[33mTIME_WAIT\x1b[0m"),
        "{:?}",
        out.stdout
    );
    assert!(
        out.stdout.contains("\x1b[2m(time-wait)\x1b[0m"),
        "a holder-less row dimmed: {:?}",
        out.stdout
    );
    // --color always with NO_COLOR: the explicit flag wins.
    let out = sockstat(&["--pid", &pids, "-s", "--color", "always"])
        .env("NO_COLOR", "1")
        .ok();
    assert!(has_esc(&out.stdout_raw), "{:?}", out.stdout);

    for args in [vec!["--color", "never"], vec!["--color", "auto"], vec![]] {
        let mut a = vec!["--pid", pids.as_str(), "-s"];
        a.extend(args.iter().copied());
        let out = sockstat(&a).ok();
        assert!(
            !has_esc(&out.stdout_raw),
            "{args:?} on a pipe: {:?}",
            out.stdout
        );
    }
    // JSON and CSV are never coloured.
    let out = sockstat(&["--pid", &pids, "--json", "--color", "always"]).ok();
    assert!(!has_esc(&out.stdout_raw));
    out.json();
    let out = sockstat(&["--pid", &pids, "--csv", "--color", "always"]).ok();
    assert!(!has_esc(&out.stdout_raw));

    // On a terminal: auto colours, unless NO_COLOR is set (to anything non-empty) or TERM=dumb;
    // never does not.
    let (code, text) = run_on_pty(sockstat(&["--pid", &pids, "-s"]));
    assert_eq!(code, Some(0));
    assert!(
        has_esc(&text),
        "auto on a tty: {:?}",
        String::from_utf8_lossy(&text)
    );
    let (code, text) = run_on_pty(sockstat(&["--pid", &pids, "-s"]).env("NO_COLOR", "1"));
    assert_eq!(code, Some(0));
    assert!(
        !has_esc(&text),
        "NO_COLOR: {:?}",
        String::from_utf8_lossy(&text)
    );
    assert!(String::from_utf8_lossy(&text).contains("LISTEN"));
    let (_, text) = run_on_pty(sockstat(&["--pid", &pids, "-s"]).env("TERM", "dumb"));
    assert!(
        !has_esc(&text),
        "TERM=dumb: {:?}",
        String::from_utf8_lossy(&text)
    );
    let (_, text) = run_on_pty(sockstat(&["--pid", &pids, "-s", "--color", "never"]));
    assert!(!has_esc(&text));
    assert!(String::from_utf8_lossy(&text).contains("LISTEN"));
}
