//! `calibrate`: runs the diagnosis scenario matrix N times under cubic and BBR and prints, per
//! scenario and congestion control, how often `sockstat diagnose` was right, silent, wrong or
//! noisy, with the numbers behind the verdicts. With `--doc FILE` it rewrites the calibration
//! table in that file (between its `<!-- calibration:begin -->` and `<!-- calibration:end -->`
//! markers; `--busy` runs go between the `calibration-busy` markers).
//!
//! One command regenerates doc/reference/calibration.md's table (as root, from the workspace root):
//!
//!     cargo run --release -p sockstat-netlab --bin calibrate -- --runs 10 --doc doc/reference/calibration.md
//!
//! It builds `target/release/sockstat` first (unless `--sockstat PATH` is given). `--raw FILE`
//! saves every run (both diagnose documents, the listings before and after, what the
//! applications read) as JSON lines. `--busy N` keeps N CPU-bound processes running meanwhile.
//! No run is retried: each counts as it came out.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

use serde_json::Value;
use sockstat_netlab::matrix::{self, flow_numbers, Outcome, RunResult, Side, Sockstat};
use sockstat_netlab::sock::Cc;

struct Args {
    runs: usize,
    only: Vec<String>,
    ccs: Vec<Cc>,
    sockstat: Option<PathBuf>,
    raw: Option<PathBuf>,
    doc: Option<PathBuf>,
    busy: usize,
    verbose: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: calibrate [--runs N] [--only NAME,..] [--cc cubic,bbr] [--sockstat PATH]\n\
         \x20                [--raw FILE.jsonl] [--doc FILE] [--busy N] [-v]"
    );
    std::process::exit(2);
}

fn bad(what: &str, v: &str) -> ! {
    eprintln!("calibrate: invalid {what} '{v}'");
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut a = Args {
        runs: 10,
        only: vec![],
        ccs: Cc::ALL.to_vec(),
        sockstat: None,
        raw: None,
        doc: None,
        busy: 0,
        verbose: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match k.as_str() {
            "--runs" => {
                let v = val();
                a.runs = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| bad("--runs", &v));
            }
            "--only" => a.only = val().split(',').map(str::to_string).collect(),
            "--cc" => {
                a.ccs = val()
                    .split(',')
                    .map(|c| match c {
                        "cubic" => Cc::Cubic,
                        "bbr" => Cc::Bbr,
                        other => bad("--cc", other),
                    })
                    .collect()
            }
            "--sockstat" => a.sockstat = Some(val().into()),
            "--raw" => a.raw = Some(val().into()),
            "--doc" => a.doc = Some(val().into()),
            "--busy" => {
                let v = val();
                a.busy = v.parse().unwrap_or_else(|_| bad("--busy", &v));
            }
            "-v" | "--verbose" => a.verbose = true,
            "-h" | "--help" => usage(),
            other => bad("argument", other),
        }
    }
    a
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// CPU-bound processes, killed (by pid) when dropped.
struct Busy(Vec<Child>);

impl Busy {
    fn start(n: usize) -> std::io::Result<Busy> {
        let mut v = vec![];
        for _ in 0..n {
            v.push(
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()?,
            );
        }
        Ok(Busy(v))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|e| format!("unreadable ({e})"))
}

fn load1() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

