//! Aggregates the per-scale results, computes the target ratios and writes BENCHMARKS.md.

use crate::tools::{self, Env};
use crate::Opts;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

pub struct Scale {
    pub n: usize,
    pub procs: usize,
    pub phases: Value,
    pub truth: Value,
    pub checks: Vec<Value>,
    pub timings: BTreeMap<String, Value>,
    pub cold: BTreeMap<String, Value>,
    pub load: (String, String),
    /// The Python call timings (`pycall.json`), when measured.
    pub pycall: Option<Value>,
}

impl Scale {
    pub fn failed_required(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c["required"].as_bool() == Some(true) && c["ok"].as_bool() != Some(true))
            .count()
    }
    fn median(&self, id: &str) -> Option<f64> {
        self.timings.get(id)?.get("median_ms")?.as_f64()
    }
    fn rss_mib(&self, id: &str) -> Option<f64> {
        Some(self.timings.get(id)?.get("rss_kib")?.as_f64()? / 1024.0)
    }
}

pub fn scale_name(n: usize) -> String {
    if n >= 1000 && n % 1000 == 0 {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

pub fn load_scale(dir: &Path, n: usize, procs: usize) -> Option<Scale> {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("main.json")).ok()?).ok()?;
    let mut timings = BTreeMap::new();
    for t in v["timings"].as_array().cloned().unwrap_or_default() {
        timings.insert(t["id"].as_str().unwrap_or("").to_string(), t);
    }
    let mut cold = BTreeMap::new();
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with("cold-") && name.ends_with(".json") {
            if let Some(c) = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            {
                cold.insert(c["id"].as_str().unwrap_or("").to_string(), c);
            }
        }
    }
    Some(Scale {
        n,
        procs,
        phases: v["phases"].clone(),
        truth: v["truth"].clone(),
        checks: v["checks"].as_array().cloned().unwrap_or_default(),
        timings,
        cold,
        load: (
            v["loadavg_start"].as_str().unwrap_or("").to_string(),
            v["loadavg_end"].as_str().unwrap_or("").to_string(),
        ),
        pycall: std::fs::read_to_string(dir.join("pycall.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok()),
    })
}

pub fn print_scale(s: &Scale) {
    eprintln!(
        "sockbench: scale {} done: {} required checks failed",
        scale_name(s.n),
        s.failed_required()
    );
}

// Baseline floor medians (ms) from doc/reference/baseline-study.md#the-floor, at 1k/10k/60k/200k.
const BASE_SCALES: [usize; 4] = [1000, 10000, 60000, 200000];
const BASE_FLOOR: [(&str, [f64; 4]); 4] = [
    ("floor-a", [4.0, 11.0, 56.0, 188.0]),
    ("floor-b", [8.0, 46.0, 201.0, 838.0]),
    ("floor-c", [10.0, 53.0, 289.0, 976.0]),
    ("floor-d", [7.0, 46.0, 146.0, 522.0]),
];

fn baseline_at(vals: &[f64; 4], n: usize) -> Option<(f64, bool)> {
    if let Some(i) = BASE_SCALES.iter().position(|&x| x == n) {
        return Some((vals[i], false));
    }
    for i in 0..3 {
        let (a, b) = (BASE_SCALES[i], BASE_SCALES[i + 1]);
        if n > a && n < b {
            let f = (n - a) as f64 / (b - a) as f64;
            return Some((vals[i] + (vals[i + 1] - vals[i]) * f, true));
        }
    }
    None
}

/// [`fmt_ms`] for the other modules of the runner.
pub fn fmt_ms_pub(x: f64) -> String {
    fmt_ms(x)
}

fn fmt_ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{:.0}", x)
    } else if x >= 10.0 {
        format!("{:.1}", x)
    } else {
        format!("{:.2}", x)
    }
}

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            let mut s = String::from_utf8_lossy(&o.stdout).to_string();
            s.push_str(&String::from_utf8_lossy(&o.stderr));
            s.trim().to_string()
        })
        .unwrap_or_else(|| "n/a".into())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

pub struct Report {
    pub summary: String,
    pub markdown: String,
}

struct Target {
    name: String,
    value: String,
    pass: Option<bool>,
}

fn targets(scales: &[Scale]) -> Vec<Target> {
    let mut v = Vec::new();
    let at = |n: usize| scales.iter().find(|s| s.n == n);
    let main = at(100_000);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let s100 = |id: &str| main.and_then(|s| s.median(id));
    let r = ratio(s100("ss-tuanp"), s100("sockstat-46"));
    v.push(Target {
        name: "100k: `sockstat -4 -6` at least 6x faster than `ss -tuanp`".into(),
        value: r
            .map(|r| {
                format!(
                    "{r:.1}x ({} vs {} ms)",
                    fmt_ms(s100("ss-tuanp").unwrap()),
                    fmt_ms(s100("sockstat-46").unwrap())
                )
            })
            .unwrap_or("n/a".into()),
        pass: r.map(|r| r >= 6.0),
    });
    let r = ratio(s100("sockstat"), s100("floor-d"));
    v.push(Target {
        name: "100k: full listing within 1.2x of floor (d)".into(),
        value: r
            .map(|r| {
                format!(
                    "{r:.2}x ({} vs {} ms)",
                    fmt_ms(s100("sockstat").unwrap()),
                    fmt_ms(s100("floor-d").unwrap())
                )
            })
            .unwrap_or("n/a".into()),
        pass: r.map(|r| r <= 1.2),
    });
    let r = ratio(s100("sockstat-noowners"), s100("ss-tuan"));
    v.push(Target {
        name: "100k: `--no-owners` within 1.2x of `ss -tuan`".into(),
        value: r
            .map(|r| {
                format!(
                    "{r:.2}x ({} vs {} ms)",
                    fmt_ms(s100("sockstat-noowners").unwrap()),
                    fmt_ms(s100("ss-tuan").unwrap())
                )
            })
            .unwrap_or("n/a".into()),
        pass: r.map(|r| r <= 1.2),
    });
    let rss: Option<(f64, String)> = main.and_then(|s| {
        s.timings
            .keys()
            .filter(|k| k.starts_with("sockstat"))
            .filter_map(|k| s.rss_mib(k).map(|m| (m, k.clone())))
            .max_by(|a, b| a.0.partial_cmp(&b.0).unwrap())
    });
    v.push(Target {
        name: "100k: peak RSS under 64 MiB (largest of the sockstat variants)".into(),
        value: rss
            .as_ref()
            .map(|(m, k)| format!("{m:.1} MiB ({k})"))
            .unwrap_or("n/a".into()),
        pass: rss.map(|(m, _)| m < 64.0),
    });
    let m = |n: usize| at(n).and_then(|s| s.median("sockstat"));
    let marg = match (m(10_000), m(100_000), m(200_000)) {
        (Some(a), Some(b), Some(c)) => {
            let lo = (b - a) / 90_000.0;
            let hi = (c - b) / 100_000.0;
            Some((hi / lo, lo, hi))
        }
        _ => None,
    };
    v.push(Target {
        name: "marginal cost per socket 100k→200k at most 1.3x that of 10k→100k (`sockstat`)"
            .into(),
        value: marg
            .map(|(r, lo, hi)| format!("{r:.2}x ({:.2} vs {:.2} µs/socket)", hi * 1e3, lo * 1e3))
            .unwrap_or("n/a (needs the 10k, 100k and 200k scales)".into()),
        // a negative marginal cost is noise, not a result
        pass: marg.and_then(|(r, lo, hi)| {
            if lo > 0.0 && hi > 0.0 {
                Some(r <= 1.3)
            } else {
                None
            }
        }),
    });
    // The Python package (issue 18): a Python call, interpreter start excluded.
    let py = |n: usize, call: &str| {
        at(n)
            .and_then(|s| s.pycall.as_ref())
            .and_then(|r| crate::pycall::median_ms(r, call))
    };
    for (n, want, name) in [
        (
            100_000,
            10.0,
            "100k: `sockstat.net_connections()` at least 10x faster than `psutil.net_connections()`",
        ),
        (
            1_000,
            1.0,
            "1k: `sockstat.net_connections()` faster than `psutil.net_connections()`",
        ),
    ] {
        let (ours, theirs) = (py(n, "sockstat-inet"), py(n, "psutil-inet"));
        let r = ratio(theirs, ours);
        v.push(Target {
            name: name.into(),
            value: r
                .map(|r| {
                    format!(
                        "{r:.1}x ({} vs {} ms)",
                        fmt_ms(theirs.unwrap()),
                        fmt_ms(ours.unwrap())
                    )
                })
                .unwrap_or("n/a (needs --python with both packages)".into()),
            pass: r.map(|r| if want > 1.0 { r >= want } else { r > want }),
        });
    }
    v
}

