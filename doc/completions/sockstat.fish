complete -c sockstat -s p -d 'Only Internet sockets whose local or remote port is in PORTS (e.g. 22,80,8000-8100)' -r
complete -c sockstat -l src -d 'Only sockets whose local address is ADDR or in ADDR/LEN' -r
complete -c sockstat -l dst -d 'Only sockets whose remote address is ADDR or in ADDR/LEN' -r
complete -c sockstat -s P -d 'Protocols: tcp, udp, udplite, raw, sctp, mptcp, packet, unix (comma-separated). Default: all the kernel has except packet' -r
complete -c sockstat -l state -d 'Only sockets in these states: ESTABLISHED SYN_SENT SYN_RECV FIN_WAIT1 FIN_WAIT2 TIME_WAIT CLOSE CLOSE_WAIT LAST_ACK LISTEN CLOSING UNCONN (comma-separated)' -r
complete -c sockstat -l pid -d 'Only sockets held by these processes (comma-separated pids)' -r
complete -c sockstat -l user -d 'Only sockets whose holder runs as USER (name or uid), or, with no known holder, whose kernel uid is USER' -r
complete -c sockstat -l command -d 'Only sockets whose holder\'s command name is NAME (a glob when it has * or ?)' -r
complete -c sockstat -l color -d 'When to use colour' -r -f -a "auto\t'Only when standard output is a terminal and `NO_COLOR` is not set'
always\t'Always'
never\t'Never'"
complete -c sockstat -l source -d 'Where the socket table comes from' -r -f -a "auto\t'sock_diag netlink, falling back to /proc/net text for any family whose dump fails'
netlink\t'sock_diag only; a failed dump is an error'
proc\t'/proc/net text only (no socket cookies)'"
complete -c sockstat -l proc-root -d 'Read processes from this directory instead of /proc (testing, post-mortem trees)' -r -F
complete -c sockstat -l record-netlink -d 'Save every raw sock_diag reply in DIR (for bug reports; replay with --replay-netlink)' -r -F
complete -c sockstat -l replay-netlink -d 'Replay sock_diag replies saved with --record-netlink instead of asking the kernel' -r -F
complete -c sockstat -l generate -d 'Print the man page or a shell completion script, generated from these flag definitions' -r -f -a "man\t'The man page (roff)'
bash\t'Bash completion'
zsh\t'Zsh completion'
fish\t'Fish completion'"
complete -c sockstat -s 4 -d 'Show IPv4 sockets'
complete -c sockstat -s 6 -d 'Show IPv6 sockets'
complete -c sockstat -s u -d 'Show Unix domain sockets'
complete -c sockstat -s c -d 'Show connected sockets (with a remote end: ESTABLISHED, SYN_SENT, ..., TIME_WAIT, connected datagram and unix sockets)'
complete -c sockstat -s l -d 'Show listening sockets (TCP LISTEN, bound unconnected datagram sockets, unix listeners)'
complete -c sockstat -s L -d 'Hide Internet sockets whose local or remote address is loopback (127/8, ::1)'
complete -c sockstat -s s -d 'Show the STATE column'
complete -c sockstat -s n -d 'Show numeric uids (no user name lookup)'
complete -c sockstat -s q -d 'Do not print the header line'
complete -c sockstat -s H -d 'Do not print the header line (illumos spelling of -q)'
complete -c sockstat -s w -d 'Never truncate columns'
complete -c sockstat -s a -d 'Show process arguments (ARGS column; "args" in JSON)'
complete -c sockstat -s i -d 'Show the socket id (inode) in an ID column'
complete -c sockstat -s T -l tcp-info -d 'TCP internals: RTT, cwnd, windows and scaling, unacked, retransmits, delivery rate, share of busy time limited by the peer\'s window or our send buffer ("tcp" object in JSON)'
complete -c sockstat -s C -d 'Show the congestion control algorithm (CC column)'
complete -c sockstat -s m -l memory -d 'Socket memory: receive and send buffer use and limits, drops ("memory" object in JSON)'
complete -c sockstat -s v -d 'Print details with every warning'
complete -c sockstat -l summary -d 'Counts by protocol, family and state instead of rows'
complete -c sockstat -l json -d 'One JSON document (schema version 1; see doc/json-schema.md)'
complete -c sockstat -l csv -d 'CSV with a header row'
complete -c sockstat -l no-owners -d 'Skip the /proc owner scan (fastest; process columns show \'?\')'
complete -c sockstat -s h -l help -d 'Print help'
complete -c sockstat -s V -l version -d 'Print version'
