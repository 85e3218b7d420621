//! `INET_DIAG_REQ_BYTECODE` filter programs: a compiler from a small boolean expression
//! language, and userspace mirrors of the kernel's verifier and interpreter
//! (`inet_diag_bc_audit` and `inet_diag_bc_run` in `net/ipv4/inet_diag.c`).
//!
//! # The machine
//!
//! A program is a sequence of `struct inet_diag_bc_op { u8 code; u8 yes; u16 no; }`, each
//! followed by its arguments. Every op is a conditional *forward* jump: by `yes` bytes when
//! the condition holds, by `no` bytes otherwise. A socket matches iff the walk lands exactly
//! on the end of the program; jumping 4 bytes past the end rejects it.
//!
//! # The compilation scheme
//!
//! Same as `ssfilter_bytecompile` in iproute2's `misc/ss.c`: a fragment of length `L`
//! *accepts* by falling through to offset `L` and *rejects* by jumping to `L + 4`.
//! - `A and B` = `A B`, with A's reject jumps relocated by `len(B)` (`ssfilter_patch`);
//! - `A or B` = `A JMP(no = len(B) + 4) B`: A's reject lands on B, A's accept hits the
//!   unconditional jump over B;
//! - `not A` = `A JMP(no = 8)`: A's accept hits the jump to reject, A's reject lands on the
//!   end.
//!
//! Every op's `yes` is its own size, so every op boundary is on the `yes` chain from the start,
//! which is what the audit's `valid_cc` demands of every in-program `no` target.
//!
//! # Semantics worth knowing
//!
//! An IPv4 prefix condition also matches AF_INET6 sockets whose address is v4-mapped
//! (`::ffff:a.b.c.d`), and an IPv6 condition never matches an AF_INET socket. So
//! `0.0.0.0/0` means "any IPv4 or v4-mapped address", not "anything".
//! [`eval`] states these semantics directly and the tests check `run(compile(e)) == eval(e)`.

use std::net::IpAddr;

use crate::bytes::{u16_ne, u32_ne, u64_ne, u8_at};

/// Op codes (`INET_DIAG_BC_*`, `include/uapi/linux/inet_diag.h`).
pub mod op {
    /// `INET_DIAG_BC_NOP`: always true (`no` unused).
    pub const NOP: u8 = 0;
    /// `INET_DIAG_BC_JMP`: always false, i.e. always jumps by `no`.
    pub const JMP: u8 = 1;
    /// `INET_DIAG_BC_S_GE`: local port >= the next op's `no`.
    pub const S_GE: u8 = 2;
    /// `INET_DIAG_BC_S_LE`: local port <= the next op's `no`.
    pub const S_LE: u8 = 3;
    /// `INET_DIAG_BC_D_GE`: remote port >= the next op's `no`.
    pub const D_GE: u8 = 4;
    /// `INET_DIAG_BC_D_LE`: remote port <= the next op's `no`.
    pub const D_LE: u8 = 5;
    /// `INET_DIAG_BC_AUTO`: the local port was auto-bound (no `SOCK_BINDPORT_LOCK`).
    pub const AUTO: u8 = 6;
    /// `INET_DIAG_BC_S_COND`: local address/port matches an `inet_diag_hostcond`.
    pub const S_COND: u8 = 7;
    /// `INET_DIAG_BC_D_COND`: remote address/port matches an `inet_diag_hostcond`.
    pub const D_COND: u8 = 8;
    /// `INET_DIAG_BC_DEV_COND` (4.8+): `sk_bound_dev_if` equals a `u32`.
    pub const DEV_COND: u8 = 9;
    /// `INET_DIAG_BC_MARK_COND` (4.9+): `(sk_mark & mask) == mark`; needs `CAP_NET_ADMIN`.
    pub const MARK_COND: u8 = 10;
    /// `INET_DIAG_BC_S_EQ` (4.16+): local port == the next op's `no`.
    pub const S_EQ: u8 = 11;
    /// `INET_DIAG_BC_D_EQ` (4.16+): remote port == the next op's `no`.
    pub const D_EQ: u8 = 12;
    /// `INET_DIAG_BC_CGROUP_COND` (5.8+): cgroup v2 id equals a `u64`.
    pub const CGROUP_COND: u8 = 13;
}

