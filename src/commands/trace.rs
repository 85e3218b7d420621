//! `sockstat trace`: one TCP connection sampled every --interval for --duration, drawn as an
//! SVG picture (`sockstat::render::trace`) and/or printed as JSON lines. The filters must pick
//! exactly one connection; it is followed by its socket cookie until it closes.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sockstat::run::trace::{Follow, Step};
use sockstat::trace::Point;
use sockstat::{Snapshot, Socket};

use crate::cli::{SourceArgs, TcpFilters};
use crate::output::Waits;

/// Parses the sampling interval: seconds, from 1 ms to 60 s.
fn sample_interval(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.001..=60.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "invalid sampling interval '{s}': give seconds from 0.001 to 60, like 0.05"
        )),
    }
}

/// Flags of `sockstat trace`.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_args(crate::cli::inet_only_help))]
#[command(after_help = concat!("\
The filters must select exactly one TCP connection (not a listener). Both ends of a loopback
connection match its port: pick one with --sport or --dport, --id (sockstat -i shows it) or
--cookie. If none matches yet, trace waits for one until --duration ends.

The picture: bytes acknowledged over time on top; below, the congestion window, the peer's
window, the bytes in flight, the send buffer and the memory queued against it. A send-buffer
plateau is the send queue held at the send buffer while the bytes in flight stay well under
both windows; a zero-window stall is the peer window on the floor while the acked line stays
flat.

Examples:
  sockstat trace --dport 5001 --dst 198.51.100.7 -o transfer.svg
  sockstat trace --pid 4121 --duration 30 --interval 0.01 -o slow.svg
  sockstat trace --sport 8080 --id 51231 -o loopback.svg
  sockstat trace --sport 443 --src 192.0.2.10 --json | jq -c '{t_s, in_flight_bytes}'

Several connections matching is bad usage (status 2: narrow the filters); none matching within
--duration ends the work with status 4.
", crate::cli::exit_statuses!()))]
pub struct TraceArgs {
    /// Filters.
    #[command(flatten)]
    pub filters: TcpFilters,
    /// Data sources.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Only the socket with this id (the inode: -i's ID column, "id" in JSON); picks one end of
    /// a loopback connection.
    #[arg(long, value_name = "ID", help_heading = "Trace")]
    pub id: Option<u64>,
    /// Only the socket with this cookie ("cookie" in JSON, `sockstat --events`).
    #[arg(long, value_name = "COOKIE", help_heading = "Trace")]
    pub cookie: Option<u64>,
    /// Write the picture to FILE (SVG).
    #[arg(short = 'o', long, value_name = "FILE", help_heading = "Trace")]
    pub output: Option<PathBuf>,
    /// Seconds between samples (fractions allowed, 0.001 to 60).
    #[arg(long, value_name = "SECONDS", default_value = "0.05", value_parser = sample_interval, help_heading = "Trace")]
    pub interval: f64,
    /// How long to trace, in seconds from the connection's first sample, and how long to wait
    /// for one to match (the trace also ends when the connection closes or on Ctrl-C; what was
    /// sampled is still drawn).
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = crate::output::parse_seconds, help_heading = "Trace")]
    pub duration: f64,
    /// Print each sample as a JSON line on stdout as it is taken, then one line with the
    /// connection and the summary.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Print help.
    #[arg(short = 'h', long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// The connections of `snap` a trace can follow: TCP with tcp_info, not listening, with the
/// id and cookie asked for.
fn describe(snap: &Snapshot, s: &Socket) -> String {
    sockstat::render::events::line(' ', snap, s, false)
        .trim_start()
        .to_string()
}

