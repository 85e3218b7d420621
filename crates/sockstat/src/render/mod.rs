//! Renderers: read a finished [`Snapshot`] and write it to any `io::Write`, as a table, JSON,
//! CSV or a summary. Renderers do no I/O other than writing their output, and never consult the
//! system: everything they show is in the snapshot.

pub mod counters;
pub mod csv;
pub mod diagnose;
pub mod json;
pub mod kill;
pub mod metrics;
pub mod ports;
pub mod sanitize;
pub mod summary;
pub mod table;
pub mod trace;

use std::fmt::Write as _;
use std::net::IpAddr;

use crate::model::{Endpoint, Owner, Snapshot, Socket, UnixName};

/// What the renderers show, from the command line.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// Print the header line (`-q`/`-H` turn it off).
    pub header: bool,
    /// STATE column (`-s`).
    pub state: bool,
    /// ID column: the socket inode (`-i`).
    pub id: bool,
    /// ARGS column / `args` in JSON (`-a`).
    pub args: bool,
    /// Never truncate columns (`-w`).
    pub wide: bool,
    /// Colour states and unknowns.
    pub color: bool,
    /// Details with every warning (`-v`).
    pub verbose: bool,
    /// TCP internals columns / `"tcp"` in JSON (`-T`).
    pub tcp: bool,
    /// Congestion control column (`-C`).
    pub congestion: bool,
    /// Socket memory columns / `"memory"` in JSON (`-m`).
    pub memory: bool,
    /// ZONE column first (`-Z`); JSON carries `"zone"` whenever zones were read.
    pub zone: bool,
    /// Process columns (COMMAND, PID, FD); off with `--no-owners`, when nothing was looked up.
    pub owners: bool,
    /// CGROUP column / `"cgroup"` in JSON (`--cgroup`).
    pub cgroup: bool,
}

impl Options {
    /// Defaults for the listing: header on, nothing optional.
    pub fn new() -> Options {
        Options {
            header: true,
            owners: true,
            ..Options::default()
        }
    }
}

/// One output row: a socket and one of its holders (`None`: no known holder, shown as `?`).
pub fn rows(snap: &Snapshot) -> impl Iterator<Item = (&Socket, Option<&Owner>)> {
    snap.sockets.iter().flat_map(|s| {
        let n = s.owners.len();
        (0..n.max(1)).map(move |i| (s, s.owners.get(i)))
    })
}

/// Who holds each unix socket (first holder), for showing a peer as `[pid fd]`.
pub(crate) fn unix_holders(snap: &Snapshot) -> rustc_hash::FxHashMap<u64, Owner> {
    snap.sockets
        .iter()
        .filter(|s| s.proto == crate::model::Proto::Unix)
        .filter_map(|s| Some((s.id?, *s.owners.first()?)))
        .collect()
}

/// Writes an IP endpoint as the table shows it: `127.0.0.1:22`, `[::1]:25`, `*:22` for the
/// unspecified address, `*` for port 0.
pub(crate) fn write_inet(out: &mut String, addr: &IpAddr, port: u16) {
    if addr.is_unspecified() {
        out.push('*');
    } else {
        match addr {
            IpAddr::V4(a) => {
                let _ = write!(out, "{a}");
            }
            IpAddr::V6(a) => {
                let _ = write!(out, "[{a}]");
            }
        }
    }
    out.push(':');
    if port == 0 {
        out.push('*');
    } else {
        let _ = write!(out, "{port}");
    }
}

/// Writes a unix name (path, or `@abstract`), sanitized for a terminal.
pub(crate) fn write_unix_name(out: &mut String, name: &UnixName) {
    if let UnixName::Abstract(_) = name {
        out.push('@');
    }
    let raw = match name {
        UnixName::Path(p) | UnixName::Abstract(p) => p,
    };
    out.push_str(&sanitize::for_terminal(raw.as_bytes()));
}

/// Writes an endpoint for the table or CSV. `remote` selects the "no remote end" spelling.
pub(crate) fn write_endpoint(
    out: &mut String,
    ep: Option<&Endpoint>,
    holders: &rustc_hash::FxHashMap<u64, Owner>,
) {
    match ep {
        None => out.push_str("*:*"),
        Some(Endpoint::Inet { addr, port }) => write_inet(out, addr, *port),
        Some(Endpoint::Unix(None)) => out.push('*'),
        Some(Endpoint::Unix(Some(name))) => write_unix_name(out, name),
        Some(Endpoint::UnixPeer {
            name: Some(name), ..
        }) => write_unix_name(out, name),
        Some(Endpoint::UnixPeer { peer, name: None }) => match holders.get(peer) {
            Some(o) => {
                let _ = write!(out, "[{} {}]", o.pid, o.fd);
            }
            None => {
                let _ = write!(out, "[inode {peer}]");
            }
        },
        Some(Endpoint::Packet { protocol, ifindex }) => {
            let _ = write!(out, "proto 0x{protocol:04x}");
            if *ifindex != 0 {
                let _ = write!(out, " if {ifindex}");
            }
        }
    }
}

/// Bytes for people: `512`, `64K`, `4.0M`, `1.5G` (powers of 1024).
pub(crate) fn human_bytes(out: &mut String, n: u64) {
    const K: u64 = 1024;
    let _ = match n {
        n if n < K => write!(out, "{n}"),
        n if n < K * K && n % K == 0 => write!(out, "{}K", n / K),
        n if n < K * K => write!(out, "{:.1}K", n as f64 / K as f64),
        n if n < K * K * K => write!(out, "{:.1}M", n as f64 / (K * K) as f64),
        n => write!(out, "{:.1}G", n as f64 / (K * K * K) as f64),
    };
}

/// A rate in bytes per second, shown in bits per second as network people read it: `840Kbps`,
/// `95.2Mbps`, `1.2Gbps`.
pub(crate) fn human_rate(out: &mut String, bytes_per_sec: u64) {
    let bits = bytes_per_sec as f64 * 8.0;
    let _ = if bits < 1e3 {
        write!(out, "{bits:.0}bps")
    } else if bits < 1e6 {
        write!(out, "{:.0}Kbps", bits / 1e3)
    } else if bits < 1e9 {
        write!(out, "{:.1}Mbps", bits / 1e6)
    } else {
        write!(out, "{:.1}Gbps", bits / 1e9)
    };
}

/// Microseconds for people: `52us`, `20.3ms`, `1.20s`.
pub(crate) fn human_us(out: &mut String, us: u64) {
    let _ = if us < 1000 {
        write!(out, "{us}us")
    } else if us < 1_000_000 {
        write!(out, "{:.1}ms", us as f64 / 1e3)
    } else {
        write!(out, "{:.2}s", us as f64 / 1e6)
    };
}

/// The name shown for a uid: the user name when resolved, else the number.
pub(crate) fn user_label(snap: &Snapshot, uid: u32) -> String {
    match snap.user_name(uid) {
        Some(n) => sanitize::for_terminal(n.as_bytes()).into_owned(),
        None => uid.to_string(),
    }
}

/// The uid a row is attributed to: the holder's, or with no holder the socket's own.
pub(crate) fn row_uid(snap: &Snapshot, s: &Socket, o: Option<&Owner>) -> Option<u32> {
    match o {
        Some(o) => snap.process(o.pid).and_then(|p| p.uid).or(s.uid),
        None => s.uid,
    }
}
