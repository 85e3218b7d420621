//! [`group`]: a [`Report`]'s connections as rows per process, connection, remote address or
//! local port, with totals, under an optional [`ViewFilter`].

use rustc_hash::FxHashMap;
use std::cmp::Ordering;
use std::net::IpAddr;

use crate::model::{Endpoint, Owner, OwnersStatus};
use crate::query::Query;

use super::{By, Conn, Report};

/// Who a process row is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Holder {
    /// A process (from the owner scan, or the caller of connect()/accept() of a short
    /// connection).
    Process(u32),
    /// Connections whose holders these privileges hide, by the socket's uid.
    Hidden(Option<u32>),
    /// Connections no process holds (orphans), or whose holders were not looked for
    /// (`--no-owners`).
    Nobody,
}

/// What a row groups.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RowKey {
    /// `--by process`.
    Process(Holder),
    /// `--by connection`: an index into [`Report::conns`].
    Connection(usize),
    /// `--by remote`: the zone and the remote address (`None`: unconnected sockets).
    Remote(usize, Option<IpAddr>),
    /// `--by port`: the zone, the local address and port.
    Port(usize, Option<IpAddr>, Option<u16>),
}

/// One row of the view.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Row {
    /// What it groups.
    pub key: RowKey,
    /// Its zone (an index into [`Report::zones`]): that of its first connection.
    pub zone: usize,
    /// Indices into [`Report::conns`] of its connections.
    pub conns: Vec<usize>,
    /// Of them, those held by more than one process (counted in each holder's row).
    pub shared: usize,
    /// Bytes per second sent, summed over the connections whose counters are known; `None`
    /// when none are.
    pub send: Option<u64>,
    /// Bytes per second received, as `send`.
    pub recv: Option<u64>,
    /// Connections whose rates are unknown (not TCP).
    pub rates_unknown: usize,
    /// TCP connections that closed during the interval with their last bytes not counted.
    pub uncounted: usize,
    /// Retransmitted segments per second; `None` without TCP connections.
    pub retransmits_per_sec: Option<f64>,
    /// Packets dropped by the row's sockets over the interval, where the kernel reports it.
    pub drops: Option<u64>,
    /// The worst smoothed RTT of its TCP connections, µs.
    pub max_rtt_us: Option<u32>,
    /// Indices into [`Report::findings`], most severe first.
    pub findings: Vec<usize>,
    /// Connections some of whose holders are hidden from these privileges.
    pub holders_hidden: usize,
}

/// Sums over every connection shown (each once, however many holders it has).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct Totals {
    /// Connections shown.
    pub connections: usize,
    /// Bytes per second sent, over the connections whose counters are known.
    pub send: u64,
    /// Bytes per second received, as `send`.
    pub recv: u64,
    /// Connections whose rates are unknown (not TCP).
    pub rates_unknown: usize,
    /// TCP connections that closed uncounted.
    pub uncounted: usize,
    /// Connections whose holders are (partly) hidden.
    pub holders_hidden: usize,
    /// Connections opened and closed within the interval, counted from their close events.
    pub short: usize,
}

/// The rows of one refresh, with totals.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Group {
    /// How rows are grouped.
    pub by: By,
    /// The rows, sorted.
    pub rows: Vec<Row>,
    /// Sums over the connections shown.
    pub totals: Totals,
}

/// A column to sort by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Column {
    /// Send and receive rate together (the default).
    #[default]
    Rate,
    /// Send rate.
    Send,
    /// Receive rate.
    Recv,
    /// Connections.
    Connections,
    /// Retransmits per second.
    Retransmits,
    /// Worst RTT.
    Rtt,
    /// Findings (most severe, then count).
    Findings,
    /// The row's name: pid, address or port.
    Key,
}