/// Runs `sockstat trace`.
pub fn run(a: &TraceArgs) -> anyhow::Result<ExitCode> {
    let json = a.json;
    if a.output.is_none() && !json {
        return Err(crate::usage(
            "trace needs -o FILE.svg for the picture, or --json for the samples",
        ));
    }
    if let Some(p) = &a.output {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !ext.eq_ignore_ascii_case("svg") {
            return Err(crate::usage(format!(
                "cannot write '{}': trace draws SVG; name the file .svg (rsvg-convert or a browser turns it into PNG)",
                sockstat::text::sanitize::for_terminal(p.as_os_str().as_encoded_bytes())
            )));
        }
    }
    a.filters.connected_to.ports_only("trace")?;
    let mut q = crate::cli::query(&[&a.filters, &a.source])?;
    q.narrow_to_tcp_internals()?;
    let mut follow = Follow::new(&q, a.id, a.cookie);

    let stop = crate::watch::stop_flag()?;
    let interval = Duration::from_secs_f64(a.interval);
    // Waiting for the connection and then tracing it each get --duration: a slow first
    // collection (a host with many open files) does not eat the trace's window.
    let mut deadline = Instant::now() + Duration::from_secs_f64(a.duration);
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut title = String::new();
    let mut next_at = Instant::now();
    let mut waited = false;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        match follow.step()? {
            Step::Waiting if !waited => {
                crate::output::announce_wait(
                    Waits::Announced,
                    &format!(
                        "no TCP connection matches the filters yet; waiting up to {} s for one",
                        a.duration
                    ),
                    "Ctrl-C stops",
                );
                waited = true;
            }
            Step::Found {
                snapshot,
                socket,
                point,
            } => {
                let start = follow.started().unwrap_or_else(Instant::now);
                deadline = start + Duration::from_secs_f64(a.duration);
                title = describe(&snapshot, &snapshot.sockets[socket]);
                crate::output::announce_wait(
                    Waits::Announced,
                    &format!(
                        "tracing {title} for up to {} s, or until it closes",
                        a.duration
                    ),
                    "Ctrl-C stops and keeps what was sampled",
                );
                if let Some(p) = point {
                    emit(&mut out, json, &p)?;
                }
            }
            Step::Several { snapshot, matching } => {
                let n = matching.len();
                let shown: Vec<String> = matching
                    .iter()
                    .take(3)
                    .map(|&i| describe(&snapshot, &snapshot.sockets[i]))
                    .collect();
                return Err(crate::usage(format!(
                    "{n} TCP connections match ({}{}): narrow the filters to one with --id, --cookie, --pid, --sport, --dport, --src or --dst",
                    shown.join("; "),
                    if n > 3 { "; ..." } else { "" }
                )));
            }
            Step::Point(Some(p)) => emit(&mut out, json, &p)?,
            Step::Closed => break,
            // Still waiting (announced once), a sample without a point, or a step this command
            // does not know yet: nothing to show.
            _ => {}
        }
        crate::watch::wait_for_next(&stop, &mut next_at, interval, Some(deadline));
    }
    let warnings = follow.warnings().to_vec();
    let Some(trace) = follow.into_trace() else {
        anyhow::bail!(
            "no TCP connection matched the filters within {} s",
            a.duration
        );
    };
    let summary = trace.summary();
    if json {
        let line = serde_json::json!({
            "connection": title,
            "cookie": trace.cookie.map(|c| c.to_string()),
            "congestion": trace.congestion,
            "closed_at_s": trace.closed_at_s,
            "summary": summary,
        });
        serde_json::to_writer(&mut out, &line)
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .context(TO_STDOUT)?;
    }
    if let Some(path) = &a.output {
        // With more privilege than its caller, sockstat writes the file as the caller would.
        sockstat::privilege::as_caller(|| {
            write_atomically(path, |f| {
                sockstat::render::trace::write_svg(&trace, &format!("sockstat trace: {title}"), f)
            })
        })
        .and_then(|r| r)
        .with_context(|| format!("cannot write the picture to {}", path.display()))?;
        if !json {
            let facts = sockstat::render::trace::summary_facts(&trace).join(", ");
            writeln!(out, "{title}")
                .and_then(|()| {
                    writeln!(
                        out,
                        "wrote {}: {}",
                        sockstat::text::sanitize::for_terminal(path.as_os_str().as_encoded_bytes()),
                        sockstat::text::sanitize::for_terminal(facts.as_bytes())
                    )
                })
                .context(TO_STDOUT)?;
        }
    }
    out.flush().context(TO_STDOUT)?;
    drop(out);
    crate::output::write_warnings(&mut io::stderr().lock(), &warnings, false);
    Ok(ExitCode::SUCCESS)
}

fn emit(out: &mut impl Write, json: bool, p: &Point) -> anyhow::Result<()> {
    if json {
        serde_json::to_writer(&mut *out, p)
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
            .context(TO_STDOUT)?;
    }
    Ok(())
}

const TO_STDOUT: &str = "cannot write the trace to standard output";

/// Writes the file next to its final name and renames it there, so a reader never sees half a
/// picture and an earlier picture is not lost to a failed write.
fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut io::BufWriter<std::fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("not a file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = io::BufWriter::new(std::fs::File::create(&tmp)?);
        write(&mut f)?;
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
