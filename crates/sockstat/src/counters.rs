//! The kernel's TCP/IP counters (`/proc/net/snmp`, `/proc/net/netstat`, `/proc/net/snmp6`) as a
//! [`CounterSet`], their deltas over an interval, and what each well-known counter means.
//!
//! Pure: the files are read by `sys::counters`; this module pairs names with values
//! (always by name: kernels insert new names in the middle of a line, doc/reference/linux.md#counters),
//! subtracts, sorts and explains. It never reads the system and never prints.

use std::collections::BTreeMap;

use serde::Serialize;
use sockstat_wire::snmp;

use crate::model::{Warning, WarningCode};
use crate::zone::Zone;

/// One counter's identity: its group (`Tcp`, `TcpExt`, `Ip6`, ...) and name (`ListenOverflows`).
///
/// snmp6 names carry their group as a prefix (`Ip6InReceives`); the prefix is split off so every
/// counter is written the same way, `Ip6.InReceives`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct CounterName {
    /// The group, as the file names it (`Tcp`, `TcpExt`, `IpExt`, `MPTcpExt`, `Ip6`, `Udp6`, ...).
    pub group: String,
    /// The counter within the group.
    pub name: String,
}

impl CounterName {
    /// A name from its parts.
    pub fn new(group: &str, name: &str) -> CounterName {
        CounterName {
            group: group.to_string(),
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for CounterName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.group, self.name)
    }
}

/// A counter file that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterParseError {
    /// Which file (`snmp`, `netstat`, `snmp6`).
    pub file: &'static str,
    /// What the decoder said.
    pub message: String,
}

impl std::fmt::Display for CounterParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot parse /proc/net/{}: {}", self.file, self.message)
    }
}

impl std::error::Error for CounterParseError {}

/// Every counter of one network namespace at one moment, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterSet {
    values: BTreeMap<CounterName, i64>,
}

impl CounterSet {
    /// Parses the three files' contents; a file that is absent (`None`: IPv6 disabled, a fake
    /// /proc) contributes nothing.
    pub fn parse(
        snmp_text: Option<&str>,
        netstat_text: Option<&str>,
        snmp6_text: Option<&str>,
    ) -> Result<CounterSet, CounterParseError> {
        let mut set = CounterSet::default();
        for (file, text) in [("snmp", snmp_text), ("netstat", netstat_text)] {
            let Some(text) = text else { continue };
            let parsed = snmp::parse_paired(text).map_err(|e| CounterParseError {
                file,
                message: e.to_string(),
            })?;
            for c in parsed {
                set.values
                    .insert(CounterName::new(c.group, c.name), c.value);
            }
        }
        if let Some(text) = snmp6_text {
            let parsed = snmp::parse_snmp6(text).map_err(|e| CounterParseError {
                file: "snmp6",
                message: e.to_string(),
            })?;
            for c in parsed {
                let name = c.name.strip_prefix(c.group).filter(|n| !n.is_empty());
                let name = name.unwrap_or(c.name);
                set.values.insert(CounterName::new(c.group, name), c.value);
            }
        }
        Ok(set)
    }

    /// A set from explicit values (tests, library users with their own source).
    pub fn from_values<'a>(
        values: impl IntoIterator<Item = (&'a str, &'a str, i64)>,
    ) -> CounterSet {
        CounterSet {
            values: values
                .into_iter()
                .map(|(g, n, v)| (CounterName::new(g, n), v))
                .collect(),
        }
    }

    /// One counter's value, if this kernel has it.
    pub fn get(&self, group: &str, name: &str) -> Option<i64> {
        // BTreeMap lookups need an owned key; the sets are small (~400 entries).
        self.values.get(&CounterName::new(group, name)).copied()
    }

    /// Every counter, sorted by group then name.
    pub fn iter(&self) -> impl Iterator<Item = (&CounterName, i64)> {
        self.values.iter().map(|(k, v)| (k, *v))
    }

    /// How many counters.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no counter was read.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// How one counter moved from `self` (earlier) to `later`; `None` when either lacks it.
    pub fn change(&self, later: &CounterSet, group: &str, name: &str) -> Option<Change> {
        let before = self.get(group, name)?;
        let after = later.get(group, name)?;
        Some(Change::between(
            before,
            after,
            describe(group, name).is_some_and(|m| m.gauge),
        ))
    }
}

