//! The owner scan's BPF iterator (`iter/task_file` and `bpf_seq_write`, Linux 5.8): a program
//! the kernel runs once per open file of every task. It writes a 32-byte record
//! `(tgid, fd, socket inode, start time)` for each fd of a thread-group leader that holds a
//! wanted socket (every socket, or those whose inodes are keys of a hash map), and one record
//! with inode 0 for a leader's first other file, so the reader knows which processes the
//! iterator visited. Each process's first record is preceded by its identity
//! `(tgid, u32::MAX, euid, 0, comm)`, read from the same task, so the reader needs no
//! `/proc/PID/comm` and `/proc/PID/status` for it, and no check that the pid still names the
//! process the iterator saw. The leader's start time (`start_boottime`, what `/proc/PID/stat`
//! shows in clock ticks) lets the reader tell that process from a later one that reused its
//! pid before the reader went to `/proc` for anything else (its arguments). It replaces the one
//! `readlinkat` per fd of the `/proc` scan with no system call per fd at all, and with a map of
//! wanted inodes the reader gets only the holders of the sockets it will show.
//!
//! The program is assembled here, from the running kernel's BTF, rather than compiled from C:
//! it is about 100 instructions, and the only thing a C toolchain and a BPF loader would add is
//! the relocation of fourteen struct member offsets, which [`Layout::from_btf`] reads directly,
//! and of two map file descriptors. (A general loader costs more than the scan it replaces at
//! 10k sockets: aya 0.14 took about 40 ms to parse BTF and relocate this program on the
//! development machine.) The equivalent C:
//!
//! ```c
//! SEC("iter/task_file")
//! int owners(struct bpf_iter__task_file *ctx)
//! {
//!     struct task_struct *task = ctx->task;
//!     struct file *file = ctx->file;
//!     if (!task || !file || task->pid != task->tgid)      // leaders only, as /proc/PID/fd
//!         return 0;
//!     struct { u32 tgid, fd; u64 ino, start, spare; } r =
//!         { task->tgid, ctx->fd, 0, task->start_boottime, 0 };
//!     struct inode *inode = file->f_inode;
//!     if (inode && (inode->i_mode & S_IFMT) == S_IFSOCK)
//!         r.ino = inode->i_ino;
//!     if (r.ino && WANTED && !bpf_map_lookup_elem(&wanted, &r.ino))
//!         r.ino = 0;                                      // not wanted: as any other file
//!     if (!r.ino) {                                       // "visited", once per process
//!         struct last *l = bpf_map_lookup_elem(&last_tgid, &zero);
//!         if (!l || l->tgid == task->tgid)                // a record was written for it
//!             return 0;
//!     }
//!     // the tgid as the reader's pid namespace numbers it, once per process
//!     struct last *l = bpf_map_lookup_elem(&last_tgid, &zero);
//!     if (!l) return 0;
//!     u32 tgid0 = r.tgid;
//!     if (l->tgid == task->tgid) {
//!         r.tgid = l->nr;
//!     } else {
//!         if (!l->level_plus_one)                          // the reader's level, read once
//!             l->level_plus_one = current_task()->thread_pid->level + 1;   // probe reads
//!         u32 level = l->level_plus_one - 1;
//!         struct pid *pid;
//!         if (level && (bpf_probe_read_kernel(&pid, 8, &task->thread_pid) ||
//!                       bpf_probe_read_kernel(&r.tgid, 4, &pid->numbers[level].nr)))
//!             return 0;
//!         struct { u32 tgid, tag, euid, zero; char comm[16]; } id =
//!             { r.tgid, ~0u, task->real_cred->euid.val, 0 };
//!         bpf_probe_read_kernel(id.comm, 16, task->comm);
//!         if (bpf_seq_write(ctx->meta->seq, &id, sizeof id))
//!             return 0;                                   // shown again in the next read
//!     }
//!     if (bpf_seq_write(ctx->meta->seq, &r, sizeof r))
//!         return 0;
//!     l->tgid = tgid0, l->nr = r.tgid;                    // kept once written
//!     return 0;
//! }
//! ```
//!
//! The iterator walks one task's files in a row, so `last_tgid` (written only by this program,
//! whose reads the kernel serialises) gives each visited process at least one record.
//!
//! The tasks an iterator visits are those visible in the reader's pid namespace, so
//! `numbers[level]` always exists for them.

use crate::btf::{Btf, Kind};

/// Size of one record the program writes (a file's or a process's identity).
pub const RECORD_LEN: usize = 32;

/// `BPF_FUNC_map_lookup_elem`.
const MAP_LOOKUP_ELEM: i32 = 1;
/// `BPF_FUNC_probe_read_kernel`.
const PROBE_READ_KERNEL: i32 = 113;
/// `BPF_FUNC_seq_write`.
const SEQ_WRITE: i32 = 127;
/// `BPF_FUNC_get_current_task`.
const GET_CURRENT_TASK: i32 = 35;

