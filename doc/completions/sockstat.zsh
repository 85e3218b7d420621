#compdef sockstat

autoload -U is-at-least

_sockstat() {
    typeset -A opt_args
    typeset -a _arguments_options
    local ret=1

    if is-at-least 5.2; then
        _arguments_options=(-s -S -C)
    else
        _arguments_options=(-s -C)
    fi

    local context curcontext="$curcontext" state line
    _arguments "${_arguments_options[@]}" : \
'-p+[Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)]:PORTS:_default' \
'--sport=[Only Internet sockets whose local port is in PORTS (as -p)\: a server'\''s own port, or a client'\''s ephemeral one]:PORTS:_default' \
'--dport=[Only Internet sockets whose remote port is in PORTS (as -p)\: the server port a client connected to]:PORTS:_default' \
'--src=[Only sockets whose local address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--dst=[Only sockets whose remote address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'-P+[Protocols\: tcp, udp, udplite, raw, icmp (ping sockets), sctp, mptcp, packet, unix, netlink (comma-separated). Default\: all the kernel has except packet and netlink, and the sockets no table lists (a socket never bound is selected by the protocol the kernel names for it\: an unbound UDP socket is one of -P udp)]:PROTOS:_default' \
'--state=[Only sockets in these states\: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)]:STATES:_default' \
'--pid=[Only sockets held by these processes (comma-separated pids)]:PIDS:_default' \
'--user=[Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER]:USER:_default' \
'--command=[Only sockets whose holder'\''s command name is NAME (a glob when it has * or ?)]:NAME:_default' \
'--connected-to=[Only the connections to these listeners, seen from both ends, whatever the transport\: ports (5432) and unix listeners by path (/run/postgresql/.s.PGSQL.5432) or abstract name (@name), comma-separated. Implies -c]:LISTENERS:_default' \
'(-Z)-z+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'(-Z)-j+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'--color=[When to use colour]:WHEN:((auto\:"Only when standard output is a terminal and \`NO_COLOR\` is not set"
always\:"Always"
never\:"Never"))' \
'--watch=[Refresh every SECONDS (default 2)\: redrawn in place on a terminal (Ctrl-C to stop); otherwise each refresh is printed after a '\''=== TIME ==='\'' line, or as one JSON document per line with --json]::SECONDS:_default' \
'--count=[Stop after N refreshes. Implies --watch]:N:_default' \
'--source=[Where the socket table comes from]:SOURCE:((auto\:"sock_diag netlink, falling back to /proc/net text for any family whose dump fails"
netlink\:"sock_diag only; a failed dump is an error"
proc\:"/proc/net text only (no socket cookies)"))' \
'--owner-scan=[How the owner scan reads every process'\''s open files]:HOW:((auto\:"The kernel'\''s BPF task_file iterator where it can run (root or CAP_BPF+CAP_PERFMON, kernel BTF, Linux 5.11+), else /proc"
proc\:"/proc/PID/fd only"
bpf\:"The BPF iterator; where it cannot run, /proc with a warning saying why"))' \
'-4[Only IPv4 sockets (with -6\: IPv4 and IPv6)]' \
'-6[Only IPv6 sockets (with -4\: IPv4 and IPv6)]' \
'-u[Only Unix domain sockets (with -4 or -6\: those families and Unix)]' \
'-c[Only connected sockets (with a remote end\: ESTABLISHED, SYN_SENT, ..., TIME_WAIT, connected datagram and unix sockets)]' \
'-l[Only listening sockets (TCP LISTEN, bound unconnected datagram sockets, unix listeners)]' \
'-Z[Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row'\''s)]' \
'-s[Show the STATE column]' \
'-n[Show numeric uids (no user name lookup)]' \
'-q[Do not print the header line]' \
'-H[Do not print the header line (illumos spelling of -q)]' \
'-w[Never truncate columns]' \
'-a[Show process arguments (ARGS column; "args" in JSON)]' \
'-i[Show the socket id (inode) in an ID column]' \
'-T[TCP internals\: RTT, cwnd, windows and scaling, unacked, retransmits, delivery rate, share of busy time limited by the peer'\''s window or our send buffer ("tcp" object in JSON; with --watch --json, one line per TCP connection per refresh\: a time series)]' \
'--tcp-info[TCP internals\: RTT, cwnd, windows and scaling, unacked, retransmits, delivery rate, share of busy time limited by the peer'\''s window or our send buffer ("tcp" object in JSON; with --watch --json, one line per TCP connection per refresh\: a time series)]' \
'--time-wait[With -T, list TIME-WAIT entries too. -T leaves them out by default\: they have no TCP internals and can outnumber the connections (a warning says how many there are); --state TIME_WAIT also shows them]' \
'-C[Show the congestion control algorithm (CC column)]' \
'-m[Socket memory\: receive and send buffer use and limits, drops ("memory" object in JSON)]' \
'--memory[Socket memory\: receive and send buffer use and limits, drops ("memory" object in JSON)]' \
'--cgroup[Show the cgroup each Internet socket was created in (its service or container), from the kernel'\''s socket cgroup id\: no /proc scan and no privilege needed (CGROUP column)]' \
'-v[Print details with every warning]' \
'--summary[Counts by protocol, family and state instead of rows (no owner scan, unless --pid, --command or --user selects what is counted; without one, the sockets no kernel table lists, which only the owner scan finds, are not counted)]' \
'(--csv)--json[One JSON document (schema version 1; see doc/json-schema.md)]' \
'--csv[CSV with a header row]' \
'(--summary --csv)--events[Watch for sockets that open and close\: one line each ('\''+'\'' opened, '\''-'\'' closed, with the holders), or JSON lines with --json; the first refresh is the baseline. Implies --watch]' \
'--no-owners[Skip the /proc owner scan (fastest)\: no process is named (owners_status "not_requested" in JSON; the listing leaves out its COMMAND, PID and FD columns)]' \
'-h[Print help]' \
'--help[Print help]' \
'-L[Hide Internet sockets whose local or remote address is loopback (127/8, \:\:1). Unix sockets are not affected (as FreeBSD'\''s -L)\: add -4 -6 to see only the network]' \
'-V[Print version]' \
'--version[Print version]' \
":: :_sockstat_commands" \
"*::: :->sockstat" \
&& ret=0
    case $state in
    (sockstat)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:sockstat-command-$line[1]:"
        case $line[1] in
            (counters)
