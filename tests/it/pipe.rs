//! Issue 2 item 9.8: a reader that goes away (`sockstat | head -1`) ends sockstat quietly with
//! status 0.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;

fn closed_early(args: &[&str]) {
    let mut child = sockstat(args)
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sockstat");
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    r.read_line(&mut first).expect("first line");
    assert!(!first.is_empty());
    drop(r); // the reader is gone while sockstat still has most of its output to write
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "sockstat {args:?} hangs on a closed pipe"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "{args:?}: {status:?}, stderr {err:?}"
    );
    assert!(err.is_empty(), "{args:?}: stderr {err:?}");
}

#[test]
fn closed_pipe_is_quiet_success() {
    let h = Holder::spawn(&["unix-pairs:2000"]);
    let pids = h.pids();
    // Make sure the output really is much larger than a pipe buffer (64 KiB).
    let full = sockstat(&["--pid", &pids]).ok();
    assert!(full.stdout.len() > 200_000, "{} bytes", full.stdout.len());
    assert_eq!(full.stdout.lines().count(), 4001);
    closed_early(&["--pid", &pids]);
    closed_early(&["--pid", &pids, "--json"]);
    closed_early(&["--pid", &pids, "--csv"]);
    closed_early(&["--pid", &pids, "-s", "-i", "-a", "-w"]);
    // Views that refresh: the write after the reader left ends them, quietly.
    closed_early(&["--pid", &pids, "--watch", "0.05", "--count", "200"]);
    closed_early(&["ports", "--watch", "0.05", "--count", "200"]);
    closed_early(&["counters", "--json", "--watch", "0.05", "--count", "200"]);
}
