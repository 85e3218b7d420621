//! The `sockstat` command: parses flags, runs the query through the library, renders, and maps
//! outcomes to exit statuses (0 success, 2 bad usage or an error that stopped the work). A closed
//! pipe ends quietly with status 0.

mod cli;
mod commands;
mod generate;
mod http;
mod output;
mod privileges;
mod watch;

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use sockstat::render::{self, Options};
use sockstat::{Query, Snapshot, Source};

use cli::{Cli, FilterArgs, OutputArgs, SourceArg, SourceArgs};

fn main() -> ExitCode {
    fixed_malloc_thresholds();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    // With more privilege than its caller, no path the caller names is opened with it.
    if let Err(refused) = privileges::check_inputs() {
        eprintln!("sockstat: {refused}");
        return ExitCode::from(2);
    }
    let result = match &cli.command {
        Some(cmd) => commands::run(cmd, &cli),
        None => run(&cli).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("sockstat: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// glibc's malloc raises its mmap threshold each time a mapped block is freed (up to 32 MiB), so
/// that from then on the socket table's large vectors come from the heaps instead: growing one
/// copies it, and the space a freed one leaves stays in the process, more of it with each thread
/// that decoded a dump. At a fixed threshold they stay mapped (they grow by `mremap` and are
/// unmapped when freed): the peak at a million sockets is 260 MiB instead of 269, and 264 bytes
/// a socket from 500k to 1M instead of 274 (doc/BENCHMARKS.md, "Big tables"). 1 MiB keeps the
/// buffers below it (a read buffer of 256 KiB per process the BPF scan walks) in the heap,
/// reused, and the heap's top is given back past 64 MiB, as glibc's own limit. The library
/// leaves its host's allocator alone; a variable the user set (`MALLOC_MMAP_THRESHOLD_`,
/// `MALLOC_TRIM_THRESHOLD_`, `GLIBC_TUNABLES`) wins.
fn fixed_malloc_thresholds() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let set_by_user = [
            "MALLOC_MMAP_THRESHOLD_",
            "MALLOC_TRIM_THRESHOLD_",
            "GLIBC_TUNABLES",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
        if !set_by_user {
            // SAFETY: mallopt only changes malloc's parameters; called before any thread starts.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
                libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
            }
        }
    }
}

/// clap's own messages span several lines (usage, tips); ours is the one line that names the
/// bad value. Help and version go to stdout with status 0.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("sockstat: {} (see 'sockstat --help')", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// The one line of a usage error. A bad value is named escaped (`'8\\n0'`, `'\\x1b[31m'`), so a
/// value with a line break or a terminal escape neither splits the line nor reaches the terminal.
fn one_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use sockstat::render::sanitize::{for_terminal, is_printable};
    let ctx = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    if e.kind() == ErrorKind::ValueValidation {
        if let (Some(arg), Some(value)) =
            (ctx(ContextKind::InvalidArg), ctx(ContextKind::InvalidValue))
        {
            // The parsers' own messages (FilterError) come escaped already.
            let why = match std::error::Error::source(e).map(|s| s.to_string()) {
                Some(w) if is_printable(&w) => format!(": {w}"),
                Some(w) => format!(": {}", for_terminal(w.as_bytes())),
                None => String::new(),
            };
            return format!(
                "invalid value '{}' for '{arg}'{why}",
                for_terminal(value.as_bytes())
            );
        }
    }
    // Other errors: a private-use character stands in for the raw value while the line is cut
    // and escaped, so the value's own line breaks cannot cut it short.
    const HOLE: &str = "\u{e000}";
    let mut text = e.render().to_string();
    let value = match ctx(ContextKind::InvalidValue) {
        Some(v) if !v.is_empty() && !v.contains(HOLE) && text.contains(v) => {
            text = text.replace(v, HOLE);
            Some(for_terminal(v.as_bytes()).into_owned())
        }
        _ => None,
    };
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let line = for_terminal(first.as_bytes());
    match value {
        Some(v) => line.replace(HOLE, &v),
        None => line.into_owned(),
    }
}

