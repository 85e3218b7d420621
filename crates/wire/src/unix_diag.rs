//! `unix_diag`: AF_UNIX sockets over `NETLINK_SOCK_DIAG` (`include/uapi/linux/unix_diag.h`,
//! filled by `sk_diag_fill` in `net/unix/diag.c`, 3.3+).
//!
//! Attribute numbering starts at 0 here (`UNIX_DIAG_NAME = 0`): a parser that treats type 0
//! as "none" loses every socket path.

use crate::bytes::{cookie_at, u32_ne, u8_at};
use crate::meminfo::SkMemInfo;
use crate::netlink::{self, encode_request};
use crate::DecodeError;

/// `AF_UNIX`.
pub const AF_UNIX: u8 = 1;
/// Size of `struct unix_diag_req`.
pub const UNIX_DIAG_REQ_LEN: usize = 24;
/// Size of `struct unix_diag_msg`.
pub const UNIX_DIAG_MSG_LEN: usize = 16;

/// `UDIAG_SHOW_*`: which attributes to send.
pub mod show {
    /// `UDIAG_SHOW_NAME`: `UNIX_DIAG_NAME`, the bound `sun_path`.
    pub const NAME: u32 = 0x01;
    /// `UDIAG_SHOW_VFS`: `UNIX_DIAG_VFS`, `{ino, dev}` of the bound file.
    pub const VFS: u32 = 0x02;
    /// `UDIAG_SHOW_PEER`: `UNIX_DIAG_PEER`, the peer socket's inode.
    pub const PEER: u32 = 0x04;
    /// `UDIAG_SHOW_ICONS`: `UNIX_DIAG_ICONS`, inodes of not-yet-accepted connections (LISTEN).
    pub const ICONS: u32 = 0x08;
    /// `UDIAG_SHOW_RQLEN`: `UNIX_DIAG_RQLEN`, receive/send queue lengths.
    pub const RQLEN: u32 = 0x10;
    /// `UDIAG_SHOW_MEMINFO`: `UNIX_DIAG_MEMINFO`, `SK_MEMINFO_*` array.
    pub const MEMINFO: u32 = 0x20;
    /// `UDIAG_SHOW_UID` (5.3+): `UNIX_DIAG_UID`.
    pub const UID: u32 = 0x40;
}

/// Reply attribute types (`UNIX_DIAG_*`), numbered from 0.
pub mod attr {
    /// `UNIX_DIAG_NAME`: `sun_path` bytes.
    pub const NAME: u16 = 0;
    /// `UNIX_DIAG_VFS`: `struct unix_diag_vfs`.
    pub const VFS: u16 = 1;
    /// `UNIX_DIAG_PEER`: `u32` peer inode.
    pub const PEER: u16 = 2;
    /// `UNIX_DIAG_ICONS`: `u32[]` inodes.
    pub const ICONS: u16 = 3;
    /// `UNIX_DIAG_RQLEN`: `struct unix_diag_rqlen`.
    pub const RQLEN: u16 = 4;
    /// `UNIX_DIAG_MEMINFO`: `u32[SK_MEMINFO_VARS]`.
    pub const MEMINFO: u16 = 5;
    /// `UNIX_DIAG_SHUTDOWN`: `u8`, always sent.
    pub const SHUTDOWN: u16 = 6;
    /// `UNIX_DIAG_UID`: `u32`.
    pub const UID: u16 = 7;
}

/// A unix_diag dump request (`struct unix_diag_req`, `udiag_ino` 0, cookie
/// `INET_DIAG_NOCOOKIE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnixDiagReq {
    /// `udiag_states`: `1 << state` per state (`TCP_ESTABLISHED` 1, `TCP_LISTEN` 10, unbound
    /// and unconnected sockets are `TCP_CLOSE` 7); `u32::MAX` for all.
    pub states: u32,
    /// `udiag_show`: [`show`] bits.
    pub show: u32,
}

