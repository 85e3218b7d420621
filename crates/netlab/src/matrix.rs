//! The diagnosis scenario matrix: real TCP traffic over the lab path, each scenario with the
//! verdict a TCP expert expects per flow and per side, judged by running the real
//! `sockstat diagnose --json` in both namespaces.
//!
//! A scenario builds its path (delay, rate, queue depth, loss), sets its sysctls, starts its
//! traffic with one congestion control for every socket ([`Cc`]), lets it settle, then runs
//! `sockstat diagnose` in the client namespace (`a`, the senders) and in the server namespace
//! (`b`, the receivers) at the same time, with `sockstat -T -m --json` listings just before and
//! after for the numbers behind the verdicts. [`run`] compares the findings with the
//! scenario's expectations and gives one [`Outcome`] per run:
//!
//! - `right`: every expected finding, once, and nothing else (tolerated findings aside);
//! - `wrong`: a flow or side that expected a verdict got a different one, or a finding's own
//!   check failed (its numbers disagree with what the application measured);
//! - `silent`: an expected finding is missing;
//! - `noisy`: a finding nobody expected, or an expected one reported more than once.
//!
//! The calibration command (`calibrate`) runs the matrix N times; the live tests run each
//! scenario once. Neither retries: a scenario that is right only on a quiet machine is a
//! defect of the scenario or of the rule.

use std::io;
use std::path::{Path as FsPath, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::sock::{Cc, Opts};
use crate::workload::{
    send_syns, server_time_wait, Bulk, BulkSpec, Churn, ChurnSpec, Flood, Idle, Reader, Rr, RrSpec,
};
use crate::{Netns, Path, PathSpec};

/// Which namespace: `a` holds the clients (the senders of every bulk flow), `b` the servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The client namespace (`a`).
    Client,
    /// The server namespace (`b`).
    Server,
}

impl Side {
    /// Both, client first.
    pub const BOTH: [Side; 2] = [Side::Client, Side::Server];

    /// `client` or `server`.
    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// A finding the expert expects.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Where diagnose runs.
    pub side: Side,
    /// The flow (its server port); `None`: a namespace-wide finding (no socket).
    pub port: Option<u16>,
    /// The rule id.
    pub rule: &'static str,
    /// The `cause` evidence it must give, when the rule names one.
    pub cause: Option<&'static str>,
    /// Only under this congestion control (`None`: under both).
    pub cc: Option<Cc>,
    /// Another rule that is as right a verdict (the scenario's traffic sometimes makes one
    /// limit bind, sometimes the other: a buffer-bound flow whose second was dominated by
    /// loss).
    pub or: Option<&'static str>,
}

impl Expect {
    /// The same expectation, only under `cc`.
    pub const fn only(self, cc: Cc) -> Expect {
        Expect {
            cc: Some(cc),
            ..self
        }
    }

    /// The same expectation, satisfied by `rule` as well.
    pub const fn or(self, rule: &'static str) -> Expect {
        Expect {
            or: Some(rule),
            ..self
        }
    }
}

/// Shorthand for an [`Expect`] about a flow.
pub const fn on(side: Side, port: u16, rule: &'static str) -> Expect {
    Expect {
        side,
        port: Some(port),
        rule,
        cause: None,
        cc: None,
        or: None,
    }
}

/// Shorthand for an [`Expect`] about a flow, with its cause.
pub const fn on_cause(side: Side, port: u16, rule: &'static str, cause: &'static str) -> Expect {
    Expect {
        side,
        port: Some(port),
        rule,
        cause: Some(cause),
        cc: None,
        or: None,
    }
}

/// Shorthand for a namespace-wide [`Expect`].
pub const fn host(side: Side, rule: &'static str) -> Expect {
    Expect {
        side,
        port: None,
        rule,
        cause: None,
        cc: None,
        or: None,
    }
}

/// A finding that may appear without being expected (a retransmissions note on a lossy
/// path): neither required nor counted as noise.
#[derive(Debug, Clone, Copy)]
pub struct Allow {
    /// Where.
    pub side: Side,
    /// About which flow (`None`: any flow or none).
    pub port: Option<u16>,
    /// The rule id.
    pub rule: &'static str,
    /// Only under this congestion control (`None`: under both).
    pub cc: Option<Cc>,
}

/// Shorthand for an [`Allow`] of `rule` on any flow of `side` (or none).
pub const fn tolerate(side: Side, rule: &'static str) -> Allow {
    Allow {
        side,
        port: None,
        rule,
        cc: None,
    }
}

/// What a scenario started: guards that stop its traffic when dropped, the application's
/// byte counters per flow, and what to do while diagnose samples.
#[derive(Default)]
pub struct Running {
    /// Bytes the receiving application read, per server port.
    pub received: Vec<(u16, Arc<AtomicU64>)>,
    /// Done once both diagnose runs have taken their first sample.
    pub during: Option<During>,
    /// Checks of one expected finding (index into the scenario's expectations), beyond its
    /// presence.
    pub checks: Vec<(usize, Check)>,
    /// Traffic errors so far (a run whose traffic failed proves nothing).
    pub errors: Vec<Box<dyn Fn() -> Vec<String> + Send>>,
    /// Dropped to stop the traffic.
    pub guards: Vec<Box<dyn std::any::Any + Send>>,
}

/// Something a scenario does while diagnose samples (sends SYNs, say).
pub type During = Box<dyn FnOnce(&Lab) -> io::Result<()> + Send>;

/// A check of a finding: `Err(why)` makes the run `wrong`.
pub type Check = Box<dyn Fn(&Value) -> Result<(), String> + Send>;

impl Running {
    fn bulk(&mut self, b: Bulk) {
        self.received.push((b.spec.port, b.received.clone()));
        let b = Arc::new(b);
        let b2 = b.clone();
        self.errors.push(Box::new(move || b2.errors()));
        self.guards.push(Box::new(b));
    }
}