/// The filtered queries, the fixed cost, the exporter scrape and issue 16's targets.
fn issue16(scales: &[Scale], md: &mut String, sum: &mut String) {
    let names: Vec<String> = scales.iter().map(|s| scale_name(s.n)).collect();
    let tools_label = |id: &str, tools: &[tools::Tool]| {
        tools
            .iter()
            .find(|t| t.id == id)
            .map(|t| t.label.clone())
            .unwrap_or_else(|| format!("`{id}`"))
    };
    let all = tools::all_tools(&Env::default_labels());
    let _ = writeln!(
        md,
        "## Filtered queries: sockstat (every holder named) beside the same `ss` query without `-p`\n\n\
         Median ms of the same run as above; the ratio is sockstat's time over ss's. `--pid` and \
         `--command` have no ss equivalent.\n"
    );
    let _ = writeln!(
        md,
        "| query | sockstat | ss | {} |\n|---|---|---|{}",
        names
            .iter()
            .map(|n| format!("{n} sockstat / ss (ratio)"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(names.len())
    );
    for (sid, ssid, what) in tools::FILTERED {
        if !scales.iter().any(|s| s.timings.contains_key(*sid)) {
            continue;
        }
        let mut row = format!(
            "| {what} | {} | {} |",
            tools_label(sid, &all),
            if ssid.is_empty() {
                "–".to_string()
            } else {
                tools_label(ssid, &all)
            }
        );
        for s in scales {
            match (s.median(sid), s.median(ssid)) {
                (Some(a), Some(b)) => {
                    let _ = write!(row, " {} / {} ({:.2}x) |", fmt_ms(a), fmt_ms(b), a / b);
                }
                (Some(a), None) => {
                    let _ = write!(row, " {} |", fmt_ms(a));
                }
                _ => row.push_str(" – |"),
            }
        }
        let _ = writeln!(md, "{row}");
    }
    let _ = writeln!(md);

    // fixed cost
    if scales.iter().any(|s| s.phases.is_object()) {
        let _ = writeln!(
            md,
            "## Where a listing's time goes (`SOCKSTAT_TIMINGS=1 sockstat`, median ms of 9 runs)\n\n\
             Measured by the same run, right after the timings above, with the phases sockstat \
             reports when `SOCKSTAT_TIMINGS` is set. Process start is the median of `sockstat \
             --version` (exec, dynamic linking, argument parsing) minus the shell wrapper. The \
             owner scan runs on its own thread while the socket dumps run on the others (one \
             netlink socket per protocol and family, taken in turn by up to three threads), so \
             the phases overlap and share the cores; the sort, the join and the table's \
             formatting of 8192 rows or more are split over every core: `collected` is the time \
             from the library's start to the snapshot, `rendered` the table's output after it. `layout` is the BPF program's struct offsets \
             (from the cache after the first run since boot; its first run reads and indexes the \
             kernel's BTF), `BPF load` the verifier, `BPF iterator` the in-kernel walk of every fd.\n"
        );
        let phases = [
            "layout",
            "BTF read",
            "BTF parse and layout",
            "BPF load",
            "BPF iterator",
            "owner scan",
            "dump",
            "sort",
            "collected",
            "rendered",
        ];
        let _ = writeln!(
            md,
            "| phase | {} |\n|---|{}",
            names.join(" | "),
            "---|".repeat(names.len())
        );
        let mut row = String::from("| process start (`sockstat --version` − wrapper) |");
        for s in scales {
            match (s.median("sockstat-version"), s.median("wrapper")) {
                (Some(v), Some(w)) => {
                    let _ = write!(row, " {} |", fmt_ms((v - w).max(0.0)));
                }
                _ => row.push_str(" – |"),
            }
        }
        let _ = writeln!(md, "{row}");
        for p in phases {
            if !scales.iter().any(|s| s.phases.get(p).is_some()) {
                continue;
            }
            let mut row = format!("| {p} |");
            for s in scales {
                match s.phases.get(p).and_then(Value::as_f64) {
                    Some(v) => {
                        let _ = write!(row, " {} |", fmt_ms(v));
                    }
                    None => row.push_str(" – |"),
                }
            }
            let _ = writeln!(md, "{row}");
        }
        let _ = writeln!(md);
    }

    // exporter
    if scales
        .iter()
        .any(|s| s.timings.contains_key("serve-scrape"))
    {
        let _ = writeln!(
            md,
            "## Exporter scrape (`sockstat serve`, one fresh collection per scrape)\n\n\
             `curl` timed by hyperfine as every tool above (its own start included); `collect` is \
             the median of the exporter's `sockstat_collect_duration_seconds` over 5 more scrapes \
             (sockets with TCP internals, counters, sysctls, the listeners' owners, diagnosis \
             against the previous collection, rendering).\n"
        );
        let _ = writeln!(md, "| scale | scrape ms (curl) | collect ms | µs per socket (collect) | body bytes |\n|---|---|---|---|---|");
        for s in scales {
            let Some(t) = s.timings.get("serve-scrape") else {
                continue;
            };
            let c = t["scrape"]["collect_ms_median"].as_f64();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                scale_name(s.n),
                t["median_ms"].as_f64().map(fmt_ms).unwrap_or("–".into()),
                c.map(fmt_ms).unwrap_or("–".into()),
                c.map(|c| format!("{:.2}", c * 1e3 / s.n as f64))
                    .unwrap_or("–".into()),
                t["scrape"]["body_bytes"]
            );
        }
        let _ = writeln!(md);
    }

    // targets
    let mut tg: Vec<Target> = Vec::new();
    let at60 = scales
        .iter()
        .find(|s| s.n == 60_000)
        .or_else(|| scales.iter().find(|s| s.n == 100_000));
    let ratio_target = |tg: &mut Vec<Target>,
                        s: &Scale,
                        a: &str,
                        b: &str,
                        name: String,
                        ok: &dyn Fn(f64) -> bool| {
        let r = match (s.median(a), s.median(b)) {
            (Some(x), Some(y)) if y > 0.0 => Some((x / y, x, y)),
            _ => None,
        };
        tg.push(Target {
            name,
            value: r
                .map(|(r, x, y)| format!("{r:.2} ({} vs {} ms)", fmt_ms(x), fmt_ms(y)))
                .unwrap_or("n/a".into()),
            pass: r.map(|(r, _, _)| ok(r)),
        });
    };
    if let Some(s) = at60 {
        let sc = scale_name(s.n);
        for (sid, ssid, what) in tools::FILTERED.iter().take(6) {
            ratio_target(
                &mut tg,
                s,
                sid,
                ssid,
                format!("{sc}: {what}: sockstat within 2.5x of ss"),
                &|r| r <= 2.5,
            );
        }
        ratio_target(
            &mut tg,
            s,
            "sockstat-summary",
            "ss-an",
            format!("{sc}: `--summary` within 1.2x of `ss -an`"),
            &|r| r <= 1.2,
        );
        ratio_target(
            &mut tg,
            s,
            "ss-tuanp",
            "sockstat-46",
            format!("{sc}: `ss -tuanp` over `sockstat -4 -6`: at least 12x"),
            &|r| r >= 12.0,
        );
        ratio_target(
            &mut tg,
            s,
            "sockstat",
            "floor-d",
            format!("{sc}: full listing at or under 0.8x floor (d)"),
            &|r| r <= 0.8,
        );
        ratio_target(
            &mut tg,
            s,
            "ss-tinp",
            "sockstat-T",
            format!("{sc}: `ss -tinp` over `sockstat -T -c -4 -6`: at least 10x"),
            &|r| r >= 10.0,
        );
        let c = s
            .timings
            .get("serve-scrape")
            .and_then(|t| t["scrape"]["collect_ms_median"].as_f64());
        tg.push(Target {
            name: format!("{sc}: exporter collection at most 50 ms"),
            value: c
                .map(|c| format!("{} ms", fmt_ms(c)))
                .unwrap_or("n/a".into()),
            pass: c.map(|c| c <= 50.0),
        });
    }
    if let Some(s) = scales.iter().find(|s| s.n == 1000) {
        ratio_target(
            &mut tg,
            s,
            "sockstat",
            "floor-d",
            "1k: full listing within 1.1x of floor (d)".into(),
            &|r| r <= 1.1,
        );
        ratio_target(
            &mut tg,
            s,
            "sockstat",
            "ss-tuanp",
            "1k: full listing faster than `ss -tuanp` (ratio under 1)".into(),
            &|r| r < 1.0,
        );
    }
    let per = |n: usize| {
        scales
            .iter()
            .find(|s| s.n == n)
            .and_then(|s| s.timings.get("serve-scrape"))
            .and_then(|t| t["scrape"]["collect_ms_median"].as_f64())
            .map(|c| c * 1e3 / n as f64)
    };
    if let (Some(lo), Some(hi)) = (per(10_000), per(200_000)) {
        tg.push(Target {
            name: "exporter collection per socket flat from 10k to 200k (200k at most 1.3x of 10k)"
                .into(),
            value: format!("{:.2} vs {:.2} µs/socket ({:.2}x)", hi, lo, hi / lo),
            pass: Some(hi / lo <= 1.3),
        });
    }
    let _ = writeln!(
        md,
        "## Targets (issue 16; reported, not asserted)\n\n| target | measured | |\n|---|---|---|"
    );
    let _ = writeln!(sum, "\ntargets (issue 16):");
    for t in &tg {
        let _ = writeln!(
            md,
            "| {} | {} | **{}** |",
            t.name,
            t.value,
            pass_word(t.pass)
        );
        let _ = writeln!(sum, "{:<5} {} — {}", pass_word(t.pass), t.name, t.value);
    }
    let _ = writeln!(md);
}

fn pass_word(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "PASS",
        Some(false) => "MISS",
        None => "n/a",
    }
}

