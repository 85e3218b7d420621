//! The `sockstat` command: parses flags, runs the query through the library, renders, and maps
//! outcomes to exit statuses ([`Status`]: 0 success; 1 a diagnosis finding or a socket kill could
//! not close; 2 bad usage; 3 missing privileges or kernel support; 4 any other error that stopped
//! the work). A closed pipe ends quietly with status 0.

mod alloc;
mod cli;
mod commands;
mod generate;
mod http;
mod output;
mod privileges;
mod tui;
mod watch;

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Context;
use sockstat::render::{self, Options};
use sockstat::Snapshot;

use cli::{Cli, OutputArgs};

#[global_allocator]
static ALLOCATOR: alloc::Allocator = alloc::Allocator;

fn main() -> ExitCode {
    fixed_malloc_thresholds();
    let cli = match cli::parse_from(std::env::args_os().collect()) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    // With more privilege than its caller, no path the caller names is opened with it.
    if let Err(refused) = privileges::check_inputs() {
        eprintln!("sockstat: {refused}");
        return ExitCode::from(2);
    }
    let result = match &cli.command {
        Some(cmd) => commands::run(cmd),
        None => run(&cli).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("sockstat: {e:#}");
            Status::of(&e).into()
        }
    }
}

/// The exit statuses besides 0 (success) and 1 (a view's own: `diagnose` found something,
/// `kill` could not close some socket). README, the man page and every `--help` list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Bad usage: a flag or value refused, an input refused (a malformed file, a filter that
    /// matches too much).
    Usage = 2,
    /// Missing privileges or kernel support: what was asked cannot be done here as this user
    /// or on this kernel.
    Unavailable = 3,
    /// Any other error that stopped the work: a netlink or I/O failure, a port in use.
    Failed = 4,
}

impl From<Status> for ExitCode {
    fn from(s: Status) -> ExitCode {
        ExitCode::from(s as u8)
    }
}

impl Status {
    /// The status an error stops the command with: that of the first error in its chain whose
    /// kind is known (the command's own refusals, the library's typed errors, a system call's
    /// errno), else [`Status::Failed`].
    fn of(e: &anyhow::Error) -> Status {
        e.chain().find_map(Status::of_one).unwrap_or(Status::Failed)
    }

    fn of_one(e: &(dyn std::error::Error + 'static)) -> Option<Status> {
        use sockstat::ErrorKind;
        let by_kind = |k: ErrorKind| match k {
            ErrorKind::Invalid => Status::Usage,
            ErrorKind::Denied | ErrorKind::Unsupported => Status::Unavailable,
            ErrorKind::Gone | ErrorKind::Bug | ErrorKind::Other => Status::Failed,
            // A kind a later library adds: not known to be the caller's doing.
            _ => Status::Failed,
        };
        if let Some(s) = e.downcast_ref::<Stopped>() {
            return Some(s.status);
        }
        if let Some(x) = e.downcast_ref::<Explained>() {
            return Status::of_one(x.cause.as_ref());
        }
        if let Some(x) = e.downcast_ref::<sockstat::Error>() {
            return Some(by_kind(x.kind()));
        }
        if let Some(x) = e.downcast_ref::<sockstat::SysError>() {
            return Some(by_kind(x.kind()));
        }
        if e.is::<sockstat::FilterError>() || e.is::<clap::Error>() {
            return Some(Status::Usage);
        }
        if e.is::<sockstat::run::events::Unavailable>() {
            return Some(Status::Unavailable);
        }
        // A bare system error: only a refused privilege or a missing feature says more than
        // "failed" (a file the command was told to read and may not is missing privilege).
        if let Some(x) = e.downcast_ref::<io::Error>() {
            return match ErrorKind::of_io(x) {
                ErrorKind::Denied | ErrorKind::Unsupported => Some(Status::Unavailable),
                _ => Some(Status::Failed),
            };
        }
        None
    }
}

/// An error the command decided the status of: one of its own refusals.
#[derive(Debug)]
pub struct Stopped {
    status: Status,
    message: String,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Stopped {}

/// Bad usage, found after parsing (a combination of flags, a value a subcommand cannot take):
/// status 2.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Stopped {
        status: Status::Usage,
        message: message.into(),
    })
}

