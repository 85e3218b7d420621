//! Netlink framing: `struct nlmsghdr`, the dump-loop control messages, and `struct nlattr`
//! walking (`include/uapi/linux/netlink.h`).
//!
//! This module owns only the framing. It never opens a socket: feed it the bytes one
//! `recv()` returned and it tells you what they mean.

use crate::bytes::{align4, i32_ne, u16_ne, u32_ne};
use crate::DecodeError;

/// `NLMSG_HDRLEN`: size of `struct nlmsghdr`.
pub const NLMSG_HDRLEN: usize = 16;
/// `NLMSG_NOOP`: message to be ignored.
pub const NLMSG_NOOP: u16 = 1;
/// `NLMSG_ERROR`: payload is `struct nlmsgerr` (an `int error` then the offending header).
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: end of a multipart dump; payload is an `int` (0 or a negative errno).
pub const NLMSG_DONE: u16 = 3;
/// `NLMSG_OVERRUN`: data lost.
pub const NLMSG_OVERRUN: u16 = 4;
/// `NLMSG_MIN_TYPE`: types below this are reserved for control messages.
pub const NLMSG_MIN_TYPE: u16 = 0x10;

/// `NLM_F_REQUEST`: this is a request.
pub const NLM_F_REQUEST: u16 = 1;
/// `NLM_F_MULTI`: part of a multipart reply, terminated by `NLMSG_DONE`.
pub const NLM_F_MULTI: u16 = 2;
/// `NLM_F_ACK`: ask for an acknowledgement.
pub const NLM_F_ACK: u16 = 4;
/// `NLM_F_DUMP_INTR`: the dump was inconsistent because the table changed under it
/// (`nl_dump_check_consistent` in `include/net/netlink.h`); the caller should retry.
pub const NLM_F_DUMP_INTR: u16 = 0x10;
/// `NLM_F_DUMP` = `NLM_F_ROOT | NLM_F_MATCH`: dump the whole table.
pub const NLM_F_DUMP: u16 = 0x300;

/// `SOCK_DIAG_BY_FAMILY` (`include/uapi/linux/sock_diag.h`): the request and reply type of
/// every sock_diag dump.
pub const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `SOCK_DESTROY`: close a socket by its identity (needs `CAP_NET_ADMIN`).
pub const SOCK_DESTROY: u16 = 21;
/// `NETLINK_SOCK_DIAG`: the netlink protocol number to pass to `socket(AF_NETLINK, ...)`.
pub const NETLINK_SOCK_DIAG: i32 = 4;

/// `NLA_F_NESTED` | `NLA_F_NET_BYTEORDER`: flag bits in `nla_type` that are not part of the type.
pub const NLA_TYPE_MASK: u16 = 0x3fff;
/// Size of `struct nlattr` / `struct rtattr` (`NLA_HDRLEN`).
pub const NLA_HDRLEN: usize = 4;

/// One netlink message: the decoded `struct nlmsghdr` and its payload (without padding).
#[derive(Debug, Clone, Copy)]
pub struct NlMsg<'a> {
    /// `nlmsg_type`.
    pub ty: u16,
    /// `nlmsg_flags` (`NLM_F_*`).
    pub flags: u16,
    /// `nlmsg_seq`: the sequence number of the request this answers.
    pub seq: u32,
    /// `nlmsg_pid`: port id of the receiving socket.
    pub pid: u32,
    /// The bytes after the header, `nlmsg_len - 16` of them.
    pub payload: &'a [u8],
}

impl NlMsg<'_> {
    /// Whether the kernel flagged this message with `NLM_F_DUMP_INTR`: the table changed
    /// during the dump, so the set of sockets may be inconsistent and the dump should be
    /// retried (`nl_dump_check_consistent`, `include/net/netlink.h`).
    pub fn dump_interrupted(&self) -> bool {
        self.flags & NLM_F_DUMP_INTR != 0
    }
}

/// Iterator over the netlink messages packed in one `recv()` buffer; see [`messages`].
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    buf: &'a [u8],
    off: usize,
    failed: bool,
}

/// Iterates the netlink messages packed in one `recv()` buffer (each 4-byte aligned,
/// `NLMSG_ALIGN`); yields `Err` once and stops on a truncated/malformed header
/// (`nlmsg_len < 16` or beyond the buffer).
pub fn messages(buf: &[u8]) -> Messages<'_> {
    Messages {
        buf,
        off: 0,
        failed: false,
    }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<NlMsg<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.off >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.off..];
        let start = self.off;
        let fail = |s: &mut Self, e| {
            s.failed = true;
            Some(Err(e))
        };
        if rest.len() < NLMSG_HDRLEN {
            return fail(
                self,
                DecodeError::truncated("nlmsghdr", NLMSG_HDRLEN, rest.len()),
            );
        }
        // The header is present: these reads cannot fail, but stay total anyway.
        let len = u32_ne(rest, 0).unwrap_or(0) as usize;
        let ty = u16_ne(rest, 4).unwrap_or(0);
        let flags = u16_ne(rest, 6).unwrap_or(0);
        let seq = u32_ne(rest, 8).unwrap_or(0);
        let pid = u32_ne(rest, 12).unwrap_or(0);
        if len < NLMSG_HDRLEN {
            return fail(
                self,
                DecodeError::malformed("nlmsghdr", start, "nlmsg_len shorter than the header"),
            );
        }
        if len > rest.len() {
            return fail(
                self,
                DecodeError::truncated("netlink message", len, rest.len()),
            );
        }
        self.off = start.saturating_add(align4(len)).min(self.buf.len());
        Some(Ok(NlMsg {
            ty,
            flags,
            seq,
            pid,
            payload: &rest[NLMSG_HDRLEN..len],
        }))
    }
}

