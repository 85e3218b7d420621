//! # sockstat
//!
//! Which process holds which socket, on Linux, fast: every socket from the kernel's `sock_diag`
//! netlink interface (with `/proc/net` text as the fallback), joined with every (process, file
//! descriptor) that holds it, from one pass over `/proc/<pid>/fd`.
//!
//! Data flows one way: **gather** (`sys`) → **model** ([`Snapshot`]) → **decide** ([`Query`]
//! filters) → **render** ([`render`]).
//!
//! ```
//! use sockstat::{PortSet, Query};
//!
//! let mut q = Query::new();
//! q.select.listening = true;
//! q.select.ports = Some(PortSet::parse("22,80,8000-8100")?);
//! let snap = sockstat::collect(&q)?;
//! for s in &snap.sockets {
//!     for h in snap.holders(s) {
//!         // A command name is set by the process itself: `Display` escapes control
//!         // characters and invalid UTF-8 as the listing does.
//!         let cmd = h.command.map(|c| c.to_string()).unwrap_or_else(|| "?".into());
//!         let user = h.user.unwrap_or("?");
//!         println!("{} {} {cmd}[{}] fd {} ({user})", s.proto_label(), s.local, h.pid, h.fd);
//!     }
//! }
//! for w in &snap.warnings {
//!     eprintln!("warning: {}", w.message);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A socket's holders are (pid, fd) pairs ([`Socket::owners`]); [`Snapshot::holders`] joins
//! each with its process's command and user. The text types that come from the kernel or other
//! processes ([`RawString`], [`UnixName`], [`Endpoint`], [`Zone`]) implement `Display` as the
//! listing shows them: control characters and bytes that are not UTF-8 escaped (`\x1b`,
//! `\xff`), so printing one cannot drive the terminal.
//!
//! ## Listening ports
//!
//! For "which ports are open and who listens on them", [`listening_ports`] gives every
//! listening inet socket with every process holding it:
//!
//! ```
//! for p in sockstat::listening_ports()? {
//!     let who: Vec<String> = p.processes.iter().map(|(pid, _)| pid.to_string()).collect();
//!     println!("{} {}:{} held by {}", p.proto.name(), p.address, p.port, who.join(","));
//! }
//! # Ok::<(), sockstat::Error>(())
//! ```
//!
//! ## Diagnosing one connection
//!
//! [`diagnose_connections`] samples the connections a query selects twice and judges them with
//! the rules of [`diagnose`] (send buffer, peer window, window scaling, a receiver that does not
//! read, delayed ACKs, retransmissions, listen overflow, TIME-WAIT, ephemeral ports, memory
//! pressure). Each finding names the socket, the numbers behind it and the change to make:
//!
//! ```
//! use std::io::Write;
//! use std::net::{TcpListener, TcpStream};
//! use std::time::Duration;
//!
//! // A connection to look at: here one of our own, on loopback.
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let mut client = TcpStream::connect(listener.local_addr()?)?;
//! let (_server, _) = listener.accept()?;
//! client.write_all(b"hello")?;
//!
//! let mut q = sockstat::Query::new();
//! q.select.ports = Some(sockstat::PortSet::parse(&listener.local_addr()?.port().to_string())?);
//! q.select.connected = true;
//! let report = sockstat::diagnose_connections(&q, Duration::from_millis(200), None)?;
//! assert_eq!(report.connections, 2); // both ends of the loopback connection
//! for f in &report.findings {
//!     println!("{} {}: {}\n  fix: {}", f.severity.name(), f.code, f.summary, f.advice);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! To watch one connection over time instead (windows, bytes in flight, the send buffer), see
//! [`trace`]; `examples/trace_one.rs` samples a connection and writes the SVG picture that
//! `sockstat trace` draws.
//!
//! ## Closing connections
//!
//! [`kill`] closes the sockets a listing selected, each named by its cookie so that a socket
//! replaced since the listing is left alone (`sockstat kill`; needs CAP_NET_ADMIN):
//!
//! ```no_run
//! let mut q = sockstat::Query::new();
//! q.select.ports = Some(sockstat::PortSet::parse("8080")?);
//! q.select.states = Some(vec![sockstat::State::CloseWait]);
//! q.select.protos = Some(sockstat::kill::PROTOCOLS.to_vec());
//! let listed = sockstat::kill::select(sockstat::collect(&q)?, &q, None);
//! let results = sockstat::kill::close(&listed, &q.gather.proc_root);
//! for (s, r) in listed.sockets.iter().zip(&results) {
//!     println!("{:?} -> {:?}: {}", s.local, s.remote, r.outcome.name());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Without root, every socket is still listed (with its uid); owners are found for the
//! processes the caller may inspect, and a [`Warning`] says how many sockets were left
//! unattributed and how to see them.
#![deny(missing_docs)]

pub mod counters;
pub mod diagnose;
mod error;
pub mod events;
pub mod finding;
#[doc(hidden)]
pub mod fuzzing;
pub mod join;
pub mod kill;
pub mod model;
mod order;
mod parallel;
pub mod ports;
pub mod privilege;
pub mod query;
pub mod render;
pub mod run;
pub mod sample;
mod sys;
pub mod sysctl;
pub mod text;
pub mod top;
pub mod trace;
pub mod zone;

pub use error::{DumpError, Error, ErrorKind, SysError};
pub use model::tcp::{Memory, TcpDetails};
pub use model::{
    Endpoint, Family, Holder, Owner, OwnersStatus, Process, Proto, RawString, Severity, Snapshot,
    SockType, Socket, State, Timer, UnixName, Warning, WarningCode,
};
pub use query::{FilterError, OwnerScan, PortSet, Query, Source, ZoneSelect};
pub use run::diagnose::Diagnosis;
pub use run::sampler::Sampler;
pub use sample::{Sample, ZoneSample};
pub use zone::{Zone, ZoneKind};