/// How a counter moved over an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// It rose by this much (or, for a gauge such as `Tcp.CurrEstab`, changed by this much,
    /// possibly negative).
    Delta(i64),
    /// A counter went down: the namespace was recreated, the counter was reset or it wrapped.
    /// The delta is unknown.
    Reset {
        /// The earlier value.
        before: i64,
        /// The later value.
        after: i64,
    },
}

impl Change {
    /// The change from `before` to `after`. Counters only grow, so a decrease is a reset;
    /// gauges move both ways.
    pub fn between(before: i64, after: i64, gauge: bool) -> Change {
        if gauge || after >= before {
            Change::Delta(after.wrapping_sub(before))
        } else {
            Change::Reset { before, after }
        }
    }

    /// The delta when known.
    pub fn delta(self) -> Option<i64> {
        match self {
            Change::Delta(d) => Some(d),
            Change::Reset { .. } => None,
        }
    }
}

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

/// One line of a counters report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterRow {
    /// The zone (network namespace) the counter belongs to; present with `-z`/`-Z`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<Zone>,
    /// Group (`TcpExt`).
    pub group: String,
    /// Name (`ListenOverflows`).
    pub name: String,
    /// The value since boot (namespace creation); present when no interval was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// The change over the interval; `null` when the counter went down (see `reset`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<i64>,
    /// The counter went down during the interval (reset, wrapped, namespace recreated).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    /// One line for a person; `null` for counters the table does not know.
    pub meaning: Option<&'static str>,
    /// A rise of this counter signals trouble.
    pub trouble: bool,
}

impl CounterRow {
    /// The number shown: the delta, or the value.
    pub fn amount(&self) -> Option<i64> {
        self.delta.or(self.value)
    }
}

/// The counters report: rows sorted smallest first, the biggest movers last (as
/// doc/reference/cases.md#case-003-an-illumos-time-wait-review's DTrace aggregation prints them, so they sit just above the prompt).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterReport {
    /// The interval the deltas cover, seconds; `None` for values since boot.
    pub interval_s: Option<f64>,
    /// The rows shown.
    pub counters: Vec<CounterRow>,
    /// Rows left out because they were zero (shown with `--all`).
    pub hidden_zero: usize,
    /// What could not be read, and counters that went backwards.
    pub warnings: Vec<Warning>,
}

fn row(name: &CounterName, value: Option<i64>, change: Option<Change>) -> CounterRow {
    let meaning = describe(&name.group, &name.name);
    CounterRow {
        zone: None,
        group: name.group.clone(),
        name: name.name.clone(),
        value,
        delta: change.and_then(Change::delta),
        reset: matches!(change, Some(Change::Reset { .. })),
        meaning: meaning.map(|m| m.text),
        trouble: meaning.is_some_and(|m| m.trouble),
    }
}

fn finish(mut rows: Vec<CounterRow>, all: bool, interval_s: Option<f64>) -> CounterReport {
    let before = rows.len();
    if !all {
        rows.retain(|r| r.reset || r.amount() != Some(0));
    }
    let hidden_zero = before - rows.len();
    // Resets first (their size is unknown), then ascending; ties by name for a stable order.
    rows.sort_by(|a, b| {
        (!a.reset, a.amount(), &a.group, &a.name).cmp(&(!b.reset, b.amount(), &b.group, &b.name))
    });
    CounterReport {
        interval_s,
        counters: rows,
        hidden_zero,
        warnings: Vec::new(),
    }
}

/// Values since boot (or since the network namespace was created). Zero values are left out
/// unless `all`.
pub fn since_boot(set: &CounterSet, all: bool) -> CounterReport {
    let rows = set.iter().map(|(n, v)| row(n, Some(v), None)).collect();
    finish(rows, all, None)
}

