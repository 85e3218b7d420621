//! `sockbench serve`: what a scrape of `sockstat serve -Z` costs on a node with many zones.
//!
//!     cargo run --release -p sockstat-bench --bin sockbench -- serve --zones 1,500 -n 200k
//!
//! For each zone count Z, in a private network + pid + mount namespace (as `sockbench run`):
//! Z sockgen tables of N/Z sockets over max(1, P/Z) worker processes each, the first in the
//! benchmark's own namespace (the exporter's "global" zone) and the other Z-1 each in a network
//! namespace of its own (`sockgen --netns`, as a container holds its sockets); then `sockstat
//! serve -Z`, scraped K times over HTTP, a few seconds apart. Per scrape: the wall time of the
//! GET, the exporter's CPU time over it (utime + stime of every thread, /proc/PID/stat), its own
//! `sockstat_collect_duration_seconds`, the body's size and series; at the end its resident
//! memory. Results go to `bench/out/serve/zones-Z.json` and the "Exporter" section of
//! doc/reference/BENCHMARKS.md (only that section is rewritten).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

struct Opts {
    zones: Vec<usize>,
    n: usize,
    procs: usize,
    scrapes: usize,
    interval_s: f64,
    sockstat: PathBuf,
    sockgen: PathBuf,
    out: PathBuf,
    doc: Option<PathBuf>,
    build: bool,
    /// `net.ipv4.tcp_child_ehash_entries` (and `udp_child_hash_entries`) in the benchmark's
    /// namespace: the zones it creates get TCP and UDP hash tables of their own, of this size,
    /// instead of walking the host's in every socket dump.
    child_ehash: Option<u32>,
}

fn usage() -> ! {
    eprintln!(
        "usage: sockbench serve [--zones 1,500] [-n 200k] [-p 500] [--scrapes 10] [--interval 3]\n\
         \x20                     [--child-ehash N] [--sockstat PATH] [--out DIR] [--doc FILE|--no-doc] [--no-build]\n\
         \x20      sockbench serve --report   (write the section again from the results in --out)\n\
         Z zones of N/Z sockets each (the first in the benchmark's namespace, the others in\n\
         namespaces of their own), scraped by `sockstat serve -Z`; as root."
    );
    std::process::exit(2)
}

