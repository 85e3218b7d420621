//! R11, `close-wait`: an application does not close connections its peer has closed. A socket
//! in CLOSE_WAIT has received the peer's FIN; it leaves that state only when its process calls
//! `close()` (or `shutdown()`), which the kernel never does for it: no timer runs there. Sockets
//! that stay in CLOSE_WAIT are a descriptor leak that ends in `EMFILE`, and the peer's side
//! lingers in FIN_WAIT2 until its own timeout.
//!
//! Case: doc/diagnose.md#close-wait-r11. A single connection in CLOSE_WAIT across one
//! interval is ordinary (an idle pooled connection the server closed, noticed at its next use),
//! so the rule counts, per process and port, the connections that were in CLOSE_WAIT at both
//! samples, and speaks from [`PILEUP`] of them: one finding per process and port, with a count,
//! and the `sockstat kill` command that frees them (doc/kill.md).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::*;

/// Connections held in CLOSE_WAIT across the interval, by one process on one port, from which
/// they are a pile-up rather than an idle pooled connection or two.
pub const PILEUP: usize = 8;
/// From this many the finding is critical: at the default 1,024 open files per process the
/// leak is a few minutes of traffic from `EMFILE`.
pub const CRITICAL: usize = 256;
/// How many of the connections are listed in the evidence.
const LISTED: usize = 8;

/// The group a CLOSE_WAIT socket counts in: its first holder, whether it is a server's accepted
/// connection (its local port is listened on), and the port that names the group (the local one
/// for a server, the remote one for a client).
type Group = (Option<u32>, bool, u16);

fn group_of(s: &Socket, listening: &HashSet<u16>) -> Option<Group> {
    let Endpoint::Inet { port: lport, .. } = s.local else {
        return None;
    };
    let server = listening.contains(&lport);
    let port = if server {
        lport
    } else {
        match &s.remote {
            Some(Endpoint::Inet { port, .. }) => *port,
            _ => return None,
        }
    };
    Some((s.owners.first().map(|o| o.pid), server, port))
}

/// The TCP sockets of `snap` in `state`.
fn tcp_in(snap: &Snapshot, state: State) -> impl Iterator<Item = &Socket> {
    snap.sockets
        .iter()
        .filter(move |s| s.proto == Proto::Tcp && s.state == state)
}

/// Runs R11.
pub fn check(input: &Input<'_>) -> Vec<Finding> {
    // Ports that something listens on in this zone: a CLOSE_WAIT socket on one of them is a
    // server's accepted connection (grouped by its local port); any other is a client's
    // (grouped by the port it connected to).
    let listening: HashSet<u16> = tcp_in(&input.after.snapshot, State::Listen)
        .filter_map(|s| match s.local {
            Endpoint::Inet { port, .. } => Some(port),
            _ => None,
        })
        .collect();
    let mut held: BTreeMap<Group, Vec<&Flow<'_>>> = BTreeMap::new();
    for f in input.flows() {
        if f.before.state != State::CloseWait || f.after.state != State::CloseWait {
            continue;
        }
        if let Some(g) = group_of(f.after, &listening) {
            held.entry(g).or_default().push(f);
        }
    }
    held.retain(|_, flows| flows.len() >= PILEUP);
    if held.is_empty() {
        return vec![];
    }
    // Connections of a pile-up's process and port that reached CLOSE_WAIT during the interval:
    // the pile-up is still growing. One pass over each sample.
    let earlier: HashSet<u64> = tcp_in(&input.before.snapshot, State::CloseWait)
        .filter_map(|s| s.cookie)
        .collect();
    let mut new_in_interval: HashMap<Group, usize> = HashMap::new();
    for s in tcp_in(&input.after.snapshot, State::CloseWait) {
        if s.cookie.is_some_and(|c| !earlier.contains(&c)) {
            if let Some(g) = group_of(s, &listening).filter(|g| held.contains_key(g)) {
                *new_in_interval.entry(g).or_default() += 1;
            }
        }
    }
    held.into_iter()
        .map(|(g, flows)| {
            let new = new_in_interval.get(&g).copied().unwrap_or(0);
            finding(input, g, new, &flows)
        })
        .collect()
}

/// What the receive queues say of how far the application read: to the end of the stream (it
/// saw the peer close and kept the descriptor), or not even that far (it stopped reading).
fn reading(n: usize, eof_unread: usize, with_unread: usize, unread: u64) -> String {
    let mut out = String::new();
    if eof_unread == n {
        out.push_str("; it has not read the end of any of them (read() never returned 0)");
    } else if eof_unread > 0 {
        out.push_str(&format!(
            "; it has read the end of {} of them (read() returned 0), not of the other {eof_unread}",
            n - eof_unread
        ));
    } else {
        out.push_str("; it read the end of every one (read() returned 0) and kept the descriptor");
    }
    if with_unread > 0 {
        let hold = if with_unread == 1 { "holds" } else { "hold" };
        out.push_str(&format!(
            "; {with_unread} still {hold} {unread} bytes of data unread"
        ));
    }
    out
}

