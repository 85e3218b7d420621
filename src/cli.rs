//! The command line, defined once: `--help`, the man page and the completions are generated from
//! these definitions, and nothing else decides which flags a view takes.
//!
//! The filters are small groups of flags ([`FamilyArgs`], [`EndpointArgs`], ...), each defined
//! once and each setting its part of the [`Query`] ([`Narrow`]). A view flattens the groups it
//! can use and no other, so that its `--help`, its man page section and its completions list
//! exactly what it accepts, and a flag it cannot use is refused by the parser, never ignored. No
//! flag is global: `--watch`, `--json`, `-q` and the rest belong to the views that have them.
//!
//! Options given before a subcommand's name are the subcommand's, as if typed after it
//! ([`parse_from`]): `sockstat -p 443 diagnose` is `sockstat diagnose -p 443`, and `sockstat -T
//! diagnose` is refused as `sockstat diagnose -T` is.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgAction, CommandFactory, Parser, ValueEnum};
use sockstat::query::{
    parse_pids, parse_prefix, parse_protos, parse_states, CommandMatch, ConnectedTo,
};
use sockstat::{PortSet, Proto, Query, Source, State};

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

pub(crate) fn protos(s: &str) -> Result<List<Proto>, sockstat::FilterError> {
    parse_protos(s).map(List)
}

fn states(s: &str) -> Result<List<State>, sockstat::FilterError> {
    parse_states(s).map(List)
}

fn pids(s: &str) -> Result<List<u32>, sockstat::FilterError> {
    parse_pids(s).map(List)
}

/// The exit statuses, as every view's `--help` ends with them; `$one` is what status 1 means for
/// the view, when it uses it.
macro_rules! exit_statuses {
    () => {
        "Exit status: 0 success (also when nothing matched); 2 bad usage (a flag or value \
         refused); 3 missing privileges or kernel support; 4 any other error that stopped the work."
    };
    ($one:literal) => {
        concat!(
            "Exit status: 0 success (also when nothing matched); 1 ",
            $one,
            "; 2 bad usage (a flag or value refused); 3 missing privileges or kernel support; 4 \
             any other error that stopped the work."
        )
    };
}
pub(crate) use exit_statuses;

/// sockstat: which process holds which socket (Linux).
#[derive(Debug, Parser)]
#[command(
    name = "sockstat",
    version,
    about = "List sockets with the processes that hold them (Linux)",
    long_about = "List open sockets with the user, command, pid and fd of every process that holds \
                  them, from the kernel's sock_diag interface and one pass over /proc.",
    after_help = concat!("\
Filters combine with AND. Without -4, -6 or -u all three families are listed; without -c or -l
(or with both) every state is. A socket held by several processes gets one row per (process, fd);
a socket no process holds gets one row: '?' in the process columns when no holder is known, '-'
and its state as COMMAND for a TIME-WAIT entry or request socket that only the kernel holds.

Each subcommand takes the options its own --help lists. Options given before a subcommand's
name are the subcommand's, as if given after it: 'sockstat -p 443 diagnose' is 'sockstat
diagnose -p 443'; an option the subcommand does not take is refused.

Examples:
  sockstat -l -p 8080          what is listening on 8080, and which process
  sockstat -c --sport 5432 -s  the connections to the database listening here on 5432
  sockstat -4 -6 --json        every Internet socket as JSON
  sockstat --summary           counts by protocol, family and state

", exit_statuses!("diagnose found something at warning level or above, or kill could not close some socket")),
    disable_help_flag = true,
    args_override_self = true,
    max_term_width = 100
)]
#[command(mut_arg("no_loopback", |a| a.help(
    "Hide Internet sockets whose local or remote address is loopback (127/8, ::1). Unix sockets \
     are not affected (as FreeBSD's -L): add -4 -6 to see only the network"
)))]
pub struct Cli {
    /// Filters.
    #[command(flatten)]
    pub filters: ListingFilters,

    /// Output options.
    #[command(flatten)]
    pub output: OutputArgs,

    /// Watch mode.
    #[command(flatten)]
    pub watch: WatchArgs,

