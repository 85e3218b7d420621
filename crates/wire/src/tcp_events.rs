//! The BPF programs behind `sockstat events`, assembled from the running kernel's BTF, and the
//! records they write. All are BTF-typed raw tracepoint programs (`tp_btf`): they need no
//! tracefs, no kprobes, no BPF trampolines and no compiler.
//!
//! - **`tp_btf/inet_sock_set_state`** (the `sock:inet_sock_set_state` tracepoint, Linux 4.16),
//!   two programs ([`StatePart`]): every TCP state change. `CLOSE -> SYN_SENT` runs in the process calling `connect()`: it
//!   stores that process and the time in the connection table, keyed by socket cookie.
//!   `SYN_SENT -> ESTABLISHED` writes a *connect* record; `SYN_RECV -> ESTABLISHED` (a server's
//!   child socket, in softirq, with no process in sight) stores the time and the addresses; any
//!   `X -> CLOSE` (X not LISTEN) writes a *close* record with everything stored, and deletes
//!   the entry.
//! - **`tp_btf/sys_exit`** (the raw syscall-exit tracepoint): for `accept()` and `accept4()`
//!   only, finds the new socket through the returned descriptor (`current->files`), stores the
//!   accepting process and time in the socket's entry and writes an *accept* record. (The
//!   accepting process is not in context anywhere else a tracepoint fires; `fexit` on
//!   `inet_csk_accept` would be cheaper, but BPF trampolines are not available on every kernel
//!   that has tracepoints.)
//! - **`tp_btf/kfree_skb`** (`sockstat drops`, see [`crate::skb_drops`]).
//!
//! Records go through a `BPF_MAP_TYPE_RINGBUF` (5.8). A record the ring has no room for is
//! counted in a counters array ([`LOST_RING`]), as is a connection whose entry could not be
//! stored because the table was full ([`LOST_STORAGE`]), so the reader reports what it missed.
//!
//! What the state-change program does, in C (the assembly below follows it):
//!
//! ```c
//! SEC("tp_btf/inet_sock_set_state")
//! int state(u64 *ctx) {
//!     struct sock *sk = (void *)ctx[0]; int old = ctx[1], new = ctx[2];
//!     if (!sk || sk->sk_protocol != IPPROTO_TCP) return 0;
//!     u64 cookie = bpf_get_socket_cookie(sk);
//!     if (new == TCP_SYN_SENT && old == TCP_CLOSE) {           // in connect()
//!         struct conn c = { .start = now(), .pid = tgid(), .uid = uid(), .side = CLIENT,
//!                           .flags = PROCESS };
//!         bpf_get_current_comm(c.comm, 16);
//!         if (bpf_map_update_elem(&conns, &cookie, &c, BPF_ANY)) counters[LOST_STORAGE]++;
//!     } else if (new == TCP_ESTABLISHED && old == TCP_SYN_SENT) {
//!         struct conn *c = bpf_map_lookup_elem(&conns, &cookie);
//!         if (c) { c->est = now(); baseline(c, sk); c->flags |= ESTABLISHED; }
//!         emit(CONNECT, sk, old, c);
//!     } else if (new == TCP_ESTABLISHED && old == TCP_SYN_RECV) {  // softirq
//!         struct conn c = { .start = now(), .est = c.start, .side = SERVER,
//!                           .flags = ESTABLISHED };
//!         baseline(&c, sk); identity(&c.id, sk);
//!         if (bpf_map_update_elem(&conns, &cookie, &c, BPF_ANY)) counters[LOST_STORAGE]++;
//!     } else if (new == TCP_CLOSE && old != TCP_LISTEN) {
//!         struct conn *c = bpf_map_lookup_elem(&conns, &cookie);
//!         emit(CLOSE, sk, old, c);
//!         if (c) bpf_map_delete_elem(&conns, &cookie);
//!     }
//!     return 0;
//! }
//! // baseline: bytes_acked, bytes_received and total_retrans of the tcp_sock when established
//! // identity: family, ports (the local one from inet_sport, which CLOSE does not clear),
//! //           addresses, netns inode and sk_uid
//! // emit: a struct record on the stack from sk, its tcp_sock and c; bpf_ringbuf_output, or
//! //       counters[LOST_RING]++ when the ring is full
//!
//! SEC("tp_btf/sys_exit")
//! int accepted(u64 *ctx) {
//!     struct pt_regs *regs = (void *)ctx[0]; long fd = ctx[1];
//!     if (fd < 0 || (regs->orig_ax != __NR_accept && regs->orig_ax != __NR_accept4)) return 0;
//!     struct fdtable *fdt = bpf_get_current_task_btf()->files->fdt;
//!     if (fd >= fdt->max_fds) return 0;
//!     struct file *f; struct socket *sock; struct sock *sk; u64 cookie;   // probe reads
//!     f = fdt->fd[fd]; sock = f->private_data; sk = sock->sk; cookie = sk->sk_cookie;
//!     struct conn *c = bpf_map_lookup_elem(&conns, &cookie);
//!     if (!c || c->flags & ACCEPTED) return 0;
//!     c->accepted = now(); c->pid = tgid(); c->uid = uid(); bpf_get_current_comm(c->comm, 16);
//!     c->flags |= PROCESS | ACCEPTED;
//!     emit_from(ACCEPT, c);                                     // addresses from c->id
//!     return 0;
//! }
//! ```

use crate::bpf_asm::{helper, Alu, Asm, Cond, Label, Size, FP, R0, R1, R2, R3, R4, R6, R7, R8, R9};
use crate::btf::{Btf, Kind};

/// TCP states (`include/net/tcp_states.h`).
pub mod state {
    /// `TCP_ESTABLISHED`.
    pub const ESTABLISHED: u8 = 1;
    /// `TCP_SYN_SENT`.
    pub const SYN_SENT: u8 = 2;
    /// `TCP_SYN_RECV`.
    pub const SYN_RECV: u8 = 3;
    /// `TCP_FIN_WAIT1`.
    pub const FIN_WAIT1: u8 = 4;
    /// `TCP_FIN_WAIT2`.
    pub const FIN_WAIT2: u8 = 5;
    /// `TCP_TIME_WAIT`.
    pub const TIME_WAIT: u8 = 6;
    /// `TCP_CLOSE`.
    pub const CLOSE: u8 = 7;
    /// `TCP_CLOSE_WAIT`.
    pub const CLOSE_WAIT: u8 = 8;
    /// `TCP_LAST_ACK`.
    pub const LAST_ACK: u8 = 9;
    /// `TCP_LISTEN`.
    pub const LISTEN: u8 = 10;
    /// `TCP_CLOSING`.
    pub const CLOSING: u8 = 11;
}

/// Slot of the counters array: records the ring buffer had no room for.
pub const LOST_RING: u32 = 0;
/// Slot of the counters array: connections whose entry could not be stored (the table was
/// full): their connect, accept or close carries no process or timing.
pub const LOST_STORAGE: u32 = 1;
/// Slot of the counters array: drops not counted because the drops map was full.
pub const DROPS_UNCOUNTED: u32 = 2;
/// Size of the counters array's single value (eight u64 slots).
pub const COUNTERS_LEN: u32 = 64;

