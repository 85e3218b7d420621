//! The BPF owner scan (cargo feature `bpf`, on by default): loads the `iter/task_file` program
//! that `sockstat_wire::task_file` assembles from the running kernel's BTF, and reads its
//! `(tgid, fd, socket inode)` records. The kernel walks every task's file table itself, so the
//! scan costs no system call per fd (doc/reference/linux.md#bpf-iterator: 5-10x faster than `/proc`).
//!
//! Needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), kernel BTF (`/sys/kernel/btf/vmlinux`) and
//! Linux 5.11. Anything missing is an error that names it (a [`SysError`] whose kind says
//! denied or unsupported); the caller then scans
//! `/proc`. The program, its link and the iterator are file descriptors of this process,
//! released when they drop: nothing is pinned and nothing outlives the scan.

use sockstat_wire::task_file::Entry;
#[cfg(feature = "bpf")]
use std::os::fd::AsRawFd;

use crate::error::{ErrorKind, SysError};

#[cfg_attr(not(feature = "bpf"), allow(unused_imports))]
pub use super::bpf::VMLINUX_BTF;

/// Which tasks the owner scan's iterators walk.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "bpf"), allow(dead_code))]
pub enum Tasks<'a> {
    /// Every task visible in this pid namespace, in one iterator on one thread.
    All,
    /// These processes (by pid as this namespace numbers them), each through an iterator of its
    /// own (`bpf_iter_link_info.task.pid`, Linux 6.1), shared out over `threads` threads, each
    /// with its own program: the kernel's walk of the fd tables, which is most of the scan, then
    /// runs on several cores, and a scan for a few processes walks only theirs. A kernel that
    /// refuses a per-process iterator gets one iterator over every task instead.
    Each {
        /// The processes to walk.
        pids: &'a [u32],
        /// How many threads walk them (at least 1).
        threads: usize,
    },
}

/// Runs the iterators and returns, for every thread-group leader they visit, its identity,
/// then a record per fd holding a wanted socket (every socket when `wanted` is `None`, else
/// those whose inodes it lists) and one record with inode 0 when it has any other file.
#[cfg(all(test, feature = "bpf"))]
pub fn entries(wanted: Option<&[u64]>, tasks: Tasks<'_>) -> Result<Vec<Entry>, SysError> {
    let mut out = Vec::new();
    for_each_record(wanted, tasks, |r| out.push(r))?;
    Ok(out)
}

/// [`entries`]' file records.
#[cfg(all(test, feature = "bpf"))]
pub fn records(
    wanted: Option<&[u64]>,
    tasks: Tasks<'_>,
) -> Result<Vec<sockstat_wire::task_file::Record>, SysError> {
    Ok(entries(wanted, tasks)?
        .into_iter()
        .filter_map(|e| match e {
            Entry::File(r) => Some(r),
            Entry::Identity(_) => None,
        })
        .collect())
}

/// [`records`], each handed to `f`: as the iterator's output is read for [`Tasks::All`] (it is
/// never held whole), after the threads are done for [`Tasks::Each`].
#[cfg(feature = "bpf")]
pub fn for_each_record(
    wanted: Option<&[u64]>,
    tasks: Tasks<'_>,
    mut f: impl FnMut(Entry),
) -> Result<(), SysError> {
    let (mut layout, cached) = super::timing::phase("layout", layout)?;
    let wanted = match wanted {
        Some(inodes) => Some(sys::wanted_map(inodes)?),
        None => None,
    };
    let wanted = wanted.as_ref().map(|m| m.as_raw_fd());
    let first = match load(&layout, wanted) {
        Ok(p) => p,
        Err(_) if cached => {
            // A cached layout the kernel refuses: forget it and derive it again.
            cache::forget();
            layout = from_btf()?;
            cache::store(&layout);
            load(&layout, wanted)?
        }
        Err(e) => return Err(e),
    };
    if let Tasks::Each { pids, threads } = tasks {
        let walked = super::timing::phase("BPF iterator", || {
            each_process(&layout, wanted, first.try_clone(), pids, threads)
        });
        match walked {
            Ok(shares) => {
                shares.into_iter().flatten().for_each(&mut f);
                return Ok(());
            }
            // Per-process iterators are Linux 6.1: walk every task in one instead.
            Err(e) if e.kind() == ErrorKind::Unsupported => {}
            Err(e) => return Err(e),
        }
    }
    super::timing::phase("BPF iterator", || -> Result<_, SysError> {
        let link = sys::link_create(&first, None)?;
        let iter = sys::iter_create(&link)?;
        sys::read_records(&iter, f)
    })
}