/// One scenario of the matrix.
pub struct Scenario {
    /// Short name (the table's first column).
    pub name: &'static str,
    /// What it reproduces, and why the expected verdict is right.
    pub about: &'static str,
    /// The path.
    pub path: PathSpec,
    /// Sysctls set in a namespace before the traffic starts.
    pub sysctls: &'static [(Side, &'static str, &'static str)],
    /// Starts the traffic.
    pub start: fn(&Lab, Cc) -> io::Result<Running>,
    /// How long the traffic runs before diagnose samples it.
    pub warmup: Duration,
    /// diagnose's `--interval`, seconds.
    pub interval: f64,
    /// The findings expected.
    pub expect: Vec<Expect>,
    /// Findings tolerated.
    pub allow: Vec<Allow>,
    /// The flow whose numbers the table shows (side, server port).
    pub focus: Option<(Side, u16)>,
}

/// The two namespaces of one run and the path between them.
pub struct Lab {
    /// Namespaces and forwarder.
    pub path: Path,
}

impl Lab {
    /// The client namespace.
    pub fn client(&self) -> &Netns {
        &self.path.a
    }

    /// The server namespace.
    pub fn server(&self) -> &Netns {
        &self.path.b
    }

    /// The server's address.
    pub fn server_addr(&self) -> &str {
        &self.path.addr_b
    }

    /// The namespace of `side`.
    pub fn ns(&self, side: Side) -> &Netns {
        match side {
            Side::Client => self.client(),
            Side::Server => self.server(),
        }
    }
}

/// The bottleneck every throughput scenario shares: 50 Mbit/s, well above what the limited
/// flows reach (so their limit, not the link, binds) and cheap enough for the userspace
/// forwarder on two shared cores.
pub const RATE_BITS: u64 = 50_000_000;
/// A deep bottleneck queue: competing traffic shows as queueing delay (100 ms of it).
pub const DEEP: Duration = Duration::from_millis(100);
/// A shallow bottleneck queue: competing traffic shows as loss (5 ms, a quarter of a 20 ms
/// path's bandwidth-delay product).
pub const SHALLOW: Duration = Duration::from_millis(5);

const fn path(one_way_ms: u64, queue: Duration, loss: f64) -> PathSpec {
    PathSpec {
        one_way: Duration::from_millis(one_way_ms),
        loss_ab: loss,
        rate_bits: RATE_BITS,
        queue,
    }
}

/// How long a scenario's traffic may run at most.
const LIMIT: Duration = Duration::from_secs(40);
/// The primary flow's server port; competitors use the next ones.
pub const PORT: u16 = 5001;

fn bulk(lab: &Lab, spec: BulkSpec) -> io::Result<Bulk> {
    Bulk::start(lab.client(), lab.server(), lab.server_addr(), spec, LIMIT)
}

/// A sender with a small SO_SNDBUF writing 16 KiB at a time, beside `competitors` bulk flows.
/// `nagle`: Nagle's algorithm stays on (most servers turn it off with TCP_NODELAY; with it on,
/// a non-pacing congestion control lets the send queue grow past SO_SNDBUF, doc/diagnose.md).
fn small_sndbuf(
    lab: &Lab,
    cc: Cc,
    sndbuf: i32,
    competitors: u16,
    nagle: bool,
) -> io::Result<Running> {
    let mut r = Running::default();
    for i in 0..competitors {
        r.bulk(bulk(lab, BulkSpec::new(PORT + 1 + i, cc))?);
    }
    let mut spec = BulkSpec::new(PORT, cc);
    spec.client.sndbuf = Some(sndbuf);
    spec.client.nodelay = !nagle;
    spec.write_size = 16 * 1024;
    r.bulk(bulk(lab, spec)?);
    Ok(r)
}

fn small_rcvbuf(lab: &Lab, cc: Cc, after_accept: bool, competitors: u16) -> io::Result<Running> {
    let mut r = Running::default();
    for i in 0..competitors {
        r.bulk(bulk(lab, BulkSpec::new(PORT + 1 + i, cc))?);
    }
    let mut spec = BulkSpec::new(PORT, cc);
    if after_accept {
        spec.rcvbuf_after_accept = Some(64 * 1024);
    } else {
        spec.server.rcvbuf = Some(64 * 1024);
    }
    r.bulk(bulk(lab, spec)?);
    Ok(r)
}

fn plain_bulk(lab: &Lab, cc: Cc) -> io::Result<Running> {
    let mut r = Running::default();
    r.bulk(bulk(lab, BulkSpec::new(PORT, cc))?);
    Ok(r)
}

fn not_reading(lab: &Lab, cc: Cc) -> io::Result<Running> {
    let mut r = Running::default();
    let mut spec = BulkSpec::new(PORT, cc);
    spec.reader = Reader::Never;
    r.bulk(bulk(lab, spec)?);
    Ok(r)
}

fn paced(lab: &Lab, cc: Cc) -> io::Result<Running> {
    let mut r = Running::default();
    let mut spec = BulkSpec::new(PORT, cc);
    spec.client.sndbuf = Some(16 * 1024);
    spec.write_size = 16 * 1024;
    spec.pace = Some((16 * 1024, Duration::from_millis(50)));
    r.bulk(bulk(lab, spec)?);
    Ok(r)
}

fn rr(lab: &Lab, cc: Cc, nodelay: bool) -> io::Result<Running> {
    let mut client = Opts::cc(cc);
    client.nodelay = nodelay;
    let spec = RrSpec {
        port: PORT,
        client,
        server: Opts::cc(cc),
        request: vec![100, 100],
        response: 100,
    };
    let x = Rr::start(lab.client(), lab.server(), lab.server_addr(), spec, LIMIT)?;
    let x = Arc::new(x);
    let mut r = Running::default();
    let x2 = x.clone();
    r.errors.push(Box::new(move || x2.errors()));
    r.guards.push(Box::new(x));
    Ok(r)
}

fn churn(lab: &Lab, spec: ChurnSpec) -> io::Result<Running> {
    let x = Arc::new(Churn::start(
        lab.client(),
        lab.server(),
        lab.server_addr(),
        spec,
        LIMIT,
    )?);
    let mut r = Running::default();
    let x2 = x.clone();
    r.errors.push(Box::new(move || x2.errors()));
    r.guards.push(Box::new(x));
    Ok(r)
}

fn prompt_accept(lab: &Lab, cc: Cc) -> io::Result<Running> {
    churn(
        lab,
        ChurnSpec {
            port: PORT,
            client: Opts::cc(cc),
            server: Opts::cc(cc),
            backlog: 4,
            clients: 4,
            request: 100,
            response: 100,
            server_closes_first: false,
            pause: Duration::from_millis(10),
            max_per_client: 2000,
        },
    )
}

