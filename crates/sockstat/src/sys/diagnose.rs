//! Gathering for the diagnosis rules (`crate::diagnose` is pure and reads nothing): the sysctls
//! and counters of a namespace, the global TCP page count, the page size, a [`Sample`], and
//! [`run`], the whole two-sample diagnosis of the connections a query selects.

use std::time::{Duration, Instant};

use crate::diagnose::{self, Context, Counters, Report, Sample, Sysctls};
use crate::sys::counters::ProcPaths;
use crate::{Error, Query};

/// Samples the TCP connections `query` selects twice, `interval` apart, with this namespace's
/// counters and sysctls, and judges them with every rule: what `sockstat diagnose` does for the
/// namespace it runs in. `bandwidth` (bytes per second) sizes buffers for a path of that speed.
///
/// The query is narrowed to TCP with `tcp_info`, memory and congestion details; the first
/// sample skips the owner scan (findings name the holders of the second).
pub fn run(query: &Query, interval: Duration, bandwidth: Option<f64>) -> Result<Report, Error> {
    let mut q = query.clone();
    q.narrow_to_tcp_internals()?;
    let mut first = q.clone();
    first.owners = q.filters_owners() && q.owners;
    let t0 = Instant::now();
    let before = sample(&first)?;
    std::thread::sleep(interval.saturating_sub(t0.elapsed()));
    let t1 = Instant::now();
    let after = sample(&q)?;
    let ctx = Context {
        interval_s: (t1 - t0).as_secs_f64(),
        sysctls: read_sysctls(&ProcPaths::new(&q.proc_root)),
        bandwidth,
        page_size: page_size(),
        buf_locks: Default::default(),
    };
    Ok(diagnose::diagnose(&before, &after, &ctx))
}

/// Parses three numbers (`tcp_wmem`, `tcp_rmem`, `tcp_mem`).
fn triple(t: &str) -> Option<[u64; 3]> {
    let v: Vec<u64> = t
        .split_ascii_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

/// Reads the sysctls the rules use from `paths` (the sysctl tree read from this thread, whose
/// namespace gives the per-namespace values).
pub fn read_sysctls(proc_root: &ProcPaths) -> Sysctls {
    use super::sysctl::{parse_port_range, parse_reserved_ports, read_text};
    let num = |n: &str| read_text(proc_root, n).and_then(|t| t.parse::<u64>().ok());
    let three = |n: &str| read_text(proc_root, n).as_deref().and_then(triple);
    Sysctls {
        tcp_wmem: three("net/ipv4/tcp_wmem"),
        tcp_rmem: three("net/ipv4/tcp_rmem"),
        wmem_max: num("net/core/wmem_max"),
        rmem_max: num("net/core/rmem_max"),
        tcp_mem: three("net/ipv4/tcp_mem"),
        tcp_window_scaling: num("net/ipv4/tcp_window_scaling"),
        tcp_moderate_rcvbuf: num("net/ipv4/tcp_moderate_rcvbuf"),
        tcp_timestamps: num("net/ipv4/tcp_timestamps"),
        tcp_tw_reuse: num("net/ipv4/tcp_tw_reuse"),
        ip_local_port_range: read_text(proc_root, "net/ipv4/ip_local_port_range")
            .as_deref()
            .and_then(parse_port_range),
        ip_local_reserved_ports: read_text(proc_root, "net/ipv4/ip_local_reserved_ports")
            .as_deref()
            .and_then(parse_reserved_ports)
            .map(|p| p.ranges().to_vec())
            .unwrap_or_default(),
        somaxconn: num("net/core/somaxconn"),
        tcp_syncookies: num("net/ipv4/tcp_syncookies"),
        tcp_max_tw_buckets: num("net/ipv4/tcp_max_tw_buckets"),
    }
}

/// The page size from the auxiliary vector (`AT_PAGESZ`), 4096 when unreadable.
pub fn page_size() -> u64 {
    super::auxv(super::AT_PAGESZ).unwrap_or(4096)
}

/// The counters under `paths`, by `Group.Name`; empty when unreadable, which the diagnosis
/// reports as its `counters-unavailable` warning.
pub fn read_counters(paths: &ProcPaths) -> Counters {
    match crate::sys::counters::read(paths) {
        Ok(r) => Counters::from_triples(
            r.set
                .iter()
                .map(|(n, v)| (n.group.as_str(), n.name.as_str(), v)),
        ),
        Err(_) => Counters::default(),
    }
}

/// Pages TCP uses, system-wide (`mem` of the `TCP:` line of `<net>/sockstat`; global, so the
/// namespace it is read from does not matter).
pub fn tcp_mem_pages(paths: &ProcPaths) -> Option<u64> {
    std::fs::read_to_string(paths.net.join("sockstat"))
        .ok()
        .and_then(|t| super::counters::sockstat_tcp_field(&t, "mem"))
}

/// One sample for the rules: the sockets `q` selects (gathered as [`crate::collect`] does),
/// the counters of the namespace under `q.proc_root`, and the global TCP page count.
pub fn sample(q: &Query) -> Result<Sample, Error> {
    let snapshot = crate::collect(q)?;
    let paths = ProcPaths::new(&q.proc_root);
    Ok(Sample {
        snapshot,
        counters: read_counters(&paths),
        tcp_mem_pages: tcp_mem_pages(&paths),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triples() {
        assert_eq!(
            triple("4096\t16384\t4194304\n"),
            Some([4096, 16384, 4_194_304])
        );
        assert_eq!(triple("1 2"), None);
    }

    #[test]
    fn page_size_is_sane() {
        let p = page_size();
        assert!(p.is_power_of_two() && p >= 4096, "{p}");
    }
}
