//! The owner scan: one pass over `/proc/<pid>/fd`, building the list of (socket inode, pid, fd)
//! for every socket fd of every visible process, plus the command name and uid of each process
//! that holds at least one socket.
//!
//! Cost model (research/baseline.md): about 1 µs of `getdents64` and 2 µs of `readlinkat` per fd,
//! so the scan makes exactly one syscall per fd: `readlinkat` relative to the `fd` directory's
//! file descriptor, into a stack buffer, with no path strings and no `stat`. Processes are shared
//! between threads through an atomic cursor, since fd counts vary wildly between processes.
//!
//! Every read about one process goes through a directory fd opened on `/proc/<pid>` once, so a
//! pid reused by a new process mid-scan cannot mix two processes' data: a `/proc/<pid>` directory
//! fd stays bound to the process it was opened for, and reads through it fail once that process
//! is gone. The scan only reads; it never stops, traces or signals a process.

use std::collections::HashMap;
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags, RawDir};
use rustix::io::Errno;
use sockstat_wire::fd_link::socket_inode;

use crate::model::{Owner, Process, RawString};
use crate::query::Query;

/// getdents64 buffer: large enough that a process with a few thousand fds needs few calls.
const DIRENT_BUF: usize = 32 * 1024;
/// Longest link target we care about: `socket:[18446744073709551615]` is 29 bytes; anything
/// longer is not a socket (readlinkat truncates silently, and a truncated path never matches).
const LINK_BUF: usize = 64;

/// One socket fd found by the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Holder {
    /// Socket inode.
    pub inode: u64,
    /// Who holds it.
    pub owner: Owner,
}

/// The result of a scan.
#[derive(Debug, Default)]
pub struct Scan {
    /// Every socket fd seen, sorted by inode, then pid, then fd.
    pub holders: Vec<Holder>,
    /// Processes that hold at least one socket.
    pub processes: HashMap<u32, Process>,
    /// Processes whose fds could not be read (permission), with their uid when known.
    pub unreadable: Vec<(u32, Option<u32>)>,
    /// Processes visited.
    pub visited: usize,
    /// Processes whose arguments (`-a`) could not be read within the budget: their memory map
    /// is locked (a process stuck in a page fault on a hung NFS or FUSE file, for one).
    pub args_stuck: Vec<u32>,
}

/// Errors that stop the scan as a whole (per-process trouble never does).
#[derive(Debug)]
pub struct ScanError {
    /// What failed.
    pub message: String,
}

struct Worker<'a> {
    proc_fd: &'a OwnedFd,
    query: &'a Query,
    args: Option<&'a ArgsReader>,
    dirent: Vec<MaybeUninit<u8>>,
    holders: Vec<Holder>,
    processes: Vec<Process>,
    unreadable: Vec<(u32, Option<u32>)>,
    visited: usize,
}

