//! sockbench: the benchmark runner.
//!
//! One command (from the workspace root, as root):
//!
//!     cargo run --release -p sockstat-bench --bin sockbench -- run
//!
//! For every scale it starts a private network + pid namespace
//! (`unshare --net --pid --fork --mount-proc --kill-child`), brings `lo` up, builds the
//! table with `sockgen`, checks what every tool reports against the generator's truth,
//! times every tool with hyperfine (warm-up 1, then N runs; medians and min-max), takes
//! one peak-RSS run per tool (`/usr/bin/time -f %M`) and, in a
//! fresh namespace and table per tool, the cold first run. Results go to `bench/out/`
//! (raw hyperfine JSON and tool outputs) and `doc/reference/BENCHMARKS.md`.
//!
//! `sockbench check -n 300 -p 10` runs only the correctness check (used by the smoke test).
//! `sockbench serve --zones 1,500 -n 200k` measures scrapes of `sockstat serve -Z` on a node with
//! that many zones (`serve.rs`).

mod check;
mod events;
mod inner;
mod pycall;
mod report;
mod serve;
mod tools;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Niceness of everything in the benchmark namespaces (tools, hyperfine, sockgen).
pub const NICE: libc::c_int = -15;

pub static STOP: AtomicBool = AtomicBool::new(false);
/// `--quiet-wait`, for the namespaces' runners.
pub static QUIET_WAIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(90);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[derive(Clone, Debug)]
pub struct Opts {
    pub scales: Vec<(usize, usize)>,
    pub runs: Option<usize>,
    pub out: PathBuf,
    pub doc: Option<PathBuf>,
    pub sockstat: Option<PathBuf>,
    pub build: bool,
    pub cold: String,
    pub tools: Option<Vec<String>>,
    pub check_only: bool,
    pub python: Option<PathBuf>,
    /// Longest wait, before each tool's series, for the machine to be 85 % idle (seconds).
    pub quiet_wait: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: sockbench run [--scales 1k,10k,100k,200k] [--runs N] [--out DIR] [--doc FILE|--no-doc]\n\
         \x20                [--sockstat PATH|--no-sockstat] [--no-build] [--cold all|sockstat|none] [--tools a,b,..] [--quiet-wait SECS]\n\
         \x20                [--python PATH]   (psutil and the sockstat Python package: python3 by default)\n\
         \x20      sockbench report [--scales ..] [--out DIR] [--doc FILE]   (re-render from saved results)\n\
         \x20      sockbench python --python PATH [--scales 1k,10k,100k] [--runs N]   (only the Python call rows,\n\
         \x20                spliced into the doc's Python section)\n\
         \x20      sockbench check [-n SOCKETS] [-p PROCS] [--sockstat PATH|--no-sockstat] [--tools a,b,..]\n\
         \x20      sockbench serve [--zones 1,500] [-n 200k] [-p 500] [--scrapes 10] (see `sockbench serve --help`)\n\
         \x20      sockbench events [--rate R] [--seconds S] [--rounds N] [--max] [--soak S]  (connection events)\n\
         scales: N or N:PROCS (1k=50, 10k=100, 60k=300, 100k=300, 200k=500 processes by default)"
    );
    std::process::exit(2)
}

pub fn parse_n(s: &str) -> Option<usize> {
    let s = s.to_ascii_lowercase();
    if let Some(x) = s.strip_suffix('k') {
        x.parse::<usize>().ok().map(|v| v * 1000)
    } else {
        s.parse().ok()
    }
}

