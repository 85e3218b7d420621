//! The owner scan: one pass over `/proc/<pid>/fd`, building the list of (socket inode, pid, fd)
//! for every socket fd of every visible process, plus the command name and uid of each process
//! that holds at least one socket.
//!
//! Cost model (doc/reference/baseline-study.md#floor-detail): about 1 µs of `getdents64` and 2 µs of
//! `readlinkat` per fd, so the scan makes exactly one syscall per fd: `readlinkat` relative to the
//! `fd` directory's file descriptor, into a stack buffer, with no path strings and no `stat`.
//! Processes are shared between threads through an atomic cursor, since fd counts vary wildly
//! between processes.
//!
//! Every read about one process goes through a directory fd opened on `/proc/<pid>` once, so a
//! pid reused by a new process mid-scan cannot mix two processes' data: a `/proc/<pid>` directory
//! fd stays bound to the process it was opened for, and reads through it fail once that process
//! is gone. The scan only reads; it never stops, traces or signals a process.
//!
//! Nothing under `/proc/PID` is opened through a link (`O_NOFOLLOW` at each step; the fd links
//! are read with `readlinkat`, never followed), since a real proc mount has none there: a tree
//! given as `--proc-root` (refused while the process has more privilege than its caller, and
//! otherwise read with the caller's own rights) cannot point a process's `cmdline` at a file.
//!
//! This file is the `/proc` walk and what both scans share (the identity of a process, the
//! processes a query selects); `bpf` is the scan through the kernel's iterator, `args` the
//! arguments reader with its budget.

use args::ArgsReader;
use bpf::{read_start_ticks, StartClock};

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustix::fs::{Mode, OFlags, RawDir};
use rustix::io::Errno;
use sockstat_wire::fd_link::socket_inode;
use sockstat_wire::{mountinfo, proc_pid};

use super::procfs::{open_dir_at, read_at};
use crate::error::{ErrorKind, SysError};
use crate::model::{Owner, Process, RawString};
use crate::query::Query;

mod args;
mod bpf;

pub use args::{ARGS_BUDGET, ARGS_ONE_READ};
pub(crate) use bpf::has_bpf_caps;
pub use bpf::scan_bpf;

/// getdents64 buffer: large enough that a process with a few thousand fds needs few calls.
const DIRENT_BUF: usize = 32 * 1024;
/// Longest link target we care about: `socket:[18446744073709551615]` is 29 bytes; anything
/// longer is not a socket (readlinkat truncates silently, and a truncated path never matches).
const LINK_BUF: usize = 64;

use crate::join::HidePid;
pub use crate::join::Holder;

/// The result of a scan.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Every socket fd seen, sorted by inode, then pid, then fd.
    pub holders: Vec<Holder>,
    /// Processes that hold at least one socket.
    pub processes: HashMap<u32, Process>,
    /// Processes whose fds could not be read (permission), with their uid when known.
    pub unreadable: Vec<(u32, Option<u32>)>,
    /// Processes whose fds could not be read for another reason than privileges or their exit
    /// (too many open files, no memory), with their uid when known and the error.
    pub failed: Vec<(u32, Option<u32>, Errno)>,
    /// Processes visited.
    pub visited: usize,
    /// Processes whose arguments (`-a`) could not be read within the budget: their memory map
    /// is locked (a process stuck in a page fault on a hung NFS or FUSE file, for one).
    pub args_stuck: Vec<u32>,
}

struct Worker<'a> {
    proc_fd: &'a OwnedFd,
    query: &'a Query,
    args: Option<&'a ArgsReader>,
    dirent: Vec<MaybeUninit<u8>>,
    holders: Vec<Holder>,
    processes: Vec<Process>,
    unreadable: Vec<(u32, Option<u32>)>,
    failed: Vec<(u32, Option<u32>, Errno)>,
    visited: usize,
    /// Only the holders of these sockets (sorted inodes) are kept; `None`: every socket.
    wanted: Option<&'a [u64]>,
    /// Processes the filters do not select are probed ([`Worker::probe`]) rather than skipped.
    census: bool,
}