const AF_UNSPEC: u8 = 0;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// `SOCK_BINDPORT_LOCK` (`include/net/sock.h`).
const SOCK_BINDPORT_LOCK: u16 = 8;

/// Longest program that fits an attribute: `nla_len` is a `u16` that includes the 4-byte
/// header, and programs are made of 4-byte words.
pub const MAX_PROGRAM_LEN: usize = 65528;
/// Deepest expression [`try_compile`] accepts.
pub const MAX_DEPTH: usize = 512;

/// One condition on a socket, as the kernel can test it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// Local port `>=`.
    SrcPortGe(u16),
    /// Local port `<=`.
    SrcPortLe(u16),
    /// Remote port `>=`.
    DstPortGe(u16),
    /// Remote port `<=`.
    DstPortLe(u16),
    /// Local port `==`.
    SrcPortEq(u16),
    /// Remote port `==`.
    DstPortEq(u16),
    /// Local address in a prefix. `prefix_len` is clamped to the address width.
    SrcPrefix {
        /// Network address; only the first `prefix_len` bits matter.
        addr: IpAddr,
        /// Prefix length in bits.
        prefix_len: u8,
    },
    /// Remote address in a prefix. `prefix_len` is clamped to the address width.
    DstPrefix {
        /// Network address; only the first `prefix_len` bits matter.
        addr: IpAddr,
        /// Prefix length in bits.
        prefix_len: u8,
    },
    /// The socket does not hold `SOCK_BINDPORT_LOCK`: its port was chosen by the kernel
    /// rather than bound explicitly. Accepted sockets match too (`sk_clone_lock` clears the
    /// lock on the child, `net/core/sock.c`), as do TIME-WAIT and SYN-RECV minisockets (no
    /// user locks at all): in practice "everything except explicitly bound sockets".
    AutoBound,
    /// The socket's cgroup v2 id (5.8+). Minisockets have id 0.
    Cgroup(u64),
    /// The socket is bound to this interface index (`SO_BINDTODEVICE`; 0 = unbound) (4.8+).
    Dev(u32),
}

/// A boolean combination of [`Cond`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// Matches every socket.
    True,
    /// One condition.
    Cond(Cond),
    /// All of these (empty = true).
    And(Vec<Expr>),
    /// Any of these (empty = false).
    Or(Vec<Expr>),
    /// The negation.
    Not(Box<Expr>),
}

impl Expr {
    /// Matches no socket (an empty `Or`).
    pub fn never() -> Expr {
        Expr::Or(Vec::new())
    }

    /// `Expr::Not(Box::new(e))`.
    #[allow(clippy::should_implement_trait)]
    pub fn not(e: Expr) -> Expr {
        Expr::Not(Box::new(e))
    }
}

/// Which end of a connection a port or address condition tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The local end (`sport`, `src`: the kernel's "source").
    Src,
    /// The remote end (`dport`, `dst`).
    Dst,
}

/// Port equal to `port` on one side.
pub fn port_eq(side: Side, port: u16) -> Expr {
    Expr::Cond(match side {
        Side::Src => Cond::SrcPortEq(port),
        Side::Dst => Cond::DstPortEq(port),
    })
}

/// Port in `lo..=hi` on one side, with the fewest ops: an empty range is [`Expr::never`], a
/// single port one `EQ`, an open-ended range one comparison, the full range [`Expr::True`].
pub fn port_range(side: Side, lo: u16, hi: u16) -> Expr {
    type MkCond = fn(u16) -> Cond;
    let (ge, le): (MkCond, MkCond) = match side {
        Side::Src => (Cond::SrcPortGe, Cond::SrcPortLe),
        Side::Dst => (Cond::DstPortGe, Cond::DstPortLe),
    };
    match (lo, hi) {
        (lo, hi) if lo > hi => Expr::never(),
        (lo, hi) if lo == hi => port_eq(side, lo),
        (0, u16::MAX) => Expr::True,
        (0, hi) => Expr::Cond(le(hi)),
        (lo, u16::MAX) => Expr::Cond(ge(lo)),
        (lo, hi) => Expr::And(vec![Expr::Cond(ge(lo)), Expr::Cond(le(hi))]),
    }
}