_arguments "${_arguments_options[@]}" : \
'--interval=[Same as SECONDS]:SECONDS:_default' \
'--color=[When to use colour]:WHEN:((auto\:"Only when standard output is a terminal and \`NO_COLOR\` is not set"
always\:"Always"
never\:"Never"))' \
'(-Z)-z+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'(-Z)-j+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'--watch=[Refresh every SECONDS (default 2)\: redrawn in place on a terminal (Ctrl-C to stop); otherwise each refresh is printed after a '\''=== TIME ==='\'' line, or as one JSON document per line with --json]::SECONDS:_default' \
'--count=[Stop after N refreshes. Implies --watch]:N:_default' \
'--all[Also show counters that are zero (or did not move over the interval)]' \
'--json[One JSON document\: {"version"\:1,"interval_s","counters"\:\[{"group","name","value" or "delta","meaning","trouble"}\],"hidden_zero","warnings"}]' \
'-q[Do not print the title and header lines]' \
'-v[Print details with every warning (e.g. which counters went backwards)]' \
'-h[Print help]' \
'--help[Print help]' \
'-Z[Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row'\''s)]' \
'::seconds -- Measure deltas over this many seconds (fractions allowed); without it, values since boot (under --watch\: deltas over the watch interval):_default' \
&& ret=0
;;
(diagnose)
_arguments "${_arguments_options[@]}" : \
'-p+[Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)]:PORTS:_default' \
'--sport=[Only Internet sockets whose local port is in PORTS (as -p)\: a server'\''s own port, or a client'\''s ephemeral one]:PORTS:_default' \
'--dport=[Only Internet sockets whose remote port is in PORTS (as -p)\: the server port a client connected to]:PORTS:_default' \
'--src=[Only sockets whose local address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--dst=[Only sockets whose remote address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--state=[Only sockets in these states\: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)]:STATES:_default' \
'--pid=[Only sockets held by these processes (comma-separated pids)]:PIDS:_default' \
'--user=[Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER]:USER:_default' \
'--command=[Only sockets whose holder'\''s command name is NAME (a glob when it has * or ?)]:NAME:_default' \
'--connected-to=[Only the connections to these listening ports (e.g. 5432,8000-8100), seen from both ends. Implies -c]:LISTENERS:_default' \
'(-Z)-z+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'(-Z)-j+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'--source=[Where the socket table comes from]:SOURCE:((auto\:"sock_diag netlink, falling back to /proc/net text for any family whose dump fails"
netlink\:"sock_diag only; a failed dump is an error"
proc\:"/proc/net text only (no socket cookies)"))' \
'--owner-scan=[How the owner scan reads every process'\''s open files]:HOW:((auto\:"The kernel'\''s BPF task_file iterator where it can run (root or CAP_BPF+CAP_PERFMON, kernel BTF, Linux 5.11+), else /proc"
proc\:"/proc/PID/fd only"
bpf\:"The BPF iterator; where it cannot run, /proc with a warning saying why"))' \
'--interval=[Seconds between the two samples (fractions allowed)]:SECONDS:_default' \
'--bandwidth=[The path'\''s bottleneck bandwidth, to compute the bandwidth-delay product and the buffer sizes it needs\: bits per second (100Mbit, 1Gbit, 800kbit) or bytes per second (12.5MB/s)]:RATE:_default' \
'--color=[When to use colour]:WHEN:((auto\:"Only when standard output is a terminal and \`NO_COLOR\` is not set"
always\:"Always"
never\:"Never"))' \
'--watch=[Refresh every SECONDS (default 2)\: redrawn in place on a terminal (Ctrl-C to stop); otherwise each refresh is printed after a '\''=== TIME ==='\'' line, or as one JSON document per line with --json]::SECONDS:_default' \
'--count=[Stop after N refreshes. Implies --watch]:N:_default' \
'-4[Only IPv4 sockets (with -6\: IPv4 and IPv6)]' \
'-6[Only IPv6 sockets (with -4\: IPv4 and IPv6)]' \
'-c[Only connected sockets (with a remote end\: ESTABLISHED, SYN_SENT, ..., TIME_WAIT)]' \
'-l[Only listening sockets (TCP LISTEN; for kill, bound unconnected UDP sockets too)]' \
'-L[Hide Internet sockets whose local or remote address is loopback (127/8, \:\:1)]' \
'-Z[Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row'\''s)]' \
'--no-owners[Skip the /proc owner scan (fastest)\: no process is named (owners_status "not_requested" in JSON; the listing leaves out its COMMAND, PID and FD columns)]' \
'--exact-locks[As root, read whether the application set SO_SNDBUF/SO_RCVBUF exactly (SO_BUF_LOCK) for the connections a buffer finding names, instead of inferring it\: duplicates each such socket fd from its process for an instant (pidfd_getfd) and closes it at once]' \
'--json[One JSON document (doc/diagnose.schema.json)]' \
'-v[Print details with every warning]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(drops)
_arguments "${_arguments_options[@]}" : \
'-P+[Only drops of these protocols (tcp, udp, udplite, sctp; comma-separated)]:PROTOS:_default' \
'-p+[Only drops whose port is in PORTS (e.g. 22,80,8000-8100)]:PORTS:_default' \
'--json[One JSON document (schema version 1; see doc/json-schema.md)]' \
'-h[Print help]' \
'--help[Print help]' \
'::seconds -- How long to count, in seconds (default 10):_default' \
&& ret=0
;;
(events)
_arguments "${_arguments_options[@]}" : \
'-p+[Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)]:PORTS:_default' \
'--sport=[Only Internet sockets whose local port is in PORTS (as -p)\: a server'\''s own port, or a client'\''s ephemeral one]:PORTS:_default' \
'--dport=[Only Internet sockets whose remote port is in PORTS (as -p)\: the server port a client connected to]:PORTS:_default' \
'--src=[Only sockets whose local address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--dst=[Only sockets whose remote address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--pid=[Only sockets held by these processes (comma-separated pids)]:PIDS:_default' \
'--user=[Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER]:USER:_default' \
'--command=[Only sockets whose holder'\''s command name is NAME (a glob when it has * or ?)]:NAME:_default' \
'--connected-to=[Only the connections to these listening ports (e.g. 5432,8000-8100), seen from both ends. Implies -c]:LISTENERS:_default' \
'(-Z)-z+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'(-Z)-j+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'--duration=[Stop after SECONDS (default\: run until Ctrl-C or SIGTERM)]:SECONDS:_default' \
'-4[Only IPv4 sockets (with -6\: IPv4 and IPv6)]' \
'-6[Only IPv6 sockets (with -4\: IPv4 and IPv6)]' \
'-L[Hide Internet sockets whose local or remote address is loopback (127/8, \:\:1)]' \
'-Z[Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row'\''s)]' \
'--stats[At the end, a summary per side, command and destination\: connections, failures, connect latency (client) or accept wait (server) percentiles and log2 histogram, SYN retransmits, bytes, and where the TIME-WAIT entries were left]' \
'--json[JSON Lines\: one object per event (schema version 1), and with --stats the summary as one object on the last line]' \
'-n[Show numeric uids (no user name lookup)]' \
'-q[Do not print the header line; with --stats, print only the summary]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(kill)
_arguments "${_arguments_options[@]}" : \
'-p+[Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)]:PORTS:_default' \
'--sport=[Only Internet sockets whose local port is in PORTS (as -p)\: a server'\''s own port, or a client'\''s ephemeral one]:PORTS:_default' \
'--dport=[Only Internet sockets whose remote port is in PORTS (as -p)\: the server port a client connected to]:PORTS:_default' \
'--src=[Only sockets whose local address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--dst=[Only sockets whose remote address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--state=[Only sockets in these states\: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)]:STATES:_default' \
'--pid=[Only sockets held by these processes (comma-separated pids)]:PIDS:_default' \
'--user=[Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER]:USER:_default' \
'--command=[Only sockets whose holder'\''s command name is NAME (a glob when it has * or ?)]:NAME:_default' \
'--connected-to=[Only the connections to these listening ports (e.g. 5432,8000-8100), seen from both ends. Implies -c]:LISTENERS:_default' \
'(-Z)-z+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'(-Z)-j+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'--cookie=[Only sockets with these kernel cookies (comma-separated, as "cookie" in --json)]:COOKIES:_default' \
'--color=[When to use colour]:WHEN:((auto\:"Only when standard output is a terminal and \`NO_COLOR\` is not set"
always\:"Always"
never\:"Never"))' \
'-P+[Protocols\: tcp, udp (comma-separated; the only ones a socket can be closed for). Default\: both]:PROTOS:_default' \
'-4[Only IPv4 sockets (with -6\: IPv4 and IPv6)]' \
'-6[Only IPv6 sockets (with -4\: IPv4 and IPv6)]' \
'-c[Only connected sockets (with a remote end\: ESTABLISHED, SYN_SENT, ..., TIME_WAIT)]' \
'-l[Only listening sockets (TCP LISTEN; for kill, bound unconnected UDP sockets too)]' \
'-L[Hide Internet sockets whose local or remote address is loopback (127/8, \:\:1)]' \
'-Z[Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row'\''s)]' \
'--dry-run[List what would be closed, close nothing]' \
'-y[Close without asking (needed when standard input or output is not a terminal)]' \
'--yes[Close without asking (needed when standard input or output is not a terminal)]' \
'--json[One JSON document\: the listing'\''s socket objects, each with "result" (and "reason"), and a "summary" (doc/kill.schema.json)]' \
'-n[Show numeric uids (no user name lookup)]' \
'-w[Never truncate columns]' \
'-v[Print details with every warning]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(ports)
_arguments "${_arguments_options[@]}" : \
'-p+[Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)]:PORTS:_default' \
'--sport=[Only Internet sockets whose local port is in PORTS (as -p)\: a server'\''s own port, or a client'\''s ephemeral one]:PORTS:_default' \
'--dport=[Only Internet sockets whose remote port is in PORTS (as -p)\: the server port a client connected to]:PORTS:_default' \
'--src=[Only sockets whose local address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--dst=[Only sockets whose remote address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--interval=[Sample twice, SECONDS apart\: adds the rate of new TIME-WAIT entries per destination and the counter deltas (TW, TWRecycled, TCPTimeWaitOverflow, PAWSEstab, PAWSTimewait, TCPACKSkippedTimeWait); and, with CAP_BPF and CAP_PERFMON (or root), the processes that opened connections to each destination meanwhile (from connection events, as \`sockstat events\` sees them)]:SECONDS:_default' \
'--color=[When to use colour]:WHEN:((auto\:"Only when standard output is a terminal and \`NO_COLOR\` is not set"
always\:"Always"
never\:"Never"))' \
'(-Z)-z+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'(-Z)-j+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'--watch=[Refresh every SECONDS (default 2)\: redrawn in place on a terminal (Ctrl-C to stop); otherwise each refresh is printed after a '\''=== TIME ==='\'' line, or as one JSON document per line with --json]::SECONDS:_default' \
'--count=[Stop after N refreshes. Implies --watch]:N:_default' \
'-4[Only IPv4 sockets (with -6\: IPv4 and IPv6)]' \
'-6[Only IPv6 sockets (with -4\: IPv4 and IPv6)]' \
'-L[Hide Internet sockets whose local or remote address is loopback (127/8, \:\:1)]' \
'--json[One JSON document\: {"version"\:1,"range","settings","time_wait","interval_s", "destinations"\:\[{"local_address","remote_address","remote_port","count","states", "usage",...}\],"servers","server_counters","warnings"}]' \
'-q[Do not print the header lines]' \
'-v[Print details with every warning]' \
'-h[Print help]' \
'--help[Print help]' \
'-Z[Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row'\''s)]' \
&& ret=0
;;
(serve)
_arguments "${_arguments_options[@]}" : \
'--listen=[Address and port to serve /metrics on. Loopback by default\: the metrics name processes, addresses and ports]:ADDR:PORT:_default' \
'--top=[Destinations the ephemeral-port metrics show, over all zones, highest share of the port range first (bounds their label cardinality)]:N:_default' \
'--scrape-budget=[Longest a scrape waits for a fresh collection; past it, the last collection is served with its age (sockstat_snapshot_age_seconds)]:DURATION:_default' \
'--web.config.file=[The Prometheus exporter toolkit'\''s web configuration file (as node_exporter'\''s)\: TLS, client certificates, basic-auth users with bcrypt hashes, extra headers, a rate limit. Checked at start; read again when it or a file it names changes]:FILE:_files' \
'-Z[Every zone (network namespace) on the host, as \`sockstat -Z\` finds and names them, each read inside it\: every per-zone metric gets that zone'\''s label. Needs CAP_SYS_ADMIN]' \
'--events[Also export connection events (as \`sockstat events\` traces them) and dropped packets\: connect-latency and accept-wait histograms by port (the first 32 ports, the rest as port="other"), connections by side, failures by reason, closes by how they ended, events lost, and drops by reason and protocol. Needs CAP_BPF and CAP_PERFMON (or root) at start; the programs stay attached after the capabilities are dropped]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(trace)
_arguments "${_arguments_options[@]}" : \
'-p+[Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)]:PORTS:_default' \
'--sport=[Only Internet sockets whose local port is in PORTS (as -p)\: a server'\''s own port, or a client'\''s ephemeral one]:PORTS:_default' \
'--dport=[Only Internet sockets whose remote port is in PORTS (as -p)\: the server port a client connected to]:PORTS:_default' \
'--src=[Only sockets whose local address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--dst=[Only sockets whose remote address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--state=[Only sockets in these states\: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)]:STATES:_default' \
'--pid=[Only sockets held by these processes (comma-separated pids)]:PIDS:_default' \
'--user=[Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER]:USER:_default' \
'--command=[Only sockets whose holder'\''s command name is NAME (a glob when it has * or ?)]:NAME:_default' \
'--connected-to=[Only the connections to these listening ports (e.g. 5432,8000-8100), seen from both ends. Implies -c]:LISTENERS:_default' \
'(-Z)-z+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'(-Z)-j+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'--source=[Where the socket table comes from]:SOURCE:((auto\:"sock_diag netlink, falling back to /proc/net text for any family whose dump fails"
netlink\:"sock_diag only; a failed dump is an error"
proc\:"/proc/net text only (no socket cookies)"))' \
'--owner-scan=[How the owner scan reads every process'\''s open files]:HOW:((auto\:"The kernel'\''s BPF task_file iterator where it can run (root or CAP_BPF+CAP_PERFMON, kernel BTF, Linux 5.11+), else /proc"
proc\:"/proc/PID/fd only"
bpf\:"The BPF iterator; where it cannot run, /proc with a warning saying why"))' \
'--id=[Only the socket with this id (the inode\: -i'\''s ID column, "id" in JSON); picks one end of a loopback connection]:ID:_default' \
'--cookie=[Only the socket with this cookie ("cookie" in JSON, \`sockstat --events\`)]:COOKIE:_default' \
'-o+[Write the picture to FILE (SVG)]:FILE:_files' \
'--output=[Write the picture to FILE (SVG)]:FILE:_files' \
'--interval=[Seconds between samples (fractions allowed, 0.001 to 60)]:SECONDS:_default' \
'--duration=[How long to trace, in seconds from the connection'\''s first sample, and how long to wait for one to match (the trace also ends when the connection closes or on Ctrl-C; what was sampled is still drawn)]:SECONDS:_default' \
'-4[Only IPv4 sockets (with -6\: IPv4 and IPv6)]' \
'-6[Only IPv6 sockets (with -4\: IPv4 and IPv6)]' \
'-c[Only connected sockets (with a remote end\: ESTABLISHED, SYN_SENT, ..., TIME_WAIT)]' \
'-l[Only listening sockets (TCP LISTEN; for kill, bound unconnected UDP sockets too)]' \
'-L[Hide Internet sockets whose local or remote address is loopback (127/8, \:\:1)]' \
'-Z[Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row'\''s)]' \
'--no-owners[Skip the /proc owner scan (fastest)\: no process is named (owners_status "not_requested" in JSON; the listing leaves out its COMMAND, PID and FD columns)]' \
'--json[Print each sample as a JSON line on stdout as it is taken, then one line with the connection and the summary]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(top)
_arguments "${_arguments_options[@]}" : \
'-p+[Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)]:PORTS:_default' \
'--sport=[Only Internet sockets whose local port is in PORTS (as -p)\: a server'\''s own port, or a client'\''s ephemeral one]:PORTS:_default' \
'--dport=[Only Internet sockets whose remote port is in PORTS (as -p)\: the server port a client connected to]:PORTS:_default' \
'--src=[Only sockets whose local address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'--dst=[Only sockets whose remote address is ADDR or in ADDR/LEN]:ADDR[/LEN]:_default' \
'-P+[Protocols\: tcp, udp, udplite, raw, icmp (ping sockets), sctp, mptcp, packet, unix, netlink (comma-separated). Default\: all the kernel has except packet and netlink, and the sockets no table lists (a socket never bound is selected by the protocol the kernel names for it\: an unbound UDP socket is one of -P udp)]:PROTOS:_default' \
'--state=[Only sockets in these states\: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)]:STATES:_default' \
'--pid=[Only sockets held by these processes (comma-separated pids)]:PIDS:_default' \
'--user=[Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER]:USER:_default' \
'--command=[Only sockets whose holder'\''s command name is NAME (a glob when it has * or ?)]:NAME:_default' \
'--connected-to=[Only the connections to these listeners, seen from both ends, whatever the transport\: ports (5432) and unix listeners by path (/run/postgresql/.s.PGSQL.5432) or abstract name (@name), comma-separated. Implies -c]:LISTENERS:_default' \
'(-Z)-z+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'(-Z)-j+[Only this zone (network namespace)\: a name from -Z (global, an \`ip netns\` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it]:ZONE:_default' \
'--source=[Where the socket table comes from]:SOURCE:((auto\:"sock_diag netlink, falling back to /proc/net text for any family whose dump fails"
netlink\:"sock_diag only; a failed dump is an error"
proc\:"/proc/net text only (no socket cookies)"))' \
'--owner-scan=[How the owner scan reads every process'\''s open files]:HOW:((auto\:"The kernel'\''s BPF task_file iterator where it can run (root or CAP_BPF+CAP_PERFMON, kernel BTF, Linux 5.11+), else /proc"
proc\:"/proc/PID/fd only"
bpf\:"The BPF iterator; where it cannot run, /proc with a warning saying why"))' \
'-d+[Seconds between refreshes (fractions allowed); the first rates appear after one]:SECONDS:_default' \
'--interval=[Seconds between refreshes (fractions allowed); the first rates appear after one]:SECONDS:_default' \
'--by=[Rows per process, connection, remote address or local port]:GROUPING:_default' \
'--sort=[The column rows are sorted by, largest first\: rate, send, recv, conns, retrans, rtt, findings, name]:COLUMN:_default' \
'--rescan=[The longest the holders found by one walk of every process'\''s descriptors are used (0\: a walk at every refresh); a socket no walk has seen makes a walk at once]:SECONDS:_default' \
'--count=[Stop after N refreshes]:N:_default' \
'--color=[When to use colour]:WHEN:((auto\:"Only when standard output is a terminal and \`NO_COLOR\` is not set"
always\:"Always"
never\:"Never"))' \
'-4[Only IPv4 sockets (with -6\: IPv4 and IPv6)]' \
'-6[Only IPv6 sockets (with -4\: IPv4 and IPv6)]' \
'-c[Only connected sockets (with a remote end\: ESTABLISHED, SYN_SENT, ..., TIME_WAIT, connected datagram and unix sockets)]' \
'-l[Only listening sockets (TCP LISTEN, bound unconnected datagram sockets, unix listeners)]' \
'-L[Hide Internet sockets whose local or remote address is loopback (127/8, \:\:1)]' \
'-Z[Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row'\''s)]' \
'--no-owners[Skip the /proc owner scan (fastest)\: no process is named (owners_status "not_requested" in JSON; the listing leaves out its COMMAND, PID and FD columns)]' \
'-b[Write refreshes to standard output instead of the screen (text as top -b, or --json)]' \
'--batch[Write refreshes to standard output instead of the screen (text as top -b, or --json)]' \
'--json[One JSON object per refresh and line (implies --batch)]' \
'-q[No header line (batch text)]' \
'-v[Print details with every warning]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_sockstat__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:sockstat-help-command-$line[1]:"
        case $line[1] in
            (counters)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(diagnose)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(drops)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(events)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(kill)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(ports)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(serve)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(trace)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(top)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
}

(( $+functions[_sockstat_commands] )) ||
_sockstat_commands() {
    local commands; commands=(
'counters:Kernel TCP/IP counters as deltas over an interval, with their meanings' \
'diagnose:What limits each TCP connection, and what to change' \
'drops:Packets the kernel dropped, by drop reason, protocol and port, over SECONDS' \
'events:Every TCP connect, accept, close and failed connect as it happens, with its process' \
'kill:Close the TCP and UDP connections the filters select, from outside their processes' \
'ports:Ephemeral-port use by destination and TIME-WAIT on both sides, with advice' \
'serve:A Prometheus exporter\: socket, listen-queue, ephemeral-port, diagnosis and counter metrics' \
'trace:Sample one TCP connection over time and draw it (SVG)\: acked bytes, windows, in flight' \
'top:Who is using the network right now, and why the slow connections are slow' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'sockstat commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__counters_commands] )) ||
_sockstat__subcmd__counters_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat counters commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__diagnose_commands] )) ||
_sockstat__subcmd__diagnose_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat diagnose commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__drops_commands] )) ||
_sockstat__subcmd__drops_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat drops commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__events_commands] )) ||
_sockstat__subcmd__events_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat events commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help_commands] )) ||
_sockstat__subcmd__help_commands() {
    local commands; commands=(
'counters:Kernel TCP/IP counters as deltas over an interval, with their meanings' \
'diagnose:What limits each TCP connection, and what to change' \
'drops:Packets the kernel dropped, by drop reason, protocol and port, over SECONDS' \
'events:Every TCP connect, accept, close and failed connect as it happens, with its process' \
'kill:Close the TCP and UDP connections the filters select, from outside their processes' \
'ports:Ephemeral-port use by destination and TIME-WAIT on both sides, with advice' \
'serve:A Prometheus exporter\: socket, listen-queue, ephemeral-port, diagnosis and counter metrics' \
'trace:Sample one TCP connection over time and draw it (SVG)\: acked bytes, windows, in flight' \
'top:Who is using the network right now, and why the slow connections are slow' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'sockstat help commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__counters_commands] )) ||
_sockstat__subcmd__help__subcmd__counters_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help counters commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__diagnose_commands] )) ||
_sockstat__subcmd__help__subcmd__diagnose_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help diagnose commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__drops_commands] )) ||
_sockstat__subcmd__help__subcmd__drops_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help drops commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__events_commands] )) ||
_sockstat__subcmd__help__subcmd__events_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help events commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__help_commands] )) ||
_sockstat__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help help commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__kill_commands] )) ||
_sockstat__subcmd__help__subcmd__kill_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help kill commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__ports_commands] )) ||
_sockstat__subcmd__help__subcmd__ports_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help ports commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__serve_commands] )) ||
_sockstat__subcmd__help__subcmd__serve_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help serve commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__top_commands] )) ||
_sockstat__subcmd__help__subcmd__top_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help top commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__help__subcmd__trace_commands] )) ||
_sockstat__subcmd__help__subcmd__trace_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat help trace commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__kill_commands] )) ||
_sockstat__subcmd__kill_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat kill commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__ports_commands] )) ||
_sockstat__subcmd__ports_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat ports commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__serve_commands] )) ||
_sockstat__subcmd__serve_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat serve commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__top_commands] )) ||
_sockstat__subcmd__top_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat top commands' commands "$@"
}
(( $+functions[_sockstat__subcmd__trace_commands] )) ||
_sockstat__subcmd__trace_commands() {
    local commands; commands=()
    _describe -t commands 'sockstat trace commands' commands "$@"
}

if [ "$funcstack[1]" = "_sockstat" ]; then
    _sockstat "$@"
else
    compdef _sockstat sockstat
fi
