//! What a socket read from `/proc/net` text lacks: the columns its source did not give, and one
//! warning per column over the sockets shown (`column-unavailable`).

use crate::model::{Family, Proto, Socket, State, Warning, WarningCode};
use crate::query::{Query, Source};

/// A column some `/proc/net` text does not give: one warning each, counting the shown sockets
/// that lack it ([`column_warnings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Column {
    Cookie,
    Uid,
    Peer,
    Queues,
    Backlog,
    BoundInterface,
    NetlinkState,
    Cgroup,
    TcpInternals,
    Memory,
}

impl Column {
    /// What is missing, as the warning says it.
    fn what(self) -> &'static str {
        match self {
            Column::Cookie => "cookie (the identity --events and a series join on)",
            Column::Uid => "uid",
            Column::Peer => "peer (FOREIGN ADDRESS)",
            Column::Queues => "queues (recv_q, send_q)",
            Column::Backlog => "backlog (send_q of a LISTEN socket)",
            Column::BoundInterface => {
                "bound interface (SO_BINDTODEVICE, the %dev of LOCAL ADDRESS)"
            }
            Column::NetlinkState => "state, type and peer",
            Column::Cgroup => "cgroup",
            Column::TcpInternals => "TCP internals (-T, -C)",
            Column::Memory => "socket memory (-m)",
        }
    }
}

/// The `/proc/net` file a socket read from text came from.
pub(super) fn text_source(s: &Socket) -> &'static str {
    match (s.proto, s.family == Family::Inet6) {
        (Proto::Tcp, false) => "tcp",
        (Proto::Tcp, true) => "tcp6",
        (Proto::Udp, false) => "udp",
        (Proto::Udp, true) => "udp6",
        (Proto::Udplite, false) => "udplite",
        (Proto::Udplite, true) => "udplite6",
        (Proto::Raw, false) => "raw",
        (Proto::Raw, true) => "raw6",
        (Proto::Icmp, false) => "icmp",
        (Proto::Icmp, true) => "icmp6",
        (Proto::Unix, _) => "unix",
        (Proto::Packet, _) => "packet",
        (Proto::Netlink, _) => "netlink",
        (Proto::Sctp | Proto::Mptcp | Proto::Other, _) => "",
    }
}

/// The columns a socket read from `/proc/net` text lacks, for what the query shows.
pub(super) fn missing_columns(q: &Query, s: &Socket) -> Vec<Column> {
    let mut v = vec![Column::Cookie];
    match s.proto {
        Proto::Unix => {
            v.push(Column::Uid);
            if q.unix_names_needed() {
                v.push(Column::Peer);
            }
            v.push(Column::Queues);
        }
        Proto::Netlink => v.push(Column::NetlinkState),
        Proto::Packet => {}
        _ => {
            if s.proto == Proto::Tcp && s.state == State::Listen {
                v.push(Column::Backlog);
            }
            v.push(Column::BoundInterface);
            if q.gather.cgroups {
                v.push(Column::Cgroup);
            }
            if s.proto == Proto::Tcp && (q.gather.tcp_info || q.gather.congestion) {
                v.push(Column::TcpInternals);
            }
        }
    }
    if q.gather.memory && (s.proto == Proto::Unix || s.proto.is_inet()) {
        v.push(Column::Memory);
    }
    v
}

/// One `column-unavailable` warning for each column that `/proc/net` text left out of the
/// sockets `shown` (those read from it: `--source proc`, a failed dump, ping sockets, which no
/// sock_diag module lists, a zone read through a member's `/proc/PID/net`): which column, which
/// files, how many of the shown sockets. A socket from text is one without a cookie that a
/// table gave (every dump gives a cookie).
pub(crate) fn column_warnings(q: &Query, shown: &[Socket]) -> Vec<Warning> {
    let mut by: std::collections::BTreeMap<Column, (u64, std::collections::BTreeSet<&str>)> =
        std::collections::BTreeMap::new();
    for s in shown
        .iter()
        .filter(|s| s.cookie.is_none() && s.proto != Proto::Other)
    {
        let file = text_source(s);
        for c in missing_columns(q, s) {
            let e = by.entry(c).or_default();
            e.0 += 1;
            e.1.insert(file);
        }
    }
    by.into_iter()
        .map(|(c, (n, files))| {
            let why = if files.iter().all(|f| f.starts_with("icmp")) {
                "no sock_diag module lists ping sockets"
            } else if q.gather.source == Source::Proc {
                "sock_diag gives it; --source proc reads the text instead"
            } else {
                "sock_diag gives it, but could not be used for them (see the other warnings)"
            };
            let files: Vec<String> = files.iter().map(|f| format!("/proc/net/{f}")).collect();
            let verb = if files.len() == 1 { "does" } else { "do" };
            Warning::new(
                WarningCode::ColumnUnavailable,
                format!(
                    "the {} of {} is not shown: {} {verb} not give it ({why})",
                    c.what(),
                    crate::model::counted(n as usize, "socket", "sockets"),
                    files.join(", "),
                ),
            )
            .count(n)
        })
        .collect()
}
