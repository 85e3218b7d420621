//! The Python rows: `sockstat.net_connections()` (the Python package, python/) against
//! `psutil.net_connections()`, timed as calls inside one interpreter (its start and the imports
//! are not counted), on the scale's table. Runs where the benchmark's Python imports both
//! (`--python PATH` picks the interpreter).

use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// The timing script: one uncounted call of each, then `runs` rounds of every call (the order
/// reversed every other round), a garbage collection before each call, wall and cpu seconds of
/// the call alone; then what each returned for the same table.
pub const SCRIPT: &str = r#"
import gc, json, sys, time, warnings
warnings.simplefilter("ignore")
import psutil, sockstat

runs, out = int(sys.argv[1]), sys.argv[2]
calls = [
    ("sockstat-inet", sockstat.net_connections, ("inet",)),
    ("psutil-inet", psutil.net_connections, ("inet",)),
    ("sockstat-all", sockstat.net_connections, ("all",)),
    ("psutil-all", psutil.net_connections, ("all",)),
    ("sockets", sockstat.sockets, ()),
]

def timed(f, args):
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    r = f(*args)
    t1, c1 = time.perf_counter(), time.process_time()
    return r, t1 - t0, c1 - c0

res = {name: {"wall_s": [], "cpu_s": [], "rows": 0} for name, _, _ in calls}
for name, f, args in calls:
    timed(f, args)
for i in range(runs):
    for name, f, args in (calls if i % 2 == 0 else calls[::-1]):
        r, wall, cpu = timed(f, args)
        res[name]["wall_s"].append(wall)
        res[name]["cpu_s"].append(cpu)
        res[name]["rows"] = len(r)
        del r

def key(c):
    la = tuple(c.laddr) if isinstance(c.laddr, tuple) else c.laddr
    if c.family == 1:  # AF_UNIX: psutil cannot read raddr
        return (int(c.family), int(c.type), la, c.status)
    ra = tuple(c.raddr) if isinstance(c.raddr, tuple) else c.raddr
    return (int(c.family), int(c.type), la, ra, c.status)

check = {}
for kind in ("inet", "all"):
    ours, theirs = sockstat.net_connections(kind), psutil.net_connections(kind)
    held = {}
    for c in ours:
        held.setdefault(key(c), set()).add((c.pid, c.fd))
    tk = {key(c) for c in theirs}
    check[kind] = {
        "rows": [len(ours), len(theirs)],
        "only_sockstat": len(set(held) - tk),
        "only_psutil": len(tk - set(held)),
        "psutil_holders_missing": sum(
            1 for c in theirs if c.pid is not None and (c.pid, c.fd) not in held.get(key(c), ())
        ),
        "rows_with_pid": [sum(c.pid is not None for c in ours), sum(c.pid is not None for c in theirs)],
    }
json.dump({"calls": res, "check": check, "sockstat": sockstat.__version__,
           "psutil": psutil.__version__, "python": sys.version.split()[0]}, open(out, "w"))
"#;

