//! Watch mode (`--watch [SECONDS]`, `--events`, `--count N`): the listing collected again and
//! again. On a terminal the table is redrawn in place on the alternate screen, which is restored
//! on exit (also on Ctrl-C, SIGTERM and SIGHUP); elsewhere successive snapshots are printed,
//! each after a `=== <UTC time> ===` line (JSON: one listing document per line). `--events`
//! prints the sockets that appeared and disappeared between refreshes; `-T --json` prints one
//! JSON line per TCP connection per refresh (a time series).
//!
//! The diff ([`diff`], [`SocketKey`]) is pure; the loop gathers with `sockstat::collect` and shows
//! snapshots with the library's renderers. Nothing here reads the system except through them.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use serde_json::value::RawValue;
use sockstat::render::{self, sanitize, Options};
use sockstat::{Endpoint, OwnersStatus, Proto, Query, Snapshot, Socket, State, UnixName};

use crate::cli::OutputArgs;

/// The interval when `--watch` is given without one.
pub const DEFAULT_INTERVAL_SECS: f64 = 2.0;

/// Parses the `--watch` interval: seconds, above 0 (fractions allowed), at most a day.
pub fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a watch interval: give seconds above 0 and at most 86400 (e.g. 2 or 0.5)"
        )),
    }
}

/// What identifies one socket across refreshes: the kernel's socket cookie, or, from the /proc
/// fallback (no cookies), the protocol, both addresses, the inode and the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SocketKey {
    /// `INET_DIAG_ID`/`UNIX_DIAG` cookie: unique on the host for the socket's lifetime.
    Cookie(u64),
    /// No cookie: the tuple.
    Tuple {
        /// Protocol.
        proto: Proto,
        /// Local end.
        local: Endpoint,
        /// Remote end.
        remote: Option<Endpoint>,
        /// Inode (`None` for TIME_WAIT and request sockets).
        id: Option<u64>,
        /// Network namespace key, when zones were read.
        netns: Option<u64>,
    },
}

impl SocketKey {
    /// The key of one socket.
    pub fn of(s: &Socket) -> SocketKey {
        match s.cookie {
            Some(c) => SocketKey::Cookie(c),
            None => SocketKey::Tuple {
                proto: s.proto,
                local: s.local.clone(),
                remote: s.remote.clone(),
                id: s.id,
                netns: s.netns,
            },
        }
    }
}

/// What changed between two snapshots, as indices into them, in each snapshot's own order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Sockets of the newer snapshot that the older did not have.
    pub opened: Vec<usize>,
    /// Sockets of the older snapshot that the newer no longer has.
    pub closed: Vec<usize>,
}

/// Sockets that appeared (`opened`, in `next`) and disappeared (`closed`, in `prev`).
pub fn diff(prev: &[Socket], next: &[Socket]) -> Changes {
    let before: HashMap<SocketKey, usize> = prev
        .iter()
        .enumerate()
        .map(|(i, s)| (SocketKey::of(s), i))
        .collect();
    let after: HashMap<SocketKey, usize> = next
        .iter()
        .enumerate()
        .map(|(i, s)| (SocketKey::of(s), i))
        .collect();
    Changes {
        opened: (0..next.len())
            .filter(|&i| !before.contains_key(&SocketKey::of(&next[i])))
            .collect(),
        closed: (0..prev.len())
            .filter(|&i| !after.contains_key(&SocketKey::of(&prev[i])))
            .collect(),
    }
}

/// Gives each socket of `next` that has no holder left but had one in `prev` the holders it
/// had. A process that exits loses its fd table before the kernel frees its sockets, so the
/// last refresh before a close often sees the socket unowned; the close event should still
/// name who held it.
pub fn carry_owners(prev: &Snapshot, next: &mut Snapshot) {
    let before: HashMap<SocketKey, usize> = prev
        .sockets
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.owners.is_empty())
        .map(|(i, s)| (SocketKey::of(s), i))
        .collect();
    if before.is_empty() {
        return;
    }
    for s in next.sockets.iter_mut() {
        if !s.owners.is_empty() || s.owners_status == OwnersStatus::NotRequested {
            continue;
        }
        let Some(&i) = before.get(&SocketKey::of(s)) else {
            continue;
        };
        let old = &prev.sockets[i];
        s.owners = old.owners.clone();
        s.owners_status = old.owners_status;
        for o in &old.owners {
            if let Some(p) = prev.processes.get(&o.pid) {
                next.processes.entry(o.pid).or_insert_with(|| p.clone());
                if let Some(uid) = p.uid {
                    if let Some(name) = prev.users.get(&uid) {
                        next.users.entry(uid).or_insert_with(|| name.clone());
                    }
                }
            }
        }
    }
}

