//! `sockstat counters [SECONDS]`: the kernel's TCP/IP counters, as deltas over an interval or as
//! values since boot. The numbers and their meanings come from `sockstat::counters`; this file
//! owns the flags, the waiting and the exit status.

use sockstat::WarningCode;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sockstat::counters::{self, CounterReport};
use sockstat::render;
use sockstat::sys::counters::{CounterRead, ProcPaths};
use sockstat::sys::netns::{self, ZoneTarget};
use sockstat::zone::Zone;
use sockstat::Warning;

use crate::cli::{Cli, ColorWhen};

/// The longest interval accepted, seconds (a day).
const MAX_INTERVAL_S: f64 = 86_400.0;

/// Parses an interval in seconds: a positive number, fractions allowed (`10`, `0.5`).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= MAX_INTERVAL_S => Ok(v),
        _ => Err(format!(
            "invalid interval '{s}': give seconds greater than 0 and at most 86400, like 10 or 0.5"
        )),
    }
}

/// The interval from the positional SECONDS and `--interval`; both given must agree.
pub fn interval(positional: Option<f64>, flag: Option<f64>) -> anyhow::Result<Option<f64>> {
    match (positional, flag) {
        (Some(a), Some(b)) if a != b => anyhow::bail!(
            "the interval is given twice and differs (SECONDS {a}, --interval {b}): give one"
        ),
        (a, b) => Ok(a.or(b)),
    }
}

/// Output options for a subcommand's table: the listing's colour rules (a terminal, no
/// `NO_COLOR`, not `TERM=dumb`), header unless `-q`.
pub fn output_options(quiet: bool, verbose: bool, color: ColorWhen) -> render::Options {
    let mut o = render::Options::new();
    o.header = !quiet;
    o.verbose = verbose;
    o.color = match color {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
            !no_color && !dumb && io::stdout().is_terminal()
        }
    };
    o
}

/// Writes warnings as stderr shows them, one line each (details with -v).
pub fn write_warnings(err: &mut dyn Write, warnings: &[sockstat::Warning], verbose: bool) {
    for w in warnings {
        let _ = writeln!(err, "sockstat: warning: {}", w.message);
        if verbose {
            for d in &w.details {
                let _ = writeln!(err, "sockstat:   {d}");
            }
        }
    }
}

/// `-z`/`-j ZONE` and `-Z` for the subcommands that read a namespace's counters and sysctls
/// (`counters`, `ports`; `diagnose` takes them with its other filters).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ZoneArgs {
    /// Read this zone (network namespace): a name from -Z (global, an `ip netns` name, a
    /// container or pod name), a container id prefix, or a namespace inode.
    #[arg(
        short = 'z',
        visible_short_alias = 'j',
        value_name = "ZONE",
        conflicts_with = "all_zones",
        help_heading = "Zones"
    )]
    pub zone: Option<String>,
    /// Every zone (network namespace) on the host, each with its own counters and sysctls.
    #[arg(short = 'Z', help_heading = "Zones")]
    pub all_zones: bool,
}

impl ZoneArgs {
    /// These flags, or the same flags given before the subcommand (`sockstat -Z counters`).
    pub fn or_global(&self, cli: &Cli) -> ZoneArgs {
        if self.zone.is_some() || self.all_zones {
            return self.clone();
        }
        ZoneArgs {
            zone: cli.filters.zone.clone(),
            all_zones: cli.filters.all_zones,
        }
    }

    /// True when zones were asked for.
    pub fn any(&self) -> bool {
        self.zone.is_some() || self.all_zones
    }
}

/// The zones selected, and what discovery could not see.
pub type SelectedZones = (Vec<ZoneTarget>, Vec<Warning>);

/// The zones `-z`/`-Z` select, in display order (global first, then by name), with the
/// discovery warnings; `None` without either flag. A zone that does not exist is an error
/// (exit 2) that lists the known ones, as in the listing.
pub fn select_zones(
    z: &ZoneArgs,
    proc_root: &Path,
) -> Result<Option<SelectedZones>, sockstat::Error> {
    if !z.any() {
        return Ok(None);
    }
    let (targets, warnings) = netns::discover(proc_root);
    let Some(spec) = &z.zone else {
        return Ok(Some((targets, warnings)));
    };
    let known = targets.iter().map(|t| t.zone.name.clone()).collect();
    let hit: Vec<ZoneTarget> = targets
        .into_iter()
        .filter(|t| t.zone.matches(spec))
        .collect();
    if hit.is_empty() {
        return Err(sockstat::Error::UnknownZone {
            name: spec.clone(),
            known,
        });
    }
    Ok(Some((hit, warnings)))
}