impl std::iter::FusedIterator for Messages<'_> {}

/// What a message means for a dump loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control<'a> {
    /// A data message (type `>= NLMSG_MIN_TYPE`, e.g. `SOCK_DIAG_BY_FAMILY`): its payload.
    Data(&'a [u8]),
    /// `NLMSG_DONE`: the dump is over. `errno` is the positive errno when the `int` payload was
    /// negative (an error raised *during* the dump, e.g. `ENOENT` when no handler exists for
    /// the protocol, `__inet_diag_dump` in `net/ipv4/inet_diag.c`); `None` if it was 0 or
    /// absent. The payload may carry extended-ack TLVs after the int; they are ignored.
    Done {
        /// Positive errno, or `None` for a clean end.
        errno: Option<i32>,
    },
    /// `NLMSG_ERROR`: the request was rejected before any dump started. `errno` is positive;
    /// 0 would be an ACK (only sent when `NLM_F_ACK` was requested).
    Error {
        /// Positive errno (`-nlmsgerr.error`), or 0 for an ACK.
        errno: i32,
    },
    /// `NLMSG_OVERRUN`: data was lost.
    Overrun,
    /// Any other control type (`NLMSG_NOOP`, reserved types): the raw type.
    Other(u16),
}

/// Converts a kernel `int` error (0 or negative errno) to a positive errno, never overflowing.
fn neg_errno(v: i32) -> i32 {
    v.checked_neg().unwrap_or(i32::MAX)
}

/// Classifies one message for a dump loop: data, end of dump (with its error, if any), error,
/// overrun, or something to skip.
///
/// Fails only when an `NLMSG_ERROR` is too short to hold its `int error`.
pub fn classify<'a>(msg: &NlMsg<'a>) -> Result<Control<'a>, DecodeError> {
    Ok(match msg.ty {
        NLMSG_DONE => {
            // netlink_dump_done (net/netlink/af_netlink.c) always puts the int; be lenient
            // with very old kernels/other senders that sent an empty DONE.
            let errno = match i32_ne(msg.payload, 0) {
                Some(v) if v < 0 => Some(neg_errno(v)),
                _ => None,
            };
            Control::Done { errno }
        }
        NLMSG_ERROR => {
            let v = i32_ne(msg.payload, 0)
                .ok_or_else(|| DecodeError::truncated("nlmsgerr", 4, msg.payload.len()))?;
            Control::Error {
                errno: neg_errno(v),
            }
        }
        NLMSG_OVERRUN => Control::Overrun,
        t if t >= NLMSG_MIN_TYPE => Control::Data(msg.payload),
        t => Control::Other(t),
    })
}

/// Iterator over netlink attributes; see [`attrs`].
#[derive(Debug, Clone)]
pub struct Attrs<'a> {
    buf: &'a [u8],
    off: usize,
    failed: bool,
}

/// Attribute walker for `struct nlattr`/`struct rtattr` streams: `u16 len`, `u16 type`, payload,
/// padded to 4 bytes (`nla_for_each_attr`, `include/net/netlink.h`).
///
/// The type is masked with `& 0x3fff` to strip `NLA_F_NESTED`/`NLA_F_NET_BYTEORDER`. Type 0 is
/// a valid type: `UNIX_DIAG_NAME`, `PACKET_DIAG_INFO` and `NETLINK_DIAG_MEMINFO` are all 0.
/// A header with `len < 4`, or one reaching past the buffer, or a 1-3 byte tail, yields one
/// `Err` and ends the walk.
pub fn attrs(buf: &[u8]) -> Attrs<'_> {
    Attrs {
        buf,
        off: 0,
        failed: false,
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<(u16, &'a [u8]), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.off >= self.buf.len() {
            return None;
        }
        let start = self.off;
        let rest = &self.buf[start..];
        let (len, ty) = match (u16_ne(rest, 0), u16_ne(rest, 2)) {
            (Some(l), Some(t)) => (l as usize, t & NLA_TYPE_MASK),
            _ => {
                self.failed = true;
                return Some(Err(DecodeError::truncated(
                    "nlattr",
                    NLA_HDRLEN,
                    rest.len(),
                )));
            }
        };
        if len < NLA_HDRLEN {
            self.failed = true;
            return Some(Err(DecodeError::malformed(
                "nlattr",
                start,
                "nla_len shorter than the header",
            )));
        }
        if len > rest.len() {
            self.failed = true;
            return Some(Err(DecodeError::truncated(
                "nlattr payload",
                len,
                rest.len(),
            )));
        }
        self.off = start.saturating_add(align4(len)).min(self.buf.len());
        Some(Ok((ty, &rest[NLA_HDRLEN..len])))
    }
}

