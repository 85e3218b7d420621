//! R7, `ephemeral-ports`: a client uses up the ephemeral port range towards one destination
//! (TIME-WAIT holds each port for 60 s), and `connect()` starts failing with EADDRNOTAVAIL,
//! which no kernel counter counts. Also the TIME-WAIT table overflowing.
//!
//! Case: seed 003 (ports recycled while still in TIME-WAIT), reproduced in research/kernel.md
//! §3.2 experiment H: a 50-port range, 80 short connections, 30 EADDRNOTAVAIL; with
//! `tcp_tw_reuse=1` all 80 succeed (TcpExtTWRecycled +80).
//!
//! Grouped by (local address, remote address, remote port): a findings names the group, not one
//! socket (socket null).

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::*;

/// Share of the usable range in use towards one destination that warns.
pub const USAGE_WARNING: f64 = 0.5;
/// ... and that is critical.
pub const USAGE_CRITICAL: f64 = 0.8;
/// TIME-WAIT lasts a fixed 60 s (`TCP_TIMEWAIT_LEN`; `tcp_fin_timeout` does not shorten it).
pub const TIME_WAIT_S: f64 = 60.0;

/// Ports connect() may pick: the range minus the reserved ports inside it.
pub fn usable_ports(range: (u16, u16), reserved: &[(u16, u16)]) -> u64 {
    let (lo, hi) = range;
    if hi < lo {
        return 0;
    }
    let total = u64::from(hi - lo) + 1;
    let taken: u64 = reserved
        .iter()
        .map(|&(a, b)| {
            let (a, b) = (a.max(lo), b.min(hi));
            if b >= a {
                u64::from(b - a) + 1
            } else {
                0
            }
        })
        .sum();
    total.saturating_sub(taken)
}

