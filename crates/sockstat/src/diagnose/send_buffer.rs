//! R1, `send-buffer-limited`: the send buffer caps throughput.
//!
//! Case: doc/reference/cases.md#send-buffer (SO_SNDBUF 16 KiB at 20 ms; a 32 KiB
//! proxy buffer at 150 ms), reproduced alone and sharing a bottleneck with bulk flows by the
//! diagnosis matrix (doc/reference/calibration.md#r1-send-buffer, the table in doc/diagnose.md).
//!
//! A flow is bound by its send buffer when it is busy all the time, its writer waits on the
//! buffer, and it moves about a buffer's worth of data per round trip **at the RTT it actually
//! sees** (srtt, queueing delay included: behind a shared queue that is 2-5 × `min_rtt`). What
//! says the writer waits:
//!
//! - the kernel's `sndbuf_limited` chronograph, which BBR flows accumulate (26-46% of busy time)
//!   but which stays 0 for cubic and reno in slow start: `tcp_cwnd_validate` starts it only when
//!   the socket is not cwnd-limited, and in slow start `tcp_is_cwnd_limited` holds while cwnd is
//!   below twice the packets out, where a loss-free buffer-bound flow keeps it;
//! - or the send queue (`skmem w`) at half the buffer or more in both samples (a blocked writer
//!   is woken only when the queue has drained to 2/3 of `tb`).
//!
//! The congestion window is not a test: in congestion avoidance cubic grows cwnd only while it
//! is full, so a buffer-bound flow's cwnd sits at its flight.
//!
//! **Escape.** `tcp_sendmsg` checks the buffer only before it allocates a new skb; it appends to
//! the unsent tail skb without checking. With Nagle on, writes that are not whole segments, and
//! no pacing (cubic, reno), the tail always keeps an unsent piece that transmission splits off,
//! so the writer appends without ever blocking while the congestion window has room: the send
//! queue grows to a whole cwnd, far past `tb`, then drains before the writer may add more. Such
//! a flow is still held back by its buffer (cubic at 150 ms with SO_SNDBUF 32 KiB: 2.0 MB/s, 6.0
//! with autotuning), but `tb` / RTT says nothing about its rate: the finding says so.
//!
//! Also the host finding "the send-side sysctls are below a busy flow's BDP" (socket null).

use super::*;

/// Share of busy time in `sndbuf_limited` that by itself shows the writer waits on the buffer
/// (buffer-bound BBR flows showed 26-46% in the matrix; the chronograph under-counts).
pub const SNDBUF_SHARE: f64 = 0.20;
/// Above this share of `rwnd_limited` the peer's window is the suspect instead (R2).
pub const RWND_SHARE_MAX: f64 = 0.20;
/// A flight at this share of the peer's window in either sample: the window binds (R2).
pub const WINDOW_FULL: f64 = 0.8;
/// The send queue at this share of `tb` or more in both samples: the writer waits on the buffer.
/// A blocked writer is woken when the queue drains to 2/3 of `tb` (`sk_stream_write_space`);
/// the lowest sample of a buffer-bound flow in the matrix was 0.58.
pub const QUEUE_FULL: f64 = 0.5;
/// The payload a send buffer carries per round trip, as a share of `tb`: the ceiling is
/// `SNDBUF_PAYLOAD × tb / srtt`. Buffer-bound flows moved 0.62-1.28 × `tb` per srtt in the
/// matrix (more with buffers far below 64 KiB, which a whole 64 KiB skb can overshoot).
pub const SNDBUF_PAYLOAD: f64 = 1.0;
/// Above this many bytes past `tb` (two full 64 KiB skbs) the queue escaped the buffer: the
/// kernel never lets a blocking writer overshoot by more than one skb.
pub const ESCAPE_MARGIN: u64 = 128 * 1024;
/// The flight must fill this share of cwnd in both samples for the congestion window to count
/// as full too (a reason for lower confidence, not a veto).
pub const CWND_FULL: f64 = 0.9;
/// `tb` needed per byte of BDP (1 / [`SNDBUF_PAYLOAD`], rounded up: the payload share is as low
/// as 0.62).
pub const SNDBUF_PER_BDP: f64 = 1.33;
/// `tb` at or above this share of `tcp_wmem[2]` means autotuning reached the sysctl's max.
pub const SYSCTL_MAX_SHARE: f64 = 0.95;
/// The tiniest SO_SNDBUF result (`SOCK_MIN_SNDBUF`, 2 × (2048 + sizeof(sk_buff)) on x86-64).
pub const SOCK_MIN_SNDBUF: u64 = 4608;

/// The send buffer every unlocked ESTABLISHED socket is expanded to at least
/// (`tcp_sndbuf_expand`, net/ipv4/tcp_input.c): 2 (3 for BBR) × max(10, cwnd) segments of
/// `roundup_pow_of_two(mss + MAX_TCP_HEADER + shinfo) + sizeof(sk_buff)` bytes, capped by
/// `tcp_wmem[2]`. Uses factor 2 and 10 segments: the smallest the kernel could have picked.
/// Measured 69120 for MSS 1448 with BBR (doc/reference/linux.md#lock-heuristics); this returns 46080.
pub fn autotune_floor(mss: u32, tcp_wmem_max: Option<u64>) -> u64 {
    // MAX_TCP_HEADER (256 with L1 alignment) + SKB_DATA_ALIGN(skb_shared_info) (320).
    let floor = 2 * 10 * per_segment_truesize(mss);
    tcp_wmem_max.map_or(floor, |m| floor.min(m))
}

/// Why the buffer is small, and how sure we are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// SO_SNDBUF set by the application (`exact`: read with SO_BUF_LOCK).
    SetByApp { exact: bool },
    /// The application asked for more than `net.core.wmem_max` allows.
    ClampedByWmemMax,
    /// Autotuning reached `net.ipv4.tcp_wmem[2]`.
    TcpWmemMax,
    /// TCP memory pressure stops autotuning.
    MemoryPressure,
    /// None of the above could be shown.
    Unknown,
}