fn main() -> ExitCode {
    let args = parse_args();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("calibrate: needs root (network namespaces, TUN devices, tc)");
        return ExitCode::from(2);
    }
    let bin = match &args.sockstat {
        Some(p) => p.clone(),
        None => {
            eprintln!("calibrate: building target/release/sockstat");
            let ok = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--release",
                    "-p",
                    "sockstat-cli",
                    "--bin",
                    "sockstat",
                ])
                .current_dir(workspace())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("calibrate: cargo build failed");
                return ExitCode::from(2);
            }
            workspace().join("target/release/sockstat")
        }
    };
    let sockstat = Sockstat { bin };
    let all = matrix::scenarios();
    let picked: Vec<usize> = (0..all.len())
        .filter(|&i| args.only.is_empty() || args.only.iter().any(|o| all[i].name == o))
        .collect();
    if picked.is_empty() {
        bad("--only", &args.only.join(","));
    }
    let mut raw = args.raw.as_ref().map(|p| {
        std::fs::File::create(p).unwrap_or_else(|e| {
            eprintln!("calibrate: {}: {e}", p.display());
            std::process::exit(2)
        })
    });
    let load_before = loadavg();
    let started = Instant::now();
    let _busy = match Busy::start(args.busy) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("calibrate: cannot start the busy loops: {e}");
            return ExitCode::from(2);
        }
    };
    let mut results: BTreeMap<(usize, Cc), Vec<RunResult>> = BTreeMap::new();
    // The 1-minute load average after every run: what the machine was doing meanwhile.
    let mut loads: Vec<f64> = vec![];
    for run in 1..=args.runs {
        for &i in &picked {
            for &cc in &args.ccs {
                let r = matrix::run(i, cc, &sockstat);
                println!(
                    "run {run:>2} {:<22} {:<5} {:<6} {:5.1} s{}",
                    r.scenario,
                    cc.name(),
                    r.outcome.name(),
                    r.seconds,
                    if r.outcome != Outcome::Right || args.verbose {
                        format!("\n      {}", r.problems.join("\n      "))
                    } else {
                        String::new()
                    }
                );
                if args.verbose {
                    if let Some((side, port)) = all[i].focus {
                        if let Some(n) = flow_numbers(&r, side, port) {
                            println!("      focus: {n}");
                        }
                    }
                }
                if let Some(f) = raw.as_mut() {
                    let _ = writeln!(f, "{}", r.to_json());
                }
                results.entry((i, cc)).or_default().push(r);
                if let Some(l) = load1() {
                    loads.push(l);
                }
            }
        }
    }
    let load_after = loadavg();
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let table = render(
        &all,
        &results,
        &args,
        &load_before,
        &load_after,
        &loads,
        minutes,
    );
    println!("\n{table}");
    if let Some(doc) = &args.doc {
        let marker = if args.busy > 0 {
            "calibration-busy"
        } else {
            "calibration"
        };
        if let Err(e) = splice(doc, marker, &table) {
            eprintln!("calibrate: {}: {e}", doc.display());
            return ExitCode::from(2);
        }
        eprintln!("calibrate: wrote the table into {}", doc.display());
    }
    let all_right = results
        .values()
        .all(|v| v.iter().filter(|r| r.outcome == Outcome::Right).count() * 10 >= 9 * v.len());
    if all_right {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn expected_text(s: &matrix::Scenario, cc: Cc) -> String {
    let expected: Vec<String> = s
        .expect
        .iter()
        .filter(|e| e.cc.is_none_or(|c| c == cc))
        .map(|e| {
            format!(
                "{}: {}{}{}",
                e.side.name(),
                e.rule,
                e.or.map(|r| format!(" or {r}")).unwrap_or_default(),
                if e.port.is_none() { " (namespace)" } else { "" }
            )
        })
        .collect();
    let tolerated: Vec<String> = s
        .allow
        .iter()
        .filter(|a| a.cc.is_none_or(|c| c == cc))
        .map(|a| format!("{} {}", a.side.name(), a.rule))
        .collect();
    let mut t = if expected.is_empty() {
        "nothing".to_string()
    } else {
        expected.join("; ")
    };
    if !tolerated.is_empty() {
        t.push_str(&format!(" (tolerated: {})", tolerated.join(", ")));
    }
    t
}

/// `lo-hi` of some values (or the one value), with `digits` decimals.
fn range(mut v: Vec<f64>, digits: usize) -> Option<String> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let (lo, hi) = (v[0], v[v.len() - 1]);
    Some(if (hi - lo).abs() < 0.5 * 10f64.powi(-(digits as i32)) {
        format!("{lo:.digits$}")
    } else {
        format!("{lo:.digits$}-{hi:.digits$}")
    })
}