/// A time as RFC 3339 in UTC with milliseconds: `2026-11-22T14:50:01.123Z`.
pub fn utc_timestamp(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days to civil date: Howard Hinnant's `civil_from_days` (public domain algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

fn push_unix_name(out: &mut String, name: &UnixName) {
    let raw = match name {
        UnixName::Path(p) => p,
        UnixName::Abstract(p) => {
            out.push('@');
            p
        }
    };
    out.push_str(&sanitize::for_terminal(raw.as_bytes()));
}

/// An endpoint as the table spells it (`127.0.0.1:80`, `[::1]:25`, `*:22`, `*:*`, a unix path).
fn push_endpoint(out: &mut String, ep: Option<&Endpoint>) {
    use std::fmt::Write as _;
    match ep {
        None => out.push_str("*:*"),
        Some(Endpoint::Inet { addr, port }) => {
            match addr {
                a if a.is_unspecified() => out.push('*'),
                std::net::IpAddr::V4(a) => {
                    let _ = write!(out, "{a}");
                }
                std::net::IpAddr::V6(a) => {
                    let _ = write!(out, "[{a}]");
                }
            }
            match port {
                0 => out.push_str(":*"),
                p => {
                    let _ = write!(out, ":{p}");
                }
            }
        }
        Some(Endpoint::Unix(None)) => out.push('*'),
        Some(Endpoint::Unix(Some(n))) | Some(Endpoint::UnixPeer { name: Some(n), .. }) => {
            push_unix_name(out, n)
        }
        Some(Endpoint::UnixPeer { peer, name: None }) => {
            let _ = write!(out, "[inode {peer}]");
        }
        Some(Endpoint::Packet { protocol, ifindex }) => {
            let _ = write!(out, "proto 0x{protocol:04x}");
            if *ifindex != 0 {
                let _ = write!(out, " if {ifindex}");
            }
        }
    }
}

/// One event line: `+ tcp4 127.0.0.1:80 *:* LISTEN nginx[812] fd 6` (`-` when it closed).
/// Every holder is listed (`, `-separated); `?` when none is known.
pub fn event_line(sign: char, snap: &Snapshot, s: &Socket, zone: bool) -> String {
    use std::fmt::Write as _;
    let mut line = String::new();
    line.push(sign);
    line.push(' ');
    if zone {
        if let Some(z) = snap.zone_of(s) {
            line.push_str(&sanitize::for_terminal(z.name.as_bytes()));
            line.push(' ');
        }
    }
    line.push_str(s.proto_label());
    line.push(' ');
    push_endpoint(&mut line, Some(&s.local));
    line.push(' ');
    push_endpoint(&mut line, s.remote.as_ref());
    line.push(' ');
    line.push_str(&s.state.name());
    line.push(' ');
    if s.owners.is_empty() {
        line.push_str(match s.owners_status {
            OwnersStatus::NotRequested => "-",
            _ => "?",
        });
    }
    for (i, o) in s.owners.iter().enumerate() {
        if i > 0 {
            line.push_str(", ");
        }
        let cmd = snap
            .process(o.pid)
            .and_then(|p| p.command.as_ref())
            .map(|c| sanitize::for_terminal(c.as_bytes()).into_owned())
            .unwrap_or_else(|| "?".into());
        let _ = write!(line, "{cmd}[{}] fd {}", o.pid, o.fd);
    }
    line
}

/// A snapshot holding only `picked` sockets of `snap` (with their processes), for rendering
/// those sockets as the listing would.
fn subset(snap: &Snapshot, picked: &[usize]) -> Snapshot {
    let sockets: Vec<Socket> = picked.iter().map(|&i| snap.sockets[i].clone()).collect();
    let processes = sockets
        .iter()
        .flat_map(|s| s.owners.iter())
        .filter_map(|o| snap.processes.get(&o.pid).map(|p| (o.pid, p.clone())))
        .collect();
    Snapshot {
        sockets,
        processes,
        users: snap.users.clone(),
        warnings: Vec::new(),
        cgroups: snap.cgroups.clone(),
        zones: snap.zones.clone(),
    }
}

/// Each socket of `snap` as the listing's JSON object (exact bytes, field order kept).
fn socket_objects(snap: &Snapshot, opts: &Options) -> anyhow::Result<Vec<Box<RawValue>>> {
    #[derive(serde::Deserialize)]
    struct Listing {
        sockets: Vec<Box<RawValue>>,
    }
    let mut buf = Vec::new();
    render::json::write(snap, opts, &mut buf)?;
    let doc: Listing =
        serde_json::from_slice(&buf).context("the JSON renderer's output did not parse")?;
    Ok(doc.sockets)
}

/// What each refresh prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Redraw the listing in place on the terminal.
    Screen,
    /// Successive listings, each after a timestamp line (JSON: one document per line).
    Snapshots,
    /// Opened and closed sockets.
    Events,
    /// `-T --json`: one line per TCP connection per refresh.
    TcpSeries,
}

