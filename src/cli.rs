//! The command line, defined once: `--help`, the man page and the completions are generated from
//! these definitions.

use std::path::PathBuf;

use clap::{ArgAction, Parser, ValueEnum};
use sockstat::query::{
    parse_pids, parse_prefix, parse_protos, parse_states, CommandMatch, ConnectedTo,
};
use sockstat::{PortSet, Proto, State};

/// When to colour the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ColorWhen {
    /// Only when standard output is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Where the socket table comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum SourceArg {
    /// sock_diag netlink, falling back to /proc/net text for any family whose dump fails.
    #[default]
    Auto,
    /// sock_diag only; a failed dump is an error.
    Netlink,
    /// /proc/net text only (no socket cookies).
    Proc,
}

/// How the owner scan reads fd tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OwnerScanArg {
    /// The kernel's BPF task_file iterator where it can run (root or CAP_BPF+CAP_PERFMON, kernel
    /// BTF, Linux 5.11+), else /proc.
    #[default]
    Auto,
    /// /proc/PID/fd only.
    Proc,
    /// The BPF iterator; where it cannot run, /proc with a warning saying why.
    Bpf,
}

/// A comma-separated list parsed as one value (clap reads `Vec` as "many values").
#[derive(Debug, Clone, PartialEq)]
pub struct List<T>(pub Vec<T>);

fn protos(s: &str) -> Result<List<Proto>, sockstat::FilterError> {
    parse_protos(s).map(List)
}

fn states(s: &str) -> Result<List<State>, sockstat::FilterError> {
    parse_states(s).map(List)
}

fn pids(s: &str) -> Result<List<u32>, sockstat::FilterError> {
    parse_pids(s).map(List)
}

const AFTER_HELP: &str = "\
Filters combine with AND. Without -4, -6 or -u all three families are listed; without -c or -l
(or with both) every state is. A socket held by several processes gets one row per (process, fd);
a socket no process holds (TIME_WAIT, orphans) gets one row with '?' in the process columns.
Filters given before a subcommand apply to diagnose, trace and events as if given after it;
counters, ports and serve take only -z and -Z there; other filters there are refused.

Examples:
  sockstat -l -p 8080          what is listening on 8080, and which process
  sockstat -c -p 5432 -s       who is connected to the database
  sockstat -4 -6 --json        every Internet socket as JSON
  sockstat --summary           counts by protocol, family and state

Exit status: 0 success (also when nothing matched), 2 bad usage or an error that stopped the work.";

/// sockstat: which process holds which socket (Linux).
#[derive(Debug, Parser)]
#[command(
    name = "sockstat",
    version,
    about = "List sockets with the processes that hold them (Linux)",
    long_about = "List open sockets with the user, command, pid and fd of every process that holds \
                  them, from the kernel's sock_diag interface and one pass over /proc.",
    after_help = AFTER_HELP,
    disable_help_flag = true,
    args_override_self = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Filters (shared with the subcommands).
    #[command(flatten)]
    pub filters: FilterArgs,

    /// Output options.
    #[command(flatten)]
    pub output: OutputArgs,

    /// Data sources.
    #[command(flatten)]
    pub source: SourceArgs,

    /// Print the man page or a shell completion script, generated from these flag definitions.
    #[arg(long, value_enum, value_name = "WHAT", hide = true)]
    pub generate: Option<crate::generate::Generate>,

    /// Print help.
    #[arg(short = 'h', long, action = ArgAction::Help)]
    pub help: Option<bool>,

    /// A view other than the listing.
    #[command(subcommand)]
    pub command: Option<crate::commands::Command>,
}