/// Runs R7.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let s = &input.ctx.sysctls;
    let mut out = vec![];
    let tw_created = input.counter_delta("TcpExt", "TW");
    if let Some(range) = s.ip_local_port_range {
        let n = usable_ports(range, &s.ip_local_reserved_ports);
        let mut groups: BTreeMap<(IpAddr, IpAddr, u16), (u64, u64)> = BTreeMap::new();
        for sock in &input.after.snapshot.sockets {
            if sock.proto != Proto::Tcp || sock.state == State::Listen {
                continue;
            }
            let (
                Some(Endpoint::Inet { addr: la, port: lp }),
                Some(Endpoint::Inet { addr: ra, port: rp }),
            ) = (Some(&sock.local), sock.remote.as_ref())
            else {
                continue;
            };
            if *lp < range.0 || *lp > range.1 {
                continue;
            }
            let e = groups.entry((*la, *ra, *rp)).or_default();
            e.0 += 1;
            if sock.state == State::TimeWait {
                e.1 += 1;
            }
        }
        for ((la, ra, rp), (count, tw)) in groups {
            if n == 0 {
                break;
            }
            let usage = count as f64 / n as f64;
            let severity = if usage >= USAGE_CRITICAL {
                Severity::Critical
            } else if usage >= USAGE_WARNING {
                Severity::Warning
            } else {
                continue;
            };
            let dest = endpoint_text(&Endpoint::Inet { addr: ra, port: rp });
            let src = match la {
                IpAddr::V4(a) => a.to_string(),
                IpAddr::V6(a) => format!("[{a}]"),
            };
            let mut ev = Evidence::default();
            ev.text("source", src.clone())
                .text("destination", dest.clone())
                .int("ports_in_use", count)
                .int("time_wait", tw)
                .int("usable_ports", n)
                .num("usage_share", usage)
                .text("port_range", format!("{}-{}", range.0, range.1))
                .num("sustainable_connections_per_sec", n as f64 / TIME_WAIT_S)
                .num(
                    "time_wait_created_per_sec",
                    tw_created.map(|d| d as f64 / input.ctx.interval_s.max(1e-9)),
                )
                .int("tcp_tw_reuse", s.tcp_tw_reuse)
                .int(
                    "tw_recycled_delta",
                    input.counter_delta("TcpExt", "TWRecycled"),
                );
            out.push(Finding {
                zone: None,
                rule: RuleId::EphemeralPorts,
                severity,
                socket: None,
                summary: format!(
                    "{src} -> {dest} uses {count} of {n} ephemeral ports ({:.0}%, {tw} in TIME-WAIT): \
                     at more than {:.0} new connections/s the range runs out and connect() fails \
                     with EADDRNOTAVAIL, which no kernel counter shows",
                    usage * 100.0,
                    n as f64 / TIME_WAIT_S
                ),
                evidence: ev,
                advice: format!(
                    "Reuse connections (pooling, keep-alive) instead of opening one per request; \
                     let the server close first so TIME-WAIT stays on its side; {}widen \
                     net.ipv4.ip_local_port_range (now {}-{}); or spread over more source \
                     addresses or destination ports.",
                    if s.tcp_tw_reuse == Some(1) {
                        String::new()
                    } else {
                        format!(
                            "set net.ipv4.tcp_tw_reuse=1 (now {}; needs timestamps) so connect() \
                             may reuse TIME-WAIT ports; ",
                            s.tcp_tw_reuse.map_or("unknown".into(), |v| v.to_string())
                        )
                    },
                    range.0,
                    range.1
                ),
            });
        }
    }
    if let Some(d) = input
        .counter_delta("TcpExt", "TCPTimeWaitOverflow")
        .filter(|&d| d > 0)
    {
        let mut ev = Evidence::default();
        ev.int("time_wait_overflow_delta", d)
            .int("tcp_max_tw_buckets", s.tcp_max_tw_buckets);
        out.push(Finding {
            zone: None,
            rule: RuleId::EphemeralPorts,
            severity: Severity::Warning,
            socket: None,
            summary: format!(
                "the TIME-WAIT table is full (net.ipv4.tcp_max_tw_buckets = {}): {d} connections \
                 were closed without TIME-WAIT protection during the interval",
                s.tcp_max_tw_buckets.map_or("?".into(), |v| v.to_string())
            ),
            evidence: ev,
            advice: "Open fewer short connections (pooling, keep-alive), or raise \
                     net.ipv4.tcp_max_tw_buckets."
                .into(),
        });
    }
    out
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
    fn usable_range_minus_reserved() {
        assert_eq!(usable_ports((32768, 60999), &[]), 28232);
        assert_eq!(usable_ports((100, 199), &[(150, 159), (190, 300)]), 80);
        assert_eq!(usable_ports((200, 100), &[]), 0);
    }

    #[test]
    fn experiment_h_thresholds() {
        // 100-port range: 50 in use warns (exactly 50%), 49 does not, 80 is critical.
        let f = run(vec![], clients(50, 40), &c((40000, 40099)));
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(ev(&f[0], "time_wait"), 40.0);
        assert!(run(vec![], clients(49, 40), &c((40000, 40099))).is_empty());
        let f = run(vec![], clients(80, 70), &c((40000, 40099)));
        assert_eq!(f[0].severity, Severity::Critical);
        assert!(f[0].advice.contains("tcp_tw_reuse=1"));
    }

    #[test]
    fn the_default_range_is_not_alarmed_by_a_few_connections() {
        assert!(run(vec![], clients(300, 250), &ctx()).is_empty());
    }

    #[test]
    fn time_wait_overflow() {
        let mut b = sample(vec![]);
        let mut a = sample(vec![]);
        b.counters = Counters::from_triples([("TcpExt", "TCPTimeWaitOverflow", 0)]);
        a.counters = Counters::from_triples([("TcpExt", "TCPTimeWaitOverflow", 3)]);
        let f = evaluate(&b, &a, &ctx());
        assert_eq!(f.len(), 1);
        assert_eq!(ev(&f[0], "time_wait_overflow_delta"), 3.0);
    }
}
