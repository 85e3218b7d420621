//! Diagnosis: what limits each TCP connection, and what to change (`sockstat diagnose`).
//!
//! Input is two [`ZoneSample`]s of one network namespace taken an interval apart (sockets with
//! `tcp_info` and socket memory, the namespace's MIB counters, `/proc/net/sockstat`'s TCP memory)
//! and a [`Context`] (sysctls, the interval, an optional bottleneck bandwidth). [`evaluate`] joins
//! the sockets by cookie, derives rates and shares over the interval ([`Flow`]), runs every rule
//! (one module each, R1-R10 of doc/reference/calibration.md) and returns [`Finding`]s sorted by severity.
//!
//! This module is pure: it never reads the system and never prints. Gathering is the caller's
//! job (the `diagnose` command); rendering is [`crate::render::diagnose`].
//!
//! The tcp_info chronographs under-count, or stay at 0 (cubic in slow start never counts
//! `sndbuf_limited`), so no rule fires on a share alone: each throughput rule requires the
//! goodput to reach a large part of the ceiling its limit implies at the RTT the flow saw over
//! the interval (limit / srtt, queueing included; doc/reference/calibration.md#ceilings), and the limit
//! to matter on the path itself (limit / `min_rtt` below the bandwidth, when known, or below
//! [`UNKNOWN_BANDWIDTH_CEILING`]). No finding states a ceiling below the rate it measured
//! ([`Ceiling`]).

mod close_wait;
mod delayed_ack;
mod ephemeral_ports;
mod interval;
mod listen_overflow;
mod memory_pressure;
mod receive_buffer;
mod receive_window;
mod receiver_not_reading;
mod retransmissions;
mod send_buffer;
mod timewait_syn;

#[cfg(test)]
pub(crate) mod testutil;

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

#[cfg(test)]
use crate::counters::CounterSet;
use crate::finding::Subject;
pub use crate::finding::{Certainty, Confidence, Evidence, Finding, OwnerRef, RuleId, SocketRef};
use crate::model::tcp::TcpInfo;
pub use crate::model::Severity;
use crate::model::{Endpoint, Proto, Snapshot, Socket, State, Warning, WarningCode};
pub use crate::sample::{Sample, ZoneSample};
pub use crate::sysctl::Sysctls;
use crate::text::fmt;
pub use retransmissions::{MeasuredConnects, SLOW_CONNECT_US};

/// A connection is "active" when it was busy sending (any chronograph running) for at least
/// this share of the interval; below it a low goodput is the application's choice and no
/// transport rule fires (doc/reference/calibration.md#sampling-model).
pub const ACTIVE_BUSY_SHARE: f64 = 0.5;
/// Goodput must reach this fraction of a limit's ceiling (the limit divided by the RTT the flow
/// saw over the interval) before the limit is called binding. In the diagnosis matrix
/// (doc/reference/calibration.md#ceilings) flows bound by a buffer or window reached 0.62-1.37 of it
/// under cubic and BBR, alone and behind shared queues; every healthy flow stayed at or below
/// 0.36 (a large buffer a bulk sender keeps full).
pub const CEILING_MATCH: f64 = 0.5;
/// Without a known bottleneck bandwidth, a limit that allows this much (1 Gbit/s, in bytes/s) or
/// more at the path's min RTT is not reported: the negative case of doc/reference/cases.md#receive-buffer
/// (a small buffer at loopback RTT) allows gigabytes per second and "barely hurts".
pub const UNKNOWN_BANDWIDTH_CEILING: f64 = 125_000_000.0;
/// A ceiling below this (10 Mbit/s) on a path of at least [`SLOW_PATH_RTT_US`] is critical
/// (doc/reference/calibration.md#common-thresholds).
pub const CRITICAL_CEILING: f64 = 1_250_000.0;
/// See [`CRITICAL_CEILING`].
pub const SLOW_PATH_RTT_US: u32 = 10_000;
/// A ceiling below this share of the known bandwidth is critical
/// (doc/reference/calibration.md#common-thresholds).
pub const CRITICAL_BANDWIDTH_SHARE: f64 = 0.5;

/// An exact buffer-lock reading (`SO_BUF_LOCK` through `pidfd_getfd`, doc/reference/linux.md#exact-locks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufLock {
    /// SO_SNDBUF was set (SOCK_SNDBUF_LOCK).
    pub sndbuf: bool,
    /// SO_RCVBUF was set (SOCK_RCVBUF_LOCK).
    pub rcvbuf: bool,
}

/// Everything else the rules need.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Seconds between the two samples, as measured.
    pub interval_s: f64,
    /// The namespace's sysctls.
    pub sysctls: Sysctls,
    /// The bottleneck bandwidth the operator gave (`--bandwidth`), bytes/s.
    pub bandwidth: Option<f64>,
    /// The page size, bytes (for `tcp_mem`, which counts pages).
    pub page_size: u64,
    /// Exact buffer locks by socket cookie, where they could be read (root only).
    pub buf_locks: HashMap<u64, BufLock>,
    /// The zone's connects measured from connection events over the interval (root), which R10
    /// judges instead of, and beside, the handshakes caught in SYN-SENT.
    pub connects: Option<MeasuredConnects>,
}

/// What a diagnosis returns: the findings, most severe first, and what could not be seen.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// What could not be seen, and how to see it.
    pub warnings: Vec<Warning>,
    /// TCP connections examined in both samples.
    #[serde(skip)]
    pub connections: usize,
    /// The interval, seconds.
    #[serde(skip)]
    pub interval_s: f64,
}

impl Report {
    /// True when some finding is at warning level or above (exit status 1).
    pub fn has_problems(&self) -> bool {
        self.findings
            .iter()
            .any(|f| f.severity >= Severity::Warning)
    }
}

/// Goodput at this share of the ceiling or more (with nothing else in doubt) makes the verdict
/// certain; between [`CEILING_MATCH`] and this it is likely.
pub const CONFIDENT_MATCH: f64 = 0.7;

/// One TCP socket seen in both samples, with the derived quantities of
/// doc/reference/calibration.md#sampling-model.
#[derive(Debug, Clone, Copy)]
pub struct Flow<'a> {
    /// The socket in the earlier sample.
    pub before: &'a Socket,
    /// The socket in the later sample.
    pub after: &'a Socket,
    /// The later sample's snapshot (for owners).
    pub snap: &'a Snapshot,
    /// Seconds between the samples.
    pub dt: f64,
}

