//! R4, `receive-buffer-locked`: this host's receive buffer is fixed (SO_RCVBUF) or cannot
//! grow, and the window it allows caps a flow we receive.
//!
//! Case: the 8 KiB SO_RCVBUF of doc/reference/cases.md#receive-buffer ("the receive window depends on
//! SO_RCVBUF"), reproduced in doc/reference/calibration.md experiment E: the receiver had `rb = 16384` and
//! `rcv_wscale = 0` where this host's sysctls imply 10. SO_RCVBUF set before listen()/connect()
//! fixes the window scale at the handshake (doc/reference/linux.md#lock-heuristics, heuristic 2); set later,
//! `rb` stays at exactly 2N while the receiver's DRS estimate (`rcv_space`) wants more (heuristic
//! 3). The seed's negative case (8 KiB at loopback RTT) has a ceiling far above any link and is not
//! reported.
//!
//! Host finding (socket null): `net.ipv4.tcp_moderate_rcvbuf=0` turns receive autotuning off
//! for every connection.

use super::*;
use receive_window::RECEIVING_BYTES;

/// The receiving goodput must reach this share of what the window allows per round trip for
/// a locked buffer to matter (lower than [`CEILING_MATCH`]: the lock is shown by its own
/// evidence, the window scale or a buffer that does not grow, which healthy receivers lack).
/// In the matrix locked receivers reached 0.86-1.24 of it, and about 0.5 in a second where the
/// sender itself fell to 0.64 of its window ceiling; healthy receivers at most 0.25.
pub const RCV_CEILING_MATCH: f64 = 0.4;
/// `rcv_space` at or above this share of `rb`: the receiver wants a larger buffer.
pub const RCV_SPACE_SHARE: f64 = 0.5;
/// The window the buffer allows, per byte of `rb`, when the kernel does not report `rcv_wnd`
/// (before 6.2): `scaling_ratio` starts at 50% (doc/reference/calibration.md#bandwidth-and-bdp).
pub const WINDOW_PER_RCVBUF: f64 = 0.5;

/// The window-scale shift this namespace's sysctls give a socket whose buffer is not fixed:
/// `clamp(ilog2(max(tcp_rmem[2], rmem_max)) - 15, 0, 14)` (`tcp_select_initial_window`,
/// net/ipv4/tcp_output.c).
pub fn expected_wscale(s: &Sysctls) -> Option<u8> {
    let space = s.tcp_rmem.map(|r| r[2]).max(s.rmem_max)?;
    if space == 0 {
        return Some(0);
    }
    Some((i64::from(space.ilog2()) - 15).clamp(0, 14) as u8)
}

/// Runs R4 over every flow, then the host check.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let mut out: Vec<Finding> = input
        .moving()
        .filter_map(|f| flow_check(f, input))
        .collect();
    if input.ctx.sysctls.tcp_moderate_rcvbuf == Some(0) {
        let mut ev = Evidence::default();
        ev.int("tcp_moderate_rcvbuf", 0u64).int(
            "tcp_rmem_default_bytes",
            input.ctx.sysctls.tcp_rmem.map(|r| r[1]),
        );
        out.push(Finding {
            zone: None,
            rule: Some(RuleId::ReceiveBufferLocked),
            code: RuleId::ReceiveBufferLocked.id(),
            subject: Subject::Namespace,
            severity: Severity::Warning,
            socket: None,
            summary: format!(
                "receive buffer autotuning is off in this namespace (net.ipv4.tcp_moderate_rcvbuf=0): \
                 every connection keeps its initial receive buffer ({}) and window",
                input
                    .ctx
                    .sysctls
                    .tcp_rmem
                    .map_or_else(|| "tcp_rmem default".into(), |r| fmt::bytes(r[1] as f64).to_string())
            ),
            evidence: ev,
            advice: "sysctl -w net.ipv4.tcp_moderate_rcvbuf=1".into(),
            count: None,
            confidence: Confidence::counted("net.ipv4.tcp_moderate_rcvbuf reads 0 here"),
        });
    }
    out
}

