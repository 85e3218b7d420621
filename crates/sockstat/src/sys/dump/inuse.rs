//! Which protocols' tables are empty, from the namespace's `/proc/net/protocols` (its
//! `sockets` column: the sockets of each protocol the kernel has hashed into the table its dump
//! walks), so that a gathering skips their dumps. An empty table costs little to list, but the
//! MPTCP dump walks a hash as large as TCP's established one whatever it holds (0.3 ms a family
//! on a machine with 262,144 buckets: doc/reference/BENCHMARKS.md, "The live view").
//!
//! Only protocols whose count was checked to follow their dump are skipped (a socket is counted
//! from the moment a dump would list it: a listening, connected or accepted MPTCP socket, a raw
//! socket once made, a ping or UDP-Lite socket once bound); a file that cannot be read, or a
//! line missing, skips nothing.
//!
//! The same counts, with the namespace's TIME-WAIT entries (`/proc/net/sockstat`), say how many
//! sockets an unfiltered TCP or UDP dump will bring ([`Counts::expected`]), so that its vector is
//! made that large at once instead of doubling (and copying) as it fills.

use std::path::Path;

use crate::model::{Family, Proto};

/// The lines of `/proc/net/protocols` that count each skippable protocol, IPv4's then IPv6's.
const COUNTED: &[(Proto, &str, &str)] = &[
    (Proto::Mptcp, "MPTCP", "MPTCPv6"),
    (Proto::Raw, "RAW", "RAWv6"),
    (Proto::Icmp, "PING", "PINGv6"),
    (Proto::Udplite, "UDP-Lite", "UDPLITEv6"),
];

/// The socket counts of the namespace `net_dir` shows: `None` where a file or line could not
/// be read.
pub(super) struct Counts {
    protocols: Option<String>,
    time_wait: Option<u64>,
}

impl Counts {
    /// Reads `protocols`; `sockstat` too when `time_wait` (its TIME-WAIT count).
    pub(super) fn read(net_dir: &Path, time_wait: bool) -> Counts {
        let read = |name: &str| crate::sys::procfs::read_to_string(&net_dir.join(name)).ok();
        Counts {
            protocols: read("protocols"),
            time_wait: time_wait
                .then(|| read("sockstat"))
                .flatten()
                .and_then(|t| sockstat_wire::snmp::sockstat_tcp_field(&t, "tw")),
        }
    }

    /// The `sockets` column of `name`'s line.
    fn count(&self, name: &str) -> Option<u64> {
        // protocol  size sockets  memory press maxhdr  slab module ...
        self.protocols.as_deref()?.lines().skip(1).find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next()? == name).then(|| f.nth(1)?.parse::<u64>().ok())?
        })
    }

    /// The protocols with no socket in either family.
    pub(super) fn empty(&self) -> Vec<Proto> {
        COUNTED
            .iter()
            .filter(|(_, v4, v6)| self.count(v4) == Some(0) && self.count(v6) == Some(0))
            .map(|&(p, _, _)| p)
            .collect()
    }

    /// How many sockets an unfiltered dump of TCP or UDP in `families` brings, TIME-WAIT
    /// entries included when `time_wait` (a count of both families): 0 when unknown.
    pub(super) fn expected(&self, proto: Proto, families: &[Family], time_wait: bool) -> usize {
        let names: &[(Family, &str)] = match proto {
            Proto::Tcp => &[(Family::Inet, "TCP"), (Family::Inet6, "TCPv6")],
            Proto::Udp => &[(Family::Inet, "UDP"), (Family::Inet6, "UDPv6")],
            _ => &[],
        };
        let mut n = names
            .iter()
            .filter(|(f, _)| families.contains(f))
            .filter_map(|(_, name)| self.count(name))
            .sum::<u64>();
        if proto == Proto::Tcp && time_wait {
            n += self.time_wait.unwrap_or(0);
        }
        usize::try_from(n).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
protocol  size sockets  memory press maxhdr  slab module     cl co di ac io in de sh ss gs se re sp bi br ha uh gp em
MPTCPv6   2048      0       0   no       0   yes  kernel      y  n  y  y  y  y  y  y  y  y  y  y  n  n  n  y  y  y  n
PINGv6    1184      1      -1   NI       0   yes  kernel      y  y  y  n  n  y  n  n  y  y  y  y  n  y  y  y  y  y  n
RAWv6     1184      0      -1   NI       0   yes  kernel      y  y  y  n  y  y  y  n  y  y  y  y  n  y  y  y  y  n  n
UDPLITEv6 1344      0      -1   NI       0   yes  kernel      y  y  y  n  y  y  y  n  y  y  y  y  n  n  n  y  y  y  n
MPTCP     1920      0       0   no       0   yes  kernel      y  n  y  y  y  y  y  y  y  y  y  y  n  n  n  y  y  y  n
PING       976      0      -1   NI       0   yes  kernel      y  y  y  n  n  y  n  n  y  y  y  y  n  y  y  y  y  n  n
RAW        984      2      -1   NI       0   yes  kernel      y  y  y  n  y  y  y  n  y  y  y  y  y  y  y  y  y  n  n
UDP-Lite  1152      0      -1   NI       0   yes  kernel      y  y  y  n  y  y  y  n  y  y  y  y  y  n  n  y  y  y  n
";

    fn empty_in(text: &str) -> Vec<Proto> {
        Counts {
            protocols: Some(text.to_string()),
            time_wait: None,
        }
        .empty()
    }

    #[test]
    fn a_protocol_is_empty_when_both_families_count_none() {
        // PING has one IPv6 socket and RAW two IPv4 ones: both dumped.
        assert_eq!(empty_in(SAMPLE), vec![Proto::Mptcp, Proto::Udplite]);
    }

    #[test]
    fn a_dump_is_expected_to_bring_its_tables_counts() {
        let text = "protocol  size sockets  memory press maxhdr  slab module\n\
                    TCPv6     2560     40    3   no     320   yes  kernel\n\
                    UDPv6     1408      7    0   NI       0   yes  kernel\n\
                    UDP       1216     11    0   NI       0   yes  kernel\n\
                    TCP       2368    300    3   no     320   yes  kernel\n";
        let c = Counts {
            protocols: Some(text.to_string()),
            time_wait: Some(50),
        };
        let both = [Family::Inet, Family::Inet6];
        assert_eq!(c.expected(Proto::Tcp, &both, true), 390);
        assert_eq!(c.expected(Proto::Tcp, &both, false), 340);
        assert_eq!(c.expected(Proto::Tcp, &[Family::Inet6], false), 40);
        assert_eq!(c.expected(Proto::Udp, &[Family::Inet], true), 11);
        assert_eq!(c.expected(Proto::Raw, &both, true), 0);
        let unread = Counts {
            protocols: None,
            time_wait: None,
        };
        assert_eq!(unread.expected(Proto::Tcp, &both, true), 0);
        assert_eq!(unread.empty(), vec![]);
    }

    #[test]
    fn a_missing_line_or_count_skips_nothing() {
        let no_v6: String = SAMPLE
            .lines()
            .filter(|l| !l.starts_with("MPTCPv6"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(empty_in(&no_v6), vec![Proto::Udplite]);
        assert_eq!(
            empty_in("protocol size sockets\nMPTCP 1 x\nMPTCPv6 1 0\n"),
            vec![]
        );
        assert_eq!(empty_in(""), vec![]);
    }
}
