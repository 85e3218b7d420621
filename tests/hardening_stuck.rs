//! Issue 7 item 6: a user database that does not answer costs numbers and a warning, not a hung
//! sockstat. The stall is real: in a private mount namespace a FIFO is bind-mounted over
//! /etc/passwd, so glibc's `files` NSS module blocks in open() for ever (no writer comes), as a
//! lookup against an unreachable LDAP or a hung NFS would. Needs root (mount namespace).

#[path = "it/common.rs"]
#[allow(unused_imports, unused_macros)]
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

#[used]
#[link_section = ".init_array"]
static HOLDER_CTOR: extern "C" fn() = holder_ctor;

extern "C" fn holder_ctor() {
    sockstat_testkit::holder::run_if_requested();
}

/// Runs sockstat with `args` where /etc/passwd never answers; returns (status, stdout, stderr,
/// seconds taken).
fn with_stalled_passwd(args: &[&str]) -> (Option<i32>, String, String, f64) {
    let dir = tempdir();
    let fifo = dir.path().join("passwd.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let script = format!(
        "mount --bind '{}' /etc/passwd && exec \"$0\" \"$@\"",
        fifo.display()
    );
    let t0 = Instant::now();
    let mut child = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            SOCKSTAT,
        ])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare");
    // Bounded: a hung sockstat is killed and reported, not waited for.
    let limit = t0 + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sockstat {args:?} hung on a stalled user database for 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t0.elapsed().as_secs_f64(),
    )
}

#[test]
fn a_stalled_user_database_costs_numbers_not_a_hang() {
    require_root!("a_stalled_user_database_costs_numbers_not_a_hang (mount namespace)");
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let port = h.item(0).sock().port().to_string();

    let (code, stdout, stderr, secs) = with_stalled_passwd(&["-l", "-p", &port]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(secs < 10.0, "took {secs:.1} s");
    assert!(
        stderr.contains("the user database did not answer within 2.0 s")
            && stderr.contains("users are shown as numbers"),
        "{stderr}"
    );
    let row = stdout
        .lines()
        .find(|l| l.contains(&format!("127.0.0.1:{port}")))
        .unwrap_or_else(|| panic!("the listener is listed: {stdout}"));
    // The USER column holds the uid (0), since the name could not be had.
    assert!(row.starts_with("0 "), "{row}");
    assert!(row.contains(&h.pid().to_string()), "{row}");

    let (code, stdout, stderr, _) = with_stalled_passwd(&["-l", "-p", &port, "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    validate(&v);
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "users-unresolved"),
        "{v}"
    );
    let s = &sockets(&v)[0];
    assert_eq!(s["uid"], 0);
    assert!(s.get("user").is_none_or(|u| u.is_null()), "{s}");

    // -n never asks, so nothing stalls and nothing is said.
    let (code, _, stderr, secs) = with_stalled_passwd(&["-l", "-n", "-p", &port]);
    assert_eq!(code, Some(0));
    assert!(!stderr.contains("user database"), "{stderr}");
    assert!(secs < 2.0, "took {secs:.1} s with -n");
}
