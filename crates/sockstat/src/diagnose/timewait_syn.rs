//! R8, `timewait-syn-rejected`: SYNs arrive for 4-tuples this (server) host still holds in
//! TIME-WAIT and are not accepted: clients see connect() stall for 1 s, 3 s, 7 s.
//!
//! Case: doc/reference/cases.md#case-003-an-illumos-time-wait-review (an illumos review: ports recycled while the server still held them
//! in TIME-WAIT, 1.1-3.4 s connect stalls, MIB counters as the evidence), in its Linux form from
//! doc/reference/calibration.md#r8-time-wait-syn: Linux takes a SYN for a TIME-WAIT tuple only when its
//! sequence number is above the old `rcv_nxt` or its timestamp is newer
//! (`tcp_timewait_state_process`); otherwise it answers with an ACK (rate-limited:
//! TCPACKSkippedTimeWait) or, for a PAWS failure, drops it (PAWSTimewait, 6.16+; PAWSEstab before).
//!
//! A namespace finding (socket null) naming the listening port with the most TIME-WAIT entries.
//! The verdict is the port report's ([`crate::ports`]), so `sockstat ports` says the same.

use super::*;

/// Runs R8: the port report's `time-wait-syn-rejects` finding (one analysis for `sockstat
/// ports`, the exporter and this rule), with the SYN retransmits the diagnosis measured over
/// the same interval added to its evidence.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let Some(f) = input
        .ports()
        .findings
        .iter()
        .find(|f| f.rule == Some(RuleId::TimewaitSynRejected))
    else {
        return vec![];
    };
    let mut f = f.clone();
    f.evidence.int(
        "syn_retrans_delta",
        input.counter_delta("TcpExt", "TCPSynRetrans"),
    );
    vec![f]
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
        b.counters = Some(CounterSet::from_values([
            ("TcpExt", "TCPACKSkippedTimeWait", 10),
            ("TcpExt", "PAWSTimewait", 0),
        ]));
        a.counters = b.counters.clone();
        assert!(evaluate(&b, &a, &ctx()).is_empty());
        a.counters = Some(CounterSet::from_values([
            ("TcpExt", "TCPACKSkippedTimeWait", 11),
            ("TcpExt", "PAWSTimewait", 0),
        ]));
        let f = evaluate(&b, &a, &ctx());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].rule, Some(RuleId::TimewaitSynRejected));
        assert_eq!(ev(&f[0], "busiest_port"), 80.0);
        assert_eq!(ev(&f[0], "busiest_port_time_wait"), 2.0);
    }

    #[test]
    fn old_kernels_need_server_time_wait_with_paws_estab() {
        let mut b = sample(vec![]);
        b.counters = Some(CounterSet::from_values([("TcpExt", "PAWSEstab", 0)]));
        let mut a = sample(vec![listener()]);
        a.counters = Some(CounterSet::from_values([("TcpExt", "PAWSEstab", 2)]));
        assert!(evaluate(&b, &a, &ctx()).is_empty());
        a.snapshot
            .sockets
            .push(time_wait("192.0.2.1:80", "198.51.100.9:40001"));
        assert_eq!(evaluate(&b, &a, &ctx()).len(), 1);
    }
}
