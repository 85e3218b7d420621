//! `/proc/net/{tcp,tcp6,udp,udp6,udplite,udplite6,raw,raw6,unix,packet,netlink}` text, the fallback
//! when sock_diag is unavailable (and the only view of another netns without `setns`).
//!
//! Formats: `tcp4_seq_show`/`get_tcp4_sock` (`net/ipv4/tcp_ipv4.c`), `get_tcp6_sock`
//! (`net/ipv6/tcp_ipv6.c`), `udp4_format_sock` (`net/ipv4/udp.c`), `__udp6_sock_show`
//! (`net/ipv6/datagram.c`), `raw_sock_seq_show` (`net/ipv4/raw.c`), `unix_seq_show`
//! (`net/unix/af_unix.c`), `packet_seq_show` (`net/packet/af_packet.c`), `netlink_seq_show`
//! (`net/netlink/af_netlink.c`).
//!
//! Pure: give it the text, it gives entries. One line at a time, header lines detected.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::DecodeError;

/// One line of `/proc/net/{tcp,tcp6,udp,udp6,udplite,udplite6,raw,raw6}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInetEntry {
    /// `local_address`: address and port.
    pub local: SocketAddr,
    /// `rem_address`.
    pub remote: SocketAddr,
    /// `st`: TCP state number (`TCP_LISTEN` = 0x0A ...).
    pub state: u8,
    /// `tx_queue`: TCP: `write_seq - snd_una` (LISTEN: 0); UDP: `sk_wmem_alloc`.
    pub tx_queue: u32,
    /// `rx_queue`: TCP: `rcv_nxt - copied_seq` (LISTEN: accept-queue length); UDP: queued bytes.
    pub rx_queue: u32,
    /// `tr`: timer (0 none, 1 retransmit, 2 keepalive, 3 TIME-WAIT, 4 zero-window probe).
    pub timer: u8,
    /// `tm->when`: time until the timer fires, in clock ticks (`USER_HZ`, `jiffies_delta_to_clock_t`).
    pub expires_jiffies: u64,
    /// `retrnsmt`: retransmits / unanswered probes.
    pub retrans: u32,
    /// `uid` (decimal in the file).
    pub uid: u32,
    /// `inode` (decimal in the file; 0 for TIME-WAIT and SYN-RECV).
    pub inode: u64,
}

fn hex_u32(s: &str, what: &'static str, col: usize) -> Result<u32, DecodeError> {
    // from_str_radix alone would also take a leading '+'.
    if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(DecodeError::malformed(what, col, "not hex"));
    }
    if s.is_empty() || s.len() > 8 {
        return Err(DecodeError::malformed(what, col, "expected 1-8 hex digits"));
    }
    u32::from_str_radix(s, 16).map_err(|_| DecodeError::malformed(what, col, "not hex"))
}

fn hex_u64(s: &str, what: &'static str, col: usize) -> Result<u64, DecodeError> {
    if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(DecodeError::malformed(what, col, "not hex"));
    }
    if s.is_empty() || s.len() > 16 {
        return Err(DecodeError::malformed(
            what,
            col,
            "expected 1-16 hex digits",
        ));
    }
    u64::from_str_radix(s, 16).map_err(|_| DecodeError::malformed(what, col, "not hex"))
}

fn dec<T: std::str::FromStr>(s: &str, what: &'static str, col: usize) -> Result<T, DecodeError> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(DecodeError::malformed(what, col, "not a decimal number"));
    }
    s.parse()
        .map_err(|_| DecodeError::malformed(what, col, "decimal number out of range"))
}

/// Decodes `ADDR:PORT` where ADDR is 8 (IPv4) or 32 (IPv6) hex digits. The kernel prints
/// each 32-bit word of the address with `%08X` in *host* byte order, so each word's bytes are
/// reversed on little-endian machines; the port is `%04X` of the host-order number.
fn parse_sockaddr(s: &str, what: &'static str, col: usize) -> Result<SocketAddr, DecodeError> {
    let (a, p) = s
        .split_once(':')
        .ok_or_else(|| DecodeError::malformed(what, col, "address without ':port'"))?;
    let port = hex_u32(p, what, col)?;
    let port =
        u16::try_from(port).map_err(|_| DecodeError::malformed(what, col, "port above 65535"))?;
    let word = |i: usize| -> Result<[u8; 4], DecodeError> {
        let w = a
            .get(i * 8..i * 8 + 8)
            .ok_or_else(|| DecodeError::malformed(what, col, "short address"))?;
        Ok(hex_u32(w, what, col)?.to_ne_bytes())
    };
    let ip = match a.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => {
            return Err(DecodeError::malformed(
                what,
                col,
                "address is neither 8 nor 32 hex digits",
            ))
        }
    };
    Ok(SocketAddr::new(ip, port))
}