fn short_rr(lab: &Lab, cc: Cc) -> io::Result<Running> {
    let mut o = Opts::cc(cc);
    o.nodelay = true;
    churn(
        lab,
        ChurnSpec {
            port: PORT,
            client: o,
            server: o,
            backlog: 64,
            clients: 1,
            request: 200,
            response: 4096,
            server_closes_first: false,
            pause: Duration::ZERO,
            max_per_client: 2000,
        },
    )
}

/// Connections a client in `a` opens and closes first, faster than TIME-WAIT (60 s) frees
/// their ports, from a range of 64 ports.
fn port_churn(lab: &Lab, cc: Cc) -> io::Result<Running> {
    churn(
        lab,
        ChurnSpec {
            port: PORT,
            client: Opts::cc(cc),
            server: Opts::cc(cc),
            backlog: 64,
            clients: 1,
            request: 100,
            response: 100,
            server_closes_first: false,
            pause: Duration::ZERO,
            max_per_client: 56,
        },
    )
}

fn idle(lab: &Lab, cc: Cc) -> io::Result<Running> {
    let mut o = Opts::cc(cc);
    o.keepalive = true;
    let x = Idle::open(lab.client(), lab.server(), lab.server_addr(), PORT, 8, o)?;
    let mut r = Running::default();
    r.guards.push(Box::new(x));
    Ok(r)
}

/// Clients of the flood: far more than the backlog, connecting over 1.5 s.
const FLOOD_CLIENTS: usize = 30;

fn flood(lab: &Lab, cc: Cc) -> io::Result<Running> {
    let x = Flood::start(
        lab.client(),
        lab.server(),
        lab.server_addr(),
        PORT,
        4,
        FLOOD_CLIENTS,
        Duration::from_millis(1500),
        Opts::cc(cc),
        LIMIT,
    )?;
    let started = x.started;
    let x = Arc::new(x);
    let mut r = Running::default();
    let x2 = x.clone();
    r.errors.push(Box::new(move || x2.errors()));
    // The client-side finding: the time it says connects have waited must not exceed what
    // they really waited.
    r.checks.push((
        1,
        Box::new(move |f: &Value| {
            let waited = f["evidence"]["waited_at_least_s"].as_f64();
            let real = started.elapsed().as_secs_f64();
            match waited {
                Some(w) if w > real + 0.5 => Err(format!(
                    "says connects waited at least {w} s; they started {real:.1} s ago"
                )),
                _ => Ok(()),
            }
        }),
    ));
    r.guards.push(Box::new(x));
    Ok(r)
}

fn tw_syn(lab: &Lab, cc: Cc) -> io::Result<Running> {
    let clients = server_time_wait(
        lab.client(),
        lab.server(),
        lab.server_addr(),
        PORT,
        10,
        Opts::cc(cc),
    )?;
    let dst = crate::sock::v4(lab.server_addr(), PORT)?;
    Ok(Running {
        // One burst inside diagnose's interval: `during` runs once both have their first
        // sample.
        during: Some(Box::new(move |lab: &Lab| {
            send_syns(lab.client(), clients.clone(), dst, 3)
        })),
        ..Running::default()
    })
}

use Side::{Client as A, Server as B};

/// The small-buffer sender is send-buffer-limited because the application set SO_SNDBUF.
const SNDBUF_16K: &[Expect] = &[on_cause(
    A,
    PORT,
    "send-buffer-limited",
    "set-by-application",
)];
/// A shared bottleneck drops packets now and then, deep queue or shallow (a cubic competitor
/// fills any finite queue), and the senders may get a retransmissions note for it.
const LOSSY_A: &[Allow] = &[tolerate(A, "retransmissions")];

