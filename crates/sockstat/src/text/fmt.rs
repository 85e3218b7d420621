//! Numbers, endpoints and times spelled for people: the one place each is written, used by the
//! table, the event lines, the diagnosis and port reports, and the trace picture.
//!
//! Every function returns a value that implements [`Display`], so a caller writes it into a
//! table cell (`write!(cell, "{}", bytes_cell(n))`) or a sentence (`format!("{}", bytes(n))`)
//! without an allocation of its own. Two spellings exist of some quantities: the sentence form
//! (`64 KiB`, `1.62 MB/s`, `20.3 ms`) and the narrower table-cell form (`64K`, `13Mbps`,
//! `20.3ms`); both come from the same scaling and the same digits rule.
//!
//! The digits rule: at most three significant digits, and no trailing zeros after the point
//! (`1.62`, `16.2`, `162`, `4`, `1.5`). A value that would round up to the next unit is written
//! in that unit (`1 MB/s`, never `1000 kB/s`).

use std::fmt::{self, Display, Write as _};
use std::net::IpAddr;
use std::time::SystemTime;

use super::sanitize;
use crate::model::{Endpoint, Owner, Snapshot, Socket, UnixName};

/// The first holder of each unix socket by inode, to name an unnamed peer as `[pid fd]`.
pub(crate) type UnixHolders = rustc_hash::FxHashMap<u64, Owner>;

/// A value in a unit, written with the digits rule.
struct Scaled {
    value: f64,
    unit: &'static str,
    space: bool,
}

/// Text written into a fixed buffer on the stack (the digits of one number).
struct Digits {
    buf: [u8; 48],
    len: usize,
}

impl fmt::Write for Digits {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl Display for Scaled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.value;
        let decimals = if !v.is_finite() || v.abs() >= 99.95 {
            0
        } else if v.abs() >= 9.995 {
            1
        } else {
            2
        };
        let mut d = Digits {
            buf: [0; 48],
            len: 0,
        };
        let text = match fixed(&mut d, v, decimals) {
            Ok(()) => {
                let mut s = std::str::from_utf8(&d.buf[..d.len]).map_err(|_| fmt::Error)?;
                if s.contains('.') {
                    s = s.trim_end_matches('0').trim_end_matches('.');
                }
                s
            }
            // A number too long for the buffer (an absurd value): written as it is.
            Err(_) => return write!(f, "{v}{}{}", if self.space { " " } else { "" }, self.unit),
        };
        f.write_str(text)?;
        if !self.unit.is_empty() {
            if self.space {
                f.write_str(" ")?;
            }
            f.write_str(self.unit)?;
        }
        Ok(())
    }
}

/// The decimal digits of `v`, written into `buf` from its end: what `{v}` writes, without the
/// formatting machinery (a table writes a few integers per cell, hundreds of thousands of
/// cells).
fn digits(v: u64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buf[i..]).unwrap_or("")
}

/// Appends the decimal digits of `v` to `out`, as `write!(out, "{v}")` does.
pub fn push_uint(out: &mut String, v: u64) {
    out.push_str(digits(v, &mut [0; 20]));
}

/// Writes the decimal digits of `v`, as `write!(out, "{v}")` does.
fn write_uint(out: &mut impl fmt::Write, v: u64) -> fmt::Result {
    out.write_str(digits(v, &mut [0; 20]))
}

/// Writes an IPv4 address in dotted decimal, as its `Display` does.
fn write_v4(out: &mut impl fmt::Write, a: std::net::Ipv4Addr) -> fmt::Result {
    for (i, o) in a.octets().into_iter().enumerate() {
        if i > 0 {
            out.write_char('.')?;
        }
        write_uint(out, u64::from(o))?;
    }
    Ok(())
}