/// Splits on ASCII whitespace, keeping each token's byte column for error messages.
fn tokens(line: &str) -> impl Iterator<Item = (usize, &str)> {
    let base = line.as_ptr() as usize;
    line.split_ascii_whitespace()
        .map(move |t| (t.as_ptr() as usize - base, t))
}

/// Parses one entry line of an inet table (tcp, tcp6, udp, udp6, udplite(6), raw(6)). Columns
/// after `inode` (refcount, pointer, TCP extras, UDP drops) are ignored, so lines with extra
/// columns parse too.
pub fn parse_inet_line(line: &str) -> Result<ProcInetEntry, DecodeError> {
    const WHAT: &str = "/proc/net inet line";
    let mut t = tokens(line);
    let mut next = |need: usize| {
        t.next()
            .ok_or_else(|| DecodeError::truncated(WHAT, 10, need))
    };
    let (c, sl) = next(0)?;
    if !sl.ends_with(':') {
        return Err(DecodeError::malformed(WHAT, c, "first column is not 'N:'"));
    }
    let (c, local) = next(1)?;
    let local = parse_sockaddr(local, WHAT, c)?;
    let (c, remote) = next(2)?;
    let remote = parse_sockaddr(remote, WHAT, c)?;
    let (c, st) = next(3)?;
    let state = u8::try_from(hex_u32(st, WHAT, c)?)
        .map_err(|_| DecodeError::malformed(WHAT, c, "state above 255"))?;
    let (c, q) = next(4)?;
    let (tx, rx) = q
        .split_once(':')
        .ok_or_else(|| DecodeError::malformed(WHAT, c, "queues not 'tx:rx'"))?;
    let (tx_queue, rx_queue) = (hex_u32(tx, WHAT, c)?, hex_u32(rx, WHAT, c)?);
    let (c, tm) = next(5)?;
    let (tr, when) = tm
        .split_once(':')
        .ok_or_else(|| DecodeError::malformed(WHAT, c, "timer not 'tr:when'"))?;
    let timer = u8::try_from(hex_u32(tr, WHAT, c)?)
        .map_err(|_| DecodeError::malformed(WHAT, c, "timer above 255"))?;
    let expires_jiffies = hex_u64(when, WHAT, c)?;
    let (c, rt) = next(6)?;
    let retrans = hex_u32(rt, WHAT, c)?;
    let (c, uid) = next(7)?;
    let uid = dec(uid, WHAT, c)?;
    let _timeout = next(8)?; // "timeout": %8d, always 0 for TCP; not needed
    let (c, ino) = next(9)?;
    let inode = dec(ino, WHAT, c)?;
    Ok(ProcInetEntry {
        local,
        remote,
        state,
        tx_queue,
        rx_queue,
        timer,
        expires_jiffies,
        retrans,
        uid,
        inode,
    })
}

fn is_inet_header(line: &str) -> bool {
    line.trim_start().starts_with("sl ")
}

/// All entries of an inet table, skipping the header line and blank lines.
pub fn parse_inet_table(
    text: &str,
) -> impl Iterator<Item = Result<ProcInetEntry, DecodeError>> + '_ {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !is_inet_header(l))
        .map(parse_inet_line)
}

/// `__SO_ACCEPTCON` in the unix `Flags` column: the socket is listening.
pub const SO_ACCEPTCON: u32 = 0x10000;

/// One line of `/proc/net/unix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcUnixEntry<'a> {
    /// `RefCount` (hexadecimal in the file).
    pub refcount: u32,
    /// `Flags` (hex): [`SO_ACCEPTCON`] for listeners.
    pub flags: u32,
    /// `Type` (hex): `SOCK_STREAM` 1, `SOCK_DGRAM` 2, `SOCK_SEQPACKET` 5.
    pub sock_type: u16,
    /// `St` (hex): `SS_UNCONNECTED` 1, `SS_CONNECTING` 2, `SS_CONNECTED` 3,
    /// `SS_DISCONNECTING` 4 (a `socket_state`, not a TCP state).
    pub state: u8,
    /// `Inode` (decimal).
    pub inode: u64,
    /// `Path`, as printed: a filesystem path, or `@` + the abstract name with every NUL
    /// printed as `@`. `None` for unbound sockets. May contain spaces; a name containing a
    /// newline cannot be recovered from this file.
    pub path: Option<&'a [u8]>,
}

