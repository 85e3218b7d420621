//! Issue 7 item 6: a user database that does not answer costs numbers and a warning, not a hung
//! sockstat. The stall is real: in a private mount namespace a FIFO is bind-mounted over
//! /etc/passwd, so glibc's `files` NSS module blocks in open() for ever (no writer comes), as a
//! lookup against an unreachable LDAP or a hung NFS would. Needs root (mount namespace).
//!
//! And a process whose memory map stays locked costs `?` in ARGS, not a hung `-a`: made real
//! with a FUSE file that never answers READ (see `StallingFuse`). Needs root and /dev/fuse.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// This binary re-run as the target of the locked-memory-map test (from `main.rs`'s
/// constructor, before the harness starts), when `SOCKSTAT_TEST_MAPLOCK_TARGET` is set.
pub fn run_role_if_requested() {
    if let Some(file) = std::env::var_os(MAPLOCK_ENV) {
        maplock_target(&file);
    }
}

/// Runs sockstat with `args` where /etc/passwd never answers; returns (status, stdout, stderr,
/// seconds taken).
fn with_stalled_passwd(args: &[&str]) -> (Option<i32>, String, String, f64) {
    let dir = tempdir();
    let fifo = dir.path().join("passwd.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let script = format!(
        "mount --bind '{}' /etc/passwd && exec \"$0\" \"$@\"",
        fifo.display()
    );
    let t0 = Instant::now();
    let mut child = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            SOCKSTAT,
        ])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare");
    // Bounded: a hung sockstat is killed and reported, not waited for.
    let limit = t0 + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sockstat {args:?} hung on a stalled user database for 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t0.elapsed().as_secs_f64(),
    )
}

#[test]
fn a_stalled_user_database_costs_numbers_not_a_hang() {
    require_root!("a_stalled_user_database_costs_numbers_not_a_hang (mount namespace)");
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let port = h.item(0).sock().port().to_string();

    let (code, stdout, stderr, secs) = with_stalled_passwd(&["-l", "-p", &port]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(secs < 10.0, "took {secs:.1} s");
    assert!(
        stderr.contains("the user database did not answer within 2.0 s")
            && stderr.contains("users are shown as numbers"),
        "{stderr}"
    );
    let row = stdout
        .lines()
        .find(|l| l.contains(&format!("127.0.0.1:{port}")))
        .unwrap_or_else(|| panic!("the listener is listed: {stdout}"));
    // The USER column holds the uid (0), since the name could not be had.
    assert!(row.starts_with("0 "), "{row}");
    assert!(row.contains(&h.pid().to_string()), "{row}");

    let (code, stdout, stderr, _) = with_stalled_passwd(&["-l", "-p", &port, "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    validate(&v);
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "users-unresolved"),
        "{v}"
    );
    let s = &sockets(&v)[0];
    assert_eq!(s["uid"], 0);
    assert!(s.get("user").is_none_or(|u| u.is_null()), "{s}");

    // -n never asks, so nothing stalls and nothing is said.
    let (code, _, stderr, secs) = with_stalled_passwd(&["-l", "-n", "-p", &port]);
    assert_eq!(code, Some(0));
    assert!(!stderr.contains("user database"), "{stderr}");
    assert!(secs < 2.0, "took {secs:.1} s with -n");
}

// ---------------------------------------------------------------------------------------------
// A process whose memory map stays locked.
//
// The situation, made for real: a tiny FUSE file system (served by a thread of this test) never
// answers READ. The target process maps one of its files. A thread of this test reads that
// page through /proc/TARGET/mem, which faults it in *holding the target's mmap lock for
// reading* (a remote access cannot drop the lock and retry) and waits for FUSE for ever. The
// target then calls mmap(), which queues for the lock as a writer; from then on every new reader
// of the target's memory map waits too, and /proc/TARGET/cmdline is such a reader. That is
// what `ps` and `top` hang on when a process's file system stalls. Everything is released by
// closing the FUSE device, which aborts the connection.
// ---------------------------------------------------------------------------------------------

/// The environment variable that turns a re-executed copy of this test binary into the target.
const MAPLOCK_ENV: &str = "SOCKSTAT_TEST_MAPLOCK_TARGET";

/// The target: a TCP listener on 127.0.0.1, the FUSE file mapped; prints "PID PORT ADDRESS",
/// then on a byte from stdin calls mmap() (which blocks while the lock is held), then holds
/// until stdin closes.
fn maplock_target(file: &std::ffi::OsStr) -> ! {
    use std::io::{Read, Write};
    use std::os::unix::io::AsRawFd;
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let f = std::fs::File::open(file).expect("open the FUSE file");
    // SAFETY: a fresh shared read-only mapping of an open file; nothing aliases it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            65536,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap the FUSE file");
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} {} {}",
        std::process::id(),
        l.local_addr().unwrap().port(),
        p as usize
    )
    .unwrap();
    out.flush().unwrap();
    let mut stdin = std::io::stdin().lock();
    let mut b = [0u8; 1];
    if stdin.read(&mut b).unwrap_or(0) == 1 {
        // SAFETY: an anonymous mapping; it only has to ask for the lock.
        unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let _ = stdin.read_to_end(&mut Vec::new());
    }
    // SAFETY: leaves without running destructors, as the holder does.
    unsafe { libc::_exit(0) }
}

