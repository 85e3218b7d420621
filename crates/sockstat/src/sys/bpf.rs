//! The `bpf(2)` commands sockstat uses, on zeroed `union bpf_attr` buffers with the fields at
//! their uapi offsets (`include/uapi/linux/bpf.h`): creating and filling maps, loading and
//! attaching BTF-typed tracing programs, opening iterators (the owner scan's
//! [`super::taskfile`]), reading maps, the kernel's BTF and program run-time statistics, and
//! reading a `BPF_MAP_TYPE_RINGBUF` through its shared memory (the tracers). The one home of
//! these commands: callers add what their errors mean.
//!
//! Every object is a file descriptor of this process: nothing is pinned, and everything is
//! detached and freed when the descriptors close (also when sockstat is killed).

// Without the `bpf` feature the owner scan's commands (iterators, BTF, map updates) go unused.
#![cfg_attr(not(feature = "bpf"), allow(dead_code))]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const MAP_CREATE: libc::c_long = 0;
const MAP_LOOKUP_ELEM: libc::c_long = 1;
const MAP_UPDATE_ELEM: libc::c_long = 2;
const MAP_GET_NEXT_KEY: libc::c_long = 4;
const PROG_LOAD: libc::c_long = 5;
const OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const RAW_TRACEPOINT_OPEN: libc::c_long = 17;
const BTF_GET_FD_BY_ID: libc::c_long = 19;
const BTF_GET_NEXT_ID: libc::c_long = 23;
const MAP_UPDATE_BATCH: libc::c_long = 26;
const LINK_CREATE: libc::c_long = 28;
const ENABLE_STATS: libc::c_long = 32;
const ITER_CREATE: libc::c_long = 33;