/// The socket filters: every listing-like view takes them.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Show IPv4 sockets.
    #[arg(short = '4', help_heading = "Filters")]
    pub inet: bool,
    /// Show IPv6 sockets.
    #[arg(short = '6', help_heading = "Filters")]
    pub inet6: bool,
    /// Show Unix domain sockets.
    #[arg(short = 'u', help_heading = "Filters")]
    pub unix: bool,
    /// Show connected sockets (with a remote end: ESTABLISHED, SYN_SENT, ..., TIME_WAIT,
    /// connected datagram and unix sockets).
    #[arg(short = 'c', help_heading = "Filters")]
    pub connected: bool,
    /// Show listening sockets (TCP LISTEN, bound unconnected datagram sockets, unix listeners).
    #[arg(short = 'l', help_heading = "Filters")]
    pub listening: bool,
    /// Hide Internet sockets whose local or remote address is loopback (127/8, ::1). Unix
    /// sockets are not affected (as FreeBSD's -L): add -4 -6 to see only the network.
    #[arg(short = 'L', help_heading = "Filters")]
    pub no_loopback: bool,
    /// Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100).
    #[arg(short = 'p', value_name = "PORTS", value_parser = PortSet::parse, help_heading = "Filters")]
    pub ports: Option<PortSet>,
    /// Only sockets whose local address is ADDR or in ADDR/LEN.
    #[arg(long, value_name = "ADDR[/LEN]", value_parser = parse_prefix, help_heading = "Filters")]
    pub src: Option<ipnet::IpNet>,
    /// Only sockets whose remote address is ADDR or in ADDR/LEN.
    #[arg(long, value_name = "ADDR[/LEN]", value_parser = parse_prefix, help_heading = "Filters")]
    pub dst: Option<ipnet::IpNet>,
    /// Protocols: tcp, udp, udplite, raw, icmp (ping sockets), sctp, mptcp, packet, unix,
    /// netlink (comma-separated). Default: all the kernel has except packet and netlink, and the
    /// sockets no table lists.
    #[arg(short = 'P', value_name = "PROTOS", value_parser = protos, help_heading = "Filters")]
    pub protos: Option<List<Proto>>,
    /// Only sockets in these states: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT
    /// CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated).
    #[arg(long = "state", value_name = "STATES", value_parser = states, help_heading = "Filters")]
    pub states: Option<List<State>>,
    /// Only sockets held by these processes (comma-separated pids).
    #[arg(long = "pid", value_name = "PIDS", value_parser = pids, help_heading = "Filters")]
    pub pids: Option<List<u32>>,
    /// Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose
    /// kernel uid is USER.
    #[arg(long, value_name = "USER", help_heading = "Filters")]
    pub user: Option<String>,
    /// Zones.
    #[command(flatten)]
    pub zones: ZoneArgs,
    /// Only the connections to these listeners, seen from both ends, whatever the transport:
    /// ports (5432) and unix listeners by path (/run/postgresql/.s.PGSQL.5432) or abstract
    /// name (@name), comma-separated. Implies -c.
    #[arg(long, value_name = "LISTENERS", value_parser = ConnectedTo::parse, help_heading = "Filters")]
    pub connected_to: Option<ConnectedTo>,
    /// Only sockets whose holder's command name is NAME (a glob when it has * or ?).
    #[arg(long, value_name = "NAME", value_parser = CommandMatch::parse, help_heading = "Filters")]
    pub command: Option<CommandMatch>,
}

/// `-z`/`-j ZONE` and `-Z`: which zones (network namespaces) to read. The listing, `diagnose`,
/// `trace`, `counters` and `ports` all take them (declared once, here).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ZoneArgs {
    /// Only this zone (network namespace): a name from -Z (global, an `ip netns` name, a
    /// container or pod name), a container id prefix, or a namespace inode. Its sockets,
    /// counters and sysctls are read inside it.
    #[arg(
        short = 'z',
        visible_short_alias = 'j',
        value_name = "ZONE",
        conflicts_with = "all_zones",
        help_heading = "Zones"
    )]
    pub zone: Option<String>,
    /// Every zone (network namespace) on the host, each read inside it (the listing gets a ZONE
    /// column first).
    #[arg(short = 'Z', help_heading = "Zones")]
    pub all_zones: bool,
}

/// Takes `before`'s value where `after` has none; a flag given on both sides is an error that
/// names it.
fn merge_opt<T: Clone>(
    flag: &str,
    after: &Option<T>,
    before: &Option<T>,
) -> anyhow::Result<Option<T>> {
    match (after, before) {
        (Some(_), Some(_)) => {
            anyhow::bail!("{flag} given both before and after the subcommand: give it once")
        }
        (a, b) => Ok(a.clone().or_else(|| b.clone())),
    }
}

/// [`merge_opt`] for a flag whose absence is its default value.
fn merge_value<T: PartialEq + Copy + Default>(
    flag: &str,
    after: T,
    before: T,
) -> anyhow::Result<T> {
    let unset = T::default();
    if after != unset && before != unset && after != before {
        anyhow::bail!("{flag} given both before and after the subcommand: give it once");
    }
    Ok(if after != unset { after } else { before })
}

