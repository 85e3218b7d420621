//! Issue 30: `sockstat top --batch` against real flows in a network namespace the test creates.
//!
//! Senders are holders (`tcp-send:ADDR:PORT:RATE`) with their own command names, pacing their
//! writes by bytes per elapsed time; the receiver is this test process, which logs, for every
//! connection, how many bytes its kernel had taken in (read plus queued) when. Each refresh's
//! rate is checked against those bytes over the refresh's own measured interval (`time -
//! interval_s` to `time`), not against the nominal pace, so a sender or a reader slowed by a
//! loaded machine does not flip the check.

use std::collections::HashMap;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::common::*;
use crate::kill::in_ns;
use crate::unprivileged::{as_nobody, reachable_sockstat};

const ADDR: &str = "192.0.2.1";

/// Per client port, (when, bytes the receiving kernel had taken in by then).
type Log = Mutex<HashMap<u16, Vec<(SystemTime, u64)>>>;

/// Reads every connection to its listener and logs (time, bytes read so far) per client port.
struct Receiver {
    port: u16,
    log: Arc<Log>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Receiver {
    fn start(ns: &Netns) -> Receiver {
        let l = in_ns(ns, || TcpListener::bind(format!("{ADDR}:0")).expect("bind"));
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let log: Arc<Log> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (log2, stop2) = (Arc::clone(&log), Arc::clone(&stop));
        let acceptor = std::thread::spawn(move || {
            let mut readers = Vec::new();
            while !stop2.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, peer)) => {
                        let (log, stop) = (Arc::clone(&log2), Arc::clone(&stop2));
                        readers.push(std::thread::spawn(move || read_all(s, peer, &log, &stop)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            for r in readers {
                let _ = r.join();
            }
        });
        Receiver {
            port,
            log,
            stop,
            threads: vec![acceptor],
        }
    }

    /// Bytes the receiving kernel took from client port `p` between two moments, each
    /// interpolated between the two log points around it (the senders are paced, so a reader
    /// that did not run for a while leaves a straight line, not a step).
    fn bytes_between(&self, p: u16, from: SystemTime, to: SystemTime) -> f64 {
        let log = self.log.lock().unwrap();
        let v = log.get(&p).map(Vec::as_slice).unwrap_or_default();
        let at = |t: SystemTime| -> f64 {
            let i = v.partition_point(|(w, _)| *w <= t);
            match (i.checked_sub(1).map(|j| v[j]), v.get(i)) {
                (Some((t0, n0)), Some(&(t1, n1))) => {
                    let span = t1.duration_since(t0).unwrap_or_default().as_secs_f64();
                    let part = t.duration_since(t0).unwrap_or_default().as_secs_f64();
                    n0 as f64 + (n1 - n0) as f64 * if span > 0.0 { part / span } else { 0.0 }
                }
                (Some((_, n0)), None) => n0 as f64,
                (None, _) => 0.0,
            }
        };
        at(to) - at(from)
    }
}

/// Reads the connection and logs, after each read, the bytes its kernel has taken in so far:
/// those read plus those still queued (FIONREAD), so a reader slowed by a loaded machine does
/// not lag the count. A point whose queue reading was interrupted for more than 2 ms is not
/// logged (its time would not be the reading's).
fn read_all(mut s: TcpStream, peer: SocketAddr, log: &Log, stop: &AtomicBool) {
    use std::os::fd::AsRawFd;
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                total += n as u64;
                let before = SystemTime::now();
                let mut queued: libc::c_int = 0;
                // SAFETY: FIONREAD writes one int into `queued`, on a socket we own.
                let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut queued) };
                let after = SystemTime::now();
                if rc != 0
                    || after.duration_since(before).unwrap_or_default() > Duration::from_millis(2)
                {
                    continue;
                }
                log.lock()
                    .unwrap()
                    .entry(peer.port())
                    .or_default()
                    .push((after, total + queued as u64));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Connects and closes again and again (each connection sends 1000 bytes) until dropped; at
/// most 20 000 connections.
struct Churn {
    stop: Arc<AtomicBool>,
    made: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Churn {
    fn start(ns: &Netns, port: u16) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let made = Arc::new(AtomicU64::new(0));
        let (s2, m2) = (Arc::clone(&stop), Arc::clone(&made));
        let path = format!("/run/netns/{}", ns.name);
        let thread = std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            let f = std::fs::File::open(&path).unwrap();
            // SAFETY: setns on an fd we own; it changes only this thread's namespace.
            assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
            while !s2.load(Ordering::Relaxed) && m2.load(Ordering::Relaxed) < 20_000 {
                if let Ok(mut c) = TcpStream::connect((ADDR, port)) {
                    let _ = std::io::Write::write_all(&mut c, &[b'c'; 1000]);
                    m2.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Churn {
            stop,
            made,
            thread: Some(thread),
        }
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The namespace with its address, the receiver and the holders: a fast and a slow paced
/// sender, an idle connection and a UDP socket, each with its own command name.
struct Lab {
    rx: Receiver,
    fast: Holder,
    slow: Holder,
    idle: Holder,
    udp: Holder,
    ns: Netns,
}

const FAST: u64 = 2_000_000;
const SLOW: u64 = 400_000;

fn lab() -> Lab {
    let ns = Netns::new();
    ns.add_addr(&format!("{ADDR}/32"));
    let rx = Receiver::start(&ns);
    let to = format!("{ADDR}:{}", rx.port);
    let spawn = |name: &str, spec: String| Holder::spawn_in(&ns, &[format!("comm:{name}"), spec]);
    let fast = spawn("tp-fast", format!("tcp-send:{to}:{FAST}"));
    let slow = spawn("tp-slow", format!("tcp-send:{to}:{SLOW}"));
    let idle = spawn("tp-idle", format!("tcp-send:{to}:0"));
    let udp = spawn("tp-udp", format!("udp4:{ADDR}:0"));
    Lab {
        rx,
        fast,
        slow,
        idle,
        udp,
        ns,
    }
}

/// The client port of a sender holder's connection.
fn client_port(h: &Holder) -> u16 {
    h.item(1).socks[0]
        .local
        .as_ref()
        .and_then(|a| a.port)
        .expect("client port")
}

/// `2026-11-28T18:02:03.518Z` as a time.
fn parse_time(s: &str) -> SystemTime {
    let n = |a: usize, b: usize| -> i64 { s[a..b].parse().expect(s) };
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    let ms = n(20, 23);
    UNIX_EPOCH + Duration::from_millis((secs * 1000 + ms) as u64)
}

/// Runs `sockstat top --batch --json ARGS` in the namespace; one object per refresh.
fn top_json(cmd: Cmd) -> Vec<Value> {
    let out = cmd.ok();
    let v: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for r in &v {
        validate_against("top.schema.json", r);
    }
    v
}

fn row<'a>(refresh: &'a Value, command: &str) -> &'a Value {
    refresh["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["command"] == command)
        .unwrap_or_else(|| panic!("no row for {command}: {refresh}"))
}

fn rate(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a rate: {v}"))
}

/// The paced senders' rates, each refresh against the bytes read over its own interval.
#[test]
fn paced_flows_per_process() {
    require_root!("top::paced_flows_per_process (network namespace)");
    let _t = timing_sensitive();
    let lab = lab();
    std::thread::sleep(Duration::from_millis(300));
    let refreshes = top_json(
        sockstat(&[
            "top",
            "--batch",
            "--json",
            "--count",
            "3",
            "--interval",
            "1",
        ])
        .netns(&lab.ns),
    );
    assert_eq!(refreshes.len(), 3);
    for r in &refreshes {
        let to = parse_time(r["time"].as_str().unwrap());
        let dt = r["interval_s"].as_f64().unwrap();
        assert!(dt > 0.5, "{r}");
        let from = to - Duration::from_secs_f64(dt);
        for (h, name) in [(&lab.fast, "tp-fast"), (&lab.slow, "tp-slow")] {
            let truth = lab.rx.bytes_between(client_port(h), from, to) / dt;
            let got = rate(&row(r, name)["send_bytes_per_sec"]) as f64;
            assert!(
                (got - truth).abs() <= truth * 0.05,
                "{name}: measured {got} B/s, the receiving kernel took {truth} B/s over the \
                 same {dt} s: {r}"
            );
            assert_eq!(row(r, name)["pid"], h.pid());
            assert_eq!(row(r, name)["connections"], 1);
        }
        let idle = row(r, "tp-idle");
        assert_eq!(
            (
                rate(&idle["send_bytes_per_sec"]),
                rate(&idle["recv_bytes_per_sec"])
            ),
            (0, 0)
        );
        let udp = row(r, "tp-udp");
        assert!(udp["send_bytes_per_sec"].is_null(), "{udp}");
        assert!(udp["recv_bytes_per_sec"].is_null(), "{udp}");
        assert_eq!(udp["rates_unknown"], 1);
        assert!(
            r["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["code"] == "rates-unknown"),
            "{r}"
        );
        // No connection is shared here: the totals are the rows' sums.
        let rows = r["rows"].as_array().unwrap();
        let sum = |k: &str| -> u64 { rows.iter().filter_map(|x| x[k].as_u64()).sum() };
        assert_eq!(
            sum("send_bytes_per_sec"),
            rate(&r["totals"]["send_bytes_per_sec"])
        );
        assert_eq!(
            sum("recv_bytes_per_sec"),
            rate(&r["totals"]["recv_bytes_per_sec"])
        );
        assert_eq!(
            rows.iter()
                .filter_map(|x| x["connections"].as_u64())
                .sum::<u64>(),
            r["totals"]["connections"].as_u64().unwrap()
        );
        // As root, connection events count the short connections.
        assert_eq!(r["short_connections_counted"], true, "{r}");
    }
    // Sorted by rate: the fast sender (or the receiver, which reads what both send) first.
    let first = refreshes[2]["rows"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(first != "tp-slow" && first != "tp-idle", "{}", refreshes[2]);
}

/// `--by connection` names each connection's holder; `--by remote` and `--by port` group.
#[test]
fn groupings_name_the_right_holder() {
    require_root!("top::groupings_name_the_right_holder (network namespace)");
    let lab = lab();
    let port = client_port(&lab.fast);
    let r = &top_json(
        sockstat(&["top", "-b", "--json", "--count", "1", "--by", "connection"]).netns(&lab.ns),
    )[0];
    assert_eq!(r["by"], "connection");
    let c = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["local"]["port"] == port)
        .unwrap_or_else(|| panic!("no connection from port {port}: {r}"));
    assert_eq!(c["proto"], "tcp");
    assert_eq!(c["remote"]["port"], lab.rx.port);
    assert_eq!(c["owners"][0]["pid"], lab.fast.pid());
    assert_eq!(c["owners"][0]["command"], "tp-fast");
    assert!(c["cookie"].is_string(), "{c}");

    let r = &top_json(
        sockstat(&["top", "-b", "--json", "--count", "1", "--by", "remote"]).netns(&lab.ns),
    )[0];
    let to_rx = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["remote"]["address"] == ADDR)
        .unwrap_or_else(|| panic!("{r}"));
    // The three senders' connections to the receiver, and the receiver's ends to them.
    assert!(to_rx["connections"].as_u64().unwrap() >= 3, "{to_rx}");

    let r = &top_json(
        sockstat(&["top", "-b", "--json", "--count", "1", "--by", "port"]).netns(&lab.ns),
    )[0];
    let listener_side = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["local"]["port"] == lab.rx.port)
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(listener_side["connections"], 3, "{listener_side}");
    drop(lab.idle);
    drop(lab.udp);
    drop(lab.slow);
}

/// The holders of one walk are used again while no socket appears, each refresh saying how old
/// they are; a new connection makes a walk at once, so the refresh that first shows it names its
/// holder. `--rescan 0` walks at every refresh; a bad `--rescan` is refused with status 2.
#[test]
fn holders_are_walked_again_when_a_socket_appears() {
    require_root!("top::holders_are_walked_again_when_a_socket_appears (network namespace)");
    use std::io::BufRead;
    let ns = Netns::new();
    ns.add_addr(&format!("{ADDR}/32"));
    // A listener that never accepts: its ends of the connections wait in its queue with no
    // descriptor, so no socket appears but those of the senders this test starts.
    let listener = Holder::spawn_in(
        &ns,
        &[
            "comm:hw-listen".to_string(),
            format!("tcp4-listen:{ADDR}:0"),
        ],
    );
    let to = format!("{ADDR}:{}", listener.item(1).socks[0].port());
    let spawn =
        |name: &str| Holder::spawn_in(&ns, &[format!("comm:{name}"), format!("tcp-send:{to}:0")]);
    let first = spawn("hw-first");
    let named = |r: &Value, command: &str| {
        r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["command"] == command)
    };
    let top = |count: &str, rescan: &str| {
        sockstat(&[
            "top",
            "-b",
            "--json",
            "--interval",
            "0.3",
            "--count",
            count,
            "--rescan",
            rescan,
        ])
        .netns(&ns)
    };
    let mut child = top("14", "60")
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn sockstat top");
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut refreshes: Vec<Value> = Vec::new();
    let mut next = |refreshes: &mut Vec<Value>| -> bool {
        match lines.next() {
            Some(Ok(l)) => {
                let v: Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"));
                validate_against("top.schema.json", &v);
                refreshes.push(v);
                true
            }
            _ => false,
        }
    };
    // Both ends of hw-first's connection.
    while next(&mut refreshes) {
        if refreshes.last().unwrap()["totals"]["connections"] == 2 {
            break;
        }
    }
    for _ in 0..2 {
        assert!(next(&mut refreshes), "top ended early: {refreshes:?}");
    }
    let quiet = &refreshes[refreshes.len() - 2..];
    for r in quiet {
        let age = r["holders_age_s"].as_f64();
        assert!(
            age.is_some_and(|a| a > 0.0),
            "nothing appeared: the walk is used again: {r}"
        );
        assert!(named(r, "hw-first"), "{r}");
    }
    let second = spawn("hw-second");
    while next(&mut refreshes) {}
    let st = child.wait().expect("wait for sockstat top");
    assert!(st.success(), "{st:?}");
    let at = refreshes
        .iter()
        .position(|r| r["totals"]["connections"].as_u64().unwrap_or(0) > 2)
        .unwrap_or_else(|| panic!("hw-second's connection never showed: {refreshes:?}"));
    let r = &refreshes[at];
    assert!(
        r["holders_age_s"].is_null(),
        "a new socket makes a walk: {r}"
    );
    assert!(
        named(r, "hw-second"),
        "the new connection's holder is named at once: {r}"
    );
    assert!(
        refreshes[at + 1..]
            .iter()
            .any(|r| r["holders_age_s"].is_f64()),
        "the walk is used again once nothing new appears: {refreshes:?}"
    );

    let every = top_json(top("3", "0"));
    assert!(
        every.iter().all(|r| r["holders_age_s"].is_null()),
        "{every:?}"
    );

    let bad = sockstat(&["top", "-b", "--rescan", "soon"]).run();
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(
        bad.stderr.contains("invalid rescan 'soon'"),
        "{}",
        bad.stderr
    );
    drop((first, second, listener));
}

/// Short connections: counted from connection events as root; as nobody, the refresh says they
/// are not, and the rows of root's holders say they are hidden (their rates still shown).
#[test]
fn short_connections_and_hidden_holders() {
    require_root!("top::short_connections_and_hidden_holders (network namespace, setpriv)");
    let lab = lab();
    let churn = Churn::start(&lab.ns, lab.rx.port);
    let refreshes = top_json(sockstat(&["top", "-b", "--json", "--count", "2"]).netns(&lab.ns));
    let short: u64 = refreshes
        .iter()
        .map(|r| {
            r["totals"]["short_connections"]
                .as_u64()
                .expect("counted as root")
        })
        .sum();
    assert!(
        churn.made.load(Ordering::Relaxed) > 0,
        "the churn made no connection"
    );
    assert!(short > 0, "no short connection counted: {refreshes:?}");

    let (_dir, bin) = reachable_sockstat();
    let as_user =
        top_json(as_nobody(&bin, &["top", "-b", "--json", "--count", "1"]).netns(&lab.ns));
    let r = &as_user[0];
    drop(churn);
    assert_eq!(r["short_connections_counted"], false, "{r}");
    assert!(r["totals"]["short_connections"].is_null(), "{r}");
    let codes: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["code"].as_str())
        .collect();
    assert!(codes.contains(&"short-connections-uncounted"), "{codes:?}");
    let hidden: Vec<&Value> = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["holder"] == "hidden")
        .collect();
    assert!(!hidden.is_empty(), "{r}");
    assert!(hidden
        .iter()
        .all(|x| x["pid"].is_null() && x["holders_hidden"].as_u64() > Some(0)));
    // sock_diag gives every user the counters: the hidden rows still carry the rates.
    let sent: u64 = hidden
        .iter()
        .filter_map(|x| x["send_bytes_per_sec"].as_u64())
        .sum();
    assert!(sent > 0, "{r}");
    assert!(r["totals"]["holders_hidden"].as_u64() > Some(0), "{r}");
}

