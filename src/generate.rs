//! Generated documentation: the man page and shell completions, built from the same flag
//! definitions as `--help` (`sockstat --generate man|bash|zsh|fish`). The checked-in copies under
//! `doc/` are compared with these by the test suite, so they cannot drift from the flags.

use std::io::{self, Write};

use clap::CommandFactory;
use clap_mangen::roff::{bold, italic, roman, Roff};

use crate::cli::Cli;

/// What `--generate` can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generate {
    /// The man page (roff).
    Man,
    /// Bash completion.
    Bash,
    /// Zsh completion.
    Zsh,
    /// Fish completion.
    Fish,
}

/// Writes the requested document.
pub fn write(what: Generate, out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = Cli::command();
    match what {
        Generate::Man => man(cmd, out),
        Generate::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "sockstat", out);
            Ok(())
        }
        Generate::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "sockstat", out);
            Ok(())
        }
        Generate::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, "sockstat", out);
            Ok(())
        }
    }
}

fn section(roff: &mut Roff, title: &str, paragraphs: &[&str]) {
    roff.control("SH", [title]);
    for (i, p) in paragraphs.iter().enumerate() {
        if i > 0 {
            roff.control("PP", []);
        }
        roff.text([roman(*p)]);
    }
}

fn tagged(roff: &mut Roff, items: &[(&str, &str)]) {
    for (tag, text) in items {
        roff.control("TP", []);
        roff.text([bold(*tag)]);
        roff.text([roman(*text)]);
    }
}

/// How an argument is spelled in a synopsis or a tag: `-q`, `--interval SECONDS`, `[SECONDS]`.
fn arg_spelling(a: &clap::Arg) -> String {
    let value = a
        .get_value_names()
        .and_then(|v| v.first())
        .map(|v| v.to_string())
        .unwrap_or_else(|| a.get_id().to_string().to_uppercase());
    let takes_value = a.get_action().takes_values();
    match (a.get_short(), a.get_long()) {
        (Some(s), Some(l)) if takes_value => format!("-{s}, --{l} {value}"),
        (Some(s), Some(l)) => format!("-{s}, --{l}"),
        (Some(s), None) if takes_value => format!("-{s} {value}"),
        (Some(s), None) => format!("-{s}"),
        (None, Some(l)) if takes_value => format!("--{l} {value}"),
        (None, Some(l)) => format!("--{l}"),
        (None, None) if a.is_required_set() => value,
        (None, None) => format!("[{value}]"),
    }
}

/// One subsection per subcommand, from its clap definition: clap_mangen renders only the
/// top-level options, so each subcommand's synopsis, description and every visible flag are
/// written here (the drift test checks that each flag appears).
fn subcommands(r: &mut Roff, cmd: &clap::Command) {
    let subs: Vec<&clap::Command> = cmd.get_subcommands().filter(|c| !c.is_hide_set()).collect();
    if subs.is_empty() {
        return;
    }
    r.control("SH", ["SUBCOMMANDS"]);
    r.text([roman(
        "The listing's filters and data sources given before a subcommand apply to diagnose, \
         trace and events as if given after it (a flag given on both sides is an error); \
         counters, ports and serve take only -z and -Z there, and kill wants its filters after \
         it. Any other filter or data-source flag before a subcommand is refused with exit status 2, \
         never ignored.",
    )]);
    for sub in subs {
        let args: Vec<&clap::Arg> = sub.get_arguments().filter(|a| !a.is_hide_set()).collect();
        let positionals: Vec<String> = args
            .iter()
            .filter(|a| a.is_positional())
            .map(|a| arg_spelling(a))
            .collect();
        let mut title = format!("sockstat {}", sub.get_name());
        if args.iter().any(|a| !a.is_positional()) {
            title.push_str(" [OPTIONS]");
        }
        for p in &positionals {
            title.push(' ');
            title.push_str(p);
        }
        r.control("SS", [title.as_str()]);
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            for (i, p) in about.to_string().split("\n\n").enumerate() {
                if i > 0 {
                    r.control("PP", []);
                }
                r.text([roman(p.replace('\n', " "))]);
            }
        }
        for a in args {
            r.control("TP", []);
            r.text([bold(arg_spelling(a))]);
            let help = a
                .get_long_help()
                .or(a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            r.text([roman(help)]);
        }
    }
}

