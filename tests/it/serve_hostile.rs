//! Issue 27 items 2 and 4: one client cannot starve the exporter. In a network namespace of its
//! own (so that its traffic stays out of the socket tables other tests list), three exporters
//! (plain HTTP as the attack had it; plain HTTP with bcrypt passwords; TLS with required
//! client certificates and passwords) are scraped every second by a real Prometheus while, from one
//! other address (127.0.0.2), 500 slow clients trickle request heads and TLS handshakes, sit
//! idle after connecting, or send a request and never read; a flood of wrong passwords aims
//! for 1,000 a second; malformed TLS records, clients without a certificate and plain HTTP
//! to the TLS port keep coming; and a few idle clients share Prometheus's own address. At
//! least 99% of Prometheus's scrapes of each exporter succeed (its own `up` series, read
//! through its HTTP API), each exporter's threads and resident memory stay bounded (the
//! threads within the systemd unit's `TasksMax`), and every answer an attacker gets is one
//! doc/serve.md documents.
//!
//! What is about the product and what about the machine: Prometheus's scrape timeout is its
//! interval (1 s), and the exporters answer a scrape whose collection runs late from the last
//! one (`--scrape-budget 250ms`): a slow machine makes snapshots older, not scrapes fail. The
//! attackers stand for clients on other hosts, so their threads run at the lowest CPU priority
//! (what the exporter spends on them is still counted against it); their rates are what they
//! manage on the machine, and no assertion depends on them.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::{FromRawFd as _, IntoRawFd as _, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::common::*;
use crate::serve::{results, serve_with, which, write_file, Prometheus, Served};
use crate::serve_tls::{pki, write_pki};

/// Where the attackers come from: another address than Prometheus's (127.0.0.1).
const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// How long Prometheus scrapes under attack.
const WINDOW: Duration = Duration::from_secs(45);

/// A TCP connection from `src` to `dst`, non-blocking, its connect under way.
fn connect_from(src: Ipv4Addr, dst: SocketAddr, blocking: bool) -> std::io::Result<TcpStream> {
    // SAFETY: plain socket calls on a descriptor this function owns until it is wrapped.
    unsafe {
        let flags = if blocking { 0 } else { libc::SOCK_NONBLOCK };
        let fd = libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags,
            0,
        );
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let owned = OwnedFd::from_raw_fd(fd);
        let sa = |a: SocketAddrV4| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*a.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let local = sa(SocketAddrV4::new(src, 0));
        if libc::bind(fd, (&raw const local).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let SocketAddr::V4(dst) = dst else {
            return Err(std::io::Error::other("IPv4 only"));
        };
        let remote = sa(dst);
        if libc::connect(fd, (&raw const remote).cast(), len) != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(e);
            }
        }
        Ok(TcpStream::from_raw_fd(owned.into_raw_fd()))
    }
}

/// Lowers the calling thread's CPU priority to the least: the attackers stand for clients on
/// other hosts, whose CPU the exporter does not share. (What the exporter spends on them is
/// still its own, at normal priority.)
fn as_remote_client() {
    // SAFETY: setpriority on this thread's own id (Linux priorities are per thread).
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS as _, tid, 19);
    }
}

