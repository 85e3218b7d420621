//! `sockstat events` against real connections, in a network namespace each test makes: known
//! numbers of connections by processes with distinct command names, each reported once with
//! the right process on each side, the right bytes and who closed first; SYNs dropped by
//! nftables give second-long connect latencies whose retransmit counts match the rule's own
//! counter; a connect to a closed port is `failed: refused`; a tiny ring buffer loses events
//! and says so; unprivileged, one clear error. Every JSON line is checked against
//! doc/connection-events.schema.json.
//!
//! The workload processes are this test binary re-executed with [`WORKLOAD_ENV`] set (see
//! [`workload_if_requested`], called from the harness's ELF constructor), so each side is a
//! real process with its own pid and command name.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{is_root, require_root, Netns, SOCKSTAT};

/// Set to a workload spec, turns this test binary into a workload process.
const WORKLOAD_ENV: &str = "SOCKSTAT_EVENTS_WORKLOAD";
/// The workload's command name.
const COMM_ENV: &str = "SOCKSTAT_EVENTS_COMM";

// ---------------------------------------------------------------------------------------------
// The workload: `server:PORT:N:RECV:SEND:FIRST`, `client:PORT:N:SEND:RECV:FIRST:PARALLEL`,
// `refused:PORT`, `drops:UDP_PORT:TCP_PORT:MILLIS`, `get:PORT`. FIRST says which end closes first (`server` or `client`); the other waits for
// end of file. Addresses are 127.0.0.1 in whatever namespace the process runs in.

fn fail(msg: String) -> ! {
    eprintln!("events workload: {msg}");
    std::process::exit(3)
}

fn set_comm(name: &str) {
    let c = std::ffi::CString::new(name).unwrap_or_default();
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes; PDEATHSIG takes a
    // signal number.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c.as_ptr(), 0, 0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
}

fn exchange(s: &mut TcpStream, send: usize, recv: usize, close_first: bool, reader_first: bool) {
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    let mut buf = vec![0u8; recv];
    let payload = vec![b'x'; send];
    if reader_first {
        s.read_exact(&mut buf)
            .unwrap_or_else(|e| fail(format!("read: {e}")));
        s.write_all(&payload)
            .unwrap_or_else(|e| fail(format!("write: {e}")));
    } else {
        s.write_all(&payload)
            .unwrap_or_else(|e| fail(format!("write: {e}")));
        s.read_exact(&mut buf)
            .unwrap_or_else(|e| fail(format!("read: {e}")));
    }
    if !close_first {
        // Wait for the other end's FIN before closing.
        let mut rest = Vec::new();
        s.read_to_end(&mut rest)
            .unwrap_or_else(|e| fail(format!("read to end: {e}")));
    }
}