    /// Watch for sockets that open and close: one line each ('+' opened, '-' closed, with the
    /// holders), or JSON lines with --json; the first refresh is the baseline. Implies --watch.
    #[arg(long, conflicts_with_all = ["summary", "csv"], help_heading = "Watch")]
    pub events: bool,

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

/// A group of flags that sets its part of a query.
pub trait Narrow {
    /// Sets, in `q`, what these flags ask for.
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()>;
}

/// The query that `groups` describe together, from [`Query::new`].
pub fn query(groups: &[&dyn Narrow]) -> anyhow::Result<Query> {
    let mut q = Query::new();
    for g in groups {
        g.narrow(&mut q)?;
    }
    if !q.gather.owners && (q.select.pids.is_some() || q.select.command.is_some()) {
        return Err(crate::usage(
            "--pid and --command need the owner scan; drop --no-owners",
        ));
    }
    Ok(q)
}

/// A view's filters: a struct of the groups it takes (flattened into its flags, in this order),
/// which narrows a query by each in turn.
macro_rules! filters {
    ($(#[$doc:meta])* pub struct $name:ident { $($field:ident: $group:ty),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, clap::Args)]
        pub struct $name {
            $(
                #[command(flatten)]
                pub $field: $group,
            )+
        }

        impl $crate::cli::Narrow for $name {
            fn narrow(&self, q: &mut sockstat::Query) -> anyhow::Result<()> {
                $($crate::cli::Narrow::narrow(&self.$field, q)?;)+
                Ok(())
            }
        }
    };
}
pub(crate) use filters;

/// `-4`, `-6`: the Internet families.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FamilyArgs {
    /// Only IPv4 sockets (with -6: IPv4 and IPv6).
    #[arg(short = '4', help_heading = "Filters")]
    pub inet: bool,
    /// Only IPv6 sockets (with -4: IPv4 and IPv6).
    #[arg(short = '6', help_heading = "Filters")]
    pub inet6: bool,
}

impl Narrow for FamilyArgs {
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        if self.inet || self.inet6 {
            q.select.families.inet = self.inet;
            q.select.families.inet6 = self.inet6;
            q.select.families.unix = false;
        }
        Ok(())
    }
}

/// `-u`: unix sockets (the listing only: every other view looks at Internet sockets).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UnixArg {
    /// Only Unix domain sockets (with -4 or -6: those families and Unix).
    #[arg(short = 'u', help_heading = "Filters")]
    pub unix: bool,
}

impl Narrow for UnixArg {
    /// After [`FamilyArgs`]: `-u` alone is unix only, `-4 -u` IPv4 and unix.
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        if self.unix {
            if q.select.families.unix {
                // No -4 or -6: unix alone.
                q.select.families.inet = false;
                q.select.families.inet6 = false;
            }
            q.select.families.unix = true;
        }
        Ok(())
    }
}

/// `-c`, `-l`: connected or listening sockets.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RoleArgs {
    /// Only connected sockets (with a remote end: ESTABLISHED, SYN_SENT, ..., TIME_WAIT,
    /// connected datagram and unix sockets).
    #[arg(short = 'c', help_heading = "Filters")]
    pub connected: bool,
    /// Only listening sockets (TCP LISTEN, bound unconnected datagram sockets, unix listeners).
    #[arg(short = 'l', help_heading = "Filters")]
    pub listening: bool,
}

impl Narrow for RoleArgs {
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        q.select.connected = self.connected;
        q.select.listening = self.listening;
        Ok(())
    }
}

/// `-L`, `-p`, `--sport`, `--dport`, `--src`, `--dst`: the ends of Internet sockets, tested in
/// the kernel's dump where it can.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EndpointArgs {
    /// Hide Internet sockets whose local or remote address is loopback (127/8, ::1).
    #[arg(short = 'L', help_heading = "Filters")]
    pub no_loopback: bool,
    /// Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100).
    #[arg(short = 'p', value_name = "PORTS", value_parser = PortSet::parse, help_heading = "Filters")]
    pub ports: Option<PortSet>,
    /// Only Internet sockets whose local port is in PORTS (as -p): a server's own port, or a
    /// client's ephemeral one.
    #[arg(long, value_name = "PORTS", value_parser = PortSet::parse, help_heading = "Filters")]
    pub sport: Option<PortSet>,
    /// Only Internet sockets whose remote port is in PORTS (as -p): the server port a client
    /// connected to.
    #[arg(long, value_name = "PORTS", value_parser = PortSet::parse, help_heading = "Filters")]
    pub dport: Option<PortSet>,
    /// Only sockets whose local address is ADDR or in ADDR/LEN.
    #[arg(long, value_name = "ADDR[/LEN]", value_parser = parse_prefix, help_heading = "Filters")]
    pub src: Option<ipnet::IpNet>,
    /// Only sockets whose remote address is ADDR or in ADDR/LEN.
    #[arg(long, value_name = "ADDR[/LEN]", value_parser = parse_prefix, help_heading = "Filters")]
    pub dst: Option<ipnet::IpNet>,
}

