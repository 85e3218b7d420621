//! What the user asked for: the [`Query`], the parsers for its textual forms (`-p 22,80-90`,
//! `-P tcp,udp`, `--state`, `--user`), and the user-space evaluation of every filter.
//!
//! Filters combine with AND. The parts the kernel can apply (state masks, ports, address
//! prefixes) are also pushed into the sock_diag request by `sys`; the checks here run
//! on every socket anyway, so the /proc fallback and the kernel path select the same sockets.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;

use crate::model::{Endpoint, Family, Owner, Process, Proto, Socket, State};

/// How long a listing waits for the user database before showing uids as numbers.
pub const USER_LOOKUP_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// A filter value that could not be parsed. The message names the bad value and what is allowed.
///
/// The message is one line and safe to print on a terminal: control characters, bidi controls and
/// invalid UTF-8 in the value are escaped as the table escapes them (`\n`, `\x1b`, `\u{202e}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    message: String,
}

impl FilterError {
    fn new(message: String) -> FilterError {
        FilterError::from_message(message)
    }

    /// An error with this message (for filters parsed outside this module). Characters that
    /// must not reach a terminal are escaped.
    pub fn from_message(message: String) -> FilterError {
        let message = match crate::text::sanitize::for_terminal(message.as_bytes()) {
            std::borrow::Cow::Borrowed(_) => message,
            std::borrow::Cow::Owned(escaped) => escaped,
        };
        FilterError { message }
    }
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FilterError {}

/// A set of ports given as a list of single ports and inclusive ranges (`22,80,8000-8100`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortSet {
    ranges: Vec<(u16, u16)>,
}

impl PortSet {
    /// Parses `22,80,8000-8100`. Ports are 0-65535, ranges go low to high.
    pub fn parse(s: &str) -> Result<PortSet, FilterError> {
        let mut ranges = Vec::new();
        if s.trim().is_empty() {
            return Err(FilterError::new(
                "empty port list: give ports and ranges like 22,80,8000-8100".into(),
            ));
        }
        for part in s.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_port(a, part)?, parse_port(b, part)?),
                None => {
                    let p = parse_port(part, part)?;
                    (p, p)
                }
            };
            if lo > hi {
                return Err(FilterError::new(format!(
                    "invalid port range '{part}': the range goes backwards ({lo} > {hi}); write it low-high"
                )));
            }
            ranges.push((lo, hi));
        }
        // Merged so the kernel program stays small.
        Ok(PortSet {
            ranges: sockstat_wire::sysctl::merge_ranges(ranges),
        })
    }

    /// A set of these inclusive ranges (sorted and merged here).
    pub fn from_ranges(ranges: Vec<(u16, u16)>) -> PortSet {
        PortSet {
            ranges: sockstat_wire::sysctl::merge_ranges(ranges),
        }
    }

    /// The merged, sorted inclusive ranges.
    pub fn ranges(&self) -> &[(u16, u16)] {
        &self.ranges
    }

    /// True when `port` is in the set.
    pub fn contains(&self, port: u16) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= port && port <= hi)
    }
}

fn parse_port(s: &str, whole: &str) -> Result<u16, FilterError> {
    let t = s.trim();
    match t.parse::<u32>() {
        Ok(n) if n <= 65535 => Ok(n as u16),
        Ok(n) => Err(FilterError::new(format!(
            "invalid port '{n}' in '{whole}': ports are 0-65535"
        ))),
        Err(_) => Err(FilterError::new(format!(
            "invalid port '{t}' in '{whole}': give numbers 0-65535 and ranges like 8000-8100"
        ))),
    }
}

/// Parses a comma-separated protocol list for `-P`.
pub fn parse_protos(s: &str) -> Result<Vec<Proto>, FilterError> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim) {
        match Proto::from_name(name) {
            Some(p) => {
                if !out.contains(&p) {
                    out.push(p)
                }
            }
            None if name.eq_ignore_ascii_case("icmp6") => {
                return Err(FilterError::new(
                    "unknown protocol 'icmp6': -P icmp selects the ping sockets of both families; add -6 for the ICMPv6 ones"
                        .into(),
                ))
            }
            None => {
                return Err(FilterError::new(format!(
                    "unknown protocol '{name}': choose from tcp, udp, udplite, raw, icmp, sctp, mptcp, packet, unix, netlink"
                )))
            }
        }
    }
    Ok(out)
}

/// Parses a comma-separated state list for `--state`.
pub fn parse_states(s: &str) -> Result<Vec<State>, FilterError> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim) {
        match State::from_name(name) {
            Some(st) => {
                if !out.contains(&st) {
                    out.push(st)
                }
            }
            None => {
                let allowed: Vec<&str> = State::NAMED.iter().map(|(_, n)| *n).collect();
                return Err(FilterError::new(format!(
                    "unknown state '{name}': choose from {}",
                    allowed.join(", ")
                )));
            }
        }
    }
    Ok(out)
}