/// Sets the flag on SIGINT, SIGTERM and SIGHUP, so the loop ends cleanly (terminal restored).
pub(crate) fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .with_context(|| format!("cannot handle signal {sig}"))?;
    }
    Ok(stop)
}

/// Sleeps until `next_at + interval` (or `until`, if sooner), waking every 50 ms to notice
/// `stop`, and moves `next_at` there. A refresh that took longer than the interval starts the
/// next one at once, from now: no burst of catch-up refreshes.
pub(crate) fn wait_for_next(
    stop: &AtomicBool,
    next_at: &mut Instant,
    interval: Duration,
    until: Option<Instant>,
) {
    *next_at += interval;
    let now = Instant::now();
    if *next_at < now {
        *next_at = now;
    }
    let end = until.map_or(*next_at, |u| (*next_at).min(u));
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        let left = end.saturating_duration_since(Instant::now());
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// The alternate screen, entered on creation and left on drop (also when the loop fails).
struct AltScreen;

impl AltScreen {
    fn enter() -> io::Result<AltScreen> {
        let mut out = io::stdout().lock();
        // Alternate screen, cursor hidden, no line wrap (a row wider than the terminal is cut
        // rather than wrapped onto the next line, which would scroll the title off).
        out.write_all(b"\x1b[?1049h\x1b[?25l\x1b[?7l")?;
        out.flush()?;
        Ok(AltScreen)
    }
}

impl Drop for AltScreen {
    fn drop(&mut self) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(b"\x1b[?7h\x1b[?25h\x1b[?1049l");
        let _ = out.flush();
    }
}

/// Writes one refresh to standard output; a failure (a full disk; a closed pipe ends quietly
/// in `main`) says it was the output.
fn emit(stdout: &io::Stdout, buf: &[u8]) -> anyhow::Result<()> {
    let mut out = stdout.lock();
    out.write_all(buf)
        .and_then(|()| out.flush())
        .context("cannot write the refresh to standard output")
}

/// Rows and columns of the terminal on stdout, when it is one.
fn terminal_rows() -> Option<usize> {
    // SAFETY: TIOCGWINSZ writes a `winsize` into the struct we own.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        (libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_row > 0)
            .then_some(ws.ws_row as usize)
    }
}

/// Writes the listing (table, CSV, summary or JSON) as the plain listing would.
fn write_listing(
    snap: &Snapshot,
    opts: &Options,
    o: &OutputArgs,
    out: &mut dyn Write,
) -> io::Result<()> {
    match (o.json, o.csv, o.summary) {
        (true, _, true) => render::summary::write_json(snap, opts, out),
        (true, _, false) => render::json::write(snap, opts, out),
        (false, true, true) => render::summary::write_csv(snap, opts, out),
        (false, true, false) => render::csv::write(snap, opts, out),
        (false, false, true) => render::summary::write_table(snap, opts, out),
        (false, false, false) => render::table::write(snap, opts, out),
    }
}

