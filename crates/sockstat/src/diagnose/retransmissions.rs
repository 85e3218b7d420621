//! R10, `retransmissions`: a lossy path, RTO recovery, a black-holed connection, or SYNs that
//! go unanswered.
//!
//! Case: doc/reference/cases.md#case-003-an-illumos-time-wait-review, the 1.1 s and 3.4 s connect outliers (SYN
//! retransmits at the 1 s initial RTO, `TCP_TIMEOUT_INIT`) and loss in general
//! (doc/reference/calibration.md#r10-retransmissions). Per connection: consecutive RTOs or the Loss state,
//! exponential backoff with the retransmit timer on, RTO events over the interval, and the share
//! of bytes retransmitted (4.19+ `bytes_retrans / bytes_sent`); per connect() in progress, its
//! SYN retransmissions. Namespace: connections aborted after their retries (TCPAbortOnTimeout).
//!
//! **One cause, one finding.** Connections to the same remote address that are in trouble at
//! once share its cause (a listener that drops handshakes, a lossy bottleneck): they are one
//! finding that counts them (`count`), names their ports and keeps the worst numbers. Thirty
//! clients of an overflowing listener are one finding, not thirty.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::*;

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
/// The first SYN timeout, seconds (`TCP_TIMEOUT_INIT`).
pub const SYN_TIMEOUT_INIT_S: u64 = 1;
/// The largest retransmission timeout, seconds (`TCP_RTO_MAX`).
pub const RTO_MAX_S: u64 = 120;

/// One connection (or connect()) in trouble, before grouping.
struct Trouble<'a> {
    socket: &'a Socket,
    severity: Severity,
    /// What happened, in a few words ("in RTO recovery now", "3.2% of the bytes resent").
    what: Vec<String>,
    /// A connect() whose SYN was retransmitted: (retransmissions, seconds waited so far).
    syn: Option<(u8, f64)>,
    /// The retransmitted share of the bytes sent, when judged.
    loss: Option<f64>,
    /// Consecutive RTOs or Loss state, or backoff (black hole).
    rto: bool,
    /// The backoff when it looks black-holed.
    blackhole: Option<u8>,
    /// Every retransmission came back as a duplicate: the path delayed, it did not lose.
    spurious: bool,
    /// Nothing it sent was ever acknowledged (a "ghost" connection whose handshake the server
    /// dropped, or a peer that vanished at once).
    never_acked: bool,
    /// The per-connection evidence (used when the group has one member).
    evidence: Evidence,
}

/// Runs R10.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let mut troubles: Vec<Trouble<'_>> = input.moving().filter_map(flow_check).collect();
    let snap = &input.after.snapshot;
    let linear = input.ctx.sysctls.tcp_syn_linear_timeouts.unwrap_or(0);
    // Measured connects (connection events, root) are the better evidence for unanswered SYNs:
    // a handshake still in SYN-SENT at the sample, to an address whose connects the events saw
    // wait for SYN retransmissions, is the same trouble, counted in that one finding.
    let measured = input.ctx.connects.as_ref();
    let mut pending = 0u64;
    for s in &snap.sockets {
        if s.proto != Proto::Tcp || s.state != State::SynSent {
            continue;
        }
        let Some(t) = s.timer.filter(|t| t.retrans >= 1) else {
            continue;
        };
        if let (Some(m), Some(Endpoint::Inet { addr, .. })) = (measured, &s.remote) {
            if m.slow_to(*addr) > 0 {
                pending += 1;
                continue;
            }
        }
        let waited = syn_waited_s(t.retrans, linear, t.expires_ms);
        let mut ev = Evidence::default();
        ev.int("syn_retransmits", u64::from(t.retrans))
            .int("timer_expires_ms", u64::from(t.expires_ms))
            .num("waited_s", waited)
            .int("waited_at_least_s", syn_wait_s(t.retrans, linear))
            .int(
                "tcp_syn_linear_timeouts",
                input.ctx.sysctls.tcp_syn_linear_timeouts,
            )
            .int(
                "syn_retrans_delta",
                input.counter_delta("TcpExt", "TCPSynRetrans"),
            );
        troubles.push(Trouble {
            socket: s,
            severity: Severity::Warning,
            what: vec![format!(
                "connect() has sent its SYN {} times over {waited:.1} s without an answer",
                u32::from(t.retrans) + 1
            )],
            syn: Some((t.retrans, waited)),
            loss: None,
            rto: false,
            blackhole: None,
            spurious: false,
            never_acked: true,
            evidence: ev,
        });
    }
    let mut groups: BTreeMap<Option<IpAddr>, Vec<Trouble<'_>>> = BTreeMap::new();
    for t in troubles {
        let key = match &t.socket.remote {
            Some(Endpoint::Inet { addr, .. }) => Some(*addr),
            _ => None,
        };
        groups.entry(key).or_default().push(t);
    }
    let mut out: Vec<Finding> = groups
        .into_values()
        .map(|g| group_finding(g, snap, input))
        .collect();
    out.extend(measured.and_then(|m| m.finding(input.ctx.interval_s, pending)));
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
            rule: Some(RuleId::Retransmissions),
            code: RuleId::Retransmissions.id(),
            subject: Subject::Namespace,
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
            count: Some(d),
            confidence: Confidence::counted("the kernel counted the aborted connections"),
        });
    }
    out
}

