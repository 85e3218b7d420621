//! The part of the runner that runs as pid 1 inside the private net+pid+mount namespace.

use crate::check::{self, Truth};
use crate::tools::{self, Env, Parser, Tool};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Args {
    n: usize,
    procs: usize,
    mode: String,
    runs: usize,
    dir: PathBuf,
    tag: String,
    tools: Vec<String>,
    env: Env,
    quiet_wait: u64,
}

fn parse(args: Vec<String>) -> Args {
    let mut a = Args {
        n: 1000,
        procs: 50,
        mode: "check".into(),
        runs: 5,
        dir: PathBuf::from("."),
        tag: "main".into(),
        tools: Vec::new(),
        env: Env::default(),
        quiet_wait: 90,
    };
    let mut it = args.into_iter();
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--n" => a.n = v.parse().unwrap(),
            "--procs" => a.procs = v.parse().unwrap(),
            "--mode" => a.mode = v,
            "--runs" => a.runs = v.parse().unwrap(),
            "--dir" => a.dir = PathBuf::from(v),
            "--tag" => a.tag = v,
            "--tools" => {
                a.tools = v
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            }
            "--env" => a.env = Env::from_arg(&v),
            "--quiet-wait" => a.quiet_wait = v.parse().unwrap(),
            _ => panic!("inner: unknown argument {k}"),
        }
    }
    a
}

pub fn main(args: Vec<String>) -> i32 {
    let a = parse(args);
    if unsafe { libc::getpid() } != 1 {
        eprintln!("sockbench inner: must run as pid 1 of a new pid namespace");
        return 2;
    }
    // loopback up; a wide ephemeral range that stays clear of the generator's fixed ports
    let _ = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status();
    let _ = std::fs::write("/proc/sys/net/ipv4/ip_local_port_range", "20000 65535");
    // unix socket files live on a tmpfs that goes away with this mount namespace
    let run = a.dir.join(format!("run-{}", a.tag));
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
    let truth_path = run.join("truth.json");
    let mut gen = match Command::new(&a.env.sockgen)
        .args(["-n", &a.n.to_string(), "-p", &a.procs.to_string()])
        .arg("--truth")
        .arg(&truth_path)
        .arg("--dir")
        .arg(run.join("s"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(g) => g,
        Err(e) => {
            eprintln!("sockbench inner: cannot start sockgen: {e}");
            return 2;
        }
    };
    let rc = match wait_ready(&mut gen) {
        Some(line) => {
            eprintln!("sockbench: [{}] {}", a.tag, line.trim());
            let truth_text = std::fs::read_to_string(&truth_path).unwrap_or_default();
            let _ = std::fs::write(a.dir.join(format!("truth-{}.json", a.tag)), &truth_text);
            match serde_json::from_str::<Value>(&truth_text)
                .ok()
                .and_then(|v| Truth::from_gen(&v).map(|t| (v, t)))
            {
                Some((tv, t)) => run_mode(&a, &tv, &t),
                None => {
                    eprintln!("sockbench inner: unreadable truth file");
                    2
                }
            }
        }
        None => {
            eprintln!("sockbench inner: sockgen did not get ready");
            2
        }
    };
    unsafe { libc::kill(gen.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(_)) = gen.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = gen.kill();
    let _ = gen.wait();
    unsafe { libc::umount2(c_run.as_ptr(), libc::MNT_DETACH) };
    let _ = std::fs::remove_dir(&run);
    rc
}

fn wait_ready(gen: &mut Child) -> Option<String> {
    let out = gen.stdout.take()?;
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
    rx.recv_timeout(Duration::from_secs(900)).ok()
}

/// Runs argv with stdout captured; returns (stdout, exit code, seconds).
fn capture(argv: &[String], timeout: Duration) -> (String, i32, f64) {
    let t0 = Instant::now();
    let Ok(mut child) = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        return (String::new(), 127, 0.0);
    };
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let code = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st.code().unwrap_or(-1);
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break -9;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let secs = t0.elapsed().as_secs_f64();
    let s = reader.join().unwrap_or_default();
    (String::from_utf8_lossy(&s).into_owned(), code, secs)
}

/// One run of `sh -c 'exec TOOL >/dev/null 2>&1'`: (wall ms, peak RSS KiB, exit code).
///
/// The peak RSS comes from `/usr/bin/time -f %M`: its fork()ed child starts from time's
/// small address space. (Spawning the tool straight from this process would report at
/// least this process's own RSS, since ru_maxrss carries the pre-exec high-water mark.)
fn timed_once(t: &Tool, rss_file: &std::path::Path) -> (f64, u64, i32) {
    let gnu_time = std::path::Path::new("/usr/bin/time");
    let t0 = Instant::now();
    let mut cmd = if gnu_time.is_file() {
        let mut c = Command::new(gnu_time);
        c.args(["-f", "%M", "-o"])
            .arg(rss_file)
            .args(["sh", "-c", &t.shell()]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &t.shell()]);
        c
    };
    let Ok(child) = cmd.spawn() else {
        return (0.0, 0, 127);
    };
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
        if r >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let rss = if gnu_time.is_file() {
        std::fs::read_to_string(rss_file)
            .ok()
            .and_then(|s| {
                s.lines()
                    .filter_map(|l| l.trim().parse::<u64>().ok())
                    .next_back()
            })
            .unwrap_or(0)
    } else {
        ru.ru_maxrss as u64
    };
    (ms, rss, code)
}