impl Column {
    /// Every column, in the order the view cycles through them.
    pub const ALL: [Column; 8] = [
        Column::Rate,
        Column::Send,
        Column::Recv,
        Column::Connections,
        Column::Retransmits,
        Column::Rtt,
        Column::Findings,
        Column::Key,
    ];

    /// Its name (`--sort`, the view's header).
    pub fn name(self) -> &'static str {
        match self {
            Column::Rate => "rate",
            Column::Send => "send",
            Column::Recv => "recv",
            Column::Connections => "conns",
            Column::Retransmits => "retrans",
            Column::Rtt => "rtt",
            Column::Findings => "findings",
            Column::Key => "name",
        }
    }

    /// The column a name gives.
    pub fn from_name(s: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// A filter with the listing's meaning, applied to a report's connections: its socket filters
/// on the socket, its owner filters (`--pid`, `--user`, `--command`) on any holder.
#[derive(Debug, Clone)]
pub struct ViewFilter(pub Query);

impl ViewFilter {
    /// True when `c` passes.
    pub fn admits(&self, report: &Report, c: &Conn) -> bool {
        let q = &self.0;
        let s = report.socket(c);
        if !q.matches_socket(s) {
            return false;
        }
        if !q.filters_owners() {
            return true;
        }
        let mut owners: Vec<Owner> = s.owners.clone();
        if let Some(p) = report.short_process(c) {
            owners.push(Owner { pid: p.pid, fd: 0 });
        }
        owners
            .iter()
            .any(|o| q.matches_owner(o, report.process(o.pid)))
    }
}

/// The holders a connection counts for in `--by process`, into `out` (cleared first).
fn holders(report: &Report, c: &Conn, out: &mut Vec<Holder>) {
    out.clear();
    let s = report.socket(c);
    out.extend(s.owners.iter().map(|o| Holder::Process(o.pid)));
    if let Some(p) = report.short_process(c) {
        out.push(Holder::Process(p.pid));
    }
    if out.len() > 1 {
        out.sort_unstable();
        out.dedup();
    }
    if out.is_empty() {
        out.push(match s.owners_status {
            OwnersStatus::Hidden | OwnersStatus::Partial => Holder::Hidden(s.uid),
            _ => Holder::Nobody,
        });
    }
}

fn hidden(report: &Report, c: &Conn) -> bool {
    matches!(
        report.socket(c).owners_status,
        OwnersStatus::Hidden | OwnersStatus::Partial
    )
}

/// The rows of `report` grouped `by`, over the connections `filter` admits, sorted by `sort`
/// (largest first).
pub fn group(report: &Report, by: By, filter: Option<&ViewFilter>, sort: Column) -> Group {
    let admitted: Vec<usize> = (0..report.conns.len())
        .filter(|&i| filter.is_none_or(|f| f.admits(report, &report.conns[i])))
        .collect();
    // Each key's row, in the order keys first appear: its connections.
    let mut keyed: FxHashMap<RowKey, usize> = FxHashMap::default();
    let mut rows: Vec<(RowKey, Vec<usize>)> = Vec::new();
    let mut add = |k: RowKey, i: usize| match keyed.get(&k) {
        Some(&r) => rows[r].1.push(i),
        None => {
            keyed.insert(k.clone(), rows.len());
            rows.push((k, vec![i]));
        }
    };
    let mut shared = vec![false; report.conns.len()];
    let mut held = Vec::new();
    for &i in &admitted {
        let c = &report.conns[i];
        let s = report.socket(c);
        match by {
            By::Process => {
                holders(report, c, &mut held);
                shared[i] = held.len() > 1;
                for &h in &held {
                    add(RowKey::Process(h), i);
                }
            }
            By::Connection => add(RowKey::Connection(i), i),
            By::Remote => add(
                RowKey::Remote(c.zone, s.remote.as_ref().and_then(Endpoint::ip)),
                i,
            ),
            By::Port => add(RowKey::Port(c.zone, s.local.ip(), s.local.port()), i),
        }
    }
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|(k, conns)| row(report, k, conns, &shared))
        .collect();
    let mut totals = Totals::default();
    for &i in &admitted {
        let c = &report.conns[i];
        totals.connections += 1;
        totals.send += c.send_rate(report.interval_s).unwrap_or(0);
        totals.recv += c.recv_rate(report.interval_s).unwrap_or(0);
        totals.rates_unknown += usize::from(c.rates_unknown());
        totals.uncounted += usize::from(c.uncounted());
        totals.holders_hidden += usize::from(hidden(report, c));
        totals.short += usize::from(c.seen == super::Seen::Short);
    }
    let mut g = Group { by, rows, totals };
    sort_rows(report, &mut g.rows, sort);
    g
}