fn default_procs(n: usize) -> usize {
    match n {
        0..=2000 => 50,
        2001..=20000 => 100,
        20001..=150000 => 300,
        _ => 500,
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(|s| s.as_str()) == Some("inner") {
        args.remove(0);
        std::process::exit(inner::main(args));
    }
    if args.first().map(|s| s.as_str()) == Some("serve-inner") {
        args.remove(0);
        std::process::exit(serve::inner(args));
    }
    if args.first().map(|s| s.as_str()) == Some("serve") {
        args.remove(0);
        unsafe {
            libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
            libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        }
        std::process::exit(serve::main(args));
    }
    match args.first().map(|s| s.as_str()) {
        Some("events") => {
            args.remove(0);
            std::process::exit(events::main(args));
        }
        Some("events-trial") => {
            args.remove(0);
            std::process::exit(events::trial(args));
        }
        _ => {}
    }
    let cmd = if args.is_empty() || args[0].starts_with('-') {
        "run".to_string()
    } else {
        args.remove(0)
    };
    let root = workspace_root();
    let mut o = Opts {
        scales: vec![(1000, 50), (10000, 100), (100000, 300), (200000, 500)],
        runs: None,
        out: root.join("bench/out"),
        doc: Some(root.join("doc/reference/BENCHMARKS.md")),
        sockstat: Some(root.join("target/release/sockstat")),
        build: true,
        cold: "all".into(),
        tools: None,
        check_only: cmd == "check",
        python: None,
        quiet_wait: 90,
    };
    let (mut n, mut p) = (300usize, 10usize);
    let mut scales_given = false;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--scales" => {
                scales_given = true;
                o.scales = v()
                    .split(',')
                    .map(|s| {
                        let (a, b) = s
                            .split_once(':')
                            .map(|(a, b)| (a, Some(b)))
                            .unwrap_or((s, None));
                        let n = parse_n(a).unwrap_or_else(|| usage());
                        let p = b
                            .map(|b| b.parse().unwrap_or_else(|_| usage()))
                            .unwrap_or(default_procs(n));
                        (n, p)
                    })
                    .collect()
            }
            "-n" => n = parse_n(&v()).unwrap_or_else(|| usage()),
            "-p" => p = v().parse().unwrap_or_else(|_| usage()),
            "--runs" => o.runs = Some(v().parse().unwrap_or_else(|_| usage())),
            "--out" => o.out = PathBuf::from(v()),
            "--doc" => o.doc = Some(PathBuf::from(v())),
            "--no-doc" => o.doc = None,
            "--sockstat" => o.sockstat = Some(PathBuf::from(v())),
            "--no-sockstat" => o.sockstat = None,
            "--no-build" => o.build = false,
            "--cold" => o.cold = v(),
            "--quiet-wait" => o.quiet_wait = v().parse().unwrap_or_else(|_| usage()),
            "--tools" => o.tools = Some(v().split(',').map(String::from).collect()),
            "--python" => o.python = Some(PathBuf::from(v())),
            _ => usage(),
        }
    }
    if cmd == "python" {
        // Only the Python call rows, spliced into the existing doc (crate::pycall::splice).
        o.tools = Some(vec!["pycall".into()]);
        o.cold = "none".into();
        o.build = false;
        if o.out == root.join("bench/out") {
            o.out = root.join("bench/out/python");
        }
        if !scales_given {
            o.scales = vec![(1000, 50), (10000, 100), (100000, 300)];
        }
    }
    if o.check_only {
        o.scales = vec![(n, p)];
        o.doc = None;
        o.build = false;
        if o.out == root.join("bench/out") {
            o.out = std::env::temp_dir().join(format!("sockbench-check.{}", std::process::id()));
        }
    } else if cmd == "report" {
        std::process::exit(rerender(&o));
    } else if cmd != "run" && cmd != "python" {
        usage();
    }
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, on_signal as *const () as libc::sighandler_t);
    }
    std::process::exit(outer(o));
}

