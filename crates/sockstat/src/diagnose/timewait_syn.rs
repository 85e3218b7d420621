//! R8, `timewait-syn-rejected`: SYNs arrive for 4-tuples this (server) host still holds in
//! TIME-WAIT and are not accepted: clients see connect() stall for 1 s, 3 s, 7 s.
//!
//! Case: seed 003 (an illumos review: ports recycled while the server still held them in
//! TIME-WAIT, 1.1-3.4 s connect stalls, MIB counters as the evidence), in its Linux form from
//! research/kernel.md §3.3 R8: Linux takes a SYN for a TIME-WAIT tuple only when its sequence
//! number is above the old `rcv_nxt` or its timestamp is newer (`tcp_timewait_state_process`);
//! otherwise it answers with an ACK (rate-limited: TCPACKSkippedTimeWait) or, for a PAWS
//! failure, drops it (PAWSTimewait, 6.16+; PAWSEstab before).
//!
//! A namespace finding (socket null) naming the listening port with the most TIME-WAIT entries.

use std::collections::BTreeMap;

use super::*;

/// Runs R8.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let paws_tw = input.counter_delta("TcpExt", "PAWSTimewait");
    let skipped = input.counter_delta("TcpExt", "TCPACKSkippedTimeWait");
    // Before 6.16 TIME-WAIT PAWS rejects were counted with the established ones.
    let paws_estab = if paws_tw.is_none() {
        input.counter_delta("TcpExt", "PAWSEstab")
    } else {
        None
    };
    let snap = &input.after.snapshot;
    let listen_ports: Vec<u16> = snap
        .sockets
        .iter()
        .filter(|s| s.proto == Proto::Tcp && s.state == State::Listen)
        .filter_map(|s| s.local.port())
        .collect();
    let mut tw_by_port: BTreeMap<u16, u64> = BTreeMap::new();
    for s in &snap.sockets {
        if s.proto == Proto::Tcp && s.state == State::TimeWait {
            if let Some(p) = s.local.port().filter(|p| listen_ports.contains(p)) {
                *tw_by_port.entry(p).or_default() += 1;
            }
        }
    }
    let server_tw: u64 = tw_by_port.values().sum();
    let fired = paws_tw.is_some_and(|d| d > 0)
        || skipped.is_some_and(|d| d > 0)
        || (paws_estab.is_some_and(|d| d > 0) && server_tw > 0);
    if !fired {
        return vec![];
    }
    let busiest = tw_by_port.iter().max_by_key(|(_, n)| **n);
    let mut ev = Evidence::default();
    ev.num("interval_s", input.ctx.interval_s)
        .int("paws_timewait_delta", paws_tw)
        .int("ack_skipped_timewait_delta", skipped)
        .int("paws_estab_delta", paws_estab)
        .int("server_time_wait", server_tw)
        .int("busiest_port", busiest.map(|(p, _)| u64::from(*p)))
        .int("busiest_port_time_wait", busiest.map(|(_, n)| *n))
        .int("tcp_timestamps", input.ctx.sysctls.tcp_timestamps)
        .int(
            "syn_retrans_delta",
            input.counter_delta("TcpExt", "TCPSynRetrans"),
        );
    vec![Finding {
        zone: None,
        rule: RuleId::TimewaitSynRejected,
        severity: Severity::Warning,
        socket: None,
        summary: format!(
            "SYNs arrived for connections this host still holds in TIME-WAIT and were rejected \
             ({} PAWS, {} rate-limited ACKs){}: those clients' connect() stalls for 1 s, 3 s, 7 s",
            paws_tw.or(paws_estab).unwrap_or(0),
            skipped.unwrap_or(0),
            match busiest {
                Some((p, n)) => format!("; port {p} holds {n} TIME-WAIT entries"),
                None => String::new(),
            }
        ),
        evidence: ev,
        advice: "Clients reuse source ports while this server still holds them in TIME-WAIT \
                 (the server closes first). Keep TCP timestamps on at both ends \
                 (net.ipv4.tcp_timestamps=1) so a newer SYN is accepted; let clients close \
                 first; use keep-alive or pooling; or widen the clients' port range so ports come \
                 back less often."
            .into(),
    }]
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn listener() -> Socket {
        TcpBuilder::new()
            .state(State::Listen)
            .local("192.0.2.1:80")
            .remote(None)
            .build(50)
    }

    #[test]
    fn skipped_acks_fire_and_name_the_port() {
        let mut after = vec![listener()];
        after.push(time_wait("192.0.2.1:80", "198.51.100.9:40001"));
        after.push(time_wait("192.0.2.1:80", "198.51.100.9:40002"));
        let mut b = sample(vec![]);
        let mut a = sample(after);
        b.counters = Counters::from_triples([
            ("TcpExt", "TCPACKSkippedTimeWait", 10),
            ("TcpExt", "PAWSTimewait", 0),
        ]);
        a.counters = b.counters.clone();
        assert!(evaluate(&b, &a, &ctx()).is_empty());
        a.counters = Counters::from_triples([
            ("TcpExt", "TCPACKSkippedTimeWait", 11),
            ("TcpExt", "PAWSTimewait", 0),
        ]);
        let f = evaluate(&b, &a, &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].rule, RuleId::TimewaitSynRejected);
        assert_eq!(ev(&f[0], "busiest_port"), 80.0);
        assert_eq!(ev(&f[0], "busiest_port_time_wait"), 2.0);
    }

    #[test]
    fn old_kernels_need_server_time_wait_with_paws_estab() {
        let mut b = sample(vec![]);
        b.counters = Counters::from_triples([("TcpExt", "PAWSEstab", 0)]);
        let mut a = sample(vec![listener()]);
        a.counters = Counters::from_triples([("TcpExt", "PAWSEstab", 2)]);
        assert!(evaluate(&b, &a, &ctx()).is_empty());
        a.snapshot
            .sockets
            .push(time_wait("192.0.2.1:80", "198.51.100.9:40001"));
        assert_eq!(evaluate(&b, &a, &ctx()).len(), 1);
    }
}
