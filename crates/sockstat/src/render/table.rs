//! The FreeBSD-style table: `USER COMMAND PID FD PROTO LOCAL ADDRESS FOREIGN ADDRESS`, then the
//! optional columns. One row per (socket, holder); `?` where no holder is known. Widths are
//! measured over all rows (cells are formatted once into one arena string), then every row is
//! written padded.

use std::fmt::Write as _;
use std::io::{self, Write};

use unicode_width::UnicodeWidthStr;

use super::{
    fmt, indexed_rows, indexed_rows_in, row_uid_of, sanitize, unix_holders, user_label, Options,
};
use crate::model::{Owner, Snapshot, Socket, State};

/// Column caps without `-w`: beyond these, a cell is cut and ends with `…`.
const CAP_USER: usize = 12;
const CAP_COMMAND: usize = 20;
const CAP_ADDRESS: usize = 48;
const CAP_ARGS: usize = 80;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Col {
    Lead,
    Zone,
    User,
    Command,
    Pid,
    Fd,
    Proto,
    Local,
    Foreign,
    Cgroup,
    State,
    Id,
    Rtt,
    MinRtt,
    Cwnd,
    Wscale,
    SndWnd,
    RcvWnd,
    Unacked,
    Retrans,
    Delivery,
    RwndLimited,
    SndbufLimited,
    Cc,
    Rmem,
    Wmem,
    Drops,
    Args,
}

impl Col {
    fn title(self) -> &'static str {
        match self {
            Col::Lead => "",
            Col::Zone => "ZONE",
            Col::User => "USER",
            Col::Command => "COMMAND",
            Col::Pid => "PID",
            Col::Fd => "FD",
            Col::Proto => "PROTO",
            Col::Local => "LOCAL ADDRESS",
            Col::Foreign => "FOREIGN ADDRESS",
            Col::Cgroup => "CGROUP",
            Col::State => "STATE",
            Col::Id => "ID",
            Col::Rtt => "RTT",
            Col::MinRtt => "MINRTT",
            Col::Cwnd => "CWND",
            Col::Wscale => "WSCALE",
            Col::SndWnd => "SNDWND",
            Col::RcvWnd => "RCVWND",
            Col::Unacked => "UNACKED",
            Col::Retrans => "RETRANS",
            Col::Delivery => "DELIVERY",
            Col::RwndLimited => "RWNDLIM",
            Col::SndbufLimited => "SBUFLIM",
            Col::Cc => "CC",
            Col::Rmem => "RECV MEM",
            Col::Wmem => "SEND MEM",
            Col::Drops => "DROPS",
            Col::Args => "ARGS",
        }
    }

    fn cap(self) -> Option<usize> {
        match self {
            Col::User => Some(CAP_USER),
            Col::Zone => Some(CAP_COMMAND),
            Col::Command => Some(CAP_COMMAND),
            Col::Local | Col::Foreign | Col::Cgroup => Some(CAP_ADDRESS),
            Col::Args => Some(CAP_ARGS),
            _ => None,
        }
    }

    fn right_aligned(self) -> bool {
        matches!(
            self,
            Col::Pid
                | Col::Fd
                | Col::Id
                | Col::Rtt
                | Col::MinRtt
                | Col::Cwnd
                | Col::SndWnd
                | Col::RcvWnd
                | Col::Unacked
                | Col::Retrans
                | Col::Delivery
                | Col::RwndLimited
                | Col::SndbufLimited
                | Col::Rmem
                | Col::Wmem
                | Col::Drops
        )
    }
}

fn columns(opts: &Options, lead: bool) -> Vec<Col> {
    let mut c = Vec::new();
    if lead {
        c.push(Col::Lead);
    }
    if opts.zone {
        c.push(Col::Zone);
    }
    c.push(Col::User);
    if opts.owners {
        c.extend([Col::Command, Col::Pid, Col::Fd]);
    }
    c.extend([Col::Proto, Col::Local, Col::Foreign]);
    if opts.cgroup {
        c.push(Col::Cgroup);
    }
    if opts.state {
        c.push(Col::State);
    }
    if opts.id {
        c.push(Col::Id);
    }
    if opts.tcp {
        c.extend([
            Col::Rtt,
            Col::MinRtt,
            Col::Cwnd,
            Col::Wscale,
            Col::SndWnd,
            Col::RcvWnd,
            Col::Unacked,
            Col::Retrans,
            Col::Delivery,
            Col::RwndLimited,
            Col::SndbufLimited,
        ]);
    }
    if opts.tcp || opts.congestion {
        c.push(Col::Cc);
    }
    if opts.memory {
        c.extend([Col::Rmem, Col::Wmem, Col::Drops]);
    }
    if opts.args {
        c.push(Col::Args);
    }
    c
}

