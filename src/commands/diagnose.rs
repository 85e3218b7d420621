//! `sockstat diagnose`: two samples of the TCP sockets (with tcp_info and socket memory), the
//! namespace's counters and the sysctls, an interval apart, judged by the rules of
//! `sockstat::diagnose`. This file owns the flags, the gathering (what the pure rules may not
//! do) and the exit status: 0 healthy (or info only), 1 a finding at warning level or above,
//! 2 an error.

use sockstat::WarningCode;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use sockstat::diagnose::{self, Context, Counters, Report, Sample, Sysctls};
use sockstat::sys::counters::ProcPaths;
use sockstat::sys::diagnose::{page_size, read_counters, read_sysctls, sample, tcp_mem_pages};
use sockstat::sys::netns::ZoneTarget;
use sockstat::{render, Query, Snapshot};

use super::counters::{
    in_zone, select_zones, sysctls_unreadable_warning, zones_skipped_warning, Reach, ZoneArgs,
};
use super::ports::zone_snapshot;

use crate::cli::{Cli, ColorWhen, FilterArgs, SourceArgs};

fn bandwidth(s: &str) -> Result<f64, String> {
    diagnose::parse_bandwidth(s)
}

/// Flags of `sockstat diagnose`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Findings (doc/diagnostics.md): send-buffer-limited, receive-window-limited,
window-scaling-missing, receive-buffer-locked, receiver-not-reading, delayed-ack,
memory-pressure, ephemeral-ports, timewait-syn-rejected, listen-overflow, retransmissions.

Examples:
  sockstat diagnose                         every TCP connection, 1 s apart
  sockstat diagnose -p 443 --interval 3     connections on port 443, over 3 s
  sockstat diagnose --bandwidth 100Mbit     also size buffers for a 100 Mbit/s path (BDP)
  sockstat diagnose --json                  for scripts (doc/diagnose.schema.json)

Exit status: 0 nothing at warning level or above, 1 findings, 2 bad usage or an error.")]
pub struct DiagnoseArgs {
    /// Filters.
    #[command(flatten)]
    pub filters: FilterArgs,
    /// Data sources.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Seconds between the two samples (fractions allowed).
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = super::counters::parse_seconds, help_heading = "Diagnosis")]
    pub interval: f64,
    /// The path's bottleneck bandwidth, to compute the bandwidth-delay product and the buffer
    /// sizes it needs: bits per second (100Mbit, 1Gbit, 800kbit) or bytes per second (12.5MB/s).
    #[arg(long, value_name = "RATE", value_parser = bandwidth, help_heading = "Diagnosis")]
    pub bandwidth: Option<f64>,
    /// As root, read whether the application set SO_SNDBUF/SO_RCVBUF exactly (SO_BUF_LOCK)
    /// for the connections a buffer finding names, instead of inferring it: duplicates each such
    /// socket fd from its process for an instant (pidfd_getfd) and closes it at once.
    #[arg(long, help_heading = "Diagnosis")]
    pub exact_locks: bool,
    /// One JSON document (doc/diagnose.schema.json).
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Print details with every warning.
    #[arg(short = 'v', help_heading = "Output")]
    pub verbose: bool,
    /// When to use colour.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto, help_heading = "Output")]
    pub color: ColorWhen,
    /// Print help.
    #[arg(short = 'h', long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// `net.ipv4.tcp_mem` and `net.core.{w,r}mem_max` are global (kernel.md §3.5, R6): tcp_mem is
/// shown only in the initial namespace, so a zone's values come from the host's sysctl tree.
fn with_globals(mut zone: Sysctls, host: &Sysctls) -> Sysctls {
    zone.tcp_mem = host.tcp_mem;
    zone.wmem_max = host.wmem_max;
    zone.rmem_max = host.rmem_max;
    zone
}

/// One sample of every selected zone: the sockets in one gathering (each tagged with its
/// zone), the counters read inside each zone (`None` where it cannot be reached).
struct ZonesSample {
    snapshot: Snapshot,
    counters: Vec<Option<Counters>>,
    tcp_mem_pages: Option<u64>,
}