/// A FUSE file system with one 64 KiB file, `f`, whose READ is never answered. Served from a
/// thread; dropping it closes the device, which aborts the connection and fails every request
/// still waiting, then detaches the mount.
struct StallingFuse {
    mnt: std::path::PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    server: Option<std::thread::JoinHandle<()>>,
}

mod fuse_abi {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FLUSH: u32 = 25;
    pub const INIT: u32 = 26;
    pub const OPENDIR: u32 = 27;
    pub const RELEASEDIR: u32 = 29;
    pub const INTERRUPT: u32 = 36;
    pub const BATCH_FORGET: u32 = 42;
    /// `struct fuse_in_header`.
    pub const IN_HEADER: usize = 40;

    /// `struct fuse_attr` for node 1 (the root directory) or 2 (the file).
    pub fn attr(node: u64) -> Vec<u8> {
        let (mode, size, nlink) = if node == 1 {
            (libc::S_IFDIR | 0o755, 0u64, 2u32)
        } else {
            (libc::S_IFREG | 0o644, 65536, 1)
        };
        let mut a = Vec::with_capacity(88);
        for v in [node, size, size / 512, 0, 0, 0] {
            a.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [0u32, 0, 0, mode, nlink, 0, 0, 0, 4096, 0] {
            a.extend_from_slice(&v.to_ne_bytes());
        }
        a
    }
}

impl StallingFuse {
    /// Mounts it at `mnt` (which must exist) and starts serving; `Err` says why this kernel or
    /// machine cannot (no FUSE, no right to mount).
    fn mount(mnt: &std::path::Path) -> Result<StallingFuse, String> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::io::{AsRawFd, FromRawFd, OwnedFd};
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .map_err(|e| format!("/dev/fuse: {e}"))?;
        let dev = OwnedFd::from(dev);
        let target = std::ffi::CString::new(mnt.as_os_str().as_bytes()).unwrap();
        let opts = std::ffi::CString::new(format!(
            "fd={},rootmode=40000,user_id=0,group_id=0",
            dev.as_raw_fd()
        ))
        .unwrap();
        // SAFETY: valid C strings; the fd stays open for the life of the server.
        let rc = unsafe {
            libc::mount(
                c"sockstat-stall".as_ptr(),
                target.as_ptr(),
                c"fuse".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                opts.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "mount -t fuse: {}",
                std::io::Error::last_os_error()
            ));
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (s, r) = (stop.clone(), reads.clone());
        // SAFETY: `dev` is an open fd we own; the thread takes it over.
        let dev = unsafe { OwnedFd::from_raw_fd(std::os::unix::io::IntoRawFd::into_raw_fd(dev)) };
        let server = std::thread::spawn(move || serve(dev, &s, &r));
        Ok(StallingFuse {
            mnt: mnt.to_path_buf(),
            stop,
            reads,
            server: Some(server),
        })
    }
}