/// Scans every numeric entry of `proc_root` (or only `query.select.pids`) on `threads` threads,
/// keeping the holders of the sockets in `wanted` (sorted inodes; `None`: every socket).
///
/// Errors stop the scan as a whole (per-process trouble never does).
pub fn scan(
    proc_root: &Path,
    query: &Query,
    threads: usize,
    wanted: Option<&[u64]>,
) -> Result<Scan, SysError> {
    scan_in(proc_root, query, threads, wanted, false)
}

/// The scan for `--pid` and `--command` (`OwnerPlan::Candidates`): every socket fd of
/// the processes they select, and of every other process only whether its fd table can be
/// read (`unreadable`, `failed`), as a full scan would have found: the evidence a socket's
/// owner status is decided from must not depend on which processes the filter read. That
/// costs one `readlinkat` of `/proc/PID/fd/0` per other process (`Worker::probe`: the link is
/// where the kernel's permission and ptrace checks fall, for root too).
/// Where a BPF scan may run (`query.gather.owner_scan`), the processes `/proc` could not read are
/// given to the iterator, as the full listing's scan would have read them through it.
pub fn scan_candidates(proc_root: &Path, query: &Query, threads: usize) -> Result<Scan, SysError> {
    let mut out = scan_in(proc_root, query, threads, None, true)?;
    if (out.unreadable.is_empty() && out.failed.is_empty())
        || query.gather.owner_scan == crate::query::OwnerScan::Proc
    {
        return Ok(out);
    }
    // The BPF iterator reads fd tables that /proc refuses (as root, a process whose ptrace
    // check fails): those it visits are read, not unseen. Where it cannot run, /proc's answer
    // stands, as it does for the full listing.
    let mut again: Vec<u32> = out.unreadable.iter().map(|u| u.0).collect();
    again.extend(out.failed.iter().map(|f| f.0));
    again.sort_unstable();
    again.dedup();
    let mut those = query.clone();
    those.select.pids = Some(again.clone());
    those.select.command = None;
    those.select.uid = None;
    if let Ok(b) = scan_bpf(proc_root, &those, 1, None) {
        out.unreadable
            .retain(|u| again.binary_search(&u.0).is_err());
        out.failed.retain(|f| again.binary_search(&f.0).is_err());
        out.unreadable.extend(b.unreadable);
        out.failed.extend(b.failed);
        out.unreadable.sort_unstable();
        out.failed.sort_unstable_by_key(|f| f.0);
        // Their holders too: a selected process's sockets, or another holder of a selected
        // process's socket (which its owner status takes into account, as the full listing's).
        out.holders.extend(b.holders);
        out.holders.sort_unstable();
        out.holders.dedup();
        for (pid, p) in b.processes {
            out.processes.entry(pid).or_insert(p);
        }
    }
    Ok(out)
}