/// `sockbench serve ...` (outer: runs one private namespace per zone count).
pub fn main(args: Vec<String>) -> i32 {
    let root = crate::workspace_root();
    let mut o = Opts {
        zones: vec![1, 500],
        n: 200_000,
        procs: 500,
        scrapes: 10,
        interval_s: 3.0,
        sockstat: root.join("target/release/sockstat"),
        sockgen: root.join("target/release/sockgen"),
        out: root.join("bench/out/serve"),
        doc: Some(root.join("doc/reference/BENCHMARKS.md")),
        build: true,
        child_ehash: None,
    };
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--zones" => {
                o.zones = v()
                    .split(',')
                    .map(|z| z.parse().unwrap_or_else(|_| usage()))
                    .collect()
            }
            "-n" => o.n = crate::parse_n(&v()).unwrap_or_else(|| usage()),
            "-p" => o.procs = v().parse().unwrap_or_else(|_| usage()),
            "--scrapes" => o.scrapes = v().parse().unwrap_or_else(|_| usage()),
            "--interval" => o.interval_s = v().parse().unwrap_or_else(|_| usage()),
            "--sockstat" => o.sockstat = PathBuf::from(v()),
            "--out" => o.out = PathBuf::from(v()),
            "--doc" => o.doc = Some(PathBuf::from(v())),
            "--no-doc" => o.doc = None,
            "--no-build" => o.build = false,
            "--child-ehash" => o.child_ehash = Some(v().parse().unwrap_or_else(|_| usage())),
            "--report" => o.zones.clear(),
            _ => usage(),
        }
    }
    // `--report`: only write the section again from the results already in --out.
    if o.zones.is_empty() {
        return write_doc(&o);
    }
    if o.zones.contains(&0) || o.scrapes < 2 || o.n / 20 < o.zones[0] {
        usage();
    }
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("sockbench serve: needs root (network and pid namespaces)");
        return 2;
    }
    if o.build {
        eprintln!("sockbench serve: cargo build --release -p sockstat-cli -p sockstat-bench");
        let ok = Command::new("cargo")
            .args([
                "build",
                "--release",
                "-p",
                "sockstat-cli",
                "-p",
                "sockstat-bench",
            ])
            .current_dir(&root)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("sockbench serve: the build failed");
            return 2;
        }
    }
    let _ = std::fs::create_dir_all(&o.out);
    // Measure a private copy: others may rebuild target/release/sockstat during a long run.
    let copy = o.out.join("sockstat");
    if std::fs::copy(&o.sockstat, &copy).is_err() {
        eprintln!("sockbench serve: no {}", o.sockstat.display());
        return 2;
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .map(|x| String::from_utf8_lossy(&x.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let mut meta = json!({
        "git": git(&["rev-parse", "--short", "HEAD"]),
        // Uncommitted changes other than this document's section, which the runs write.
        "git_dirty": !git(&["status", "--porcelain", "--untracked-files=no", "--", ".", ":!doc/reference/BENCHMARKS.md"]).is_empty(),
        "date": String::from_utf8_lossy(&Command::new("date").arg("+%Y-%m-%d").output().map(|x| x.stdout).unwrap_or_default()).trim(),
        "nproc": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        "command": format!(
            "cargo run --release -p sockstat-bench --bin sockbench -- serve --zones {} -n {} -p {} --scrapes {} --interval {}{}",
            o.zones.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
            crate::report::scale_name(o.n), o.procs, o.scrapes, o.interval_s,
            o.child_ehash.map_or(String::new(), |n| format!(" --child-ehash {n}")),
        ),
        "tcp_ehash_entries": std::fs::read_to_string("/proc/sys/net/ipv4/tcp_ehash_entries").unwrap_or_default().trim(),
        "loadavg_before": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
    });
    let me = std::env::current_exe().expect("current_exe");
    for &z in &o.zones {
        if crate::STOP.load(std::sync::atomic::Ordering::SeqCst) {
            return 130;
        }
        eprintln!("sockbench serve: === {} sockets in {z} zones ===", o.n);
        let result = o.out.join(match o.child_ehash {
            None => format!("zones-{z}.json"),
            Some(n) => format!("zones-{z}-ehash-{n}.json"),
        });
        let _ = std::fs::remove_file(&result);
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--net",
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            "--",
        ])
        .arg(&me)
        .arg("serve-inner")
        .args(["--zones", &z.to_string()])
        .args(["-n", &o.n.to_string(), "-p", &o.procs.to_string()])
        .args(["--scrapes", &o.scrapes.to_string()])
        .args(["--interval", &o.interval_s.to_string()])
        .arg("--sockstat")
        .arg(&copy)
        .arg("--sockgen")
        .arg(&o.sockgen)
        .arg("--result")
        .arg(&result);
        if let Some(n) = o.child_ehash {
            cmd.args(["--child-ehash", &n.to_string()]);
        }
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                Ok(())
            });
        }
        let st = cmd.status();
        if !st.as_ref().is_ok_and(|s| s.success()) || !result.is_file() {
            eprintln!("sockbench serve: {z} zones: the run failed ({st:?})");
            return 1;
        }
        // How this row was made, with it.
        let mut v: serde_json::Value = std::fs::read_to_string(&result)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        meta["child_ehash"] = json!(o.child_ehash);
        v["meta"] = meta.clone();
        let _ = std::fs::write(&result, serde_json::to_string_pretty(&v).unwrap());
    }
    write_doc(&o)
}