/// The matrix, in table order.
pub fn scenarios() -> Vec<Scenario> {
    let s = Duration::from_secs;
    vec![
        Scenario {
            name: "sndbuf-20ms",
            about:
                "doc/reference/cases.md#send-buffer: SO_SNDBUF 16 KiB at 20 ms (16 KiB writes, TCP_NODELAY, as a database \
                    server), alone on a 50 Mbit/s path; the sender is send-buffer-limited, the \
                    receiver has nothing to fix",
            path: path(10, DEEP, 0.0),
            sysctls: &[],
            start: |l, cc| small_sndbuf(l, cc, 16 * 1024, 0, false),
            warmup: s(3),
            interval: 1.0,
            expect: SNDBUF_16K.to_vec(),
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "sndbuf-150ms",
            about: "doc/reference/cases.md#send-buffer, the proxy: SO_SNDBUF 32 KiB at 150 ms, alone",
            path: path(75, DEEP, 0.0),
            sysctls: &[],
            start: |l, cc| small_sndbuf(l, cc, 32 * 1024, 0, false),
            warmup: s(5),
            interval: 1.0,
            expect: SNDBUF_16K.to_vec(),
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "sndbuf-nagle-20ms",
            about:
                "SO_SNDBUF 16 KiB at 20 ms with Nagle on: under cubic the send queue grows past \
                    the buffer to a congestion window, then the writer stalls until it drains; \
                    the buffer still costs throughput",
            path: path(10, DEEP, 0.0),
            sysctls: &[],
            start: |l, cc| small_sndbuf(l, cc, 16 * 1024, 0, true),
            warmup: s(3),
            interval: 1.0,
            expect: SNDBUF_16K.to_vec(),
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "sndbuf-nagle-150ms",
            about: "SO_SNDBUF 32 KiB at 150 ms with Nagle on (cubic: 2.0 MB/s against 6.0 MB/s \
                    with autotuning, although the send queue exceeds the buffer; its bursts of a \
                    whole congestion window overrun the bottleneck queue, so retransmissions are \
                    tolerated)",
            path: path(75, DEEP, 0.0),
            sysctls: &[],
            start: |l, cc| small_sndbuf(l, cc, 32 * 1024, 0, true),
            warmup: s(5),
            interval: 1.0,
            expect: SNDBUF_16K.to_vec(),
            // Its bursts of a whole congestion window overrun the bottleneck queue.
            allow: LOSSY_A.to_vec(),
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "sndbuf-1bulk-deep",
            about: "SO_SNDBUF 16 KiB at 20 ms sharing a deep-queued bottleneck with one bulk \
                    flow: the RTT it sees is the queue's; still send-buffer-limited, the bulk \
                    flow healthy",
            path: path(10, DEEP, 0.0),
            sysctls: &[],
            start: |l, cc| small_sndbuf(l, cc, 16 * 1024, 1, false),
            warmup: s(4),
            interval: 1.0,
            expect: SNDBUF_16K.to_vec(),
            allow: LOSSY_A.to_vec(),
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "sndbuf-4bulk-deep",
            about:
                "SO_SNDBUF 8 KiB with four bulk flows through the deep queue (8 KiB: the buffer's \
                    ceiling stays below the flow's fair share at every RTT it sees)",
            path: path(10, DEEP, 0.0),
            sysctls: &[],
            start: |l, cc| small_sndbuf(l, cc, 8 * 1024, 4, false),
            warmup: s(4),
            interval: 1.0,
            expect: SNDBUF_16K.to_vec(),
            allow: LOSSY_A.to_vec(),
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "sndbuf-1bulk-shallow",
            about: "SO_SNDBUF 16 KiB with one bulk flow through a shallow queue: competing \
                    traffic shows as loss, not delay; retransmission notes tolerated",
            path: path(10, SHALLOW, 0.0),
            sysctls: &[],
            start: |l, cc| small_sndbuf(l, cc, 16 * 1024, 1, false),
            warmup: s(4),
            interval: 1.0,
            // BBR's competitor overruns the shallow queue: the small flow loses 8-22% of its
            // packets, and in a second at the high end the loss, not the buffer, binds it.
            expect: vec![
                SNDBUF_16K[0].only(Cc::Cubic),
                SNDBUF_16K[0].only(Cc::Bbr).or("retransmissions"),
            ],
            allow: LOSSY_A.to_vec(),
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "sndbuf-4bulk-shallow",
            about: "SO_SNDBUF 8 KiB with four bulk flows through the shallow queue: under cubic \
                    still send-buffer-limited; BBR's flows overrun the queue and lose 10-30% of \
                    their packets, which then limits every flow (the loss is the verdict, the \
                    buffer may be named too)",
            path: path(10, SHALLOW, 0.0),
            sysctls: &[],
            start: |l, cc| small_sndbuf(l, cc, 8 * 1024, 4, false),
            warmup: s(4),
            interval: 1.0,
            expect: vec![
                SNDBUF_16K[0].only(Cc::Cubic),
                on(A, PORT, "retransmissions").only(Cc::Bbr),
            ],
            allow: vec![
                tolerate(A, "retransmissions"),
                Allow {
                    cc: Some(Cc::Bbr),
                    ..tolerate(A, "send-buffer-limited")
                },
            ],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "rcvbuf-50ms",
            about: "doc/reference/cases.md#receive-buffer: the receiver sets SO_RCVBUF 64 KiB before listen() at 50 ms: the \
                    receiver is told to fix its buffer, the sender is told the peer's window \
                    limits it",
            path: path(25, DEEP, 0.0),
            sysctls: &[],
            start: |l, cc| small_rcvbuf(l, cc, false, 0),
            warmup: s(3),
            interval: 1.0,
            expect: vec![
                on_cause(
                    A,
                    PORT,
                    "receive-window-limited",
                    "peer-receive-buffer-fixed",
                ),
                on(B, PORT, "receive-buffer-locked"),
            ],
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "rcvbuf-50ms-accepted",
            about: "the same buffer set on the accepted socket, after the handshake (window scale \
                    already negotiated)",
            path: path(25, DEEP, 0.0),
            sysctls: &[],
            start: |l, cc| small_rcvbuf(l, cc, true, 0),
            warmup: s(3),
            interval: 1.0,
            expect: vec![
                on(A, PORT, "receive-window-limited"),
                on(B, PORT, "receive-buffer-locked"),
            ],
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "rcvbuf-50ms-1bulk",
            about: "SO_RCVBUF 64 KiB before listen() at 50 ms, sharing the deep-queued bottleneck \
                    with one bulk flow",
            path: path(25, DEEP, 0.0),
            sysctls: &[],
            start: |l, cc| small_rcvbuf(l, cc, false, 1),
            warmup: s(4),
            interval: 1.0,
            expect: vec![
                on_cause(
                    A,
                    PORT,
                    "receive-window-limited",
                    "peer-receive-buffer-fixed",
                ),
                on(B, PORT, "receive-buffer-locked"),
            ],
            allow: LOSSY_A.to_vec(),
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "not-reading",
            about: "doc/reference/cases.md#receiver-not-reading: the receiving application stops reading: zero window; named on \
                    both sides (the sender's data is stuck, the receiver's process does not read)",
            path: path(10, DEEP, 0.0),
            sysctls: &[],
            start: not_reading,
            warmup: s(3),
            interval: 1.0,
            expect: vec![
                on(A, PORT, "receiver-not-reading"),
                on(B, PORT, "receiver-not-reading"),
            ],
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "no-wscale",
            about: "doc/reference/cases.md#long-path-through-lvs: the server side has window scaling off, 50 ms: the sender's \
                    window is capped at 64 KiB; the server's namespace is told to turn it on",
            path: path(25, DEEP, 0.0),
            sysctls: &[(B, "net.ipv4.tcp_window_scaling", "0")],
            start: plain_bulk,
            warmup: s(3),
            interval: 1.0,
            expect: vec![
                on(A, PORT, "window-scaling-missing"),
                host(B, "window-scaling-missing"),
            ],
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "delayed-ack",
            about: "doc/reference/cases.md#delayed-ack: write-write-read with Nagle on at 20 ms: the peer's delayed ACK \
                    holds every second write",
            path: PathSpec::delay(Duration::from_millis(10)),
            sysctls: &[],
            start: |l, cc| rr(l, cc, false),
            warmup: s(3),
            interval: 1.0,
            expect: vec![on(A, PORT, "delayed-ack")],
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "rr-nodelay",
            about: "the same exchange with TCP_NODELAY: healthy",
            path: PathSpec::delay(Duration::from_millis(10)),
            sysctls: &[],
            start: |l, cc| rr(l, cc, true),
            warmup: s(3),
            interval: 1.0,
            expect: vec![],
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "listen-overflow",
            about: "30 clients against a listener with backlog 4 that never accepts: one finding \
                    on the server's listener, one (with a count) for the clients' unanswered SYNs",
            path: PathSpec::delay(Duration::from_millis(10)),
            sysctls: &[],
            start: flood,
            warmup: s(3),
            interval: 1.0,
            expect: vec![
                on(B, PORT, "listen-overflow"),
                on(A, PORT, "retransmissions"),
            ],
            allow: vec![],
            focus: None,
        },
        Scenario {
            name: "ephemeral-ports",
            about: "doc/reference/cases.md#case-003-an-illumos-time-wait-review: a client closing first churns through a 64-port range faster than \
                    TIME-WAIT frees it",
            path: PathSpec::delay(Duration::from_millis(1)),
            sysctls: &[
                (A, "net.ipv4.ip_local_port_range", "40000 40063"),
                (A, "net.ipv4.tcp_tw_reuse", "0"),
            ],
            start: port_churn,
            warmup: s(3),
            interval: 1.0,
            expect: vec![host(A, "ephemeral-ports")],
            allow: vec![],
            focus: None,
        },
        Scenario {
            name: "timewait-syn",
            about: "doc/reference/cases.md#case-003-an-illumos-time-wait-review, its pathology: SYNs (from clients behind a NAT) for tuples the server \
                    still holds in TIME-WAIT",
            path: PathSpec::delay(Duration::from_millis(1)),
            sysctls: &[(B, "net.ipv4.tcp_rfc1337", "1")],
            start: tw_syn,
            warmup: Duration::from_millis(300),
            interval: 1.0,
            expect: vec![host(B, "timewait-syn-rejected")],
            allow: vec![],
            focus: None,
        },
        Scenario {
            name: "bulk",
            about: "healthy: a bulk transfer with autotuned buffers at 20 ms",
            path: path(10, DEEP, 0.0),
            sysctls: &[],
            start: plain_bulk,
            warmup: s(3),
            interval: 1.0,
            expect: vec![],
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "bulk-loss-1pct",
            about: "healthy but lossy: 1% random loss; at most a retransmissions note",
            path: path(10, DEEP, 0.01),
            sysctls: &[],
            start: plain_bulk,
            warmup: s(3),
            interval: 1.0,
            expect: vec![],
            allow: LOSSY_A.to_vec(),
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "paced",
            about: "healthy: an application writing 16 KiB every 50 ms through a 16 KiB SO_SNDBUF \
                    (application-limited, far below what the buffer allows)",
            path: path(10, DEEP, 0.0),
            sysctls: &[],
            start: paced,
            warmup: s(3),
            interval: 1.0,
            expect: vec![],
            allow: vec![],
            focus: Some((A, PORT)),
        },
        Scenario {
            name: "idle-keepalive",
            about: "healthy: eight idle keep-alive connections",
            path: PathSpec::delay(Duration::from_millis(10)),
            sysctls: &[],
            start: idle,
            warmup: s(1),
            interval: 1.0,
            expect: vec![],
            allow: vec![],
            focus: None,
        },
        Scenario {
            name: "prompt-accept",
            about: "healthy: four clients connecting in a loop to a listener (backlog 4) that \
                    accepts at once",
            path: PathSpec::delay(Duration::from_millis(1)),
            sysctls: &[],
            start: prompt_accept,
            warmup: s(2),
            interval: 1.0,
            expect: vec![],
            allow: vec![],
            focus: None,
        },
        Scenario {
            name: "short-rr",
            about: "healthy: short connections, one request and response each, TCP_NODELAY, 20 ms",
            path: PathSpec::delay(Duration::from_millis(10)),
            sysctls: &[],
            start: short_rr,
            warmup: s(2),
            interval: 1.0,
            expect: vec![],
            allow: vec![],
            focus: None,
        },
    ]
}

