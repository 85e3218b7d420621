//! Targets of `/proc/<pid>/fd/<n>` and `/proc/<pid>/ns/net` links (`sock_d_dname` in
//! `net/socket.c` prints `socket:[%lu]`; `ns_dname` in `fs/nsfs.c` prints `net:[%u]`).

/// Parses `prefix[N]` exactly: N is 1+ ASCII decimal digits (leading zeros allowed) that fit
/// a `u64`, with nothing before `prefix` or after `]`.
fn bracketed(link: &[u8], prefix: &[u8]) -> Option<u64> {
    let digits = link
        .strip_prefix(prefix)?
        .strip_prefix(b"[")?
        .strip_suffix(b"]")?;
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &c| {
        if !c.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(c - b'0'))
    })
}

/// The inode if and only if the link target is exactly `socket:[N]` (N decimal, 1+ digits,
/// fits u64, nothing before or after). Anything else (a file path that contains
/// `socket:[123]`, `socket:[]`, `socket:[12]x`, `anon_inode:[eventfd]`) is `None`.
pub fn socket_inode(link: &[u8]) -> Option<u64> {
    bracketed(link, b"socket:")
}

/// For `/proc/<pid>/ns/net` links: `net:[N]` -> N, the network namespace's inode.
pub fn netns_inode(link: &[u8]) -> Option<u64> {
    bracketed(link, b"net:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases() {
        assert_eq!(socket_inode(b"socket:[123]"), Some(123));
        assert_eq!(socket_inode(b"socket:[007]"), Some(7));
        assert_eq!(
            socket_inode(b"socket:[18446744073709551615]"),
            Some(u64::MAX)
        );
        assert_eq!(socket_inode(b"socket:[18446744073709551616]"), None);
        for bad in [
            &b"socket:[]"[..],
            b"socket:[12]x",
            b"/tmp/socket:[123]",
            b"xsocket:[1]",
            b"socket:[1",
            b"socket:1]",
            b"socket:[+1]",
            b"socket:[-1]",
            b"socket:[ 1]",
            b"anon_inode:[eventfd]",
            b"",
        ] {
            assert_eq!(
                socket_inode(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(netns_inode(b"net:[4026531840]"), Some(4026531840));
        assert_eq!(netns_inode(b"socket:[1]"), None);
    }
}