/// Parses a comma-separated pid list for `--pid`.
pub fn parse_pids(s: &str) -> Result<Vec<u32>, FilterError> {
    let mut out = Vec::new();
    for p in s.split(',').map(str::trim) {
        match p.parse::<u32>() {
            Ok(n) if n > 0 && n <= 4_194_304 => out.push(n),
            _ => {
                return Err(FilterError::new(format!(
                    "invalid pid '{p}': give process ids (1-4194304), comma-separated"
                )))
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parses an address or prefix for `--src`/`--dst`: `127.0.0.1`, `10.0.0.0/8`, `::1`,
/// `2001:db8::/32`, `[::1]`.
pub fn parse_prefix(s: &str) -> Result<IpNet, FilterError> {
    let t = s.trim();
    let t = t
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(t);
    if let Ok(net) = t.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    if let Ok(addr) = t.parse::<IpAddr>() {
        return Ok(IpNet::from(addr));
    }
    Err(FilterError::new(format!(
        "invalid address '{s}': give an IPv4 or IPv6 address, optionally with a prefix length (192.0.2.0/24, 2001:db8::/32)"
    )))
}

/// A command-name filter: exact, or a glob when the value has `*` or `?`.
#[derive(Debug, Clone)]
pub struct CommandMatch {
    text: String,
    glob: Option<glob::Pattern>,
}

impl CommandMatch {
    /// Parses `--command NAME`.
    pub fn parse(s: &str) -> Result<CommandMatch, FilterError> {
        if s.is_empty() {
            return Err(FilterError::new(
                "empty command name: give a command name or a glob like 'ngin*'".into(),
            ));
        }
        let glob = if s.contains('*') || s.contains('?') {
            Some(
                glob::Pattern::new(s)
                    .map_err(|e| FilterError::new(format!("invalid command pattern '{s}': {e}")))?,
            )
        } else {
            None
        };
        Ok(CommandMatch {
            text: s.to_string(),
            glob,
        })
    }

    /// True when a command name matches.
    pub fn matches(&self, command: &[u8]) -> bool {
        let c = String::from_utf8_lossy(command);
        match &self.glob {
            Some(g) => g.matches(&c),
            None => c == self.text,
        }
    }
}

impl PartialEq for CommandMatch {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

/// Where the socket table comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Source {
    /// sock_diag netlink, falling back to /proc/net text for any family whose dump fails.
    #[default]
    Auto,
    /// sock_diag only: a failed dump is an error.
    Netlink,
    /// /proc/net text only (no cookies, no TCP internals).
    Proc,
    /// Replay netlink replies recorded earlier with `record_netlink` (tests, bug reports).
    Replay(PathBuf),
}

/// How the owner scan reads every process's fd table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OwnerScan {
    /// The BPF iterator where it can run (root or CAP_BPF and CAP_PERFMON, kernel BTF, Linux
    /// 5.11, /proc of this pid namespace), else `/proc`.
    #[default]
    Auto,
    /// `/proc/PID/fd` only.
    Proc,
    /// The BPF iterator; where it cannot run, `/proc` with a warning saying why.
    Bpf,
}

/// Which network namespaces (zones) to list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ZoneSelect {
    /// The namespace this process runs in (no zone column).
    #[default]
    Current,
    /// Every namespace on the host (`-Z`).
    All,
    /// One namespace, by name, container id prefix or inode (`-z`, `-j`).
    Named(String),
}

/// Which address families to list (`-4`, `-6`, `-u`; none given means all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Families {
    /// IPv4.
    pub inet: bool,
    /// IPv6.
    pub inet6: bool,
    /// Unix domain.
    pub unix: bool,
}

impl Default for Families {
    fn default() -> Families {
        Families {
            inet: true,
            inet6: true,
            unix: true,
        }
    }
}

/// A listing request: what is selected and how it is gathered.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Query {
    /// Which sockets: the filters, combined with AND, and the zones.
    pub select: Selection,
    /// How they are gathered: the source, the details read, the owner scan.
    pub gather: Gathering,
}