/// The evidence numbers that decide each expected rule, over the runs that found it: what
/// the table shows for a scenario that expects findings.
fn deciding(rule: &str) -> &'static [(&'static str, &'static str, usize, f64)] {
    // (evidence key, label, decimals, scale)
    match rule {
        "send-buffer-limited" => &[
            ("limits_per_rtt_seen", "goodput/ceiling", 2, 1.0),
            ("busy_share", "busy", 2, 1.0),
            ("sndbuf_limited_share", "sndbuf_limited", 2, 1.0),
        ],
        "receive-window-limited" | "window-scaling-missing" => &[
            ("limits_per_rtt_seen", "goodput/ceiling", 2, 1.0),
            ("rwnd_limited_share", "rwnd_limited", 2, 1.0),
        ],
        "receive-buffer-locked" => &[("limits_per_rtt_seen", "goodput/ceiling", 2, 1.0)],
        "delayed-ack" => &[("inflation_us", "srtt-min_rtt ms", 1, 1e-3)],
        "listen-overflow" => &[("accept_queue", "accept queue", 0, 1.0)],
        "retransmissions" => &[
            ("connections", "connections", 0, 1.0),
            ("max_waited_s", "waited s", 1, 1.0),
            ("retrans_share", "resent", 2, 1.0),
            ("max_retrans_share", "resent", 2, 1.0),
        ],
        "ephemeral-ports" => &[("usage_share", "ports used", 2, 1.0)],
        "timewait-syn-rejected" => &[("ack_skipped_timewait_delta", "ACKs skipped", 0, 1.0)],
        "receiver-not-reading" => &[
            ("send_q_bytes", "stuck Send-Q", 0, 1.0),
            ("recv_q_bytes", "unread Recv-Q", 0, 1.0),
        ],
        _ => &[],
    }
}

/// The numbers behind a row: for each expected finding, its deciding evidence over the runs
/// that found it; for the focus flow, what the rules judge it by (from the listings), which is
/// what keeps a healthy flow silent.
fn numbers_text(s: &matrix::Scenario, cc: Cc, runs: &[RunResult]) -> String {
    let mut parts = vec![];
    for e in s.expect.iter().filter(|e| e.cc.is_none_or(|c| c == cc)) {
        let side = match e.side {
            Side::Client => 0,
            Side::Server => 1,
        };
        let found: Vec<&Value> = runs
            .iter()
            .filter_map(|r| {
                r.diagnose[side]["findings"].as_array()?.iter().find(|f| {
                    f["rule"] == e.rule
                        && e.port.is_none_or(|p| matrix::finding_ports(f).contains(&p))
                })
            })
            .collect();
        let mut bits = vec![];
        for (key, label, digits, scale) in deciding(e.rule) {
            let v: Vec<f64> = found
                .iter()
                .filter_map(|f| f["evidence"][*key].as_f64())
                .map(|x| x * scale)
                .collect();
            if let Some(r) = range(v, *digits) {
                bits.push(format!("{label} {r}"));
            }
        }
        let levels: Vec<&str> = found
            .iter()
            .filter_map(|f| f["confidence"]["level"].as_str())
            .collect();
        if !levels.is_empty() {
            let high = levels.iter().filter(|l| **l == "high").count();
            bits.push(format!("confidence high {high}/{}", levels.len()));
        }
        if !bits.is_empty() {
            parts.push(format!("{} {}: {}", e.side.name(), e.rule, bits.join(", ")));
        }
    }
    if let Some((side, port)) = s.focus {
        let nums: Vec<Value> = runs
            .iter()
            .filter_map(|r| flow_numbers(r, side, port))
            .collect();
        let get = |f: &dyn Fn(&Value) -> Option<f64>, digits: usize| {
            range(nums.iter().filter_map(f).collect(), digits)
        };
        let mut bits = vec![];
        if let Some(x) = get(&|n| Some(n["goodput_bytes_per_sec"].as_f64()? / 1e6), 2) {
            bits.push(format!("{x} MB/s"));
        }
        if let Some(x) = get(
            &|n| Some(n["rtt_us"].as_f64()? / n["min_rtt_us"].as_f64().filter(|&m| m > 0.0)?),
            1,
        ) {
            bits.push(format!("srtt/min_rtt {x}"));
        }
        let per_rtt = |n: &Value, limit: &str| {
            Some(
                n["goodput_bytes_per_sec"].as_f64()? * n["rtt_us"].as_f64()?
                    / 1e6
                    / n[limit].as_f64().filter(|&l| l > 0.0)?,
            )
        };
        if let Some(x) = get(&|n| per_rtt(n, "sndbuf_bytes"), 2) {
            bits.push(format!("per RTT: {x} tb"));
        }
        if let Some(x) = get(&|n| per_rtt(n, "snd_wnd_bytes"), 2) {
            bits.push(format!("{x} windows"));
        }
        if let Some(x) = get(&|n| n["busy_share"].as_f64(), 2) {
            bits.push(format!("busy {x}"));
        }
        if !bits.is_empty() {
            parts.push(format!("focus flow (listings): {}", bits.join(", ")));
        }
    }
    parts.join("; ")
}