/// What the profile of the owner scan showed (measured once with strace and time, not by this
/// run; `bench/profile-owner-scan.sh` repeats it).
const PROFILE: &str = "## Profile: where the owner scan's time goes (100k sockets, 300 processes, 144k fds)\n\n\
Measured with `strace -c -f` and `/usr/bin/time`, not by the run above (last on 2026-11-22, with \
the 24-byte iterator records that carry start times, while two fuzzers ran at nice 19); repeat \
with `unshare --net --pid --fork --mount --mount-proc sh bench/profile-owner-scan.sh` (as root).\n\n\
| owner scan | syscalls that scale | wall | user | sys |\n\
|---|---|---|---|---|\n\
| `--owner-scan proc` | 144,438 `readlinkat` (one per fd) + 612 `getdents64` + 1,225 `openat` | 0.58 s | 0.13 s | 0.53 s |\n\
| `--owner-scan bpf` (the default as root on big hosts) | 3 `bpf`; 3,317 `read` (1,351 of them the 5.3 MiB kernel BTF in 4 KiB pieces, the rest the iterator's 24-byte records and the holders' `comm`, `status` and `stat`); 1,225 `openat` (identity and start time of the socket holders) | 0.21 s | 0.11 s | 0.17 s |\n\n\
The `/proc` scan is almost all kernel time in `readlinkat` (0.53 s of system time for 144k fds, \
about 4 µs per fd with the directory reads and opens included), split over two threads. The BPF \
iterator walks the same fd tables in the kernel with no system call per fd; what remains is the \
netlink dump (329 `recvfrom`, the same in both rows) and user time (decoding, sorting, formatting). \
Since issue 16 the iterator reports one record per socket fd (only the wanted ones, for a filtered \
query: a hash map of inodes it checks in the kernel) and one per visited process, instead of one \
per fd; and its fixed cost, which was about 10 ms (reading the 5.3 MiB kernel BTF in 1,351 reads of \
4 KiB, indexing it, verifying the program), is now the verifier's alone after the first run since \
boot: the struct offsets are cached in /run/sockstat per kernel build id. The verifier itself \
spends most of its time (`perf`: `btf_nested_type_is_trusted` → `btf_find_by_name_kind`) looking \
up, by a linear search of the kernel's type names, whether each pointer the program loads is \
trusted. `auto` no longer scans /proc on small hosts; the section \"Where a listing's time goes\" \
above measures each phase. Earlier callgrind work on user time \
(integer sort keys with an in-place permutation) is described in the git log.\n\n";

