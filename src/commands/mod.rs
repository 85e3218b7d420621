//! Subcommands: views other than the listing. Each lives in its own file and owns its flags,
//! made of the groups of `crate::cli` it can use; `run` dispatches.

pub mod counters;
pub mod diagnose;
pub mod drops;
pub mod events;
pub mod kill;
pub mod ports;
pub mod serve;
pub mod top;
pub mod trace;

use std::io::{self, Write};
use std::process::ExitCode;

use crate::output::Waits;

/// The subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Kernel TCP/IP counters as deltas over an interval, with their meanings.
    ///
    /// The counters of /proc/net/snmp, /proc/net/netstat and /proc/net/snmp6 (of the network
    /// namespace sockstat runs in, or of the zones -z/-Z select), paired by name, each with a one-line meaning. With SECONDS:
    /// the deltas over that interval; without: the values since boot (or since the namespace was
    /// created). Sorted smallest first, so the biggest movers end just above the prompt. A '!'
    /// marks counters whose rise signals trouble (drops, overflows, timeouts, PAWS rejects). A
    /// counter that went down (reset, namespace recreated) is shown as 'reset', never as a huge
    /// number.
    Counters(counters::CountersArgs),
    /// What limits each TCP connection, and what to change.
    ///
    /// Samples every TCP connection twice, --interval apart (tcp_info, socket memory), with the
    /// namespace's counters and sysctls, and reports what limits each one: a send buffer or
    /// receive window too small for the path, window scaling missing, a locked receive buffer,
    /// a receiver that does not read, delayed ACKs, retransmissions, a full listen queue,
    /// TIME-WAIT trouble, ephemeral ports, TCP memory pressure, connections left in CLOSE_WAIT.
    /// Each finding names the connection and its process, gives the
    /// numbers behind it and the change to make. Exit status 1 when something at warning level
    /// or above was found.
    Diagnose(Box<diagnose::DiagnoseArgs>),
    /// Packets the kernel dropped, by drop reason, protocol and port, over SECONDS.
    ///
    /// From a BPF program on the skb:kfree_skb tracepoint: every packet the kernel frees as
    /// dropped is counted in the kernel by its drop reason (NO_SOCKET, NETFILTER_DROP,
    /// TCP_RFC7323_PAWS, SOCKET_RCVBUFF, ...), protocol and port (the receiving socket's local
    /// port where the kernel knows it, else the packet's destination port). Needs CAP_BPF and
    /// CAP_PERFMON (or root).
    Drops(drops::DropsArgs),
    /// Every TCP connect, accept, close and failed connect as it happens, with its process.
    ///
    /// From BPF programs on the kernel's tracepoints (no compiler, no tracefs, no kprobes): one
    /// line per event with the process that called connect() or accept() (both ends when both
    /// are on this host), the connect latency or accept-queue wait, SYN retransmits, and for a
    /// close its duration, payload bytes and how it ended (who closed first and holds the
    /// TIME-WAIT, or a reset or timeout). Connections that live a millisecond are seen, unlike
    /// the listing's polling --events. --stats sums them per side, command and destination with
    /// latency histograms. Needs CAP_BPF and CAP_PERFMON (or root).
    Events(Box<events::EventsArgs>),
    /// Close the TCP and UDP connections the filters select, from outside their processes.
    ///
    /// Lists the TCP and UDP sockets the filters select (as the listing does, with their
    /// processes), asks on a terminal (or needs --yes), then closes each through the kernel's
    /// sock_diag SOCK_DESTROY: a TCP connection is reset (its process's next call fails with
    /// ECONNABORTED, the peer gets a RST), a UDP socket's pending call fails, a TIME-WAIT entry
    /// is dropped (Linux 6.0+). Each socket is named by its kernel cookie, so only the sockets
    /// listed are touched. Refused without a filter; listeners only when -l or --state asks.
    /// Every socket gets a result: killed, gone, not-permitted, unsupported, failed. Needs
    /// CAP_NET_ADMIN (root).
    Kill(Box<kill::KillArgs>),
    /// Ephemeral-port use by destination and TIME-WAIT on both sides, with advice.
    ///
    /// TCP sockets whose local port lies in net.ipv4.ip_local_port_range (minus
    /// ip_local_reserved_ports), grouped by local address and destination: ports in use by
    /// state, the share of the usable range, TIME-WAIT entries and the time left on them, and
    /// the rate one destination can sustain (usable ports / 60 s of TIME-WAIT). A destination
    /// at 50% of the range gets a warning, at 80% a critical one, with the advice to fix it.
    /// The server's view too: per listening port, the TIME-WAIT entries by client (a client
    /// that reuses a port still in TIME-WAIT there has its SYN rejected). tcp_tw_reuse,
    /// tcp_timestamps and the TIME-WAIT total against tcp_max_tw_buckets are reported. With
    /// --interval: new TIME-WAIT entries per second and the PAWS, TIME-WAIT ACK and overflow
    /// counter deltas.
    Ports(ports::PortsArgs),
    /// A Prometheus exporter: socket, listen-queue, ephemeral-port, diagnosis and counter metrics.
    ///
    /// Serves GET /metrics in the Prometheus text format, from a fresh collection of the
    /// namespace sockstat runs in (with -Z: of every zone on the host, each series labelled with
    /// its zone) at every scrape: sockets by protocol, family, state and zone;
    /// each listening socket's accept queue, backlog and command; ephemeral-port use of the
    /// busiest destinations (--top); diagnosis findings by rule and severity (between this
    /// scrape's collection and the previous one, so the first scrape has none); the kernel
    /// counters that signal trouble; and the exporter's own health. Scrapes never overlap; one
    /// that exceeds --scrape-budget is answered from the last collection, with its age. Listens
    /// on loopback unless told otherwise.
    Serve(serve::ServeArgs),
    /// Sample one TCP connection over time and draw it (SVG): acked bytes, windows, in flight.
    ///
    /// Follows the one connection the filters select, every --interval for --duration (or
    /// until it closes, or Ctrl-C), from tcp_info and socket memory: no packet capture. The
    /// picture shows bytes acknowledged over time and, below, the congestion window, the
    /// peer's advertised window, the bytes in flight, the send buffer and what is queued in
    /// it, so a send-buffer plateau or a zero-window stall is visible at a glance; its header
    /// gives the goodput and the share of time each limit held the sender back. --json prints
    /// the samples as JSON lines.
    Trace(Box<trace::TraceArgs>),
    /// Who is using the network right now, and why the slow connections are slow.
    ///
    /// A live view refreshed every --interval: per process (or connection, remote address,
    /// local port) the connections, send and receive rates, retransmits per second, the worst
    /// RTT, and the findings of the diagnosis rules (the same as sockstat diagnose) on the last
    /// two samples. Rates come from every TCP connection's byte counters in tcp_info, matched by
    /// socket cookie: exact, without packet capture, for any user. As root, connections that
    /// open and close between refreshes are counted from connection events; UDP and other
    /// protocols show queues and drops, their rates unknown. Full screen on a terminal
    /// (sort, filter, detail, kill); --batch writes text or JSON for scripts.
    Top(Box<top::TopArgs>),
}