/// How a zone's counters and sysctls were reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// From a thread in the zone (or this process's own namespace): everything.
    Joined,
    /// Not permitted to join (the reason): its counters through `/proc/PID/net` of this member,
    /// its sysctls not at all.
    Member(u32, String),
}

/// Runs `work` with the paths of zone `t`'s counter files and sysctls: on a thread that joined
/// it (`/proc/thread-self/net`, `/proc/sys` read from that thread), on this thread for this
/// process's own namespace, or, when joining is not permitted, here with the paths of a member
/// process (counters only). `Err` when the zone cannot be reached at all.
pub fn in_zone<T: Send>(
    t: &ZoneTarget,
    proc_root: &Path,
    work: impl Fn(&ProcPaths) -> T + Send + Sync,
) -> Result<(T, Reach), String> {
    let paths = if t.own {
        ProcPaths::new(proc_root)
    } else {
        ProcPaths::thread(proc_root)
    };
    match netns::run_in(t, || work(&paths)) {
        Ok(v) => Ok((v, Reach::Joined)),
        Err(why) => match t.member {
            Some(pid) => Ok((
                work(&ProcPaths::member(proc_root, pid)),
                Reach::Member(pid, why),
            )),
            None => Err(format!("{why}; no visible process in it")),
        },
    }
}

/// The warning for zones whose sysctls could not be read (`notes`: one line per zone).
pub fn sysctls_unreadable_warning(notes: Vec<String>, skipped: &str) -> Option<Warning> {
    (!notes.is_empty()).then(|| Warning {
        code: WarningCode::ZoneSysctlsUnreadable,
        count: Some(notes.len() as u64),
        message: format!(
            "{} zones could not be joined with these privileges: their counters were read \
             through /proc/PID/net, but their sysctls cannot be read from outside ({skipped}); \
             run as root to read them",
            notes.len()
        ),
        details: notes,
    })
}

/// The warning for zones that could not be read at all.
pub fn zones_skipped_warning(skipped: Vec<String>, what: &str) -> Option<Warning> {
    (!skipped.is_empty()).then(|| Warning {
        code: WarningCode::ZonesNotRead,
        count: Some(skipped.len() as u64),
        message: format!(
            "{} zones could not be read: {what} (-v for why)",
            skipped.len()
        ),
        details: skipped,
    })
}

/// Flags of `sockstat counters`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Examples:\n  sockstat counters 10          what moved in the last 10 seconds\n  sockstat counters --json 5    the same, as JSON\n  sockstat counters --all       every counter since boot, zeros too"
)]
pub struct CountersArgs {
    /// Measure deltas over this many seconds (fractions allowed); without it, values since boot.
    #[arg(value_name = "SECONDS", value_parser = parse_seconds)]
    pub seconds: Option<f64>,
    /// Same as SECONDS.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub interval: Option<f64>,
    /// Also show counters that are zero (or did not move over the interval).
    #[arg(long)]
    pub all: bool,
    /// One JSON document: {"version":1,"interval_s","counters":[{"group","name","value" or
    /// "delta","meaning","trouble"}],"hidden_zero","warnings"}.
    #[arg(long)]
    pub json: bool,
    /// Do not print the title and header lines.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// Print details with every warning (e.g. which counters went backwards).
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
    /// Read the counter files from this directory instead of /proc (testing).
    #[arg(long, value_name = "DIR", hide = true)]
    pub proc_root: Option<PathBuf>,
}