fn delta<T: Into<u64>>(a: Option<T>, b: Option<T>) -> Option<u64> {
    Some(b?.into().saturating_sub(a?.into()))
}

impl<'a> Flow<'a> {
    /// ` (pid 1234 sender)` when the holder is known, else empty: how a finding names the
    /// process behind a flow.
    pub(crate) fn owner_text(&self) -> String {
        let r = self.socket_ref();
        match r.owners.first() {
            Some(o) => match &o.command {
                Some(c) => format!(" (pid {} {})", o.pid, c),
                None => format!(" (pid {})", o.pid),
            },
            None => String::new(),
        }
    }

    /// tcp_info in the earlier sample.
    pub fn info0(&self) -> Option<&'a TcpInfo> {
        self.before.tcp.as_ref().map(|t| &t.info)
    }

    /// tcp_info in the later sample.
    pub fn info(&self) -> Option<&'a TcpInfo> {
        self.after.tcp.as_ref().map(|t| &t.info)
    }

    /// Change of a tcp_info counter over the interval.
    pub fn d<T: Into<u64>>(&self, f: impl Fn(&TcpInfo) -> Option<T>) -> Option<u64> {
        delta(f(self.info0()?), f(self.info()?))
    }

    /// True when nothing moved on the connection over the interval and nothing waits on it:
    /// ESTABLISHED in both samples, both queues empty, no retransmission or persist timer, no
    /// retransmission under way (`retransmits`, `backoff`, `ca_state` Open, nothing unacked),
    /// and the same busy time, bytes received and sent, data segments sent and RTOs. No
    /// per-connection rule finds anything on such a flow, each for a reason it reads first:
    /// R1 and R2 need a busy share ([`ACTIVE_BUSY_SHARE`]); R3 a persist timer (sender) or a
    /// receive queue (receiver); R4 bytes received; R5 data segments sent; R9 a retransmission,
    /// an RTO or bytes sent. A counter the kernel does not give makes no flow quiet.
    pub fn quiet(&self) -> bool {
        let (Some(a), Some(b)) = (self.info0(), self.info()) else {
            return false;
        };
        let same = |f: fn(&TcpInfo) -> Option<u64>| f(a).is_some() && f(a) == f(b);
        self.before.state == State::Established
            && self.after.state == State::Established
            && self.after.recv_q == 0
            && self.after.send_q == 0
            && self.after.timer.is_none_or(|t| {
                t.kind != retransmissions::TIMER_RETRANSMIT
                    && t.kind != receiver_not_reading::TIMER_PERSIST
            })
            && b.retransmits() == Some(0)
            && b.backoff() == Some(0)
            && b.probes() == Some(0)
            && b.ca_state() == Some(0)
            && b.unacked() == Some(0)
            && same(TcpInfo::busy_time_us)
            && same(TcpInfo::bytes_received)
            && same(TcpInfo::bytes_sent)
            && same(|i| i.data_segs_out().map(u64::from))
            && same(|i| i.total_rto().map(u64::from))
    }

    /// Δbusy_time / Δt: the share of the interval the connection was trying to send.
    pub fn busy_share(&self) -> Option<f64> {
        let busy = self.d(TcpInfo::busy_time_us)? as f64 / 1e6;
        (self.dt > 0.0).then(|| (busy / self.dt).min(1.0))
    }

    /// True when busy for at least [`ACTIVE_BUSY_SHARE`] of the interval.
    pub fn active(&self) -> bool {
        self.busy_share().is_some_and(|b| b >= ACTIVE_BUSY_SHARE)
    }

    /// Δsndbuf_limited / Δbusy_time.
    pub fn sndbuf_share(&self) -> Option<f64> {
        ratio(
            self.d(TcpInfo::sndbuf_limited_us)?,
            self.d(TcpInfo::busy_time_us)?,
        )
    }

    /// Δrwnd_limited / Δbusy_time.
    pub fn rwnd_share(&self) -> Option<f64> {
        ratio(
            self.d(TcpInfo::rwnd_limited_us)?,
            self.d(TcpInfo::busy_time_us)?,
        )
    }

    /// Bytes acknowledged per second (sender goodput).
    pub fn goodput(&self) -> Option<f64> {
        Some(self.d(TcpInfo::bytes_acked)? as f64 / self.dt)
    }

    /// Bytes received per second (receiver goodput).
    pub fn recv_goodput(&self) -> Option<f64> {
        Some(self.d(TcpInfo::bytes_received)? as f64 / self.dt)
    }

    /// Bytes in flight: unacked packets × MSS.
    pub fn inflight(&self) -> Option<u64> {
        let i = self.info()?;
        Some(u64::from(i.unacked()?) * u64::from(i.snd_mss()?))
    }

    /// The windowed minimum RTT, µs; `None` without a sample (the kernel reports ~0 then, and 0
    /// from some paths).
    pub fn min_rtt_us(&self) -> Option<u32> {
        self.info()?
            .min_rtt_us()
            .filter(|&r| r > 0 && r != u32::MAX)
    }

    /// The send buffer limit (`skmem tb`), bytes.
    pub fn sndbuf(&self) -> Option<u64> {
        self.after
            .memory
            .as_deref()
            .map(|m| u64::from(m.sndbuf_bytes))
    }

    /// The receive buffer limit (`skmem rb`), bytes.
    pub fn rcvbuf(&self) -> Option<u64> {
        self.after
            .memory
            .as_deref()
            .map(|m| u64::from(m.rcvbuf_bytes))
    }

    /// The socket a finding names.
    pub fn socket_ref(&self) -> SocketRef {
        SocketRef::of(self.after, self.snap)
    }

    /// Puts the connection's common evidence: the interval and the RTTs.
    pub fn common_evidence(&self, ev: &mut Evidence) {
        ev.num("interval_s", self.dt);
        if let Some(i) = self.info() {
            ev.int("min_rtt_us", self.min_rtt_us().map(u64::from));
            ev.int("rtt_us", i.rtt_us().map(u64::from));
        }
    }
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| (part as f64 / whole as f64).min(1.0))
}