/// Runs a subcommand; returns the process exit status. `--watch`/`--count` run the views that
/// take them again and again (`crate::watch::run`).
pub fn run(cmd: &Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Counters(a) => watched(&a.watch, a.json, "counters", |out, err, waits| {
            counters::run(a, out, err, waits)
        }),
        Command::Diagnose(a) => watched(&a.watch, a.json, "diagnosis", |out, err, waits| {
            diagnose::run(a, out, err, waits)
        }),
        Command::Ports(a) => watched(&a.watch, a.json, "port report", |out, err, waits| {
            ports::run(a, out, err, waits)
        }),
        Command::Serve(a) => serve::run(a),
        Command::Drops(a) => drops::run(a),
        Command::Events(a) => events::run(a),
        Command::Kill(a) => kill::run(a),
        Command::Trace(a) => trace::run(a),
        Command::Top(a) => top::run(a),
    }
}

/// Runs a view once, or under `--watch`/`--count` again and again. The view writes on `out`
/// and its warnings on `err`, and announces its waits (`crate::output::announce_wait`) only when
/// told to: not on the watch screen, whose title says it already. `what` names the view in an
/// error about writing it.
fn watched(
    watch: &crate::cli::WatchArgs,
    json: bool,
    what: &str,
    mut view: impl FnMut(&mut dyn Write, &mut dyn Write, Waits) -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    match watch.interval() {
        Some(interval) => crate::watch::run(
            interval,
            watch.count,
            crate::watch::Layout::Snapshots { json },
            &crate::watch::title(),
            |f| view(&mut f.out, &mut f.err, Waits::Silent),
        ),
        None => {
            let stdout = io::stdout();
            let mut out = Noted::new(io::BufWriter::new(stdout.lock()));
            let result =
                view(&mut out, &mut io::stderr().lock(), Waits::Announced).and_then(|code| {
                    out.flush()?;
                    Ok(code)
                });
            match result {
                Err(e) if out.failed => {
                    Err(e.context(format!("cannot write the {what} to standard output")))
                }
                r => r,
            }
        }
    }
}

/// A writer that remembers whether a write to it failed, so that the error can say it was the
/// output (a full disk) and not the gathering that failed.
pub struct Noted<W> {
    inner: W,
    /// A write or flush failed.
    pub failed: bool,
}

impl<W> Noted<W> {
    pub fn new(inner: W) -> Noted<W> {
        Noted {
            inner,
            failed: false,
        }
    }
}

impl<W: Write> Write for Noted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).inspect_err(|_| self.failed = true)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().inspect_err(|_| self.failed = true)
    }
}