/// Runs `sockstat counters`.
///
/// Writes the view on `out` and its warnings on `err`. Under `--watch` without SECONDS, each
/// refresh shows the deltas over the watch interval.
pub fn run(
    args: &CountersArgs,
    cli: &Cli,
    mut out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let interval_s = interval(args.seconds, args.interval)?.or(crate::watch_interval(&cli.output));
    let json = args.json || cli.output.json;
    let opts = output_options(args.quiet, args.verbose, args.color);
    let root = args
        .proc_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc"));
    let zones = args.zones.or_global(cli);
    let mut report = match select_zones(&zones, &root)? {
        None => own_report(&ProcPaths::new(&root), interval_s, args.all)?,
        Some((targets, warnings)) => {
            let mut r = zones_report(&targets, &root, interval_s, args.all)?;
            r.warnings.extend(warnings);
            r
        }
    };
    report.warnings.dedup();
    let mut opts = opts;
    opts.zone = zones.all_zones;
    if json {
        render::counters::write_json(&report, &opts, &mut out)?;
    } else {
        render::counters::write_table(&report, &opts, &mut out)?;
        write_warnings(err, &report.warnings, args.verbose);
    }
    Ok(ExitCode::SUCCESS)
}

/// The counters of one namespace, from `paths`.
fn own_report(
    paths: &ProcPaths,
    interval_s: Option<f64>,
    all: bool,
) -> anyhow::Result<CounterReport> {
    let first = sockstat::sys::counters::read(paths).context("reading the counters")?;
    Ok(match interval_s {
        None => {
            let mut r = counters::since_boot(&first.set, all);
            r.warnings.extend(first.warnings);
            r
        }
        Some(s) => {
            let start = Instant::now();
            std::thread::sleep(Duration::from_secs_f64(s));
            let second = sockstat::sys::counters::read(paths).context("reading the counters")?;
            let elapsed = start.elapsed().as_secs_f64();
            let mut r = counters::deltas(&first.set, &second.set, elapsed, all);
            r.warnings.extend(second.warnings);
            r
        }
    })
}

/// The counters of every selected zone, both samples of each read inside that zone, as one
/// report whose rows carry their zone. A zone that cannot be read is left out with a warning;
/// when none can, that is an error.
fn zones_report(
    targets: &[ZoneTarget],
    root: &Path,
    interval_s: Option<f64>,
    all: bool,
) -> anyhow::Result<CounterReport> {
    let read = |t: &ZoneTarget| -> Result<(CounterRead, Instant), String> {
        match in_zone(t, root, sockstat::sys::counters::read) {
            Ok((Ok(r), _)) => Ok((r, Instant::now())),
            Ok((Err(e), _)) => Err(format!("zone {}: {e}", t.zone.name)),
            Err(why) => Err(format!("zone {}: {why}", t.zone.name)),
        }
    };
    let mut skipped = Vec::new();
    let mut firsts: Vec<(&ZoneTarget, CounterRead, Instant)> = Vec::new();
    for t in targets {
        match read(t) {
            Ok((r, at)) => firsts.push((t, r, at)),
            Err(e) => skipped.push(e),
        }
    }
    if firsts.is_empty() {
        anyhow::bail!(
            "cannot read the counters of any selected zone: {}",
            skipped.join("; ")
        );
    }
    let mut reports: Vec<(Zone, CounterReport)> = Vec::new();
    match interval_s {
        None => {
            for (t, first, _) in firsts {
                let mut r = counters::since_boot(&first.set, all);
                r.warnings.extend(first.warnings);
                reports.push((t.zone.clone(), r));
            }
        }
        Some(s) => {
            std::thread::sleep(Duration::from_secs_f64(s));
            for (t, first, at) in firsts {
                match read(t) {
                    Ok((second, _)) => {
                        let elapsed = at.elapsed().as_secs_f64();
                        let mut r = counters::deltas(&first.set, &second.set, elapsed, all);
                        r.warnings.extend(second.warnings);
                        reports.push((t.zone.clone(), r));
                    }
                    Err(e) => skipped.push(e),
                }
            }
        }
    }
    let mut report = counters::merge_zones(reports);
    report
        .warnings
        .extend(zones_skipped_warning(skipped, "their counters are missing"));
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse() {
        assert_eq!(parse_seconds("2"), Ok(2.0));
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
        for bad in ["0", "-1", "x", "inf", "NaN", "86401"] {
            let e = parse_seconds(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }

    #[test]
    fn interval_given_twice() {
        assert_eq!(interval(Some(2.0), None).unwrap(), Some(2.0));
        assert_eq!(interval(None, Some(3.0)).unwrap(), Some(3.0));
        assert_eq!(interval(Some(2.0), Some(2.0)).unwrap(), Some(2.0));
        assert_eq!(interval(None, None).unwrap(), None);
        let e = interval(Some(2.0), Some(3.0)).unwrap_err().to_string();
        assert!(e.contains("differs"), "{e}");
    }
}