impl Narrow for EndpointArgs {
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        q.select.no_loopback = self.no_loopback;
        q.select.ports = self.ports.clone();
        q.select.sport = self.sport.clone();
        q.select.dport = self.dport.clone();
        q.select.src = self.src;
        q.select.dst = self.dst;
        Ok(())
    }
}

/// `-P`: protocols.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ProtoArgs {
    /// Protocols: tcp, udp, udplite, raw, icmp (ping sockets), sctp, mptcp, packet, unix,
    /// netlink (comma-separated). Default: all the kernel has except packet and netlink, and the
    /// sockets no table lists (a socket never bound is selected by the protocol the kernel names
    /// for it: an unbound UDP socket is one of -P udp).
    #[arg(short = 'P', value_name = "PROTOS", value_parser = protos, help_heading = "Filters")]
    pub protos: Option<List<Proto>>,
}

impl Narrow for ProtoArgs {
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        q.select.protos = self.protos.clone().map(|l| l.0);
        Ok(())
    }
}

/// `--state`: kernel states.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct StateArgs {
    /// Only sockets in these states: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT
    /// CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated).
    #[arg(long = "state", value_name = "STATES", value_parser = states, help_heading = "Filters")]
    pub states: Option<List<State>>,
}

impl Narrow for StateArgs {
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        q.select.states = self.states.clone().map(|l| l.0);
        Ok(())
    }
}

/// `--pid`, `--user`, `--command`: the processes that hold the sockets.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HolderArgs {
    /// Only sockets held by these processes (comma-separated pids).
    #[arg(long = "pid", value_name = "PIDS", value_parser = pids, help_heading = "Filters")]
    pub pids: Option<List<u32>>,
    /// Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose
    /// kernel uid is USER.
    #[arg(long, value_name = "USER", help_heading = "Filters")]
    pub user: Option<String>,
    /// Only sockets whose holder's command name is NAME (a glob when it has * or ?).
    #[arg(long, value_name = "NAME", value_parser = CommandMatch::parse, help_heading = "Filters")]
    pub command: Option<CommandMatch>,
}

impl Narrow for HolderArgs {
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        q.select.pids = self.pids.clone().map(|l| l.0);
        q.select.uid = match &self.user {
            Some(u) => Some(sockstat::resolve_user(u)?),
            None => None,
        };
        q.select.command = self.command.clone();
        Ok(())
    }
}

/// The filters' help in the views that see Internet sockets only (`diagnose`, `trace`,
/// `events`, `kill`): the listing's words without the unix sockets those views never show
/// (`#[command(mut_args(crate::cli::inet_only_help))]`).
pub fn inet_only_help(a: clap::Arg) -> clap::Arg {
    match a.get_id().as_str() {
        "connected" => a.help(
            "Only connected sockets (with a remote end: ESTABLISHED, SYN_SENT, ..., TIME_WAIT)",
        ),
        "listening" => a.help(
            "Only listening sockets (TCP LISTEN; for kill, bound unconnected UDP sockets too)",
        ),
        "connected_to" => a.help(
            "Only the connections to these listening ports (e.g. 5432,8000-8100), seen from both \
             ends. Implies -c",
        ),
        _ => a,
    }
}

impl ConnectedToArgs {
    /// For the views that see Internet sockets only: a unix listener would match nothing there,
    /// so it is refused with a line naming it rather than answered with an empty result.
    pub fn ports_only(&self, view: &str) -> anyhow::Result<()> {
        match self.connected_to.as_ref().and_then(|c| c.unix.first()) {
            Some(u) => Err(crate::usage(format!(
                "--connected-to {}: '{view}' sees Internet sockets only; name listening ports",
                String::from_utf8_lossy(&u.display_bytes())
            ))),
            None => Ok(()),
        }
    }
}

