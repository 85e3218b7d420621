//! sockchurn: short TCP connections over loopback at a given rate, for the connection-events
//! benchmark (`sockbench events`).
//!
//! `sockchurn [--rate R] [--seconds S] [--clients C] [--servers V] [--port P] [--bytes B]`
//!
//! V server threads accept on one listener (127.0.0.1:P), read B bytes, write B bytes and close
//! first (so the TIME-WAIT entries stay on the server side and the clients' ports come back at
//! once). C client threads connect, write B bytes, read B bytes and close, each paced to R/C
//! connections per second (R = 0: as fast as they can). The server threads are named
//! `churnsrv`, the clients `churncli`. At the end one JSON line on stdout:
//! `{"connections": N, "failed": F, "seconds": S, "rate": N/S, "target": R}`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn die(msg: &str) -> ! {
    eprintln!("sockchurn: {msg}");
    std::process::exit(2)
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> T {
    v.parse()
        .unwrap_or_else(|_| die(&format!("bad value for {flag}: {v}")))
}

fn set_name(name: &str) {
    let c = std::ffi::CString::new(name).unwrap();
    unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr(), 0, 0, 0) };
}

fn main() {
    let (mut rate, mut seconds, mut clients, mut servers, mut port, mut bytes) =
        (0f64, 10f64, 2usize, 2usize, 47999u16, 1usize);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let v = it.next().unwrap_or_else(|| die("a flag lacks its value"));
        match a.as_str() {
            "--rate" => rate = num(&a, &v),
            "--seconds" => seconds = num(&a, &v),
            "--clients" => clients = num(&a, &v),
            "--servers" => servers = num(&a, &v),
            "--port" => port = num(&a, &v),
            "--bytes" => bytes = num(&a, &v),
            _ => die(&format!("unknown flag {a}")),
        }
    }
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    let listener = TcpListener::bind(("127.0.0.1", port))
        .unwrap_or_else(|e| die(&format!("bind 127.0.0.1:{port}: {e}")));
    let listener = Arc::new(listener);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    for _ in 0..servers {
        let l = Arc::clone(&listener);
        std::thread::spawn(move || {
            set_name("churnsrv");
            let mut buf = vec![0u8; bytes];
            let reply = vec![b's'; bytes];
            loop {
                let Ok((mut s, _)) = l.accept() else { continue };
                if s.read_exact(&mut buf).is_ok() {
                    let _ = s.write_all(&reply);
                }
            }
        });
    }
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let per_client = if rate > 0.0 {
        Some(Duration::from_secs_f64(clients as f64 / rate))
    } else {
        None
    };
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            let (done, failed, stop) = (Arc::clone(&done), Arc::clone(&failed), Arc::clone(&stop));
            std::thread::spawn(move || {
                set_name("churncli");
                let mut buf = vec![0u8; bytes];
                let msg = vec![b'c'; bytes];
                // Stagger the clients over one period so their connects interleave.
                let mut next =
                    start + per_client.map_or(Duration::ZERO, |p| p * i as u32 / clients as u32);
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    if let Some(p) = per_client {
                        if next > now {
                            std::thread::sleep(next - now);
                        }
                        next += p;
                    }
                    let ok = TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
                        s.write_all(&msg)?;
                        s.read_exact(&mut buf)?;
                        Ok(())
                    });
                    match ok {
                        Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    stop.store(true, Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed);
    println!(
        "{}",
        serde_json::json!({
            "connections": n,
            "failed": failed.load(Ordering::Relaxed),
            "seconds": (secs * 1000.0).round() / 1000.0,
            "rate": (n as f64 / secs).round(),
            "target": rate,
        })
    );
    // Let the last closes finish before the listener goes.
    std::thread::sleep(Duration::from_millis(200));
}
