//! Issue 2 item 9.5: sockstat run as nobody against root's sockets.

use serde_json::{json, Value};

use crate::common::*;

/// A copy of the sockstat binary that uid 65534 can reach and execute.
pub(crate) fn reachable_sockstat() -> (tempfile::TempDir, String) {
    let dir = tempdir();
    let bin = dir.path().join("sockstat");
    copy_sockstat(&bin);
    let s = bin.to_str().unwrap().to_string();
    (dir, s)
}

pub(crate) fn as_nobody<S: AsRef<std::ffi::OsStr>>(bin: &str, args: &[S]) -> Cmd {
    sockstat(args).program(bin).prefix(&[
        "setpriv",
        "--reuid",
        "65534",
        "--regid",
        "65534",
        "--clear-groups",
    ])
}

#[test]
fn nobody_sees_every_socket_and_one_warning() {
    require_root!("nobody_sees_every_socket_and_one_warning (setpriv)");
    let (_bin_dir, bin) = reachable_sockstat();
    let dir = tempdir();
    let path = dir.path().join("root.sock");
    let root = Holder::spawn(&[
        "tcp4-listen:127.0.0.1:0".to_string(),
        "tcp4-pair".to_string(),
        format!("unix-listen:{}", path.display()),
    ]);
    // nobody's own holder: its owners stay visible to nobody.
    let mine = Holder::spawn(&["setuid:65534", "tcp4-listen:127.0.0.1:0"]);
    let rl = root.item(0).sock();
    let pair = root.item(1);
    let ml = mine.item(1).sock();
    let ports = format!(
        "{},{},{}",
        rl.port(),
        pair.role("listener").port(),
        ml.port()
    );

    // -p matches either end, and the port numbers are the host's: other tests' connections
    // leave TIME-WAIT entries with any of them (seen on a loaded host). This test's sockets
    // are listeners and connections.
    let states = "LISTEN,ESTABLISHED";
    let out = as_nobody(&bin, &["--json", "-p", &ports, "--state", states]).run();
    assert_eq!(out.code, Some(0), "{out:#?}");
    let v = out.json();
    assert!(!out.stderr.contains("panicked"));
    let want: std::collections::BTreeSet<u64> = [
        rl,
        pair.role("listener"),
        pair.role("client"),
        pair.role("server"),
        ml,
    ]
    .iter()
    .map(|s| s.inode())
    .collect();
    assert_eq!(ids(&v), want, "every socket is listed: {v:#}");
    for s in sockets(&v) {
        if s["id"] == ml.inode() {
            assert_eq!(s["uid"], 65534);
            assert_eq!(s["user"], "nobody");
            assert_eq!(s["owners_status"], "known", "{s}");
            assert_eq!(owners(s), vec![(u64::from(mine.pid()), ml.fd() as u64)]);
        } else {
            assert_eq!(s["uid"], 0, "{s}");
            assert_eq!(s["user"], "root", "{s}");
            assert_eq!(s["owners_status"], "hidden", "{s}");
            assert_eq!(s["owners"], json!([]));
        }
    }
    let w: Vec<&Value> = warnings(&v)
        .iter()
        .filter(|w| w["code"] == "owners-hidden")
        .collect();
    assert_eq!(w.len(), 1, "exactly one owners-hidden warning: {v:#}");
    assert!(w[0]["count"].as_u64().unwrap() >= 4, "{v:#}");
    assert!(
        w[0]["message"].as_str().unwrap().contains("CAP_SYS_PTRACE"),
        "{v:#}"
    );
    assert_eq!(warnings(&v).len(), 1, "{v:#}");

    // The table: same rows, '?' holders, one warning line on stderr.
    let out = as_nobody(&bin, &["-p", &ports, "--state", states]).run();
    assert_eq!(out.code, Some(0), "{out:#?}");
    let lines = out.stderr_lines();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].starts_with("sockstat: warning: "),
        "{}",
        out.stderr
    );
    assert!(lines[0].contains("hidden"), "{}", out.stderr);
    let t = out.table();
    assert_eq!(t.rows.len(), 5, "{}", out.stdout);
    let hidden = t.rows_where("PID", "?");
    assert_eq!(hidden.len(), 4, "{}", out.stdout);
    assert!(hidden
        .iter()
        .all(|r| r[0] == "root" && r[1] == "?" && r[3] == "?"));
    let shown = t.rows_where("PID", &mine.pid().to_string());
    assert_eq!(shown.len(), 1, "{}", out.stdout);
    assert_eq!(shown[0][0], "nobody");
    assert_eq!(shown[0][1], "sockholder");

    // Unix sockets too, and nothing crashes with filters that need the scan.
    let v = as_nobody(&bin, &["--json", "-u"]).ok().json();
    let unix = by_id(&v);
    let ul = root.item(2).sock();
    assert_eq!(
        unix[&ul.inode()]["local"],
        json!({"path": path.to_str().unwrap()})
    );
    assert_eq!(unix[&ul.inode()]["owners_status"], "hidden");
    let out = as_nobody(&bin, &["--pid", &root.pids()]).run();
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert!(!out.stderr.contains("panicked"));
    let out = as_nobody(&bin, &["--user", "root", "-p", &ports, "--json"]).ok();
    let v = out.json();
    assert_eq!(
        sockets(&v).len(),
        4,
        "root's unattributed sockets by kernel uid: {v:#}"
    );
}

