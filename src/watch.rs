//! Watch mode (`--watch [SECONDS]`, `--events`, `--count N`): a view collected and shown again
//! and again by one refresh loop ([`run`]), for the listing and for the `ports`, `counters` and
//! `diagnose` views alike. On a terminal each refresh redraws the screen on the alternate
//! screen, which is restored on exit (also on Ctrl-C, SIGTERM and SIGHUP); elsewhere successive
//! refreshes are printed, each after a `=== <UTC time> ===` line (JSON: one document per line).
//! `--events` and `-T --json` stream lines instead: the sockets that opened and closed between
//! refreshes, or one record per TCP connection per refresh (a time series).
//!
//! What changed and how it is written are the library's (`sockstat::model::diff`,
//! `sockstat::render::events`, `sockstat::render::series`); this module owns the terminal, the
//! clock and the signals.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use sockstat::render::{self, Options};
use sockstat::text::{fmt::utc_timestamp, sanitize};
use sockstat::{Query, Snapshot};

use crate::cli::Cli;

/// The interval when `--watch` is given without one.
pub const DEFAULT_INTERVAL_SECS: f64 = 2.0;

/// Sets the flag on SIGINT, SIGTERM and SIGHUP, so the loop ends cleanly (terminal restored).
pub(crate) fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .with_context(|| format!("cannot handle signal {sig}"))?;
    }
    Ok(stop)
}

/// Sleeps until `next_at + interval` (or `until`, if sooner), waking every 50 ms to notice
/// `stop`, and moves `next_at` there. A refresh that took longer than the interval starts the
/// next one at once, from now: no burst of catch-up refreshes.
pub(crate) fn wait_for_next(
    stop: &AtomicBool,
    next_at: &mut Instant,
    interval: Duration,
    until: Option<Instant>,
) {
    *next_at += interval;
    let now = Instant::now();
    if *next_at < now {
        *next_at = now;
    }
    let end = until.map_or(*next_at, |u| (*next_at).min(u));
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        let left = end.saturating_duration_since(Instant::now());
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// The alternate screen, entered on creation and left on drop (also when the loop fails).
struct AltScreen;

impl AltScreen {
    fn enter() -> io::Result<AltScreen> {
        let mut out = io::stdout().lock();
        // Alternate screen, cursor hidden, no line wrap (a row wider than the terminal is cut
        // rather than wrapped onto the next line, which would scroll the title off).
        out.write_all(b"\x1b[?1049h\x1b[?25l\x1b[?7l")?;
        out.flush()?;
        Ok(AltScreen)
    }
}

impl Drop for AltScreen {
    fn drop(&mut self) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(b"\x1b[?7h\x1b[?25h\x1b[?1049l");
        let _ = out.flush();
    }
}

/// Writes one refresh to standard output; a failure (a full disk; a closed pipe ends quietly
/// in `main`) says it was the output.
fn emit(buf: &[u8]) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(buf)
        .and_then(|()| out.flush())
        .context("cannot write the refresh to standard output")
}

/// Rows of the terminal on stdout, when it is one.
fn terminal_rows() -> Option<usize> {
    // SAFETY: TIOCGWINSZ writes a `winsize` into the struct we own.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        (libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_row > 0)
            .then_some(ws.ws_row as usize)
    }
}

/// The command line as typed, for the screen's title line.
pub fn title() -> String {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| sanitize::for_terminal(a.as_encoded_bytes()).into_owned())
        .collect();
    std::iter::once("sockstat".to_string())
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One screen: a title line as watch(1) has it, then the view, cut to the terminal's height;
/// every line clears to its end and the rest of the screen is cleared, so nothing flickers.
fn write_frame(
    buf: &mut Vec<u8>,
    what: &str,
    interval: Duration,
    now: &str,
    body: &[u8],
    rows: Option<usize>,
) {
    buf.extend_from_slice(b"\x1b[H");
    let title = format!("Every {:.1}s: {what}    {now}", interval.as_secs_f64());
    buf.extend_from_slice(title.as_bytes());
    buf.extend_from_slice(b"\x1b[K\n\x1b[K\n");
    let lines: Vec<&[u8]> = body
        .strip_suffix(b"\n")
        .unwrap_or(body)
        .split(|&b| b == b'\n')
        .collect();
    let room = rows.map_or(usize::MAX, |r| r.saturating_sub(3).max(1));
    let shown = if lines.len() > room {
        room - 1
    } else {
        lines.len()
    };
    for l in &lines[..shown] {
        buf.extend_from_slice(l);
        buf.extend_from_slice(b"\x1b[K\n");
    }
    if shown < lines.len() {
        let more = format!(
            "... {} more lines (filter, or pipe to see all)",
            lines.len() - shown
        );
        buf.extend_from_slice(more.as_bytes());
        buf.extend_from_slice(b"\x1b[K\n");
    }
    buf.extend_from_slice(b"\x1b[J");
}

/// What one refresh of a view wrote.
#[derive(Default)]
pub struct Frame {
    /// What the view writes on standard output.
    pub out: Vec<u8>,
    /// Its warning lines (`sockstat: warning: ...`), as it writes them on standard error.
    pub err: Vec<u8>,
    /// What identifies the warnings of `err` from one refresh to the next (the listing's codes,
    /// so that a count that moves does not repeat them); `None`: `err` itself. Off the screen,
    /// `err` is printed when this changes.
    pub err_key: Option<String>,
}

/// How the refreshes of a view are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Whole refreshes: redrawn on a terminal (unless JSON, or `TERM=dumb`), warnings included;
    /// elsewhere each after a `=== <UTC time> ===` line, or with `json` one document per line.
    Snapshots {
        /// The view writes one JSON document.
        json: bool,
    },
    /// Lines appended as the view writes them (events, the time series): no screen, no stamps.
    Stream,
}