/// Port in any of the inclusive `ranges` on one side (single ports are `(p, p)`).
pub fn ports_in(side: Side, ranges: &[(u16, u16)]) -> Expr {
    Expr::Or(
        ranges
            .iter()
            .map(|&(lo, hi)| port_range(side, lo, hi))
            .collect(),
    )
}

/// Local *or* remote port in any of `ranges`: "port 22, 80, 8000-8100" as users mean it.
pub fn either_port_in(ranges: &[(u16, u16)]) -> Expr {
    Expr::Or(vec![
        ports_in(Side::Src, ranges),
        ports_in(Side::Dst, ranges),
    ])
}

/// Address in `addr/prefix_len` on one side.
pub fn prefix(side: Side, addr: IpAddr, prefix_len: u8) -> Expr {
    Expr::Cond(match side {
        Side::Src => Cond::SrcPrefix { addr, prefix_len },
        Side::Dst => Cond::DstPrefix { addr, prefix_len },
    })
}

/// Options for [`try_compile`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileOptions {
    /// Use `S_EQ`/`D_EQ` (4.16+) for port equality. When false, `port == p` is compiled as
    /// `port >= p and port <= p`, which every kernel since 2.6 accepts.
    pub port_eq_ops: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions { port_eq_ops: true }
    }
}

/// Why an expression could not be compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileError {
    /// The program would exceed [`MAX_PROGRAM_LEN`] bytes.
    TooLong,
    /// The expression nests deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileError::TooLong => write!(
                f,
                "filter program longer than {MAX_PROGRAM_LEN} bytes (too many conditions)"
            ),
            CompileError::TooDeep => write!(f, "filter nests deeper than {MAX_DEPTH} levels"),
        }
    }
}

impl std::error::Error for CompileError {}

/// Compiles `e` to a program the kernel's audit accepts and that selects exactly the sockets
/// [`eval`] says `e` describes, using `S_EQ`/`D_EQ` (4.16+), and `DEV_COND` (4.8+) /
/// `CGROUP_COND` (5.8+) when `e` uses them.
///
/// Never fails: if the program would not fit a netlink attribute (thousands of conditions) or
/// `e` nests absurdly deep, this returns the match-everything program (`NOP`), so the kernel
/// returns a superset and the caller's userspace filter does the work. Use [`try_compile`] to
/// detect that case.
pub fn compile(e: &Expr) -> Vec<u8> {
    try_compile(e, CompileOptions::default()).unwrap_or_else(|_| nop())
}

/// [`compile`] with options, reporting programs that cannot be expressed.
pub fn try_compile(e: &Expr, opts: CompileOptions) -> Result<Vec<u8>, CompileError> {
    emit(e, opts, 0)
}

fn op_bytes(code: u8, yes: u8, no: u16) -> [u8; 4] {
    let n = no.to_ne_bytes();
    [code, yes, n[0], n[1]]
}

fn nop() -> Vec<u8> {
    op_bytes(op::NOP, 4, 8).to_vec()
}

fn never() -> Vec<u8> {
    op_bytes(op::JMP, 4, 8).to_vec()
}

fn check_len(n: usize) -> Result<usize, CompileError> {
    if n > MAX_PROGRAM_LEN {
        Err(CompileError::TooLong)
    } else {
        Ok(n)
    }
}

/// `no` for a reject jump (to `end + 4`) from an op of `size` bytes; at most 28 + 4.
fn reject_no(size: u8) -> u16 {
    u16::from(size) + 4
}

fn port_op(code: u8, port: u16) -> Vec<u8> {
    let mut v = op_bytes(code, 8, reject_no(8)).to_vec();
    // The port travels in the `no` field of a second, otherwise unused op.
    v.extend_from_slice(&op_bytes(0, 0, port));
    v
}