/// [`scan`]; with `census`, every process of `proc_root` is listed, those `query.select.pids` and
/// `query.select.command` select are read in full, and the others only probed (see
/// [`scan_candidates`]).
fn scan_in(
    proc_root: &Path,
    query: &Query,
    threads: usize,
    wanted: Option<&[u64]>,
    census: bool,
) -> Result<Scan, SysError> {
    let (proc_fd, pids) = if census {
        open_and_list(proc_root, &Query::new())?
    } else {
        open_and_list(proc_root, query)?
    };
    let cursor = AtomicUsize::new(0);
    let threads = threads.clamp(1, 8).min(pids.len().max(1));
    let args = query.gather.args.then(ArgsReader::new);
    let workers: Vec<Worker<'_>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (proc_fd, pids, cursor, args) = (&proc_fd, &pids, &cursor, args.as_ref());
                scope.spawn(move || {
                    let mut w = Worker::new(proc_fd, query, args);
                    w.wanted = wanted;
                    w.census = census;
                    loop {
                        let i = cursor.fetch_add(1, Ordering::Relaxed);
                        let Some(&pid) = pids.get(i) else { break };
                        w.visit(pid);
                    }
                    w
                })
            })
            .collect();
        // A worker that panicked took its share of processes with it: the scan is incomplete,
        // and saying so beats reporting those processes' sockets as unowned.
        handles
            .into_iter()
            .map(|h| h.join())
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(|_| {
        SysError::other(
            "the owner scan",
            ErrorKind::Bug,
            "a scan thread panicked; process columns are incomplete",
        )
    })?;
    let total: usize = workers.iter().map(|w| w.holders.len()).sum();
    let mut out = Scan {
        holders: Vec::with_capacity(total),
        ..Scan::default()
    };
    for w in workers {
        out.holders.extend_from_slice(&w.holders);
        out.unreadable.extend(w.unreadable);
        out.failed.extend(w.failed);
        out.visited += w.visited;
        for p in w.processes {
            out.processes.insert(p.pid, p);
        }
    }
    out.holders.sort_unstable();
    out.unreadable.sort_unstable();
    out.failed.sort_unstable_by_key(|f| f.0);
    if let Some(args) = args {
        out.args_stuck = args.finish(&mut out.processes, ARGS_BUDGET);
    }
    Ok(out)
}

/// The owner scan `query.gather.owner_scan` asks for: the BPF iterator where it can run (see
/// [`scan_bpf`]), else [`scan`], keeping the holders of the sockets in `wanted` (sorted inodes;
/// `None`: every socket). `threads` read /proc; `walk_threads` run the BPF iterators
/// ([`super::walk_threads`]). The second value says why a requested BPF scan (`Bpf`, not
/// `Auto`) did not run.
pub fn scan_any(
    query: &Query,
    threads: usize,
    walk_threads: usize,
    wanted: Option<&[u64]>,
) -> (Result<Scan, SysError>, Option<SysError>) {
    use crate::query::OwnerScan;
    // `Auto` takes the iterator wherever it runs: with its layout cached (taskfile::cache) its
    // fixed cost is the verifier's, a few ms, and it walks fds in the kernel at a fraction of
    // the /proc scan's cost per fd (doc/reference/BENCHMARKS.md).
    if query.gather.owner_scan == OwnerScan::Proc {
        return (scan(&query.gather.proc_root, query, threads, wanted), None);
    }
    match scan_bpf(&query.gather.proc_root, query, walk_threads, wanted) {
        Ok(s) => (Ok(s), None),
        Err(why) => {
            let why = (query.gather.owner_scan == OwnerScan::Bpf).then_some(why);
            (scan(&query.gather.proc_root, query, threads, wanted), why)
        }
    }
}

/// CAP_SYS_PTRACE: with it, hidepid hides nothing (`has_pid_permissions` is a ptrace check).
const CAP_SYS_PTRACE: u32 = 19;

/// Whether `proc_root` is a proc mount whose `hidepid` option hides (or closes) other users'
/// processes from us: not when we have CAP_SYS_PTRACE, nor when we are in its `gid=` group.
/// When the mount table cannot be read it cannot be told: [`HidePid::Unknown`] says why.
pub fn hidepid_hides_others(proc_root: &Path) -> HidePid {
    let status = std::fs::read("/proc/self/status")
        .or_else(|_| super::procfs::read(&proc_root.join("self/status")))
        .unwrap_or_default();
    if proc_pid::cap_eff(&status).is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0) {
        return HidePid::No;
    }
    let mountinfo = match std::fs::read_to_string("/proc/self/mountinfo")
        .or_else(|_| super::procfs::read_to_string(&proc_root.join("self/mountinfo")))
    {
        Ok(t) => t,
        Err(e) => return HidePid::Unknown(format!("cannot read /proc/self/mountinfo: {e}")),
    };
    let root = match std::fs::canonicalize(proc_root) {
        Ok(r) => r,
        Err(e) => return HidePid::Unknown(format!("cannot resolve {}: {e}", proc_root.display())),
    };
    let Some((option, gid)) =
        mountinfo::hidepid_of(&mountinfo, root.as_os_str().as_encoded_bytes())
    else {
        return HidePid::No;
    };
    if let Some(gid) = gid {
        let mut groups = rustix::process::getgroups().unwrap_or_default();
        groups.push(rustix::process::getegid());
        if groups.iter().any(|g| g.as_raw() == gid) {
            return HidePid::No;
        }
    }
    HidePid::Hides {
        mount_point: root,
        option,
    }
}

