//! The full-screen view of `sockstat top`: ratatui draws, crossterm owns the terminal (raw
//! mode, alternate screen, keys, resizes; restored on exit, also when the view fails). What is
//! shown comes from the library: `sockstat::top` measures and groups, `sockstat::render::top`
//! makes the cells and summary lines the batch text prints too, `sockstat::kill` closes.
//!
//! Keys: `s`/`>` next sort column, `<` previous, `b` next grouping, `/` filter (the listing's
//! flags), Enter detail, `k` kill, `?` help, `q` (or Ctrl-C, Esc at the top level) quit; arrows,
//! PgUp/PgDn, Home/End move.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Stdout};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Sparkline, Table, TableState, Wrap};
use ratatui::{Frame, Terminal};

use sockstat::render;
use sockstat::run::top::Live;
use sockstat::text::sanitize::for_terminal;
use sockstat::top::{group, By, Column, Group, Report, RowKey, SocketAt, ViewFilter};

use crate::commands::top::{TopArgs, TopFilters};

/// Points each connection's history keeps for the detail's charts.
const HISTORY: usize = 120;

/// The terminal in raw mode on the alternate screen; restored on drop.
struct Screen(Terminal<CrosstermBackend<Stdout>>);

impl Screen {
    fn enter() -> anyhow::Result<Screen> {
        terminal::enable_raw_mode()?;
        let mut out = io::stdout();
        if let Err(e) = crossterm::execute!(out, EnterAlternateScreen) {
            let _ = terminal::disable_raw_mode();
            return Err(e.into());
        }
        let mut t = Terminal::new(CrosstermBackend::new(out))?;
        t.hide_cursor()?;
        Ok(Screen(t))
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.0.show_cursor();
        let _ = crossterm::execute!(self.0.backend_mut(), LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

/// A `/` filter line: the listing's filter flags.
#[derive(Debug, Parser)]
#[command(name = "/", no_binary_name = true, disable_help_flag = true)]
struct FilterLine {
    #[command(flatten)]
    filters: TopFilters,
}

/// One connection's history: (refresh number, bytes/s sent + received, RTT µs, cwnd).
type Points = VecDeque<(u64, u64, u64, u64)>;

enum Mode {
    Table,
    Filter(String),
    Detail(RowKey),
    Help,
    /// The connections to kill (cookie, description), waiting for y/n.
    Confirm(Vec<(u64, String)>),
    /// What became of each.
    Killed(Vec<String>),
}

struct View {
    by: By,
    sort: Column,
    filter: Option<(String, ViewFilter)>,
    mode: Mode,
    state: TableState,
    report: Option<Report>,
    group: Option<Group>,
    history: HashMap<u64, Points>,
    refreshes: u64,
    message: Option<String>,
    color: bool,
}

/// Runs the full-screen view until `q` or a signal.
pub fn run(a: &TopArgs, mut live: Live, stop: &AtomicBool) -> anyhow::Result<ExitCode> {
    let mut screen = Screen::enter()?;
    let mut v = View {
        by: a.by,
        sort: a.sort,
        filter: None,
        mode: Mode::Table,
        state: TableState::default(),
        report: None,
        group: None,
        history: HashMap::new(),
        refreshes: 0,
        message: None,
        color: crate::output::use_color(a.color),
    };
    v.state.select(Some(0));
    let interval = Duration::from_secs_f64(a.interval);
    let mut next = Instant::now() + interval;
    let mut dirty = true;
    let mut took = 0;
    while !stop.load(Ordering::Relaxed) && !hung_up() {
        if dirty {
            screen.0.draw(|f| v.draw(f, a.interval))?;
            dirty = false;
        }
        // A key wakes the poll at once; the cap is for the connection events.
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Live::drain_every(took));
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(k) if k.kind != KeyEventKind::Release => {
                    if !v.key(k, &mut live) {
                        break;
                    }
                    dirty = true;
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
        took = live.drain();
        if Instant::now() >= next {
            let report = live.refresh()?;
            v.refreshes += 1;
            v.remember(&report);
            v.report = Some(report);
            v.regroup();
            next = (next + interval).max(Instant::now());
            dirty = true;
            if a.count.is_some_and(|c| v.refreshes >= c) {
                screen.0.draw(|f| v.draw(f, a.interval))?;
                break;
            }
        }
    }
    drop(screen);
    Ok(ExitCode::SUCCESS)
}

impl View {
    fn regroup(&mut self) {
        if let Some(r) = &self.report {
            let g = group(r, self.by, self.filter.as_ref().map(|(_, f)| f), self.sort);
            let n = g.rows.len();
            let sel = self.state.selected().unwrap_or(0).min(n.saturating_sub(1));
            self.state.select(Some(sel));
            self.group = Some(g);
        }
    }

    /// Adds the refresh's points to each TCP connection's history; forgets closed ones.
    fn remember(&mut self, r: &Report) {
        let mut seen = std::collections::HashSet::new();
        for c in &r.conns {
            let (Some(cookie), Some(i)) = (r.socket(c).cookie, r.tcp(c)) else {
                continue;
            };
            if !matches!(c.at, SocketAt::After { .. }) {
                continue;
            }
            seen.insert(cookie);
            let rate =
                c.send_rate(r.interval_s).unwrap_or(0) + c.recv_rate(r.interval_s).unwrap_or(0);
            let p = self.history.entry(cookie).or_default();
            p.push_back((
                self.refreshes,
                rate,
                u64::from(i.rtt_us().unwrap_or(0)),
                u64::from(i.snd_cwnd().unwrap_or(0)),
            ));
            if p.len() > HISTORY {
                p.pop_front();
            }
        }
        self.history.retain(|c, _| seen.contains(c));
    }

    fn selected_row(&self) -> Option<&sockstat::top::Row> {
        self.group.as_ref()?.rows.get(self.state.selected()?)
    }

    /// Handles a key; false to quit.
    fn key(&mut self, k: KeyEvent, live: &mut Live) -> bool {
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            return false;
        }
        self.message = None;
        match std::mem::replace(&mut self.mode, Mode::Table) {
            Mode::Filter(mut text) => {
                match k.code {
                    KeyCode::Enter => self.apply_filter(&text),
                    KeyCode::Esc => {}
                    KeyCode::Backspace => {
                        text.pop();
                        self.mode = Mode::Filter(text);
                    }
                    KeyCode::Char(c) => {
                        text.push(c);
                        self.mode = Mode::Filter(text);
                    }
                    _ => self.mode = Mode::Filter(text),
                }
                return true;
            }
            Mode::Confirm(list) => {
                if matches!(k.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                    self.mode = Mode::Killed(self.kill(&list, live));
                }
                return true;
            }
            Mode::Detail(key)
                if !matches!(k.code, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q')) =>
            {
                self.mode = Mode::Detail(key);
                return true;
            }
            Mode::Detail(_) | Mode::Help | Mode::Killed(_) => {
                if k.code == KeyCode::Char('q') {
                    return false;
                }
                return true;
            }
            Mode::Table => {}
        }
        let n = self.group.as_ref().map_or(0, |g| g.rows.len());
        let sel = self.state.selected().unwrap_or(0);
        let page = 10;
        match k.code {
            KeyCode::Char('q') | KeyCode::Esc => return false,
            KeyCode::Char('?') | KeyCode::Char('h') => self.mode = Mode::Help,
            KeyCode::Char('/') => {
                let text = self
                    .filter
                    .as_ref()
                    .map(|(t, _)| t.clone())
                    .unwrap_or_default();
                self.mode = Mode::Filter(text);
            }
            KeyCode::Char('s') | KeyCode::Char('>') => {
                self.sort = cycle(&Column::ALL, self.sort, 1);
                self.regroup();
            }
            KeyCode::Char('<') => {
                self.sort = cycle(&Column::ALL, self.sort, Column::ALL.len() - 1);
                self.regroup();
            }
            KeyCode::Char('b') => {
                self.by = self.by.next();
                self.state.select(Some(0));
                self.regroup();
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.state.select(Some((sel + 1).min(n.saturating_sub(1))))
            }
            KeyCode::Up => self.state.select(Some(sel.saturating_sub(1))),
            KeyCode::PageDown => self
                .state
                .select(Some((sel + page).min(n.saturating_sub(1)))),
            KeyCode::PageUp => self.state.select(Some(sel.saturating_sub(page))),
            KeyCode::Home => self.state.select(Some(0)),
            KeyCode::End => self.state.select(Some(n.saturating_sub(1))),
            KeyCode::Enter => {
                if let Some(r) = self.selected_row() {
                    self.mode = Mode::Detail(r.key.clone());
                }
            }
            KeyCode::Char('k') => self.mode = self.kill_list(),
            _ => {}
        }
        true
    }

    fn apply_filter(&mut self, text: &str) {
        if text.trim().is_empty() {
            self.filter = None;
            self.regroup();
            return;
        }
        let parsed = FilterLine::try_parse_from(text.split_whitespace())
            .map_err(|e| e.kind().to_string() + ": " + &first_line(&e.to_string()))
            .and_then(|f| crate::cli::query(&[&f.filters]).map_err(|e| e.to_string()));
        match parsed {
            Ok(q) => {
                self.filter = Some((text.to_string(), ViewFilter(q)));
                self.state.select(Some(0));
                self.regroup();
            }
            Err(e) => self.message = Some(format!("filter refused: {e}")),
        }
    }

    /// The selected row's connections that a kill can close (live TCP and UDP), listed.
    fn kill_list(&mut self) -> Mode {
        let (Some(r), Some(row)) = (self.report.as_ref(), self.selected_row()) else {
            return Mode::Table;
        };
        let list: Vec<(u64, String)> = row
            .conns
            .iter()
            .map(|&i| &r.conns[i])
            .filter(|c| matches!(c.at, SocketAt::After { .. }))
            .filter_map(|c| {
                let s = r.socket(c);
                let cookie = s.cookie?;
                (sockstat::kill::PROTOCOLS.contains(&s.proto) && s.is_connected()).then(|| {
                    (
                        cookie,
                        format!(
                            "{} {} {}",
                            s.proto_label(),
                            sockstat::text::fmt::connection(s),
                            s.state.name()
                        ),
                    )
                })
            })
            .collect();
        if list.is_empty() {
            self.message =
                Some("nothing to kill: the row has no open TCP or UDP connection".into());
            return Mode::Table;
        }
        Mode::Confirm(list)
    }

    /// Closes the listed connections by cookie through `sockstat::kill` (as `sockstat kill`
    /// does); one line per connection with its result.
    fn kill(&self, list: &[(u64, String)], live: &Live) -> Vec<String> {
        let Some(r) = self.report.as_ref() else {
            return vec![];
        };
        let cookies: Vec<u64> = list.iter().map(|(c, _)| *c).collect();
        let mut q = sockstat::Query::new();
        q.select.protos = Some(sockstat::kill::PROTOCOLS.to_vec());
        let mut out = Vec::new();
        for z in &r.sample.zones {
            let listed = sockstat::kill::select(z.snapshot.clone(), &q, Some(&cookies));
            let results = sockstat::kill::close(&listed, &live.query().gather.proc_root);
            for (s, a) in listed.sockets.iter().zip(results) {
                out.push(format!(
                    "{} {}: {}{}",
                    s.proto_label(),
                    sockstat::text::fmt::connection(s),
                    a.outcome.name(),
                    a.reason.map(|r| format!(" ({r})")).unwrap_or_default()
                ));
            }
        }
        if out.is_empty() {
            out.push("gone: the connections closed since the last refresh".into());
        }
        out
    }

    fn style(&self, color: Color) -> Style {
        if self.color {
            Style::default().fg(color)
        } else {
            Style::default()
        }
    }

    fn draw(&mut self, f: &mut Frame<'_>, interval: f64) {
        let area = f.area();
        if area.width < 30 || area.height < 6 {
            f.render_widget(
                Paragraph::new(format!(
                    "sockstat top: terminal too small ({}x{})",
                    area.width, area.height
                ))
                .wrap(Wrap { trim: true }),
                area,
            );
            return;
        }
        let (Some(r), Some(g)) = (self.report.as_ref(), self.group.as_ref()) else {
            f.render_widget(
                Paragraph::new(format!(
                    "sockstat top: measuring, the first rates appear after {interval} s"
                )),
                area,
            );
            return;
        };
        let mut head: Vec<String> = render::top::summary(r, g);
        head.push(format!(
            "sort: {}  by: {}{}   ? help  q quit",
            self.sort.name(),
            self.by.name(),
            self.filter
                .as_ref()
                .map(|(t, _)| format!("  filter: {t}"))
                .unwrap_or_default()
        ));
        let head: Vec<String> = head
            .iter()
            .flat_map(|l| wrap(l, usize::from(area.width)))
            .collect();
        let head_h = (head.len() as u16).min(area.height.saturating_sub(3));
        let [top, body, foot] = Layout::vertical([
            Constraint::Length(head_h),
            Constraint::Min(2),
            Constraint::Length(1),
        ])
        .areas(area);
        let lines: Vec<Line<'_>> = head.into_iter().map(Line::from).collect();
        f.render_widget(Paragraph::new(lines), top);
        let zoned = r.sample.zoned;
        let headers = render::top::headers(g.by, zoned);
        let rows: Vec<Vec<String>> = g
            .rows
            .iter()
            .map(|row| render::top::cells(r, row, zoned))
            .collect();
        let mut widths: Vec<u16> = headers.iter().map(|h| h.len() as u16).collect();
        for row in &rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count() as u16);
            }
        }
        let last = widths.len() - 1;
        let constraints: Vec<Constraint> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == last {
                    Constraint::Min(8)
                } else {
                    Constraint::Length((*w).min(40))
                }
            })
            .collect();
        let warn = self.style(Color::Yellow);
        let table_rows = g.rows.iter().zip(rows).map(|(row, cells)| {
            let st = if row.findings.is_empty() {
                Style::default()
            } else {
                warn
            };
            Row::new(cells).style(st)
        });
        let table = Table::new(table_rows, constraints)
            .header(Row::new(headers.clone()).style(Style::default().add_modifier(Modifier::BOLD)))
            .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
        f.render_stateful_widget(table, body, &mut self.state);
        let footer = match &self.mode {
            Mode::Filter(t) => format!("/{t}_   (the listing's filters, e.g. -p 443 --command nginx; Enter applies, empty clears, Esc cancels)"),
            _ => self.message.clone().unwrap_or_else(|| {
                "s/< > sort  b group  / filter  Enter detail  k kill  ? help  q quit".into()
            }),
        };
        f.render_widget(Paragraph::new(footer), foot);
        match &self.mode {
            Mode::Help => popup(f, area, "help", help_text()),
            Mode::Detail(key) => {
                let key = key.clone();
                self.detail(f, area, &key)
            }
            Mode::Confirm(list) => {
                let mut l = vec![format!(
                    "Kill {} connection(s)? The kernel resets each (SOCK_DESTROY):",
                    list.len()
                )];
                l.extend(list.iter().map(|(_, d)| format!("  {d}")));
                l.push(String::new());
                l.push("y: kill   any other key: cancel".into());
                popup(f, area, "kill", l)
            }
            Mode::Killed(res) => {
                let mut l = res.clone();
                l.push(String::new());
                l.push("any key: back".into());
                popup(f, area, "kill: results", l)
            }
            _ => {}
        }
    }

    fn detail(&self, f: &mut Frame<'_>, area: Rect, key: &RowKey) {
        let (Some(r), Some(g)) = (self.report.as_ref(), self.group.as_ref()) else {
            return;
        };
        let Some(row) = g.rows.iter().find(|x| &x.key == key) else {
            popup(
                f,
                area,
                "detail",
                vec![
                    "the row is gone (its connections closed)".into(),
                    String::new(),
                    "any key: back".into(),
                ],
            );
            return;
        };
        let zoned = r.sample.zoned;
        let headers = render::top::headers(g.by, zoned);
        let cells = render::top::cells(r, row, zoned);
        let mut l: Vec<String> = headers
            .iter()
            .zip(&cells)
            .map(|(h, c)| format!("{h:<9} {c}"))
            .collect();
        l.push(String::new());
        l.push("Connections and holders:".into());
        for &i in row.conns.iter().take(8) {
            let c = &r.conns[i];
            let s = r.socket(c);
            let holders: Vec<String> = s
                .owners
                .iter()
                .map(|o| {
                    let cmd = r
                        .process(o.pid)
                        .and_then(|p| p.command.as_ref())
                        .map_or("?".into(), |c| for_terminal(c.as_bytes()).into_owned());
                    format!("{cmd}[{}] fd {}", o.pid, o.fd)
                })
                .collect();
            l.push(format!(
                "  {} {} {}  {}",
                s.proto_label(),
                sockstat::text::fmt::connection(s),
                s.state.name(),
                if holders.is_empty() {
                    format!("({:?} holders)", s.owners_status).to_lowercase()
                } else {
                    holders.join(", ")
                }
            ));
        }
        if row.conns.len() > 8 {
            l.push(format!("  ... and {} more", row.conns.len() - 8));
        }
        l.push(String::new());
        if row.findings.is_empty() {
            l.push(
                "No finding: the diagnosis rules see nothing limiting these connections.".into(),
            );
        }
        for &i in &row.findings {
            let fd = &r.findings[i];
            l.push(format!(
                "{} {}: {}",
                fd.severity.name(),
                fd.code,
                for_terminal(fd.summary.as_bytes())
            ));
            l.push(format!(
                "  evidence: {}",
                render::diagnose::evidence_text(fd)
            ));
            l.push(format!("  fix: {}", for_terminal(fd.advice.as_bytes())));
        }
        // Charts since the view opened, summed (RTT: worst) over the row's connections.
        let mut per: std::collections::BTreeMap<u64, (u64, u64, u64)> = Default::default();
        for &i in &row.conns {
            if let Some(p) = r
                .socket(&r.conns[i])
                .cookie
                .and_then(|c| self.history.get(&c))
            {
                for &(n, rate, rtt, cwnd) in p {
                    let e = per.entry(n).or_default();
                    e.0 += rate;
                    e.1 = e.1.max(rtt);
                    e.2 += cwnd;
                }
            }
        }
        let w = area.width.saturating_sub(4).max(10);
        let h = area.height.saturating_sub(4).max(6);
        let outer = centered(area, w, h);
        f.render_widget(Clear, outer);
        let block = Block::default()
            .borders(Borders::ALL)
            .title(" detail (Esc: back) ");
        let inner = block.inner(outer);
        f.render_widget(block, outer);
        let chart_h = if per.is_empty() || inner.height < 14 {
            0
        } else {
            6
        };
        let [text, charts] =
            Layout::vertical([Constraint::Min(1), Constraint::Length(chart_h)]).areas(inner);
        f.render_widget(
            Paragraph::new(l.into_iter().map(Line::from).collect::<Vec<_>>())
                .wrap(Wrap { trim: false }),
            text,
        );
        if chart_h > 0 {
            let series: [(&str, Vec<u64>); 3] = [
                ("rate B/s", per.values().map(|v| v.0).collect()),
                ("RTT us", per.values().map(|v| v.1).collect()),
                ("cwnd", per.values().map(|v| v.2).collect()),
            ];
            let cols = Layout::horizontal([Constraint::Ratio(1, 3); 3]).split(charts);
            for ((name, data), a) in series.iter().zip(cols.iter()) {
                let last = data.last().copied().unwrap_or(0);
                let n = (a.width as usize).saturating_sub(2);
                let data = &data[data.len().saturating_sub(n)..];
                f.render_widget(
                    Sparkline::default()
                        .block(
                            Block::default()
                                .borders(Borders::ALL)
                                .title(format!(" {name} {last} ")),
                        )
                        .data(data)
                        .style(self.style(Color::Cyan)),
                    *a,
                );
            }
        }
    }
}