/// Display width: the byte length for ASCII (the common case), else the Unicode width.
fn width(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.width()
    }
}

/// Cuts `s` to `cap` display columns, ending with `…` when cut.
fn truncate(s: &str, cap: usize) -> &str {
    if width(s) <= cap {
        return s;
    }
    let mut w = 0;
    for (i, c) in s.char_indices() {
        w += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if w > cap.saturating_sub(1) {
            return &s[..i];
        }
    }
    s
}

fn state_color(state: State) -> &'static str {
    match state {
        State::Listen => "\x1b[32m",
        State::Established => "",
        State::TimeWait | State::CloseWait | State::FinWait1 | State::FinWait2 => "\x1b[33m",
        State::SynSent | State::SynRecv => "\x1b[36m",
        State::LastAck | State::Closing | State::Close => "\x1b[35m",
        _ => "",
    }
}

/// A `-T`/`-C` cell; `-` where the kernel gave nothing (TIME_WAIT, non-TCP, an older kernel).
fn tcp_cell(cell: &mut String, col: Col, s: &Socket) {
    let Some(t) = s.tcp.as_deref() else {
        cell.push('-');
        return;
    };
    // A listener reports only its queue, cwnd and pacing rate (doc/reference/linux.md#listeners): the rest is
    // 0, not a measurement.
    if s.state == State::Listen && !matches!(col, Col::Cc | Col::Cwnd) {
        cell.push('-');
        return;
    }
    let i = &t.info;
    let before = cell.len();
    match col {
        Col::Rtt => {
            if let (Some(rtt), Some(var)) = (i.rtt_us(), i.rttvar_us()) {
                let _ = write!(cell, "{}", fmt::duration_us_cell(u64::from(rtt)));
                cell.push('/');
                let _ = write!(cell, "{}", fmt::duration_us_cell(u64::from(var)));
            }
        }
        Col::MinRtt => {
            if let Some(v) = i.min_rtt_us() {
                let _ = write!(cell, "{}", fmt::duration_us_cell(u64::from(v)));
            }
        }
        Col::Cwnd => {
            if let Some(v) = i.snd_cwnd() {
                let _ = write!(cell, "{v}");
            }
        }
        Col::Wscale => match t.wscale_ok() {
            Some(true) => {
                let _ = write!(
                    cell,
                    "{},{}",
                    i.snd_wscale().unwrap_or(0),
                    i.rcv_wscale().unwrap_or(0)
                );
            }
            Some(false) => cell.push_str("none"),
            None => {}
        },
        Col::SndWnd => {
            if let Some(v) = i.snd_wnd() {
                let _ = write!(cell, "{}", fmt::bytes_cell(u64::from(v)));
            }
        }
        Col::RcvWnd => {
            if let Some(v) = t.rcv_wnd_advertised() {
                let _ = write!(cell, "{}", fmt::bytes_cell(u64::from(v)));
            }
        }
        Col::Unacked => {
            if let Some(v) = i.unacked() {
                let _ = write!(cell, "{v}");
            }
        }
        Col::Retrans => {
            if let (Some(r), Some(total)) = (i.retrans(), i.total_retrans()) {
                let _ = write!(cell, "{r}/{total}");
            }
        }
        Col::Delivery => {
            if let Some(v) = i.delivery_rate() {
                let _ = write!(cell, "{}", fmt::bit_rate_cell(v));
                if i.delivery_rate_app_limited() == Some(true) {
                    cell.push('*');
                }
            }
        }
        Col::RwndLimited => {
            if let Some(v) = t.rwnd_limited_share() {
                let _ = fmt::percent_cell(cell, v);
            }
        }
        Col::SndbufLimited => {
            if let Some(v) = t.sndbuf_limited_share() {
                let _ = fmt::percent_cell(cell, v);
            }
        }
        Col::Cc => {
            if let Some(c) = &t.congestion {
                cell.push_str(&sanitize::for_terminal(c.as_bytes()));
            }
        }
        _ => {}
    }
    if cell.len() == before {
        cell.push('-');
    }
}

