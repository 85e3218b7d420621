//! `sockstat events`: every TCP connect, accept, close and failed connect as it happens, from
//! BPF programs on kernel tracepoints (`sockstat::sys::tcp_events`), with the process that
//! called connect() or accept(), filtered like the listing; `--stats` sums them per side,
//! command and destination at the end.

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use sockstat::render::conn_events::{self, LineOptions};
use sockstat::run::events::{Batch, Stream, StreamOptions, Tracer, ZoneScope};

use crate::cli::{ConnectedToArgs, EndpointArgs, FamilyArgs, HolderArgs, ZoneArgs};
use crate::output::Waits;

/// How long the consumer waits for records before checking for a stop.
const POLL: Duration = Duration::from_millis(50);
/// Records that may wait between the ring-reading thread and the consumer (160 bytes each:
/// 80 MB at most), about six seconds of 20,000 connections per second on both ends.
const MAX_BACKLOG: usize = 500_000;

/// Flags of `sockstat events`.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_args(crate::cli::inet_only_help))]
#[command(after_help = concat!("\
One line per TCP connection event, as the kernel sees it: 'connect' when a connect() completes,
'accept' when a process takes a connection off a listener's queue, 'close' when a connection
ends (with its duration, connect latency or accept wait, SYN retransmits, payload bytes and how
it ended: local-close means this end closed first and holds the TIME-WAIT), 'failed' when a
connect() gives up (refused, timeout, unreachable, no-local-port, aborted), and 'lost' when the
kernel could not hand events over. Both ends of a connection on this host are reported, each
with its own process, and each names the other ('peer').

Filters select connections as the listing does; --pid, --user and --command apply to the process
that called connect() or accept(). Like the listing, events of the network namespace sockstat
runs in unless -z or -Z say otherwise.

Needs CAP_BPF and CAP_PERFMON (or root), and a kernel with BTF and the sock:inet_sock_set_state
tracepoint. Without them it says what is missing and exits with status 3; the listing's --events
(polling) then still works, but sees only sockets that live longer than its interval.

Examples:
  sockstat events --dport 5432                connections to port 5432, live
  sockstat events --command curl --stats      what curl connects to, and how fast
  sockstat events -4 --dst 192.0.2.7 --json   JSON Lines, one object per event
  sockstat events --duration 60 --stats -q    a one-minute summary, no event lines

Ctrl-C or SIGTERM ends it (with --stats, after the summary) with status 0.

", crate::cli::exit_statuses!()))]
pub struct EventsArgs {
    /// Filters.
    #[command(flatten)]
    pub filters: EventFilters,
    /// Stop after SECONDS (default: run until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECONDS", value_parser = crate::output::parse_seconds, help_heading = "Events")]
    pub duration: Option<f64>,
    /// At the end, a summary per side, command and destination: connections, failures, connect
    /// latency (client) or accept wait (server) percentiles and log2 histogram, SYN
    /// retransmits, bytes, and where the TIME-WAIT entries were left.
    #[arg(long, help_heading = "Events")]
    pub stats: bool,
    /// JSON Lines: one object per event (schema version 1), and with --stats the summary as
    /// one object on the last line.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Show numeric uids (no user name lookup).
    #[arg(short = 'n', help_heading = "Output")]
    pub numeric: bool,
    /// Do not print the header line; with --stats, print only the summary.
    #[arg(short = 'q', help_heading = "Output")]
    pub quiet: bool,
    /// Print what the BPF programs cost in the kernel (runs, ns per run) and how long loading
    /// them took, on standard error at the end.
    #[arg(long, hide = true)]
    pub bpf_stats: bool,
    /// The kernel ring buffer's size in pages (a power of two; default 4096, 16 MiB). A small
    /// one shows what is reported when the kernel cannot hand events over.
    #[arg(long, value_name = "PAGES", hide = true, value_parser = ring_pages)]
    pub ring_pages: Option<usize>,
    /// Print help.
    #[arg(short = 'h', long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

fn ring_pages(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n.is_power_of_two() && n <= 1 << 18 => Ok(n),
        _ => Err(format!(
            "invalid ring size '{s}': give a power of two from 1 to 262144 pages"
        )),
    }
}

crate::cli::filters! {
    /// The filters that apply to connection events: TCP connections as they open and close, so
    /// neither `-u`, `-c`, `-l`, `--state` nor `-P`.
    pub struct EventFilters {
        families: FamilyArgs,
        endpoints: EndpointArgs,
        holders: HolderArgs,
        connected_to: ConnectedToArgs,
        zones: ZoneArgs,
    }
}

/// The events command's output.
struct Output<'a> {
    a: &'a EventsArgs,
    opts: LineOptions,
    out: io::BufWriter<io::StdoutLock<'static>>,
}