/// `--connected-to`: the connections to some listeners, from both ends.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectedToArgs {
    /// Only the connections to these listeners, seen from both ends, whatever the transport:
    /// ports (5432) and unix listeners by path (/run/postgresql/.s.PGSQL.5432) or abstract
    /// name (@name), comma-separated. Implies -c.
    #[arg(long, value_name = "LISTENERS", value_parser = ConnectedTo::parse, help_heading = "Filters")]
    pub connected_to: Option<ConnectedTo>,
}

impl Narrow for ConnectedToArgs {
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        q.select.connected_to = self.connected_to.clone();
        Ok(())
    }
}

/// `-z`/`-j ZONE` and `-Z`: which zones (network namespaces) to read.
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
    /// Every zone (network namespace) on the host, each read inside it (a ZONE column or field
    /// names each row's).
    #[arg(short = 'Z', help_heading = "Zones")]
    pub all_zones: bool,
}

impl ZoneArgs {
    /// The library's zone selection.
    pub fn select(&self) -> sockstat::ZoneSelect {
        match (&self.zone, self.all_zones) {
            (Some(z), _) => sockstat::ZoneSelect::Named(z.clone()),
            (None, true) => sockstat::ZoneSelect::All,
            (None, false) => sockstat::ZoneSelect::Current,
        }
    }
}

impl Narrow for ZoneArgs {
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        q.select.zones = self.select();
        Ok(())
    }
}

filters! {
    /// The listing's filters: every group (`-u` after `-4`/`-6`).
    pub struct ListingFilters {
        families: FamilyArgs,
        unix: UnixArg,
        role: RoleArgs,
        endpoints: EndpointArgs,
        protos: ProtoArgs,
        states: StateArgs,
        holders: HolderArgs,
        connected_to: ConnectedToArgs,
        zones: ZoneArgs,
    }
}

filters! {
    /// The listing's filters without `-u`, for the views of Internet sockets (`kill`: a unix
    /// socket cannot be closed from outside; `top`: unix sockets carry no byte counters).
    pub struct InetFilters {
        families: FamilyArgs,
        role: RoleArgs,
        endpoints: EndpointArgs,
        protos: ProtoArgs,
        states: StateArgs,
        holders: HolderArgs,
        connected_to: ConnectedToArgs,
        zones: ZoneArgs,
    }
}

filters! {
    /// The filters of the views that look at TCP connections and their internals (`diagnose`,
    /// `trace`): no `-u` and no `-P`, since they see TCP alone.
    pub struct TcpFilters {
        families: FamilyArgs,
        role: RoleArgs,
        endpoints: EndpointArgs,
        states: StateArgs,
        holders: HolderArgs,
        connected_to: ConnectedToArgs,
        zones: ZoneArgs,
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
    /// of busy time limited by the peer's window or our send buffer ("tcp" object in JSON; with
    /// --watch --json, one line per TCP connection per refresh: a time series).
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
    /// --command or --user selects what is counted; without one, the sockets no kernel table
    /// lists, which only the owner scan finds, are not counted).
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
}

/// `--watch [SECONDS]` and `--count N`: a view shown again and again (the listing, `ports`,
/// `counters`, `diagnose`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WatchArgs {
    /// Refresh every SECONDS (default 2): redrawn in place on a terminal (Ctrl-C to stop);
    /// otherwise each refresh is printed after a '=== TIME ===' line, or as one JSON document
    /// per line with --json.
    #[arg(
        long,
        value_name = "SECONDS",
        num_args = 0..=1,
        default_missing_value = "2",
        value_parser = crate::output::parse_seconds,
        help_heading = "Watch"
    )]
    pub watch: Option<f64>,
    /// Stop after N refreshes. Implies --watch.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Watch")]
    pub count: Option<u64>,
}

impl WatchArgs {
    /// The refresh interval when `--watch` or `--count` asks for watch mode (`--count` alone
    /// refreshes at the default interval).
    pub fn interval(&self) -> Option<f64> {
        self.watch
            .or(self.count.map(|_| crate::watch::DEFAULT_INTERVAL_SECS))
    }
}

/// Where the data comes from.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SourceArgs {
    /// Skip the /proc owner scan (fastest): no process is named (owners_status "not_requested"
    /// in JSON; the listing leaves out its COMMAND, PID and FD columns).
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