/// Scans every numeric entry of `proc_root` (or only `query.pids`) on `threads` threads.
pub fn scan(proc_root: &Path, query: &Query, threads: usize) -> Result<Scan, ScanError> {
    let (proc_fd, pids) =
        open_and_list(proc_root, query).map_err(|message| ScanError { message })?;
    let cursor = AtomicUsize::new(0);
    let threads = threads.clamp(1, 8).min(pids.len().max(1));
    let args = query.args.then(ArgsReader::new);
    let workers: Vec<Worker<'_>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (proc_fd, pids, cursor, args) = (&proc_fd, &pids, &cursor, args.as_ref());
                scope.spawn(move || {
                    let mut w = Worker::new(proc_fd, query, args);
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
    .map_err(|_| ScanError {
        message: "an owner scan thread panicked; process columns are incomplete".into(),
    })?;
    let total: usize = workers.iter().map(|w| w.holders.len()).sum();
    let mut out = Scan {
        holders: Vec::with_capacity(total),
        ..Scan::default()
    };
    for w in workers {
        out.holders.extend_from_slice(&w.holders);
        out.unreadable.extend(w.unreadable);
        out.visited += w.visited;
        for p in w.processes {
            out.processes.insert(p.pid, p);
        }
    }
    out.holders.sort_unstable();
    out.unreadable.sort_unstable();
    if let Some(args) = args {
        out.args_stuck = args.finish(&mut out.processes, ARGS_BUDGET);
    }
    Ok(out)
}

/// The owner scan `query.owner_scan` asks for: the BPF iterator where it can run (see
/// [`scan_bpf`]), else [`scan`]. The second value says why a requested BPF scan (`Bpf`, not
/// `Auto`) did not run.
pub fn scan_any(query: &Query, threads: usize) -> (Result<Scan, ScanError>, Option<String>) {
    use crate::query::OwnerScan;
    if query.owner_scan == OwnerScan::Proc
        || (query.owner_scan == OwnerScan::Auto && !many_open_files())
    {
        return (scan(&query.proc_root, query, threads), None);
    }
    match scan_bpf(&query.proc_root, query) {
        Ok(s) => (Ok(s), None),
        Err(why) => {
            let why = (query.owner_scan == OwnerScan::Bpf).then_some(why.0);
            (scan(&query.proc_root, query, threads), why)
        }
    }
}

/// Below this many open files on the host, `Auto` scans `/proc`: the BPF scan's fixed cost
/// (reading and indexing about 5 MiB of kernel BTF, verifying the program: about 10 ms) is more
/// than the `/proc` scan of a small host costs (doc/BENCHMARKS.md: 13 ms against 23 ms at 1k
/// sockets, 46 ms against 35 ms at 10k).
pub const AUTO_BPF_MIN_FILES: u64 = 10_000;

/// True when `/proc/sys/fs/file-nr` (allocated file handles, host-wide) reaches
/// [`AUTO_BPF_MIN_FILES`], or cannot be read.
fn many_open_files() -> bool {
    std::fs::read_to_string("/proc/sys/fs/file-nr")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
        .is_none_or(|n| n >= AUTO_BPF_MIN_FILES)
}

/// The owner scan through the kernel's `iter/task_file` BPF iterator ([`super::taskfile`]):
/// the kernel lists every socket fd, and `/proc/PID` is read only for the identity (command,
/// uid, arguments) of processes that hold sockets. Runs only where the iterator's pids are the
/// ones `proc_root` shows: the real `/proc`, mounted for this process's pid namespace.
pub fn scan_bpf(proc_root: &Path, query: &Query) -> Result<Scan, super::taskfile::Unavailable> {
    use super::taskfile::Unavailable;
    if proc_root != Path::new("/proc") {
        return Err(Unavailable(format!(
            "{} is not /proc: the iterator's pids would not match it",
            proc_root.display()
        )));
    }
    // NSpid lists this process's pid from /proc's namespace down to its own: one field means
    // they are the same namespace, the one the iterator numbers pids in.
    let status = std::fs::read("/proc/self/status")
        .map_err(|e| Unavailable(format!("cannot read /proc/self/status: {e}")))?;
    let nspid_fields = status
        .split(|&b| b == b'\n')
        .find(|l| l.starts_with(b"NSpid:"))
        .map(|l| {
            l[6..]
                .split(|&b| b == b'\t' || b == b' ')
                .filter(|f| !f.is_empty())
                .count()
        });
    if nspid_fields.is_some_and(|n| n != 1) {
        return Err(Unavailable(
            "/proc belongs to an outer pid namespace: the iterator's pids would not match it"
                .into(),
        ));
    }
    if !rustix::process::geteuid().is_root() && !has_bpf_caps(&status) {
        return Err(Unavailable(
            "needs CAP_BPF and CAP_PERFMON (or root)".into(),
        ));
    }
    // Listed before the iterator runs: a process that starts in between is the iterator's.
    let (proc_fd, listed) = open_and_list(proc_root, query).map_err(Unavailable)?;
    let records = super::taskfile::records()?;
    test_pause_after_iterator();
    let wanted = |pid: u32| query.pids.as_ref().is_none_or(|p| p.contains(&pid));
    let mut seen: rustc_hash::FxHashSet<u32> = rustc_hash::FxHashSet::default();
    // Each visited leader's start time, to recognise its pid if it is reused before its
    // identity is read below.
    let mut started: rustc_hash::FxHashMap<u32, u64> = rustc_hash::FxHashMap::default();
    let mut holders: Vec<Holder> = Vec::with_capacity(records.len());
    for r in records {
        if seen.insert(r.tgid) {
            started.insert(r.tgid, r.start_ns);
        }
        if r.inode != 0 && wanted(r.tgid) {
            holders.push(Holder {
                inode: r.inode,
                owner: Owner {
                    pid: r.tgid,
                    fd: r.fd,
                },
            });
        }
    }
    // Identity (command, uid, arguments) of the processes that hold sockets.
    let mut pids: Vec<u32> = holders.iter().map(|h| h.owner.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let mut processes = HashMap::with_capacity(pids.len());
    let mut dropped: Vec<u32> = Vec::new();
    let clock = StartClock::new(&started);
    let args = query.args.then(ArgsReader::new);
    for &pid in &pids {
        let name = itoa_pid(pid);
        let mut process = Process {
            pid,
            ..Process::default()
        };
        match open_dir_at(&proc_fd, name.as_c_str()) {
            Ok(pdir) => {
                // The pid now names a later process than the one the iterator saw: that one
                // exited (as if the /proc scan had missed it), and the rows must not be given
                // to the newcomer. The identity below is read through the same directory fd,
                // so it is the identity of the process whose start time matched.
                if started
                    .get(&pid)
                    .is_some_and(|&ns| clock.reused(ns, read_start_ticks(&pdir)))
                {
                    dropped.push(pid);
                    continue;
                }
                read_identity(&pdir, &mut process);
                if let Some(a) = &args {
                    a.request(pid, &pdir);
                }
            }
            // Exited since the iterator ran: as the /proc scan would not have seen it.
            Err(Errno::NOENT | Errno::SRCH) => {
                dropped.push(pid);
                continue;
            }
            // Anything else: the holder is real; its identity stays unknown.
            Err(_) => {}
        }
        if query.command.is_some() && !query.may_match_process(&process) {
            dropped.push(pid);
            continue;
        }
        processes.insert(pid, process);
    }
    if !dropped.is_empty() {
        holders.retain(|h| dropped.binary_search(&h.owner.pid).is_err());
    }
    // A process /proc lists but the iterator did not visit (started since, or one the iterator
    // does not reach, as this project's sandbox supervisor showed) is scanned through /proc, so
    // a gap in the iterator can never turn an owned socket into an unowned one.
    let mut w = Worker::new(&proc_fd, query, args.as_ref());
    for pid in listed.into_iter().filter(|p| !seen.contains(p)) {
        w.visit(pid);
    }
    holders.extend_from_slice(&w.holders);
    for p in w.processes {
        processes.insert(p.pid, p);
    }
    let mut unreadable = w.unreadable;
    unreadable.sort_unstable();
    holders.sort_unstable();
    holders.dedup();
    let visited = seen.len() + w.visited;
    let args_stuck = match args {
        Some(a) => a.finish(&mut processes, ARGS_BUDGET),
        None => Vec::new(),
    };
    Ok(Scan {
        holders,
        processes,
        unreadable,
        visited,
        args_stuck,
    })
}

/// A test seam: with `SOCKSTAT_TEST_PAUSE_AFTER_ITERATOR_MS` set, says so on stderr and waits
/// that long between the iterator and the identity reads, so a test can reuse a pid in the
/// window (tests/hardening_churn.rs). Bounded to 10 s; unset, it costs one getenv.
fn test_pause_after_iterator() {
    if let Some(ms) = std::env::var("SOCKSTAT_TEST_PAUSE_AFTER_ITERATOR_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        eprintln!("sockstat: test: iterator done, pausing {ms} ms");
        std::thread::sleep(std::time::Duration::from_millis(ms.min(10_000)));
    }
}

/// Converts the iterator's start times (`start_boottime`, ns) into the clock ticks of
/// `/proc/PID/stat`, which are shifted by the reader's time namespace (if any): the shift is
/// measured on this process, which the iterator visits too.
struct StartClock {
    ns_per_tick: u64,
    /// `/proc/self/stat` ticks minus the iterator's, for this process (0 outside a time
    /// namespace).
    offset: i64,
}

impl StartClock {
    fn new(started: &rustc_hash::FxHashMap<u32, u64>) -> StartClock {
        let hz = super::auxv(super::AT_CLKTCK)
            .filter(|&h| h > 0 && h <= 1_000_000_000)
            .unwrap_or(100);
        let ns_per_tick = 1_000_000_000 / hz;
        let offset = started
            .get(&std::process::id())
            .and_then(|&ns| {
                let dir = rustix::fs::open(
                    "/proc/self",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ok()?;
                let ticks = read_start_ticks(&dir)?;
                Some(ticks as i64 - (ns / ns_per_tick) as i64)
            })
            .unwrap_or(0);
        StartClock {
            ns_per_tick,
            offset,
        }
    }

    /// True when `ticks` (from `/proc/PID/stat`) is not the start time `ns` the iterator read:
    /// the pid belongs to another process now. Unknown ticks (unreadable) are not evidence.
    fn reused(&self, ns: u64, ticks: Option<u64>) -> bool {
        let Some(ticks) = ticks else {
            return false;
        };
        let expect = (ns / self.ns_per_tick) as i64 + self.offset;
        // A time-namespace shift that is not a whole tick can round either way.
        let slack = i64::from(self.offset != 0);
        (ticks as i64 - expect).abs() > slack
    }
}

/// Field 22 of `/proc/PID/stat` (`starttime`, clock ticks after boot), read through the
/// process's directory fd. The command name (field 2) may hold spaces and parentheses, so the
/// fields are counted from the last `)`.
fn read_start_ticks(pdir: &OwnedFd) -> Option<u64> {
    let mut buf = [0u8; 1024];
    let n = read_at(pdir, c"stat", &mut buf)?;
    parse_start_ticks(&buf[..n])
}

pub(crate) fn parse_start_ticks(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    // After ')': field 3 (state) is the first; starttime is field 22.
    rest.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// CAP_BPF (39) and CAP_PERFMON (38), or CAP_SYS_ADMIN (21), in `CapEff` of a status file.
pub(crate) fn has_bpf_caps(status: &[u8]) -> bool {
    cap_eff(status)
        .is_some_and(|c| c & (1 << 21) != 0 || (c & (1 << 38) != 0 && c & (1 << 39) != 0))
}

/// A `/proc` mounted with `hidepid` that hides other users' processes from this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HidePid {
    /// Where that proc is mounted.
    pub mount_point: std::path::PathBuf,
    /// The option as mounted (`hidepid=2`, `hidepid=invisible`, ...).
    pub option: String,
    /// Our effective uid: its own processes stay visible.
    pub euid: u32,
}

/// CAP_SYS_PTRACE: with it, hidepid hides nothing (`has_pid_permissions` is a ptrace check).
const CAP_SYS_PTRACE: u32 = 19;

/// Whether `proc_root` is a proc mount whose `hidepid` option hides (or closes) other users'
/// processes from us: not when we have CAP_SYS_PTRACE, nor when we are in its `gid=` group.
pub fn hidepid_hides_others(proc_root: &Path) -> Option<HidePid> {
    let status = std::fs::read("/proc/self/status")
        .or_else(|_| std::fs::read(proc_root.join("self/status")))
        .unwrap_or_default();
    if cap_eff(&status).is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0) {
        return None;
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .or_else(|_| std::fs::read_to_string(proc_root.join("self/mountinfo")))
        .ok()?;
    let root = std::fs::canonicalize(proc_root).ok()?;
    let (option, gid) = hidepid_of(&mountinfo, &root)?;
    if let Some(gid) = gid {
        let mut groups = rustix::process::getgroups().unwrap_or_default();
        groups.push(rustix::process::getegid());
        if groups.iter().any(|g| g.as_raw() == gid) {
            return None;
        }
    }
    Some(HidePid {
        mount_point: root,
        option,
        euid: rustix::process::geteuid().as_raw(),
    })
}

/// The effective capability mask from `/proc/self/status`.
pub(crate) fn cap_eff(status: &[u8]) -> Option<u64> {
    let line = status
        .split(|&b| b == b'\n')
        .find(|l| l.starts_with(b"CapEff:"))?;
    let hex = std::str::from_utf8(&line[7..]).ok()?.trim();
    u64::from_str_radix(hex, 16).ok()
}

/// The `hidepid` option (when it hides anything) and `gid=` of the proc mount at `mount_point`
/// (the last one listed there, which is the one on top), from `/proc/self/mountinfo` text.
pub(crate) fn hidepid_of(mountinfo: &str, mount_point: &Path) -> Option<(String, Option<u32>)> {
    let want = mount_point.as_os_str().as_encoded_bytes();
    let mut found = None;
    for line in mountinfo.lines() {
        // id parent major:minor root mount-point options [optional...] - fstype source super
        let mut halves = line.splitn(2, " - ");
        let (Some(left), Some(right)) = (halves.next(), halves.next()) else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        if left.len() < 6 || right.first() != Some(&"proc") {
            continue;
        }
        if super::unescape_mountinfo(left[4]) != want {
            continue;
        }
        let opts = right.get(2).copied().unwrap_or("");
        let mut hide = None;
        let mut gid = None;
        for o in opts.split(',').chain(left[5].split(',')) {
            if let Some(v) = o.strip_prefix("hidepid=") {
                if !matches!(v, "0" | "off") {
                    hide = Some(o.to_string());
                }
            } else if let Some(v) = o.strip_prefix("gid=") {
                gid = v.parse().ok();
            }
        }
        found = Some(hide.map(|h| (h, gid)));
    }
    found.flatten()
}

/// The numeric entries of /proc: only those are processes (`self`, `thread-self` and the rest
/// are not).
pub(crate) fn list_pids(proc_fd: &OwnedFd) -> rustix::io::Result<Vec<u32>> {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); DIRENT_BUF];
    let mut dir = RawDir::new(proc_fd, &mut buf);
    let mut pids = Vec::with_capacity(1024);
    while let Some(entry) = dir.next() {
        let entry = entry?;
        if let Some(pid) = parse_decimal(entry.file_name().to_bytes()) {
            if pid > 0 && pid <= u64::from(u32::MAX) {
                pids.push(pid as u32);
            }
        }
    }
    Ok(pids)
}

/// A non-empty all-digit name, as a number.
fn parse_decimal(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(c - b'0');
    }
    Some(n)
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
            visited: 0,
        }
    }

    fn visit(&mut self, pid: u32) {
        self.visited += 1;
        let name = itoa_pid(pid);
        let pdir = match open_dir_at(self.proc_fd, name.as_c_str()) {
            Ok(fd) => fd,
            // Visible but closed to us (hidepid=1/noaccess): its sockets are hidden, not unowned.
            Err(Errno::ACCESS | Errno::PERM) => {
                let uid =
                    rustix::fs::statat(self.proc_fd, name.as_c_str(), rustix::fs::AtFlags::empty())
                        .ok()
                        .map(|st| st.st_uid);
                self.unreadable.push((pid, uid));
                return;
            }
            // Gone since the listing, or invisible (hidepid=2): nothing to say about it here
            // (`hidepid_hides_others` accounts for the invisible ones).
            Err(_) => return,
        };
        let mut process = Process {
            pid,
            ..Process::default()
        };
        // Skipping a process is only safe when its sockets would be dropped anyway: with --pid or
        // --command a socket needs a matching holder. With --user alone, a socket held only by
        // other users' processes must still be seen as owned (not fall back to its kernel uid).
        let prefilter = self.query.pids.is_some() || self.query.command.is_some();
        if prefilter {
            // Read what the filters need before paying for the fd walk.
            read_identity(&pdir, &mut process);
            if !self.query.may_match_process(&process) {
                return;
            }
        }
        let fd_dir = match open_dir_at(&pdir, c"fd") {
            Ok(fd) => fd,
            Err(Errno::ACCESS | Errno::PERM) => {
                let uid = rustix::fs::fstat(&pdir).ok().map(|st| st.st_uid);
                self.unreadable.push((pid, uid));
                return;
            }
            Err(_) => return,
        };
        let before = self.holders.len();
        let denied = walk_fds(&fd_dir, pid, &mut self.dirent, &mut self.holders);
        if denied {
            let uid = rustix::fs::fstat(&pdir).ok().map(|st| st.st_uid);
            self.unreadable.push((pid, uid));
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

/// Opens `proc_root` and lists the pids to visit: `query.pids`, or every numeric entry.
fn open_and_list(proc_root: &Path, query: &Query) -> Result<(OwnedFd, Vec<u32>), String> {
    let proc_fd = rustix::fs::open(
        proc_root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("cannot open {}: {e}", proc_root.display()))?;
    let pids = match &query.pids {
        Some(list) => list.clone(),
        None => {
            list_pids(&proc_fd).map_err(|e| format!("cannot list {}: {e}", proc_root.display()))?
        }
    };
    Ok((proc_fd, pids))
}

/// `openat(dir, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)`.
fn open_dir_at(dir: &OwnedFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Walks one `/proc/<pid>/fd` directory; returns true when links could not be read for lack of
/// permission.
fn walk_fds(
    fd_dir: &OwnedFd,
    pid: u32,
    dirent: &mut [MaybeUninit<u8>],
    out: &mut Vec<Holder>,
) -> bool {
    let mut dir = RawDir::new(fd_dir, dirent);
    let mut link = [0u8; LINK_BUF];
    while let Some(entry) = dir.next() {
        let entry = match entry {
            Ok(e) => e,
            // The process exited while we listed its fds: what was read stays valid.
            Err(Errno::ACCESS | Errno::PERM) => return true,
            Err(_) => return false,
        };
        let name = entry.file_name();
        let Some(fd) = parse_decimal(name.to_bytes()) else {
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
            Err(Errno::ACCESS | Errno::PERM) => return true,
            // ENOENT: the fd was closed between getdents and readlink; normal.
            Err(_) => {}
        }
    }
    false
}

/// Reads `comm` and the effective uid through the process directory fd.
fn read_identity(pdir: &OwnedFd, p: &mut Process) {
    let mut buf = [0u8; 64];
    if let Some(n) = read_at(pdir, c"comm", &mut buf) {
        let comm = buf[..n].strip_suffix(b"\n").unwrap_or(&buf[..n]);
        p.command = Some(RawString::new(comm));
    }
    let mut status = [0u8; 4096];
    if let Some(n) = read_at(pdir, c"status", &mut status) {
        p.uid = effective_uid(&status[..n]);
    }
}

/// How long a listing waits for the arguments (`-a`) of all socket holders, and for any one
/// of them, before leaving them unknown.
pub const ARGS_BUDGET: Duration = Duration::from_secs(1);
/// How long one process's arguments may take before that read is given up.
pub const ARGS_ONE_READ: Duration = Duration::from_millis(250);
/// At most this many reader threads may be left blocked by stuck processes in one listing.
const ARGS_MAX_STUCK: usize = 8;

/// pids whose arguments a reader thread is still blocked on, from any listing of this
/// process (watch mode, `serve`): not asked again until that read returns.
static ARGS_BLOCKED: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Reads `cmdline` of socket holders off the scan threads. Reading a process's arguments takes
/// its memory-map lock, which a process stuck in a page fault (a hung NFS or FUSE file) holds
/// for as long as it is stuck; the scan must not wait with it. Each request carries a duplicate
/// of the `/proc/PID` directory fd the identity was read through, so the arguments are the same
/// process's. A read that takes longer than [`ARGS_ONE_READ`] is given up (its thread left
/// blocked, the process marked) and a new reader takes over the queue.
struct ArgsReader {
    jobs: mpsc::Sender<(u32, OwnedFd)>,
    results: std::sync::Mutex<mpsc::Receiver<(u32, Option<Vec<RawString>>)>>,
    shared: Arc<ArgsShared>,
    /// pids queued, in any order.
    requested: std::sync::Mutex<Vec<u32>>,
    /// Set when a reader thread could not be started: requests are read in place.
    inline: std::sync::atomic::AtomicBool,
}

struct ArgsShared {
    queue: std::sync::Mutex<mpsc::Receiver<(u32, OwnedFd)>>,
    results: std::sync::Mutex<mpsc::Sender<(u32, Option<Vec<RawString>>)>>,
    /// Per reader: the pid it is reading and since when.
    busy: std::sync::Mutex<Vec<Option<(u32, Instant)>>>,
}

/// Locks a mutex whose data stays valid even if a holder panicked.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ArgsReader {
    fn new() -> ArgsReader {
        let (jobs, queue) = mpsc::channel();
        let (results_tx, results_rx) = mpsc::channel();
        let r = ArgsReader {
            jobs,
            results: std::sync::Mutex::new(results_rx),
            shared: Arc::new(ArgsShared {
                queue: std::sync::Mutex::new(queue),
                results: std::sync::Mutex::new(results_tx),
                busy: std::sync::Mutex::new(Vec::new()),
            }),
            requested: std::sync::Mutex::new(Vec::new()),
            inline: std::sync::atomic::AtomicBool::new(false),
        };
        r.spawn_reader();
        r
    }

    fn spawn_reader(&self) {
        let shared = Arc::clone(&self.shared);
        let slot = {
            let mut busy = lock(&shared.busy);
            busy.push(None);
            busy.len() - 1
        };
        let spawned = std::thread::Builder::new()
            .name("sockstat-args".into())
            .spawn(move || loop {
                let job = lock(&shared.queue).recv();
                let Ok((pid, pdir)) = job else { break };
                lock(&shared.busy)[slot] = Some((pid, Instant::now()));
                let args = read_args(&pdir);
                let given_up = {
                    let mut busy = lock(&shared.busy);
                    // Cleared by `finish` when it gave this read up.
                    let given_up = busy[slot].is_none();
                    busy[slot] = None;
                    given_up
                };
                if given_up {
                    lock(&ARGS_BLOCKED).retain(|&p| p != pid);
                    break; // a fresh reader has taken over the queue
                }
                if lock(&shared.results).send((pid, args)).is_err() {
                    break;
                }
            });
        if spawned.is_err() {
            // No thread to spare: later requests are read on the scan thread, unbudgeted,
            // rather than queued for a reader that does not exist.
            self.inline.store(true, Ordering::Relaxed);
        }
    }

    /// Queues the arguments of `pid`, read through `pdir`.
    fn request(&self, pid: u32, pdir: &OwnedFd) {
        if lock(&ARGS_BLOCKED).contains(&pid) {
            // Still stuck since an earlier listing: unread, and counted as such.
            lock(&self.requested).push(pid);
            return;
        }
        lock(&self.requested).push(pid);
        let queued = !self.inline.load(Ordering::Relaxed)
            && rustix::io::fcntl_dupfd_cloexec(pdir, 0)
                .is_ok_and(|dup| self.jobs.send((pid, dup)).is_ok());
        if !queued {
            // No reader thread, or no fd to spare for the duplicate: read it here, unbudgeted.
            let _ = lock(&self.shared.results).send((pid, read_args(pdir)));
        }
    }

    /// Waits up to `budget` for the queued reads and fills `processes`' arguments; returns the
    /// pids whose arguments stay unknown because their reads did not return in time.
    fn finish(self, processes: &mut HashMap<u32, Process>, budget: Duration) -> Vec<u32> {
        let mut pending: std::collections::HashSet<u32> =
            lock(&self.requested).iter().copied().collect();
        let results = lock(&self.results);
        let deadline = Instant::now() + budget;
        let mut stuck: Vec<u32> = Vec::new();
        let already: Vec<u32> = {
            let blocked = lock(&ARGS_BLOCKED);
            pending
                .iter()
                .copied()
                .filter(|p| blocked.contains(p))
                .collect()
        };
        for pid in already {
            pending.remove(&pid);
            stuck.push(pid);
        }
        while !pending.is_empty() && Instant::now() < deadline {
            if let Ok((pid, args)) = results.recv_timeout(Duration::from_millis(20)) {
                pending.remove(&pid);
                if let Some(p) = processes.get_mut(&pid) {
                    p.args = args;
                }
            }
            // A read past its time: give it up, let a fresh reader take the rest of the queue.
            let given_up: Vec<u32> = lock(&self.shared.busy)
                .iter_mut()
                .filter_map(|b| match *b {
                    Some((pid, since)) if since.elapsed() > ARGS_ONE_READ => {
                        *b = None;
                        Some(pid)
                    }
                    _ => None,
                })
                .collect();
            for pid in given_up {
                pending.remove(&pid);
                stuck.push(pid);
                lock(&ARGS_BLOCKED).push(pid);
                if stuck.len() <= ARGS_MAX_STUCK {
                    self.spawn_reader();
                }
            }
        }
        // Whatever is still queued or in flight past the deadline stays unknown too.
        stuck.extend(pending);
        stuck.sort_unstable();
        stuck
    }
}

/// Reads `cmdline` (NUL-separated arguments). Kernel threads have none.
fn read_args(pdir: &OwnedFd) -> Option<Vec<RawString>> {
    let mut buf = vec![0u8; 8192];
    let n = read_at(pdir, c"cmdline", &mut buf)?;
    let data = buf[..n].strip_suffix(b"\0").unwrap_or(&buf[..n]);
    if data.is_empty() {
        return Some(Vec::new());
    }
    Some(data.split(|&b| b == 0).map(RawString::new).collect())
}

/// One `openat` + `read` (+ close) relative to a directory fd; `None` on any failure.
fn read_at(dir: &OwnedFd, name: &CStr, buf: &mut [u8]) -> Option<usize> {
    let fd = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
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

/// The effective uid from `/proc/<pid>/status` (`Uid:\treal\teffective\tsaved\tfs`).
pub(crate) fn effective_uid(status: &[u8]) -> Option<u32> {
    let line = status
        .split(|&b| b == b'\n')
        .find(|l| l.starts_with(b"Uid:"))?;
    let mut fields = line[4..]
        .split(|&b| b == b'\t' || b == b' ')
        .filter(|f| !f.is_empty());
    let _real = fields.next()?;
    let eff = fields.next()?;
    parse_decimal(eff).and_then(|n| u32::try_from(n).ok())
}

/// The decimal name of a pid as a C string, without allocating per call beyond the CString.
fn itoa_pid(pid: u32) -> std::ffi::CString {
    // A decimal string never contains NUL.
    std::ffi::CString::new(pid.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc/PID`-like directory whose `cmdline` is a FIFO with no writer: opening it blocks,
    /// as reading the arguments of a process whose memory map is locked does. The budget gives
    /// that one up and still delivers the others.
    #[test]
    fn a_blocked_argument_read_is_given_up_and_the_rest_delivered() {
        let ok = tempfile::tempdir().unwrap();
        std::fs::write(ok.path().join("cmdline"), b"nginx\0-g\0").unwrap();
        let stuck = tempfile::tempdir().unwrap();
        let fifo = stuck.path().join("cmdline");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let open = |p: &std::path::Path| {
            rustix::fs::open(p, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
        };
        // pids far above any real one, so ARGS_BLOCKED entries cannot meet other tests'.
        let (good, bad, after) = (4_000_001, 4_000_002, 4_000_003);
        let mut processes: HashMap<u32, Process> = [good, bad, after]
            .into_iter()
            .map(|pid| {
                (
                    pid,
                    Process {
                        pid,
                        ..Process::default()
                    },
                )
            })
            .collect();
        let reader = ArgsReader::new();
        reader.request(good, &open(ok.path()));
        reader.request(bad, &open(stuck.path()));
        reader.request(after, &open(ok.path())); // queued behind the blocked one
        let t0 = Instant::now();
        let given_up = reader.finish(&mut processes, Duration::from_secs(5));
        let took = t0.elapsed();
        assert_eq!(given_up, [bad]);
        assert!(took < Duration::from_secs(2), "{took:?}");
        let args = |pid: u32| {
            processes[&pid]
                .args
                .as_ref()
                .map(|a| a.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>())
        };
        assert_eq!(args(good), Some(vec![b"nginx".to_vec(), b"-g".to_vec()]));
        assert_eq!(
            args(after),
            args(good),
            "a fresh reader took over the queue"
        );
        assert_eq!(args(bad), None);
        // Asked again while still blocked: not queued behind it, reported at once.
        let mut again: HashMap<u32, Process> = [(
            bad,
            Process {
                pid: bad,
                ..Process::default()
            },
        )]
        .into_iter()
        .collect();
        let reader = ArgsReader::new();
        reader.request(bad, &open(stuck.path()));
        let t0 = Instant::now();
        assert_eq!(reader.finish(&mut again, Duration::from_secs(5)), [bad]);
        assert!(t0.elapsed() < Duration::from_millis(200));
        // Unblock the abandoned read (a writer opens the FIFO), and it clears its mark.
        let w = rustix::fs::open(&fifo, OFlags::WRONLY | OFlags::NONBLOCK, Mode::empty());
        drop(w);
        let t0 = Instant::now();
        while lock(&ARGS_BLOCKED).contains(&bad) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!lock(&ARGS_BLOCKED).contains(&bad));
    }

    #[test]
    fn start_ticks_count_from_the_last_parenthesis() {
        let stat = b"4121 (a) b) (c) S 1 4121 4121 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 \
                     987654 12345678 300 18446744073709551615\n";
        assert_eq!(parse_start_ticks(stat), Some(987_654));
        assert_eq!(parse_start_ticks(b"4121 (x) S 1"), None);
        assert_eq!(parse_start_ticks(b"no parenthesis"), None);
    }

    #[test]
    fn a_reused_pid_has_another_start_time() {
        let c = StartClock {
            ns_per_tick: 10_000_000,
            offset: 0,
        };
        assert!(!c.reused(5_123_456_789, Some(512)));
        assert!(c.reused(5_123_456_789, Some(513)));
        assert!(!c.reused(5_123_456_789, None), "unreadable is not evidence");
        // In a time namespace the shift may round either way by one tick.
        let shifted = StartClock {
            ns_per_tick: 10_000_000,
            offset: 1000,
        };
        assert!(!shifted.reused(5_123_456_789, Some(1513)));
        assert!(!shifted.reused(5_123_456_789, Some(1511)));
        assert!(shifted.reused(5_123_456_789, Some(1600)));
    }

    #[test]
    fn this_process_start_time_matches_its_stat() {
        // The clock's conversion, checked against the kernel: /proc/self/stat's starttime is
        // this process's start_boottime in ticks, as the iterator would read it.
        let dir = rustix::fs::open(
            "/proc/self",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        let ticks = read_start_ticks(&dir).expect("starttime");
        let up: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let hz = super::super::auxv(super::super::AT_CLKTCK).unwrap_or(100) as f64;
        assert!(
            ticks as f64 <= up * hz + 1.0,
            "{ticks} ticks after {up} s of uptime"
        );
    }

    #[test]
    fn effective_uid_is_the_second_field() {
        let s = b"Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t1\t1\t1\t1\n";
        assert_eq!(effective_uid(s), Some(0));
        assert_eq!(effective_uid(b"Name:\tx\n"), None);
        assert_eq!(effective_uid(b"Uid:\t5\n"), None);
    }

    #[test]
    fn hidepid_from_mountinfo() {
        let mi = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                  99 22 0:50 / /proc rw,relatime - proc proc rw,hidepid=invisible,gid=4\n\
                  100 27 0:51 / /tmp/my\\040proc rw - proc proc rw,hidepid=2\n\
                  101 27 0:52 / /tmp/open rw - proc proc rw,hidepid=0\n";
        assert_eq!(
            hidepid_of(mi, Path::new("/proc")),
            Some(("hidepid=invisible".into(), Some(4)))
        );
        assert_eq!(
            hidepid_of(mi, Path::new("/tmp/my proc")),
            Some(("hidepid=2".into(), None))
        );
        assert_eq!(hidepid_of(mi, Path::new("/tmp/open")), None);
        assert_eq!(hidepid_of(mi, Path::new("/elsewhere")), None);
        assert_eq!(
            cap_eff(b"Name:\tx\nCapEff:\t0000000000080000\n"),
            Some(1 << 19)
        );
    }

    #[test]
    fn decimal_names_only() {
        assert_eq!(parse_decimal(b"123"), Some(123));
        assert_eq!(parse_decimal(b"self"), None);
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"12a"), None);
        assert_eq!(parse_decimal(b"99999999999999999999"), None);
    }
}
