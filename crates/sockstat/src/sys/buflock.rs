//! Exact SO_SNDBUF/SO_RCVBUF lock reading for `diagnose --exact-locks` (doc/reference/linux.md#exact-locks):
//! `pidfd_open` + `pidfd_getfd` duplicate one socket fd of the holding process for an instant,
//! `getsockopt(SO_COOKIE)` checks it is still the socket the finding names, and
//! `getsockopt(SO_BUF_LOCK)` (5.15+) reads `sk_userlocks`. The duplicate is closed at once.
//!
//! This is the one touch SPEC ("What sockstat does to the processes it inspects") allows beyond
//! reading: root only, and only for the sockets a finding names. It needs
//! PTRACE_MODE_ATTACH_REALCREDS on the target; anything else gets EPERM, reported as an error for
//! the caller to turn into a warning.

use std::os::fd::{AsRawFd, OwnedFd};

use crate::diagnose::BufLock;
use crate::error::{ErrorKind, SysError};

/// `SO_COOKIE` and `SO_BUF_LOCK` (include/uapi/asm-generic/socket.h; the architectures with
/// their own numbering are excluded below).
const SO_COOKIE: libc::c_int = 57;
const SO_BUF_LOCK: libc::c_int = 72;
const SOCK_SNDBUF_LOCK: u32 = 1;
const SOCK_RCVBUF_LOCK: u32 = 2;

fn getsockopt_raw<T: Copy + Default>(fd: &OwnedFd, name: libc::c_int) -> std::io::Result<T> {
    let mut v = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a plain value of `len` bytes that the kernel fills.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut T).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(v)
}

/// Reads the buffer locks of the socket `pid` holds as `fd`, provided it still is the socket
/// with `cookie`.
#[cfg(not(any(
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
)))]
pub fn read(pid: u32, fd: u32, cookie: u64) -> Result<BufLock, SysError> {
    use rustix::process::{pidfd_getfd, pidfd_open, Pid, PidfdFlags, PidfdGetfdFlags};
    let err =
        |what: &str, e: std::io::Error| SysError::new(format!("pid {pid} fd {fd}: {what}"), e);
    let invalid =
        |why: String| SysError::other(format!("pid {pid} fd {fd}"), ErrorKind::Invalid, why);
    let pid_t = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| invalid(format!("no such pid {pid}")))?;
    let pidfd = pidfd_open(pid_t, PidfdFlags::empty()).map_err(|e| err("pidfd_open", e.into()))?;
    let raw_fd = i32::try_from(fd).map_err(|_| invalid(format!("no such fd {fd}")))?;
    let dup = pidfd_getfd(&pidfd, raw_fd, PidfdGetfdFlags::empty())
        .map_err(|e| err("pidfd_getfd", e.into()))?;
    let got: u64 = getsockopt_raw(&dup, SO_COOKIE).map_err(|e| err("SO_COOKIE", e))?;
    if got != cookie {
        return Err(SysError::other(
            format!("pid {pid} fd {fd}"),
            ErrorKind::Gone,
            format!("the fd now holds another socket (cookie {got})"),
        ));
    }
    let locks: u32 = getsockopt_raw(&dup, SO_BUF_LOCK).map_err(|e| err("SO_BUF_LOCK", e))?;
    drop(dup);
    Ok(BufLock {
        sndbuf: locks & SOCK_SNDBUF_LOCK != 0,
        rcvbuf: locks & SOCK_RCVBUF_LOCK != 0,
    })
}

/// Architectures whose socket option numbers differ: not supported.
#[cfg(any(
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
))]
pub fn read(pid: u32, fd: u32, _cookie: u64) -> Result<BufLock, SysError> {
    Err(SysError::other(
        format!("pid {pid} fd {fd}"),
        ErrorKind::Unsupported,
        "exact lock reading is not supported on this architecture",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    fn socket_with(sndbuf: Option<i32>) -> OwnedFd {
        // SAFETY: plain socket creation; the fd is owned below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0);
        if let Some(v) = sndbuf {
            // SAFETY: an int option on our socket.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_SNDBUF,
                    (&v as *const i32).cast(),
                    4,
                )
            };
        }
        // SAFETY: fd is ours.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    #[test]
    fn own_sockets() {
        let pid = std::process::id();
        let locked = socket_with(Some(16384));
        let free = socket_with(None);
        let cookie = |s: &OwnedFd| getsockopt_raw::<u64>(s, SO_COOKIE).unwrap();
        let r = read(pid, locked.as_raw_fd() as u32, cookie(&locked));
        match r {
            Ok(l) => {
                assert!(l.sndbuf && !l.rcvbuf);
                let f = read(pid, free.as_raw_fd() as u32, cookie(&free)).unwrap();
                assert!(!f.sndbuf && !f.rcvbuf);
                // A cookie mismatch is refused.
                assert!(read(pid, free.as_raw_fd() as u32, cookie(&locked)).is_err());
            }
            // Kernels before 5.15 (no SO_BUF_LOCK) or 5.6 (no pidfd_getfd), or a sandbox.
            Err(e) => eprintln!("SKIPPED exact lock reading: {e}"),
        }
    }
}
