//! `sockstat diagnose`: two samples of the TCP sockets (with tcp_info and socket memory), each
//! zone's counters and sysctls, an interval apart (`sockstat::Sampler`), judged by the rules of
//! `sockstat::diagnose` (`sockstat::judge`). This file owns the flags, the
//! waiting and the exit status: 0 healthy (or info only), 1 a finding at warning level or
//! above (errors as `main` maps them).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use sockstat::diagnose;
use sockstat::render;
use sockstat::{diagnose_with, Diagnosis};

use crate::cli::{ColorWhen, SourceArgs, TcpFilters, WatchArgs};
use crate::output::{announce_wait, options, write_warnings, Waits};

fn bandwidth(s: &str) -> Result<f64, String> {
    diagnose::parse_bandwidth(s)
}

/// Flags of `sockstat diagnose`.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_args(crate::cli::inet_only_help))]
#[command(after_help = concat!("\
Findings (doc/diagnose.md): send-buffer-limited, receive-window-limited,
window-scaling-missing, receive-buffer-locked, receiver-not-reading, delayed-ack,
memory-pressure, ephemeral-ports, timewait-syn-rejected, listen-overflow, retransmissions,
close-wait.

Examples:
  sockstat diagnose                         every TCP connection, 1 s apart
  sockstat diagnose -p 443 --interval 3     connections on port 443, over 3 s
  sockstat diagnose --bandwidth 100Mbit     also size buffers for a 100 Mbit/s path (BDP)
  sockstat diagnose --json                  for scripts (doc/diagnose.schema.json)
  sockstat diagnose --watch 10              judged again every 10 s

", crate::cli::exit_statuses!("a finding at warning level or above")))]
pub struct DiagnoseArgs {
    /// Filters.
    #[command(flatten)]
    pub filters: TcpFilters,
    /// Data sources.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Seconds between the two samples (fractions allowed).
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = crate::output::parse_seconds, help_heading = "Diagnosis")]
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
    /// Watch mode.
    #[command(flatten)]
    pub watch: WatchArgs,
    /// Print help.
    #[arg(short = 'h', long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// Runs `sockstat diagnose`.
///
/// Writes the report on `out` and its warnings on `err`.
pub fn run(
    a: &DiagnoseArgs,
    mut out: &mut dyn Write,
    err: &mut dyn Write,
    waits: Waits,
) -> anyhow::Result<ExitCode> {
    a.filters.connected_to.ports_only("diagnose")?;
    let q = crate::cli::query(&[&a.filters, &a.source])?;
    let mut how = Diagnosis::default();
    how.bandwidth = a.bandwidth;
    how.exact_locks = a.exact_locks;
    how.connect_events = true;
    announce_wait(
        waits,
        &format!("sampling the TCP connections twice, {} s apart", a.interval),
        "Ctrl-C cancels",
    );
    let report = diagnose_with(&q, Duration::from_secs_f64(a.interval), &how)?;
    let opts = options(false, a.verbose, a.color);
    if a.json {
        render::diagnose::write_json(&report, &opts, &mut out)?;
    } else {
        render::diagnose::write_text(&report, &opts, &mut out)?;
        write_warnings(err, &report.warnings, a.verbose);
    }
    Ok(if report.has_problems() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