fn outer(mut o: Opts) -> i32 {
    QUIET_WAIT.store(o.quiet_wait, Ordering::SeqCst);
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("sockbench: needs root (network and pid namespaces, RLIMIT_NOFILE)");
        return 2;
    }
    for t in ["unshare", "ip"] {
        if which(t).is_none() {
            eprintln!("sockbench: `{t}` not found (util-linux, iproute2)");
            return 2;
        }
    }
    let python_only = o.tools.as_deref() == Some(&["pycall".to_string()][..]);
    if !o.check_only && !python_only && which("hyperfine").is_none() {
        eprintln!("sockbench: hyperfine not found: apt-get install hyperfine");
        return 2;
    }
    let _ = std::fs::create_dir_all(&o.out);
    if o.build {
        eprintln!("sockbench: cargo build --release -p sockstat-cli");
        let ok = Command::new("cargo")
            .args(["build", "--release", "-p", "sockstat-cli"])
            .current_dir(workspace_root())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!(
                "sockbench: building sockstat failed; using the existing binary if there is one"
            );
        }
    }
    // Measure a private copy: others may rebuild target/release/sockstat during a long run.
    if let Some(s) = o.sockstat.clone() {
        if s.is_file() && !o.check_only {
            let copy = o.out.join("sockstat");
            if std::fs::copy(&s, &copy).is_ok() {
                o.sockstat = Some(copy);
            }
        }
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(workspace_root())
            .args(args)
            .output()
            .ok()
            .map(|x| String::from_utf8_lossy(&x.stdout).trim().to_string())
            .unwrap_or_default()
    };
    if !o.check_only {
        let version = o
            .sockstat
            .as_ref()
            .and_then(|s| Command::new(s).arg("--version").output().ok())
            .map(|x| String::from_utf8_lossy(&x.stdout).trim().to_string())
            .unwrap_or_default();
        let meta = serde_json::json!({
            "git": git(&["rev-parse", "--short", "HEAD"]),
            "git_dirty": !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty(),
            "sockstat_version": version,
            "quiet_wait_s": o.quiet_wait,
            "loadavg_at_start": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
            "started_unix": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        });
        let _ = std::fs::write(o.out.join("run.json"), meta.to_string());
    }
    if let Some(s) = &o.sockstat {
        if !tools::sockstat_works(s) {
            eprintln!(
                "sockbench: {} is missing or has no working --json; going on without it",
                s.display()
            );
            o.sockstat = None;
        }
    }
    let env = tools::Env::detect(o.sockstat.clone(), &o.out, o.python.as_deref());
    let all = tools::all_tools(&env);
    let selected: Vec<&tools::Tool> = all
        .iter()
        .filter(|t| match &o.tools {
            Some(list) => list.iter().any(|x| {
                t.id == x
                    || (x == "floor" && t.id.starts_with("floor"))
                    || (x == "ss" && t.id.starts_with("ss-"))
                    || (x == "sockstat" && t.id.starts_with("sockstat"))
            }),
            None => true,
        })
        .filter(|t| !o.check_only || t.check.is_some())
        .collect();
    let mut ids: Vec<String> = selected.iter().map(|t| t.id.to_string()).collect();
    // The Python call rows are timed inside one interpreter, not by hyperfine (crate::pycall).
    if env.pycall
        && !o.check_only
        && o.tools
            .as_ref()
            .is_none_or(|l| l.iter().any(|x| x == "pycall"))
    {
        ids.push("pycall".into());
    }
    eprintln!("sockbench: tools: {}", ids.join(" "));
    let mut results = Vec::new();
    let mut failed_checks = 0;
    for &(n, p) in &o.scales {
        if STOP.load(Ordering::SeqCst) {
            break;
        }
        let dir = o.out.join(report::scale_name(n));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create out dir");
        let runs = o.runs.unwrap_or(match n {
            0..=20000 => 15,
            20001..=150000 => 9,
            _ => 7,
        });
        eprintln!("sockbench: === {n} sockets over {p} processes ({runs} runs) ===");
        let mode = if o.check_only { "check" } else { "warm" };
        let r = in_namespace(&env, n, p, &dir, mode, &ids, runs, "main");
        if r != 0 {
            eprintln!("sockbench: scale {n}: inner run failed (exit {r})");
            if o.check_only {
                return 1;
            }
            continue;
        }
        if !o.check_only && o.cold != "none" {
            for t in &selected {
                if STOP.load(Ordering::SeqCst) {
                    break;
                }
                let want = o.cold == "all"
                    || (o.cold == "sockstat" && (t.id == "sockstat" || t.id == "floor-c"));
                if !want || t.id == "wrapper" {
                    continue;
                }
                let r = in_namespace(
                    &env,
                    n,
                    p,
                    &dir,
                    "cold",
                    &[t.id.to_string()],
                    1,
                    &format!("cold-{}", t.id),
                );
                if r != 0 {
                    eprintln!("sockbench: cold run of {} failed (exit {r})", t.id);
                }
            }
        }
        match report::load_scale(&dir, n, p) {
            Some(s) => {
                failed_checks += s.failed_required();
                report::print_scale(&s);
                results.push(s);
            }
            None => eprintln!("sockbench: no results for scale {n}"),
        }
    }
    if STOP.load(Ordering::SeqCst) {
        eprintln!("sockbench: interrupted");
        return 130;
    }
    if o.check_only {
        let _ = std::fs::remove_dir_all(&o.out);
        return if failed_checks > 0 || results.is_empty() {
            1
        } else {
            0
        };
    }
    if python_only {
        return pycall::splice(&results, &o);
    }
    let rep = report::render(&results, &env, &o);
    println!("{}", rep.summary);
    if let Some(doc) = &o.doc {
        if let Err(e) = std::fs::write(doc, &rep.markdown) {
            eprintln!("sockbench: cannot write {}: {e}", doc.display());
        } else {
            eprintln!("sockbench: wrote {}", doc.display());
        }
    }
    let _ = std::fs::write(o.out.join("BENCHMARKS.md"), &rep.markdown);
    0
}