/// The verdict of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Everything expected, nothing else.
    Right,
    /// Something expected is missing.
    Silent,
    /// A verdict other than the expected one, or a check failed.
    Wrong,
    /// Something unexpected, or a duplicate.
    Noisy,
    /// The run could not be made (traffic failed, sockstat failed): no verdict.
    Broken,
}

impl Outcome {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Right => "right",
            Outcome::Silent => "silent",
            Outcome::Wrong => "wrong",
            Outcome::Noisy => "noisy",
            Outcome::Broken => "broken",
        }
    }
}

/// What one run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The scenario's name.
    pub scenario: &'static str,
    /// The congestion control.
    pub cc: Cc,
    /// The verdict.
    pub outcome: Outcome,
    /// Why, one line per problem (empty when right).
    pub problems: Vec<String>,
    /// The diagnose documents, client side then server side.
    pub diagnose: [Value; 2],
    /// `sockstat -T -m --json` before and after, per side: `[[a0, a1], [b0, b1]]`.
    pub listings: [[Value; 2]; 2],
    /// Seconds between the listings.
    pub listing_dt: f64,
    /// What the receiving applications read per second over the diagnose run, by port.
    pub app_rates: Vec<(u16, f64)>,
    /// The least and the most the receiving applications read per second over any window of
    /// diagnose's interval during its run, by port.
    pub app_windows: Vec<(u16, (f64, f64))>,
    /// Wall time of the whole run.
    pub seconds: f64,
}

impl RunResult {
    /// The record the calibration command saves (one JSON line).
    pub fn to_json(&self) -> Value {
        json!({
            "scenario": self.scenario,
            "cc": self.cc.name(),
            "outcome": self.outcome.name(),
            "problems": self.problems,
            "diagnose": {"client": self.diagnose[0], "server": self.diagnose[1]},
            "listings": {
                "client": [self.listings[0][0], self.listings[0][1]],
                "server": [self.listings[1][0], self.listings[1][1]],
            },
            "listing_dt_s": self.listing_dt,
            "app_rates": self.app_rates.iter().map(|(p, r)| json!({"port": p, "bytes_per_sec": r})).collect::<Vec<_>>(),
            "seconds": self.seconds,
        })
    }
}

/// How to run sockstat.
#[derive(Debug, Clone)]
pub struct Sockstat {
    /// The binary.
    pub bin: PathBuf,
}