impl Narrow for SourceArgs {
    fn narrow(&self, q: &mut Query) -> anyhow::Result<()> {
        q.gather.owners = !self.no_owners;
        q.gather.source = match (&self.replay_netlink, self.source) {
            (Some(dir), _) => Source::Replay(dir.clone()),
            (None, SourceArg::Auto) => Source::Auto,
            (None, SourceArg::Netlink) => Source::Netlink,
            (None, SourceArg::Proc) => Source::Proc,
        };
        if let Some(root) = &self.proc_root {
            q.gather.proc_root = root.clone();
        }
        q.gather.owner_scan = match self.owner_scan {
            OwnerScanArg::Auto => sockstat::OwnerScan::Auto,
            OwnerScanArg::Proc => sockstat::OwnerScan::Proc,
            OwnerScanArg::Bpf => sockstat::OwnerScan::Bpf,
        };
        q.gather.record_netlink = self.record_netlink.clone();
        Ok(())
    }
}

/// Why the command line was refused: clap's error, and the subcommand it was for (whose name
/// the one-line message gives).
#[derive(Debug)]
pub struct Refused {
    /// clap's error.
    pub error: clap::Error,
    /// The subcommand the options were given to, if any.
    pub subcommand: Option<String>,
}

/// Parses the command line (`args` with the program's name first). Options given before a
/// subcommand's name are parsed as the subcommand's, as if given right after its name.
pub fn parse_from(args: Vec<OsString>) -> Result<Cli, Refused> {
    use clap::error::ErrorKind;
    let named = |i: usize| {
        args.get(i)
            .and_then(|a| a.to_str())
            .filter(|a| is_subcommand(a))
            .map(str::to_string)
    };
    if let Some(at) = subcommand_at(&args) {
        let subcommand = named(at);
        return Cli::try_parse_from(arranged(&args)).map_err(|error| Refused { error, subcommand });
    }
    Cli::try_parse_from(&args).map_err(|error| {
        // An option the listing does not take, before a subcommand's name: what the
        // subcommand says of the same arguments after its name names the option it lacks.
        let later = (2..args.len()).find(|&i| named(i).is_some());
        if let (ErrorKind::UnknownArgument, Some(at)) = (error.kind(), later) {
            if let Err(e) = Cli::try_parse_from(moved_first(&args, at)) {
                if e.kind() == ErrorKind::UnknownArgument {
                    return Refused {
                        error: e,
                        subcommand: named(at),
                    };
                }
            }
        }
        Refused {
            error,
            subcommand: named(1),
        }
    })
}

/// The command line as [`parse_from`] parses it: options given before a subcommand's name moved
/// after it. Whatever inspects the parsed flags again (the privilege check) must read these.
pub fn arranged(args: &[OsString]) -> Vec<OsString> {
    match subcommand_at(args) {
        Some(at) => moved_first(args, at),
        None => args.to_vec(),
    }
}

/// The names an option is typed under, as typed: `-z`, `-j` (a visible alias), `--tcp-info`.
pub fn names(a: &clap::Arg) -> Vec<String> {
    let short = a.get_short_and_visible_aliases().unwrap_or_default();
    let long = a.get_long_and_visible_aliases().unwrap_or_default();
    short
        .iter()
        .map(|s| format!("-{s}"))
        .chain(long.iter().map(|l| format!("--{l}")))
        .collect()
}

/// True when `flag` (`-u`, `--watch`) is an option of the listing or of some subcommand.
pub fn is_option_of_sockstat(flag: &str) -> bool {
    let cmd = Cli::command();
    let found = std::iter::once(&cmd)
        .chain(cmd.get_subcommands())
        .flat_map(|c| c.get_arguments())
        .any(|a| names(a).iter().any(|n| n == flag));
    found
}

fn is_subcommand(name: &str) -> bool {
    // From the derived enum: no command is built for it.
    <crate::commands::Command as clap::Subcommand>::has_subcommand(name)
}