/// Writes `v` with `decimals` digits after the point, exactly as `{v:.decimals$}` does (the
/// binary value rounded correctly, ties to even), without the bignum arithmetic the standard
/// library falls back to for most such values (`-T` at 60k rows rendered in 35 ms instead of 42).
/// The fast path rounds `v * 10^decimals`; that product is within an ulp of the exact one, so
/// its rounding can differ only next to a tie (a fraction within 1e-6 of one half, which no
/// value this file scales comes near but on an exact tie), and those, huge and negative values
/// go the standard library's way.
fn fixed(out: &mut impl fmt::Write, v: f64, decimals: usize) -> fmt::Result {
    const POW10: [f64; 3] = [1.0, 10.0, 100.0];
    let (Some(&p), true) = (POW10.get(decimals), v.is_sign_positive()) else {
        return write!(out, "{v:.decimals$}");
    };
    let scaled = v * p;
    let frac = scaled - scaled.trunc();
    if scaled.is_nan() || scaled >= 4e15 || (frac - 0.5).abs() < 1e-6 {
        return write!(out, "{v:.decimals$}");
    }
    let r = scaled.round() as u64;
    let p = p as u64;
    write_uint(out, r / p)?;
    if decimals > 0 {
        out.write_char('.')?;
        // The fraction with its leading zeros: p + fraction, less the leading 1.
        write_uint(&mut Skip1(out), p + r % p)?;
    }
    Ok(())
}

/// Drops the first character written through it (the leading 1 of `10^k + fraction`).
struct Skip1<'a, W>(&'a mut W);

impl<W: fmt::Write> fmt::Write for Skip1<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.write_str(s.get(1..).unwrap_or(""))
    }
}

/// Writes a share (0..=1) as a whole percentage: `37%`.
pub fn percent_cell(out: &mut impl fmt::Write, share: f64) -> fmt::Result {
    fixed(out, share * 100.0, 0)?;
    out.write_char('%')
}

/// `v` in the largest of `units` (each `step` times the one before) in which it is at least 1
/// once rounded to three digits.
fn scale(v: f64, step: f64, units: &'static [&'static str], space: bool) -> Scaled {
    let mut value = v;
    let mut i = 0;
    // The switch point: the value that would be written as `step` in this unit (999.5 rounds
    // to 1000; in binary units 1023.5 rounds to 1024).
    let switch = step - 0.5;
    while i + 1 < units.len() && value.abs() >= switch {
        value /= step;
        i += 1;
    }
    Scaled {
        value,
        unit: units[i],
        space,
    }
}

/// Bytes in binary units, for sentences: `512 B`, `64 KiB`, `1.5 MiB`, `3.2 GiB`.
pub fn bytes(b: f64) -> impl Display {
    scale(b, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB", "PiB"], true)
}

/// Bytes in binary units, for table cells: `512`, `64K`, `1.5M`, `3.2G`.
pub fn bytes_cell(b: u64) -> impl Display {
    scale(b as f64, 1024.0, &["", "K", "M", "G", "T", "P"], false)
}

/// A rate in bytes per second, in decimal units as link speeds are given: `840 kB/s`,
/// `1.62 MB/s`.
pub fn byte_rate(bytes_per_sec: f64) -> impl Display {
    scale(
        bytes_per_sec,
        1000.0,
        &["B/s", "kB/s", "MB/s", "GB/s", "TB/s"],
        true,
    )
}

/// A rate in bytes per second, written in bits per second as network people read it:
/// `9.68 Mbit/s`.
pub fn bit_rate(bytes_per_sec: f64) -> impl Display {
    scale(
        bytes_per_sec * 8.0,
        1000.0,
        &["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"],
        true,
    )
}

/// A rate in bytes per second, in bits per second for table cells: `840Kbps`, `95.2Mbps`.
pub fn bit_rate_cell(bytes_per_sec: u64) -> impl Display {
    scale(
        bytes_per_sec as f64 * 8.0,
        1000.0,
        &["bps", "Kbps", "Mbps", "Gbps", "Tbps"],
        false,
    )
}

/// A rate in bytes per second with its bit rate, for sentences: `1.21 MB/s (9.68 Mbit/s)`.
pub fn rate(bytes_per_sec: f64) -> impl Display {
    Pair(byte_rate(bytes_per_sec), bit_rate(bytes_per_sec))
}

struct Pair<A, B>(A, B);

impl<A: Display, B: Display> Display for Pair<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.0, self.1)
    }
}

/// A duration given in microseconds, for sentences: `52 us`, `20.3 ms`, `1.2 s`.
pub fn duration_us(us: impl Into<u64>) -> impl Display {
    scale(us.into() as f64, 1000.0, &["us", "ms", "s"], true)
}

/// A duration given in microseconds, for table cells: `52us`, `20.3ms`, `1.2s`.
pub fn duration_us_cell(us: impl Into<u64>) -> impl Display {
    scale(us.into() as f64, 1000.0, &["us", "ms", "s"], false)
}