impl UnixDiagReq {
    /// The full netlink message (`SOCK_DIAG_BY_FAMILY`, `NLM_F_REQUEST|NLM_F_DUMP`).
    pub fn encode(&self, seq: u32) -> Vec<u8> {
        let mut b = Vec::with_capacity(UNIX_DIAG_REQ_LEN);
        b.push(AF_UNIX);
        b.push(0); // sdiag_protocol
        b.extend_from_slice(&[0, 0]); // pad
        b.extend_from_slice(&self.states.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes()); // udiag_ino: 0 = dump
        b.extend_from_slice(&self.show.to_ne_bytes());
        b.extend_from_slice(&u32::MAX.to_ne_bytes());
        b.extend_from_slice(&u32::MAX.to_ne_bytes());
        encode_request(seq, &b)
    }
}

/// One AF_UNIX socket: `struct unix_diag_msg` and its attributes.
#[derive(Debug, Clone)]
pub struct UnixDiagMsg<'a> {
    /// `udiag_type`: `SOCK_STREAM` 1, `SOCK_DGRAM` 2, `SOCK_SEQPACKET` 5.
    pub sock_type: u8,
    /// `udiag_state`: `TCP_ESTABLISHED` 1, `TCP_CLOSE` 7, `TCP_LISTEN` 10 ...
    pub state: u8,
    /// `udiag_ino`: the socket's inode.
    pub inode: u32,
    /// `udiag_cookie[0] | udiag_cookie[1] << 32`.
    pub cookie: u64,
    /// `UNIX_DIAG_NAME`: raw `sun_path` bytes as the kernel sent them (`addr->len -
    /// sizeof(short)` bytes, `sk_diag_dump_name`). Abstract names start with NUL; a
    /// filesystem path may carry its terminating NUL. Nothing is stripped; see
    /// [`UnixDiagMsg::name_kind`].
    pub name: Option<&'a [u8]>,
    /// `UNIX_DIAG_VFS`: `(udiag_vfs_ino, udiag_vfs_dev)` of the bound file.
    pub vfs: Option<(u32, u32)>,
    /// `UNIX_DIAG_PEER`: inode of the connected peer.
    pub peer: Option<u32>,
    /// `UNIX_DIAG_ICONS`: raw `u32` array of pending-connection inodes; iterate with
    /// [`UnixDiagMsg::icons_iter`].
    pub icons: Option<&'a [u8]>,
    /// `UNIX_DIAG_RQLEN`: `(rqueue, wqueue)`; for LISTEN, accept-queue length and backlog.
    pub rqlen: Option<(u32, u32)>,
    /// `UNIX_DIAG_MEMINFO`.
    pub meminfo: Option<SkMemInfo>,
    /// `UNIX_DIAG_UID` (5.3+).
    pub uid: Option<u32>,
    /// `UNIX_DIAG_SHUTDOWN`: `sk_shutdown` (3.8+).
    pub shutdown: Option<u8>,
}

/// A unix socket address, classified (see `unix_mkname` / `unix_seq_show` in
/// `net/unix/af_unix.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnixName<'a> {
    /// Not bound (no `UNIX_DIAG_NAME`, or an empty one from an autobind race).
    Unnamed,
    /// A filesystem path, trailing NULs removed.
    Path(&'a [u8]),
    /// An abstract name, without its leading NUL (it may contain further NULs).
    Abstract(&'a [u8]),
}

impl<'a> UnixDiagMsg<'a> {
    /// The pending-connection inodes of a listener (`UNIX_DIAG_ICONS`). A trailing partial
    /// entry is ignored.
    pub fn icons_iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.icons
            .unwrap_or(&[])
            .chunks_exact(4)
            .filter_map(|c| c.try_into().ok().map(u32::from_ne_bytes))
    }

    /// [`name`](Self::name) classified as path or abstract name.
    pub fn name_kind(&self) -> UnixName<'a> {
        match self.name {
            None | Some([]) => UnixName::Unnamed,
            Some([0, rest @ ..]) => UnixName::Abstract(rest),
            Some(p) => {
                let end = p.iter().position(|&c| c == 0).unwrap_or(p.len());
                UnixName::Path(&p[..end])
            }
        }
    }
}