/// Where the program's fields live in the running kernel, read from its BTF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// BTF id of the function `bpf_iter_task_file`: the program's attach target.
    pub attach_btf_id: u32,
    /// `struct bpf_iter_meta`: `seq`.
    pub meta_seq: u32,
    /// `struct task_struct`: `pid`.
    pub task_pid: u32,
    /// `struct task_struct`: `tgid`.
    pub task_tgid: u32,
    /// `struct task_struct`: `thread_pid`.
    pub task_thread_pid: u32,
    /// `struct task_struct`: `start_boottime` (nanoseconds since boot, suspend included).
    pub task_start_boottime: u32,
    /// `struct task_struct`: `comm` (16 bytes).
    pub task_comm: u32,
    /// `struct task_struct`: `real_cred` (the objective credentials, a pointer).
    pub task_real_cred: u32,
    /// `struct cred`: `euid` (a 4-byte `kuid_t`).
    pub cred_euid: u32,
    /// `struct pid`: `level`.
    pub pid_level: u32,
    /// `struct pid`: `numbers`.
    pub pid_numbers: u32,
    /// `struct upid`: `nr`.
    pub upid_nr: u32,
    /// `sizeof(struct upid)`.
    pub upid_size: u32,
    /// `struct file`: `f_inode`.
    pub file_inode: u32,
    /// `struct inode`: `i_mode` (a 16-bit `umode_t`).
    pub inode_mode: u32,
    /// `struct inode`: `i_ino`.
    pub inode_ino: u32,
    /// Size of `i_ino`: 8 on 64-bit kernels, 4 on 32-bit ones.
    pub inode_ino_size: u32,
}

impl Layout {
    /// Reads the layout from a kernel's BTF; the error names what is missing or unexpected
    /// (a kernel too old for the iterator, or a layout this program cannot load).
    pub fn from_btf(btf: &Btf<'_>) -> Result<Layout, String> {
        const TYPES: [(Kind, &str); 8] = [
            (Kind::Func, "bpf_iter_task_file"),
            (Kind::Struct, "bpf_iter_meta"),
            (Kind::Struct, "task_struct"),
            (Kind::Struct, "pid"),
            (Kind::Struct, "upid"),
            (Kind::Struct, "file"),
            (Kind::Struct, "inode"),
            (Kind::Struct, "cred"),
        ];
        let ids = btf.find_all(&TYPES);
        let attach_btf_id = ids[0].ok_or(
            "no bpf_iter_task_file in the kernel's BTF (the task_file iterator needs Linux 5.8)",
        )?;
        let strukt = |i: usize| {
            ids[i].ok_or_else(|| format!("no struct {} in the kernel's BTF", TYPES[i].1))
        };
        // A member's offset, checked to have the size the program loads.
        let field =
            |s: u32, sname: &str, name: &str, sizes: &[u32]| -> Result<(u32, u32), String> {
                let m = btf
                    .member(s, name)
                    .ok_or_else(|| format!("no member {sname}.{name} in the kernel's BTF"))?;
                let size = btf
                    .size_of(m.type_id)
                    .ok_or_else(|| format!("{sname}.{name} has no known size"))?;
                if !sizes.contains(&size) {
                    return Err(format!("{sname}.{name} is {size} bytes, not {sizes:?}"));
                }
                Ok((m.offset, size))
            };
        let meta = strukt(1)?;
        let task = strukt(2)?;
        let pid = strukt(3)?;
        let upid = strukt(4)?;
        let file = strukt(5)?;
        let inode = strukt(6)?;
        let cred = strukt(7)?;
        let numbers = btf
            .member(pid, "numbers")
            .ok_or("no member pid.numbers in the kernel's BTF")?;
        if btf.array_elem(numbers.type_id) != Some(upid) {
            return Err("pid.numbers is not an array of struct upid".into());
        }
        let upid_size = btf
            .size_of(upid)
            .filter(|&s| s > 0)
            .ok_or("struct upid has no size")?;
        let (inode_ino, inode_ino_size) = field(inode, "inode", "i_ino", &[4, 8])?;
        let layout = Layout {
            attach_btf_id,
            meta_seq: field(meta, "bpf_iter_meta", "seq", &[8])?.0,
            task_pid: field(task, "task_struct", "pid", &[4])?.0,
            task_tgid: field(task, "task_struct", "tgid", &[4])?.0,
            task_thread_pid: field(task, "task_struct", "thread_pid", &[8])?.0,
            task_start_boottime: field(task, "task_struct", "start_boottime", &[8])?.0,
            task_comm: field(task, "task_struct", "comm", &[16])?.0,
            task_real_cred: field(task, "task_struct", "real_cred", &[8])?.0,
            cred_euid: field(cred, "cred", "euid", &[4])?.0,
            pid_level: field(pid, "pid", "level", &[4])?.0,
            pid_numbers: numbers.offset,
            upid_nr: field(upid, "upid", "nr", &[4])?.0,
            upid_size,
            file_inode: field(file, "file", "f_inode", &[8])?.0,
            inode_mode: field(inode, "inode", "i_mode", &[2])?.0,
            inode_ino,
            inode_ino_size,
        };
        // Every offset must fit an instruction's signed 16-bit displacement.
        let offsets = [
            layout.meta_seq,
            layout.task_pid,
            layout.task_tgid,
            layout.task_thread_pid,
            layout.task_start_boottime,
            layout.task_comm,
            layout.task_real_cred,
            layout.cred_euid,
            layout.pid_level,
            layout.file_inode,
            layout.inode_mode,
            layout.inode_ino,
        ];
        if offsets.iter().any(|&o| o > i16::MAX as u32) {
            return Err("a member offset does not fit a BPF load".into());
        }
        Ok(layout)
    }
}

impl Layout {
    /// The layout as text, one `name value` line per field (the owner scan's cache of it).
    pub fn to_text(&self) -> String {
        self.fields()
            .iter()
            .map(|(k, v)| format!("{k} {v}\n"))
            .collect()
    }