/// The numeric entries of /proc: only those are processes (`self`, `thread-self` and the rest
/// are not).
pub(crate) fn list_pids(proc_fd: &OwnedFd) -> rustix::io::Result<Vec<u32>> {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); DIRENT_BUF];
    let mut dir = RawDir::new(proc_fd, &mut buf);
    let mut pids = Vec::with_capacity(1024);
    while let Some(entry) = dir.next() {
        let entry = entry?;
        if let Some(pid) = proc_pid::decimal(entry.file_name().to_bytes()) {
            if pid > 0 && pid <= u64::from(u32::MAX) {
                pids.push(pid as u32);
            }
        }
    }
    Ok(pids)
}

impl<'a> Worker<'a> {
    fn new(proc_fd: &'a OwnedFd, query: &'a Query, args: Option<&'a ArgsReader>) -> Worker<'a> {
        Worker {
            proc_fd,
            query,
            args,
            dirent: vec![MaybeUninit::uninit(); DIRENT_BUF],
            holders: Vec::new(),
            processes: Vec::new(),
            unreadable: Vec::new(),
            failed: Vec::new(),
            visited: 0,
            wanted: None,
            census: false,
        }
    }

    fn visit(&mut self, pid: u32) {
        self.visited += 1;
        if self.census
            && self
                .query
                .select
                .pids
                .as_ref()
                .is_some_and(|p| p.binary_search(&pid).is_err())
        {
            return self.probe(pid);
        }
        let name = itoa_pid(pid);
        let pdir = match open_dir_at(self.proc_fd, name.as_c_str()) {
            Ok(fd) => fd,
            // Visible but closed to us (hidepid=1/noaccess): its sockets are hidden, not unowned.
            Err(Errno::ACCESS | Errno::PERM) => {
                let uid = rustix::fs::statat(
                    self.proc_fd,
                    name.as_c_str(),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .ok()
                .map(|st| st.st_uid);
                self.unreadable.push((pid, uid));
                return;
            }
            // Gone since the listing, or invisible (hidepid=2): nothing to say about it here
            // (`hidepid_hides_others` accounts for the invisible ones).
            Err(Errno::NOENT | Errno::SRCH) => return,
            // Anything else (EMFILE, ENOMEM) leaves its sockets unknown, not unowned.
            Err(e) => {
                self.failed.push((pid, None, e));
                return;
            }
        };
        let mut process = Process {
            pid,
            ..Process::default()
        };
        // Skipping a process is only safe when its sockets would be dropped anyway: with --pid or
        // --command a socket needs a matching holder. With --user alone, a socket held only by
        // other users' processes must still be seen as owned (not fall back to its kernel uid).
        let prefilter = self.query.select.pids.is_some() || self.query.select.command.is_some();
        if prefilter {
            // Read what the filters need before paying for the fd walk.
            read_identity(&pdir, &mut process);
            if !self.query.may_match_process(&process) {
                return self.probe(pid);
            }
        }
        let Some(fd_dir) = self.open_fds(pid, &pdir) else {
            return;
        };
        let before = self.holders.len();
        let walk = walk_fds(&fd_dir, pid, &mut self.dirent, &mut self.holders);
        if let Some(wanted) = self.wanted {
            let mut i = before;
            for k in before..self.holders.len() {
                if wanted.binary_search(&self.holders[k].inode).is_ok() {
                    self.holders[i] = self.holders[k];
                    i += 1;
                }
            }
            self.holders.truncate(i);
        }
        match walk {
            Walk::Done => {}
            Walk::Denied => self.unreadable.push((pid, uid_of(&pdir))),
            Walk::Failed(e) => self.failed.push((pid, uid_of(&pdir), e)),
        }
        if self.holders.len() > before {
            if !prefilter {
                read_identity(&pdir, &mut process);
            }
            if let Some(a) = self.args {
                a.request(pid, &pdir);
            }
            self.processes.push(process);
        }
    }
}

/// The uid that owns a `/proc/PID` directory: the process's effective uid (root's for one that
/// is not dumpable).
fn uid_of(pdir: &OwnedFd) -> Option<u32> {
    rustix::fs::fstat(pdir).ok().map(|st| st.st_uid)
}

impl Worker<'_> {
    /// Opens `/proc/PID/fd`, recording a process whose table cannot be opened: unreadable
    /// (privileges; never a kernel thread, which holds no files), failed (another error), or
    /// gone (nothing to record).
    fn open_fds(&mut self, pid: u32, pdir: &OwnedFd) -> Option<OwnedFd> {
        match open_dir_at(pdir, c"fd") {
            Ok(fd) => Some(fd),
            Err(Errno::ACCESS | Errno::PERM) => {
                if !is_kernel_thread(pdir) {
                    self.unreadable.push((pid, uid_of(pdir)));
                }
                None
            }
            Err(Errno::NOENT | Errno::SRCH) => None,
            Err(e) => {
                self.failed.push((pid, uid_of(pdir), e));
                None
            }
        }
    }

    /// With a census, records whether a process the filters do not select could have been read:
    /// one link of its fd table read, where the kernel checks both the table's permission and
    /// ptrace access (root meets the check of a security module or a user namespace only at
    /// the link). `PID/fd/0` first, one system call; a process without fd 0 has its table
    /// listed for the first fd it has (a small read: `/proc` builds an entry for every fd it
    /// lists). A process with no fd holds no socket.
    fn probe(&mut self, pid: u32) {
        if !self.census {
            return;
        }
        let mut link = [0u8; LINK_BUF];
        let fd0 = std::ffi::CString::new(format!("{pid}/fd/0")).unwrap_or_default();
        let denied = match rustix::fs::readlinkat_raw(self.proc_fd, fd0.as_c_str(), &mut link[..]) {
            Ok(_) => return,
            Err(Errno::ACCESS | Errno::PERM) => None,
            Err(Errno::NOENT) => match self.first_fd_link(pid, &mut link) {
                Some(e) => Some(e),
                None => return,
            },
            Err(Errno::SRCH) => return,
            Err(e) => Some(e),
        };
        let name = itoa_pid(pid);
        let uid = rustix::fs::statat(self.proc_fd, name.as_c_str(), rustix::fs::AtFlags::empty())
            .ok()
            .map(|st| st.st_uid);
        match denied {
            None | Some(Errno::ACCESS | Errno::PERM) => {
                // A kernel thread holds no files: not a process that could hide a socket.
                let kthread = open_dir_at(self.proc_fd, name.as_c_str())
                    .is_ok_and(|pdir| is_kernel_thread(&pdir));
                if !kthread {
                    self.unreadable.push((pid, uid));
                }
            }
            Some(e) => self.failed.push((pid, uid, e)),
        }
    }

    /// For a process without fd 0: reads the link of the first fd its table lists. `None` when
    /// it could be read (or the process is gone, or has no fd); else the error, `EACCES` for
    /// privileges.
    fn first_fd_link(&mut self, pid: u32, link: &mut [u8]) -> Option<Errno> {
        let name = itoa_pid(pid);
        let pdir = open_dir_at(self.proc_fd, name.as_c_str()).ok()?;
        let fd_dir = match open_dir_at(&pdir, c"fd") {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::SRCH) => return None,
            Err(e) => return Some(e),
        };
        let mut buf = [MaybeUninit::<u8>::uninit(); 128];
        let mut dir = RawDir::new(&fd_dir, &mut buf);
        while let Some(entry) = dir.next() {
            let result = match entry {
                Ok(e) if proc_pid::decimal(e.file_name().to_bytes()).is_none() => continue,
                Ok(e) => rustix::fs::readlinkat_raw(fd_dir.as_fd(), e.file_name(), &mut *link)
                    .map(|_| ()),
                Err(e) => Err(e),
            };
            return match result {
                Ok(()) | Err(Errno::NOENT | Errno::SRCH) => None,
                Err(e) => Some(e),
            };
        }
        None
    }
}