/// Peak memory on big tables (measured by `bench/bigtable.sh`, not by the run above).
const BIG_TABLES: &str = "## Big tables: peak memory per socket (10k to 1M sockets)\n\n\
Measured with `sh bench/bigtable.sh 10k 100k 500k 1000k` (as root; each scale a fresh sockgen \
table in its own network and pid namespace, with sockgen's mix of TCP, UDP and unix sockets and \
one worker process per 1,000 sockets), peak RSS from `/usr/bin/time -f %M`, output to /dev/null, \
as root (BPF owner scan), on 2026-11-26, with malloc's thresholds fixed (below):\n\n\
| sockets | table | `--json` | `--no-owners` |\n\
|---|---|---|---|\n\
| 10,000 | 11.6 MiB | 10.7 MiB | 10.7 MiB |\n\
| 100,000 | 41.0 MiB | 34.2 MiB | 33.0 MiB |\n\
| 500,000 | 134.0 MiB | 134.0 MiB | 126.6 MiB |\n\
| 1,000,000 | 260.0 MiB | 260.3 MiB | 246.2 MiB |\n\n\
From 500k to 1M the marginal cost is **264 bytes per socket** for the table and for JSON (250 \
with `--no-owners`). It was 268 (table and JSON) on 2026-11-25, and 274 / 276 once the dumps, the \
sort, the join and the table's formatting ran on several threads: glibc's malloc raises its mmap \
threshold each time a mapped block is freed, after which the large vectors (a dump's sockets, the \
joined table) came from the heaps of the threads that grew them, were copied when they grew, and \
left their space behind when freed. The command now fixes the thresholds at start (mmap from \
1 MiB, heap trimmed past 64 MiB; `fixed_malloc_thresholds` in src/main.rs; a `MALLOC_*` or \
`GLIBC_TUNABLES` variable the user sets wins): those vectors stay mapped, grow by `mremap` and \
are unmapped when freed. The listing's speed did not change (`perf stat -r 20` at 60k, within \
the noise); a threshold of 128 KiB made `-p 2000 -4 -6` 7 ms slower (the BPF scan's 256 KiB \
read buffer per process, mapped and unmapped each time). The sort of more than 262,144 sockets \
runs in place on one thread (merging its parts would copy half its items aside, 16 MB at a \
million sockets), and the dumps' parts are moved into one vector a slice at a time (a whole copy \
of each was 50 MB more at 1M). The target was under 300. Most of it is \
the socket record itself (208 bytes: `Socket`, with `tcp_info` and socket memory boxed, kept at \
that size by a test) in a vector that grows by doubling; then the sort's 32-byte item per socket \
and the owner scan's holders. JSON is streamed. The table keeps the cells it formatted to size its \
columns until it prints them in tables of up to 131,072 rows (about 70 bytes a row: the 7 MiB \
between the table and JSON at 100k), and formats a \
bigger table twice instead, so from there on it adds no per-socket memory. Before these changes, at 500k \
sockets, the peak was 183.7 MiB with the table and 180.3 MiB with JSON. 1M is the largest scale \
tried; nothing limited it (sockgen spreads the sockets over one process per 1,000, under this \
machine's hard limit of 20,000 open files per process).\n\n";