fn flow_check(flow: &Flow<'_>, input: &Input<'_>) -> Option<Finding> {
    let ctx = input.ctx;
    let details = flow.after.tcp.as_ref()?;
    let i = &details.info;
    if !matches!(
        flow.after.state,
        State::Established | State::FinWait1 | State::FinWait2
    ) {
        return None;
    }
    let received = flow.d(TcpInfo::bytes_received)?;
    if received < RECEIVING_BYTES {
        return None;
    }
    let rb = flow.rcvbuf()?;
    let rb0 = flow
        .before
        .memory
        .as_deref()
        .map(|m| u64::from(m.rcvbuf_bytes))?;
    let wscale_ok = details.wscale_ok()?;
    let rcv_wscale = if wscale_ok { i.rcv_wscale() } else { None };
    let expected = expected_wscale(&ctx.sysctls);
    let exact = flow
        .after
        .cookie
        .and_then(|c| ctx.buf_locks.get(&c))
        .map(|l| l.rcvbuf);
    let shift_small = matches!((rcv_wscale, expected), (Some(a), Some(e)) if a < e);
    let rcv_space = i.rcv_space().map(u64::from);
    let not_growing = rb == rb0
        && ctx.sysctls.tcp_rmem.is_some_and(|r| rb < r[2])
        && rcv_space.is_some_and(|s| s as f64 >= RCV_SPACE_SHARE * rb as f64);
    let locked = match exact {
        Some(l) => l,
        None => shift_small || not_growing,
    };
    if !locked {
        return None;
    }
    // The window this buffer allows, and the ceiling it gives.
    let wnd = details
        .rcv_wnd_advertised()
        .max(
            flow.before
                .tcp
                .as_ref()
                .and_then(|t| t.rcv_wnd_advertised()),
        )
        .map(u64::from)
        .filter(|&w| w > 0)
        .unwrap_or((WINDOW_PER_RCVBUF * rb as f64) as u64);
    // The receiver's own RTT estimate, queueing included (a ceiling from min_rtt assumes an
    // idle path: behind a shared queue it fell to 0.38-0.49 of the goodput in the matrix).
    let r_us = flow.rcv_rtt_seen_us()?;
    let min_us = flow.min_rtt_us().unwrap_or(r_us);
    let goodput = received as f64 / flow.dt;
    let c = Ceiling::new(wnd as f64, wnd as f64, r_us, min_us, goodput);
    if !c.binds(RCV_CEILING_MATCH, ctx) {
        return None;
    }
    let mut why = vec![];
    match exact {
        Some(true) => why.push("SO_BUF_LOCK read from the socket: SO_RCVBUF was set".to_string()),
        _ => {
            if shift_small {
                why.push(format!(
                    "its window scale is {} where this host's sysctls give {}: the buffer was \
                     fixed before the handshake",
                    rcv_wscale.unwrap_or(0),
                    expected.unwrap_or(0)
                ));
            }
            if not_growing {
                why.push(format!(
                    "rb stayed at {} while the kernel's estimate of what the application reads \
                     per round trip ({}) wants more",
                    fmt::bytes(rb as f64),
                    fmt::bytes(rcv_space.unwrap_or(0) as f64)
                ));
            }
        }
    }
    why.push(format!(
        "it received {:.2} windows per round trip of {} (its receive-side RTT)",
        c.limits_per_rtt_seen(),
        fmt::duration_us(r_us)
    ));
    why.extend(c.uncertain_reason("window"));
    let level =
        if exact == Some(true) || (shift_small && goodput >= CONFIDENT_MATCH * c.at_rtt_seen()) {
            Certainty::High
        } else {
            Certainty::Medium
        };
    let bdp = ctx.bandwidth.map(|b| b * f64::from(min_us) / 1e6);
    let advised = bdp.map(round_up_kib);
    let mut ev = Evidence::default();
    flow.common_evidence(&mut ev);
    ev.int("rtt_seen_us", u64::from(r_us))
        .int("rcvbuf_bytes", rb)
        .int("so_rcvbuf_bytes", rb / 2)
        .int("rcv_wnd_bytes", wnd)
        .int("rcv_wscale", rcv_wscale.map(u64::from))
        .int("expected_rcv_wscale", expected.map(u64::from))
        .int("rcv_space_bytes", rcv_space);
    c.evidence(&mut ev);
    ev.num("goodput_bytes_per_sec", goodput)
        .text(
            "lock",
            match exact {
                Some(true) => "exact",
                _ => "inferred",
            },
        )
        .text(
            "evidence_kind",
            if shift_small {
                "window-scale-below-sysctls"
            } else {
                "buffer-not-growing"
            },
        );
    if let Some(b) = ctx.bandwidth {
        ev.num("bandwidth_bytes_per_sec", b);
    }
    ev.num("bdp_bytes", bdp)
        .int("advised_rcvbuf_bytes", advised)
        .int("rmem_max_bytes", ctx.sysctls.rmem_max);
    let conn = fmt::connection(flow.after).to_string();
    let who = flow.owner_text();
    let need = match advised {
        Some(a) => format!(
            " This path needs SO_RCVBUF >= BDP = {a} bytes ({}).",
            fmt::bytes(a as f64)
        ),
        None => " Give --bandwidth to get the size this path needs (SO_RCVBUF >= BDP).".into(),
    };
    let rmem_hint = match (advised, ctx.sysctls.rmem_max) {
        (Some(a), Some(m)) if a > m => {
            format!(" If you keep the setsockopt, raise net.core.rmem_max to at least {a}.")
        }
        _ => String::new(),
    };
    Some(Finding {
        zone: None,
        rule: Some(RuleId::ReceiveBufferLocked),
        code: RuleId::ReceiveBufferLocked.id(),
        subject: Subject::Namespace,
        severity: cap_severity(c.bytes_per_sec(), min_us, ctx),
        socket: Some(flow.socket_ref()),
        summary: format!(
            "{conn}{who}: receiving at {}, {}: rb = {} (SO_RCVBUF about {}){} keeps its window \
             at {}: {}",
            fmt::rate(goodput),
            c.share_text("its own receive buffer"),
            fmt::bytes(rb as f64),
            rb / 2,
            match (rcv_wscale, expected) {
                (Some(a), Some(e)) if a < e =>
                    format!(", window scale {a} where this host's sysctls give {e},"),
                _ => String::new(),
            },
            fmt::bytes(wnd as f64),
            c.per_round_trip_text(
                "that window",
                &format!(
                    "{}{}",
                    fmt::duration_us(r_us),
                    if r_us > min_us + min_us / 5 {
                        format!(
                            " (min RTT {}, the rest is queueing)",
                            fmt::duration_us(min_us)
                        )
                    } else {
                        String::new()
                    }
                )
            ),
        ),
        evidence: ev,
        advice: format!(
            "Fix it on this side, in the application{who}: it sets SO_RCVBUF, which turns \
             receive autotuning off (and, set before listen()/connect(), also fixes the window \
             scale). Remove the setsockopt(SO_RCVBUF) so the kernel can grow the buffer up to \
             net.ipv4.tcp_rmem max, or raise it.{need}{rmem_hint}"
        ),
        count: Some(1),
        confidence: Confidence::new(level, why),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn receiver(wscale: u8, received: u64, rtt: u32) -> (Socket, Socket) {
        let b = TcpBuilder::new()
            .with_wscale(10, wscale)
            .rcvbuf(16384, 0)
            .rcv_wnd(8688)
            .rcv_space(14480)
            .min_rtt(rtt);
        (b.clone().build(3), b.bytes_received(received).build(3))
    }

    #[test]
    fn expected_shift_from_sysctls() {
        assert_eq!(expected_wscale(&sysctls()), Some(10)); // 32 MiB
        let mut s = sysctls();
        s.tcp_rmem = Some([4096, 131_072, 6_291_456]);
        assert_eq!(expected_wscale(&s), Some(7)); // Debian's 6 MiB and 4 MiB rmem_max
        s.tcp_rmem = None;
        s.rmem_max = None;
        assert_eq!(expected_wscale(&s), None);
    }

    #[test]
    fn experiment_e_receiver() {
        let (s0, s1) = receiver(0, 405_000, 20_400);
        let mut c = ctx();
        c.bandwidth = Some(12_500_000.0);
        let f = only(run(vec![s0], vec![s1], &c), RuleId::ReceiveBufferLocked);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(ev(&f[0], "rcv_wscale"), 0.0);
        assert_eq!(ev(&f[0], "expected_rcv_wscale"), 10.0);
        assert!(ev(&f[0], "advised_rcvbuf_bytes") >= 12_500_000.0 * 0.0204);
        assert!(f[0].advice.contains("Remove the setsockopt(SO_RCVBUF)"));
    }

    #[test]
    fn shift_at_the_expected_value_is_not_locked() {
        // rcv_wscale 10 == expected, rb growing: nothing.
        let b = TcpBuilder::new()
            .with_wscale(10, 10)
            .rcv_wnd(8688)
            .rcv_space(1000)
            .min_rtt(20_400);
        let s0 = b.clone().rcvbuf(16384, 0).build(3);
        let s1 = b.rcvbuf(32768, 0).bytes_received(405_000).build(3);
        assert!(only(run(vec![s0], vec![s1], &ctx()), RuleId::ReceiveBufferLocked).is_empty());
        // One below the expected shift fires.
        let (s0, s1) = receiver(9, 405_000, 20_400);
        assert_eq!(
            only(run(vec![s0], vec![s1], &ctx()), RuleId::ReceiveBufferLocked).len(),
            1
        );
    }

    #[test]
    fn buffer_not_growing_boundary() {
        // Shift as expected (SO_RCVBUF set after the handshake), rb stuck at 65536 below
        // tcp_rmem max: rcv_space exactly half of rb fires, one byte less does not.
        let mk = |space: u32| {
            let b = TcpBuilder::new()
                .with_wscale(10, 10)
                .rcvbuf(65536, 0)
                .rcv_wnd(32768)
                .rcv_space(space)
                .min_rtt(20_000);
            (b.clone().build(3), b.bytes_received(1_500_000).build(3))
        };
        let (s0, s1) = mk(32768);
        let f = only(run(vec![s0], vec![s1], &ctx()), RuleId::ReceiveBufferLocked);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            f[0].evidence.get("evidence_kind").unwrap(),
            "buffer-not-growing"
        );
        let (s0, s1) = mk(32767);
        assert!(only(run(vec![s0], vec![s1], &ctx()), RuleId::ReceiveBufferLocked).is_empty());
    }

    #[test]
    fn goodput_must_reach_the_ceiling() {
        // Window 8688 at 20.4 ms (no rcv_rtt sample: min_rtt): ceiling 425882 B/s; 40% of it
        // is 170353.
        let (s0, s1) = receiver(0, 170_354, 20_400);
        assert_eq!(
            only(run(vec![s0], vec![s1], &ctx()), RuleId::ReceiveBufferLocked).len(),
            1
        );
        let (s0, s1) = receiver(0, 170_351, 20_400);
        assert!(only(run(vec![s0], vec![s1], &ctx()), RuleId::ReceiveBufferLocked).is_empty());
    }

    /// Matrix `rcvbuf-50ms-1bulk`, receiver side: rb 128 KiB, an 80 KiB window, 0.61 MB/s;
    /// the receiver's own RTT estimate was 112-115 ms (queueing behind the bulk flow) against a
    /// 54 ms min RTT: 0.88 windows per round trip it saw, 0.43 per min RTT.
    #[test]
    fn the_receivers_own_rtt_counts_behind_a_shared_queue() {
        let b = TcpBuilder::new()
            .with_wscale(10, 1)
            .rcvbuf(131_072, 0)
            .rcv_wnd(81_920)
            .rcv_space(83_984)
            .min_rtt(54_200);
        let s0 = b.clone().rcv_rtt(113_600).build(3);
        let s1 = b.rcv_rtt(112_200).bytes_received(610_000).build(3);
        let f = only(run(vec![s0], vec![s1], &ctx()), RuleId::ReceiveBufferLocked);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(ev(&f[0], "rtt_seen_us"), 112_900.0);
        assert!(
            f[0].summary.contains("the rest is queueing"),
            "{}",
            f[0].summary
        );
    }

    #[test]
    fn exactly_unlocked_is_not_a_finding() {
        let (s0, s1) = receiver(0, 405_000, 20_400);
        let mut c = ctx();
        c.buf_locks.insert(
            3,
            BufLock {
                sndbuf: false,
                rcvbuf: false,
            },
        );
        assert!(only(run(vec![s0], vec![s1], &c), RuleId::ReceiveBufferLocked).is_empty());
    }

    #[test]
    fn loopback_small_rcvbuf_is_not_a_finding() {
        // The seed's negative case: 8 KiB at 50 µs: ceiling 174 MB/s.
        let (s0, s1) = receiver(0, 150_000_000, 50);
        assert!(run(vec![s0], vec![s1], &ctx()).is_empty());
    }

    #[test]
    fn receiving_threshold() {
        let (s0, s1) = receiver(0, RECEIVING_BYTES - 1, 20_400);
        assert!(only(run(vec![s0], vec![s1], &ctx()), RuleId::ReceiveBufferLocked).is_empty());
    }

    #[test]
    fn host_autotuning_off() {
        let mut c = ctx();
        c.sysctls.tcp_moderate_rcvbuf = Some(0);
        let f = run(vec![], vec![], &c);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].rule, Some(RuleId::ReceiveBufferLocked));
        assert!(f[0].socket.is_none());
    }
}