impl Cause {
    fn id(self) -> &'static str {
        match self {
            Cause::SetByApp { .. } => "set-by-application",
            Cause::ClampedByWmemMax => "clamped-by-wmem-max",
            Cause::TcpWmemMax => "tcp-wmem-max",
            Cause::MemoryPressure => "memory-pressure",
            Cause::Unknown => "unknown",
        }
    }
}

fn under_pressure(input: &Input<'_>) -> bool {
    let s = &input.ctx.sysctls;
    let pages = input.after.tcp_mem_pages;
    let by_pages = matches!((pages, s.tcp_mem), (Some(p), Some(m)) if p >= m[1]);
    by_pages
        || input
            .counter_delta("TcpExt", "TCPMemoryPressures")
            .is_some_and(|d| d > 0)
}

fn cause(flow: &Flow<'_>, tb: u64, input: &Input<'_>) -> Cause {
    let s = &input.ctx.sysctls;
    if let Some(l) = flow.after.cookie.and_then(|c| input.ctx.buf_locks.get(&c)) {
        if l.sndbuf {
            if s.wmem_max.is_some_and(|m| tb == 2 * m) {
                return Cause::ClampedByWmemMax;
            }
            return Cause::SetByApp { exact: true };
        }
        // Exactly known not to be locked: fall through to the unlocked causes.
    } else {
        if s.wmem_max.is_some_and(|m| tb == 2 * m) {
            return Cause::ClampedByWmemMax;
        }
        let mss = flow.info().and_then(TcpInfo::snd_mss).unwrap_or(1448);
        let floor = autotune_floor(mss, s.tcp_wmem.map(|w| w[2]));
        // A buffer below what the kernel gives every unlocked socket, or constant at a value
        // SO_SNDBUF would produce (2N) while limited, was set by the application (doc/reference/linux.md#lock-heuristics).
        if tb < floor || tb == SOCK_MIN_SNDBUF {
            return Cause::SetByApp { exact: false };
        }
    }
    if s.tcp_wmem
        .is_some_and(|w| tb as f64 >= SYSCTL_MAX_SHARE * w[2] as f64)
    {
        return Cause::TcpWmemMax;
    }
    if under_pressure(input) {
        return Cause::MemoryPressure;
    }
    // Autotuning only ever sets a whole number of segments' truesize (or a tcp_wmem value);
    // a buffer that is not, and did not change over the interval, came from SO_SNDBUF.
    let exact_known = flow
        .after
        .cookie
        .and_then(|c| input.ctx.buf_locks.get(&c))
        .is_some();
    let mss = flow.info().and_then(TcpInfo::snd_mss).unwrap_or(1448);
    let tb0 = flow
        .before
        .memory
        .as_deref()
        .map(|m| u64::from(m.sndbuf_bytes));
    if !exact_known && tb0 == Some(tb) && !autotuned_size(tb, mss, s.tcp_wmem) {
        return Cause::SetByApp { exact: false };
    }
    Cause::Unknown
}

/// The truesize the kernel charges per segment when it sizes a send buffer
/// (`tcp_sndbuf_expand`): `roundup_pow_of_two(mss + MAX_TCP_HEADER + shinfo)` plus the
/// `sk_buff` itself (2304 bytes for an MSS of 1448).
pub fn per_segment_truesize(mss: u32) -> u64 {
    (u64::from(mss) + 576).next_power_of_two() + 256
}

/// True when `tb` is a size autotuning could have given: a whole number of segments'
/// truesize (`tcp_sndbuf_expand` sets `per_mss × factor × max(10, cwnd)`), or one of
/// `tcp_wmem`'s values (the initial buffer, the cap).
pub fn autotuned_size(tb: u64, mss: u32, tcp_wmem: Option<[u64; 3]>) -> bool {
    tb % per_segment_truesize(mss) == 0 || tcp_wmem.is_some_and(|w| tb == w[1] || tb == w[2])
}

/// Runs R1 over every flow, then the host check.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let mut out: Vec<Finding> = input
        .moving()
        .filter_map(|f| flow_check(f, input))
        .collect();
    let sysctl_reported = out
        .iter()
        .any(|f| f.evidence.get("cause").and_then(Value::as_str) == Some(Cause::TcpWmemMax.id()));
    if !sysctl_reported {
        out.extend(host_check(input));
    }
    out
}

fn flow_check(flow: &Flow<'_>, input: &Input<'_>) -> Option<Finding> {
    let m = measure(flow, input)?;
    let (level, why) = verdict(flow, &m, input)?;
    let ctx = input.ctx;
    let bw = if m.escaped {
        bandwidth_for(flow, ctx)
    } else {
        bandwidth_beyond(flow, ctx, &m.ceiling)
    };
    let bdp = bw.map(|(b, _)| b * f64::from(m.min_us) / 1e6);
    let (summary, advice) = words(flow, &m, bw, bdp, ctx);
    Some(Finding {
        zone: None,
        rule: Some(RuleId::SendBufferLimited),
        code: RuleId::SendBufferLimited.id(),
        subject: Subject::Namespace,
        severity: if m.escaped {
            Severity::Warning
        } else {
            cap_severity(m.ceiling.bytes_per_sec(), m.min_us, ctx)
        },
        socket: Some(flow.socket_ref()),
        summary,
        evidence: evidence(flow, &m, bw, bdp, ctx),
        advice,
        count: Some(1),
        confidence: Confidence::new(level, why),
    })
}

/// What R1 reads of a busy flow that its peer's window does not bind: its buffer, queue,
/// round trips, goodput, why the buffer is that size, and the ceiling the buffer sets.
struct Measured {
    busy: f64,
    rwnd_share: f64,
    /// Its send queue escaped the buffer ([`escaped`]).
    escaped: bool,
    tb: u64,
    q0: u64,
    q1: u64,
    r_us: u32,
    min_us: u32,
    goodput: f64,
    per_rtt: f64,
    queue_max: u64,
    sndbuf_share: f64,
    cause: Cause,
    ceiling: Ceiling,
}