/// Runs the workload and exits when [`WORKLOAD_ENV`] is set; returns otherwise.
pub fn workload_if_requested() {
    let Ok(spec) = std::env::var(WORKLOAD_ENV) else {
        return;
    };
    set_comm(&std::env::var(COMM_ENV).unwrap_or_else(|_| "evworkload".into()));
    let f: Vec<&str> = spec.split(':').collect();
    let num = |i: usize| -> usize {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| fail(format!("bad spec {spec}")))
    };
    match f[0] {
        "server" => {
            let l = TcpListener::bind(("127.0.0.1", num(1) as u16))
                .unwrap_or_else(|e| fail(format!("bind: {e}")));
            println!("ready");
            std::io::stdout().flush().ok();
            let first = f.get(5) == Some(&"server");
            for _ in 0..num(2) {
                let (mut s, _) = l.accept().unwrap_or_else(|e| fail(format!("accept: {e}")));
                exchange(&mut s, num(4), num(3), first, true);
            }
        }
        "client" => {
            let first = f.get(5) == Some(&"client");
            let (n, send, recv, port) = (num(2), num(3), num(4), num(1) as u16);
            let parallel = f.get(6).is_some_and(|p| *p == "parallel");
            let one = move || {
                let mut s = TcpStream::connect(("127.0.0.1", port))
                    .unwrap_or_else(|e| fail(format!("connect: {e}")));
                exchange(&mut s, send, recv, first, false);
            };
            if parallel {
                let threads: Vec<_> = (0..n).map(|_| std::thread::spawn(one)).collect();
                for t in threads {
                    t.join()
                        .unwrap_or_else(|_| fail("a client thread failed".into()));
                }
            } else {
                for _ in 0..n {
                    one();
                }
            }
        }
        "drops" => {
            // drops:UDP_PORT:TCP_PORT:MILLIS: a datagram and a refused connect every 50 ms.
            let udp = std::net::UdpSocket::bind("127.0.0.1:0")
                .unwrap_or_else(|e| fail(format!("udp: {e}")));
            let until = Instant::now() + Duration::from_millis(num(3) as u64);
            while Instant::now() < until {
                let _ = udp.send_to(b"x", ("127.0.0.1", num(1) as u16));
                let _ = TcpStream::connect(("127.0.0.1", num(2) as u16));
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        "get" => {
            // get:PORT: an HTTP GET of /metrics, the answer on stdout.
            let mut s = TcpStream::connect(("127.0.0.1", num(1) as u16))
                .unwrap_or_else(|e| fail(format!("connect: {e}")));
            s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .unwrap_or_else(|e| fail(format!("write: {e}")));
            let mut body = Vec::new();
            s.read_to_end(&mut body)
                .unwrap_or_else(|e| fail(format!("read: {e}")));
            std::io::stdout().write_all(&body).ok();
        }
        "refused" => {
            if let Ok(s) = TcpStream::connect(("127.0.0.1", num(1) as u16)) {
                fail(format!(
                    "connected to {:?}, expected a refusal",
                    s.peer_addr()
                ))
            }
        }
        other => fail(format!("unknown workload {other}")),
    }
    std::process::exit(0);
}

/// A workload process inside `ns`, killed on drop.
struct Workload {
    child: Child,
}

impl Workload {
    fn spawn(ns: &Netns, comm: &str, spec: &str) -> Workload {
        let exe = std::env::current_exe().expect("current_exe");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(exe)
            .env(WORKLOAD_ENV, spec)
            .env(COMM_ENV, comm)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn workload");
        Workload { child }
    }

    fn pid(&self) -> u64 {
        u64::from(self.child.id())
    }

    /// Waits for a server's `ready` line.
    fn ready(&mut self) {
        let out = self.child.stdout.as_mut().expect("stdout");
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .expect("ready line");
        assert_eq!(line.trim(), "ready", "workload did not start");
    }

    fn wait(mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                assert!(st.success(), "workload failed: {st}");
                return;
            }
            assert!(Instant::now() < deadline, "workload did not finish in 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// sockstat events, running

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/doc/connection-events.schema.json"
        );
        let text = std::fs::read_to_string(path).expect("doc/connection-events.schema.json");
        let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
        jsonschema::validator_for(&schema).expect("schema compiles")
    })
}

fn validate(v: &Value) {
    let errors: Vec<String> = validator()
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "JSON does not match doc/connection-events.schema.json:\n{}\n{v}",
        errors.join("\n")
    );
}

/// `sockstat events --json ...` running inside a namespace; its lines are collected as they
/// come. Killed on drop.
struct Events {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    stderr: Arc<Mutex<String>>,
}