/// Loads the program with a `last` map of its own (iterators that run at the same time must
/// not share it) and the shared map of wanted inodes.
#[cfg(feature = "bpf")]
fn load(
    layout: &sockstat_wire::task_file::Layout,
    wanted: Option<std::os::fd::RawFd>,
) -> Result<std::os::fd::OwnedFd, SysError> {
    use sockstat_wire::task_file::{self, Maps};
    super::timing::phase("BPF load", || {
        let last = sys::map_create(sys::MAP_ARRAY, 4, 16, 1, "sockstat_last")?;
        let code = task_file::program(
            layout,
            Maps {
                last: last.as_raw_fd(),
                wanted,
            },
        );
        // The program holds its own references to the maps from here on.
        sys::prog_load(&code, layout.attach_btf_id)
    })
}

/// [`Tasks::Each`]: `threads` threads take the next process from `pids` until none is left;
/// the first thread uses `first` (the program already loaded), the others load their own.
/// Returns each thread's records, or an error of kind [`ErrorKind::Unsupported`] when the
/// kernel refuses a per-process iterator.
#[cfg(feature = "bpf")]
fn each_process(
    layout: &sockstat_wire::task_file::Layout,
    wanted: Option<std::os::fd::RawFd>,
    first: std::io::Result<std::os::fd::OwnedFd>,
    pids: &[u32],
    threads: usize,
) -> Result<Vec<Vec<Entry>>, SysError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let first = first.map_err(|e| SysError::new("duplicating the BPF program's descriptor", e))?;
    let walk = |prog: std::os::fd::OwnedFd| -> Result<Vec<Entry>, SysError> {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&pid) = pids.get(i) else {
                return Ok(out);
            };
            let link = sys::link_create(&prog, Some(pid))?;
            let iter = sys::iter_create(&link)?;
            sys::read_records(&iter, |r| out.push(r))?;
        }
    };
    let threads = threads.clamp(1, pids.len().max(1));
    std::thread::scope(|s| {
        let others: Vec<_> = (1..threads)
            .map(|_| s.spawn(|| load(layout, wanted).and_then(walk)))
            .collect();
        let mut shares = vec![walk(first)?];
        for t in others {
            shares.push(t.join().map_err(|_| {
                SysError::other("the BPF owner scan", ErrorKind::Bug, "a thread panicked")
            })??);
        }
        Ok(shares)
    })
}

/// The program's layout for the running kernel: from the cache (see [`cache`]) when it has it
/// (`true`), else derived from the kernel's BTF and cached.
#[cfg(feature = "bpf")]
fn layout() -> Result<(sockstat_wire::task_file::Layout, bool), SysError> {
    if let Some(l) = cache::load() {
        return Ok((l, true));
    }
    let l = from_btf()?;
    cache::store(&l);
    Ok((l, false))
}

/// The layout, derived from the kernel's BTF.
#[cfg(feature = "bpf")]
fn from_btf() -> Result<sockstat_wire::task_file::Layout, SysError> {
    use sockstat_wire::btf::Btf;
    use sockstat_wire::task_file::Layout;
    let data = super::timing::phase("BTF read", super::bpf::kernel_btf)
        .map_err(|e| SysError::new(format!("cannot read {VMLINUX_BTF}"), e))?;
    super::timing::phase("BTF parse and layout", || {
        let btf = Btf::parse(&data)
            .map_err(|e| SysError::other(VMLINUX_BTF, ErrorKind::Invalid, e.to_string()))?;
        Layout::from_btf(&btf).map_err(|e| SysError::other(VMLINUX_BTF, ErrorKind::Unsupported, e))
    })
}

#[cfg(feature = "bpf")]
pub mod cache {
    //! The layout derived from the kernel's BTF, kept between runs in [`DIR`] so that a run
    //! need not read and index the kernel's 5 MiB of BTF again (doc/reference/BENCHMARKS.md: the BPF
    //! scan's fixed cost).
    //!
    //! Why it is safe to trust: the file is named by the running kernel's GNU build id, which
    //! names one vmlinux image, and the BTF the layout is derived from is part of that image (the
    //! iterator's types are all vmlinux's, none a module's); `/run` is a tmpfs, emptied at every
    //! boot, so it never outlives the kernel it describes. Only a file and directory owned by
    //! this user and writable by no one else are read (root's, since the BPF scan needs root or
    //! CAP_BPF), so another user cannot plant a layout. A layout the kernel's verifier refuses is
    //! forgotten and derived again. Nothing else is stored.
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    use std::path::PathBuf;

