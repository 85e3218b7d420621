//! `sockstat ports`: ephemeral-port use by destination, TIME-WAIT on the client and the server
//! side, and the settings that decide whether ports can be reused (research/kernel.md R7, R8).
//! The analysis is `sockstat::ports`; this file owns the flags, the sampling and the exit
//! status.

use sockstat::WarningCode;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sockstat::counters::CounterSet;
use sockstat::ports::{self, PortsInput, PortsReport};
use sockstat::query::parse_prefix;
use sockstat::sys::counters::ProcPaths;
use sockstat::sys::netns::ZoneTarget;
use sockstat::{render, PortSet, Proto, Query, Snapshot, ZoneSelect};

use super::counters::{
    in_zone, output_options, parse_seconds, select_zones, sysctls_unreadable_warning,
    write_warnings, zones_skipped_warning, Reach, ZoneArgs,
};
use crate::cli::{Cli, ColorWhen};

/// Flags of `sockstat ports`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Examples:\n  sockstat ports                   ephemeral ports in use, by destination\n  \
                  sockstat ports --interval 5      also the rate of new TIME-WAIT entries and the \
                  PAWS counters\n  sockstat ports -p 5432 --json    one service's clients and \
                  servers, as JSON\n\nExit status: 0 (also when warnings are found), 2 bad usage."
)]
pub struct PortsArgs {
    /// Only IPv4 sockets.
    #[arg(short = '4', help_heading = "Filters")]
    pub inet: bool,
    /// Only IPv6 sockets.
    #[arg(short = '6', help_heading = "Filters")]
    pub inet6: bool,
    /// Hide connections whose local or remote address is loopback (127/8, ::1).
    #[arg(short = 'L', help_heading = "Filters")]
    pub no_loopback: bool,
    /// Only connections whose local or remote port is in PORTS (e.g. 5432,8000-8100): a
    /// destination port for clients, a listening port for servers.
    #[arg(short = 'p', value_name = "PORTS", value_parser = PortSet::parse, help_heading = "Filters")]
    pub ports: Option<PortSet>,
    /// Only connections whose local address is ADDR or in ADDR/LEN.
    #[arg(long, value_name = "ADDR[/LEN]", value_parser = parse_prefix, help_heading = "Filters")]
    pub src: Option<ipnet::IpNet>,
    /// Only connections whose remote address is ADDR or in ADDR/LEN.
    #[arg(long, value_name = "ADDR[/LEN]", value_parser = parse_prefix, help_heading = "Filters")]
    pub dst: Option<ipnet::IpNet>,
    /// Sample twice, SECONDS apart: adds the rate of new TIME-WAIT entries per destination and
    /// the counter deltas (TW, TWRecycled, TCPTimeWaitOverflow, PAWSEstab, PAWSTimewait,
    /// TCPACKSkippedTimeWait).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub interval: Option<f64>,
    /// One JSON document: {"version":1,"range","settings","time_wait","interval_s",
    /// "destinations":[{"local_address","remote_address","remote_port","count","states",
    /// "usage",...}],"servers","server_counters","warnings"}.
    #[arg(long)]
    pub json: bool,
    /// Do not print the header lines.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// Print details with every warning.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// When to use colour.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto)]
    pub color: ColorWhen,
    /// Print help.
    #[arg(short = 'h', long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Zones.
    #[command(flatten)]
    pub zones: ZoneArgs,
    /// Read sysctls and counters from this directory instead of /proc (testing).
    #[arg(long, value_name = "DIR", hide = true)]
    pub proc_root: Option<PathBuf>,
}

impl PortsArgs {
    /// The query that gathers: every TCP socket of the chosen families, listeners included (the
    /// server view needs them), no owner scan (TIME-WAIT entries have no owner).
    fn gather_query(&self) -> Query {
        let mut q = Query::new();
        if self.inet || self.inet6 {
            q.families.inet = self.inet;
            q.families.inet6 = self.inet6;
        }
        q.families.unix = false;
        q.protos = Some(vec![Proto::Tcp]);
        q.owners = false;
        q.resolve_users = false;
        if let Some(root) = &self.proc_root {
            q.proc_root = root.clone();
        }
        q
    }

