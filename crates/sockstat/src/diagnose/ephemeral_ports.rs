//! R7, `ephemeral-ports`: a client uses up the ephemeral port range towards one destination
//! (TIME-WAIT holds each port for 60 s), and `connect()` starts failing with EADDRNOTAVAIL,
//! which no kernel counter counts. Also the TIME-WAIT table overflowing or filling up, and a
//! range with no usable port.
//!
//! The verdict is the port report's ([`crate::ports::analyze`], what `sockstat ports` and the
//! exporter show), so the three never disagree: which sockets count (ephemeral local ports
//! outside `ip_local_reserved_ports`, not connections accepted from a local listener), the
//! thresholds (50% warning, 80% critical of the usable range, exact in integers) and the texts.
//! This rule turns its findings into diagnosis findings with their numbers as evidence.
//!
//! Case: doc/reference/cases.md#case-003-an-illumos-time-wait-review (ports recycled while still in TIME-WAIT), reproduced with a
//! 50-port range and 80 short connections: 30 EADDRNOTAVAIL, all 80 succeed with
//! `tcp_tw_reuse=1` (TcpExtTWRecycled +80).
//!
//! Grouped by (local address, remote address, remote port): a finding names the group, not
//! one socket (socket null).

use super::*;
use crate::ports::{self, PortsInput, PortsReport};

/// The port report over the rule's two samples, with the context's sysctls.
pub(super) fn report(input: &Input<'_>) -> PortsReport {
    let counters = match (&input.before.counters, &input.after.counters) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    ports::analyze(&PortsInput {
        snapshot: &input.after.snapshot,
        earlier: Some(&input.before.snapshot),
        interval_s: Some(input.ctx.interval_s),
        sysctls: &input.ctx.sysctls,
        counters,
        time_wait_total: input.after.time_wait_total,
        filter: None,
    })
    .in_zone(input.after.zone.clone())
}

