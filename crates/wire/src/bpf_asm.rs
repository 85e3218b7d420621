//! A small eBPF assembler: the instruction encoding of `include/uapi/linux/bpf.h` and
//! `bpf_common.h`, labels for forward and backward jumps, and the two 16-byte loads that name a
//! map (`BPF_PSEUDO_MAP_FD`, `BPF_PSEUDO_MAP_VALUE`). sockstat builds its BPF programs with it
//! at run time, with struct member offsets read from the running kernel's BTF, so that no C
//! compiler, kernel headers or BPF object file are needed to build or run it.
//!
//! Pure: it only encodes. Whether the kernel accepts a program is the verifier's business; the
//! tests of each program check its shape (every jump lands inside, helper calls in order).

/// A register: `R0` (return values) to `R10` (the read-only frame pointer).
pub type Reg = u8;

/// Return value of helpers and of the program.
pub const R0: Reg = 0;
/// First helper argument; the context on entry.
pub const R1: Reg = 1;
/// Second helper argument.
pub const R2: Reg = 2;
/// Third helper argument.
pub const R3: Reg = 3;
/// Fourth helper argument.
pub const R4: Reg = 4;
/// Fifth helper argument.
pub const R5: Reg = 5;
/// Callee-saved.
pub const R6: Reg = 6;
/// Callee-saved.
pub const R7: Reg = 7;
/// Callee-saved.
pub const R8: Reg = 8;
/// Callee-saved.
pub const R9: Reg = 9;
/// The frame pointer (read-only; the stack is the 512 bytes below it).
pub const FP: Reg = 10;

/// Helper function numbers (`enum bpf_func_id`, `___BPF_FUNC_MAPPER`).
pub mod helper {
    /// `bpf_map_lookup_elem(map, key)`.
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    /// `bpf_map_update_elem(map, key, value, flags)`.
    pub const MAP_UPDATE_ELEM: i32 = 2;
    /// `bpf_map_delete_elem(map, key)`.
    pub const MAP_DELETE_ELEM: i32 = 3;
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC.
    pub const KTIME_GET_NS: i32 = 5;
    /// `bpf_get_current_pid_tgid()`: tgid << 32 | pid, in the initial pid namespace.
    pub const GET_CURRENT_PID_TGID: i32 = 14;
    /// `bpf_get_current_uid_gid()`: gid << 32 | uid.
    pub const GET_CURRENT_UID_GID: i32 = 15;
    /// `bpf_get_current_comm(buf, size)`.
    pub const GET_CURRENT_COMM: i32 = 16;
    /// `bpf_get_socket_cookie(sk)` (on a BTF socket pointer in tracing programs, 5.12).
    pub const GET_SOCKET_COOKIE: i32 = 46;
    /// `bpf_sk_storage_get(map, sk, value, flags)`.
    pub const SK_STORAGE_GET: i32 = 107;
    /// `bpf_sk_storage_delete(map, sk)`.
    pub const SK_STORAGE_DELETE: i32 = 108;
    /// `bpf_probe_read_kernel(dst, size, src)`.
    pub const PROBE_READ_KERNEL: i32 = 113;
    /// `bpf_ringbuf_output(ringbuf, data, size, flags)`.
    pub const RINGBUF_OUTPUT: i32 = 130;
    /// `bpf_skc_to_tcp_sock(sk)`: the socket as a `struct tcp_sock`, or NULL.
    pub const SKC_TO_TCP_SOCK: i32 = 137;
    /// `bpf_seq_write(seq, data, len)`.
    pub const SEQ_WRITE: i32 = 127;
    /// `bpf_get_current_task_btf()`.
    pub const GET_CURRENT_TASK_BTF: i32 = 158;
}

/// Operand size of a load or store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// 1 byte.
    B,
    /// 2 bytes.
    H,
    /// 4 bytes.
    W,
    /// 8 bytes.
    DW,
}

impl Size {
    /// The size with this many bytes (1, 2, 4 or 8).
    pub fn of(bytes: u32) -> Option<Size> {
        Some(match bytes {
            1 => Size::B,
            2 => Size::H,
            4 => Size::W,
            8 => Size::DW,
            _ => return None,
        })
    }

    fn code(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
            Size::DW => 0x18,
        }
    }
}