/// Fraction of the machine's cpu time that was idle over `window` (from /proc/stat).
fn idle_fraction(window: Duration) -> f64 {
    let read = || -> Option<(u64, u64)> {
        let s = std::fs::read_to_string("/proc/stat").ok()?;
        let v: Vec<u64> = s
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let idle = v.get(3)? + v.get(4).unwrap_or(&0);
        Some((idle, v.iter().take(8).sum()))
    };
    let (Some(a), _) = (read(), std::thread::sleep(window)) else {
        return 1.0;
    };
    let Some(b) = read() else { return 1.0 };
    let total = b.1.saturating_sub(a.1).max(1);
    b.0.saturating_sub(a.0) as f64 / total as f64
}

/// Waits (at most `max`) until the machine is mostly idle, so that other work on a shared
/// host disturbs the timing less. Returns the idle fraction seen last.
fn wait_quiet(min_idle: f64, max: Duration) -> f64 {
    let t0 = Instant::now();
    loop {
        let f = idle_fraction(Duration::from_millis(500));
        if f >= min_idle || t0.elapsed() >= max {
            return f;
        }
    }
}

/// Runs the full listing `runs` times with `SOCKSTAT_TIMINGS` set and returns each phase's
/// median duration in ms (`took` lines; the `+` lines are the time since the previous line).
fn phase_medians(sockstat: &std::path::Path, runs: usize) -> Value {
    let mut by: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for _ in 0..runs {
        let Ok(o) = Command::new(sockstat)
            .env("SOCKSTAT_TIMINGS", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
        else {
            continue;
        };
        for line in String::from_utf8_lossy(&o.stderr).lines() {
            let Some(rest) = line.strip_prefix("sockstat: timing: ") else {
                continue;
            };
            let (name, ms) = if let Some((n, r)) = rest.split_once(" took ") {
                (n, r.split(' ').next())
            } else if let Some((n, r)) = rest.split_once(" +") {
                (n, r.split(' ').next())
            } else {
                continue;
            };
            if let Some(ms) = ms.and_then(|m| m.parse::<f64>().ok()) {
                by.entry(name.to_string()).or_default().push(ms);
            }
        }
    }
    let mut out = serde_json::Map::new();
    for (k, mut v) in by {
        v.sort_by(|a, b| a.total_cmp(b));
        out.insert(k, json!(v[v.len() / 2]));
    }
    Value::Object(out)
}

/// Starts `sockstat serve` on [`tools::SERVE_ADDR`] and waits (at most 20 s) until it answers
/// a first scrape (which has no findings yet: diagnosis needs two collections).
fn start_serve(env: &Env) -> Option<Child> {
    let s = env.sockstat.as_ref()?;
    let mut child = Command::new(s)
        .args(["serve", "--listen", tools::SERVE_ADDR])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let url = format!("http://{}/metrics", tools::SERVE_ADDR);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        let ok = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", &url])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(child);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn floor_truth(env: &Env, t: &Truth) -> Option<check::FloorCount> {
    let mut argv = vec![env.sockfloor.display().to_string(), "truth".into()];
    for p in &t.churn {
        argv.push("--churn-port".into());
        argv.push(p.to_string());
    }
    argv.push("--probe-port".into());
    argv.push(t.probe_port.to_string());
    let (out, _, _) = capture(&argv, Duration::from_secs(120));
    check::floor_truth(&out)
}

fn run_mode(a: &Args, tv: &Value, t: &Truth) -> i32 {
    let all = tools::all_tools(&a.env);
    let sel: Vec<&Tool> = all
        .iter()
        .filter(|x| a.tools.iter().any(|id| id == x.id))
        .collect();
    if a.mode == "cold" {
        // the very first look at this fresh table
        let Some(tool) = sel.first() else { return 2 };
        let idle = wait_quiet(0.85, Duration::from_secs(a.quiet_wait.min(60)));
        let (ms, rss, code) = timed_once(tool, &a.dir.join(format!("rss-cold-{}.txt", tool.id)));
        let v = json!({"id": tool.id, "cold_ms": ms, "cold_rss_kib": rss, "exit": code, "idle_before": idle,
                       "build_s": tv.get("build_s")});
        let _ = std::fs::write(a.dir.join(format!("cold-{}.json", tool.id)), v.to_string());
        eprintln!("sockbench: [{}] cold first run {ms:.1} ms", a.tag);
        return 0;
    }
    let mut checks = Vec::new();
    let mut check_secs = std::collections::BTreeMap::new();
    let chk = a.dir.join("check");
    let _ = std::fs::create_dir_all(&chk);
    // the generator's truth against the floor's own count
    match floor_truth(&a.env, t) {
        Some(ft) => {
            let o = check::gen_vs_floor(t, &ft);
            eprintln!("sockbench: check {:<18} {} {}", "generator", if o.ok { "ok  " } else { "FAIL" }, o.detail);
            checks.push(json!({"id": "generator", "ok": o.ok, "required": true, "detail": o.detail}));
        }
        None => checks.push(json!({"id": "generator", "ok": false, "required": true, "detail": "floor truth failed"})),
    }
    for tool in &sel {
        let Some(spec) = &tool.check else { continue };
        let before = floor_truth(&a.env, t).map(|f| f.0);
        let (out, code, secs) = capture(&spec.argv, Duration::from_secs(600));
        let after = floor_truth(&a.env, t).map(|f| f.0);
        check_secs.insert(tool.id, secs);
        let mut lo = t.tw_min;
        let mut hi = t.tw_max;
        for x in [before, after].into_iter().flatten() {
            lo = lo.min(x);
            hi = hi.max(x);
        }
        let lines = out.lines().count();
        let keep: String = if lines > 3000 {
            out.lines().take(3000).collect::<Vec<_>>().join("\n")
                + &format!("\n... ({lines} lines in all)\n")
        } else {
            out.clone()
        };
        let _ = std::fs::write(chk.join(format!("{}.txt", tool.id)), keep);
        let o = match spec.parser {
            Parser::Floor => check::compare_floor(out.lines().last().unwrap_or(""), t, (lo, hi)),
            Parser::SockstatTable => {
                check::compare_rows(check::parse_sockstat_table(&out), t, (lo, hi))
            }
            Parser::SockstatJson => match check::parse_sockstat_json(&out) {
                Some((recs, st)) => {
                    let mut o = check::compare(&recs, t, spec.scope, (lo, hi), spec.owners);
                    if !spec.owners
                        && tool.id == "sockstat-noowners"
                        && st.keys().any(|k| k != "not_requested")
                    {
                        o.ok = false;
                        o.detail = format!("owners_status {st:?}; {}", o.detail);
                    }
                    o
                }
                None => check::Outcome {
                    ok: false,
                    detail: format!("no schema-1 JSON (exit {code})"),
                },
            },
            p => {
                let recs = match p {
                    Parser::Ss => check::parse_ss(&out),
                    Parser::Netstat => check::parse_netstat(&out),
                    Parser::Lsof => check::parse_lsof(&out),
                    Parser::Psutil => check::parse_psutil(&out),
                    _ => check::parse_debsockstat(&out),
                };
                check::compare(&recs, t, spec.scope, (lo, hi), spec.owners)
            }
        };
        eprintln!(
            "sockbench: check {:<18} {} {} ({:.2} s)",
            tool.id,
            if o.ok {
                "ok  "
            } else if spec.required {
                "FAIL"
            } else {
                "diff"
            },
            o.detail,
            secs
        );
        checks.push(json!({"id": tool.id, "ok": o.ok, "required": spec.required, "detail": o.detail,
                           "scope": format!("{:?}", spec.scope), "exit": code, "tw_range": [lo, hi]}));
    }
    let mut timings = Vec::new();
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let load_start = load();
    if a.mode == "warm" {
        for tool in &sel {
            if crate::STOP.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            let slow = check_secs.get(tool.id).copied().unwrap_or(0.0) > 2.0;
            let runs = if slow && a.n >= 150_000 {
                a.runs.min(5)
            } else {
                a.runs
            };
            // The exporter answers the scrape tool: started before its series, stopped after.
            let serve = if tool.id == "serve-scrape" {
                match start_serve(&a.env) {
                    Some(c) => Some(c),
                    None => {
                        eprintln!("sockbench: sockstat serve did not answer; scrape not timed");
                        continue;
                    }
                }
            } else {
                None
            };
            let idle = wait_quiet(0.85, Duration::from_secs(a.quiet_wait));
            let hf = a.dir.join(format!("hf-{}.json", tool.id));
            let log = std::fs::File::create(a.dir.join(format!("hf-{}.log", tool.id))).ok();
            let mut cmd = Command::new("hyperfine");
            cmd.args([
                "-N",
                "-i",
                "--warmup",
                "1",
                "--runs",
                &runs.to_string(),
                "--style",
                "basic",
                "--export-json",
            ])
            .arg(&hf)
            .arg(format!("sh -c '{}'", tool.shell()));
            if let Some(l) = log {
                cmd.stdout(l.try_clone().map(Stdio::from).unwrap_or(Stdio::null()))
                    .stderr(Stdio::from(l));
            }
            let ok = cmd.status().map(|s| s.success()).unwrap_or(false);
            // one more warm run for the peak RSS
            let (rss_ms, rss, code) = timed_once(tool, &a.dir.join(format!("rss-{}.txt", tool.id)));
            // The exporter's own account of its collections, and the size of what it serves.
            let scrape = serve.map(|mut child| {
                let mut collect = Vec::new();
                let mut bytes = 0;
                for _ in 0..5 {
                    let (body, _, _) = capture(&tool.argv[..2].iter().cloned().chain([format!("http://{}/metrics", tools::SERVE_ADDR)]).collect::<Vec<_>>(), Duration::from_secs(60));
                    bytes = body.len();
                    if let Some(v) = body
                        .lines()
                        .find_map(|l| l.strip_prefix("sockstat_collect_duration_seconds "))
                        .and_then(|v| v.trim().parse::<f64>().ok())
                    {
                        collect.push(v * 1e3);
                    }
                }
                let _ = child.kill();
                let _ = child.wait();
                collect.sort_by(|a, b| a.total_cmp(b));
                json!({"collect_ms_median": collect.get(collect.len() / 2), "collect_ms_all": collect, "body_bytes": bytes})
            });
            let hv: Value = std::fs::read_to_string(&hf)
                .ok()
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or(Value::Null);
            let r = &hv["results"][0];
            let ms = |k: &str| r.get(k).and_then(Value::as_f64).map(|x| x * 1e3);
            eprintln!(
                "sockbench: time  {:<18} median {:>9.1} ms  min {:>9.1}  max {:>9.1}  rss {:>7} KiB  idle {:>3.0}%{}",
                tool.id,
                ms("median").unwrap_or(f64::NAN),
                ms("min").unwrap_or(f64::NAN),
                ms("max").unwrap_or(f64::NAN),
                rss,
                idle * 100.0,
                if ok { "" } else { "  (hyperfine failed)" }
            );
            timings.push(json!({
                "id": tool.id, "runs": runs, "median_ms": ms("median"), "min_ms": ms("min"), "max_ms": ms("max"),
                "mean_ms": ms("mean"), "stddev_ms": ms("stddev"), "user_s": r.get("user"), "system_s": r.get("system"),
                "idle_before": idle, "rss_kib": rss, "rss_run_ms": rss_ms, "rss_run_exit": code, "command": format!("sh -c '{}'", tool.shell()),
                "scrape": scrape,
            }));
        }
    }
    if a.mode == "warm"
        && a.tools.iter().any(|t| t == "pycall")
        && !crate::STOP.load(std::sync::atomic::Ordering::SeqCst)
    {
        if let Some(py) = &a.env.python {
            let idle = wait_quiet(0.85, Duration::from_secs(a.quiet_wait));
            let ok = crate::pycall::run(py, &a.env.scripts, &a.dir, a.runs);
            eprintln!(
                "sockbench: python calls {} (idle {:.0}%)",
                if ok {
                    "done"
                } else {
                    "FAILED (see pycall.log)"
                },
                idle * 100.0
            );
        }
    }
    // Where the listing's time goes: its phases as SOCKSTAT_TIMINGS reports them (median of 9).
    let phases = if a.mode == "warm" && a.tools.iter().any(|t| t == "sockstat") {
        a.env.sockstat.as_ref().map(|s| phase_medians(s, 9))
    } else {
        None
    };
    let v = json!({"n": a.n, "procs": a.procs, "truth": tv, "checks": checks, "timings": timings, "phases": phases,
                   "loadavg_start": load_start, "loadavg_end": load()});
    let _ = std::fs::write(
        a.dir.join("main.json"),
        serde_json::to_string_pretty(&v).unwrap(),
    );
    0
}