fn pair(p: &[u8]) -> Option<(u32, u32)> {
    Some((u32_ne(p, 0)?, u32_ne(p, 4)?))
}

/// Decodes the payload of one data message from a unix_diag dump: the 16-byte
/// `unix_diag_msg`, then attributes (type 0 = `UNIX_DIAG_NAME`). Unknown attributes are
/// skipped; short known ones give `None`.
pub fn decode_msg(payload: &[u8]) -> Result<UnixDiagMsg<'_>, DecodeError> {
    const WHAT: &str = "unix_diag_msg";
    if payload.len() < UNIX_DIAG_MSG_LEN {
        return Err(DecodeError::truncated(
            WHAT,
            UNIX_DIAG_MSG_LEN,
            payload.len(),
        ));
    }
    let short = || DecodeError::truncated(WHAT, UNIX_DIAG_MSG_LEN, payload.len());
    let mut m = UnixDiagMsg {
        sock_type: payload[1],
        state: payload[2],
        inode: u32_ne(payload, 4).ok_or_else(short)?,
        cookie: cookie_at(payload, 8).ok_or_else(short)?,
        name: None,
        vfs: None,
        peer: None,
        icons: None,
        rqlen: None,
        meminfo: None,
        uid: None,
        shutdown: None,
    };
    for item in netlink::attrs(&payload[UNIX_DIAG_MSG_LEN..]) {
        let (ty, p) = item?;
        match ty {
            attr::NAME => m.name = Some(p),
            attr::VFS => m.vfs = pair(p),
            attr::PEER => m.peer = u32_ne(p, 0),
            attr::ICONS => m.icons = Some(p),
            attr::RQLEN => m.rqlen = pair(p),
            attr::MEMINFO => m.meminfo = SkMemInfo::from_bytes(p),
            attr::SHUTDOWN => m.shutdown = u8_at(p, 0),
            attr::UID => m.uid = u32_ne(p, 0),
            _ => {}
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::push_attr;

    #[test]
    fn name_type_zero_and_icons() {
        let mut p = vec![1, 1, 10, 0];
        p.extend_from_slice(&5u32.to_ne_bytes());
        p.extend_from_slice(&[0; 8]);
        push_attr(&mut p, attr::NAME, b"\0abs\0x");
        let icons: Vec<u8> = [7u32, 8].iter().flat_map(|v| v.to_ne_bytes()).collect();
        push_attr(&mut p, attr::ICONS, &icons);
        push_attr(&mut p, attr::RQLEN, &[0; 4]); // short -> None
        let m = decode_msg(&p).unwrap();
        assert_eq!(m.name, Some(&b"\0abs\0x"[..]));
        assert_eq!(m.name_kind(), UnixName::Abstract(b"abs\0x"));
        assert_eq!(m.icons_iter().collect::<Vec<_>>(), vec![7, 8]);
        assert_eq!(m.rqlen, None);
        assert_eq!(m.inode, 5);
    }

    #[test]
    fn path_name_kind() {
        let m = UnixDiagMsg {
            name: Some(b"/run/x.sock\0"),
            ..decode_msg(&[0u8; 16]).unwrap()
        };
        assert_eq!(m.name_kind(), UnixName::Path(b"/run/x.sock"));
    }

    #[test]
    fn request_layout() {
        let b = UnixDiagReq {
            states: u32::MAX,
            show: show::NAME | show::PEER,
        }
        .encode(3);
        assert_eq!(b.len(), 16 + 24);
        assert_eq!(b[16], AF_UNIX);
        assert_eq!(&b[28..32], &5u32.to_ne_bytes());
        assert_eq!(&b[32..40], &[0xff; 8]);
    }
}