fn hostcond(code: u8, addr: IpAddr, prefix_len: u8) -> Vec<u8> {
    let (family, bytes, width): (u8, Vec<u8>, u8) = match addr {
        IpAddr::V4(a) => (AF_INET, a.octets().to_vec(), 32),
        IpAddr::V6(a) => (AF_INET6, a.octets().to_vec(), 128),
    };
    // 4 (op) + 8 (family, prefix_len, pad, int port) + address: 16 or 28 bytes.
    let size = 12 + bytes.len() as u8;
    let mut v = op_bytes(code, size, reject_no(size)).to_vec();
    v.push(family);
    v.push(prefix_len.min(width));
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&(-1i32).to_ne_bytes()); // port: -1 = any
    v.extend_from_slice(&bytes);
    v
}

fn cond(c: &Cond, opts: CompileOptions) -> Vec<u8> {
    match *c {
        Cond::SrcPortGe(p) => port_op(op::S_GE, p),
        Cond::SrcPortLe(p) => port_op(op::S_LE, p),
        Cond::DstPortGe(p) => port_op(op::D_GE, p),
        Cond::DstPortLe(p) => port_op(op::D_LE, p),
        Cond::SrcPortEq(p) if opts.port_eq_ops => port_op(op::S_EQ, p),
        Cond::DstPortEq(p) if opts.port_eq_ops => port_op(op::D_EQ, p),
        Cond::SrcPortEq(p) => and2(port_op(op::S_GE, p), port_op(op::S_LE, p)),
        Cond::DstPortEq(p) => and2(port_op(op::D_GE, p), port_op(op::D_LE, p)),
        Cond::SrcPrefix { addr, prefix_len } => hostcond(op::S_COND, addr, prefix_len),
        Cond::DstPrefix { addr, prefix_len } => hostcond(op::D_COND, addr, prefix_len),
        Cond::AutoBound => op_bytes(op::AUTO, 4, 8).to_vec(),
        Cond::Dev(ifindex) => {
            let mut v = op_bytes(op::DEV_COND, 8, reject_no(8)).to_vec();
            v.extend_from_slice(&ifindex.to_ne_bytes());
            v
        }
        Cond::Cgroup(id) => {
            let mut v = op_bytes(op::CGROUP_COND, 12, reject_no(12)).to_vec();
            v.extend_from_slice(&id.to_ne_bytes());
            v
        }
    }
}

/// Relocates the reject jumps of fragment `a` (those with `no == remaining + 4`) by `reloc`
/// bytes, as `ssfilter_patch` does, so they skip a fragment appended after `a`.
fn patch_rejects(a: &mut [u8], reloc: usize) {
    let mut off = 0usize;
    while off + 4 <= a.len() {
        let rem = a.len() - off;
        let yes = usize::from(a[off + 1]);
        let no = usize::from(u16::from_ne_bytes([a[off + 2], a[off + 3]]));
        if no == rem + 4 {
            // Callers check the total length first, so this fits in u16.
            let n = u16::try_from(no + reloc).unwrap_or(u16::MAX);
            a[off + 2..off + 4].copy_from_slice(&n.to_ne_bytes());
        }
        if yes == 0 {
            break;
        }
        off += yes;
    }
}

fn and2(mut a: Vec<u8>, b: Vec<u8>) -> Vec<u8> {
    patch_rejects(&mut a, b.len());
    a.extend_from_slice(&b);
    a
}