impl std::iter::FusedIterator for Attrs<'_> {}

/// Appends one attribute (header, payload, zero padding to 4 bytes) to `out`.
///
/// Returns `false` (and appends nothing) if the payload does not fit the 16-bit `nla_len`.
pub fn push_attr(out: &mut Vec<u8>, ty: u16, payload: &[u8]) -> bool {
    let Some(len) = payload
        .len()
        .checked_add(NLA_HDRLEN)
        .and_then(|l| u16::try_from(l).ok())
    else {
        return false;
    };
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(align4(out.len()), 0);
    true
}

/// Encodes a sock_diag dump request: `nlmsghdr { len, SOCK_DIAG_BY_FAMILY,
/// NLM_F_REQUEST | NLM_F_DUMP, seq, pid 0 }` followed by `body`, padded to 4 bytes.
///
/// `body` is the family-specific request (`inet_diag_req_v2`, `unix_diag_req`, ...) and any
/// request attributes. A body too large for the 32-bit `nlmsg_len` is impossible in practice;
/// the length saturates rather than panicking.
pub fn encode_request(seq: u32, body: &[u8]) -> Vec<u8> {
    encode_message(SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, body)
}

/// Encodes any netlink message with the given type and flags, `pid` 0, padded to 4 bytes.
pub fn encode_message(ty: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN.saturating_add(body.len());
    let mut out = Vec::with_capacity(align4(len));
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(body);
    out.resize(align4(out.len()), 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(ty: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
        encode_message(ty, flags, 7, payload)
    }

    #[test]
    fn walks_two_messages_and_classifies() {
        let mut buf = msg(SOCK_DIAG_BY_FAMILY, NLM_F_MULTI, &[1, 2, 3]);
        buf.extend(msg(NLMSG_DONE, NLM_F_MULTI, &(-2i32).to_ne_bytes()));
        let v: Vec<_> = messages(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].payload, &[1, 2, 3]);
        assert_eq!(classify(&v[0]).unwrap(), Control::Data(&[1, 2, 3]));
        assert_eq!(classify(&v[1]).unwrap(), Control::Done { errno: Some(2) });
    }

    #[test]
    fn short_header_is_one_error() {
        let buf = [0u8; 10];
        let v: Vec<_> = messages(&buf).collect();
        assert_eq!(v.len(), 1);
        assert!(v[0].is_err());
    }

    #[test]
    fn len_below_header_is_error() {
        let mut buf = msg(NLMSG_DONE, 0, &[0; 4]);
        buf[0..4].copy_from_slice(&8u32.to_ne_bytes());
        let v: Vec<_> = messages(&buf).collect();
        assert_eq!(v.len(), 1);
        assert!(matches!(v[0], Err(DecodeError::Malformed { .. })));
    }

    #[test]
    fn errno_extremes_do_not_overflow() {
        let b = msg(NLMSG_ERROR, 0, &i32::MIN.to_ne_bytes());
        let m = messages(&b).next().unwrap().unwrap();
        assert_eq!(classify(&m).unwrap(), Control::Error { errno: i32::MAX });
        let b = msg(NLMSG_ERROR, 0, &[]);
        let m = messages(&b).next().unwrap().unwrap();
        assert!(classify(&m).is_err());
        let b = msg(NLMSG_DONE, 0, &[]);
        let m = messages(&b).next().unwrap().unwrap();
        assert_eq!(classify(&m).unwrap(), Control::Done { errno: None });
    }

    #[test]
    fn attr_type_zero_and_flags_masked() {
        let mut b = Vec::new();
        assert!(push_attr(&mut b, 0, b"x"));
        assert!(push_attr(&mut b, 0x8000 | 5, &[1, 2, 3, 4]));
        let v: Vec<_> = attrs(&b).collect::<Result<_, _>>().unwrap();
        assert_eq!(v, vec![(0, &b"x"[..]), (5, &[1u8, 2, 3, 4][..])]);
    }

    #[test]
    fn attr_short_tail_is_error() {
        let mut b = Vec::new();
        push_attr(&mut b, 1, &[9; 4]);
        b.extend_from_slice(&[1, 2]);
        let v: Vec<_> = attrs(&b).collect();
        assert_eq!(v.len(), 2);
        assert!(v[0].is_ok() && v[1].is_err());
    }

    #[test]
    fn encode_request_header() {
        let b = encode_request(42, &[1, 2, 3, 4, 5]);
        assert_eq!(b.len(), 24);
        assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), 21);
        assert_eq!(u16::from_ne_bytes(b[4..6].try_into().unwrap()), 20);
        assert_eq!(u16::from_ne_bytes(b[6..8].try_into().unwrap()), 0x301);
        assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), 42);
    }
}