fn cycle<T: Copy + PartialEq>(all: &[T], cur: T, step: usize) -> T {
    let i = all.iter().position(|c| *c == cur).unwrap_or(0);
    all[(i + step) % all.len()]
}

fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_string()
}

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn popup(f: &mut Frame<'_>, area: Rect, title: &str, lines: Vec<String>) {
    let w = lines
        .iter()
        .map(|l| l.chars().count() as u16 + 4)
        .max()
        .unwrap_or(20)
        .clamp(20, area.width);
    let h = (lines.len() as u16 + 2).min(area.height);
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines.into_iter().map(Line::from).collect::<Vec<_>>())
            .wrap(Wrap { trim: false })
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" {title} ")),
            ),
        r,
    );
}

fn help_text() -> Vec<String> {
    [
        "sockstat top: rates from every TCP connection's byte counters (tcp_info),",
        "matched by cookie over the measured interval; findings from the diagnosis rules.",
        "",
        "s or >   sort by the next column (rate, send, recv, conns, retrans, rtt,",
        "         findings, name); < the previous one",
        "b        group by process, connection, remote address, local port",
        "/        filter with the listing's flags: -p 443, --dst 192.0.2.0/24,",
        "         --command nginx, --state ESTABLISHED, -4 ... (empty: no filter)",
        "Enter    the selected row's detail: holders, findings with evidence and",
        "         advice, charts of rate, RTT and cwnd since the view opened",
        "k        kill the selected row's connections (listed, then y to confirm)",
        "arrows, PgUp/PgDn, Home/End   move      q quit",
        "",
        "? : rate unknown (UDP and other protocols have no byte counters)",
        "",
        "any key: back",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// True when the terminal hung up (the SSH session or the window closed): the view then ends
/// as on SIGHUP, which a process outside the terminal's foreground group is not sent.
fn hung_up() -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let out = io::stdout();
    let mut fds = [PollFd::new(&out, PollFlags::empty())];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&zero)).is_ok()
        && fds[0]
            .revents()
            .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL)
}