/// A 64-bit arithmetic operation (`BPF_ALU64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alu {
    /// `dst += src`.
    Add = 0x00,
    /// `dst -= src`.
    Sub = 0x10,
    /// `dst *= src`.
    Mul = 0x20,
    /// `dst |= src`.
    Or = 0x40,
    /// `dst &= src`.
    And = 0x50,
    /// `dst <<= src`.
    Lsh = 0x60,
    /// `dst >>= src` (logical).
    Rsh = 0x70,
    /// `dst ^= src`.
    Xor = 0xa0,
    /// `dst = src`.
    Mov = 0xb0,
}

/// A jump condition (`BPF_JMP`), unsigned unless named otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// `==`.
    Eq = 0x10,
    /// `>`.
    Gt = 0x20,
    /// `>=`.
    Ge = 0x30,
    /// `& != 0`.
    Set = 0x40,
    /// `!=`.
    Ne = 0x50,
    /// signed `>`.
    Sgt = 0x60,
    /// signed `<`.
    Slt = 0xc0,
    /// `<`.
    Lt = 0xa0,
    /// `<=`.
    Le = 0xb0,
}

// Instruction classes and modes.
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;
const ALU32: u8 = 0x04;
const MEM: u8 = 0x60;
const IMM: u8 = 0x00;
const ATOMIC: u8 = 0xc0;
const K: u8 = 0x00;
const X: u8 = 0x08;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
const JA: u8 = 0x00;
/// `BPF_PSEUDO_MAP_FD`: the 64-bit immediate is a map file descriptor.
const PSEUDO_MAP_FD: u8 = 1;
/// `BPF_PSEUDO_MAP_VALUE`: a map fd and an offset into its (single) value.
const PSEUDO_MAP_VALUE: u8 = 2;

