//! `sockstat kill`: close the TCP and UDP sockets the filters select, from outside the processes
//! that hold them. What may be closed, the requests and the results are `sockstat::kill`; this
//! file owns the flags, the confirmation and the exit status: 0 every matched socket is closed
//! (killed, or gone already) or none matched, 1 some could not be closed (or the confirmation
//! was declined), 3 none could be, for want of CAP_NET_ADMIN or of kernel support (errors as
//! `main` maps them).

use std::io::{self, BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context as _;
use sockstat::kill::{self as k, PROTOCOLS};
use sockstat::model::counted;
use sockstat::render::{self, kill as view};
use sockstat::Snapshot;

use crate::cli::{ColorWhen, List, SourceArg, SourceArgs};

/// Parses `--cookie`: comma-separated decimal cookies, as the listing's JSON shows them.
fn cookies(s: &str) -> Result<List<u64>, String> {
    s.split(',')
        .map(|c| {
            let c = c.trim();
            c.parse::<u64>().map_err(|_| {
                "a socket cookie is a decimal number, as \"cookie\" in --json".to_string()
            })
        })
        .collect::<Result<Vec<u64>, String>>()
        .map(List)
}

/// Flags of `sockstat kill`.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_args(crate::cli::inet_only_help))]
#[command(mut_arg("protos", |a| a.help(
    "Protocols: tcp, udp (comma-separated; the only ones a socket can be closed for). Default: both"
)))]
#[command(after_help = concat!("\
Only TCP and UDP sockets, in the states the filters select (ANDed, as in the listing). Sockets
with no remote end (LISTEN, unconnected UDP) only with -l or when --state names their state.
Each socket is named by its kernel cookie as well as its addresses: one that closed after the
listing and was replaced by another with the same addresses is left alone (\"gone\").

Results: killed, gone (closed already, or replaced), not-permitted (needs CAP_NET_ADMIN in the
socket's network namespace), unsupported (kernel without CONFIG_INET_DIAG_DESTROY; TIME-WAIT
entries need Linux 6.0), failed.

-p matches either end's port; --sport only the local one (a server's own port) and --dport only
the remote one (the port a client connected to), so that a kill closes only what was meant.