impl ProcUnixEntry<'_> {
    /// Whether `Flags` has [`SO_ACCEPTCON`].
    pub fn listening(&self) -> bool {
        self.flags & SO_ACCEPTCON != 0
    }
}

fn hex_bytes_u32(s: &[u8], what: &'static str, col: usize) -> Result<u32, DecodeError> {
    let s = std::str::from_utf8(s).map_err(|_| DecodeError::malformed(what, col, "not ASCII"))?;
    hex_u32(s, what, col)
}

/// Parses one entry line of `/proc/net/unix` (`%pK: %08X %08X %08X %04X %02X %5lu` then
/// `' '` + path if bound). The path is everything after the single space that follows the
/// inode column, up to the end of the line (a trailing `\n` or `\r\n` is not part of it).
pub fn parse_unix_line(line: &[u8]) -> Result<ProcUnixEntry<'_>, DecodeError> {
    const WHAT: &str = "/proc/net/unix line";
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut pos = 0usize;
    // Next space-separated field starting at `pos` (skipping leading spaces, as `%5lu` pads).
    let mut field = |need: usize| -> Result<(usize, &[u8]), DecodeError> {
        while line.get(pos) == Some(&b' ') {
            pos += 1;
        }
        let start = pos;
        while pos < line.len() && line[pos] != b' ' {
            pos += 1;
        }
        if start == pos {
            return Err(DecodeError::truncated(WHAT, 7, need));
        }
        Ok((start, &line[start..pos]))
    };
    let (c, num) = field(0)?;
    if !num.ends_with(b":") {
        return Err(DecodeError::malformed(
            WHAT,
            c,
            "first column is not 'Num:'",
        ));
    }
    let (c, f) = field(1)?;
    let refcount = hex_bytes_u32(f, WHAT, c)?;
    let (c, f) = field(2)?;
    let _protocol = hex_bytes_u32(f, WHAT, c)?;
    let (c, f) = field(3)?;
    let flags = hex_bytes_u32(f, WHAT, c)?;
    let (c, f) = field(4)?;
    let sock_type = u16::try_from(hex_bytes_u32(f, WHAT, c)?)
        .map_err(|_| DecodeError::malformed(WHAT, c, "type above 0xffff"))?;
    let (c, f) = field(5)?;
    let state = u8::try_from(hex_bytes_u32(f, WHAT, c)?)
        .map_err(|_| DecodeError::malformed(WHAT, c, "state above 0xff"))?;
    let (c, f) = field(6)?;
    let inode = std::str::from_utf8(f)
        .map_err(|_| DecodeError::malformed(WHAT, c, "inode not ASCII"))
        .and_then(|s| dec(s, WHAT, c))?;
    // `pos` is right after the inode digits; the kernel then prints ' ' + path if bound.
    let path = match line.get(pos..) {
        Some([b' ', rest @ ..]) => {
            let rest = rest.strip_suffix(b"\r").unwrap_or(rest);
            (!rest.is_empty()).then_some(rest)
        }
        _ => None,
    };
    Ok(ProcUnixEntry {
        refcount,
        flags,
        sock_type,
        state,
        inode,
        path,
    })
}

/// All entries of `/proc/net/unix`, skipping the `Num RefCount ...` header and blank lines.
pub fn parse_unix_table(
    text: &[u8],
) -> impl Iterator<Item = Result<ProcUnixEntry<'_>, DecodeError>> + '_ {
    text.split(|&c| c == b'\n')
        .filter(|l| !l.iter().all(|c| c.is_ascii_whitespace()) && !l.starts_with(b"Num "))
        .map(parse_unix_line)
}

/// One line of `/proc/net/packet` (`%pK %-6d %-4d %04x   %-5d %1d %-6u %-6u %-6lu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcPacketEntry {
    /// `RefCnt`.
    pub refcount: u32,
    /// `Type`: `SOCK_RAW` 3, `SOCK_DGRAM` 2.
    pub sock_type: u16,
    /// `Proto`: host-order `ETH_P_*` (hex in the file; `ntohs(po->num)`).
    pub proto: u16,
    /// `Iface`: bound interface index (0 = any).
    pub ifindex: u32,
    /// `R`: running.
    pub running: bool,
    /// `Rmem`: `sk_rmem_alloc`.
    pub rmem: u32,
    /// `User`: uid.
    pub uid: u32,
    /// `Inode`.
    pub inode: u64,
}