pub fn render(scales: &[Scale], env: &Env, o: &Opts) -> Report {
    let tools = tools::all_tools(env);
    let mut md = String::new();
    let mut sum = String::new();
    let names: Vec<String> = scales.iter().map(|s| scale_name(s.n)).collect();
    let largest = scales.iter().max_by_key(|s| s.n);

    // --- main table
    let _ = writeln!(md, "# sockstat benchmarks\n");
    let _ = writeln!(
        md,
        "Generated by `sockbench` (bench/). Every number below is as measured by the run described in \
         [Reproduce](#reproduce); nothing is edited by hand. Each scale runs in a fresh private network and pid \
         namespace, so the socket table and /proc hold only the workload (see [Method](#method)).\n"
    );
    let _ = writeln!(
        md,
        "## Wall time: median ms (min–max), output to /dev/null, warm\n"
    );
    let mut hdr = String::from("| tool |");
    let mut sep = String::from("|---|");
    for n in &names {
        let _ = write!(hdr, " {n} |");
        sep.push_str("---|");
    }
    if let Some(l) = largest {
        let _ = write!(hdr, " {} cpu s |", scale_name(l.n));
        sep.push_str("---|");
    }
    let _ = writeln!(md, "{hdr}\n{sep}");
    let _ = writeln!(sum, "\nmedian ms (min-max) per scale:");
    let _ = writeln!(
        sum,
        "{:<22}{}",
        "tool",
        names.iter().map(|n| format!("{n:>26}")).collect::<String>()
    );
    for t in &tools {
        if !scales.iter().any(|s| s.timings.contains_key(t.id)) {
            continue;
        }
        let mut row = format!("| {} |", t.label);
        let mut srow = format!("{:<22}", t.id);
        for s in scales {
            match s.timings.get(t.id) {
                Some(x) => {
                    let (md_, mi, ma) = (
                        x["median_ms"].as_f64(),
                        x["min_ms"].as_f64(),
                        x["max_ms"].as_f64(),
                    );
                    match (md_, mi, ma) {
                        (Some(a), Some(b), Some(c)) => {
                            let _ =
                                write!(row, " **{}** ({}–{}) |", fmt_ms(a), fmt_ms(b), fmt_ms(c));
                            let _ = write!(
                                srow,
                                "{:>26}",
                                format!("{} ({}-{})", fmt_ms(a), fmt_ms(b), fmt_ms(c))
                            );
                        }
                        _ => {
                            row.push_str(" failed |");
                            let _ = write!(srow, "{:>26}", "failed");
                        }
                    }
                }
                None => {
                    row.push_str(" – |");
                    let _ = write!(srow, "{:>26}", "-");
                }
            }
        }
        if let Some(l) = largest {
            let cpu = l
                .timings
                .get(t.id)
                .and_then(|x| Some(x["user_s"].as_f64()? + x["system_s"].as_f64()?));
            let _ = write!(
                row,
                " {} |",
                cpu.map(|c| format!("{c:.2}")).unwrap_or("–".into())
            );
        }
        let _ = writeln!(md, "{row}");
        let _ = writeln!(sum, "{srow}");
    }
    let runs: Vec<String> = scales
        .iter()
        .map(|s| {
            let mut r: Vec<u64> = s
                .timings
                .values()
                .filter_map(|t| t["runs"].as_u64())
                .collect();
            r.sort_unstable();
            r.dedup();
            format!(
                "{}: {}",
                scale_name(s.n),
                r.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join("/")
            )
        })
        .collect();
    let _ = writeln!(
        md,
        "\nRuns per cell after one uncounted warm-up: {} (5 for tools slower than 2 s at 200k). \
         Every command runs as `sh -c 'exec TOOL >/dev/null 2>&1'` under `hyperfine -N`, so each cell includes \
         the wrapper (last row), as in the [baseline study](baseline-study.md#method). cpu s = mean user+system seconds per run.\n",
        runs.join(", ")
    );
    let loads: Vec<String> = scales
        .iter()
        .filter(|s| !s.load.0.is_empty())
        .map(|s| {
            let f = |x: &str| x.split_whitespace().next().unwrap_or("?").to_string();
            format!("{}: {} → {}", scale_name(s.n), f(&s.load.0), f(&s.load.1))
        })
        .collect();
    if !loads.is_empty() {
        let _ = writeln!(
        md,
        "Host load average (1 min, /proc/loadavg, 2 cores) at the start and end of each scale's timings \
         (recorded since the second pass): {}. \
         Other work on the machine shows up as spread and as wall time above cpu time.\n",
        loads.join("; ")
    );
    }

    // --- python
    let py: Vec<(String, Value)> = scales
        .iter()
        .filter_map(|s| Some((scale_name(s.n), s.pycall.clone()?)))
        .collect();
    md.push_str(&crate::pycall::section(&py, fmt_ms, None));

    // --- cold
    if scales.iter().any(|s| !s.cold.is_empty()) {
        let _ = writeln!(md, "## Cold first run: ms (warm median in brackets)\n");
        let _ = writeln!(
            md,
            "The first run of each tool on a table it has never seen: a fresh namespace and a fresh `sockgen` \
             table per tool, and the tool is the first thing that reads it. The extra cost is procfs building \
             the /proc/PID/fd dentries and inodes on first use (dropping caches does not bring it back).\n"
        );
        let _ = writeln!(
            md,
            "| tool | {} |\n|---|{}",
            names.join(" | "),
            "---|".repeat(names.len())
        );
        let _ = writeln!(sum, "\ncold first run ms (warm median):");
        for t in &tools {
            if !scales.iter().any(|s| s.cold.contains_key(t.id)) {
                continue;
            }
            let mut row = format!("| {} |", t.label);
            let mut srow = format!("{:<22}", t.id);
            for s in scales {
                match s.cold.get(t.id).and_then(|c| c["cold_ms"].as_f64()) {
                    Some(c) => {
                        let w = s.median(t.id).map(fmt_ms).unwrap_or("–".into());
                        let _ = write!(row, " **{}** ({w}) |", fmt_ms(c));
                        let _ = write!(srow, "{:>26}", format!("{} ({w})", fmt_ms(c)));
                    }
                    None => {
                        row.push_str(" – |");
                        let _ = write!(srow, "{:>26}", "-");
                    }
                }
            }
            let _ = writeln!(md, "{row}");
            let _ = writeln!(sum, "{srow}");
        }
        let _ = writeln!(md);
    }

    // --- RSS
    let _ = writeln!(
        md,
        "## Peak RSS, MiB (one warm run, `/usr/bin/time -f %M`)\n"
    );
    let _ = writeln!(
        md,
        "| tool | {} |\n|---|{}",
        names.join(" | "),
        "---|".repeat(names.len())
    );
    for t in &tools {
        if !scales.iter().any(|s| s.timings.contains_key(t.id)) {
            continue;
        }
        let mut row = format!("| {} |", t.label);
        for s in scales {
            match s.rss_mib(t.id) {
                Some(m) => {
                    let _ = write!(row, " {m:.1} |");
                }
                None => row.push_str(" – |"),
            }
        }
        let _ = writeln!(md, "{row}");
    }
    let _ = writeln!(md);

    // --- cpu
    let _ = writeln!(
        md,
        "## CPU time per run, ms (hyperfine's mean user+system of the tool)\n\n\
         Less sensitive than wall time to other load on the machine; a multi-threaded tool can use more cpu than wall.\n"
    );
    let _ = writeln!(
        md,
        "| tool | {} |\n|---|{}",
        names.join(" | "),
        "---|".repeat(names.len())
    );
    for t in &tools {
        if !scales.iter().any(|s| s.timings.contains_key(t.id)) {
            continue;
        }
        let mut row = format!("| {} |", t.label);
        for s in scales {
            let cpu = s
                .timings
                .get(t.id)
                .and_then(|x| Some(x["user_s"].as_f64()? + x["system_s"].as_f64()?));
            match cpu {
                Some(c) => {
                    let _ = write!(row, " {} |", fmt_ms(c * 1e3));
                }
                None => row.push_str(" – |"),
            }
        }
        let _ = writeln!(md, "{row}");
    }
    let _ = writeln!(md);

    issue16(scales, &mut md, &mut sum);

    // --- targets
    let tg = targets(scales);
    let _ = writeln!(md, "## Targets (issue 3; reported, not asserted)\n");
    let _ = writeln!(md, "| target | measured | |\n|---|---|---|");
    let _ = writeln!(sum, "\ntargets:");
    for t in &tg {
        let _ = writeln!(
            md,
            "| {} | {} | **{}** |",
            t.name,
            t.value,
            pass_word(t.pass)
        );
        let _ = writeln!(sum, "{:<5} {} — {}", pass_word(t.pass), t.name, t.value);
    }
    let _ = writeln!(md);

    // --- floor vs baseline
    md.push_str(PROFILE);
    md.push_str(BIG_TABLES);
    // The exporter's section comes from `sockbench serve`: its results when they are in the out
    // dir, else the section already in the document (a run of the tools does not redo it).
    let kept = o
        .doc
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d).ok())
        .and_then(|text| serve_part(&text).map(str::to_string));
    if let Some(section) = serve_section(&o.out.join("serve")).or(kept) {
        md.push_str(&section);
    }
    let _ = writeln!(md, "## Floor against the baseline (must be within 30 %)\n");
    let _ = writeln!(
        md,
        "The floor is `sockfloor` (bench/src/bin/sockfloor.rs), which shares no code with sockstat. Its medians \
         are compared with the floor rows of the [baseline study](baseline-study.md#the-floor) (same workload mix and process counts; \
         100k is interpolated linearly between baseline's 60k and 200k). A floor much slower than the baseline \
         would flatter sockstat.\n"
    );
    let _ = writeln!(
        md,
        "| row | scale | here ms | baseline ms | ratio | |\n|---|---|---|---|---|---|"
    );
    let _ = writeln!(sum, "\nfloor vs the baseline study:");
    for (id, vals) in BASE_FLOOR {
        for s in scales {
            let (Some(here), Some((base, interp))) = (s.median(id), baseline_at(&vals, s.n)) else {
                continue;
            };
            let r = here / base;
            let ok = (r - 1.0).abs() <= 0.30;
            let word = if ok {
                "within 30 %"
            } else if r > 1.0 {
                "SLOWER than baseline by more than 30 %"
            } else {
                "faster than baseline by more than 30 %"
            };
            let _ = writeln!(
                md,
                "| {id} | {} | {} | {}{} | {r:.2} | {word} |",
                scale_name(s.n),
                fmt_ms(here),
                fmt_ms(base),
                if interp { " (interp.)" } else { "" }
            );
            let _ = writeln!(
                sum,
                "{id:<8} {:>5} here {:>8} baseline {:>8} ratio {r:.2} {word}",
                scale_name(s.n),
                fmt_ms(here),
                fmt_ms(base)
            );
        }
    }
    let _ = writeln!(md);

    // --- correctness
    let _ = writeln!(
        md,
        "## Correctness (what each tool reported against what the generator made)\n"
    );
    let _ = writeln!(
        md,
        "One captured run per tool, compared on the scope the tool claims: sockets other than TIME_WAIT exactly \
         per category (tcp4/tcp6 listen and other states, udp4/udp6, unix stream/dgram), TIME_WAIT within the range \
         the generator keeps (widened by `sockfloor truth` taken right before and after the run), and the per-pid \
         socket counts for tools that map owners. The TIME_WAIT trickle's own short-lived sockets (port 1999 at one \
         end) are left out on both sides. `generator` compares the generator's truth with the floor's independent \
         count. ok = matches; **FAIL** = a required match (the kit, ss or sockstat) failed; diff = a peer differs \
         (see the [baseline study's correctness table](baseline-study.md#correctness) for the known cases).\n"
    );
    let _ = writeln!(
        md,
        "| tool | scope | {} |\n|---|---|{}",
        names.join(" | "),
        "---|".repeat(names.len())
    );
    let mut ids: Vec<String> = vec!["generator".into()];
    ids.extend(
        tools
            .iter()
            .filter(|t| t.check.is_some())
            .map(|t| t.id.to_string()),
    );
    let _ = writeln!(sum, "\ncorrectness:");
    for id in ids {
        let mut row = String::new();
        let mut scope = String::new();
        let mut any = false;
        for s in scales {
            match s.checks.iter().find(|c| c["id"].as_str() == Some(&id)) {
                Some(c) => {
                    any = true;
                    scope = c["scope"].as_str().unwrap_or("").to_string();
                    let ok = c["ok"].as_bool() == Some(true);
                    let req = c["required"].as_bool() == Some(true);
                    let detail = c["detail"].as_str().unwrap_or("");
                    let word = if ok {
                        "ok"
                    } else if req {
                        "**FAIL**"
                    } else {
                        "diff"
                    };
                    if ok {
                        let _ = write!(row, " ok |");
                    } else {
                        let _ = write!(row, " {word}: {} |", detail.replace('|', "/"));
                    }
                    let _ = writeln!(
                        sum,
                        "{:<5} {:<18} {:>5} {}",
                        if ok {
                            "ok"
                        } else if req {
                            "FAIL"
                        } else {
                            "diff"
                        },
                        id,
                        scale_name(s.n),
                        detail
                    );
                }
                None => row.push_str(" – |"),
            }
        }
        if any {
            let label = tools
                .iter()
                .find(|t| t.id == id)
                .map(|t| t.label.clone())
                .unwrap_or(format!("`{id}`"));
            let _ = writeln!(md, "| {label} | {scope} |{row}");
        }
    }
    let _ = writeln!(md);

    // --- workload
    let _ = writeln!(
        md,
        "## Workload per scale (from the generator's truth file)\n"
    );
    let _ = writeln!(
        md,
        "| scale | procs | total sockets | TCP listen / other / TIME_WAIT | UDP | unix stream / dgram | socket fds | non-socket fds | table build s |\n|---|---|---|---|---|---|---|---|---|"
    );
    for s in scales {
        let t = &s.truth;
        let c = |k: &str| t["counts"][k].as_u64().unwrap_or(0);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} / {} / {} | {} | {} / {} | {} | {} | {} |",
            scale_name(s.n),
            s.procs,
            t["total_sockets"],
            c("tcp4_listen") + c("tcp6_listen"),
            c("tcp4_estab") + c("tcp6_estab"),
            t["tw"]["expected"],
            c("udp4") + c("udp6"),
            c("unix_stream"),
            c("unix_dgram"),
            t["socket_fds"],
            t["nonsocket_fds"],
            t["build_s"]
        );
    }
    let _ = writeln!(
        md,
        "\nplus the coordinator and the TIME_WAIT helper processes. About 20 % of TCP and UDP is on ::1, the rest \
         on 127.0.0.0/8. Each TCP connection has its two ends in two different processes. Non-socket fds are \
         regular files, /dev/null, pipes and eventfds, plus each process's stdio and control pipe.\n"
    );

    // --- machine
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| s.lines().next().map(|l| l.to_string()))
        .unwrap_or_default();
    let kernel = sh("uname", &["-r"]);
    let nproc = sh("nproc", &[]);
    let _ = writeln!(md, "## Machine and tool versions\n");
    let _ = writeln!(
        md,
        "* nproc: {nproc}; CPU: {cpu}; {}; kernel {kernel}",
        mem.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    let meta: Value = std::fs::read_to_string(o.out.join("run.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null);
    let _ = writeln!(
        md,
        "* sockstat: {}, built from the work tree at git {}{} when the run started (the runner measures a copy of that binary)",
        meta["sockstat_version"].as_str().filter(|s| !s.is_empty()).unwrap_or("not measured"),
        meta["git"].as_str().unwrap_or("?"),
        if meta["git_dirty"].as_bool() == Some(true) { ", with uncommitted changes" } else { "" }
    );
    if let Some(note) = meta["note"].as_str() {
        let _ = writeln!(md, "* this run: {note}");
    }
    let _ = writeln!(md, "* {}", first_line(&sh("ss", &["-V"])));
    let _ = writeln!(md, "* {}", first_line(&sh("netstat", &["-V"])));
    let lsofv = sh("lsof", &["-v"]);
    let _ = writeln!(
        md,
        "* lsof {}",
        lsofv
            .lines()
            .find(|l| l.contains("revision:") && !l.contains("latest"))
            .map(|l| l.split(':').nth(1).unwrap_or("").trim())
            .unwrap_or("?")
    );
    if let Some(py) = &env.python {
        let _ = writeln!(
            md,
            "* psutil {} on {}",
            sh(
                &py.display().to_string(),
                &["-c", "import psutil; print(psutil.__version__)"]
            ),
            sh(&py.display().to_string(), &["-V"])
        );
    }
    let _ = writeln!(
        md,
        "* Debian sockstat {}",
        sh("dpkg-query", &["-W", "-f", "${Version}", "sockstat"])
    );
    let _ = writeln!(
        md,
        "* {}; {}; {}",
        first_line(&sh("hyperfine", &["--version"])),
        first_line(&sh("rustc", &["--version"])),
        first_line(&sh("unshare", &["--version"]))
    );
    let _ = writeln!(md);

    // --- method and reproduce
    let scales_arg: Vec<String> = scales
        .iter()
        .map(|s| format!("{}:{}", scale_name(s.n), s.procs))
        .collect();
    let _ = writeln!(md, "## Reproduce\n");
    let _ = writeln!(
        md,
        "As root on Linux, from the workspace root:\n\n```sh\napt-get update && apt-get install -y hyperfine sockstat lsof net-tools iproute2 python3-venv\npython3 -m venv /tmp/sockbench-py && /tmp/sockbench-py/bin/pip install psutil ./python\ncargo run --release -p sockstat-bench --bin sockbench -- run --python /tmp/sockbench-py/bin/python{}\n```\n",
        if o.scales.len() == 4 && o.scales.iter().map(|x| x.0).eq([1000, 10000, 100000, 200000]) {
            String::new()
        } else {
            format!(" --scales {}", scales_arg.join(","))
        }
    );
    let _ = writeln!(
        md,
        "The runner builds `target/release/sockstat` (`cargo build --release -p sockstat-cli`; `--no-build`, \
         `--sockstat PATH` or `--no-sockstat` to change that), writes raw results to `bench/out/<scale>/` \
         (`main.json`, hyperfine JSON `hf-*.json`, `cold-*.json`, the generator's `truth-*.json`, the captured \
         tool outputs in `check/`) and this file. Options: `--scales 1k,10k,100k,200k` (N or N:PROCS), `--runs N`, \
         `--cold all|sockstat|none`, `--tools id,id,...` (`pycall` for the Python calls), `--doc FILE|--no-doc`, \
         `--python PATH` (the interpreter with psutil and, for the Python call rows, the sockstat package; \
         `python3` by default). Ctrl-C stops it; every \
         namespace and process it made goes with it (`unshare --kill-child`, PR_SET_PDEATHSIG).\n\n\
         Only the correctness check, at a small scale: `cargo run --release -p sockstat-bench --bin sockbench -- check -n 300 -p 10`. \
         The workload alone, in the current namespace: `target/release/sockgen -n 10k -p 100 --truth truth.json` \
         (prints `READY ...`, holds the table until SIGTERM/SIGINT or its parent dies). The floor alone: \
         `target/release/sockfloor dump|scan|join|par|truth [--reps K]`.\n"
    );
    let _ = writeln!(md, "## Method\n");
    let _ = writeln!(
        md,
        "* Per scale, one `unshare --net --pid --fork --mount-proc --kill-child` runs `sockbench inner` as pid 1: it \
         brings `lo` up, sets `net.ipv4.ip_local_port_range` to 20000–65535 (namespace-local), mounts a tmpfs \
         for the unix socket files, starts `sockgen -n N -p P`, waits for its READY line, checks every tool, \
         then times every tool with hyperfine and does one more run per tool for the peak RSS.\n\
         * Cold rows: one more namespace per tool, with a fresh table, where that tool's single run is the first \
         reader of /proc and sock_diag after the table is built.\n\
         * `sockgen` (bench/src/bin/sockgen.rs) makes, as fractions of N: TCP listeners 2 %, established loopback \
         connections 40 % (each connection's two ends in two different worker processes), TIME_WAIT 5 %, UDP 10 % \
         (bound, and 1 in 5 connected to another process's socket), unix stream 30 % (listeners on paths and \
         abstract names, connections through them, socketpairs), unix dgram 13 % (/dev/log-like receivers with \
         about 9 connected clients each, socketpairs), plus about 0.47 non-socket fds per socket. It raises \
         RLIMIT_NOFILE, sets PR_SET_PDEATHSIG in every child and cleans up on SIGTERM/SIGINT/SIGHUP.\n\
         * TIME_WAIT is kept steady: a helper process re-opens and closes each TIME_WAIT 4-tuple every 50 s (binding \
         the same source address and port, which replaces the old TIME_WAIT entry), so TIME_WAIT sockets come and \
         go at N×5 %/50 s per second while their count stays at N×5 %.\n\
         * The TCP established hash (262144 buckets here) is host-wide; each namespace is torn down before the next \
         starts.\n\
         * Everything in the benchmark namespaces runs at nice {} to shield it a little from other load on the machine, \
         and before each tool's series (and each cold run) the runner waits, up to {} s (`--quiet-wait`), until the machine has been at \
         least 85 % idle for half a second (`idle_before` in main.json).\n\
         * Python calls (with `--python`): after the hyperfine series, on the same table, one Python process \
         (bench/src/pycall.rs) imports psutil and the sockstat package, makes one uncounted call of each, then \
         `--runs` rounds of `net_connections()` of both for kinds `inet` and `all`, and `sockstat.sockets()`, \
         timing each call alone with `time.perf_counter` and `time.process_time` after a `gc.collect()`.\n\
         * The host is a shared VM: medians can move by tens of percent between runs (see the [baseline study's notes](baseline-study.md#notes)).\n",
        crate::NICE,
        meta["quiet_wait_s"].as_u64().unwrap_or(90)
    );
    // The connection-events section comes from `sockbench events`: kept as the document has it.
    if let Some(events) = o
        .doc
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d).ok())
        .and_then(|text| crate::events::kept_section(&text).map(str::to_string))
    {
        let _ = writeln!(md, "\n{events}");
    }
    Report {
        summary: sum,
        markdown: md,
    }
}

