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

    /// R10's finding: connects that waited for SYN retransmissions during the interval; `None`
    /// when none did.
    pub fn finding(&self, interval_s: f64) -> Option<Finding> {
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
            .text("slowest_destination_callers", procs.join(", "));
        Some(Finding {
            zone: None,
            rule: RuleId::Retransmissions,
            severity: if share >= SLOW_CONNECT_CRITICAL {
                Severity::Critical
            } else {
                Severity::Warning
            },
            socket: None,
            summary: format!(
                "{} of {} connects measured during the interval ({:.1}%) waited for SYN \
                 retransmissions ({} SYNs sent again{}), most to {} ({n}, by {})",
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
            ),
            evidence: ev,
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
        assert_eq!(m.finding(5.0), None, "fast connects are no finding");
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
        let f = m.finding(5.0).unwrap();
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
}