/// Parses one entry line of `/proc/net/packet`.
pub fn parse_packet_line(line: &str) -> Result<ProcPacketEntry, DecodeError> {
    const WHAT: &str = "/proc/net/packet line";
    let mut t = tokens(line);
    let mut next = |need: usize| {
        t.next()
            .ok_or_else(|| DecodeError::truncated(WHAT, 9, need))
    };
    let (c, sk) = next(0)?;
    hex_u64(sk, WHAT, c)?;
    let (c, f) = next(1)?;
    let refcount = dec(f, WHAT, c)?;
    let (c, f) = next(2)?;
    let sock_type = dec(f, WHAT, c)?;
    let (c, f) = next(3)?;
    let proto = u16::try_from(hex_u32(f, WHAT, c)?)
        .map_err(|_| DecodeError::malformed(WHAT, c, "protocol above 0xffff"))?;
    let (c, f) = next(4)?;
    let ifindex = dec(f, WHAT, c)?;
    let (c, f) = next(5)?;
    let running = match f {
        "0" => false,
        "1" => true,
        _ => return Err(DecodeError::malformed(WHAT, c, "running flag not 0/1")),
    };
    let (c, f) = next(6)?;
    let rmem = dec(f, WHAT, c)?;
    let (c, f) = next(7)?;
    let uid = dec(f, WHAT, c)?;
    let (c, f) = next(8)?;
    let inode = dec(f, WHAT, c)?;
    Ok(ProcPacketEntry {
        refcount,
        sock_type,
        proto,
        ifindex,
        running,
        rmem,
        uid,
        inode,
    })
}

/// All entries of `/proc/net/packet`, skipping the `sk RefCnt ...` header and blank lines.
pub fn parse_packet_table(
    text: &str,
) -> impl Iterator<Item = Result<ProcPacketEntry, DecodeError>> + '_ {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("sk "))
        .map(parse_packet_line)
}

/// One line of `/proc/net/netlink` (`%pK %-3d %-10u %08x %-8d %-8d %-5d %-8d %-8u %-8lu`): no
/// socket type, state, destination or cookie, which only netlink_diag gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcNetlinkEntry {
    /// `Eth`: the netlink protocol (`NETLINK_ROUTE` 0, ...).
    pub protocol: u8,
    /// `Pid`: the port id (0 for the kernel's sockets).
    pub portid: u32,
    /// `Groups`: the first word of the joined-groups bitmap.
    pub groups: u32,
    /// `Rmem`: `sk_rmem_alloc`.
    pub rmem: u32,
    /// `Wmem`: `sk_wmem_alloc`.
    pub wmem: u32,
    /// `Drops`.
    pub drops: u32,
    /// `Inode`.
    pub inode: u64,
}

/// Parses one entry line of `/proc/net/netlink`.
pub fn parse_netlink_line(line: &str) -> Result<ProcNetlinkEntry, DecodeError> {
    const WHAT: &str = "/proc/net/netlink line";
    let mut t = tokens(line);
    let mut next = |need: usize| {
        t.next()
            .ok_or_else(|| DecodeError::truncated(WHAT, 10, need))
    };
    let (c, sk) = next(0)?;
    hex_u64(sk, WHAT, c)?;
    let (c, f) = next(1)?;
    let protocol = dec(f, WHAT, c)?;
    let (c, f) = next(2)?;
    let portid = dec(f, WHAT, c)?;
    let (c, f) = next(3)?;
    let groups = hex_u32(f, WHAT, c)?;
    let (c, f) = next(4)?;
    // sk_rmem_alloc_get() is printed with %d: never negative in practice, a 0 if it were.
    let rmem = u32::try_from(dec::<i64>(f, WHAT, c)?).unwrap_or(0);
    let (c, f) = next(5)?;
    let wmem = u32::try_from(dec::<i64>(f, WHAT, c)?).unwrap_or(0);
    let (c, f) = next(6)?;
    dec::<i64>(f, WHAT, c)?; // Dump
    let (c, f) = next(7)?;
    dec::<i64>(f, WHAT, c)?; // Locks (the refcount)
    let (c, f) = next(8)?;
    let drops = dec(f, WHAT, c)?;
    let (c, f) = next(9)?;
    let inode = dec(f, WHAT, c)?;
    Ok(ProcNetlinkEntry {
        protocol,
        portid,
        groups,
        rmem,
        wmem,
        drops,
        inode,
    })
}