fn emit(e: &Expr, opts: CompileOptions, depth: usize) -> Result<Vec<u8>, CompileError> {
    if depth > MAX_DEPTH {
        return Err(CompileError::TooDeep);
    }
    match e {
        Expr::True => Ok(nop()),
        Expr::Cond(c) => Ok(cond(c, opts)),
        Expr::Not(a) => {
            let mut v = emit(a, opts, depth + 1)?;
            check_len(v.len() + 4)?;
            v.extend_from_slice(&op_bytes(op::JMP, 4, 8));
            Ok(v)
        }
        Expr::And(xs) => {
            let mut parts = xs
                .iter()
                .map(|x| emit(x, opts, depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            let Some(mut acc) = parts.pop() else {
                return Ok(nop());
            };
            while let Some(a) = parts.pop() {
                check_len(a.len() + acc.len())?;
                acc = and2(a, acc);
            }
            Ok(acc)
        }
        Expr::Or(xs) => {
            let mut parts = xs
                .iter()
                .map(|x| emit(x, opts, depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            let Some(mut acc) = parts.pop() else {
                return Ok(never());
            };
            while let Some(mut a) = parts.pop() {
                let total = check_len(a.len() + 4 + acc.len())?;
                let skip = u16::try_from(acc.len() + 4).map_err(|_| CompileError::TooLong)?;
                a.reserve(total - a.len());
                a.extend_from_slice(&op_bytes(op::JMP, 4, skip));
                a.extend_from_slice(&acc);
                acc = a;
            }
            Ok(acc)
        }
    }
}

/// What the bytecode can see of a socket (`struct inet_diag_entry`, filled by
/// `inet_diag_bc_sk`).
///
/// The family is that of `src`; a `dst` of the other family is converted (v4 to v4-mapped
/// v6, or v4-mapped v6 to v4, anything else to the unspecified address) so the two always
/// agree, as they do in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BcSocket {
    /// Local address; its variant is the socket family.
    pub src: IpAddr,
    /// Remote address.
    pub dst: IpAddr,
    /// Local port (`inet_num`).
    pub sport: u16,
    /// Remote port.
    pub dport: u16,
    /// `SOCK_BINDPORT_LOCK` is not in `sk_userlocks`: true for sockets that never called
    /// `bind()` with a port, for accepted sockets (the clone drops the lock), and for
    /// TIME-WAIT and SYN-RECV minisockets.
    pub autobound: bool,
    /// `sk_bound_dev_if`.
    pub ifindex: u32,
    /// cgroup v2 id (0 for minisockets).
    pub cgroup_id: u64,
    /// `sk_mark`.
    pub mark: u32,
}

impl BcSocket {
    fn family(&self) -> u8 {
        match self.src {
            IpAddr::V4(_) => AF_INET,
            IpAddr::V6(_) => AF_INET6,
        }
    }

    /// The address as the kernel's `__be32` words see it, in the socket's family.
    fn addr_bytes(&self, a: IpAddr) -> ([u8; 16], usize) {
        let mut out = [0u8; 16];
        match (self.src, a) {
            (IpAddr::V4(_), IpAddr::V4(v)) => {
                out[..4].copy_from_slice(&v.octets());
                (out, 4)
            }
            (IpAddr::V4(_), IpAddr::V6(v)) => {
                if let Some(v4) = v.to_ipv4_mapped() {
                    out[..4].copy_from_slice(&v4.octets());
                }
                (out, 4)
            }
            (IpAddr::V6(_), IpAddr::V6(v)) => (v.octets(), 16),
            (IpAddr::V6(_), IpAddr::V4(v)) => (v.to_ipv6_mapped().octets(), 16),
        }
    }

    fn dst_normalized(&self) -> IpAddr {
        match (self.src, self.dst) {
            (IpAddr::V4(_), IpAddr::V6(v)) => IpAddr::V4(
                v.to_ipv4_mapped()
                    .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
            ),
            (IpAddr::V6(_), IpAddr::V4(v)) => IpAddr::V6(v.to_ipv6_mapped()),
            (_, d) => d,
        }
    }
}

/// `bitstring_match`: the first `bits` bits of `a` and `b` are equal (network bit order).
/// `None` if either is too short to hold them.
fn bitstring_match(a: &[u8], b: &[u8], bits: usize) -> Option<bool> {
    let words = bits >> 5;
    let rem = bits & 0x1f;
    let full = words * 4;
    if a.get(..full)? != b.get(..full)? {
        return Some(false);
    }
    if rem != 0 {
        let w1 = u32::from_be_bytes(a.get(full..full + 4)?.try_into().ok()?);
        let w2 = u32::from_be_bytes(b.get(full..full + 4)?.try_into().ok()?);
        let mask = u32::MAX << (32 - rem);
        if (w1 ^ w2) & mask != 0 {
            return Some(false);
        }
    }
    Some(true)
}

/// Evaluates one hostcond (`INET_DIAG_BC_S_COND`/`D_COND` in `inet_diag_bc_run`); `None`
/// when the argument is out of bounds.
fn run_hostcond(prog: &[u8], at: usize, src: bool, s: &BcSocket) -> Option<bool> {
    let family = u8_at(prog, at)?;
    let prefix_len = usize::from(u8_at(prog, at + 1)?);
    let port = crate::bytes::i32_ne(prog, at + 4)?;
    let cond_addr = prog.get(at + 8..)?;
    let sock_port = if src { s.sport } else { s.dport };
    if port != -1 && port != i32::from(sock_port) {
        return Some(false);
    }
    let (addr, alen) = s.addr_bytes(if src { s.src } else { s.dst });
    let addr = &addr[..alen];
    let entry_family = s.family();
    if family != AF_UNSPEC && family != entry_family {
        if entry_family == AF_INET6 && family == AF_INET {
            let mapped = addr[..10].iter().all(|&b| b == 0) && addr[10] == 0xff && addr[11] == 0xff;
            if mapped && bitstring_match(&addr[12..], cond_addr, prefix_len)? {
                return Some(true);
            }
        }
        return Some(false);
    }
    if prefix_len == 0 {
        return Some(true);
    }
    bitstring_match(addr, cond_addr, prefix_len)
}

/// Runs `program` on `sock` exactly as `inet_diag_bc_run` does for programs that pass
/// [`audit`]. For programs that do not, the kernel would never run them; this returns
/// `false` where the kernel would read out of bounds or loop forever, and never panics.
pub fn run(program: &[u8], sock: &BcSocket) -> bool {
    let mut len = program.len() as isize;
    let mut off = 0usize;
    while len > 0 {
        let (Some(code), Some(yes_step), Some(no_step)) = (
            u8_at(program, off),
            u8_at(program, off + 1),
            u16_ne(program, off + 2),
        ) else {
            return false;
        };
        let arg = off + 4;
        let port_arg = || u16_ne(program, arg + 2);
        let yes = match code {
            op::NOP => Some(true),
            op::JMP => Some(false),
            op::S_EQ => port_arg().map(|p| sock.sport == p),
            op::S_GE => port_arg().map(|p| sock.sport >= p),
            op::S_LE => port_arg().map(|p| sock.sport <= p),
            op::D_EQ => port_arg().map(|p| sock.dport == p),
            op::D_GE => port_arg().map(|p| sock.dport >= p),
            op::D_LE => port_arg().map(|p| sock.dport <= p),
            op::AUTO => Some(sock.autobound),
            op::S_COND => run_hostcond(program, arg, true, sock),
            op::D_COND => run_hostcond(program, arg, false, sock),
            op::DEV_COND => u32_ne(program, arg).map(|i| i == sock.ifindex),
            op::MARK_COND => u32_ne(program, arg)
                .zip(u32_ne(program, arg + 4))
                .map(|(mark, mask)| sock.mark & mask == mark),
            op::CGROUP_COND => u64_ne(program, arg).map(|id| id == sock.cgroup_id),
            // Unknown codes fall out of the kernel's switch with yes = 1.
            _ => Some(true),
        };
        let Some(yes) = yes else {
            return false;
        };
        let step = if yes {
            usize::from(yes_step)
        } else {
            usize::from(no_step)
        };
        if step == 0 {
            return false;
        }
        len -= step as isize;
        off += step;
    }
    len == 0
}

/// Why [`audit_as`] rejected a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditError {
    /// The kernel would answer `EINVAL`.
    Invalid {
        /// Byte offset of the offending op.
        offset: usize,
        /// Which check failed.
        reason: &'static str,
    },
    /// `MARK_COND` without `CAP_NET_ADMIN`: the kernel answers `EPERM`.
    NeedsNetAdmin {
        /// Byte offset of the op.
        offset: usize,
    },
}

impl std::fmt::Display for AuditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditError::Invalid { offset, reason } => {
                write!(f, "invalid filter program at byte {offset}: {reason}")
            }
            AuditError::NeedsNetAdmin { offset } => write!(
                f,
                "filter program uses a mark condition (byte {offset}), which needs CAP_NET_ADMIN"
            ),
        }
    }
}