/// Deltas from `before` to `after` over `interval_s` seconds. Zero deltas are left out unless
/// `all`. A counter that went down is kept with `reset` and reported in a warning; counters
/// present in only one set (a module loaded meanwhile) are left out.
pub fn deltas(
    before: &CounterSet,
    after: &CounterSet,
    interval_s: f64,
    all: bool,
) -> CounterReport {
    let mut rows = Vec::new();
    let mut resets = Vec::new();
    for (name, new) in after.iter() {
        let Some(old) = before.values.get(name).copied() else {
            continue;
        };
        let gauge = describe(&name.group, &name.name).is_some_and(|m| m.gauge);
        let change = Change::between(old, new, gauge);
        if let Change::Reset { before, after } = change {
            resets.push(format!("{name}: {before} -> {after}"));
        }
        rows.push(row(name, None, Some(change)));
    }
    let mut report = finish(rows, all, Some(interval_s));
    if !resets.is_empty() {
        report.warnings.push(Warning {
            code: WarningCode::CountersReset,
            count: Some(resets.len() as u64),
            message: format!(
                "{} counters went down during the interval (reset, wrapped, or the network \
                 namespace was recreated); their deltas are unknown and shown as 'reset'",
                resets.len()
            ),
            details: resets,
        });
    }
    report
}