/// The text form: the summary lines, the table with its header and rows, and the line that
/// says short connections are not counted when they are not.
#[test]
fn batch_text() {
    require_root!("top::batch_text (network namespace, setpriv)");
    let lab = lab();
    let out = sockstat(&["top", "-b", "--count", "1"]).netns(&lab.ns).ok();
    let t = &out.stdout;
    assert!(t.starts_with("sockstat top - "), "{t}");
    let header = t
        .lines()
        .find(|l| l.starts_with("USER"))
        .unwrap_or_else(|| panic!("no header: {t}"));
    assert!(header.contains("COMMAND") && header.contains("SEND") && header.contains("FINDINGS"));
    let udp = t
        .lines()
        .find(|l| l.contains("tp-udp"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(udp.contains(" ? "), "UDP rates are unknown, not 0: {udp}");
    assert!(!t.contains("short connections not counted"), "{t}");

    let (_dir, bin) = reachable_sockstat();
    let out = as_nobody(&bin, &["top", "-b", "--count", "1"])
        .netns(&lab.ns)
        .ok();
    assert!(
        out.stdout.contains("short connections not counted"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("(hidden)"), "{}", out.stdout);
    assert!(
        out.stdout.contains("hidden from these privileges"),
        "{}",
        out.stdout
    );
}

/// Without a terminal and without --batch: one line saying what to give, exit status 2.
#[test]
fn needs_a_terminal_or_batch() {
    let out = sockstat(&["top"]).run();
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--batch"), "{}", out.stderr);
}

/// `sockstat top` on a pseudo-terminal: the test types keys and reads the screen as a terminal
/// would draw it (vt100).
struct Pty {
    master: std::fs::File,
    screen: Arc<Mutex<(vt100::Parser, Vec<u8>)>>,
    child: std::process::Child,
    reader: Option<JoinHandle<()>>,
    /// Tells the reader to let go of its copy of the master (so that the terminal can hang up).
    stop: Arc<AtomicBool>,
}

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).expect("a terminal size is not 0")
}

fn set_size(fd: &impl std::os::fd::AsRawFd, rows: u16, cols: u16) {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads the winsize we pass, on a terminal fd we own.
    assert_eq!(
        unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws) },
        0
    );
}

