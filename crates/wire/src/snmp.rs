//! MIB counter files: `/proc/net/snmp` and `/proc/net/netstat` (paired header/value lines,
//! `snmp_seq_show_*` and `netstat_seq_show` in `net/ipv4/proc.c`) and `/proc/net/snmp6`
//! (`name value` lines, `snmp6_seq_show` in `net/ipv6/proc.c`).
//!
//! Counters are always paired **by name**: new kernels insert names in the middle of a
//! line (e.g. `Ip: ... OutTransmits` in 6.3, `TcpExt` grows every few releases), so
//! positions are not stable.

use crate::DecodeError;

/// One named counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter<'a> {
    /// The group: `"Ip"`, `"Tcp"`, `"TcpExt"`, `"IpExt"`, `"Udp"`, `"Ip6"`, `"Icmp6"` ...
    pub group: &'a str,
    /// The counter name as printed (`"RetransSegs"`; for snmp6 the full token,
    /// `"Ip6InReceives"`).
    pub name: &'a str,
    /// The value. Signed because a few are (`Tcp: MaxConn` is -1); a `u64` counter above
    /// `i64::MAX` wraps to negative, so compute deltas with `wrapping_sub`.
    pub value: i64,
}

/// Parses `/proc/net/snmp` or `/proc/net/netstat`: pairs of `Group: name name ...` and
/// `Group: value value ...` lines. A header whose value line is missing, has another group,
/// or a different number of columns is an error naming the group.
pub fn parse_paired(text: &str) -> Result<Vec<Counter<'_>>, DecodeError> {
    const WHAT: &str = "counter line";
    let mut out = Vec::new();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let mut offset = 0usize;
    while let Some(names) = lines.next() {
        let (group, names_rest) = names
            .split_once(':')
            .ok_or_else(|| DecodeError::malformed(WHAT, offset, "line without 'Group:'"))?;
        let values = lines.next().ok_or_else(|| DecodeError::CountMismatch {
            group: group.to_string(),
            names: names_rest.split_ascii_whitespace().count(),
            values: 0,
        })?;
        let (vgroup, values_rest) = values
            .split_once(':')
            .ok_or_else(|| DecodeError::malformed(WHAT, offset, "line without 'Group:'"))?;
        if vgroup != group {
            return Err(DecodeError::malformed(
                WHAT,
                offset,
                "value line belongs to another group",
            ));
        }
        let n: Vec<&str> = names_rest.split_ascii_whitespace().collect();
        let v: Vec<&str> = values_rest.split_ascii_whitespace().collect();
        if n.len() != v.len() {
            return Err(DecodeError::CountMismatch {
                group: group.to_string(),
                names: n.len(),
                values: v.len(),
            });
        }
        for (name, value) in n.into_iter().zip(v) {
            let value = value
                .parse::<i64>()
                .or_else(|_| value.parse::<u64>().map(|u| u as i64))
                .map_err(|_| DecodeError::malformed(WHAT, offset, "value is not an integer"))?;
            out.push(Counter { group, name, value });
        }
        offset += 1;
    }
    Ok(out)
}

/// The group of an snmp6 counter name: the known prefixes `Ip6`, `Icmp6`, `Udp6`,
/// `UdpLite6`; otherwise everything up to and including the first digit, or `""`.
fn snmp6_group(name: &str) -> &str {
    for g in ["UdpLite6", "Udp6", "Icmp6", "Ip6"] {
        if name.starts_with(g) {
            return &name[..g.len()];
        }
    }
    match name.find(|c: char| c.is_ascii_digit()) {
        Some(i) => &name[..=i],
        None => "",
    }
}

/// Parses `/proc/net/snmp6`: one `Name<whitespace>value` per line.
pub fn parse_snmp6(text: &str) -> Result<Vec<Counter<'_>>, DecodeError> {
    const WHAT: &str = "/proc/net/snmp6 line";
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut t = line.split_ascii_whitespace();
        let Some(name) = t.next() else { continue };
        let (Some(value), None) = (t.next(), t.next()) else {
            return Err(DecodeError::malformed(WHAT, i, "expected 'name value'"));
        };
        let value = value
            .parse::<i64>()
            .or_else(|_| value.parse::<u64>().map(|u| u as i64))
            .map_err(|_| DecodeError::malformed(WHAT, i, "value is not an integer"))?;
        out.push(Counter {
            group: snmp6_group(name),
            name,
            value,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paired_by_name_with_inserted_column() {
        let old = "Tcp: RtoMin RetransSegs InErrs\nTcp: 200 5 1\n";
        let new = "Tcp: RtoMin NewThing RetransSegs InErrs\nTcp: 200 99 5 1\n";
        for t in [old, new] {
            let c = parse_paired(t).unwrap();
            let get = |n| c.iter().find(|c| c.name == n).map(|c| c.value);
            assert_eq!(get("RetransSegs"), Some(5));
            assert_eq!(get("InErrs"), Some(1));
        }
    }

    #[test]
    fn mismatch_names_group() {
        let e = parse_paired("Ip: A B\nIp: 1\n").unwrap_err();
        assert_eq!(
            e,
            DecodeError::CountMismatch {
                group: "Ip".into(),
                names: 2,
                values: 1
            }
        );
        assert!(e.to_string().contains("\"Ip\""));
        assert!(parse_paired("Ip: A B\n").is_err());
        assert!(parse_paired("Ip: A\nTcp: 1\n").is_err());
        assert!(parse_paired("Tcp: MaxConn\nTcp: -1\n").unwrap()[0].value == -1);
    }

    #[test]
    fn snmp6_groups() {
        let c =
            parse_snmp6("Ip6InReceives  \t1\nIcmp6InMsgs 2\nUdpLite6InErrors 3\nUdp6InErrors 4\n")
                .unwrap();
        let g: Vec<_> = c.iter().map(|c| c.group).collect();
        assert_eq!(g, ["Ip6", "Icmp6", "UdpLite6", "Udp6"]);
        assert!(parse_snmp6("Ip6X 1 2\n").is_err());
        assert!(parse_snmp6("Ip6X\n").is_err());
    }
}

/// Finds the field `name` (`tw`, `mem`, ...) on the `TCP:` line of `/proc/net/sockstat` text,
/// by name: the line is `TCP: inuse 5 orphan 0 tw 2 alloc 7 mem 1` (`sockstat_seq_show`,
/// net/ipv4/proc.c).
pub fn sockstat_tcp_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("TCP:"))?;
    let mut words = line.split_ascii_whitespace();
    while let Some(w) = words.next() {
        if w == name {
            return words.next()?.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod sockstat_tests {
    use super::sockstat_tcp_field;

    #[test]
    fn sockstat_fields_by_name() {
        let t =
            "sockets: used 120\nTCP: inuse 5 orphan 0 tw 27 alloc 7 mem 1\nUDP: inuse 1 mem 0\n";
        assert_eq!(sockstat_tcp_field(t, "tw"), Some(27));
        assert_eq!(sockstat_tcp_field(t, "mem"), Some(1));
        // The UDP line's mem is not TCP's.
        assert_eq!(sockstat_tcp_field("UDP: inuse 1 mem 2\n", "mem"), None);
        assert_eq!(sockstat_tcp_field("TCP: inuse 5 orphan 0\n", "tw"), None);
        assert_eq!(sockstat_tcp_field("", "tw"), None);
    }
}
