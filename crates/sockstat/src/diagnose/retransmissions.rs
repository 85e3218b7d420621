//! R10, `retransmissions`: a lossy path, RTO recovery, a black-holed connection, or SYNs that
//! go unanswered.
//!
//! Case: seed 003's 1.1 s and 3.4 s connect outliers (SYN retransmits at the 1 s initial RTO,
//! `TCP_TIMEOUT_INIT`) and research/kernel.md §3.3 R10. Per connection: consecutive RTOs or the
//! Loss state, exponential backoff with the retransmit timer on, RTO events over the interval,
//! and the share of bytes retransmitted (4.19+ `bytes_retrans / bytes_sent`). Namespace:
//! connections aborted after their retries (TCPAbortOnTimeout).

use super::*;
use send_buffer::owner_text;

/// Retransmitted share of the bytes sent over the interval that warns (a lossy path).
pub const LOSS_WARNING: f64 = 0.01;
/// ... and that is critical.
pub const LOSS_CRITICAL: f64 = 0.10;
/// The loss share is judged only when at least this many bytes were sent in the interval
/// (about 100 full segments), so one retransmit of a tiny exchange is not "10% loss".
pub const MIN_BYTES_SENT: u64 = 144_800;
/// Backoff at or above this with the retransmit timer pending: the path looks black-holed.
pub const BLACKHOLE_BACKOFF: u8 = 3;
/// `idiag_timer` of the retransmit timer.
pub const TIMER_RETRANSMIT: u8 = 1;
/// `tcpi_ca_state` Loss.
pub const CA_LOSS: u8 = 4;

/// Runs R10.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let mut out: Vec<Finding> = input
        .flows
        .iter()
        .filter_map(|f| flow_check(f, input))
        .collect();
    let snap = &input.after.snapshot;
    for s in &snap.sockets {
        if s.proto != Proto::Tcp || s.state != State::SynSent {
            continue;
        }
        let Some(t) = s.timer.filter(|t| t.retrans >= 1) else {
            continue;
        };
        let mut ev = Evidence::default();
        ev.int("syn_retransmits", u64::from(t.retrans))
            .int("timer_expires_ms", u64::from(t.expires_ms))
            .int(
                "syn_retrans_delta",
                input.counter_delta("TcpExt", "TCPSynRetrans"),
            );
        // 1 s, then doubling up to the kernel's 120 s cap (TCP_RTO_MAX): the connect has
        // waited at least 1 + 2 + ... seconds.
        let waited = syn_wait_s(t.retrans);
        ev.int("waited_at_least_s", waited);
        out.push(Finding {
            zone: None,
            rule: RuleId::Retransmissions,
            severity: Severity::Warning,
            socket: Some(SocketRef::of(s, snap)),
            summary: format!(
                "{}: connect() has sent its SYN {} times and waited at least {waited} s: SYNs are \
                 unanswered",
                fmt::connection(s),
                u32::from(t.retrans) + 1
            ),
            evidence: ev,
            advice: "The server dropped the SYN (listen queue full, a SYN for a tuple still in \
                     TIME-WAIT there, a firewall) or the path does: check the server with \
                     sockstat diagnose (listen-overflow, timewait-syn-rejected)."
                .into(),
        });
    }
    if let Some(d) = input
        .counter_delta("TcpExt", "TCPAbortOnTimeout")
        .filter(|&d| d > 0)
    {
        let mut ev = Evidence::default();
        ev.num("interval_s", input.ctx.interval_s)
            .int("abort_on_timeout_delta", d)
            .int(
                "timeouts_delta",
                input.counter_delta("TcpExt", "TCPTimeouts"),
            )
            .int(
                "retrans_segs_delta",
                input.counter_delta("Tcp", "RetransSegs"),
            )
            .int("out_segs_delta", input.counter_delta("Tcp", "OutSegs"));
        out.push(Finding {
            zone: None,
            rule: RuleId::Retransmissions,
            severity: Severity::Critical,
            socket: None,
            summary: format!(
                "{d} connections were aborted after exhausting their retransmissions or \
                 zero-window probes (TcpExtTCPAbortOnTimeout) during the interval"
            ),
            evidence: ev,
            advice: "Their peers stopped answering (host down, path black-holed, or a receiver \
                     that never reopened its window). Look for receiver-not-reading and \
                     retransmission findings on the affected connections."
                .into(),
        });
    }
    out
}

/// Seconds a connect() has waited after `retrans` SYN retransmissions: the first timeout is
/// 1 s (TCP_TIMEOUT_INIT), each next one doubles, none exceeds 120 s (TCP_RTO_MAX). A count
/// above 63 (`tcp_syn_retries` goes up to 127) must neither overflow nor wrap.
fn syn_wait_s(retrans: u8) -> u64 {
    (0..u32::from(retrans))
        .map(|k| (1u64 << k.min(7)).min(120))
        .sum()
}