/// The flow's numbers, or `None` when R1 does not apply: not established, idle or paced by the
/// application, a zero window (R3), or the peer's window binding (R2).
fn measure(flow: &Flow<'_>, input: &Input<'_>) -> Option<Measured> {
    let i = flow.info()?;
    if !matches!(flow.after.state, State::Established | State::CloseWait) {
        return None;
    }
    // Busy for most of the interval ([`ACTIVE_BUSY_SHARE`]). Not more: on a loaded host the
    // two dumps' timestamps drift from the kernel's counters by a few hundred ms. An
    // application-paced flow can be busy as much (0.50-0.66 in the matrix); the queue and the
    // ceiling tests below keep it out (its queue was at half the buffer in both samples in one
    // run of six, and it moved 0.2-0.26 buffers per round trip).
    let busy = flow.busy_share()?;
    if busy < ACTIVE_BUSY_SHARE || i.snd_wnd()? == 0 {
        return None; // idle or paced by the application; a zero window is R3
    }
    let rwnd_share = flow.rwnd_share().unwrap_or(0.0);
    let escaped = escaped(flow);
    if rwnd_share >= RWND_SHARE_MAX || (!escaped && flow.window_full_in_either(WINDOW_FULL)) {
        return None; // the peer's window binds: R2
    }
    let tb = flow.sndbuf()?;
    let (q0, q1) = flow.queued()?;
    let r_us = flow.rtt_seen_us()?;
    let min_us = flow.min_rtt_us().unwrap_or(r_us);
    let goodput = flow.goodput()?;
    let per_rtt = goodput * f64::from(r_us) / 1e6;
    let queue_max = q0.max(q1);
    let sndbuf_share = flow.sndbuf_share().unwrap_or(0.0);
    let cause = cause(flow, tb, input);
    // At most `tb` and the skb a writer may overshoot it by ([`ESCAPE_MARGIN`] is two) per
    // round trip.
    let c = Ceiling::new(
        SNDBUF_PAYLOAD * tb as f64,
        (tb + ESCAPE_MARGIN) as f64,
        r_us,
        min_us,
        goodput,
    );
    Some(Measured {
        busy,
        rwnd_share,
        escaped,
        tb,
        q0,
        q1,
        r_us,
        min_us,
        goodput,
        per_rtt,
        queue_max,
        sndbuf_share,
        cause,
        ceiling: c,
    })
}

/// How sure R1 is that the send buffer limits the flow, and why; `None` when it does not.
fn verdict(flow: &Flow<'_>, m: &Measured, input: &Input<'_>) -> Option<(Certainty, Vec<String>)> {
    let ctx = input.ctx;
    let Measured {
        busy,
        escaped,
        tb,
        q0,
        q1,
        r_us,
        min_us,
        goodput,
        per_rtt,
        queue_max,
        sndbuf_share,
        cause,
        ceiling: ref c,
        ..
    } = *m;
    let mut why = vec![];
    let level = if escaped {
        // Only a buffer the application fixed escapes: autotuning would have grown it.
        if !matches!(cause, Cause::SetByApp { .. } | Cause::ClampedByWmemMax) {
            return None;
        }
        // An escaped flow runs at its ceiling by construction (what it moves per round trip
        // is its limit), so the ceiling test is the rate itself: one of gigabytes per second,
        // a small buffer at loopback RTT, barely hurts (the seed's negative case; a loopback
        // flow on a loaded CI machine escaped a 32 KiB buffer at 4.6 GB/s). Nor does a buffer
        // that carries the bandwidth at the path's min RTT: an escaped flow moves more than
        // it, so a slow rate is the queue's (on a loaded host, the CPUs' run queue).
        if !ceiling_matters(goodput, ctx) || !ceiling_matters(c.on_idle_path(), ctx) {
            return None;
        }
        why.push(format!(
            "its send queue reached {} with a {} buffer: with Nagle on and no pacing the kernel \
             lets writes append past SO_SNDBUF while the congestion window has room, then the \
             writer waits until the queue drains below the buffer",
            fmt::bytes(queue_max.max(per_rtt as u64) as f64),
            fmt::bytes(tb as f64)
        ));
        why.push(format!(
            "busy {:.0}% of the interval: the application always had data for it",
            busy * 100.0
        ));
        Certainty::Medium
    } else {
        let queue_full = q0 as f64 >= QUEUE_FULL * tb as f64 && q1 as f64 >= QUEUE_FULL * tb as f64;
        let chrono = sndbuf_share >= SNDBUF_SHARE;
        if !(queue_full || chrono) {
            return None;
        }
        if !c.binds(CEILING_MATCH, ctx) {
            return None;
        }
        if chrono {
            why.push(format!(
                "the kernel counted {:.0}% of its busy time as limited by the send buffer",
                sndbuf_share * 100.0
            ));
        }
        if queue_full {
            why.push(format!(
                "its send queue held {} and {} of a {} buffer at the two samples: the writer \
                 waits for room",
                fmt::bytes(q0 as f64),
                fmt::bytes(q1 as f64),
                fmt::bytes(tb as f64)
            ));
        }
        why.push(format!(
            "it moved {} per round trip of {} (srtt{}), {:.2} × the buffer",
            fmt::bytes(per_rtt),
            fmt::duration_us(r_us),
            if r_us > min_us + min_us / 5 {
                format!(
                    ", against a min RTT of {}: queueing on the path",
                    fmt::duration_us(min_us)
                )
            } else {
                String::new()
            },
            per_rtt / tb as f64
        ));
        why.extend(c.uncertain_reason("buffer"));
        let cwnd_full = flow.cwnd_full_in_both(CWND_FULL);
        if cwnd_full {
            why.push(
                "its congestion window was full in both samples too: congestion control may \
                 limit it as much"
                    .into(),
            );
        }
        if cwnd_full || goodput < CONFIDENT_MATCH * c.at_rtt_seen() {
            Certainty::Medium
        } else {
            Certainty::High
        }
    };
    if !escaped && sndbuf_share == 0.0 {
        why.push(
            "the kernel's sndbuf_limited chronograph stayed at 0, as it does for cubic and reno \
             in slow start (doc/reference/calibration.md#r1-send-buffer)"
                .into(),
        );
    }
    Some((level, why))
}

