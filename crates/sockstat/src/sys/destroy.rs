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
use sockstat_wire::sock_destroy::{answer, DestroyReq};

/// Something that closes one socket: the kernel, or a fake in tests.
pub trait Destroyer {
    /// Sends one request; returns the kernel's answer: 0 when the socket was closed, else the
    /// (positive) errno it refused with. `Err` when the request could not be sent or answered.
    fn destroy(&mut self, req: &DestroyReq) -> io::Result<i32>;
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

impl Destroyer for Kernel {
    fn destroy(&mut self, req: &DestroyReq) -> io::Result<i32> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let fd = self.socket()?;
        rustix::net::sendto(
            fd,
            &req.encode(seq),
            SendFlags::empty(),
            &SocketAddrNetlink::new(0, 0),
        )?;
        // The answer is one NLMSG_ERROR: its int, the request echoed (72 bytes) and perhaps
        // extended-ack attributes; a few hundred bytes at most.
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
            let got = answer(&buf[..n.min(buf.len())], seq)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            if let Some(errno) = got {
                return Ok(errno);
            }
            // An answer to an earlier request that timed out on our side cannot happen (we
            // wait for each), but a stray message is skipped rather than misread.
        }
    }
}