/// An IP endpoint as the listing writes it: `127.0.0.1:22`, `[::1]:25`, `*:22` for the
/// unspecified address, `*` for port 0 (`*:*`).
pub fn inet(addr: IpAddr, port: u16) -> impl Display {
    Inet { addr, port }
}

struct Inet {
    addr: IpAddr,
    port: u16,
}

impl Display for Inet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            a if a.is_unspecified() => f.write_str("*")?,
            IpAddr::V4(a) => write_v4(f, a)?,
            IpAddr::V6(a) => write!(f, "[{a}]")?,
        }
        match self.port {
            0 => f.write_str(":*"),
            p => {
                f.write_char(':')?;
                write_uint(f, u64::from(p))
            }
        }
    }
}

/// One end of a socket as the listing writes it: an IP endpoint (see [`inet`]), a unix name
/// (`/run/x.sock`, `@abstract`, escaped for a terminal), `*` for an unnamed unix socket,
/// `[inode N]` for the peer of a connected unix socket that has no name, `proto 0x0003 if 2` for
/// a packet socket.
pub fn endpoint(ep: &Endpoint) -> impl Display + '_ {
    EndpointText {
        ep: Some(ep),
        holders: None,
    }
}

/// A socket's connection, `local -> remote` (the local end alone without a remote end), each
/// end as [`endpoint`] writes it: `192.0.2.1:40000 -> 198.51.100.2:5001`.
pub fn connection(s: &Socket) -> impl Display + '_ {
    connection_ends(&s.local, s.remote.as_ref())
}

/// [`connection`] from its two ends.
pub fn connection_ends<'a>(local: &'a Endpoint, remote: Option<&'a Endpoint>) -> impl Display + 'a {
    Connection { local, remote }
}

struct Connection<'a> {
    local: &'a Endpoint,
    remote: Option<&'a Endpoint>,
}

impl Display for Connection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", endpoint(self.local))?;
        if let Some(r) = self.remote {
            write!(f, " -> {}", endpoint(r))?;
        }
        Ok(())
    }
}

/// An endpoint for the listing's LOCAL and FOREIGN columns: as [`endpoint`], `*:*` for no
/// remote end, and an unnamed unix peer named by its holder (`[pid fd]`) when `holders` knows
/// it.
pub(crate) fn write_endpoint(out: &mut String, ep: Option<&Endpoint>, holders: &UnixHolders) {
    let _ = write!(
        out,
        "{}",
        EndpointText {
            ep,
            holders: Some(holders),
        }
    );
}

struct EndpointText<'a> {
    ep: Option<&'a Endpoint>,
    holders: Option<&'a UnixHolders>,
}

impl Display for EndpointText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ep {
            None => f.write_str("*:*"),
            Some(Endpoint::Inet { addr, port }) => write!(f, "{}", inet(*addr, *port)),
            Some(Endpoint::Unix(None)) => f.write_str("*"),
            Some(Endpoint::Unix(Some(name)))
            | Some(Endpoint::UnixPeer {
                name: Some(name), ..
            }) => write_unix_name(f, name),
            Some(Endpoint::UnixPeer { peer, name: None }) => {
                match self.holders.and_then(|h| h.get(peer)) {
                    Some(o) => write!(f, "[{} {}]", o.pid, o.fd),
                    None => write!(f, "[inode {peer}]"),
                }
            }
            Some(Endpoint::Packet { protocol, ifindex }) => {
                write!(f, "proto 0x{protocol:04x}")?;
                if *ifindex != 0 {
                    write!(f, " if {ifindex}")?;
                }
                Ok(())
            }
            Some(Endpoint::Netlink {
                protocol,
                port_id,
                group,
            }) => {
                write_netlink_protocol(f, *protocol)?;
                match (port_id, group) {
                    (0, 0) => f.write_str(":kernel"),
                    (0, g) => write!(f, ":group {g}"),
                    (p, _) => write!(f, ":{p}"),
                }
            }
            // Known only from an fd: no table gave its addresses.
            Some(Endpoint::Unlisted(_)) => f.write_str("?"),
        }
    }
}

