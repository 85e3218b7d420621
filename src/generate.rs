//! Generated documentation: the man page and shell completions, built from the same flag
//! definitions as `--help` (`sockstat --generate man|bash|zsh|fish`). The checked-in copies under
//! `doc/` are compared with these by the test suite, so they cannot drift from the flags.

use std::io::{self, Write};

use clap::CommandFactory;
use clap_mangen::roff::{bold, italic, roman, Roff};
#[cfg(test)]
use std::collections::BTreeSet;

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
    if what == Generate::Man {
        return man(Cli::command(), out);
    }
    let mut cmd = without_hidden(&Cli::command());
    match what {
        Generate::Man => unreachable!("written above"),
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

/// `cmd` with only what `--help` shows: the completions offer what the help lists, not the
/// hidden testing seams (`--proc-root`, `--replay-netlink`, `--generate`). clap has no way to
/// remove an argument, so the commands are built again from their visible arguments (the
/// argument groups, which name hidden ones, are left out: completions do not use them).
fn without_hidden(cmd: &clap::Command) -> clap::Command {
    let mut built = cmd.clone();
    built.build();
    copy_visible(&built)
}

fn copy_visible(cmd: &clap::Command) -> clap::Command {
    let mut c = clap::Command::new(cmd.get_name().to_string())
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true);
    if let Some(v) = cmd.get_version() {
        c = c.version(v.to_string());
    }
    if let Some(a) = cmd.get_about() {
        c = c.about(a.clone());
    }
    if let Some(a) = cmd.get_long_about() {
        c = c.long_about(a.clone());
    }
    // A visible argument's conflicts name visible ones only (checked by clap's own assertions
    // when the copy is built).
    c = c.args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned());
    c.subcommands(cmd.get_subcommands().map(copy_visible))
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

/// How an argument is spelled in a synopsis or a tag: `-q`, `-z, -j ZONE`, `--interval
/// SECONDS`, `--watch [SECONDS]`, `[SECONDS]`: every visible name it is accepted under.
fn arg_spelling(a: &clap::Arg) -> String {
    let value = a
        .get_value_names()
        .and_then(|v| v.first())
        .map(|v| v.to_string())
        .unwrap_or_else(|| a.get_id().to_string().to_uppercase());
    if a.is_positional() {
        return if a.is_required_set() {
            value
        } else {
            format!("[{value}]")
        };
    }
    let names = crate::cli::names(a);
    let mut spelled = names.join(", ");
    match a.get_num_args() {
        Some(n) if n.takes_values() && n.min_values() == 0 => {
            spelled.push_str(&format!(" [{value}]"))
        }
        Some(n) if n.takes_values() => spelled.push_str(&format!(" {value}")),
        _ if a.get_action().takes_values() => spelled.push_str(&format!(" {value}")),
        _ => {}
    }
    spelled
}

/// One tagged paragraph per visible option of `args` (positional arguments too when
/// `positionals`): its spelling, its help, its possible values and its default.
fn options<'a>(r: &mut Roff, args: impl Iterator<Item = &'a clap::Arg>) {
    for a in args.filter(|a| !a.is_hide_set()) {
        r.control("TP", []);
        r.text([bold(arg_spelling(a))]);
        let mut help = a
            .get_long_help()
            .or(a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let values: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| match v.get_help() {
                Some(h) => format!("{} ({h})", v.get_name()),
                None => v.get_name().to_string(),
            })
            .collect();
        if !values.is_empty() {
            help.push_str(&format!(". One of: {}", values.join("; ")));
        }
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() && a.get_action().takes_values() {
            help.push_str(&format!(". Default: {}", defaults.join(",")));
        }
        r.text([roman(help)]);
    }
}

/// The listing's options, one section per help heading (FILTERS, ZONES, OUTPUT, ...), in the
/// order `--help` shows them.
fn listing_options(r: &mut Roff, cmd: &clap::Command) {
    let visible = || {
        cmd.get_arguments()
            .filter(|a| !a.is_hide_set() && !a.is_positional())
    };
    let mut headings: Vec<Option<&str>> = Vec::new();
    for a in visible() {
        if !headings.contains(&a.get_help_heading()) {
            headings.push(a.get_help_heading());
        }
    }
    for h in headings {
        let title = h.unwrap_or("OPTIONS").to_uppercase();
        r.control("SH", [title.as_str()]);
        options(r, visible().filter(|a| a.get_help_heading() == h));
    }
}