/// Which sockets a query selects: the socket filters (combined with AND), the owner filters
/// and the zones. What passes is [`Query::matches_socket`] and the owner filters' business.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Selection {
    /// Address families.
    pub families: Families,
    /// Protocols (`-P`); `None` = every protocol the kernel has except packet and netlink, and
    /// the sockets no table lists ([`Proto::Other`]).
    pub protos: Option<Vec<Proto>>,
    /// Only sockets with a remote end (`-c`).
    pub connected: bool,
    /// Only listening sockets (`-l`). With `connected` too, no such filter.
    pub listening: bool,
    /// Hide inet sockets whose local or remote address is loopback (`-L`).
    pub no_loopback: bool,
    /// Local or remote port in this set (`-p`); selects inet sockets only.
    pub ports: Option<PortSet>,
    /// Local port in this set (`--sport`); selects inet sockets only.
    pub sport: Option<PortSet>,
    /// Remote port in this set (`--dport`); selects inet sockets only.
    pub dport: Option<PortSet>,
    /// Local address in this prefix (`--src`).
    pub src: Option<IpNet>,
    /// Remote address in this prefix (`--dst`).
    pub dst: Option<IpNet>,
    /// Kernel states (`--state`).
    pub states: Option<Vec<State>>,
    /// Sockets held by these pids (`--pid`).
    pub pids: Option<Vec<u32>>,
    /// Sockets whose owner runs as this uid, or with no known owner, whose kernel uid it is.
    pub uid: Option<u32>,
    /// Owner's command name (`--command`).
    pub command: Option<CommandMatch>,
    /// Which network namespaces to read.
    pub zones: ZoneSelect,
    /// Only the connections to these listeners, seen from both ends, whatever the transport
    /// (`--connected-to`): for a port, the connected inet sockets with it as their local or
    /// remote port; for a unix path or abstract name, the accepted sockets of the listener bound
    /// there and the clients whose peer has that name.
    pub connected_to: Option<ConnectedTo>,
    /// Leave TIME-WAIT entries out (the kernel skips them), unless `states` names TIME_WAIT: `-T`
    /// does by default, since they have no TCP internals and can outnumber the connections.
    /// The listing then says how many the namespace has (`time-wait-hidden`).
    pub hide_time_wait: bool,
}

/// How a query's sockets are gathered: where from (`source`, `proc_root`), which details are
/// read (TCP internals, memory, owners and their arguments, user names, cgroups), how the owner
/// scan runs, and the order they come in.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Gathering {
    /// Scan /proc for owners (off with `--no-owners`).
    pub owners: bool,
    /// Look for the sockets processes hold that no kernel table lists (kind other, found by
    /// the owner scan: doc/reference/linux.md, "Socket kinds"); on by default. Off where only
    /// what the tables list is wanted: the connections `diagnose`, `trace`, `kill` and `top`
    /// work on, and Python's `net_connections()` (psutil's rows come from the tables).
    pub unlisted: bool,
    /// Read process arguments (`-a`).
    pub args: bool,
    /// Resolve uids to user names (off with `-n`).
    pub resolve_users: bool,
    /// How long to wait for the user database (NSS) before showing uids as numbers, with a
    /// `users-unresolved` warning. Default [`USER_LOOKUP_BUDGET`] (2 s).
    pub user_lookup_budget: std::time::Duration,
    /// Where sockets come from.
    pub source: Source,
    /// The /proc to read (a fake tree in tests).
    pub proc_root: PathBuf,
    /// How the owner scan reads fd tables.
    pub owner_scan: OwnerScan,
    /// Save each raw netlink reply in this directory (for bug reports and replay tests).
    pub record_netlink: Option<PathBuf>,
    /// Ask the kernel for TCP internals (`-T`): `tcp_info`, congestion control, BBR estimates.
    pub tcp_info: bool,
    /// With `tcp_info`, ask for the congestion control algorithm's name and BBR's estimates
    /// too (on by default); off where only `tcp_info`'s counters are read (the live view), which
    /// leaves the kernel less to write and each socket one string fewer to make.
    pub tcp_estimates: bool,
    /// Ask for the congestion control algorithm only (`-C`).
    pub congestion: bool,
    /// Ask for socket memory (`-m`).
    pub memory: bool,
    /// Name each inet socket's cgroup (`--cgroup`): no /proc scan, no privilege.
    pub cgroups: bool,
    /// Put the sockets in the listing's order (zone, protocol, family, addresses, then
    /// holder). Off, they come in no particular order (as the dumps' parts are joined), which
    /// saves the sort (7 ms of the exporter's collection at 60k sockets): for a consumer whose
    /// result does not depend on the order, such as the exporter, whose every metric family is
    /// keyed and sorted by its labels.
    pub sorted: bool,
    /// Ask the kernel for each unix socket's name, peer, uid and (with `memory`) memory, and
    /// name each client by its peer. Off, a unix socket has its state, queues and inode only,
    /// which is what counting them by state needs (the exporter): the kernel has less to
    /// write, and no peer names are filled. A `connected_to` that names unix listeners turns
    /// them back on.
    pub unix_details: bool,
}