/// The timeout before SYN retransmission `k` (1-based): `TCP_TIMEOUT_INIT`, kept for the first
/// `linear` retransmissions (`net.ipv4.tcp_syn_linear_timeouts`, 6.13+, 4 by default), then
/// doubling, never above `TCP_RTO_MAX` (`tcp_retransmit_timer`, net/ipv4/tcp_timer.c: the RTO
/// doubles once the connection's RTO count exceeds the sysctl).
fn syn_timeout_s(k: u32, linear: u64) -> u64 {
    let doublings = u64::from(k.saturating_sub(1)).saturating_sub(linear);
    (SYN_TIMEOUT_INIT_S << doublings.min(7)).min(RTO_MAX_S)
}

/// Seconds a connect() has waited by its `retrans`-th SYN retransmission. A count above 63
/// (`tcp_syn_retries` goes up to 127) must neither overflow nor wrap.
fn syn_wait_s(retrans: u8, linear: u64) -> u64 {
    (1..=u32::from(retrans))
        .map(|k| syn_timeout_s(k, linear))
        .sum()
}

/// Seconds a connect() has waited: to its last retransmission, plus the part of the next
/// timeout already run (the timer says how much is left).
fn syn_waited_s(retrans: u8, linear: u64, expires_ms: u32) -> f64 {
    let next = syn_timeout_s(u32::from(retrans) + 1, linear) as f64;
    let run = (next - f64::from(expires_ms) / 1000.0).clamp(0.0, next);
    syn_wait_s(retrans, linear) as f64 + run
}

fn flow_check<'a>(flow: &Flow<'a>) -> Option<Trouble<'a>> {
    let i = flow.info()?;
    // A handshake in progress is judged by the SYN-SENT check, not as a connection.
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
    let loss = flow.retrans_share(MIN_BYTES_SENT);
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
        what.push(format!(
            "in RTO recovery now (RTO {})",
            fmt::duration_us(i.rto_us().unwrap_or(0))
        ));
    }
    let spurious = matches!(
        (flow.d(TcpInfo::dsack_dups), flow.d(|t| t.total_retrans())),
        (Some(d), Some(r)) if r > 0 && d * 2 >= r
    );
    Some(Trouble {
        socket: flow.after,
        severity,
        what,
        syn: None,
        loss: loss.filter(|_| lossy),
        rto: in_rto || rtos.is_some(),
        blackhole: blackhole.then(|| i.backoff().unwrap_or(0)),
        spurious,
        never_acked: i.bytes_acked().is_some_and(|b| b <= 1),
        evidence: ev,
    })
}