/// The command line as typed, for the screen's title line.
pub fn title() -> String {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| sanitize::for_terminal(a.as_encoded_bytes()).into_owned())
        .collect();
    std::iter::once("sockstat".to_string())
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs the watch loop until `--count` refreshes were made or a signal arrives.
pub fn run(query: &Query, opts: &Options, o: &OutputArgs, what: &str) -> anyhow::Result<()> {
    let interval = Duration::from_secs_f64(o.watch.unwrap_or(DEFAULT_INTERVAL_SECS));
    let mode = if o.events {
        Mode::Events
    } else if o.tcp_info && o.json && !o.summary {
        Mode::TcpSeries
    } else if !o.json
        && io::stdout().is_terminal()
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
    {
        Mode::Screen
    } else {
        Mode::Snapshots
    };
    let stop = stop_flag()?;
    let _screen = match mode {
        Mode::Screen => Some(AltScreen::enter()?),
        _ => None,
    };
    let stdout = io::stdout();
    let mut prev: Option<Snapshot> = None;
    let mut last_warnings: Vec<sockstat::WarningCode> = Vec::new();
    let mut refreshes: u64 = 0;
    let mut next_at = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let snap = sockstat::collect(query)?;
        let now = utc_timestamp(SystemTime::now());
        refreshes += 1;
        let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
        match mode {
            Mode::Screen => {
                let mut body = Vec::new();
                write_listing(&snap, opts, o, &mut body)?;
                for w in &snap.warnings {
                    writeln!(body, "sockstat: warning: {}", w.message)?;
                }
                write_frame(&mut buf, what, interval, &now, &body, terminal_rows());
            }
            Mode::Snapshots => {
                if o.json {
                    // One document per line: the renderer's newlines are only layout (JSON
                    // strings carry theirs escaped).
                    let mut doc = Vec::new();
                    write_listing(&snap, opts, o, &mut doc)?;
                    buf.extend(doc.iter().filter(|&&b| b != b'\n'));
                    buf.push(b'\n');
                } else {
                    writeln!(buf, "=== {now} ===")?;
                    write_listing(&snap, opts, o, &mut buf)?;
                }
            }
            Mode::Events => {
                if let Some(p) = &prev {
                    write_events(&mut buf, p, &snap, opts, o.json, &now)?;
                }
            }
            Mode::TcpSeries => write_tcp_series(&mut buf, &snap, opts, &now)?,
        }
        emit(&stdout, &buf)?;
        // The screen shows warnings in place and a JSON listing carries them; elsewhere they go
        // to stderr when they change.
        if mode != Mode::Screen && !(mode == Mode::Snapshots && o.json) {
            print_changed_warnings(&snap, o.verbose, &mut last_warnings);
        }
        if o.count.is_some_and(|n| refreshes >= n) {
            break;
        }
        if mode == Mode::Events {
            let mut snap = snap;
            if let Some(p) = &prev {
                carry_owners(p, &mut snap);
            }
            prev = Some(snap);
        }
        wait_for_next(&stop, &mut next_at, interval, None);
    }
    Ok(())
}

/// Warnings on stderr when a kind of warning appears or goes (by code: a count that moves from
/// one refresh to the next does not repeat them).
fn print_changed_warnings(snap: &Snapshot, verbose: bool, last: &mut Vec<sockstat::WarningCode>) {
    let now: Vec<sockstat::WarningCode> = snap.warnings.iter().map(|w| w.code).collect();
    if now == *last {
        return;
    }
    let mut err = io::stderr().lock();
    for w in &snap.warnings {
        let _ = writeln!(err, "sockstat: warning: {}", w.message);
        if verbose {
            for d in &w.details {
                let _ = writeln!(err, "sockstat:   {d}");
            }
        }
    }
    *last = now;
}

