//! The live view (`sockstat top`): what every process is sending and receiving right now, and
//! why a slow connection is slow.
//!
//! One refresh is a [`Report`]: every socket of two samples an interval apart joined by its
//! kernel cookie ([`measure`]), each TCP connection with the bytes its `tcp_info` counters
//! (`bytes_acked`, `bytes_received`) moved between the two dumps, the findings of the diagnosis
//! rules on the same two samples ([`crate::judge`], the rules and thresholds of `sockstat
//! diagnose`), and what connection events said about the connections that closed in between.
//! [`group`] turns a report into rows per process, connection, remote address or local port,
//! with totals, under an optional filter with the listing's meaning ([`ViewFilter`]). The use
//! case, [`crate::run::top::Live`], keeps the last sample and the connection events since, and
//! hands out one report per refresh; everything here is pure.
//!
//! How each connection's bytes over the interval are counted ([`Seen`]; doc/top.md says it for
//! users):
//!
//! - in both samples: the change of its counters between them, divided by the time measured
//!   between the two dumps (not the nominal interval);
//! - only in the later sample: it was created after the earlier dump (every TCP socket is in
//!   the dump from SYN-SENT or SYN-RECV on), so every byte its counters hold moved in the
//!   interval: they are counted whole (a connection that sent no payload yet counts 0, not the
//!   byte of sequence space its SYN takes);
//! - only in the earlier sample (it closed): with connection events, the counters its close
//!   event carries minus those of the earlier sample; without them its last bytes are not
//!   known, and the warning `closed-uncounted` says how many connections that concerns;
//! - in neither (opened and closed between two dumps): from its close event, the payload of its
//!   whole life; without connection events it is not seen at all, and the warning
//!   `short-connections-uncounted` says so. A close after the later dump began counts in the
//!   next interval (the events are read after the dump).
//!
//! Sockets of other protocols (UDP, raw, ...) have no byte counters the kernel reports: their
//! rates are unknown (`None`), never 0, and their queues and drops are shown instead. Unix
//! sockets, TCP listeners and TIME-WAIT entries are not connections of the view ([`shown`]).
//!
//! A connection held by several processes counts in the row of each holder (each of them can
//! read and write it) and once in the totals; rows say how many of their connections are
//! shared, so that the totals equal the rows' sums less what shared connections add.
//!
//! Nothing here renders: `crate::render::top` writes a group as text or JSON, and the
//! command's full-screen view draws it.
//!
//! Counting a whole connection that opened during the interval leaves out the byte of sequence
//! space its SYN takes; a FIN acknowledged or received adds one byte at the end of a
//! connection's life: rates are exact to within a byte per connection per interval.

mod measure;
mod rows;

pub use measure::{measure, shown, Close, Interval};
pub use rows::{group, sort_rows, Column, Group, Holder, Row, RowKey, Totals, ViewFilter};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use crate::diagnose::Finding;
use crate::events::{EventProcess, Lost};
use crate::model::{Process, Socket, Warning};
use crate::sample::Sample;

/// How rows are grouped (`--by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum By {
    /// One row per holding process (every holder of a shared connection), the default.
    #[default]
    Process,
    /// One row per connection (socket).
    Connection,
    /// One row per remote address.
    Remote,
    /// One row per local address and port.
    Port,
}

impl By {
    /// Every grouping, in the order the view cycles through them.
    pub const ALL: [By; 4] = [By::Process, By::Connection, By::Remote, By::Port];

    /// The name on the command line and in JSON (`"by"`).
    pub fn name(self) -> &'static str {
        match self {
            By::Process => "process",
            By::Connection => "connection",
            By::Remote => "remote",
            By::Port => "port",
        }
    }

    /// The grouping a name gives.
    pub fn from_name(s: &str) -> Option<By> {
        By::ALL.into_iter().find(|b| b.name() == s)
    }

    /// The next grouping, in [`By::ALL`]'s order.
    pub fn next(self) -> By {
        let i = By::ALL.iter().position(|b| *b == self).unwrap_or(0);
        By::ALL[(i + 1) % By::ALL.len()]
    }
}

