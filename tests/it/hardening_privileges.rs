//! Issue 7 item 4: what sockstat shows, and what it warns about, under each privilege level
//! (the matrix in SECURITY.md): root; uid 65534; uid 65534 with only CAP_NET_ADMIN; uid 65534
//! running a copy with CAP_SYS_PTRACE + CAP_DAC_READ_SEARCH as file capabilities; and a `/proc`
//! mounted with `hidepid` (a fresh proc instance in a private mount namespace, passed with
//! `--proc-root`, or for the copy with file capabilities, which refuses `--proc-root`, mounted on
//! `/proc` inside that namespace: the host's /proc is never touched and the mount dies with the
//! namespace).
//!
//! Every case has two holders, one running as root and one as uid 65534, each with a TCP
//! listener; every run is restricted to those two listeners (their address and ports) so the
//! host's own processes do not matter.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;
use serde_json::Value;

const NOBODY: &str = "65534";

struct Setup {
    root: Holder,
    mine: Holder,
    bin_dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let root = Holder::spawn(&["tcp4-listen:127.0.0.1:0".to_string()]);
        let mine = Holder::spawn(&[
            "setuid:65534".to_string(),
            "tcp4-listen:127.0.0.1:0".to_string(),
        ]);
        let bin_dir = tempdir();
        let bin = bin_dir.path().join("sockstat");
        copy_sockstat(&bin);
        Setup {
            root,
            mine,
            bin_dir,
        }
    }

    fn root_inode(&self) -> u64 {
        self.root.item(0).sock().inode()
    }

    fn mine_inode(&self) -> u64 {
        self.mine.item(1).sock().inode()
    }

    /// The flags that select exactly the two listeners: -l, their address and their ports (-p
    /// alone also matched another test's listener on the same port number at another address,
    /// which made a warning of its own on a loaded host), and `--proc-root DIR` when given.
    fn selection(&self, proc_root: Option<&Path>) -> Vec<String> {
        let ports = format!(
            "{},{}",
            self.root.item(0).sock().port(),
            self.mine.item(1).sock().port()
        );
        let mut args = ["-l", "--src", "127.0.0.1", "-p", &ports]
            .map(String::from)
            .to_vec();
        if let Some(dir) = proc_root {
            args.extend(["--proc-root".to_string(), dir.display().to_string()]);
        }
        args
    }

    /// A copy of the binary uid 65534 can run.
    fn bin(&self) -> String {
        self.bin_dir.path().join("sockstat").display().to_string()
    }

    /// A copy carrying CAP_SYS_PTRACE + CAP_DAC_READ_SEARCH as file capabilities (the README
    /// recipe).
    fn bin_with_file_caps(&self) -> String {
        copy_with_file_caps(&self.bin_dir.path().join("sockstat-caps"))
    }
}

fn setpriv_nobody() -> Vec<String> {
    [
        "setpriv",
        "--reuid",
        NOBODY,
        "--regid",
        NOBODY,
        "--clear-groups",
    ]
    .map(String::from)
    .to_vec()
}

/// Runs `cmd` in a private mount namespace where a fresh proc with `option` is mounted on `dir`
/// (the namespace, and so the mount, ends with the command).
fn under_hidepid(cmd: Cmd, option: &str, dir: &Path) -> Cmd {
    cmd.prefix(&[
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount -t proc -o \"$1\" proc \"$2\" && shift 2 && exec \"$@\"",
        "sh",
        option,
        dir.to_str().unwrap(),
    ])
}

/// owners_status of every listed socket, by inode, and the owners-hidden warnings.
fn run(cmd: Cmd) -> (BTreeMap<u64, String>, Vec<Value>, Out) {
    let out = cmd.arg("--json").run().no_panic();
    assert_eq!(out.code, Some(0), "{}: {}", out.what, out.stderr);
    let v = out.json();
    let status = sockets(&v)
        .iter()
        .filter_map(|s| Some((s["id"].as_u64()?, s["owners_status"].as_str()?.to_string())))
        .collect();
    let hidden = warnings(&v)
        .iter()
        .filter(|w| w["code"] == "owners-hidden")
        .cloned()
        .collect();
    (status, hidden, out)
}

fn expect(
    what: &str,
    s: &Setup,
    got: &(BTreeMap<u64, String>, Vec<Value>, Out),
    root_status: &str,
    hidden_warnings: usize,
) {
    let (status, hidden, out) = got;
    assert_eq!(
        status.get(&s.root_inode()).map(String::as_str),
        Some(root_status),
        "{what}: root's listener ({}): {}",
        out.what,
        out.stdout
    );
    assert_eq!(
        status.get(&s.mine_inode()).map(String::as_str),
        Some("known"),
        "{what}: nobody's own listener: {}",
        out.stdout
    );
    assert_eq!(
        hidden.len(),
        hidden_warnings,
        "{what}: owners-hidden warnings: {hidden:?}"
    );
    if let Some(w) = hidden.first() {
        assert_eq!(w["count"], 1, "{what}: only root's listener is hidden: {w}");
    }
}

