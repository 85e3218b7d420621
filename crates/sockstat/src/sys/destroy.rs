//! Sending `SOCK_DESTROY` requests to the kernel: one `NETLINK_SOCK_DIAG` socket, one request and
//! its acknowledgement at a time. The socket acts on the network namespace of the thread that
//! opened it (`sock_net` of the netlink socket), so a caller that must close sockets in another
//! namespace opens it from a thread that joined that namespace (`sys::netns::run_in`).
//!
//! What to close and what the answers mean is decided in [`crate::kill`]; this file only talks
//! to the kernel. The [`Destroyer`] trait is the seam tests replace.

use std::io;
use std::os::fd::OwnedFd;

use rustix::net::netlink::{SocketAddrNetlink, SOCK_DIAG};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use sockstat_wire::sock_destroy::{answer, lookup_answer, DestroyReq, Found};
use sockstat_wire::DecodeError;

/// Something that closes one socket: the kernel, or a fake in tests.
pub trait Destroyer {
    /// Sends one request; returns the kernel's answer: 0 when the socket was closed, else the
    /// (positive) errno it refused with. `Err` when the request could not be sent or answered.
    fn destroy(&mut self, req: &DestroyReq) -> io::Result<i32>;

    /// Asks which socket the kernel finds at the request's addresses now, whatever its
    /// cookie (`Ok(None)`: none). Its addresses may differ from the request's: a TCP lookup
    /// falls back to the listener on the local port.
    fn lookup(&mut self, req: &DestroyReq) -> io::Result<Option<Found>>;
}

/// The kernel, through one `NETLINK_SOCK_DIAG` socket opened on first use.
#[derive(Default)]
pub struct Kernel {
    fd: Option<OwnedFd>,
    seq: u32,
}

impl Kernel {
    fn socket(&mut self) -> io::Result<&OwnedFd> {
        if self.fd.is_none() {
            self.fd = Some(rustix::net::socket_with(
                AddressFamily::NETLINK,
                SocketType::RAW,
                SocketFlags::CLOEXEC,
                Some(SOCK_DIAG),
            )?);
        }
        self.fd
            .as_ref()
            .ok_or_else(|| io::Error::other("netlink socket missing"))
    }
}

impl Kernel {
    /// Sends `message` (numbered `seq`) and reads until `read` finds the answer to it.
    fn ask<T>(
        &mut self,
        message: &[u8],
        seq: u32,
        read: impl Fn(&[u8], u32) -> Result<Option<T>, DecodeError>,
    ) -> io::Result<T> {
        let fd = self.socket()?;
        rustix::net::sendto(
            fd,
            message,
            SendFlags::empty(),
            &SocketAddrNetlink::new(0, 0),
        )?;
        // The answer is one message: an NLMSG_ERROR (its int, the request echoed, perhaps
        // extended-ack attributes) or one inet_diag_msg; a few hundred bytes at most.
        let mut buf = [0u8; 8192];
        loop {
            let n = match rustix::net::recv(fd, &mut buf[..], RecvFlags::empty()) {
                Ok((n, _)) => n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "netlink socket closed before the kernel answered",
                ));
            }
            let got = read(&buf[..n.min(buf.len())], seq)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            if let Some(v) = got {
                return Ok(v);
            }
            // A message for another sequence number cannot come (each request is answered
            // before the next is sent); one that did would be skipped, not misread.
        }
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }
}

impl Destroyer for Kernel {
    fn destroy(&mut self, req: &DestroyReq) -> io::Result<i32> {
        let seq = self.next_seq();
        self.ask(&req.encode(seq), seq, answer)
    }

    fn lookup(&mut self, req: &DestroyReq) -> io::Result<Option<Found>> {
        let seq = self.next_seq();
        match self.ask(&req.encode_lookup(seq), seq, lookup_answer)? {
            Ok(found) => Ok(Some(found)),
            Err(libc::ENOENT) => Ok(None),
            Err(errno) => Err(io::Error::from_raw_os_error(errno)),
        }
    }
}
