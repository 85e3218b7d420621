//! `tundelay NS_A DEV_A NS_B DEV_B DELAY_MS [LOSS] [SECONDS]`: forwards packets between a TUN
//! device in each of two network namespaces with a one-way delay and a drop share, for at most
//! SECONDS (default 60); dies with its parent. For trying the diagnose cases by hand; the tests
//! use the library directly. Configure addresses yourself (`ip -n NS_A addr add ... dev DEV_A`).

use std::time::Duration;

use sockstat_netlab::{enter, open_tun, Forwarder, Impairment};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!("usage: tundelay NS_A DEV_A NS_B DEV_B DELAY_MS [LOSS] [SECONDS]");
        std::process::exit(2);
    }
    // SAFETY: prctl with PR_SET_PDEATHSIG only sets a flag on this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    let delay: u64 = args[5].parse().unwrap_or(10);
    let loss: f64 = args.get(6).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let secs: u64 = args.get(7).and_then(|s| s.parse().ok()).unwrap_or(60);
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
    let imp = |loss| Impairment {
        delay: Duration::from_millis(delay),
        loss,
        rate: 0,
    };
    let f = Forwarder::start(a, b, imp(loss), imp(0.0), Duration::from_secs(secs), 1);
    std::thread::sleep(Duration::from_secs(secs));
    drop(f);
}