/// The listeners of `--connected-to`: ports and unix names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectedTo {
    /// Listening ports (TCP, SCTP, MPTCP, UDP).
    pub ports: Option<PortSet>,
    /// Unix listeners' names: a path, or `@name` for an abstract one.
    pub unix: Vec<crate::model::UnixName>,
}

impl ConnectedTo {
    /// Parses `5432,/run/postgresql/.s.PGSQL.5432,@name`: ports and ranges, unix paths (from
    /// `/`), abstract names (from `@`).
    pub fn parse(s: &str) -> Result<ConnectedTo, FilterError> {
        let mut ports = Vec::new();
        let mut unix = Vec::new();
        for part in s.split(',').map(str::trim) {
            if let Some(name) = part.strip_prefix('@') {
                unix.push(crate::model::UnixName::Abstract(
                    crate::model::RawString::new(name.as_bytes()),
                ));
            } else if part.starts_with('/') {
                unix.push(crate::model::UnixName::Path(crate::model::RawString::new(
                    part.as_bytes(),
                )));
            } else if !part.is_empty() {
                ports.push(part);
            } else {
                return Err(FilterError::new(format!(
                    "empty item in '{s}': give ports (5432, 8000-8100), unix paths (/run/x.sock) \
                     or abstract names (@name), comma-separated"
                )));
            }
        }
        let ports = if ports.is_empty() {
            None
        } else {
            Some(PortSet::parse(&ports.join(",")).map_err(|e| {
                FilterError::new(format!(
                    "{e} (unix listeners are given by path, from /, or abstract name, from @)"
                ))
            })?)
        };
        Ok(ConnectedTo { ports, unix })
    }

    /// Whether `s` is a connection to one of these listeners (from either end).
    pub fn matches(&self, s: &Socket) -> bool {
        if !s.is_connected() || s.is_listening() {
            return false;
        }
        if s.proto.is_inet() {
            let Some(ports) = &self.ports else {
                return false;
            };
            if matches!(s.proto, Proto::Raw | Proto::Icmp) {
                return false;
            }
            let lp = s.local.port();
            let rp = s.remote.as_ref().and_then(Endpoint::port);
            return lp.is_some_and(|p| ports.contains(p)) || rp.is_some_and(|p| ports.contains(p));
        }
        let named = |n: &crate::model::UnixName| self.unix.iter().any(|u| u == n);
        match (&s.local, &s.remote) {
            (Endpoint::Unix(Some(n)), _) if named(n) => true,
            (_, Some(Endpoint::UnixPeer { name: Some(n), .. })) => named(n),
            _ => false,
        }
    }
}

impl Selection {
    /// Applies `from`'s filters on a socket's two ends, and no other of its filters: loopback
    /// (`-L`), ports (`-p`, `--sport`, `--dport`) and addresses (`--src`, `--dst`). What a
    /// report over a wider gathering (`sockstat ports`, which samples every TCP socket of the
    /// zones) keeps of the selection the user asked for.
    pub fn take_ends(&mut self, from: &Selection) {
        self.no_loopback = from.no_loopback;
        self.ports = from.ports.clone();
        self.sport = from.sport.clone();
        self.dport = from.dport.clone();
        self.src = from.src;
        self.dst = from.dst;
    }
}

impl Default for Selection {
    fn default() -> Selection {
        Selection {
            families: Families::default(),
            protos: None,
            connected: false,
            listening: false,
            no_loopback: false,
            ports: None,
            sport: None,
            dport: None,
            src: None,
            dst: None,
            states: None,
            pids: None,
            uid: None,
            command: None,
            zones: ZoneSelect::Current,
            connected_to: None,
            hide_time_wait: false,
        }
    }
}

impl Default for Gathering {
    fn default() -> Gathering {
        Gathering {
            owners: true,
            unlisted: true,
            args: false,
            resolve_users: true,
            user_lookup_budget: USER_LOOKUP_BUDGET,
            source: Source::Auto,
            proc_root: PathBuf::from("/proc"),
            owner_scan: OwnerScan::Auto,
            record_netlink: None,
            tcp_info: false,
            tcp_estimates: true,
            congestion: false,
            memory: false,
            cgroups: false,
            sorted: true,
            unix_details: true,
        }
    }
}

impl Query {
    /// A query for every socket, with owners.
    pub fn new() -> Query {
        Query::default()
    }

    /// The inet_diag extension bits (`idiag_ext`) the requested details need.
    pub fn inet_diag_ext(&self) -> u8 {
        use sockstat_wire::inet_diag::ext;
        let mut e = 0;
        if self.gather.tcp_info {
            e |= ext::INFO;
            if self.gather.tcp_estimates {
                e |= ext::CONG | ext::VEGASINFO;
            }
        }
        if self.gather.congestion {
            e |= ext::CONG;
        }
        if self.gather.memory {
            e |= ext::SKMEMINFO;
        }
        e
    }