/// A `-m` cell: `used/limit` for the receive and send buffers, and drops.
fn memory_cell(cell: &mut String, col: Col, s: &Socket) {
    let Some(m) = &s.memory else {
        cell.push('-');
        return;
    };
    match col {
        Col::Rmem => {
            let _ = write!(cell, "{}", fmt::bytes_cell(u64::from(m.rmem_alloc_bytes)));
            cell.push('/');
            let _ = write!(cell, "{}", fmt::bytes_cell(u64::from(m.rcvbuf_bytes)));
        }
        Col::Wmem => {
            let _ = write!(cell, "{}", fmt::bytes_cell(u64::from(m.wmem_queued_bytes)));
            cell.push('/');
            let _ = write!(cell, "{}", fmt::bytes_cell(u64::from(m.sndbuf_bytes)));
        }
        Col::Drops => match m.drops {
            Some(d) => {
                let _ = write!(cell, "{d}");
            }
            None => cell.push('-'),
        },
        _ => {}
    }
}

/// Writes the table in two passes over the rows: the first formats every cell to measure each
/// column's width (in parts, on several threads, for a big table), the second pads and writes
/// them. The first pass keeps the cells it formatted for the second only within a bound
/// (`KEEP_ROWS`, `KEEP_BYTES`); past it the second pass formats them again.
pub fn write(snap: &Snapshot, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    write_with_lead(snap, opts, None, out)
}

/// A column that a view puts before the listing's own (`sockstat kill`'s RESULT): its title and
/// the cell of each socket's rows (by the socket's index in the snapshot).
pub struct Lead<'a> {
    /// The header.
    pub title: &'a str,
    /// The cell for the socket at this index of `Snapshot::sockets`.
    pub cell: &'a (dyn Fn(usize) -> &'a str + Sync),
}

/// Tables of at most this many rows keep the cells formatted to size the columns until they
/// are printed (their text and a 4-byte offset each: about 110 bytes a row, some 14 MiB at
/// most); bigger tables format every cell twice and so cost no memory per row.
const KEEP_ROWS: usize = 131_072;
/// And at most this many bytes of them (rows with very long arguments): the rows past it are
/// formatted again when printed.
const KEEP_BYTES: usize = 64 << 20;

/// [`write()`], with a `lead` column first.
pub fn write_with_lead(
    snap: &Snapshot,
    opts: &Options,
    lead: Option<&Lead<'_>>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let parts = crate::parallel::cores().unwrap_or(1).clamp(1, MAX_PARTS);
    write_rows(snap, opts, lead, (KEEP_ROWS, KEEP_BYTES), parts, out)
}

/// Tables of at least this many rows are formatted on several threads (one part of the rows
/// each, up to [`MAX_PARTS`]): formatting is most of a table's cost (at 60k rows, 22.6 of
/// 27.8 ms for the full listing, 32 of 38 with `-T`), and the parts need nothing from each other
/// but their column widths.
const PARALLEL_ROWS: usize = 8192;
/// At most this many parts.
const MAX_PARTS: usize = 4;

/// The first pass over one part of the rows (sockets `range`): each column's widest cell, and
/// the cells formatted, kept for the second pass while they fit in `keep_bytes` (`ends`: where
/// each cell ends in `arena`, row after row; the rows past them are formatted again).
struct Part {
    range: std::ops::Range<usize>,
    widths: Vec<usize>,
    arena: String,
    ends: Vec<u32>,
}

impl Part {
    fn measure(
        mut f: Filler<'_, '_>,
        cols: &[Col],
        range: std::ops::Range<usize>,
        keep_bytes: Option<usize>,
    ) -> Part {
        let mut part = Part {
            range,
            widths: vec![0; cols.len()],
            arena: String::new(),
            ends: Vec::new(),
        };
        let mut keep = keep_bytes.is_some();
        let keep_bytes = keep_bytes.unwrap_or(0);
        for (i, s, o) in indexed_rows_in(f.snap, part.range.clone()) {
            // Checked per row: the kept cells are always whole rows.
            keep = keep && part.arena.len() + 4 * part.ends.len() < keep_bytes;
            for (ci, col) in cols.iter().enumerate() {
                let (text, cut) = f.fill(*col, i, s, o);
                let w = width(text) + usize::from(cut);
                if w > part.widths[ci] {
                    part.widths[ci] = w;
                }
                if keep {
                    part.arena.push_str(text);
                    if cut {
                        part.arena.push('…');
                    }
                    part.ends
                        .push(u32::try_from(part.arena.len()).unwrap_or(u32::MAX));
                }
            }
        }
        part
    }
}