/// How a connection was seen over the interval: in which of the two samples, and with the
/// help of which event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Seen {
    /// In both samples.
    Throughout,
    /// Only in the later one: created during the interval.
    Opened,
    /// Only in the earlier one: it ended during the interval.
    Closed,
    /// In neither: opened and closed during the interval, known from its close event.
    Short,
}

impl Seen {
    /// The name in JSON (`"seen"`).
    pub fn name(self) -> &'static str {
        match self {
            Seen::Throughout => "throughout",
            Seen::Opened => "opened",
            Seen::Closed => "closed",
            Seen::Short => "opened-and-closed",
        }
    }
}

/// Where a connection's socket is kept in its [`Report`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SocketAt {
    /// In the later sample: `zone` indexes [`Sample::zones`], `index` that zone's sockets.
    After {
        /// The zone's index in the sample.
        zone: usize,
        /// The socket's index in the zone's snapshot.
        index: usize,
    },
    /// In [`Report::closed`], as the earlier sample saw it.
    Closed(usize),
    /// In [`Report::short`], made from its close event.
    Short(usize),
}

/// One socket of the view over one interval, with what it moved.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Conn {
    /// Where its socket is.
    pub at: SocketAt,
    /// How it was seen.
    pub seen: Seen,
    /// Its zone: an index into [`Report::zones`].
    pub zone: usize,
    /// Payload bytes the peer acknowledged over the interval; `None` when not known (not TCP,
    /// or a close no event told).
    pub sent: Option<u64>,
    /// Payload bytes received in order over the interval; `None` as for `sent`.
    pub received: Option<u64>,
    /// Segments retransmitted over the interval (TCP).
    pub retransmits: Option<u64>,
    /// Packets the socket dropped over the interval (`skmem` drops; Linux 4.7+).
    pub drops: Option<u64>,
    /// Indices into [`Report::findings`] of the findings about this connection.
    pub findings: Vec<usize>,
    /// Seconds between the two reads of its counters, when both samples saw it and timed
    /// their reads: its socket is read wherever it falls in each dump, which at 60k sockets
    /// moves it by tens of ms against the samples' interval (doc/reference/BENCHMARKS.md, "The
    /// live view"). `None`: its bytes are over the report's interval.
    pub window_s: Option<f64>,
    /// Its smoothed RTT in the later sample (µs; TCP, when the kernel has one), read here with
    /// its counters so that the rows need not go back to every socket's `tcp_info`.
    pub rtt_us: Option<u32>,
}

impl Conn {
    /// Bytes per second sent over its own window ([`Conn::window_s`]) or else `interval_s`,
    /// rounded to a whole byte (so that sums of rates are sums of whole numbers, as the JSON
    /// shows them).
    pub fn send_rate(&self, interval_s: f64) -> Option<u64> {
        let over = self.window_s.unwrap_or(interval_s);
        self.sent.map(|b| per_second(b, over))
    }

    /// Bytes per second received, as [`Conn::send_rate`].
    pub fn recv_rate(&self, interval_s: f64) -> Option<u64> {
        let over = self.window_s.unwrap_or(interval_s);
        self.received.map(|b| per_second(b, over))
    }

    /// True when its byte counts are not known: a socket of a protocol without byte counters,
    /// as opposed to a closed TCP connection whose last bytes no event told
    /// ([`Conn::uncounted`]).
    pub fn rates_unknown(&self) -> bool {
        self.sent.is_none() && self.seen != Seen::Closed
    }

    /// True for a connection that closed during the interval and whose last bytes are not
    /// known (no connection events, or its close event was lost).
    pub fn uncounted(&self) -> bool {
        self.sent.is_none() && self.seen == Seen::Closed
    }
}

/// `bytes` over `interval_s` seconds, per second, rounded.
pub fn per_second(bytes: u64, interval_s: f64) -> u64 {
    if interval_s > 0.0 {
        (bytes as f64 / interval_s).round() as u64
    } else {
        0
    }
}

/// What connection events covered over the interval.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct EventCoverage {
    /// `None` when connection events were traced; else why not.
    pub unavailable: Option<String>,
    /// Events the kernel could not hand over during the interval.
    pub lost: Lost,
}