/// The numbers behind R1's finding.
fn evidence(
    flow: &Flow<'_>,
    m: &Measured,
    bw: Option<(f64, &'static str)>,
    bdp: Option<f64>,
    ctx: &Context,
) -> Evidence {
    let i = flow.info();
    let Measured {
        busy,
        rwnd_share,
        escaped,
        tb,
        q1,
        r_us,
        goodput,
        per_rtt,
        queue_max,
        sndbuf_share,
        cause,
        ceiling: ref c,
        ..
    } = *m;
    let advised = bdp.map(round_up_kib);
    let s = &ctx.sysctls;
    let mut ev = Evidence::default();
    flow.common_evidence(&mut ev);
    ev.int("rtt_seen_us", u64::from(r_us))
        .int("sndbuf_bytes", tb);
    if matches!(cause, Cause::SetByApp { .. } | Cause::ClampedByWmemMax) {
        ev.int("so_sndbuf_bytes", tb / 2);
    }
    ev.int("send_queue_bytes", q1)
        .int("send_queue_max_bytes", queue_max)
        .num("goodput_bytes_per_sec", goodput)
        .num("bytes_per_rtt", per_rtt);
    if !escaped {
        c.evidence(&mut ev);
    }
    ev.put("escaped_buffer", Some(Value::from(escaped)))
        .num("busy_share", busy)
        .num("sndbuf_limited_share", sndbuf_share)
        .num("rwnd_limited_share", rwnd_share)
        .int("inflight_bytes", flow.inflight())
        .int(
            "cwnd_bytes",
            i.and_then(|i| i.snd_cwnd().zip(i.snd_mss()))
                .map(|(c, m)| u64::from(c) * u64::from(m)),
        )
        .text("cause", cause.id())
        .text(
            "lock",
            match cause {
                Cause::SetByApp { exact: true } => "exact",
                Cause::SetByApp { exact: false } | Cause::ClampedByWmemMax => "inferred",
                _ => "none-seen",
            },
        );
    if let Some((b, src)) = bw {
        ev.num("bandwidth_bytes_per_sec", b)
            .text("bandwidth_source", src);
    }
    ev.num("bdp_bytes", bdp)
        .int("advised_sndbuf_bytes", advised)
        .int("wmem_max_bytes", s.wmem_max)
        .int("tcp_wmem_max_bytes", s.tcp_wmem.map(|w| w[2]));

    ev
}

/// R1's summary and advice.
fn words(
    flow: &Flow<'_>,
    m: &Measured,
    bw: Option<(f64, &'static str)>,
    bdp: Option<f64>,
    ctx: &Context,
) -> (String, String) {
    let Measured {
        escaped,
        tb,
        r_us,
        min_us,
        goodput,
        per_rtt,
        queue_max,
        cause,
        ceiling: ref c,
        ..
    } = *m;
    let advised = bdp.map(round_up_kib);
    let s = &ctx.sysctls;
    let who = flow.owner_text();
    let conn = fmt::connection(flow.after).to_string();
    let rtt_text = if r_us > min_us + min_us / 5 {
        format!(
            "{} (srtt; the path's min RTT is {}, the rest is queueing)",
            fmt::duration_us(r_us),
            fmt::duration_us(min_us)
        )
    } else {
        fmt::duration_us(r_us).to_string()
    };
    let summary = if escaped {
        format!(
            "{conn}{who}: sending at {}, held back by its {} send buffer (SO_SNDBUF {}): its \
             send queue overshoots the buffer up to {} and then drains before the application \
             may write again, round trip {rtt_text}",
            fmt::rate(goodput),
            fmt::bytes(tb as f64),
            tb / 2,
            fmt::bytes(queue_max.max(per_rtt as u64) as f64),
        )
    } else {
        format!(
            "{conn}{who}: sending at {}, {}: {}{}",
            fmt::rate(goodput),
            c.share_text("its send buffer"),
            c.per_round_trip_text(&format!("tb = {}", fmt::bytes(tb as f64)), &rtt_text),
            match bw {
                Some((b, "operator")) => format!(" on a {} path", fmt::rate(b)),
                _ => String::new(),
            }
        )
    };
    let need = match (advised, bw) {
        (Some(a), Some((b, _))) => format!(
            "To fill {} the socket needs SO_SNDBUF >= bandwidth x min RTT = {} bytes ({}).",
            fmt::rate(b),
            a,
            fmt::bytes(a as f64)
        ),
        _ => "Give the path's bandwidth with --bandwidth to get the size it needs \
              (SO_SNDBUF >= bandwidth x min RTT); until then, each doubling of the buffer about \
              doubles the ceiling."
            .to_string(),
    };
    let wmem_hint = match (advised, s.wmem_max) {
        (Some(a), Some(m)) if a > m => format!(
            " If you keep the setsockopt, raise net.core.wmem_max to at least {a} \
             (sysctl -w net.core.wmem_max={a}): it caps every SO_SNDBUF request."
        ),
        _ => String::new(),
    };
    let advice = match cause {
        Cause::SetByApp { exact } => format!(
            "Fix it on this side, in the application{who}: it {} SO_SNDBUF to about {} bytes, \
             which turns send-buffer autotuning off. Remove the setsockopt(SO_SNDBUF) so the \
             kernel can grow the buffer up to net.ipv4.tcp_wmem max ({}), or raise it. {need}{wmem_hint}",
            if exact { "set" } else { "most likely set" },
            tb / 2,
            s.tcp_wmem
                .map_or_else(|| "?".to_string(), |w| fmt::bytes(w[2] as f64).to_string()),
        ),
        Cause::ClampedByWmemMax => {
            let target = advised.unwrap_or(4 * s.wmem_max.unwrap_or(tb / 2));
            format!(
                "The application asked for a larger SO_SNDBUF than net.core.wmem_max = {} \
                 allows, so it got 2 x wmem_max. Raise it on this host: sysctl -w \
                 net.core.wmem_max={target}, or remove the setsockopt so autotuning applies. {need}",
                s.wmem_max.unwrap_or(0)
            )
        }
        Cause::TcpWmemMax => {
            let target = bdp.map_or(2 * tb, |b| round_up_kib(SNDBUF_PER_BDP * b));
            format!(
                "Autotuning reached the maximum of net.ipv4.tcp_wmem on this host. Raise it: \
                 sysctl -w net.ipv4.tcp_wmem=\"{} {} {target}\". {need}",
                s.tcp_wmem.map_or(4096, |w| w[0]),
                s.tcp_wmem.map_or(16384, |w| w[1]),
            )
        }
        Cause::MemoryPressure => format!(
            "TCP is under memory pressure on this host (see memory-pressure), and the kernel \
             does not grow send buffers then. Raise net.ipv4.tcp_mem or find the sockets that \
             hold memory. {need}"
        ),
        Cause::Unknown => format!(
            "The send buffer does not grow; check whether the application{who} sets SO_SNDBUF \
             (run as root with --exact-locks for an exact answer). {need}"
        ),
    };
    (summary, advice)
}

/// True when the flow's send queue escaped its send buffer: more than [`ESCAPE_MARGIN`] past
/// `tb` in a sample, or more than that moved per round trip. Such a sender fills any window in
/// bursts (so R2 leaves it to R1).
pub(crate) fn escaped(flow: &Flow<'_>) -> bool {
    let (Some(tb), Some(g), Some(r)) = (flow.sndbuf(), flow.goodput(), flow.rtt_seen_us()) else {
        return false;
    };
    flow.send_queue_escaped(ESCAPE_MARGIN) || g * f64::from(r) / 1e6 > (tb + ESCAPE_MARGIN) as f64
}

/// A busy flow whose BDP needs more send buffer than the host's sysctls allow (doc/reference/linux.md#sysctls).
fn host_check(input: &Input<'_>) -> Vec<Finding> {
    let s = &input.ctx.sysctls;
    let Some(busiest) = busiest_bdp(input) else {
        return vec![];
    };
    let (flow, bw, bdp) = busiest;
    let mut out = vec![];
    let conn = fmt::connection(flow.after).to_string();
    if let Some(w) = s.tcp_wmem {
        let need = SNDBUF_PER_BDP * bdp;
        if (w[2] as f64) < need {
            let target = round_up_kib(need);
            let mut ev = Evidence::default();
            ev.int("tcp_wmem_max_bytes", w[2])
                .num("bdp_bytes", bdp)
                .num("bandwidth_bytes_per_sec", bw)
                .int("min_rtt_us", flow.min_rtt_us().map(u64::from))
                .text("flow", conn.clone())
                .int("advised_tcp_wmem_max_bytes", target);
            out.push(Finding {
                zone: None,
                rule: Some(RuleId::SendBufferLimited),
                code: RuleId::SendBufferLimited.id(),
                subject: Subject::Namespace,
                severity: Severity::Warning,
                socket: None,
                summary: format!(
                    "net.ipv4.tcp_wmem max = {} caps every autotuned send buffer below what the \
                     busy flow {conn} needs (1.33 x BDP = {})",
                    fmt::bytes(w[2] as f64),
                    fmt::bytes(need)
                ),
                evidence: ev,
                advice: format!("sysctl -w net.ipv4.tcp_wmem=\"{} {} {target}\"", w[0], w[1]),
                count: None,
                confidence: Confidence::counted(
                    "net.ipv4.tcp_wmem is read; the BDP is the bandwidth times the flow's min RTT",
                ),
            });
        }
    }
    if let Some(m) = s.wmem_max {
        out.extend(core_mem_max_finding(
            RuleId::SendBufferLimited,
            Direction::Send,
            m,
            bdp,
            bw,
            &conn,
        ));
    }
    out
}

/// The active flow with the largest BDP that can be computed: (flow, bandwidth, BDP).
pub(crate) fn busiest_bdp<'a>(input: &Input<'a>) -> Option<(Flow<'a>, f64, f64)> {
    input
        .flows()
        .iter()
        .filter(|f| f.active())
        .filter_map(|f| {
            let (b, _) = bandwidth_for(f, input.ctx)?;
            let r = f64::from(f.min_rtt_us()?) / 1e6;
            Some((*f, b, b * r))
        })
        .max_by(|a, b| a.2.total_cmp(&b.2))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    /// Experiment B: SO_SNDBUF 16 KiB at 20 ms, 1.36 MB/s over the second, the send queue at
    /// 28 and 30 KB of the 32 KiB buffer.
    fn case_b(sndbuf_us: u64, acked: u64) -> (Socket, Socket) {
        let base = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_300)
            .rtt(21_000, 2_000)
            .cwnd(100)
            .unacked(20)
            .snd_wnd(253_000)
            .app_limited(true);
        let s0 = base
            .clone()
            .queued(28_000)
            .chrono(5_000_000, 0, 1_000_000)
            .build(7);
        let s1 = base
            .bytes_acked(acked)
            .queued(30_000)
            .chrono(6_000_000, 0, 1_000_000 + sndbuf_us)
            .build(7);
        (s0, s1)
    }

    fn sndbuf_findings(s0: Socket, s1: Socket, c: &Context) -> Vec<Finding> {
        only(run(vec![s0], vec![s1], c), RuleId::SendBufferLimited)
    }

    #[test]
    fn experiment_b_fires_with_the_ceiling_and_the_fix() {
        let (s0, s1) = case_b(400_000, 1_360_000);
        let f = sndbuf_findings(s0, s1, &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        // A 1.56 MB/s ceiling: above the 10 Mbit/s critical line when the bandwidth is unknown.
        assert_eq!(f.severity, Severity::Warning);
        let c = ev(f, "ceiling_bytes_per_sec");
        assert!((c - SNDBUF_PAYLOAD * 32768.0 / 0.021).abs() < 2.0, "{c}");
        assert_eq!(ev(f, "rtt_seen_us"), 21_000.0);
        assert_eq!(f.evidence.get("cause").unwrap(), "set-by-application");
        assert_eq!(f.evidence.get("lock").unwrap(), "inferred");
        assert_eq!(ev(f, "so_sndbuf_bytes"), 16384.0);
        assert_eq!(f.count, Some(1));
        // The chronograph, the full queue and the rate all agree.
        assert_eq!(f.confidence.level, Certainty::High);
        assert_eq!(f.confidence.because.len(), 3, "{:?}", f.confidence);
        assert!(
            f.advice.contains("Remove the setsockopt(SO_SNDBUF)"),
            "{}",
            f.advice
        );
        assert!(f.advice.starts_with("Fix it on this side"), "{}", f.advice);
        assert!(f.summary.contains("pid 100 app"), "{}", f.summary);
        assert!(
            f.summary.contains("87% of what its send buffer allows"),
            "{}",
            f.summary
        );
    }

    /// A cubic flow in slow start: the kernel never starts the sndbuf_limited chronograph
    /// (tcp_cwnd_validate counts it cwnd-limited), yet the queue sits at the buffer and the
    /// flow moves a buffer per round trip (matrix `sndbuf-20ms`, cubic: 0.90-0.97 × tb).
    #[test]
    fn cubic_in_slow_start_is_found_without_the_chronograph() {
        let (s0, s1) = case_b(0, 1_360_000);
        let f = sndbuf_findings(s0, s1, &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].confidence.level, Certainty::High);
        assert!(
            f[0].confidence
                .because
                .iter()
                .any(|w| w.contains("chronograph stayed at 0")),
            "{:?}",
            f[0].confidence
        );
        // With neither the chronograph nor a full queue (the writer never waited): nothing.
        let (s0, s1) = case_b(0, 1_360_000);
        let empty = |s: Socket| {
            let mut s = s;
            if let Some(m) = s.memory.as_deref_mut() {
                m.wmem_queued_bytes = 10_000;
            }
            s
        };
        assert!(sndbuf_findings(empty(s0), empty(s1), &ctx()).is_empty());
    }

    /// Matrix `sndbuf-1bulk-deep`: behind a queue shared with a bulk flow the small sender
    /// sees srtt 50 ms against a 20.5 ms min RTT and moves 0.71 MB/s: 1.1 buffers per srtt,
    /// but only 0.45 per min RTT (the old ceiling from min_rtt missed it).
    #[test]
    fn behind_a_shared_queue_the_rtt_seen_is_what_counts() {
        let b = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_500)
            .cwnd(60)
            .unacked(25)
            .snd_wnd(300_000);
        let s0 = b
            .clone()
            .rtt(48_000, 5_000)
            .queued(70_000)
            .chrono(1_000_000, 0, 0)
            .build(7);
        let s1 = b
            .rtt(52_000, 5_000)
            .queued(60_000)
            .bytes_acked(710_000)
            .chrono(2_000_000, 0, 300_000)
            .build(7);
        let f = sndbuf_findings(s0, s1, &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(ev(&f[0], "rtt_seen_us"), 50_000.0);
        assert!(
            f[0].summary.contains("the rest is queueing"),
            "{}",
            f[0].summary
        );
        // The ceiling critical: 655 kB/s at a 20 ms path.
        assert_eq!(f[0].severity, Severity::Critical);
    }

    /// Matrix `paced`: an application writing 16 KiB every 50 ms through a 16 KiB SO_SNDBUF is
    /// busy only 50-66% of the time and moves 0.2 buffers per round trip: not the buffer.
    #[test]
    fn an_application_paced_flow_is_not_limited() {
        let b = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_500)
            .rtt(23_000, 3_000)
            .cwnd(20)
            .unacked(5);
        let s0 = b.clone().queued(21_000).chrono(0, 0, 0).build(1);
        let s1 = b
            .clone()
            .queued(19_000)
            .bytes_acked(330_000)
            .chrono(660_000, 0, 0)
            .build(1);
        assert!(sndbuf_findings(s0.clone(), s1, &ctx()).is_empty());
        // Even fully busy, 0.23 buffers per round trip is the application's pace.
        let s1 = b
            .queued(19_000)
            .bytes_acked(330_000)
            .chrono(1_000_000, 0, 0)
            .build(1);
        assert!(sndbuf_findings(s0, s1, &ctx()).is_empty());
    }

    #[test]
    fn busy_boundary() {
        // Busy 0.5 s of 1 s fires; 0.499 s does not.
        let base = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_300)
            .rtt(21_000, 1_000)
            .cwnd(100)
            .unacked(20)
            .snd_wnd(300_000)
            .queued(30_000);
        let s0 = base.clone().chrono(0, 0, 0).build(1);
        let s1 = base
            .clone()
            .bytes_acked(1_300_000)
            .chrono(500_000, 0, 200_000)
            .build(1);
        assert_eq!(sndbuf_findings(s0.clone(), s1, &ctx()).len(), 1);
        let s1 = base
            .bytes_acked(1_300_000)
            .chrono(499_000, 0, 200_000)
            .build(1);
        assert!(sndbuf_findings(s0, s1, &ctx()).is_empty());
    }

    #[test]
    fn a_measured_rate_below_the_ceiling_sizes_nothing() {
        // Experiment B with a non-app-limited delivery rate sample of 1.1 MB/s (taken while the
        // buffer limited the flow): no BDP advice from it; 5 MB/s would be used.
        let (s0, s1) = case_b(400_000, 1_360_000);
        for (rate, advised) in [(1_100_000u64, false), (5_000_000, true)] {
            let mut s1 = s1.clone();
            let t = TcpBuilder::new()
                .sndbuf(32768)
                .min_rtt(20_300)
                .rtt(21_000, 2_000)
                .cwnd(100)
                .unacked(20)
                .snd_wnd(253_000)
                .app_limited(false)
                .delivery_rate(rate)
                .bytes_acked(1_360_000)
                .chrono(6_000_000, 0, 1_400_000);
            s1.tcp = t.build(7).tcp;
            let f = sndbuf_findings(s0.clone(), s1, &ctx());
            assert_eq!(f.len(), 1, "{f:#?}");
            assert_eq!(
                f[0].evidence.get("advised_sndbuf_bytes").is_some(),
                advised,
                "{rate}"
            );
        }
    }

    #[test]
    fn share_boundary_is_inclusive() {
        // With the queue below half the buffer, the chronograph alone says the writer waits:
        // exactly 20% fires, just under does not.
        let low = |s: Socket| {
            let mut s = s;
            if let Some(m) = s.memory.as_deref_mut() {
                m.wmem_queued_bytes = 10_000;
            }
            s
        };
        let (s0, s1) = case_b(200_000, 1_360_000);
        assert_eq!(sndbuf_findings(low(s0), low(s1), &ctx()).len(), 1);
        let (s0, s1) = case_b(199_999, 1_360_000);
        assert!(sndbuf_findings(low(s0), low(s1), &ctx()).is_empty());
    }

    #[test]
    fn a_full_buffer_alone_is_not_enough() {
        // Goodput below half the ceiling: the buffer is full but something else limits the
        // rate (a bulk sender with a large buffer keeps it full too).
        let ceiling = SNDBUF_PAYLOAD * 32768.0 / 0.021;
        let at = (CEILING_MATCH * ceiling).ceil() as u64;
        let (s0, s1) = case_b(400_000, at);
        assert_eq!(sndbuf_findings(s0, s1, &ctx()).len(), 1);
        let (s0, s1) = case_b(400_000, at - 2);
        assert!(sndbuf_findings(s0, s1, &ctx()).is_empty());
    }

    /// Matrix `bulk` (BBR): autotuned 2.1 MB buffer kept full by a bulk writer, 6 MB/s at a
    /// 40 ms srtt: 0.11 buffers per round trip. Healthy.
    #[test]
    fn a_large_autotuned_buffer_kept_full_is_healthy() {
        let b = TcpBuilder::new()
            .sndbuf(2_101_248)
            .min_rtt(20_500)
            .rtt(40_000, 2_000)
            .cwnd(300)
            .unacked(150);
        let s0 = b.clone().queued(1_600_000).chrono(0, 0, 0).build(1);
        let s1 = b
            .queued(2_000_000)
            .bytes_acked(6_040_000)
            .chrono(1_000_000, 0, 0)
            .build(1);
        assert!(sndbuf_findings(s0, s1, &ctx()).is_empty());
    }

    /// Matrix `sndbuf-nagle-20ms`, cubic: with Nagle on, the send queue went to 16 × the 32 KiB
    /// buffer (the kernel appends to the unsent tail skb without checking the buffer) and the
    /// flow moved 4.9 MB/s, far more than tb / RTT; the buffer still costs it.
    #[test]
    fn a_queue_that_escaped_the_buffer_is_named_without_a_ceiling() {
        let b = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_500)
            .cwnd(350)
            .unacked(300)
            .snd_wnd(650_000);
        let s0 = b
            .clone()
            .rtt(66_000, 10_000)
            .queued(280_000)
            .chrono(1_000_000, 0, 0)
            .build(7);
        let s1 = b
            .rtt(66_000, 10_000)
            .queued(546_000)
            .bytes_acked(4_920_000)
            .chrono(2_000_000, 0, 0)
            .build(7);
        let all = run(vec![s0], vec![s1], &ctx());
        let f = only(all.clone(), RuleId::SendBufferLimited);
        assert_eq!(f.len(), 1, "{all:#?}");
        assert_eq!(
            f[0].evidence.get("escaped_buffer"),
            Some(&Value::from(true))
        );
        assert!(f[0].evidence.get("ceiling_bytes_per_sec").is_none());
        assert_eq!(f[0].confidence.level, Certainty::Medium);
        assert_eq!(f[0].severity, Severity::Warning);
        // The flight fills the peer's window in bursts: still the buffer's finding, not R2's.
        assert!(only(all, RuleId::ReceiveWindowLimited).is_empty());
    }

    /// The seed's negative case on a loaded machine (a CI run): 16 KiB SO_SNDBUF over
    /// loopback, srtt 40-76 µs against a min RTT of 1 µs, 179 KiB moved per round trip, so the
    /// queue "escaped" the buffer, at 4.57 GB/s: no finding, as for the same flow unescaped.
    #[test]
    fn an_escaped_buffer_at_loopback_speed_is_not_a_finding() {
        let b = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(1)
            .cwnd(17)
            .unacked(0)
            .snd_wnd(650_000);
        let s0 = b
            .clone()
            .rtt(4, 2)
            .queued(34_432)
            .chrono(1_000_000, 0, 0)
            .build(7);
        let s1 = b
            .rtt(76, 10)
            .queued(0)
            .bytes_acked(4_572_168_817)
            .chrono(1_704_000, 0, 0)
            .build(7);
        let all = run(vec![s0.clone()], vec![s1.clone()], &ctx());
        assert!(only(all, RuleId::SendBufferLimited).is_empty());
        // Nor on a 10 GB/s path: 32 KiB is more than its BDP at the 1 µs min RTT (10 kB), so
        // what held the flow was the queueing that stretched its round trips to 76 µs.
        let mut fast = ctx();
        fast.bandwidth = Some(10e9);
        let all = run(vec![s0.clone()], vec![s1.clone()], &fast);
        assert!(only(all, RuleId::SendBufferLimited).is_empty());
        // Only a path faster than the buffer per min RTT (32.8 GB/s) makes it the finding.
        fast.bandwidth = Some(40e9);
        let all = run(vec![s0], vec![s1], &fast);
        let f = only(all.clone(), RuleId::SendBufferLimited);
        assert_eq!(f.len(), 1, "{all:#?}");
        assert_eq!(
            f[0].evidence.get("escaped_buffer"),
            Some(&Value::from(true))
        );
    }

    #[test]
    fn a_fixed_buffer_above_the_floor_is_still_the_applications() {
        // SO_SNDBUF 32 KiB: tb 65536, above the 46080 floor but not a whole number of
        // 2304-byte segments: set by the application.
        assert!(!autotuned_size(65536, 1448, sysctls().tcp_wmem));
        assert!(autotuned_size(69120, 1448, sysctls().tcp_wmem));
        assert!(autotuned_size(4_194_304, 1448, sysctls().tcp_wmem));
        let b = TcpBuilder::new()
            .sndbuf(65536)
            .min_rtt(150_300)
            .rtt(152_000, 2_000)
            .cwnd(100)
            .unacked(30)
            .snd_wnd(2_000_000)
            .queued(70_000);
        let s0 = b.clone().chrono(0, 0, 0).build(3);
        let s1 = b.bytes_acked(400_000).chrono(1_000_000, 0, 0).build(3);
        let f = sndbuf_findings(s0, s1, &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].evidence.get("cause").unwrap(), "set-by-application");
        assert_eq!(ev(&f[0], "so_sndbuf_bytes"), 32768.0);
    }

    #[test]
    fn loopback_small_buffer_is_not_a_finding() {
        // The seed's negative case: 16 KiB SO_SNDBUF at 30 µs: ceiling 819 MB/s.
        let base = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(30)
            .mss(65483)
            .cwnd(10)
            .unacked(1);
        let s0 = base.clone().chrono(0, 0, 0).build(1);
        let s1 = base
            .bytes_acked(700_000_000)
            .chrono(1_000_000, 0, 500_000)
            .build(1);
        assert!(only(run(vec![s0], vec![s1], &ctx()), RuleId::SendBufferLimited).is_empty());
    }

    /// In congestion avoidance cubic grows cwnd only while it is full, so a buffer-bound
    /// flow's cwnd sits at its flight: a full cwnd lowers the confidence, it is no veto (matrix
    /// `sndbuf-1bulk-shallow`, cubic: flight = cwnd in both samples, 0.76-0.97 buffers/srtt).
    #[test]
    fn a_full_cwnd_lowers_the_confidence_only() {
        let base = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_300)
            .rtt(23_000, 1_000)
            .cwnd(16)
            .unacked(16)
            .snd_wnd(300_000)
            .queued(30_000);
        let s0 = base.clone().chrono(0, 0, 0).build(1);
        let s1 = base.bytes_acked(1_200_000).chrono(1_000_000, 0, 0).build(1);
        let f = sndbuf_findings(s0, s1, &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].confidence.level, Certainty::Medium);
    }

    #[test]
    fn causes() {
        let (s0, s1) = case_b(400_000, 1_360_000);
        // Clamped: tb == 2 x wmem_max.
        let mut c = ctx();
        c.sysctls.wmem_max = Some(16384);
        let f = only(
            run(vec![s0.clone()], vec![s1.clone()], &c),
            RuleId::SendBufferLimited,
        );
        assert_eq!(f[0].evidence.get("cause").unwrap(), "clamped-by-wmem-max");
        // Exact lock.
        let mut c = ctx();
        c.buf_locks.insert(
            7,
            BufLock {
                sndbuf: true,
                rcvbuf: false,
            },
        );
        let f = only(
            run(vec![s0.clone()], vec![s1.clone()], &c),
            RuleId::SendBufferLimited,
        );
        assert_eq!(f[0].evidence.get("lock").unwrap(), "exact");
        // Exactly unlocked, tb at the sysctl max.
        let mut c = ctx();
        c.buf_locks.insert(
            7,
            BufLock {
                sndbuf: false,
                rcvbuf: false,
            },
        );
        c.sysctls.tcp_wmem = Some([4096, 16384, 32768]);
        let f = only(run(vec![s0], vec![s1], &c), RuleId::SendBufferLimited);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].evidence.get("cause").unwrap(), "tcp-wmem-max");
        assert!(f[0].advice.contains("net.ipv4.tcp_wmem"), "{}", f[0].advice);
    }

    #[test]
    fn floor_matches_the_measured_value() {
        // 3 x 10 x 2304 = 69120 measured with BBR; the factor-2 floor is 46080.
        assert_eq!(autotune_floor(1448, None), 46080);
        assert_eq!(autotune_floor(65483, Some(4_194_304)), 2_626_560);
    }

    #[test]
    fn host_sysctl_below_a_busy_flows_bdp() {
        // A healthy, busy flow at 100 ms with 1 Gbit/s given: BDP 12.5 MB > tcp_wmem max 4 MiB.
        let base = TcpBuilder::new().min_rtt(100_000).cwnd(8000).unacked(7000);
        let s0 = base.clone().chrono(0, 0, 0).build(1);
        let s1 = base
            .bytes_acked(100_000_000)
            .chrono(1_000_000, 0, 0)
            .build(1);
        let mut c = ctx();
        c.bandwidth = Some(125_000_000.0);
        let f = only(
            run(vec![s0.clone()], vec![s1.clone()], &c),
            RuleId::SendBufferLimited,
        );
        assert_eq!(f.len(), 2, "{f:#?}");
        assert!(f.iter().all(|f| f.socket.is_none()));
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(ev(&f[0], "advised_tcp_wmem_max_bytes") >= 1.33 * 12_500_000.0);
        assert_eq!(f[1].severity, Severity::Info);
        // Exactly at the boundary: tcp_wmem max == 1.33 x BDP is enough.
        c.sysctls.tcp_wmem = Some([4096, 16384, (1.33f64 * 12_500_000.0) as u64]);
        c.sysctls.wmem_max = Some(12_500_000);
        assert!(only(run(vec![s0], vec![s1], &c), RuleId::SendBufferLimited).is_empty());
    }
}
