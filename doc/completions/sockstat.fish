# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_sockstat_global_optspecs
    string join \n 4 6 u c l p= sport= dport= src= dst= P= state= pid= user= command= connected-to= z= Z s n q H w a i T/tcp-info time-wait C m/memory cgroup v summary json csv color= watch= count= events no-owners source= owner-scan= h/help L V/version
end

function __fish_sockstat_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_sockstat_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_sockstat_using_subcommand
    set -l cmd (__fish_sockstat_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c sockstat -n "__fish_sockstat_needs_command" -s p -d 'Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l sport -d 'Only Internet sockets whose local port is in PORTS (as -p): a server\'s own port, or a client\'s ephemeral one' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l dport -d 'Only Internet sockets whose remote port is in PORTS (as -p): the server port a client connected to' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l src -d 'Only sockets whose local address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l dst -d 'Only sockets whose remote address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -s P -d 'Protocols: tcp, udp, udplite, raw, icmp (ping sockets), sctp, mptcp, packet, unix, netlink (comma-separated). Default: all the kernel has except packet and netlink, and the sockets no table lists (a socket never bound is selected by the protocol the kernel names for it: an unbound UDP socket is one of -P udp)' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l state -d 'Only sockets in these states: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l pid -d 'Only sockets held by these processes (comma-separated pids)' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l user -d 'Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l command -d 'Only sockets whose holder\'s command name is NAME (a glob when it has * or ?)' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l connected-to -d 'Only the connections to these listeners, seen from both ends, whatever the transport: ports (5432) and unix listeners by path (/run/postgresql/.s.PGSQL.5432) or abstract name (@name), comma-separated. Implies -c' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -s z -s j -d 'Only this zone (network namespace): a name from -Z (global, an `ip netns` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l color -d 'When to use colour' -r -f -a "auto\t'Only when standard output is a terminal and `NO_COLOR` is not set'
always\t'Always'
never\t'Never'"
complete -c sockstat -n "__fish_sockstat_needs_command" -l watch -d 'Refresh every SECONDS (default 2): redrawn in place on a terminal (Ctrl-C to stop); otherwise each refresh is printed after a \'=== TIME ===\' line, or as one JSON document per line with --json' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l count -d 'Stop after N refreshes. Implies --watch' -r
complete -c sockstat -n "__fish_sockstat_needs_command" -l source -d 'Where the socket table comes from' -r -f -a "auto\t'sock_diag netlink, falling back to /proc/net text for any family whose dump fails'
netlink\t'sock_diag only; a failed dump is an error'
proc\t'/proc/net text only (no socket cookies)'"
complete -c sockstat -n "__fish_sockstat_needs_command" -l owner-scan -d 'How the owner scan reads every process\'s open files' -r -f -a "auto\t'The kernel\'s BPF task_file iterator where it can run (root or CAP_BPF+CAP_PERFMON, kernel BTF, Linux 5.11+), else /proc'
proc\t'/proc/PID/fd only'
bpf\t'The BPF iterator; where it cannot run, /proc with a warning saying why'"
complete -c sockstat -n "__fish_sockstat_needs_command" -s 4 -d 'Only IPv4 sockets (with -6: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s 6 -d 'Only IPv6 sockets (with -4: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s u -d 'Only Unix domain sockets (with -4 or -6: those families and Unix)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s c -d 'Only connected sockets (with a remote end: ESTABLISHED, SYN_SENT, ..., TIME_WAIT, connected datagram and unix sockets)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s l -d 'Only listening sockets (TCP LISTEN, bound unconnected datagram sockets, unix listeners)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s Z -d 'Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row\'s)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s s -d 'Show the STATE column'
complete -c sockstat -n "__fish_sockstat_needs_command" -s n -d 'Show numeric uids (no user name lookup)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s q -d 'Do not print the header line'
complete -c sockstat -n "__fish_sockstat_needs_command" -s H -d 'Do not print the header line (illumos spelling of -q)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s w -d 'Never truncate columns'
complete -c sockstat -n "__fish_sockstat_needs_command" -s a -d 'Show process arguments (ARGS column; "args" in JSON)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s i -d 'Show the socket id (inode) in an ID column'
complete -c sockstat -n "__fish_sockstat_needs_command" -s T -l tcp-info -d 'TCP internals: RTT, cwnd, windows and scaling, unacked, retransmits, delivery rate, share of busy time limited by the peer\'s window or our send buffer ("tcp" object in JSON; with --watch --json, one line per TCP connection per refresh: a time series)'
complete -c sockstat -n "__fish_sockstat_needs_command" -l time-wait -d 'With -T, list TIME-WAIT entries too. -T leaves them out by default: they have no TCP internals and can outnumber the connections (a warning says how many there are); --state TIME_WAIT also shows them'
complete -c sockstat -n "__fish_sockstat_needs_command" -s C -d 'Show the congestion control algorithm (CC column)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s m -l memory -d 'Socket memory: receive and send buffer use and limits, drops ("memory" object in JSON)'
complete -c sockstat -n "__fish_sockstat_needs_command" -l cgroup -d 'Show the cgroup each Internet socket was created in (its service or container), from the kernel\'s socket cgroup id: no /proc scan and no privilege needed (CGROUP column)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s v -d 'Print details with every warning'
complete -c sockstat -n "__fish_sockstat_needs_command" -l summary -d 'Counts by protocol, family and state instead of rows (no owner scan, unless --pid, --command or --user selects what is counted; without one, the sockets no kernel table lists, which only the owner scan finds, are not counted)'
complete -c sockstat -n "__fish_sockstat_needs_command" -l json -d 'One JSON document (schema version 1; see doc/json-schema.md)'
complete -c sockstat -n "__fish_sockstat_needs_command" -l csv -d 'CSV with a header row'
complete -c sockstat -n "__fish_sockstat_needs_command" -l events -d 'Watch for sockets that open and close: one line each (\'+\' opened, \'-\' closed, with the holders), or JSON lines with --json; the first refresh is the baseline. Implies --watch'
complete -c sockstat -n "__fish_sockstat_needs_command" -l no-owners -d 'Skip the /proc owner scan (fastest): no process is named (owners_status "not_requested" in JSON; the listing leaves out its COMMAND, PID and FD columns)'
complete -c sockstat -n "__fish_sockstat_needs_command" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_needs_command" -s L -d 'Hide Internet sockets whose local or remote address is loopback (127/8, ::1). Unix sockets are not affected (as FreeBSD\'s -L): add -4 -6 to see only the network'
complete -c sockstat -n "__fish_sockstat_needs_command" -s V -l version -d 'Print version'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "counters" -d 'Kernel TCP/IP counters as deltas over an interval, with their meanings'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "diagnose" -d 'What limits each TCP connection, and what to change'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "drops" -d 'Packets the kernel dropped, by drop reason, protocol and port, over SECONDS'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "events" -d 'Every TCP connect, accept, close and failed connect as it happens, with its process'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "kill" -d 'Close the TCP and UDP connections the filters select, from outside their processes'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "ports" -d 'Ephemeral-port use by destination and TIME-WAIT on both sides, with advice'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "serve" -d 'A Prometheus exporter: socket, listen-queue, ephemeral-port, diagnosis and counter metrics'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "trace" -d 'Sample one TCP connection over time and draw it (SVG): acked bytes, windows, in flight'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "top" -d 'Who is using the network right now, and why the slow connections are slow'
complete -c sockstat -n "__fish_sockstat_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -l interval -d 'Same as SECONDS' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -l color -d 'When to use colour' -r -f -a "auto\t'Only when standard output is a terminal and `NO_COLOR` is not set'
always\t'Always'
never\t'Never'"
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -s z -s j -d 'Only this zone (network namespace): a name from -Z (global, an `ip netns` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -l watch -d 'Refresh every SECONDS (default 2): redrawn in place on a terminal (Ctrl-C to stop); otherwise each refresh is printed after a \'=== TIME ===\' line, or as one JSON document per line with --json' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -l count -d 'Stop after N refreshes. Implies --watch' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -l all -d 'Also show counters that are zero (or did not move over the interval)'
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -l json -d 'One JSON document: {"version":1,"interval_s","counters":[{"group","name","value" or "delta","meaning","trouble"}],"hidden_zero","warnings"}'
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -s q -d 'Do not print the title and header lines'
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -s v -d 'Print details with every warning (e.g. which counters went backwards)'
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_using_subcommand counters" -s Z -d 'Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row\'s)'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s p -d 'Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l sport -d 'Only Internet sockets whose local port is in PORTS (as -p): a server\'s own port, or a client\'s ephemeral one' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l dport -d 'Only Internet sockets whose remote port is in PORTS (as -p): the server port a client connected to' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l src -d 'Only sockets whose local address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l dst -d 'Only sockets whose remote address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l state -d 'Only sockets in these states: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l pid -d 'Only sockets held by these processes (comma-separated pids)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l user -d 'Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l command -d 'Only sockets whose holder\'s command name is NAME (a glob when it has * or ?)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l connected-to -d 'Only the connections to these listening ports (e.g. 5432,8000-8100), seen from both ends. Implies -c' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s z -s j -d 'Only this zone (network namespace): a name from -Z (global, an `ip netns` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l source -d 'Where the socket table comes from' -r -f -a "auto\t'sock_diag netlink, falling back to /proc/net text for any family whose dump fails'
netlink\t'sock_diag only; a failed dump is an error'
proc\t'/proc/net text only (no socket cookies)'"
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l owner-scan -d 'How the owner scan reads every process\'s open files' -r -f -a "auto\t'The kernel\'s BPF task_file iterator where it can run (root or CAP_BPF+CAP_PERFMON, kernel BTF, Linux 5.11+), else /proc'
proc\t'/proc/PID/fd only'
bpf\t'The BPF iterator; where it cannot run, /proc with a warning saying why'"
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l interval -d 'Seconds between the two samples (fractions allowed)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l bandwidth -d 'The path\'s bottleneck bandwidth, to compute the bandwidth-delay product and the buffer sizes it needs: bits per second (100Mbit, 1Gbit, 800kbit) or bytes per second (12.5MB/s)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l color -d 'When to use colour' -r -f -a "auto\t'Only when standard output is a terminal and `NO_COLOR` is not set'
always\t'Always'
never\t'Never'"
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l watch -d 'Refresh every SECONDS (default 2): redrawn in place on a terminal (Ctrl-C to stop); otherwise each refresh is printed after a \'=== TIME ===\' line, or as one JSON document per line with --json' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l count -d 'Stop after N refreshes. Implies --watch' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s 4 -d 'Only IPv4 sockets (with -6: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s 6 -d 'Only IPv6 sockets (with -4: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s c -d 'Only connected sockets (with a remote end: ESTABLISHED, SYN_SENT, ..., TIME_WAIT)'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s l -d 'Only listening sockets (TCP LISTEN; for kill, bound unconnected UDP sockets too)'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s L -d 'Hide Internet sockets whose local or remote address is loopback (127/8, ::1)'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s Z -d 'Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row\'s)'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l no-owners -d 'Skip the /proc owner scan (fastest): no process is named (owners_status "not_requested" in JSON; the listing leaves out its COMMAND, PID and FD columns)'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l exact-locks -d 'As root, read whether the application set SO_SNDBUF/SO_RCVBUF exactly (SO_BUF_LOCK) for the connections a buffer finding names, instead of inferring it: duplicates each such socket fd from its process for an instant (pidfd_getfd) and closes it at once'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -l json -d 'One JSON document (doc/diagnose.schema.json)'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s v -d 'Print details with every warning'
complete -c sockstat -n "__fish_sockstat_using_subcommand diagnose" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_using_subcommand drops" -s P -d 'Only drops of these protocols (tcp, udp, udplite, sctp; comma-separated)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand drops" -s p -d 'Only drops whose port is in PORTS (e.g. 22,80,8000-8100)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand drops" -l json -d 'One JSON document (schema version 1; see doc/json-schema.md)'
complete -c sockstat -n "__fish_sockstat_using_subcommand drops" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -s p -d 'Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l sport -d 'Only Internet sockets whose local port is in PORTS (as -p): a server\'s own port, or a client\'s ephemeral one' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l dport -d 'Only Internet sockets whose remote port is in PORTS (as -p): the server port a client connected to' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l src -d 'Only sockets whose local address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l dst -d 'Only sockets whose remote address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l pid -d 'Only sockets held by these processes (comma-separated pids)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l user -d 'Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l command -d 'Only sockets whose holder\'s command name is NAME (a glob when it has * or ?)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l connected-to -d 'Only the connections to these listening ports (e.g. 5432,8000-8100), seen from both ends. Implies -c' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -s z -s j -d 'Only this zone (network namespace): a name from -Z (global, an `ip netns` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l duration -d 'Stop after SECONDS (default: run until Ctrl-C or SIGTERM)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -s 4 -d 'Only IPv4 sockets (with -6: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -s 6 -d 'Only IPv6 sockets (with -4: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -s L -d 'Hide Internet sockets whose local or remote address is loopback (127/8, ::1)'
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -s Z -d 'Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row\'s)'
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l stats -d 'At the end, a summary per side, command and destination: connections, failures, connect latency (client) or accept wait (server) percentiles and log2 histogram, SYN retransmits, bytes, and where the TIME-WAIT entries were left'
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -l json -d 'JSON Lines: one object per event (schema version 1), and with --stats the summary as one object on the last line'
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -s n -d 'Show numeric uids (no user name lookup)'
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -s q -d 'Do not print the header line; with --stats, print only the summary'
complete -c sockstat -n "__fish_sockstat_using_subcommand events" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s p -d 'Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l sport -d 'Only Internet sockets whose local port is in PORTS (as -p): a server\'s own port, or a client\'s ephemeral one' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l dport -d 'Only Internet sockets whose remote port is in PORTS (as -p): the server port a client connected to' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l src -d 'Only sockets whose local address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l dst -d 'Only sockets whose remote address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l state -d 'Only sockets in these states: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l pid -d 'Only sockets held by these processes (comma-separated pids)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l user -d 'Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l command -d 'Only sockets whose holder\'s command name is NAME (a glob when it has * or ?)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l connected-to -d 'Only the connections to these listening ports (e.g. 5432,8000-8100), seen from both ends. Implies -c' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s z -s j -d 'Only this zone (network namespace): a name from -Z (global, an `ip netns` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l cookie -d 'Only sockets with these kernel cookies (comma-separated, as "cookie" in --json)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l color -d 'When to use colour' -r -f -a "auto\t'Only when standard output is a terminal and `NO_COLOR` is not set'
always\t'Always'
never\t'Never'"
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s P -d 'Protocols: tcp, udp (comma-separated; the only ones a socket can be closed for). Default: both' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s 4 -d 'Only IPv4 sockets (with -6: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s 6 -d 'Only IPv6 sockets (with -4: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s c -d 'Only connected sockets (with a remote end: ESTABLISHED, SYN_SENT, ..., TIME_WAIT)'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s l -d 'Only listening sockets (TCP LISTEN; for kill, bound unconnected UDP sockets too)'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s L -d 'Hide Internet sockets whose local or remote address is loopback (127/8, ::1)'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s Z -d 'Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row\'s)'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l dry-run -d 'List what would be closed, close nothing'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s y -l yes -d 'Close without asking (needed when standard input or output is not a terminal)'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -l json -d 'One JSON document: the listing\'s socket objects, each with "result" (and "reason"), and a "summary" (doc/kill.schema.json)'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s n -d 'Show numeric uids (no user name lookup)'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s w -d 'Never truncate columns'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s v -d 'Print details with every warning'
complete -c sockstat -n "__fish_sockstat_using_subcommand kill" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -s p -d 'Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -l sport -d 'Only Internet sockets whose local port is in PORTS (as -p): a server\'s own port, or a client\'s ephemeral one' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -l dport -d 'Only Internet sockets whose remote port is in PORTS (as -p): the server port a client connected to' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -l src -d 'Only sockets whose local address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -l dst -d 'Only sockets whose remote address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -l interval -d 'Sample twice, SECONDS apart: adds the rate of new TIME-WAIT entries per destination and the counter deltas (TW, TWRecycled, TCPTimeWaitOverflow, PAWSEstab, PAWSTimewait, TCPACKSkippedTimeWait); and, with CAP_BPF and CAP_PERFMON (or root), the processes that opened connections to each destination meanwhile (from connection events, as `sockstat events` sees them)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -l color -d 'When to use colour' -r -f -a "auto\t'Only when standard output is a terminal and `NO_COLOR` is not set'
always\t'Always'
never\t'Never'"
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -s z -s j -d 'Only this zone (network namespace): a name from -Z (global, an `ip netns` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -l watch -d 'Refresh every SECONDS (default 2): redrawn in place on a terminal (Ctrl-C to stop); otherwise each refresh is printed after a \'=== TIME ===\' line, or as one JSON document per line with --json' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -l count -d 'Stop after N refreshes. Implies --watch' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -s 4 -d 'Only IPv4 sockets (with -6: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -s 6 -d 'Only IPv6 sockets (with -4: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -s L -d 'Hide Internet sockets whose local or remote address is loopback (127/8, ::1)'
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -l json -d 'One JSON document: {"version":1,"range","settings","time_wait","interval_s", "destinations":[{"local_address","remote_address","remote_port","count","states", "usage",...}],"servers","server_counters","warnings"}'
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -s q -d 'Do not print the header lines'
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -s v -d 'Print details with every warning'
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_using_subcommand ports" -s Z -d 'Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row\'s)'
complete -c sockstat -n "__fish_sockstat_using_subcommand serve" -l listen -d 'Address and port to serve /metrics on. Loopback by default: the metrics name processes, addresses and ports' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand serve" -l top -d 'Destinations the ephemeral-port metrics show, over all zones, highest share of the port range first (bounds their label cardinality)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand serve" -l scrape-budget -d 'Longest a scrape waits for a fresh collection; past it, the last collection is served with its age (sockstat_snapshot_age_seconds)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand serve" -l web.config.file -d 'The Prometheus exporter toolkit\'s web configuration file (as node_exporter\'s): TLS, client certificates, basic-auth users with bcrypt hashes, extra headers, a rate limit. Checked at start; read again when it or a file it names changes' -r -F
complete -c sockstat -n "__fish_sockstat_using_subcommand serve" -s Z -d 'Every zone (network namespace) on the host, as `sockstat -Z` finds and names them, each read inside it: every per-zone metric gets that zone\'s label. Needs CAP_SYS_ADMIN'
complete -c sockstat -n "__fish_sockstat_using_subcommand serve" -l events -d 'Also export connection events (as `sockstat events` traces them) and dropped packets: connect-latency and accept-wait histograms by port (the first 32 ports, the rest as port="other"), connections by side, failures by reason, closes by how they ended, events lost, and drops by reason and protocol. Needs CAP_BPF and CAP_PERFMON (or root) at start; the programs stay attached after the capabilities are dropped'
complete -c sockstat -n "__fish_sockstat_using_subcommand serve" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s p -d 'Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l sport -d 'Only Internet sockets whose local port is in PORTS (as -p): a server\'s own port, or a client\'s ephemeral one' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l dport -d 'Only Internet sockets whose remote port is in PORTS (as -p): the server port a client connected to' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l src -d 'Only sockets whose local address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l dst -d 'Only sockets whose remote address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l state -d 'Only sockets in these states: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l pid -d 'Only sockets held by these processes (comma-separated pids)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l user -d 'Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l command -d 'Only sockets whose holder\'s command name is NAME (a glob when it has * or ?)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l connected-to -d 'Only the connections to these listening ports (e.g. 5432,8000-8100), seen from both ends. Implies -c' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s z -s j -d 'Only this zone (network namespace): a name from -Z (global, an `ip netns` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l source -d 'Where the socket table comes from' -r -f -a "auto\t'sock_diag netlink, falling back to /proc/net text for any family whose dump fails'
netlink\t'sock_diag only; a failed dump is an error'
proc\t'/proc/net text only (no socket cookies)'"
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l owner-scan -d 'How the owner scan reads every process\'s open files' -r -f -a "auto\t'The kernel\'s BPF task_file iterator where it can run (root or CAP_BPF+CAP_PERFMON, kernel BTF, Linux 5.11+), else /proc'
proc\t'/proc/PID/fd only'
bpf\t'The BPF iterator; where it cannot run, /proc with a warning saying why'"
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l id -d 'Only the socket with this id (the inode: -i\'s ID column, "id" in JSON); picks one end of a loopback connection' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l cookie -d 'Only the socket with this cookie ("cookie" in JSON, `sockstat --events`)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s o -l output -d 'Write the picture to FILE (SVG)' -r -F
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l interval -d 'Seconds between samples (fractions allowed, 0.001 to 60)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l duration -d 'How long to trace, in seconds from the connection\'s first sample, and how long to wait for one to match (the trace also ends when the connection closes or on Ctrl-C; what was sampled is still drawn)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s 4 -d 'Only IPv4 sockets (with -6: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s 6 -d 'Only IPv6 sockets (with -4: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s c -d 'Only connected sockets (with a remote end: ESTABLISHED, SYN_SENT, ..., TIME_WAIT)'
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s l -d 'Only listening sockets (TCP LISTEN; for kill, bound unconnected UDP sockets too)'
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s L -d 'Hide Internet sockets whose local or remote address is loopback (127/8, ::1)'
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s Z -d 'Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row\'s)'
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l no-owners -d 'Skip the /proc owner scan (fastest): no process is named (owners_status "not_requested" in JSON; the listing leaves out its COMMAND, PID and FD columns)'
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -l json -d 'Print each sample as a JSON line on stdout as it is taken, then one line with the connection and the summary'
complete -c sockstat -n "__fish_sockstat_using_subcommand trace" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s p -d 'Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l sport -d 'Only Internet sockets whose local port is in PORTS (as -p): a server\'s own port, or a client\'s ephemeral one' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l dport -d 'Only Internet sockets whose remote port is in PORTS (as -p): the server port a client connected to' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l src -d 'Only sockets whose local address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l dst -d 'Only sockets whose remote address is ADDR or in ADDR/LEN' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s P -d 'Protocols: tcp, udp, udplite, raw, icmp (ping sockets), sctp, mptcp, packet, unix, netlink (comma-separated). Default: all the kernel has except packet and netlink, and the sockets no table lists (a socket never bound is selected by the protocol the kernel names for it: an unbound UDP socket is one of -P udp)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l state -d 'Only sockets in these states: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l pid -d 'Only sockets held by these processes (comma-separated pids)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l user -d 'Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l command -d 'Only sockets whose holder\'s command name is NAME (a glob when it has * or ?)' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l connected-to -d 'Only the connections to these listeners, seen from both ends, whatever the transport: ports (5432) and unix listeners by path (/run/postgresql/.s.PGSQL.5432) or abstract name (@name), comma-separated. Implies -c' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s z -s j -d 'Only this zone (network namespace): a name from -Z (global, an `ip netns` name, a container or pod name), a container id prefix, or a namespace inode. Its sockets, counters and sysctls are read inside it' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l source -d 'Where the socket table comes from' -r -f -a "auto\t'sock_diag netlink, falling back to /proc/net text for any family whose dump fails'
netlink\t'sock_diag only; a failed dump is an error'
proc\t'/proc/net text only (no socket cookies)'"
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l owner-scan -d 'How the owner scan reads every process\'s open files' -r -f -a "auto\t'The kernel\'s BPF task_file iterator where it can run (root or CAP_BPF+CAP_PERFMON, kernel BTF, Linux 5.11+), else /proc'
proc\t'/proc/PID/fd only'
bpf\t'The BPF iterator; where it cannot run, /proc with a warning saying why'"
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s d -l interval -d 'Seconds between refreshes (fractions allowed); the first rates appear after one' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l by -d 'Rows per process, connection, remote address or local port' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l sort -d 'The column rows are sorted by, largest first: rate, send, recv, conns, retrans, rtt, findings, name' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l rescan -d 'The longest the holders found by one walk of every process\'s descriptors are used (0: a walk at every refresh); a socket no walk has seen makes a walk at once' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l count -d 'Stop after N refreshes' -r
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l color -d 'When to use colour' -r -f -a "auto\t'Only when standard output is a terminal and `NO_COLOR` is not set'
always\t'Always'
never\t'Never'"
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s 4 -d 'Only IPv4 sockets (with -6: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s 6 -d 'Only IPv6 sockets (with -4: IPv4 and IPv6)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s c -d 'Only connected sockets (with a remote end: ESTABLISHED, SYN_SENT, ..., TIME_WAIT, connected datagram and unix sockets)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s l -d 'Only listening sockets (TCP LISTEN, bound unconnected datagram sockets, unix listeners)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s L -d 'Hide Internet sockets whose local or remote address is loopback (127/8, ::1)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s Z -d 'Every zone (network namespace) on the host, each read inside it (a ZONE column or field names each row\'s)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l no-owners -d 'Skip the /proc owner scan (fastest): no process is named (owners_status "not_requested" in JSON; the listing leaves out its COMMAND, PID and FD columns)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s b -l batch -d 'Write refreshes to standard output instead of the screen (text as top -b, or --json)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -l json -d 'One JSON object per refresh and line (implies --batch)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s q -d 'No header line (batch text)'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s v -d 'Print details with every warning'
complete -c sockstat -n "__fish_sockstat_using_subcommand top" -s h -l help -d 'Print help'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "counters" -d 'Kernel TCP/IP counters as deltas over an interval, with their meanings'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "diagnose" -d 'What limits each TCP connection, and what to change'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "drops" -d 'Packets the kernel dropped, by drop reason, protocol and port, over SECONDS'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "events" -d 'Every TCP connect, accept, close and failed connect as it happens, with its process'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "kill" -d 'Close the TCP and UDP connections the filters select, from outside their processes'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "ports" -d 'Ephemeral-port use by destination and TIME-WAIT on both sides, with advice'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "serve" -d 'A Prometheus exporter: socket, listen-queue, ephemeral-port, diagnosis and counter metrics'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "trace" -d 'Sample one TCP connection over time and draw it (SVG): acked bytes, windows, in flight'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "top" -d 'Who is using the network right now, and why the slow connections are slow'
complete -c sockstat -n "__fish_sockstat_using_subcommand help; and not __fish_seen_subcommand_from counters diagnose drops events kill ports serve trace top help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