/// One subsection per subcommand, from its clap definition: its synopsis, description and
/// every visible option (the drift test compares them with its `--help` and completions).
fn subcommands(r: &mut Roff, cmd: &clap::Command) {
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .collect();
    if subs.is_empty() {
        return;
    }
    r.control("SH", ["SUBCOMMANDS"]);
    r.text([roman(
        "Each subcommand takes the options its own section lists, and no other: one it does not \
         take is refused with exit status 2, never ignored. Options given before a subcommand's \
         name are the subcommand's, as if given after it: sockstat -p 443 diagnose is sockstat \
         diagnose -p 443, and sockstat -T diagnose is refused as sockstat diagnose -T is.",
    )]);
    for sub in subs {
        let args: Vec<&clap::Arg> = sub.get_arguments().filter(|a| !a.is_hide_set()).collect();
        let mut title = format!("sockstat {}", sub.get_name());
        if args.iter().any(|a| !a.is_positional()) {
            title.push_str(" [OPTIONS]");
        }
        for p in args.iter().filter(|a| a.is_positional()) {
            title.push(' ');
            title.push_str(&arg_spelling(p));
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
        options(r, args.into_iter());
    }
}

fn man(mut cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    cmd.build();
    let mut opts = Roff::new();
    listing_options(&mut opts, &cmd);
    let mut subs = Roff::new();
    subcommands(&mut subs, &cmd);
    let man = clap_mangen::Man::new(cmd).date("").source("sockstat");
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    out.write_all(opts.render().as_bytes())?;
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
            "Sockets come from the kernel's sock_diag netlink interface, one dump per family and protocol \
             (TCP of both families in one), \
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
    r.control("SH", ["EXIT STATUS"]);
    tagged(
        &mut r,
        &[
            ("0", "Success, also when nothing matched and when warnings were printed. A closed output pipe ends quietly with 0 too."),
            ("1", "diagnose found something at warning level or above; kill could not close some matched socket, or the confirmation was declined."),
            ("2", "Bad usage: a flag or value refused (an unknown protocol, a port over 65535, a backwards range, an unknown user or zone, a malformed address or pid, an unknown option or one the subcommand does not take: one line names it), or an input refused (a malformed web configuration file, trace's filters matching several connections, kill without a filter or without --yes off a terminal)."),
            ("3", "Missing privileges or kernel support: events, drops and serve --events without CAP_BPF and CAP_PERFMON (or root), or on a kernel without BTF or the tracepoint; kill when every socket it tried was refused for want of CAP_NET_ADMIN or of kernel support; serve on a port below 1024 without CAP_NET_BIND_SERVICE; a namespace, file or dump these privileges or this kernel do not allow."),
            ("4", "Any other error that stopped the work: a netlink or I/O failure (a full disk), a port already in use for serve, no connection for trace to follow within --duration, counters that cannot be read."),
        ],
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
            "sockstat kill --sport 8080 --state CLOSE_WAIT",
            "List the connections stuck in CLOSE_WAIT in the server on port 8080 with their processes, ask, and close them (-p 8080 would also close this host's connections to other hosts' port 8080).",
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
    r.control("PP", []);
    r.text([roman(
        "The documents named doc/... above are in the source repository; the Debian package \
         sockstat-rs installs them in /usr/share/doc/sockstat-rs/doc/, beside README.md.",
    )]);
    out.write_all(r.render().as_bytes())?;
    man.render_version_section(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in man page and completions must be what the flags generate today.
    /// Regenerate with: `for w in man bash zsh fish; do ...` (see README, "Generated files").
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

    /// The options a view defines, as typed: every visible short and long name and alias
    /// (positional arguments aside).
    fn defined(cmd: &clap::Command) -> BTreeSet<String> {
        let mut set = BTreeSet::new();
        for a in cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !a.is_positional())
        {
            set.extend(crate::cli::names(a));
        }
        set
    }

    /// `-z, -j ZONE` or `--watch [SECONDS]` as the names it lists.
    fn names_in(spelled: &str) -> impl Iterator<Item = String> + '_ {
        spelled
            .split(", ")
            .filter_map(|p| p.split([' ', '=', '<', '[']).next())
            .filter(|n| n.starts_with('-'))
            .map(str::to_string)
    }

    /// The options `--help` lists: the lines that begin an option (two spaces and `-x`, or six
    /// spaces and `--long`), and the aliases it shows under them.
    fn in_help(cmd: &mut clap::Command) -> BTreeSet<String> {
        let text = cmd.render_long_help().to_string();
        let mut set = BTreeSet::new();
        for line in text.lines() {
            let head = if let Some(rest) = line.strip_prefix("  -") {
                format!("-{rest}")
            } else if let Some(rest) = line.strip_prefix("      --") {
                format!("--{rest}")
            } else if let Some(a) = line.trim().strip_prefix("[alias: ") {
                a.trim_end_matches(']').to_string()
            } else if let Some(a) = line.trim().strip_prefix("[aliases: ") {
                a.trim_end_matches(']').to_string()
            } else {
                continue;
            };
            let head = head.split("  ").next().unwrap_or_default();
            set.extend(names_in(head));
        }
        set
    }

    /// The options a man page section lists: its `.TP` tags, from `start` to the next `.SS`
    /// (or the end of the options, `.SH SUBCOMMANDS`, for the listing).
    fn in_man(page: &str, sub: Option<&str>) -> BTreeSet<String> {
        let (from, until): (String, &[&str]) = match sub {
            None => (".SH DESCRIPTION".into(), &[".SH SUBCOMMANDS"]),
            Some(s) => (format!(".SS \"sockstat {s} "), &[".SS", ".SH"]),
        };
        let start = page
            .find(&from)
            .unwrap_or_else(|| panic!("no {from} in the man page"));
        let body = &page[start + from.len()..];
        let end = until
            .iter()
            .filter_map(|u| body.find(&format!("\n{u}")))
            .min()
            .unwrap_or(body.len());
        let lines: Vec<&str> = body[..end].lines().collect();
        let mut set = BTreeSet::new();
        for w in lines.windows(2).filter(|w| w[0] == ".TP") {
            let tag = w[1]
                .replace("\\-", "-")
                .replace("\\fB", "")
                .replace("\\fR", "")
                .replace("\\fI", "");
            set.extend(names_in(&tag));
        }
        set
    }

    /// The options the bash completion offers for a view: its `opts="..."`.
    fn in_bash(script: &str, sub: Option<&str>) -> BTreeSet<String> {
        let case = match sub {
            None => "        sockstat)\n".to_string(),
            Some(s) => format!("        sockstat__subcmd__{s})\n"),
        };
        let at = script
            .find(&case)
            .expect("the view's case in the bash script");
        let opts = script[at..]
            .lines()
            .find_map(|l| l.trim().strip_prefix("opts=\""))
            .expect("opts");
        opts.trim_end_matches('"')
            .split_whitespace()
            .filter(|w| w.starts_with('-'))
            .map(str::to_string)
            .collect()
    }

    /// The options the zsh completion offers for a view: the specs of its `_arguments` call.
    fn in_zsh(script: &str, sub: Option<&str>) -> BTreeSet<String> {
        let block = match sub {
            None => {
                let start = script.find("_arguments").expect("_arguments");
                let end = script[start..].find("\":: :_sockstat_commands\"").unwrap();
                &script[start..start + end]
            }
            Some(s) => {
                // The first case is the subcommand's own (later ones are `help`'s).
                let start = script
                    .lines()
                    .position(|l| l.trim() == format!("({s})"))
                    .map(|n| script.lines().take(n).map(|l| l.len() + 1).sum::<usize>())
                    .expect("the view's case in the zsh script");
                let end = script[start..].find("&& ret=0").unwrap();
                &script[start..start + end]
            }
        };
        let mut set = BTreeSet::new();
        for line in block.lines() {
            let Some(spec) = line.strip_prefix('\'') else {
                continue;
            };
            // '(-Z)-z+[...', '*--pid=[...', '-4[...'
            let spec = match spec.strip_prefix('(') {
                Some(rest) => rest.split_once(')').map_or(rest, |(_, r)| r),
                None => spec,
            };
            let spec = spec.trim_start_matches('*');
            let name: String = spec
                .chars()
                .take_while(|c| !matches!(c, '[' | '+' | '=' | ':' | '\''))
                .collect();
            if name.starts_with('-') {
                set.insert(name);
            }
        }
        set
    }

    /// The options the fish completion offers for a view: `-s`, `-l` and `-o` of its
    /// `complete` lines.
    fn in_fish(script: &str, sub: Option<&str>) -> BTreeSet<String> {
        let cond = match sub {
            None => "-n \"__fish_sockstat_needs_command\" ".to_string(),
            Some(s) => format!("-n \"__fish_sockstat_using_subcommand {s}\" "),
        };
        let mut set = BTreeSet::new();
        for line in script.lines().filter(|l| l.contains(&cond)) {
            let words: Vec<&str> = line
                .split(" -d ")
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .collect();
            for w in words.windows(2) {
                match w[0] {
                    "-s" | "-o" => set.insert(format!("-{}", w[1])),
                    "-l" => set.insert(format!("--{}", w[1])),
                    _ => false,
                };
            }
        }
        set
    }

    fn generated(what: Generate) -> String {
        let mut v = Vec::new();
        write(what, &mut v).unwrap();
        String::from_utf8(v).unwrap()
    }

    /// Issue 28: `events --help` listed -u, -c, -l and --state, which events refused; every
    /// view listed --watch and --count. For the listing and every subcommand, the options its
    /// `--help` lists, its man page section lists and each completion script offers are exactly
    /// those clap defines for it (which the parser accepts: `cli::tests`).
    #[test]
    fn help_man_page_and_completions_list_exactly_the_options_each_view_takes() {
        let page = generated(Generate::Man);
        let (bash, zsh, fish) = (
            generated(Generate::Bash),
            generated(Generate::Zsh),
            generated(Generate::Fish),
        );
        let mut cli = Cli::command();
        cli.build();
        let mut views: Vec<(Option<String>, clap::Command)> = vec![(None, cli.clone())];
        for sub in cli.get_subcommands().filter(|s| s.get_name() != "help") {
            views.push((Some(sub.get_name().to_string()), sub.clone()));
        }
        assert!(views.len() >= 9, "the listing and eight subcommands");
        for (name, mut cmd) in views {
            let view = name.as_deref().unwrap_or("the listing");
            let want = defined(&cmd);
            assert!(
                want.contains("-h") && want.contains("--help"),
                "{view}: {want:?}"
            );
            let sub = name.as_deref();
            assert_eq!(in_help(&mut cmd), want, "--help of {view}");
            assert_eq!(in_man(&page, sub), want, "man page section of {view}");
            assert_eq!(in_bash(&bash, sub), want, "bash completion of {view}");
            assert_eq!(in_zsh(&zsh, sub), want, "zsh completion of {view}");
            assert_eq!(in_fish(&fish, sub), want, "fish completion of {view}");
        }
        // The views that do not watch, and events, which sees TCP connections only.
        let names = |sub: &str| defined(cli.find_subcommand(sub).unwrap());
        for sub in ["serve", "drops", "events", "kill", "trace"] {
            assert!(!names(sub).contains("--watch"), "{sub}");
            assert!(!names(sub).contains("--count"), "{sub}");
        }
        for flag in ["-u", "-c", "-l", "--state", "-P"] {
            assert!(!names("events").contains(flag), "events: {flag}");
        }
        assert!(!names("kill").contains("-u"));
    }

    #[test]
    fn man_page_has_its_sections() {
        let page = generated(Generate::Man);
        for sub in Cli::command()
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
        {
            let title = format!("sockstat {}", sub.get_name());
            assert!(
                page.contains(&title),
                "man page lacks the subcommand {title}"
            );
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
        // Every exit status, each a tagged paragraph of EXIT STATUS.
        let exit = &page[page.find(".SH \"EXIT STATUS\"").expect("EXIT STATUS")..];
        let exit = &exit[..exit[1..].find("\n.SH").map_or(exit.len(), |e| e + 1)];
        for status in ["0", "1", "2", "3", "4"] {
            assert!(
                exit.contains(&format!(".TP\n\\fB{status}\\fR\n")),
                "EXIT STATUS lacks {status}: {exit}"
            );
        }
    }
}
