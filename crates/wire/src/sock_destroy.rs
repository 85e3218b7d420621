//! `SOCK_DESTROY`: the request that closes one TCP or UDP socket from outside its process
//! (`ss -K`), and the reading of the kernel's answer.
//!
//! The request is a netlink message of type `SOCK_DESTROY` carrying the same
//! `struct inet_diag_req_v2` as a dump, with its `inet_diag_sockid` naming one socket: both
//! addresses and ports, the bound interface, and the socket cookie. The kernel looks the socket
//! up by the addresses (`inet_diag_find_one_icsk` in `net/ipv4/inet_diag.c`, `__udp_diag_destroy`
//! in `net/ipv4/udp_diag.c`) and refuses when the cookie is not the one it finds
//! (`sock_diag_check_cookie` in `net/core/sock_diag.c`): a socket that closed and was replaced
//! by another with the same addresses is left alone. `NLM_F_ACK` makes every request answered by
//! exactly one `NLMSG_ERROR` (0 = done), matched to it by sequence number.
//!
//! The kernel answers ENOENT both when no socket has the addresses and when one has them under
//! another cookie (`inet_diag_find_one_icsk`, `__udp_diag_destroy`). To tell the two apart, the
//! same id can be sent as a lookup ([`DestroyReq::encode_lookup`]: `SOCK_DIAG_BY_FAMILY` without
//! `NLM_F_DUMP`, any cookie), answered by the socket the kernel finds there, or an error.

use std::net::IpAddr;

use crate::inet_diag::{self, AF_INET, AF_INET6, INET_DIAG_NOCOOKIE, INET_DIAG_REQ_V2_LEN};
use crate::netlink::{
    self, classify, messages, Control, NLM_F_ACK, NLM_F_REQUEST, SOCK_DESTROY, SOCK_DIAG_BY_FAMILY,
};
use crate::DecodeError;

/// One socket to destroy, named as the kernel's lookup needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DestroyReq {
    /// `sdiag_family`: [`AF_INET`] or [`AF_INET6`], the family the socket was listed under (a
    /// dual-stack socket with IPv4-mapped addresses is an [`AF_INET6`] socket).
    pub family: u8,
    /// `sdiag_protocol`: `IPPROTO_TCP` (6) or `IPPROTO_UDP` (17) (UDP-Lite, 136, too).
    pub protocol: u8,
    /// Local address (`idiag_src`).
    pub src: IpAddr,
    /// Local port (`idiag_sport`).
    pub sport: u16,
    /// Remote address (`idiag_dst`); unspecified for a socket with no remote end.
    pub dst: IpAddr,
    /// Remote port (`idiag_dport`); 0 for a socket with no remote end.
    pub dport: u16,
    /// `idiag_if`: the interface the socket is bound to (`SO_BINDTODEVICE`, a VRF), 0 when
    /// unbound. The lookup only finds a bound socket through its interface.
    pub ifindex: u32,
    /// `idiag_cookie`: the socket's cookie from the listing.
    pub cookie: u64,
}