/// The bottleneck bandwidth for a flow, bytes/s, and where it came from: the operator's
/// `--bandwidth`, else the largest delivery rate not marked app-limited (a lower bound: a
/// flow bound by a window or buffer cannot measure the path, doc/reference/calibration.md#bandwidth-and-bdp).
pub fn bandwidth_for(flow: &Flow<'_>, ctx: &Context) -> Option<(f64, &'static str)> {
    if let Some(b) = ctx.bandwidth {
        return Some((b, "operator"));
    }
    let i = flow.info()?;
    if i.delivery_rate_app_limited()? {
        return None;
    }
    let r = i.delivery_rate()? as f64;
    (r > 0.0).then_some((r, "delivery-rate"))
}

/// The bandwidth to size a buffer for, when it says more than the ceiling already does: the
/// operator's, or a measured one above what the limit allows at the path's min RTT (a measured
/// rate at or below it gives a BDP no larger than today's limit: a sample taken while the limit
/// or a queue held the flow, doc/reference/calibration.md#bandwidth-and-bdp).
pub fn bandwidth_beyond(
    flow: &Flow<'_>,
    ctx: &Context,
    ceiling: &Ceiling,
) -> Option<(f64, &'static str)> {
    bandwidth_for(flow, ctx).filter(|&(b, src)| src == "operator" || b > ceiling.on_idle_path())
}

/// What a limit (a buffer or a window: bytes a flow can carry per round trip) allows a flow
/// that carried `goodput` over the interval: the one judgement R1, R2 and R4 share
/// (doc/reference/calibration.md#ceilings).
///
/// The ceiling is the limit over the RTT the flow saw (S̄, the mean of two smoothed-RTT
/// samples). Those samples are two instants, each the average of the last few ACKs; a flow
/// whose round trips vary (a loopback flow on a loaded host read 42 µs and 266 µs a second
/// apart) can carry more than limit / S̄. Its numbers then contradict each other: the ceiling
/// is uncertain, at least the goodput, and is stated so ([`Ceiling::bytes_per_sec`],
/// [`Ceiling::share_text`], [`Ceiling::per_round_trip_text`]). When even the path's min RTT
/// cannot explain the goodput, the limit read is not what held the flow and
/// [`Ceiling::binds`] is false.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Ceiling {
    /// The limit's payload per round trip, bytes.
    pub limit: f64,
    /// The most the limit can let the flow carry in one round trip, bytes (a window: itself; a
    /// send buffer: `tb` and the skb a writer may overshoot it by).
    pub most: f64,
    /// The RTT the flow saw over the interval (S̄), seconds.
    pub rtt_seen_s: f64,
    /// The path's min RTT (R), seconds.
    pub min_rtt_s: f64,
    /// What the flow carried over the interval, bytes/s.
    pub goodput: f64,
}

impl Ceiling {
    /// A limit of `limit` bytes per round trip (at most `most`) for a flow that saw
    /// `rtt_seen_us` and carried `goodput`; `min_rtt_us` is the path's RTT.
    pub fn new(limit: f64, most: f64, rtt_seen_us: u32, min_rtt_us: u32, goodput: f64) -> Self {
        let s = |us: u32| f64::from(us.max(1)) / 1e6;
        Ceiling {
            limit,
            most: most.max(limit),
            rtt_seen_s: s(rtt_seen_us),
            min_rtt_s: s(min_rtt_us.min(rtt_seen_us)),
            goodput,
        }
    }

    /// The limit over the RTT the flow saw, bytes/s: the ceiling, when the flow did not carry
    /// more.
    pub fn at_rtt_seen(&self) -> f64 {
        self.limit / self.rtt_seen_s
    }

    /// The limit over the path's min RTT, bytes/s: what it allows without any queue. At or
    /// above the bandwidth the limit is the BDP or more, and what holds the flow is the queue
    /// that lengthens its round trips (another flow's, or on loopback the CPUs' run queue).
    pub fn on_idle_path(&self) -> f64 {
        self.limit / self.min_rtt_s
    }

    /// Limits carried per round trip seen (goodput × S̄ / limit); above 1 the ceiling is
    /// uncertain.
    pub fn limits_per_rtt_seen(&self) -> f64 {
        self.goodput / self.at_rtt_seen()
    }

    /// True when the flow carried more than limit / S̄: its round trips were shorter than the
    /// smoothed RTT sampled, or the limit was larger between the samples.
    pub fn uncertain(&self) -> bool {
        self.goodput > self.at_rtt_seen()
    }

    /// The ceiling a finding states, bytes/s: limit / S̄, or the goodput when the flow carried
    /// more (the ceiling is at least what it carried). Never below the goodput.
    pub fn bytes_per_sec(&self) -> f64 {
        self.at_rtt_seen().max(self.goodput)
    }

    /// Goodput over the stated ceiling: at most 1.
    pub fn share(&self) -> f64 {
        self.goodput / self.bytes_per_sec()
    }

    /// True when the limit holds the flow: it carried at least `match_share` of limit / S̄, no
    /// more than the most the limit allows at the path's min RTT (else the limit read is not
    /// what held it), and the limit matters on the path itself ([`Ceiling::on_idle_path`]
    /// below the bandwidth, [`ceiling_matters`]).
    pub fn binds(&self, match_share: f64, ctx: &Context) -> bool {
        self.goodput >= match_share * self.at_rtt_seen()
            && self.goodput <= self.most / self.min_rtt_s
            && ceiling_matters(self.on_idle_path(), ctx)
    }

    /// "83% of what WHAT allows", or "as much as WHAT allows" when the ceiling is uncertain.
    pub fn share_text(&self, what: &str) -> String {
        if self.uncertain() {
            format!("as much as {what} allows")
        } else {
            format!("{:.0}% of what {what} allows", 100.0 * self.share())
        }
    }

    /// "LIMIT per round trip of RTT is a ceiling of C", or, when uncertain, why the ceiling is
    /// only known to be at least the goodput.
    pub fn per_round_trip_text(&self, limit: &str, rtt: &str) -> String {
        if self.uncertain() {
            format!(
                "{limit} per round trip of {rtt} would allow only {}, less than it carried: its \
                 round trips were shorter than that smoothed RTT, or the limit larger between \
                 the samples, so the ceiling is uncertain, at least {}",
                fmt::rate(self.at_rtt_seen()),
                fmt::rate(self.goodput)
            )
        } else {
            format!(
                "{limit} per round trip of {rtt} is a ceiling of {}",
                fmt::rate(self.bytes_per_sec())
            )
        }
    }

    /// The confidence line for an uncertain ceiling (`unit`: "window", "buffer").
    pub fn uncertain_reason(&self, unit: &str) -> Option<String> {
        self.uncertain().then(|| {
            format!(
                "more than one {unit} per smoothed RTT: the two srtt samples overstate the \
                 round trips it made over the interval, so its ceiling is known only to be at \
                 least its rate"
            )
        })
    }

