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

use std::path::Path;

use crate::model::Proto;

/// The lines of `/proc/net/protocols` that count each skippable protocol, IPv4's then IPv6's.
const COUNTED: &[(Proto, &str, &str)] = &[
    (Proto::Mptcp, "MPTCP", "MPTCPv6"),
    (Proto::Raw, "RAW", "RAWv6"),
    (Proto::Icmp, "PING", "PINGv6"),
    (Proto::Udplite, "UDP-Lite", "UDPLITEv6"),
];

/// The protocols with no socket in either family in the namespace `net_dir` shows.
pub(super) fn empty(net_dir: &Path) -> Vec<Proto> {
    match std::fs::read_to_string(net_dir.join("protocols")) {
        Ok(text) => empty_in(&text),
        Err(_) => Vec::new(),
    }
}

fn empty_in(text: &str) -> Vec<Proto> {
    // protocol  size sockets  memory press maxhdr  slab module ...
    let count = |name: &str| {
        text.lines().skip(1).find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next()? == name).then(|| f.nth(1)?.parse::<u64>().ok())?
        })
    };
    COUNTED
        .iter()
        .filter(|(_, v4, v6)| count(v4) == Some(0) && count(v6) == Some(0))
        .map(|&(p, _, _)| p)
        .collect()
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

    #[test]
    fn a_protocol_is_empty_when_both_families_count_none() {
        // PING has one IPv6 socket and RAW two IPv4 ones: both dumped.
        assert_eq!(empty_in(SAMPLE), vec![Proto::Mptcp, Proto::Udplite]);
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