    /// Whether unix sockets' names and peers are needed: asked for (`unix_details`), or read
    /// by a filter (`connected_to` naming unix listeners).
    pub(crate) fn unix_names_needed(&self) -> bool {
        self.gather.unix_details
            || self
                .select
                .connected_to
                .as_ref()
                .is_some_and(|c| !c.unix.is_empty())
    }

    /// True when `proto` was asked for explicitly or by default. The default is every kind
    /// but packet and netlink sockets (and [`Proto::Other`], which `-P` cannot name, is only
    /// in the default).
    pub fn wants_proto(&self, proto: Proto) -> bool {
        match &self.select.protos {
            Some(list) => list.contains(&proto),
            None => !matches!(proto, Proto::Packet | Proto::Netlink),
        }
    }

    /// True when the filters only select inet sockets (ports and addresses do, and
    /// `--connected-to` without a unix name).
    pub fn inet_only(&self) -> bool {
        self.select.ports.is_some()
            || self.select.sport.is_some()
            || self.select.dport.is_some()
            || self.select.src.is_some()
            || self.select.dst.is_some()
            || self
                .select
                .connected_to
                .as_ref()
                .is_some_and(|c| c.unix.is_empty())
    }

    /// Narrows the query to TCP connections with their internals (`tcp_info`, socket memory,
    /// congestion control), as `diagnose` and `trace` need them: `-4`/`-6` are kept, unix is
    /// dropped. Fails, naming the protocols asked for, when `protos` leaves TCP out.
    pub fn narrow_to_tcp_internals(&mut self) -> Result<(), FilterError> {
        if let Some(p) = self
            .select
            .protos
            .as_ref()
            .filter(|p| !p.contains(&Proto::Tcp))
        {
            let names: Vec<&str> = p.iter().map(|p| p.name()).collect();
            return Err(FilterError::new(format!(
                "-P {} leaves TCP out: this looks at TCP connections only; drop -P or include tcp in it",
                names.join(",")
            )));
        }
        self.select.protos = Some(vec![Proto::Tcp]);
        self.narrow_to_inet_internals();
        Ok(())
    }

    /// Narrows the query to Internet sockets (`-4`/`-6` kept, unix dropped; both families when
    /// neither is given) gathered with their internals (`tcp_info`, socket memory, congestion
    /// control), not looking for sockets no table lists: what the views of connections
    /// (`diagnose`, `trace`, `top`) sample.
    pub fn narrow_to_inet_internals(&mut self) {
        self.gather.unlisted = false;
        self.select.families.unix = false;
        if !self.select.families.inet && !self.select.families.inet6 {
            self.select.families.inet = true;
            self.select.families.inet6 = true;
        }
        self.gather.tcp_info = true;
        self.gather.memory = true;
        self.gather.congestion = true;
    }

    /// True when an owner attribute (pid, user, command) is filtered on.
    pub fn filters_owners(&self) -> bool {
        self.select.pids.is_some() || self.select.uid.is_some() || self.select.command.is_some()
    }

    /// The listening/connected selection as (want_listening, want_connected); both true = all.
    fn role(&self) -> (bool, bool) {
        if self.select.connected == self.select.listening {
            (true, true)
        } else {
            (self.select.listening, self.select.connected)
        }
    }

    /// The kernel state mask implied by `--state`, `-l` and `-c` for a protocol.
    pub fn kernel_states(&self, proto: Proto) -> u32 {
        let datagram = proto.is_datagram() || proto == Proto::Unix;
        let mut mask: u32 = match &self.select.states {
            Some(list) => list.iter().fold(0, |m, s| m | s.kernel_mask()),
            None if self.select.hide_time_wait => !State::TimeWait.kernel_mask(),
            None => u32::MAX,
        };
        let (listening, connected) = self.role();
        if !(listening && connected) {
            let role_mask = if listening {
                if datagram {
                    State::Listen.kernel_mask() | State::Unconn.kernel_mask()
                } else {
                    State::Listen.kernel_mask()
                }
            } else {
                // Connected: everything but LISTEN and CLOSE.
                !(State::Listen.kernel_mask() | State::Close.kernel_mask())
            };
            mask &= role_mask;
        }
        mask
    }