/// `line` cut at spaces into lines at most `width` columns wide, each after the first indented
/// by two columns, so that the summary lines are whole on an 80-column terminal; a word wider
/// than the screen is cut at its edge.
fn wrap(line: &str, width: usize) -> Vec<String> {
    const INDENT: &str = "  ";
    let cols = |s: &str| Line::from(s).width();
    let width = width.max(INDENT.len() + 1);
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    let fresh = |out: &Vec<String>| {
        if out.is_empty() {
            String::new()
        } else {
            INDENT.to_string()
        }
    };
    for word in line.split(' ') {
        let empty = cur.trim().is_empty();
        if !empty && cols(&cur) + 1 + cols(word) > width {
            out.push(std::mem::take(&mut cur));
            cur = fresh(&out);
        } else if !empty {
            cur.push(' ');
        }
        for c in word.chars() {
            let mut b = [0u8; 4];
            if !cur.trim().is_empty() && cols(&cur) + cols(c.encode_utf8(&mut b)) > width {
                out.push(std::mem::take(&mut cur));
                cur = fresh(&out);
            }
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn summary_lines_wrap_at_spaces_within_the_width() {
        let l = "7 connections (0 opened and closed in the interval), sending 6.98 MB/s, \
                 receiving 6.98 MB/s, 0 TIME-WAIT";
        let w = wrap(l, 80);
        assert_eq!(
            w,
            [
                "7 connections (0 opened and closed in the interval), sending 6.98 MB/s,",
                "  receiving 6.98 MB/s, 0 TIME-WAIT",
            ]
        );
        assert_eq!(wrap("short", 80), ["short"]);
        assert_eq!(wrap("", 80), [""]);
        // A word wider than the screen is cut at its edge; nothing is lost.
        let w = wrap("abcdefghij klm", 6);
        assert_eq!(w, ["abcdef", "  ghij", "  klm"]);
        assert!(w.iter().all(|l| l.chars().count() <= 6));
        assert_eq!(wrap("a  b", 80), ["a  b"], "spaces inside a line are kept");
    }
}
