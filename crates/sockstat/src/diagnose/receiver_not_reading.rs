//! R3, `receiver-not-reading`: an application stopped reading; its buffer is full and it
//! advertises a zero window; the sender waits on persist probes.
//!
//! Case: doc/reference/cases.md#receiver-not-reading (a receiver that never reads; the sender's probes go
//! unanswered and after ~tcp_retries2 probes the kernel aborts), reproduced in
//! doc/reference/calibration.md experiment F: sender `snd_wnd = 0`, timer 4 (persist), backoff 3-6;
//! receiver Recv-Q 90800 with rb 131072, rcv_wnd 0, skmem `d` growing.
//!
//! Sender side: `snd_wnd == 0`, persist timer, backoff >= 1. Receiver side: Recv-Q > 0 in both
//! samples, the application read nothing in between (Δbytes_received == ΔRecv-Q), and the
//! buffer is full (advertised window 0, or `r >= 0.9 rb`). The receiver-side finding names the
//! process that does not read.

use super::*;

/// `idiag_timer` of the persist (zero-window probe) timer.
pub const TIMER_PERSIST: u8 = 4;
/// Minimum persist backoff before the zero window counts as stuck.
pub const MIN_BACKOFF: u8 = 1;
/// `skmem r` at or above this share of `rb`: the receive buffer is full.
pub const RCVBUF_FULL: f64 = 0.9;

/// Runs R3 over every flow.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let mut out = vec![];
    for f in input.moving() {
        out.extend(sender_side(f, input));
        out.extend(receiver_side(f, input));
    }
    out
}

fn sender_side(flow: &Flow<'_>, input: &Input<'_>) -> Option<Finding> {
    let i = flow.info()?;
    let timer = flow.after.timer?;
    if i.snd_wnd()? != 0 || timer.kind != TIMER_PERSIST || i.backoff()? < MIN_BACKOFF {
        return None;
    }
    let probes = i.probes().unwrap_or(0);
    let since_before = flow.info0().and_then(TcpInfo::snd_wnd) == Some(0);
    let mut ev = Evidence::default();
    flow.common_evidence(&mut ev);
    ev.int("snd_wnd_bytes", 0u64)
        .int("send_q_bytes", u64::from(flow.after.send_q))
        .int("backoff", i.backoff().map(u64::from))
        .int("unanswered_probes", u64::from(probes))
        .int("persist_timer_expires_ms", u64::from(timer.expires_ms))
        .put(
            "zero_window_in_both_samples",
            Some(Value::from(since_before)),
        )
        .int(
            "win_probes_delta",
            input.counter_delta("TcpExt", "TCPWinProbe"),
        );
    let conn = fmt::connection(flow.after).to_string();
    let who = flow.owner_text();
    let unanswered = probes >= 1;
    let summary = format!(
        "{conn}{who}: the peer advertises a zero window{}; {} bytes are stuck in Send-Q{}",
        if since_before {
            format!(" for at least {:.1} s", flow.dt)
        } else {
            String::new()
        },
        flow.after.send_q,
        if unanswered {
            format!("; {probes} zero-window probes are unanswered")
        } else {
            String::new()
        }
    );
    let mut advice = if unanswered {
        "The peer does not answer zero-window probes (unreachable, or probes dropped): the kernel \
         aborts the connection with ETIMEDOUT after about net.ipv4.tcp_retries2 probes \
         (TcpExtTCPAbortOnTimeout), and the peer will see a RST. Check the path and the peer host."
            .to_string()
    } else {
        "The peer application is not reading from its socket. Find it on the peer (sockstat \
         diagnose there names it) and make it read, or close idle connections; on the sending \
         side use timeouts so a stuck peer cannot hold this connection forever."
            .to_string()
    };
    if since_before {
        // Stuck for the whole interval: dropping the connection is a fix the operator can apply
        // from here (doc/kill.md).
        advice.push_str(&format!(
            " To close it now from this host (its process gets ECONNABORTED, the peer a reset): {}",
            crate::text::kill_command::command_for(
                &crate::text::kill_command::Target::Connection(flow.after),
                input.after.zone.as_ref()
            )
        ));
    }
    Some(Finding {
        zone: None,
        rule: Some(RuleId::ReceiverNotReading),
        code: RuleId::ReceiverNotReading.id(),
        subject: Subject::Namespace,
        severity: if unanswered {
            Severity::Critical
        } else {
            Severity::Warning
        },
        socket: Some(flow.socket_ref()),
        summary,
        evidence: ev,
        advice,
        count: Some(1),
        confidence: Confidence::counted(
            "the peer advertises a zero window and the persist timer is probing it",
        ),
    })
}