/// An error whose message already says everything its cause says, and more (what still works):
/// the cause is kept for the exit status, not printed again.
#[derive(Debug)]
pub struct Explained {
    message: String,
    cause: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl std::fmt::Display for Explained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Explained {}

/// `message` (which says what `cause` says) as the error, its status `cause`'s.
pub fn explained(
    message: String,
    cause: impl std::error::Error + Send + Sync + 'static,
) -> anyhow::Error {
    anyhow::Error::new(Explained {
        message,
        cause: Box::new(cause),
    })
}

/// glibc's malloc raises its mmap threshold each time a mapped block is freed (up to 32 MiB), so
/// that from then on the socket table's large vectors come from the heaps instead: growing one
/// copies it, and the space a freed one leaves stays in the process, more of it with each thread
/// that decoded a dump. At a fixed threshold they stay mapped (they grow by `mremap` and are
/// unmapped when freed): the peak at a million sockets is 260 MiB instead of 269, and 264 bytes
/// a socket from 500k to 1M instead of 274 (doc/reference/BENCHMARKS.md, "Big tables"). 1 MiB keeps the
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
/// bad value, and for a subcommand where to read what it takes. Help and version go to stdout
/// with status 0.
fn usage_error(r: cli::Refused) -> ExitCode {
    use clap::error::ErrorKind;
    let e = &r.error;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            let help = match &r.subcommand {
                Some(sub) => format!("sockstat {sub} --help"),
                None => "sockstat --help".to_string(),
            };
            eprintln!("sockstat: {} (see '{help}')", one_line(&r));
            Status::Usage.into()
        }
    }
}

/// The one line of a usage error. A bad value is named escaped (`'8\\n0'`, `'\\x1b[31m'`), so a
/// value with a line break or a terminal escape neither splits the line nor reaches the terminal.
fn one_line(r: &cli::Refused) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use sockstat::text::sanitize::{for_terminal, is_printable};
    let e = &r.error;
    let ctx = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    // An option of sockstat that this subcommand does not take.
    if let (ErrorKind::UnknownArgument, Some(sub), Some(arg)) =
        (e.kind(), &r.subcommand, ctx(ContextKind::InvalidArg))
    {
        let flag = arg.split_once('=').map_or(arg, |(f, _)| f);
        if cli::is_option_of_sockstat(flag) {
            return format!(
                "{} does not apply to '{sub}'",
                for_terminal(flag.as_bytes())
            );
        }
    }
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

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Renderer options from the listing's output flags.
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
    let mut query = cli::query(&[&cli.filters, &cli.source])?;
    query.gather.args = o.args;
    query.gather.resolve_users = !o.numeric;
    query.gather.tcp_info = o.tcp_info;
    query.select.hide_time_wait = o.tcp_info && !o.time_wait && query.select.states.is_none();
    query.gather.congestion = o.congestion;
    query.gather.memory = o.memory;
    query.gather.cgroups = o.cgroup;
    // Counts need no holders, unless a holder filter selects what is counted.
    let summary_only = o.summary && !query.filters_owners();
    if summary_only {
        query.gather.owners = false;
    }
    let mut opts = render_options(o);
    opts.zone = cli.filters.zones.all_zones;
    opts.owners = !cli.source.no_owners && !summary_only;
    if cli.watch.interval().is_some() || cli.events {
        return watch::run_listing(&query, &opts, cli, &watch::title());
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn refused(args: &[String]) -> String {
        let argv = std::iter::once("sockstat".into())
            .chain(args.iter().map(OsString::from))
            .collect();
        match cli::parse_from(argv) {
            Ok(c) => panic!("{args:?} accepted: {c:?}"),
            Err(r) => one_line(&r),
        }
    }

    /// An option of sockstat that a subcommand does not take (events' -u, kill's -u, serve's
    /// --watch, ...) is refused in one line that names it and the subcommand, whether given
    /// before the subcommand's name or after it.
    #[test]
    fn an_option_a_subcommand_lacks_is_refused_by_name_on_either_side() {
        let views = cli::tests::views();
        let mut refusals = 0;
        for (sub, cmd) in views.iter().filter_map(|(s, c)| Some((s.as_ref()?, c))) {
            let own: Vec<String> = cli::tests::typed(cmd).into_iter().map(|t| t.0).collect();
            let mut foreign: Vec<(String, Vec<String>)> = views
                .iter()
                .flat_map(|(_, c)| cli::tests::typed(c))
                .filter(|(n, _)| !own.contains(n) && n != "-V" && n != "--version")
                .collect();
            foreign.sort();
            foreign.dedup();
            for (name, args) in foreign {
                let want = format!("{name} does not apply to '{sub}'");
                let after: Vec<String> = std::iter::once(sub.clone()).chain(args.clone()).collect();
                assert_eq!(refused(&after), want, "{after:?}");
                let before: Vec<String> = args.into_iter().chain([sub.clone()]).collect();
                assert_eq!(refused(&before), want, "{before:?}");
                refusals += 1;
            }
        }
        assert!(refusals > 100, "{refusals}");
    }
}
