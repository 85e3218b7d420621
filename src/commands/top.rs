//! `sockstat top`: the live view. This file owns the flags, the clock and the signals; the
//! sampling, measuring and grouping are the library's (`sockstat::top`), the text and JSON its
//! renderer's (`sockstat::render::top`), the full-screen view `crate::tui`.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sockstat::render;
use sockstat::run::top::{Live, LiveOptions};
use sockstat::top::{group, By, Column};

use crate::cli::{ColorWhen, SourceArgs};

/// The live view's filters: the listing's, without `-u` (unix sockets carry no counters).
pub type TopFilters = crate::cli::InetFilters;

fn by(s: &str) -> Result<By, String> {
    By::from_name(s)
        .ok_or_else(|| format!("invalid grouping '{s}': give process, connection, remote or port"))
}

fn column(s: &str) -> Result<Column, String> {
    Column::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Column::ALL.iter().map(|c| c.name()).collect();
        format!("invalid column '{s}': give one of {}", names.join(", "))
    })
}

/// `--rescan`: seconds as `--interval` takes them, and 0 too (a walk at every refresh).
fn rescan(s: &str) -> Result<f64, String> {
    use crate::output::MAX_INTERVAL_S;
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=MAX_INTERVAL_S).contains(&v) => Ok(v),
        _ => Err(format!(
            "invalid rescan '{s}': give seconds from 0 (a walk at every refresh) to {MAX_INTERVAL_S}, like 5 or 0"
        )),
    }
}

/// Flags of `sockstat top`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = concat!("\
Rates are exact for TCP: the kernel's byte counters of every connection (tcp_info bytes_acked
and bytes_received), read twice and matched by socket cookie, over the time measured between
the two reads; no packet capture. As root, connections that open and close between two refreshes
are counted from connection events; otherwise the screen says they are not. UDP and other
protocols have no byte counters: their rates are shown as '?' (null in JSON), never 0.

Keys: s/< > sort column, r reverse, b grouping, / filter (the listing's flags, e.g. -p 443
--command nginx), Enter detail, k kill the selected connection, ? help, q quit.

Examples:
  sockstat top                              who is using the network, per process
  sockstat top --by connection -p 443       connections on port 443
  sockstat top -Z                           every container, each row with its zone
  sockstat top -b --count 5 --json          five refreshes, one JSON object per line

", crate::cli::exit_statuses!()))]
pub struct TopArgs {
    /// Filters.
    #[command(flatten)]
    pub filters: TopFilters,
    /// Data sources.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Seconds between refreshes (fractions allowed); the first rates appear after one.
    #[arg(long, short = 'd', value_name = "SECONDS", default_value = "1", value_parser = crate::output::parse_seconds, help_heading = "Live view")]
    pub interval: f64,
    /// Rows per process, connection, remote address or local port.
    #[arg(long, value_name = "GROUPING", default_value = "process", value_parser = by, help_heading = "Live view")]
    pub by: By,
    /// The column rows are sorted by, largest first: rate, send, recv, conns, retrans, rtt,
    /// findings, name.
    #[arg(long, value_name = "COLUMN", default_value = "rate", value_parser = column, help_heading = "Live view")]
    pub sort: Column,
    /// Write refreshes to standard output instead of the screen (text as top -b, or --json).
    #[arg(long, short = 'b', help_heading = "Live view")]
    pub batch: bool,
    /// The longest the holders found by one walk of every process's descriptors are used
    /// (0: a walk at every refresh); a socket no walk has seen makes a walk at once.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = rescan, help_heading = "Live view")]
    pub rescan: f64,
    /// Stop after N refreshes.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Live view")]
    pub count: Option<u64>,
    /// One JSON object per refresh and line (implies --batch).
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// No header line (batch text).
    #[arg(short = 'q', help_heading = "Output")]
    pub quiet: bool,
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

/// Waits until `deadline`, taking connection events as they come ([`Live::drain_every`]);
/// false when a signal asked to stop.
pub(crate) fn wait(live: &mut Live, deadline: Instant, stop: &AtomicBool) -> bool {
    loop {
        let took = live.drain();
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Live::drain_every(took)));
    }
}

/// Runs `sockstat top`.
pub fn run(a: &TopArgs) -> anyhow::Result<ExitCode> {
    let q = crate::cli::query(&[&a.filters, &a.source])?;
    let batch = a.batch || a.json;
    if !batch && !io::stdout().is_terminal() {
        return Err(crate::usage(
            "standard output is not a terminal: give --batch (-b) for text or --batch --json",
        ));
    }
    let stop = crate::watch::stop_flag()?;
    crate::alloc::use_mimalloc();
    let mut opts = LiveOptions::default();
    opts.events = true;
    opts.rescan = Duration::from_secs_f64(a.rescan);
    let live = Live::start(&q, &opts)?;
    if batch {
        self::batch(a, live, &stop)
    } else {
        crate::tui::run(a, live, &stop)
    }
}

fn batch(a: &TopArgs, mut live: Live, stop: &AtomicBool) -> anyhow::Result<ExitCode> {
    let interval = Duration::from_secs_f64(a.interval);
    let opts = crate::output::options(a.quiet, a.verbose, a.color);
    let stdout = io::stdout();
    let mut out = crate::commands::Noted::new(io::BufWriter::new(stdout.lock()));
    let mut next = Instant::now() + interval;
    let mut n = 0u64;
    while a.count.is_none_or(|c| n < c) {
        if !wait(&mut live, next, stop) {
            break;
        }
        next = (next + interval).max(Instant::now());
        let report = live.refresh()?;
        let g = group(&report, a.by, None, a.sort);
        let written = if a.json {
            render::top::write_json(&report, &g, &opts, &mut out)
        } else {
            let r = render::top::write_text(&report, &g, &opts, &mut out);
            r.and_then(|()| {
                if a.verbose {
                    for w in render::top::warnings(&report, &g) {
                        writeln!(out, "warning: {}", w.message)?;
                    }
                }
                writeln!(out)
            })
        };
        written.and_then(|()| out.flush()).map_err(|e| {
            anyhow::Error::new(e).context("cannot write the refresh to standard output")
        })?;
        n += 1;
    }
    Ok(ExitCode::SUCCESS)
}