/// Record kinds.
pub mod kind {
    /// `SYN_SENT -> ESTABLISHED`.
    pub const CONNECT: u8 = 1;
    /// `accept()` returned the socket.
    pub const ACCEPT: u8 = 2;
    /// `X -> CLOSE`.
    pub const CLOSE: u8 = 3;
}

/// Bits of a record's `flags` (and of an entry's).
pub mod flag {
    /// The entry existed: the socket was seen opening (not before tracing started).
    pub const KNOWN: u8 = 1;
    /// `pid`, `uid` and `comm` name the process that called `connect()` or `accept()`.
    pub const PROCESS: u8 = 2;
    /// `established`, the byte baselines and `syn_retrans` are set.
    pub const ESTABLISHED: u8 = 4;
    /// `accepted` is set.
    pub const ACCEPTED: u8 = 8;
    /// The peer's FIN was received (`SOCK_DONE`).
    pub const PEER_FIN: u8 = 16;
}

/// Side values.
pub mod side {
    /// Not known (the connection predates tracing).
    pub const UNKNOWN: u8 = 0;
    /// This end called `connect()`.
    pub const CLIENT: u8 = 1;
    /// This end was accepted from a listener.
    pub const SERVER: u8 = 2;
}

/// The identity block, the same in a record and an entry: byte offsets within it.
mod id {
    pub const FAMILY: i64 = 0; // u16
    pub const LOCAL_PORT: i64 = 2; // be16
    pub const REMOTE_PORT: i64 = 4; // be16
    pub const NETNS: i64 = 8; // u32
    pub const SK_UID: i64 = 12; // u32
    pub const LOCAL_ADDR: i64 = 16; // [u8; 16]
    pub const REMOTE_ADDR: i64 = 32; // [u8; 16]
    pub const LEN: i64 = 48;
}

/// A connection-table entry (`struct conn` above): byte offsets.
mod ent {
    pub const START: i64 = 0;
    pub const EST: i64 = 8;
    pub const ACCEPTED: i64 = 16;
    pub const ACKED0: i64 = 24;
    pub const RECEIVED0: i64 = 32;
    pub const PID: i64 = 40;
    pub const UID: i64 = 44;
    pub const SYN_RETRANS: i64 = 48;
    pub const SIDE: i64 = 52;
    pub const FLAGS: i64 = 53;
    pub const COMM: i64 = 56;
    pub const ID: i64 = 72;
    pub const LEN: u32 = 120;
}

/// Size of a connection-table entry.
pub const ENTRY_LEN: u32 = ent::LEN;

/// Byte offsets of a record's fields (native byte order, except the ports and addresses,
/// which are in network order as the kernel keeps them).
mod rec {
    pub const KIND: i64 = 0;
    pub const OLD_STATE: i64 = 1;
    pub const FLAGS: i64 = 2;
    pub const SIDE: i64 = 3;
    pub const PID: i64 = 4;
    pub const UID: i64 = 8;
    pub const SK_ERR: i64 = 12;
    pub const COOKIE: i64 = 16;
    pub const NOW: i64 = 24;
    pub const START: i64 = 32;
    pub const EST: i64 = 40;
    pub const ACCEPTED: i64 = 48;
    pub const BYTES_ACKED: i64 = 56;
    pub const BYTES_RECEIVED: i64 = 64;
    pub const ACKED0: i64 = 72;
    pub const RECEIVED0: i64 = 80;
    pub const TOTAL_RETRANS: i64 = 88;
    pub const SYN_RETRANS: i64 = 92;
    pub const COMM: i64 = 96;
    pub const ID: i64 = 112;
}

/// Size of one record.
pub const RECORD_LEN: usize = 160;

/// `AF_INET`.
const AF_INET: i32 = 2;
/// `IPPROTO_TCP`.
const IPPROTO_TCP: i32 = 6;
/// `BPF_ANY`.
const BPF_ANY: i32 = 0;
/// `BPF_RB_NO_WAKEUP`: the reader polls on its own clock, so no record pays for a wakeup.
const RB_NO_WAKEUP: i32 = 1;

/// The `accept` and `accept4` system call numbers of the architecture sockstat runs on (the
/// programs run in the same kernel), and the `struct pt_regs` member holding the number.
#[cfg(target_arch = "x86_64")]
const ACCEPT_SYSCALLS: (i32, i32, &str) = (43, 288, "orig_ax");
#[cfg(target_arch = "aarch64")]
const ACCEPT_SYSCALLS: (i32, i32, &str) = (202, 242, "syscallno");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ACCEPT_SYSCALLS: (i32, i32, &str) = (-1, -1, "");

/// Where the programs' fields live in the running kernel, and what they attach to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// BTF id of the typedef `btf_trace_inet_sock_set_state`.
    pub set_state_btf_id: u32,
    /// `struct sock`: `skc_family`.
    pub family: u32,
    /// `skc_dport`: the remote port, network order.
    pub dport: u32,
    /// `skc_rcv_saddr`.
    pub rcv_saddr: u32,
    /// `skc_daddr`.
    pub daddr: u32,
    /// `skc_v6_rcv_saddr`.
    pub v6_rcv_saddr: u32,
    /// `skc_v6_daddr`.
    pub v6_daddr: u32,
    /// `skc_net.net`.
    pub net: u32,
    /// `skc_cookie`.
    pub cookie: u32,
    /// `struct net`: `ns.inum`.
    pub net_inum: u32,
    /// `sk_protocol` and its size (2 since Linux 5.6).
    pub protocol: (u32, u32),
    /// `sk_err`.
    pub err: u32,
    /// `sk_flags` (`skc_flags`).
    pub flags: u32,
    /// `sk_uid`.
    pub uid: u32,
    /// Bit number of `SOCK_DONE` in `sk_flags` (set when the peer's FIN arrives).
    pub sock_done_bit: u32,
    /// `struct tcp_sock`: `inet_sport`, the local port (network order), which, unlike
    /// `skc_num`, survives the move to CLOSE.
    pub sport: u32,
    /// `struct tcp_sock`: `bytes_acked`.
    pub bytes_acked: u32,
    /// `struct tcp_sock`: `bytes_received`.
    pub bytes_received: u32,
    /// `struct tcp_sock`: `total_retrans`.
    pub total_retrans: u32,
    /// How the accept program finds the socket, when the kernel allows it.
    pub accept: Option<AcceptLayout>,
}

/// What the `sys_exit` accept program reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptLayout {
    /// BTF id of the typedef `btf_trace_sys_exit`.
    pub btf_id: u32,
    /// `struct pt_regs`: the system call number, and its size.
    pub syscall_nr: (u32, u32),
    /// `struct task_struct`: `files`.
    pub task_files: u32,
    /// `struct files_struct`: `fdt`.
    pub files_fdt: u32,
    /// `struct fdtable`: `max_fds`.
    pub fdt_max_fds: u32,
    /// `struct fdtable`: `fd`.
    pub fdt_fd: u32,
    /// `struct file`: `private_data` (the `struct socket`).
    pub file_private: u32,
    /// `struct socket`: `sk`.
    pub socket_sk: u32,
}