/// Where `sockstat OPTIONS SUBCOMMAND REST` names its subcommand, when OPTIONS are not empty:
/// the first argument that names one and that the arguments before it leave alone, because they
/// parse whole, as the listing's options or as the subcommand's. So in `sockstat --command kill
/// ports`, `kill` is the value of `--command`; in `sockstat --watch ports`, `--watch` has no
/// SECONDS and `ports` is the subcommand; in `sockstat --interval 3 diagnose`, `--interval 3` is
/// diagnose's.
fn subcommand_at(args: &[OsString]) -> Option<usize> {
    (2..args.len()).find(|&i| {
        args[i]
            .to_str()
            .filter(|a| is_subcommand(a))
            .is_some_and(|sub| whole_options(&args[..i], sub))
    })
}

/// `sockstat OPTIONS SUBCOMMAND REST` as `sockstat SUBCOMMAND OPTIONS REST`, the subcommand at
/// `at`.
fn moved_first(args: &[OsString], at: usize) -> Vec<OsString> {
    let mut v = Vec::with_capacity(args.len());
    v.push(args[0].clone());
    v.push(args[at].clone());
    v.extend_from_slice(&args[1..at]);
    v.extend_from_slice(&args[at + 1..]);
    v
}

/// True when `args` (the program's name first) parse as the listing's options, or as the
/// options of subcommand `sub`, with nothing left over: no option is waiting for its value.
/// `--help` among them counts, and so does a value its parser refuses (the subcommand's parse
/// names it).
fn whole_options(args: &[OsString], sub: &str) -> bool {
    use clap::error::ErrorKind;
    // `-h` or `--help` among them; not clap's `help` subcommand (`sockstat help events` is
    // clap's to answer).
    let asks_help = args[1..].iter().any(|a| a == "-h" || a == "--help");
    let whole = |r: Result<clap::ArgMatches, clap::Error>| match r {
        Ok(m) => m.subcommand().is_none(),
        Err(e) => match e.kind() {
            ErrorKind::DisplayHelp => asks_help,
            ErrorKind::ValueValidation => true,
            _ => false,
        },
    };
    let mut listing = Cli::command();
    if whole(listing.try_get_matches_from_mut(args)) {
        return true;
    }
    let Some(mut cmd) = listing.find_subcommand(sub).cloned() else {
        return false;
    };
    let as_sub = std::iter::once(OsString::from(sub)).chain(args[1..].iter().cloned());
    whole(cmd.try_get_matches_from_mut(as_sub))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::CommandFactory;

    fn argv(s: &str) -> Vec<OsString> {
        std::iter::once("sockstat")
            .chain(s.split_whitespace())
            .map(OsString::from)
            .collect()
    }

    fn reordered(s: &str) -> String {
        let args = argv(s);
        let args = match subcommand_at(&args) {
            Some(at) => moved_first(&args, at),
            None => args,
        };
        args.iter()
            .skip(1)
            .map(|a| a.to_str().unwrap())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    /// A value each option accepts, by its value name: a new value name must be added here,
    /// so that the tests below try every option.
    pub fn sample(value_name: &str) -> &'static str {
        match value_name {
            "PORTS" => "80,8000-8100",
            "ADDR[/LEN]" => "192.0.2.0/24",
            "PROTOS" => "tcp",
            "STATES" => "ESTABLISHED",
            "PIDS" => "1",
            "USER" => "0",
            "NAME" => "nomatch",
            "LISTENERS" => "5432",
            "ZONE" => "global",
            "WHEN" => "never",
            "SOURCE" => "netlink",
            "HOW" => "proc",
            "SECONDS" => "0.5",
            "N" => "3",
            "RATE" => "100Mbit",
            "ID" | "COOKIE" | "COOKIES" => "1",
            "FILE" => "x.svg",
            "DURATION" => "5s",
            "GROUPING" => "connection",
            "COLUMN" => "send",
            "ADDR:PORT" => "127.0.0.1:9277",
            other => panic!("no sample value for {other}: add one"),
        }
    }

    /// The listing (`None`) and every subcommand, built (with `-h`, `-V`).
    pub fn views() -> Vec<(Option<String>, clap::Command)> {
        let mut cli = Cli::command();
        cli.build();
        let mut v = vec![(None, cli.clone())];
        for sub in cli.get_subcommands().filter(|s| s.get_name() != "help") {
            v.push((Some(sub.get_name().to_string()), sub.clone()));
        }
        v
    }

    /// Every visible name of every visible option of `cmd`, each with the arguments that give
    /// it (the name, and a sample value when it takes one).
    pub fn typed(cmd: &clap::Command) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        for a in cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !a.is_positional())
        {
            let names = names(a);
            let value = a.get_num_args().is_some_and(|n| n.takes_values()).then(|| {
                let name = a.get_value_names().and_then(|v| v.first()).unwrap();
                sample(name.as_str()).to_string()
            });
            for n in names {
                let mut args = vec![n.clone()];
                args.extend(value.clone());
                out.push((n, args));
            }
        }
        out
    }

    fn parse(args: &[String]) -> Result<String, clap::error::ErrorKind> {
        let argv = std::iter::once("sockstat".into())
            .chain(args.iter().map(OsString::from))
            .collect();
        parse_from(argv)
            .map(|c| format!("{c:?}"))
            .map_err(|r| r.error.kind())
    }

    /// Every option a view lists (its --help, man page and completions list exactly these:
    /// `generate::tests`) is accepted by it, and means the same given before the subcommand's
    /// name as after it.
    #[test]
    fn every_option_a_view_lists_is_accepted_before_and_after_its_name() {
        use clap::error::ErrorKind;
        let mut tried = 0;
        for (sub, cmd) in views() {
            for (name, args) in typed(&cmd) {
                let after: Vec<String> = sub.iter().cloned().chain(args.clone()).collect();
                let parsed = parse(&after);
                match (name.as_str(), &parsed) {
                    ("-h" | "--help", Err(ErrorKind::DisplayHelp)) => {}
                    ("-V" | "--version", Err(ErrorKind::DisplayVersion)) => {}
                    (_, Ok(_)) => {}
                    (_, Err(e)) => panic!("{after:?} refused: {e:?}"),
                }
                tried += 1;
                let Some(sub) = &sub else { continue };
                let before: Vec<String> = args.iter().cloned().chain([sub.clone()]).collect();
                assert_eq!(parse(&before), parsed, "{before:?} is not {after:?}");
            }
        }
        assert!(tried > 150, "{tried} options tried");
    }

    /// Moving options before a subcommand's name after it is safe only if a name takes a value
    /// in every view that has it or in none: otherwise `sockstat -x kill` could read `kill` as
    /// the value in one view and as the subcommand in another.
    #[test]
    fn a_name_takes_a_value_everywhere_or_nowhere() {
        let mut seen: std::collections::HashMap<String, (bool, String)> = Default::default();
        for (sub, cmd) in views() {
            let view = sub.unwrap_or_else(|| "the listing".into());
            for a in cmd.get_arguments().filter(|a| !a.is_positional()) {
                let takes = a.get_num_args().is_some_and(|n| n.takes_values());
                let names = names(a);
                for n in names {
                    let (t, first) = seen.entry(n.clone()).or_insert((takes, view.clone()));
                    assert_eq!(*t, takes, "{n} in {first} and in {view}");
                }
            }
        }
    }

    #[test]
    fn options_before_a_subcommand_are_moved_after_its_name() {
        assert_eq!(reordered("-p 443 diagnose -v"), "diagnose -p 443 -v");
        assert_eq!(reordered("--watch ports"), "ports --watch");
        assert_eq!(reordered("--watch 2 ports -q"), "ports --watch 2 -q");
        assert_eq!(reordered("--watch=2 counters 5"), "counters --watch=2 5");
        assert_eq!(reordered("-h kill"), "kill -h");
        // clap's help subcommand answers for itself.
        assert_eq!(reordered("help events"), "help events");
        // A subcommand's name as a value is a value.
        assert_eq!(reordered("--command kill"), "--command kill");
        assert_eq!(reordered("--command kill ports"), "ports --command kill");
        assert_eq!(reordered("--user serve -l"), "--user serve -l");
        // The subcommand's own options, and its positional arguments.
        assert_eq!(reordered("--interval 3 diagnose"), "diagnose --interval 3");
        assert_eq!(reordered("5 counters --json"), "counters 5 --json");
        // A bad value: the subcommand's parse names it.
        assert_eq!(reordered("-p 99999 diagnose"), "diagnose -p 99999");
        // Options of neither are left for clap to refuse where they are.
        assert_eq!(
            reordered("-T --interval 3 diagnose"),
            "-T --interval 3 diagnose"
        );
        assert_eq!(reordered("diagnose -p 1"), "diagnose -p 1");
        assert_eq!(reordered("-l -p 80"), "-l -p 80");
    }
}