/// `BPF_PROG_TYPE_TRACING`.
pub const PROG_TYPE_TRACING: u32 = 26;
/// `BPF_TRACE_RAW_TP`: a `tp_btf/` program.
pub const TRACE_RAW_TP: u32 = 23;
/// `BPF_TRACE_ITER`: a BPF iterator (`iter/...`).
pub const TRACE_ITER: u32 = 28;
/// The kernel's internal "operation not supported" (`ENOTSUPP`), which leaks to user space
/// from map operations a map type lacks.
pub const ENOTSUPP: i32 = 524;
/// `BPF_MAP_TYPE_HASH`.
pub const MAP_TYPE_HASH: u32 = 1;
/// `BPF_MAP_TYPE_ARRAY`.
pub const MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_MAP_TYPE_RINGBUF`.
pub const MAP_TYPE_RINGBUF: u32 = 27;
/// `BPF_F_NO_PREALLOC`.
pub const F_NO_PREALLOC: u32 = 1;

/// `sizeof(union bpf_attr)` in the kernels this was written against is 144 and growing; the
/// kernel accepts a shorter attr, and a longer one whose extra bytes are zero.
const ATTR_LEN: usize = 128;

/// A zeroed `union bpf_attr`.
struct Attr([u64; ATTR_LEN / 8]);

impl Attr {
    fn new() -> Attr {
        Attr([0; ATTR_LEN / 8])
    }

    fn u32(&mut self, off: usize, v: u32) -> &mut Attr {
        let word = &mut self.0[off / 8];
        let mut b = word.to_ne_bytes();
        b[off % 8..off % 8 + 4].copy_from_slice(&v.to_ne_bytes());
        *word = u64::from_ne_bytes(b);
        self
    }

    fn u64(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off / 8] = v;
        self
    }

    fn name(&mut self, off: usize, v: &str) -> &mut Attr {
        // BPF object names: 15 bytes and a NUL, [A-Za-z0-9_.].
        for (i, &byte) in v.as_bytes().iter().take(15).enumerate() {
            let word = &mut self.0[(off + i) / 8];
            let mut b = word.to_ne_bytes();
            b[(off + i) % 8] = byte;
            *word = u64::from_ne_bytes(b);
        }
        self
    }

    /// `bpf(cmd, attr, size)`, returning the kernel's non-negative result.
    fn call(&mut self, cmd: libc::c_long) -> io::Result<i64> {
        loop {
            // SAFETY: `self.0` is a live, aligned buffer of ATTR_LEN bytes, the size passed; the
            // pointers stored in it point to buffers the caller keeps alive across this call.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    cmd,
                    self.0.as_mut_ptr(),
                    ATTR_LEN as libc::c_uint,
                )
            };
            if r >= 0 {
                return Ok(r);
            }
            let e = io::Error::last_os_error();
            // PROG_LOAD asks to be restarted when the verifier was interrupted.
            if e.raw_os_error() != Some(libc::EINTR) && e.raw_os_error() != Some(libc::EAGAIN) {
                return Err(e);
            }
        }
    }

    /// The `u32` at `off` (what the kernel wrote back).
    fn get_u32(&self, off: usize) -> u32 {
        let b = self.0[off / 8].to_ne_bytes();
        u32::from_ne_bytes([b[off % 8], b[off % 8 + 1], b[off % 8 + 2], b[off % 8 + 3]])
    }

    /// A command that returns a new file descriptor.
    fn call_fd(&mut self, cmd: libc::c_long) -> io::Result<OwnedFd> {
        let r = self.call(cmd)?;
        let fd = i32::try_from(r).map_err(|_| io::Error::other("bpf(2) returned a bad fd"))?;
        // SAFETY: the kernel just returned this descriptor to us, owned by no one else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// What a new map looks like.
#[derive(Debug, Clone, Copy)]
pub struct MapSpec<'a> {
    /// `BPF_MAP_TYPE_*`.
    pub map_type: u32,
    /// Key size in bytes.
    pub key_size: u32,
    /// Value size in bytes.
    pub value_size: u32,
    /// Capacity (bytes for a ring buffer).
    pub max_entries: u32,
    /// `BPF_F_*`.
    pub flags: u32,
    /// Name shown by `bpftool map`.
    pub name: &'a str,
}

/// Creates a map.
pub fn map_create(s: &MapSpec<'_>) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, s.map_type)
        .u32(4, s.key_size)
        .u32(8, s.value_size)
        .u32(12, s.max_entries)
        .u32(16, s.flags)
        .name(28, s.name);
    a.call_fd(MAP_CREATE)
}

/// Reads `value` for `key`; `Ok(false)` when the key is absent.
pub fn map_lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64)
        .u64(16, value.as_mut_ptr() as u64);
    match a.call(MAP_LOOKUP_ELEM) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Sets `key` to `value` (`BPF_ANY`).
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> io::Result<()> {
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64)
        .u64(16, value.as_ptr() as u64);
    a.call(MAP_UPDATE_ELEM).map(drop)
}

/// Sets `count` keys to their values in one `BPF_MAP_UPDATE_BATCH` (Linux 5.6; hash maps):
/// `keys` and `values` hold `count` keys and values of the map's sizes, back to back. Returns
/// how many the kernel set.
pub fn map_update_batch(map: &OwnedFd, keys: &[u8], values: &[u8], count: u32) -> io::Result<u32> {
    let mut a = Attr::new();
    a.u64(16, keys.as_ptr() as u64)
        .u64(24, values.as_ptr() as u64)
        .u32(32, count)
        .u32(36, map.as_raw_fd() as u32);
    a.call(MAP_UPDATE_BATCH)?;
    Ok(a.get_u32(32))
}

/// The key after `key` (the first key with `None`); `Ok(false)` at the end.
pub fn map_next_key(map: &OwnedFd, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32)
        .u64(8, key.map_or(0, |k| k.as_ptr() as u64))
        .u64(16, next.as_mut_ptr() as u64);
    match a.call(MAP_GET_NEXT_KEY) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// What a new program looks like.
#[derive(Debug, Clone, Copy)]
pub struct ProgSpec<'a> {
    /// `BPF_PROG_TYPE_*`.
    pub prog_type: u32,
    /// `BPF_TRACE_*`.
    pub attach_type: u32,
    /// The BTF id of what it attaches to, in the kernel's BTF.
    pub attach_btf_id: u32,
    /// The instructions.
    pub code: &'a [u64],
    /// Name shown by `bpftool prog`.
    pub name: &'a str,
}

/// Why a program did not load: the error and the verifier's last words.
#[derive(Debug)]
pub struct LoadError {
    /// The `bpf(2)` error.
    pub error: io::Error,
    /// The end of the verifier's log, when it said something.
    pub verifier: String,
}

/// Loads a program; on a verifier rejection, loads it again with the log on to say why.
pub fn prog_load(s: &ProgSpec<'_>) -> Result<OwnedFd, LoadError> {
    let license = c"GPL";
    let load = |log: Option<&mut Vec<u8>>| {
        let mut a = Attr::new();
        a.u32(0, s.prog_type)
            .u32(4, s.code.len() as u32)
            .u64(8, s.code.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .name(48, s.name)
            .u32(68, s.attach_type)
            .u32(108, s.attach_btf_id);
        if let Some(buf) = log {
            a.u32(24, 1)
                .u32(28, buf.len() as u32)
                .u64(32, buf.as_mut_ptr() as u64);
        }
        a.call_fd(PROG_LOAD)
    };
    match load(None) {
        Ok(fd) => Ok(fd),
        Err(error) => {
            let mut verifier = String::new();
            if matches!(
                error.raw_os_error(),
                Some(libc::EACCES | libc::EINVAL | libc::EPERM)
            ) {
                let mut log = vec![0u8; 1 << 20];
                // The log is only for the message; its own failure changes nothing.
                let _second_try = load(Some(&mut log));
                let text = String::from_utf8_lossy(&log);
                let text = text.trim_end_matches('\0').trim();
                let mut last: Vec<&str> = text.lines().rev().take(4).collect();
                last.reverse();
                verifier = last.join(" / ");
            }
            Err(LoadError { error, verifier })
        }
    }
}

/// Attaches a `tp_btf`, `fentry` or `fexit` program where its `attach_btf_id` says; the
/// program stays attached while the returned link is open.
pub fn attach_tracing(prog: &OwnedFd) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    // raw_tracepoint.name = NULL: a BTF-typed program attaches by its attach_btf_id.
    a.u64(0, 0).u32(8, prog.as_raw_fd() as u32);
    a.call_fd(RAW_TRACEPOINT_OPEN)
}

/// A link of an iterator program (`BPF_TRACE_ITER`): over every task, or over the threads of
/// process `pid` alone (`union bpf_iter_link_info`'s `task.pid`, Linux 6.1; an older kernel
/// refuses it with EINVAL).
pub fn iter_link(prog: &OwnedFd, pid: Option<u32>) -> io::Result<OwnedFd> {
    // union bpf_iter_link_info: task { tid @0, pid @4, pid_fd @8 }, 16 bytes in all.
    let mut info = [0u32; 4];
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32).u32(8, TRACE_ITER);
    if let Some(pid) = pid {
        info[1] = pid;
        // link_create.iter_info @16, iter_info_len @24.
        a.u64(16, info.as_mut_ptr() as u64)
            .u32(24, std::mem::size_of_val(&info) as u32);
    }
    a.call_fd(LINK_CREATE)
}

/// Opens an iterator link for reading: each `read` runs the program over the next objects.
pub fn iter_open(link: &OwnedFd) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, link.as_raw_fd() as u32);
    a.call_fd(ITER_CREATE)
}

/// Where the kernel publishes its own BTF (`CONFIG_DEBUG_INFO_BTF`).
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The kernel's own BTF, which every program here is assembled from (the owner scan's
/// iterator, the connection events, the drop counter): the one place it is read. Through
/// `bpf(2)` in one copy where these privileges allow (`BPF_BTF_GET_FD_BY_ID` needs
/// CAP_SYS_ADMIN), else from [`VMLINUX_BTF`] (which the kernel serves a page per `read`).
pub fn kernel_btf() -> io::Result<Vec<u8>> {
    let size = std::fs::metadata(VMLINUX_BTF)?.len() as usize;
    if let Some(data) = vmlinux_btf(size) {
        return Ok(data);
    }
    let mut data = Vec::with_capacity(size + 1);
    std::io::Read::read_to_end(&mut std::fs::File::open(VMLINUX_BTF)?, &mut data)?;
    Ok(data)
}

/// Why a probe cannot be loaded when [`kernel_btf`] fails, in one sentence.
pub fn btf_unreadable(e: &io::Error) -> String {
    format!("cannot read {VMLINUX_BTF}: {e} (the kernel must be built with CONFIG_DEBUG_INFO_BTF)")
}

/// The kernel's own BTF (`vmlinux`, BTF id 1 on every kernel so far, checked by name)
/// copied out in one `BPF_OBJ_GET_INFO_BY_FD`; `None` when that is not allowed or does not
/// give a whole `vmlinux` of `size` bytes (the caller then reads the sysfs file).
fn vmlinux_btf(size: usize) -> Option<Vec<u8>> {
    let mut id = 0u32;
    // The first few ids: vmlinux comes before any module's BTF.
    for _ in 0..4 {
        id = btf_next_id(id).ok()?;
        let fd = btf_open(id).ok()?;
        let mut data = vec![0u8; size];
        let mut name = [0u8; 16];
        // struct bpf_btf_info: btf (u64) @0, btf_size @8, id @12, name (u64) @16,
        // name_len @24, kernel_btf @28.
        let mut info = [0u64; 4];
        info[0] = data.as_mut_ptr() as u64;
        info[1] = size as u64;
        info[2] = name.as_mut_ptr() as u64;
        info[3] = name.len() as u64;
        obj_info(&fd, &mut info).ok()?;
        let got = (info[1] & 0xffff_ffff) as usize;
        let kernel = (info[3] >> 32) as u32 == 1;
        if kernel && name.starts_with(b"vmlinux\0") {
            return (got == size).then_some(data);
        }
    }
    None
}

/// The id of the kernel BTF object after `id` (the first with 0).
pub fn btf_next_id(id: u32) -> io::Result<u32> {
    let mut a = Attr::new();
    a.u32(0, id);
    a.call(BTF_GET_NEXT_ID)?;
    Ok(a.get_u32(4))
}

/// A descriptor of the kernel BTF object `id` (needs CAP_SYS_ADMIN).
pub fn btf_open(id: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, id);
    a.call_fd(BTF_GET_FD_BY_ID)
}

/// `BPF_OBJ_GET_INFO_BY_FD`: the kernel fills `info` (a `struct bpf_*_info`, as words), and the
/// pointers in it, with what it knows of the object.
pub fn obj_info(fd: &OwnedFd, info: &mut [u64]) -> io::Result<()> {
    let mut a = Attr::new();
    a.u32(0, fd.as_raw_fd() as u32)
        .u32(4, std::mem::size_of_val(info) as u32)
        .u64(8, info.as_mut_ptr() as u64);
    a.call(OBJ_GET_INFO_BY_FD).map(drop)
}

/// Turns on the kernel's per-program run-time accounting (`BPF_STATS_RUN_TIME`) while the
/// returned descriptor is open.
pub fn enable_run_time_stats() -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, 0);
    a.call_fd(ENABLE_STATS)
}

/// What the kernel counts about a running program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProgStats {
    /// Runs (while run-time stats are on).
    pub runs: u64,
    /// Total run time in ns (while run-time stats are on).
    pub run_time_ns: u64,
    /// Times the kernel skipped the program because it was already running on that CPU
    /// (always counted, Linux 5.12).
    pub recursion_misses: u64,
}

/// A program's statistics (`struct bpf_prog_info`: run_time_ns at 192, run_cnt at 200,
/// recursion_misses at 208).
pub fn prog_stats(prog: &OwnedFd) -> io::Result<ProgStats> {
    let mut info = [0u64; 232 / 8];
    obj_info(prog, &mut info)?;
    Ok(ProgStats {
        runs: info[200 / 8],
        run_time_ns: info[192 / 8],
        recursion_misses: info[208 / 8],
    })
}

/// The reading end of a `BPF_MAP_TYPE_RINGBUF`: the consumer position page (read-write) and
/// the producer position page followed by the data, mapped twice so that no record wraps.
pub struct RingReader {
    _map: OwnedFd,
    consumer: *mut u8,
    producer: *mut u8,
    page: usize,
    size: usize,
}

// SAFETY: the mappings are owned by the reader and only touched through &mut self.
unsafe impl Send for RingReader {}

/// `BPF_RINGBUF_BUSY_BIT`.
const RING_BUSY: u32 = 1 << 31;
/// `BPF_RINGBUF_DISCARD_BIT`.
const RING_DISCARD: u32 = 1 << 30;
/// `BPF_RINGBUF_HDR_SZ`.
const RING_HEADER: usize = 8;

impl RingReader {
    /// Maps the ring buffer `map` of `size` bytes (a power of two, a multiple of the page).
    pub fn new(map: OwnedFd, size: usize) -> io::Result<RingReader> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| io::Error::other("no page size"))?;
        let fd = map.as_raw_fd();
        // SAFETY: a fresh shared mapping of the map's consumer page; checked for MAP_FAILED.
        let consumer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if consumer == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above, read-only, the producer page and the data mapped twice.
        let producer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + 2 * size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                page as libc::off_t,
            )
        };
        if producer == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: unmapping what was mapped just above.
            unsafe { libc::munmap(consumer, page) };
            return Err(e);
        }
        Ok(RingReader {
            _map: map,
            consumer: consumer.cast(),
            producer: producer.cast(),
            page,
            size,
        })
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer page is mapped, page-aligned, and lives as long as self.
        unsafe { &*(self.consumer as *const AtomicU64) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: as above, for the producer page.
        unsafe { &*(self.producer as *const AtomicU64) }
    }

    /// Hands every committed record to `f`, in order, and returns how many it handed. Records
    /// still being written stay for the next call.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let mask = (self.size - 1) as u64;
        let mut cons = self.consumer_pos().load(Ordering::Acquire);
        let mut n = 0;
        loop {
            let prod = self.producer_pos().load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            let at = (cons & mask) as usize;
            // SAFETY: `at` < size, and the data region is mapped twice (2 * size bytes), so the
            // header and a record of at most size bytes are inside the mapping.
            let header = unsafe { &*(self.producer.add(self.page + at) as *const AtomicU32) };
            let len = header.load(Ordering::Acquire);
            if len & RING_BUSY != 0 {
                break;
            }
            let data_len = (len & !(RING_BUSY | RING_DISCARD)) as usize;
            if len & RING_DISCARD == 0 {
                // SAFETY: the kernel committed `data_len` bytes after the header.
                let data = unsafe {
                    std::slice::from_raw_parts(
                        self.producer.add(self.page + at + RING_HEADER),
                        data_len.min(self.size),
                    )
                };
                f(data);
                n += 1;
            }
            cons += ((RING_HEADER + data_len + 7) & !7) as u64;
            self.consumer_pos().store(cons, Ordering::Release);
        }
        n
    }
}

impl Drop for RingReader {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped; nothing refers to it after drop.
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.producer.cast(), self.page + 2 * self.size);
        }
    }
}

/// Says what a `bpf(2)` error means for someone running sockstat.
pub fn explain(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => "needs CAP_BPF and CAP_PERFMON, or root",
        Some(libc::ENOSYS) => "bpf(2) is not available in this kernel",
        // 524 is the kernel's ENOTSUPP, which leaks to user space from BPF code.
        Some(524) | Some(libc::EOPNOTSUPP) => "the kernel does not support it",
        Some(libc::ENOENT) | Some(libc::ESRCH) => "the kernel has no such attach point",
        _ => "",
    }
}
