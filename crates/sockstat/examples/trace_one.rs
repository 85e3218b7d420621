//! Samples one TCP connection (by its local port) every 50 ms for a few seconds and writes the
//! picture `sockstat trace` draws: bytes acked, windows, bytes in flight, the send buffer.
//!
//! Run with `cargo run -p sockstat --example trace_one -- LOCAL_PORT OUT.svg [SECONDS]`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use sockstat::trace::{Point, Trace};
use sockstat::{Endpoint, Proto, Query};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (port, out, secs) = match args.as_slice() {
        [p, o] => (p, o, 5.0),
        [p, o, s] => match s.parse::<f64>() {
            Ok(s) if s > 0.0 && s <= 3600.0 => (p, o, s),
            _ => {
                eprintln!("trace_one: invalid duration '{s}': give seconds, like 5");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: trace_one LOCAL_PORT OUT.svg [SECONDS]");
            return ExitCode::from(2);
        }
    };
    let Ok(port) = port.parse::<u16>() else {
        eprintln!("trace_one: invalid port '{port}': give 1-65535");
        return ExitCode::from(2);
    };
    let mut q = Query::new();
    q.select.protos = Some(vec![Proto::Tcp]);
    q.select.connected = true;
    q.gather.tcp_info = true;
    q.gather.memory = true;
    q.gather.owners = false;
    let local_port_is = |e: &Endpoint| matches!(e, Endpoint::Inet { port: p, .. } if *p == port);
    let start = Instant::now();
    let mut trace: Option<Trace> = None;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        let snap = match sockstat::collect(&q) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("trace_one: {e}");
                return ExitCode::from(2);
            }
        };
        let t = start.elapsed().as_secs_f64();
        let found = snap.sockets.iter().find(|s| match &trace {
            Some(tr) => tr.is_of(s),
            None => local_port_is(&s.local) && s.tcp.is_some(),
        });
        match (found, &mut trace) {
            (Some(s), Some(tr)) => {
                if let Some(p) = Point::of(s, t) {
                    tr.push(s, p);
                }
            }
            (Some(s), None) => {
                let mut tr = Trace::new(s);
                if let Some(p) = Point::of(s, t) {
                    tr.push(s, p);
                }
                trace = Some(tr);
            }
            (None, Some(tr)) => {
                tr.closed_at_s = Some(t);
                break;
            }
            (None, None) => {}
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let Some(trace) = trace else {
        eprintln!("trace_one: no TCP connection with local port {port} in {secs} s");
        return ExitCode::from(2);
    };
    let written = std::fs::File::create(out).and_then(|mut f| {
        sockstat::render::trace::write_svg(&trace, &format!("local port {port}"), &mut f)
    });
    if let Err(e) = written {
        eprintln!("trace_one: cannot write {out}: {e}");
        return ExitCode::from(2);
    }
    println!("{out}: {:?}", trace.summary());
    ExitCode::SUCCESS
}
