//! Knowing when a background `sockstat` took its first sample.
//!
//! `sockstat counters N`, `ports --interval`, `diagnose --interval` and `trace` take a sample,
//! sleep, and take another; a test that makes something happen "during the interval" must do
//! it after the first sample. A fixed sleep before acting is a guess that a loaded machine
//! breaks: on a 2-core host beside two CPU-bound processes a debug `sockstat ports --interval`
//! took more than 500 ms to its first sample (it loads the connection-event tracer first), so
//! the TIME-WAIT entries a test made "inside" the interval were already in the first sample.
//!
//! Instead the test waits until the command's main thread sleeps between its samples: sockstat
//! never sleeps before its first sample, so its main thread asleep in `clock_nanosleep` (what
//! `std::thread::sleep` calls) means the first sample is taken and the second is at least the
//! rest of the interval away. `/proc/PID/syscall` says which system call a thread is blocked
//! in; reading it needs the right to ptrace the process (root, or the same user with the
//! process a descendant under Yama's default).

use std::time::{Duration, Instant};

/// Waits until process `pid`'s main thread sleeps in `clock_nanosleep` or `nanosleep`: for a
/// sockstat command taking samples an interval apart, until its first sample is taken. Polls
/// every 2 ms for at most `limit`; an error says why it stopped (the process exited, or never
/// slept within `limit`, or its `/proc/PID/syscall` cannot be read).
pub fn wait_for_first_sample(pid: u32, limit: Duration) -> Result<Duration, String> {
    let t0 = Instant::now();
    let path = format!("/proc/{pid}/syscall");
    loop {
        match std::fs::read_to_string(&path) {
            Ok(s) if sleeping(&s) => return Ok(t0.elapsed()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!("process {pid} exited before its first sample"));
            }
            Err(e) => return Err(format!("{path}: {e}")),
        }
        // A zombie (it exited, its parent has not waited) keeps its /proc entry.
        if std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        }) {
            return Err(format!("process {pid} exited before its first sample"));
        }
        if t0.elapsed() > limit {
            return Err(format!(
                "process {pid} did not sleep between samples within {limit:?} (last {path}: {})",
                std::fs::read_to_string(&path).unwrap_or_default().trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// True when a `/proc/PID/syscall` line says the thread is blocked in a sleep.
fn sleeping(line: &str) -> bool {
    line.split_whitespace()
        .next()
        .and_then(|n| n.parse::<libc::c_long>().ok())
        .is_some_and(|n| n == libc::SYS_clock_nanosleep || n == libc::SYS_nanosleep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_sleeping_child_is_seen_and_an_exited_one_is_an_error() {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let waited = wait_for_first_sample(child.id(), Duration::from_secs(30));
        child.kill().unwrap();
        child.wait().unwrap();
        waited.unwrap();
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        let r = wait_for_first_sample(pid, Duration::from_secs(30));
        child.wait().unwrap();
        assert!(r.unwrap_err().contains("exited"));
    }

    #[test]
    fn lines() {
        let sleep = libc::SYS_clock_nanosleep;
        assert!(sleeping(&format!(
            "{sleep} 0x0 0x0 0x7ffdc5fd2cd0 0x7ffdc5fd2d10 0x0 0x0 0x7f"
        )));
        let read = libc::SYS_read;
        assert!(!sleeping(&format!(
            "{read} 0x3 0x7ffe0c9022b0 0x1000 0x8 0x0 0x5605 0x7f"
        )));
        assert!(!sleeping("running"));
        assert!(!sleeping("-1 0x7ffd 0x7f21"));
    }
}