fn render(
    all: &[matrix::Scenario],
    results: &BTreeMap<(usize, Cc), Vec<RunResult>>,
    args: &Args,
    load_before: &str,
    load_after: &str,
    loads: &[f64],
    minutes: f64,
) -> String {
    let mut sorted = loads.to_vec();
    sorted.sort_by(f64::total_cmp);
    let during = match sorted.as_slice() {
        [] => String::new(),
        v => format!(
            ", 1-minute load average {:.1}-{:.1} during the runs (median {:.1})",
            v[0],
            v[v.len() - 1],
            v[v.len() / 2]
        ),
    };
    let mut t = String::new();
    t.push_str(&format!(
        "Kernel {}, {} CPUs, {} runs per row, diagnose --interval 1; load average (1, 5, 15 min) \
         {} before, {} after{during}; {:.0} minutes{}.\n\n",
        kernel(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        args.runs,
        load_before,
        load_after,
        minutes,
        if args.busy > 0 {
            format!(
                ", with {} CPU-bound processes running throughout",
                args.busy
            )
        } else {
            String::new()
        }
    ));
    t.push_str(
        "| scenario | cc | runs | expected | right | silent | wrong | noisy | the numbers that \
         decide (min-max over the runs) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for ((i, cc), runs) in results {
        let s = &all[*i];
        let count = |o: Outcome| runs.iter().filter(|r| r.outcome == o).count();
        let broken = count(Outcome::Broken);
        t.push_str(&format!(
            "| {} | {} | {}{} | {} | {} | {} | {} | {} | {} |\n",
            s.name,
            cc.name(),
            runs.len(),
            if broken > 0 {
                format!(" ({broken} broken)")
            } else {
                String::new()
            },
            expected_text(s, *cc),
            count(Outcome::Right),
            count(Outcome::Silent),
            count(Outcome::Wrong),
            count(Outcome::Noisy),
            numbers_text(s, *cc, runs),
        ));
    }
    t
}

/// Replaces the text between `<!-- MARKER:begin -->` and `<!-- MARKER:end -->` in `doc`.
fn splice(doc: &Path, marker: &str, table: &str) -> std::io::Result<()> {
    let text = std::fs::read_to_string(doc)?;
    let (b, e) = (
        format!("<!-- {marker}:begin -->"),
        format!("<!-- {marker}:end -->"),
    );
    let (Some(i), Some(j)) = (text.find(&b), text.find(&e)) else {
        return Err(std::io::Error::other(format!(
            "no {b} ... {e} markers to put the table between"
        )));
    };
    let out = format!("{}{b}\n{table}{}", &text[..i], &text[j..]);
    std::fs::write(doc, out)
}
