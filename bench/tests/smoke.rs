//! Small-scale run of the benchmark kit: correctness of counts only, no timing.
//!
//! As root, `sockbench check -n 300 -p 10` builds the table with sockgen inside
//! `unshare --net --pid --fork --mount-proc`, and checks the floor program, `ss` and (when
//! a target/{release,debug}/sockstat with a working `--json` exists) sockstat against the
//! generator's truth. Not root: a loud SKIPPED and a pass.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn newest_sockstat(target: &Path) -> Option<PathBuf> {
    ["release", "debug"]
        .iter()
        .map(|p| target.join(p).join("sockstat"))
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

fn supports_json(p: &Path) -> bool {
    Command::new(p)
        .args(["--json", "--no-owners"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .and_then(|v| v.get("version").and_then(|x| x.as_u64()))
        == Some(1)
}

#[test]
fn counts_match_at_small_scale() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("\n*** SKIPPED: needs root (network and pid namespaces) ***\n");
        return;
    }
    if Command::new("unshare").arg("--version").output().is_err()
        || Command::new("ss").arg("-V").output().is_err()
    {
        eprintln!("\n*** SKIPPED: needs unshare (util-linux) and ss (iproute2) ***\n");
        return;
    }
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_sockbench"));
    // target/<profile>/sockbench -> target/
    let target = exe.parent().and_then(|p| p.parent()).unwrap().to_path_buf();
    let mut tools = String::from("floor,ss-tuanp,ss-tuan");
    let mut cmd = Command::new(&exe);
    cmd.args(["check", "-n", "300", "-p", "10"]);
    match newest_sockstat(&target) {
        Some(s) if supports_json(&s) => {
            eprintln!("checking {} too", s.display());
            tools.push_str(",sockstat");
            cmd.arg("--sockstat").arg(&s);
        }
        Some(s) => {
            eprintln!("{} has no working --json yet: not checked", s.display());
            cmd.arg("--no-sockstat");
        }
        None => {
            eprintln!("no target/{{release,debug}}/sockstat: sockstat not checked");
            cmd.arg("--no-sockstat");
        }
    }
    cmd.args(["--tools", &tools]);
    let t0 = Instant::now();
    let mut child = cmd.spawn().expect("spawn sockbench");
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sockbench check took over 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "sockbench check failed ({status}): see the lines marked FAIL above"
    );
}
