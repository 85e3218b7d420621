//! The sock_diag dump loop: send one request, read replies until `NLMSG_DONE`, hand every data
//! message to a decoder. Owns the transport seam (live kernel, recording, replay) so tests drive
//! the same loop with captured bytes.
//!
//! It must not decode socket records itself (that is `sockstat_wire`) nor build the model (that
//! is `sys::dump`).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::net::netlink::{SocketAddrNetlink, SOCK_DIAG};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use sockstat_wire::netlink::{classify, messages, Control};
use sockstat_wire::DecodeError;

/// Size of the receive buffer. The kernel sends at most one ~32 KiB skb per `recvmsg`
/// (`netlink_dump` in `net/netlink/af_netlink.c`); 64 KiB leaves room and never truncates.
const RECV_BUF: usize = 64 * 1024;

pub use crate::error::DumpError;

/// What a completed dump looked like.
#[derive(Debug, Default, Clone, Copy)]
pub struct DumpStats {
    /// Data messages handed to the decoder.
    pub records: usize,
    /// `recv` calls made.
    pub recvs: usize,
    /// The kernel flagged the dump as inconsistent (`NLM_F_DUMP_INTR`).
    pub interrupted: bool,
}

/// One way of talking to sock_diag: the live kernel, or a replayed recording.
pub trait Transport {
    /// Starts a dump: sends `request` (a full netlink message). `key` names the dump
    /// (`tcp4`, `unix`, ...) for recording and replay.
    fn start(&mut self, key: &str, request: &[u8]) -> io::Result<()>;
    /// Receives the next reply buffer into `buf`, returning its length.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Whether replies must carry the request's sequence number. A recording answers the
    /// request it was made for, whatever number this run gives it.
    fn checks_seq(&self) -> bool {
        true
    }
}

/// The live kernel: one fresh `NETLINK_SOCK_DIAG` socket per dump, so a failed or abandoned dump
/// never leaves replies behind for the next one.
#[derive(Default)]
pub struct Kernel {
    fd: Option<OwnedFd>,
    /// The inode of `fd`, while it is registered in [`OWN_SOCKETS`].
    inode: Option<u64>,
}

/// The inodes of the sock_diag sockets this process has open to read the tables: a netlink
/// dump leaves them out (they are sockstat's own, and exist only while it reads), as they are
/// in the very table they read.
static OWN_SOCKETS: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());

fn own_sockets() -> std::sync::MutexGuard<'static, Vec<u64>> {
    OWN_SOCKETS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `inode` is one of this process's own sock_diag sockets ([`Kernel`]'s).
pub(crate) fn is_own_socket(inode: u64) -> bool {
    own_sockets().contains(&inode)
}

impl Kernel {
    fn forget(&mut self) {
        if let Some(i) = self.inode.take() {
            own_sockets().retain(|&x| x != i);
        }
        self.fd = None;
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.forget();
    }
}

