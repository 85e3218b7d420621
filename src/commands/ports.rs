//! `sockstat ports`: ephemeral-port use by destination, TIME-WAIT on the client and the server
//! side, and the settings that decide whether ports can be reused (doc/reference/calibration.md, R7 and R8).
//! The use case is `sockstat::run::ports` (sampling, analysis, who opened the connections);
//! this file owns the flags, the rendering and the exit status.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sockstat::{render, Query};

use crate::cli::{ColorWhen, EndpointArgs, FamilyArgs, WatchArgs, ZoneArgs};
use crate::output::{announce_wait, options, write_warnings, Waits};

/// Flags of `sockstat ports`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = concat!("\
The filters select the connections reported: a client's by its destination, a server's by its
listening port (-p 5432, or --sport 5432 for the servers and --dport 5432 for the clients).

Examples:
  sockstat ports                   ephemeral ports in use, by destination
  sockstat ports --interval 5      also the rate of new TIME-WAIT entries and the PAWS counters
  sockstat ports -p 5432 --json    one service's clients and servers, as JSON

", crate::cli::exit_statuses!()))]
pub struct PortsArgs {
    /// Families.
    #[command(flatten)]
    pub families: FamilyArgs,
    /// Ends.
    #[command(flatten)]
    pub endpoints: EndpointArgs,
    /// Sample twice, SECONDS apart: adds the rate of new TIME-WAIT entries per destination and
    /// the counter deltas (TW, TWRecycled, TCPTimeWaitOverflow, PAWSEstab, PAWSTimewait,
    /// TCPACKSkippedTimeWait); and, with CAP_BPF and CAP_PERFMON (or root), the processes that
    /// opened connections to each destination meanwhile (from connection events, as `sockstat
    /// events` sees them).
    #[arg(long, value_name = "SECONDS", value_parser = crate::output::parse_seconds)]
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
    /// Watch mode.
    #[command(flatten)]
    pub watch: WatchArgs,
    /// Read sysctls and counters from this directory instead of /proc (testing).
    #[arg(long, value_name = "DIR", hide = true)]
    pub proc_root: Option<PathBuf>,
}

impl PortsArgs {
    /// What is asked for: the families, zones and ends (`sockstat::run::ports` reads no more).
    fn asked(&self) -> anyhow::Result<Query> {
        let mut q = crate::cli::query(&[&self.families, &self.zones, &self.endpoints])?;
        if let Some(root) = &self.proc_root {
            q.gather.proc_root = root.clone();
        }
        Ok(q)
    }
}

/// Runs `sockstat ports`.
///
/// Writes the report on `out` and its warnings on `err`.
pub fn run(
    args: &PortsArgs,
    mut out: &mut dyn Write,
    err: &mut dyn Write,
    waits: Waits,
) -> anyhow::Result<ExitCode> {
    let json = args.json;
    let opts = options(args.quiet, args.verbose, args.color);
    let zones = &args.zones;
    let asked = args.asked()?;
    if let Some(s) = args.interval {
        announce_wait(
            waits,
            &format!("sampling the TCP sockets twice, {s} s apart"),
            "Ctrl-C cancels",
        );
    }
    let sockstat::run::ports::Ports {
        mut reports,
        warnings,
        zoned,
        ..
    } = sockstat::run::ports::run(&asked, args.interval.map(Duration::from_secs_f64))?;
    let warnings = &warnings;
    if !zoned || (!zones.all_zones && reports.len() == 1) {
        let r = reports.remove(0);
        if json {
            render::ports::write_json(&r, warnings, &opts, &mut out)?;
        } else {
            render::ports::write_table(&r, &opts, &mut out)?;
            write_warnings(err, warnings, args.verbose);
        }
    } else if json {
        render::ports::write_zones_json(&reports, warnings, &mut out)?;
    } else {
        render::ports::write_zones_table(&reports, &opts, &mut out)?;
        write_warnings(err, warnings, args.verbose);
    }
    Ok(ExitCode::SUCCESS)
}