    use sockstat_wire::task_file::{kernel_build_id, Layout};

    /// Where the cache lives: a tmpfs that the next boot empties.
    pub const DIR: &str = "/run/sockstat";

    /// The cache file for the running kernel, named by its build id.
    fn path() -> Option<PathBuf> {
        let notes = std::fs::read("/sys/kernel/notes").ok()?;
        let id = kernel_build_id(&notes)?;
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        Some(PathBuf::from(DIR).join(format!("task_file-layout-{hex}")))
    }

    /// True when `m` is this user's and writable by no one else.
    fn private(m: &std::fs::Metadata) -> bool {
        m.uid() == rustix::process::geteuid().as_raw() && m.mode() & 0o022 == 0
    }

    /// The cached layout of the running kernel, if a trustworthy one is there.
    pub fn load() -> Option<Layout> {
        let path = path()?;
        if !private(&std::fs::symlink_metadata(DIR).ok()?) {
            return None;
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .ok()?;
        if !private(&f.metadata().ok()?) {
            return None;
        }
        let text = std::io::read_to_string(f).ok()?;
        Layout::from_text(&text)
    }

    /// Keeps `l` for the next run; quietly does nothing where it cannot (the cache only saves
    /// time).
    pub fn store(l: &Layout) {
        let Some(path) = path() else { return };
        if std::fs::DirBuilder::new().mode(0o700).create(DIR).is_err()
            && !std::fs::symlink_metadata(DIR).is_ok_and(|m| m.is_dir() && private(&m))
        {
            return;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(l.to_text().as_bytes()));
        if written.is_err() || std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Drops the running kernel's cached layout.
    pub fn forget() {
        if let Some(path) = path() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Without the `bpf` feature, the scan is never available.
#[cfg(not(feature = "bpf"))]
pub fn for_each_record(
    _wanted: Option<&[u64]>,
    _tasks: Tasks<'_>,
    _f: impl FnMut(Entry),
) -> Result<(), SysError> {
    Err(SysError::other(
        "the BPF owner scan",
        ErrorKind::Unsupported,
        "built without the bpf feature",
    ))
}

#[cfg(feature = "bpf")]
mod sys {
    //! The scan's `bpf(2)` steps, through [`crate::sys::bpf`] (the one home of the commands),
    //! each error saying which step failed and what it needs.

    use std::os::fd::OwnedFd;

    use crate::error::{ErrorKind, SysError};
    use crate::sys::bpf::{self, MapSpec, ProgSpec};

    pub use bpf::{MAP_TYPE_ARRAY as MAP_ARRAY, MAP_TYPE_HASH as MAP_HASH};

    fn denied(what: &str, e: std::io::Error) -> SysError {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => " (needs CAP_BPF and CAP_PERFMON, or root)",
            Some(libc::ENOSYS) => " (bpf(2) is not available)",
            Some(libc::EINVAL) => {
                " (the kernel lacks a piece this program needs: Linux 5.11 or later)"
            }
            _ => "",
        };
        SysError::new(format!("{what}{hint}"), e)
    }

    /// Loads the `iter/task_file` program; a refusal carries the verifier's last words.
    pub fn prog_load(code: &[u64], attach_btf_id: u32) -> Result<OwnedFd, SysError> {
        bpf::prog_load(&ProgSpec {
            prog_type: bpf::PROG_TYPE_TRACING,
            attach_type: bpf::TRACE_ITER,
            attach_btf_id,
            code,
            name: "sockstat_owners",
        })
        .map_err(|e| {
            let what = if e.verifier.is_empty() {
                "loading the task_file iterator".to_string()
            } else {
                format!("loading the task_file iterator (verifier: {})", e.verifier)
            };
            denied(&what, e.error)
        })
    }

    /// A map (`BPF_MAP_CREATE`).
    pub fn map_create(
        kind: u32,
        key: u32,
        value: u32,
        entries: u32,
        name: &str,
    ) -> Result<OwnedFd, SysError> {
        bpf::map_create(&MapSpec {
            map_type: kind,
            key_size: key,
            value_size: value,
            max_entries: entries,
            flags: 0,
            name,
        })
        .map_err(|e| denied("creating a map for the task_file iterator", e))
    }

    /// A hash map whose keys are `inodes` (values: one byte, unused), filled in one
    /// `BPF_MAP_UPDATE_BATCH` (Linux 5.6), or one update per key where that is refused.
    pub fn wanted_map(inodes: &[u64]) -> Result<OwnedFd, SysError> {
        let n = u32::try_from(inodes.len().max(1)).map_err(|_| {
            SysError::other("the BPF owner scan", ErrorKind::Invalid, "too many sockets")
        })?;
        let map = map_create(MAP_HASH, 8, 1, n, "sockstat_wanted")?;
        if inodes.is_empty() {
            return Ok(map);
        }
        let keys: Vec<u8> = inodes.iter().flat_map(|i| i.to_ne_bytes()).collect();
        let values = vec![1u8; inodes.len()];
        let filling = |e| denied("filling the task_file iterator's map", e);
        match bpf::map_update_batch(&map, &keys, &values, n) {
            Ok(done) if done as usize == inodes.len() => return Ok(map),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINVAL | bpf::ENOTSUPP | libc::EOPNOTSUPP)
                ) => {}
            Err(e) => return Err(filling(e)),
        }
        for (k, v) in keys.chunks_exact(8).zip(values.chunks_exact(1)) {
            bpf::map_update(&map, k, v).map_err(filling)?;
        }
        Ok(map)
    }

    /// A link of the iterator program: over every task, or over the threads of process `pid`
    /// alone (Linux 6.1; an older kernel refuses it with EINVAL, reported as
    /// [`ErrorKind::Unsupported`]).
    pub fn link_create(prog: &OwnedFd, pid: Option<u32>) -> Result<OwnedFd, SysError> {
        match bpf::iter_link(prog, pid) {
            Err(e) if pid.is_some() && e.raw_os_error() == Some(libc::EINVAL) => {
                Err(SysError::other(
                    "attaching a per-process task_file iterator",
                    ErrorKind::Unsupported,
                    "this kernel walks every task or none (Linux 6.1 walks one process)",
                ))
            }
            r => r.map_err(|e| denied("attaching the task_file iterator", e)),
        }
    }

    pub fn iter_create(link: &OwnedFd) -> Result<OwnedFd, SysError> {
        bpf::iter_open(link).map_err(|e| denied("opening the task_file iterator", e))
    }

    /// Reads the iterator to its end, handing each whole record to `f`. The kernel fills at most
    /// its seq_file buffer per read, and a read may end inside a record: its head waits for the
    /// next read.
    pub fn read_records(
        iter: &OwnedFd,
        mut f: impl FnMut(sockstat_wire::task_file::Entry),
    ) -> Result<(), SysError> {
        use sockstat_wire::task_file::{records, RECORD_LEN};
        let mut chunk = vec![0u8; 256 * 1024];
        let mut have = 0;
        loop {
            match rustix::io::read(iter, &mut chunk[have..]) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    let end = have + n;
                    let whole = end - end % RECORD_LEN;
                    records(&chunk[..whole]).for_each(&mut f);
                    chunk.copy_within(whole..end, 0);
                    have = end - whole;
                }
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
                Err(e) => return Err(SysError::new("reading the task_file iterator", e)),
            }
        }
    }
}

