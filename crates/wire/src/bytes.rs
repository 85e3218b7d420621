//! Bounds-checked reads of native-endian integers. Netlink carries host byte order
//! (`include/uapi/linux/netlink.h`), except the fields the kernel marks `__be16`/`__be32`.

#[inline]
pub(crate) fn arr<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    let end = off.checked_add(N)?;
    b.get(off..end)?.try_into().ok()
}

#[inline]
pub(crate) fn u8_at(b: &[u8], off: usize) -> Option<u8> {
    b.get(off).copied()
}

#[inline]
pub(crate) fn u16_ne(b: &[u8], off: usize) -> Option<u16> {
    arr(b, off).map(u16::from_ne_bytes)
}

#[inline]
pub(crate) fn u16_be(b: &[u8], off: usize) -> Option<u16> {
    arr(b, off).map(u16::from_be_bytes)
}

#[inline]
pub(crate) fn u32_ne(b: &[u8], off: usize) -> Option<u32> {
    arr(b, off).map(u32::from_ne_bytes)
}

#[inline]
pub(crate) fn i32_ne(b: &[u8], off: usize) -> Option<i32> {
    arr(b, off).map(i32::from_ne_bytes)
}

#[inline]
pub(crate) fn u64_ne(b: &[u8], off: usize) -> Option<u64> {
    arr(b, off).map(u64::from_ne_bytes)
}

/// Netlink's 4-byte alignment (`NLMSG_ALIGN`, `NLA_ALIGN`), saturating instead of overflowing.
#[inline]
pub(crate) fn align4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// A socket cookie as the kernel stores it: `cookie[0]` low word, `cookie[1]` high word
/// (`sock_diag_save_cookie` in `net/core/sock_diag.c`).
#[inline]
pub(crate) fn cookie_at(b: &[u8], off: usize) -> Option<u64> {
    let lo = u32_ne(b, off)?;
    let hi = u32_ne(b, off.checked_add(4)?)?;
    Some(u64::from(lo) | (u64::from(hi) << 32))
}

/// The payload of a NUL-terminated string attribute (`nla_put_string`), cut at the first NUL.
#[inline]
pub(crate) fn c_str(b: &[u8]) -> Option<&str> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).ok()
}
