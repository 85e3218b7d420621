//! Diagnoses the TCP connections to or from one port, as `sockstat diagnose -p PORT` does, and
//! prints what limits each, with the numbers and the fix.
//!
//! Run with `cargo run -p sockstat --example diagnose_one -- PORT [SECONDS]`.

use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (port, seconds) = match args.as_slice() {
        [p] => (p.as_str(), "1"),
        [p, s] => (p.as_str(), s.as_str()),
        _ => {
            eprintln!("usage: diagnose_one PORT [SECONDS]");
            return ExitCode::from(2);
        }
    };
    let ports = match sockstat::PortSet::parse(port) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("diagnose_one: {e}");
            return ExitCode::from(2);
        }
    };
    let interval = match seconds.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
        _ => {
            eprintln!("diagnose_one: invalid interval '{seconds}': give seconds, like 1 or 0.5");
            return ExitCode::from(2);
        }
    };
    let mut q = sockstat::Query::new();
    q.select.ports = Some(ports);
    q.select.connected = true;
    let report = match sockstat::diagnose_connections(&q, interval, None) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("diagnose_one: {e}");
            return ExitCode::from(2);
        }
    };
    for f in &report.findings {
        println!("{} {}: {}", f.severity.name(), f.code, f.summary);
        println!("  fix: {}", f.advice);
    }
    for w in &report.warnings {
        eprintln!("warning: {}", w.message);
    }
    println!(
        "{} findings in {} connections over {:.1} s",
        report.findings.len(),
        report.connections,
        report.interval_s
    );
    if report.has_problems() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