/// All entries of `/proc/net/netlink`, skipping the `sk Eth Pid ...` header and blank lines.
pub fn parse_netlink_table(
    text: &str,
) -> impl Iterator<Item = Result<ProcNetlinkEntry, DecodeError>> + '_ {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("sk "))
        .map(parse_netlink_line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netlink_lines() {
        let t = "sk               Eth Pid        Groups   Rmem     Wmem     Dump  Locks    Drops    Inode\n\
                 ffff8e8a40e8b000 0   0          00000000 0        0        0     2        0        12      \n\
                 ffff8e8a4d1b9800 15  4022       00000001 0        0        0     2        0        23105   \n";
        let v: Vec<ProcNetlinkEntry> = parse_netlink_table(t).map(Result::unwrap).collect();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].protocol, v[0].portid, v[0].inode), (0, 0, 12));
        assert_eq!(
            (v[1].protocol, v[1].portid, v[1].groups, v[1].inode),
            (15, 4022, 1, 23105)
        );
        assert!(parse_netlink_line("ffff 0 0").is_err());
    }

    #[test]
    fn tcp_v4_line() {
        let l = "   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000005 00:00000000 00000000     0        0 1126 1 0000000020ce7f3c 100 0 0 10 0";
        let e = parse_inet_line(l).unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(e.local, "127.0.0.1:3306".parse().unwrap());
        }
        assert_eq!((e.state, e.rx_queue, e.inode), (0x0a, 5, 1126));
    }

    #[test]
    fn v6_words_in_host_order() {
        // ::1 is printed as 00000000000000000000000001000000 on little-endian.
        let l = "   1: 00000000000000000000000001000000:0016 0000000000000000FFFF00000100007F:D431 01 00000000:00000000 02:0000021B 00000000  1000        0 42 2 0 20 4 30 10 -1";
        let e = parse_inet_line(l).unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(e.local, "[::1]:22".parse().unwrap());
            assert_eq!(e.remote, "[::ffff:127.0.0.1]:54321".parse().unwrap());
        }
        assert_eq!((e.timer, e.expires_jiffies, e.uid), (2, 0x21b, 1000));
    }

    #[test]
    fn inet_errors() {
        assert!(parse_inet_line("").is_err());
        assert!(parse_inet_line("   0: 0100007F:0CEA").is_err());
        assert!(parse_inet_line("   0: 0100007Z:0CEA 00000000:0000 0A 0:0 00:0 0 0 0 1").is_err());
        assert!(parse_inet_line("   0: 0100007F:10000 00000000:0000 0A 0:0 00:0 0 0 0 1").is_err());
        assert!(parse_inet_line("   0: 0100:0CEA 00000000:0000 0A 0:0 00:0 0 0 0 1").is_err());
        assert!(parse_inet_line("   0: +100007F:0CEA 00000000:0000 0A 0:0 00:0 0 0 0 1").is_err());
    }

    #[test]
    fn unix_lines() {
        let e = parse_unix_line(
            b"0000000000000000: 0000000A 00000000 00010000 0001 01 12345 /run/my socket",
        )
        .unwrap();
        assert_eq!(e.refcount, 10);
        assert!(e.listening());
        assert_eq!(e.path, Some(&b"/run/my socket"[..]));
        let e =
            parse_unix_line(b"0000000000000000: 00000002 00000000 00000000 0002 01    77 @abs@x\n")
                .unwrap();
        assert_eq!((e.inode, e.path), (77, Some(&b"@abs@x"[..])));
        let e =
            parse_unix_line(b"00000000a8407f21: 00000003 00000000 00000000 0001 03  1122").unwrap();
        assert_eq!((e.inode, e.path, e.state), (1122, None, 3));
        // A name that begins with a space keeps it.
        let e = parse_unix_line(b"0: 00000002 00000000 00000000 0001 01 5  lead").unwrap();
        assert_eq!(e.path, Some(&b" lead"[..]));
        assert!(parse_unix_line(b"0: 0000000G 0 0 1 1 5").is_err());
        assert!(parse_unix_line(b"0: 00000001 0 0 1 1").is_err());
    }

    #[test]
    fn packet_line() {
        let e =
            parse_packet_line("ffff8880047a8000 3      3    0003   0     1 0      0      12345 ")
                .unwrap();
        assert_eq!(
            (e.refcount, e.sock_type, e.proto, e.running, e.inode),
            (3, 3, 3, true, 12345)
        );
    }
}