fn receiver_side(flow: &Flow<'_>, input: &Input<'_>) -> Option<Finding> {
    let (q0, q1) = (flow.before.recv_q, flow.after.recv_q);
    if flow.after.state == State::Listen || q0 == 0 || q1 == 0 || q1 < q0 {
        return None;
    }
    let received = flow.d(TcpInfo::bytes_received)?;
    // What the application read: bytes that arrived minus the growth of the queue.
    let read = received
        .saturating_add(u64::from(q0))
        .saturating_sub(u64::from(q1));
    if read > 0 {
        return None;
    }
    let window = flow.after.tcp.as_ref()?.rcv_wnd_advertised();
    let mem = flow.after.memory.as_deref().copied();
    let full_by_mem = mem
        .is_some_and(|m| f64::from(m.rmem_alloc_bytes) >= RCVBUF_FULL * f64::from(m.rcvbuf_bytes));
    if window != Some(0) && !full_by_mem {
        return None;
    }
    let drops = match (
        flow.before.memory.as_deref().and_then(|m| m.drops),
        mem.and_then(|m| m.drops),
    ) {
        (Some(a), Some(b)) => Some(u64::from(b.saturating_sub(a))),
        _ => None,
    };
    let ns_drops: u64 = ["TCPZeroWindowDrop", "TCPRcvQDrop", "RcvPruned"]
        .iter()
        .filter_map(|n| input.counter_delta("TcpExt", n))
        .sum();
    let dropping = drops.is_some_and(|d| d > 0) || ns_drops > 0;
    let mut ev = Evidence::default();
    ev.num("interval_s", flow.dt)
        .int("recv_q_bytes", u64::from(q1))
        .int("recv_q_before_bytes", u64::from(q0))
        .int("read_bytes", read)
        .int("rcv_wnd_bytes", window.map(u64::from))
        .int(
            "rmem_alloc_bytes",
            mem.map(|m| u64::from(m.rmem_alloc_bytes)),
        )
        .int("rcvbuf_bytes", mem.map(|m| u64::from(m.rcvbuf_bytes)))
        .int("drops_delta", drops)
        .int("namespace_receive_drops_delta", Some(ns_drops));
    let conn = fmt::connection(flow.after).to_string();
    let r = flow.socket_ref();
    let reader = match r.owners.first() {
        Some(o) => format!("pid {} ({})", o.pid, o.command.as_deref().unwrap_or("?")),
        None => "the process holding it (not visible with these privileges)".into(),
    };
    Some(Finding {
        zone: None,
        rule: Some(RuleId::ReceiverNotReading),
        code: RuleId::ReceiverNotReading.id(),
        subject: Subject::Namespace,
        severity: if dropping {
            Severity::Critical
        } else {
            Severity::Warning
        },
        socket: Some(r),
        summary: format!(
            "{conn}: {reader} has not read from this socket for at least {:.1} s; {} bytes wait in \
             Recv-Q and the buffer is full{}",
            flow.dt,
            q1,
            if window == Some(0) {
                ", so it advertises a zero window"
            } else {
                ""
            }
        ),
        evidence: ev,
        advice: format!(
            "Fix it on this side: make {reader} read its socket (is it blocked, busy, or did it \
             forget this fd?). While it does not, the sender is stalled on zero-window probes{}.",
            if dropping {
                " and arriving data is being dropped"
            } else {
                ""
            }
        ),
        count: Some(1),
        confidence: Confidence::counted(format!(
            "{q1} bytes sat unread in Recv-Q at both samples and the application read nothing \
             in between"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn experiment_f_sender_side() {
        let b = TcpBuilder::new()
            .snd_wnd(0)
            .backoff(3)
            .timer(4, 3)
            .queues(0, 407_000);
        let f = run(vec![b.clone().build(1)], vec![b.clone().build(1)], &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].rule, Some(RuleId::ReceiverNotReading));
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(ev(&f[0], "send_q_bytes"), 407_000.0);
        assert!(
            f[0].advice.ends_with(": sockstat kill --cookie 1"),
            "{}",
            f[0].advice
        );
        // Unanswered probes are critical.
        let p = b.clone().probes(1);
        let f = run(vec![p.clone().build(1)], vec![p.build(1)], &ctx());
        assert_eq!(f[0].severity, Severity::Critical);
        // Backoff 0 (the boundary below MIN_BACKOFF), or another timer: nothing.
        let nb = b.clone().backoff(0);
        assert!(run(vec![nb.clone().build(1)], vec![nb.build(1)], &ctx()).is_empty());
        let rt = b.timer(1, 0);
        let f = run(vec![rt.clone().build(1)], vec![rt.build(1)], &ctx());
        assert!(only(f, RuleId::ReceiverNotReading).is_empty());
    }

    #[test]
    fn experiment_f_receiver_side_names_the_process() {
        let b = TcpBuilder::new().rcv_wnd(0).rcvbuf(131_072, 131_072);
        let s0 = b.clone().queues(90_800, 0).bytes_received(90_800).build(2);
        let s1 = b.queues(90_800, 0).bytes_received(90_800).build(2);
        let f = run(vec![s0], vec![s1], &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].summary.contains("pid 100 (app)"), "{}", f[0].summary);
        assert_eq!(ev(&f[0], "read_bytes"), 0.0);
    }

    #[test]
    fn a_reader_that_read_one_byte_is_reading() {
        let b = TcpBuilder::new().rcv_wnd(0).rcvbuf(131_072, 131_072);
        let s0 = b.clone().queues(90_800, 0).bytes_received(90_800).build(2);
        let s1 = b.queues(90_800, 0).bytes_received(90_801).build(2);
        assert!(run(vec![s0], vec![s1], &ctx()).is_empty());
    }

    #[test]
    fn buffer_full_boundary() {
        // Window open; r exactly 90% of rb fires, just under does not.
        let b = TcpBuilder::new().rcv_wnd(10_000).bytes_received(5000);
        let s0 = b.clone().queues(5000, 0).rcvbuf(100_000, 90_000).build(2);
        let s1 = b.clone().queues(5000, 0).rcvbuf(100_000, 90_000).build(2);
        assert_eq!(run(vec![s0], vec![s1], &ctx()).len(), 1);
        let s0 = b.clone().queues(5000, 0).rcvbuf(100_000, 89_999).build(2);
        let s1 = b.queues(5000, 0).rcvbuf(100_000, 89_999).build(2);
        assert!(run(vec![s0], vec![s1], &ctx()).is_empty());
    }

    #[test]
    fn drops_make_it_critical() {
        let b = TcpBuilder::new().rcv_wnd(0).rcvbuf(131_072, 131_072);
        let s0 = b.clone().queues(90_800, 0).bytes_received(90_800).build(2);
        let s1 = b.queues(90_800, 0).bytes_received(90_800).drops(3).build(2);
        let f = run(vec![s0], vec![s1], &ctx());
        assert_eq!(f[0].severity, Severity::Critical);
    }
}