impl Events {
    fn start(ns: &Netns, args: &[&str]) -> Events {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns.name, SOCKSTAT, "events", "--json"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sockstat events");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().expect("stdout");
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                sink.lock().unwrap().push(v);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("stderr");
        let esink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            esink.lock().unwrap().push_str(&s);
        });
        Events {
            child,
            lines,
            reader: Some(reader),
            stderr,
        }
    }

    /// Waits until the lines so far satisfy `pred`.
    fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if pred(&self.lines.lock().unwrap()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "no {what} within {timeout:?}; lines: {:#?}; stderr: {}",
            self.lines.lock().unwrap(),
            self.stderr.lock().unwrap()
        );
    }

    /// Makes refused connects to port 9 (command `evprobe`) until one is reported with its
    /// process: every program is attached from then on. A probe whose connect() began before the one that notes the
    /// process was attached is reported without it (`process_status` `unknown`, as any
    /// connection opened before tracing began); seen under load, where the programs attach
    /// over a longer time.
    fn wait_ready(&self, ns: &Netns) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            Workload::spawn(ns, "evprobe", "refused:9").wait();
            let seen = self.lines.lock().unwrap().iter().any(|v| {
                v["event"] == "failed"
                    && v["remote"]["port"] == 9
                    && v["process"]["command"] == "evprobe"
            });
            if seen {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sockstat events reported no probe in 20 s: {}",
                self.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, then every line, each validated; asserts exit status 0.
    fn stop(mut self) -> (Vec<Value>, String) {
        // `ip netns exec` execs sockstat: the child is sockstat itself.
        // SAFETY: kill on the pid of a child we spawned and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                break st;
            }
            assert!(Instant::now() < deadline, "sockstat events ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(r) = self.reader.take() {
            r.join().expect("reader");
        }
        std::thread::sleep(Duration::from_millis(50));
        let stderr = self.stderr.lock().unwrap().clone();
        assert_eq!(status.code(), Some(0), "sockstat events: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let lines = std::mem::take(&mut *self.lines.lock().unwrap());
        for v in &lines {
            validate(v);
        }
        (lines, stderr)
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Skips (loudly) where the kernel or privileges cannot run the tracer; true when it can.
fn tracer_available() -> bool {
    let out = Command::new(SOCKSTAT)
        .args(["events", "--duration", "0.01", "-q"])
        .output()
        .expect("run sockstat events");
    if out.status.code() == Some(0) {
        return true;
    }
    eprintln!(
        "SKIPPED: sockstat events cannot trace here: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    false
}

fn events_of<'a>(lines: &'a [Value], kind: &str, command: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|v| v["event"] == kind && v["process"]["command"] == command)
        .collect()
}

fn port(v: &Value, end: &str) -> u64 {
    v[end]["port"].as_u64().expect("port")
}

// ---------------------------------------------------------------------------------------------
// Tests

/// Two servers and two clients, four distinct commands: 20 connections where the server closes
/// first and 10 where the client does. Every connection is reported once on each end, with the
/// right process on each side (and the other end's as its peer), the right payload bytes, and
/// the end that holds the TIME-WAIT.
#[test]
fn every_connection_once_with_the_process_on_each_side() {
    require_root!("events_every_connection");
    // The tracer's sys_exit program runs on every system call of the host: keep it away from
    // the tests that time refreshes and samples.
    let _machine = crate::common::loads_the_machine();
    if !tracer_available() {
        return;
    }
    let ns = Netns::new();
    let ev = Events::start(&ns, &[]);
    ev.wait_ready(&ns);
    let mut srv1 = Workload::spawn(&ns, "evsrv1", "server:47311:20:100:200:server");
    srv1.ready();
    let mut srv2 = Workload::spawn(&ns, "evsrv2", "server:47312:10:300:400:client");
    srv2.ready();
    let cli1 = Workload::spawn(&ns, "evcli1", "client:47311:20:100:200:server");
    let cli2 = Workload::spawn(&ns, "evcli2", "client:47312:10:300:400:client");
    let pids = [srv1.pid(), srv2.pid(), cli1.pid(), cli2.pid()];
    cli1.wait();
    cli2.wait();
    srv1.wait();
    srv2.wait();
    ev.wait_for("the last close", Duration::from_secs(10), |l| {
        l.iter().filter(|v| v["event"] == "close").count() >= 60
    });
    let (lines, _) = ev.stop();

    for (srv, cli, srv_pid, cli_pid, port_, n, c2s, s2c, server_first) in [
        (
            "evsrv1", "evcli1", pids[0], pids[2], 47311, 20, 100, 200, true,
        ),
        (
            "evsrv2", "evcli2", pids[1], pids[3], 47312, 10, 300, 400, false,
        ),
    ] {
        let connects = events_of(&lines, "connect", cli);
        let accepts = events_of(&lines, "accept", srv);
        let cli_closes = events_of(&lines, "close", cli);
        let srv_closes = events_of(&lines, "close", srv);
        for (what, v) in [
            ("connect", &connects),
            ("accept", &accepts),
            ("client close", &cli_closes),
            ("server close", &srv_closes),
        ] {
            assert_eq!(v.len(), n, "{n} {what} events of {cli}/{srv}: {v:#?}");
            // Each connection once: the cookies are distinct.
            let cookies: std::collections::BTreeSet<&str> =
                v.iter().map(|e| e["cookie"].as_str().unwrap()).collect();
            assert_eq!(cookies.len(), n, "{what} cookies repeat");
        }
        for e in connects.iter().chain(&cli_closes) {
            assert_eq!(e["side"], "client");
            assert_eq!(e["process"]["pid"], cli_pid, "{e}");
            assert_eq!(port(e, "remote"), port_);
            assert!(e["connect_latency_us"].as_u64().is_some(), "{e}");
            assert_eq!(e["syn_retransmits"], 0);
        }
        for e in accepts.iter().chain(&srv_closes) {
            assert_eq!(e["side"], "server");
            assert_eq!(e["process"]["pid"], srv_pid, "{e}");
            assert_eq!(port(e, "local"), port_);
            assert!(e["accept_wait_us"].as_u64().is_some(), "{e}");
        }
        // Both ends are here: each names the other.
        for e in &cli_closes {
            assert_eq!(e["peer"]["command"], srv, "{e}");
            assert_eq!(e["bytes_sent"], c2s, "{e}");
            assert_eq!(e["bytes_received"], s2c, "{e}");
            let want = if server_first {
                "remote-close"
            } else {
                "local-close"
            };
            assert_eq!(e["end"], want, "{e}");
        }
        for e in &srv_closes {
            assert_eq!(e["peer"]["command"], cli, "{e}");
            assert_eq!(e["bytes_sent"], s2c, "{e}");
            assert_eq!(e["bytes_received"], c2s, "{e}");
            let want = if server_first {
                "local-close"
            } else {
                "remote-close"
            };
            assert_eq!(e["end"], want, "{e}");
            assert!(e["duration_us"].as_u64().is_some());
        }
        // A connect and its client close are the same socket.
        let connect_cookies: std::collections::BTreeSet<&str> = connects
            .iter()
            .map(|e| e["cookie"].as_str().unwrap())
            .collect();
        assert!(cli_closes
            .iter()
            .all(|e| connect_cookies.contains(e["cookie"].as_str().unwrap())));
    }
    // The readiness probes: connects to a closed port fail as refused, by their own process;
    // only one whose connect() began before tracing did (`wait_ready`) may not name it, and
    // then says it is unknown. The last names it.
    let probes: Vec<&Value> = lines.iter().filter(|v| v["remote"]["port"] == 9).collect();
    assert!(!probes.is_empty());
    for p in &probes {
        assert_eq!(p["event"], "failed", "{p}");
        assert_eq!(p["reason"], "refused", "{p}");
        assert!(
            p["process"]["command"] == "evprobe"
                || (p["process"].is_null() && p["process_status"] == "unknown"),
            "{p}"
        );
        assert_eq!(p["side"], "client");
    }
    assert_eq!(probes.last().unwrap()["process"]["command"], "evprobe");
    assert!(
        !lines.iter().any(|v| v["event"] == "lost"),
        "events lost at this tiny rate"
    );
}

fn nft(ns: &Netns, ruleset: &str) -> Option<String> {
    let mut c = Command::new("ip")
        .args(["netns", "exec", &ns.name, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    c.stdin
        .take()
        .expect("stdin")
        .write_all(ruleset.as_bytes())
        .ok()?;
    let out = c.wait_with_output().ok()?;
    if !out.status.success() {
        return Some(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    None
}

/// The packets an nft rule (by its comment) counted.
fn nft_counter(ns: &Netns, comment: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "nft", "-j", "list", "ruleset"])
        .output()
        .expect("nft list");
    let v: Value = serde_json::from_slice(&out.stdout).expect("nft -j");
    for item in v["nftables"].as_array().expect("nftables") {
        let rule = &item["rule"];
        if rule["comment"] == comment {
            for e in rule["expr"].as_array().expect("expr") {
                if let Some(n) = e["counter"]["packets"].as_u64() {
                    return n;
                }
            }
        }
    }
    panic!("no counter for rule {comment}: {v}");
}

/// nftables drops the first SYN of each connection to one port and the first two to another:
/// the connects take 1 s and 3 s (the kernel's initial retransmission timeout, doubled), their
/// SYN retransmits add up to what the rules counted, and the --stats histogram puts them in
/// the 1 s and 3 s buckets and sums to the connections.
#[test]
fn dropped_syns_show_as_second_long_connects() {
    require_root!("events_dropped_syns");
    // The tracer's sys_exit program runs on every system call of the host: keep it away from
    // the tests that time refreshes and samples.
    let _machine = crate::common::loads_the_machine();
    if Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIPPED: dropped_syns_show_as_second_long_connects needs nft (apt-get install nftables)");
        return;
    }
    if !tracer_available() {
        return;
    }
    let ns = Netns::new();
    let rules = "\
table inet evtest {
  set once { type inet_service; flags dynamic,timeout; timeout 60s; }
  set twice { type inet_service; flags dynamic,timeout; timeout 60s; }
  chain out {
    type filter hook output priority 0; policy accept;
    tcp dport { 47321, 47322 } tcp flags & (syn | ack) == syn tcp sport != @once add @once { tcp sport } counter drop comment \"first\"
    tcp dport 47322 tcp flags & (syn | ack) == syn tcp sport != @twice add @twice { tcp sport } counter drop comment \"second\"
  }
}
";
    if let Some(err) = nft(&ns, rules) {
        eprintln!(
            "SKIPPED: dropped_syns_show_as_second_long_connects: nft refused the rules: {err}"
        );
        return;
    }
    let ev = Events::start(&ns, &["--stats", "-p", "9,47321,47322"]);
    ev.wait_ready(&ns);
    let mut s1 = Workload::spawn(&ns, "evslowsrv", "server:47321:3:1:1:server");
    s1.ready();
    let mut s2 = Workload::spawn(&ns, "evslowsrv", "server:47322:1:1:1:server");
    s2.ready();
    let c1 = Workload::spawn(&ns, "evslow", "client:47321:3:1:1:server:parallel");
    let c2 = Workload::spawn(&ns, "evslow", "client:47322:1:1:1:server");
    c1.wait();
    c2.wait();
    s1.wait();
    s2.wait();
    ev.wait_for("four connects", Duration::from_secs(10), |l| {
        l.iter()
            .filter(|v| v["event"] == "close" && v["side"] == "client")
            .count()
            >= 4
    });
    let (lines, _) = ev.stop();
    let dropped = nft_counter(&ns, "first") + nft_counter(&ns, "second");
    assert_eq!(dropped, 5, "the rules dropped 3 + 2 SYNs");

    let connects = events_of(&lines, "connect", "evslow");
    assert_eq!(connects.len(), 4, "{connects:#?}");
    let mut retransmits = 0;
    for e in &connects {
        let us = e["connect_latency_us"].as_u64().unwrap();
        let n = e["syn_retransmits"].as_u64().unwrap();
        retransmits += n;
        match port(e, "remote") {
            47321 => {
                assert_eq!(n, 1, "{e}");
                assert!((1_000_000..3_000_000).contains(&us), "one lost SYN: {e}");
            }
            _ => {
                // 2 s with Linux 6.5+'s linear SYN timeouts (tcp_syn_linear_timeouts), 3 s
                // with the classic doubling.
                assert_eq!(n, 2, "{e}");
                assert!(us >= 2_000_000, "two lost SYNs: {e}");
            }
        }
    }
    assert_eq!(
        retransmits, dropped,
        "SYN retransmits match the rules' counters"
    );

    let summary = lines.last().expect("a summary line");
    assert!(summary.get("stats").is_some(), "{summary}");
    assert_eq!(summary["lost"], 0);
    let rows = summary["stats"].as_array().unwrap();
    let row = |p: u64| {
        rows.iter()
            .find(|r| r["side"] == "client" && r["command"] == "evslow" && r["remote"]["port"] == p)
            .unwrap_or_else(|| panic!("no client row for {p}: {summary}"))
    };
    for (p, conns, retr) in [(47321, 3, 3), (47322, 1, 2)] {
        let r = row(p);
        assert_eq!(r["connections"], conns, "{r}");
        assert_eq!(r["syn_retransmits"], retr, "{r}");
        let buckets = r["connect_latency_us"]["buckets"].as_array().unwrap();
        let sum: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(sum, conns, "the histogram sums to the connections: {r}");
        // Every connection sits at a second or more, with its retransmissions beside it.
        let (mut slow, mut syn) = (0, 0);
        for b in buckets {
            if b["le_us"].as_u64().unwrap() >= 1 << 20 {
                slow += b["count"].as_u64().unwrap();
                syn += b["syn_retransmits"].as_u64().unwrap();
            }
        }
        assert_eq!((slow, syn), (conns, retr), "{r}");
        assert!(r["connect_latency_us"]["p50"].as_u64().unwrap() >= 1_000_000);
    }
    // The server side saw its SYN-ACKs go out once each: no retransmits there.
    let srv = rows
        .iter()
        .find(|r| r["side"] == "server" && r["local"]["port"] == 47321)
        .expect("server row");
    assert_eq!(srv["connections"], 3);
    assert_eq!(srv["syn_retransmits"], 0);
}

/// With a one-page ring and a burst of connections between two reads, the kernel cannot hand
/// everything over: a `lost` event says how many, and the summary counts them.
#[test]
fn a_full_ring_is_reported_as_lost() {
    require_root!("events_lost");
    // The tracer's sys_exit program runs on every system call of the host: keep it away from
    // the tests that time refreshes and samples.
    let _machine = crate::common::loads_the_machine();
    if !tracer_available() {
        return;
    }
    let ns = Netns::new();
    let ev = Events::start(&ns, &["--stats", "--ring-pages", "1"]);
    ev.wait_ready(&ns);
    let mut srv = Workload::spawn(&ns, "evburstsrv", "server:47331:400:1:1:server");
    srv.ready();
    Workload::spawn(&ns, "evburst", "client:47331:400:1:1:server").wait();
    srv.wait();
    ev.wait_for("a lost event", Duration::from_secs(10), |l| {
        l.iter().any(|v| v["event"] == "lost")
    });
    let (lines, _) = ev.stop();
    let lost: u64 = lines
        .iter()
        .filter(|v| v["event"] == "lost")
        .map(|v| v["count"].as_u64().unwrap())
        .sum();
    assert!(lost > 0);
    let summary = lines.last().unwrap();
    assert_eq!(summary["lost"], lost, "{summary}");
    // What was handed over plus what was lost is every record written: 4 per connection and
    // the probes' failures.
    let handed = lines
        .iter()
        .filter(|v| v["event"].is_string() && v["event"] != "lost")
        .count() as u64;
    assert!(handed + lost >= 1600, "{handed} + {lost}");
}

/// Without the privileges, one line says what is missing and what still works; status 3
/// (missing privileges or kernel support).
#[test]
fn unprivileged_says_what_is_missing() {
    // A copy uid 65534 can reach and execute.
    let dir = crate::common::tempdir();
    let bin = dir.path().join("sockstat");
    crate::common::copy_sockstat(&bin);
    let mut c = if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        Command::new(&bin)
    };
    let out = c
        .args(["events", "--duration", "1"])
        .output()
        .expect("run sockstat events");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if is_root() && stderr.contains("setpriv") {
        eprintln!("SKIPPED: unprivileged_says_what_is_missing: setpriv failed: {stderr}");
        return;
    }
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "no stream that looks like a quiet host"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("CAP_BPF and CAP_PERFMON"), "{stderr}");
    assert!(
        lines[0].contains("--events (polling)") && lines[0].contains("longer than its interval"),
        "{stderr}"
    );
}