/// One report from the reports of several zones (`-Z`): each zone's rows, in the order given
/// (each zone sorted as one report is: resets first, then smallest amount first), tagged with
/// their zone; warnings named after their zone; `hidden_zero` summed. The interval is the first
/// report's.
pub fn merge_zones(reports: Vec<(Zone, CounterReport)>) -> CounterReport {
    let mut out = CounterReport {
        interval_s: reports.first().and_then(|(_, r)| r.interval_s),
        counters: Vec::new(),
        hidden_zero: 0,
        warnings: Vec::new(),
    };
    for (zone, r) in reports {
        out.hidden_zero += r.hidden_zero;
        out.warnings
            .extend(r.warnings.into_iter().map(|w| w.in_zone(&zone.name)));
        out.counters.extend(r.counters.into_iter().map(|mut c| {
            c.zone = Some(zone.clone());
            c
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NETSTAT: &str = include_str!("../../wire/tests/fixtures/proc/netstat");
    const SNMP: &str = include_str!("../../wire/tests/fixtures/proc/snmp");
    const SNMP6: &str = include_str!("../../wire/tests/fixtures/proc/snmp6");

    #[test]
    fn captured_files_parse_by_name() {
        let set = CounterSet::parse(Some(SNMP), Some(NETSTAT), Some(SNMP6)).unwrap();
        assert_eq!(set.get("Tcp", "ActiveOpens"), Some(5));
        assert_eq!(set.get("Tcp", "MaxConn"), Some(-1));
        assert_eq!(set.get("Tcp", "CurrEstab"), Some(10));
        assert_eq!(set.get("TcpExt", "TCPPureAcks"), Some(6));
        assert_eq!(set.get("TcpExt", "PAWSTimewait"), Some(0));
        assert_eq!(set.get("IpExt", "InOctets"), Some(1825));
        // snmp6 names lose their group prefix.
        assert_eq!(set.get("Ip6", "InReceives"), Some(3));
        assert!(set.get("Ip6", "Ip6InReceives").is_none());
        assert!(set.len() > 300, "{}", set.len());
    }

    #[test]
    fn a_name_inserted_mid_line_does_not_shift_the_others() {
        // 6.16 inserted PAWSOldAck and PAWSTimewait after PAWSEstab.
        let old = "TcpExt: TW PAWSEstab DelayedACKs ListenOverflows\nTcpExt: 1 2 3 4\n";
        let new = "TcpExt: TW PAWSEstab PAWSOldAck PAWSTimewait DelayedACKs ListenOverflows\n\
                   TcpExt: 1 2 70 80 3 4\n";
        for text in [old, new] {
            let set = CounterSet::parse(None, Some(text), None).unwrap();
            assert_eq!(set.get("TcpExt", "DelayedACKs"), Some(3));
            assert_eq!(set.get("TcpExt", "ListenOverflows"), Some(4));
        }
        let set = CounterSet::parse(None, Some(new), None).unwrap();
        assert_eq!(set.get("TcpExt", "PAWSTimewait"), Some(80));
    }

    #[test]
    fn a_malformed_file_is_an_error_naming_it() {
        let e = CounterSet::parse(Some("Tcp: A B\nTcp: 1\n"), None, None).unwrap_err();
        assert_eq!(e.file, "snmp");
        assert!(e.to_string().contains("/proc/net/snmp"), "{e}");
        let e = CounterSet::parse(None, None, Some("Ip6InReceives x\n")).unwrap_err();
        assert_eq!(e.file, "snmp6");
    }

    #[test]
    fn deltas_sort_smallest_first_and_hide_zeros() {
        let a = CounterSet::from_values([
            ("Tcp", "OutRsts", 10),
            ("Tcp", "InSegs", 100),
            ("TcpExt", "ListenOverflows", 0),
            ("Tcp", "AttemptFails", 5),
        ]);
        let b = CounterSet::from_values([
            ("Tcp", "OutRsts", 13),
            ("Tcp", "InSegs", 200),
            ("TcpExt", "ListenOverflows", 0),
            ("Tcp", "AttemptFails", 6),
        ]);
        let r = deltas(&a, &b, 2.0, false);
        let names: Vec<String> = r
            .counters
            .iter()
            .map(|c| format!("{}.{}={:?}", c.group, c.name, c.delta))
            .collect();
        assert_eq!(
            names,
            [
                "Tcp.AttemptFails=Some(1)",
                "Tcp.OutRsts=Some(3)",
                "Tcp.InSegs=Some(100)"
            ]
        );
        assert_eq!(r.hidden_zero, 1);
        assert!(r.counters[0].trouble && r.counters[0].meaning.is_some());
        assert!(!r.counters[2].trouble);
        let all = deltas(&a, &b, 2.0, true);
        assert_eq!(all.counters.len(), 4);
        assert_eq!(all.counters[0].name, "ListenOverflows");
        assert!(all.counters[0].trouble);
    }

    #[test]
    fn a_decrease_is_a_reset_not_a_huge_number() {
        let a = CounterSet::from_values([("Tcp", "OutRsts", 1000), ("Tcp", "CurrEstab", 50)]);
        let b = CounterSet::from_values([("Tcp", "OutRsts", 3), ("Tcp", "CurrEstab", 40)]);
        let r = deltas(&a, &b, 1.0, false);
        let rst = r.counters.iter().find(|c| c.name == "OutRsts").unwrap();
        assert!(rst.reset && rst.delta.is_none());
        // A gauge goes down without being reset.
        let est = r.counters.iter().find(|c| c.name == "CurrEstab").unwrap();
        assert_eq!(est.delta, Some(-10));
        assert!(!est.reset);
        assert_eq!(r.warnings.len(), 1);
        assert_eq!(r.warnings[0].code, WarningCode::CountersReset);
        assert_eq!(r.warnings[0].details, ["Tcp.OutRsts: 1000 -> 3"]);
        // Resets sort first.
        assert!(r.counters[0].reset);
        let json = serde_json::to_value(rst).unwrap();
        assert_eq!(json["reset"], true);
        assert!(json.get("delta").is_none());
    }

    #[test]
    fn values_at_the_extremes_do_not_overflow() {
        // u64 values above i64::MAX arrive as negative i64 from the parser.
        let a = CounterSet::from_values([("IpExt", "InOctets", i64::MAX)]);
        let b = CounterSet::from_values([("IpExt", "InOctets", i64::MIN)]);
        let r = deltas(&a, &b, 1.0, false);
        assert!(r.counters[0].reset);
        let c = Change::between(i64::MIN, i64::MAX, true);
        assert_eq!(c, Change::Delta(-1));
    }

    #[test]
    fn since_boot_keeps_values() {
        let set = CounterSet::parse(Some(SNMP), Some(NETSTAT), None).unwrap();
        let r = since_boot(&set, false);
        assert!(r.interval_s.is_none());
        assert!(r
            .counters
            .iter()
            .all(|c| c.value.is_some() && c.delta.is_none()));
        assert!(r.counters.iter().all(|c| c.value != Some(0)));
        // Levels count too: Tcp.RtoMax (120000 ms) is the biggest number in the capture.
        let last = r.counters.last().unwrap();
        assert_eq!((last.group.as_str(), last.name.as_str()), ("Tcp", "RtoMax"));
        // Tcp.MaxConn is -1: the smallest, first.
        assert_eq!(r.counters[0].name, "MaxConn");
    }

    #[test]
    fn every_counter_of_kernel_md_3_4_has_a_meaning() {
        for name in [
            "TW",
            "TWKilled",
            "TWRecycled",
            "PAWSEstab",
            "PAWSTimewait",
            "PAWSActive",
            "PAWSOldAck",
            "TCPACKSkippedTimeWait",
            "ListenOverflows",
            "ListenDrops",
            "TCPReqQFullDrop",
            "TCPReqQFullDoCookies",
            "SyncookiesSent",
            "TCPSynRetrans",
            "TCPTimeouts",
            "TCPAbortOnTimeout",
            "TCPToZeroWindowAdv",
            "TCPFromZeroWindowAdv",
            "TCPWantZeroWindowAdv",
            "TCPWinProbe",
            "TCPZeroWindowDrop",
            "TCPRcvQDrop",
            "PruneCalled",
            "RcvPruned",
            "OfoPruned",
            "TCPMemoryPressures",
            "TCPMemoryPressuresChrono",
            "TCPAbortOnMemory",
            "DelayedACKs",
            "DelayedACKLocked",
            "DelayedACKLost",
            "TCPTimeWaitOverflow",
        ] {
            assert!(describe("TcpExt", name).is_some(), "{name}");
        }
        for name in [
            "ListenOverflows",
            "ListenDrops",
            "TCPTimeouts",
            "TCPAbortOnTimeout",
            "PAWSEstab",
            "PAWSTimewait",
            "TCPZeroWindowDrop",
            "TCPRcvQDrop",
            "TCPMemoryPressures",
            "TCPTimeWaitOverflow",
            "TCPReqQFullDrop",
            "RcvPruned",
        ] {
            assert!(describe("TcpExt", name).unwrap().trouble, "{name}");
        }
        // No duplicate entries.
        for (i, a) in MEANINGS.iter().enumerate() {
            assert!(
                !MEANINGS[i + 1..]
                    .iter()
                    .any(|b| a.group == b.group && a.name == b.name),
                "{}.{} twice",
                a.group,
                a.name
            );
        }
    }

    #[test]
    fn zones_merge_in_order_with_their_names() {
        use crate::zone::ZoneKind;
        let zone = |name: &str, kind| Zone {
            name: name.into(),
            kind,
            netns_inode: Some(7),
            container_id: None,
            runtime: None,
            pod: None,
        };
        let a = CounterSet::from_values([("Tcp", "OutRsts", 10), ("Tcp", "InSegs", 5)]);
        let b = CounterSet::from_values([("Tcp", "OutRsts", 4), ("Tcp", "InSegs", 5)]);
        let host = deltas(&a, &a, 1.5, false);
        let web = deltas(&a, &b, 1.6, false);
        let m = merge_zones(vec![
            (zone("global", ZoneKind::Global), host),
            (zone("web", ZoneKind::Netns), web),
        ]);
        assert_eq!(m.interval_s, Some(1.5));
        assert_eq!(m.hidden_zero, 3);
        assert_eq!(m.counters.len(), 1);
        assert_eq!(m.counters[0].zone.as_ref().unwrap().name, "web");
        assert!(m.counters[0].reset);
        assert!(
            m.warnings[0].message.starts_with("zone web: "),
            "{:?}",
            m.warnings
        );
        let v = serde_json::to_value(&m.counters[0]).unwrap();
        assert_eq!(v["zone"]["name"], "web");
        assert_eq!(v["zone"]["kind"], "netns");
    }
}
