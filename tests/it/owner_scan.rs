//! Issue 3 item 5: the BPF `iter/task_file` owner scan reports exactly the owners the /proc scan
//! reports, for the same sockets, in this pid namespace and in a nested one; and so the same
//! sockets no table lists (issue 31).

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

use crate::common::*;

/// Returns from the test, loudly, when the kernel exports no BTF (the BPF scan cannot run).
macro_rules! require_btf {
    ($what:expr) => {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            eprintln!("SKIPPED: {} needs kernel BTF", $what);
            return;
        }
    };
}

/// `--json --owner-scan HOW` plus `args`, checked to have run the way asked.
fn listing(how: &str, args: &[&str]) -> Value {
    let mut a = vec!["--json", "--owner-scan", how];
    a.extend_from_slice(args);
    let v = sockstat(&a).json();
    assert!(
        !warnings(&v)
            .iter()
            .any(|w| w["code"] == "owner-scan-bpf-unavailable"),
        "--owner-scan {how} did not run: {:#}",
        v["warnings"]
    );
    v
}

/// inode -> (sorted owners, their commands), for the sockets among `inodes`.
fn owners_of(
    v: &Value,
    inodes: &std::collections::BTreeSet<u64>,
) -> BTreeMap<u64, Vec<(u64, u64, String)>> {
    sockets(v)
        .iter()
        .filter_map(|s| {
            let inode = s["id"].as_u64()?;
            inodes.contains(&inode).then_some(())?;
            let mut o: Vec<(u64, u64, String)> = s["owners"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    (
                        o["pid"].as_u64().unwrap(),
                        o["fd"].as_u64().unwrap(),
                        o["command"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            o.sort();
            Some((inode, o))
        })
        .collect()
}

#[test]
fn bpf_and_proc_scans_report_identical_owners() {
    require_root!("bpf_and_proc_scans_report_identical_owners (CAP_BPF)");
    require_btf!("bpf_and_proc_scans_report_identical_owners");
    let dir = tempdir();
    let d = dir.path().display();
    let h = Holder::spawn(&[
        "comm:bpf-owners".to_string(),
        "tcp4-pair".to_string(),
        "tcp6-listen:[::1]:0".to_string(),
        "udp4:127.0.0.1:0".to_string(),
        format!("unix-conn:{d}/c.sock"),
        "unix-pairs:3".to_string(),
        // In no table: listed from the scan (kind other), by both scans alike (issue 31).
        "udp4-unbound".to_string(),
        "udp6-unbound".to_string(),
        // The child shares every socket so far: two owners each.
        "fork".to_string(),
        "udp6:[::1]:0".to_string(),
    ]);
    let inodes = h.inodes();
    assert!(inodes.len() >= 12, "{inodes:?}");
    for args in [
        &[][..],
        &["--pid", h.pids().as_str()][..],
        &["--command", "bpf-owners"][..],
    ] {
        let proc = owners_of(&listing("proc", args), &inodes);
        let bpf = owners_of(&listing("bpf", args), &inodes);
        assert_eq!(
            proc.len(),
            inodes.len(),
            "{args:?}: every held socket listed: {proc:?}"
        );
        assert_eq!(bpf, proc, "{args:?}");
        // Shared after the fork: the first sockets have both processes as owners.
        let shared = h.item(1).role("listener").inode();
        let pids: Vec<u64> = bpf[&shared].iter().map(|o| o.0).collect();
        assert_eq!(
            pids,
            {
                let mut p = vec![u64::from(h.pid()), u64::from(h.child_pid())];
                p.sort();
                p
            },
            "{args:?}"
        );
        assert!(bpf[&shared].iter().all(|o| o.2 == "bpf-owners"));
    }
    // `auto` (the iterator or /proc, by the host's open-file count) agrees too.
    let auto = owners_of(&listing("auto", &[]), &inodes);
    assert_eq!(auto, owners_of(&listing("proc", &[]), &inodes));
}

/// In a nested pid namespace with its own /proc, the iterator's pids are translated to the
/// namespace's numbers (the holder is pid 2 or so there, not its host pid).
#[test]
fn bpf_scan_numbers_pids_as_a_nested_namespace_does() {
    require_root!("bpf_scan_numbers_pids_as_a_nested_namespace_does (unshare --pid, CAP_BPF)");
    require_btf!("bpf_scan_numbers_pids_as_a_nested_namespace_does");
    let dir = tempdir();
    let exe = std::env::current_exe().unwrap();
    let script = r#"
        mkfifo keep
        "$HOLDER" comm:nested-owner tcp4-listen:127.0.0.1:0 unix-pair <keep >report &
        holder=$!
        exec 9>keep
        i=0
        while [ ! -s report ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
        echo "pid $holder"
        "$SOCKSTAT" --json --owner-scan bpf --pid "$holder"
        echo "----"
        "$SOCKSTAT" --json --owner-scan proc --pid "$holder"
        echo "----"
        cat report
    "#;
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c", script])
        .current_dir(dir.path())
        .env("HOLDER", &exe)
        .env(sockstat_testkit::HOLDER_ENV, "1")
        .env("SOCKSTAT", env!("CARGO_BIN_EXE_sockstat"))
        .env_remove("NO_COLOR")
        .output()
        .expect("unshare");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (first, rest) = text.split_once('\n').unwrap();
    let ns_pid: u64 = first.strip_prefix("pid ").unwrap().trim().parse().unwrap();
    assert!(
        ns_pid < 100,
        "a small pid inside the new namespace: {ns_pid}"
    );
    let parts: Vec<&str> = rest.split("----\n").collect();
    assert_eq!(parts.len(), 3, "{text}");
    let bpf: Value = serde_json::from_str(parts[0]).unwrap();
    let proc: Value = serde_json::from_str(parts[1]).unwrap();
    let report: sockstat_testkit::Report = serde_json::from_str(parts[2].trim()).unwrap();
    assert_eq!(u64::from(report.pid), ns_pid);
    let inodes: std::collections::BTreeSet<u64> = report
        .items
        .iter()
        .flat_map(|i| i.socks.iter().filter_map(|s| s.inode))
        .collect();
    assert_eq!(inodes.len(), 3);
    for v in [&bpf, &proc] {
        assert!(
            warnings(v).is_empty(),
            "nothing hidden, nothing refused: {:#}",
            v["warnings"]
        );
    }
    let b = owners_of(&bpf, &inodes);
    assert_eq!(b.len(), 3, "{bpf:#}");
    assert_eq!(b, owners_of(&proc, &inodes));
    for owners in b.values() {
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].0, ns_pid);
        assert_eq!(owners[0].2, "nested-owner");
    }
}

#[test]
fn forced_bpf_without_privilege_falls_back_with_one_warning() {
    require_root!("forced_bpf_without_privilege_falls_back_with_one_warning (setpriv)");
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let port = h.item(0).sock().port().to_string();
    let v = sockstat(&["--json", "--owner-scan", "bpf", "-p", port.as_str()])
        .prefix(&[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .json();
    let w: Vec<&Value> = warnings(&v)
        .iter()
        .filter(|w| w["code"] == "owner-scan-bpf-unavailable")
        .collect();
    assert_eq!(w.len(), 1, "{:#}", v["warnings"]);
    assert!(
        w[0]["message"].as_str().unwrap().contains("CAP_BPF"),
        "{:#}",
        w[0]
    );
    // The listing still ran: the socket is there (its owner hidden from nobody).
    assert_eq!(with_port(&v, h.item(0).sock().port()).len(), 1);
}
