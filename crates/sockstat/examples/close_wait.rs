//! Closes the connections in CLOSE_WAIT on a local port (a server that stopped calling
//! `close()`), as `sockstat kill --sport PORT --state CLOSE_WAIT` does. Without `--yes` it only
//! lists them.
//!
//! Run with `sudo cargo run -p sockstat --example close_wait -- PORT [--yes]`: closing a socket
//! needs CAP_NET_ADMIN.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (port, yes) = match args.as_slice() {
        [p] => (p, false),
        [p, y] if y == "--yes" => (p, true),
        _ => {
            eprintln!("usage: close_wait PORT [--yes]");
            return ExitCode::from(2);
        }
    };
    let mut q = sockstat::Query::new();
    q.select.sport = match sockstat::PortSet::parse(port) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("close_wait: {e}");
            return ExitCode::from(2);
        }
    };
    q.select.states = Some(vec![sockstat::State::CloseWait]);
    q.select.protos = Some(sockstat::kill::PROTOCOLS.to_vec());
    let snap = match sockstat::collect(&q) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("close_wait: {e}");
            return ExitCode::from(4);
        }
    };
    // Each socket is named by its cookie: one replaced since the listing is left alone.
    let listed = sockstat::kill::select(snap, &q, None);
    if !yes {
        for s in &listed.sockets {
            let who: Vec<String> = listed
                .holders(s)
                .map(|h| {
                    format!(
                        "{}[{}]",
                        h.command.map(|c| c.to_string()).unwrap_or_default(),
                        h.pid
                    )
                })
                .collect();
            println!(
                "would close {} -> {} {}",
                s.local,
                s.remote.as_ref().map_or("?".into(), |r| r.to_string()),
                who.join(",")
            );
        }
        return ExitCode::SUCCESS;
    }
    let attempts = sockstat::kill::close(&listed, &q.gather.proc_root);
    for (s, a) in listed.sockets.iter().zip(&attempts) {
        let remote = s.remote.as_ref().map_or("?".into(), |r| r.to_string());
        match &a.reason {
            Some(why) => println!("{} -> {remote}: {} ({why})", s.local, a.outcome.name()),
            None => println!("{} -> {remote}: {}", s.local, a.outcome.name()),
        }
    }
    if sockstat::kill::all_closed(&attempts) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