/// `sockstat drops` counts what nftables dropped, by reason, protocol and destination port, and
/// a SYN to a closed port as NO_SOCKET.
#[test]
fn drops_by_reason_and_port() {
    require_root!("events_drops");
    // The tracer's sys_exit program runs on every system call of the host: keep it away from
    // the tests that time refreshes and samples.
    let _machine = crate::common::loads_the_machine();
    if Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIPPED: drops_by_reason_and_port needs nft (apt-get install nftables)");
        return;
    }
    let probe = Command::new(SOCKSTAT)
        .args(["drops", "0.01"])
        .output()
        .expect("run sockstat drops");
    if probe.status.code() != Some(0) {
        eprintln!(
            "SKIPPED: sockstat drops cannot count here: {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
        return;
    }
    let ns = Netns::new();
    let rules = "\
table inet droptest {
  chain out {
    type filter hook output priority 0; policy accept;
    udp dport 47342 counter drop comment \"udp\"
  }
}
";
    if let Some(err) = nft(&ns, rules) {
        eprintln!("SKIPPED: drops_by_reason_and_port: nft refused the rules: {err}");
        return;
    }
    let counting = Command::new(SOCKSTAT)
        .args(["drops", "3", "--json", "-p", "47341,47342"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sockstat drops");
    // Packets all through the window: a datagram nftables drops, a SYN nothing listens for.
    let traffic = Workload::spawn(&ns, "evdrop", "drops:47342:47341:2500");
    let out = counting.wait_with_output().expect("wait");
    traffic.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/doc/drops.schema.json"
        ))
        .expect("doc/drops.schema.json"),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}\n{v}");
    let row = |reason: &str, proto: &str, port: u64| {
        v["drops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["reason"] == reason && r["proto"] == proto && r["port"] == port)
            .map(|r| r["count"].as_u64().unwrap())
    };
    let udp =
        row("NETFILTER_DROP", "udp", 47342).unwrap_or_else(|| panic!("no NETFILTER_DROP row: {v}"));
    assert!(
        udp >= 1 && udp <= nft_counter(&ns, "udp"),
        "{udp} vs the rule's counter: {v}"
    );
    let syn = row("NO_SOCKET", "tcp", 47341).unwrap_or_else(|| panic!("no NO_SOCKET row: {v}"));
    assert!(syn >= 1, "{v}");
    // -p kept only these ports.
    assert!(v["drops"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["port"] == 47341 || r["port"] == 47342));
}