Examples:
  sockstat kill --sport 8080 --state CLOSE_WAIT      close the CLOSE_WAIT pile-up of the server
                                                     on port 8080 (not this host's own
                                                     connections to other hosts' port 8080)
  sockstat kill --dst 192.0.2.7 --dport 443 --dry-run   what would be closed, nothing is
  sockstat kill --cookie 8812 --yes                  one connection, from a script
  sockstat kill --state TIME_WAIT --dst 198.51.100.9 --yes   free ports held in TIME-WAIT

", crate::cli::exit_statuses!("some matched socket could not be closed, or the confirmation was declined (3 when none could be, for want of CAP_NET_ADMIN or of kernel support)")))]
pub struct KillArgs {
    /// Filters.
    #[command(flatten)]
    pub filters: KillFilters,
    /// Only sockets with these kernel cookies (comma-separated, as "cookie" in --json).
    #[arg(long = "cookie", value_name = "COOKIES", value_parser = cookies, help_heading = "Filters")]
    pub cookies: Option<List<u64>>,
    /// List what would be closed, close nothing.
    #[arg(long, help_heading = "Kill")]
    pub dry_run: bool,
    /// Close without asking (needed when standard input or output is not a terminal).
    #[arg(short = 'y', long, help_heading = "Kill")]
    pub yes: bool,
    /// One JSON document: the listing's socket objects, each with "result" (and "reason"), and a
    /// "summary" (doc/kill.schema.json).
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Show numeric uids (no user name lookup).
    #[arg(short = 'n', help_heading = "Output")]
    pub numeric: bool,
    /// Never truncate columns.
    #[arg(short = 'w', help_heading = "Output")]
    pub wide: bool,
    /// Print details with every warning.
    #[arg(short = 'v', help_heading = "Output")]
    pub verbose: bool,
    /// When to use colour.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto, help_heading = "Output")]
    pub color: ColorWhen,
    /// Print help.
    #[arg(short = 'h', long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// The filters of `kill`: the listing's but `-u` (a unix socket cannot be closed from outside).
pub type KillFilters = crate::cli::InetFilters;

/// The query: the listing's filters over TCP and UDP, from sock_diag only (a socket listed from
/// `/proc/net` text has no cookie to name it by).
fn query(a: &KillArgs) -> anyhow::Result<sockstat::Query> {
    let f = &a.filters;
    if let Some(p) = f.protos.protos.as_ref() {
        if let Some(bad) = p.0.iter().find(|p| !PROTOCOLS.contains(p)) {
            return Err(crate::usage(format!(
                "kill closes tcp and udp sockets only, not '{}' (-P tcp, -P udp or -P tcp,udp)",
                bad.name()
            )));
        }
    }
    let source = SourceArgs {
        source: SourceArg::Netlink,
        ..SourceArgs::default()
    };
    f.connected_to.ports_only("kill")?;
    let mut q = crate::cli::query(&[f, &source])?;
    q.select.families.unix = false;
    if !q.select.families.inet && !q.select.families.inet6 {
        q.select.families.inet = true;
        q.select.families.inet6 = true;
    }
    q.select.protos = Some(q.select.protos.take().unwrap_or_else(|| PROTOCOLS.to_vec()));
    // What no table lists cannot be closed (it has no cookie): not looked for.
    q.gather.unlisted = false;
    q.gather.resolve_users = !a.numeric;
    if !k::is_narrowed(&q, a.cookies.as_ref().map(|c| c.0.as_slice())) {
        return Err(crate::usage(
            "kill needs a filter that names what to close (-p, --sport, --dport, --src, --dst, \
             --pid, --user, --command, --state, -l, --connected-to, -z or --cookie): without one \
             it would close every connection",
        ));
    }
    Ok(q)
}

fn options(a: &KillArgs) -> render::Options {
    let mut o = crate::output::options(false, a.verbose, a.color);
    o.state = true;
    o.wide = a.wide;
    o.zone = a.filters.zones.all_zones;
    o
}

fn sockets(n: usize) -> String {
    counted(n, "socket", "sockets")
}

/// Shows the list and asks; true when the answer is yes. The list goes where the results will
/// go (standard output), except with --json, whose standard output is the document alone.
fn confirm(shown: &Snapshot, opts: &render::Options, json: bool) -> anyhow::Result<bool> {
    let stdout = io::stdout();
    let stderr = io::stderr();
    let mut w: Box<dyn Write> = if json {
        Box::new(stderr.lock())
    } else {
        Box::new(stdout.lock())
    };
    view::write_table(shown, None, opts, &mut w)?;
    write!(
        w,
        "kill {}? [y/N] ",
        if shown.sockets.len() == 1 {
            "this socket".to_string()
        } else {
            format!("these {}", sockets(shown.sockets.len()))
        }
    )?;
    w.flush()?;
    let mut answer = String::new();
    io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("cannot read the answer")?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// Runs `sockstat kill`.
pub fn run(a: &KillArgs) -> anyhow::Result<ExitCode> {
    let json = a.json;
    let q = query(a)?;
    let opts = options(a);
    let snap = sockstat::collect(&q)?;
    let shown = k::select(snap, &q, a.cookies.as_ref().map(|c| c.0.as_slice()));
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let stderr = io::stderr();
    let mut err = stderr.lock();
    if !json {
        crate::output::write_warnings(&mut err, &shown.warnings, a.verbose);
    }
    let n = shown.sockets.len();
    if n == 0 || a.dry_run {
        if json {
            view::write_json(&shown, None, &opts, &mut out)?;
        } else if n == 0 {
            writeln!(out, "nothing to kill: no TCP or UDP socket matches")?;
        } else {
            view::write_table(&shown, None, &opts, &mut out)?;
            writeln!(
                out,
                "would kill {} (dry run: nothing was killed)",
                sockets(n)
            )?;
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    if !a.yes {
        let terminal = io::stdin().is_terminal() && io::stdout().is_terminal();
        if !terminal {
            return Err(crate::usage(format!(
                "{} {} and there is no terminal to confirm on: add --yes to kill {} (or \
                 --dry-run to list {})",
                sockets(n),
                if n == 1 { "matches" } else { "match" },
                if n == 1 { "it" } else { "them" },
                if n == 1 { "it" } else { "them" },
            )));
        }
        drop(out);
        if !confirm(&shown, &opts, json)? {
            writeln!(io::stdout(), "nothing killed")?;
            return Ok(ExitCode::from(1));
        }
        out = io::BufWriter::new(stdout.lock());
    }
    let attempts = k::close(&shown, &q.gather.proc_root);
    if json {
        view::write_json(&shown, Some(&attempts), &opts, &mut out)?;
    } else {
        view::write_table(&shown, Some(&attempts), &opts, &mut out)?;
        writeln!(out, "{}", view::summary(&attempts))?;
        for r in view::reasons(&attempts) {
            writeln!(out, "  {r}")?;
        }
    }
    out.flush()?;
    Ok(if k::all_closed(&attempts) {
        ExitCode::SUCCESS
    } else if k::refused_by_host(&attempts) {
        crate::Status::Unavailable.into()
    } else {
        ExitCode::from(1)
    })
}