/// Answers every request but READ; returns (closing the device) once `stop` is set.
fn serve(
    dev: std::os::unix::io::OwnedFd,
    stop: &std::sync::atomic::AtomicBool,
    reads: &std::sync::atomic::AtomicUsize,
) {
    use fuse_abi::*;
    use std::os::unix::io::AsRawFd;
    use std::sync::atomic::Ordering;
    let fd = dev.as_raw_fd();
    let mut buf = vec![0u8; 1 << 20 | 4096];
    let reply = |unique: u64, error: i32, body: &[u8]| {
        let mut m = Vec::with_capacity(16 + body.len());
        m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&(-error).to_ne_bytes());
        m.extend_from_slice(&unique.to_ne_bytes());
        m.extend_from_slice(body);
        // SAFETY: writes our own buffer to our own fd. A reply to an aborted request fails;
        // that is fine.
        unsafe { libc::write(fd, m.as_ptr().cast(), m.len()) };
    };
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 50) } <= 0 {
            continue;
        }
        // SAFETY: reads into our own buffer.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) | Some(libc::ENOENT) | Some(libc::EAGAIN) => continue,
                _ => return, // ENODEV: unmounted or aborted
            }
        }
        let m = &buf[..n as usize];
        if m.len() < IN_HEADER {
            continue;
        }
        let opcode = u32::from_ne_bytes(m[4..8].try_into().unwrap());
        let unique = u64::from_ne_bytes(m[8..16].try_into().unwrap());
        let node = u64::from_ne_bytes(m[16..24].try_into().unwrap());
        let arg = &m[IN_HEADER..];
        match opcode {
            INIT => {
                // struct fuse_init_out, protocol 7.31, no optional features, 64 bytes.
                let mut o = Vec::with_capacity(64);
                for v in [7u32, 31, 65536, 0] {
                    o.extend_from_slice(&v.to_ne_bytes());
                }
                o.extend_from_slice(&1u16.to_ne_bytes()); // max_background
                o.extend_from_slice(&1u16.to_ne_bytes()); // congestion_threshold
                o.extend_from_slice(&65536u32.to_ne_bytes()); // max_write
                o.extend_from_slice(&1u32.to_ne_bytes()); // time_gran
                o.resize(64, 0);
                reply(unique, 0, &o);
            }
            GETATTR => {
                let mut o = vec![0u8; 16]; // attr_valid, attr_valid_nsec, dummy
                o.extend(attr(node));
                reply(unique, 0, &o);
            }
            LOOKUP if node == 1 && arg.starts_with(b"f\0") => {
                let mut o = Vec::with_capacity(128);
                for v in [2u64, 1, 3600, 3600] {
                    o.extend_from_slice(&v.to_ne_bytes());
                }
                o.extend_from_slice(&[0u8; 8]);
                o.extend(attr(2));
                reply(unique, 0, &o);
            }
            LOOKUP => reply(unique, libc::ENOENT, &[]),
            OPEN | OPENDIR => reply(unique, 0, &[0u8; 16]),
            READ => {
                // Never answered: this is the stall.
                reads.fetch_add(1, Ordering::Relaxed);
            }
            STATFS => reply(unique, 0, &[0u8; 80]),
            FLUSH | RELEASE | RELEASEDIR => reply(unique, 0, &[]),
            FORGET | BATCH_FORGET | INTERRUPT => {}
            _ => reply(unique, libc::ENOSYS, &[]),
        }
    }
    // Dropping `dev` here is the last reference: the kernel aborts the connection.
}

