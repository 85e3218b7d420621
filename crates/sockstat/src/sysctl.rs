//! The kernel settings sockstat's analyses read ([`Sysctls`]): one type for the port report,
//! the diagnosis rules and the exporter. Pure data; `sys::sysctl` reads it.
//!
//! Most values are per network namespace (those of the thread that reads `/proc/sys`); the
//! [`GLOBAL`] ones are the host's wherever they are read from (and `tcp_mem` is shown only in
//! the initial namespace). doc/reference/linux.md#sysctls describes each.

use crate::query::PortSet;

/// The sysctls read, by their dotted names; `None` when this kernel lacks one or it could not
/// be read (the reader says which, with a `sysctls-unreadable` warning).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sysctls {
    /// `net.ipv4.ip_local_port_range`: the ephemeral range, inclusive, as written.
    pub ip_local_port_range: Option<(u16, u16)>,
    /// `net.ipv4.ip_local_reserved_ports`: ports connect() never picks (empty when unset).
    pub ip_local_reserved_ports: Option<PortSet>,
    /// `net.ipv4.tcp_tw_reuse`: 0 off, 1 on, 2 loopback only (the default).
    pub tcp_tw_reuse: Option<u64>,
    /// `net.ipv4.tcp_tw_reuse_delay`, ms (newer than 6.12).
    pub tcp_tw_reuse_delay_ms: Option<u64>,
    /// `net.ipv4.tcp_timestamps`: 0 off, 1 on with random offsets, 2 on without.
    pub tcp_timestamps: Option<u64>,
    /// `net.ipv4.tcp_max_tw_buckets`: the TIME-WAIT table limit.
    pub tcp_max_tw_buckets: Option<u64>,
    /// `net.ipv4.tcp_wmem` (min, default, max) bytes.
    pub tcp_wmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_rmem` (min, default, max) bytes.
    pub tcp_rmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_window_scaling`.
    pub tcp_window_scaling: Option<u64>,
    /// `net.ipv4.tcp_moderate_rcvbuf` (receive buffer autotuning).
    pub tcp_moderate_rcvbuf: Option<u64>,
    /// `net.core.somaxconn`: the cap on every listen() backlog.
    pub somaxconn: Option<u64>,
    /// `net.ipv4.tcp_syncookies`.
    pub tcp_syncookies: Option<u64>,
    /// `net.ipv4.tcp_syn_retries`: SYNs a connect() sends again before it fails.
    pub tcp_syn_retries: Option<u64>,
    /// `net.ipv4.tcp_synack_retries`: SYN-ACKs a listener sends again.
    pub tcp_synack_retries: Option<u64>,
    /// `net.ipv4.tcp_syn_linear_timeouts` (6.13+): the first N SYN retransmits come at a fixed
    /// initial timeout before the backoff doubles.
    pub tcp_syn_linear_timeouts: Option<u64>,
    /// `net.core.wmem_max` (global): the largest SO_SNDBUF an application may ask for.
    pub wmem_max: Option<u64>,
    /// `net.core.rmem_max` (global): the largest SO_RCVBUF an application may ask for.
    pub rmem_max: Option<u64>,
    /// `net.ipv4.tcp_mem` (low, pressure, high) pages (global).
    pub tcp_mem: Option<[u64; 3]>,
}

/// The sysctls that are the host's wherever they are read: a zone's values for them come from
/// the initial namespace ([`Sysctls::with_globals`]).
pub const GLOBAL: [&str; 3] = ["net.core.wmem_max", "net.core.rmem_max", "net.ipv4.tcp_mem"];

impl Sysctls {
    /// These per-namespace values with the [`GLOBAL`] ones taken from `host`.
    pub fn with_globals(mut self, host: &Sysctls) -> Sysctls {
        self.wmem_max = host.wmem_max;
        self.rmem_max = host.rmem_max;
        self.tcp_mem = host.tcp_mem;
        self
    }

    /// The reserved ports as inclusive ranges (none when unset or unknown).
    pub fn reserved_ranges(&self) -> &[(u16, u16)] {
        self.ip_local_reserved_ports
            .as_ref()
            .map_or(&[], |p| p.ranges())
    }
}