/// One encoded instruction (`struct bpf_insn`, little-endian as on every host sockstat runs).
pub fn insn(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> u64 {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (src << 4) | (dst & 0x0f);
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    u64::from_le_bytes(b)
}

/// The fields of an encoded instruction: (code, dst, src, off, imm).
pub fn decode(i: u64) -> (u8, Reg, Reg, i16, i32) {
    let b = i.to_le_bytes();
    (
        b[0],
        b[1] & 0x0f,
        b[1] >> 4,
        i16::from_le_bytes([b[2], b[3]]),
        i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
    )
}

/// A place in the program that jumps go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(usize);

/// A program under construction.
#[derive(Debug, Default)]
pub struct Asm {
    code: Vec<u64>,
    /// Where each label was placed.
    labels: Vec<Option<usize>>,
    /// (instruction index, label) of every jump.
    jumps: Vec<(usize, Label)>,
    /// An offset or immediate that did not fit its field: reported by `finish`.
    error: Option<String>,
}

impl Asm {
    /// An empty program.
    pub fn new() -> Asm {
        Asm::default()
    }

    /// Instructions so far.
    pub fn len(&self) -> usize {
        self.code.len()
    }

    /// True before the first instruction.
    pub fn is_empty(&self) -> bool {
        self.code.is_empty()
    }

    fn push(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) {
        self.code.push(insn(code, dst, src, off, imm));
    }

    fn off16(&mut self, off: i64) -> i16 {
        match i16::try_from(off) {
            Ok(o) => o,
            Err(_) => {
                self.error
                    .get_or_insert(format!("offset {off} does not fit an instruction"));
                0
            }
        }
    }

    /// A new, unplaced label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Places `l` at the next instruction.
    pub fn place(&mut self, l: Label) {
        if self.labels[l.0].is_some() {
            self.error.get_or_insert("a label placed twice".into());
        }
        self.labels[l.0] = Some(self.code.len());
    }

    /// `dst = imm` (sign-extended to 64 bits).
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) {
        self.push(ALU64 | Alu::Mov as u8 | K, dst, 0, 0, imm);
    }

    /// `dst = src`.
    pub fn mov(&mut self, dst: Reg, src: Reg) {
        self.push(ALU64 | Alu::Mov as u8 | X, dst, src, 0, 0);
    }

    /// `dst = (u32)src` (the upper half zeroed).
    pub fn mov32(&mut self, dst: Reg, src: Reg) {
        self.push(ALU32 | Alu::Mov as u8 | X, dst, src, 0, 0);
    }

    /// `dst = dst <op> imm`.
    pub fn alu_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        self.push(ALU64 | op as u8 | K, dst, 0, 0, imm);
    }

    /// `dst = dst <op> src`.
    pub fn alu(&mut self, op: Alu, dst: Reg, src: Reg) {
        self.push(ALU64 | op as u8 | X, dst, src, 0, 0);
    }

    /// `dst = *(size *)(src + off)`.
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i64) {
        let off = self.off16(off);
        self.push(LDX | MEM | size.code(), dst, src, off, 0);
    }

    /// `*(size *)(base + off) = src`.
    pub fn store(&mut self, size: Size, base: Reg, off: i64, src: Reg) {
        let off = self.off16(off);
        self.push(STX | MEM | size.code(), base, src, off, 0);
    }

    /// `*(size *)(base + off) = imm`.
    pub fn store_imm(&mut self, size: Size, base: Reg, off: i64, imm: i32) {
        let off = self.off16(off);
        self.push(ST | MEM | size.code(), base, 0, off, imm);
    }

    /// `lock *(size *)(base + off) += src` (size W or DW).
    pub fn atomic_add(&mut self, size: Size, base: Reg, off: i64, src: Reg) {
        let off = self.off16(off);
        self.push(STX | ATOMIC | size.code(), base, src, off, 0);
    }

    /// `if dst <cond> imm goto to`.
    pub fn jump_imm(&mut self, cond: Cond, dst: Reg, imm: i32, to: Label) {
        self.jumps.push((self.code.len(), to));
        self.push(JMP | cond as u8 | K, dst, 0, 0, imm);
    }

    /// `if dst <cond> src goto to`.
    pub fn jump_reg(&mut self, cond: Cond, dst: Reg, src: Reg, to: Label) {
        self.jumps.push((self.code.len(), to));
        self.push(JMP | cond as u8 | X, dst, src, 0, 0);
    }

    /// `goto to`.
    pub fn goto(&mut self, to: Label) {
        self.jumps.push((self.code.len(), to));
        self.push(JMP | JA, 0, 0, 0, 0);
    }

    /// Calls a helper (see [`helper`]); R1-R5 are its arguments, R0 its result, R1-R5 are
    /// clobbered.
    pub fn call(&mut self, helper: i32) {
        self.push(JMP | CALL, 0, 0, 0, helper);
    }

    /// `return R0`.
    pub fn exit(&mut self) {
        self.push(JMP | EXIT, 0, 0, 0, 0);
    }

    /// `dst = imm64` (two instruction slots).
    pub fn ld_imm64(&mut self, dst: Reg, imm: u64) {
        self.push(LD | Size::DW.code() | IMM, dst, 0, 0, imm as u32 as i32);
        self.push(0, 0, 0, 0, (imm >> 32) as u32 as i32);
    }

    /// `dst = the map with file descriptor fd` (for helpers that take a map).
    pub fn ld_map_fd(&mut self, dst: Reg, fd: i32) {
        self.push(LD | Size::DW.code() | IMM, dst, PSEUDO_MAP_FD, 0, fd);
        self.push(0, 0, 0, 0, 0);
    }

    /// `dst = &value[off]` of the single-entry array map `fd`, with no lookup call.
    pub fn ld_map_value(&mut self, dst: Reg, fd: i32, off: u32) {
        self.push(LD | Size::DW.code() | IMM, dst, PSEUDO_MAP_VALUE, 0, fd);
        self.push(0, 0, 0, 0, off as i32);
    }

    /// Stores `bytes` zero bytes from `fp + off` (both multiples of 8).
    pub fn zero_stack(&mut self, off: i64, bytes: u32) {
        for i in 0..i64::from(bytes / 8) {
            self.store_imm(Size::DW, FP, off + i * 8, 0);
        }
    }

    /// The finished program: every jump resolved to its label. Errors name what does not
    /// encode (a label never placed, an offset out of range).
    pub fn finish(mut self) -> Result<Vec<u64>, String> {
        for &(at, Label(l)) in &self.jumps {
            let Some(to) = self.labels[l] else {
                return Err("a jump to a label that was never placed".into());
            };
            let rel = to as i64 - at as i64 - 1;
            let rel = i16::try_from(rel).map_err(|_| format!("jump of {rel} out of range"))?;
            let mut b = self.code[at].to_le_bytes();
            b[2..4].copy_from_slice(&rel.to_le_bytes());
            self.code[at] = u64::from_le_bytes(b);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.code.is_empty() || decode(*self.code.last().unwrap_or(&0)).0 != JMP | EXIT {
            return Err("a program must end with exit".into());
        }
        Ok(self.code)
    }
}

/// True for a conditional or unconditional jump (not a call or exit).
pub fn is_jump(i: u64) -> bool {
    let (code, ..) = decode(i);
    code & 0x07 == JMP && !matches!(code & 0xf0, CALL | EXIT)
}

/// The helper a call instruction calls.
pub fn called_helper(i: u64) -> Option<i32> {
    let (code, _, _, _, imm) = decode(i);
    (code == JMP | CALL).then_some(imm)
}