/// One finding for the connections in trouble towards one remote address.
fn group_finding(mut g: Vec<Trouble<'_>>, snap: &Snapshot, input: &Input<'_>) -> Finding {
    g.sort_by_key(|t| std::cmp::Reverse(t.severity));
    let severity = g[0].severity;
    let syns: Vec<&Trouble<'_>> = g.iter().filter(|t| t.syn.is_some()).collect();
    let lossy: Vec<&Trouble<'_>> = g.iter().filter(|t| t.loss.is_some()).collect();
    let rto = g.iter().filter(|t| t.rto || t.blackhole.is_some()).count();
    let spurious = g.iter().any(|t| t.spurious);
    let ghosts = g.iter().any(|t| t.never_acked);
    let acked_rto = g
        .iter()
        .any(|t| (t.rto || t.blackhole.is_some()) && !t.never_acked);
    let mut advice = vec![];
    if ghosts {
        advice.push(
            "The server dropped the handshakes or requests (its listen queue is full, a SYN \
             for a tuple still in TIME-WAIT there, a firewall) or the path does: run sockstat \
             diagnose on the server (listen-overflow, timewait-syn-rejected)."
                .to_string(),
        );
    }
    if !lossy.is_empty() || acked_rto {
        advice.push(
            "The path loses packets: check interface errors and drops along it (ip -s link, \
             switch counters), a policer or a full queue shared with other traffic; bbr copes \
             better with random loss than cubic."
                .to_string(),
        );
    }
    if spurious {
        advice.push(
            "Many retransmissions were spurious (D-SACKs): reordering or delay spikes rather \
             than loss."
                .to_string(),
        );
    }
    let mut why = vec![];
    if !syns.is_empty() {
        why.push(format!(
            "{} connect()s had their SYN retransmitted by the kernel (SYN_SENT, retransmit \
             timer)",
            syns.len()
        ));
    }
    if rto > 0 {
        why.push(format!(
            "{rto} connections were in retransmission-timeout recovery"
        ));
    }
    if !lossy.is_empty() {
        why.push(format!(
            "{} connections resent at least {:.0}% of what they sent over the interval",
            lossy.len(),
            LOSS_WARNING * 100.0
        ));
    }
    let confidence = Confidence::counted(why.join("; "));
    if g.len() == 1 {
        let t = g
            .pop()
            .unwrap_or_else(|| unreachable!("a group has a member"));
        let who = owner_of(t.socket, snap);
        return Finding {
            zone: None,
            rule: Some(RuleId::Retransmissions),
            code: RuleId::Retransmissions.id(),
            subject: Subject::Namespace,
            severity,
            socket: Some(SocketRef::of(t.socket, snap)),
            summary: format!("{}{who}: {}", fmt::connection(t.socket), t.what.join("; ")),
            evidence: t.evidence,
            advice: advice.join(" "),
            count: Some(1),
            confidence,
        };
    }
    let remote = g[0].socket.remote.as_ref();
    let addr = match remote {
        Some(Endpoint::Inet { addr, .. }) => addr.to_string(),
        _ => "?".into(),
    };
    let mut ports: Vec<u64> = g
        .iter()
        .filter_map(|t| match &t.socket.remote {
            Some(Endpoint::Inet { port, .. }) => Some(u64::from(*port)),
            _ => None,
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    let waited = syns
        .iter()
        .filter_map(|t| t.syn.map(|(_, w)| w))
        .fold(0.0f64, f64::max);
    let max_syn = syns.iter().filter_map(|t| t.syn.map(|(r, _)| r)).max();
    let worst_loss = lossy.iter().filter_map(|t| t.loss).fold(0.0f64, f64::max);
    let mut ev = Evidence::default();
    ev.num("interval_s", input.ctx.interval_s)
        .text("remote_address", addr.clone())
        .put(
            "remote_ports",
            Some(Value::from(
                ports.iter().map(|p| Value::from(*p)).collect::<Vec<_>>(),
            )),
        )
        .int("connections", g.len() as u64)
        .int("syn_sent", syns.len() as u64)
        .int("in_rto_recovery", rto as u64)
        .int("lossy", lossy.len() as u64)
        .int("max_syn_retransmits", max_syn.map(u64::from))
        .num("max_waited_s", (!syns.is_empty()).then_some(waited))
        .num(
            "max_retrans_share",
            (!lossy.is_empty()).then_some(worst_loss),
        )
        .int(
            "tcp_syn_linear_timeouts",
            input.ctx.sysctls.tcp_syn_linear_timeouts,
        )
        .int(
            "syn_retrans_delta",
            input.counter_delta("TcpExt", "TCPSynRetrans"),
        )
        .put(
            "connections_list",
            Some(Value::from(
                g.iter()
                    .map(|t| {
                        Value::from(format!(
                            "{}: {}",
                            fmt::connection(t.socket),
                            t.what.join("; ")
                        ))
                    })
                    .collect::<Vec<_>>(),
            )),
        );
    let ports_text = match ports.as_slice() {
        [p] => format!("port {p}"),
        ps => format!(
            "ports {}",
            ps.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut parts = vec![];
    if !syns.is_empty() {
        parts.push(format!(
            "{} connect()s get no answer to their SYNs (up to {} retransmissions over {waited:.1} s)",
            syns.len(),
            max_syn.unwrap_or(0)
        ));
    }
    if rto > 0 {
        parts.push(format!(
            "{rto} connections are in retransmission-timeout recovery"
        ));
    }
    if !lossy.is_empty() {
        parts.push(format!(
            "{} connections resend up to {:.1}% of what they send",
            lossy.len(),
            worst_loss * 100.0
        ));
    }
    Finding {
        zone: None,
        rule: Some(RuleId::Retransmissions),
        code: RuleId::Retransmissions.id(),
        subject: Subject::Namespace,
        severity,
        socket: None,
        summary: format!(
            "{} connections to {addr} ({ports_text}) share one problem: {}",
            g.len(),
            parts.join("; ")
        ),
        evidence: ev,
        advice: advice.join(" "),
        count: Some(g.len() as u64),
        confidence,
    }
}

/// ` (pid 1234 cmd)` for a socket's first holder, else empty.
fn owner_of(s: &Socket, snap: &Snapshot) -> String {
    match SocketRef::of(s, snap).owners.first() {
        Some(o) => match &o.command {
            Some(c) => format!(" (pid {} {})", o.pid, c),
            None => format!(" (pid {})", o.pid),
        },
        None => String::new(),
    }
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
        // Two retransmissions with linear timeouts (4 here): 1 s + 1 s, and the third timeout
        // (1 s) has 400 ms left: 2.6 s waited.
        let s = TcpBuilder::new().state(State::SynSent).timer(1, 2).build(1);
        let mut s = s;
        if let Some(t) = s.timer.as_mut() {
            t.expires_ms = 400;
        }
        let f = run(vec![], vec![s], &ctx());
        assert_eq!(f.len(), 1);
        assert_eq!(ev(&f[0], "waited_at_least_s"), 2.0);
        assert_eq!(ev(&f[0], "waited_s"), 2.6);
        // Seen in both samples (tcp_info with retransmits 2, no RTT sample): still one finding.
        let b = TcpBuilder::new()
            .state(State::SynSent)
            .timer(1, 2)
            .retransmits(2)
            .min_rtt(u32::MAX);
        let f = run(vec![b.clone().build(1)], vec![b.build(1)], &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
    }

    /// The issue-13 case: a connect retried 5 times in about 6 s was said to have "waited at
    /// least 31 s" (doubling from 1 s); with net.ipv4.tcp_syn_linear_timeouts = 4 the first
    /// five timeouts are 1 s each.
    #[test]
    fn syn_wait_follows_the_linear_timeouts() {
        assert_eq!(syn_wait_s(5, 4), 5);
        assert_eq!(syn_wait_s(6, 4), 7);
        assert_eq!(syn_wait_s(7, 4), 11);
        assert_eq!(syn_wait_s(5, 0), 31);
        // Without the sysctl (older kernels) the classic doubling.
        let s = TcpBuilder::new().state(State::SynSent).timer(1, 5).build(1);
        let mut c = ctx();
        c.sysctls.tcp_syn_linear_timeouts = None;
        assert_eq!(
            ev(&run(vec![], vec![s.clone()], &c)[0], "waited_at_least_s"),
            31.0
        );
        assert_eq!(
            ev(&run(vec![], vec![s], &ctx())[0], "waited_at_least_s"),
            5.0
        );
    }

    /// Thirty clients of one overflowing listener: one finding with a count, not thirty.
    #[test]
    fn connections_to_one_address_in_trouble_are_one_finding() {
        let mut after = vec![];
        for i in 0..25u16 {
            after.push(
                TcpBuilder::new()
                    .state(State::SynSent)
                    .timer(1, 3)
                    .local(&format!("192.0.2.1:{}", 40000 + i))
                    .build(u64::from(i) + 1),
            );
        }
        // Five "ghost" connections the client believes established, retransmitting a request.
        let ghost = |i: u16| {
            TcpBuilder::new()
                .retransmits(2)
                .local(&format!("192.0.2.1:{}", 41000 + i))
        };
        let before: Vec<Socket> = (0..5).map(|i| ghost(i).build(100 + u64::from(i))).collect();
        after.extend((0..5).map(|i| ghost(i).build(100 + u64::from(i))));
        let f = only(run(before, after, &ctx()), RuleId::Retransmissions);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].count, Some(30));
        assert!(f[0].socket.is_none());
        assert_eq!(ev(&f[0], "syn_sent"), 25.0);
        assert_eq!(ev(&f[0], "in_rto_recovery"), 5.0);
        assert_eq!(
            f[0].evidence.get("remote_ports"),
            Some(&Value::from(vec![5001]))
        );
        assert!(f[0]
            .summary
            .starts_with("30 connections to 198.51.100.2 (port 5001)"));
        assert!(f[0].advice.contains("listen-overflow"), "{}", f[0].advice);
        // Another destination is another finding.
        let other = TcpBuilder::new()
            .state(State::SynSent)
            .timer(1, 1)
            .remote(Some("203.0.113.9:443"))
            .build(999);
        let f = only(run(vec![], vec![other], &ctx()), RuleId::Retransmissions);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].count, Some(1));
        assert!(f[0].socket.is_some());
    }

    /// Found by the `listing` fuzz target: a SYN_SENT socket whose timer reported 64 or more
    /// retransmissions (possible: `tcp_syn_retries` goes up to 127) shifted `1u64` past its
    /// width, a panic in a debug build and a wrapped, meaningless wait in a release one. The
    /// wait now follows the kernel's timeouts to their 120 s cap.
    #[test]
    fn a_syn_retransmitted_past_64_times_has_a_capped_wait_not_an_overflow() {
        assert_eq!(syn_wait_s(0, 0), 0);
        assert_eq!(syn_wait_s(6, 0), 63); // the default tcp_syn_retries: 1 + 2 + ... + 32
        assert_eq!(syn_wait_s(8, 0), 127 + 120); // the 8th timeout is capped: 128 -> 120
        assert_eq!(syn_wait_s(127, 0), 127 + 120 * 120);
        assert_eq!(syn_wait_s(255, 0), 127 + 120 * 248);
        assert_eq!(syn_wait_s(255, 255), 255);
        assert_eq!(syn_wait_s(255, u64::MAX), 255);
        let s = TcpBuilder::new()
            .state(State::SynSent)
            .timer(1, 200)
            .build(1);
        let mut c = ctx();
        c.sysctls.tcp_syn_linear_timeouts = Some(0);
        let f = run(vec![], vec![s], &c);
        assert_eq!(f.len(), 1);
        assert_eq!(ev(&f[0], "waited_at_least_s"), (127 + 120 * 193) as f64);
    }
}