impl Drop for StallingFuse {
    fn drop(&mut self) {
        use std::os::unix::ffi::OsStrExt;
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.server.take() {
            let _ = t.join();
        }
        let target = std::ffi::CString::new(self.mnt.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// The state letter of a task (`/proc/<pid>/task/<tid>/stat`, field 3).
fn task_state(pid: u32, tid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    s.rsplit_once(") ")?.1.chars().next()
}

/// Waits up to 5 s for a task to sleep uninterruptibly (`D`, which is also how a killable
/// wait for a lock shows).
fn wait_for_d(pid: u32, tid: u32, what: &str) {
    let limit = Instant::now() + Duration::from_secs(5);
    while task_state(pid, tid) != Some('D') {
        assert!(
            Instant::now() < limit,
            "{what} never blocked (state {:?})",
            task_state(pid, tid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_process_whose_memory_map_stays_locked_costs_a_question_mark() {
    require_root!("a_process_whose_memory_map_stays_locked_costs_a_question_mark (FUSE mount)");
    if !std::path::Path::new("/dev/fuse").exists() {
        eprintln!(
            "SKIPPED: a_process_whose_memory_map_stays_locked_costs_a_question_mark: no /dev/fuse"
        );
        return;
    }
    use std::io::{BufRead, Write};
    use std::os::unix::fs::FileExt;
    let dir = tempdir();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let fuse = match StallingFuse::mount(&mnt) {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "SKIPPED: a_process_whose_memory_map_stays_locked_costs_a_question_mark: {e}"
            );
            return;
        }
    };

    // The target (this binary again, turned into it by the constructor).
    let mut target = Command::new(std::env::current_exe().unwrap())
        .env(MAPLOCK_ENV, mnt.join("f"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the target");
    let mut line = String::new();
    std::io::BufReader::new(target.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut it = line.split_whitespace().map(|w| w.parse::<u64>().unwrap());
    let (pid, port, addr) = (
        it.next().unwrap() as u32,
        it.next().unwrap().to_string(),
        it.next().unwrap(),
    );
    let mut stdin = target.stdin.take().unwrap();
    // Should an assertion fail below, locals drop in reverse order: the target's stdin closes,
    // then `fuse` aborts the connection, which lets the target's mmap() return and it leave.

    // 1. A remote read of the mapped page: holds the target's mmap lock and waits on FUSE.
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let mem_reader = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() } as u32).unwrap();
        let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
        let mut b = [0u8; 16];
        mem.read_at(&mut b, addr)
    });
    let mem_tid = tid_rx.recv().unwrap();
    // FUSE has the READ, and the reader sleeps waiting for its answer (interruptibly, so `S`).
    let limit = Instant::now() + Duration::from_secs(5);
    while fuse.reads.load(std::sync::atomic::Ordering::Relaxed) == 0
        || !matches!(task_state(std::process::id(), mem_tid), Some('S' | 'D'))
    {
        assert!(
            Instant::now() < limit,
            "the /proc/PID/mem read never reached FUSE"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!mem_reader.is_finished());

    // 2. The target asks for its lock as a writer, and queues.
    stdin.write_all(b"m").unwrap();
    stdin.flush().unwrap();
    wait_for_d(pid, pid, "the target's mmap()");

    // 3. The situation is real: a plain read of its cmdline does not return.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let cmdline_reader = std::thread::spawn(move || {
        let r = std::fs::read(format!("/proc/{pid}/cmdline"));
        let _ = done_tx.send(());
        r
    });
    assert!(
        done_rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "reading /proc/{pid}/cmdline returned although the target's memory map is locked"
    );

    // 4. sockstat: the listener and its holder, ARGS `?`, one warning, and no hang.
    let run = |args: &[&str]| {
        let t0 = Instant::now();
        let out = sockstat(args).run().no_panic();
        (out, t0.elapsed().as_secs_f64())
    };
    // Both owner scans read arguments through the same budget.
    for scan in ["proc", "bpf"] {
        let (out, secs) = run(&["-l", "-a", "-p", &port, "--json", "--owner-scan", scan]);
        let v = out.json();
        validate(&v);
        eprintln!("sockstat -a --owner-scan {scan} with a locked memory map: {secs:.2} s");
        assert!(
            secs < 5.0,
            "sockstat -a --owner-scan {scan} took {secs:.1} s"
        );
        let s = &sockets(&v)[0];
        let holder = &s["owners"][0];
        assert_eq!(holder["pid"], pid, "{scan}: {s}");
        assert!(
            holder.get("args").is_none_or(|a| a.is_null()),
            "{scan}: {s}"
        );
        let w: Vec<_> = warnings(&v)
            .iter()
            .filter(|w| w["code"] == "args-unavailable")
            .collect();
        assert_eq!(w.len(), 1, "{scan}: {v}");
        assert_eq!(w[0]["count"], 1, "{scan}: {v}");
        assert!(
            w[0]["message"]
                .as_str()
                .unwrap()
                .starts_with("the arguments of 1 process could not be read within 0.25 s"),
            "{scan}: {v}"
        );
        if scan == "bpf" {
            assert!(
                !warnings(&v)
                    .iter()
                    .any(|w| w["code"] == "owner-scan-bpf-unavailable"),
                "the BPF scan ran: {v}"
            );
        }
    }
    let (out, secs) = run(&["-l", "-a", "-p", &port]);
    assert!(secs < 5.0, "sockstat -a took {secs:.1} s");
    let t = out.table();
    let rows = t.rows_where("PID", &pid.to_string());
    assert_eq!(rows.len(), 1, "{}", out.stdout);
    assert_eq!(rows[0][t.col("ARGS")], "?", "{}", out.stdout);
    // Without -a nothing reads the memory map: no budget is spent, nothing is said.
    let (out, secs) = run(&["-l", "-p", &port]);
    assert!(secs < 2.0, "sockstat took {secs:.1} s without -a");
    assert!(!out.stderr.contains("arguments"), "{}", out.stderr);

    // 5. Release: abort the FUSE connection, which fails the stalled read and so frees the
    // lock; then the target's mmap(), the cmdline read and the target itself finish.
    drop(fuse);
    assert!(
        mem_reader.join().unwrap().is_err(),
        "the aborted read fails"
    );
    assert!(cmdline_reader.join().unwrap().is_ok());
    drop(stdin);
    let _ = target.wait();
}