/// Reads a member path's offset, checking that it has one of the expected sizes.
fn field(btf: &Btf<'_>, s: &str, path: &[&str], sizes: &[u32]) -> Result<(u32, u32), String> {
    let id = btf
        .find(Kind::Struct, s)
        .ok_or_else(|| format!("no struct {s} in the kernel's BTF"))?;
    let m = btf
        .member_path(id, path)
        .ok_or_else(|| format!("no member {s}.{} in the kernel's BTF", path.join(".")))?;
    let size = btf
        .size_of(m.type_id)
        .ok_or_else(|| format!("{s}.{} has no known size", path.join(".")))?;
    if !sizes.contains(&size) {
        return Err(format!(
            "{s}.{} is {size} bytes, not {sizes:?}",
            path.join(".")
        ));
    }
    if m.offset > i16::MAX as u32 - 16 {
        return Err(format!(
            "{s}.{} lies beyond a BPF load's reach",
            path.join(".")
        ));
    }
    Ok((m.offset, size))
}

impl AcceptLayout {
    /// Reads what the accept program needs; the error says what is missing.
    pub fn from_btf(btf: &Btf<'_>) -> Result<AcceptLayout, String> {
        let (_, _, nr_member) = ACCEPT_SYSCALLS;
        if nr_member.is_empty() {
            return Err("accept() is traced only on x86_64 and aarch64".into());
        }
        let btf_id = btf
            .find(Kind::Typedef, "btf_trace_sys_exit")
            .ok_or("the kernel has no raw_syscalls:sys_exit tracepoint in its BTF")?;
        if btf.params(btf_id).map(|p| p.len()) != Some(3) {
            return Err("raw_syscalls:sys_exit has an unexpected prototype".into());
        }
        Ok(AcceptLayout {
            btf_id,
            syscall_nr: field(btf, "pt_regs", &[nr_member], &[4, 8])?,
            task_files: field(btf, "task_struct", &["files"], &[8])?.0,
            files_fdt: field(btf, "files_struct", &["fdt"], &[8])?.0,
            fdt_max_fds: field(btf, "fdtable", &["max_fds"], &[4])?.0,
            fdt_fd: field(btf, "fdtable", &["fd"], &[8])?.0,
            file_private: field(btf, "file", &["private_data"], &[8])?.0,
            socket_sk: field(btf, "socket", &["sk"], &[8])?.0,
        })
    }
}

impl Layout {
    /// Reads the layout from a kernel's BTF. The error names what is missing. A kernel whose
    /// BTF lacks what the accept program reads still traces connects and closes:
    /// [`Layout::accept`] is `None` and the second value says why.
    pub fn from_btf(btf: &Btf<'_>) -> Result<(Layout, Option<String>), String> {
        let set_state_btf_id = btf
            .find(Kind::Typedef, "btf_trace_inet_sock_set_state")
            .ok_or(
                "the kernel has no sock:inet_sock_set_state tracepoint (Linux 4.16) in its BTF",
            )?;
        if btf.params(set_state_btf_id).map(|p| p.len()) != Some(4) {
            return Err("sock:inet_sock_set_state has an unexpected prototype".into());
        }
        let sc = |name: &str, sizes: &[u32]| field(btf, "sock", &["__sk_common", name], sizes);
        let sk = |name: &str, sizes: &[u32]| field(btf, "sock", &[name], sizes);
        let tp = |path: &[&str], sizes: &[u32]| field(btf, "tcp_sock", path, sizes);
        let sock_done = btf
            .enum_value("SOCK_DONE")
            .filter(|v| (0..64).contains(v))
            .ok_or("no SOCK_DONE in enum sock_flags in the kernel's BTF")?;
        let (accept, accept_missing) = match AcceptLayout::from_btf(btf) {
            Ok(a) => (Some(a), None),
            Err(e) => (None, Some(e)),
        };
        let layout = Layout {
            set_state_btf_id,
            family: sc("skc_family", &[2])?.0,
            dport: sc("skc_dport", &[2])?.0,
            rcv_saddr: sc("skc_rcv_saddr", &[4])?.0,
            daddr: sc("skc_daddr", &[4])?.0,
            v6_rcv_saddr: sc("skc_v6_rcv_saddr", &[16])?.0,
            v6_daddr: sc("skc_v6_daddr", &[16])?.0,
            net: field(btf, "sock", &["__sk_common", "skc_net", "net"], &[8])?.0,
            cookie: sc("skc_cookie", &[8])?.0,
            net_inum: field(btf, "net", &["ns", "inum"], &[4])?.0,
            protocol: sk("sk_protocol", &[1, 2])?,
            err: sk("sk_err", &[4])?.0,
            // `sk_flags` is a macro for `__sk_common.skc_flags`.
            flags: sc("skc_flags", &[8])?.0,
            uid: sk("sk_uid", &[4])?.0,
            sock_done_bit: sock_done as u32,
            sport: tp(&["inet_conn", "icsk_inet", "inet_sport"], &[2])?.0,
            bytes_acked: tp(&["bytes_acked"], &[8])?.0,
            bytes_received: tp(&["bytes_received"], &[8])?.0,
            total_retrans: tp(&["total_retrans"], &[4])?.0,
            accept,
        };
        Ok((layout, accept_missing))
    }
}

/// File descriptors of the maps the programs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maps {
    /// `BPF_MAP_TYPE_HASH`: socket cookie (u64) -> entry of [`ENTRY_LEN`] bytes.
    pub conns: i32,
    /// `BPF_MAP_TYPE_RINGBUF`.
    pub ring: i32,
    /// `BPF_MAP_TYPE_ARRAY`, one entry of [`COUNTERS_LEN`] bytes.
    pub counters: i32,
}

// The stack frame: the cookie (the map key), the record, an entry being built, and a spilled
// tcp_sock pointer.
const KEY: i64 = -8;
const REC: i64 = KEY - RECORD_LEN as i64;
const VAL: i64 = REC - ent::LEN as i64;
const TCP: i64 = VAL - 8;

/// `counters[slot] += 1` (clobbers R1, R2).
fn count(a: &mut Asm, m: &Maps, slot: u32) {
    a.ld_map_value(R1, m.counters, slot * 8);
    a.mov_imm(R2, 1);
    a.atomic_add(Size::DW, R1, 0, R2);
}

/// The socket's cookie (of R6) at KEY.
fn cookie(a: &mut Asm) {
    a.mov(R1, R6);
    a.call(helper::GET_SOCKET_COOKIE);
    a.store(Size::DW, FP, KEY, R0);
}

/// `R0 = bpf_map_lookup_elem(conns, KEY)`.
fn lookup(a: &mut Asm, m: &Maps) {
    a.ld_map_fd(R1, m.conns);
    a.mov(R2, FP);
    a.alu_imm(Alu::Add, R2, KEY as i32);
    a.call(helper::MAP_LOOKUP_ELEM);
}

/// Stores the entry built at VAL under KEY; counts a failure.
fn insert(a: &mut Asm, m: &Maps) {
    a.ld_map_fd(R1, m.conns);
    a.mov(R2, FP);
    a.alu_imm(Alu::Add, R2, KEY as i32);
    a.mov(R3, FP);
    a.alu_imm(Alu::Add, R3, VAL as i32);
    a.mov_imm(R4, BPF_ANY);
    a.call(helper::MAP_UPDATE_ELEM);
    let ok = a.label();
    a.jump_imm(Cond::Eq, R0, 0, ok);
    count(a, m, LOST_STORAGE);
    a.place(ok);
}

