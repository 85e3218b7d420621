//! `tundelay NS_A DEV_A NS_B DEV_B DELAY_MS [LOSS] [SECONDS] [RATE_MBIT] [QUEUE_MS]`: forwards
//! packets between a TUN device in each of two network namespaces with a one-way delay, a drop
//! share (a -> b), and optionally a rate limit a -> b with a bounded queue (a router's
//! bottleneck), for at most SECONDS (default 60); dies with its parent. For trying the diagnose
//! cases by hand; the tests use the library directly. Configure addresses yourself
//! (`ip -n NS_A addr add ... dev DEV_A`).

use std::time::Duration;

use sockstat_netlab::{enter, open_tun, Forwarder, Impairment};

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str, default: T) -> T {
    match args.get(i) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("tundelay: invalid {name} '{s}'");
            std::process::exit(2);
        }),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!(
            "usage: tundelay NS_A DEV_A NS_B DEV_B DELAY_MS [LOSS] [SECONDS] [RATE_MBIT] [QUEUE_MS]"
        );
        std::process::exit(2);
    }
    // SAFETY: prctl with PR_SET_PDEATHSIG only sets a flag on this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    let delay: u64 = arg(&args, 5, "DELAY_MS", 10);
    let loss: f64 = arg(&args, 6, "LOSS", 0.0);
    let secs: u64 = arg(&args, 7, "SECONDS", 60);
    let rate_mbit: f64 = arg(&args, 8, "RATE_MBIT", 0.0);
    let queue_ms: u64 = arg(&args, 9, "QUEUE_MS", 100);
    let open = |ns: &str, dev: &str| {
        let (ns, dev) = (ns.to_string(), dev.to_string());
        std::thread::spawn(move || {
            enter(&format!("/run/netns/{ns}"))?;
            open_tun(&dev)
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))
    };
    let (a, b) = match (open(&args[1], &args[2]), open(&args[3], &args[4])) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("tundelay: {e}");
            std::process::exit(2);
        }
    };
    let imp = |loss, rate| Impairment {
        delay: Duration::from_millis(delay),
        loss,
        rate,
        queue: Duration::from_millis(queue_ms),
    };
    let rate = (rate_mbit * 1e6 / 8.0) as u64;
    let f = Forwarder::start(
        a,
        b,
        imp(loss, rate),
        imp(0.0, 0),
        Duration::from_secs(secs),
        1,
    );
    std::thread::sleep(Duration::from_secs(secs));
    drop(f);
}