/// The status code of an HTTP answer's first line.
fn status_of(raw: &[u8]) -> Option<u16> {
    let line = raw.split(|&b| b == b'\n').next()?;
    std::str::from_utf8(line)
        .ok()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// What attackers saw, by what they did: HTTP statuses, and connections closed without an
/// answer.
#[derive(Default)]
struct Seen {
    statuses: Mutex<Vec<(&'static str, u16)>>,
    closed_unanswered: AtomicU64,
    requests: AtomicU64,
}

impl Seen {
    fn status(&self, what: &'static str, s: u16) {
        self.statuses.lock().unwrap().push((what, s));
    }

    fn statuses(&self, what: &str) -> std::collections::BTreeMap<u16, usize> {
        let mut m = std::collections::BTreeMap::new();
        for (w, s) in self.statuses.lock().unwrap().iter() {
            if *w == what {
                *m.entry(*s).or_default() += 1;
            }
        }
        m
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Sends a request head a byte at a time and never finishes it.
    TrickledHead,
    /// Sends a TLS ClientHello a byte at a time.
    TrickledHandshake,
    /// Connects and sends nothing.
    Idle,
    /// Sends a whole request and never reads the answer.
    SlowReader,
}

struct Slow {
    kind: Kind,
    src: Ipv4Addr,
    dst: SocketAddr,
    stream: Option<TcpStream>,
    sent: usize,
    since: Instant,
}

/// The slow clients, driven from one thread: each tick (0.4 s, the pace) every
/// trickler sends one more byte; a client whose connection was closed connects again.
fn slow_clients(
    clients: Vec<Slow>,
    hello: Arc<Vec<u8>>,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        as_remote_client();
        let mut clients = clients;
        let mut connects = 0u64;
        let head = b"GET /metrics HTTP/1.1\r\nHost: exporter\r\nX-A: ";
        while !stop.load(Ordering::Relaxed) {
            let tick = Instant::now();
            for c in &mut clients {
                if c.stream.is_none() {
                    if let Ok(s) = connect_from(c.src, c.dst, false) {
                        c.stream = Some(s);
                        c.sent = 0;
                        c.since = Instant::now();
                        connects += 1;
                    }
                    continue;
                }
                let s = c.stream.as_mut().expect("connected");
                let byte = match c.kind {
                    Kind::TrickledHead => Some(*head.get(c.sent).unwrap_or(&b'a')),
                    Kind::TrickledHandshake => hello.get(c.sent).copied(),
                    Kind::Idle | Kind::SlowReader => None,
                };
                let mut closed = false;
                if let Some(b) = byte {
                    match s.write(&[b]) {
                        Ok(1) => c.sent += 1,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {}
                        _ => closed = true,
                    }
                } else if c.kind == Kind::SlowReader && c.sent == 0 {
                    let req = b"GET /metrics HTTP/1.1\r\nHost: exporter\r\n\r\n";
                    if s.write(req).is_ok_and(|n| n == req.len()) {
                        c.sent = req.len();
                    }
                }
                if c.kind == Kind::SlowReader {
                    // It never reads; after 20 s it gives up and comes again.
                    if c.since.elapsed() > Duration::from_secs(20) {
                        c.stream = None;
                    }
                    continue;
                }
                // Anything the server sent: an answer (recorded) or the end of the stream.
                let mut buf = [0u8; 512];
                match s.read(&mut buf) {
                    Ok(0) => {
                        seen.closed_unanswered.fetch_add(1, Ordering::Relaxed);
                        closed = true;
                    }
                    Ok(n) => {
                        let what = match c.kind {
                            Kind::TrickledHandshake => "trickled handshake",
                            _ => "trickled or idle",
                        };
                        if c.kind == Kind::TrickledHandshake && buf[0] == 0x15 {
                            // A TLS alert: the handshake was refused.
                        } else if let Some(st) = status_of(&buf[..n]) {
                            seen.status(what, st);
                        }
                        closed = true;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {}
                    Err(_) => closed = true,
                }
                if closed {
                    c.stream = None;
                }
            }
            let spent = tick.elapsed();
            std::thread::sleep(Duration::from_millis(400).saturating_sub(spent));
        }
        connects
    })
}

/// `threads` threads sending wrong passwords to `dst` as fast as they are answered, up to
/// `per_second` in all; every answer's status is recorded.
fn password_flood(
    dst: SocketAddr,
    per_second: u32,
    threads: u32,
    stop: &Arc<AtomicBool>,
    seen: &Arc<Seen>,
) -> Vec<std::thread::JoinHandle<()>> {
    use base64::Engine as _;
    (0..threads)
        .map(|t| {
            let (stop, seen) = (Arc::clone(stop), Arc::clone(seen));
            std::thread::spawn(move || {
                as_remote_client();
                let gap = Duration::from_secs_f64(f64::from(threads) / f64::from(per_second));
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    i += 1;
                    let token = base64::engine::general_purpose::STANDARD
                        .encode(format!("prometheus:guess-{t}-{i}"));
                    if let Ok(mut s) = connect_from(ATTACKER, dst, true) {
                        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                        seen.requests.fetch_add(1, Ordering::Relaxed);
                        let req = format!(
                            "GET /metrics HTTP/1.1\r\nHost: e\r\nAuthorization: Basic {token}\r\n\r\n"
                        );
                        let mut raw = Vec::new();
                        if s.write_all(req.as_bytes()).is_ok() {
                            let _ = s.read_to_end(&mut raw);
                        }
                        match status_of(&raw) {
                            Some(st) => seen.status("wrong password", st),
                            None => {
                                seen.closed_unanswered.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    std::thread::sleep(gap.saturating_sub(started.elapsed()));
                }
            })
        })
        .collect()
}

/// A TLS client trusting `ca`, without a certificate of its own, for 127.0.0.1.
fn tls_client(ca: &str) -> rustls::ClientConnection {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.as_bytes()).expect("CA"))
        .expect("root");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    rustls::ClientConnection::new(
        Arc::new(config),
        ServerName::IpAddress(Ipv4Addr::LOCALHOST.into()),
    )
    .expect("client")
}

/// A ClientHello as a real TLS client sends it first.
fn client_hello(ca: &str) -> Vec<u8> {
    let mut conn = tls_client(ca);
    let mut out = Vec::new();
    conn.write_tls(&mut out).expect("hello");
    out
}

/// A TLS session without a client certificate: must fail against a policy that requires one.
fn tls_without_certificate(dst: SocketAddr, ca: &str) -> Result<u16, String> {
    let conn = tls_client(ca);
    let sock = connect_from(ATTACKER, dst, true).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(b"GET /metrics HTTP/1.1\r\nHost: e\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    match tls.read_to_end(&mut raw) {
        Ok(_) => status_of(&raw).ok_or_else(|| "closed without an answer".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Threads and resident memory of a process, now.
fn threads_and_rss(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    };
    Some((field("Threads:")?, field("VmRSS:")?))
}

/// Threads of a process named `http`: the exporter's connection threads (src/http/mod.rs).
fn http_threads(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim_end() == "http")
        .count() as u64
}

/// The unit's `TasksMax=`.
fn unit_tasks_max() -> u64 {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/contrib/systemd/sockstat-exporter.service"
    ))
    .expect("the unit");
    unit.lines()
        .find_map(|l| l.strip_prefix("TasksMax="))
        .and_then(|v| v.trim().parse().ok())
        .expect("TasksMax= in the unit")
}

/// Raises this process's open-file limit to its hard limit: the attackers hold hundreds of
/// sockets beside what the tests running alongside hold.
fn more_files() {
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// Runs `body` on a thread that joined network namespace `ns`: the processes it starts and the
/// threads it spawns live there too, so the tens of thousands of connections and TIME-WAIT
/// entries of the attack stay out of the host's socket table, which other tests list.
fn in_netns(ns: &Netns, body: impl FnOnce() + Send + 'static) {
    let file = std::fs::File::open(format!("/run/netns/{}", ns.name)).expect("the namespace");
    let t = std::thread::spawn(move || {
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&file),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .expect("setns");
        body();
    });
    if let Err(panic) = t.join() {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn slow_clients_and_floods_from_one_address_do_not_starve_prometheus() {
    require_root!("slow_clients_and_floods_from_one_address_do_not_starve_prometheus (netns)");
    if !which("prometheus") {
        eprintln!("SKIPPED: prometheus not found (Debian package prometheus)");
        return;
    }
    more_files();
    let ns = Netns::new();
    in_netns(&ns, hostile_clients_against_three_exporters);
}

fn hostile_clients_against_three_exporters() {
    // 127.0.0.2 is loopback (127/8) on Linux: a second address with no set-up.
    if connect_from(ATTACKER, "127.0.0.1:9".parse().unwrap(), true)
        .err()
        .is_some_and(|e| e.raw_os_error() == Some(libc::EADDRNOTAVAIL))
    {
        eprintln!("SKIPPED: cannot send from 127.0.0.2");
        return;
    }
    let p = pki();
    let dir = tempdir();
    write_pki(dir.path(), &p);
    // Each wrong password costs the exporter a real hash (cost 8: 15 ms of CPU here, so the
    // flood asks for fifteen cores' worth of hashing; the cost of Prometheus's own first check
    // is then about the gate, not about how slow a cost-10 hash is on a loaded machine).
    let hash = bcrypt::hash("s3cret", 8).expect("bcrypt");
    let budget = ["--scrape-budget", "250ms"];
    let plain = serve_with(&[], &budget);
    let auth_config = write_file(
        dir.path(),
        "auth.yml",
        &format!("basic_auth_users:\n  prometheus: '{hash}'\n"),
    );
    let auth = serve_with(
        &[],
        &[&budget[..], &["--web.config.file", &auth_config]].concat(),
    );
    let tls_config = write_file(
        dir.path(),
        "tls.yml",
        &format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n\
             basic_auth_users:\n  prometheus: '{hash}'\n"
        ),
    );
    let tls = serve_with(
        &[],
        &[&budget[..], &["--web.config.file", &tls_config]].concat(),
    );
    let addr = |s: &Served| -> SocketAddr { s.addr.parse().expect("address") };

    // The attack starts before Prometheus's first scrape, so even its first password check
    // (before any success is cached) meets the flood.
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::default());
    let now = Instant::now();
    let mut clients = Vec::new();
    let mut add = |n: usize, kind: Kind, src: Ipv4Addr, dst: SocketAddr| {
        for _ in 0..n {
            clients.push(Slow {
                kind,
                src,
                dst,
                stream: None,
                sent: 0,
                since: now,
            });
        }
    };
    add(150, Kind::TrickledHead, ATTACKER, addr(&plain));
    add(75, Kind::Idle, ATTACKER, addr(&plain));
    add(50, Kind::SlowReader, ATTACKER, addr(&plain));
    add(75, Kind::TrickledHead, ATTACKER, addr(&auth));
    add(100, Kind::TrickledHandshake, ATTACKER, addr(&tls));
    add(50, Kind::Idle, ATTACKER, addr(&tls));
    // A few from Prometheus's own address, more than an address's share: the oldest give way
    // to Prometheus's connection. (Clients behind its address that connect faster than it
    // completes a request can still push it out: doc/serve.md, "What is defended".)
    add(12, Kind::Idle, Ipv4Addr::LOCALHOST, addr(&plain));
    assert_eq!(clients.iter().filter(|c| c.src == ATTACKER).count(), 500);
    let slow = slow_clients(
        clients,
        Arc::new(client_hello(&p.ca)),
        Arc::clone(&stop),
        Arc::clone(&seen),
    );
    let flood = password_flood(addr(&auth), 1000, 16, &stop, &seen);
    // Against the TLS exporter: malformed records, no certificate, plain HTTP.
    let tls_addr = addr(&tls);
    let ca = p.ca.clone();
    let (stop2, seen2) = (Arc::clone(&stop), Arc::clone(&seen));
    let odd = std::thread::spawn(move || {
        as_remote_client();
        let mut n = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            n += 1;
            // A handshake record whose length runs past what follows, then junk.
            if let Ok(mut s) = connect_from(ATTACKER, tls_addr, true) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = s.write_all(&[0x16, 0x03, 0x01, 0xff, 0xff, 0x01, 0x00, 0x00, 0x07]);
                let _ = s.write_all(&[0x5a; 64]);
                let mut raw = Vec::new();
                let _ = s.read_to_end(&mut raw);
                match raw.first() {
                    None | Some(0x15) => {} // closed, or a TLS alert
                    Some(_) => {
                        if let Some(st) = status_of(&raw) {
                            seen2.status("malformed record", st);
                        } else {
                            seen2.status("malformed record", 0);
                        }
                    }
                }
            }
            if n % 4 == 0 {
                // Refused in the handshake (an error here), or an answer, which would be wrong.
                if let Ok(st) = tls_without_certificate(tls_addr, &ca) {
                    seen2.status("no certificate", st);
                }
            }
            if n % 8 == 0 {
                if let Ok(mut s) = connect_from(ATTACKER, tls_addr, true) {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: e\r\n\r\n");
                    let mut raw = Vec::new();
                    let _ = s.read_to_end(&mut raw);
                    if let Some(st) = status_of(&raw) {
                        seen2.status("plain HTTP to TLS", st);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    // Resources of each exporter, once a second.
    let pids = [plain.pid, auth.pid, tls.pid];
    let stop3 = Arc::clone(&stop);
    let sampler = std::thread::spawn(move || {
        let mut peak = [(0u64, 0u64); 3];
        let mut peak_http = [0u64; 3];
        // The highest resident memory of all three in each 5 s, to see a trend.
        let mut series = Vec::new();
        let mut n = 0u64;
        while !stop3.load(Ordering::Relaxed) {
            let mut highest = 0;
            for (i, pid) in pids.iter().enumerate() {
                if let Some((t, rss)) = threads_and_rss(*pid) {
                    peak[i] = (peak[i].0.max(t), peak[i].1.max(rss));
                    highest = highest.max(rss);
                }
                peak_http[i] = peak_http[i].max(http_threads(*pid));
            }
            if n % 20 == 0 {
                series.push(highest / 1024);
            }
            n += 1;
            std::thread::sleep(Duration::from_millis(250));
        }
        (peak, peak_http, series)
    });
    std::thread::sleep(Duration::from_secs(2));
    let baseline: Vec<(u64, u64)> = pids.iter().filter_map(|p| threads_and_rss(*p)).collect();

    let job = |name: &str, s: &Served, tls: bool| {
        format!(
            "  - job_name: {name}\n    scheme: {}\n{}{}    static_configs:\n      - targets: ['{}']\n",
            if tls { "https" } else { "http" },
            if tls {
                "    tls_config:\n      ca_file: ca.pem\n      cert_file: client.pem\n      key_file: client-key.pem\n"
            } else {
                ""
            },
            if name == "plain" {
                ""
            } else {
                "    basic_auth:\n      username: prometheus\n      password: s3cret\n"
            },
            s.addr
        )
    };
    let prom = Prometheus::start(
        &[
            job("plain", &plain, false),
            job("auth", &auth, false),
            job("tls", &tls, true),
        ]
        .concat(),
        &[
            ("ca.pem", &p.ca),
            ("client.pem", &p.client.cert),
            ("client-key.pem", &p.client.key),
        ],
    );
    let started = Instant::now();
    std::thread::sleep(WINDOW);
    let window = started.elapsed().as_secs();
    // What Prometheus recorded over the window: scrapes made, and scrapes that succeeded.
    let mut report = Vec::new();
    for name in ["plain", "auth", "tls"] {
        let q = |promql: String| {
            let v = prom.query_until(&promql, |v| !results(v).is_empty());
            results(&v)
                .first()
                .and_then(|r| r["value"][1].as_str()?.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let over = |f: &str, series: &str| q(format!("{f}({series}{{job=\"{name}\"}}[{window}s])"));
        let (made, ok) = (over("count_over_time", "up"), over("sum_over_time", "up"));
        let slowest = over("max_over_time", "scrape_duration_seconds");
        report.push(format!("{name}: {ok}/{made} (slowest {slowest:.3} s)"));
        assert!(
            made >= window as f64 * 0.8,
            "{name}: Prometheus made {made} scrapes in {window} s"
        );
        if ok < made * 0.99 {
            // When and why, for the one who reads the failure.
            let end = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let range = prom.api_until(
                &format!(
                    "/api/v1/query_range?query=up%7Bjob%3D%22{name}%22%7D&start={}&end={end}&step=1",
                    end - window
                ),
                |_| true,
            );
            let targets = prom.api_until("/api/v1/targets", |_| true);
            let log = match name {
                "plain" => plain.log(),
                "auth" => auth.log(),
                _ => tls.log(),
            };
            panic!(
                "{name}: {ok} of {made} scrapes succeeded (slowest {slowest} s)\nup: {range}\n\
                 targets: {targets}\nexporter's log: {log}"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let connects = slow.join().expect("slow clients");
    for f in flood {
        f.join().expect("flood");
    }
    odd.join().expect("odd clients");
    let (peak, peak_http, series) = sampler.join().expect("sampler");
    let requests = seen.requests.load(Ordering::Relaxed);
    eprintln!(
        "serve_hostile: scrapes ok/made {}; {connects} slow connections, {requests} wrong \
         passwords ({:.0}/s), {} closed unanswered; statuses: wrong password {:?}, trickled or \
         idle {:?}, trickled handshake {:?}, malformed {:?}, no certificate {:?}, plain to TLS \
         {:?}; baseline (threads, RSS kB) {baseline:?}, peak {peak:?}, connection threads {peak_http:?}; highest RSS (MiB) every 5 s {series:?}",
        report.join(", "),
        requests as f64 / (WINDOW.as_secs_f64() + 2.0),
        seen.closed_unanswered.load(Ordering::Relaxed),
        seen.statuses("wrong password"),
        seen.statuses("trickled or idle"),
        seen.statuses("trickled handshake"),
        seen.statuses("malformed record"),
        seen.statuses("no certificate"),
        seen.statuses("plain HTTP to TLS"),
    );

    // Every answer an attacker got is a documented one: a wrong password 401, or 429 when
    // too many checks wait; a trickled or idle client none (it is closed); plain HTTP to the
    // TLS port 400; a malformed record or a client without a certificate no HTTP at all.
    for (what, allowed) in [
        ("wrong password", &[401u16, 429][..]),
        ("trickled or idle", &[][..]),
        ("trickled handshake", &[][..]),
        ("malformed record", &[][..]),
        ("no certificate", &[][..]),
        ("plain HTTP to TLS", &[400][..]),
    ] {
        let got = seen.statuses(what);
        assert!(
            got.keys().all(|s| allowed.contains(s)),
            "{what}: answered {got:?}, documented {allowed:?}"
        );
    }
    assert!(
        seen.statuses("wrong password")
            .get(&401)
            .is_some_and(|n| *n > 0),
        "the flood reached the password check"
    );
    // Bounded: at most 80 connection threads (doc/serve.md), every thread within the unit's
    // TasksMax (the collection's own threads, a dozen to twenty while it dumps and scans, come
    // and go beside them), resident memory within 64 MiB of what it was during the attack's
    // first seconds.
    let tasks_max = unit_tasks_max();
    for (i, (threads, rss)) in peak.iter().enumerate() {
        assert!(
            peak_http[i] <= 80,
            "exporter {i}: {} connection threads",
            peak_http[i]
        );
        assert!(
            *threads <= tasks_max,
            "exporter {i}: {threads} threads (TasksMax={tasks_max})"
        );
        let before = baseline.get(i).map_or(0, |b| b.1);
        assert!(
            *rss <= before + 64 * 1024,
            "exporter {i}: {rss} kB resident, {before} kB before the attack"
        );
    }
    // The limits said what they did, once a minute at most.
    let minutes = (started.elapsed().as_secs() + 2).div_ceil(60) as usize;
    for s in [&plain, &auth, &tls] {
        let log = s.log();
        let lines = log.matches("connection limits:").count();
        assert!(lines >= 1 && lines <= 1 + minutes, "{log}");
    }
}