/// Opens `proc_root` and lists the pids to visit: `query.select.pids`, or every numeric entry.
fn open_and_list(proc_root: &Path, query: &Query) -> Result<(OwnedFd, Vec<u32>), SysError> {
    let proc_fd = rustix::fs::open(
        proc_root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| SysError::new(format!("cannot open {}", proc_root.display()), e))?;
    let pids = match &query.select.pids {
        Some(list) => list.clone(),
        None => list_pids(&proc_fd)
            .map_err(|e| SysError::new(format!("cannot list {}", proc_root.display()), e))?,
    };
    Ok((proc_fd, pids))
}

/// Walks one `/proc/<pid>/fd` directory; returns true when links could not be read for lack of
/// permission.
/// How a walk of one fd table ended (what was read before an error stays valid).
enum Walk {
    /// Every fd read (or the process exited meanwhile).
    Done,
    /// Permission denied part way.
    Denied,
    /// Another error part way (EMFILE, ENOMEM).
    Failed(Errno),
}

fn walk_fds(
    fd_dir: &OwnedFd,
    pid: u32,
    dirent: &mut [MaybeUninit<u8>],
    out: &mut Vec<Holder>,
) -> Walk {
    let mut dir = RawDir::new(fd_dir, dirent);
    let mut link = [0u8; LINK_BUF];
    while let Some(entry) = dir.next() {
        let entry = match entry {
            Ok(e) => e,
            Err(Errno::ACCESS | Errno::PERM) => return Walk::Denied,
            // The process exited while we listed its fds: what was read stays valid.
            Err(Errno::NOENT | Errno::SRCH) => return Walk::Done,
            Err(e) => return Walk::Failed(e),
        };
        let name = entry.file_name();
        let Some(fd) = proc_pid::decimal(name.to_bytes()) else {
            continue; // "." and ".."
        };
        match rustix::fs::readlinkat_raw(fd_dir.as_fd(), name, &mut link[..]) {
            Ok(n) => {
                if let Some(inode) = socket_inode(&link[..n.min(LINK_BUF)]) {
                    out.push(Holder {
                        inode,
                        owner: Owner { pid, fd: fd as u32 },
                    });
                }
            }
            Err(Errno::ACCESS | Errno::PERM) => return Walk::Denied,
            // The fd was closed between getdents and readlink, or the process exited: normal.
            Err(Errno::NOENT | Errno::SRCH) => {}
            Err(e) => return Walk::Failed(e),
        }
    }
    Walk::Done
}

