//! Opening files under a proc mount without following links where a real proc mount has none.
//!
//! `/proc/PID`, `/proc/PID/fd` and the files read in them (`comm`, `status`, `stat`,
//! `cmdline`, `cgroup`), and the last component of every text file read under the proc root
//! (`net/tcp`, `net/snmp`, `sys/net/...`, `self/mountinfo`) are never links in a real proc
//! mount; the links a real one has (`self`, `thread-self`, `net`, `PID/ns/*`, `PID/fd/*`) are
//! either followed where the kernel means them to be (`self`, `net`), opened and checked to be
//! a namespace (`ns/net`), or read as links and never followed (`fd/*`). So a directory given
//! as `--proc-root` (a test seam, refused while the process has more privilege than its
//! caller) cannot point a process's `cmdline` or a counter file at another file.

use std::ffi::CStr;
use std::io::{self, Read as _};
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// `openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)`.
pub(crate) fn open_dir_at(dir: &OwnedFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// One `openat` (`O_NOFOLLOW`) + `read` (+ close) relative to a directory fd, into `buf`; `None`
/// on any failure.
pub(crate) fn read_at(dir: &OwnedFd, name: &CStr, buf: &mut [u8]) -> Option<usize> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::io::read(&fd, &mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(Errno::INTR) => continue,
            Err(_) => return None,
        }
    }
    Some(filled)
}

/// The whole file `path` (its last component not followed if it is a link: ELOOP). Opened
/// `O_NONBLOCK`, which proc files ignore, so that a FIFO put in a file's place reads as empty
/// rather than waiting for a writer.
pub(crate) fn read(path: &Path) -> io::Result<Vec<u8>> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut out = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut out)?;
    Ok(out)
}

/// [`read`], as UTF-8 text.
pub(crate) fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// The whole file `name` of process `pid` under `proc_fd`, each step opened without following
/// a link.
pub(crate) fn read_pid_file(proc_fd: &OwnedFd, pid: u32, name: &CStr) -> io::Result<Vec<u8>> {
    let pid = std::ffi::CString::new(pid.to_string()).unwrap_or_default();
    let dir = open_dir_at(proc_fd, &pid)?;
    let fd = rustix::fs::openat(
        &dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut out = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree built like `/proc` whose `4242/cmdline` and `net/tcp` are links to another file:
    /// neither is followed, while the real files beside them are read.
    #[test]
    fn links_where_proc_has_none_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let secret = t.path().join("secret");
        std::fs::write(&secret, b"the secret").unwrap();
        std::fs::create_dir_all(t.path().join("4242")).unwrap();
        std::fs::create_dir_all(t.path().join("net")).unwrap();
        std::os::unix::fs::symlink(&secret, t.path().join("4242/cmdline")).unwrap();
        std::os::unix::fs::symlink(&secret, t.path().join("net/tcp")).unwrap();
        std::fs::write(t.path().join("4242/comm"), b"holder\n").unwrap();
        std::os::unix::fs::symlink(t.path().join("4242"), t.path().join("4243")).unwrap();

        let root = rustix::fs::open(
            t.path(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        let e = read_pid_file(&root, 4242, c"cmdline").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        assert_eq!(read_pid_file(&root, 4242, c"comm").unwrap(), b"holder\n");
        // A pid directory that is a link is not entered either.
        let e = read_pid_file(&root, 4243, c"comm").unwrap_err();
        assert!(
            matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)),
            "{e}"
        );
        let pdir = open_dir_at(&root, c"4242").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(read_at(&pdir, c"cmdline", &mut buf), None);
        assert_eq!(read_at(&pdir, c"comm", &mut buf), Some(7));
        let e = read(&t.path().join("net/tcp")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        // The real /proc has links above the file (`self`, `net`): those are followed.
        assert!(!read_to_string(Path::new("/proc/net/snmp"))
            .unwrap()
            .is_empty());
    }
}