/// Issue 15 item 1: the daemon shape (a root parent made the listener and shares it with a
/// child running as another user). As that user the child's holder is visible and the root
/// parent's is not: the listener is `partial`, the table has a `?` row after the visible
/// holder, and the one owners-hidden warning counts it.
#[test]
fn a_root_made_listener_shared_with_a_worker_is_partial_to_the_worker() {
    require_root!("a_root_made_listener_shared_with_a_worker_is_partial_to_the_worker (setpriv)");
    let (_bin_dir, bin) = reachable_sockstat();
    // The fork child keeps the listener as root; then the holder itself drops to nobody.
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0", "fork", "setuid:65534"]);
    let l = h.item(0).sock();
    let port = l.port().to_string();
    let v = as_nobody(&bin, &["--json", "-l", "-p", &port]).ok().json();
    let s = &sockets(&v)[0];
    assert_eq!(s["uid"], 0, "{v:#}");
    assert_eq!(s["owners_status"], "partial", "{v:#}");
    assert_eq!(
        owners(s),
        vec![(u64::from(h.pid()), l.fd() as u64)],
        "{v:#}"
    );
    let w: Vec<&Value> = warnings(&v)
        .iter()
        .filter(|w| w["code"] == "owners-hidden")
        .collect();
    assert_eq!(w.len(), 1, "{v:#}");
    assert_eq!(w[0]["count"], 1, "{v:#}");
    let message = w[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("hidden processes may also hold 1 socket whose holders are shown"),
        "{message}"
    );
    let out = as_nobody(&bin, &["-l", "-s", "-p", &port]).run();
    assert_eq!(out.code, Some(0), "{out:#?}");
    let t = out.table();
    assert_eq!(t.rows.len(), 2, "{}", out.stdout);
    assert_eq!(
        t.rows_where("PID", &h.pid().to_string()).len(),
        1,
        "{}",
        out.stdout
    );
    assert_eq!(t.rows_where("PID", "?").len(), 1, "{}", out.stdout);
    // As root, nothing is hidden: both holders, known.
    let v = sockstat(&["--json", "-l", "-p", &port]).ok().json();
    let s = &sockets(&v)[0];
    assert_eq!(s["owners_status"], "known", "{v:#}");
    let pids: Vec<u64> = owners(s).iter().map(|o| o.0).collect();
    assert!(pids.contains(&u64::from(h.child_pid())), "{v:#}");
}

/// Issue 15 item 2: kernel threads hold no files; the hidden-process count and `-v` leave them
/// out.
#[test]
fn kernel_threads_are_not_counted_as_hidden_processes() {
    require_root!("kernel_threads_are_not_counted_as_hidden_processes (setpriv)");
    let (_bin_dir, bin) = reachable_sockstat();
    let _root = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let v = as_nobody(&bin, &["--json", "-v", "-4"]).ok().json();
    let w = warnings(&v)
        .iter()
        .find(|w| w["code"] == "owners-hidden")
        .cloned()
        .expect("root's listener is hidden from nobody");
    let pids: Vec<u32> = detail_pids(&w);
    assert!(!pids.is_empty(), "{w:#}");
    let kthreads: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| {
                    let flags: u64 = t
                        .rsplit_once(')')?
                        .1
                        .split_whitespace()
                        .nth(6)?
                        .parse()
                        .ok()?;
                    Some(flags & 0x0020_0000 != 0)
                })
                .unwrap_or(false)
        })
        .collect();
    assert!(
        kthreads.is_empty(),
        "kernel threads counted: {kthreads:?} in {w:#}"
    );
    assert!(!pids.contains(&2), "kthreadd (pid 2) counted: {w:#}");
}