fn flow_check(flow: &Flow<'_>, input: &Input<'_>) -> Option<Finding> {
    let i = flow.info()?;
    let _ = input;
    // A handshake in progress is judged by the SYN-SENT check below, not as a connection.
    if matches!(flow.after.state, State::SynSent | State::SynRecv) {
        return None;
    }
    let timer = flow.after.timer.unwrap_or_default();
    let in_rto = i.retransmits().is_some_and(|r| r >= 1) || i.ca_state() == Some(CA_LOSS);
    let blackhole =
        i.backoff().is_some_and(|b| b >= BLACKHOLE_BACKOFF) && timer.kind == TIMER_RETRANSMIT;
    let rtos = flow.d(|t| t.total_rto().map(u64::from)).filter(|&d| d > 0);
    let rto_time = flow.d(TcpInfo::total_rto_time_ms);
    let sent = flow.d(TcpInfo::bytes_sent);
    let retrans = flow.d(TcpInfo::bytes_retrans);
    let loss = match (sent, retrans) {
        (Some(s), Some(r)) if s >= MIN_BYTES_SENT => Some(r as f64 / s as f64),
        _ => None,
    };
    let lossy = loss.is_some_and(|l| l >= LOSS_WARNING);
    if !(in_rto || blackhole || rtos.is_some() || lossy) {
        return None;
    }
    // RTOs whose every retransmission came back as a duplicate (D-SACK) were spurious: the
    // path delayed, it did not lose (a stalled middlebox or a starved host). Worth telling,
    // not worth an alarm.
    let dsacks = flow.d(|t| t.dsack_dups().map(u64::from)).unwrap_or(0);
    let retrans_pkts = flow.d(|t| t.total_retrans().map(u64::from)).unwrap_or(0);
    let spurious_only = !(in_rto || blackhole || lossy)
        && rtos.is_some()
        && retrans_pkts > 0
        && dsacks >= retrans_pkts;
    let severity = if blackhole || loss.is_some_and(|l| l >= LOSS_CRITICAL) {
        Severity::Critical
    } else if spurious_only {
        Severity::Info
    } else {
        Severity::Warning
    };
    let mut ev = Evidence::default();
    flow.common_evidence(&mut ev);
    ev.int("rto_us", i.rto_us().map(u64::from))
        .int("bytes_sent_delta", sent)
        .int("bytes_retrans_delta", retrans)
        .num("retrans_share", loss)
        .num("bytes_retrans_per_sec", retrans.map(|r| r as f64 / flow.dt))
        .int("retransmits", i.retransmits().map(u64::from))
        .int("backoff", i.backoff().map(u64::from))
        .text(
            "ca_state",
            crate::model::tcp::ca_state_name(i.ca_state().unwrap_or(0)),
        )
        .int("lost_pkts", i.lost().map(u64::from))
        .int("rto_events_delta", rtos)
        .int("rto_time_ms_delta", rto_time)
        .int("dsack_dups_delta", flow.d(TcpInfo::dsack_dups));
    let mut what = vec![];
    if let Some(l) = loss.filter(|_| lossy) {
        what.push(format!(
            "{:.1}% of the bytes sent were retransmissions",
            l * 100.0
        ));
    }
    if let Some(n) = rtos {
        what.push(format!(
            "{n} retransmission timeouts{}",
            rto_time.map_or(String::new(), |t| format!(" ({t} ms in RTO recovery)"))
        ));
    }
    if blackhole {
        what.push(format!(
            "the retransmit timer has backed off {} times (path black-holed?)",
            i.backoff().unwrap_or(0)
        ));
    } else if in_rto {
        what.push("in RTO recovery now".into());
    }
    let spurious = match (flow.d(TcpInfo::dsack_dups), flow.d(|t| t.total_retrans())) {
        (Some(d), Some(r)) if r > 0 && d * 2 >= r => {
            " Many retransmissions were spurious (D-SACKs): reordering or delay spikes rather \
             than loss."
        }
        _ => "",
    };
    Some(Finding {
        zone: None,
        rule: RuleId::Retransmissions,
        severity,
        socket: Some(flow.socket_ref()),
        summary: format!(
            "{}{}: {} (RTO {})",
            fmt::connection(flow.after),
            owner_text(flow),
            what.join("; "),
            fmt::duration_us(i.rto_us().unwrap_or(0))
        ),
        evidence: ev,
        advice: format!(
            "The path loses packets: check interface errors and drops along it (ip -s link, \
             switch counters), a policer or a full queue; congestion control bbr copes better with \
             random loss than cubic.{spurious}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn lossy(sent: u64, retrans: u64) -> Vec<Finding> {
        let b = TcpBuilder::new();
        let s0 = b.clone().bytes_sent(0, 0).build(5);
        let s1 = b.bytes_sent(sent, retrans).build(5);
        run(vec![s0], vec![s1], &ctx())
    }

    #[test]
    fn loss_thresholds() {
        assert!(lossy(1_000_000, 9_999).is_empty());
        let f = lossy(1_000_000, 10_000);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(ev(&f[0], "retrans_share"), 0.01);
        assert_eq!(lossy(1_000_000, 100_000)[0].severity, Severity::Critical);
        // Too little sent to judge.
        assert!(lossy(MIN_BYTES_SENT - 1, 50_000).is_empty());
        assert_eq!(lossy(MIN_BYTES_SENT, 50_000).len(), 1);
    }

    #[test]
    fn rto_and_blackhole() {
        let b = TcpBuilder::new().retransmits(2).backoff(3).timer(1, 2);
        let f = run(vec![b.clone().build(1)], vec![b.build(1)], &ctx());
        assert_eq!(f[0].severity, Severity::Critical);
        let b = TcpBuilder::new().backoff(2).timer(1, 0);
        assert!(run(vec![b.clone().build(1)], vec![b.build(1)], &ctx()).is_empty());
        let b = TcpBuilder::new().ca_state(4);
        assert_eq!(
            run(vec![b.clone().build(1)], vec![b.build(1)], &ctx()).len(),
            1
        );
        // Backoff under a persist timer is a zero window (R3), not a black hole.
        let b = TcpBuilder::new().backoff(5).timer(4, 0).snd_wnd(100);
        assert!(run(vec![b.clone().build(1)], vec![b.build(1)], &ctx()).is_empty());
    }

    #[test]
    fn rto_events_over_the_interval() {
        let b = TcpBuilder::new();
        let s0 = b.clone().total_rto(2, 300).build(1);
        let s1 = b.total_rto(3, 1500).build(1);
        let f = run(vec![s0], vec![s1], &ctx());
        assert_eq!(ev(&f[0], "rto_time_ms_delta"), 1200.0);
    }

    #[test]
    fn one_spurious_rto_is_info_not_an_alarm() {
        // One RTO whose single retransmission came back D-SACKed: the path stalled, it did
        // not lose (seen on a loaded 2-core machine with a userspace delay forwarder).
        let b = TcpBuilder::new();
        let s0 = b.clone().total_rto(0, 0).retrans_dsack(0, 0).build(1);
        let s1 = b.clone().total_rto(1, 33).retrans_dsack(1, 1).build(1);
        let f = run(vec![s0], vec![s1], &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Info);
        // Not all retransmissions D-SACKed: a real loss, a warning.
        let s0 = b.clone().total_rto(0, 0).retrans_dsack(0, 0).build(1);
        let s1 = b.total_rto(1, 33).retrans_dsack(2, 1).build(1);
        assert_eq!(
            run(vec![s0], vec![s1], &ctx())[0].severity,
            Severity::Warning
        );
    }

    #[test]
    fn syn_sent_retrying() {
        let s = TcpBuilder::new().state(State::SynSent).timer(1, 2).build(1);
        let f = run(vec![], vec![s], &ctx());
        assert_eq!(f.len(), 1);
        assert_eq!(ev(&f[0], "waited_at_least_s"), 3.0);
        // Seen in both samples (tcp_info with retransmits 2, no RTT sample): still one finding.
        let b = TcpBuilder::new()
            .state(State::SynSent)
            .timer(1, 2)
            .retransmits(2)
            .min_rtt(u32::MAX);
        let f = run(vec![b.clone().build(1)], vec![b.build(1)], &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
    }

    /// Found by the `listing` fuzz target: a SYN_SENT socket whose timer reported 64 or more
    /// retransmissions (possible: `tcp_syn_retries` goes up to 127) shifted `1u64` past its
    /// width, a panic in a debug build and a wrapped, meaningless wait in a release one. The
    /// wait now follows the kernel's doubling to its 120 s cap.
    #[test]
    fn a_syn_retransmitted_past_64_times_has_a_capped_wait_not_an_overflow() {
        assert_eq!(syn_wait_s(0), 0);
        assert_eq!(syn_wait_s(6), 63); // the default tcp_syn_retries: 1 + 2 + ... + 32
        assert_eq!(syn_wait_s(8), 127 + 120); // the 8th timeout is capped: 128 -> 120
        assert_eq!(syn_wait_s(127), 127 + 120 * 120);
        assert_eq!(syn_wait_s(255), 127 + 120 * 248);
        let s = TcpBuilder::new()
            .state(State::SynSent)
            .timer(1, 200)
            .build(1);
        let f = run(vec![], vec![s], &ctx());
        assert_eq!(f.len(), 1);
        assert_eq!(ev(&f[0], "waited_at_least_s"), (127 + 120 * 193) as f64);
    }
}