use std::net::IpAddr;

/// doc/library.md, "Using the library": its examples run as doctests (`cargo test --doc`), so
/// the guide compiles against the API it describes. The README's example is built by
/// `tests/newcomer.rs`, in a crate of its own.
#[cfg(doctest)]
#[doc = include_str!("../../../doc/library.md")]
struct LibraryGuide;

/// Runs a query against the running system and returns what it saw.
pub fn collect(query: &Query) -> Result<Snapshot, Error> {
    run::list::collect(query)
}

/// With `SOCKSTAT_TIMINGS` set, prints on stderr how long `phase` took since the library's last
/// timing line (the benchmark's fixed-cost breakdown; doc/reference/BENCHMARKS.md). Unset: nothing.
#[doc(hidden)]
pub fn timing_mark(phase: &str) {
    sys::timing::mark(phase);
}

/// Diagnoses the TCP connections `query` selects (in the zones it selects): two samples
/// `interval` apart, judged by every rule of [`diagnose`], as `sockstat diagnose` does.
/// `bandwidth`, in bytes per second, sizes buffers for a path of that speed;
/// [`diagnose_with`] takes every option of [`Diagnosis`].
pub fn diagnose_connections(
    query: &Query,
    interval: std::time::Duration,
    bandwidth: Option<f64>,
) -> Result<diagnose::Report, Error> {
    let how = Diagnosis {
        bandwidth,
        exact_locks: false,
        connect_events: false,
    };
    run::diagnose::run(query, interval, &how)
}

/// Judges two samples of the same zones with every rule of [`diagnose`], with the system's
/// part: the exact buffer locks of the connections a buffer finding names (as root, when
/// `how.exact_locks` asks), and the warnings that say what these privileges leave inferred.
/// [`diagnose_connections`] samples and judges in one call.
pub fn judge(before: &Sample, after: &Sample, how: &Diagnosis) -> diagnose::Report {
    run::diagnose::judge(before, after, how)
}

/// Diagnoses the TCP connections `query` selects, `interval` apart, as [`diagnose_connections`]
/// does, with every option of [`Diagnosis`].
pub fn diagnose_with(
    query: &Query,
    interval: std::time::Duration,
    how: &Diagnosis,
) -> Result<diagnose::Report, Error> {
    run::diagnose::run(query, interval, how)
}

/// Every (process, fd) holding a socket, from one scan of the processes `query` selects
/// (`query.gather.proc_root`, `query.gather.owner_scan`, `query.select.pids`), without the socket dump: what the
/// exporter's owner cache refreshes from.
pub fn scan_owners(query: &Query) -> Result<join::Owners, Error> {
    run::list::scan_owners(query)
}

/// The zone (network namespace) sockstat runs in, named as `-Z` names it (`global` on the
/// host); `None` when it cannot be told.
pub fn current_zone(proc_root: &std::path::Path) -> Option<Zone> {
    run::current_zone(proc_root)
}

/// Looks up a user by name, or takes a number as a uid: the form `--user` accepts.
pub fn resolve_user(name_or_uid: &str) -> Result<u32, FilterError> {
    run::resolve_user(name_or_uid)
}

/// One listening port and the processes behind it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ListeningPort {
    /// Protocol (`tcp`, `udp`, `udplite`, `sctp`, `mptcp`).
    pub proto: Proto,
    /// Local address (unspecified for "all addresses").
    pub address: IpAddr,
    /// Port.
    pub port: u16,
    /// Socket inode.
    pub inode: Option<u64>,
    /// Every (pid, command) holding the socket; empty when not visible with these privileges.
    pub processes: Vec<(u32, Option<String>)>,
}

/// Every listening inet socket (TCP LISTEN, bound unconnected UDP) with the processes that
/// hold it, sorted by protocol, address and port. This is what a "get open ports" call should
/// return: listeners only (not client ports), every holder (not the last one seen).
///
/// What could not be seen (owners hidden from these privileges, a protocol the kernel lacks)
/// is dropped here; to keep it, collect [`ListeningPort::query`] yourself and read
/// [`Snapshot::warnings`] beside [`ListeningPort::from_snapshot`].
pub fn listening_ports() -> Result<Vec<ListeningPort>, Error> {
    Ok(ListeningPort::from_snapshot(&collect(
        &ListeningPort::query(),
    )?))
}

impl ListeningPort {
    /// The query [`listening_ports`] runs: listening sockets of the inet families, with
    /// owners, without user names.
    pub fn query() -> Query {
        let mut q = Query::new();
        q.select.listening = true;
        q.select.families.unix = false;
        q.gather.resolve_users = false;
        q
    }

    /// The listening ports of a snapshot taken with [`ListeningPort::query`] (raw sockets,
    /// whose "port" is an IP protocol number, are left out).
    pub fn from_snapshot(snap: &Snapshot) -> Vec<ListeningPort> {
        snap.sockets
            .iter()
            .filter_map(|s| match s.local {
                Endpoint::Inet { addr, port } if s.proto != Proto::Raw && s.is_listening() => {
                    Some(ListeningPort {
                        proto: s.proto,
                        address: addr,
                        port,
                        inode: s.id,
                        processes: snap
                            .holders(s)
                            .map(|h| (h.pid, h.command.map(|c| c.to_string_lossy().into_owned())))
                            .collect(),
                    })
                }
                _ => None,
            })
            .collect()
    }
}