impl Transport for Kernel {
    fn start(&mut self, _key: &str, request: &[u8]) -> io::Result<()> {
        self.forget();
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            Some(SOCK_DIAG),
        )?;
        if let Ok(st) = rustix::fs::fstat(&fd) {
            own_sockets().push(st.st_ino);
            self.inode = Some(st.st_ino);
        }
        rustix::net::sendto(
            &fd,
            request,
            SendFlags::empty(),
            &SocketAddrNetlink::new(0, 0),
        )?;
        self.fd = Some(fd);
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fd = self
            .fd
            .as_ref()
            .ok_or_else(|| io::Error::other("recv before start"))?;
        loop {
            match rustix::net::recv(fd, &mut *buf, RecvFlags::empty()) {
                Ok((n, _)) => return Ok(n),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// A record whose length word has this bit set is a failed `recv()`: the low 16 bits are the
/// errno (a real reply buffer is at most 64 KiB, far below it).
pub const RECORDED_ERROR: u32 = 0x8000_0000;

/// Wraps another transport and saves every reply buffer to `<dir>/<key>.nl` as a sequence of
/// (u32 little-endian length, bytes) records; a `recv()` that fails is saved as the length word
/// `RECORDED_ERROR | errno` with no bytes. A dump started again (a retry) is saved as
/// `<key>.<n>.nl` on its n-th start, which is where [`Replay`] looks for it.
pub struct Recorder<T> {
    inner: T,
    dir: PathBuf,
    file: Option<File>,
    starts: std::collections::HashMap<String, usize>,
}

impl<T> Recorder<T> {
    /// Records into `dir` (created if missing).
    pub fn new(inner: T, dir: &Path) -> io::Result<Recorder<T>> {
        std::fs::create_dir_all(dir)?;
        Ok(Recorder {
            inner,
            dir: dir.to_path_buf(),
            file: None,
            starts: std::collections::HashMap::new(),
        })
    }
}

impl<T: Transport> Transport for Recorder<T> {
    fn checks_seq(&self) -> bool {
        self.inner.checks_seq()
    }

    fn start(&mut self, key: &str, request: &[u8]) -> io::Result<()> {
        let n = self.starts.entry(key.to_string()).or_insert(0);
        *n += 1;
        let name = if *n == 1 {
            format!("{key}.nl")
        } else {
            format!("{key}.{n}.nl")
        };
        self.file = Some(File::create(self.dir.join(name))?);
        self.inner.start(key, request)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.recv(buf) {
            Ok(n) => {
                if let Some(f) = self.file.as_mut() {
                    f.write_all(&(n as u32).to_le_bytes())?;
                    f.write_all(&buf[..n])?;
                }
                Ok(n)
            }
            Err(e) => {
                if let (Some(f), Some(errno)) = (self.file.as_mut(), e.raw_os_error()) {
                    f.write_all(&(RECORDED_ERROR | (errno as u32 & 0xffff)).to_le_bytes())?;
                }
                Err(e)
            }
        }
    }
}

/// Replays recordings made by [`Recorder`]. A dump that was not recorded fails with ENOENT, as
/// a missing diag module would.
///
/// A dump that is started again (a retry after `NLM_F_DUMP_INTR` or ENOBUFS) replays
/// `<key>.<n>.nl` on its n-th start when that file exists, `<key>.nl` otherwise, so a recording
/// can describe a fault that goes away on retry. A record `RECORDED_ERROR | errno` makes that
/// `recv()` fail with the errno, as the kernel's socket does when it reports an overrun.
pub struct Replay {
    dir: PathBuf,
    data: Vec<u8>,
    pos: usize,
    starts: std::collections::HashMap<String, usize>,
}

impl Replay {
    /// Replays from `dir`.
    pub fn new(dir: &Path) -> Replay {
        Replay {
            dir: dir.to_path_buf(),
            data: Vec::new(),
            pos: 0,
            starts: std::collections::HashMap::new(),
        }
    }
}

impl Transport for Replay {
    fn checks_seq(&self) -> bool {
        false
    }

    fn start(&mut self, key: &str, _request: &[u8]) -> io::Result<()> {
        let n = self.starts.entry(key.to_string()).or_insert(0);
        *n += 1;
        let again = self.dir.join(format!("{key}.{n}.nl"));
        let path = if *n > 1 && again.exists() {
            again
        } else {
            self.dir.join(format!("{key}.nl"))
        };
        let mut data = Vec::new();
        match File::open(path) {
            Ok(mut f) => {
                f.read_to_end(&mut data)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(io::Error::from_raw_os_error(libc::ENOENT))
            }
            Err(e) => return Err(e),
        }
        self.data = data;
        self.pos = 0;
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let rest = &self.data[self.pos..];
        if rest.len() < 4 {
            // The recording ended without NLMSG_DONE: behave as a kernel that stopped talking.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "recording ends before NLMSG_DONE",
            ));
        }
        let word = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if word & RECORDED_ERROR != 0 {
            // The kernel refused this recv() (ENOBUFS after an overrun, say).
            self.pos += 4;
            return Err(io::Error::from_raw_os_error((word & 0xffff) as i32));
        }
        let n = word as usize;
        let chunk = rest
            .get(4..4 + n)
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "truncated recording"))?;
        let m = n.min(buf.len());
        buf[..m].copy_from_slice(&chunk[..m]);
        self.pos += 4 + n;
        Ok(m)
    }
}

