//! `sockstat serve` against real scrapers: its output passes `promtool check metrics`, a
//! listener held by a process with a hostile command name comes out escaped, a real Prometheus
//! server (started here with a scratch data directory, on free loopback ports, killed on drop)
//! scrapes it; methods other than GET and HEAD get 405; a listener whose holder cannot be read
//! is labelled `command="?"` and counted. Tests whose tool is missing print "SKIPPED: ..." and
//! pass. The helpers here (starting the exporter, plain HTTP requests, Prometheus) serve the
//! other `serve_*` modules too.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

/// Kills and reaps a child on drop, so a failed assertion leaves no server behind.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// A running `sockstat serve`.
pub struct Served {
    _child: Killed,
    /// Its pid (under a prefix such as setpriv, which execs it: the same).
    pub pid: u32,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The banner line (`sockstat: serving metrics on ...`).
    pub banner: String,
    /// What it printed on stderr after the banner, so far.
    log: Arc<Mutex<String>>,
}

impl Served {
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Its stderr once it contains every one of `needles` (or after 10 s, as it is).
    pub fn log_with(&self, needles: &[&str]) -> String {
        self.log_within(needles, Duration::from_secs(10))
    }

    /// Its stderr once it contains every one of `needles` (or after `wait`, as it is).
    pub fn log_within(&self, needles: &[&str], wait: Duration) -> String {
        let deadline = Instant::now() + wait;
        loop {
            let log = self.log();
            if needles.iter().all(|n| log.contains(n)) || Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Starts `sockstat serve --listen 127.0.0.1:0 ARGS`, under `prefix` (e.g. setpriv) when given;
/// returns once it listens.
pub fn serve_with(prefix: &[&str], args: &[&str]) -> Served {
    start(prefix, "127.0.0.1:0", args)
}

/// Starts `sockstat serve --listen ADDR ARGS`.
pub fn serve_on(addr: &str, args: &[&str]) -> Served {
    start(&[], addr, args)
}

fn start(prefix: &[&str], listen: &str, args: &[&str]) -> Served {
    let mut c = match prefix.split_first() {
        Some((p, rest)) => {
            let mut c = Command::new(p);
            c.args(rest).arg(SOCKSTAT);
            c
        }
        None => Command::new(SOCKSTAT),
    };
    c.args(["serve", "--listen", listen])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("start sockstat serve");
    let pid = child.id();
    let stderr = child.stderr.take().expect("stderr");
    let guard = Killed(child);
    let mut reader = BufReader::new(stderr);
    let mut banner = String::new();
    let mut before = String::new();
    loop {
        banner.clear();
        let n = reader.read_line(&mut banner).expect("read stderr");
        assert!(n > 0, "sockstat serve exited before listening: {before}");
        if banner.contains("serving metrics on") {
            break;
        }
        before.push_str(&banner);
    }
    let addr = banner
        .split("://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {banner:?}"))
        .to_string();
    let log = Arc::new(Mutex::new(before));
    let log2 = Arc::clone(&log);
    std::thread::spawn(move || {
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            log2.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    Served {
        _child: guard,
        pid,
        addr,
        banner: banner.trim().to_string(),
        log,
    }
}

/// Starts `sockstat serve` on a free loopback port with a 10 s budget.
pub fn serve() -> Served {
    serve_with(&[], &["--scrape-budget", "10s"])
}

/// An HTTP answer: status code, head (lines after the status line), body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

pub fn parse_answer(raw: &[u8]) -> Answer {
    let raw = String::from_utf8_lossy(raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let (status_line, head) = head.split_once("\r\n").unwrap_or((head, ""));
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {status_line:?}"));
    Answer {
        status,
        head: head.replace("\r\n", "\n"),
        body: body.to_string(),
    }
}

/// One request over plain HTTP/1.1 (`extra` is added to the head as is).
pub fn request(addr: &str, method: &str, path: &str, extra: &str) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    Ok(parse_answer(&raw))
}

pub fn get(addr: &str, path: &str) -> std::io::Result<Answer> {
    request(addr, "GET", path, "")
}

pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The value of one series (`name{labels}` exactly as written) in a scrape.
pub fn value(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{body}"))
}

/// A Prometheus server with a scratch data directory, its API on a free loopback port.
pub struct Prometheus {
    _child: Killed,
    pub web: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus with `scrape_configs` (YAML, the list's items indented by 2) and the
    /// files `files` (name, content) beside its configuration.
    pub fn start(scrape_configs: &str, files: &[(&str, &str)]) -> Prometheus {
        let dir = tempfile::tempdir().expect("scratch dir");
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).expect("write a file");
        }
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{scrape_configs}"
            ),
        )
        .expect("write config");
        let web = format!("127.0.0.1:{}", free_port());
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        Prometheus {
            _child: Killed(child),
            web,
            _dir: dir,
        }
    }

    /// Runs an instant query until `done` accepts the answer (or 45 s pass); returns the last.
    pub fn query_until(
        &self,
        promql: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let path = format!("/api/v1/query?query={}", url_encode(promql));
        self.api_until(&path, done)
    }

    /// GETs an API path until `done` accepts the JSON answer (or 45 s pass).
    pub fn api_until(
        &self,
        path: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(45);
        let mut last = serde_json::Value::Null;
        while Instant::now() < deadline {
            if let Ok(a) = get(&self.web, path) {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&a.body) {
                    if done(&v) {
                        return v;
                    }
                    last = v;
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        last
    }
}

/// The series of an instant-query answer.
pub fn results(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs `sockstat serve ARGS` that must stop at start: returns its exit status and stderr.
pub fn serve_fails(args: &[&str]) -> (Option<i32>, String) {
    let out = sockstat(&["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .run();
    (out.code, out.stderr)
}

#[test]
fn metrics_pass_promtool_and_a_hostile_command_name_is_escaped() {
    // A holder whose command name has a quote, a backslash and a newline, each of which would
    // end or forge a series if written unescaped.
    let h = Holder::spawn(&["comm:x\"y\\z\nq", "tcp4-listen:127.0.0.1:0"]);
    let port = h.item(1).sock().port();
    let server = serve();

    let first = get(&server.addr, "/metrics").expect("first scrape");
    assert_eq!(first.status, 200, "{first:?}");
    assert!(first.body.contains("sockstat_up 1\n"), "{}", first.body);
    assert!(
        !first.body.contains("sockstat_findings{"),
        "the first scrape has no diagnosis yet:\n{}",
        first.body
    );
    let body = get(&server.addr, "/metrics").expect("second scrape").body;
    assert!(body.contains(
        "sockstat_findings{rule=\"listen-overflow\",severity=\"critical\",zone=\"global\"} "
    ));
    let want = format!(
        "sockstat_listen_queue{{proto=\"tcp\",address=\"127.0.0.1\",port=\"{port}\",command=\"x\\\"y\\\\z\\nq\",zone="
    );
    assert!(body.contains(&want), "no {want} in\n{body}");
    assert!(!body.lines().any(|l| l.starts_with('q')), "{body}");
    let nope = get(&server.addr, "/nope").expect("404");
    assert_eq!(nope.status, 404);

    if !which("promtool") {
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
        "promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn wrong_methods_get_405_and_head_answers_without_collecting() {
    let server = serve();
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        for path in ["/metrics", "/"] {
            let a = request(
                &server.addr,
                method,
                path,
                "Content-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
            )
            .expect(method);
            assert_eq!(a.status, 405, "{method} {path}: {a:?}");
            assert_eq!(a.header("Allow"), Some("GET, HEAD"), "{a:?}");
        }
    }
    let head = request(&server.addr, "HEAD", "/metrics", "").expect("HEAD");
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(
        head.header("Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(head.body.is_empty(), "{head:?}");
    let root = request(&server.addr, "HEAD", "/", "").expect("HEAD /");
    assert_eq!(root.status, 200);
    assert!(root.body.is_empty());
    assert!(root.header("Content-Length").is_some(), "{root:?}");
    // HEAD started no collection: the first GET is still the first (no findings yet).
    let first = get(&server.addr, "/metrics").expect("GET");
    assert!(first.body.contains("sockstat_up 1\n"), "{}", first.body);
    assert!(!first.body.contains("sockstat_findings{"), "{}", first.body);
    // A wrong method on an unknown path is a 404, as any request there.
    assert_eq!(
        request(&server.addr, "POST", "/nope", "").unwrap().status,
        404
    );
}

#[test]
fn a_listener_whose_holder_cannot_be_read_is_labelled_and_counted() {
    require_root!("a_listener_whose_holder_cannot_be_read_is_labelled_and_counted (setpriv)");
    // Root holds the listener; the exporter runs as nobody with no capability, so it cannot
    // read root's /proc/PID/fd.
    let h = Holder::spawn(&["comm:rootheld", "tcp4-listen:127.0.0.1:0"]);
    let port = h.item(1).sock().port();
    let server = serve_with(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ],
        &["--scrape-budget", "10s"],
    );
    let body = get(&server.addr, "/metrics").expect("scrape").body;
    let series = format!(
        "sockstat_listen_queue{{proto=\"tcp\",address=\"127.0.0.1\",port=\"{port}\",command=\"?\",zone=\"global\"}}"
    );
    assert_eq!(value(&body, &series), 0.0);
    assert!(!body.contains("command=\"\""), "{body}");
    let unknown = value(&body, "sockstat_listeners_command_unknown{zone=\"global\"}");
    assert!(unknown >= 1.0, "{body}");
    // The exporter's own listener is nobody's: named.
    let own = server.addr.rsplit(':').next().unwrap();
    assert!(
        body.contains(&format!("port=\"{own}\",command=\"sockstat\"")),
        "{body}"
    );
    let log = server.log_with(&["without CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE"]);
    assert!(
        log.contains("without CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE")
            && log.contains("command=\"?\""),
        "{log}"
    );
    // As root, the same listener is named, and only listeners nobody can name are counted.
    let root = serve();
    let body = get(&root.addr, "/metrics").expect("scrape").body;
    assert!(
        body.contains(&format!(
            "port=\"{port}\",command=\"rootheld\",zone=\"global\"}}"
        )),
        "{body}"
    );
    assert!(
        value(&body, "sockstat_listeners_command_unknown{zone=\"global\"}") < unknown,
        "{body}"
    );
}

#[test]
fn a_scrape_over_budget_is_answered_from_the_last_collection_with_its_age() {
    // No collection finishes within 1 ms: the first scrape has no data yet (up 0); a later one
    // gets the collection the first one started, with its age.
    let server = serve_with(&[], &["--scrape-budget", "1ms"]);
    let first = get(&server.addr, "/metrics").expect("first scrape").body;
    assert_eq!(value(&first, "sockstat_up"), 0.0, "{first}");
    assert!(!first.contains("sockstat_sockets{"), "{first}");
    assert!(value(&first, "sockstat_scrape_budget_exceeded_total") >= 1.0);
    let mut later = String::new();
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(250));
        later = get(&server.addr, "/metrics").expect("later scrape").body;
        if value(&later, "sockstat_up") == 1.0
            && value(&later, "sockstat_snapshot_age_seconds") > 0.2
        {
            assert!(later.contains("sockstat_sockets{"), "{later}");
            assert!(
                value(&later, "sockstat_scrape_duration_seconds") < 1.0,
                "{later}"
            );
            return;
        }
    }
    panic!("no stale answer with an age within 10 s; last:\n{later}");
}

#[test]
fn bad_budgets_and_addresses_are_usage_errors_and_a_taken_port_stops_it() {
    let out = sockstat(&["serve", "--scrape-budget", "0s"]).run();
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("invalid scrape budget '0s'"),
        "{}",
        out.stderr
    );
    let out = sockstat(&["serve", "--listen", "localhost"]).run();
    assert_eq!(out.code, Some(2));
    // A port already taken: not bad usage but an error that stops the work (4), one line
    // naming it.
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let addr = taken.local_addr().unwrap().to_string();
    let out = sockstat(&["serve", "--listen", &addr]).run();
    assert_eq!(out.code, Some(4), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("cannot listen on {addr}")),
        "{}",
        out.stderr
    );
}

#[test]
fn a_prometheus_server_scrapes_it() {
    if !which("prometheus") {
        eprintln!("SKIPPED: prometheus not found (Debian package prometheus)");
        return;
    }
    let server = serve();
    let prom = Prometheus::start(
        &format!(
            "  - job_name: sockstat\n    static_configs:\n      - targets: ['{}']\n",
            server.addr
        ),
        &[],
    );
    let v = prom.query_until("sockstat_up", |v| !results(v).is_empty());
    let r = results(&v);
    assert_eq!(r.len(), 1, "{v}");
    assert_eq!(r[0]["value"][1], "1", "{v}");
    let v = prom.query_until("sockstat_sockets{proto=\"tcp\"}", |v| {
        !results(v).is_empty()
    });
    assert!(!results(&v).is_empty(), "{v}");
}

/// Writes `text` to `dir/name` and returns the path as a string.
pub fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.to_str().expect("utf-8 path").to_string()
}
