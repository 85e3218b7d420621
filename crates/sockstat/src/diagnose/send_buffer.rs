//! R1, `send-buffer-limited`: the send buffer caps throughput.
//!
//! Case: seed 001 (SO_SNDBUF 16 KiB at 20 ms; a 32 KiB proxy buffer at 150 ms), reproduced in
//! research/kernel.md §3.2 experiments B and C: `tb = 32768`, `sndbuf_limited` 33-44% of busy
//! time (the chronograph under-counts), goodput 1.36 MB/s against a ceiling
//! 0.75 × tb / min_rtt = 1.21 MB/s. The seed's negative case (16 KiB at loopback RTT) has a
//! ceiling of gigabytes per second and is not reported ([`super::ceiling_matters`]).
//!
//! Also the host finding "the send-side sysctls are below a busy flow's BDP" (socket null).

use super::*;

/// Share of busy time in `sndbuf_limited` that suggests the buffer (kernel.md §0.7: fully
/// bound connections showed only 29-44%, so 20%).
pub const SNDBUF_SHARE: f64 = 0.20;
/// Above this share of `rwnd_limited` the peer's window is the suspect instead (R2).
pub const RWND_SHARE_MAX: f64 = 0.20;
/// In flight below this fraction of cwnd × MSS: congestion control is not what stops sending.
pub const CWND_HEADROOM: f64 = 0.8;
/// The share of `tb` that carries payload per RTT. kernel.md §3.1 measured 0.62-0.84 (cubic
/// and BBR, 20 and 150 ms); tests/diagnose_live.rs measures about 1.0 with BBR at 20 ms on a
/// 6.18 kernel (goodput 1.6-1.66 MB/s with tb = 32 KiB at min RTT 20.2 ms). 0.9 keeps both
/// 20 ms cases within 15%.
pub const SNDBUF_PAYLOAD: f64 = 0.9;
/// `tb` needed per byte of BDP (1 / [`SNDBUF_PAYLOAD`]).
pub const SNDBUF_PER_BDP: f64 = 1.33;
/// `tb` at or above this share of `tcp_wmem[2]` means autotuning reached the sysctl's max.
pub const SYSCTL_MAX_SHARE: f64 = 0.95;
/// The tiniest SO_SNDBUF result (`SOCK_MIN_SNDBUF`, 2 × (2048 + sizeof(sk_buff)) on x86-64).
pub const SOCK_MIN_SNDBUF: u64 = 4608;

/// The send buffer every unlocked ESTABLISHED socket is expanded to at least
/// (`tcp_sndbuf_expand`, net/ipv4/tcp_input.c): 2 (3 for BBR) × max(10, cwnd) segments of
/// `roundup_pow_of_two(mss + MAX_TCP_HEADER + shinfo) + sizeof(sk_buff)` bytes, capped by
/// `tcp_wmem[2]`. Uses factor 2 and 10 segments: the smallest the kernel could have picked.
/// Measured 69120 for MSS 1448 with BBR (kernel.md §4); this returns 46080 for it.
pub fn autotune_floor(mss: u32, tcp_wmem_max: Option<u64>) -> u64 {
    // MAX_TCP_HEADER (256 with L1 alignment) + SKB_DATA_ALIGN(skb_shared_info) (320).
    let per_mss = (u64::from(mss) + 576).next_power_of_two() + 256;
    let floor = 2 * 10 * per_mss;
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
        // SO_SNDBUF would produce (2N) while limited, was set by the application (kernel.md §4).
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
    Cause::Unknown
}