/// `sockstat ports --interval` names the process that opened the connections to a destination
/// during the interval: TIME-WAIT entries have no owner, connection events do.
#[test]
fn ports_names_who_opened_the_connections() {
    require_root!("events_ports_openers");
    let _machine = crate::common::loads_the_machine();
    if !tracer_available() {
        return;
    }
    let ns = Netns::new();
    let mut srv = Workload::spawn(&ns, "evportsrv", "server:47351:20:1:1:client");
    srv.ready();
    let ports = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.name,
            SOCKSTAT,
            "ports",
            "--interval",
            "3",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sockstat ports");
    // The tracer is attached before the first sample: connect once that is taken.
    crate::ports_support::first_sample_taken(&ports);
    let cli = Workload::spawn(&ns, "evports", "client:47351:20:1:1:client");
    let pid = cli.pid();
    cli.wait();
    srv.wait();
    let out = ports.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    crate::common::validate_against("ports.schema.json", &v);
    let d = v["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["remote_port"] == 47351)
        .unwrap_or_else(|| panic!("no destination 47351: {v}"));
    // The client closed first: its 20 ports are in TIME-WAIT, owned by no one...
    assert_eq!(d["time_wait"], 20, "{d}");
    // ... and the events say who opened them.
    assert_eq!(
        d["opened_by"],
        serde_json::json!([{"pid": pid, "command": "evports", "connections": 20, "failed": 0}]),
        "{d}"
    );
}

/// As root, `sockstat diagnose` traces the connects of its interval: SYNs dropped by nftables
/// show as a retransmissions finding with the measured latencies, the destination and the
/// process, though no handshake is in SYN-SENT at either sample.
#[test]
fn diagnose_uses_measured_connect_latencies() {
    require_root!("events_diagnose");
    let _machine = crate::common::loads_the_machine();
    if Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIPPED: diagnose_uses_measured_connect_latencies needs nft");
        return;
    }
    if !tracer_available() {
        return;
    }
    let ns = Netns::new();
    let rules = "\
table inet diagtest {
  set once { type inet_service; flags dynamic,timeout; timeout 60s; }
  chain out {
    type filter hook output priority 0; policy accept;
    tcp dport 47361 tcp flags & (syn | ack) == syn tcp sport != @once add @once { tcp sport } counter drop
  }
}
";
    if let Some(err) = nft(&ns, rules) {
        eprintln!(
            "SKIPPED: diagnose_uses_measured_connect_latencies: nft refused the rules: {err}"
        );
        return;
    }
    let mut srv = Workload::spawn(&ns, "evdiagsrv", "server:47361:3:1:1:server");
    srv.ready();
    let diag = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.name,
            SOCKSTAT,
            "diagnose",
            "--interval",
            "4",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sockstat diagnose");
    crate::ports_support::first_sample_taken(&diag);
    // Three connects, each waiting 1 s for its dropped SYN to be sent again; all done well
    // before the second sample.
    Workload::spawn(&ns, "evdiagcli", "client:47361:3:1:1:server:parallel").wait();
    srv.wait();
    let out = diag.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    crate::common::validate_against("diagnose.schema.json", &v);
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "retransmissions" && f["evidence"]["slow_connects"].is_u64())
        .unwrap_or_else(|| panic!("no measured-connects finding: {v}"));
    let ev = &f["evidence"];
    assert_eq!(ev["connects_measured"], 3, "{f}");
    assert_eq!(ev["slow_connects"], 3, "{f}");
    assert_eq!(ev["syn_retransmits"], 3, "{f}");
    assert!(ev["p50_connect_us"].as_u64().unwrap() >= 1_000_000, "{f}");
    assert_eq!(ev["slowest_destination"], "127.0.0.1:47361", "{f}");
    assert!(
        ev["slowest_destination_callers"]
            .as_str()
            .unwrap()
            .contains("evdiagcli["),
        "{f}"
    );
    assert_eq!(f["severity"], "critical", "all of them were slow: {f}");
    assert!(
        !v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "connect-events-unavailable"),
        "{v}"
    );
}

