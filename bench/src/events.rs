//! `sockbench events`: what `sockstat events` costs a workload of short TCP connections, and
//! whether it loses any.
//!
//!     cargo run --release -p sockstat-bench --bin sockbench -- events [--rate 20000]
//!         [--seconds 10] [--rounds 5] [--max] [--soak SECONDS] [--sockstat PATH] [--no-doc]
//!
//! Each trial runs in a fresh network namespace (`unshare --net --mount`): loopback up, a wide
//! ephemeral port range, then `sockchurn` (client and server threads making and closing
//! connections at `--rate` per second; 0 = as fast as they can) for `--seconds`, alone or beside
//! one observer:
//!
//! - `none`: the workload alone;
//! - `events-text`: `sockstat events` (text lines to /dev/null);
//! - `events-json`: `sockstat events --json` (JSON Lines to /dev/null);
//! - `events-stats`: `sockstat events --stats --json -q`, whose summary must count exactly the
//!   connections the workload made, with nothing lost;
//! - `bpftrace`: bpftrace counting the same tracepoint by command
//!   (`tracepoint:sock:inet_sock_set_state { @[comm] = count(); }`), with tracefs mounted in the
//!   trial's private mount namespace.
//!
//! The modes are interleaved round by round (the order rotates), and the table gives medians
//! over `--rounds`: the workload's rate, its ratio to `none` in the same round, the observer's
//! CPU time (user+system, from /proc/PID/stat) and peak RSS, and what it lost. One more trial
//! with `--bpf-stats` gives the kernel's own count of the programs' time per run. `--max` adds
//! the same at `--rate 0`. `--soak S` runs `events-json` for S seconds and samples sockstat's
//! RSS every 10 s.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{which, workspace_root};

const MODES: [&str; 5] = [
    "none",
    "events-text",
    "events-json",
    "events-stats",
    "bpftrace",
];
const PORT: &str = "47999";

struct Opts {
    rate: u64,
    seconds: f64,
    rounds: usize,
    max: bool,
    soak: Option<u64>,
    sockstat: PathBuf,
    doc: Option<PathBuf>,
}

fn usage() -> ! {
    eprintln!(
        "usage: sockbench events [--rate R] [--seconds S] [--rounds N] [--max] [--soak S] [--sockstat PATH] [--doc FILE|--no-doc]\n\
         \x20      sockbench events-trial MODE RATE SECONDS SOCKSTAT SOCKCHURN   (inside a namespace)"
    );
    std::process::exit(2)
}