/// A netlink protocol as the table writes it: its `NETLINK_*` name in lower case without the
/// prefix (`route`, `generic`, `kobject_uevent`), or its number.
fn write_netlink_protocol(f: &mut fmt::Formatter<'_>, protocol: u8) -> fmt::Result {
    match sockstat_wire::netlink_diag::protocol_name(protocol) {
        Some(name) => {
            let short = name.strip_prefix("NETLINK_").unwrap_or(name);
            for c in short.chars() {
                write!(f, "{}", c.to_ascii_lowercase())?;
            }
            Ok(())
        }
        None => write!(f, "{protocol}"),
    }
}

/// The PROTO column: [`Socket::proto_label`], or, for a socket no table lists, the kernel's
/// name of its protocol (`PINGv6`, escaped for a terminal; `?` when it could not be read).
pub(crate) fn write_proto(out: &mut String, s: &Socket) {
    match (&s.local, s.proto) {
        (Endpoint::Unlisted(name), crate::model::Proto::Other) => match name {
            Some(n) => out.push_str(&sanitize::for_terminal(n.as_bytes())),
            None => out.push('?'),
        },
        _ => out.push_str(s.proto_label()),
    }
}

/// The FOREIGN column: [`write_endpoint`] of the remote end, or `?` for a socket no table lists
/// (whether it has a remote end is not known).
pub(crate) fn write_foreign(out: &mut String, s: &Socket, holders: &UnixHolders) {
    match s.local {
        Endpoint::Unlisted(_) => out.push('?'),
        _ => write_endpoint(out, s.remote.as_ref(), holders),
    }
}

/// The name of a well-known ethernet protocol (`ETH_P_*`, include/uapi/linux/if_ether.h), as a
/// packet socket's LOCAL column and `protocol_name` in JSON give it.
pub fn ethertype_name(protocol: u16) -> Option<&'static str> {
    Some(match protocol {
        0x0003 => "ALL",
        0x0004 => "802_2",
        0x0060 => "LOOP",
        0x0800 => "IP",
        0x0806 => "ARP",
        0x8035 => "RARP",
        0x8100 => "8021Q",
        0x86DD => "IPV6",
        0x8847 => "MPLS_UC",
        0x8848 => "MPLS_MC",
        0x8863 => "PPP_DISC",
        0x8864 => "PPP_SES",
        0x888E => "PAE",
        0x88A8 => "8021AD",
        0x88CC => "LLDP",
        0x88F7 => "1588",
        _ => return None,
    })
}

/// The LOCAL column of a socket: [`write_endpoint`], with the interface it is bound to by name
/// where the snapshot knows it: a packet socket as `PROTOCOL:INTERFACE` (`ALL:eth0`,
/// `ARP:*` for every interface, `0x88b5:eth0` for a protocol without a name, the index when the
/// name is unknown), an inet socket bound to a device (`SO_BINDTODEVICE`, a VRF) as
/// `127.0.0.1%lo:5353` or `[::1]%lo:5353`, as `ss` writes them.
pub(crate) fn write_local(out: &mut String, s: &Socket, snap: &Snapshot, holders: &UnixHolders) {
    let name = |index: u32| -> String {
        match snap.interface_name(s, index) {
            Some(n) => sanitize::for_terminal(n.as_bytes()).into_owned(),
            None => index.to_string(),
        }
    };
    match (&s.local, s.bound_ifindex) {
        (Endpoint::Packet { protocol, ifindex }, _) => {
            match ethertype_name(*protocol) {
                Some(p) => out.push_str(p),
                None => {
                    let _ = write!(out, "0x{protocol:04x}");
                }
            }
            out.push(':');
            if *ifindex == 0 {
                out.push('*');
            } else {
                out.push_str(&name(*ifindex));
            }
        }
        (Endpoint::Inet { addr, port }, Some(dev)) => {
            let host = match addr {
                a if a.is_unspecified() => "*".to_string(),
                IpAddr::V4(a) => a.to_string(),
                IpAddr::V6(a) => format!("[{a}]"),
            };
            let _ = write!(out, "{host}%{}:", name(dev.get()));
            if *port == 0 {
                out.push('*');
            } else {
                let _ = write!(out, "{port}");
            }
        }
        (ep, _) => write_endpoint(out, Some(ep), holders),
    }
}

/// A unix name (path, or `@abstract`), escaped for a terminal.
fn write_unix_name(f: &mut fmt::Formatter<'_>, name: &UnixName) -> fmt::Result {
    let raw = match name {
        UnixName::Path(p) => p,
        UnixName::Abstract(p) => {
            f.write_str("@")?;
            p
        }
    };
    write!(f, "{raw}")
}