impl Sockstat {
    fn cmd(&self, ns: &Netns, args: &[&str]) -> Command {
        let mut c = ns.command(&self.bin.to_string_lossy());
        c.args(args);
        c
    }

    /// `sockstat -T -m --json -P tcp` in `ns`.
    pub fn listing(&self, ns: &Netns) -> io::Result<Value> {
        let out = self
            .cmd(ns, &["-T", "-m", "--json", "-P", "tcp"])
            .output()?;
        parse(&out, "sockstat -T -m --json")
    }
}

fn parse(out: &Output, what: &str) -> io::Result<Value> {
    serde_json::from_slice(&out.stdout).map_err(|e| {
        io::Error::other(format!(
            "{what}: not JSON ({e}), status {:?}: {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    })
}

/// A per-run namespace tag: `m`, the scenario's index, the congestion control's initial, and
/// the process id (two runners on one machine must not share names). At most 9 characters.
fn tag(index: usize, cc: Cc) -> String {
    format!(
        "m{:02}{}{:04x}",
        index % 100,
        &cc.name()[..1],
        std::process::id() & 0xffff
    )
}

/// Runs scenario `index` of [`scenarios`] once under `cc`.
pub fn run(index: usize, cc: Cc, sockstat: &Sockstat) -> RunResult {
    let all = scenarios();
    let scn = &all[index];
    let t0 = Instant::now();
    let mut result = RunResult {
        scenario: scn.name,
        cc,
        outcome: Outcome::Broken,
        problems: vec![],
        diagnose: [Value::Null, Value::Null],
        listings: Default::default(),
        listing_dt: 0.0,
        app_rates: vec![],
        app_windows: vec![],
        seconds: 0.0,
    };
    if let Err(e) = run_inner(index, scn, cc, sockstat, &mut result) {
        result.outcome = Outcome::Broken;
        result.problems.push(e.to_string());
    }
    result.seconds = t0.elapsed().as_secs_f64();
    result
}

/// The niceness of a run's threads and processes (the traffic, the forwarder, sockstat): the
/// machine the matrix runs on is shared with compilers, and a traffic thread descheduled for
/// part of the interval makes its flow application-limited, which is not the scenario. As the
/// benchmark does (`bench/`), the lab runs ahead of them; without the privilege it runs as is.
pub const NICE: libc::c_int = -10;

/// Sets the calling thread's niceness (Linux: per thread; threads and processes it starts
/// inherit it) and gives back the old one.
fn renice(n: libc::c_int) -> libc::c_int {
    // SAFETY: getpriority/setpriority on the calling thread (who = 0) have no preconditions.
    unsafe {
        let old = libc::getpriority(libc::PRIO_PROCESS, 0);
        libc::setpriority(libc::PRIO_PROCESS, 0, n);
        old
    }
}

fn run_inner(
    index: usize,
    scn: &Scenario,
    cc: Cc,
    sockstat: &Sockstat,
    result: &mut RunResult,
) -> io::Result<()> {
    let old = renice(NICE);
    let r = run_reniced(index, scn, cc, sockstat, result);
    renice(old);
    r
}

fn run_reniced(
    index: usize,
    scn: &Scenario,
    cc: Cc,
    sockstat: &Sockstat,
    result: &mut RunResult,
) -> io::Result<()> {
    let seed = (index as u8).wrapping_mul(7) ^ (Instant::now().elapsed().subsec_nanos() as u8);
    let lab = Lab {
        path: Path::new(&tag(index, cc), seed, scn.path)?,
    };
    for (side, key, value) in scn.sysctls {
        lab.ns(*side).sysctl(key, value)?;
    }
    let mut running = (scn.start)(&lab, cc)?;
    std::thread::sleep(scn.warmup);
    let interval = format!("{}", scn.interval);
    let listing0 = [
        sockstat.listing(lab.client())?,
        sockstat.listing(lab.server())?,
    ];
    let counts0: Vec<u64> = running
        .received
        .iter()
        .map(|(_, c)| c.load(Ordering::Relaxed))
        .collect();
    let tl0 = Instant::now();
    // What the applications read, every 20 ms while diagnose runs: the goodput a finding gives
    // is checked against the application's over windows of diagnose's interval inside this
    // (diagnose's own samples fall somewhere in it, later on a loaded host).
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counters: Vec<Arc<AtomicU64>> = running.received.iter().map(|(_, c)| c.clone()).collect();
    let recorder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut series = vec![];
            while !stop.load(Ordering::Relaxed) && tl0.elapsed() < Duration::from_secs(30) {
                series.push((
                    tl0.elapsed().as_secs_f64(),
                    counters
                        .iter()
                        .map(|c| c.load(Ordering::Relaxed))
                        .collect::<Vec<u64>>(),
                ));
                std::thread::sleep(Duration::from_millis(20));
            }
            series
        })
    };
    let spawn = |ns: &Netns| {
        sockstat
            .cmd(ns, &["diagnose", "--json", "--interval", &interval])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    };
    let children = [spawn(lab.client())?, spawn(lab.server())?];
    if let Some(during) = running.during.take() {
        // Inside both intervals: after each diagnose took its first sample (a fixed wait was
        // a guess that a loaded host broke: both samples came after it).
        for c in &children {
            sockstat_testkit::sampler::wait_for_first_sample(c.id(), Duration::from_secs(60))
                .map_err(io::Error::other)?;
        }
        during(&lab)?;
    }
    let outs = children.map(|c| c.wait_with_output());
    let [oa, ob] = outs;
    let (oa, ob) = (oa?, ob?);
    stop.store(true, Ordering::Relaxed);
    let series = recorder.join().unwrap_or_default();
    result.app_windows = running
        .received
        .iter()
        .enumerate()
        .map(|(k, (p, _))| (*p, window_rates(&series, k, scn.interval)))
        .collect();
    let t_app = tl0.elapsed().as_secs_f64();
    result.app_rates = running
        .received
        .iter()
        .zip(&counts0)
        .map(|((p, c), c0)| (*p, (c.load(Ordering::Relaxed) - c0) as f64 / t_app))
        .collect();
    let listing1 = [
        sockstat.listing(lab.client())?,
        sockstat.listing(lab.server())?,
    ];
    result.listing_dt = tl0.elapsed().as_secs_f64();
    let da = parse_diagnose(&oa)?;
    let db = parse_diagnose(&ob)?;
    let [l0a, l0b] = listing0;
    let [l1a, l1b] = listing1;
    result.listings = [[l0a, l1a], [l0b, l1b]];
    result.diagnose = [da, db];
    let errors: Vec<String> = running.errors.iter().flat_map(|e| e()).collect();
    if !errors.is_empty() {
        result.problems = errors
            .into_iter()
            .map(|e| format!("traffic failed: {e}"))
            .collect();
        return Ok(());
    }
    let (outcome, problems) = judge(
        scn,
        cc,
        &result.diagnose,
        &running.checks,
        &result.app_windows,
    );
    result.outcome = outcome;
    result.problems = problems;
    drop(running);
    Ok(())
}

/// Parses a diagnose document, checking the exit status agrees with it (1 iff a finding at
/// warning level or above).
fn parse_diagnose(out: &Output) -> io::Result<Value> {
    let v = parse(out, "sockstat diagnose --json")?;
    let problems = v["findings"]
        .as_array()
        .is_some_and(|a| a.iter().any(|f| f["severity"] != "info"));
    let want = if problems { 1 } else { 0 };
    if out.status.code() != Some(want) {
        return Err(io::Error::other(format!(
            "sockstat diagnose exited {:?} with {} (stderr: {})",
            out.status.code(),
            v["findings"],
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(v)
}

/// The ports a finding is about: its socket's two ports, and any evidence value whose name
/// ends in `port` or `ports` (findings about several connections or a namespace name their
/// ports there).
pub fn finding_ports(f: &Value) -> Vec<u16> {
    let mut v = vec![];
    for end in ["local", "remote"] {
        if let Some(p) = f["socket"][end]["port"].as_u64() {
            v.push(p as u16);
        }
    }
    if let Some(ev) = f["evidence"].as_object() {
        for (k, x) in ev {
            if k.ends_with("port") || k.ends_with("ports") {
                let items = x.as_array().cloned().unwrap_or_else(|| vec![x.clone()]);
                v.extend(items.iter().filter_map(Value::as_u64).map(|p| p as u16));
            }
        }
    }
    v
}

fn matches(e: &Expect, side: Side, f: &Value) -> bool {
    let main = f["rule"] == e.rule;
    let alternative = e.or.is_some_and(|r| f["rule"] == r);
    if e.side != side || !(main || alternative) {
        return false;
    }
    let port_ok = match e.port {
        Some(p) => finding_ports(f).contains(&p),
        None => f["socket"].is_null(),
    };
    let cause_ok = !main || e.cause.is_none_or(|c| f["evidence"]["cause"] == c);
    port_ok && cause_ok
}

fn allowed(a: &Allow, side: Side, f: &Value) -> bool {
    a.side == side && f["rule"] == a.rule && a.port.is_none_or(|p| finding_ports(f).contains(&p))
}

fn short(side: Side, f: &Value) -> String {
    format!(
        "{} {} {} [{}]{}: {}",
        side.name(),
        f["severity"].as_str().unwrap_or("?"),
        f["rule"].as_str().unwrap_or("?"),
        finding_ports(f)
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(","),
        f["evidence"]["cause"]
            .as_str()
            .map(|c| format!(" cause={c}"))
            .unwrap_or_default(),
        f["summary"].as_str().unwrap_or("")
    )
}

/// Compares the findings of both sides with the scenario's expectations.
pub fn judge(
    scn: &Scenario,
    cc: Cc,
    docs: &[Value; 2],
    checks: &[(usize, Check)],
    app_windows: &[(u16, (f64, f64))],
) -> (Outcome, Vec<String>) {
    let mut problems = vec![];
    let applies = |c: Option<Cc>| c.is_none_or(|c| c == cc);
    let (mut silent, mut wrong, mut noisy) = (false, false, false);
    let findings: Vec<(Side, &Value)> = Side::BOTH
        .iter()
        .zip(docs)
        .flat_map(|(side, d)| {
            d["findings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |f| (*side, f))
        })
        .collect();
    for (i, e) in scn.expect.iter().enumerate() {
        if !applies(e.cc) {
            continue;
        }
        let hits: Vec<&Value> = findings
            .iter()
            .filter(|(s, f)| matches(e, *s, f))
            .map(|(_, f)| *f)
            .collect();
        // With an alternative ("A or B"), both may be there: each verdict counts once, and a
        // duplicate of either is noise. The first hit of the main rule is the one checked.
        let main: Vec<&Value> = hits
            .iter()
            .copied()
            .filter(|f| f["rule"] == e.rule)
            .collect();
        let alt = hits.len() - main.len();
        let hits = if e.or.is_some() && alt <= 1 && main.len() <= 1 {
            main.into_iter()
                .chain(hits.iter().copied().filter(|f| f["rule"] != e.rule))
                .take(1)
                .collect()
        } else {
            hits
        };
        match hits.len() {
            0 => {
                silent = true;
                problems.push(format!(
                    "missing: {} {} on {}{}",
                    e.side.name(),
                    e.rule,
                    e.port
                        .map_or("the namespace".into(), |p| format!("port {p}")),
                    e.cause.map(|c| format!(" cause={c}")).unwrap_or_default()
                ));
            }
            1 => {
                for (_, check) in checks.iter().filter(|(k, _)| *k == i) {
                    if let Err(why) = check(hits[0]) {
                        wrong = true;
                        problems.push(format!("{}: {why}", short(e.side, hits[0])));
                    }
                }
                if let Some(why) = rate_check(e, hits[0], app_windows) {
                    wrong = true;
                    problems.push(format!("{}: {why}", short(e.side, hits[0])));
                }
            }
            n => {
                noisy = true;
                problems.push(format!(
                    "{n} findings for one cause: {}",
                    hits.iter()
                        .map(|f| short(e.side, f))
                        .collect::<Vec<_>>()
                        .join(" | ")
                ));
            }
        }
    }
    for (side, f) in &findings {
        if scn
            .expect
            .iter()
            .any(|e| applies(e.cc) && matches(e, *side, f))
            || scn
                .allow
                .iter()
                .any(|a| applies(a.cc) && allowed(a, *side, f))
        {
            continue;
        }
        // A verdict on a flow (or namespace) that expected another one is wrong; anything
        // else is noise.
        let ports = finding_ports(f);
        let contested = scn.expect.iter().any(|e| {
            applies(e.cc)
                && e.side == *side
                && match e.port {
                    Some(p) => ports.contains(&p) && !f["socket"].is_null(),
                    None => f["socket"].is_null(),
                }
        });
        // Wrong only when it stands in for a missing expected finding; beside the expected
        // one it is noise.
        let stands_in = scn.expect.iter().any(|e| {
            applies(e.cc)
                && e.side == *side
                && match e.port {
                    Some(p) => ports.contains(&p),
                    None => f["socket"].is_null(),
                }
                && !findings.iter().any(|(s2, f2)| matches(e, *s2, f2))
        });
        if contested && stands_in {
            wrong = true;
            problems.push(format!("instead: {}", short(*side, f)));
        } else {
            noisy = true;
            problems.push(format!("unexpected: {}", short(*side, f)));
        }
    }
    let outcome = if wrong {
        Outcome::Wrong
    } else if silent {
        Outcome::Silent
    } else if noisy {
        Outcome::Noisy
    } else {
        Outcome::Right
    };
    (outcome, problems)
}

/// The least and the most bytes per second the application `k` read over any window of
/// `interval` seconds within the recorded series (`(0, 0)` when too short).
fn window_rates(series: &[(f64, Vec<u64>)], k: usize, interval: f64) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for (i, (t0, c0)) in series.iter().enumerate() {
        let Some((t1, c1)) = series[i..].iter().find(|(t, _)| *t >= t0 + interval) else {
            break;
        };
        let r = (c1[k] - c0[k]) as f64 / (t1 - t0);
        lo = lo.min(r);
        hi = hi.max(r);
    }
    if lo.is_finite() {
        (lo, hi)
    } else {
        (0.0, 0.0)
    }
}

/// A throughput finding must say what the flow achieved: its `goodput_bytes_per_sec` within
/// 35% (plus 20 kB/s) of what the receiving application read over some window of the same
/// length during the run (diagnose's own window is one of them). Not for a send queue that
/// escaped its buffer: such a flow moves a whole congestion window, then stalls for a round
/// trip, and the kernel's and the application's counts of one burst fall in different seconds.
fn rate_check(e: &Expect, f: &Value, app: &[(u16, (f64, f64))]) -> Option<String> {
    let port = e.port?;
    if f["evidence"]["escaped_buffer"] == true {
        return None;
    }
    let claimed = f["evidence"]["goodput_bytes_per_sec"].as_f64()?;
    let (_, (lo, hi)) = app.iter().find(|(p, _)| *p == port)?;
    let fits = claimed >= 0.65 * lo - 20_000.0 && claimed <= 1.35 * hi + 20_000.0;
    (!fits).then(|| {
        format!(
            "says it moves {claimed:.0} B/s; the application read {lo:.0}-{hi:.0} B/s over \
             windows of that length"
        )
    })
}

/// The sockets of a listing about `port` (either end), with their side's view.
pub fn sockets_on(listing: &Value, port: u16) -> Vec<&Value> {
    listing["sockets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["local"]["port"] == port || s["remote"]["port"] == port)
        .collect()
}

/// The focus flow's numbers over the run, from the two listings: the connection socket of
/// `side` whose remote (client side) or local (server side) port is `port`.
pub fn flow_numbers(r: &RunResult, side: Side, port: u16) -> Option<Value> {
    let k = match side {
        Side::Client => 0,
        Side::Server => 1,
    };
    let pick = |l: &Value| -> Option<Value> {
        sockets_on(l, port)
            .into_iter()
            .find(|s| {
                s["state"] == "ESTABLISHED"
                    && match side {
                        Side::Client => s["remote"]["port"] == port,
                        Side::Server => s["local"]["port"] == port,
                    }
            })
            .cloned()
    };
    let s0 = pick(&r.listings[k][0])?;
    let s1 = pick(&r.listings[k][1])?;
    let dt = r.listing_dt;
    let t0 = &s0["tcp"];
    let t1 = &s1["tcp"];
    let d = |k: &str| t1[k].as_f64().unwrap_or(0.0) - t0[k].as_f64().unwrap_or(0.0);
    let busy = d("busy_time_us");
    let share = |k: &str| if busy > 0.0 { d(k) / busy } else { 0.0 };
    let mss = t1["snd_mss_bytes"].as_f64().unwrap_or(0.0);
    let sent = d("bytes_sent");
    Some(json!({
        "goodput_bytes_per_sec": d("bytes_acked") / dt,
        "received_bytes_per_sec": d("bytes_received") / dt,
        "rtt_us": t1["rtt_us"],
        "rtt_before_us": t0["rtt_us"],
        "min_rtt_us": t1["min_rtt_us"],
        "busy_share": busy / 1e6 / dt,
        "sndbuf_limited_share": share("sndbuf_limited_us"),
        "rwnd_limited_share": share("rwnd_limited_us"),
        "retrans_share": if sent > 0.0 { d("bytes_retrans") / sent } else { 0.0 },
        "sndbuf_bytes": s1["memory"]["sndbuf_bytes"],
        "rcvbuf_bytes": s1["memory"]["rcvbuf_bytes"],
        "wmem_queued_bytes": s1["memory"]["wmem_queued_bytes"],
        "send_q_bytes": s1["send_q"],
        "notsent_bytes": t1["notsent_bytes"],
        "inflight_bytes": t1["unacked_pkts"].as_f64().unwrap_or(0.0) * mss,
        "cwnd_bytes": t1["cwnd_pkts"].as_f64().unwrap_or(0.0) * mss,
        "ssthresh_pkts": t1["ssthresh_pkts"],
        "snd_wnd_bytes": t1["snd_wnd_bytes"],
        "rcv_wnd_bytes": t1["rcv_wnd_bytes"],
        "ca_state": t1["ca_state"],
        "congestion": t1["congestion"],
    }))
}

/// Finds the sockstat binary: `SOCKSTAT_BIN`, else `target/release/sockstat` of this workspace.
pub fn default_sockstat() -> PathBuf {
    if let Some(p) = std::env::var_os("SOCKSTAT_BIN") {
        return PathBuf::from(p);
    }
    FsPath::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/sockstat")
}