/// `sockbench events ...`.
pub fn main(args: Vec<String>) -> i32 {
    let root = workspace_root();
    let mut o = Opts {
        rate: 20000,
        seconds: 10.0,
        rounds: 5,
        max: false,
        soak: None,
        sockstat: root.join("target/release/sockstat"),
        doc: Some(root.join("doc/reference/BENCHMARKS.md")),
    };
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--rate" => o.rate = v().parse().unwrap_or_else(|_| usage()),
            "--seconds" => o.seconds = v().parse().unwrap_or_else(|_| usage()),
            "--rounds" => o.rounds = v().parse().unwrap_or_else(|_| usage()),
            "--max" => o.max = true,
            "--soak" => o.soak = Some(v().parse().unwrap_or_else(|_| usage())),
            "--sockstat" => o.sockstat = PathBuf::from(v()),
            "--doc" => o.doc = Some(PathBuf::from(v())),
            "--no-doc" => o.doc = None,
            _ => usage(),
        }
    }
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("sockbench events: needs root (namespaces, BPF)");
        return 2;
    }
    if !o.sockstat.is_file() {
        eprintln!(
            "sockbench events: {} not found (cargo build --release)",
            o.sockstat.display()
        );
        return 2;
    }
    // Measure a private copy: others may rebuild target/release during a long run.
    let dir = std::env::temp_dir().join(format!("sockbench-events.{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let copy = dir.join("sockstat");
    if std::fs::copy(&o.sockstat, &copy).is_ok() {
        o.sockstat = copy;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let churn = exe.parent().unwrap().join("sockchurn");
    if !churn.is_file() {
        eprintln!("sockbench events: {} not found", churn.display());
        return 2;
    }
    let bpftrace = which("bpftrace").is_some();
    if !bpftrace {
        eprintln!("sockbench events: bpftrace not found (apt-get install bpftrace): its column stays empty");
    }
    let modes: Vec<&str> = MODES
        .iter()
        .copied()
        .filter(|m| *m != "bpftrace" || bpftrace)
        .collect();
    let trial = |mode: &str, rate: u64, seconds: f64| -> Value {
        let out = Command::new("unshare")
            .args(["--net", "--mount", "--fork", "--kill-child"])
            .arg(&exe)
            .args([
                "events-trial",
                mode,
                &rate.to_string(),
                &seconds.to_string(),
            ])
            .arg(&o.sockstat)
            .arg(&churn)
            .stderr(Stdio::inherit())
            .output()
            .expect("run a trial");
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.trim())
            .unwrap_or_else(|_| json!({"mode": mode, "error": text.trim()}))
    };
    let mut sections = Vec::new();
    let mut rates = vec![o.rate];
    if o.max {
        rates.push(0);
    }
    let load_before = loadavg();
    for &rate in &rates {
        let mut results: Vec<Value> = Vec::new();
        for round in 0..o.rounds {
            for i in 0..modes.len() {
                let mode = modes[(i + round) % modes.len()];
                eprintln!("sockbench events: rate {rate}, round {}, {mode}", round + 1);
                let mut r = trial(mode, rate, o.seconds);
                r["round"] = json!(round);
                results.push(r);
            }
        }
        eprintln!("sockbench events: rate {rate}, the kernel's count of the programs' time");
        let bpf = trial("events-bpfstats", rate, o.seconds);
        let _ = std::fs::write(
            dir.join(format!("events-{rate}.json")),
            serde_json::to_string_pretty(&json!({"trials": results, "bpf": bpf})).unwrap(),
        );
        sections.push(table(rate, o.seconds, o.rounds, &modes, &results, &bpf));
    }
    if let Some(secs) = o.soak {
        eprintln!("sockbench events: soak, {secs} s");
        let r = trial("events-soak", o.rate, secs as f64);
        sections.push(soak_table(o.rate, secs, &r));
    }
    let load_after = loadavg();
    let mut md = String::new();
    md.push_str(&format!(
        "Machine: {}; load average before {load_before}, after {load_after} (the 2 cores are shared with other engineers' builds and tests: rates vary from round to round, which is why the modes are interleaved and each ratio is taken within its round).\n\n",
        machine()
    ));
    for s in sections {
        md.push_str(&s);
        md.push('\n');
    }
    md.push_str(&format!(
        "Reproduce: `cargo build --release && cargo run --release -p sockstat-bench --bin sockbench -- events --rate {} --seconds {} --rounds {}{}{}` (as root). Raw results: `{}`.\n",
        o.rate,
        o.seconds,
        o.rounds,
        if o.max { " --max" } else { "" },
        o.soak.map(|s| format!(" --soak {s}")).unwrap_or_default(),
        dir.display()
    ));
    println!("{md}");
    if let Some(doc) = &o.doc {
        if let Err(e) = splice(doc, &md) {
            eprintln!("sockbench events: cannot update {}: {e}", doc.display());
            return 1;
        }
    }
    0
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpus} CPUs, Linux {}", kernel.trim())
}

const BEGIN: &str = "<!-- sockbench events: begin -->";
const END: &str = "<!-- sockbench events: end -->";
const HEADING: &str = "## Connection events: overhead (`sockbench events`)";

/// The `sockbench events` section of a document, from its heading to the end marker, so that
/// `sockbench run`, which rewrites the rest, keeps it.
pub fn kept_section(text: &str) -> Option<&str> {
    let a = text.find(BEGIN)?;
    let b = text[a..].find(END)? + a + END.len();
    let start = text[..a].rfind(HEADING).unwrap_or(a);
    Some(&text[start..b])
}

