//! `sockstat counters [SECONDS]`: the kernel's TCP/IP counters, as deltas over an interval or as
//! values since boot. The numbers and their meanings come from `sockstat::counters`; this file
//! owns the flags, the waiting and the exit status.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use sockstat::counters;
use sockstat::render;

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

/// Prints warnings on stderr, one line each (details with -v).
pub fn print_warnings(warnings: &[sockstat::Warning], verbose: bool) {
    let stderr = io::stderr();
    let mut err = stderr.lock();
    for w in warnings {
        let _ = writeln!(err, "sockstat: warning: {}", w.message);
        if verbose {
            for d in &w.details {
                let _ = writeln!(err, "sockstat:   {d}");
            }
        }
    }
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
    /// Read the counter files from this directory instead of /proc (testing).
    #[arg(long, value_name = "DIR", hide = true)]
    pub proc_root: Option<PathBuf>,
}

/// Runs `sockstat counters`.
pub fn run(args: &CountersArgs, cli: &Cli) -> anyhow::Result<ExitCode> {
    let interval_s = interval(args.seconds, args.interval)?;
    let json = args.json || cli.output.json;
    let opts = output_options(args.quiet, args.verbose, args.color);
    let root = args
        .proc_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc"));
    let first = sockstat::sys::counters::read(&root).context("reading the counters")?;
    let report = match interval_s {
        None => {
            let mut r = counters::since_boot(&first.set, args.all);
            r.warnings.extend(first.warnings);
            r
        }
        Some(s) => {
            let start = Instant::now();
            std::thread::sleep(std::time::Duration::from_secs_f64(s));
            let second = sockstat::sys::counters::read(&root).context("reading the counters")?;
            let elapsed = start.elapsed().as_secs_f64();
            let mut r = counters::deltas(&first.set, &second.set, elapsed, args.all);
            r.warnings.extend(second.warnings);
            r
        }
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if json {
        render::counters::write_json(&report, &opts, &mut out)?;
        out.flush()?;
    } else {
        render::counters::write_table(&report, &opts, &mut out)?;
        out.flush()?;
        print_warnings(&report.warnings, args.verbose);
    }
    Ok(ExitCode::SUCCESS)
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