/// Where `sockbench serve` writes in BENCHMARKS.md: between these two lines, so that it and
/// `sockbench run` each rewrite their own part.
const SERVE_BEGIN: &str = "<!-- sockbench serve: begin -->\n";
const SERVE_END: &str = "<!-- sockbench serve: end -->\n";

/// The `sockbench serve` section of a document, markers included.
fn serve_part(doc: &str) -> Option<&str> {
    let i = doc.find(SERVE_BEGIN)?;
    let j = doc[i..].find(SERVE_END)? + i + SERVE_END.len();
    Some(&doc[i..j])
}

/// `doc` with its `sockbench serve` section replaced by `section` (or, the first time, put
/// before the floor's comparison with the baseline, or at the end).
pub fn splice_serve(doc: &str, section: &str) -> String {
    if let Some(old) = serve_part(doc) {
        return doc.replacen(old, section, 1);
    }
    match doc.find("## Floor against the baseline") {
        Some(i) => format!("{}{section}\n{}", &doc[..i], &doc[i..]),
        None => format!("{doc}\n{section}"),
    }
}

fn f64_at(v: &Value, path: &[&str]) -> Option<f64> {
    let mut x = v;
    for p in path {
        x = x.get(p)?;
    }
    x.as_f64()
}

/// Median, min and max.
fn spread(mut xs: Vec<f64>) -> Option<(f64, f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    Some((xs[xs.len() / 2], xs[0], xs[xs.len() - 1]))
}