    /// Reads [`Layout::to_text`]'s form back; `None` unless every field is there once, with a
    /// value an instruction can carry (the same bounds [`Layout::from_btf`] checks).
    pub fn from_text(text: &str) -> Option<Layout> {
        let mut l = Layout {
            attach_btf_id: 0,
            meta_seq: 0,
            task_pid: 0,
            task_tgid: 0,
            task_thread_pid: 0,
            task_start_boottime: 0,
            task_comm: 0,
            task_real_cred: 0,
            cred_euid: 0,
            pid_level: 0,
            pid_numbers: 0,
            upid_nr: 0,
            upid_size: 0,
            file_inode: 0,
            inode_mode: 0,
            inode_ino: 0,
            inode_ino_size: 0,
        };
        let names: Vec<&str> = l.fields().iter().map(|(k, _)| *k).collect();
        let mut seen = vec![false; names.len()];
        for line in text.lines() {
            let (k, v) = line.split_once(' ')?;
            let i = names.iter().position(|n| *n == k)?;
            if std::mem::replace(&mut seen[i], true) {
                return None;
            }
            let v: u32 = v.parse().ok()?;
            if i > 0 && v > i16::MAX as u32 {
                return None;
            }
            *l.field_mut(i) = v;
        }
        let sizes_ok = matches!(l.inode_ino_size, 4 | 8) && l.upid_size > 0;
        (seen.iter().all(|&x| x) && sizes_ok && l.attach_btf_id > 0).then_some(l)
    }

    fn fields(&self) -> [(&'static str, u32); 17] {
        [
            ("attach_btf_id", self.attach_btf_id),
            ("meta_seq", self.meta_seq),
            ("task_pid", self.task_pid),
            ("task_tgid", self.task_tgid),
            ("task_thread_pid", self.task_thread_pid),
            ("task_start_boottime", self.task_start_boottime),
            ("task_comm", self.task_comm),
            ("task_real_cred", self.task_real_cred),
            ("cred_euid", self.cred_euid),
            ("pid_level", self.pid_level),
            ("pid_numbers", self.pid_numbers),
            ("upid_nr", self.upid_nr),
            ("upid_size", self.upid_size),
            ("file_inode", self.file_inode),
            ("inode_mode", self.inode_mode),
            ("inode_ino", self.inode_ino),
            ("inode_ino_size", self.inode_ino_size),
        ]
    }

    fn field_mut(&mut self, i: usize) -> &mut u32 {
        match i {
            0 => &mut self.attach_btf_id,
            1 => &mut self.meta_seq,
            2 => &mut self.task_pid,
            3 => &mut self.task_tgid,
            4 => &mut self.task_thread_pid,
            5 => &mut self.task_start_boottime,
            6 => &mut self.task_comm,
            7 => &mut self.task_real_cred,
            8 => &mut self.cred_euid,
            9 => &mut self.pid_level,
            10 => &mut self.pid_numbers,
            11 => &mut self.upid_nr,
            12 => &mut self.upid_size,
            13 => &mut self.file_inode,
            14 => &mut self.inode_mode,
            15 => &mut self.inode_ino,
            _ => &mut self.inode_ino_size,
        }
    }
}

/// The GNU build id of the running kernel from its ELF notes (`/sys/kernel/notes`): the
/// descriptor of the first `NT_GNU_BUILD_ID` note named `GNU`. `None` when there is none or the
/// notes are malformed.
pub fn kernel_build_id(notes: &[u8]) -> Option<&[u8]> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(notes.get(at..at + 4)?.try_into().ok()?))
    };
    let pad = |n: usize| n.checked_add(3).map(|x| x & !3);
    let mut at = 0usize;
    while at + 12 <= notes.len() {
        let namesz = word(at)? as usize;
        let descsz = word(at + 4)? as usize;
        let kind = word(at + 8)?;
        let name_at = at + 12;
        let desc_at = name_at.checked_add(pad(namesz)?)?;
        let end = desc_at.checked_add(pad(descsz)?)?;
        let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
        let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return Some(desc);
        }
        at = end;
    }
    None
}

/// One eBPF instruction (`struct bpf_insn`), encoded.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (src << 4) | (dst & 0x0f);
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    u64::from_le_bytes(b)
}

// Opcodes (`include/uapi/linux/bpf_common.h`, `bpf.h`).
const LDX_DW: u8 = 0x79;
const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const STX_DW: u8 = 0x7b;
const STX_W: u8 = 0x63;
const MOV64_IMM: u8 = 0xb7;
const MOV64_REG: u8 = 0xbf;
const ADD64_IMM: u8 = 0x07;
const ADD64_REG: u8 = 0x0f;
const MUL64_IMM: u8 = 0x27;
const AND64_IMM: u8 = 0x57;
const JA: u8 = 0x05;
const JEQ_IMM: u8 = 0x15;
const JEQ_REG: u8 = 0x1d;
const LD_IMM64: u8 = 0x18;
/// `BPF_PSEUDO_MAP_FD`: the 64-bit immediate of a `LD_IMM64` is a map file descriptor.
const PSEUDO_MAP_FD: u8 = 1;
const JNE_IMM: u8 = 0x55;
const JNE_REG: u8 = 0x5d;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

/// A tiny assembler: forward jumps to labels, patched when the label is placed.
struct Asm {
    code: Vec<u64>,
    /// (instruction index, label) of every jump not yet patched.
    jumps: Vec<(usize, Label)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Out,
    StoreIno,
    Marker,
    Translate,
    NewTask,
    HaveLevel,
    Identity,
    Write,
}