/// Stores the current process (pid, uid, comm) into the entry at `base + off`.
fn store_process(a: &mut Asm, base: u8, off: i64) {
    a.call(helper::GET_CURRENT_PID_TGID);
    a.alu_imm(Alu::Rsh, R0, 32);
    a.store(Size::W, base, off + ent::PID, R0);
    a.call(helper::GET_CURRENT_UID_GID);
    a.store(Size::W, base, off + ent::UID, R0);
    a.mov(R1, base);
    a.alu_imm(Alu::Add, R1, (off + ent::COMM) as i32);
    a.mov_imm(R2, 16);
    a.call(helper::GET_CURRENT_COMM);
}

/// ORs `bits` into the flags byte at `base + off`.
fn set_flags(a: &mut Asm, base: u8, off: i64, bits: u8) {
    a.load(Size::B, R1, base, off);
    a.alu_imm(Alu::Or, R1, i32::from(bits));
    a.store(Size::B, base, off, R1);
}

/// The socket (R6) as a tcp_sock, spilled at TCP (0 when it is not one).
fn tcp_sock(a: &mut Asm) {
    a.mov(R1, R6);
    a.call(helper::SKC_TO_TCP_SOCK);
    a.store(Size::DW, FP, TCP, R0);
}

/// Stores the tcp_sock's byte counters and retransmissions (from TCP) as the baseline of the
/// entry at `base + off`.
fn store_baseline(a: &mut Asm, l: &Layout, base: u8, off: i64) {
    let skip = a.label();
    a.load(Size::DW, R2, FP, TCP);
    a.jump_imm(Cond::Eq, R2, 0, skip);
    a.load(Size::DW, R1, R2, l.bytes_acked.into());
    a.store(Size::DW, base, off + ent::ACKED0, R1);
    a.load(Size::DW, R1, R2, l.bytes_received.into());
    a.store(Size::DW, base, off + ent::RECEIVED0, R1);
    a.load(Size::W, R1, R2, l.total_retrans.into());
    a.store(Size::W, base, off + ent::SYN_RETRANS, R1);
    a.place(skip);
}

/// Writes the identity block of the socket in R6 (with its tcp_sock spilled at TCP) at
/// `fp + at`. Clobbers R1-R3.
fn identity(a: &mut Asm, l: &Layout, at: i64) {
    a.load(Size::H, R3, R6, l.family.into());
    a.store(Size::H, FP, at + id::FAMILY, R3);
    a.load(Size::H, R1, R6, l.dport.into());
    a.store(Size::H, FP, at + id::REMOTE_PORT, R1);
    a.load(Size::W, R1, R6, l.uid.into());
    a.store(Size::W, FP, at + id::SK_UID, R1);
    let no_tcp = a.label();
    a.load(Size::DW, R2, FP, TCP);
    a.jump_imm(Cond::Eq, R2, 0, no_tcp);
    a.load(Size::H, R1, R2, l.sport.into());
    a.store(Size::H, FP, at + id::LOCAL_PORT, R1);
    a.place(no_tcp);
    let no_net = a.label();
    a.load(Size::DW, R1, R6, l.net.into());
    a.jump_imm(Cond::Eq, R1, 0, no_net);
    a.load(Size::W, R1, R1, l.net_inum.into());
    a.store(Size::W, FP, at + id::NETNS, R1);
    a.place(no_net);
    // 4 bytes for AF_INET, 16 otherwise, in 4-byte loads: each one whole element of
    // in6_addr's u6_addr32, which is what the verifier's BTF walk accepts.
    let v6 = a.label();
    let done = a.label();
    a.jump_imm(Cond::Ne, R3, AF_INET, v6);
    a.load(Size::W, R1, R6, l.rcv_saddr.into());
    a.store(Size::W, FP, at + id::LOCAL_ADDR, R1);
    a.load(Size::W, R1, R6, l.daddr.into());
    a.store(Size::W, FP, at + id::REMOTE_ADDR, R1);
    a.goto(done);
    a.place(v6);
    for i in 0..4i64 {
        a.load(Size::W, R1, R6, i64::from(l.v6_rcv_saddr) + 4 * i);
        a.store(Size::W, FP, at + id::LOCAL_ADDR + 4 * i, R1);
        a.load(Size::W, R1, R6, i64::from(l.v6_daddr) + 4 * i);
        a.store(Size::W, FP, at + id::REMOTE_ADDR + 4 * i, R1);
    }
    a.place(done);
}

/// Copies the entry at R7 (if not 0) into the record at REC and ORs its flags (and KNOWN) into
/// R9. With `with_identity`, its identity block too.
fn copy_entry(a: &mut Asm, with_identity: bool) {
    let none = a.label();
    a.jump_imm(Cond::Eq, R7, 0, none);
    let mut dw = vec![
        (ent::START, rec::START),
        (ent::EST, rec::EST),
        (ent::ACCEPTED, rec::ACCEPTED),
        (ent::ACKED0, rec::ACKED0),
        (ent::RECEIVED0, rec::RECEIVED0),
        (ent::COMM, rec::COMM),
        (ent::COMM + 8, rec::COMM + 8),
    ];
    if with_identity {
        dw.extend((0..id::LEN / 8).map(|i| (ent::ID + 8 * i, rec::ID + 8 * i)));
    }
    for (from, to) in dw {
        a.load(Size::DW, R1, R7, from);
        a.store(Size::DW, FP, REC + to, R1);
    }
    for (from, to) in [
        (ent::PID, rec::PID),
        (ent::UID, rec::UID),
        (ent::SYN_RETRANS, rec::SYN_RETRANS),
    ] {
        a.load(Size::W, R1, R7, from);
        a.store(Size::W, FP, REC + to, R1);
    }
    a.load(Size::B, R1, R7, ent::SIDE);
    a.store(Size::B, FP, REC + rec::SIDE, R1);
    a.load(Size::B, R1, R7, ent::FLAGS);
    a.alu(Alu::Or, R9, R1);
    a.alu_imm(Alu::Or, R9, i32::from(flag::KNOWN));
    a.place(none);
}

/// Hands the record at REC, with the flags in R9, to the ring buffer; counts it when full.
fn output(a: &mut Asm, m: &Maps) {
    a.store(Size::B, FP, REC + rec::FLAGS, R9);
    a.ld_map_fd(R1, m.ring);
    a.mov(R2, FP);
    a.alu_imm(Alu::Add, R2, REC as i32);
    a.mov_imm(R3, RECORD_LEN as i32);
    a.mov_imm(R4, RB_NO_WAKEUP);
    a.call(helper::RINGBUF_OUTPUT);
    let sent = a.label();
    a.jump_imm(Cond::Eq, R0, 0, sent);
    count(a, m, LOST_RING);
    a.place(sent);
}