/// `sockbench report`: renders the summary and BENCHMARKS.md again from the results
/// already in the out dir (no measuring).
fn rerender(o: &Opts) -> i32 {
    let mut scales = Vec::new();
    for (n, _) in &o.scales {
        let dir = o.out.join(report::scale_name(*n));
        let procs = std::fs::read_to_string(dir.join("main.json"))
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|v| v["procs"].as_u64());
        if let Some(p) = procs {
            if let Some(s) = report::load_scale(&dir, *n, p as usize) {
                scales.push(s);
            }
        }
    }
    if scales.is_empty() {
        eprintln!("sockbench: no results under {}", o.out.display());
        return 1;
    }
    let env = tools::Env::detect(
        o.sockstat.clone().filter(|s| s.is_file()),
        &o.out,
        o.python.as_deref(),
    );
    let rep = report::render(&scales, &env, o);
    println!("{}", rep.summary);
    if let Some(doc) = &o.doc {
        if std::fs::write(doc, &rep.markdown).is_err() {
            eprintln!("sockbench: cannot write {}", doc.display());
            return 1;
        }
        eprintln!("sockbench: wrote {}", doc.display());
    }
    0
}

pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs `sockbench inner ...` as pid 1 of a new net+pid+mount namespace and waits.
/// If we are told to stop, unshare is killed, and with it (--kill-child) everything
/// in the namespace.
#[allow(clippy::too_many_arguments)]
fn in_namespace(
    env: &tools::Env,
    n: usize,
    p: usize,
    dir: &Path,
    mode: &str,
    ids: &[String],
    runs: usize,
    tag: &str,
) -> i32 {
    let me = std::env::current_exe().expect("current_exe");
    let quiet_wait = QUIET_WAIT.load(Ordering::SeqCst);
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
    .arg("inner")
    .args([
        "--n",
        &n.to_string(),
        "--procs",
        &p.to_string(),
        "--mode",
        mode,
        "--runs",
        &runs.to_string(),
        "--quiet-wait",
        &quiet_wait.to_string(),
    ])
    .arg("--dir")
    .arg(dir)
    .args(["--tag", tag, "--tools", &ids.join(",")])
    .args(["--env", &env.to_arg()]);
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
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sockbench: unshare: {e}");
            return 2;
        }
    };
    // bounded: no scale of this kit needs anywhere near 3 hours
    let deadline = Instant::now() + Duration::from_secs(3 * 3600);
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            // the tmpfs went with the namespace; drop its (empty) mount point
            let _ = std::fs::remove_dir(dir.join(format!("run-{tag}")));
            return st.code().unwrap_or(1);
        }
        if STOP.load(Ordering::SeqCst) || Instant::now() > deadline {
            unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
            let _ = child.wait();
            let _ = std::fs::remove_dir(dir.join(format!("run-{tag}")));
            return 130;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