impl FilterArgs {
    /// The filters set, by flag, in the order `--help` lists them.
    pub fn given(&self) -> Vec<&'static str> {
        let set = [
            (self.inet, "-4"),
            (self.inet6, "-6"),
            (self.unix, "-u"),
            (self.connected, "-c"),
            (self.listening, "-l"),
            (self.no_loopback, "-L"),
            (self.ports.is_some(), "-p"),
            (self.src.is_some(), "--src"),
            (self.dst.is_some(), "--dst"),
            (self.protos.is_some(), "-P"),
            (self.states.is_some(), "--state"),
            (self.pids.is_some(), "--pid"),
            (self.user.is_some(), "--user"),
            (self.zones.zone.is_some(), "-z"),
            (self.zones.all_zones, "-Z"),
            (self.connected_to.is_some(), "--connected-to"),
            (self.command.is_some(), "--command"),
        ];
        set.into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, f)| f)
            .collect()
    }

    /// These filters (a subcommand's) with those given `before` the subcommand added
    /// (`sockstat -p 443 diagnose` is `sockstat diagnose -p 443`); a filter given on both sides
    /// is an error that names it.
    pub fn merged(&self, before: &FilterArgs) -> anyhow::Result<FilterArgs> {
        let zones = ZoneArgs {
            zone: merge_opt("-z", &self.zones.zone, &before.zones.zone)?,
            all_zones: self.zones.all_zones || before.zones.all_zones,
        };
        if zones.zone.is_some() && zones.all_zones {
            anyhow::bail!("-z and -Z select different zones: give one");
        }
        Ok(FilterArgs {
            inet: self.inet || before.inet,
            inet6: self.inet6 || before.inet6,
            unix: self.unix || before.unix,
            connected: self.connected || before.connected,
            listening: self.listening || before.listening,
            no_loopback: self.no_loopback || before.no_loopback,
            ports: merge_opt("-p", &self.ports, &before.ports)?,
            src: merge_opt("--src", &self.src, &before.src)?,
            dst: merge_opt("--dst", &self.dst, &before.dst)?,
            protos: merge_opt("-P", &self.protos, &before.protos)?,
            states: merge_opt("--state", &self.states, &before.states)?,
            pids: merge_opt("--pid", &self.pids, &before.pids)?,
            user: merge_opt("--user", &self.user, &before.user)?,
            zones,
            connected_to: merge_opt("--connected-to", &self.connected_to, &before.connected_to)?,
            command: merge_opt("--command", &self.command, &before.command)?,
        })
    }
}

impl SourceArgs {
    /// The data-source flags set, by flag.
    pub fn given(&self) -> Vec<&'static str> {
        let set = [
            (self.no_owners, "--no-owners"),
            (self.source != SourceArg::Auto, "--source"),
            (self.owner_scan != OwnerScanArg::Auto, "--owner-scan"),
            (self.proc_root.is_some(), "--proc-root"),
            (self.record_netlink.is_some(), "--record-netlink"),
            (self.replay_netlink.is_some(), "--replay-netlink"),
        ];
        set.into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, f)| f)
            .collect()
    }

    /// As [`FilterArgs::merged`], for the data sources.
    pub fn merged(&self, before: &SourceArgs) -> anyhow::Result<SourceArgs> {
        Ok(SourceArgs {
            no_owners: self.no_owners || before.no_owners,
            source: merge_value("--source", self.source, before.source)?,
            owner_scan: merge_value("--owner-scan", self.owner_scan, before.owner_scan)?,
            proc_root: merge_opt("--proc-root", &self.proc_root, &before.proc_root)?,
            record_netlink: merge_opt(
                "--record-netlink",
                &self.record_netlink,
                &before.record_netlink,
            )?,
            replay_netlink: merge_opt(
                "--replay-netlink",
                &self.replay_netlink,
                &before.replay_netlink,
            )?,
        })
    }
}

impl ZoneArgs {
    /// These flags, or the same flags given before the subcommand (`sockstat -Z counters`).
    pub fn or_global(&self, cli: &Cli) -> ZoneArgs {
        if self.zone.is_some() || self.all_zones {
            return self.clone();
        }
        cli.filters.zones.clone()
    }

    /// The library's zone selection.
    pub fn select(&self) -> sockstat::ZoneSelect {
        match (&self.zone, self.all_zones) {
            (Some(z), _) => sockstat::ZoneSelect::Named(z.clone()),
            (None, true) => sockstat::ZoneSelect::All,
            (None, false) => sockstat::ZoneSelect::Current,
        }
    }
}

