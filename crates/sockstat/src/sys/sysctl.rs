//! Reading the sysctls the port and TIME-WAIT analysis needs (research/kernel.md §3.5), from
//! the sysctl tree [`ProcPaths::sys`] names (`/proc/sys`, or a fake one in tests). Every value
//! is per network namespace (that of the reading thread) unless noted. A sysctl this kernel
//! lacks, or that cannot be read for this namespace, is `None`.

use serde::Serialize;

use crate::query::PortSet;
pub use crate::sys::counters::ProcPaths;

/// The TCP port and TIME-WAIT settings of one network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PortSysctls {
    /// `net.ipv4.ip_local_port_range`: the ephemeral range, inclusive.
    pub ip_local_port_range: Option<(u16, u16)>,
    /// `net.ipv4.ip_local_reserved_ports`: ports connect() never picks (empty when unset).
    #[serde(skip)]
    pub ip_local_reserved_ports: Option<PortSet>,
    /// `net.ipv4.tcp_tw_reuse`: 0 off, 1 on, 2 loopback only (the default).
    pub tcp_tw_reuse: Option<u32>,
    /// `net.ipv4.tcp_tw_reuse_delay`, ms (newer than 6.12).
    pub tcp_tw_reuse_delay_ms: Option<u64>,
    /// `net.ipv4.tcp_timestamps`: 0 off, 1 on with random offsets, 2 on without.
    pub tcp_timestamps: Option<u32>,
    /// `net.ipv4.tcp_max_tw_buckets`: the TIME-WAIT table limit.
    pub tcp_max_tw_buckets: Option<u64>,
}

/// Reads one sysctl (`"net/ipv4/tcp_tw_reuse"`) as trimmed text; `None` when absent or
/// unreadable, or when `paths` has no sysctl tree.
pub fn read_text(paths: &ProcPaths, name: &str) -> Option<String> {
    std::fs::read_to_string(paths.sys.as_ref()?.join(name))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Parses `ip_local_port_range` text (`"32768\t60999"`). A range written backwards is
/// returned as is; the analysis treats it as empty, as the kernel refuses to set one.
pub fn parse_port_range(text: &str) -> Option<(u16, u16)> {
    let mut it = text.split_ascii_whitespace();
    let lo = it.next()?.parse().ok()?;
    let hi = it.next()?.parse().ok()?;
    Some((lo, hi))
}

/// Parses `ip_local_reserved_ports` text (`"8000-8100,9000"`, or empty when unset).
pub fn parse_reserved_ports(text: &str) -> Option<PortSet> {
    let t = text.trim();
    if t.is_empty() {
        return Some(PortSet::default());
    }
    PortSet::parse(t).ok()
}

/// Reads the port and TIME-WAIT sysctls.
pub fn read_port_sysctls(paths: &ProcPaths) -> PortSysctls {
    let num = |name: &str| read_text(paths, name).and_then(|t| t.parse::<u64>().ok());
    PortSysctls {
        ip_local_port_range: read_text(paths, "net/ipv4/ip_local_port_range")
            .as_deref()
            .and_then(parse_port_range),
        ip_local_reserved_ports: read_text(paths, "net/ipv4/ip_local_reserved_ports")
            .as_deref()
            .and_then(parse_reserved_ports),
        tcp_tw_reuse: num("net/ipv4/tcp_tw_reuse").map(|v| v as u32),
        tcp_tw_reuse_delay_ms: num("net/ipv4/tcp_tw_reuse_delay"),
        tcp_timestamps: num("net/ipv4/tcp_timestamps").map(|v| v as u32),
        tcp_max_tw_buckets: num("net/ipv4/tcp_max_tw_buckets"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_spellings() {
        assert_eq!(parse_port_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_port_range("40000 40000"), Some((40000, 40000)));
        assert_eq!(parse_port_range("x"), None);
        assert_eq!(parse_reserved_ports(""), Some(PortSet::default()));
        let r = parse_reserved_ports("40010-40019,40030\n").unwrap();
        assert!(r.contains(40015) && r.contains(40030) && !r.contains(40020));
    }

    #[test]
    fn reads_a_fake_proc() {
        let dir = tempfile::tempdir().unwrap();
        let v4 = dir.path().join("sys/net/ipv4");
        std::fs::create_dir_all(&v4).unwrap();
        std::fs::write(v4.join("ip_local_port_range"), "40000\t40049\n").unwrap();
        std::fs::write(v4.join("ip_local_reserved_ports"), "\n").unwrap();
        std::fs::write(v4.join("tcp_tw_reuse"), "2\n").unwrap();
        std::fs::write(v4.join("tcp_max_tw_buckets"), "131072\n").unwrap();
        let s = read_port_sysctls(&ProcPaths::new(dir.path()));
        assert_eq!(s.ip_local_port_range, Some((40000, 40049)));
        assert_eq!(s.ip_local_reserved_ports, Some(PortSet::default()));
        assert_eq!(s.tcp_tw_reuse, Some(2));
        assert_eq!(s.tcp_tw_reuse_delay_ms, None);
        assert_eq!(s.tcp_timestamps, None);
        assert_eq!(s.tcp_max_tw_buckets, Some(131072));
        // A namespace whose sysctls cannot be read: everything unknown.
        let m = ProcPaths::member(dir.path(), 1);
        assert_eq!(read_port_sysctls(&m), PortSysctls::default());
    }
}