/// Writes an address into the 16-byte `idiag_src`/`idiag_dst` field: IPv4 in the first four
/// bytes, IPv6 in all sixteen (network order, as `inet_diag_msg` carries them).
fn addr_field(a: IpAddr) -> [u8; 16] {
    let mut f = [0u8; 16];
    match a {
        IpAddr::V4(v4) => f[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => f.copy_from_slice(&v6.octets()),
    }
    f
}

impl DestroyReq {
    /// The 56-byte `inet_diag_req_v2`: family, protocol, no extensions, every state, then the
    /// socket id (ports big-endian, addresses in network order, interface and the two cookie
    /// words native-endian, low word first, as `sock_diag_save_cookie` stores them).
    pub fn encode_body(&self) -> Vec<u8> {
        self.body(self.cookie)
    }

    fn body(&self, cookie: u64) -> Vec<u8> {
        let mut b = Vec::with_capacity(INET_DIAG_REQ_V2_LEN);
        b.push(self.family);
        b.push(self.protocol);
        b.push(0); // idiag_ext
        b.push(0); // pad
        b.extend_from_slice(&u32::MAX.to_ne_bytes()); // idiag_states: not used by the lookup
        b.extend_from_slice(&self.sport.to_be_bytes());
        b.extend_from_slice(&self.dport.to_be_bytes());
        b.extend_from_slice(&addr_field(self.src));
        b.extend_from_slice(&addr_field(self.dst));
        b.extend_from_slice(&self.ifindex.to_ne_bytes());
        b.extend_from_slice(&(cookie as u32).to_ne_bytes());
        b.extend_from_slice(&((cookie >> 32) as u32).to_ne_bytes());
        debug_assert_eq!(b.len(), INET_DIAG_REQ_V2_LEN);
        b
    }

    /// The full netlink message: `nlmsghdr { SOCK_DESTROY, NLM_F_REQUEST | NLM_F_ACK, seq }`
    /// then [`DestroyReq::encode_body`].
    pub fn encode(&self, seq: u32) -> Vec<u8> {
        netlink::encode_message(
            SOCK_DESTROY,
            NLM_F_REQUEST | NLM_F_ACK,
            seq,
            &self.encode_body(),
        )
    }

    /// The same socket id sent as a lookup, with any cookie (`INET_DIAG_NOCOOKIE`):
    /// `nlmsghdr { SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq }` without `NLM_F_DUMP`. The kernel
    /// answers with the one socket it finds at these addresses (read it with
    /// [`lookup_answer`]), or ENOENT.
    pub fn encode_lookup(&self, seq: u32) -> Vec<u8> {
        netlink::encode_message(
            SOCK_DIAG_BY_FAMILY,
            NLM_F_REQUEST,
            seq,
            &self.body(INET_DIAG_NOCOOKIE),
        )
    }

    /// The family for an address: [`AF_INET`] for IPv4, [`AF_INET6`] for IPv6.
    pub fn family_of(a: IpAddr) -> u8 {
        if a.is_ipv4() {
            AF_INET
        } else {
            AF_INET6
        }
    }
}

/// Reads the kernel's answer to the request sent with sequence number `seq` from one `recv()`
/// buffer: `Some(0)` when the socket was destroyed, `Some(errno)` (positive) when refused,
/// `None` when the buffer holds no answer to `seq` (an answer to an earlier request, say).
///
/// The errnos the kernel gives: `ENOENT` no such socket (also a UDP cookie mismatch, and on
/// 6.11+ a TCP socket already closed), `ESTALE` a TCP socket with these addresses but another
/// cookie, `EPERM` no `CAP_NET_ADMIN` over the socket's network namespace, `EOPNOTSUPP` the
/// protocol cannot be destroyed or the kernel lacks `CONFIG_INET_DIAG_DESTROY`, `EINVAL` a
/// request this kernel does not understand.
pub fn answer(buf: &[u8], seq: u32) -> Result<Option<i32>, DecodeError> {
    for m in messages(buf) {
        let m = m?;
        if m.seq != seq {
            continue;
        }
        match classify(&m)? {
            Control::Error { errno } => return Ok(Some(errno)),
            // A kernel that treats the request as a dump (none does) would end with DONE.
            Control::Done { errno } => return Ok(Some(errno.unwrap_or(0))),
            _ => {}
        }
    }
    Ok(None)
}

/// The socket a lookup found: its cookie and its four addresses (which may differ from the
/// request's: a TCP lookup that finds no connection falls back to the listener on the local
/// port, a UDP lookup to the socket a datagram would reach).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Its cookie.
    pub cookie: u64,
    /// Local address.
    pub src: IpAddr,
    /// Local port.
    pub sport: u16,
    /// Remote address.
    pub dst: IpAddr,
    /// Remote port.
    pub dport: u16,
}

impl Found {
    /// True when it has exactly the addresses `req` names (so it took the place of the socket
    /// `req` was made for, if its cookie is another).
    pub fn same_addresses(&self, req: &DestroyReq) -> bool {
        (self.src, self.sport, self.dst, self.dport) == (req.src, req.sport, req.dst, req.dport)
    }
}

/// The kernel's answer to a lookup ([`DestroyReq::encode_lookup`]) sent with sequence number
/// `seq`, from one `recv()` buffer: `Some(Ok(found))`, `Some(Err(errno))` (ENOENT: none), `None`
/// when the buffer holds no answer to `seq`.
pub fn lookup_answer(buf: &[u8], seq: u32) -> Result<Option<Result<Found, i32>>, DecodeError> {
    for m in messages(buf) {
        let m = m?;
        if m.seq != seq {
            continue;
        }
        match classify(&m)? {
            Control::Data(p) => {
                let d = inet_diag::decode_msg(p)?;
                return Ok(Some(Ok(Found {
                    cookie: d.cookie,
                    src: d.src,
                    sport: d.sport,
                    dst: d.dst,
                    dport: d.dport,
                })));
            }
            Control::Error { errno } => return Ok(Some(Err(errno))),
            Control::Done { errno } => return Ok(Some(Err(errno.unwrap_or(ENOENT)))),
            _ => {}
        }
    }
    Ok(None)
}

