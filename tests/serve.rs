//! `sockstat serve` against real scrapers: its output passes `promtool check metrics`, a
//! listener held by a process with a hostile command name comes out escaped, and a real
//! Prometheus server (started here with a scratch data directory, on free loopback ports,
//! killed on drop) scrapes it and answers a query for `sockstat_up`. Tests whose tool is missing
//! print "SKIPPED: ..." and pass.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills and reaps a child on drop, so a failed assertion leaves no server behind.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Starts `sockstat serve` on a free loopback port; returns it with its address.
fn serve() -> (Killed, String) {
    serve_with_budget("10s")
}

fn serve_with_budget(budget: &str) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sockstat"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--scrape-budget",
            budget,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sockstat serve");
    let stderr = child.stderr.take().expect("stderr");
    let guard = Killed(child);
    let mut line = String::new();
    BufReader::new(stderr)
        .read_line(&mut line)
        .expect("read the banner");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (guard, addr)
}

/// A GET over plain HTTP/1.0; returns (status line, body).
fn get(addr: &str, path: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    Ok((
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    ))
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[test]
fn metrics_pass_promtool_and_a_hostile_command_name_is_escaped() {
    // The command name of this process: a quote, a backslash and a newline, each of which
    // would end or forge a series if written unescaped.
    let hostile = b"x\"y\\z\nq";
    std::fs::write("/proc/self/comm", hostile).expect("rename this process");
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let (_server, addr) = serve();

    let (status, first) = get(&addr, "/metrics").expect("first scrape");
    assert!(status.contains("200"), "{status}");
    assert!(first.contains("sockstat_up 1\n"), "{first}");
    assert!(
        !first.contains("sockstat_findings{"),
        "the first scrape has no diagnosis yet:\n{first}"
    );
    let (_, body) = get(&addr, "/metrics").expect("second scrape");
    assert!(body.contains("sockstat_findings{rule=\"listen-overflow\",severity=\"critical\"} "));
    let want = format!(
        "sockstat_listen_queue{{proto=\"tcp\",address=\"127.0.0.1\",port=\"{port}\",command=\"x\\\"y\\\\z\\nq\",zone="
    );
    assert!(body.contains(&want), "no {want} in\n{body}");
    assert!(!body.lines().any(|l| l.starts_with('q')), "{body}");
    let (status, _) = get(&addr, "/nope").expect("404");
    assert!(status.contains("404"), "{status}");

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
    drop(listener);
}

fn value(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{body}"))
}

#[test]
fn a_scrape_over_budget_is_answered_from_the_last_collection_with_its_age() {
    // No collection finishes within 1 ms: the first scrape has no data yet (up 0); a later one
    // gets the collection the first one started, with its age.
    let (_server, addr) = serve_with_budget("1ms");
    let (_, first) = get(&addr, "/metrics").expect("first scrape");
    assert_eq!(value(&first, "sockstat_up"), 0.0, "{first}");
    assert!(!first.contains("sockstat_sockets{"), "{first}");
    assert!(value(&first, "sockstat_scrape_budget_exceeded_total") >= 1.0);
    let mut later = String::new();
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(250));
        later = get(&addr, "/metrics").expect("later scrape").1;
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
fn bad_budgets_and_addresses_are_usage_errors() {
    let out = Command::new(env!("CARGO_BIN_EXE_sockstat"))
        .args(["serve", "--scrape-budget", "0s"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid scrape budget '0s'"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_sockstat"))
        .args(["serve", "--listen", "localhost"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_prometheus_server_scrapes_it() {
    if !which("prometheus") {
        eprintln!("SKIPPED: prometheus not found (Debian package prometheus)");
        return;
    }
    let (_server, addr) = serve();
    let dir = tempfile::tempdir().expect("scratch dir");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: sockstat\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .expect("write config");
    let web = format!("127.0.0.1:{}", free_port());
    let _prom = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok((_, body)) = get(&web, "/api/v1/query?query=sockstat_up") {
            if body.contains("\"__name__\":\"sockstat_up\"") {
                assert!(body.contains("\"1\"]"), "sockstat_up is not 1: {body}");
                let (_, sockets) =
                    get(&web, "/api/v1/query?query=sockstat_sockets").expect("query");
                assert!(sockets.contains("\"proto\":\"tcp\""), "{sockets}");
                return;
            }
            last = body;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("prometheus never returned sockstat_up within 45 s; last answer: {last}");
}