    /// Puts the ceiling's evidence: `ceiling_bytes_per_sec`, `ceiling_match`,
    /// `limits_per_rtt_seen`, `ceiling_uncertain`, `idle_path_ceiling_bytes_per_sec`.
    pub fn evidence(&self, ev: &mut Evidence) {
        ev.num("ceiling_bytes_per_sec", self.bytes_per_sec())
            .num("ceiling_match", self.share())
            .num("limits_per_rtt_seen", self.limits_per_rtt_seen())
            .put("ceiling_uncertain", Some(Value::from(self.uncertain())))
            .num("idle_path_ceiling_bytes_per_sec", self.on_idle_path());
    }
}

/// True when a ceiling (bytes/s) actually matters: below the operator's bandwidth when given,
/// else below [`UNKNOWN_BANDWIDTH_CEILING`]. The rules ask it of what a limit allows at the
/// path's min RTT ([`Ceiling::on_idle_path`]).
pub fn ceiling_matters(ceiling: f64, ctx: &Context) -> bool {
    match ctx.bandwidth {
        Some(b) => ceiling < b,
        None => ceiling < UNKNOWN_BANDWIDTH_CEILING,
    }
}

/// Severity of a throughput cap: critical when the ceiling is below half the known bandwidth,
/// or below 10 Mbit/s on a path of 10 ms or more (doc/reference/calibration.md#common-thresholds).
pub fn cap_severity(ceiling: f64, min_rtt_us: u32, ctx: &Context) -> Severity {
    let vs_bw = ctx
        .bandwidth
        .is_some_and(|b| ceiling < CRITICAL_BANDWIDTH_SHARE * b);
    if vs_bw || (ceiling < CRITICAL_CEILING && min_rtt_us >= SLOW_PATH_RTT_US) {
        Severity::Critical
    } else {
        Severity::Warning
    }
}

/// Everything a rule sees.
pub struct Input<'a> {
    /// The earlier sample.
    pub before: &'a ZoneSample,
    /// The later sample.
    pub after: &'a ZoneSample,
    /// Sysctls, interval, bandwidth.
    pub ctx: &'a Context,
    /// TCP sockets present in both samples, joined by cookie: [`Input::flows`].
    flows: std::sync::OnceLock<Vec<Flow<'a>>>,
    /// The flows the per-connection rules read: [`Input::moving`].
    moving: std::sync::OnceLock<Vec<usize>>,
    /// Whether [`Input::moving`] leaves the quiet flows out (always, but in the test that
    /// checks that no rule finds anything on them).
    skip_quiet: bool,
    /// The port analysis of the later sample against the earlier, made once for the rules
    /// that read it (R7, R8): [`Input::ports`].
    ports: std::sync::OnceLock<crate::ports::PortsReport>,
}

impl<'a> Input<'a> {
    /// The TCP sockets present in both samples, joined by cookie, made at the first call.
    pub fn flows(&self) -> &[Flow<'a>] {
        self.flows
            .get_or_init(|| join(self.before, self.after, self.ctx.interval_s))
    }

    /// The flows a per-connection rule can find something on: [`Input::flows`] but the quiet
    /// ones ([`Flow::quiet`]), made at the first call. Most connections of a big table are idle
    /// at any moment; each rule that reads them all touches every socket's `tcp_info` again.
    pub fn moving(&self) -> impl Iterator<Item = &Flow<'a>> + '_ {
        let flows = self.flows();
        let moving = self.moving.get_or_init(|| {
            (0..flows.len())
                .filter(|&i| !(self.skip_quiet && flows[i].quiet()))
                .collect()
        });
        moving.iter().map(move |&i| &flows[i])
    }

    /// The port analysis of this interval (`ports::analyze` with both samples), made at the
    /// first call.
    pub fn ports(&self) -> &crate::ports::PortsReport {
        self.ports.get_or_init(|| ephemeral_ports::report(self))
    }

    /// Change of a namespace counter over the interval (`None` when either sample lacks it).
    pub fn counter_delta(&self, group: &str, name: &str) -> Option<u64> {
        let a = self.before.counters.as_ref()?.get(group, name)?;
        let b = self.after.counters.as_ref()?.get(group, name)?;
        Some(b.saturating_sub(a).max(0) as u64)
    }
}

/// A rule: reads the input, returns its findings.
pub type Rule = fn(&Input<'_>) -> Vec<Finding>;

/// Every rule with its id (a rule may emit more than one id: R2 emits both window findings).
pub const RULES: &[(&str, Rule)] = &[
    ("send_buffer", send_buffer::check),
    ("receive_window", receive_window::check),
    ("receiver_not_reading", receiver_not_reading::check),
    ("receive_buffer", receive_buffer::check),
    ("delayed_ack", delayed_ack::check),
    ("memory_pressure", memory_pressure::check),
    ("ephemeral_ports", ephemeral_ports::check),
    ("timewait_syn", timewait_syn::check),
    ("listen_overflow", listen_overflow::check),
    ("retransmissions", retransmissions::check),
    ("close_wait", close_wait::check),
];

/// Joins the samples by socket cookie and runs every rule. Findings come back most severe
/// first, then by rule, then by connection.
pub fn evaluate(before: &ZoneSample, after: &ZoneSample, ctx: &Context) -> Vec<Finding> {
    evaluate_joined(before, after, ctx, true).0
}

/// [`evaluate`], and how many connections were followed across the samples; the quiet flows
/// left out of the per-connection rules unless `skip_quiet` is false ([`Input::moving`]).
fn evaluate_joined(
    before: &ZoneSample,
    after: &ZoneSample,
    ctx: &Context,
    skip_quiet: bool,
) -> (Vec<Finding>, usize) {
    let input = Input {
        before,
        after,
        ctx,
        flows: std::sync::OnceLock::new(),
        moving: std::sync::OnceLock::new(),
        skip_quiet,
        ports: std::sync::OnceLock::new(),
    };
    // The rules read the samples and write nothing: on a big table they run on every core
    // (each rule is one pass over the connections; at 60k sockets the eleven took 17 ms of the
    // exporter's collection on one core), joined in the table's order. The two long shared
    // pieces are made by the first rule that needs them: the port analysis (4.8 ms at 60k) by
    // R7, taken first, while the next rule joins the samples (4.4 ms) on another core; R8,
    // which waits for the port analysis, is taken last instead of blocking a core meanwhile.
    let workers = crate::parallel::parts(after.snapshot.sockets.len(), 4096, 4);
    let mut order: Vec<usize> = (0..RULES.len()).collect();
    order.sort_by_key(|&i| match RULES[i].0 {
        "ephemeral_ports" => 0,
        "timewait_syn" => 2,
        _ => 1,
    });
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&i) = order.get(k) else {
                return done;
            };
            done.push((i, (RULES[i].1)(&input)));
        }
    };
    let mut parts = std::thread::scope(|sc| {
        let helpers: Vec<_> = (1..workers).map(|_| sc.spawn(work)).collect();
        let mut all = work();
        for h in helpers {
            all.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        all
    });
    parts.sort_by_key(|(i, _)| *i);
    let mut out: Vec<Finding> = parts.into_iter().flat_map(|(_, f)| f).collect();
    sort_findings(&mut out);
    (out, input.flows().len())
}

