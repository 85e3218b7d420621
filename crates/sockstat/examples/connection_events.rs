//! Prints every TCP connect, accept, close and failed connect on this host for a few seconds,
//! with the process behind each, as `sockstat events` does.
//!
//! Run with `sudo cargo run -p sockstat --example connection_events -- [SECONDS]` (default 10):
//! the tracer loads BPF programs on kernel tracepoints, which needs root (CAP_BPF and
//! CAP_PERFMON) and a kernel with BTF (`/sys/kernel/btf/vmlinux`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use sockstat::events::{Clock, ConnEvent};
use sockstat::run::events::{Tracer, UserNames, RING_BYTES};

fn main() -> ExitCode {
    let seconds = match std::env::args().nth(1).map(|s| s.parse::<u64>()) {
        None => 10,
        Some(Ok(s)) if (1..=3600).contains(&s) => s,
        Some(_) => {
            eprintln!("usage: connection_events [SECONDS] (1 to 3600)");
            return ExitCode::from(2);
        }
    };
    let mut tracer = match Tracer::start(false, RING_BYTES) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("connection_events: {e}");
            return ExitCode::from(3);
        }
    };
    let clock = Clock::now();
    let mut users = UserNames::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        tracer.drain(|record| {
            let Some(mut e) = ConnEvent::from_record(&record, &clock) else {
                return;
            };
            users.fill(&mut e);
            let who = match &e.process {
                Some(p) => format!(
                    "{}[{}] {}",
                    p.command,
                    p.pid,
                    p.user.as_deref().unwrap_or("?")
                ),
                None => "-".into(),
            };
            let how = match (e.end, e.reason) {
                (Some(end), _) => end.name(),
                (None, Some(reason)) => reason.name(),
                (None, None) => "",
            };
            println!(
                "{:<8} {} -> {} {who} {how}",
                e.kind.name(),
                e.local,
                e.remote
            );
        });
        std::thread::sleep(Duration::from_millis(100));
    }
    match tracer.lost() {
        Ok(lost) if !lost.is_zero() => eprintln!("lost: {lost:?}"),
        Ok(_) => {}
        Err(e) => eprintln!("connection_events: cannot read the lost-event counters: {e}"),
    }
    ExitCode::SUCCESS
}