/// `ENOENT` (Linux): what an answer without a socket means.
const ENOENT: i32 = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::{encode_message, NLMSG_ERROR};
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// The bytes of a request for 192.0.2.1:51234 -> 198.51.100.7:443, bound to interface 3,
    /// cookie 0x0000_0001_0000_0002, as `ss -K` would send for the same socket.
    #[test]
    fn request_bytes() {
        let r = DestroyReq {
            family: AF_INET,
            protocol: 6,
            src: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            sport: 51234,
            dst: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
            dport: 443,
            ifindex: 3,
            cookie: 0x0000_0001_0000_0002,
        };
        let b = r.encode(77);
        assert_eq!(b.len(), 16 + 56);
        assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), 72);
        assert_eq!(u16::from_ne_bytes(b[4..6].try_into().unwrap()), 21);
        assert_eq!(u16::from_ne_bytes(b[6..8].try_into().unwrap()), 0x0005);
        assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), 77);
        let p = &b[16..];
        assert_eq!(&p[0..4], &[2, 6, 0, 0]);
        assert_eq!(&p[4..8], &[0xff; 4]);
        assert_eq!(&p[8..10], &[0xc8, 0x22], "sport 51234 big-endian");
        assert_eq!(&p[10..12], &[0x01, 0xbb], "dport 443 big-endian");
        assert_eq!(&p[12..16], &[192, 0, 2, 1]);
        assert_eq!(&p[16..28], &[0; 12]);
        assert_eq!(&p[28..32], &[198, 51, 100, 7]);
        assert_eq!(&p[32..44], &[0; 12]);
        assert_eq!(&p[44..48], &3u32.to_ne_bytes());
        assert_eq!(&p[48..52], &2u32.to_ne_bytes(), "cookie low word first");
        assert_eq!(&p[52..56], &1u32.to_ne_bytes());
    }

    #[test]
    fn ipv6_fills_the_whole_address() {
        let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let r = DestroyReq {
            family: DestroyReq::family_of(IpAddr::V6(src)),
            protocol: 17,
            src: IpAddr::V6(src),
            sport: 53,
            dst: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            dport: 0,
            ifindex: 0,
            cookie: 9,
        };
        let p = r.encode_body();
        assert_eq!(p[0], AF_INET6);
        assert_eq!(p[1], 17);
        assert_eq!(&p[12..28], &src.octets());
        assert_eq!(&p[28..44], &[0; 16]);
    }

    #[test]
    fn lookup_sends_any_cookie_and_reads_the_socket_found() {
        let r = DestroyReq {
            family: AF_INET,
            protocol: 6,
            src: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            sport: 1,
            dst: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            dport: 2,
            ifindex: 0,
            cookie: 5,
        };
        let b = r.encode_lookup(9);
        assert_eq!(u16::from_ne_bytes(b[4..6].try_into().unwrap()), 20);
        assert_eq!(
            u16::from_ne_bytes(b[6..8].try_into().unwrap()),
            1,
            "no NLM_F_DUMP"
        );
        assert_eq!(&b[16 + 48..16 + 56], &[0xff; 8], "INET_DIAG_NOCOOKIE");
        assert_eq!(&b[16..16 + 48], &r.encode_body()[..48]);
        let mut msg = vec![0u8; 72];
        msg[0] = AF_INET;
        msg[4..6].copy_from_slice(&1u16.to_be_bytes());
        msg[6..8].copy_from_slice(&2u16.to_be_bytes());
        msg[8..12].copy_from_slice(&[127, 0, 0, 1]);
        msg[24..28].copy_from_slice(&[127, 0, 0, 1]);
        msg[44..48].copy_from_slice(&7u32.to_ne_bytes());
        let reply = encode_message(SOCK_DIAG_BY_FAMILY, 0, 9, &msg);
        let found = lookup_answer(&reply, 9).unwrap().unwrap().unwrap();
        assert_eq!(found.cookie, 7);
        assert!(found.same_addresses(&r));
        // A listener found for a connection's addresses: not the same socket's place.
        msg[6..8].copy_from_slice(&0u16.to_be_bytes());
        msg[24..28].copy_from_slice(&[0; 4]);
        let reply = encode_message(SOCK_DIAG_BY_FAMILY, 0, 9, &msg);
        let found = lookup_answer(&reply, 9).unwrap().unwrap().unwrap();
        assert!(!found.same_addresses(&r));
        assert_eq!(lookup_answer(&reply, 8).unwrap(), None);
        let err = encode_message(NLMSG_ERROR, 0, 9, &(-2i32).to_ne_bytes());
        assert_eq!(lookup_answer(&err, 9).unwrap(), Some(Err(2)));
    }

    #[test]
    fn answers_by_sequence_number() {
        let mut buf = encode_message(NLMSG_ERROR, 0, 4, &(-2i32).to_ne_bytes());
        buf.extend(encode_message(NLMSG_ERROR, 0, 5, &0i32.to_ne_bytes()));
        assert_eq!(answer(&buf, 4).unwrap(), Some(2), "ENOENT");
        assert_eq!(answer(&buf, 5).unwrap(), Some(0));
        assert_eq!(answer(&buf, 6).unwrap(), None);
        assert!(answer(&buf[..10], 4).is_err());
    }
}
