//! The owner scan through the kernel's `iter/task_file` BPF iterator: the holders of every
//! socket fd from one in-kernel walk, each process named as the iterator read it, with its start
//! time to tell a pid reused since.

use super::args::{ArgsReader, ARGS_BUDGET};
use super::{identity, open_and_list, Seen, Worker};

use super::Scan;
use crate::error::{ErrorKind, SysError};
use crate::join::Holder;
use crate::model::{Owner, Process};
use crate::query::Query;
use crate::sys::procfs::read_at;
use rustix::fs::{Mode, OFlags};
use sockstat_wire::proc_pid;
use sockstat_wire::task_file::Entry;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::Path;

/// The owner scan through the kernel's `iter/task_file` BPF iterator ([`crate::sys::taskfile`]):
/// the kernel lists every socket fd and names (command, uid) each process it visits, and
/// `/proc/PID` is read only for the arguments (`-a`) of processes that hold sockets, or the
/// identity of one the iterator could not name. Runs only where the iterator's pids are the
/// ones `proc_root` shows: the real `/proc`, mounted for this process's pid namespace. The
/// kernel's walk runs on `threads` threads (one iterator per process listed) when more than one,
/// or for the processes `query.select.pids` names alone ([`crate::sys::taskfile::Tasks`]).
pub fn scan_bpf(
    proc_root: &Path,
    query: &Query,
    threads: usize,
    wanted: Option<&[u64]>,
) -> Result<Scan, SysError> {
    let unsupported =
        |why: String| SysError::other("the BPF owner scan", ErrorKind::Unsupported, why);
    if proc_root != Path::new("/proc") {
        return Err(unsupported(format!(
            "{} is not /proc: the iterator's pids would not match it",
            proc_root.display()
        )));
    }
    // NSpid lists this process's pid from /proc's namespace down to its own: one field means
    // they are the same namespace, the one the iterator numbers pids in.
    let status = std::fs::read("/proc/self/status")
        .map_err(|e| SysError::new("cannot read /proc/self/status", e))?;
    if proc_pid::nspid_depth(&status).is_some_and(|n| n != 1) {
        return Err(unsupported(
            "/proc belongs to an outer pid namespace: the iterator's pids would not match it"
                .into(),
        ));
    }
    if !rustix::process::geteuid().is_root() && !has_bpf_caps(&status) {
        return Err(SysError::other(
            "the BPF owner scan",
            ErrorKind::Denied,
            "needs CAP_BPF and CAP_PERFMON (or root)",
        ));
    }
    // Listed before the iterator runs: a process that starts in between is the iterator's.
    let (proc_fd, listed) = open_and_list(proc_root, query)?;
    let pid_wanted = |pid: u32| query.select.pids.as_ref().is_none_or(|p| p.contains(&pid));
    let mut seen: rustc_hash::FxHashSet<u32> = rustc_hash::FxHashSet::default();
    // Each visited leader's start time, to recognise its pid if it is reused before /proc is
    // read for it below.
    let mut started: rustc_hash::FxHashMap<u32, u64> = rustc_hash::FxHashMap::default();
    let mut holders: Vec<Holder> = Vec::with_capacity(wanted.map_or(1024, <[u64]>::len));
    // Records are taken as the iterator's output is read, so it is never held whole.
    // One thread: one iterator over every task (no system calls per process), unless a few
    // processes were asked for. More: one iterator per process, shared out over the threads.
    let tasks = if threads > 1 || query.select.pids.is_some() {
        crate::sys::taskfile::Tasks::Each {
            pids: &listed,
            threads,
        }
    } else {
        crate::sys::taskfile::Tasks::All
    };
    // Each visited leader's command and uid, as the iterator read them from the task itself.
    let mut known: rustc_hash::FxHashMap<u32, sockstat_wire::task_file::Identity> =
        rustc_hash::FxHashMap::default();
    crate::sys::taskfile::for_each_record(wanted, tasks, |e| match e {
        Entry::Identity(id) => {
            known.insert(id.tgid, id);
        }
        Entry::File(r) => {
            if seen.insert(r.tgid) {
                started.insert(r.tgid, r.start_ns);
            }
            if r.inode != 0 && pid_wanted(r.tgid) {
                holders.push(Holder {
                    inode: r.inode,
                    owner: Owner {
                        pid: r.tgid,
                        fd: r.fd,
                    },
                });
            }
        }
    })?;
    test_pause_after_iterator();
    // Identity (command, uid, arguments) of the processes that hold sockets.
    let mut pids: Vec<u32> = holders.iter().map(|h| h.owner.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let mut processes = HashMap::with_capacity(pids.len());
    let mut dropped: Vec<u32> = Vec::new();
    let clock = StartClock::new(&started);
    let args = query.gather.args.then(ArgsReader::new);
    // The iterator's identities need no system call; /proc is read for the arguments (-a), and
    // for a process the iterator could not identify (its directory, start time, comm, status):
    // shared out over the scan's threads when there are many such holders.
    let identify = |pids: &[u32]| -> Vec<(u32, Option<Process>)> {
        pids.iter()
            .map(|&pid| {
                let saw = Seen {
                    identity: known.get(&pid).filter(|id| !id.comm().is_empty()),
                    started: started.get(&pid).copied(),
                };
                (
                    pid,
                    identity(&proc_fd, pid, saw, &clock, args.as_ref(), query),
                )
            })
            .collect()
    };
    let slow = args.is_some() || pids.iter().filter(|p| !known.contains_key(p)).count() >= 64;
    let identified: Vec<(u32, Option<Process>)> = if threads > 1 && slow && pids.len() >= 64 {
        let chunk = pids.len().div_ceil(threads);
        std::thread::scope(|sc| {
            let parts: Vec<_> = pids
                .chunks(chunk)
                .map(|c| sc.spawn(move || identify(c)))
                .collect();
            parts
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    } else {
        identify(&pids)
    };
    for (pid, process) in identified {
        match process {
            Some(p) => {
                processes.insert(pid, p);
            }
            None => dropped.push(pid),
        }
    }
    if !dropped.is_empty() {
        holders.retain(|h| dropped.binary_search(&h.owner.pid).is_err());
    }
    // A process /proc lists but the iterator did not visit (started since, or one the iterator
    // does not reach, as this project's sandbox supervisor showed) is scanned through /proc, so
    // a gap in the iterator can never turn an owned socket into an unowned one.
    let mut w = Worker::new(&proc_fd, query, args.as_ref());
    w.wanted = wanted;
    for pid in listed.into_iter().filter(|p| !seen.contains(p)) {
        w.visit(pid);
    }
    holders.extend_from_slice(&w.holders);
    for p in w.processes {
        processes.insert(p.pid, p);
    }
    let mut unreadable = w.unreadable;
    unreadable.sort_unstable();
    let mut failed = w.failed;
    failed.sort_unstable_by_key(|f| f.0);
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
        failed,
        visited,
        args_stuck,
    })
}

/// A test seam: with `SOCKSTAT_TEST_PAUSE_AFTER_ITERATOR_MS` set, says so on stderr and waits
/// that long between the iterator and the /proc reads, so a test can reuse a pid in the
/// window (tests/it/hardening_churn.rs). Bounded to 10 s; unset, it costs one getenv. Never
/// acted on in a process with more privilege than its caller ([`crate::privilege::test_hook`]).
pub(super) fn test_pause_after_iterator() {
    if let Some(ms) = crate::privilege::test_hook("SOCKSTAT_TEST_PAUSE_AFTER_ITERATOR_MS")
        .and_then(|v| v.parse::<u64>().ok())
    {
        eprintln!("sockstat: test: iterator done, pausing {ms} ms");
        std::thread::sleep(std::time::Duration::from_millis(ms.min(10_000)));
    }
}

/// Converts the iterator's start times (`start_boottime`, ns) into the clock ticks of
/// `/proc/PID/stat`, which are shifted by the reader's time namespace (if any): the shift is
/// measured on this process, which the iterator visits too.
pub(super) struct StartClock {
    ns_per_tick: u64,
    /// `/proc/self/stat` ticks minus the iterator's, for this process (0 outside a time
    /// namespace).
    offset: i64,
}

impl StartClock {
    pub(super) fn new(started: &rustc_hash::FxHashMap<u32, u64>) -> StartClock {
        let hz = crate::sys::auxv(crate::sys::AT_CLKTCK)
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
    pub(super) fn reused(&self, ns: u64, ticks: Option<u64>) -> bool {
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
pub(super) fn read_start_ticks(pdir: &OwnedFd) -> Option<u64> {
    let mut buf = [0u8; 1024];
    let n = read_at(pdir, c"stat", &mut buf)?;
    proc_pid::start_ticks(&buf[..n])
}

/// CAP_BPF (39) and CAP_PERFMON (38), or CAP_SYS_ADMIN (21), in `CapEff` of a status file.
pub(crate) fn has_bpf_caps(status: &[u8]) -> bool {
    proc_pid::cap_eff(status)
        .is_some_and(|c| c & (1 << 21) != 0 || (c & (1 << 38) != 0 && c & (1 << 39) != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let hz = crate::sys::auxv(crate::sys::AT_CLKTCK).unwrap_or(100) as f64;
        assert!(
            ticks as f64 <= up * hz + 1.0,
            "{ticks} ticks after {up} s of uptime"
        );
    }
}