/// Runs R1 over every flow, then the host check.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let mut out: Vec<Finding> = input
        .flows
        .iter()
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
    let ctx = input.ctx;
    let i = flow.info()?;
    if !matches!(flow.after.state, State::Established | State::CloseWait) || !flow.active() {
        return None;
    }
    let sndbuf_share = flow.sndbuf_share()?;
    let rwnd_share = flow.rwnd_share().unwrap_or(0.0);
    if sndbuf_share < SNDBUF_SHARE || rwnd_share >= RWND_SHARE_MAX {
        return None;
    }
    let mss = u64::from(i.snd_mss()?);
    let cwnd_bytes = u64::from(i.snd_cwnd()?) * mss;
    let inflight = flow.inflight()?;
    if inflight as f64 >= CWND_HEADROOM * cwnd_bytes as f64 {
        return None;
    }
    let tb = flow.sndbuf()?;
    let r_us = flow.min_rtt_us()?;
    let r = f64::from(r_us) / 1e6;
    let ceiling = SNDBUF_PAYLOAD * tb as f64 / r;
    let goodput = flow.goodput()?;
    if goodput < CEILING_MATCH * ceiling || !ceiling_matters(ceiling, ctx) {
        return None;
    }
    let cause = cause(flow, tb, input);
    let bw = bandwidth_beyond(flow, ctx, ceiling);
    let bdp = bw.map(|(b, _)| b * r);
    let advised = bdp.map(round_up_kib);
    let s = &ctx.sysctls;

    let mut ev = Evidence::default();
    flow.common_evidence(&mut ev);
    ev.int("sndbuf_bytes", tb);
    if matches!(cause, Cause::SetByApp { .. } | Cause::ClampedByWmemMax) {
        ev.int("so_sndbuf_bytes", tb / 2);
    }
    ev.num("ceiling_bytes_per_sec", ceiling)
        .num("goodput_bytes_per_sec", goodput)
        .num("busy_share", flow.busy_share())
        .num("sndbuf_limited_share", sndbuf_share)
        .num("rwnd_limited_share", rwnd_share)
        .int("inflight_bytes", inflight)
        .int("cwnd_bytes", cwnd_bytes)
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

    let who = owner_text(flow);
    let conn = fmt::connection(flow.after).to_string();
    let summary = format!(
        "{conn}{who}: sending at {}, capped by its send buffer: tb = {} at min RTT {} gives a \
         ceiling of about {SNDBUF_PAYLOAD} x tb / RTT = {}",
        fmt::rate(goodput),
        fmt::bytes(tb as f64),
        fmt::duration_us(r_us),
        fmt::rate(ceiling),
    );
    let need = match (advised, bw) {
        (Some(a), Some((b, _))) => format!(
            "To fill {} at this RTT the socket needs SO_SNDBUF >= BDP = {} bytes ({}).",
            fmt::rate(b),
            a,
            fmt::bytes(a as f64)
        ),
        _ => "Give the path's bandwidth with --bandwidth to get the buffer size it needs \
              (SO_SNDBUF >= bandwidth x RTT)."
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
            "The application{who} {} SO_SNDBUF to about {} bytes, which turns send-buffer \
             autotuning off. Remove the setsockopt(SO_SNDBUF) so the kernel can grow the buffer \
             up to net.ipv4.tcp_wmem max ({}), or raise it. {need}{wmem_hint}",
            if exact { "set" } else { "most likely set" },
            tb / 2,
            s.tcp_wmem
                .map_or_else(|| "?".to_string(), |w| fmt::bytes(w[2] as f64).to_string()),
        ),
        Cause::ClampedByWmemMax => {
            let target = advised.unwrap_or(4 * s.wmem_max.unwrap_or(tb / 2));
            format!(
                "The application asked for a larger SO_SNDBUF than net.core.wmem_max = {} \
                 allows, so it got 2 x wmem_max. Raise it: sysctl -w net.core.wmem_max={target}, \
                 or remove the setsockopt so autotuning applies. {need}",
                s.wmem_max.unwrap_or(0)
            )
        }
        Cause::TcpWmemMax => {
            let target = bdp.map_or(2 * tb, |b| round_up_kib(SNDBUF_PER_BDP * b));
            format!(
                "Autotuning reached the maximum of net.ipv4.tcp_wmem. Raise it: sysctl -w \
                 net.ipv4.tcp_wmem=\"{} {} {target}\". {need}",
                s.tcp_wmem.map_or(4096, |w| w[0]),
                s.tcp_wmem.map_or(16384, |w| w[1]),
            )
        }
        Cause::MemoryPressure => format!(
            "TCP is under memory pressure (see memory-pressure), and the kernel does not grow \
             send buffers then. Raise net.ipv4.tcp_mem or find the sockets that hold memory. \
             {need}"
        ),
        Cause::Unknown => format!(
            "The send buffer does not grow; check whether the application sets SO_SNDBUF \
             (run as root for an exact answer). {need}"
        ),
    };
    Some(Finding {
        zone: None,
        rule: RuleId::SendBufferLimited,
        severity: cap_severity(ceiling, r_us, ctx),
        socket: Some(flow.socket_ref()),
        summary,
        evidence: ev,
        advice,
    })
}