impl Pty {
    fn spawn(cmd: Cmd, rows: u16, cols: u16) -> Pty {
        use std::os::unix::process::CommandExt;
        let (master, slave) = open_pty();
        set_size(&master, rows, cols);
        let mut c = cmd.command();
        c.stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        // SAFETY: setsid and TIOCSCTTY are async-signal-safe; the child gets its own session
        // with the pty as its controlling terminal (so it receives SIGWINCH on resize).
        unsafe {
            c.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c.spawn().expect("spawn top on a pty");
        drop(c);
        let master = std::fs::File::from(master);
        let screen = Arc::new(Mutex::new((
            vt100::Parser::new(nz(rows), nz(cols), 0),
            Vec::new(),
        )));
        let (mut r, s2) = (master.try_clone().unwrap(), Arc::clone(&screen));
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let reader = std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            let mut buf = [0u8; 8192];
            loop {
                if stop2.load(Ordering::Relaxed) {
                    return;
                }
                let mut p = libc::pollfd {
                    fd: r.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one pollfd, ours, for 100 ms.
                if unsafe { libc::poll(&mut p, 1, 100) } == 0 {
                    continue;
                }
                match r.read(&mut buf) {
                    Ok(0) | Err(_) => return, // EIO once the child closed the terminal
                    Ok(n) => {
                        let mut g = s2.lock().unwrap();
                        g.0.process(&buf[..n]);
                        g.1.extend_from_slice(&buf[..n]);
                    }
                }
            }
        });
        Pty {
            master,
            screen,
            child,
            reader: Some(reader),
            stop,
        }
    }