/// A measured connect is slow when it took this long: the kernel's initial SYN retransmission
/// timeout (1 s), so a slow connect is one that waited for a lost SYN or SYN-ACK to be sent
/// again.
pub const SLOW_CONNECT_US: u64 = 1_000_000;
/// Share of slow connects that is critical rather than a warning.
pub const SLOW_CONNECT_CRITICAL: f64 = 0.10;

/// The connects of one zone measured from connection events during the interval
/// (`sockstat diagnose` as root traces them), the evidence R10 uses for SYNs that went
/// unanswered and were sent again: the latencies connect() callers actually saw, not only the
/// handshakes caught in SYN-SENT at the two samples.
#[derive(Debug, Default, Clone)]
pub struct MeasuredConnects {
    latency: crate::events::stats::Histogram,
    connects: u64,
    slow: u64,
    timed_out: u64,
    syn_retransmits: u64,
    /// Slow connects by destination, with the processes that made them.
    slow_by_dest: HashMap<std::net::SocketAddr, (u64, std::collections::BTreeSet<String>)>,
}

impl MeasuredConnects {
    /// Counts a client `connect` or `failed` event (others are ignored).
    pub fn add(&mut self, e: &crate::events::ConnEvent) {
        use crate::events::{EventKind, FailReason, Side};
        if e.side != Some(Side::Client) || !matches!(e.kind, EventKind::Connect | EventKind::Failed)
        {
            return;
        }
        self.connects += 1;
        let syn = u64::from(e.syn_retransmits.unwrap_or(0));
        self.syn_retransmits += syn;
        if e.kind == EventKind::Failed && e.reason == Some(FailReason::Timeout) {
            self.timed_out += 1;
        }
        let us = e.connect_latency_us;
        if e.kind == EventKind::Connect {
            if let Some(us) = us {
                self.latency.add(us);
            }
        }
        if syn > 0 || us.is_some_and(|us| us >= SLOW_CONNECT_US) {
            self.slow += 1;
            // At most 1,000 destinations are told apart; the rest still count above.
            if self.slow_by_dest.len() < 1000 || self.slow_by_dest.contains_key(&e.remote) {
                let d = self.slow_by_dest.entry(e.remote).or_default();
                d.0 += 1;
                if let Some(p) = &e.process {
                    if d.1.len() < 8 {
                        d.1.insert(format!("{}[{}]", p.command.to_string_lossy(), p.pid));
                    }
                }
            }
        }
    }