/// Runs [`evaluate`] and adds the counts and warnings a renderer shows.
pub fn diagnose(before: &ZoneSample, after: &ZoneSample, ctx: &Context) -> Report {
    let (findings, connections) = evaluate_joined(before, after, ctx, true);
    let mut warnings = after.snapshot.warnings.clone();
    if ctx.sysctls.tcp_mem.is_none() {
        warnings.push(Warning {
            code: WarningCode::TcpMemHidden,
            count: None,
            message: "net.ipv4.tcp_mem could not be read (it is global and shown only in the \
                      host's initial network namespace): memory pressure is judged from the \
                      namespace's counters only; run in the host namespace to see it"
                .into(),
            details: vec![],
        });
    }
    let no_cookie = after
        .snapshot
        .sockets
        .iter()
        .filter(|s| s.proto == Proto::Tcp && s.cookie.is_none())
        .count();
    if no_cookie > 0 {
        warnings.push(Warning {
            code: WarningCode::NoCookies,
            count: Some(no_cookie as u64),
            message: format!(
                "{no_cookie} TCP sockets came without a socket cookie (/proc/net text): they \
                 cannot be followed across samples, so no rate-based rule looked at them; use the \
                 netlink source"
            ),
            details: vec![],
        });
    }
    Report {
        findings,
        warnings,
        connections,
        interval_s: ctx.interval_s,
    }
}

/// What a diagnosis is told beside its samples.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The bottleneck bandwidth the operator gave (`--bandwidth`), bytes/s.
    pub bandwidth: Option<f64>,
    /// The page size, bytes (for `tcp_mem`, which counts pages).
    pub page_size: u64,
    /// Exact buffer locks by socket cookie, where they could be read (root only).
    pub buf_locks: HashMap<u64, BufLock>,
    /// Connects measured from connection events over the interval, by the network namespace
    /// (inode) they were made in.
    pub connects: HashMap<u64, MeasuredConnects>,
    /// The network namespace (inode) sockstat runs in: a sample of no named zone is its.
    pub own_netns: Option<u64>,
}

/// Judges every zone of `after` against the same zone of `before` (a zone that appeared in
/// between has nothing to compare and is left out), each with its own sysctls and counters:
/// the one diagnosis of `sockstat diagnose`, the exporter and [`crate::diagnose_connections`].
/// With zones asked for, each finding carries its zone and zone warnings name it.
pub fn judge(before: &Sample, after: &Sample, opts: &Options) -> Report {
    let interval_s = after.seconds_since(before);
    let mut report = Report {
        warnings: after.warnings.clone(),
        interval_s,
        ..Report::default()
    };
    for z in &after.zones {
        let Some(b) = before.matching(z) else {
            continue;
        };
        let ctx = Context {
            interval_s,
            sysctls: z.sysctls.clone(),
            bandwidth: opts.bandwidth,
            page_size: opts.page_size,
            buf_locks: opts.buf_locks.clone(),
            connects: z
                .zone
                .as_ref()
                .and_then(|z| z.netns_inode)
                .or(opts.own_netns)
                .and_then(|n| opts.connects.get(&n))
                .cloned(),
        };
        let r = diagnose(b, z, &ctx);
        report.connections += r.connections;
        let zone = z.zone.as_ref().filter(|_| after.zoned);
        report.findings.extend(r.findings.into_iter().map(|mut f| {
            f.zone = zone.cloned();
            f
        }));
        for w in r.warnings {
            // tcp_mem is global: the same warning in every zone is one warning.
            let w = match zone {
                Some(zone) if w.code != WarningCode::TcpMemHidden => w.in_zone(&zone.name),
                _ => w,
            };
            if !report.warnings.contains(&w) {
                report.warnings.push(w);
            }
        }
    }
    sort_findings(&mut report.findings);
    report
}

/// Most severe first, then rule order, then local and remote address.
pub fn sort_findings(f: &mut [Finding]) {
    f.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.rule.cmp(&b.rule))
            .then_with(|| {
                let key = |x: &Finding| {
                    x.socket
                        .as_ref()
                        .map(|s| (s.local.clone(), s.remote.clone()))
                };
                key(a).cmp(&key(b))
            })
    });
}

/// TCP sockets with tcp_info in both samples, joined by cookie (sockets without a cookie, from
/// /proc text, cannot be followed and are skipped).
fn join<'a>(before: &'a ZoneSample, after: &'a ZoneSample, dt: f64) -> Vec<Flow<'a>> {
    let mut seen = rustc_hash::FxHashSet::default();
    seen.reserve(after.snapshot.sockets.len());
    after
        .snapshot
        .sockets
        .iter()
        .filter(|s| s.proto == Proto::Tcp && s.tcp.is_some())
        .filter_map(|s| {
            let c = s.cookie?;
            // A socket held by several processes appears once per snapshot; guard anyway.
            if !seen.insert(c) {
                return None;
            }
            let b = before.by_cookie(c).filter(|b| b.proto == Proto::Tcp)?;
            b.tcp.as_ref()?;
            Some(Flow {
                before: b,
                after: s,
                snap: &after.snapshot,
                dt,
            })
        })
        .collect()
}

/// Which buffer a host-setting finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// `net.core.wmem_max`, `SO_SNDBUF`.
    Send,
    /// `net.core.rmem_max`, `SO_RCVBUF`.
    Receive,
}