/// True when `python` imports both the sockstat package and psutil.
pub fn available(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import sockstat, psutil"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Runs the script on the current table; results in `dir/pycall.json`. Returns false on failure.
pub fn run(python: &Path, scripts: &Path, dir: &Path, runs: usize) -> bool {
    let script = scripts.join("pycall.py");
    if std::fs::write(&script, SCRIPT).is_err() {
        return false;
    }
    let out = dir.join("pycall.json");
    let log = std::fs::File::create(dir.join("pycall.log")).ok();
    let mut cmd = Command::new(python);
    cmd.arg(&script).arg(runs.to_string()).arg(&out);
    if let Some(l) = log {
        cmd.stdout(l.try_clone().map(Stdio::from).unwrap_or(Stdio::null()))
            .stderr(Stdio::from(l));
    }
    cmd.status().map(|s| s.success()).unwrap_or(false) && out.is_file()
}

fn median(v: &Value) -> Option<f64> {
    let mut x: Vec<f64> = v.as_array()?.iter().filter_map(Value::as_f64).collect();
    if x.is_empty() {
        return None;
    }
    x.sort_by(|a, b| a.total_cmp(b));
    let n = x.len();
    Some(if n % 2 == 1 {
        x[n / 2]
    } else {
        (x[n / 2 - 1] + x[n / 2]) / 2.0
    })
}

fn range(v: &Value) -> Option<(f64, f64)> {
    let x: Vec<f64> = v.as_array()?.iter().filter_map(Value::as_f64).collect();
    let lo = x.iter().copied().reduce(f64::min)?;
    let hi = x.iter().copied().reduce(f64::max)?;
    Some((lo, hi))
}

/// Median wall ms of one call at one scale.
pub fn median_ms(r: &Value, call: &str) -> Option<f64> {
    median(&r["calls"][call]["wall_s"]).map(|s| s * 1e3)
}

const CALLS: [(&str, &str); 5] = [
    (
        "sockstat-inet",
        "`sockstat.net_connections()` (kind `inet`)",
    ),
    ("psutil-inet", "`psutil.net_connections()` (kind `inet`)"),
    ("sockstat-all", "`sockstat.net_connections('all')`"),
    ("psutil-all", "`psutil.net_connections('all')`"),
    (
        "sockets",
        "`sockstat.sockets()` (every socket, JSON-contract objects)",
    ),
];

/// Where the time of `net_connections()` goes: measured by hand, not by the run (kept with the
/// section so that it stays next to the numbers it explains).
const PROFILE: &str = "\nWhere the time of `sockstat.net_connections()` goes at 100k, from `perf record -g -p PID` \
    of a Python process making eight `net_connections('inet')` calls (57,000 rows each) on the 100k table in its \
    namespace, as root (BPF owner scan), on 2026-11-25 under other load: 49 % of the samples in the kernel \
    (the sock_diag dumps: `tcp_diag_dump` 14 %, `inet_diag_msg_attrs_fill` and `tcp_diag_get_info` 6 %; the \
    owner scan's walk of every fd table, `fget_task_next`, 8 %; page faults of growing buffers), 13 % in the \
    owner-scan BPF program, 21 % in the library's user space (decoding, joining and sorting: `sys::collect` \
    5 %, `netlink::dump` 4 %), 12 % in CPython (making and freeing the rows) and 4 % in libc. Building the \
    57,000 `sconn` and 114,000 `addr` tuples is about an eighth of the call; the rest is the gathering that \
    `sockstat -4 -6` does too, so at 100k the ratio to psutil is bounded by the library's collection (the \
    sock_diag dumps and the owner scan), not by the binding. Two costs of the binding were found and removed \
    this way: Python's cyclic garbage collector running over the growing result (in one run 0.45 s with it, \
    0.20 s without: it is now paused while the rows are built, and the immutable rows are untracked), and, \
    for `sockets()`, a new key string per field of every object (2.28 s against 1.29 s in one run at 100k: \
    keys and short repeated values are now made once per call).\n";

/// The heading of the Python section of BENCHMARKS.md.
pub const HEADING: &str =
    "## Python: `sockstat.net_connections()` against `psutil.net_connections()`";

/// The Python section of BENCHMARKS.md: `scales` are (name, pycall.json) per scale;
/// `provenance`, for a `sockbench python` run, says which run measured it.
pub fn section(
    scales: &[(String, Value)],
    fmt_ms: fn(f64) -> String,
    provenance: Option<&str>,
) -> String {
    let mut md = String::new();
    if scales.is_empty() {
        return md;
    }
    let names: Vec<&str> = scales.iter().map(|(n, _)| n.as_str()).collect();
    let _ = writeln!(md, "{HEADING}\n");
    if let Some(p) = provenance {
        let _ = writeln!(md, "{p}\n");
    }
    let _ = writeln!(
        md,
        "Each cell: the median wall time of the call in ms (min–max), inside one Python process that \
         imported both packages first (interpreter start and imports not counted), on the scale's \
         `sockgen` table (the workload below); then cpu ms (the process's user+system time during the call, both \
         threads of the owner scan included). One uncounted call each, then rounds of every call in \
         alternating order, a garbage collection before each call. sockstat's rows are one per (socket, \
         holder); psutil's one per socket (see python/README.md).\n"
    );
    let _ = writeln!(
        md,
        "| call | {} |\n|---|{}",
        names.join(" | "),
        "---|".repeat(names.len())
    );
    for (id, label) in CALLS {
        let mut row = format!("| {label} |");
        for (_, r) in scales {
            let c = &r["calls"][id];
            match (
                median(&c["wall_s"]),
                range(&c["wall_s"]),
                median(&c["cpu_s"]),
            ) {
                (Some(m), Some((lo, hi)), Some(cpu)) => {
                    let _ = write!(
                        row,
                        " **{}** ({}–{}); cpu {}; {} rows |",
                        fmt_ms(m * 1e3),
                        fmt_ms(lo * 1e3),
                        fmt_ms(hi * 1e3),
                        fmt_ms(cpu * 1e3),
                        c["rows"]
                    );
                }
                _ => row.push_str(" – |"),
            }
        }
        let _ = writeln!(md, "{row}");
    }
    for (kind, ours, theirs) in [
        ("inet", "sockstat-inet", "psutil-inet"),
        ("all", "sockstat-all", "psutil-all"),
    ] {
        let mut row = format!("| **speed-up, `{kind}`** (psutil ÷ sockstat, medians) |");
        for (_, r) in scales {
            match (median_ms(r, ours), median_ms(r, theirs)) {
                (Some(a), Some(b)) if a > 0.0 => {
                    let _ = write!(row, " **{:.1}x** |", b / a);
                }
                _ => row.push_str(" – |"),
            }
        }
        let _ = writeln!(md, "{row}");
    }
    let _ = writeln!(
        md,
        "\nWhat the two returned for the same table, right after the timings (`only_*`: sockets, by \
         family, type, addresses and status, that one of them lacks; the TIME_WAIT trickle replaces \
         entries under the same addresses, so it does not count; `psutil holders missing`: psutil's \
         (pid, fd) rows that sockstat's rows for the socket lack):\n"
    );
    let _ = writeln!(
        md,
        "| scale | kind | rows sockstat / psutil | rows with a pid | only sockstat | only psutil | psutil holders missing |\n|---|---|---|---|---|---|---|"
    );
    for (name, r) in scales {
        for kind in ["inet", "all"] {
            let c = &r["check"][kind];
            let _ = writeln!(
                md,
                "| {name} | {kind} | {} / {} | {} / {} | {} | {} | {} |",
                c["rows"][0],
                c["rows"][1],
                c["rows_with_pid"][0],
                c["rows_with_pid"][1],
                c["only_sockstat"],
                c["only_psutil"],
                c["psutil_holders_missing"]
            );
        }
    }
    md.push_str(PROFILE);
    if let Some((_, r)) = scales.first() {
        let _ = writeln!(
            md,
            "\nsockstat package {}, psutil {}, Python {}.\n",
            r["sockstat"].as_str().unwrap_or("?"),
            r["psutil"].as_str().unwrap_or("?"),
            r["python"].as_str().unwrap_or("?")
        );
    }
    md
}

/// `sockbench python`: writes the Python section measured by this run into the doc, in place of
/// the one there (or before the cold-run section when there is none), leaving the rest of the
/// doc, measured by an earlier full run, as it is.
pub fn splice(results: &[crate::report::Scale], o: &crate::Opts) -> i32 {
    let py: Vec<(String, Value)> = results
        .iter()
        .filter_map(|s| Some((crate::report::scale_name(s.n), s.pycall.clone()?)))
        .collect();
    if py.is_empty() {
        eprintln!("sockbench: no Python call results (is --python an interpreter with psutil and the sockstat package?)");
        return 1;
    }
    let git = Command::new("git")
        .arg("-C")
        .arg(crate::workspace_root())
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .map(|x| String::from_utf8_lossy(&x.stdout).trim().to_string())
        .unwrap_or_default();
    let loads: Vec<String> = results
        .iter()
        .map(|s| {
            let f = |x: &str| x.split_whitespace().next().unwrap_or("?").to_string();
            format!(
                "{}: {} → {}",
                crate::report::scale_name(s.n),
                f(&s.load.0),
                f(&s.load.1)
            )
        })
        .collect();
    let scales: Vec<String> = results
        .iter()
        .map(|s| format!("{}:{}", crate::report::scale_name(s.n), s.procs))
        .collect();
    let provenance = format!(
        "Measured by its own run, not the full run above: `cargo run --release -p sockstat-bench --bin sockbench -- \
         python --python PY --scales {}{}` (as root; PY a virtualenv's python with `pip install psutil ./python`), \
         at git {git}, each scale a fresh `sockgen` table in its own network and pid namespace as in [Method](#method). \
         Host load average (1 min, 2 cores) at the start and end of each scale: {} (other work on \
         the machine; the spread and the wall time above cpu time show it). Runs per cell: 15 at 1k \
         and 10k, 9 at 100k, unless `--runs` says otherwise.",
        scales.join(","),
        o.runs.map(|r| format!(" --runs {r}")).unwrap_or_default(),
        loads.join("; ")
    );
    let text = section(&py, crate::report::fmt_ms_pub, Some(&provenance));
    print!("{text}");
    let Some(doc) = &o.doc else { return 0 };
    let old = std::fs::read_to_string(doc).unwrap_or_default();
    let new = match old.find(HEADING) {
        Some(start) => {
            let end = old[start + HEADING.len()..]
                .find("\n## ")
                .map(|i| start + HEADING.len() + i + 1)
                .unwrap_or(old.len());
            format!("{}{}{}", &old[..start], text, &old[end..])
        }
        None => match old.find("## Cold first run") {
            Some(at) => format!("{}{}{}", &old[..at], text, &old[at..]),
            None => format!("{old}\n{text}"),
        },
    };
    if let Err(e) = std::fs::write(doc, new) {
        eprintln!("sockbench: cannot write {}: {e}", doc.display());
        return 1;
    }
    eprintln!("sockbench: wrote the Python section of {}", doc.display());
    0
}