    /// Whether a socket passes the socket-level filters (everything but owner attributes).
    pub fn matches_socket(&self, s: &Socket) -> bool {
        let family_ok = match s.family {
            Family::Inet => self.select.families.inet,
            Family::Inet6 => self.select.families.inet6,
            Family::Unix => self.select.families.unix,
            // Selected by -P alone.
            Family::Packet | Family::Netlink => true,
            // A socket whose family is not known passes only when no family is singled out.
            Family::Other => self.select.families == Families::default(),
        };
        // A socket no table lists is selected as the kind the kernel names, when it names one
        // `-P` knows; one it does not is selected only when no `-P` is given.
        let proto_ok = match (s.selected_as(), &self.select.protos) {
            (Some(p), _) => self.wants_proto(p),
            (None, list) => list.is_none(),
        };
        if !family_ok || !proto_ok {
            return false;
        }
        if self.inet_only() && !s.proto.is_inet() {
            return false;
        }
        if let Some(states) = &self.select.states {
            if !states.contains(&s.state) {
                return false;
            }
        } else if self.select.hide_time_wait && s.state == State::TimeWait {
            return false;
        }
        let (listening, connected) = self.role();
        if !(listening && connected) {
            if listening && !s.is_listening() {
                return false;
            }
            if connected && !s.is_connected() {
                return false;
            }
        }
        let local_ip = s.local.ip();
        let remote_ip = s.remote.as_ref().and_then(Endpoint::ip);
        if self.select.no_loopback && (is_loopback(local_ip) || is_loopback(remote_ip)) {
            return false;
        }
        if let Some(to) = &self.select.connected_to {
            if !to.matches(s) {
                return false;
            }
        }
        // A raw socket's "port" is its IP protocol, a ping socket's its ICMP identifier.
        let portless = matches!(s.proto, Proto::Raw | Proto::Icmp);
        let lp = s.local.port().filter(|_| !portless);
        let rp = s
            .remote
            .as_ref()
            .and_then(Endpoint::port)
            .filter(|_| !portless);
        let within = |set: &Option<PortSet>, p: Option<u16>| {
            set.as_ref()
                .is_none_or(|set| p.is_some_and(|p| set.contains(p)))
        };
        if let Some(ports) = &self.select.ports {
            if !(lp.is_some_and(|p| ports.contains(p)) || rp.is_some_and(|p| ports.contains(p))) {
                return false;
            }
        }
        if !within(&self.select.sport, lp) || !within(&self.select.dport, rp) {
            return false;
        }
        if let Some(net) = &self.select.src {
            if !local_ip.is_some_and(|ip| prefix_contains(net, ip)) {
                return false;
            }
        }
        if let Some(net) = &self.select.dst {
            if !remote_ip.is_some_and(|ip| prefix_contains(net, ip)) {
                return false;
            }
        }
        true
    }

    /// Whether one holder passes the owner filters (pid, user, command).
    pub fn matches_owner(&self, owner: &Owner, process: Option<&Process>) -> bool {
        if let Some(pids) = &self.select.pids {
            if pids.binary_search(&owner.pid).is_err() {
                return false;
            }
        }
        if let Some(uid) = self.select.uid {
            if process.and_then(|p| p.uid) != Some(uid) {
                return false;
            }
        }
        if let Some(cmd) = &self.select.command {
            match process.and_then(|p| p.command.as_ref()) {
                Some(c) if cmd.matches(c.as_bytes()) => {}
                _ => return false,
            }
        }
        true
    }

    /// Whether a process could hold a matching socket, judged before its fds are read
    /// (lets the scan skip processes that fail `--pid`/`--user`/`--command`).
    pub fn may_match_process(&self, process: &Process) -> bool {
        self.matches_owner(
            &Owner {
                pid: process.pid,
                fd: 0,
            },
            Some(process),
        )
    }
}

fn is_loopback(ip: Option<IpAddr>) -> bool {
    match ip {
        Some(IpAddr::V4(a)) => a.is_loopback(),
        Some(IpAddr::V6(a)) => {
            a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        None => false,
    }
}

/// Prefix match that, as the kernel does, lets an IPv4 prefix match an IPv4-mapped IPv6 address.
pub fn prefix_contains(net: &IpNet, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpNet::V4(n), IpAddr::V6(a)) => a.to_ipv4_mapped().is_some_and(|v4| n.contains(&v4)),
        (n, a) => n.contains(&a),
    }
}