/// Builds the record of the socket in R6 (cookie at KEY, entry in R7 or 0, old state in R8)
/// and hands it to the ring buffer.
fn emit(a: &mut Asm, l: &Layout, m: &Maps, kind: u8) {
    a.zero_stack(REC, RECORD_LEN as u32);
    a.store_imm(Size::B, FP, REC + rec::KIND, i32::from(kind));
    a.store(Size::B, FP, REC + rec::OLD_STATE, R8);
    tcp_sock(a);
    identity(a, l, REC + rec::ID);
    a.load(Size::W, R1, R6, l.err.into());
    a.store(Size::W, FP, REC + rec::SK_ERR, R1);
    a.load(Size::DW, R1, FP, KEY);
    a.store(Size::DW, FP, REC + rec::COOKIE, R1);
    // R9: the flags, PEER_FIN from sk_flags, the rest from the entry.
    a.load(Size::DW, R9, R6, l.flags.into());
    a.alu_imm(Alu::Rsh, R9, l.sock_done_bit as i32);
    a.alu_imm(Alu::And, R9, 1);
    a.alu_imm(Alu::Lsh, R9, flag::PEER_FIN.trailing_zeros() as i32);
    a.call(helper::KTIME_GET_NS);
    a.store(Size::DW, FP, REC + rec::NOW, R0);
    let no_tcp = a.label();
    a.load(Size::DW, R2, FP, TCP);
    a.jump_imm(Cond::Eq, R2, 0, no_tcp);
    a.load(Size::DW, R1, R2, l.bytes_acked.into());
    a.store(Size::DW, FP, REC + rec::BYTES_ACKED, R1);
    a.load(Size::DW, R1, R2, l.bytes_received.into());
    a.store(Size::DW, FP, REC + rec::BYTES_RECEIVED, R1);
    a.load(Size::W, R1, R2, l.total_retrans.into());
    a.store(Size::W, FP, REC + rec::TOTAL_RETRANS, R1);
    a.place(no_tcp);
    copy_entry(a, false);
    output(a, m);
}

/// `if the socket in R6 is not TCP goto out`.
fn tcp_only(a: &mut Asm, l: &Layout, out: Label) {
    let size = Size::of(l.protocol.1).unwrap_or(Size::H);
    a.load(size, R2, R6, l.protocol.0.into());
    a.jump_imm(Cond::Ne, R2, IPPROTO_TCP, out);
}

/// Which state changes a `tp_btf/inet_sock_set_state` program handles.
///
/// The kernel skips a tracing program that is already running on the CPU (counting a
/// "recursion miss"): a softirq that interrupts a program run in process context loses its own
/// state change. `CLOSE -> SYN_SENT` is the one long run in process context (inside connect()),
/// so it is a program of its own: a softirq then nests into the other program, which is not
/// running, and the connect program's own misses can only be of state changes it ignores (a
/// softirq never makes `CLOSE -> SYN_SENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatePart {
    /// Only `CLOSE -> SYN_SENT`.
    Connect,
    /// Every other state change.
    Rest,
}