impl Output<'_> {
    fn print_events(&self) -> bool {
        !(self.a.stats && self.a.quiet)
    }

    /// Writes a batch's events and what was lost meanwhile.
    fn batch(&mut self, b: &Batch) -> anyhow::Result<()> {
        if self.print_events() {
            for z in &b.events {
                if self.a.json {
                    conn_events::write_json(&mut self.out, &z.event, z.zone.as_deref())?;
                } else {
                    writeln!(
                        self.out,
                        "{}",
                        conn_events::line(&z.event, z.zone.as_deref(), &self.opts)
                    )?;
                }
            }
        }
        if b.undecodable > 0 {
            eprintln!(
                "sockstat: {} event records did not decode (a bug: please report it)",
                b.undecodable
            );
        }
        if !b.lost.is_zero() {
            let t = SystemTime::now();
            if self.a.json {
                if self.print_events() {
                    serde_json::to_writer(&mut self.out, &conn_events::lost_json(t, &b.lost))?;
                    self.out.write_all(b"\n")?;
                }
            } else if self.print_events() {
                writeln!(
                    self.out,
                    "{}",
                    conn_events::lost_line(t, &b.lost, &self.opts)
                )?;
            } else {
                self.out.flush()?;
                eprintln!(
                    "sockstat: {}",
                    conn_events::lost_line(t, &b.lost, &LineOptions::default())
                );
            }
        }
        self.out.flush()?;
        Ok(())
    }
}

/// Runs `sockstat events`.
pub fn run(a: &EventsArgs) -> anyhow::Result<ExitCode> {
    a.filters.connected_to.ports_only("events")?;
    let q = crate::cli::query(&[&a.filters])?;
    let zones = ZoneScope::new(&q)?;
    let stop = crate::watch::stop_flag()?;
    let ring_bytes = match a.ring_pages {
        Some(pages) => pages * page_size(),
        None => sockstat::run::events::RING_BYTES,
    };
    let tracer = Tracer::start(a.bpf_stats, ring_bytes).map_err(|u| {
        crate::explained(
            format!(
                "cannot trace connection events: {u}; the listing's --events (polling) still \
                 works but sees only sockets that live longer than its interval"
            ),
            u,
        )
    })?;
    if let Some(why) = &tracer.accept_unavailable {
        eprintln!(
            "sockstat: warning: accept() is not traced ({why}): server-side events carry no process and no accept wait"
        );
    }
    if nested_pid_namespace() {
        eprintln!(
            "sockstat: warning: sockstat runs in a nested pid namespace; event pids are those of the host's"
        );
    }
    let (what, how_to_stop) = match (a.duration, a.stats) {
        (Some(d), false) => (
            format!("tracing TCP connection events for {d} s"),
            "Ctrl-C stops early",
        ),
        (Some(d), true) => (
            format!("tracing TCP connection events for {d} s"),
            "Ctrl-C stops early and prints the summary",
        ),
        (None, false) => (
            "tracing TCP connection events until stopped".into(),
            "Ctrl-C stops",
        ),
        (None, true) => (
            "tracing TCP connection events until stopped".into(),
            "Ctrl-C stops and prints the summary",
        ),
    };
    crate::output::announce_wait(Waits::Announced, &what, how_to_stop);
    let started = Instant::now();
    let deadline = a.duration.map(|d| started + Duration::from_secs_f64(d));
    let mut opts = StreamOptions::default();
    opts.max_backlog = MAX_BACKLOG;
    opts.resolve_users = !a.numeric;
    opts.stats = a.stats;
    let mut stream = Stream::new(&q, zones, tracer, opts)
        .context("starting the thread that reads the ring buffer")?;
    let mut out = Output {
        a,
        opts: LineOptions {
            numeric: a.numeric,
            zone: stream.every_zone(),
        },
        out: io::BufWriter::new(io::stdout().lock()),
    };
    if !a.json && !a.quiet && out.print_events() {
        writeln!(out.out, "{}", conn_events::header(&out.opts))?;
        out.out.flush()?;
    }
    loop {
        let batch = stream.next(POLL);
        out.batch(&batch)?;
        if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    // What the kernel wrote up to now.
    let end = stream.finish();
    out.batch(&end.rest)?;
    let elapsed = started.elapsed().as_secs_f64();
    if let Some(stats) = &end.stats {
        if a.json {
            serde_json::to_writer(
                &mut out.out,
                &conn_events::stats_json(stats, &end.lost, elapsed),
            )?;
            out.out.write_all(b"\n")?;
        } else {
            if out.print_events() {
                writeln!(out.out)?;
            }
            write!(
                out.out,
                "{}",
                conn_events::stats_text(stats, &end.lost, elapsed)
            )?;
        }
    }
    out.out.flush()?;
    if !end.lost.is_zero() {
        // Also where a reader of the output file would not look.
        eprintln!(
            "sockstat: {}",
            conn_events::lost_line(SystemTime::now(), &end.lost, &LineOptions::default())
                .split_once("lost")
                .map_or(String::new(), |(_, rest)| format!(
                    "lost over the run: {}",
                    rest.trim()
                ))
        );
    }
    if let (true, Some(tracer)) = (a.bpf_stats, &end.tracer) {
        eprintln!(
            "sockstat: BPF programs loaded and attached in {:.1} ms",
            tracer.load_time.as_secs_f64() * 1e3
        );
        for (name, s) in tracer.run_stats() {
            let per = if s.runs > 0 {
                s.run_time_ns as f64 / s.runs as f64
            } else {
                0.0
            };
            eprintln!(
                "sockstat: {name}: {} runs, {:.3} s in the kernel, {per:.0} ns per run, {} skipped",
                s.runs,
                s.run_time_ns as f64 / 1e9,
                s.recursion_misses
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// True when this process's pid namespace is not the host's (its NSpid line has more than one
/// number).
fn nested_pid_namespace() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .is_some_and(|v| v.split_whitespace().count() > 1)
    })
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}