/// Rewrites the Exporter section of the document from the results in `o.out`.
fn write_doc(o: &Opts) -> i32 {
    let Some(doc) = &o.doc else {
        return 0;
    };
    let Some(section) = crate::report::serve_section(&o.out) else {
        eprintln!("sockbench serve: no results to write");
        return 1;
    };
    let old = std::fs::read_to_string(doc).unwrap_or_default();
    if let Err(e) = std::fs::write(doc, crate::report::splice_serve(&old, &section)) {
        eprintln!("sockbench serve: cannot write {}: {e}", doc.display());
        return 1;
    }
    eprintln!(
        "sockbench serve: wrote the Exporter section of {}",
        doc.display()
    );
    0
}

struct Inner {
    zones: usize,
    n: usize,
    procs: usize,
    scrapes: usize,
    interval_s: f64,
    sockstat: PathBuf,
    sockgen: PathBuf,
    result: PathBuf,
    child_ehash: Option<u32>,
}

fn parse_inner(args: Vec<String>) -> Inner {
    let mut a = Inner {
        zones: 1,
        n: 1000,
        procs: 10,
        scrapes: 3,
        interval_s: 1.0,
        sockstat: PathBuf::new(),
        sockgen: PathBuf::new(),
        result: PathBuf::new(),
        child_ehash: None,
    };
    let mut it = args.into_iter();
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--zones" => a.zones = v.parse().unwrap(),
            "-n" => a.n = v.parse().unwrap(),
            "-p" => a.procs = v.parse().unwrap(),
            "--scrapes" => a.scrapes = v.parse().unwrap(),
            "--interval" => a.interval_s = v.parse().unwrap(),
            "--sockstat" => a.sockstat = PathBuf::from(v),
            "--sockgen" => a.sockgen = PathBuf::from(v),
            "--result" => a.result = PathBuf::from(v),
            "--child-ehash" => a.child_ehash = Some(v.parse().unwrap()),
            _ => panic!("serve-inner: unknown argument {k}"),
        }
    }
    a
}

/// Kills and reaps a child on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// (utime + stime) of every thread of `pid`, seconds.
fn cpu_s(pid: u32) -> f64 {
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // state is field 3; utime and stime are fields 14 and 15 (indices 11 and 12 here).
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / tck
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn http_get(addr: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(300)))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    Ok(raw
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string()))
}

fn metric(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// Series per family, and series per zone label, of a scrape.
fn cardinality(body: &str) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let mut families = BTreeMap::new();
    let mut zones = BTreeMap::new();
    for l in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = l.split(['{', ' ']).next().unwrap_or("");
        *families.entry(name.to_string()).or_default() += 1;
        if let Some(at) = l.find("zone=\"") {
            let z = &l[at + 6..];
            let z = &z[..z.find('"').unwrap_or(z.len())];
            *zones.entry(z.to_string()).or_default() += 1;
        }
    }
    (families, zones)
}

/// Starts one sockgen table (in a namespace of its own unless `global`); returns it and the
/// receiver of its READY line.
fn start_zone(
    a: &Inner,
    run: &Path,
    k: usize,
    n: usize,
    p: usize,
) -> (Reaped, mpsc::Receiver<String>) {
    let mut c = Command::new(&a.sockgen);
    c.args(["-n", &n.to_string(), "-p", &p.to_string()])
        .arg("--dir")
        .arg(run.join(format!("z{k}")))
        .args(["--max-seconds", "7200", "--seed", &(k + 1).to_string()]);
    if k > 0 {
        c.arg("--netns");
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start sockgen");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(out);
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            if line.starts_with("READY") {
                let _ = tx.send(line.clone());
            }
            line.clear();
        }
    });
    (Reaped(child), rx)
}