/// The Exporter section of BENCHMARKS.md, from `sockbench serve`'s results in `dir`
/// (`zones-*.json`, each with how it was made); `None` when there are none.
pub fn serve_section(dir: &Path) -> Option<String> {
    let mut runs: Vec<Value> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("zones-") && n.ends_with(".json")
        })
        .filter_map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok())
        .collect();
    if runs.is_empty() {
        return None;
    }
    runs.sort_by_key(|v| {
        (
            v["zones"].as_u64().unwrap_or(0),
            v["child_ehash"].as_u64().unwrap_or(0),
        )
    });
    let meta = runs[0]["meta"].clone();
    // Each command with the commit its sockstat was built from.
    let mut commands: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            let m = &r["meta"];
            Some(format!(
                "`{}` (git {}{})",
                m["command"].as_str()?,
                m["git"].as_str().unwrap_or("?"),
                if m["git_dirty"].as_bool() == Some(true) {
                    ", with uncommitted changes"
                } else {
                    ""
                }
            ))
        })
        .collect();
    commands.dedup();
    let mut md = String::from(SERVE_BEGIN);
    let _ = writeln!(
        md,
        "## Exporter: a scrape of every zone (`sockstat serve -Z`)\n\n\
         Measured with {} (as root; `sockbench serve`, bench/src/serve.rs), on {}, {} cores, \
         Linux {}. Each row is a fresh private network and pid namespace \
         holding the given number of zones: the first is the namespace the exporter runs in \
         (`global`), each other one a network namespace of its own made by `sockgen --netns`, with \
         an equal share of the sockets (sockgen's mix: TCP listeners and loopback connections, \
         TIME_WAIT, UDP, unix) held by its own worker process; then `sockstat serve -Z` (release \
         build) is scraped over HTTP, {} s apart. *wall* is the GET as the scraper sees it, *CPU* \
         the exporter's user + system time over it (all threads, /proc/PID/stat, 10 ms ticks), \
         *collect* what the exporter reports in `sockstat_collect_duration_seconds`. The first \
         scrape is apart: it runs the full owner scan and has no diagnosis yet. *TCP hash*: \
         whether each zone's socket dumps walk the host's TCP hash table ({} buckets here) or one \
         of its own (`--child-ehash N` sets `net.ipv4.tcp_child_ehash_entries` and \
         `udp_child_hash_entries` to N before the zones are made).\n",
        commands.join(" and "),
        meta["date"].as_str().unwrap_or("?"),
        meta["nproc"],
        meta["kernel"].as_str().unwrap_or("?"),
        runs[0]["interval_s"]
            .as_f64()
            .map_or_else(|| "a few".to_string(), |x| format!("{x}")),
        meta["tcp_ehash_entries"].as_str().unwrap_or("?"),
    );
    let _ = writeln!(
        md,
        "| zones | sockets | TCP hash | 1st scrape: wall s, CPU s | later scrapes: wall s, median (min–max) | CPU s, median (min–max) | collect s, median | body | series | series per other zone | RSS, peak |\n\
         |---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in &runs {
        let hash = match r["child_ehash"].as_u64() {
            Some(n) if r["zones"].as_u64() != Some(1) => format!("own, {n}"),
            _ => "host's".to_string(),
        };
        let w = &r["without_z"];
        if !w.is_null() {
            serve_row(
                &mut md,
                &format!("{}, without `-Z`", r["zones"]),
                r,
                w,
                &hash,
            );
        }
        serve_row(&mut md, &r["zones"].to_string(), r, r, &hash);
    }
    md.push('\n');
    for r in &runs {
        let fam = r["series_by_family"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut fams: Vec<(String, u64)> = fam
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
            .filter(|(_, n)| *n > 1)
            .collect();
        fams.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let _ =
            writeln!(
            md,
            "{} zone{}{}: series by family: {}; the host's zone has {} series; `promtool check \
             metrics`: {}; owner scans: {} in {} scrapes; load average (1 min) {} → {}.\n",
            r["zones"],
            if r["zones"].as_u64() == Some(1) { "" } else { "s" },
            r["child_ehash"]
                .as_u64()
                .map_or(String::new(), |n| format!(" (own TCP hash, {n})")),
            fams.iter()
                .map(|(k, n)| format!("`{k}` {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            r["series_global"],
            match r["promtool_ok"].as_bool() {
                Some(true) => "ok",
                Some(false) => "FAILED",
                None => "not run",
            },
            r["scrapes"]
                .as_array()
                .and_then(|s| s.last())
                .map_or(Value::Null, |s| s["owner_scans"].clone()),
            r["scrapes"].as_array().map_or(0, Vec::len),
            r["loadavg_start"]
                .as_str()
                .unwrap_or("?")
                .split(' ')
                .next()
                .unwrap_or("?"),
            r["loadavg_end"]
                .as_str()
                .unwrap_or("?")
                .split(' ')
                .next()
                .unwrap_or("?"),
        );
    }
    md.push_str(SERVE_PROFILE);
    md.push_str(SERVE_END);
    Some(md)
}

/// Where a 500-zone scrape's time goes (measured once with perf, not by the run above).
const SERVE_PROFILE: &str = "Where the time goes, from `perf record -F 499 -g -p PID -- sleep 45` \
on the exporter during the 500-zone rows' scrapes, `perf report --no-children --sort sym` (measured \
on 2026-11-25, not by the run above): with the host's TCP hash, 70 % of the samples in the kernel's \
`tcp_diag_dump` and 6 % in `udp_dump`, plus 9 % in the spinlocks they take, 1.6 % in \
`mptcp_diag_dump`; sockstat's own code (decoding, analysis, rendering) under 5 %. A sock_diag dump \
runs in one network namespace, but the kernel walks the host-wide hash table and skips the other \
namespaces' sockets one by one: each zone's TCP dumps (IPv4 and IPv6) walk all 262,144 buckets and \
every TCP socket of the node, so a scrape costs zones × the node's TCP sockets. With hash tables of \
their own (`net.ipv4.tcp_child_ehash_entries`, Linux 6.1+, set before the namespaces are made), \
`tcp_diag_dump` still had 55 % of the samples (the listening hash stays the host's) and \
`mptcp_diag_dump` 5 % (its token table is the host's too), for a third of the CPU time.\n\n";

/// One row of the Exporter table: `run` says what was measured (its `scrapes`, RSS, last
/// series), `r` the zones it was measured on.
fn serve_row(md: &mut String, label: &str, r: &Value, run: &Value, hash: &str) {
    let scrapes = run["scrapes"].as_array().cloned().unwrap_or_default();
    let first = scrapes.first().cloned().unwrap_or(Value::Null);
    let later = |k: &str| {
        spread(
            scrapes
                .iter()
                .skip(1)
                .filter_map(|s| s[k].as_f64())
                .collect(),
        )
    };
    let fmt3 = |x: Option<(f64, f64, f64)>| {
        x.map_or("?".to_string(), |(m, lo, hi)| {
            format!("**{m:.2}** ({lo:.2}–{hi:.2})")
        })
    };
    let last = scrapes.last().cloned().unwrap_or(Value::Null);
    let per = &r["series_per_other_zone"];
    let _ = writeln!(
        md,
        "| {label} | {} | {hash} | {:.2}, {:.2} | {} | {} | {} | {:.0} kB | {} | {} | {:.0} MiB, {:.0} MiB |",
        r["sockets"],
        f64_at(&first, &["wall_s"]).unwrap_or(f64::NAN),
        f64_at(&first, &["cpu_s"]).unwrap_or(f64::NAN),
        fmt3(later("wall_s")),
        fmt3(later("cpu_s")),
        later("collect_s").map_or("?".into(), |(m, _, _)| format!("{m:.2}")),
        f64_at(&last, &["bytes"]).unwrap_or(0.0) / 1e3,
        last["series"],
        if per["max"].is_null() {
            "–".to_string()
        } else {
            format!("{}–{} (median {})", per["min"], per["max"], per["median"])
        },
        run["rss_kib"].as_f64().unwrap_or(0.0) / 1024.0,
        run["rss_peak_kib"].as_f64().unwrap_or(0.0) / 1024.0,
    );
}