fn sample_zones(q: &Query, targets: &[ZoneTarget]) -> anyhow::Result<ZonesSample> {
    let snapshot = sockstat::collect(q)?;
    let counters = targets
        .iter()
        .map(|t| in_zone(t, &q.proc_root, read_counters).ok().map(|(c, _)| c))
        .collect();
    Ok(ZonesSample {
        snapshot,
        counters,
        tcp_mem_pages: tcp_mem_pages(&ProcPaths::new(&q.proc_root)),
    })
}

/// The selected zones' sample of zone `i`.
fn zone_sample(z: &ZonesSample, t: &ZoneTarget, i: usize) -> Sample {
    Sample {
        snapshot: zone_snapshot(&z.snapshot, t.key),
        counters: z.counters[i].clone().unwrap_or_default(),
        tcp_mem_pages: z.tcp_mem_pages,
    }
}

/// Runs `sockstat diagnose`.
///
/// Writes the report on `out` and its warnings on `err`.
pub fn run(
    a: &DiagnoseArgs,
    _cli: &Cli,
    mut out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let mut q = crate::build_query(&a.filters, &a.source, a.source.no_owners)?;
    q.narrow_to_tcp_internals()?;

    // The first sample needs no owners (findings name the later one's), so it is only a dump
    // of a few ms; the second's dump runs first thing, alongside its owner scan. The interval
    // is then the time between the two dumps, as the rates need.
    let mut first = q.clone();
    first.owners = q.filters_owners() && q.owners;
    let zones = ZoneArgs {
        zone: a.filters.zone.clone(),
        all_zones: a.filters.all_zones,
    };
    let host = read_sysctls(&ProcPaths::new(&q.proc_root));
    let base = Context {
        interval_s: 0.0,
        sysctls: Sysctls::default(),
        bandwidth: a.bandwidth,
        page_size: page_size(),
        buf_locks: Default::default(),
    };
    let exact = a.exact_locks && is_root();
    let (mut report, lock_errors) = match select_zones(&zones, &q.proc_root)? {
        None => {
            let t0 = Instant::now();
            let before = sample(&first)?;
            let wait = Duration::from_secs_f64(a.interval).saturating_sub(t0.elapsed());
            std::thread::sleep(wait);
            let t1 = Instant::now();
            let after = sample(&q)?;
            let mut ctx = Context {
                interval_s: (t1 - t0).as_secs_f64(),
                sysctls: host,
                ..base
            };
            let lock_errors = if exact {
                read_locks(&before, &after, &mut ctx)
            } else {
                vec![]
            };
            (diagnose::diagnose(&before, &after, &ctx), lock_errors)
        }
        Some((targets, discovery_warnings)) => {
            let t0 = Instant::now();
            let before = sample_zones(&first, &targets)?;
            let wait = Duration::from_secs_f64(a.interval).saturating_sub(t0.elapsed());
            std::thread::sleep(wait);
            let t1 = Instant::now();
            let after = sample_zones(&q, &targets)?;
            let ctx = Context {
                interval_s: (t1 - t0).as_secs_f64(),
                ..base
            };
            let (mut r, lock_errors) =
                diagnose_zones(&targets, &before, &after, &ctx, &host, &q.proc_root, exact);
            r.warnings.extend(discovery_warnings);
            (r, lock_errors)
        }
    };
    if a.exact_locks && !is_root() {
        report.warnings.push(sockstat::Warning {
            code: WarningCode::ExactLocksNeedRoot,
            count: None,
            message: "--exact-locks needs root (pidfd_getfd needs ptrace rights over the holder): \
                      buffer locks are inferred"
                .into(),
            details: vec![],
        });
    }
    if !lock_errors.is_empty() {
        report.warnings.push(sockstat::Warning {
            code: WarningCode::ExactLocksUnavailable,
            count: Some(lock_errors.len() as u64),
            message: format!(
                "{} buffer locks could not be read exactly (kernel before 5.15, the process or \
                 socket went away, or access denied); those are inferred",
                lock_errors.len()
            ),
            details: lock_errors,
        });
    }
    if !is_root() {
        report.warnings.push(sockstat::Warning {
            code: WarningCode::BufferLocksInferred,
            count: None,
            message: "not root: whether an application set SO_SNDBUF/SO_RCVBUF is inferred from \
                      buffer sizes and window scales (doc/diagnostics.md), and processes of other \
                      users are not named"
                .into(),
            details: vec![],
        });
    }

    let opts = super::counters::output_options(false, a.verbose, a.color);
    if a.json {
        render::diagnose::write_json(&report, &opts, &mut out)?;
    } else {
        render::diagnose::write_text(&report, &opts, &mut out)?;
        super::counters::write_warnings(err, &report.warnings, a.verbose);
    }
    Ok(if report.has_problems() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Each zone judged with its own sockets, counters and sysctls (the global ones from the
/// host), every finding tagged with its zone; findings most severe first across zones.
/// Returns the merged report and the buffer locks that could not be read.
fn diagnose_zones(
    targets: &[ZoneTarget],
    before: &ZonesSample,
    after: &ZonesSample,
    base: &Context,
    host: &Sysctls,
    proc_root: &Path,
    exact: bool,
) -> (Report, Vec<String>) {
    let mut report = Report {
        warnings: after.snapshot.warnings.clone(),
        interval_s: base.interval_s,
        ..Report::default()
    };
    let (mut unreadable, mut skipped, mut lock_errors) = (vec![], vec![], vec![]);
    for (i, t) in targets.iter().enumerate() {
        let sysctls = match in_zone(t, proc_root, read_sysctls) {
            Ok((s, Reach::Joined)) => with_globals(s, host),
            Ok((_, Reach::Member(_, why))) => {
                unreadable.push(format!("zone {}: {why}", t.zone.name));
                with_globals(Sysctls::default(), host)
            }
            Err(why) => {
                skipped.push(format!("zone {}: {why}", t.zone.name));
                continue;
            }
        };
        let (b, a) = (zone_sample(before, t, i), zone_sample(after, t, i));
        let mut ctx = Context {
            sysctls,
            ..base.clone()
        };
        if exact {
            lock_errors.extend(read_locks(&b, &a, &mut ctx));
        }
        let r = diagnose::diagnose(&b, &a, &ctx);
        report.connections += r.connections;
        report.findings.extend(r.findings.into_iter().map(|mut f| {
            f.zone = Some(t.zone.clone());
            f
        }));
        for mut w in r.warnings {
            if w.code != WarningCode::TcpMemHidden {
                w.message = format!("zone {}: {}", t.zone.name, w.message);
            }
            if !report.warnings.contains(&w) {
                report.warnings.push(w);
            }
        }
    }
    diagnose::sort_findings(&mut report.findings);
    report.warnings.extend(sysctls_unreadable_warning(
        unreadable,
        "the window-scaling, ephemeral-port, listen-queue and buffer-autotuning rules that need \
         them were skipped there",
    ));
    report.warnings.extend(zones_skipped_warning(
        skipped,
        "their connections were not judged",
    ));
    (report, lock_errors)
}

/// For the sockets a buffer finding names, reads the exact lock from the first holder; returns
/// what could not be read.
fn read_locks(before: &Sample, after: &Sample, ctx: &mut Context) -> Vec<String> {
    use diagnose::RuleId;
    let mut errors = vec![];
    for f in diagnose::evaluate(before, after, ctx) {
        if !matches!(
            f.rule,
            RuleId::SendBufferLimited | RuleId::ReceiveBufferLocked
        ) {
            continue;
        }
        let Some(s) = &f.socket else { continue };
        let (Some(cookie), Some(o)) = (s.cookie, s.owners.first()) else {
            continue;
        };
        if ctx.buf_locks.contains_key(&cookie) {
            continue;
        }
        match sockstat::sys::buflock::read(o.pid, o.fd, cookie) {
            Ok(l) => {
                ctx.buf_locks.insert(cookie, l);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    errors
}

/// True when running as root (the owner scan then sees every process).
fn is_root() -> bool {
    // The effective uid from /proc/self/status ("Uid: real effective saved fs").
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_ascii_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