/// ` (pid 1234 sender)` when the holder is known, else empty.
pub(crate) fn owner_text(flow: &Flow<'_>) -> String {
    let r = flow.socket_ref();
    match r.owners.first() {
        Some(o) => match &o.command {
            Some(c) => format!(" (pid {} {})", o.pid, c),
            None => format!(" (pid {})", o.pid),
        },
        None => String::new(),
    }
}

/// A busy flow whose BDP needs more send buffer than the host's sysctls allow (kernel.md §3.5).
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
                rule: RuleId::SendBufferLimited,
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
pub(crate) fn busiest_bdp<'a>(input: &'a Input<'a>) -> Option<(Flow<'a>, f64, f64)> {
    input
        .flows
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

    /// Experiment B: SO_SNDBUF 16 KiB at 20 ms, 1.36 MB/s over the second.
    fn case_b(sndbuf_us: u64, acked: u64) -> (Socket, Socket) {
        let base = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_300)
            .rtt(21_000, 2_000)
            .cwnd(100)
            .unacked(20)
            .snd_wnd(253_000)
            .app_limited(true);
        let s0 = base.clone().chrono(5_000_000, 0, 1_000_000).build(7);
        let s1 = base
            .bytes_acked(acked)
            .chrono(6_000_000, 0, 1_000_000 + sndbuf_us)
            .build(7);
        (s0, s1)
    }

    #[test]
    fn experiment_b_fires_with_the_ceiling_and_the_fix() {
        let (s0, s1) = case_b(400_000, 1_360_000);
        let f = only(run(vec![s0], vec![s1], &ctx()), RuleId::SendBufferLimited);
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        // 11.6 Mbit/s: above the 10 Mbit/s critical line when the bandwidth is unknown.
        assert_eq!(f.severity, Severity::Warning);
        let c = ev(f, "ceiling_bytes_per_sec");
        assert!((c - SNDBUF_PAYLOAD * 32768.0 / 0.0203).abs() < 2.0, "{c}");
        assert_eq!(f.evidence.get("cause").unwrap(), "set-by-application");
        assert_eq!(f.evidence.get("lock").unwrap(), "inferred");
        assert_eq!(ev(f, "so_sndbuf_bytes"), 16384.0);
        assert!(
            f.advice.contains("Remove the setsockopt(SO_SNDBUF)"),
            "{}",
            f.advice
        );
        assert!(f.summary.contains("pid 100 app"), "{}", f.summary);
    }

    #[test]
    fn with_bandwidth_the_advice_is_the_bdp() {
        let (s0, s1) = case_b(400_000, 1_360_000);
        let mut c = ctx();
        c.bandwidth = Some(12_500_000.0);
        c.sysctls.wmem_max = Some(212_992);
        let f = only(run(vec![s0], vec![s1], &c), RuleId::SendBufferLimited);
        let f = f.iter().find(|f| f.socket.is_some()).unwrap();
        assert_eq!(f.severity, Severity::Critical); // ceiling < 50% of 100 Mbit/s
        let bdp = 12_500_000.0 * 0.0203;
        assert!(ev(f, "advised_sndbuf_bytes") >= bdp);
        assert!(ev(f, "advised_sndbuf_bytes") < bdp + 1024.0);
        assert!(
            f.advice
                .contains("raise net.core.wmem_max to at least 253952"),
            "{}",
            f.advice
        );
    }

    #[test]
    fn a_measured_rate_below_the_ceiling_sizes_nothing() {
        // Experiment B with a non-app-limited delivery rate sample of 1.1 MB/s (taken while the
        // buffer limited the flow): no BDP advice from it; 5 MB/s would be used.
        let (s0, s1) = case_b(400_000, 1_360_000);
        let mut s1 = s1;
        let b = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_300)
            .cwnd(100)
            .unacked(20)
            .app_limited(false);
        for (rate, advised) in [(1_100_000u64, false), (5_000_000, true)] {
            let mut t = b.clone().delivery_rate(rate).bytes_acked(1_360_000);
            t = t.chrono(6_000_000, 0, 1_400_000);
            s1.tcp = t.build(7).tcp;
            let f = only(
                run(vec![s0.clone()], vec![s1.clone()], &ctx()),
                RuleId::SendBufferLimited,
            );
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
        // Exactly 20% fires; just under does not.
        let (s0, s1) = case_b(200_000, 1_360_000);
        assert_eq!(
            only(run(vec![s0], vec![s1], &ctx()), RuleId::SendBufferLimited).len(),
            1
        );
        let (s0, s1) = case_b(199_999, 1_360_000);
        assert!(only(run(vec![s0], vec![s1], &ctx()), RuleId::SendBufferLimited).is_empty());
    }

    #[test]
    fn a_share_alone_is_not_enough() {
        // Goodput far below the ceiling: something else limits it (kernel.md §0.7).
        let ceiling = SNDBUF_PAYLOAD * 32768.0 / 0.0203;
        let at = (CEILING_MATCH * ceiling).ceil() as u64;
        let (s0, s1) = case_b(400_000, at);
        assert_eq!(
            only(run(vec![s0], vec![s1], &ctx()), RuleId::SendBufferLimited).len(),
            1
        );
        let (s0, s1) = case_b(400_000, at - 2);
        assert!(only(run(vec![s0], vec![s1], &ctx()), RuleId::SendBufferLimited).is_empty());
    }

    #[test]
    fn an_idle_flow_is_not_limited() {
        // busy 0.5 s of 1 s fires; 0.499 s does not.
        let base = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_300)
            .cwnd(100)
            .unacked(20);
        let s0 = base.clone().chrono(0, 0, 0).build(1);
        let s1 = base
            .clone()
            .bytes_acked(900_000)
            .chrono(500_000, 0, 200_000)
            .build(1);
        assert_eq!(
            only(
                run(vec![s0.clone()], vec![s1], &ctx()),
                RuleId::SendBufferLimited
            )
            .len(),
            1
        );
        let s1 = base
            .bytes_acked(900_000)
            .chrono(499_000, 0, 200_000)
            .build(1);
        assert!(only(run(vec![s0], vec![s1], &ctx()), RuleId::SendBufferLimited).is_empty());
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

    #[test]
    fn cwnd_bound_flow_is_not_sndbuf_bound() {
        let base = TcpBuilder::new()
            .sndbuf(32768)
            .min_rtt(20_300)
            .cwnd(20)
            .unacked(16);
        let s0 = base.clone().chrono(0, 0, 0).build(1);
        let s1 = base
            .bytes_acked(1_300_000)
            .chrono(1_000_000, 0, 400_000)
            .build(1);
        assert!(only(run(vec![s0], vec![s1], &ctx()), RuleId::SendBufferLimited).is_empty());
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
