//! The FreeBSD-style table: `USER COMMAND PID FD PROTO LOCAL ADDRESS FOREIGN ADDRESS`, then the
//! optional columns. One row per (socket, holder); `?` where no holder is known. Widths are
//! measured over all rows (cells are formatted once into one arena string), then every row is
//! written padded.

use std::fmt::Write as _;
use std::io::{self, Write};

use unicode_width::UnicodeWidthStr;

use super::{row_uid, rows, sanitize, unix_holders, user_label, write_endpoint, Options};
use crate::model::{Snapshot, State};

/// Column caps without `-w`: beyond these, a cell is cut and ends with `…`.
const CAP_USER: usize = 12;
const CAP_COMMAND: usize = 20;
const CAP_ADDRESS: usize = 48;
const CAP_ARGS: usize = 80;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Col {
    User,
    Command,
    Pid,
    Fd,
    Proto,
    Local,
    Foreign,
    State,
    Id,
    Args,
}

impl Col {
    fn title(self) -> &'static str {
        match self {
            Col::User => "USER",
            Col::Command => "COMMAND",
            Col::Pid => "PID",
            Col::Fd => "FD",
            Col::Proto => "PROTO",
            Col::Local => "LOCAL ADDRESS",
            Col::Foreign => "FOREIGN ADDRESS",
            Col::State => "STATE",
            Col::Id => "ID",
            Col::Args => "ARGS",
        }
    }

    fn cap(self) -> Option<usize> {
        match self {
            Col::User => Some(CAP_USER),
            Col::Command => Some(CAP_COMMAND),
            Col::Local | Col::Foreign => Some(CAP_ADDRESS),
            Col::Args => Some(CAP_ARGS),
            _ => None,
        }
    }

    fn right_aligned(self) -> bool {
        matches!(self, Col::Pid | Col::Fd | Col::Id)
    }
}

fn columns(opts: &Options) -> Vec<Col> {
    let mut c = vec![
        Col::User,
        Col::Command,
        Col::Pid,
        Col::Fd,
        Col::Proto,
        Col::Local,
        Col::Foreign,
    ];
    if opts.state {
        c.push(Col::State);
    }
    if opts.id {
        c.push(Col::Id);
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

/// Writes the table.
pub fn write(snap: &Snapshot, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let cols = columns(opts);
    let holders = unix_holders(snap);
    // Arena: every cell's text back to back; `ends[i]` is where cell i stops.
    let mut arena = String::with_capacity(snap.sockets.len() * 64);
    let mut ends: Vec<u32> = Vec::with_capacity(snap.sockets.len() * cols.len());
    let mut states: Vec<(State, bool)> = Vec::with_capacity(snap.sockets.len());
    let mut widths: Vec<usize> = cols.iter().map(|c| c.title().len()).collect();
    let mut cell = String::new();
    let mut users: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
    for (s, o) in rows(snap) {
        let process = o.and_then(|o| snap.process(o.pid));
        states.push((s.state, o.is_none()));
        for (ci, col) in cols.iter().enumerate() {
            cell.clear();
            match col {
                Col::User => match row_uid(snap, s, o) {
                    Some(uid) => {
                        cell.push_str(users.entry(uid).or_insert_with(|| user_label(snap, uid)))
                    }
                    None => cell.push('?'),
                },
                Col::Command => match process.and_then(|p| p.command.as_ref()) {
                    Some(c) => cell.push_str(&sanitize::for_terminal(c.as_bytes())),
                    None => cell.push('?'),
                },
                Col::Pid => match o {
                    Some(o) => {
                        let _ = write!(cell, "{}", o.pid);
                    }
                    None => cell.push('?'),
                },
                Col::Fd => match o {
                    Some(o) => {
                        let _ = write!(cell, "{}", o.fd);
                    }
                    None => cell.push('?'),
                },
                Col::Proto => cell.push_str(s.proto_label()),
                Col::Local => write_endpoint(&mut cell, Some(&s.local), &holders),
                Col::Foreign => write_endpoint(&mut cell, s.remote.as_ref(), &holders),
                Col::State => cell.push_str(&s.state.name()),
                Col::Id => match s.id {
                    Some(id) => {
                        let _ = write!(cell, "{id}");
                    }
                    None => cell.push('-'),
                },
                Col::Args => match process.and_then(|p| p.args.as_ref()) {
                    Some(args) => {
                        for (i, a) in args.iter().enumerate() {
                            if i > 0 {
                                cell.push(' ');
                            }
                            cell.push_str(&sanitize::for_terminal(a.as_bytes()));
                        }
                    }
                    None => cell.push(if o.is_some() { '-' } else { '?' }),
                },
            }
            let text = match col.cap() {
                Some(cap) if !opts.wide => truncate(&cell, cap),
                _ => &cell,
            };
            arena.push_str(text);
            if text.len() < cell.len() {
                arena.push('…');
            }
            ends.push(arena.len() as u32);
            let start = ends
                .len()
                .checked_sub(2)
                .map(|i| ends[i] as usize)
                .unwrap_or(0);
            let w = width(&arena[start..]);
            if w > widths[ci] {
                widths[ci] = w;
            }
        }
    }

    let last = cols.len() - 1;
    let mut line = String::with_capacity(256);
    if opts.header {
        for (ci, col) in cols.iter().enumerate() {
            pad(
                &mut line,
                col.title(),
                widths[ci],
                col.right_aligned(),
                ci == last,
                "",
            );
        }
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    let mut start = 0usize;
    for (ri, &(state, unowned)) in states.iter().enumerate() {
        line.clear();
        for (ci, col) in cols.iter().enumerate() {
            let end = ends[ri * cols.len() + ci] as usize;
            let text = &arena[start..end];
            start = end;
            let color = if !opts.color {
                ""
            } else if *col == Col::State {
                state_color(state)
            } else if unowned && matches!(col, Col::Command | Col::Pid | Col::Fd) {
                "\x1b[2m"
            } else {
                ""
            };
            pad(
                &mut line,
                text,
                widths[ci],
                col.right_aligned(),
                ci == last,
                color,
            );
        }
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
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
