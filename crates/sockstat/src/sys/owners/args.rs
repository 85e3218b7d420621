//! The arguments (`-a`) of the processes that hold sockets, read on threads of their own with a
//! budget: a process stuck in a page fault (a hung NFS or FUSE file) blocks a reader of its
//! `cmdline`, never the listing.

use crate::model::{Process, RawString};
use crate::sys::procfs::read_at;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long a listing waits for the arguments (`-a`) of all socket holders, and for any one
/// of them, before leaving them unknown.
pub const ARGS_BUDGET: Duration = Duration::from_secs(1);
/// How long one process's arguments may take before that read is given up.
pub const ARGS_ONE_READ: Duration = Duration::from_millis(250);
/// At most this many reader threads may be left blocked by stuck processes in one listing.
pub(super) const ARGS_MAX_STUCK: usize = 8;

/// pids whose arguments a reader thread is still blocked on, from any listing of this
/// process (watch mode, `serve`): not asked again until that read returns.
pub(super) static ARGS_BLOCKED: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Reads `cmdline` of socket holders off the scan threads. Reading a process's arguments takes
/// its memory-map lock, which a process stuck in a page fault (a hung NFS or FUSE file) holds
/// for as long as it is stuck; the scan must not wait with it. Each request carries a duplicate
/// of the `/proc/PID` directory fd the identity was read through, so the arguments are the same
/// process's. A read that takes longer than [`ARGS_ONE_READ`] is given up (its thread left
/// blocked, the process marked) and a new reader takes over the queue.
pub(super) struct ArgsReader {
    jobs: mpsc::Sender<(u32, OwnedFd)>,
    results: std::sync::Mutex<mpsc::Receiver<(u32, Option<Vec<RawString>>)>>,
    shared: Arc<ArgsShared>,
    /// pids queued, in any order.
    requested: std::sync::Mutex<Vec<u32>>,
    /// Set when a reader thread could not be started: requests are read in place.
    inline: std::sync::atomic::AtomicBool,
}

pub(super) struct ArgsShared {
    queue: std::sync::Mutex<mpsc::Receiver<(u32, OwnedFd)>>,
    results: std::sync::Mutex<mpsc::Sender<(u32, Option<Vec<RawString>>)>>,
    /// Per reader: the pid it is reading and since when.
    busy: std::sync::Mutex<Vec<Option<(u32, Instant)>>>,
}

/// Locks a mutex whose data stays valid even if a holder panicked.
pub(super) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ArgsReader {
    pub(super) fn new() -> ArgsReader {
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
    pub(super) fn request(&self, pid: u32, pdir: &OwnedFd) {
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
    pub(super) fn finish(
        self,
        processes: &mut HashMap<u32, Process>,
        budget: Duration,
    ) -> Vec<u32> {
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
pub(super) fn read_args(pdir: &OwnedFd) -> Option<Vec<RawString>> {
    let mut buf = vec![0u8; 8192];
    let n = read_at(pdir, c"cmdline", &mut buf)?;
    let data = buf[..n].strip_suffix(b"\0").unwrap_or(&buf[..n]);
    if data.is_empty() {
        return Some(Vec::new());
    }
    Some(data.split(|&b| b == 0).map(RawString::new).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{Mode, OFlags};

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
}