    /// connect() calls measured.
    pub fn connects(&self) -> u64 {
        self.connects
    }

    /// Measured connects to `addr` (any port) that waited for SYN retransmissions.
    pub fn slow_to(&self, addr: IpAddr) -> u64 {
        self.slow_by_dest
            .iter()
            .filter(|(d, _)| d.ip() == addr)
            .map(|(_, (n, _))| n)
            .sum()
    }

    /// R10's finding: connects that waited for SYN retransmissions during the interval, and
    /// `pending` more to the same addresses still in SYN-SENT at the end of it; `None` when no
    /// measured connect waited.
    pub fn finding(&self, interval_s: f64, pending: u64) -> Option<Finding> {
        if self.slow == 0 {
            return None;
        }
        let share = self.slow as f64 / self.connects.max(1) as f64;
        let (dest, (n, procs)) = self
            .slow_by_dest
            .iter()
            .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.0.cmp(a.0)))?;
        let procs: Vec<&str> = procs.iter().map(String::as_str).collect();
        let mut ev = Evidence::default();
        ev.num("interval_s", interval_s)
            .int("connects_measured", self.connects)
            .int("slow_connects", self.slow)
            .int("syn_retransmits", self.syn_retransmits)
            .int("timed_out", self.timed_out)
            .int("p50_connect_us", self.latency.quantile(0.5))
            .int("p99_connect_us", self.latency.quantile(0.99))
            .int("max_connect_us", self.latency.max())
            .text(
                "slowest_destination",
                fmt::inet(dest.ip(), dest.port()).to_string(),
            )
            .int("slowest_destination_slow_connects", *n)
            .text("slowest_destination_callers", procs.join(", "))
            .int("pending_syn_sent", pending);
        Some(Finding {
            zone: None,
            rule: Some(RuleId::Retransmissions),
            code: RuleId::Retransmissions.id(),
            subject: Subject::Namespace,
            severity: if share >= SLOW_CONNECT_CRITICAL {
                Severity::Critical
            } else {
                Severity::Warning
            },
            socket: None,
            summary: format!(
                "{} of {} connects measured during the interval ({:.1}%) waited for SYN \
                 retransmissions ({} SYNs sent again{}), most to {} ({n}, by {}){}",
                self.slow,
                self.connects,
                share * 100.0,
                self.syn_retransmits,
                self.latency
                    .max()
                    .map(|m| format!(", the slowest {}", fmt::duration_us(m)))
                    .unwrap_or_default(),
                fmt::inet(dest.ip(), dest.port()),
                if procs.is_empty() {
                    "?".to_string()
                } else {
                    procs.join(", ")
                },
                match pending {
                    0 => String::new(),
                    1 => "; 1 more was still waiting at the end of the interval".into(),
                    p => format!("; {p} more were still waiting at the end of the interval"),
                },
            ),
            evidence: ev,
            count: Some(self.slow + pending),
            confidence: Confidence::counted(format!(
                "traced by connection events: {} of the {} connect() calls of the interval \
                 waited for a SYN to be sent again",
                self.slow, self.connects
            )),
            advice: "Each lost SYN costs the retransmission timeout (1 s): the server dropped it \
                     (a full listen queue: listen-overflow; a SYN for a tuple it still holds in \
                     TIME-WAIT: timewait-syn-rejected) or the path did (a firewall, a full \
                     queue). sockstat drops, run while it happens, says where the kernel freed \
                     them and why; sockstat events --stats shows the latency modes per \
                     destination."
                .into(),
        })
    }
}