/// The refresh interval when `--watch` or `--count` asks for watch mode (`--count` alone
/// refreshes at the default interval).
pub fn watch_interval(o: &OutputArgs) -> Option<f64> {
    o.watch.or(o.count.map(|_| watch::DEFAULT_INTERVAL_SECS))
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// The query the filters and data-source flags describe (shared with the subcommands).
pub fn build_query(f: &FilterArgs, src: &SourceArgs, no_owners: bool) -> anyhow::Result<Query> {
    let mut q = Query::new();
    if f.inet || f.inet6 || f.unix {
        q.families.inet = f.inet;
        q.families.inet6 = f.inet6;
        q.families.unix = f.unix;
    }
    q.protos = f.protos.clone().map(|l| l.0);
    q.connected = f.connected;
    q.listening = f.listening;
    q.no_loopback = f.no_loopback;
    q.ports = f.ports.clone();
    q.src = f.src;
    q.dst = f.dst;
    q.states = f.states.clone().map(|l| l.0);
    q.pids = f.pids.clone().map(|l| l.0);
    q.uid = match &f.user {
        Some(u) => Some(sockstat::resolve_user(u)?),
        None => None,
    };
    q.command = f.command.clone();
    q.connected_to = f.connected_to.clone();
    q.zones = f.zones.select();
    q.owners = !no_owners;
    q.source = match (&src.replay_netlink, src.source) {
        (Some(dir), _) => Source::Replay(dir.clone()),
        (None, SourceArg::Auto) => Source::Auto,
        (None, SourceArg::Netlink) => Source::Netlink,
        (None, SourceArg::Proc) => Source::Proc,
    };
    if let Some(root) = &src.proc_root {
        q.proc_root = root.clone();
    }
    q.owner_scan = match src.owner_scan {
        cli::OwnerScanArg::Auto => sockstat::OwnerScan::Auto,
        cli::OwnerScanArg::Proc => sockstat::OwnerScan::Proc,
        cli::OwnerScanArg::Bpf => sockstat::OwnerScan::Bpf,
    };
    q.record_netlink = src.record_netlink.clone();
    if no_owners && (q.pids.is_some() || q.command.is_some()) {
        anyhow::bail!("--pid and --command need the owner scan; drop --no-owners");
    }
    Ok(q)
}

/// Renderer options from the output flags (shared with the subcommands).
pub fn render_options(o: &OutputArgs) -> Options {
    let mut r = Options::new();
    r.header = !(o.quiet || o.no_header);
    r.state = o.state;
    r.id = o.id;
    r.args = o.args;
    r.wide = o.wide;
    r.color = output::use_color(o.color);
    r.verbose = o.verbose;
    r.tcp = o.tcp_info;
    r.congestion = o.congestion;
    r.memory = o.memory;
    r.cgroup = o.cgroup;
    r
}

fn run(cli: &Cli) -> anyhow::Result<()> {
    if let Some(what) = cli.generate {
        let stdout = io::stdout();
        let mut out = io::BufWriter::new(stdout.lock());
        return generate::write(what, &mut out)
            .and_then(|()| out.flush())
            .context("cannot write the generated file to standard output");
    }
    let o = &cli.output;
    let mut query = build_query(&cli.filters, &cli.source, cli.source.no_owners)?;
    query.args = o.args;
    query.resolve_users = !o.numeric;
    query.tcp_info = o.tcp_info;
    query.hide_time_wait = o.tcp_info && !o.time_wait && query.states.is_none();
    query.congestion = o.congestion;
    query.memory = o.memory;
    query.cgroups = o.cgroup;
    // Counts need no holders, unless a holder filter selects what is counted.
    let summary_only = o.summary && !query.filters_owners();
    if summary_only {
        query.owners = false;
    }
    let mut opts = render_options(o);
    opts.zone = cli.filters.zones.all_zones;
    opts.owners = !cli.source.no_owners && !summary_only;
    if o.watch.is_some() || o.events || o.count.is_some() {
        return watch::run_listing(&query, &opts, o, &watch::title());
    }
    let snap = sockstat::collect(&query)?;
    sockstat::timing_mark("collected");
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    write_listing(&snap, &opts, o, &mut out)
        .and_then(|()| out.flush())
        .context("cannot write the listing to standard output")?;
    sockstat::timing_mark("rendered");
    if !o.json {
        output::write_warnings(&mut io::stderr().lock(), &snap.warnings, o.verbose);
    }
    Ok(())
}

/// Writes the listing (table, CSV, summary or JSON) as the output flags ask (shared with watch
/// mode).
pub fn write_listing(
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