/// The host finding shared by R1 and R2: `net.core.{w,r}mem_max` (`max`) below the BDP of the
/// busiest flow `conn`. Only applications that set the buffer size themselves are capped by it,
/// so it is `info`; `None` when the setting is large enough.
pub(crate) fn core_mem_max_finding(
    rule: RuleId,
    dir: Direction,
    max: u64,
    bdp: f64,
    bandwidth: f64,
    conn: &str,
) -> Option<Finding> {
    if max as f64 >= bdp {
        return None;
    }
    let (name, sockopt, ev_max, ev_advised) = match dir {
        Direction::Send => (
            "wmem_max",
            "SO_SNDBUF",
            "wmem_max_bytes",
            "advised_wmem_max_bytes",
        ),
        Direction::Receive => (
            "rmem_max",
            "SO_RCVBUF",
            "rmem_max_bytes",
            "advised_rmem_max_bytes",
        ),
    };
    let target = round_up_kib(bdp);
    let mut ev = Evidence::default();
    ev.int(ev_max, max)
        .num("bdp_bytes", bdp)
        .num("bandwidth_bytes_per_sec", bandwidth)
        .text("flow", conn.to_string())
        .int(ev_advised, target);
    Some(Finding {
        zone: None,
        rule: Some(rule),
        code: rule.id(),
        subject: Subject::Namespace,
        severity: Severity::Info,
        socket: None,
        summary: format!(
            "net.core.{name} = {} is below the BDP of the busy flow {conn} ({}): an application \
             that sets {sockopt} on such a path is capped",
            fmt::bytes(max as f64),
            fmt::bytes(bdp)
        ),
        evidence: ev,
        advice: format!("sysctl -w net.core.{name}={target}"),
        count: None,
        confidence: Confidence::counted(format!(
            "net.core.{name} is read, and the BDP is --bandwidth or a measured rate times min RTT"
        )),
    })
}

/// Rounds a byte count up to a whole KiB (advice reads better, and never falls short).
pub fn round_up_kib(b: f64) -> u64 {
    ((b / 1024.0).ceil().max(1.0) as u64) * 1024
}

/// Parses a bandwidth for `--bandwidth`: bits per second with an optional decimal prefix
/// (`100Mbit`, `100M`, `1Gbit`, `1.5gbps`, `800kbit`, `10000000`), or bytes per second with
/// `B/s` (`12.5MB/s`). Returns bytes per second.
pub fn parse_bandwidth(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let err = || {
        format!(
            "invalid bandwidth '{s}': give bits per second like 100Mbit, 1Gbit, 800kbit, or bytes \
             per second like 12.5MB/s"
        )
    };
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| err())?;
    if !n.is_finite() || n <= 0.0 {
        return Err(err());
    }
    let unit = unit.trim();
    let (mult, bytes) = if let Some(p) = unit.strip_suffix("B/s") {
        (prefix(p).ok_or_else(err)?, true)
    } else {
        let lower = unit.to_ascii_lowercase();
        let p = lower
            .strip_suffix("bit/s")
            .or_else(|| lower.strip_suffix("bit"))
            .or_else(|| lower.strip_suffix("bps"))
            .unwrap_or(&lower);
        (prefix(p).ok_or_else(err)?, false)
    };
    let v = n * mult;
    Ok(if bytes { v } else { v / 8.0 })
}