fn finding(
    input: &Input<'_>,
    group: Group,
    new_in_interval: usize,
    flows: &[&Flow<'_>],
) -> Finding {
    let (pid, server, port) = group;
    let n = flows.len();
    let first = flows[0];
    let who = first.owner_text();
    // The kernel's receive queue of a TCP socket counts the peer's FIN as one byte until
    // read() returns 0 (`rcv_nxt - copied_seq`, doc/diagnose.md#close-wait-r11): a queue of
    // one is an end of stream the application has not read, not data.
    let queued: u64 = flows.iter().map(|f| u64::from(f.after.recv_q)).sum();
    let eof_unread = flows.iter().filter(|f| f.after.recv_q > 0).count();
    let unread: u64 = flows
        .iter()
        .map(|f| u64::from(f.after.recv_q.saturating_sub(1)))
        .sum();
    let with_unread = flows.iter().filter(|f| f.after.recv_q > 1).count();
    let local_addr = match first.after.local {
        Endpoint::Inet { addr, .. } => Some(addr),
        _ => None,
    };
    let same_local = flows.iter().all(|f| match f.after.local {
        Endpoint::Inet { addr, .. } => Some(addr) == local_addr,
        _ => false,
    });
    let mut ev = Evidence::default();
    ev.num("interval_s", first.dt)
        .int("close_wait_both_samples", n as u64)
        .int("close_wait_new_in_interval", new_in_interval as u64)
        .int("recv_q_bytes_total", queued)
        .int("eof_unread", eof_unread as u64)
        .int("unread_data_bytes", unread)
        .int("with_unread_data", with_unread as u64)
        .int("port", u64::from(port))
        .text("side", if server { "server" } else { "client" })
        .text(
            "connections_list",
            flows
                .iter()
                .take(LISTED)
                .map(|f| fmt::connection(f.after).to_string())
                .collect::<Vec<_>>()
                .join(", "),
        );
    let whose = if server {
        format!("accepted on port {port}")
    } else {
        format!("to port {port}")
    };
    let summary = format!(
        "{n} connections{who} {whose} stayed in CLOSE_WAIT for the whole {:.1} s interval{}: \
         their peers closed and the application has not called close(){}",
        first.dt,
        if new_in_interval > 0 {
            format!(" ({new_in_interval} more arrived in it)")
        } else {
            String::new()
        },
        reading(n, eof_unread, with_unread, unread)
    );
    let kill = crate::text::kill_command::command_for(
        &crate::text::kill_command::Target::StateOnPort {
            state: State::CloseWait,
            local: if server && same_local {
                local_addr
            } else {
                None
            },
            port,
            server,
            pid,
        },
        input.after.zone.as_ref(),
    );
    let advice = format!(
        "Fix it in the application{who}: when read() returns 0 (the peer closed) or a call on the \
         socket fails, it must close() the descriptor; a connection pool must evict connections \
         the server closed. Each one held is an open file and kernel memory, and at the process's \
         file limit accept() and connect() fail with EMFILE. To free them now (the process gets \
         ECONNABORTED on its next use of each): {kill}"
    );
    Finding {
        zone: None,
        rule: Some(RuleId::CloseWait),
        code: RuleId::CloseWait.id(),
        subject: Subject::Namespace,
        severity: if n >= CRITICAL {
            Severity::Critical
        } else {
            Severity::Warning
        },
        socket: (n == 1).then(|| first.socket_ref()),
        summary,
        evidence: ev,
        advice,
        count: Some(n as u64),
        confidence: Confidence::counted(format!(
            "the kernel showed the same {n} connections in CLOSE_WAIT at both samples; only the \
             process's close() moves a socket out of that state"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn close_wait(i: u16, local: &str, remote_port: u16) -> Socket {
        TcpBuilder::new()
            .state(State::CloseWait)
            .local(local)
            .remote(Some(&format!("198.51.100.2:{}", remote_port + i)))
            .build(1000 + u64::from(i))
    }

    fn listener(port: u16) -> Socket {
        TcpBuilder::new()
            .state(State::Listen)
            .local(&format!("192.0.2.1:{port}"))
            .remote(None)
            .build(1)
    }

    /// A server that never closes what its clients closed: one finding for the port, with the
    /// count and the kill command for exactly those.
    #[test]
    fn a_server_holding_closed_connections_is_one_finding_with_its_kill_command() {
        let held: Vec<Socket> = (0..20)
            .map(|i| close_wait(i, "192.0.2.1:8080", 40000))
            .collect();
        let mut before = held.clone();
        before.push(listener(8080));
        let mut after = held;
        after.push(listener(8080));
        // Two more reached CLOSE_WAIT during the interval: counted as growth, not as held.
        after.push(close_wait(100, "192.0.2.1:8080", 40000));
        after.push(close_wait(101, "192.0.2.1:8080", 40000));
        let f = only(run(before, after, &ctx()), RuleId::CloseWait);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].count, Some(20));
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(ev(&f[0], "close_wait_new_in_interval"), 2.0);
        assert_eq!(
            f[0].evidence.get("side"),
            Some(&Value::from("server")),
            "{f:#?}"
        );
        assert!(
            f[0].advice.ends_with(
                "sockstat kill --state CLOSE_WAIT --src 192.0.2.1 --sport 8080 --pid 100"
            ),
            "{}",
            f[0].advice
        );
    }

    /// A client pool holding connections the server closed: grouped by the port it connected
    /// to, and the kill command selects by that port and the process.
    #[test]
    fn a_client_pool_is_grouped_by_the_port_it_connected_to() {
        let held: Vec<Socket> = (0..10u16)
            .map(|i| {
                TcpBuilder::new()
                    .state(State::CloseWait)
                    .local(&format!("192.0.2.1:{}", 50000 + i))
                    .remote(Some("198.51.100.2:6379"))
                    .build(2000 + u64::from(i))
            })
            .collect();
        let f = only(run(held.clone(), held, &ctx()), RuleId::CloseWait);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].evidence.get("side"), Some(&Value::from("client")));
        assert!(
            f[0].advice
                .ends_with("sockstat kill --state CLOSE_WAIT --dport 6379 --pid 100"),
            "{}",
            f[0].advice
        );
    }

    /// The receive queue counts the peer's FIN as a byte until read() returns 0: queues of 1
    /// are ends of stream not read, not data; the summary tells a process that stopped reading
    /// from one that read the end and kept the descriptor.
    #[test]
    fn the_fin_byte_is_an_unread_end_of_stream_not_data() {
        let with_queue = |q: &[u32]| -> Finding {
            let held: Vec<Socket> = q
                .iter()
                .enumerate()
                .map(|(i, &rq)| {
                    TcpBuilder::new()
                        .state(State::CloseWait)
                        .local("192.0.2.1:8080")
                        .remote(Some(&format!("198.51.100.2:{}", 40000 + i)))
                        .queues(rq, 0)
                        .build(1000 + i as u64)
                })
                .chain([listener(8080)])
                .collect();
            let f = only(run(held.clone(), held, &ctx()), RuleId::CloseWait);
            assert_eq!(f.len(), 1, "{f:#?}");
            f.into_iter().next().unwrap()
        };
        // Nothing sent before the close, nothing read: ten FIN bytes, no data.
        let f = with_queue(&[1; 10]);
        assert_eq!(ev(&f, "recv_q_bytes_total"), 10.0);
        assert_eq!(ev(&f, "eof_unread"), 10.0);
        assert_eq!(ev(&f, "unread_data_bytes"), 0.0);
        assert_eq!(ev(&f, "with_unread_data"), 0.0);
        assert!(
            f.summary.contains("has not read the end of any of them")
                && !f.summary.contains("bytes of data"),
            "{}",
            f.summary
        );
        // Every end read (read() returned 0), the descriptors kept.
        let f = with_queue(&[0; 10]);
        assert_eq!(ev(&f, "eof_unread"), 0.0);
        assert!(
            f.summary.contains("read the end of every one"),
            "{}",
            f.summary
        );
        // Some with data before their FIN.
        let f = with_queue(&[0, 0, 0, 0, 0, 0, 0, 1, 101, 51]);
        assert_eq!(ev(&f, "eof_unread"), 3.0);
        assert_eq!(ev(&f, "unread_data_bytes"), 150.0);
        assert_eq!(ev(&f, "with_unread_data"), 2.0);
        assert!(
            f.summary
                .contains("read the end of 7 of them (read() returned 0), not of the other 3")
                && f.summary.contains("2 still hold 150 bytes of data unread"),
            "{}",
            f.summary
        );
    }

    /// Below the pile-up threshold (an idle pooled connection or a few), and sockets that only
    /// reached CLOSE_WAIT during the interval, are not findings.
    #[test]
    fn a_few_held_or_only_new_close_waits_are_silent() {
        let few: Vec<Socket> = (0..(PILEUP as u16 - 1))
            .map(|i| close_wait(i, "192.0.2.1:8080", 40000))
            .collect();
        assert!(only(run(few.clone(), few, &ctx()), RuleId::CloseWait).is_empty());
        let established: Vec<Socket> = (0..20u16)
            .map(|i| {
                TcpBuilder::new()
                    .local("192.0.2.1:8080")
                    .remote(Some(&format!("198.51.100.2:{}", 40000 + i)))
                    .build(1000 + u64::from(i))
            })
            .collect();
        let now: Vec<Socket> = (0..20)
            .map(|i| close_wait(i, "192.0.2.1:8080", 40000))
            .collect();
        assert!(only(run(established, now, &ctx()), RuleId::CloseWait).is_empty());
    }

    #[test]
    fn hundreds_held_are_critical() {
        let mut held: Vec<Socket> = (0..CRITICAL as u16)
            .map(|i| close_wait(i, "192.0.2.1:8080", 20000))
            .collect();
        held.push(listener(8080));
        let f = only(run(held.clone(), held, &ctx()), RuleId::CloseWait);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Critical);
    }
}
