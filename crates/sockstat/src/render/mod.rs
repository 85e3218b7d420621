//! Renderers: read a finished [`Snapshot`] and write it to any `io::Write`, as a table, JSON,
//! CSV or a summary. Renderers do no I/O other than writing their output, and never consult the
//! system: everything they show is in the snapshot.

pub mod conn_events;
pub mod counters;
pub mod csv;
pub mod diagnose;
pub mod drops;
pub mod event_metrics;
pub mod events;
pub(crate) mod exposition;
pub mod json;
pub mod kill;
pub mod metrics;
pub mod ports;
pub mod series;
pub mod summary;
pub mod table;
pub mod top;
pub mod trace;

use crate::text::{fmt, sanitize};

use crate::model::{Owner, OwnersStatus, Snapshot, Socket};

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
/// A socket whose holder list is partial gets a `?` row after the holders shown: others may
/// hold it too.
pub fn rows(snap: &Snapshot) -> impl Iterator<Item = (&Socket, Option<&Owner>)> {
    indexed_rows(snap).map(|(_, s, o)| (s, o))
}

/// [`rows`] with each row's socket index in `snap.sockets`.
pub(crate) fn indexed_rows(
    snap: &Snapshot,
) -> impl Iterator<Item = (usize, &Socket, Option<&Owner>)> {
    indexed_rows_in(snap, 0..snap.sockets.len())
}

/// [`indexed_rows`] of the sockets at `range` of `snap.sockets`.
pub(crate) fn indexed_rows_in(
    snap: &Snapshot,
    range: std::ops::Range<usize>,
) -> impl Iterator<Item = (usize, &Socket, Option<&Owner>)> {
    let first = range.start;
    snap.sockets[range]
        .iter()
        .enumerate()
        .flat_map(move |(i, s)| {
            let i = first + i;
            let n = s.owners.len();
            let unknown = usize::from(n == 0 || s.owners_status == OwnersStatus::Partial);
            (0..n + unknown).map(move |k| (i, s, s.owners.get(k)))
        })
}

/// Who holds each unix socket (first holder), for showing a peer as `[pid fd]`: the listed
/// sockets' holders, and the peers' holders the snapshot carries (`Snapshot::peer_owners`),
/// which win, so a peer shows the same whatever the filters selected.
pub(crate) fn unix_holders(snap: &Snapshot) -> fmt::UnixHolders {
    let mut m: fmt::UnixHolders = snap
        .sockets
        .iter()
        .filter(|s| s.proto == crate::model::Proto::Unix)
        .filter_map(|s| Some((s.id?, *s.owners.first()?)))
        .collect();
    for (peer, owners) in &snap.peer_owners {
        if let Some(first) = owners.first() {
            m.insert(*peer, *first);
        }
    }
    m
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
    row_uid_of(s, o, o.and_then(|o| snap.process(o.pid)))
}

/// [`row_uid`], given the holder's process (looked up already).
pub(crate) fn row_uid_of(
    s: &Socket,
    o: Option<&Owner>,
    process: Option<&crate::model::Process>,
) -> Option<u32> {
    match o {
        Some(_) => process.and_then(|p| p.uid).or(s.uid),
        None => s.uid,
    }
}