/// One screen: a title line as watch(1) has it, then the listing, cut to the terminal's height;
/// every line clears to its end and the rest of the screen is cleared, so nothing flickers.
fn write_frame(
    buf: &mut Vec<u8>,
    what: &str,
    interval: Duration,
    now: &str,
    body: &[u8],
    rows: Option<usize>,
) {
    buf.extend_from_slice(b"\x1b[H");
    let title = format!("Every {:.1}s: {what}    {now}", interval.as_secs_f64());
    buf.extend_from_slice(title.as_bytes());
    buf.extend_from_slice(b"\x1b[K\n\x1b[K\n");
    let lines: Vec<&[u8]> = body
        .strip_suffix(b"\n")
        .unwrap_or(body)
        .split(|&b| b == b'\n')
        .collect();
    let room = rows.map_or(usize::MAX, |r| r.saturating_sub(3).max(1));
    let shown = if lines.len() > room {
        room - 1
    } else {
        lines.len()
    };
    for l in &lines[..shown] {
        buf.extend_from_slice(l);
        buf.extend_from_slice(b"\x1b[K\n");
    }
    if shown < lines.len() {
        let more = format!(
            "... {} more lines (filter, or pipe to see all)",
            lines.len() - shown
        );
        buf.extend_from_slice(more.as_bytes());
        buf.extend_from_slice(b"\x1b[K\n");
    }
    buf.extend_from_slice(b"\x1b[J");
}

/// Closed sockets first (from the previous snapshot, with the owners they had), then opened.
fn write_events(
    buf: &mut Vec<u8>,
    prev: &Snapshot,
    next: &Snapshot,
    opts: &Options,
    json: bool,
    now: &str,
) -> anyhow::Result<()> {
    let ch = diff(&prev.sockets, &next.sockets);
    if json {
        let time = serde_json::to_string(now)?;
        for (event, snap, picked) in [("close", prev, &ch.closed), ("open", next, &ch.opened)] {
            if picked.is_empty() {
                continue;
            }
            for obj in socket_objects(&subset(snap, picked), opts)? {
                writeln!(
                    buf,
                    "{{\"event\":\"{event}\",\"time\":{time},\"socket\":{}}}",
                    obj.get()
                )?;
            }
        }
    } else {
        for &i in &ch.closed {
            writeln!(
                buf,
                "{}",
                event_line('-', prev, &prev.sockets[i], opts.zone)
            )?;
        }
        for &i in &ch.opened {
            writeln!(
                buf,
                "{}",
                event_line('+', next, &next.sockets[i], opts.zone)
            )?;
        }
    }
    Ok(())
}

/// One JSON line per TCP connection (not LISTEN) that has `tcp_info`: time, identity, ends,
/// owners, then every field of the listing's `"tcp"` object at the top level.
fn write_tcp_series(
    buf: &mut Vec<u8>,
    snap: &Snapshot,
    opts: &Options,
    now: &str,
) -> anyhow::Result<()> {
    let picked: Vec<usize> = snap
        .sockets
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            matches!(s.proto, Proto::Tcp | Proto::Mptcp)
                && s.state != State::Listen
                && s.tcp.is_some()
        })
        .map(|(i, _)| i)
        .collect();
    if picked.is_empty() {
        return Ok(());
    }
    for obj in socket_objects(&subset(snap, &picked), opts)? {
        let serde_json::Value::Object(mut sock) = serde_json::from_str(obj.get())? else {
            anyhow::bail!("the JSON renderer wrote a socket that is not an object");
        };
        let mut line = serde_json::Map::new();
        line.insert("time".into(), now.into());
        for k in [
            "zone", "cookie", "id", "proto", "family", "state", "local", "remote", "recv_q",
            "send_q", "owners",
        ] {
            if let Some(v) = sock.remove(k) {
                line.insert(k.into(), v);
            }
        }
        if let Some(serde_json::Value::Object(tcp)) = sock.remove("tcp") {
            line.extend(tcp);
        }
        for k in ["timer", "memory", "cgroup"] {
            if let Some(v) = sock.remove(k) {
                line.insert(k.into(), v);
            }
        }
        serde_json::to_writer(&mut *buf, &line)?;
        buf.push(b'\n');
    }
    Ok(())
}

/// What one refresh of a subcommand's view wrote: its output and its warning lines.
pub struct Frame {
    /// What the view writes on standard output.
    pub out: Vec<u8>,
    /// Its warning lines (`sockstat: warning: ...`), as it writes them on standard error.
    pub err: Vec<u8>,
}

