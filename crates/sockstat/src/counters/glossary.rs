//! What each well-known counter means: the glossary the counters report, the exporter's HELP
//! text and the diagnosis rules read ([`MEANINGS`], [`describe`]). Data only.

/// What a well-known counter means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meaning {
    /// Group (`Tcp`, `TcpExt`, ...).
    pub group: &'static str,
    /// Name within the group.
    pub name: &'static str,
    /// One line for a person.
    pub text: &'static str,
    /// A rise signals trouble (drops, overflows, timeouts, rejects).
    pub trouble: bool,
    /// A level, not a count: it can go down without being reset.
    pub gauge: bool,
}

const fn m(group: &'static str, name: &'static str, text: &'static str) -> Meaning {
    Meaning {
        group,
        name,
        text,
        trouble: false,
        gauge: false,
    }
}

const fn t(group: &'static str, name: &'static str, text: &'static str) -> Meaning {
    Meaning {
        group,
        name,
        text,
        trouble: true,
        gauge: false,
    }
}

const fn g(group: &'static str, name: &'static str, text: &'static str) -> Meaning {
    Meaning {
        group,
        name,
        text,
        trouble: false,
        gauge: true,
    }
}

/// The meanings table: RFC 4293/4022/4113 MIB counters and the Linux extensions of
/// `net/ipv4/proc.c` (`snmp4_net_list`) and `include/uapi/linux/snmp.h`, with the trouble flags
/// for drops, overflows, timeouts and rejects (the rules' counters: doc/reference/linux.md#counters).
pub static MEANINGS: &[Meaning] = &[
    // Ip (RFC 4293)
    g(
        "Ip",
        "Forwarding",
        "1 = this host forwards IP packets (a router), 2 = it does not",
    ),
    g("Ip", "DefaultTTL", "TTL put on outgoing packets"),
    m("Ip", "InReceives", "IP packets received"),
    t(
        "Ip",
        "InHdrErrors",
        "received packets dropped for a bad IP header",
    ),
    t(
        "Ip",
        "InAddrErrors",
        "received packets dropped for a bad destination address",
    ),
    m("Ip", "ForwDatagrams", "packets forwarded to another host"),
    t(
        "Ip",
        "InUnknownProtos",
        "received packets for a protocol with no handler",
    ),
    t(
        "Ip",
        "InDiscards",
        "received packets discarded without an error (e.g. no memory)",
    ),
    m(
        "Ip",
        "InDelivers",
        "received packets passed to TCP, UDP, ICMP, ...",
    ),
    m("Ip", "OutRequests", "packets handed to IP for sending"),
    t(
        "Ip",
        "OutDiscards",
        "outgoing packets discarded without an error (e.g. no memory)",
    ),
    t(
        "Ip",
        "OutNoRoutes",
        "outgoing packets dropped: no route to the destination",
    ),
    t("Ip", "ReasmTimeout", "fragment reassemblies that timed out"),
    m(
        "Ip",
        "ReasmReqds",
        "fragments received that needed reassembly",
    ),
    m("Ip", "ReasmOKs", "packets reassembled from fragments"),
    t("Ip", "ReasmFails", "fragment reassemblies that failed"),
    m("Ip", "FragOKs", "packets fragmented for sending"),
    t(
        "Ip",
        "FragFails",
        "packets that needed fragmenting but could not be (DF set)",
    ),
    m("Ip", "FragCreates", "fragments created"),
    m("Ip", "OutTransmits", "packets sent, after fragmentation"),
    // IpExt
    t("IpExt", "InNoRoutes", "received packets dropped: no route"),
    t(
        "IpExt",
        "InTruncatedPkts",
        "received packets shorter than their IP length",
    ),
    m("IpExt", "InMcastPkts", "multicast packets received"),
    m("IpExt", "OutMcastPkts", "multicast packets sent"),
    m("IpExt", "InBcastPkts", "broadcast packets received"),
    m("IpExt", "OutBcastPkts", "broadcast packets sent"),
    m("IpExt", "InOctets", "bytes received in IP packets"),
    m("IpExt", "OutOctets", "bytes sent in IP packets"),
    t(
        "IpExt",
        "InCsumErrors",
        "received packets with a bad IP checksum",
    ),
    m(
        "IpExt",
        "InNoECTPkts",
        "received packets without ECN capability",
    ),
    m(
        "IpExt",
        "InCEPkts",
        "received packets marked Congestion Experienced (ECN)",
    ),
    t(
        "IpExt",
        "ReasmOverlaps",
        "fragments dropped for overlapping another fragment",
    ),
    // Icmp
    m("Icmp", "InMsgs", "ICMP messages received"),
    t("Icmp", "InErrors", "ICMP messages received with errors"),
    t(
        "Icmp",
        "InCsumErrors",
        "ICMP messages received with a bad checksum",
    ),
    m(
        "Icmp",
        "InDestUnreachs",
        "ICMP destination-unreachable messages received",
    ),
    m("Icmp", "InEchos", "pings received"),
    m("Icmp", "InEchoReps", "ping replies received"),
    m("Icmp", "OutMsgs", "ICMP messages sent"),
    t(
        "Icmp",
        "OutErrors",
        "ICMP messages not sent because of errors",
    ),
    t(
        "Icmp",
        "OutRateLimitGlobal",
        "ICMP messages not sent: global rate limit",
    ),
    t(
        "Icmp",
        "OutRateLimitHost",
        "ICMP messages not sent: per-host rate limit",
    ),
    m(
        "Icmp",
        "OutDestUnreachs",
        "ICMP destination-unreachable messages sent (UDP to a closed port, ...)",
    ),
    m("Icmp", "OutEchos", "pings sent"),
    m("Icmp", "OutEchoReps", "ping replies sent"),
    // Tcp (RFC 4022)
    g(
        "Tcp",
        "RtoAlgorithm",
        "retransmission timeout algorithm (1 = other: Linux's)",
    ),
    g("Tcp", "RtoMin", "minimum retransmission timeout, ms"),
    g("Tcp", "RtoMax", "maximum retransmission timeout, ms"),
    g("Tcp", "MaxConn", "connection limit (-1: none)"),
    m("Tcp", "ActiveOpens", "connect()s started (SYN sent)"),
    m(
        "Tcp",
        "PassiveOpens",
        "connections accepted from a listener (SYN received and answered)",
    ),
    t(
        "Tcp",
        "AttemptFails",
        "connect()s that failed: refused (RST), timed out, or reset during the handshake",
    ),
    t(
        "Tcp",
        "EstabResets",
        "established connections reset (RST received or sent)",
    ),
    g(
        "Tcp",
        "CurrEstab",
        "connections now ESTABLISHED or CLOSE_WAIT",
    ),
    m("Tcp", "InSegs", "TCP segments received"),
    m(
        "Tcp",
        "OutSegs",
        "TCP segments sent, not counting retransmissions",
    ),
    t("Tcp", "RetransSegs", "TCP segments retransmitted"),
    t(
        "Tcp",
        "InErrs",
        "TCP segments received with errors (bad checksum, bad header)",
    ),
    t(
        "Tcp",
        "OutRsts",
        "resets sent (connection refused or aborted)",
    ),
    t(
        "Tcp",
        "InCsumErrors",
        "TCP segments received with a bad checksum",
    ),
    // TcpExt (net/ipv4/proc.c)
    t(
        "TcpExt",
        "SyncookiesSent",
        "SYN cookies sent: a listener's SYN queue was full",
    ),
    m(
        "TcpExt",
        "SyncookiesRecv",
        "valid SYN cookies received back",
    ),
    t("TcpExt", "SyncookiesFailed", "invalid SYN cookies received"),
    m(
        "TcpExt",
        "EmbryonicRsts",
        "resets received for connections still in SYN_RECV",
    ),
    t(
        "TcpExt",
        "PruneCalled",
        "receive queues pruned under memory limits",
    ),
    t(
        "TcpExt",
        "RcvPruned",
        "received data dropped by pruning (memory limits)",
    ),
    t(
        "TcpExt",
        "OfoPruned",
        "out-of-order data dropped by pruning (memory limits)",
    ),
    m(
        "TcpExt",
        "OutOfWindowIcmps",
        "ICMP errors dropped: outside the window",
    ),
    m(
        "TcpExt",
        "LockDroppedIcmps",
        "ICMP errors dropped: socket busy",
    ),
    m("TcpExt", "ArpFilter", "ARP packets filtered"),
    m(
        "TcpExt",
        "TW",
        "TIME-WAIT entries created (normal 60 s timeout)",
    ),
    m(
        "TcpExt",
        "TWRecycled",
        "connect() reused a port still in TIME-WAIT (tcp_tw_reuse)",
    ),
    m(
        "TcpExt",
        "TWKilled",
        "TIME-WAIT entries created with a short timeout",
    ),
    t(
        "TcpExt",
        "PAWSActive",
        "SYN-ACKs dropped by PAWS (timestamp too old) during connect()",
    ),
    t(
        "TcpExt",
        "PAWSEstab",
        "segments dropped by PAWS (timestamp too old); before 6.16 also TIME-WAIT SYN rejects",
    ),
    t("TcpExt", "PAWSOldAck", "old ACKs dropped by PAWS"),
    t(
        "TcpExt",
        "PAWSTimewait",
        "segments to a TIME-WAIT entry rejected by PAWS (a reused client port)",
    ),
    m(
        "TcpExt",
        "BeyondWindow",
        "segments dropped: beyond the receive window",
    ),
    m(
        "TcpExt",
        "TSEcrRejected",
        "segments dropped: echoed timestamp invalid",
    ),
    m(
        "TcpExt",
        "DelayedACKs",
        "delayed ACKs sent (the delayed-ACK timer fired)",
    ),
    m(
        "TcpExt",
        "DelayedACKLocked",
        "delayed ACKs postponed: the socket was in use",
    ),
    m(
        "TcpExt",
        "DelayedACKLost",
        "duplicate data received: our ACK was probably lost",
    ),
    t(
        "TcpExt",
        "ListenOverflows",
        "connections dropped: a listener's accept queue was full",
    ),
    t(
        "TcpExt",
        "ListenDrops",
        "SYNs and connections a listener dropped, for any reason",
    ),
    m(
        "TcpExt",
        "TCPHPHits",
        "segments handled by the header-prediction fast path",
    ),
    m("TcpExt", "TCPPureAcks", "ACKs received without data"),
    m("TcpExt", "TCPHPAcks", "ACKs handled by the fast path"),
    m("TcpExt", "TCPRenoRecovery", "Reno fast recoveries"),
    m("TcpExt", "TCPSackRecovery", "SACK fast recoveries"),
    m(
        "TcpExt",
        "TCPSACKReneging",
        "peers that discarded SACKed data",
    ),
    m("TcpExt", "TCPSACKReorder", "reordering detected by SACK"),
    m(
        "TcpExt",
        "TCPTSReorder",
        "reordering detected by timestamps",
    ),
    m(
        "TcpExt",
        "TCPFullUndo",
        "congestion window reductions fully undone (spurious)",
    ),
    m(
        "TcpExt",
        "TCPPartialUndo",
        "congestion window reductions partly undone",
    ),
    m("TcpExt", "TCPDSACKUndo", "reductions undone after D-SACK"),
    m("TcpExt", "TCPLossUndo", "loss recoveries undone (spurious)"),
    t("TcpExt", "TCPLostRetransmit", "retransmissions lost again"),
    m(
        "TcpExt",
        "TCPFastRetrans",
        "fast retransmissions (loss detected by duplicate ACKs/SACK)",
    ),
    m(
        "TcpExt",
        "TCPSlowStartRetrans",
        "retransmissions in slow start after a timeout",
    ),
    t(
        "TcpExt",
        "TCPTimeouts",
        "retransmission timeouts (RTO fired, including SYN timeouts)",
    ),
    m("TcpExt", "TCPLossProbes", "tail loss probes sent"),
    m(
        "TcpExt",
        "TCPLossProbeRecovery",
        "losses repaired by a tail loss probe",
    ),
    m(
        "TcpExt",
        "TCPRcvCollapsed",
        "received segments collapsed to save memory",
    ),
    m(
        "TcpExt",
        "TCPBacklogCoalesce",
        "segments merged in the socket backlog",
    ),
    m(
        "TcpExt",
        "TCPDSACKOldSent",
        "D-SACKs sent for old duplicate data",
    ),
    m(
        "TcpExt",
        "TCPDSACKOfoSent",
        "D-SACKs sent for out-of-order duplicate data",
    ),
    m(
        "TcpExt",
        "TCPDSACKRecv",
        "D-SACKs received (a retransmission was not needed)",
    ),
    m(
        "TcpExt",
        "TCPDSACKOfoRecv",
        "D-SACKs received for out-of-order data",
    ),
    m(
        "TcpExt",
        "TCPAbortOnData",
        "connections reset: data arrived after close()",
    ),
    m(
        "TcpExt",
        "TCPAbortOnClose",
        "connections reset: closed with unread data",
    ),
    t(
        "TcpExt",
        "TCPAbortOnMemory",
        "connections reset: out of TCP memory or too many orphans",
    ),
    t(
        "TcpExt",
        "TCPAbortOnTimeout",
        "connections killed after too many retransmissions or probes",
    ),
    m(
        "TcpExt",
        "TCPAbortOnLinger",
        "connections reset: SO_LINGER timeout",
    ),
    t(
        "TcpExt",
        "TCPAbortFailed",
        "resets that could not be sent (no memory)",
    ),
    t(
        "TcpExt",
        "TCPMemoryPressures",
        "times TCP entered memory pressure (tcp_mem)",
    ),
    m(
        "TcpExt",
        "TCPMemoryPressuresChrono",
        "milliseconds spent in TCP memory pressure",
    ),
    m("TcpExt", "TCPSACKDiscard", "invalid SACK blocks ignored"),
    m(
        "TcpExt",
        "TCPSpuriousRTOs",
        "retransmission timeouts found spurious (F-RTO)",
    ),
    t(
        "TcpExt",
        "TCPMD5NotFound",
        "segments dropped: MD5 signature expected but absent",
    ),
    t(
        "TcpExt",
        "TCPMD5Unexpected",
        "segments dropped: MD5 signature not expected",
    ),
    t(
        "TcpExt",
        "TCPMD5Failure",
        "segments dropped: bad MD5 signature",
    ),
    m("TcpExt", "TCPSackShifted", "SACKed segments shifted"),
    m("TcpExt", "TCPSackMerged", "SACKed segments merged"),
    m(
        "TcpExt",
        "TCPSackShiftFallback",
        "SACKs that could not be shifted",
    ),
    t(
        "TcpExt",
        "TCPBacklogDrop",
        "segments dropped: the socket backlog was full",
    ),
    t(
        "TcpExt",
        "PFMemallocDrop",
        "segments dropped: memory reserved for swap",
    ),
    m(
        "TcpExt",
        "TCPMinTTLDrop",
        "segments dropped: TTL under IP_MINTTL",
    ),
    t(
        "TcpExt",
        "TCPDeferAcceptDrop",
        "connections dropped by TCP_DEFER_ACCEPT (no data in time)",
    ),
    m(
        "TcpExt",
        "IPReversePathFilter",
        "packets dropped by reverse-path filtering",
    ),
    t(
        "TcpExt",
        "TCPTimeWaitOverflow",
        "connections closed without TIME-WAIT: tcp_max_tw_buckets reached",
    ),
    t(
        "TcpExt",
        "TCPReqQFullDoCookies",
        "SYN queue full: SYN cookies used",
    ),
    t(
        "TcpExt",
        "TCPReqQFullDrop",
        "SYNs dropped: SYN queue full and no SYN cookies",
    ),
    t(
        "TcpExt",
        "TCPRetransFail",
        "retransmissions that could not be sent",
    ),
    m("TcpExt", "TCPRcvCoalesce", "received segments coalesced"),
    m(
        "TcpExt",
        "TCPOFOQueue",
        "segments put in the out-of-order queue",
    ),
    t(
        "TcpExt",
        "TCPOFODrop",
        "out-of-order segments dropped (no receive memory)",
    ),
    m("TcpExt", "TCPOFOMerge", "out-of-order segments merged"),
    m(
        "TcpExt",
        "TCPChallengeACK",
        "challenge ACKs sent (RFC 5961)",
    ),
    m(
        "TcpExt",
        "TCPSYNChallenge",
        "challenge ACKs sent for a SYN on an open connection",
    ),
    m(
        "TcpExt",
        "TCPFastOpenActive",
        "TCP Fast Open connects that sent data with the SYN",
    ),
    m(
        "TcpExt",
        "TCPFastOpenActiveFail",
        "TCP Fast Open connects that fell back",
    ),
    m(
        "TcpExt",
        "TCPFastOpenPassive",
        "TCP Fast Open connections accepted",
    ),
    m(
        "TcpExt",
        "TCPFastOpenPassiveFail",
        "TCP Fast Open connections refused",
    ),
    t(
        "TcpExt",
        "TCPFastOpenListenOverflow",
        "TCP Fast Open requests over the listener's limit",
    ),
    m(
        "TcpExt",
        "TCPFastOpenCookieReqd",
        "TCP Fast Open cookie requests",
    ),
    m(
        "TcpExt",
        "TCPFastOpenBlackhole",
        "TCP Fast Open disabled after a black hole",
    ),
    m(
        "TcpExt",
        "TCPSpuriousRtxHostQueues",
        "retransmissions skipped: the original was still queued",
    ),
    m(
        "TcpExt",
        "BusyPollRxPackets",
        "packets received by busy polling",
    ),
    m(
        "TcpExt",
        "TCPAutoCorking",
        "small sends held back and merged (autocorking)",
    ),
    m(
        "TcpExt",
        "TCPFromZeroWindowAdv",
        "receive window reopened after advertising zero",
    ),
    m(
        "TcpExt",
        "TCPToZeroWindowAdv",
        "zero receive window advertised (a reader is slow)",
    ),
    m(
        "TcpExt",
        "TCPWantZeroWindowAdv",
        "zero window wanted but the window could not shrink",
    ),
    t(
        "TcpExt",
        "TCPSynRetrans",
        "SYN and SYN-ACK retransmissions (unanswered handshakes)",
    ),
    m(
        "TcpExt",
        "TCPOrigDataSent",
        "data segments sent, not counting retransmissions",
    ),
    m(
        "TcpExt",
        "TCPHystartTrainDetect",
        "HyStart ACK-train exits from slow start",
    ),
    m(
        "TcpExt",
        "TCPHystartTrainCwnd",
        "cwnd at HyStart ACK-train exits",
    ),
    m(
        "TcpExt",
        "TCPHystartDelayDetect",
        "HyStart delay exits from slow start",
    ),
    m(
        "TcpExt",
        "TCPHystartDelayCwnd",
        "cwnd at HyStart delay exits",
    ),
    m(
        "TcpExt",
        "TCPACKSkippedSynRecv",
        "rate-limited ACKs not sent in SYN_RECV",
    ),
    m(
        "TcpExt",
        "TCPACKSkippedPAWS",
        "rate-limited ACKs not sent after a PAWS reject",
    ),
    m(
        "TcpExt",
        "TCPACKSkippedSeq",
        "rate-limited ACKs not sent for out-of-window segments",
    ),
    m(
        "TcpExt",
        "TCPACKSkippedFinWait2",
        "rate-limited ACKs not sent in FIN_WAIT2",
    ),
    t(
        "TcpExt",
        "TCPACKSkippedTimeWait",
        "rate-limited ACKs not sent from TIME-WAIT (segments to a reused port)",
    ),
    m(
        "TcpExt",
        "TCPACKSkippedChallenge",
        "rate-limited challenge ACKs not sent",
    ),
    m(
        "TcpExt",
        "TCPWinProbe",
        "zero-window probes sent (the peer's window is closed)",
    ),
    m("TcpExt", "TCPKeepAlive", "keepalive probes sent"),
    m("TcpExt", "TCPMTUPFail", "path MTU probes that failed"),
    m("TcpExt", "TCPMTUPSuccess", "path MTU probes that succeeded"),
    m(
        "TcpExt",
        "TCPDelivered",
        "segments delivered (acknowledged) to peers",
    ),
    m(
        "TcpExt",
        "TCPDeliveredCE",
        "delivered segments that carried an ECN CE echo",
    ),
    m("TcpExt", "TCPAckCompressed", "ACKs compressed"),
    t(
        "TcpExt",
        "TCPZeroWindowDrop",
        "data dropped: it arrived when our receive window was zero",
    ),
    t("TcpExt", "TCPRcvQDrop", "data dropped: no receive memory"),
    t(
        "TcpExt",
        "TCPWqueueTooBig",
        "sends refused: the write queue was too big",
    ),
    m(
        "TcpExt",
        "TCPFastOpenPassiveAltKey",
        "TCP Fast Open cookies accepted with the backup key",
    ),
    m(
        "TcpExt",
        "TcpTimeoutRehash",
        "flow label rehashed after a timeout (path change)",
    ),
    m(
        "TcpExt",
        "TcpDuplicateDataRehash",
        "flow label rehashed after duplicate data",
    ),
    m(
        "TcpExt",
        "TCPDSACKRecvSegs",
        "segments covered by D-SACKs received",
    ),
    m(
        "TcpExt",
        "TCPDSACKIgnoredDubious",
        "D-SACKs ignored as dubious",
    ),
    m(
        "TcpExt",
        "TCPMigrateReqSuccess",
        "requests migrated to another listener (SO_REUSEPORT)",
    ),
    t(
        "TcpExt",
        "TCPMigrateReqFailure",
        "requests that could not be migrated to another listener",
    ),
    m(
        "TcpExt",
        "TCPPLBRehash",
        "flows rehashed by protective load balancing",
    ),
    // Udp and UdpLite (RFC 4113)
    m("Udp", "InDatagrams", "UDP datagrams delivered to sockets"),
    m(
        "Udp",
        "NoPorts",
        "UDP datagrams to a port nobody listens on",
    ),
    t(
        "Udp",
        "InErrors",
        "UDP datagrams dropped on receive (errors, full buffers)",
    ),
    m("Udp", "OutDatagrams", "UDP datagrams sent"),
    t(
        "Udp",
        "RcvbufErrors",
        "UDP datagrams dropped: the receive buffer was full",
    ),
    t(
        "Udp",
        "SndbufErrors",
        "UDP datagrams not sent: the send buffer was full",
    ),
    t("Udp", "InCsumErrors", "UDP datagrams with a bad checksum"),
    m(
        "Udp",
        "IgnoredMulti",
        "broadcast/multicast datagrams nobody wanted",
    ),
    t(
        "Udp",
        "MemErrors",
        "UDP datagrams dropped: memory accounting limits (udp_mem)",
    ),
    m("UdpLite", "InDatagrams", "UDP-Lite datagrams delivered"),
    m("UdpLite", "NoPorts", "UDP-Lite datagrams to a closed port"),
    t(
        "UdpLite",
        "InErrors",
        "UDP-Lite datagrams dropped on receive",
    ),
    m("UdpLite", "OutDatagrams", "UDP-Lite datagrams sent"),
    t(
        "UdpLite",
        "RcvbufErrors",
        "UDP-Lite datagrams dropped: receive buffer full",
    ),
    t(
        "UdpLite",
        "SndbufErrors",
        "UDP-Lite datagrams not sent: send buffer full",
    ),
    t(
        "UdpLite",
        "InCsumErrors",
        "UDP-Lite datagrams with a bad checksum",
    ),
    // Ip6, Udp6, Icmp6 (/proc/net/snmp6, RFC 4293 names with the group prefix)
    m("Ip6", "InReceives", "IPv6 packets received"),
    t(
        "Ip6",
        "InHdrErrors",
        "IPv6 packets dropped for a bad header",
    ),
    t("Ip6", "InTooBigErrors", "IPv6 packets too big to forward"),
    t("Ip6", "InNoRoutes", "IPv6 packets dropped: no route"),
    t(
        "Ip6",
        "InAddrErrors",
        "IPv6 packets dropped for a bad destination address",
    ),
    t(
        "Ip6",
        "InUnknownProtos",
        "IPv6 packets for a protocol with no handler",
    ),
    t(
        "Ip6",
        "InTruncatedPkts",
        "IPv6 packets shorter than their length",
    ),
    t("Ip6", "InDiscards", "IPv6 packets discarded on receive"),
    m("Ip6", "InDelivers", "IPv6 packets passed to upper layers"),
    m("Ip6", "OutForwDatagrams", "IPv6 packets forwarded"),
    m(
        "Ip6",
        "OutRequests",
        "IPv6 packets handed to IP for sending",
    ),
    t("Ip6", "OutDiscards", "outgoing IPv6 packets discarded"),
    t(
        "Ip6",
        "OutNoRoutes",
        "outgoing IPv6 packets dropped: no route",
    ),
    t("Ip6", "ReasmFails", "IPv6 reassemblies that failed"),
    t(
        "Ip6",
        "FragFails",
        "IPv6 packets that could not be fragmented",
    ),
    m("Ip6", "InOctets", "bytes received in IPv6 packets"),
    m("Ip6", "OutOctets", "bytes sent in IPv6 packets"),
    m(
        "Ip6",
        "OutTransmits",
        "IPv6 packets sent, after fragmentation",
    ),
    t("Ip6", "InCsumErrors", "IPv6 packets with a bad checksum"),
    m("Icmp6", "InMsgs", "ICMPv6 messages received"),
    t("Icmp6", "InErrors", "ICMPv6 messages received with errors"),
    m("Icmp6", "OutMsgs", "ICMPv6 messages sent"),
    t(
        "Icmp6",
        "OutErrors",
        "ICMPv6 messages not sent because of errors",
    ),
    t(
        "Icmp6",
        "InCsumErrors",
        "ICMPv6 messages with a bad checksum",
    ),
    m(
        "Icmp6",
        "InDestUnreachs",
        "ICMPv6 destination-unreachable messages received",
    ),
    m(
        "Icmp6",
        "OutDestUnreachs",
        "ICMPv6 destination-unreachable messages sent",
    ),
    m(
        "Udp6",
        "InDatagrams",
        "UDP/IPv6 datagrams delivered to sockets",
    ),
    m(
        "Udp6",
        "NoPorts",
        "UDP/IPv6 datagrams to a port nobody listens on",
    ),
    t("Udp6", "InErrors", "UDP/IPv6 datagrams dropped on receive"),
    m("Udp6", "OutDatagrams", "UDP/IPv6 datagrams sent"),
    t(
        "Udp6",
        "RcvbufErrors",
        "UDP/IPv6 datagrams dropped: receive buffer full",
    ),
    t(
        "Udp6",
        "SndbufErrors",
        "UDP/IPv6 datagrams not sent: send buffer full",
    ),
    t(
        "Udp6",
        "InCsumErrors",
        "UDP/IPv6 datagrams with a bad checksum",
    ),
    m(
        "Udp6",
        "IgnoredMulti",
        "UDP/IPv6 multicast datagrams nobody wanted",
    ),
    t(
        "Udp6",
        "MemErrors",
        "UDP/IPv6 datagrams dropped: udp_mem limits",
    ),
    g(
        "MPTcpExt",
        "MPCurrEstab",
        "MPTCP connections now established",
    ),
];

/// The meaning of a counter, if it is in [`MEANINGS`].
pub fn describe(group: &str, name: &str) -> Option<&'static Meaning> {
    MEANINGS.iter().find(|m| m.group == group && m.name == name)
}