/// As the listing writes it: the path, or `@` and the abstract name, escaped as
/// [`RawString`](crate::RawString)'s `Display` escapes.
impl Display for UnixName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_unix_name(f, self)
    }
}

/// As the listing's LOCAL and FOREIGN columns write it ([`endpoint`]): `127.0.0.1:22`,
/// `[::1]:25`, `*:22`, `/run/x.sock`, `@abstract`, `*` for an unnamed unix socket.
impl Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        endpoint(self).fmt(f)
    }
}

/// A time as RFC 3339 in UTC with milliseconds: `2026-11-22T14:50:01.123Z` (the `time` of the
/// watch records and the `=== ... ===` line between refreshes).
pub fn utc_timestamp(t: SystemTime) -> String {
    // A clock set before 1970 is written as the epoch.
    let d = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(std::time::Duration::ZERO);
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days to civil date: Howard Hinnant's `civil_from_days` (public domain algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RawString;
    use std::time::Duration;

    fn s(d: impl Display) -> String {
        d.to_string()
    }

    /// The fast fixed-point path writes what the standard library writes, over the values the
    /// cells scale (integers divided by powers of 1000 and 1024, shares), exact ties, and values
    /// it leaves to the standard library (negative, huge, not finite).
    #[test]
    fn fixed_writes_what_the_standard_library_writes() {
        let check = |v: f64| {
            for decimals in 0..4 {
                let mut fast = String::new();
                fixed(&mut fast, v, decimals).unwrap();
                assert_eq!(
                    fast,
                    format!("{v:.decimals$}"),
                    "{v:e} to {decimals} decimals"
                );
            }
        };
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = x >> (x % 60);
            for step in [1.0, 1000.0, 1024.0, 1e6, 1048576.0, 1e9] {
                check(n as f64 / step);
            }
            check((x % 10_001) as f64 / 10_000.0 * 100.0);
        }
        for v in [
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            0.125,
            0.375,
            1.005,
            1.015,
            9.995,
            99.95,
            999.5,
            1023.5,
            -1.25,
            1e300,
            f64::MAX,
            f64::INFINITY,
            f64::NAN,
            5e-324,
        ] {
            check(v);
        }
        let mut p = String::new();
        percent_cell(&mut p, 0.375).unwrap();
        assert_eq!(p, format!("{:.0}%", 37.5));
    }

    /// The integer and IPv4 writers write what `Display` writes.
    #[test]
    fn integers_and_ipv4_are_written_as_display_writes_them() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for v in [0, 1, 9, 10, 99, 100, u64::from(u32::MAX), u64::MAX]
            .into_iter()
            .chain((0..10_000).map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x >> (x % 64)
            }))
        {
            let mut out = String::from("x");
            push_uint(&mut out, v);
            assert_eq!(out, format!("x{v}"));
            let a = std::net::Ipv4Addr::from(v as u32);
            let mut out = String::new();
            write_v4(&mut out, a).unwrap();
            assert_eq!(out, a.to_string());
        }
    }

    #[test]
    fn bytes_have_three_digits_and_binary_units() {
        assert_eq!(s(bytes(0.0)), "0 B");
        assert_eq!(s(bytes(512.0)), "512 B");
        assert_eq!(s(bytes(65536.0)), "64 KiB");
        assert_eq!(s(bytes(1.5 * 1048576.0)), "1.5 MiB");
        assert_eq!(s(bytes(1_600_000.0)), "1.53 MiB");
        assert_eq!(s(bytes(153_900.0)), "150 KiB");
        assert_eq!(s(bytes(16_384.0)), "16 KiB");
        // Just under a unit: the next unit, never "1024 KiB".
        assert_eq!(s(bytes(1_048_575.0)), "1 MiB");
        assert_eq!(s(bytes(1023.0)), "1023 B");
        assert_eq!(s(bytes(3.2 * 1073741824.0)), "3.2 GiB");
        assert_eq!(s(bytes_cell(512)), "512");
        assert_eq!(s(bytes_cell(65536)), "64K");
        assert_eq!(s(bytes_cell(1536)), "1.5K");
        assert_eq!(s(bytes_cell(4 << 20)), "4M");
        assert_eq!(s(bytes_cell(6 << 30)), "6G");
    }

    #[test]
    fn rates_in_decimal_units_and_bits() {
        assert_eq!(s(byte_rate(0.0)), "0 B/s");
        assert_eq!(s(byte_rate(1_620_000.0)), "1.62 MB/s");
        assert_eq!(s(byte_rate(840_000.0)), "840 kB/s");
        assert_eq!(s(byte_rate(999_999.99)), "1 MB/s");
        assert_eq!(s(byte_rate(16_200_000.0)), "16.2 MB/s");
        assert_eq!(s(bit_rate(1_210_000.0)), "9.68 Mbit/s");
        assert_eq!(s(rate(1_210_000.0)), "1.21 MB/s (9.68 Mbit/s)");
        assert_eq!(s(bit_rate_cell(105_000)), "840Kbps");
        assert_eq!(s(bit_rate_cell(11_900_000)), "95.2Mbps");
        assert_eq!(s(bit_rate_cell(60)), "480bps");
        assert_eq!(s(bit_rate_cell(150_000_000)), "1.2Gbps");
    }

    #[test]
    fn durations_from_microseconds() {
        assert_eq!(s(duration_us(52u64)), "52 us");
        assert_eq!(s(duration_us(20_300u64)), "20.3 ms");
        assert_eq!(s(duration_us(1_200_000u64)), "1.2 s");
        assert_eq!(s(duration_us(999_700u64)), "1 s");
        assert_eq!(s(duration_us_cell(52u64)), "52us");
        assert_eq!(s(duration_us_cell(2_345u64)), "2.35ms");
        assert_eq!(s(duration_us_cell(204_000u64)), "204ms");
    }

    #[test]
    fn endpoints_as_the_listing_writes_them() {
        let ip = |a: &str, port| Endpoint::Inet {
            addr: a.parse().unwrap(),
            port,
        };
        assert_eq!(s(endpoint(&ip("127.0.0.1", 80))), "127.0.0.1:80");
        assert_eq!(s(endpoint(&ip("::1", 25))), "[::1]:25");
        assert_eq!(s(endpoint(&ip("0.0.0.0", 22))), "*:22");
        assert_eq!(s(endpoint(&ip("::", 0))), "*:*");
        assert_eq!(s(inet("192.0.2.1".parse().unwrap(), 0)), "192.0.2.1:*");
        assert_eq!(
            s(connection_ends(
                &ip("192.0.2.1", 40000),
                Some(&ip("2001:db8::2", 5001))
            )),
            "192.0.2.1:40000 -> [2001:db8::2]:5001"
        );
        assert_eq!(
            s(connection_ends(&ip("192.0.2.1", 80), None)),
            "192.0.2.1:80"
        );
        let path = |b: &[u8]| Endpoint::Unix(Some(UnixName::Path(RawString::new(b))));
        assert_eq!(s(endpoint(&path(b"/run/x.sock"))), "/run/x.sock");
        assert_eq!(s(endpoint(&path(b"/tmp/\x1b[2J"))), "/tmp/\\x1b[2J");
        assert_eq!(
            s(endpoint(&Endpoint::Unix(Some(UnixName::Abstract(
                RawString::new(b"bus")
            ))))),
            "@bus"
        );
        assert_eq!(s(endpoint(&Endpoint::Unix(None))), "*");
        let peer = Endpoint::UnixPeer {
            peer: 77,
            name: None,
        };
        assert_eq!(s(endpoint(&peer)), "[inode 77]");
        let mut holders = UnixHolders::default();
        holders.insert(77, Owner { pid: 9, fd: 4 });
        let mut cell = String::new();
        write_endpoint(&mut cell, Some(&peer), &holders);
        assert_eq!(cell, "[9 4]");
        cell.clear();
        write_endpoint(&mut cell, None, &holders);
        assert_eq!(cell, "*:*");
        assert_eq!(
            s(endpoint(&Endpoint::Packet {
                protocol: 3,
                ifindex: 2
            })),
            "proto 0x0003 if 2"
        );
    }

    #[test]
    fn timestamps_are_utc_rfc3339() {
        let t = |s: u64, ms: u64| {
            utc_timestamp(
                SystemTime::UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms),
            )
        };
        assert_eq!(t(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(t(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(t(1_795_358_401, 123), "2026-11-22T14:40:01.123Z");
        assert_eq!(t(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }
}