impl Asm {
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.code.push(insn(code, dst, src, off, imm));
    }

    fn load(&mut self, size: u32, dst: u8, src: u8, off: u32) {
        let code = match size {
            8 => LDX_DW,
            4 => LDX_W,
            _ => LDX_H,
        };
        self.op(code, dst, src, off as i16, 0);
    }

    /// `if dst <cond> (imm | src) goto label`.
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.jumps.push((self.code.len(), to));
        self.op(code, dst, src, 0, imm);
    }

    /// Places `label` here: every jump to it lands on the next instruction.
    fn place(&mut self, label: Label) {
        let here = self.code.len();
        for &(at, _) in self.jumps.iter().filter(|(_, l)| *l == label) {
            let rel = (here - at - 1) as i16;
            let mut b = self.code[at].to_le_bytes();
            b[2..4].copy_from_slice(&rel.to_le_bytes());
            self.code[at] = u64::from_le_bytes(b);
        }
        self.jumps.retain(|(_, l)| *l != label);
    }

    fn call(&mut self, helper: i32) {
        self.op(CALL, 0, 0, 0, helper);
    }

    /// `seq_write(ctx->meta->seq, fp + at, RECORD_LEN)` (r6 holds `ctx->meta`); on failure
    /// (no room left in this read), `goto Out`.
    fn write_record(&mut self, l: &Layout, at: i16) {
        self.load(8, 1, 6, l.meta_seq);
        self.op(MOV64_REG, 2, 10, 0, 0);
        self.op(ADD64_IMM, 2, 0, 0, i32::from(at));
        self.op(MOV64_IMM, 3, 0, 0, RECORD_LEN as i32);
        self.call(SEQ_WRITE);
        self.jump(JNE_IMM, 0, 0, 0, Label::Out);
    }

    /// `dst = map` (a 16-byte `LD_IMM64` the kernel resolves from the map's fd).
    fn map_fd(&mut self, dst: u8, fd: i32) {
        self.op(LD_IMM64, dst, PSEUDO_MAP_FD, 0, fd);
        self.op(0, 0, 0, 0, 0);
    }
}

/// The maps the program reads, by file descriptor (the kernel takes each program's own
/// reference at load, so they may be closed after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maps {
    /// An array map of one 16-byte value (key `u32` 0): the tgid (in the initial pid
    /// namespace) of the last process a record was written for, so that a process whose fds
    /// hold no wanted socket still gets one record (inode 0) saying it was visited; the reader's
    /// pid namespace level plus one (0 until read); the last process's number in the reader's
    /// namespace.
    pub last: i32,
    /// A hash map whose keys (`u64`) are the socket inodes wanted; `None` wants every socket.
    pub wanted: Option<i32>,
}