    /// Closes the terminal's master side, as a closed window or a dropped SSH session does.
    fn hang_up(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.master = std::fs::File::open("/dev/null").expect("/dev/null");
    }

    fn text(&self) -> String {
        self.screen.lock().unwrap().0.screen().contents()
    }

    /// Waits (at most 20 s) until the screen satisfies `ok`; panics with the screen if not.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let end = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let t = self.text();
            if ok(&t) {
                return t;
            }
            assert!(
                std::time::Instant::now() < end,
                "waited for {what}; the screen:\n{t}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn keys(&mut self, k: &str) {
        std::io::Write::write_all(&mut self.master, k.as_bytes()).unwrap();
    }

    fn resize(&mut self, rows: u16, cols: u16) {
        self.screen.lock().unwrap().0.set_size(nz(rows), nz(cols));
        set_size(&self.master, rows, cols);
    }

    /// Waits for the child to exit (at most 10 s); its status.
    fn exit(&mut self) -> Option<i32> {
        let end = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            if std::time::Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("top did not quit; the screen:\n{}", self.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// A terminal that hangs up (its window closed, its SSH session dropped) ends the view at
/// once: it does not go on reading a terminal that will never send another key.
#[test]
fn a_terminal_that_hangs_up_ends_the_view() {
    require_root!("top::a_terminal_that_hangs_up_ends_the_view (network namespace)");
    let ns = Netns::new();
    let mut t = Pty::spawn(
        sockstat(&["top", "--interval", "0.5"])
            .netns(&ns)
            .env("NO_COLOR", "1"),
        24,
        80,
    );
    t.wait_for("the header", |s| s.contains("USER"));
    t.hang_up();
    // Exit within 10 s, with whatever status a hang-up leaves (the terminal cannot be
    // restored); `exit` kills it and fails the test if it is still running.
    let _ = t.exit();
}

/// The row of the table whose line contains `what`, by its position under the header.
fn line_index(screen: &str, what: &str) -> Option<usize> {
    let lines: Vec<&str> = screen.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("USER"))?;
    lines[header..].iter().position(|l| l.contains(what))
}

/// The full-screen view at 80x24: it draws the rows, sorts, filters, shows a row's detail
/// with its charts, kills a connection after confirmation, follows resizes (a tiny terminal
/// gets one line saying so), draws no colour with NO_COLOR, and quits on `q` restoring the
/// terminal.
#[test]
fn full_screen_view_on_a_pseudo_terminal() {
    require_root!("top::full_screen_view_on_a_pseudo_terminal (network namespace)");
    let lab = lab();
    let mut t = Pty::spawn(
        sockstat(&["top", "--interval", "0.5"])
            .netns(&lab.ns)
            .env("NO_COLOR", "1"),
        24,
        80,
    );
    let s = t.wait_for("the rows", |s| {
        s.contains("tp-fast") && s.contains("tp-idle")
    });
    assert!(
        s.contains("USER") && s.contains("SEND") && s.contains("sort: rate"),
        "{s}"
    );
    // The summary lines, longer than 80 columns, are wrapped whole, not cut.
    assert!(s.contains("TIME-WAIT"), "{s}");

    // Sort by send: the fast sender is the first row; by name (pid order), the receiver first.
    t.keys("s");
    let s = t.wait_for("sort by send", |s| s.contains("sort: send"));
    assert_eq!(line_index(&s, "tp-fast"), Some(1), "{s}");

    // Filter with the listing's syntax.
    t.keys("/--command tp-slow\r");
    let s = t.wait_for("the filter", |s| s.contains("filter: --command tp-slow"));
    assert!(s.contains("tp-slow") && !s.contains("tp-fast"), "{s}");
    // The line opens with the filter in force: erase it before typing a bad one, which is
    // refused with clap's reason while the filter in force stays.
    t.keys(&format!("/{}--bogus\r", "\x7f".repeat(40)));
    let s = t.wait_for("the refused filter", |s| s.contains("filter refused"));
    assert!(
        s.contains("--bogus") && s.contains("filter: --command tp-slow"),
        "{s}"
    );

    // Detail of the only row: holders, no finding, the charts after two refreshes.
    t.keys("\r");
    let s = t.wait_for("the detail with charts", |s| {
        s.contains("detail") && s.contains("Connections and holders") && s.contains("rate B/s")
    });
    assert!(s.contains(&format!("tp-slow[{}]", lab.slow.pid())), "{s}");
    t.keys("\x1b");
    t.wait_for("the table again", |s| {
        !s.contains("Connections and holders")
    });

    // Kill the idle connection: list, confirm, result; its holder's socket is reset.
    let idle_port = client_port(&lab.idle);
    t.keys(&format!("/{}--command tp-idle\r", "\x7f".repeat(40)));
    t.wait_for("the idle row alone", |s| {
        s.contains("tp-idle") && !s.contains("tp-slow")
    });
    t.keys("k");
    let s = t.wait_for("the kill list", |s| s.contains("Kill 1 connection(s)?"));
    assert!(s.contains(&format!(":{idle_port}")), "{s}");
    t.keys("y");
    t.wait_for("the kill result", |s| s.contains("killed"));
    t.keys("x");
    t.wait_for("the results closed", |s| !s.contains("any key: back"));
    let listing = sockstat(&["-4", "-c", "--json", "--sport", &idle_port.to_string()])
        .netns(&lab.ns)
        .ok()
        .json();
    assert!(
        sockets(&listing)
            .iter()
            .all(|s| s["state"] != "ESTABLISHED"),
        "the killed connection is still established: {listing}"
    );

    // Resizes: wider, then too small, then back.
    t.keys(&format!("/{}\r", "\x7f".repeat(40)));
    t.resize(30, 120);
    t.wait_for("the wide screen", |s| {
        s.lines()
            .any(|l| l.contains("tp-fast") && l.chars().count() > 80)
            || s.lines().count() > 24 && s.contains("tp-fast")
    });
    t.resize(5, 20);
    t.wait_for("the tiny terminal's line", |s| s.contains("too small"));
    t.resize(24, 80);
    t.wait_for("the table again", |s| s.contains("tp-fast"));

    t.keys("q");
    assert_eq!(t.exit(), Some(0));
    let raw = t.screen.lock().unwrap().1.clone();
    let raw = String::from_utf8_lossy(&raw);
    assert!(
        raw.contains("\x1b[?1049l"),
        "the alternate screen was not left"
    );
    assert!(
        !raw.contains("\x1b[38;"),
        "a colour was drawn under NO_COLOR"
    );
}

/// A flow limited by a 16 KiB SO_SNDBUF on a 20 ms path carries its finding in its row: the
/// diagnosis rules judged over the refresh's two samples (diagnose_live's path and transfer,
/// under its lock, since it measures throughput).
#[test]
fn a_send_buffer_limited_flow_carries_its_finding() {
    use crate::diagnose_live::{lab as wan_lab, ms, wan, Bulk, BulkOpts, RATE};
    let Some(_g) = wan_lab("top::a_send_buffer_limited_flow_carries_its_finding") else {
        return;
    };
    let p = wan("tsb", 3, 0.0, RATE);
    let _bulk = Bulk::start(
        &p.a,
        &p.b,
        &p.addr_b,
        5001,
        BulkOpts {
            client_sndbuf: Some(16384),
            ..BulkOpts::default()
        },
    );
    std::thread::sleep(ms(1500));
    let out =
        p.a.command(SOCKSTAT)
            .args([
                "top",
                "-b",
                "--json",
                "--count",
                "1",
                "--by",
                "connection",
                "--dport",
                "5001",
            ])
            .output()
            .expect("run sockstat top");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    validate_against("top.schema.json", &r);
    let rows = r["rows"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|x| x["remote"]["port"] == 5001 && x["state"] == "ESTABLISHED")
        .unwrap_or_else(|| panic!("no connection to port 5001: {r}"));
    assert!(
        row["findings"]
            .as_array()
            .unwrap()
            .contains(&Value::from("send-buffer-limited")),
        "{r}"
    );
    assert_eq!(row["owners"][0]["pid"], std::process::id(), "{row}");
    assert!(rate(&row["send_bytes_per_sec"]) > 0, "{row}");
    let f = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "send-buffer-limited")
        .unwrap_or_else(|| panic!("{r}"));
    assert!(f["advice"].as_str().unwrap().contains("SO_SNDBUF"), "{f}");
}

/// A finding about no single connection (here a CLOSE_WAIT pile-up: ten connections, one
/// cause) is on the summary lines of the text view, which the full-screen view draws too, and
/// in the JSON's findings; no row carries it.
#[test]
fn findings_about_no_single_connection_are_on_the_summary_lines() {
    require_root!("top::findings_about_no_single_connection_are_on_the_summary_lines (netns)");
    let ns = Netns::new();
    let (_l, _held) = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let held: Vec<TcpStream> = (0..10)
            .map(|_| {
                let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (s, _) = l.accept().unwrap();
                drop(c);
                s
            })
            .collect();
        (l, held)
    });
    let out = sockstat(&["top", "-b", "--count", "1", "--interval", "0.3"])
        .netns(&ns)
        .ok();
    let t = &out.stdout;
    let head: Vec<&str> = t.lines().take_while(|l| !l.is_empty()).collect();
    let line = head
        .iter()
        .find(|l| l.starts_with("WARNING close-wait: 10 connections"))
        .unwrap_or_else(|| panic!("no close-wait line above the rows:\n{t}"));
    assert!(line.contains("stayed in CLOSE_WAIT"), "{line}");
    assert!(
        !t.lines().skip(head.len()).any(|l| l.contains("close-wait")),
        "a row carries it:\n{t}"
    );
    let v = top_json(
        sockstat(&["top", "-b", "--json", "--count", "1", "--interval", "0.3"]).netns(&ns),
    );
    let f = v[0]["findings"].as_array().unwrap();
    assert!(
        f.iter()
            .any(|f| f["rule"] == "close-wait" && f["count"] == 10),
        "{}",
        v[0]
    );
}