/// `sockstat serve --events` exports connect-latency and accept-wait histograms by port and
/// connections by side, and the output passes `promtool check metrics`. In a namespace of its
/// own, so that the first ports it sees (which get labels of their own) are the test's.
#[test]
fn serve_exports_event_histograms() {
    require_root!("events_serve");
    let _machine = crate::common::loads_the_machine();
    if !tracer_available() {
        return;
    }
    let ns = Netns::new();
    let server = crate::serve::serve_with(
        &["ip", "netns", "exec", &ns.name],
        &["--events", "--scrape-budget", "10s"],
    );
    // And one on the host for every zone: the namespace's connections are counted under its
    // zone there (the histograms are the exporter's own zone's only).
    let host = crate::serve::serve_with(&[], &["-Z", "--events", "--scrape-budget", "10s"]);
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let mut srv = Workload::spawn(&ns, "evservesrv", "server:47371:10:1:1:server");
    srv.ready();
    Workload::spawn(&ns, "evservecli", "client:47371:10:1:1:server").wait();
    srv.wait();
    let scrape = || {
        let mut w = Workload::spawn(&ns, "evscrape", &format!("get:{port}"));
        let mut out = String::new();
        w.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        w.wait();
        out
    };
    // The events thread reads the ring every 100 ms; a collection may take a while on a
    // loaded machine (a late one is answered with sockstat_up 0).
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        let a = scrape();
        if a.contains("sockstat_accept_wait_seconds_count{port=\"47371\"} 10")
            || Instant::now() > deadline
        {
            break a;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let body = answer
        .split_once("\r\n\r\n")
        .map_or(answer.as_str(), |(_, b)| b)
        .to_string();
    let v = |s: &str| crate::serve::value(&body, s);
    // The exporter's own zone, as its other families label it.
    let zone = body
        .lines()
        .find_map(|l| l.strip_prefix("sockstat_connections_total{side=\"client\",zone=\""))
        .and_then(|r| r.split_once('"'))
        .map(|(z, _)| z.to_string())
        .unwrap_or_else(|| panic!("no client connections series in\n{body}"));
    let z = format!("zone=\"{zone}\"");
    assert_eq!(
        v(&format!(
            "sockstat_connect_latency_seconds_count{{port=\"47371\",{z}}}"
        )),
        10.0
    );
    assert_eq!(
        v(&format!(
            "sockstat_accept_wait_seconds_count{{port=\"47371\",{z}}}"
        )),
        10.0
    );
    assert_eq!(
        v(&format!(
            "sockstat_connect_latency_seconds_bucket{{port=\"47371\",{z},le=\"+Inf\"}}"
        )),
        10.0
    );
    // The workload's 10 and the scrapes' own connections.
    assert!(
        v(&format!(
            "sockstat_connections_total{{side=\"client\",{z}}}"
        )) >= 10.0
    );
    assert_eq!(
        v(&format!(
            "sockstat_connection_closes_total{{side=\"server\",end=\"local-close\",{z}}}"
        )),
        v(&format!(
            "sockstat_connection_closes_total{{side=\"client\",end=\"remote-close\",{z}}}"
        ))
    );
    // The host's exporter counted them under the namespace's zone, and has no histogram for it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let hz = format!(
        "sockstat_connections_total{{side=\"server\",zone=\"{}\"}}",
        ns.name
    );
    let host_body = loop {
        let a = crate::serve::get(&host.addr, "/metrics")
            .map(|a| a.body)
            .unwrap_or_default();
        let done = a
            .lines()
            .find_map(|l| l.strip_prefix(hz.as_str())?.strip_prefix(' '))
            .and_then(|n| n.parse::<f64>().ok())
            .is_some_and(|n| n >= 10.0);
        if done || Instant::now() > deadline {
            break a;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(crate::serve::value(&host_body, &hz) >= 10.0, "{host_body}");
    assert!(
        !host_body.contains(&format!("port=\"47371\",zone=\"{}\"", ns.name)),
        "{host_body}"
    );
    assert_eq!(v("sockstat_events_lost_total{reason=\"ring_full\"}"), 0.0);
    assert!(
        body.contains("# TYPE sockstat_drops_total counter"),
        "{body}"
    );
    if !crate::serve::which("promtool") {
        eprintln!("SKIPPED: promtool not found (Debian package prometheus); output not linted");
        return;
    }
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    p.stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("feed promtool");
    let out = p.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