impl std::error::Error for AuditError {}

/// `valid_cc`: is `cc` (a distance from the end) on the `yes` chain from the start?
fn valid_cc(prog: &[u8], cc: isize) -> bool {
    let mut len = prog.len() as isize;
    let mut off = 0usize;
    while len >= 0 {
        if cc > len {
            return false;
        }
        if cc == len {
            return true;
        }
        let Some(yes) = u8_at(prog, off + 1) else {
            return false;
        };
        if yes < 4 || yes & 3 != 0 {
            return false;
        }
        len -= isize::from(yes);
        off += usize::from(yes);
    }
    false
}

/// Mirrors `inet_diag_bc_audit`, assuming a kernel with `CONFIG_SOCK_CGROUP_DATA` and a caller
/// with `CAP_NET_ADMIN` when `net_admin` is true.
pub fn audit_as(program: &[u8], net_admin: bool) -> Result<(), AuditError> {
    let inval = |offset, reason| Err(AuditError::Invalid { offset, reason });
    if program.len() < 4 {
        return inval(0, "shorter than one op");
    }
    let mut len = program.len() as isize;
    let mut off = 0usize;
    while len > 0 {
        let (Some(code), Some(yes), Some(no)) = (
            u8_at(program, off),
            u8_at(program, off + 1),
            u16_ne(program, off + 2),
        ) else {
            return inval(off, "op header past the end");
        };
        let mut min_len: isize = 4;
        match code {
            op::S_COND | op::D_COND => {
                min_len += 8;
                if len < min_len {
                    return inval(off, "hostcond past the end");
                }
                let alen = match u8_at(program, off + 4) {
                    Some(AF_UNSPEC) => 0,
                    Some(AF_INET) => 4,
                    Some(AF_INET6) => 16,
                    _ => return inval(off, "hostcond family"),
                };
                min_len += alen;
                if len < min_len {
                    return inval(off, "hostcond address past the end");
                }
                if u8_at(program, off + 5).is_none_or(|p| isize::from(p) > 8 * alen) {
                    return inval(off, "prefix longer than the address");
                }
            }
            op::DEV_COND => {
                min_len += 4;
                if len < min_len {
                    return inval(off, "ifindex past the end");
                }
            }
            op::S_EQ | op::S_GE | op::S_LE | op::D_EQ | op::D_GE | op::D_LE => {
                min_len += 4;
                if len < min_len {
                    return inval(off, "port operand past the end");
                }
            }
            op::MARK_COND => {
                if !net_admin {
                    return Err(AuditError::NeedsNetAdmin { offset: off });
                }
                min_len += 8;
                if len < min_len {
                    return inval(off, "markcond past the end");
                }
            }
            op::CGROUP_COND => {
                min_len += 8;
                if len < min_len {
                    return inval(off, "cgroup id past the end");
                }
            }
            op::AUTO | op::JMP | op::NOP => {}
            _ => return inval(off, "unknown op code"),
        }
        if code != op::NOP {
            let no = no as isize;
            if no < min_len || no > len + 4 || no & 3 != 0 {
                return inval(off, "bad no offset");
            }
            if no < len && !valid_cc(program, len - no) {
                return inval(off, "no target not on the yes chain");
            }
        }
        let yes = isize::from(yes);
        if yes < min_len || yes > len + 4 || yes & 3 != 0 {
            return inval(off, "bad yes offset");
        }
        off += yes as usize;
        len -= yes;
    }
    if len == 0 {
        Ok(())
    } else {
        inval(off, "last op jumps past the end")
    }
}