#[cfg(test)]
mod measured_tests {
    use super::*;
    use crate::events::tests::record;
    use crate::events::{Clock, ConnEvent};
    use sockstat_wire::tcp_events::{kind, side, state};

    #[test]
    fn slow_connects_are_a_finding_with_their_destination_and_callers() {
        let c = Clock::fixed(0);
        let mut m = MeasuredConnects::default();
        for i in 0..198u64 {
            let mut r = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
            r.cookie = i;
            m.add(&ConnEvent::from_record(&r, &c).unwrap());
        }
        assert_eq!(m.finding(5.0, 0), None, "fast connects are no finding");
        for retr in [1u32, 2] {
            let mut r = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
            r.syn_retrans = retr;
            r.established_ns = r.start_ns + u64::from(retr) * 1_000_000_000 + 3_000_000;
            m.add(&ConnEvent::from_record(&r, &c).unwrap());
        }
        // A server's accept is not a connect.
        m.add(
            &ConnEvent::from_record(&record(kind::ACCEPT, state::ESTABLISHED, side::SERVER), &c)
                .unwrap(),
        );
        assert_eq!(m.connects(), 200);
        let f = m.finding(5.0, 0).unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.summary.starts_with("2 of 200 connects measured during the interval (1.0%) waited for SYN retransmissions (3 SYNs sent again, the slowest 2 s)"), "{}", f.summary);
        assert!(
            f.summary
                .contains("most to 127.0.0.1:47001 (2, by python3[5446])"),
            "{}",
            f.summary
        );
        let ev: HashMap<&str, &Value> = f.evidence.0.iter().map(|(k, v)| (*k, v)).collect();
        assert_eq!(ev["slow_connects"], &Value::from(2));
        assert_eq!(ev["max_connect_us"], &Value::from(2_003_000));
    }

    /// As root, a connect still in SYN-SENT at the sample, to an address whose measured
    /// connects waited for SYN retransmissions, is counted in the measured finding, not
    /// reported a second time; one to another address keeps its own finding.
    #[test]
    fn a_pending_syn_to_a_measured_destination_is_one_finding() {
        use crate::diagnose::testutil::*;
        let c = Clock::fixed(0);
        let mut m = MeasuredConnects::default();
        let mut r = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
        r.syn_retrans = 1;
        r.established_ns = r.start_ns + 1_003_000_000;
        m.add(&ConnEvent::from_record(&r, &c).unwrap());
        let dest = ConnEvent::from_record(&r, &c).unwrap().remote;
        let pending = |to: &str, port: u16| {
            TcpBuilder::new()
                .state(State::SynSent)
                .timer(1, 1)
                .local(&format!("127.0.0.1:{port}"))
                .remote(Some(to))
                .build(u64::from(port))
        };
        let mut ctx = ctx();
        ctx.connects = Some(m);
        let same = format!("{}:{}", dest.ip(), dest.port());
        let f = only(
            run(
                vec![],
                vec![pending(&same, 40001), pending(&same, 40002)],
                &ctx,
            ),
            RuleId::Retransmissions,
        );
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].count, Some(3));
        assert_eq!(ev(&f[0], "pending_syn_sent"), 2.0);
        assert!(
            f[0].summary
                .ends_with("; 2 more were still waiting at the end of the interval"),
            "{}",
            f[0].summary
        );
        let f = only(
            run(vec![], vec![pending("198.51.100.7:80", 40003)], &ctx),
            RuleId::Retransmissions,
        );
        assert_eq!(f.len(), 2, "{f:#?}");
        assert!(f.iter().any(|f| f.socket.is_some()), "{f:#?}");
    }
}
