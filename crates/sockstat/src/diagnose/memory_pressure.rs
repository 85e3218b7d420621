//! R6, `memory-pressure`: system-wide TCP memory at or above `net.ipv4.tcp_mem`'s pressure
//! threshold (socket buffers are shrunk, send buffers stop growing) or its hard limit (new
//! data is dropped). A host finding (socket null), with the sockets holding the most memory.
//!
//! Case: doc/reference/cases.md#tcp-memory; doc/reference/calibration.md#r6-memory-pressure. `tcp_mem` and the TCP page
//! count (`/proc/net/sockstat` "TCP: ... mem N") are global, not per namespace.

use super::*;

/// How many sockets to name as the largest consumers.
pub const TOP_CONSUMERS: usize = 3;

/// Runs R6.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    let s = &input.ctx.sysctls;
    let pages = input.after.tcp_mem_pages;
    let level = match (pages, s.tcp_mem) {
        (Some(p), Some(m)) if p >= m[2] => Some(Severity::Critical),
        (Some(p), Some(m)) if p >= m[1] => Some(Severity::Warning),
        _ => None,
    };
    let pressures = input.counter_delta("TcpExt", "TCPMemoryPressures");
    let chrono = input.counter_delta("TcpExt", "TCPMemoryPressuresChrono");
    let aborts = input.counter_delta("TcpExt", "TCPAbortOnMemory");
    let by_counters = if aborts.is_some_and(|a| a > 0) {
        Some(Severity::Critical)
    } else if pressures.is_some_and(|p| p > 0) || chrono.is_some_and(|c| c > 0) {
        Some(Severity::Warning)
    } else {
        None
    };
    let Some(severity) = level.max(by_counters) else {
        return vec![];
    };
    let mut ev = Evidence::default();
    ev.int("tcp_mem_pages", pages)
        .int("tcp_mem_pressure_pages", s.tcp_mem.map(|m| m[1]))
        .int("tcp_mem_high_pages", s.tcp_mem.map(|m| m[2]))
        .int("page_size_bytes", input.ctx.page_size)
        .int("memory_pressures_delta", pressures)
        .int("memory_pressure_ms_delta", chrono)
        .int("abort_on_memory_delta", aborts);
    for (name, key) in [
        ("PruneCalled", "prune_called_delta"),
        ("RcvPruned", "rcv_pruned_delta"),
        ("OfoPruned", "ofo_pruned_delta"),
    ] {
        ev.int(key, input.counter_delta("TcpExt", name));
    }
    let snap = &input.after.snapshot;
    let mut users: Vec<(&Socket, u64)> = snap
        .sockets
        .iter()
        .filter_map(|s| {
            let m = *s.memory.as_deref()?;
            let b = u64::from(m.rmem_alloc_bytes)
                + u64::from(m.wmem_queued_bytes)
                + u64::from(m.fwd_alloc_bytes);
            (b > 0).then_some((s, b))
        })
        .collect();
    users.sort_by_key(|u| std::cmp::Reverse(u.1));
    let top: Vec<Value> = users
        .iter()
        .take(TOP_CONSUMERS)
        .map(|(s, b)| {
            let r = SocketRef::of(s, snap);
            serde_json::json!({
                "connection": fmt::connection(s).to_string(),
                "bytes": b,
                "recv_q_bytes": s.recv_q,
                "pids": r.owners.iter().map(|o| o.pid).collect::<Vec<_>>(),
                "commands": r.owners.iter().filter_map(|o| o.command.clone()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let top_text: Vec<String> = users
        .iter()
        .take(TOP_CONSUMERS)
        .map(|(s, b)| format!("{} ({})", fmt::connection(s), fmt::bytes(*b as f64)))
        .collect();
    ev.put("top_consumers", Some(Value::from(top)));
    let what = match (pages, s.tcp_mem) {
        (Some(p), Some(m)) => format!(
            "TCP uses {p} pages ({}) system-wide; net.ipv4.tcp_mem is \"{} {} {}\" (pressure at {}, \
             hard limit at {})",
            fmt::bytes((p * input.ctx.page_size) as f64),
            m[0],
            m[1],
            m[2],
            m[1],
            m[2]
        ),
        _ => "TCP entered memory pressure during the interval".into(),
    };
    vec![Finding {
        zone: None,
        rule: Some(RuleId::MemoryPressure),
        code: RuleId::MemoryPressure.id(),
        subject: Subject::Namespace,
        severity,
        socket: None,
        summary: format!(
            "{what}: socket buffers are being shrunk{}",
            if severity == Severity::Critical {
                " and new data is dropped"
            } else {
                ""
            }
        ),
        evidence: ev,
        advice: format!(
            "Raise net.ipv4.tcp_mem (in pages) if the host has the memory, or find the sockets \
             that hold it: usually applications that stopped reading (see receiver-not-reading).{}",
            if top_text.is_empty() {
                String::new()
            } else {
                format!(" Largest here: {}.", top_text.join(", "))
            }
        ),
        count: None,
        confidence: Confidence::counted(
            "the TCP page count against net.ipv4.tcp_mem, or the kernel's own pressure counters",
        ),
    }]
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn with_pages(pages: u64) -> Vec<Finding> {
        let mut a = sample(vec![TcpBuilder::new().rcvbuf(131_072, 90_000).build(1)]);
        a.tcp_mem_pages = Some(pages);
        let b = sample(vec![]);
        evaluate(&b, &a, &ctx())
    }

    #[test]
    fn thresholds() {
        assert!(with_pages(383_867).is_empty());
        let f = with_pages(383_868);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(f[0].socket.is_none());
        let top = f[0].evidence.get("top_consumers").unwrap();
        assert_eq!(top[0]["bytes"], 90_000);
        assert_eq!(top[0]["pids"][0], 100);
        assert_eq!(with_pages(575_802)[0].severity, Severity::Critical);
    }

    #[test]
    fn counters_alone() {
        let mut b = sample(vec![]);
        let mut a = sample(vec![]);
        b.counters = Some(CounterSet::from_values([(
            "TcpExt",
            "TCPMemoryPressures",
            4,
        )]));
        a.counters = Some(CounterSet::from_values([(
            "TcpExt",
            "TCPMemoryPressures",
            4,
        )]));
        assert!(evaluate(&b, &a, &ctx()).is_empty());
        a.counters = Some(CounterSet::from_values([(
            "TcpExt",
            "TCPMemoryPressures",
            5,
        )]));
        let f = evaluate(&b, &a, &ctx());
        assert_eq!(f[0].rule, Some(RuleId::MemoryPressure));
        assert_eq!(ev(&f[0], "memory_pressures_delta"), 1.0);
    }
}