#[cfg(all(test, feature = "bpf"))]
mod tests {
    use std::os::fd::AsRawFd;
    use std::os::linux::fs::MetadataExt;

    use sockstat_wire::task_file::Entry;

    /// As root, the iterator reports this process's own sockets, by fd and inode, under the pid
    /// /proc gives it.
    #[test]
    fn reports_own_sockets() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("SKIPPED reports_own_sockets: needs root (CAP_BPF + CAP_PERFMON)");
            return;
        }
        if !std::path::Path::new(super::VMLINUX_BTF).exists() {
            eprintln!("SKIPPED reports_own_sockets: this kernel exports no BTF");
            return;
        }
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let entries = super::entries(None, super::Tasks::All)
            .expect("the BPF scan runs as root on this kernel");
        let me = std::process::id();
        // Every process's first entry is its identity, and it has one: for this one, what
        // /proc/self/comm and /proc/self/status say.
        let mut identified = std::collections::HashSet::new();
        for e in &entries {
            match e {
                Entry::Identity(id) => assert!(identified.insert(id.tgid), "{id:?} twice"),
                Entry::File(r) => {
                    assert!(identified.contains(&r.tgid), "{r:?} before its identity")
                }
            }
        }
        let mine = entries
            .iter()
            .find_map(|e| match e {
                Entry::Identity(id) if id.tgid == me => Some(*id),
                _ => None,
            })
            .expect("this process identified");
        let comm = std::fs::read("/proc/self/comm").unwrap();
        assert_eq!(mine.comm(), comm.strip_suffix(b"\n").unwrap());
        let status = std::fs::read("/proc/self/status").unwrap();
        assert_eq!(
            Some(mine.euid),
            sockstat_wire::proc_pid::effective_uid(&status)
        );
        let records: Vec<_> = entries
            .iter()
            .filter_map(|e| match e {
                Entry::File(r) => Some(*r),
                Entry::Identity(_) => None,
            })
            .collect();
        let inode = |fd: i32| {
            std::fs::metadata(format!("/proc/self/fd/{fd}"))
                .unwrap()
                .st_ino()
        };
        // The leader's start time, as /proc/self/stat gives it in clock ticks.
        let start_ns = records
            .iter()
            .find(|r| r.tgid == me)
            .expect("this process visited")
            .start_ns;
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let ticks: u64 = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .nth(19)
            .unwrap()
            .parse()
            .unwrap();
        let hz = super::super::auxv(super::super::AT_CLKTCK).unwrap_or(100);
        assert_eq!(
            start_ns / (1_000_000_000 / hz),
            ticks,
            "start_boottime vs stat"
        );
        for fd in [
            tcp.as_raw_fd(),
            udp.as_raw_fd(),
            a.as_raw_fd(),
            b.as_raw_fd(),
        ] {
            let want = sockstat_wire::task_file::Record {
                tgid: me,
                fd: fd as u32,
                inode: inode(fd),
                start_ns,
            };
            assert!(records.contains(&want), "{want:?} missing from {records:?}");
        }
        // Its other files: one record with inode 0 (the process was visited), not one per file.
        let _ = &file;
        assert_eq!(
            records
                .iter()
                .filter(|r| r.tgid == me && r.inode == 0)
                .count(),
            1,
            "one visit record"
        );
        // With a map of wanted inodes, only those sockets' fds, and still the visit record.
        let only = inode(tcp.as_raw_fd());
        let wanted =
            super::records(Some(&[only]), super::Tasks::All).expect("the filtered BPF scan");
        let mine: Vec<_> = wanted.iter().filter(|r| r.tgid == me).collect();
        assert!(mine
            .iter()
            .any(|r| r.inode == only && r.fd == tcp.as_raw_fd() as u32));
        assert!(
            mine.iter().all(|r| r.inode == only || r.inode == 0),
            "{mine:?}"
        );
        assert_eq!(mine.iter().filter(|r| r.inode == 0).count(), 1, "{mine:?}");
        // Threads share the leader's table and are not reported twice.
        let mut mine: Vec<_> = records.iter().filter(|r| r.tgid == me).collect();
        let n = mine.len();
        mine.dedup();
        assert_eq!(mine.len(), n);

        // One iterator per process, over two threads: the same records for this process as the
        // walk of every task, none for another, and nothing for a pid that names no process.
        let mut all_mine: Vec<_> = records.iter().filter(|r| r.tgid == me).copied().collect();
        all_mine.sort_unstable_by_key(|r| (r.fd, r.inode));
        let absent = u32::try_from(
            std::fs::read_to_string("/proc/sys/kernel/pid_max")
                .map_or(4_194_304, |t| t.trim().parse::<u64>().unwrap_or(4_194_304)),
        )
        .unwrap_or(u32::MAX)
        .saturating_sub(1);
        let release = rustix::system::uname()
            .release()
            .to_string_lossy()
            .into_owned();
        let mut v = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|n| n.parse::<u32>().ok());
        if (v.next().flatten(), v.next().flatten()) < (Some(6), Some(1)) {
            eprintln!("SKIPPED per-process iterators: Linux {release} walks every task or none");
            return;
        }
        for threads in [1, 2] {
            let mut each = super::records(
                None,
                super::Tasks::Each {
                    pids: &[me, absent],
                    threads,
                },
            )
            .expect("per-process iterators run on this kernel (Linux 6.1 or later)");
            assert!(each.iter().all(|r| r.tgid == me), "{each:?}");
            each.sort_unstable_by_key(|r| (r.fd, r.inode));
            assert_eq!(each, all_mine, "{threads} threads");
        }
        drop((tcp, udp, a, b));
    }
}
