//! `SK_MEMINFO_*`: the socket memory array sent as `INET_DIAG_SKMEMINFO`,
//! `UNIX_DIAG_MEMINFO` and `PACKET_DIAG_MEMINFO` (`sock_diag_put_meminfo` in
//! `net/core/sock_diag.c`, filled by `sk_get_meminfo` in `net/core/sock.c`).

use crate::bytes::u32_ne;

/// Socket memory accounting, in bytes (the `skmem:(r,rb,t,tb,f,w,o,bl,d)` of `ss -m`).
///
/// The array has grown over time (`SK_MEMINFO_BACKLOG` in 3.6, `SK_MEMINFO_DROPS` in 4.7), so
/// the newer entries are `Option`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SkMemInfo {
    /// `SK_MEMINFO_RMEM_ALLOC`: bytes queued for reading (`sk_rmem_alloc`).
    pub rmem_alloc: u32,
    /// `SK_MEMINFO_RCVBUF`: receive buffer limit (`sk_rcvbuf`).
    pub rcvbuf: u32,
    /// `SK_MEMINFO_WMEM_ALLOC`: bytes handed to the lower layers and not yet freed (`sk_wmem_alloc`).
    pub wmem_alloc: u32,
    /// `SK_MEMINFO_SNDBUF`: send buffer limit (`sk_sndbuf`).
    pub sndbuf: u32,
    /// `SK_MEMINFO_FWD_ALLOC`: memory reserved but not yet used (`sk_forward_alloc`).
    pub fwd_alloc: u32,
    /// `SK_MEMINFO_WMEM_QUEUED`: bytes in the write queue (`sk_wmem_queued`).
    pub wmem_queued: u32,
    /// `SK_MEMINFO_OPTMEM`: option memory (`sk_omem_alloc`).
    pub optmem: u32,
    /// `SK_MEMINFO_BACKLOG`: backlog queue length (3.6+).
    pub backlog: Option<u32>,
    /// `SK_MEMINFO_DROPS`: packets dropped (`sk_drops`, 4.7+).
    pub drops: Option<u32>,
}

impl SkMemInfo {
    /// Decodes the `u32` array. Needs at least the 7 entries every kernel sends (28 bytes);
    /// `backlog`/`drops` are `Some` only if present. Extra trailing entries from newer kernels
    /// are ignored.
    pub fn from_bytes(b: &[u8]) -> Option<SkMemInfo> {
        Some(SkMemInfo {
            rmem_alloc: u32_ne(b, 0)?,
            rcvbuf: u32_ne(b, 4)?,
            wmem_alloc: u32_ne(b, 8)?,
            sndbuf: u32_ne(b, 12)?,
            fwd_alloc: u32_ne(b, 16)?,
            wmem_queued: u32_ne(b, 20)?,
            optmem: u32_ne(b, 24)?,
            backlog: u32_ne(b, 28),
            drops: u32_ne(b, 32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        let b: Vec<u8> = (1u32..=9).flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(SkMemInfo::from_bytes(&b[..27]), None);
        let m = SkMemInfo::from_bytes(&b[..28]).unwrap();
        assert_eq!(
            (m.rmem_alloc, m.optmem, m.backlog, m.drops),
            (1, 7, None, None)
        );
        let m = SkMemInfo::from_bytes(&b[..32]).unwrap();
        assert_eq!((m.backlog, m.drops), (Some(8), None));
        let m = SkMemInfo::from_bytes(&b).unwrap();
        assert_eq!((m.backlog, m.drops), (Some(8), Some(9)));
    }
}