fn row(report: &Report, key: RowKey, conns: Vec<usize>, shared: &[bool]) -> Row {
    let dt = report.interval_s;
    let mut r = Row {
        key,
        zone: conns.first().map_or(0, |&i| report.conns[i].zone),
        shared: conns.iter().filter(|&&i| shared[i]).count(),
        send: None,
        recv: None,
        rates_unknown: 0,
        uncounted: 0,
        retransmits_per_sec: None,
        drops: None,
        max_rtt_us: None,
        findings: Vec::new(),
        holders_hidden: 0,
        conns: Vec::new(),
    };
    let mut retrans: Option<u64> = None;
    for &i in &conns {
        let c = &report.conns[i];
        if let Some(v) = c.send_rate(dt) {
            r.send = Some(r.send.unwrap_or(0) + v);
        }
        if let Some(v) = c.recv_rate(dt) {
            r.recv = Some(r.recv.unwrap_or(0) + v);
        }
        r.rates_unknown += usize::from(c.rates_unknown());
        r.uncounted += usize::from(c.uncounted());
        r.holders_hidden += usize::from(hidden(report, c));
        if let Some(n) = c.retransmits {
            retrans = Some(retrans.unwrap_or(0) + n);
        }
        if let Some(n) = c.drops {
            r.drops = Some(r.drops.unwrap_or(0) + n);
        }
        if matches!(c.at, super::SocketAt::After { .. }) {
            if let Some(rtt) = c.rtt_us {
                r.max_rtt_us = Some(r.max_rtt_us.map_or(rtt, |m| m.max(rtt)));
            }
        }
        for &f in &c.findings {
            if !r.findings.contains(&f) {
                r.findings.push(f);
            }
        }
    }
    // The report's findings are most severe first: so are the row's, by index.
    r.findings.sort_unstable();
    r.retransmits_per_sec = retrans.map(|n| if dt > 0.0 { n as f64 / dt } else { 0.0 });
    r.conns = conns;
    r
}

/// Sorts rows by `col`, largest first (by name: smallest first), ties by key.
pub fn sort_rows(report: &Report, rows: &mut [Row], col: Column) {
    let worst = |r: &Row| r.findings.first().map(|&i| report.findings[i].severity);
    rows.sort_by(|a, b| {
        let o = match col {
            Column::Rate => (b.send.unwrap_or(0) + b.recv.unwrap_or(0))
                .cmp(&(a.send.unwrap_or(0) + a.recv.unwrap_or(0))),
            Column::Send => b.send.cmp(&a.send),
            Column::Recv => b.recv.cmp(&a.recv),
            Column::Connections => b.conns.len().cmp(&a.conns.len()),
            Column::Retransmits => b
                .retransmits_per_sec
                .partial_cmp(&a.retransmits_per_sec)
                .unwrap_or(Ordering::Equal),
            Column::Rtt => b.max_rtt_us.cmp(&a.max_rtt_us),
            Column::Findings => worst(b)
                .cmp(&worst(a))
                .then(b.findings.len().cmp(&a.findings.len())),
            Column::Key => Ordering::Equal,
        };
        o.then_with(|| a.key.cmp(&b.key))
    });
}