/// `--watch` for a subcommand (`ports`, `counters`, `diagnose`): `refresh` runs the view once,
/// writing into the two buffers of a [`Frame`], and returns the view's exit status. On a
/// terminal each refresh redraws the screen, warnings included; elsewhere each refresh is printed
/// after a `=== <UTC time> ===` line (JSON: one document per line) and warnings go to stderr when
/// they change. Returns the exit status of the last refresh.
pub fn run_view(
    interval_s: f64,
    count: Option<u64>,
    json: bool,
    what: &str,
    mut refresh: impl FnMut(&mut Frame) -> anyhow::Result<std::process::ExitCode>,
) -> anyhow::Result<std::process::ExitCode> {
    let interval = Duration::from_secs_f64(interval_s);
    let screen =
        !json && io::stdout().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    let stop = stop_flag()?;
    let _screen = if screen {
        Some(AltScreen::enter()?)
    } else {
        None
    };
    let stdout = io::stdout();
    let mut last_err: Vec<u8> = Vec::new();
    let mut code = std::process::ExitCode::SUCCESS;
    let mut refreshes: u64 = 0;
    let mut next_at = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let mut frame = Frame {
            out: Vec::with_capacity(16 * 1024),
            err: Vec::new(),
        };
        code = refresh(&mut frame)?;
        if stop.load(Ordering::Relaxed) && refreshes > 0 {
            // Interrupted mid-refresh (a view that samples twice): nothing half-done is shown.
            break;
        }
        refreshes += 1;
        let now = utc_timestamp(SystemTime::now());
        let mut buf: Vec<u8> = Vec::with_capacity(frame.out.len() + 256);
        if screen {
            let mut body = frame.out;
            body.extend_from_slice(&frame.err);
            write_frame(&mut buf, what, interval, &now, &body, terminal_rows());
        } else if json {
            buf.extend(frame.out.iter().filter(|&&b| b != b'\n'));
            buf.push(b'\n');
        } else {
            writeln!(buf, "=== {now} ===")?;
            buf.extend_from_slice(&frame.out);
        }
        emit(&stdout, &buf)?;
        if !screen && frame.err != last_err {
            let mut err = io::stderr().lock();
            let _ = err.write_all(&frame.err);
            last_err = frame.err;
        }
        if count.is_some_and(|n| refreshes >= n) {
            break;
        }
        wait_for_next(&stop, &mut next_at, interval, None);
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sockstat::{Family, Owner, Process, RawString, SockType};
    use std::net::IpAddr;

    fn tcp(cookie: Option<u64>, port: u16, id: u64) -> Socket {
        Socket {
            id: Some(id),
            cookie,
            proto: Proto::Tcp,
            family: Family::Inet,
            sock_type: SockType::Stream,
            state: State::Listen,
            local: Endpoint::Inet {
                addr: "127.0.0.1".parse::<IpAddr>().unwrap(),
                port,
            },
            remote: None,
            recv_q: 0,
            send_q: 128,
            uid: Some(0),
            owners_status: OwnersStatus::None,
            owners: Vec::new(),
            timer: None,
            netns: None,
            tcp: None,
            memory: None,
            cgroup_id: None,
            bound_ifindex: None,
        }
    }

    #[test]
    fn diff_by_cookie_ignores_everything_else() {
        let a = vec![tcp(Some(1), 80, 10), tcp(Some(2), 81, 11)];
        let mut moved = tcp(Some(2), 81, 11);
        moved.state = State::Established;
        moved.recv_q = 5;
        let b = vec![moved, tcp(Some(3), 82, 12)];
        assert_eq!(
            diff(&a, &b),
            Changes {
                opened: vec![1],
                closed: vec![0]
            }
        );
    }

    #[test]
    fn same_tuple_new_cookie_is_a_new_socket() {
        // A listener closed and reopened on the same port between refreshes.
        let a = vec![tcp(Some(1), 80, 10)];
        let b = vec![tcp(Some(9), 80, 10)];
        assert_eq!(
            diff(&a, &b),
            Changes {
                opened: vec![0],
                closed: vec![0]
            }
        );
    }

    #[test]
    fn without_cookies_the_tuple_and_inode_identify() {
        let a = vec![tcp(None, 80, 10), tcp(None, 81, 11)];
        let b = vec![tcp(None, 80, 10), tcp(None, 81, 99)];
        assert_eq!(
            diff(&a, &b),
            Changes {
                opened: vec![1],
                closed: vec![1]
            }
        );
        assert_eq!(diff(&a, &a), Changes::default());
        assert_eq!(diff(&[], &a).opened, vec![0, 1]);
        assert_eq!(diff(&a, &[]).closed, vec![0, 1]);
    }

    #[test]
    fn event_line_names_every_holder() {
        let mut s = tcp(Some(1), 80, 10);
        s.owners = vec![Owner { pid: 812, fd: 6 }, Owner { pid: 813, fd: 6 }];
        s.owners_status = OwnersStatus::Known;
        let mut snap = Snapshot::default();
        snap.processes.insert(
            812,
            Process {
                pid: 812,
                command: Some(RawString::new(b"nginx")),
                uid: Some(0),
                args: None,
            },
        );
        assert_eq!(
            event_line('+', &snap, &s, false),
            "+ tcp4 127.0.0.1:80 *:* LISTEN nginx[812] fd 6, ?[813] fd 6"
        );
        let mut s = tcp(Some(1), 0, 10);
        s.family = Family::Inet6;
        s.local = Endpoint::Inet {
            addr: "::".parse().unwrap(),
            port: 0,
        };
        assert_eq!(event_line('-', &snap, &s, false), "- tcp6 *:* *:* LISTEN ?");
    }

    #[test]
    fn a_socket_keeps_the_holders_it_had_while_its_process_exits() {
        let mut held = tcp(Some(1), 80, 10);
        held.owners = vec![Owner { pid: 7, fd: 3 }];
        held.owners_status = OwnersStatus::Known;
        let mut prev = Snapshot {
            sockets: vec![held, tcp(Some(2), 81, 11)],
            ..Snapshot::default()
        };
        prev.processes.insert(
            7,
            Process {
                pid: 7,
                command: Some(RawString::new(b"web")),
                uid: Some(0),
                args: None,
            },
        );
        let mut orphan = tcp(Some(1), 80, 10);
        orphan.owners_status = OwnersStatus::Hidden;
        let mut next = Snapshot {
            sockets: vec![orphan, tcp(Some(2), 81, 11), tcp(Some(3), 82, 12)],
            ..Snapshot::default()
        };
        carry_owners(&prev, &mut next);
        assert_eq!(next.sockets[0].owners, vec![Owner { pid: 7, fd: 3 }]);
        assert_eq!(next.sockets[0].owners_status, OwnersStatus::Known);
        assert!(next.process(7).is_some());
        assert!(next.sockets[1].owners.is_empty());
        assert_eq!(
            event_line('-', &next, &next.sockets[0], false),
            "- tcp4 127.0.0.1:80 *:* LISTEN web[7] fd 3"
        );
    }

    #[test]
    fn event_line_escapes_hostile_names() {
        let mut s = tcp(Some(1), 80, 10);
        s.owners = vec![Owner { pid: 5, fd: 3 }];
        let mut snap = Snapshot::default();
        snap.processes.insert(
            5,
            Process {
                pid: 5,
                command: Some(RawString::new(b"evil\x1b[2J")),
                uid: None,
                args: None,
            },
        );
        let line = event_line('+', &snap, &s, false);
        assert!(!line.contains('\x1b'), "{line:?}");
    }

    #[test]
    fn timestamps_are_utc_rfc3339() {
        let t = |s: u64, ms: u64| {
            utc_timestamp(
                SystemTime::UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms),
            )
        };
        assert_eq!(t(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(t(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(t(1_795_358_401, 123), "2026-11-22T14:40:01.123Z");
        assert_eq!(t(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("2"), Ok(2.0));
        assert_eq!(parse_interval("0.25"), Ok(0.25));
        for bad in ["0", "-1", "nan", "inf", "x", "100000"] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn frames_fit_the_terminal() {
        let body = b"H\na\nb\nc\nd\ne\n";
        let mut buf = Vec::new();
        write_frame(
            &mut buf,
            "sockstat",
            Duration::from_secs(2),
            "T",
            body,
            Some(6),
        );
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("\x1b[HEvery 2.0s: sockstat    T"));
        assert!(
            text.contains("H\x1b[K\na\x1b[K\n... 4 more lines"),
            "{text:?}"
        );
        assert!(text.ends_with("\x1b[J"));
        let mut buf = Vec::new();
        write_frame(&mut buf, "s", Duration::from_secs(2), "T", body, None);
        assert!(String::from_utf8(buf).unwrap().contains("e\x1b[K\n\x1b[J"));
    }
}
