//! `sockstat counters [SECONDS]`: the kernel's TCP/IP counters, as deltas over an interval or as
//! values since boot. The use case is `sockstat::run::counters` (each zone's counters read
//! inside it, the numbers and their meanings from `sockstat::counters`); this file owns the
//! flags, the rendering and the exit status.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sockstat::{render, Query};

use crate::cli::{ColorWhen, WatchArgs, ZoneArgs};
use crate::output::{announce_wait, interval, options, write_warnings, Waits};

/// Flags of `sockstat counters`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = concat!("\
Examples:
  sockstat counters 10          what moved in the next 10 seconds
  sockstat counters --json 5    the same, as JSON
  sockstat counters --all       every counter since boot, zeros too
  sockstat counters --watch 5   what moved in each 5 seconds, again and again

", crate::cli::exit_statuses!()))]
pub struct CountersArgs {
    /// Measure deltas over this many seconds (fractions allowed); without it, values since boot
    /// (under --watch: deltas over the watch interval).
    #[arg(value_name = "SECONDS", value_parser = crate::output::parse_seconds)]
    pub seconds: Option<f64>,
    /// Same as SECONDS.
    #[arg(long, value_name = "SECONDS", value_parser = crate::output::parse_seconds)]
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
    /// Watch mode.
    #[command(flatten)]
    pub watch: WatchArgs,
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
    mut out: &mut dyn Write,
    err: &mut dyn Write,
    waits: Waits,
) -> anyhow::Result<ExitCode> {
    let interval_s = interval(args.seconds, args.interval)?.or(args.watch.interval());
    let json = args.json;
    let zones = &args.zones;
    let mut q = Query::new();
    q.select.zones = zones.select();
    if let Some(root) = &args.proc_root {
        q.gather.proc_root = root.clone();
    }
    if let Some(s) = interval_s {
        announce_wait(
            waits,
            &format!("measuring the counters' deltas over {s} s"),
            "Ctrl-C cancels",
        );
    }
    let report =
        sockstat::run::counters::run(&q, interval_s.map(Duration::from_secs_f64), args.all)?;
    let mut opts = options(args.quiet, args.verbose, args.color);
    opts.zone = zones.all_zones;
    if json {
        render::counters::write_json(&report, &opts, &mut out)?;
    } else {
        render::counters::write_table(&report, &opts, &mut out)?;
        write_warnings(err, &report.warnings, args.verbose);
    }
    Ok(ExitCode::SUCCESS)
}