    /// The query that selects what is reported.
    fn filter_query(&self) -> Query {
        let mut q = self.gather_query();
        q.no_loopback = self.no_loopback;
        q.ports = self.ports.clone();
        q.src = self.src;
        q.dst = self.dst;
        q
    }
}

struct Sample {
    snap: Snapshot,
    counters: Option<CounterSet>,
}

fn sample(q: &Query, paths: &ProcPaths, counters: bool) -> anyhow::Result<Sample> {
    let snap = sockstat::collect(q).context("listing TCP sockets")?;
    let counters = if counters {
        Some(sockstat::sys::counters::read(paths)?.set)
    } else {
        None
    };
    Ok(Sample { snap, counters })
}

/// Runs `sockstat ports`.
///
/// Writes the report on `out` and its warnings on `err`.
pub fn run(
    args: &PortsArgs,
    cli: &Cli,
    mut out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let json = args.json || cli.output.json;
    let opts = output_options(args.quiet, args.verbose, args.color);
    let root = args
        .proc_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc"));
    let zones = args.zones.or_global(cli);
    if let Some((targets, warnings)) = select_zones(&zones, &root)? {
        let view = View {
            json,
            opts: &opts,
            out,
            err,
        };
        return run_zones(args, &zones, &targets, warnings, &root, view);
    }
    let root = ProcPaths::new(&root);
    let gather = args.gather_query();
    let filter = args.filter_query();
    let (first, last, interval_s) = match args.interval {
        None => (None, sample(&gather, &root, false)?, None),
        Some(s) => {
            let start = Instant::now();
            let a = sample(&gather, &root, true)?;
            std::thread::sleep(Duration::from_secs_f64(s));
            let b = sample(&gather, &root, true)?;
            (Some(a), b, Some(start.elapsed().as_secs_f64()))
        }
    };
    let sysctls = sockstat::sys::sysctl::read_port_sysctls(&root);
    let time_wait_total = sockstat::sys::counters::read_time_wait_total(&root);
    let counters = match (&first, &last.counters) {
        (
            Some(Sample {
                counters: Some(a), ..
            }),
            Some(b),
        ) => Some((a, b)),
        _ => None,
    };
    let mut report = ports::analyze(&PortsInput {
        snapshot: &last.snap,
        earlier: first.as_ref().map(|s| &s.snap),
        interval_s,
        sysctls: &sysctls,
        counters,
        time_wait_total,
        filter: Some(&filter),
    });
    if json {
        report
            .warnings
            .extend(last.snap.warnings.iter().map(ports::finding_from_warning));
        render::ports::write_json(&report, &opts, &mut out)?;
    } else {
        render::ports::write_table(&report, &opts, &mut out)?;
        write_warnings(err, &last.snap.warnings, args.verbose);
    }
    Ok(ExitCode::SUCCESS)
}

/// Sockets of one zone (by its key in `Socket::netns`), with the processes and users the
/// snapshot resolved; the gathering warnings stay with the whole snapshot.
pub fn zone_snapshot(snap: &Snapshot, key: u64) -> Snapshot {
    Snapshot {
        sockets: snap
            .sockets
            .iter()
            .filter(|s| s.netns == Some(key))
            .cloned()
            .collect(),
        processes: snap.processes.clone(),
        users: snap.users.clone(),
        warnings: Vec::new(),
        cgroups: snap.cgroups.clone(),
        zones: snap
            .zones
            .iter()
            .filter(|(k, _)| **k == key)
            .map(|(k, z)| (*k, z.clone()))
            .collect(),
    }
}

/// Counters of every zone, read inside each (`None` where a zone cannot be reached).
fn zone_counters(targets: &[ZoneTarget], root: &Path) -> Vec<Option<CounterSet>> {
    targets
        .iter()
        .map(|t| {
            in_zone(t, root, sockstat::sys::counters::read)
                .ok()
                .and_then(|(r, _)| r.ok())
                .map(|r| r.set)
        })
        .collect()
}

/// How and where a report is written.
struct View<'a> {
    json: bool,
    opts: &'a render::Options,
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
}