fn man(cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let mut subs = Roff::new();
    subcommands(&mut subs, &cmd);
    let man = clap_mangen::Man::new(cmd).date("").source("sockstat");
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;

    out.write_all(subs.render().as_bytes())?;

    let mut r = Roff::new();
    r.control("SH", ["COLUMNS"]);
    r.text([roman(
        "One row per (socket, process, file descriptor): a socket shared after fork(2) or passed over a \
         unix socket is listed once for every holder. Rows are sorted by protocol, local address and port, \
         remote address and port, then pid and fd.",
    )]);
    tagged(
        &mut r,
        &[
            ("USER", "The user the holding process runs as; for a socket no process holds, the socket's own uid as the kernel reports it (TIME_WAIT sockets have none)."),
            ("COMMAND", "The holder's command name (/proc/PID/comm), with control and bidirectional characters escaped (\\x1b, \\u{202e}, \\\\ for a backslash)."),
            ("PID, FD", "The holding process and its file descriptor number."),
            ("PROTO", "tcp4, tcp6, udp4, udp6, udplite4, raw4, mptcp4, ... for Internet sockets; stream, dgram, seqpac for unix sockets; packet, pkt_dg for AF_PACKET; netlink for AF_NETLINK (-P netlink). A socket a process holds that no table lists (a ping socket never bound, a UDP socket never bound, a vsock) shows the kernel's name of its protocol, PINGv6, UDP, AF_VSOCK (JSON proto \"other\")."),
            ("LOCAL ADDRESS", "address:port, IPv6 in brackets ([::1]:25), * for the unspecified address or port; a unix socket's path, @name for an abstract name, * when unnamed; a netlink socket's protocol and port id, route:4021 (route:kernel for the kernel's own); ? for a socket no table lists."),
            ("FOREIGN ADDRESS", "The remote end; *:* when there is none. For a connected unix socket: the peer's path when it is bound, else [pid fd] of the peer's holder, else [inode N]. ? for a socket no table lists."),
            ("CGROUP (--cgroup)", "The cgroup-v2 path of the cgroup the socket was created in (its service or container), from the kernel's socket cgroup id: ? when no cgroup2 hierarchy names it, - for sockets without one (unix, TIME_WAIT)."),
            ("STATE (-s)", "The kernel state: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING, and UNCONN for unconnected datagram and unix sockets."),
            ("ID (-i)", "The socket inode (the N of socket:[N] in /proc/PID/fd); - for TIME_WAIT and request sockets."),
            ("RTT, MINRTT (-T)", "Smoothed RTT/variation and the windowed minimum RTT."),
            ("CWND, WSCALE (-T)", "Congestion window (packets); window scale shifts of the peer and of us, or none when window scaling was not negotiated (windows are then capped at 64 KiB)."),
            ("SNDWND, RCVWND (-T)", "The peer's advertised window (our sending limit) and our receive window as it can actually be advertised."),
            ("UNACKED, RETRANS (-T)", "Packets in flight; retransmitted packets out now / over the connection's life."),
            ("DELIVERY (-T)", "Last delivery-rate sample in bits per second; * marks an application- or buffer-limited sample (a lower bound)."),
            ("RWNDLIM, SBUFLIM (-T)", "Share of busy time the sender was limited by the peer's receive window / its own send buffer, since the connection began. They under-count; sockstat diagnose corroborates them with throughput ceilings."),
            ("CC (-T, -C)", "Congestion control algorithm."),
            ("RECV MEM, SEND MEM, DROPS (-m)", "Receive queue use/limit, send queue use/limit (a limit of twice an SO_RCVBUF/SO_SNDBUF value means the application fixed it), packets dropped before reaching the socket."),
            ("ARGS (-a)", "The holder's arguments (/proc/PID/cmdline), escaped like COMMAND; ? when they could not be read (the process exited, or its memory map stayed locked: then a warning says so)."),
        ],
    );
    section(
        &mut r,
        "WHAT ? MEANS",
        &["A ? in COMMAND, PID and FD means no holder is known. Either no process holds the socket \
           (orphaned sockets; JSON owners_status \"none\"), or a process these privileges cannot \
           inspect runs as the socket's uid (the uid of the process that made it), or the socket's \
           uid is not known and some process could not be inspected (owners_status \"hidden\"): \
           then one warning on standard error counts those of the sockets listed and says how to \
           see them (run as root, or give the binary CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH). A ? \
           row after a socket's holders means the holders shown may not be all: none of them runs \
           as the socket's uid, and a process that could not be inspected does (owners_status \
           \"partial\"; the same warning counts it, -v says which processes). A socket's status is \
           decided from every process, whatever the filters: --pid and --command read only the \
           processes they select, but learn which others could not have been read. Warnings count \
           the sockets listed, after every filter; when a filter selects processes that cannot be \
           read, one warning says the sockets only they hold are not listed. Kernel threads are \
           never counted. With --no-owners no process is looked at (owners_status \
           \"not_requested\"). A socket only the kernel holds (a TIME_WAIT entry, a request socket, \
           an orphan being closed) has no inode, so no process can hold it: its row shows - for \
           USER, PID and FD and its state as COMMAND, (time-wait); the kernel's own netlink sockets \
           show (kernel)."],
    );
    section(
        &mut r,
        "JSON OUTPUT",
        &[
            "--json prints one document, schema version 1: {\"version\":1,\"sockets\":[...],\"warnings\":[...]}, \
             one socket per line, in table order. Each socket has id (inode, null for TIME_WAIT), cookie \
             (kernel socket cookie as a decimal string, null from the /proc fallback), proto, family, type, \
             state, local and remote ({\"address\",\"port\"}; unix {\"path\"} or {} and remote {\"peer\",\"path\"}; \
             null when there is no remote end), recv_q and send_q (bytes; for LISTEN the accept queue and \
             the backlog), uid and user (the socket's kernel uid), owners_status (known, partial, none, \
             hidden, not_requested) and owners (every pid, fd, command, uid, user; args with -a). A \
             socket no table lists has proto \"other\", state \"UNKNOWN\" and kernel_protocol, the \
             kernel's name of its protocol.",
            "Text from other processes is kept exact: a value that is not valid UTF-8 is printed with U+FFFD \
             in place of bad bytes and a sibling field (command_hex, path_hex, args_hex) holds the exact bytes \
             in hex. A value the kernel does not provide is absent or null, never 0. Fields may be added in \
             version 1; renaming or removing one makes a new version. The full schema is doc/json-schema.md \
             and doc/sockstat.schema.json in the source.",
        ],
    );
    section(
        &mut r,
        "DATA SOURCES",
        &[
            "Sockets come from the kernel's sock_diag netlink interface, one dump per family and protocol, \
             with state, port and address filters applied in the kernel. Any family whose dump fails is read \
             from /proc/net text instead (raw sockets always are on kernels without the raw diag module); \
             --source proc forces the text path; a column the text does not give (unix uids, peers and \
             queues, cookies, listen backlogs, bound devices) is named in one warning each. Owners \
             come from one pass over /proc/PID/fd, run concurrently with the dumps. A socket inode a \
             process holds that no table lists is listed too, with the kernel's name of its \
             protocol, read through /proc/PID/fd/N (the system.sockprotoname attribute, as lsof \
             reads it) without touching the holder's file.",
            "sockstat only reads. It never stops, traces or signals the processes it inspects. \
             sockstat kill alone changes something: it closes the sockets it lists, once asked \
             (doc/kill.md in the source).",
        ],
    );
    section(
        &mut r,
        "EXIT STATUS",
        &["0 on success, also when nothing matched and when warnings were printed; 2 for bad usage \
           (an unknown protocol, a port over 65535, a backwards range, an unknown user, a malformed \
           address or pid, an unknown flag: one line naming the bad value) or an error that stopped \
           the work. A closed output pipe ends quietly with 0. diagnose also uses 1: it found \
           something at warning level or above. kill also uses 1: some matched socket could not be \
           closed, or the confirmation was declined."],
    );
    r.control("SH", ["EXAMPLES"]);
    for (cmd, what) in [
        (
            "sockstat -l -p 8080",
            "What is listening on 8080, and which process?",
        ),
        (
            "sockstat -c -p 5432 -s",
            "Who is connected to the database?",
        ),
        (
            "sockstat -4 -6",
            "Every TCP, UDP and raw socket, IPv4 and IPv6.",
        ),
        (
            "sockstat -l -a",
            "Listening sockets with the arguments of their processes.",
        ),
        (
            "sockstat -u --command 'ngin*'",
            "Unix sockets held by nginx processes.",
        ),
        (
            "sockstat --summary",
            "Counts by protocol, family and state.",
        ),
        (
            "sockstat -H | wc -l",
            "Rows (one per holder): use --summary to count sockets.",
        ),
        (
            "sockstat ports --interval 5",
            "Which destinations use up the ephemeral ports, how fast TIME-WAIT entries appear, and which clients leave TIME-WAIT on the listening ports.",
        ),
        (
            "sockstat counters 10",
            "The TCP/IP counters that moved in 10 seconds, the biggest last; ! marks trouble.",
        ),
        (
            "sockstat kill -p 8080 --state CLOSE_WAIT",
            "List the connections stuck in CLOSE_WAIT on port 8080 with their processes, ask, and close them.",
        ),
    ] {
        r.control("TP", []);
        r.text([bold(cmd)]);
        r.text([roman(what)]);
    }
    r.control("SH", ["SEE ALSO"]);
    r.text([
        italic("ss"),
        roman("(8), "),
        italic("netstat"),
        roman("(8), "),
        italic("lsof"),
        roman("(8), FreeBSD "),
        italic("sockstat"),
        roman("(1)"),
    ]);
    out.write_all(r.render().as_bytes())?;
    man.render_version_section(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in man page and completions must be what the flags generate today.
    /// Regenerate with: `for w in man bash zsh fish; do ...` (see README, "Documentation").
    #[test]
    fn checked_in_docs_match_the_flags() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for (what, path) in [
            (Generate::Man, "doc/sockstat.1"),
            (Generate::Bash, "doc/completions/sockstat.bash"),
            (Generate::Zsh, "doc/completions/sockstat.zsh"),
            (Generate::Fish, "doc/completions/sockstat.fish"),
        ] {
            let mut generated = Vec::new();
            write(what, &mut generated).unwrap();
            let on_disk = std::fs::read(root.join(path)).unwrap_or_default();
            assert!(
                generated == on_disk,
                "{path} is stale: run `cargo run -- --generate {} > {path}`",
                format!("{what:?}").to_lowercase()
            );
        }
    }

    #[test]
    fn man_page_documents_every_visible_flag() {
        let mut page = Vec::new();
        write(Generate::Man, &mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        for arg in Cli::command().get_arguments().filter(|a| !a.is_hide_set()) {
            let spelled = match (arg.get_short(), arg.get_long()) {
                (_, Some(l)) => format!("\\-\\-{}", l.replace('-', "\\-")),
                (Some(s), None) => format!("\\-{s}"),
                _ => continue,
            };
            assert!(page.contains(&spelled), "man page lacks {spelled}");
        }
        for sub in Cli::command()
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
        {
            let title = format!("sockstat {}", sub.get_name());
            assert!(
                page.contains(&title),
                "man page lacks the subcommand {title}"
            );
            for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                let spelled = match (arg.get_short(), arg.get_long()) {
                    (_, Some(l)) => format!("\\-\\-{}", l.replace('-', "\\-")),
                    (Some(s), None) => format!("\\-{s}"),
                    (None, None) => arg
                        .get_value_names()
                        .and_then(|v| v.first())
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                };
                assert!(
                    page.contains(&spelled),
                    "man page lacks {spelled} of {title}"
                );
            }
        }
        for section in [
            "COLUMNS",
            "JSON OUTPUT",
            "EXIT STATUS",
            "WHAT ? MEANS",
            "EXAMPLES",
        ] {
            assert!(page.contains(section), "man page lacks {section}");
        }
    }
}
