//! What the listing and every subcommand share to show their results: the renderer options
//! from the colour and header flags, warnings on stderr, what a long wait waits for, and
//! intervals in seconds.

use std::io::{self, IsTerminal, Write};

use sockstat::render;

use crate::cli::ColorWhen;

/// The longest interval accepted, seconds (a day).
pub(crate) const MAX_INTERVAL_S: f64 = 86_400.0;

/// Parses an interval in seconds: a positive number, fractions allowed (`10`, `0.5`).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= MAX_INTERVAL_S => Ok(v),
        _ => Err(format!(
            "invalid interval '{s}': give seconds greater than 0 and at most 86400, like 10 or 0.5"
        )),
    }
}

/// The interval from a positional SECONDS and `--interval`; both given must agree.
pub fn interval(positional: Option<f64>, flag: Option<f64>) -> anyhow::Result<Option<f64>> {
    match (positional, flag) {
        (Some(a), Some(b)) if a != b => Err(crate::usage(format!(
            "the interval is given twice and differs (SECONDS {a}, --interval {b}): give one"
        ))),
        (a, b) => Ok(a.or(b)),
    }
}

/// Whether to colour standard output: `always`, `never`, or (`auto`) only on a terminal, without
/// `NO_COLOR` and not with `TERM=dumb`.
pub fn use_color(when: ColorWhen) -> bool {
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
            !no_color && !dumb && io::stdout().is_terminal()
        }
    }
}

/// Renderer options for a subcommand's view: the listing's colour rules, a header unless `-q`.
pub fn options(quiet: bool, verbose: bool, color: ColorWhen) -> render::Options {
    let mut o = render::Options::new();
    o.header = !quiet;
    o.verbose = verbose;
    o.color = use_color(color);
    o
}

/// Whether a view says on the terminal what it waits for ([`announce_wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waits {
    /// It does (where standard error is a terminal).
    Announced,
    /// It does not: the watch screen's title says it.
    Silent,
}

/// Says on the terminal what a long wait waits for and how to stop it, in one line on standard
/// error (`sockstat: counting dropped packets for 10 s; Ctrl-C stops early and shows them`):
/// only when standard error is a terminal, so that nothing is added to a script's output or a
/// log, and never on standard output. The views that wait (drops, events, trace, and counters,
/// ports and diagnose outside watch mode) all say it here.
pub fn announce_wait(waits: Waits, what: &str, how_to_stop: &str) {
    if waits == Waits::Announced && io::stderr().is_terminal() {
        let _ = writeln!(io::stderr().lock(), "sockstat: {what}; {how_to_stop}");
    }
}

/// Writes warnings as stderr shows them: one line each, details under `-v`.
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