/// Runs R7: the port report's findings of this rule (one analysis for `sockstat ports`, the
/// exporter and this rule), as they are.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    input
        .ports()
        .findings
        .iter()
        .filter(|f| f.rule == Some(RuleId::EphemeralPorts))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn clients(n: u16, tw: u16) -> Vec<Socket> {
        (0..n)
            .map(|i| {
                let local = format!("192.0.2.1:{}", 40000 + i);
                if i < tw {
                    time_wait(&local, "198.51.100.2:80")
                } else {
                    TcpBuilder::new()
                        .local(&local)
                        .remote(Some("198.51.100.2:80"))
                        .build(u64::from(i) + 1)
                }
            })
            .collect()
    }

    fn c(range: (u16, u16)) -> Context {
        let mut c = ctx();
        c.sysctls.ip_local_port_range = Some(range);
        c
    }

    #[test]
    fn experiment_h_thresholds() {
        // 100-port range: 50 in use warns (exactly 50%), 49 does not, 80 is critical. The
        // entries were there before the interval too (no rate to speak of).
        let steady = |n, tw| run(clients(n, tw), clients(n, tw), &c((40000, 40099)));
        let f = only(steady(50, 40), RuleId::EphemeralPorts);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(ev(&f[0], "time_wait"), 40.0);
        assert!(only(steady(49, 40), RuleId::EphemeralPorts).is_empty());
        let f = only(steady(80, 70), RuleId::EphemeralPorts);
        assert_eq!(f[0].severity, Severity::Critical);
        assert!(f[0].advice.contains("tcp_tw_reuse=1"), "{}", f[0].advice);
    }

    #[test]
    fn reserved_ports_and_accepted_connections_do_not_count() {
        // 100-port range with 20 reserved: 80 usable; 40 connections are 50%.
        let mut cx = c((40000, 40099));
        cx.sysctls.ip_local_reserved_ports =
            Some(crate::query::PortSet::from_ranges(vec![(40080, 40099)]));
        let f = only(
            run(clients(40, 0), clients(40, 0), &cx),
            RuleId::EphemeralPorts,
        );
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(ev(&f[0], "usable_ports"), 80.0);
        // The same sockets accepted by a local listener on their port are a server's, not a
        // client's: nothing to say about ephemeral ports.
        let mut socks: Vec<Socket> = (0..60u16)
            .map(|i| {
                TcpBuilder::new()
                    .local(&format!("192.0.2.1:{}", 40001))
                    .remote(Some(&format!("198.51.100.2:{}", 50000 + i)))
                    .build(u64::from(i) + 1)
            })
            .collect();
        socks.push(
            TcpBuilder::new()
                .state(State::Listen)
                .local("0.0.0.0:40001")
                .remote(None)
                .build(999),
        );
        assert!(only(
            run(vec![], socks, &c((40000, 40099))),
            RuleId::EphemeralPorts
        )
        .is_empty());
    }

    #[test]
    fn the_default_range_is_not_alarmed_by_a_few_connections() {
        assert!(only(
            run(vec![], clients(300, 250), &ctx()),
            RuleId::EphemeralPorts
        )
        .is_empty());
    }

    #[test]
    fn time_wait_overflow() {
        let mut b = sample(vec![]);
        let mut a = sample(vec![]);
        b.counters = Some(CounterSet::from_values([(
            "TcpExt",
            "TCPTimeWaitOverflow",
            0,
        )]));
        a.counters = Some(CounterSet::from_values([(
            "TcpExt",
            "TCPTimeWaitOverflow",
            3,
        )]));
        let f = evaluate(&b, &a, &ctx());
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].rule, Some(RuleId::EphemeralPorts));
        assert_eq!(f[0].severity, Severity::Critical);
        assert_eq!(ev(&f[0], "time_wait_overflow_delta"), 3.0);
    }

    #[test]
    fn the_port_report_the_diagnosis_and_the_exporter_agree() {
        // One zone sample, as the sampler gives it to `sockstat ports`, `sockstat diagnose`
        // and `sockstat serve`: 85 of 100 ports towards one destination (critical).
        let zone = |socks| {
            let mut z = sample(socks);
            z.sysctls = c((40000, 40099)).sysctls;
            z
        };
        let (b, a) = (zone(clients(85, 60)), zone(clients(85, 60)));
        let at = std::time::Instant::now();
        let wrap = |z: &ZoneSample, dt: u64| Sample {
            taken: at + std::time::Duration::from_secs(dt),
            zones: vec![z.clone()],
            warnings: vec![],
            zoned: false,
            holders_age: None,
        };
        let ports = crate::ports::analyze_zone(&a, Some(&b), Some(1.0), None);
        let diag = judge(&wrap(&b, 0), &wrap(&a, 1), &Options::default());
        let r7 = only(diag.findings, RuleId::EphemeralPorts);
        assert_eq!(ports.findings.len(), 1, "{:#?}", ports.findings);
        assert_eq!(r7.len(), 1, "{r7:#?}");
        assert_eq!(ports.findings[0].code, "ephemeral-ports-critical");
        // One finding, not two that agree: the diagnosis reports the port report's own.
        assert_eq!(r7[0], ports.findings[0]);
        let mut metrics = Vec::new();
        let own = crate::zone::Zone {
            name: "global".into(),
            kind: crate::zone::ZoneKind::Global,
            netns_inode: None,
            container_id: None,
            runtime: None,
            pod: None,
        };
        crate::render::metrics::write_snapshot(
            &crate::render::metrics::MetricsInput {
                zones: &[crate::render::metrics::ZoneMetrics {
                    sample: &a,
                    ports: Some(&ports),
                }],
                own: &own,
                top: 20,
                findings: Some(&r7),
                events: None,
            },
            &mut metrics,
        )
        .unwrap();
        let text = String::from_utf8(metrics).unwrap();
        assert!(
            text.contains(
                "sockstat_findings{rule=\"ephemeral-ports\",severity=\"critical\",zone=\"global\"} 1\n"
            ),
            "{text}"
        );
        let used = text
            .lines()
            .find(|l| l.starts_with("sockstat_ephemeral_ports_used{"))
            .expect("a destination's port use");
        assert!(used.ends_with(" 85"), "{used}");
    }
}