/// `true` iff [`audit_as`]`(program, true)` accepts: the kernel's `inet_diag_bc_audit` would
/// return 0 for a `CAP_NET_ADMIN` caller.
pub fn audit(program: &[u8]) -> bool {
    audit_as(program, true).is_ok()
}

fn prefix_match(addr: IpAddr, prefix_len: u8, sock_addr: IpAddr) -> bool {
    match (addr, sock_addr) {
        (IpAddr::V4(c), IpAddr::V4(a)) => {
            let n = u32::from(prefix_len.min(32));
            let mask = if n == 0 { 0 } else { u32::MAX << (32 - n) };
            (u32::from(c) ^ u32::from(a)) & mask == 0
        }
        (IpAddr::V6(c), IpAddr::V6(a)) => {
            let n = u32::from(prefix_len.min(128));
            let mask = if n == 0 { 0 } else { u128::MAX << (128 - n) };
            (u128::from(c) ^ u128::from(a)) & mask == 0
        }
        // An AF_INET condition matches a v4-mapped address of an AF_INET6 socket.
        (IpAddr::V4(_), IpAddr::V6(a)) => match a.to_ipv4_mapped() {
            Some(v4) => prefix_match(addr, prefix_len, IpAddr::V4(v4)),
            None => false,
        },
        (IpAddr::V6(_), IpAddr::V4(_)) => false,
    }
}