/// From the host, `-z NAME` reads that namespace only and `-Z` every one: the lab's senders are
/// found in their zone, with their rates, and `-z` leaves out every other zone's rows.
#[test]
fn zones_one_or_every_one() {
    require_root!("top::zones_one_or_every_one (network namespace)");
    let lab = lab();
    std::thread::sleep(Duration::from_millis(300));
    let one = top_json(sockstat(&[
        "top",
        "-b",
        "--json",
        "--count",
        "1",
        "--interval",
        "0.5",
        "-z",
        &lab.ns.name,
    ]));
    let rows = one[0]["rows"].as_array().unwrap();
    assert!(
        rows.iter().all(|r| r["zone"] == lab.ns.name.as_str()),
        "-z {}: a row of another zone: {}",
        lab.ns.name,
        one[0]
    );
    let fast = row(&one[0], "tp-fast");
    assert_eq!(fast["pid"], lab.fast.pid(), "{fast}");
    assert!(rate(&fast["send_bytes_per_sec"]) > 0, "{fast}");
    let every = top_json(sockstat(&[
        "top",
        "-b",
        "--json",
        "--count",
        "1",
        "--interval",
        "0.5",
        "-Z",
    ]));
    // Other tests' labs run senders named tp-fast in zones of their own: ours by its pid.
    let fast = every[0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pid"] == lab.fast.pid())
        .unwrap_or_else(|| panic!("no row for pid {}: {}", lab.fast.pid(), every[0]));
    assert_eq!(fast["zone"], lab.ns.name.as_str(), "{fast}");
    assert!(rate(&fast["send_bytes_per_sec"]) > 0, "{fast}");
    // The text view names the zone in a column of its own.
    let out = sockstat(&["top", "-b", "--count", "1", "--interval", "0.5", "-Z"]).ok();
    let header = out
        .stdout
        .lines()
        .find(|l| l.contains("COMMAND") && l.contains("SEND"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(header.starts_with("ZONE"), "{header}");
    let pid = lab.fast.pid().to_string();
    let line = out
        .stdout
        .lines()
        .find(|l| l.split_whitespace().any(|c| c == pid))
        .unwrap_or_else(|| panic!("no row for pid {pid}: {}", out.stdout));
    assert!(line.starts_with(&format!("{} ", lab.ns.name)), "{line}");
}