/// Assembles the iterator program for `layout` (see the module documentation for its C), with
/// the maps at `maps`.
pub fn program(l: &Layout, maps: Maps) -> Vec<u64> {
    const S_IFMT: i32 = 0o170000;
    const S_IFSOCK: i32 = 0o140000;
    // The stack, below the frame pointer (r10). The file record is fp[-32..0].
    const REC: i16 = -32; // tgid (u32)
    const REC_FD: i16 = -28; // fd (u32)
    const REC_INO: i16 = -24; // socket inode (u64)
    const REC_START: i16 = -16; // start_boottime (u64)
    const REC_SPARE: i16 = -8; // zero (u64)
    const KEY: i16 = -40; // the `last` map's key (u32 0)
    const LEVEL: i16 = -48; // the reader's pid namespace level, read once
    const TGID0: i16 = -56; // the initial namespace's tgid (u32)
    const SCRATCH: i16 = -64; // a pointer read by a probe read
    const ID: i16 = -96; // the identity record fp[-96..-64]: tgid, u32::MAX, euid, 0, comm
    let mut a = Asm {
        code: Vec::with_capacity(100),
        jumps: Vec::new(),
    };
    // The context is the iterator function's arguments, 8 bytes each: (meta, task, fd, file).
    a.load(8, 6, 1, 0); // r6 = ctx->meta
    a.load(8, 7, 1, 8); // r7 = ctx->task
    a.load(8, 8, 1, 24); // r8 = ctx->file
    a.load(4, 9, 1, 16); // r9 = ctx->fd
    a.jump(JEQ_IMM, 7, 0, 0, Label::Out);
    a.jump(JEQ_IMM, 8, 0, 0, Label::Out);
    a.load(4, 2, 7, l.task_pid); // leaders only, as /proc/PID/fd
    a.load(4, 3, 7, l.task_tgid);
    a.jump(JNE_REG, 2, 3, 0, Label::Out);
    a.op(STX_W, 10, 3, REC, 0); // r.tgid = task->tgid (the initial namespace's number)
    a.op(STX_W, 10, 9, REC_FD, 0); // r.fd
    a.load(8, 4, 7, l.task_start_boottime);
    a.op(STX_DW, 10, 4, REC_START, 0); // r.start = task->start_boottime
    a.op(MOV64_IMM, 3, 0, 0, 0);
    a.op(STX_DW, 10, 3, REC_SPARE, 0);
    // r.ino = the socket inode, or 0 for any other file.
    a.load(8, 2, 8, l.file_inode);
    a.jump(JEQ_IMM, 2, 0, 0, Label::StoreIno);
    a.load(2, 4, 2, l.inode_mode);
    a.op(AND64_IMM, 4, 0, 0, S_IFMT);
    a.jump(JNE_IMM, 4, 0, S_IFSOCK, Label::StoreIno);
    a.load(l.inode_ino_size, 3, 2, l.inode_ino);
    a.place(Label::StoreIno);
    a.op(STX_DW, 10, 3, REC_INO, 0);
    a.jump(JEQ_IMM, 3, 0, 0, Label::Marker);
    match maps.wanted {
        Some(fd) => {
            // A socket: written when it is wanted; otherwise treated as any other file.
            a.map_fd(1, fd);
            a.op(MOV64_REG, 2, 10, 0, 0);
            a.op(ADD64_IMM, 2, 0, 0, REC_INO as i32);
            a.call(MAP_LOOKUP_ELEM);
            a.jump(JNE_IMM, 0, 0, 0, Label::Translate);
            a.op(MOV64_IMM, 1, 0, 0, 0);
            a.op(STX_DW, 10, 1, REC_INO, 0);
        }
        None => a.jump(JA, 0, 0, 0, Label::Translate),
    }
    // Not a wanted socket: one record (inode 0) for the process's first such file, so the
    // reader knows the iterator visited it (no record yet for this process: `last` is another).
    a.place(Label::Marker);
    a.op(MOV64_IMM, 1, 0, 0, 0);
    a.op(STX_W, 10, 1, KEY, 0);
    a.map_fd(1, maps.last);
    a.op(MOV64_REG, 2, 10, 0, 0);
    a.op(ADD64_IMM, 2, 0, 0, KEY as i32);
    a.call(MAP_LOOKUP_ELEM);
    a.jump(JEQ_IMM, 0, 0, 0, Label::Out);
    a.op(LDX_W, 1, 0, 0, 0);
    a.op(LDX_W, 2, 10, REC, 0);
    a.jump(JEQ_REG, 1, 2, 0, Label::Out);
    a.place(Label::Translate);
    // r.tgid as the reader's pid namespace numbers it: task->thread_pid->numbers[level].nr,
    // with `level` the reader's (read once, from the current task, and kept in the map) and
    // the last process's number kept too, so each process is translated once.
    a.op(MOV64_IMM, 1, 0, 0, 0);
    a.op(STX_W, 10, 1, KEY, 0);
    a.map_fd(1, maps.last);
    a.op(MOV64_REG, 2, 10, 0, 0);
    a.op(ADD64_IMM, 2, 0, 0, KEY as i32);
    a.call(MAP_LOOKUP_ELEM);
    a.jump(JEQ_IMM, 0, 0, 0, Label::Out);
    a.op(MOV64_REG, 8, 0, 0, 0); // r8 = the map's value (file is no longer needed)
    a.op(LDX_W, 2, 10, REC, 0);
    a.op(STX_W, 10, 2, TGID0, 0); // the initial namespace's tgid, kept
    a.op(LDX_W, 1, 8, 0, 0);
    a.jump(JNE_REG, 1, 2, 0, Label::NewTask);
    a.op(LDX_W, 1, 8, 8, 0); // the same process as the last record: its number is known
    a.op(STX_W, 10, 1, REC, 0);
    a.jump(JA, 0, 0, 0, Label::Write);
    a.place(Label::NewTask);
    a.op(LDX_W, 9, 8, 4, 0); // level + 1, or 0 when not read yet
    a.jump(JNE_IMM, 9, 0, 0, Label::HaveLevel);
    a.call(GET_CURRENT_TASK);
    a.op(MOV64_REG, 3, 0, 0, 0);
    a.op(ADD64_IMM, 3, 0, 0, l.task_thread_pid as i32);
    a.op(MOV64_REG, 1, 10, 0, 0);
    a.op(ADD64_IMM, 1, 0, 0, SCRATCH as i32);
    a.op(MOV64_IMM, 2, 0, 0, 8);
    a.call(PROBE_READ_KERNEL); // scratch = current->thread_pid
    a.jump(JNE_IMM, 0, 0, 0, Label::Out);
    a.op(LDX_DW, 3, 10, SCRATCH, 0);
    a.op(ADD64_IMM, 3, 0, 0, l.pid_level as i32);
    a.op(MOV64_REG, 1, 10, 0, 0);
    a.op(ADD64_IMM, 1, 0, 0, LEVEL as i32);
    a.op(MOV64_IMM, 2, 0, 0, 4);
    a.call(PROBE_READ_KERNEL); // its level
    a.jump(JNE_IMM, 0, 0, 0, Label::Out);
    a.op(LDX_W, 9, 10, LEVEL, 0);
    a.op(ADD64_IMM, 9, 0, 0, 1);
    a.op(STX_W, 8, 9, 4, 0);
    a.place(Label::HaveLevel);
    a.op(ADD64_IMM, 9, 0, 0, -1);
    a.jump(JEQ_IMM, 9, 0, 0, Label::Identity);
    a.op(MUL64_IMM, 9, 0, 0, l.upid_size as i32);
    a.op(ADD64_IMM, 9, 0, 0, (l.pid_numbers + l.upid_nr) as i32);
    a.op(MOV64_REG, 1, 10, 0, 0);
    a.op(ADD64_IMM, 1, 0, 0, SCRATCH as i32);
    a.op(MOV64_IMM, 2, 0, 0, 8);
    a.op(MOV64_REG, 3, 7, 0, 0);
    a.op(ADD64_IMM, 3, 0, 0, l.task_thread_pid as i32);
    a.call(PROBE_READ_KERNEL); // scratch = task->thread_pid, as a plain number
    a.jump(JNE_IMM, 0, 0, 0, Label::Out);
    a.op(LDX_DW, 3, 10, SCRATCH, 0);
    a.op(ADD64_REG, 3, 9, 0, 0);
    a.op(MOV64_REG, 1, 10, 0, 0);
    a.op(ADD64_IMM, 1, 0, 0, REC as i32);
    a.op(MOV64_IMM, 2, 0, 0, 4);
    a.call(PROBE_READ_KERNEL); // r.tgid = numbers[level].nr
    a.jump(JNE_IMM, 0, 0, 0, Label::Out);
    a.place(Label::Identity);
    // A process's first record is preceded by its identity: (its number, u32::MAX, the
    // effective uid of its objective credentials (what /proc/PID/status shows), 0, comm).
    a.op(LDX_W, 1, 10, REC, 0);
    a.op(STX_W, 10, 1, ID, 0);
    a.op(MOV64_IMM, 1, 0, 0, -1);
    a.op(STX_W, 10, 1, ID + 4, 0);
    a.load(8, 1, 7, l.task_real_cred);
    a.load(4, 1, 1, l.cred_euid);
    a.op(STX_W, 10, 1, ID + 8, 0);
    a.op(MOV64_IMM, 1, 0, 0, 0);
    a.op(STX_W, 10, 1, ID + 12, 0);
    a.op(MOV64_REG, 1, 10, 0, 0);
    a.op(ADD64_IMM, 1, 0, 0, (ID + 16) as i32);
    a.op(MOV64_IMM, 2, 0, 0, 16);
    a.op(MOV64_REG, 3, 7, 0, 0);
    a.op(ADD64_IMM, 3, 0, 0, l.task_comm as i32);
    a.call(PROBE_READ_KERNEL); // comm (zeroed if the read fails)
                               // No room left in this read: the kernel shows this file again in the next one, and
                               // nothing was kept, so it is identified again.
    a.write_record(l, ID);
    a.place(Label::Write);
    a.write_record(l, REC);
    // Kept only once the records are written: last = (this tgid, its number). A file whose
    // records did not fit is shown again, and its process translated and identified again.
    a.op(LDX_W, 1, 10, REC, 0);
    a.op(STX_W, 8, 1, 8, 0);
    a.op(LDX_W, 1, 10, TGID0, 0);
    a.op(STX_W, 8, 1, 0, 0);
    a.place(Label::Out);
    a.op(MOV64_IMM, 0, 0, 0, 0);
    a.op(EXIT, 0, 0, 0, 0);
    debug_assert!(a.jumps.is_empty());
    a.code
}