/// True when `stat` (readable by anyone) marks the process a kernel thread.
fn is_kernel_thread(pdir: &OwnedFd) -> bool {
    let mut buf = [0u8; 1024];
    read_at(pdir, c"stat", &mut buf)
        .and_then(|n| proc_pid::is_kernel_thread(&buf[..n]))
        .unwrap_or(false)
}

/// What the BPF iterator saw of a process: the identity it read from the task (`None` when
/// it could not), and its start time.
#[derive(Clone, Copy)]
struct Seen<'a> {
    identity: Option<&'a sockstat_wire::task_file::Identity>,
    started: Option<u64>,
}

/// The identity of the process the iterator saw as `pid`, or `None` when its rows must go:
/// `--command` does not select it, or (when the iterator could not identify it) it exited or
/// its pid now names a later process. What the iterator read is the identity of the process
/// that held the sockets, whatever happened to it since; `/proc` is read only for its
/// arguments (`-a`), and only while the pid still names it.
fn identity(
    proc_fd: &OwnedFd,
    pid: u32,
    seen: Seen<'_>,
    clock: &StartClock,
    args: Option<&ArgsReader>,
    query: &Query,
) -> Option<Process> {
    let mut process = Process {
        pid,
        ..Process::default()
    };
    if let Some(id) = seen.identity {
        process.command = Some(RawString::new(id.comm()));
        process.uid = Some(id.euid);
    }
    if seen.identity.is_none() || args.is_some() {
        let name = itoa_pid(pid);
        match open_dir_at(proc_fd, name.as_c_str()) {
            Ok(pdir) => {
                // The pid now names a later process than the one the iterator saw: that one
                // exited, and nothing read here may be given to the newcomer. Without the
                // iterator's identity its rows go (as if the /proc scan had missed it). What is
                // read below is read through the same directory fd, so it is the process whose
                // start time matched.
                let reused = seen
                    .started
                    .is_some_and(|ns| clock.reused(ns, read_start_ticks(&pdir)));
                match (reused, seen.identity) {
                    (true, None) => return None,
                    (true, Some(_)) => {}
                    (false, known) => {
                        if known.is_none() {
                            read_identity(&pdir, &mut process);
                        }
                        if let Some(a) = args {
                            a.request(pid, &pdir);
                        }
                    }
                }
            }
            // Exited since the iterator ran: as the /proc scan would not have seen it, unless
            // the iterator identified it.
            Err(Errno::NOENT | Errno::SRCH) if seen.identity.is_none() => return None,
            // Anything else: the holder is real; what was not read stays unknown.
            Err(_) => {}
        }
    }
    if query.select.command.is_some() && !query.may_match_process(&process) {
        return None;
    }
    Some(process)
}