/// The meaning of `e` for one socket, stated directly (not through bytecode). [`compile`]
/// produces programs with `run(&compile(e), s) == eval(e, s)` for every socket.
pub fn eval(e: &Expr, s: &BcSocket) -> bool {
    match e {
        Expr::True => true,
        Expr::Cond(c) => match *c {
            Cond::SrcPortGe(p) => s.sport >= p,
            Cond::SrcPortLe(p) => s.sport <= p,
            Cond::DstPortGe(p) => s.dport >= p,
            Cond::DstPortLe(p) => s.dport <= p,
            Cond::SrcPortEq(p) => s.sport == p,
            Cond::DstPortEq(p) => s.dport == p,
            Cond::SrcPrefix { addr, prefix_len } => prefix_match(addr, prefix_len, s.src),
            Cond::DstPrefix { addr, prefix_len } => {
                prefix_match(addr, prefix_len, s.dst_normalized())
            }
            Cond::AutoBound => s.autobound,
            Cond::Cgroup(id) => s.cgroup_id == id,
            Cond::Dev(i) => s.ifindex == i,
        },
        Expr::And(xs) => xs.iter().all(|x| eval(x, s)),
        Expr::Or(xs) => xs.iter().any(|x| eval(x, s)),
        Expr::Not(x) => !eval(x, s),
    }
}

/// `SOCK_BINDPORT_LOCK` as [`BcSocket::autobound`] expects it: `autobound = userlocks &
/// SOCK_BINDPORT_LOCK == 0`.
pub fn autobound_from_userlocks(userlocks: u16) -> bool {
    userlocks & SOCK_BINDPORT_LOCK == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_port_matches_the_tested_encoding() {
        // doc/reference/linux.md#kernel-filters: `[S_EQ,8,12][0,0,P][JMP,4,12][D_EQ,8,12][0,0,P]`.
        let p = 8080u16;
        let prog = compile(&either_port_in(&[(p, p)]));
        let mut want = Vec::new();
        for (c, y, n) in [
            (op::S_EQ, 8, 12),
            (0, 0, p),
            (op::JMP, 4, 12),
            (op::D_EQ, 8, 12),
            (0, 0, p),
        ] {
            want.extend_from_slice(&op_bytes(c, y, n));
        }
        assert_eq!(prog, want);
        assert!(audit(&prog));
    }

    #[test]
    fn empty_and_trivial_programs() {
        let s = BcSocket {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            sport: 1,
            dport: 2,
            autobound: false,
            ifindex: 0,
            cgroup_id: 0,
            mark: 0,
        };
        assert!(!audit(&[]));
        assert!(run(&compile(&Expr::True), &s));
        assert!(!run(&compile(&Expr::never()), &s));
        assert!(audit(&compile(&Expr::never())));
        assert!(run(&compile(&Expr::not(Expr::never())), &s));
        // yes = 0 would loop forever in an unaudited kernel; here it just fails.
        assert!(!run(&[0, 0, 0, 0], &s));
        assert!(!audit(&[0, 0, 0, 0]));
    }

    #[test]
    fn too_long_falls_back_to_match_all() {
        let many: Vec<(u16, u16)> = (0..5000).map(|p| (p * 2, p * 2)).collect();
        let e = either_port_in(&many);
        assert_eq!(
            try_compile(&e, CompileOptions::default()),
            Err(CompileError::TooLong)
        );
        assert_eq!(compile(&e), nop());
    }
}