#[test]
fn privilege_matrix() {
    require_root!("privilege_matrix (setpriv, setcap, mount namespaces)");
    let s = Setup::new();
    let args = s.selection(None);

    // root: everything.
    let r = run(sockstat(&args).program(s.bin()));
    expect("root", &s, &r, "known", 0);

    // uid 65534: root's socket listed, its owner hidden, one warning saying how to see it.
    let r = run(sockstat(&args).program(s.bin()).prefix(&setpriv_nobody()));
    expect("nobody", &s, &r, "hidden", 1);
    let msg = r.1[0]["message"].as_str().unwrap();
    assert!(msg.contains("CAP_SYS_PTRACE"), "{msg}");

    // uid 65534 with CAP_NET_ADMIN only: the same as nobody (the socket table needs no
    // privilege; owners need ptrace-read rights, which CAP_NET_ADMIN does not give).
    let mut p = setpriv_nobody();
    p.extend(["--inh-caps", "+net_admin", "--ambient-caps", "+net_admin"].map(String::from));
    let r = run(sockstat(&args).program(s.bin()).prefix(&p));
    expect("CAP_NET_ADMIN", &s, &r, "hidden", 1);

    // uid 65534 with the file capabilities of the README: every owner, no warning.
    let r = run(sockstat(&args)
        .program(s.bin_with_file_caps())
        .prefix(&setpriv_nobody()));
    expect("file caps", &s, &r, "known", 0);
    let (_, _, out) = &r;
    assert!(
        out.json().to_string().contains(&s.root.pid().to_string()),
        "root's holder pid is shown"
    );
}

#[test]
fn hidepid_is_one_warning_not_a_lie() {
    require_root!("hidepid_is_one_warning_not_a_lie (mount namespaces)");
    let s = Setup::new();
    let procdir = tempdir();
    for option in ["hidepid=2", "hidepid=invisible", "hidepid=1"] {
        let args = s.selection(Some(procdir.path()));

        // Root sees through hidepid.
        let r = run(under_hidepid(
            sockstat(&args).program(s.bin()),
            option,
            procdir.path(),
        ));
        expect(&format!("root, {option}"), &s, &r, "known", 0);

        // uid 65534: its own socket with its owner, root's socket "hidden" (never "none": a
        // process we cannot see may hold it), one warning that names hidepid.
        let r = run(under_hidepid(
            sockstat(&args).program(s.bin()).prefix(&setpriv_nobody()),
            option,
            procdir.path(),
        ));
        expect(&format!("nobody, {option}"), &s, &r, "hidden", 1);
        let msg = r.1[0]["message"].as_str().unwrap();
        assert!(msg.contains("hidepid"), "{option}: {msg}");

        // The table: one warning line on stderr.
        let out = under_hidepid(
            sockstat(&args).program(s.bin()).prefix(&setpriv_nobody()),
            option,
            procdir.path(),
        )
        .ok();
        assert_eq!(out.stderr_lines().len(), 1, "{option}: {}", out.stderr);
        assert!(out.stderr.contains("hidepid"), "{option}: {}", out.stderr);

        // File capabilities (CAP_SYS_PTRACE) see through hidepid too: no warning. A copy with
        // file capabilities refuses --proc-root (SECURITY.md, "the boundary"): the fresh proc
        // is mounted on /proc itself, in the command's private mount namespace.
        let plain = s.selection(None);
        let r = run(under_hidepid(
            sockstat(&plain)
                .program(s.bin_with_file_caps())
                .prefix(&setpriv_nobody()),
            option,
            Path::new("/proc"),
        ));
        expect(&format!("file caps, {option}"), &s, &r, "known", 0);
    }
    // In the mount's gid= group, hidepid hides nothing: the warning is the ordinary one (fds of
    // other users' processes are still unreadable), not a hidepid one.
    let args = s.selection(Some(procdir.path()));
    let r = run(under_hidepid(
        sockstat(&args).program(s.bin()).prefix(&setpriv_nobody()),
        "hidepid=2,gid=65534",
        procdir.path(),
    ));
    expect("nobody in the gid= group", &s, &r, "hidden", 1);
    let msg = r.1[0]["message"].as_str().unwrap();
    assert!(
        !msg.contains("hidepid") && msg.contains("may not read"),
        "{msg}"
    );
    // The host's /proc was never remounted.
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mi.contains(procdir.path().to_str().unwrap()), "{mi}");
}