/// One file record of the iterator's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Thread-group id, in the reader's pid namespace.
    pub tgid: u32,
    /// File descriptor.
    pub fd: u32,
    /// Socket inode (0: a file that is not a socket).
    pub inode: u64,
    /// The leader's `start_boottime`: nanoseconds from boot to its start, suspend included.
    pub start_ns: u64,
}

/// The identity of a process, as the iterator saw it just before its first file record: read
/// from the same task, so it cannot belong to a later process that reused the pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// Thread-group id, in the reader's pid namespace.
    pub tgid: u32,
    /// Effective uid of the objective credentials (`task->real_cred->euid`, what
    /// `/proc/PID/status` shows on its `Uid:` line, second field, for a reader in the initial
    /// user namespace, which the BPF scan's capabilities require).
    pub euid: u32,
    /// `task->comm` up to its first NUL (what `/proc/PID/comm` shows); empty if it could not
    /// be read.
    pub comm: [u8; 16],
}

impl Identity {
    /// The command name's bytes.
    pub fn comm(&self) -> &[u8] {
        let end = self.comm.iter().position(|&b| b == 0).unwrap_or(16);
        &self.comm[..end]
    }
}

/// One record of the iterator's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A file of a process (a socket, or a marker that the process was visited).
    File(Record),
    /// A process's identity, written before its first file record.
    Identity(Identity),
}

/// The `fd` field of an identity record (no fd is that high: they are `int`s).
const IDENTITY_TAG: u32 = u32::MAX;