/// `sockbench serve-inner ...`: pid 1 of the private namespaces.
pub fn inner(args: Vec<String>) -> i32 {
    let a = parse_inner(args);
    if unsafe { libc::getpid() } != 1 {
        eprintln!("sockbench serve-inner: must run as pid 1 of a new pid namespace");
        return 2;
    }
    let _ = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status();
    // The host's named namespaces (`ip netns`, Docker) are mounted under these directories, and
    // this mount namespace is a copy of the host's: hide them (an empty tmpfs over each, gone
    // with this namespace), so that the exporter sees only the benchmark's zones.
    for dir in [
        "/run/netns",
        "/var/run/netns",
        "/run/docker/netns",
        "/var/run/docker/netns",
    ] {
        if Path::new(dir).is_dir() {
            let c = std::ffi::CString::new(dir).unwrap();
            let r = unsafe {
                libc::mount(
                    c"none".as_ptr(),
                    c.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            if r != 0 {
                eprintln!(
                    "sockbench serve: cannot hide {dir}: {}",
                    std::io::Error::last_os_error()
                );
                return 2;
            }
        }
    }
    // Namespace-local: only the zones made below get tables of their own.
    if let Some(n) = a.child_ehash {
        for key in ["tcp_child_ehash_entries", "udp_child_hash_entries"] {
            if let Err(e) = std::fs::write(format!("/proc/sys/net/ipv4/{key}"), n.to_string()) {
                eprintln!("sockbench serve: cannot set net.ipv4.{key}: {e}");
                return 2;
            }
        }
    }
    // Unix socket files on a tmpfs that goes with this mount namespace.
    let run = a.result.parent().unwrap_or(Path::new("/tmp")).join(format!(
        "run-{}-{}",
        a.zones,
        a.child_ehash.unwrap_or(0)
    ));
    let _ = std::fs::create_dir_all(&run);
    let c_run = std::ffi::CString::new(run.display().to_string()).unwrap();
    unsafe {
        libc::mount(
            c"none".as_ptr(),
            c_run.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            std::ptr::null(),
        );
    }
    let rc = measure(&a, &run);
    unsafe { libc::umount2(c_run.as_ptr(), libc::MNT_DETACH) };
    let _ = std::fs::remove_dir(&run);
    rc
}

fn measure(a: &Inner, run: &Path) -> i32 {
    let per_zone_sockets = a.n / a.zones;
    let procs = (a.procs / a.zones).max(1);
    let t0 = Instant::now();
    let mut gens = Vec::with_capacity(a.zones);
    let mut sockets = 0u64;
    // Built a few dozen at a time: each builds in well under a second, and the machine is shared.
    for batch in (0..a.zones).collect::<Vec<_>>().chunks(25) {
        let started: Vec<_> = batch
            .iter()
            .map(|&k| start_zone(a, run, k, per_zone_sockets, procs))
            .collect();
        for (g, rx) in started {
            match rx.recv_timeout(Duration::from_secs(600)) {
                Ok(line) => {
                    sockets += line
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix("sockets="))
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                }
                Err(_) => {
                    eprintln!("sockbench serve: a sockgen did not get ready");
                    return 1;
                }
            }
            gens.push(g);
        }
    }
    let build_s = t0.elapsed().as_secs_f64();
    eprintln!(
        "sockbench serve: {} zones, {sockets} sockets, {} processes per zone, built in {build_s:.1} s",
        a.zones,
        procs + 2
    );
    // With one zone, the same table is also scraped without -Z first: what -Z adds there.
    let without_z = if a.zones == 1 {
        match serve_and_scrape(a, run, false) {
            Some(r) => Some(r),
            None => return 1,
        }
    } else {
        None
    };
    let Some(r) = serve_and_scrape(a, run, true) else {
        return 1;
    };
    let (scrapes, last, load_start) = (r.scrapes, r.last, r.load_start);
    let (families, zones) = cardinality(&last);
    if zones.len() != a.zones {
        eprintln!(
            "sockbench serve: the exporter saw {} zones, not the {} made here: {:?}",
            zones.len(),
            a.zones,
            zones.keys().collect::<Vec<_>>()
        );
        return 1;
    }
    let mut per_zone: Vec<usize> = zones
        .iter()
        .filter(|(z, _)| z.as_str() != "global")
        .map(|(_, n)| *n)
        .collect();
    per_zone.sort_unstable();
    let labelled: BTreeSet<&String> = zones.keys().collect();
    let promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
        .and_then(|mut c| {
            c.stdin.take()?.write_all(last.as_bytes()).ok()?;
            c.wait().ok().map(|s| s.success())
        });
    let _ = std::fs::write(run.join("last.txt"), &last);
    let v = json!({
        "zones": a.zones,
        "sockets": sockets,
        "procs_per_zone": procs,
        "child_ehash": a.child_ehash,
        "interval_s": a.interval_s,
        "sockets_per_zone": per_zone_sockets,
        "build_s": build_s,
        "scrapes": scrapes,
        "series_by_family": families,
        "series_global": zones.get("global"),
        "series_per_other_zone": {
            "min": per_zone.first(), "median": per_zone.get(per_zone.len() / 2), "max": per_zone.last(),
        },
        "zone_labels": labelled.len(),
        "rss_kib": r.rss_kib,
        "rss_peak_kib": r.rss_peak_kib,
        "without_z": without_z.map(|w| json!({
            "scrapes": w.scrapes,
            "rss_kib": w.rss_kib,
            "rss_peak_kib": w.rss_peak_kib,
            "series": cardinality(&w.last).0.values().sum::<usize>(),
        })),
        "promtool_ok": promtool,
        "serve_log": r.log,
        "loadavg_start": load_start,
        "loadavg_end": loadavg(),
    });
    for g in &gens {
        unsafe { libc::kill(g.0.id() as i32, libc::SIGTERM) };
    }
    drop(gens);
    let _ = std::fs::write(&a.result, serde_json::to_string_pretty(&v).unwrap());
    0
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// What one exporter run gave.
struct ServerRun {
    scrapes: Vec<serde_json::Value>,
    last: String,
    rss_kib: u64,
    rss_peak_kib: u64,
    log: String,
    load_start: String,
}

/// Starts `sockstat serve` (with `-Z` when `minus_z`) and scrapes it `a.scrapes` times.
fn serve_and_scrape(a: &Inner, run: &Path, minus_z: bool) -> Option<ServerRun> {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let log_path = run.join(if minus_z { "serve-z.log" } else { "serve.log" });
    let log = std::fs::File::create(&log_path).expect("serve log");
    let mut cmd = Command::new(&a.sockstat);
    cmd.arg("serve");
    if minus_z {
        cmd.arg("-Z");
    }
    let server = cmd
        .args(["--listen", &addr, "--scrape-budget", "300s"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start sockstat serve");
    let pid = server.id();
    let _server = Reaped(server);
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(&addr).is_err() {
        if Instant::now() > deadline {
            eprintln!("sockbench serve: sockstat serve did not listen");
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let load_start = loadavg();
    let mut scrapes = Vec::new();
    let mut last = String::new();
    for i in 0..a.scrapes {
        if i > 0 {
            std::thread::sleep(Duration::from_secs_f64(a.interval_s));
        }
        let cpu0 = cpu_s(pid);
        let w0 = Instant::now();
        let body = match http_get(&addr) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("sockbench serve: scrape {}: {e}", i + 1);
                return None;
            }
        };
        let wall = w0.elapsed().as_secs_f64();
        let cpu = cpu_s(pid) - cpu0;
        let (families, zones) = cardinality(&body);
        let series: usize = families.values().sum();
        let s = json!({
            "wall_s": wall,
            "cpu_s": cpu,
            "collect_s": metric(&body, "sockstat_collect_duration_seconds"),
            "up": metric(&body, "sockstat_up"),
            "zones": metric(&body, "sockstat_zones"),
            "owner_scans": metric(&body, "sockstat_owner_scans_total"),
            "bytes": body.len(),
            "series": series,
            "zone_labels": zones.len(),
        });
        eprintln!(
            "sockbench serve: {} scrape {:>2}: {s}",
            if minus_z { "-Z" } else { "  " },
            i + 1
        );
        scrapes.push(s);
        last = body;
    }
    Some(ServerRun {
        scrapes,
        last,
        rss_kib: status_kib(pid, "VmRSS:"),
        rss_peak_kib: status_kib(pid, "VmHWM:"),
        log: std::fs::read_to_string(&log_path).unwrap_or_default(),
        load_start,
    })
}