/// Checks what the kernel's verifier would reject first in any program, so that a mistake in
/// an assembler shows up in a unit test rather than on a user's machine: every jump lands on an
/// instruction inside the program (not in the middle of a 16-byte load), and the program ends
/// with `exit` or an unconditional jump.
pub fn check_jumps(code: &[u64]) -> Result<(), String> {
    // Second halves of 16-byte loads are not instructions.
    let mut second = vec![false; code.len()];
    let mut i = 0;
    while i < code.len() {
        if decode(code[i]).0 == LD | Size::DW.code() | IMM {
            if i + 1 >= code.len() {
                return Err(format!("truncated 16-byte load at {i}"));
            }
            second[i + 1] = true;
            i += 2;
        } else {
            i += 1;
        }
    }
    for (at, &ins) in code.iter().enumerate() {
        if second[at] || !is_jump(ins) {
            continue;
        }
        let to = at as i64 + 1 + i64::from(decode(ins).3);
        if to < 0 || to >= code.len() as i64 || second[to as usize] {
            return Err(format!("jump at {at} lands outside the program ({to})"));
        }
    }
    match code.last().map(|&i| decode(i).0) {
        Some(c) if c == JMP | EXIT || c == JMP | JA => Ok(()),
        _ => Err("the program does not end with exit".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_the_uapi() {
        // r0 = 0; exit: b7 00 00 00 00 00 00 00 / 95 00 ...
        assert_eq!(
            insn(0xb7, 0, 0, 0, 0).to_le_bytes(),
            [0xb7, 0, 0, 0, 0, 0, 0, 0]
        );
        let mut a = Asm::new();
        a.load(Size::DW, R6, R1, 8); // 79 16 08 00 00 00 00 00
        a.store(Size::W, FP, -4, R2); // 63 2a fc ff 00 00 00 00
        a.atomic_add(Size::DW, R1, 0, R2); // db 21 00 00 00 00 00 00
        a.ld_map_fd(R1, 7); // 18 11 00 00 07 00 00 00 / 0
        a.mov_imm(R0, 0);
        a.exit();
        let p = a.finish().unwrap();
        assert_eq!(p[0].to_le_bytes(), [0x79, 0x16, 8, 0, 0, 0, 0, 0]);
        assert_eq!(p[1].to_le_bytes(), [0x63, 0x2a, 0xfc, 0xff, 0, 0, 0, 0]);
        assert_eq!(p[2].to_le_bytes(), [0xdb, 0x21, 0, 0, 0, 0, 0, 0]);
        assert_eq!(p[3].to_le_bytes(), [0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(p[4], 0);
        assert_eq!(p[6].to_le_bytes(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        check_jumps(&p).unwrap();
    }

    #[test]
    fn labels_resolve_forward_and_back() {
        let mut a = Asm::new();
        let top = a.label();
        let out = a.label();
        a.place(top);
        a.mov_imm(R0, 1); // 0
        a.jump_imm(Cond::Eq, R0, 0, out); // 1 -> 4
        a.ld_imm64(R2, 1 << 40); // 2, 3
        a.goto(top); // 4 -> 0
        a.place(out);
        a.exit(); // 5
        let p = a.finish().unwrap();
        assert_eq!(decode(p[1]).3, 3);
        assert_eq!(decode(p[4]).3, -5);
        assert_eq!(decode(p[2]).4 as u32, 0);
        assert_eq!(decode(p[3]).4, 256);
        check_jumps(&p).unwrap();
    }

    #[test]
    fn mistakes_are_errors() {
        let mut a = Asm::new();
        let l = a.label();
        a.goto(l);
        a.exit();
        assert!(a.finish().unwrap_err().contains("never placed"));
        let mut a = Asm::new();
        a.load(Size::W, R0, R1, 40_000);
        a.exit();
        assert!(a.finish().unwrap_err().contains("40000"));
        let mut a = Asm::new();
        a.mov_imm(R0, 0);
        assert!(a.finish().unwrap_err().contains("exit"));
        // A jump into the second half of a 16-byte load.
        let bad = [
            insn(JMP | Cond::Eq as u8, 0, 0, 1, 0),
            insn(LD | 0x18, 1, 1, 0, 3),
            0,
            insn(JMP | EXIT, 0, 0, 0, 0),
        ];
        assert!(check_jumps(&bad).is_err());
        assert_eq!(Size::of(3), None);
        assert_eq!(called_helper(insn(JMP | CALL, 0, 0, 0, 130)), Some(130));
    }
}