/// Replaces the part of `doc` between the events markers (or appends it).
fn splice(doc: &Path, md: &str) -> std::io::Result<()> {
    let text = std::fs::read_to_string(doc)?;
    let block = format!("{BEGIN}\n{md}{END}");
    let new = match (text.find(BEGIN), text.find(END)) {
        (Some(a), Some(b)) if b > a => format!("{}{block}{}", &text[..a], &text[b + END.len()..]),
        _ => format!("{text}\n{HEADING}\n\n{block}\n"),
    };
    std::fs::write(doc, new)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn table(
    rate: u64,
    seconds: f64,
    rounds: usize,
    modes: &[&str],
    results: &[Value],
    bpf: &Value,
) -> String {
    let mut s = format!(
        "### {} over loopback, {seconds} s per trial, {rounds} rounds (medians, min-max)\n\n",
        if rate == 0 {
            "As many connections per second as the workload can make".to_string()
        } else {
            format!("{rate} connections per second")
        }
    );
    s.push_str("| observer | workload rate, conn/s | of `none` in its round | observer CPU, s | observer peak RSS, MiB | lost |\n|---|---|---|---|---|---|\n");
    let none_rate = |round: u64| {
        results
            .iter()
            .find(|r| r["mode"] == "none" && r["round"] == round)
            .and_then(|r| r["rate"].as_f64())
    };
    for &mode in modes {
        let rs: Vec<&Value> = results.iter().filter(|r| r["mode"] == mode).collect();
        let rates: Vec<f64> = rs.iter().filter_map(|r| r["rate"].as_f64()).collect();
        let ratios: Vec<f64> = rs
            .iter()
            .filter_map(|r| Some(r["rate"].as_f64()? / none_rate(r["round"].as_u64()?)?))
            .collect();
        let cpu: Vec<f64> = rs.iter().filter_map(|r| r["cpu_s"].as_f64()).collect();
        let rss: Vec<f64> = rs
            .iter()
            .filter_map(|r| r["rss_kib"].as_f64())
            .map(|k| k / 1024.0)
            .collect();
        let lost: Vec<String> = rs
            .iter()
            .filter_map(|r| r.get("lost").map(|l| l.to_string()))
            .collect();
        let span = |v: &[f64], digits: usize| match (
            median(v.to_vec()),
            v.iter().cloned().reduce(f64::min),
            v.iter().cloned().reduce(f64::max),
        ) {
            (Some(m), Some(lo), Some(hi)) => format!("{m:.digits$} ({lo:.digits$}-{hi:.digits$})"),
            _ => "-".into(),
        };
        let errors: Vec<&str> = rs.iter().filter_map(|r| r["error"].as_str()).collect();
        s.push_str(&format!(
            "| {mode} | {} | {} | {} | {} | {}{} |\n",
            span(&rates, 0),
            if mode == "none" {
                "1".into()
            } else {
                span(&ratios, 3)
            },
            if mode == "none" {
                "-".into()
            } else {
                span(&cpu, 2)
            },
            if mode == "none" {
                "-".into()
            } else {
                span(&rss, 1)
            },
            if lost.is_empty() {
                "-".into()
            } else {
                lost.join(", ")
            },
            if errors.is_empty() {
                String::new()
            } else {
                format!(" (errors: {})", errors.join("; "))
            },
        ));
    }
    if let Some(progs) = bpf["bpf"].as_array() {
        s.push_str(&format!(
            "\nThe kernel's count of the programs' time in one more trial (`--bpf-stats`, which turns on BPF run-time accounting and so adds a little to each run), at {} connections per second: ",
            bpf["rate"].as_f64().map_or("?".into(), |r| format!("{r:.0}"))
        ));
        let parts: Vec<String> = progs
            .iter()
            .filter_map(|p| p.as_str().map(String::from))
            .collect();
        s.push_str(&parts.join("; "));
        s.push_str(".\n");
    }
    s
}

fn soak_table(rate: u64, secs: u64, r: &Value) -> String {
    let mut s = format!(
        "### Memory over {secs} s of churn at {rate} connections per second (`events-json`)\n\n| elapsed, s | sockstat RSS, MiB |\n|---|---|\n"
    );
    if let Some(samples) = r["rss_samples"].as_array() {
        for x in samples {
            s.push_str(&format!(
                "| {} | {:.1} |\n",
                x[0],
                x[1].as_f64().unwrap_or(0.0) / 1024.0
            ));
        }
    }
    s.push_str(&format!(
        "\nWorkload: {} connections ({} per second); lost: {}.\n",
        r["connections"], r["rate"], r["lost"]
    ));
    s
}

// ---------------------------------------------------------------------------------------------
// One trial, inside its namespace.

fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn status_kib(pid: u32, field: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `sockbench events-trial MODE RATE SECONDS SOCKSTAT SOCKCHURN`: prints one JSON object.
pub fn trial(args: Vec<String>) -> i32 {
    if args.len() != 5 {
        usage();
    }
    let (mode, rate, seconds) = (args[0].as_str(), &args[1], &args[2]);
    let (sockstat, churn) = (PathBuf::from(&args[3]), PathBuf::from(&args[4]));
    let _ = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status();
    let _ = std::fs::write("/proc/sys/net/ipv4/ip_local_port_range", "20000 65535");
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut observer = match mode {
        "none" => None,
        "bpftrace" => {
            let c = std::ffi::CString::new("/sys/kernel/tracing").unwrap();
            unsafe {
                libc::mount(
                    c"nodev".as_ptr(),
                    c.as_ptr(),
                    c"tracefs".as_ptr(),
                    0,
                    std::ptr::null(),
                );
            }
            Some(
                Command::new("bpftrace")
                    .args([
                        "-e",
                        "tracepoint:sock:inet_sock_set_state { @[comm] = count(); }",
                    ])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("bpftrace"),
            )
        }
        _ => {
            let mut c = Command::new(&sockstat);
            c.arg("events");
            match mode {
                "events-text" => {}
                "events-json" | "events-soak" => {
                    c.arg("--json");
                }
                "events-stats" => {
                    c.args(["--stats", "--json", "-q"]);
                }
                "events-bpfstats" => {
                    c.args(["--stats", "-q", "--bpf-stats"]);
                }
                _ => usage(),
            }
            let stdout = if mode == "events-stats" {
                Stdio::piped()
            } else {
                Stdio::null()
            };
            Some(
                c.stdout(stdout)
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("sockstat"),
            )
        }
    };
    // Let the observer attach (bpftrace compiles for a while).
    std::thread::sleep(Duration::from_millis(if mode == "bpftrace" {
        4000
    } else {
        1000
    }));
    let start = Instant::now();
    let mut churn = Command::new(&churn)
        .args(["--rate", rate, "--seconds", seconds, "--port", PORT])
        .stdout(Stdio::piped())
        .spawn()
        .expect("sockchurn");
    let mut rss_samples = Vec::new();
    if mode == "events-soak" {
        let pid = observer.as_ref().map(|c| c.id()).unwrap_or(0);
        let secs: f64 = seconds.parse().unwrap_or(0.0);
        let mut next = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            if start.elapsed().as_secs() >= next {
                if let Some(k) = status_kib(pid, "VmRSS:") {
                    rss_samples.push(json!([next, k]));
                }
                next += 10;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let mut out = String::new();
    churn.stdout.take().unwrap().read_to_string(&mut out).ok();
    let _ = churn.wait();
    let mut r: Value = serde_json::from_str(out.trim()).unwrap_or(json!({"error": out.trim()}));
    r["mode"] = json!(mode);
    if let Some(mut obs) = observer.take() {
        // The workload's last closes are in flight for a moment.
        std::thread::sleep(Duration::from_millis(500));
        let pid = obs.id();
        if let Some(t) = cpu_ticks(pid) {
            r["cpu_s"] = json!(t as f64 / hz);
        }
        if let Some(k) = status_kib(pid, "VmHWM:") {
            r["rss_kib"] = json!(k);
        }
        unsafe {
            libc::kill(
                pid as i32,
                if mode == "bpftrace" {
                    libc::SIGINT
                } else {
                    libc::SIGTERM
                },
            )
        };
        let mut stdout = String::new();
        if let Some(mut o) = obs.stdout.take() {
            o.read_to_string(&mut stdout).ok();
        }
        let mut stderr = String::new();
        if let Some(mut e) = obs.stderr.take() {
            e.read_to_string(&mut stderr).ok();
        }
        let status = obs.wait().ok().and_then(|s| s.code());
        r["observer_exit"] = json!(status);
        if mode.starts_with("events") {
            // sockstat says on stderr what it lost.
            let lost_line = stderr
                .lines()
                .find(|l| l.contains("lost"))
                .map(String::from);
            r["lost"] = json!(lost_line.map_or(0.into(), |l| json!(l)));
            if mode == "events-stats" {
                let summary: Value = stdout
                    .lines()
                    .last()
                    .and_then(|l| serde_json::from_str(l).ok())
                    .unwrap_or(Value::Null);
                let conns = |side: &str, cmd: &str| {
                    summary["stats"]
                        .as_array()
                        .map(|rows| {
                            rows.iter()
                                .filter(|x| x["side"] == side && x["command"] == cmd)
                                .filter_map(|x| x["connections"].as_u64())
                                .sum::<u64>()
                        })
                        .unwrap_or(0)
                };
                let made = r["connections"].as_u64().unwrap_or(0);
                r["lost"] = summary["lost"].clone();
                r["counted"] = json!({"client": conns("client", "churncli"), "server": conns("server", "churnsrv"), "made": made});
                if conns("client", "churncli") != made || conns("server", "churnsrv") != made {
                    r["lost"] = json!(format!(
                        "{} (counted {} client, {} server connections of {made})",
                        summary["lost"],
                        conns("client", "churncli"),
                        conns("server", "churnsrv")
                    ));
                }
            }
            if mode == "events-bpfstats" {
                r["bpf"] = json!(stderr
                    .lines()
                    .filter(|l| l.contains("per run") || l.contains("loaded"))
                    .map(|l| l.trim_start_matches("sockstat: ").to_string())
                    .collect::<Vec<_>>());
            }
        } else {
            // bpftrace prints its map on exit: the workload's state changes must all be there.
            let count = |name: &str| {
                stdout
                    .lines()
                    .find(|l| l.starts_with(&format!("@[{name}]:")))
                    .and_then(|l| l.rsplit(' ').next())
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            r["bpftrace_counts"] =
                json!({"churncli": count("churncli"), "churnsrv": count("churnsrv")});
        }
    }
    if mode == "events-soak" {
        r["rss_samples"] = json!(rss_samples);
    }
    println!("{r}");
    0
}
