//! R9, `listen-overflow`: a listener's accept queue is full (the service does not call
//! accept() fast enough) or its SYN queue overflows; SYNs and handshakes are dropped.
//!
//! Case: doc/reference/calibration.md experiment I (listen backlog 2, never accept(), 10 connects
//! with syncookies: LISTEN Recv-Q 3 > Send-Q 2, ListenOverflows +7, TCPReqQFullDoCookies +7,
//! and 7 "ghost" connections the client believes are established); the drops behind
//! doc/reference/cases.md#case-003-an-illumos-time-wait-review: connect stalls.
//!
//! For a LISTEN socket Recv-Q is the accept queue and Send-Q the backlog; the kernel calls the
//! queue full when it holds more than the backlog (`sk_acceptq_is_full`).

use super::*;

/// Accept queue at or above this share of the backlog: the listener the namespace's
/// ListenOverflows belong to.
pub const QUEUE_SHARE: f64 = 0.9;

/// Runs R9.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let overflows = input.counter_delta("TcpExt", "ListenOverflows");
    let drops = input.counter_delta("TcpExt", "ListenDrops");
    let counted = overflows.unwrap_or(0) > 0 || drops.unwrap_or(0) > 0;
    let somaxconn = input.ctx.sysctls.somaxconn;
    let mut out = vec![];
    let mut attributed = false;
    for s in &input.after.snapshot.sockets {
        if s.proto != Proto::Tcp || s.state != State::Listen {
            continue;
        }
        let earlier = s.cookie.and_then(|c| input.before.by_cookie(c));
        let full = |x: &Socket| x.recv_q > 0 && x.recv_q >= x.send_q;
        let over = |x: &Socket| x.recv_q > x.send_q;
        let full_now = full(s);
        let full_both = full_now && earlier.is_some_and(full);
        let near_full = s.recv_q > 0 && f64::from(s.recv_q) >= QUEUE_SHARE * f64::from(s.send_q);
        let fires = (full_now && (over(s) || full_both || counted))
            || earlier.is_some_and(over)
            || (counted && near_full);
        if !fires {
            continue;
        }
        attributed |= counted;
        let snap = &input.after.snapshot;
        let r = SocketRef::of(s, snap);
        let service = match r.owners.first() {
            Some(o) => format!("pid {} ({})", o.pid, o.command.as_deref().unwrap_or("?")),
            None => "the service (its process is not visible with these privileges)".into(),
        };
        let mut ev = Evidence::default();
        ev.num("interval_s", input.ctx.interval_s)
            .int("accept_queue", u64::from(s.recv_q))
            .int("backlog", u64::from(s.send_q))
            .int("somaxconn", somaxconn)
            .int("listen_overflows_delta", overflows)
            .int("listen_drops_delta", drops)
            .int("tcp_syncookies", input.ctx.sysctls.tcp_syncookies);
        out.push(Finding {
            zone: None,
            rule: Some(RuleId::ListenOverflow),
            code: RuleId::ListenOverflow.id(),
            subject: Subject::Namespace,
            severity: if counted {
                Severity::Critical
            } else {
                Severity::Warning
            },
            socket: Some(r),
            summary: format!(
                "{}: the accept queue is full ({} queued, backlog {}): {service} does not call \
                 accept() fast enough{}",
                fmt::endpoint(&s.local),
                s.recv_q,
                s.send_q,
                if counted {
                    format!(
                        "; {} handshakes were dropped in {:.1} s",
                        overflows.or(drops).unwrap_or(0),
                        input.ctx.interval_s
                    )
                } else {
                    String::new()
                }
            ),
            evidence: ev,
            advice: format!(
                "Make {service} accept faster (more accepting threads, a non-blocking accept loop) \
                 or give it a larger backlog: the effective backlog is min(listen() argument, \
                 net.core.somaxconn = {}). With syncookies on, clients may believe they are \
                 connected while the server dropped the handshake (ghost connections).",
                somaxconn.map_or("?".into(), |v| v.to_string())
            ),
            count: Some(1),
            confidence: Confidence::counted(if counted {
                "the accept queue was at its backlog and the kernel counted dropped handshakes \
                 (ListenOverflows/ListenDrops)"
            } else {
                "the accept queue was at or over its backlog in both samples"
            }),
        });
    }
    if counted && !attributed {
        let mut ev = Evidence::default();
        ev.num("interval_s", input.ctx.interval_s)
            .int("listen_overflows_delta", overflows)
            .int("listen_drops_delta", drops)
            .int("somaxconn", somaxconn);
        out.push(Finding {
            zone: None,
            rule: Some(RuleId::ListenOverflow),
            code: RuleId::ListenOverflow.id(),
            subject: Subject::Namespace,
            severity: Severity::Warning,
            socket: None,
            summary: format!(
                "listeners in this namespace dropped {} connection attempts in {:.1} s \
                 (ListenOverflows {}, ListenDrops {}); no listener's queue was full when sampled",
                drops.or(overflows).unwrap_or(0),
                input.ctx.interval_s,
                overflows.unwrap_or(0),
                drops.unwrap_or(0)
            ),
            evidence: ev,
            advice: "A listener's accept queue overflows in bursts: sample with a shorter \
                     --interval to catch it, then accept faster or raise its backlog (and \
                     net.core.somaxconn)."
                .into(),
            count: None,
            confidence: Confidence::new(
                Certainty::Medium,
                vec![
                    "the kernel counted dropped handshakes, but no listener was full at \
                      either sample to name"
                        .into(),
                ],
            ),
        });
    }
    let req_drop = input.counter_delta("TcpExt", "TCPReqQFullDrop");
    let cookies = input
        .counter_delta("TcpExt", "TCPReqQFullDoCookies")
        .max(input.counter_delta("TcpExt", "SyncookiesSent"));
    if (req_drop.unwrap_or(0) > 0 || cookies.unwrap_or(0) > 0) && !out.is_empty() {
        // A listener's SYN queue is bounded by the same backlog as its accept queue: with a
        // full accept queue named, its SYN-queue overflow is the same cause, one finding.
        for f in &mut out {
            f.evidence
                .int("syn_queue_full_drops_delta", req_drop)
                .int("syncookies_sent_delta", cookies);
        }
    } else if req_drop.unwrap_or(0) > 0 || cookies.unwrap_or(0) > 0 {
        let mut ev = Evidence::default();
        ev.num("interval_s", input.ctx.interval_s)
            .int("syn_queue_full_drops_delta", req_drop)
            .int("syncookies_sent_delta", cookies)
            .int("tcp_syncookies", input.ctx.sysctls.tcp_syncookies);
        out.push(Finding {
            zone: None,
            rule: Some(RuleId::ListenOverflow),
            code: RuleId::ListenOverflow.id(),
            subject: Subject::Namespace,
            severity: Severity::Warning,
            socket: None,
            summary: format!(
                "the SYN queue overflowed: {} SYNs dropped, {} answered with syncookies in {:.1} s",
                req_drop.unwrap_or(0),
                cookies.unwrap_or(0),
                input.ctx.interval_s
            ),
            evidence: ev,
            advice: "A SYN flood, or a listener that does not accept: raise the listen backlog, \
                     net.core.somaxconn and net.ipv4.tcp_max_syn_backlog, and check the \
                     listeners' accept queues."
                .into(),
            count: None,
            confidence: Confidence::counted(
                "the kernel counted SYNs dropped or answered with cookies for a full SYN queue",
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn listener(recv_q: u32, backlog: u32) -> Socket {
        TcpBuilder::new()
            .state(State::Listen)
            .local("192.0.2.1:8080")
            .remote(None)
            .queues(recv_q, backlog)
            .build(60)
    }

    #[test]
    fn experiment_i_queue_over_the_backlog() {
        let f = run(vec![listener(3, 2)], vec![listener(3, 2)], &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].rule, Some(RuleId::ListenOverflow));
        assert!(f[0].summary.contains("pid 100 (app)"), "{}", f[0].summary);
        assert_eq!(ev(&f[0], "accept_queue"), 3.0);
    }

    #[test]
    fn a_prompt_acceptor_is_fine() {
        assert!(run(vec![listener(0, 128)], vec![listener(0, 128)], &ctx()).is_empty());
        // Momentarily at the backlog in one sample only, no drops: not a finding.
        assert!(run(vec![listener(0, 1)], vec![listener(1, 1)], &ctx()).is_empty());
        // An empty queue with backlog 0 is not "full".
        assert!(run(vec![listener(0, 0)], vec![listener(0, 0)], &ctx()).is_empty());
        // At the backlog in both samples: full.
        assert_eq!(
            run(vec![listener(1, 1)], vec![listener(1, 1)], &ctx()).len(),
            1
        );
    }

    #[test]
    fn counters_attribute_to_the_near_full_listener() {
        let with = |q: u32, overflows: i64| {
            let mut s = sample(vec![listener(q, 128)]);
            s.counters = Some(CounterSet::from_values([(
                "TcpExt",
                "ListenOverflows",
                overflows,
            )]));
            s
        };
        assert!(evaluate(&with(100, 5), &with(115, 5), &ctx()).is_empty());
        // 115 of 128 is below 0.9 x 128 = 115.2: a namespace-level finding.
        let f = evaluate(&with(100, 5), &with(115, 9), &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].socket.is_none());
        // 116 is at or above it: attributed to the listener, critical (drops counted).
        let f = evaluate(&with(100, 5), &with(116, 9), &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].socket.is_some());
        assert_eq!(f[0].severity, Severity::Critical);
    }

    #[test]
    fn syn_queue() {
        let mut b = sample(vec![]);
        let mut a = sample(vec![]);
        b.counters = Some(CounterSet::from_values([(
            "TcpExt",
            "TCPReqQFullDoCookies",
            0,
        )]));
        a.counters = Some(CounterSet::from_values([(
            "TcpExt",
            "TCPReqQFullDoCookies",
            7,
        )]));
        let f = evaluate(&b, &a, &ctx());
        assert_eq!(f.len(), 1);
        assert_eq!(ev(&f[0], "syncookies_sent_delta"), 7.0);
    }
}