/// Assembles a `tp_btf/inet_sock_set_state` program for one [`StatePart`].
pub fn set_state_program(l: &Layout, m: &Maps, part: StatePart) -> Result<Vec<u64>, String> {
    let mut a = Asm::new();
    let out = a.label();
    let connect_start = a.label();
    let established = a.label();
    let close = a.label();
    let est_server = a.label();
    a.load(Size::DW, R6, R1, 0);
    a.load(Size::DW, R8, R1, 8);
    a.load(Size::DW, R9, R1, 16);
    a.mov32(R8, R8);
    a.mov32(R9, R9);
    a.jump_imm(Cond::Eq, R6, 0, out);
    if part == StatePart::Connect {
        a.jump_imm(Cond::Ne, R9, state::SYN_SENT.into(), out);
    }
    tcp_only(&mut a, l, out);
    if part == StatePart::Connect {
        a.goto(connect_start);
    } else {
        a.jump_imm(Cond::Eq, R9, state::ESTABLISHED.into(), established);
        a.jump_imm(Cond::Eq, R9, state::CLOSE.into(), close);
        a.goto(out);
    }

    if part == StatePart::Connect {
        // CLOSE -> SYN_SENT: connect(), in the calling process.
        a.place(connect_start);
        a.jump_imm(Cond::Ne, R8, state::CLOSE.into(), out);
        cookie(&mut a);
        a.zero_stack(VAL, ent::LEN);
        a.call(helper::KTIME_GET_NS);
        a.store(Size::DW, FP, VAL + ent::START, R0);
        store_process(&mut a, FP, VAL);
        a.store_imm(Size::B, FP, VAL + ent::SIDE, side::CLIENT.into());
        a.store_imm(Size::B, FP, VAL + ent::FLAGS, flag::PROCESS.into());
        insert(&mut a, m);
        a.goto(out);
    } else {
        // -> ESTABLISHED.
        a.place(established);
        a.jump_imm(Cond::Eq, R8, state::SYN_RECV.into(), est_server);
        a.jump_imm(Cond::Ne, R8, state::SYN_SENT.into(), out);
        // SYN_SENT -> ESTABLISHED: the client's connect completed.
        cookie(&mut a);
        lookup(&mut a, m);
        a.mov(R7, R0);
        let emit_connect = a.label();
        a.jump_imm(Cond::Eq, R7, 0, emit_connect);
        a.call(helper::KTIME_GET_NS);
        a.store(Size::DW, R7, ent::EST, R0);
        tcp_sock(&mut a);
        store_baseline(&mut a, l, R7, 0);
        set_flags(&mut a, R7, ent::FLAGS, flag::ESTABLISHED);
        a.place(emit_connect);
        emit(&mut a, l, m, kind::CONNECT);
        a.goto(out);

        // SYN_RECV -> ESTABLISHED: a server's child socket, before anyone accepts it.
        a.place(est_server);
        cookie(&mut a);
        a.zero_stack(VAL, ent::LEN);
        a.call(helper::KTIME_GET_NS);
        a.store(Size::DW, FP, VAL + ent::START, R0);
        a.store(Size::DW, FP, VAL + ent::EST, R0);
        a.store_imm(Size::B, FP, VAL + ent::SIDE, side::SERVER.into());
        a.store_imm(Size::B, FP, VAL + ent::FLAGS, flag::ESTABLISHED.into());
        tcp_sock(&mut a);
        store_baseline(&mut a, l, FP, VAL);
        identity(&mut a, l, VAL + ent::ID);
        insert(&mut a, m);
        a.goto(out);

        // X -> CLOSE (not a listener closing).
        a.place(close);
        a.jump_imm(Cond::Eq, R8, state::LISTEN.into(), out);
        cookie(&mut a);
        lookup(&mut a, m);
        a.mov(R7, R0);
        emit(&mut a, l, m, kind::CLOSE);
        a.jump_imm(Cond::Eq, R7, 0, out);
        a.ld_map_fd(R1, m.conns);
        a.mov(R2, FP);
        a.alu_imm(Alu::Add, R2, KEY as i32);
        a.call(helper::MAP_DELETE_ELEM);
    }

    a.place(out);
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

/// `*(u64 *)(fp + KEY) = *(u64 *)(R3 + off)` read with `bpf_probe_read_kernel`; `goto out` when
/// the read fails or gives 0. Leaves the value in R3.
fn probe_deref(a: &mut Asm, off: u32, out: Label) {
    a.alu_imm(Alu::Add, R3, off as i32);
    a.mov(R1, FP);
    a.alu_imm(Alu::Add, R1, KEY as i32);
    a.mov_imm(R2, 8);
    a.call(helper::PROBE_READ_KERNEL);
    a.jump_imm(Cond::Ne, R0, 0, out);
    a.load(Size::DW, R3, FP, KEY);
    a.jump_imm(Cond::Eq, R3, 0, out);
}

/// Assembles the `tp_btf/sys_exit` accept program; `None` when the layout has no
/// [`AcceptLayout`].
pub fn accept_program(l: &Layout, m: &Maps) -> Option<Result<Vec<u64>, String>> {
    let al = l.accept?;
    let (nr_accept, nr_accept4, _) = ACCEPT_SYSCALLS;
    let mut a = Asm::new();
    let out = a.label();
    let is_accept = a.label();
    a.load(Size::DW, R6, R1, 0); // struct pt_regs *
    a.load(Size::DW, R9, R1, 8); // the return value
    a.jump_imm(Cond::Slt, R9, 0, out);
    let nr_size = Size::of(al.syscall_nr.1).unwrap_or(Size::DW);
    a.load(nr_size, R2, R6, al.syscall_nr.0.into());
    a.jump_imm(Cond::Eq, R2, nr_accept4, is_accept);
    a.jump_imm(Cond::Ne, R2, nr_accept, out);
    a.place(is_accept);
    // current->files->fdt, by BTF-typed loads.
    a.call(helper::GET_CURRENT_TASK_BTF);
    a.load(Size::DW, R1, R0, al.task_files.into());
    a.jump_imm(Cond::Eq, R1, 0, out);
    a.load(Size::DW, R1, R1, al.files_fdt.into());
    a.jump_imm(Cond::Eq, R1, 0, out);
    a.load(Size::W, R2, R1, al.fdt_max_fds.into());
    a.jump_reg(Cond::Ge, R9, R2, out);
    // fdt->fd is a `struct file **`: the verifier sees a plain number, so the rest are probe
    // reads: fd[ret], ->private_data (the struct socket), ->sk, ->skc_cookie.
    a.load(Size::DW, R3, R1, al.fdt_fd.into());
    a.mov(R2, R9);
    a.alu_imm(Alu::Lsh, R2, 3);
    a.alu(Alu::Add, R3, R2);
    probe_deref(&mut a, 0, out);
    probe_deref(&mut a, al.file_private, out);
    probe_deref(&mut a, al.socket_sk, out);
    probe_deref(&mut a, l.cookie, out);
    // The cookie is at KEY: only sockets this tracer saw established have an entry.
    lookup(&mut a, m);
    a.mov(R7, R0);
    a.jump_imm(Cond::Eq, R7, 0, out);
    a.load(Size::B, R1, R7, ent::FLAGS);
    a.jump_imm(Cond::Set, R1, flag::ACCEPTED.into(), out);
    a.call(helper::KTIME_GET_NS);
    a.store(Size::DW, R7, ent::ACCEPTED, R0);
    store_process(&mut a, R7, 0);
    set_flags(&mut a, R7, ent::FLAGS, flag::PROCESS | flag::ACCEPTED);
    // The record, from the entry alone.
    a.zero_stack(REC, RECORD_LEN as u32);
    a.store_imm(Size::B, FP, REC + rec::KIND, kind::ACCEPT.into());
    a.store_imm(Size::B, FP, REC + rec::OLD_STATE, state::ESTABLISHED.into());
    a.load(Size::DW, R1, FP, KEY);
    a.store(Size::DW, FP, REC + rec::COOKIE, R1);
    a.load(Size::DW, R1, R7, ent::ACCEPTED);
    a.store(Size::DW, FP, REC + rec::NOW, R1);
    a.mov_imm(R9, 0);
    copy_entry(&mut a, true);
    output(&mut a, m);
    a.place(out);
    a.mov_imm(R0, 0);
    a.exit();
    Some(a.finish())
}

/// One record, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// [`kind`].
    pub kind: u8,
    /// The state the socket left (ESTABLISHED for an accept).
    pub old_state: u8,
    /// `AF_INET` or `AF_INET6`.
    pub family: u16,
    /// [`flag`] bits.
    pub flags: u8,
    /// The process that called `connect()` / `accept()` (initial pid namespace).
    pub pid: u32,
    /// Its uid.
    pub uid: u32,
    /// Its command name (`comm`, NUL-padded).
    pub comm: [u8; 16],
    /// Network namespace inode.
    pub netns: u32,
    /// Local port.
    pub local_port: u16,
    /// Remote port.
    pub remote_port: u16,
    /// Local address: 4 bytes for `AF_INET`, else 16.
    pub local_addr: [u8; 16],
    /// Remote address, likewise.
    pub remote_addr: [u8; 16],
    /// `sk_err` when the record was written.
    pub sk_err: i32,
    /// The socket's uid (`sk_uid`).
    pub sk_uid: u32,
    /// Socket cookie.
    pub cookie: u64,
    /// When the record was written (CLOCK_MONOTONIC, ns).
    pub now_ns: u64,
    /// When `connect()` was called (client) or the server socket established; 0 if unknown.
    pub start_ns: u64,
    /// When the connection was established; 0 if unknown.
    pub established_ns: u64,
    /// When it was accepted; 0 if not.
    pub accepted_ns: u64,
    /// `tcp_sock.bytes_acked` now.
    pub bytes_acked: u64,
    /// `tcp_sock.bytes_received` now.
    pub bytes_received: u64,
    /// `bytes_acked` when established.
    pub bytes_acked_at_establish: u64,
    /// `bytes_received` when established.
    pub bytes_received_at_establish: u64,
    /// `tcp_sock.total_retrans` now.
    pub total_retrans: u32,
    /// `total_retrans` when established: SYN (client) or SYN-ACK (server) retransmissions.
    pub syn_retrans: u32,
    /// [`side`].
    pub side: u8,
}

impl Record {
    /// Decodes one record; `None` when `b` is shorter than [`RECORD_LEN`].
    pub fn parse(b: &[u8]) -> Option<Record> {
        use crate::bytes::{arr, i32_ne, u16_be, u16_ne, u32_ne, u64_ne, u8_at};
        if b.len() < RECORD_LEN {
            return None;
        }
        let at = |off: i64| off as usize;
        let idf = |off: i64| (rec::ID + off) as usize;
        Some(Record {
            kind: u8_at(b, at(rec::KIND))?,
            old_state: u8_at(b, at(rec::OLD_STATE))?,
            flags: u8_at(b, at(rec::FLAGS))?,
            side: u8_at(b, at(rec::SIDE))?,
            pid: u32_ne(b, at(rec::PID))?,
            uid: u32_ne(b, at(rec::UID))?,
            sk_err: i32_ne(b, at(rec::SK_ERR))?,
            cookie: u64_ne(b, at(rec::COOKIE))?,
            now_ns: u64_ne(b, at(rec::NOW))?,
            start_ns: u64_ne(b, at(rec::START))?,
            established_ns: u64_ne(b, at(rec::EST))?,
            accepted_ns: u64_ne(b, at(rec::ACCEPTED))?,
            bytes_acked: u64_ne(b, at(rec::BYTES_ACKED))?,
            bytes_received: u64_ne(b, at(rec::BYTES_RECEIVED))?,
            bytes_acked_at_establish: u64_ne(b, at(rec::ACKED0))?,
            bytes_received_at_establish: u64_ne(b, at(rec::RECEIVED0))?,
            total_retrans: u32_ne(b, at(rec::TOTAL_RETRANS))?,
            syn_retrans: u32_ne(b, at(rec::SYN_RETRANS))?,
            comm: arr(b, at(rec::COMM))?,
            family: u16_ne(b, idf(id::FAMILY))?,
            local_port: u16_be(b, idf(id::LOCAL_PORT))?,
            remote_port: u16_be(b, idf(id::REMOTE_PORT))?,
            netns: u32_ne(b, idf(id::NETNS))?,
            sk_uid: u32_ne(b, idf(id::SK_UID))?,
            local_addr: arr(b, idf(id::LOCAL_ADDR))?,
            remote_addr: arr(b, idf(id::REMOTE_ADDR))?,
        })
    }