/// The command name of process `pid` (`/proc/PID/comm`, readable for any process), for a
/// filter that must tell whether a process it could not read is one it selects.
pub(crate) fn command_of(proc_root: &Path, pid: u32) -> Option<RawString> {
    let root = rustix::fs::open(
        proc_root,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()?;
    let b = super::procfs::read_pid_file(&root, pid, c"comm").ok()?;
    Some(RawString::new(b.strip_suffix(b"\n").unwrap_or(&b)))
}

fn read_identity(pdir: &OwnedFd, p: &mut Process) {
    let mut buf = [0u8; 64];
    if let Some(n) = read_at(pdir, c"comm", &mut buf) {
        let comm = buf[..n].strip_suffix(b"\n").unwrap_or(&buf[..n]);
        p.command = Some(RawString::new(comm));
    }
    let mut status = [0u8; 4096];
    if let Some(n) = read_at(pdir, c"status", &mut status) {
        p.uid = proc_pid::effective_uid(&status[..n]);
    }
}

/// The decimal name of a pid as a C string, without allocating per call beyond the CString.
fn itoa_pid(pid: u32) -> std::ffi::CString {
    // A decimal string never contains NUL.
    std::ffi::CString::new(pid.to_string()).unwrap_or_default()
}

/// What a scan could not see, as [`crate::join::join`] takes it: the processes it could not read
/// (`unreadable`, `failed`), whether `hidepid` hides others, and whose eyes these are.
pub(crate) fn unseen_of(
    q: &Query,
    unreadable: Vec<(u32, Option<u32>)>,
    failed: &[(u32, Option<u32>, rustix::io::Errno)],
) -> crate::join::Unseen {
    crate::join::Unseen {
        unreadable,
        failed: failed
            .iter()
            .map(|(pid, uid, e)| (*pid, *uid, std::io::Error::from(*e).to_string()))
            .collect(),
        hidepid: hidepid_hides_others(&q.gather.proc_root),
        euid: rustix::process::geteuid().as_raw(),
    }
}