fn prefix(p: &str) -> Option<f64> {
    match p {
        "" => Some(1.0),
        "k" | "K" => Some(1e3),
        "m" | "M" => Some(1e6),
        "g" | "G" => Some(1e9),
        "t" | "T" => Some(1e12),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    /// No rule finds anything on a quiet flow ([`Flow::quiet`]): over a table of connections
    /// drawn at random, quiet ones with every other field the rules read at extremes (zero
    /// windows, full buffers, long RTTs, keepalive timers, drops) and moving ones, every rule's
    /// findings are the same whether the quiet flows are left out or read.
    #[test]
    fn leaving_the_quiet_flows_out_changes_no_finding() {
        use super::testutil::TcpBuilder;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let (mut before, mut after) = (Vec::new(), Vec::new());
        for k in 0..1000u64 {
            // One of `values`, by a draw `r` below their count.
            let pick = |r: u64, values: &[u64]| values[r as usize % values.len()];
            let rtt = pick(next(4), &[50, 2_000, 80_000, 400_000]) as u32;
            let mut b = TcpBuilder::new()
                .local(&format!("192.0.2.1:{}", 10_000 + k))
                .rtt(
                    rtt,
                    pick(next(3), &[rtt as u64 / 20, rtt as u64 / 2, rtt as u64]) as u32,
                )
                .min_rtt(pick(next(3), &[0, 40, rtt as u64 / 4]) as u32)
                .cwnd(pick(next(3), &[1, 10, 400]) as u32)
                .snd_wnd(pick(next(3), &[0, 65_535, 4_000_000]) as u32)
                .rcv_wnd(pick(next(3), &[0, 65_535, 4_000_000]) as u32)
                .sndbuf(pick(next(3), &[4_608, 87_040, 4_194_304]) as u32)
                .rcvbuf(
                    pick(next(2), &[4_608, 131_072]) as u32,
                    pick(next(2), &[0, 131_072]) as u32,
                )
                .queued(pick(next(2), &[0, 1_000_000]) as u32)
                .delivery_rate(pick(next(3), &[0, 1_000, 125_000_000]))
                .app_limited(next(2) == 0)
                .rcv_space(pick(next(2), &[14_480, 6_000_000]) as u32)
                .rcv_rtt(pick(next(2), &[0, 300_000]) as u32)
                .timer(pick(next(5), &[0, 1, 2, 3, 4]) as u8, next(3) as u8)
                .queues(
                    pick(next(4), &[0, 0, 0, 50_000]) as u32,
                    pick(next(4), &[0, 0, 0, 50_000]) as u32,
                );
            if next(8) == 0 {
                b = b.retransmits(1 + next(3) as u8);
            }
            if next(8) == 0 {
                b = b.backoff(1 + next(8) as u8);
            }
            if next(8) == 0 {
                b = b.probes(1 + next(3) as u8);
            }
            if next(8) == 0 {
                b = b.ca_state(1 + next(4) as u8);
            }
            if next(8) == 0 {
                b = b.unacked(1 + next(40) as u32);
            }
            if next(10) == 0 {
                b = b.state(State::CloseWait);
            }
            // The counters: cumulative, the same in both samples unless this flow moves.
            let busy = next(100_000_000);
            let (acked, received, sent) = (next(1 << 40), next(1 << 40), next(1 << 40));
            let (segs_in, segs_out) = (next(1 << 30) as u32, next(1 << 30) as u32);
            let (rtos, dsacks) = (next(50) as u16, next(1000) as u32);
            let base = b
                .chrono(busy, busy / 2, busy / 3)
                .bytes_acked(acked)
                .bytes_received(received)
                .bytes_sent(sent, sent / 10)
                .data_segs(segs_in, segs_out)
                .total_rto(rtos, u32::from(rtos) * 200)
                .retrans_dsack(dsacks, dsacks / 2)
                .drops(next(3) as u32);
            let mut later = base.clone();
            match next(10) {
                0 => later = later.chrono(busy + 900_000, busy / 2 + 800_000, busy / 3 + 100_000),
                1 => later = later.bytes_received(received + 10_000_000),
                2 => later = later.bytes_sent(sent + 10_000_000, sent / 10 + 3_000_000),
                3 => later = later.data_segs(segs_in + 100, segs_out + 100),
                4 => later = later.total_rto(rtos + 2, u32::from(rtos + 2) * 200),
                _ => {}
            }
            before.push(base.build(k + 1));
            after.push(later.build(k + 1));
        }
        let (b, a, ctx) = (
            super::testutil::sample(before),
            super::testutil::sample(after),
            super::testutil::ctx(),
        );
        let input = Input {
            before: &b,
            after: &a,
            ctx: &ctx,
            flows: std::sync::OnceLock::new(),
            moving: std::sync::OnceLock::new(),
            skip_quiet: true,
            ports: std::sync::OnceLock::new(),
        };
        let quiet = input.flows().iter().filter(|f| f.quiet()).count();
        assert!(quiet >= 30, "only {quiet} of the flows are quiet");
        assert!(
            quiet < input.flows().len() - 100,
            "the moving flows are too few"
        );
        let json = |f: &[Finding]| serde_json::to_string(f).unwrap();
        let (kept, read) = (
            evaluate_joined(&b, &a, &ctx, true).0,
            evaluate_joined(&b, &a, &ctx, false).0,
        );
        assert!(
            read.len() >= 10,
            "the table should give findings: {}",
            read.len()
        );
        assert_eq!(json(&kept), json(&read));
    }

    #[test]
    fn core_mem_max_finding_names_its_direction() {
        let bdp = 1_250_000.0;
        assert!(core_mem_max_finding(
            RuleId::SendBufferLimited,
            Direction::Send,
            2_000_000,
            bdp,
            1e7,
            "a"
        )
        .is_none());
        for (dir, rule, name, opt) in [
            (
                Direction::Send,
                RuleId::SendBufferLimited,
                "wmem_max",
                "SO_SNDBUF",
            ),
            (
                Direction::Receive,
                RuleId::ReceiveWindowLimited,
                "rmem_max",
                "SO_RCVBUF",
            ),
        ] {
            let f = core_mem_max_finding(rule, dir, 212_992, bdp, 1e7, "a:1 -> b:2").unwrap();
            assert_eq!((f.rule, f.severity), (Some(rule), Severity::Info));
            assert!(
                f.summary.contains(&format!("net.core.{name}")) && f.summary.contains(opt),
                "{}",
                f.summary
            );
            let key = format!("{name}_bytes");
            let advised = format!("advised_{name}_bytes");
            let get = |k: &str| {
                f.evidence
                    .0
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.clone())
            };
            assert_eq!(get(&key), Some(Value::from(212_992u64)));
            // Rounded up to whole KiB, and at least the BDP.
            assert_eq!(get(&advised), Some(Value::from(1_250_304u64)));
            assert_eq!(f.advice, format!("sysctl -w net.core.{name}=1250304"));
        }
    }

    use super::testutil::*;
    use super::*;

    #[test]
    fn bandwidth_spellings() {
        assert_eq!(parse_bandwidth("100Mbit"), Ok(12_500_000.0));
        assert_eq!(parse_bandwidth("100M"), Ok(12_500_000.0));
        assert_eq!(parse_bandwidth("1gbit"), Ok(125_000_000.0));
        assert_eq!(parse_bandwidth("800kbit/s"), Ok(100_000.0));
        assert_eq!(parse_bandwidth("12.5MB/s"), Ok(12_500_000.0));
        assert_eq!(parse_bandwidth("8000"), Ok(1000.0));
        let e = parse_bandwidth("fast").unwrap_err();
        assert!(e.starts_with("invalid bandwidth 'fast'"), "{e}");
        assert!(parse_bandwidth("0Mbit").is_err());
        assert!(parse_bandwidth("10Xbit").is_err());
    }

    #[test]
    fn an_idle_keepalive_connection_gets_nothing() {
        let t = TcpBuilder::new().min_rtt(20_000).rtt(20_500, 1000);
        let s0 = t.clone().build(1);
        let s1 = t.build(1);
        assert!(run(vec![s0], vec![s1], &ctx()).is_empty());
    }

    #[test]
    fn findings_sort_by_severity_first() {
        let mk = |rule, severity| Finding {
            count: None,
            confidence: Confidence::counted("test"),
            zone: None,
            rule: Some(rule),
            code: rule.id(),
            subject: Subject::Namespace,
            severity,
            socket: None,
            summary: String::new(),
            evidence: Evidence::default(),
            advice: String::new(),
        };
        let mut v = vec![
            mk(RuleId::SendBufferLimited, Severity::Info),
            mk(RuleId::Retransmissions, Severity::Critical),
            mk(RuleId::DelayedAck, Severity::Warning),
            mk(RuleId::SendBufferLimited, Severity::Warning),
        ];
        sort_findings(&mut v);
        let got: Vec<_> = v.iter().map(|f| (f.severity, f.rule.unwrap())).collect();
        assert_eq!(
            got,
            vec![
                (Severity::Critical, RuleId::Retransmissions),
                (Severity::Warning, RuleId::SendBufferLimited),
                (Severity::Warning, RuleId::DelayedAck),
                (Severity::Info, RuleId::SendBufferLimited),
            ]
        );
    }

    #[test]
    fn bandwidth_comes_from_the_operator_or_an_unlimited_sample() {
        let b = TcpBuilder::new().delivery_rate(5_000_000);
        let limited = [b.clone().app_limited(true).build(1)];
        let free = [b.app_limited(false).build(1)];
        let flow = |s: &[Socket; 1], snap: &Snapshot| {
            let f = Flow {
                before: &s[0],
                after: &s[0],
                snap,
                dt: 1.0,
            };
            bandwidth_for(&f, &ctx())
        };
        let snap = Snapshot::default();
        assert_eq!(flow(&limited, &snap), None);
        assert_eq!(flow(&free, &snap), Some((5_000_000.0, "delivery-rate")));
        let mut c = ctx();
        c.bandwidth = Some(1.0);
        let f = Flow {
            before: &free[0],
            after: &free[0],
            snap: &snap,
            dt: 1.0,
        };
        assert_eq!(bandwidth_for(&f, &c), Some((1.0, "operator")));
    }

    /// The class of `diagnose_live::loopback_negative_cases`' failure: whatever the two srtt
    /// samples, the min RTT and the goodput, no finding of a rule that states a ceiling (R1,
    /// R2 and R2a, R4) puts it below the rate it measured or says a flow ran above 100% of it.
    /// Flows on network paths and on loopback, with srtt samples from the min RTT to 8 × it in
    /// either order, carrying 0.3-3 limits per min RTT.
    #[test]
    fn no_finding_states_a_ceiling_below_its_goodput() {
        let mut cases = 0;
        let mut seen = std::collections::HashSet::new();
        for min in [3u32, 300, 20_000, 50_000] {
            for (m0, m1) in [(1, 1), (1, 3), (3, 1), (8, 2), (2, 8), (5, 5)] {
                for per_min_rtt in [0.3, 0.6, 0.9, 1.2, 2.0, 3.0] {
                    for flows in limited_flows(min, min * m0, min * m1, per_min_rtt) {
                        cases += 1;
                        for ctx in [
                            ctx(),
                            Context {
                                bandwidth: Some(1e10),
                                ..ctx()
                            },
                        ] {
                            for f in evaluate(
                                &sample(vec![flows.0.clone()]),
                                &sample(vec![flows.1.clone()]),
                                &ctx,
                            ) {
                                let Some(c) = f.evidence.get("ceiling_bytes_per_sec") else {
                                    continue;
                                };
                                let c = c.as_f64().unwrap();
                                let g = ev(&f, "goodput_bytes_per_sec");
                                assert!(c + 1.0 >= g, "ceiling {c} < goodput {g}: {f:#?}");
                                assert!(ev(&f, "ceiling_match") <= 1.0, "{f:#?}");
                                for pct in f.summary.split('%').rev().skip(1) {
                                    let n: String = pct
                                        .chars()
                                        .rev()
                                        .take_while(char::is_ascii_digit)
                                        .collect();
                                    let n: u32 =
                                        n.chars().rev().collect::<String>().parse().unwrap_or(0);
                                    assert!(n <= 100, "{}", f.summary);
                                }
                                let uncertain =
                                    f.evidence.get("ceiling_uncertain") == Some(&Value::from(true));
                                assert_eq!(
                                    f.summary.contains("uncertain"),
                                    uncertain,
                                    "{}",
                                    f.summary
                                );
                                seen.insert((f.rule.unwrap(), uncertain));
                            }
                        }
                    }
                }
            }
        }
        // Not vacuous: every rule found some, with a certain and with an uncertain ceiling.
        assert_eq!(cases, 576);
        for rule in [
            RuleId::ReceiveWindowLimited,
            RuleId::WindowScalingMissing,
            RuleId::SendBufferLimited,
            RuleId::ReceiveBufferLocked,
        ] {
            for uncertain in [false, true] {
                assert!(
                    seen.contains(&(rule, uncertain)),
                    "{rule:?} {uncertain}: {seen:?}"
                );
            }
        }
    }

    /// One flow per ceiling rule, each bound by its limit (64 KiB-ish: an 8 KiB window, a
    /// 65535-byte unscaled window, a 32 KiB send buffer, an 8 KiB receive window) with min RTT
    /// `min`, srtt samples `s0` and `s1` µs, carrying `per_min_rtt` limits per min RTT.
    fn limited_flows(min: u32, s0: u32, s1: u32, per_min_rtt: f64) -> Vec<(Socket, Socket)> {
        let acked = |limit: f64| (per_min_rtt * limit / (f64::from(min) / 1e6)) as u64;
        let window = |b: TcpBuilder, wnd: u32| {
            let b = b
                .min_rtt(min)
                .cwnd(200)
                .unacked(wnd.div_ceil(1448))
                .snd_wnd(wnd);
            (
                b.clone().rtt(s0, s0 / 4).chrono(0, 0, 0).build(1),
                b.rtt(s1, s1 / 4)
                    .bytes_acked(acked(f64::from(wnd)))
                    .chrono(1_000_000, 600_000, 0)
                    .build(1),
            )
        };
        let sndbuf = {
            let b = TcpBuilder::new()
                .sndbuf(65536)
                .min_rtt(min)
                .cwnd(200)
                .unacked(10)
                .snd_wnd(4_000_000)
                .queued(60_000);
            (
                b.clone().rtt(s0, s0 / 4).chrono(0, 0, 0).build(1),
                b.rtt(s1, s1 / 4)
                    .bytes_acked(acked(65536.0))
                    .chrono(1_000_000, 0, 400_000)
                    .build(1),
            )
        };
        let receiver = {
            let b = TcpBuilder::new()
                .with_wscale(10, 0)
                .rcvbuf(16384, 0)
                .rcv_wnd(8192)
                .rcv_space(14480)
                .min_rtt(min);
            (
                b.clone().rcv_rtt(s0).build(1),
                b.rcv_rtt(s1).bytes_received(acked(8192.0)).build(1),
            )
        };
        vec![
            window(TcpBuilder::new().with_wscale(0, 10), 8192),
            window(
                TcpBuilder::new().options(opt::TIMESTAMPS | opt::SACK),
                65535,
            ),
            sndbuf,
            receiver,
        ]
    }

    #[test]
    fn ceiling_threshold_is_strict() {
        let c = ctx();
        assert!(!ceiling_matters(UNKNOWN_BANDWIDTH_CEILING, &c));
        assert!(ceiling_matters(UNKNOWN_BANDWIDTH_CEILING - 1.0, &c));
        let mut c = ctx();
        c.bandwidth = Some(1000.0);
        assert!(!ceiling_matters(1000.0, &c));
        assert!(ceiling_matters(999.0, &c));
    }
}