/// `ports -z ZONE` / `ports -Z`: the sockets of the selected zones in one gathering (the
/// listing's zone machinery), then each zone analysed with its own sysctls and counters, read
/// from a thread in that zone.
fn run_zones(
    args: &PortsArgs,
    zones: &ZoneArgs,
    targets: &[ZoneTarget],
    discovery_warnings: Vec<sockstat::Warning>,
    root: &Path,
    view: View<'_>,
) -> anyhow::Result<ExitCode> {
    let View {
        json,
        opts,
        mut out,
        err,
    } = view;
    let mut gather = args.gather_query();
    gather.zones = match &zones.zone {
        Some(spec) => ZoneSelect::Named(spec.clone()),
        None => ZoneSelect::All,
    };
    let filter = args.filter_query();
    let take = |counters: bool| -> anyhow::Result<(Snapshot, Vec<Option<CounterSet>>)> {
        let snap = sockstat::collect(&gather).context("listing TCP sockets")?;
        let sets = if counters {
            zone_counters(targets, root)
        } else {
            vec![None; targets.len()]
        };
        Ok((snap, sets))
    };
    let (first, (last, last_counters), interval_s) = match args.interval {
        None => (None, take(false)?, None),
        Some(s) => {
            let start = Instant::now();
            let a = take(true)?;
            std::thread::sleep(Duration::from_secs_f64(s));
            let b = take(true)?;
            (Some(a), b, Some(start.elapsed().as_secs_f64()))
        }
    };
    let (mut unreadable, mut skipped) = (Vec::new(), Vec::new());
    let mut reports: Vec<PortsReport> = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let read = in_zone(t, root, |p| {
            (
                sockstat::sys::sysctl::read_port_sysctls(p),
                sockstat::sys::counters::read_time_wait_total(p),
            )
        });
        let ((sysctls, time_wait_total), reach) = match read {
            Ok(v) => v,
            Err(why) => {
                skipped.push(format!("zone {}: {why}", t.zone.name));
                continue;
            }
        };
        if let Reach::Member(pid, why) = &reach {
            unreadable.push(format!(
                "zone {}: {why}; counters from /proc/{pid}/net",
                t.zone.name
            ));
        }
        let now = zone_snapshot(&last, t.key);
        let earlier = first.as_ref().map(|(s, _)| zone_snapshot(s, t.key));
        let counters = match (&first, &last_counters[i]) {
            (Some((_, a)), Some(b)) => a[i].as_ref().map(|a| (a, b)),
            _ => None,
        };
        let mut report = ports::analyze(&PortsInput {
            snapshot: &now,
            earlier: earlier.as_ref(),
            interval_s,
            sysctls: &sysctls,
            counters,
            time_wait_total,
            filter: Some(&filter),
        });
        if reach != Reach::Joined {
            report.warnings.push(ports::Finding {
                code: WarningCode::ZoneSysctlsUnreadable.name(),
                level: sockstat::Severity::Info,
                message: format!(
                    "the sysctls of zone {} cannot be read without joining it: the range, \
                     reuse settings and TIME-WAIT limit shown are the kernel defaults or unknown",
                    t.zone.name
                ),
                advice: Some("run as root to read them".into()),
                details: vec![],
            });
        }
        report.zone = Some(t.zone.clone());
        reports.push(report);
    }
    let mut warnings = last.warnings.clone();
    warnings.extend(discovery_warnings);
    warnings.extend(sysctls_unreadable_warning(
        unreadable,
        "the port range, reuse settings and TIME-WAIT limit",
    ));
    warnings.extend(zones_skipped_warning(skipped, "they have no port report"));
    warnings.dedup();
    let single = !zones.all_zones && reports.len() == 1;
    if json {
        let findings: Vec<ports::Finding> =
            warnings.iter().map(ports::finding_from_warning).collect();
        if single {
            let mut r = reports.remove(0);
            r.warnings.extend(findings);
            render::ports::write_json(&r, opts, &mut out)?;
        } else {
            render::ports::write_zones_json(&reports, &findings, &mut out)?;
        }
    } else {
        render::ports::write_zones_table(&reports, opts, &mut out)?;
        write_warnings(err, &warnings, args.verbose);
    }
    Ok(ExitCode::SUCCESS)
}