/// Runs one dump to completion, calling `on_record` with the payload of every data message.
///
/// Honours the errno inside `NLMSG_DONE` (a parser that ignores it reports "0 sockets" when the
/// protocol handler is missing), stops at `NLMSG_ERROR`, and reports `NLM_F_DUMP_INTR` so the
/// caller can retry.
pub fn dump(
    transport: &mut dyn Transport,
    key: &str,
    request: &[u8],
    mut on_record: impl FnMut(&[u8], std::time::Instant) -> Result<(), DecodeError>,
) -> Result<DumpStats, DumpError> {
    let seq = request
        .get(8..12)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0);
    transport.start(key, request).map_err(DumpError::Io)?;
    let mut buf = vec![0u8; RECV_BUF];
    let mut stats = DumpStats::default();
    loop {
        let n = transport.recv(&mut buf).map_err(DumpError::Io)?;
        // When this buffer's records were read: the kernel fills a buffer as it is asked for.
        let received = std::time::Instant::now();
        stats.recvs += 1;
        if n == 0 {
            return Err(DumpError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "netlink socket closed before NLMSG_DONE",
            )));
        }
        for msg in messages(&buf[..n]) {
            let msg = msg.map_err(DumpError::Decode)?;
            if msg.seq != seq && transport.checks_seq() {
                // A reply to some other request (cannot happen on a fresh socket); ignore.
                continue;
            }
            if msg.dump_interrupted() {
                stats.interrupted = true;
            }
            match classify(&msg).map_err(DumpError::Decode)? {
                Control::Data(payload) => {
                    stats.records += 1;
                    on_record(payload, received).map_err(DumpError::Decode)?;
                }
                Control::Done { errno: None } => return Ok(stats),
                Control::Done { errno: Some(e) } => return Err(DumpError::Kernel(e)),
                Control::Error { errno: 0 } => {}
                Control::Error { errno } => return Err(DumpError::Kernel(errno)),
                Control::Overrun => return Err(DumpError::Kernel(libc::ENOBUFS)),
                Control::Other(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transport that answers each start with the next script: reply buffers, or errnos.
    struct Scripted {
        scripts: Vec<Vec<Result<Vec<u8>, i32>>>,
        current: std::collections::VecDeque<Result<Vec<u8>, i32>>,
    }

    impl Transport for Scripted {
        fn start(&mut self, _key: &str, _request: &[u8]) -> io::Result<()> {
            self.current = self.scripts.remove(0).into();
            Ok(())
        }

        fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.current.pop_front().expect("script ran out") {
                Ok(b) => {
                    buf[..b.len()].copy_from_slice(&b);
                    Ok(b.len())
                }
                Err(errno) => Err(io::Error::from_raw_os_error(errno)),
            }
        }
    }

    fn drain(t: &mut dyn Transport, key: &str, n: usize) -> Vec<Result<Vec<u8>, i32>> {
        t.start(key, &[]).unwrap();
        let mut buf = vec![0u8; 256];
        (0..n)
            .map(|_| match t.recv(&mut buf) {
                Ok(n) => Ok(buf[..n].to_vec()),
                Err(e) => Err(e.raw_os_error().unwrap()),
            })
            .collect()
    }

    /// What the kernel said, failed receives and restarts included, is what a replay says.
    #[test]
    fn a_recording_keeps_failed_receives_and_restarts() {
        let first = vec![Ok(b"half".to_vec()), Err(libc::ENOBUFS)];
        let second = vec![Ok(b"whole".to_vec()), Ok(b"done".to_vec())];
        let dir = tempfile::tempdir().unwrap();
        let mut rec = Recorder::new(
            Scripted {
                scripts: vec![first.clone(), second.clone()],
                current: Default::default(),
            },
            dir.path(),
        )
        .unwrap();
        assert_eq!(drain(&mut rec, "tcp4", 2), first);
        assert_eq!(drain(&mut rec, "tcp4", 2), second);
        drop(rec);
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["tcp4.2.nl", "tcp4.nl"]);
        let mut replay = Replay::new(dir.path());
        assert_eq!(drain(&mut replay, "tcp4", 2), first);
        assert_eq!(drain(&mut replay, "tcp4", 2), second);
        // A third start has no file of its own and replays the first.
        assert_eq!(drain(&mut replay, "tcp4", 2), first);
    }
}
