//! Shared by the ports and counters tests: a private network namespace per test, and
//! a way to run socket-making code inside it.
//!
//! A test harness process is multithreaded, so it cannot `setns(2)` itself into a namespace.
//! Instead the test re-runs its own binary inside the namespace:
//! `ip netns exec NS <this test binary> <helper test> --exact --nocapture`, with the action in
//! the `SOCKSTAT_TEST_HELPER` environment variable. The helper test is a no-op when that
//! variable is unset (so it passes in a normal run). The helper talks to the test over its
//! stdin and stdout: what follows `HELPER ` on a line of its stdout is a message; the
//! harness's own output is ignored.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The environment variable that tells the helper test what to do.
pub const HELPER_ENV: &str = "SOCKSTAT_TEST_HELPER";

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// True when running as root; otherwise says loudly that the test is skipped.
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root ({test} creates a network namespace)");
        return false;
    }
    true
}

/// A network namespace created for one test (`sockstat-p-<pid>-<n>`), with `lo` up; deleted on
/// drop, also when the test panics.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates the namespace, or returns `None` after printing why the test is skipped.
    pub fn create(test: &str) -> Option<Netns> {
        if !root_or_skip(test) {
            return None;
        }
        let name = format!(
            "sockstat-p-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let out = Command::new("ip").args(["netns", "add", &name]).output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                eprintln!(
                    "SKIPPED: {test}: 'ip netns add' failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                return None;
            }
            Err(e) => {
                eprintln!("SKIPPED: {test}: cannot run ip(8): {e}");
                return None;
            }
        }
        let ns = Netns { name };
        ns.run_ok(&["ip", "link", "set", "lo", "up"]);
        Some(ns)
    }

    /// `ip netns exec NAME argv...`, as a command to adjust and spawn.
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).args(argv);
        c
    }

    /// Runs a command inside and returns its output.
    pub fn run(&self, argv: &[&str]) -> Output {
        self.command(argv)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {argv:?} in {}: {e}", self.name))
    }

    /// Runs a command inside; panics with its stderr when it fails.
    pub fn run_ok(&self, argv: &[&str]) -> Output {
        let o = self.run(argv);
        assert!(
            o.status.success(),
            "{argv:?} in {} failed: {}",
            self.name,
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// `sysctl -w NAME=VALUE` inside.
    pub fn sysctl(&self, name: &str, value: &str) {
        self.run_ok(&["sysctl", "-q", "-w", &format!("{name}={value}")]);
    }

    /// Starts the helper test `helper` of this test binary inside the namespace with `action`.
    pub fn helper(&self, helper: &str, action: &str) -> Helper {
        let exe = std::env::current_exe().expect("test binary path");
        let exe = exe.to_str().expect("utf-8 test binary path");
        let child = self
            .command(&[exe, helper, "--exact", "--nocapture", "--test-threads=1"])
            .env(HELPER_ENV, action)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn helper");
        Helper::new(child)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A running helper: read its `HELPER ` lines, write it lines, end it by closing its stdin.
pub struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Helper {
    fn new(mut child: Child) -> Helper {
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The harness may have printed "test NAME ... " on the same line.
                if let Some(i) = line.find("HELPER ") {
                    if tx.send(line[i + 7..].to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        Helper {
            child,
            stdin,
            lines: rx,
        }
    }

    /// The next message, waiting at most `timeout`.
    pub fn expect_line(&mut self, timeout: Duration) -> String {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => l,
            Err(e) => {
                let _ = self.child.kill();
                panic!("helper sent nothing within {timeout:?}: {e}");
            }
        }
    }

    /// Sends one line.
    pub fn send(&mut self, line: &str) {
        let s = self.stdin.as_mut().expect("helper stdin open");
        writeln!(s, "{line}").expect("write to helper");
        s.flush().expect("flush helper stdin");
    }

    /// Closes stdin (the helper's signal to exit) and waits, at most `timeout`.
    pub fn finish(mut self, timeout: Duration) {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => {
                    assert!(st.success(), "helper failed: {st}");
                    return;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = self.child.kill();
                    panic!("helper did not exit within {timeout:?}");
                }
            }
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// In the helper: prints a message for the test.
pub fn say(msg: &str) {
    println!("HELPER {msg}");
    let _ = std::io::stdout().flush();
}

/// In the helper: waits for the test to send a line (or close stdin: `None`).
pub fn hear() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_string()),
    }
}

/// In the helper: waits until the test closes stdin.
pub fn wait_for_eof() {
    while hear().is_some() {}
}

/// The sockstat binary under test.
pub fn sockstat() -> &'static str {
    env!("CARGO_BIN_EXE_sockstat")
}

/// Runs sockstat inside the namespace in the background.
pub fn spawn_sockstat(ns: &Netns, args: &[&str]) -> Child {
    let mut argv = vec![sockstat()];
    argv.extend_from_slice(args);
    ns.command(&argv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sockstat")
}

/// Waits until a background sockstat (`counters N`, `ports --interval`, `diagnose --interval`)
/// has taken its first sample, so that what the test does next falls inside its interval
/// (`sockstat_testkit::sampler`; a fixed sleep was a guess a loaded machine broke).
pub fn first_sample_taken(child: &Child) {
    if let Err(e) =
        sockstat_testkit::sampler::wait_for_first_sample(child.id(), Duration::from_secs(60))
    {
        panic!("sockstat {e}");
    }
}

/// Waits for a background sockstat, at most `timeout`, and returns its output.
pub fn wait_output(mut child: Child, timeout: Duration) -> Output {
    let deadline = Instant::now() + timeout;
    while child.try_wait().expect("wait sockstat").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sockstat did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("sockstat output")
}

/// The stdout of `sockstat ports --json`, parsed and checked against doc/ports.schema.json.
pub fn ports_json(o: &Output) -> serde_json::Value {
    let v = json(o);
    crate::common::validate_against("ports.schema.json", &v);
    v
}

/// The stdout of `sockstat counters --json`, parsed and checked against
/// doc/counters.schema.json.
pub fn counters_json(o: &Output) -> serde_json::Value {
    let v = json(o);
    crate::common::validate_against("counters.schema.json", &v);
    v
}

/// Parses sockstat's stdout as JSON, with its stderr in the panic message when it is not.
fn json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "sockstat failed ({}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}