/// Decodes the iterator's output; a trailing partial record (which the kernel never writes) is
/// ignored.
pub fn records(data: &[u8]) -> impl Iterator<Item = Entry> + '_ {
    let u32_at = |c: &[u8], i: usize| u32::from_ne_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
    let u64_at = |c: &[u8], i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&c[i..i + 8]);
        u64::from_ne_bytes(b)
    };
    data.chunks_exact(RECORD_LEN).map(move |c| {
        if u32_at(c, 4) == IDENTITY_TAG {
            let mut comm = [0u8; 16];
            comm.copy_from_slice(&c[16..32]);
            Entry::Identity(Identity {
                tgid: u32_at(c, 0),
                euid: u32_at(c, 8),
                comm,
            })
        } else {
            Entry::File(Record {
                tgid: u32_at(c, 0),
                fd: u32_at(c, 4),
                inode: u64_at(c, 8),
                start_ns: u64_at(c, 16),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::build::Builder;

    /// The kernel's shapes in miniature, with the anonymous unions and typedefs it uses.
    fn kernel_like() -> Vec<u8> {
        let mut b = Builder::new();
        let int = b.int("int", 4);
        let uint = b.int("unsigned int", 4);
        let ushort = b.int("unsigned short", 2);
        let ulong = b.int("long unsigned int", 8);
        let pid_t = b.typedef("pid_t", int);
        let umode = b.typedef("umode_t", ushort);
        let seq = b.composite("seq_file", false, 8, &[]);
        let pseq = b.ptr(seq);
        let useq = b.composite("", true, 8, &[("seq", pseq, 0)]);
        b.composite(
            "bpf_iter_meta",
            false,
            24,
            &[("", useq, 0), ("session_id", ulong, 64)],
        );
        let pidns = b.composite("pid_namespace", false, 8, &[]);
        let ppidns = b.ptr(pidns);
        let upid = b.composite("upid", false, 16, &[("nr", int, 0), ("ns", ppidns, 64)]);
        let numbers = b.array(upid, int, 0);
        let pid = b.composite(
            "pid",
            false,
            96,
            &[
                ("count", int, 0),
                ("level", uint, 32),
                ("numbers", numbers, 640),
            ],
        );
        let ppid = b.ptr(pid);
        let uid_t = b.typedef("uid_t", uint);
        let kuid = b.composite("", false, 4, &[("val", uid_t, 0)]);
        let kuid_t = b.typedef("kuid_t", kuid);
        let cred = b.composite(
            "cred",
            false,
            176,
            &[("usage", int, 0), ("uid", kuid_t, 32), ("euid", kuid_t, 96)],
        );
        let pcred = b.ptr(cred);
        let chr = b.int("char", 1);
        let comm = b.array(chr, int, 16);
        let inner = b.composite(
            "",
            false,
            4000,
            &[
                ("pid", pid_t, 8000),
                ("tgid", pid_t, 8032),
                ("thread_pid", ppid, 9024),
                ("start_boottime", ulong, 9600),
                ("real_cred", pcred, 10240),
                ("comm", comm, 10368),
            ],
        );
        b.composite(
            "task_struct",
            false,
            9000,
            &[("state", uint, 0), ("", inner, 64)],
        );
        let inode = b.composite(
            "inode",
            false,
            600,
            &[("i_mode", umode, 0), ("i_ino", ulong, 512)],
        );
        let pinode = b.ptr(inode);
        b.composite(
            "file",
            false,
            200,
            &[("f_mode", uint, 0), ("f_inode", pinode, 256)],
        );
        b.func("bpf_iter_task_file");
        b.finish()
    }

    /// The `btf` fuzz target's synthetic seed is this blob; regenerate it after changing the
    /// layout with `SOCKSTAT_WRITE_SEEDS=1 cargo test -p sockstat-wire --lib task_file`.
    #[test]
    fn the_fuzz_seed_is_the_kernel_like_blob() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fuzz/corpus/btf/kernel-like"
        );
        let want = kernel_like();
        if std::env::var_os("SOCKSTAT_WRITE_SEEDS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        assert!(
            std::fs::read(path).unwrap() == want,
            "fuzz/corpus/btf/kernel-like is stale: SOCKSTAT_WRITE_SEEDS=1 cargo test -p sockstat-wire --lib task_file"
        );
    }

    #[test]
    fn layout_follows_anonymous_members_and_typedefs() {
        let data = kernel_like();
        let btf = Btf::parse(&data).unwrap();
        let l = Layout::from_btf(&btf).unwrap();
        assert_eq!(l.meta_seq, 0);
        assert_eq!(
            (
                l.task_pid,
                l.task_tgid,
                l.task_thread_pid,
                l.task_start_boottime
            ),
            (8 + 1000, 8 + 1004, 8 + 1128, 8 + 1200)
        );
        assert_eq!(
            (l.task_real_cred, l.task_comm, l.cred_euid),
            (8 + 1280, 8 + 1296, 12)
        );
        assert_eq!(
            (l.pid_level, l.pid_numbers, l.upid_nr, l.upid_size),
            (4, 80, 0, 16)
        );
        assert_eq!(
            (l.file_inode, l.inode_mode, l.inode_ino, l.inode_ino_size),
            (32, 0, 64, 8)
        );
    }

    #[test]
    fn missing_pieces_are_named() {
        let mut b = Builder::new();
        b.func("bpf_iter_task_file");
        let data = b.finish();
        let err = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap_err();
        assert!(err.contains("bpf_iter_meta"), "{err}");
        let data = Builder::new().finish();
        let err = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap_err();
        assert!(err.contains("5.8"), "{err}");
    }

    #[test]
    fn program_shape() {
        let data = kernel_like();
        let l = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap();
        for wanted in [None, Some(7)] {
            let p = program(&l, Maps { last: 6, wanted });
            let code = |i: &u64| i.to_le_bytes()[0];
            // Ends with r0 = 0; exit.
            assert_eq!(code(&p[p.len() - 1]), EXIT);
            assert_eq!(code(&p[p.len() - 2]), MOV64_IMM);
            // Every jump goes forward, inside the program (no loops, no escapes).
            for (at, i) in p.iter().enumerate() {
                if matches!(code(i), JA | JEQ_IMM | JEQ_REG | JNE_IMM | JNE_REG) {
                    let off = i16::from_le_bytes([i.to_le_bytes()[2], i.to_le_bytes()[3]]);
                    assert!(off >= 0, "backward jump at {at}");
                    assert!(
                        at as i64 + 1 + i64::from(off) < p.len() as i64,
                        "jump out at {at}"
                    );
                }
            }
            // The maps' fds, each in a 16-byte load.
            let fds: Vec<i32> = p
                .iter()
                .filter(|i| code(i) == LD_IMM64)
                .map(|i| i32::from_le_bytes(i.to_le_bytes()[4..8].try_into().unwrap()))
                .collect();
            let mut want_fds = wanted.into_iter().collect::<Vec<_>>();
            want_fds.extend([6, 6]);
            assert_eq!(fds, want_fds);
            // The helper calls, the last one seq_write.
            let calls: Vec<i32> = p
                .iter()
                .filter(|i| code(i) == CALL)
                .map(|i| i32::from_le_bytes(i.to_le_bytes()[4..8].try_into().unwrap()))
                .collect();
            let mut want = vec![MAP_LOOKUP_ELEM; fds.len()];
            want.extend([
                GET_CURRENT_TASK,
                PROBE_READ_KERNEL,
                PROBE_READ_KERNEL,
                PROBE_READ_KERNEL,
                PROBE_READ_KERNEL,
                PROBE_READ_KERNEL, // comm
                SEQ_WRITE,         // the identity
                SEQ_WRITE,         // the file
            ]);
            assert_eq!(calls, want);
            let off = |i: &u64| i16::from_le_bytes([i.to_le_bytes()[2], i.to_le_bytes()[3]]);
            // The inode offset made it into the i_ino load.
            assert!(p.iter().any(|i| code(i) == LDX_DW && off(i) == 64));
            // The euid is loaded through task->real_cred.
            assert!(p.windows(2).any(|w| code(&w[0]) == LDX_DW
                && off(&w[0]) == 8 + 1280
                && code(&w[1]) == LDX_W
                && off(&w[1]) == 12));
            // Every seq_write writes a whole record.
            let sizes: Vec<i32> = p
                .windows(2)
                .filter(|w| code(&w[1]) == CALL && code(&w[0]) == MOV64_IMM)
                .filter(|w| {
                    i32::from_le_bytes(w[1].to_le_bytes()[4..8].try_into().unwrap()) == SEQ_WRITE
                })
                .map(|w| i32::from_le_bytes(w[0].to_le_bytes()[4..8].try_into().unwrap()))
                .collect();
            assert_eq!(sizes, [RECORD_LEN as i32; 2]);
        }
    }

    #[test]
    fn the_layout_survives_its_text_form_and_bad_text_is_refused() {
        let data = kernel_like();
        let l = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap();
        let text = l.to_text();
        assert_eq!(Layout::from_text(&text), Some(l));
        // A field missing, repeated, out of range, or unknown: refused.
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(Layout::from_text(&lines[1..].join("\n")), None);
        assert_eq!(Layout::from_text(&format!("{text}task_pid 8\n")), None);
        assert_eq!(
            Layout::from_text(&text.replace("inode_ino 64", "inode_ino 40000")),
            None
        );
        assert_eq!(Layout::from_text(&format!("{text}bogus 1\n")), None);
        assert_eq!(Layout::from_text(""), None);
    }

    #[test]
    fn the_build_id_is_found_among_the_notes() {
        let mut notes = Vec::new();
        let mut note = |name: &[u8], kind: u32, desc: &[u8]| {
            notes.extend_from_slice(&(name.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&kind.to_ne_bytes());
            for part in [name, desc] {
                notes.extend_from_slice(part);
                notes.resize(notes.len().next_multiple_of(4), 0);
            }
        };
        note(b"Linux\0", 6, b"6.18\0");
        note(b"GNU\0", 3, &[0xab; 20]);
        assert_eq!(kernel_build_id(&notes), Some(&[0xab; 20][..]));
        for cut in 0..notes.len() {
            let _ = kernel_build_id(&notes[..cut]);
        }
        assert_eq!(kernel_build_id(&notes[..28]), None);
    }

    #[test]
    fn records_decode() {
        let mut data = Vec::new();
        for (t, f, i, st) in [(1u32, 3u32, 77u64, 5u64), (42, 9, u64::MAX, 1 << 40)] {
            data.extend_from_slice(&t.to_ne_bytes());
            data.extend_from_slice(&f.to_ne_bytes());
            data.extend_from_slice(&i.to_ne_bytes());
            data.extend_from_slice(&st.to_ne_bytes());
            data.extend_from_slice(&0u64.to_ne_bytes());
        }
        // An identity: (tgid, u32::MAX, euid, 0, comm).
        data.extend_from_slice(&42u32.to_ne_bytes());
        data.extend_from_slice(&u32::MAX.to_ne_bytes());
        data.extend_from_slice(&1000u32.to_ne_bytes());
        data.extend_from_slice(&0u32.to_ne_bytes());
        data.extend_from_slice(b"nginx\0\0\0\0\0\0\0\0\0\0\0");
        data.push(0);
        let r: Vec<_> = records(&data).collect();
        let mut comm = [0u8; 16];
        comm[..5].copy_from_slice(b"nginx");
        assert_eq!(
            r,
            [
                Entry::File(Record {
                    tgid: 1,
                    fd: 3,
                    inode: 77,
                    start_ns: 5
                }),
                Entry::File(Record {
                    tgid: 42,
                    fd: 9,
                    inode: u64::MAX,
                    start_ns: 1 << 40
                }),
                Entry::Identity(Identity {
                    tgid: 42,
                    euid: 1000,
                    comm
                })
            ]
        );
        let Entry::Identity(id) = r[2] else {
            unreachable!()
        };
        assert_eq!(id.comm(), b"nginx");
        // A name of the full 16 bytes has no NUL.
        assert_eq!(
            Identity {
                comm: *b"0123456789abcdef",
                ..id
            }
            .comm(),
            b"0123456789abcdef"
        );
    }
}