/// The body of the `filters` cargo-fuzz target (`fuzz/fuzz_targets/filters.rs`), replayed on
/// its corpus by `crates/sockstat/tests/fuzz_filters.rs` on stable. The first byte picks a
/// parser, the rest is the value; the parser must not panic, an error must be one printable
/// line, and an accepted value must satisfy what the filters rely on.
#[doc(hidden)]
pub fn fuzz_filters(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let check_error = |e: &FilterError| {
        let m = e.to_string();
        assert!(
            !m.chars().any(|c| c.is_control()),
            "error message not one printable line: {m:?}"
        );
    };
    match which % 6 {
        0 => match PortSet::parse(&text) {
            Ok(set) => {
                let r = set.ranges();
                assert!(!r.is_empty());
                for (i, &(lo, hi)) in r.iter().enumerate() {
                    assert!(lo <= hi);
                    assert!(set.contains(lo) && set.contains(hi));
                    if let Some(&(next_lo, _)) = r.get(i + 1) {
                        // Merged: sorted, no overlap, no adjacency.
                        assert!(u32::from(hi) + 1 < u32::from(next_lo));
                    }
                }
                if let Some(lo) = r[0].0.checked_sub(1) {
                    assert!(!set.contains(lo));
                }
            }
            Err(e) => check_error(&e),
        },
        1 => match parse_protos(&text) {
            Ok(v) => {
                for (i, p) in v.iter().enumerate() {
                    assert!(!v[i + 1..].contains(p), "duplicate protocol");
                }
            }
            Err(e) => check_error(&e),
        },
        2 => match parse_states(&text) {
            Ok(v) => {
                for (i, s) in v.iter().enumerate() {
                    assert!(!v[i + 1..].contains(s), "duplicate state");
                }
            }
            Err(e) => check_error(&e),
        },
        3 => match parse_pids(&text) {
            Ok(v) => {
                assert!(!v.is_empty());
                assert!(v.windows(2).all(|w| w[0] < w[1]));
                assert!(v.iter().all(|&p| (1..=4_194_304).contains(&p)));
            }
            Err(e) => check_error(&e),
        },
        4 => match parse_prefix(&text) {
            Ok(net) => {
                assert_eq!(net, net.trunc());
                assert!(net.contains(&net.network()));
                // What the filter prints back must parse to the same prefix.
                assert_eq!(parse_prefix(&net.to_string()), Ok(net));
            }
            Err(e) => check_error(&e),
        },
        _ => match CommandMatch::parse(&text) {
            Ok(m) => {
                let _ = m.matches(rest);
                if !text.contains(['*', '?', '[']) {
                    assert!(m.matches(text.as_bytes()), "a plain name must match itself");
                }
            }
            Err(e) => check_error(&e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_ends_copies_the_ends_and_nothing_else() {
        let mut from = Selection {
            no_loopback: true,
            ports: Some(PortSet::parse("80").unwrap()),
            sport: Some(PortSet::parse("1000-2000").unwrap()),
            dport: Some(PortSet::parse("443").unwrap()),
            src: Some("192.0.2.0/24".parse().unwrap()),
            dst: Some("2001:db8::/32".parse().unwrap()),
            ..Selection::default()
        };
        from.listening = true;
        from.states = Some(vec![State::Established]);
        from.pids = Some(vec![1]);
        let mut s = Selection::default();
        s.take_ends(&from);
        assert!(s.no_loopback);
        assert_eq!(s.ports.as_ref().unwrap().ranges(), &[(80, 80)]);
        assert_eq!(s.sport.as_ref().unwrap().ranges(), &[(1000, 2000)]);
        assert_eq!(s.dport.as_ref().unwrap().ranges(), &[(443, 443)]);
        assert_eq!(s.src, from.src);
        assert_eq!(s.dst, from.dst);
        assert!(!s.listening && s.states.is_none() && s.pids.is_none());
    }

    #[test]
    fn ports_parse_lists_and_ranges() {
        let p = PortSet::parse("22,80,8000-8100").unwrap();
        assert_eq!(p.ranges(), &[(22, 22), (80, 80), (8000, 8100)]);
        assert!(p.contains(8050) && !p.contains(8101) && !p.contains(23));
    }

    #[test]
    fn ports_merge_overlaps() {
        let p = PortSet::parse("10-20,15-30,31,5").unwrap();
        assert_eq!(p.ranges(), &[(5, 5), (10, 31)]);
    }

    #[test]
    fn ports_reject_bad_values_with_the_value_named() {
        let e = PortSet::parse("22,65536").unwrap_err().to_string();
        assert!(e.contains("'65536'") && e.contains("0-65535"), "{e}");
        let e = PortSet::parse("90-80").unwrap_err().to_string();
        assert!(e.contains("'90-80'") && e.contains("backwards"), "{e}");
        let e = PortSet::parse("ssh").unwrap_err().to_string();
        assert!(e.contains("'ssh'"), "{e}");
        assert!(PortSet::parse("").is_err());
        assert!(PortSet::parse("1-").is_err());
    }

    #[test]
    fn protos_and_states_parse() {
        assert_eq!(
            parse_protos("tcp,UDP").unwrap(),
            vec![Proto::Tcp, Proto::Udp]
        );
        assert_eq!(
            parse_protos("tcp,icmp").unwrap(),
            vec![Proto::Tcp, Proto::Icmp]
        );
        let e = parse_protos("tcp,igmp").unwrap_err().to_string();
        assert!(e.contains("'igmp'") && e.contains("udplite"), "{e}");
        assert_eq!(
            parse_states("established,time-wait,LISTEN").unwrap(),
            vec![State::Established, State::TimeWait, State::Listen]
        );
        assert!(parse_states("BOGUS")
            .unwrap_err()
            .to_string()
            .contains("'BOGUS'"));
    }

    #[test]
    fn pids_parse() {
        assert_eq!(parse_pids("3,1,3").unwrap(), vec![1, 3]);
        assert!(parse_pids("12a").unwrap_err().to_string().contains("'12a'"));
        assert!(parse_pids("0").is_err());
    }

    #[test]
    fn prefixes_parse_and_match_mapped() {
        let n = parse_prefix("127.0.0.0/8").unwrap();
        assert!(prefix_contains(&n, "127.1.2.3".parse().unwrap()));
        assert!(prefix_contains(&n, "::ffff:127.0.0.1".parse().unwrap()));
        assert!(!prefix_contains(&n, "::1".parse().unwrap()));
        assert_eq!(
            parse_prefix("[::1]").unwrap(),
            "::1/128".parse::<IpNet>().unwrap()
        );
        assert!(parse_prefix("10.0.0.300")
            .unwrap_err()
            .to_string()
            .contains("'10.0.0.300'"));
    }

    #[test]
    fn command_glob() {
        let c = CommandMatch::parse("ngin*").unwrap();
        assert!(c.matches(b"nginx") && !c.matches(b"apache"));
        let c = CommandMatch::parse("sshd").unwrap();
        assert!(c.matches(b"sshd") && !c.matches(b"sshd2"));
    }

    #[test]
    fn kernel_state_masks() {
        let mut q = Query::new();
        assert_eq!(q.kernel_states(Proto::Tcp), u32::MAX);
        q.select.listening = true;
        assert_eq!(q.kernel_states(Proto::Tcp), 1 << 10);
        assert_eq!(q.kernel_states(Proto::Udp), (1 << 10) | (1 << 7));
        q.select.listening = false;
        q.select.connected = true;
        let m = q.kernel_states(Proto::Tcp);
        assert!(m & (1 << 1) != 0 && m & (1 << 6) != 0 && m & (1 << 10) == 0 && m & (1 << 7) == 0);
        q.select.connected = false;
        q.select.states = Some(vec![State::TimeWait]);
        assert_eq!(q.kernel_states(Proto::Tcp), 1 << 6);
    }

    /// A socket no table lists is selected as the kind and family its kernel protocol name
    /// says; one whose name no `-P` kind matches only when no `-P` or family is given.
    #[test]
    fn sockets_no_table_lists_are_selected_as_what_the_kernel_names() {
        use crate::model::{Endpoint, Family, RawString, SockType, Socket};
        let unlisted = |name: &[u8]| {
            let k = crate::model::kernel_kind(name);
            Socket::new(
                Proto::Other,
                k.family,
                k.sock_type,
                State::Untold,
                Endpoint::Unlisted(Some(RawString::new(name))),
                None,
            )
        };
        let (udp, ping6, vsock, netlink) = (
            unlisted(b"UDP"),
            unlisted(b"PINGv6"),
            unlisted(b"AF_VSOCK"),
            unlisted(b"NETLINK"),
        );
        assert_eq!(udp.selected_as(), Some(Proto::Udp));
        assert_eq!(vsock.selected_as(), None);
        let with = |f: &dyn Fn(&mut Query)| {
            let mut q = Query::new();
            f(&mut q);
            [&udp, &ping6, &vsock, &netlink].map(|s| q.matches_socket(s))
        };
        assert_eq!(with(&|_| {}), [true, true, true, false]);
        assert_eq!(
            with(&|q| q.select.protos = Some(vec![Proto::Udp])),
            [true, false, false, false]
        );
        assert_eq!(
            with(&|q| q.select.protos = Some(vec![Proto::Icmp, Proto::Netlink])),
            [false, true, false, true]
        );
        let v4 = Families {
            inet: true,
            inet6: false,
            unix: false,
        };
        assert_eq!(
            with(&|q| q.select.families = v4),
            [true, false, false, false]
        );
        assert_eq!(with(&|q| q.select.listening = true), [false; 4]);
        assert_eq!(
            with(&|q| q.select.states = Some(vec![State::Unconn])),
            [false; 4]
        );
        assert_eq!(udp.family, Family::Inet);
        assert_eq!(ping6.sock_type, SockType::Dgram);
    }
}