/// [`write_with_lead`], keeping the formatted cells between the passes for tables of at most
/// `keep.0` rows, and at most `keep.1` bytes of them, formatting a table of at least
/// [`PARALLEL_ROWS`] rows in `parts` parts at once.
fn write_rows(
    snap: &Snapshot,
    opts: &Options,
    lead: Option<&Lead<'_>>,
    (keep_rows, keep_bytes): (usize, usize),
    parts: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let cols = columns(opts, lead.is_some());
    let holders = unix_holders(snap);
    let filler = || Filler {
        snap,
        opts,
        holders: &holders,
        users: rustc_hash::FxHashMap::default(),
        last: None,
        cell: String::new(),
        lead,
    };
    let title = |c: Col| match (c, lead) {
        (Col::Lead, Some(l)) => l.title,
        _ => c.title(),
    };
    // In a table of up to `keep_rows` rows each cell is formatted once, into one buffer per part
    // that the second pass prints, until the part's buffer reaches its share of `keep_bytes`;
    // other rows are formatted again in the second pass, so that no table costs more than a
    // bounded amount of memory beyond its sockets (doc/reference/BENCHMARKS.md, "Big tables").
    let rows = indexed_rows(snap).count();
    let keep = rows <= keep_rows;
    let n = if rows >= PARALLEL_ROWS {
        parts.max(1)
    } else {
        1
    };
    let len = snap.sockets.len();
    let ranges = (0..n).map(|k| k * len / n..(k + 1) * len / n);
    let keep_bytes = keep.then_some(keep_bytes / n);
    let parts: Vec<Part> = if n == 1 {
        vec![Part::measure(filler(), &cols, 0..len, keep_bytes)]
    } else {
        std::thread::scope(|sc| {
            let handles: Vec<_> = ranges
                .map(|r| {
                    let (f, cols) = (filler(), &cols);
                    sc.spawn(move || Part::measure(f, cols, r, keep_bytes))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    let mut widths: Vec<usize> = cols.iter().map(|c| width(title(*c))).collect();
    for p in &parts {
        for (w, pw) in widths.iter_mut().zip(&p.widths) {
            *w = (*w).max(*pw);
        }
    }

    let last = cols.len() - 1;
    let mut line = String::with_capacity(256);
    if opts.header {
        for (ci, col) in cols.iter().enumerate() {
            pad(
                &mut line,
                title(*col),
                widths[ci],
                col.right_aligned(),
                ci == last,
                "",
            );
        }
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    let mut f = filler();
    let mut text = String::new();
    for part in parts {
        let mut start = 0;
        let mut kept = part.ends.iter();
        for (i, s, o) in indexed_rows_in(snap, part.range.clone()) {
            line.clear();
            for (ci, col) in cols.iter().enumerate() {
                text.clear();
                match kept.next() {
                    Some(&end) => {
                        text.push_str(&part.arena[start..end as usize]);
                        start = end as usize;
                    }
                    None => {
                        let (t, cut) = f.fill(*col, i, s, o);
                        text.push_str(t);
                        if cut {
                            text.push('…');
                        }
                    }
                }
                let color = if !opts.color {
                    ""
                } else if *col == Col::State {
                    state_color(s.state)
                } else if o.is_none() && matches!(col, Col::Command | Col::Pid | Col::Fd) {
                    "\x1b[2m"
                } else {
                    ""
                };
                pad(
                    &mut line,
                    &text,
                    widths[ci],
                    col.right_aligned(),
                    ci == last,
                    color,
                );
            }
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
    }
    Ok(())
}

/// Formats one cell at a time into a reused buffer.
struct Filler<'a, 'l> {
    snap: &'a Snapshot,
    opts: &'a Options,
    holders: &'a fmt::UnixHolders,
    users: rustc_hash::FxHashMap<u32, String>,
    /// The process of the last holder looked up: a row's USER, COMMAND and ARGS cells ask for
    /// the same one.
    last: Option<(u32, Option<&'a crate::model::Process>)>,
    cell: String,
    lead: Option<&'a Lead<'l>>,
}

impl Filler<'_, '_> {
    /// The cell's text, cut to the column's cap (unless wide), and whether it was cut (the
    /// caller adds the ellipsis).
    fn fill(&mut self, col: Col, index: usize, s: &Socket, o: Option<&Owner>) -> (&str, bool) {
        let snap = self.snap;
        let looked_up = match (o, self.last) {
            (None, _) => None,
            (Some(o), Some((pid, p))) if pid == o.pid => p,
            (Some(o), _) => {
                let p = snap.process(o.pid);
                self.last = Some((o.pid, p));
                p
            }
        };
        // A socket only the kernel holds (a TIME-WAIT entry, a request socket, a connection
        // waiting in a listener's accept queue, an orphan being closed: no inode, so no fd can
        // point at it) is named by its state, `(time-wait)`, `(accept-queue)`, with `-` for the
        // user, pid and fd: recognisable without -s, and never taken for a connection whose
        // holder is unknown (`?`). So is one of the kernel's own netlink sockets, `(kernel)`.
        let kernel_only = o.is_none() && (s.id.is_none() || s.is_kernel_socket());
        let cell = &mut self.cell;
        let holders = self.holders;
        let users = &mut self.users;
        cell.clear();
        match col {
            Col::Lead => {
                if let Some(l) = self.lead {
                    cell.push_str((l.cell)(index));
                }
            }
            Col::Zone => match snap.zone_of(s) {
                Some(z) => cell.push_str(&sanitize::for_terminal(z.name.as_bytes())),
                None => cell.push('?'),
            },
            Col::User => match row_uid_of(s, o, looked_up) {
                Some(uid) => {
                    cell.push_str(users.entry(uid).or_insert_with(|| user_label(snap, uid)))
                }
                None if kernel_only => cell.push('-'),
                None => cell.push('?'),
            },
            Col::Command => match looked_up.and_then(|p| p.command.as_ref()) {
                Some(c) => cell.push_str(&sanitize::for_terminal(c.as_bytes())),
                None if kernel_only && s.is_kernel_socket() => cell.push_str("(kernel)"),
                None if kernel_only => match s.state {
                    // A connection the kernel completed that the listener has not accepted.
                    State::Established | State::CloseWait => cell.push_str("(accept-queue)"),
                    state => {
                        let state = state.name().to_ascii_lowercase().replace('_', "-");
                        let _ = write!(cell, "({state})");
                    }
                },
                None => cell.push('?'),
            },
            Col::Pid => match o {
                Some(o) => fmt::push_uint(cell, u64::from(o.pid)),
                None if kernel_only => cell.push('-'),
                None => cell.push('?'),
            },
            Col::Fd => match o {
                Some(o) => fmt::push_uint(cell, u64::from(o.fd)),
                None if kernel_only => cell.push('-'),
                None => cell.push('?'),
            },
            Col::Proto => fmt::write_proto(cell, s),
            Col::Local => fmt::write_local(cell, s, snap, holders),
            Col::Foreign => fmt::write_foreign(cell, s, holders),
            Col::State => cell.push_str(&s.state.name()),
            Col::Cgroup => match s.cgroup_id.map(|id| snap.cgroups.get(&id)) {
                Some(Some(path)) => cell.push_str(&sanitize::for_terminal(path.as_bytes())),
                Some(None) => cell.push('?'),
                None => cell.push('-'),
            },
            Col::Id => match s.id {
                Some(id) => fmt::push_uint(cell, id),
                None => cell.push('-'),
            },
            Col::Rtt
            | Col::MinRtt
            | Col::Cwnd
            | Col::Wscale
            | Col::SndWnd
            | Col::RcvWnd
            | Col::Unacked
            | Col::Retrans
            | Col::Delivery
            | Col::RwndLimited
            | Col::SndbufLimited
            | Col::Cc => tcp_cell(cell, col, s),
            Col::Rmem | Col::Wmem | Col::Drops => memory_cell(cell, col, s),
            Col::Args => match looked_up.and_then(|p| p.args.as_ref()) {
                Some(args) => {
                    for (i, a) in args.iter().enumerate() {
                        if i > 0 {
                            cell.push(' ');
                        }
                        cell.push_str(&sanitize::for_terminal(a.as_bytes()));
                    }
                }
                None => cell.push('?'),
            },
        }
        let full = cell.len();
        let text = match col.cap() {
            Some(cap) if !self.opts.wide => truncate(cell, cap),
            _ => cell.as_str(),
        };
        let cut = text.len() < full;
        (text, cut)
    }
}

/// Appends `text` padded to `width` (the last column is not padded on the right), wrapped in
/// `color` when one is given.
fn pad(line: &mut String, text: &str, width: usize, right: bool, last: bool, color: &str) {
    let fill = width.saturating_sub(self::width(text));
    if right {
        line.extend(std::iter::repeat_n(' ', fill));
    }
    if color.is_empty() {
        line.push_str(text);
    } else {
        line.push_str(color);
        line.push_str(text);
        line.push_str("\x1b[0m");
    }
    if !last {
        if !right {
            line.extend(std::iter::repeat_n(' ', fill));
        }
        line.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Endpoint, Family, Owner, OwnersStatus, Process, Proto, RawString, SockType,
    };

    /// A table kept whole, one kept in part (past [`KEEP_BYTES`]) and one formatted twice (past
    /// [`KEEP_ROWS`]) print the same bytes: owned and unowned rows, a cut command, a multi-byte
    /// one, colour.
    #[test]
    fn kept_and_reformatted_tables_are_identical() {
        let sock = |port: u16, owners: Vec<Owner>| crate::model::Socket {
            id: Some(u64::from(port)),
            uid: Some(0),
            owners_status: if owners.is_empty() {
                OwnersStatus::Hidden
            } else {
                OwnersStatus::Known
            },
            owners,
            ..crate::model::Socket::new(
                Proto::Tcp,
                Family::Inet,
                SockType::Stream,
                if port % 2 == 0 {
                    State::Listen
                } else {
                    State::Established
                },
                Endpoint::Inet {
                    addr: "192.0.2.1".parse().unwrap(),
                    port,
                },
                None,
            )
        };
        let mut snap = Snapshot {
            sockets: vec![
                sock(80, vec![Owner { pid: 7, fd: 3 }, Owner { pid: 8, fd: 4 }]),
                sock(81, vec![]),
                sock(82, vec![Owner { pid: 8, fd: 9 }]),
            ],
            ..Snapshot::default()
        };
        for (pid, name) in [
            (7, "a-command-name-far-too-long-for-its-column".as_bytes()),
            (8, "naïve—ünïcode".as_bytes()),
        ] {
            snap.processes.insert(
                pid,
                Process {
                    pid,
                    command: Some(RawString::new(name)),
                    uid: Some(0),
                    args: None,
                },
            );
        }
        for color in [false, true] {
            let opts = Options {
                header: true,
                state: true,
                owners: true,
                color,
                ..Options::default()
            };
            let render = |keep| {
                let mut out = Vec::new();
                write_rows(&snap, &opts, None, keep, 1, &mut out).unwrap();
                String::from_utf8(out).unwrap()
            };
            let kept = render((usize::MAX, usize::MAX));
            assert_eq!(kept.lines().count(), 5, "{kept}");
            assert!(kept.contains('…'), "{kept}");
            for keep in [
                (0, usize::MAX),
                (3, usize::MAX),
                (usize::MAX, 0),
                (usize::MAX, 150),
            ] {
                assert_eq!(kept, render(keep), "keep {keep:?}");
            }
        }

        // A table big enough to be formatted in parts prints what one part prints, kept whole,
        // in part, or not at all, its widest cells in the last part.
        let n = PARALLEL_ROWS * 2 + 7;
        snap.sockets = (0..n)
            .map(|k| {
                let port = (k % 60_000) as u16 + 1;
                let owners = match k % 3 {
                    _ if k == n - 1 => vec![Owner {
                        pid: 10,
                        fd: 123_456,
                    }],
                    0 => vec![],
                    1 => vec![Owner {
                        pid: 7,
                        fd: k as u32,
                    }],
                    _ => vec![Owner { pid: 8, fd: 1 }, Owner { pid: 9, fd: 2 }],
                };
                sock(port, owners)
            })
            .collect();
        for (pid, name, uid) in [(9, "x", 70_000), (10, "a-wide-command-in-the-last-part", 0)] {
            snap.processes.insert(
                pid,
                Process {
                    pid,
                    command: Some(RawString::new(name.as_bytes())),
                    uid: Some(uid),
                    args: None,
                },
            );
        }
        let opts = Options {
            header: true,
            state: true,
            owners: true,
            wide: true,
            ..Options::default()
        };
        let render = |keep, parts| {
            let mut out = Vec::new();
            write_rows(&snap, &opts, None, keep, parts, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let one = render((usize::MAX, usize::MAX), 1);
        assert_eq!(one.lines().count(), 1 + n + n / 3, "header and rows");
        for keep in [
            (usize::MAX, usize::MAX),
            (0, usize::MAX),
            (usize::MAX, 200_000),
        ] {
            for parts in [2, 3, 4] {
                assert!(render(keep, parts) == one, "keep {keep:?}, {parts} parts");
            }
        }
    }
}