/// Runs `refresh` every `interval_s` seconds until `count` refreshes were made or a signal
/// arrives, showing each as `layout` says. `refresh` runs the view once, writing into the
/// buffers of a [`Frame`], and returns the view's exit status; the exit status of the last
/// refresh is returned.
pub fn run(
    interval_s: f64,
    count: Option<u64>,
    layout: Layout,
    what: &str,
    mut refresh: impl FnMut(&mut Frame) -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    let interval = Duration::from_secs_f64(interval_s);
    let screen = layout == Layout::Snapshots { json: false }
        && io::stdout().is_terminal()
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    let stop = stop_flag()?;
    let _screen = if screen {
        Some(AltScreen::enter()?)
    } else {
        None
    };
    let mut last_err: Option<String> = None;
    let mut code = ExitCode::SUCCESS;
    let mut refreshes: u64 = 0;
    let mut next_at = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let mut frame = Frame {
            out: Vec::with_capacity(16 * 1024),
            ..Frame::default()
        };
        code = refresh(&mut frame)?;
        if stop.load(Ordering::Relaxed) && refreshes > 0 {
            // Interrupted mid-refresh (a view that samples twice): nothing half-done is shown.
            break;
        }
        refreshes += 1;
        let now = utc_timestamp(SystemTime::now());
        let mut buf: Vec<u8> = Vec::with_capacity(frame.out.len() + 256);
        match layout {
            _ if screen => {
                let mut body = frame.out;
                body.extend_from_slice(&frame.err);
                write_frame(&mut buf, what, interval, &now, &body, terminal_rows());
            }
            Layout::Snapshots { json: true } => {
                // One document per line: the renderers' newlines are only layout (JSON strings
                // carry theirs escaped).
                buf.extend(frame.out.iter().filter(|&&b| b != b'\n'));
                buf.push(b'\n');
            }
            Layout::Snapshots { json: false } => {
                writeln!(buf, "=== {now} ===")?;
                buf.extend_from_slice(&frame.out);
            }
            Layout::Stream => buf = frame.out,
        }
        emit(&buf)?;
        if !screen {
            let key = frame
                .err_key
                .take()
                .unwrap_or_else(|| String::from_utf8_lossy(&frame.err).into_owned());
            if last_err.as_ref() != Some(&key) {
                let _ = io::stderr().lock().write_all(&frame.err);
                last_err = Some(key);
            }
        }
        if count.is_some_and(|n| refreshes >= n) {
            break;
        }
        wait_for_next(&stop, &mut next_at, interval, None);
    }
    Ok(code)
}

/// The listing's watch mode: the listing as a snapshot view, `--events` (the first refresh is
/// the baseline), or with `-T --json` the TCP time series.
pub fn run_listing(query: &Query, opts: &Options, cli: &Cli, what: &str) -> anyhow::Result<()> {
    let o = &cli.output;
    let interval = cli.watch.watch.unwrap_or(DEFAULT_INTERVAL_SECS);
    let count = cli.watch.count;
    if cli.events {
        let mut prev: Option<Snapshot> = None;
        run(interval, count, Layout::Stream, what, |f| {
            let mut snap = sockstat::collect(query)?;
            let time = SystemTime::now();
            if let Some(p) = &prev {
                let changes = sockstat::model::diff(p, &snap);
                if o.json {
                    render::events::write_json(p, &snap, &changes, time, opts, &mut f.out)?;
                } else {
                    render::events::write_text(p, &snap, &changes, opts, &mut f.out)?;
                }
                sockstat::model::carry_owners(p, &mut snap);
            }
            warnings(&snap, o.verbose, f);
            prev = Some(snap);
            Ok(ExitCode::SUCCESS)
        })?;
    } else if o.tcp_info && o.json && !o.summary {
        run(interval, count, Layout::Stream, what, |f| {
            let snap = sockstat::collect(query)?;
            render::series::write(&snap, SystemTime::now(), opts, &mut f.out)?;
            warnings(&snap, o.verbose, f);
            Ok(ExitCode::SUCCESS)
        })?;
    } else {
        run(
            interval,
            count,
            Layout::Snapshots { json: o.json },
            what,
            |f| {
                let snap = sockstat::collect(query)?;
                crate::write_listing(&snap, opts, o, &mut f.out)?;
                // A JSON document carries its warnings.
                if !o.json {
                    warnings(&snap, o.verbose, f);
                }
                Ok(ExitCode::SUCCESS)
            },
        )?;
    }
    Ok(())
}

/// The snapshot's warnings as the listing prints them, keyed by their codes.
fn warnings(snap: &Snapshot, verbose: bool, f: &mut Frame) {
    crate::output::write_warnings(&mut f.err, &snap.warnings, verbose);
    let codes: Vec<&str> = snap.warnings.iter().map(|w| w.code.name()).collect();
    f.err_key = Some(codes.join(" "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_fit_the_terminal() {
        let body = b"H\na\nb\nc\nd\ne\n";
        let mut buf = Vec::new();
        write_frame(
            &mut buf,
            "sockstat",
            Duration::from_secs(2),
            "T",
            body,
            Some(6),
        );
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("\x1b[HEvery 2.0s: sockstat    T"));
        assert!(
            text.contains("H\x1b[K\na\x1b[K\n... 4 more lines"),
            "{text:?}"
        );
        assert!(text.ends_with("\x1b[J"));
        let mut buf = Vec::new();
        write_frame(&mut buf, "s", Duration::from_secs(2), "T", body, None);
        assert!(String::from_utf8(buf).unwrap().contains("e\x1b[K\n\x1b[J"));
    }
}