/// One refresh of the live view: every socket of the interval with what it moved, the
/// findings of the diagnosis rules on the same two samples, and what could not be seen.
/// [`group`] makes its rows.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Report {
    /// When the later sample was taken (wall clock).
    pub time: SystemTime,
    /// Seconds between the two dumps, as measured.
    pub interval_s: f64,
    /// The later sample (the next refresh compares against it).
    pub sample: Arc<Sample>,
    /// The connections that closed during the interval, as the earlier sample saw them.
    pub closed: Vec<Socket>,
    /// The connections opened and closed during the interval, from their close events.
    pub short: Vec<Socket>,
    /// For each of [`Report::short`], the process that called connect() or accept().
    pub short_process: Vec<Option<EventProcess>>,
    /// Every socket of the interval (TIME-WAIT entries aside: they are counted in
    /// [`Report::time_wait`]).
    pub conns: Vec<Conn>,
    /// Zone names, indexed by [`Conn::zone`].
    pub zones: Vec<String>,
    /// The diagnosis's findings, most severe first; a connection's are indexed by its
    /// [`Conn::findings`], the others are about a host or a zone.
    pub findings: Vec<Finding>,
    /// What could not be seen, apart from what [`group`] counts over the rows it shows
    /// (holders hidden, rates unknown, closes uncounted).
    pub warnings: Vec<Warning>,
    /// The processes named by closed and short connections that the later sample does not
    /// know (they exited, or hold no socket now).
    pub processes: HashMap<u32, Process>,
    /// User names of those processes' uids.
    pub users: HashMap<u32, Option<String>>,
    /// What connection events covered.
    pub events: EventCoverage,
    /// TIME-WAIT entries in the later sample (not rows: they belong to no process and have no
    /// counters).
    pub time_wait: u64,
    /// Close events of connections still in the later sample (they closed after its dump), and
    /// of connections in neither sample that closed after the later dump began
    /// ([`Interval::taken_monotonic_ns`]): [`crate::run::top::Live`] hands them to the next
    /// interval.
    pub carried: Vec<Close>,
}

impl Report {
    /// A connection's socket.
    pub fn socket(&self, c: &Conn) -> &Socket {
        match c.at {
            SocketAt::After { zone, index } => &self.sample.zones[zone].snapshot.sockets[index],
            SocketAt::Closed(i) => &self.closed[i],
            SocketAt::Short(i) => &self.short[i],
        }
    }

    /// The process record of `pid`: from the later sample, else from what closed and short
    /// connections named (the earlier sample, close events).
    pub fn process(&self, pid: u32) -> Option<&Process> {
        self.sample
            .zones
            .iter()
            .find_map(|z| z.snapshot.process(pid))
            .or_else(|| self.processes.get(&pid))
    }

    /// The user name of `uid`, when it was resolved.
    pub fn user_name(&self, uid: u32) -> Option<&str> {
        self.sample
            .zones
            .iter()
            .find_map(|z| z.snapshot.users.get(&uid))
            .or_else(|| self.users.get(&uid))
            .and_then(|n| n.as_deref())
    }

    /// The process that opened a short connection (the caller of connect() or accept()).
    pub fn short_process(&self, c: &Conn) -> Option<&EventProcess> {
        match c.at {
            SocketAt::Short(i) => self.short_process.get(i).and_then(Option::as_ref),
            _ => None,
        }
    }

    /// The findings about no single connection (a host, a zone, several connections).
    pub fn host_findings(&self) -> impl Iterator<Item = &Finding> {
        let mut about: Vec<bool> = vec![false; self.findings.len()];
        for c in &self.conns {
            for &i in &c.findings {
                if let Some(a) = about.get_mut(i) {
                    *a = true;
                }
            }
        }
        self.findings
            .iter()
            .zip(about)
            .filter(|(_, a)| !a)
            .map(|(f, _)| f)
    }

    /// The TCP internals of a connection's socket, as last seen.
    pub fn tcp(&self, c: &Conn) -> Option<&crate::model::tcp::TcpInfo> {
        self.socket(c).tcp.as_ref().map(|t| &t.info)
    }
}

#[cfg(test)]
mod tests;