    /// Encodes the record as the programs write it (for tests and fuzz seeds).
    pub fn to_bytes(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        let mut put = |off: i64, v: &[u8]| {
            let off = off as usize;
            b[off..off + v.len()].copy_from_slice(v)
        };
        put(rec::KIND, &[self.kind]);
        put(rec::OLD_STATE, &[self.old_state]);
        put(rec::FLAGS, &[self.flags]);
        put(rec::SIDE, &[self.side]);
        put(rec::PID, &self.pid.to_ne_bytes());
        put(rec::UID, &self.uid.to_ne_bytes());
        put(rec::SK_ERR, &self.sk_err.to_ne_bytes());
        put(rec::COOKIE, &self.cookie.to_ne_bytes());
        put(rec::NOW, &self.now_ns.to_ne_bytes());
        put(rec::START, &self.start_ns.to_ne_bytes());
        put(rec::EST, &self.established_ns.to_ne_bytes());
        put(rec::ACCEPTED, &self.accepted_ns.to_ne_bytes());
        put(rec::BYTES_ACKED, &self.bytes_acked.to_ne_bytes());
        put(rec::BYTES_RECEIVED, &self.bytes_received.to_ne_bytes());
        put(rec::ACKED0, &self.bytes_acked_at_establish.to_ne_bytes());
        put(
            rec::RECEIVED0,
            &self.bytes_received_at_establish.to_ne_bytes(),
        );
        put(rec::TOTAL_RETRANS, &self.total_retrans.to_ne_bytes());
        put(rec::SYN_RETRANS, &self.syn_retrans.to_ne_bytes());
        put(rec::COMM, &self.comm);
        put(rec::ID + id::FAMILY, &self.family.to_ne_bytes());
        put(rec::ID + id::LOCAL_PORT, &self.local_port.to_be_bytes());
        put(rec::ID + id::REMOTE_PORT, &self.remote_port.to_be_bytes());
        put(rec::ID + id::NETNS, &self.netns.to_ne_bytes());
        put(rec::ID + id::SK_UID, &self.sk_uid.to_ne_bytes());
        put(rec::ID + id::LOCAL_ADDR, &self.local_addr);
        put(rec::ID + id::REMOTE_ADDR, &self.remote_addr);
        b
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bpf_asm::{called_helper, check_jumps, decode};
    use crate::btf::build::Builder;

    /// The kernel's shapes in miniature: `struct sock` wrapping `sock_common`, the network
    /// namespace, `tcp_sock` wrapping `inet_connection_sock` and `inet_sock`, the tracepoint
    /// typedefs, and the path from a task to a socket through its fd table.
    pub(crate) fn kernel_like() -> Vec<u8> {
        let mut b = Builder::new();
        let u8t = b.int("unsigned char", 1);
        let u16t = b.int("short unsigned int", 2);
        let u32t = b.int("unsigned int", 4);
        let int = b.int("int", 4);
        let u64t = b.int("long long unsigned int", 8);
        let ulong = b.int("long unsigned int", 8);
        let a4 = b.array(u32t, int, 4);
        let in6 = b.composite("in6_addr", false, 16, &[("", a4, 0)]);
        let ns = b.composite(
            "ns_common",
            false,
            16,
            &[("count", int, 0), ("inum", u32t, 64)],
        );
        let net = b.composite("net", false, 64, &[("passive", int, 0), ("ns", ns, 128)]);
        let pnet = b.ptr(net);
        let possible = b.composite("", false, 8, &[("net", pnet, 0)]);
        let atomic64 = b.composite("", false, 8, &[("counter", u64t, 0)]);
        let pair = b.composite(
            "",
            false,
            8,
            &[("skc_daddr", u32t, 0), ("skc_rcv_saddr", u32t, 32)],
        );
        let addrpair = b.composite("", true, 8, &[("", pair, 0)]);
        let common = b.composite(
            "sock_common",
            false,
            136,
            &[
                ("", addrpair, 0),
                ("skc_dport", u16t, 96),
                ("skc_num", u16t, 112),
                ("skc_family", u16t, 128),
                ("skc_state", u8t, 144),
                ("skc_net", possible, 384),
                ("skc_v6_daddr", in6, 448),
                ("skc_v6_rcv_saddr", in6, 576),
                ("skc_cookie", atomic64, 704),
                ("skc_flags", ulong, 768),
            ],
        );
        let kuid = b.composite("", false, 4, &[("val", u32t, 0)]);
        let sock = b.composite(
            "sock",
            false,
            760,
            &[
                ("__sk_common", common, 0),
                ("sk_err", int, 4160),
                ("sk_protocol", u16t, 4224),
                ("sk_uid", kuid, 4256),
            ],
        );
        let inet = b.composite(
            "inet_sock",
            false,
            1000,
            &[("sk", sock, 0), ("inet_sport", u16t, 6512)],
        );
        let icsk = b.composite(
            "inet_connection_sock",
            false,
            1400,
            &[("icsk_inet", inet, 0)],
        );
        b.composite(
            "tcp_sock",
            false,
            2400,
            &[
                ("inet_conn", icsk, 0),
                ("total_retrans", u32t, 12000),
                ("bytes_received", u64t, 12096),
                ("bytes_acked", u64t, 12160),
            ],
        );
        b.enumeration("sock_flags", &[("SOCK_DEAD", 0), ("SOCK_DONE", 1)]);
        let psock = b.ptr(sock);
        let proto = b.func_proto(0, &[0, psock, int, int]);
        let pproto = b.ptr(proto);
        b.typedef("btf_trace_inet_sock_set_state", pproto);
        // The accept path: pt_regs, task -> files -> fdt -> fd[], file, socket.
        let regs = b.composite(
            "pt_regs",
            false,
            168,
            &[("orig_ax", ulong, 960), ("syscallno", int, 1024)],
        );
        let pregs = b.ptr(regs);
        let long = b.int("long int", 8);
        let exit = b.func_proto(0, &[0, pregs, long]);
        let pexit = b.ptr(exit);
        b.typedef("btf_trace_sys_exit", pexit);
        let file = b.composite("file", false, 184, &[("private_data", ulong, 192)]);
        let pfile = b.ptr(file);
        let ppfile = b.ptr(pfile);
        let fdt = b.composite(
            "fdtable",
            false,
            56,
            &[("max_fds", u32t, 0), ("fd", ppfile, 64)],
        );
        let pfdt = b.ptr(fdt);
        let files = b.composite("files_struct", false, 704, &[("fdt", pfdt, 256)]);
        let pfiles = b.ptr(files);
        b.composite("task_struct", false, 9000, &[("files", pfiles, 14592)]);
        b.composite("socket", false, 128, &[("sk", psock, 192)]);
        b.finish()
    }

    fn layout() -> Layout {
        let data = kernel_like();
        let (l, missing) = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap();
        assert_eq!(missing, None);
        l
    }

    const MAPS: Maps = Maps {
        conns: 3,
        ring: 4,
        counters: 5,
    };

    #[test]
    fn layout_reads_nested_members() {
        let l = layout();
        assert_eq!((l.family, l.dport, l.rcv_saddr, l.daddr), (16, 12, 4, 0));
        assert_eq!((l.net, l.net_inum, l.cookie), (48, 24, 88));
        assert_eq!((l.v6_daddr, l.v6_rcv_saddr), (56, 72));
        assert_eq!(
            (l.flags, l.err, l.protocol, l.uid),
            (96, 520, (528, 2), 532)
        );
        assert_eq!((l.sock_done_bit, l.sport), (1, 814));
        assert_eq!(
            (l.total_retrans, l.bytes_received, l.bytes_acked),
            (1500, 1512, 1520)
        );
        let a = l.accept.unwrap();
        assert_eq!(
            (a.task_files, a.files_fdt, a.fdt_max_fds, a.fdt_fd),
            (1824, 32, 0, 8)
        );
        assert_eq!((a.file_private, a.socket_sk), (24, 24));
        if cfg!(target_arch = "x86_64") {
            assert_eq!(a.syscall_nr, (120, 8));
        }
    }

    #[test]
    fn what_is_missing_is_named() {
        let data = Builder::new().finish();
        let e = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap_err();
        assert!(e.contains("inet_sock_set_state"), "{e}");
        let mut b = Builder::new();
        let int = b.int("int", 4);
        let proto = b.func_proto(0, &[0, int, int, int]);
        let p = b.ptr(proto);
        b.typedef("btf_trace_inet_sock_set_state", p);
        let data = b.finish();
        let e = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap_err();
        assert!(e.contains("SOCK_DONE"), "{e}");
        // Without the sys_exit tracepoint, connects and closes are still traced.
        let e = AcceptLayout::from_btf(&Btf::parse(&data).unwrap()).unwrap_err();
        assert!(e.contains("sys_exit") || e.contains("x86_64"), "{e}");
    }

    /// Every map reference in `p` names one of the three maps.
    fn maps_used(p: &[u64]) -> Vec<i32> {
        let mut fds = Vec::new();
        let mut i = 0;
        while i < p.len() {
            let (code, _, src, _, imm) = decode(p[i]);
            if code == 0x18 {
                if src != 0 {
                    fds.push(imm);
                }
                i += 2;
            } else {
                i += 1;
            }
        }
        fds
    }

    #[test]
    fn state_program_shape() {
        let l = layout();
        let rest = set_state_program(&l, &MAPS, StatePart::Rest).unwrap();
        let connect = set_state_program(&l, &MAPS, StatePart::Connect).unwrap();
        for p in [&rest, &connect] {
            check_jumps(p).unwrap();
            let fds = maps_used(p);
            assert!(fds.iter().all(|f| [3, 4, 5].contains(f)), "{fds:?}");
            // The stack frame stays within the verifier's 512 bytes.
            for &i in p.iter() {
                let (code, dst, src, off, _) = decode(i);
                let mem = matches!(code & 0x07, 0x01..=0x03) && code & 0xe0 == 0x60;
                if mem && (dst == FP || src == FP) {
                    assert!((-512..0).contains(&i32::from(off)), "stack offset {off}");
                }
            }
        }
        let calls =
            |p: &[u64]| -> Vec<i32> { p.iter().filter_map(|&i| called_helper(i)).collect() };
        // The connect part stores the process and writes no record.
        let c = calls(&connect);
        for h in [
            helper::GET_SOCKET_COOKIE,
            helper::GET_CURRENT_PID_TGID,
            helper::GET_CURRENT_COMM,
            helper::MAP_UPDATE_ELEM,
        ] {
            assert!(c.contains(&h), "no call to helper {h}");
        }
        assert!(!c.contains(&helper::RINGBUF_OUTPUT));
        // The rest: two records (connect and close), the table looked up, filled and emptied,
        // and no process read (it runs in softirq).
        let r = calls(&rest);
        for h in [
            helper::MAP_UPDATE_ELEM,
            helper::MAP_LOOKUP_ELEM,
            helper::MAP_DELETE_ELEM,
            helper::SKC_TO_TCP_SOCK,
        ] {
            assert!(r.contains(&h), "no call to helper {h}");
        }
        assert_eq!(
            r.iter().filter(|&&h| h == helper::RINGBUF_OUTPUT).count(),
            2
        );
        assert!(!r.contains(&helper::GET_CURRENT_COMM));
    }

    #[test]
    fn accept_program_shape() {
        let l = layout();
        let p = accept_program(&l, &MAPS).unwrap().unwrap();
        check_jumps(&p).unwrap();
        let calls: Vec<i32> = p.iter().filter_map(|&i| called_helper(i)).collect();
        assert_eq!(calls[0], helper::GET_CURRENT_TASK_BTF);
        // fd[ret], private_data, sk, cookie: four probe reads, then the lookup.
        assert_eq!(
            calls
                .iter()
                .filter(|&&h| h == helper::PROBE_READ_KERNEL)
                .count(),
            4
        );
        assert_eq!(calls[5], helper::MAP_LOOKUP_ELEM);
        assert_eq!(calls.last(), Some(&helper::RINGBUF_OUTPUT));
        // The syscall number is compared with accept and accept4.
        let (nr, nr4, _) = ACCEPT_SYSCALLS;
        let imms: Vec<i32> = p.iter().map(|&i| decode(i).4).collect();
        assert!(imms.contains(&nr) && imms.contains(&nr4));
        let mut none = l;
        none.accept = None;
        assert!(accept_program(&none, &MAPS).is_none());
    }

    #[test]
    fn records_round_trip() {
        let r = Record {
            kind: kind::CLOSE,
            old_state: state::FIN_WAIT2,
            family: 2,
            flags: flag::KNOWN | flag::PROCESS | flag::ESTABLISHED,
            pid: 4242,
            uid: 1000,
            comm: *b"python3\0\0\0\0\0\0\0\0\0",
            netns: 4026531840,
            local_port: 51370,
            remote_port: 47001,
            local_addr: [127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            remote_addr: [127, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            sk_err: 0,
            sk_uid: 1000,
            cookie: 8812,
            now_ns: 5_000_000,
            start_ns: 1_000_000,
            established_ns: 1_095_000,
            accepted_ns: 0,
            bytes_acked: 102,
            bytes_received: 201,
            bytes_acked_at_establish: 1,
            bytes_received_at_establish: 0,
            total_retrans: 0,
            syn_retrans: 0,
            side: side::CLIENT,
        };
        let b = r.to_bytes();
        assert_eq!(Record::parse(&b), Some(r));
        assert_eq!(Record::parse(&b[..RECORD_LEN - 1]), None);
        // The ports are in network order in the record, as the kernel keeps them.
        let at = (rec::ID + id::REMOTE_PORT) as usize;
        assert_eq!(&b[at..at + 2], &47001u16.to_be_bytes());
    }
}
