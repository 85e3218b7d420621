//! Issue 2 item 9.3 and 9.4: things other processes control. A file named like a socket link is
//! not a socket; command names and unix paths with terminal escapes reach the terminal escaped
//! and JSON exactly.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use serde_json::json;

use crate::common::*;

#[test]
fn a_file_named_socket_inode_is_not_a_holder() {
    let h = Holder::spawn(&[
        "tcp4-listen:127.0.0.1:0",
        "unix-pair",
        "file-named-like-socket:0",
        "file-named-like-socket:1",
    ]);
    let l = h.item(0).sock();
    let f0 = h.item(2).file.as_ref().unwrap();
    let f1 = h.item(3).file.as_ref().unwrap();
    assert_eq!(f0.named_inode, l.inode());
    assert!(f0.path.ends_with(&format!("/socket:[{}]", l.inode())));
    let traps = [f0.fd as u64, f1.fd as u64];

    let p = u64::from(h.pid());
    let v = sockstat(&["--pid", &h.pids()]).json();
    assert_eq!(ids(&v), h.inodes());
    for s in sockets(&v) {
        for (pid, fd) in owners(s) {
            assert!(
                pid != p || !traps.contains(&fd),
                "file fd {fd} reported as a holder: {s}"
            );
        }
        assert_eq!(owners(s).len(), 1, "{s}");
    }
    assert_eq!(owners(by_id(&v)[&l.inode()]), vec![(p, l.fd() as u64)]);
    // -l: another test's connection may have used the same port number (a TIME-WAIT entry).
    let v = sockstat(&["-l", "-p", &l.port().to_string()]).json();
    assert_eq!(sockets(&v).len(), 1, "{v:#}");
    assert_eq!(owners(&sockets(&v)[0]), vec![(p, l.fd() as u64)]);

    // The table: one row per socket fd, none for the files.
    let out = sockstat(&["--pid", &h.pids()]).ok();
    let t = out.table();
    assert_eq!(t.rows.len(), 3, "{}", out.stdout);
    for fd in traps {
        assert!(
            t.rows_where("FD", &fd.to_string()).is_empty(),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn hostile_command_name_is_escaped_on_the_terminal_and_exact_in_json() {
    let evil = "\x1b[31mEVIL\nx";
    let h = Holder::spawn(&[
        "tcp4-listen:127.0.0.1:0".to_string(),
        format!("comm:{evil}"),
    ]);
    let out = sockstat(&["--pid", &h.pids()]).ok();
    assert!(
        !out.stdout_raw.contains(&0x1b),
        "raw ESC reached the terminal: {:?}",
        out.stdout
    );
    assert_eq!(
        out.stdout.lines().count(),
        2,
        "a newline in a name split a row: {:?}",
        out.stdout
    );
    let t = out.table();
    assert_eq!(
        t.rows[0][t.col("COMMAND")],
        "\\x1b[31mEVIL\\nx",
        "{:?}",
        out.stdout
    );

    let v = sockstat(&["--pid", &h.pids()]).json();
    let o = &sockets(&v)[0]["owners"][0];
    assert_eq!(o["command"], evil);
    assert!(o.get("command_hex").is_none());

    // CSV is for spreadsheets, and terminals: escaped too.
    let out = sockstat(&["--pid", &h.pids(), "--csv"]).ok();
    assert!(!out.stdout_raw.contains(&0x1b), "{:?}", out.stdout);
    assert!(out.stdout.contains("\\x1b[31mEVIL\\nx"), "{:?}", out.stdout);

    // --command matches the real name.
    let v = sockstat(&["--command", evil]).json();
    assert_eq!(ids(&v), h.inodes());
}

#[test]
fn command_name_that_is_not_utf8() {
    let mut spec = b"comm:bad".to_vec();
    spec.extend_from_slice(b"\xff\xfe-name");
    let h = Holder::spawn(&[
        OsString::from("tcp4-listen:127.0.0.1:0"),
        OsString::from_vec(spec),
    ]);
    let v = sockstat(&["--pid", &h.pids()]).json();
    let o = &sockets(&v)[0]["owners"][0];
    assert_eq!(o["command"], "bad\u{fffd}\u{fffd}-name");
    assert_eq!(o["command_hex"], "626164fffe2d6e616d65");
    let out = sockstat(&["--pid", &h.pids()]).ok();
    let t = out.table();
    assert_eq!(t.rows[0][t.col("COMMAND")], "bad\\xff\\xfe-name");
}

#[test]
fn hostile_unix_path_is_escaped_on_the_terminal_and_exact_in_json() {
    let dir = tempdir();
    let name = "x\x1b]0;owned\x07\u{202e}y.sock";
    let path = dir.path().join(name);
    let path_s = path.to_str().unwrap().to_string();
    let abs = format!("{}\x1b[2J", unique("sst-abs"));
    let h = Holder::spawn(&[
        format!("unix-listen:{path_s}"),
        format!("unix-abstract-listen:{abs}"),
        format!("unix-conn:{}", dir.path().join("c\\n.sock").display()),
    ]);
    let out = sockstat(&["--pid", &h.pids(), "-w"]).ok();
    assert!(!out.stdout_raw.contains(&0x1b), "{:?}", out.stdout);
    assert!(!out.stdout_raw.contains(&0x07), "{:?}", out.stdout);
    assert!(!out.stdout.contains('\u{202e}'), "{:?}", out.stdout);
    let shown = format!(
        "{}/x\\x1b]0;owned\\x07\\u{{202e}}y.sock",
        dir.path().display()
    );
    assert!(out.stdout.contains(&shown), "{:?}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("@{}\\x1b[2J", &abs[..abs.len() - 4])),
        "{:?}",
        out.stdout
    );
    // A literal backslash is doubled, so it cannot fake an escape.
    assert!(out.stdout.contains("c\\\\n.sock"), "{:?}", out.stdout);

    let v = sockstat(&["--pid", &h.pids()]).json();
    let by = by_id(&v);
    assert_eq!(
        by[&h.item(0).sock().inode()]["local"],
        json!({ "path": path_s })
    );
    assert_eq!(
        by[&h.item(1).sock().inode()]["local"],
        json!({ "path": format!("@{abs}") })
    );
    // The client's remote end names the listener's path.
    let client = by[&h.item(2).role("client").inode()];
    let server = h.item(2).role("server");
    assert_eq!(client["remote"]["peer"], json!(server.inode()));
    assert_eq!(
        client["remote"]["path"],
        json!(dir.path().join("c\\n.sock").to_str().unwrap())
    );
    // And the peer's holder, exact too.
    assert_eq!(client["remote"]["peer_owners"][0]["pid"], json!(h.pid()));
    assert_eq!(client["remote"]["peer_owners"][0]["fd"], json!(server.fd()));
}