/// How the listing is shown.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Show the STATE column.
    #[arg(short = 's', help_heading = "Output")]
    pub state: bool,
    /// Show numeric uids (no user name lookup).
    #[arg(short = 'n', help_heading = "Output")]
    pub numeric: bool,
    /// Do not print the header line.
    #[arg(short = 'q', help_heading = "Output")]
    pub quiet: bool,
    /// Do not print the header line (illumos spelling of -q).
    #[arg(short = 'H', help_heading = "Output")]
    pub no_header: bool,
    /// Never truncate columns.
    #[arg(short = 'w', help_heading = "Output")]
    pub wide: bool,
    /// Show process arguments (ARGS column; "args" in JSON).
    #[arg(short = 'a', help_heading = "Output")]
    pub args: bool,
    /// Show the socket id (inode) in an ID column.
    #[arg(short = 'i', help_heading = "Output")]
    pub id: bool,
    /// TCP internals: RTT, cwnd, windows and scaling, unacked, retransmits, delivery rate, share
    /// of busy time limited by the peer's window or our send buffer ("tcp" object in JSON).
    #[arg(short = 'T', long = "tcp-info", help_heading = "Output")]
    pub tcp_info: bool,
    /// With -T, list TIME-WAIT entries too. -T leaves them out by default: they have no TCP
    /// internals and can outnumber the connections (a warning says how many there are);
    /// --state TIME_WAIT also shows them.
    #[arg(long, help_heading = "Output")]
    pub time_wait: bool,
    /// Show the congestion control algorithm (CC column).
    #[arg(short = 'C', help_heading = "Output")]
    pub congestion: bool,
    /// Socket memory: receive and send buffer use and limits, drops ("memory" object in JSON).
    #[arg(short = 'm', long = "memory", help_heading = "Output")]
    pub memory: bool,
    /// Show the cgroup each Internet socket was created in (its service or container), from the
    /// kernel's socket cgroup id: no /proc scan and no privilege needed (CGROUP column).
    #[arg(long, help_heading = "Output")]
    pub cgroup: bool,
    /// Print details with every warning.
    #[arg(short = 'v', help_heading = "Output")]
    pub verbose: bool,
    /// Counts by protocol, family and state instead of rows (no owner scan, unless --pid,
    /// --command or --user selects what is counted).
    #[arg(long, help_heading = "Output")]
    pub summary: bool,
    /// One JSON document (schema version 1; see doc/json-schema.md).
    #[arg(long, conflicts_with = "csv", help_heading = "Output")]
    pub json: bool,
    /// CSV with a header row.
    #[arg(long, help_heading = "Output")]
    pub csv: bool,
    /// When to use colour.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto, help_heading = "Output")]
    pub color: ColorWhen,
    /// Refresh every SECONDS (default 2): redrawn in place on a terminal (Ctrl-C to stop);
    /// otherwise successive listings, each after a '=== TIME ===' line (JSON: one document per
    /// line; with -T, one line per TCP connection per refresh). Also for the ports, counters
    /// and diagnose views (counters without SECONDS: deltas over the watch interval).
    #[arg(
        long,
        value_name = "SECONDS",
        num_args = 0..=1,
        default_missing_value = "2",
        value_parser = crate::output::parse_seconds,
        global = true,
        help_heading = "Watch"
    )]
    pub watch: Option<f64>,
    /// Watch for sockets that open and close: one line each ('+' opened, '-' closed, with the
    /// holders), or JSON lines with --json. Implies --watch.
    #[arg(long, conflicts_with_all = ["summary", "csv"], help_heading = "Watch")]
    pub events: bool,
    /// Stop after N refreshes (with --events, the first is the baseline). Implies --watch.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), global = true, help_heading = "Watch")]
    pub count: Option<u64>,
}

/// Where the data comes from.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// Skip the /proc owner scan (fastest; process columns show '?').
    #[arg(long, help_heading = "Data sources")]
    pub no_owners: bool,
    /// Where the socket table comes from.
    #[arg(long, value_enum, value_name = "SOURCE", default_value_t = SourceArg::Auto, help_heading = "Data sources")]
    pub source: SourceArg,
    /// How the owner scan reads every process's open files.
    #[arg(long, value_enum, value_name = "HOW", default_value_t = OwnerScanArg::Auto, help_heading = "Data sources")]
    pub owner_scan: OwnerScanArg,
    /// Read processes from this directory instead of /proc (testing, post-mortem trees).
    #[arg(long, value_name = "DIR", hide = true)]
    pub proc_root: Option<PathBuf>,
    /// Save every raw sock_diag reply in DIR (for bug reports; replay with --replay-netlink).
    #[arg(long, value_name = "DIR", hide = true)]
    pub record_netlink: Option<PathBuf>,
    /// Replay sock_diag replies saved with --record-netlink instead of asking the kernel.
    #[arg(
        long,
        value_name = "DIR",
        hide = true,
        conflicts_with = "record_netlink"
    )]
    pub replay_netlink: Option<PathBuf>,
}
