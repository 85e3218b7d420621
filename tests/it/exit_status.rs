//! Issue 28: distinct exit statuses, each from a real cause. 0 success; 1 diagnose found
//! something (or kill could not close some socket); 2 bad usage; 3 missing privileges or kernel
//! support; 4 any other error that stopped the work. A monitoring script tells a typo (2) from
//! a kernel or user that cannot do it (3) and from a failure worth retrying (4).

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener, TcpStream};

use crate::common::*;

/// A copy of the binary that uid 65534 can run, and the command as that user.
fn as_nobody(dir: &tempfile::TempDir, args: &[&str]) -> Out {
    let bin = dir.path().join("sockstat");
    if !bin.exists() {
        copy_sockstat(&bin);
    }
    sockstat(args)
        .program(&bin)
        .prefix(&[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .run()
        .no_panic()
}

#[test]
fn status_0_success_also_when_nothing_matched() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let out = sockstat(&["-l", "--sport", &port, "--json"])
        .run()
        .no_panic();
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(sockets(&out.json()).len(), 1);
    drop(l);
    // Only this process's: once the port is free another process may listen on it, and a child
    // another test forks in the meantime holds the listener until it execs.
    let me = std::process::id().to_string();
    let out = sockstat(&["-l", "--sport", &port, "--pid", &me, "--json"])
        .run()
        .no_panic();
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert!(sockets(&out.json()).is_empty(), "{out:#?}");
}

/// A server that does not close what its clients closed: CLOSE_WAIT piles up, diagnose reports
/// it at warning level, status 1.
#[test]
fn status_1_diagnose_found_something() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let held: Vec<TcpStream> = (0..10)
        .map(|_| {
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (mut s, _) = l.accept().unwrap();
            drop(c);
            // The FIN has arrived once the read returns end of file.
            let mut buf = [0u8; 1];
            assert_eq!(s.read(&mut buf).unwrap(), 0);
            s
        })
        .collect();
    let port = l.local_addr().unwrap().port().to_string();
    let out = sockstat(&["diagnose", "--interval", "0.2", "--sport", &port, "--json"])
        .run()
        .no_panic();
    assert_eq!(out.code, Some(1), "{out:#?}");
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("diagnose JSON");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "close-wait" && f["severity"] == "warning"),
        "{v:#}"
    );
    drop(held);
}

#[test]
fn status_2_bad_usage() {
    for (args, want) in [
        (
            &["-p", "70000"][..],
            "invalid value '70000' for '-p <PORTS>'",
        ),
        (&["events", "-u"][..], "-u does not apply to 'events'"),
        (&["-u", "kill"][..], "-u does not apply to 'kill'"),
        (
            &["--watch", "1", "serve"][..],
            "--watch does not apply to 'serve'",
        ),
        (&["kill", "--yes"][..], "kill needs a filter"),
        (&["counters", "2", "--interval", "3"][..], "differs"),
    ] {
        let out = sockstat(args).run().no_panic();
        assert_eq!(out.code, Some(2), "{args:?}: {out:#?}");
        assert_eq!(out.stderr_lines().len(), 1, "{args:?}: {out:#?}");
        assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
    }
}

/// events and drops without CAP_BPF and CAP_PERFMON: status 3, not 2 (the command line was
/// right) and not 4 (trying again will not help).
#[test]
fn status_3_missing_privileges() {
    require_root!("status_3_missing_privileges (setpriv)");
    let dir = tempdir();
    for args in [&["events", "--duration", "1"][..], &["drops", "1"][..]] {
        let out = as_nobody(&dir, args);
        if out.stderr.contains("setpriv") {
            eprintln!(
                "SKIPPED: status_3_missing_privileges: setpriv failed: {}",
                out.stderr
            );
            return;
        }
        assert_eq!(out.code, Some(3), "{args:?}: {out:#?}");
        assert_eq!(out.stderr_lines().len(), 1, "{args:?}: {out:#?}");
        assert!(out.stderr.contains("CAP_BPF"), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    }
    // A port below 1024 without CAP_NET_BIND_SERVICE (where the host reserves them).
    let start: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    if start > 1 {
        let out = as_nobody(&dir, &["serve", "--listen", "127.0.0.1:1"]);
        assert_eq!(out.code, Some(3), "{out:#?}");
        assert!(
            out.stderr.contains("cannot listen on 127.0.0.1:1"),
            "{}",
            out.stderr
        );
    } else {
        eprintln!("SKIPPED: status 3 for a privileged port: ip_unprivileged_port_start is {start}");
    }
}

/// An error that stopped the work: the exporter's port is taken, the counters cannot be read.
#[test]
fn status_4_the_work_stopped() {
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let addr = taken.local_addr().unwrap().to_string();
    let out = sockstat(&["serve", "--listen", &addr]).run().no_panic();
    assert_eq!(out.code, Some(4), "{out:#?}");
    assert_eq!(
        out.stderr_lines(),
        [format!(
            "sockstat: cannot listen on {addr}: Address already in use (os error 98)"
        )]
    );
    let empty = tempdir();
    let out = sockstat(&["counters", "--proc-root"])
        .arg(empty.path())
        .run()
        .no_panic();
    assert_eq!(out.code, Some(4), "{out:#?}");
    assert!(out.stderr.contains("net/snmp"), "{}", out.stderr);
}
