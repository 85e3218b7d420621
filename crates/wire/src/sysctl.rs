//! The text of the `/proc/sys` files sockstat reads: one number (`tcp_tw_reuse`), three numbers
//! (`tcp_wmem`, `tcp_rmem`, `tcp_mem`), a port range (`ip_local_port_range`) and a port list
//! (`ip_local_reserved_ports`). Whitespace as the kernel writes it (tabs, a trailing newline).

use crate::DecodeError;

fn malformed(what: &'static str, reason: &'static str) -> DecodeError {
    DecodeError::Malformed {
        what,
        offset: 0,
        reason,
    }
}

/// One unsigned number (`"2\n"`).
pub fn number(text: &str) -> Result<u64, DecodeError> {
    text.trim()
        .parse()
        .map_err(|_| malformed("sysctl value", "not an unsigned number"))
}

/// Exactly three unsigned numbers (`"4096\t131072\t6291456\n"`).
pub fn triple(text: &str) -> Result<[u64; 3], DecodeError> {
    let mut out = [0u64; 3];
    let mut words = text.split_ascii_whitespace();
    for slot in &mut out {
        *slot = words
            .next()
            .ok_or_else(|| malformed("sysctl triple", "fewer than three numbers"))?
            .parse()
            .map_err(|_| malformed("sysctl triple", "not an unsigned number"))?;
    }
    match words.next() {
        Some(_) => Err(malformed("sysctl triple", "more than three numbers")),
        None => Ok(out),
    }
}

/// `ip_local_port_range` (`"32768\t60999"`), low and high as written. A range written backwards
/// is returned as is: the kernel refuses to set one, and callers treat it as empty.
pub fn port_range(text: &str) -> Result<(u16, u16), DecodeError> {
    let mut words = text.split_ascii_whitespace();
    let mut port = || -> Result<u16, DecodeError> {
        words
            .next()
            .ok_or_else(|| malformed("ip_local_port_range", "fewer than two ports"))?
            .parse()
            .map_err(|_| malformed("ip_local_port_range", "not a port number"))
    };
    let (lo, hi) = (port()?, port()?);
    Ok((lo, hi))
}

/// `ip_local_reserved_ports` (`"8000-8100,9000"`, empty when unset): sorted, merged inclusive
/// ranges.
pub fn port_list(text: &str) -> Result<Vec<(u16, u16)>, DecodeError> {
    let mut ranges = Vec::new();
    let t = text.trim();
    if t.is_empty() {
        return Ok(ranges);
    }
    let port = |s: &str| -> Result<u16, DecodeError> {
        s.trim()
            .parse()
            .map_err(|_| malformed("ip_local_reserved_ports", "not a port number"))
    };
    for part in t.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => {
                let p = port(part)?;
                (p, p)
            }
        };
        if lo > hi {
            return Err(malformed(
                "ip_local_reserved_ports",
                "a range goes backwards",
            ));
        }
        ranges.push((lo, hi));
    }
    Ok(merge_ranges(ranges))
}

/// Inclusive port ranges sorted, with overlapping and adjacent ones merged (the form a port
/// list is kept in, so a kernel filter program built from it stays small).
pub fn merge_ranges(mut ranges: Vec<(u16, u16)>) -> Vec<(u16, u16)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_spellings() {
        assert_eq!(number("2\n"), Ok(2));
        assert!(number("-1").is_err());
        assert_eq!(
            triple("4096\t16384\t4194304\n"),
            Ok([4096, 16384, 4_194_304])
        );
        assert!(triple("1 2").is_err());
        assert!(triple("1 2 3 4").is_err());
        assert_eq!(port_range("32768\t60999\n"), Ok((32768, 60999)));
        assert_eq!(port_range("40000 40000"), Ok((40000, 40000)));
        assert_eq!(port_range("5 1"), Ok((5, 1)));
        assert!(port_range("x").is_err());
        assert!(port_range("1").is_err());
        assert_eq!(port_list("\n"), Ok(vec![]));
        assert_eq!(
            port_list("40030,40010-40019,40020\n"),
            Ok(vec![(40010, 40020), (40030, 40030)])
        );
        assert!(port_list("9-1").is_err());
        assert!(port_list("70000").is_err());
    }
}
