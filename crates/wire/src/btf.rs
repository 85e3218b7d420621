//! BPF Type Format (`include/uapi/linux/btf.h`): just enough to find, in the kernel's own type
//! information (`/sys/kernel/btf/vmlinux`), the id of a function and the byte offset and size of
//! a few struct members. The owner scan's BPF iterator is assembled with those offsets, so it
//! reads the running kernel's layout instead of one assumed at build time (what CO-RE
//! relocations do, for the handful of fields it needs).
//!
//! [`Btf::parse`] checks the header and walks the type section once, recording where each type
//! starts (the section is variable-length, so ids cannot be indexed otherwise); lookups then
//! compare names in place. Nothing is copied. Every offset read from the input is bounds-checked:
//! a truncated or hostile blob gives a [`DecodeError`], never a panic.

use crate::bytes::{u16_ne, u32_ne};
use crate::DecodeError;

/// `BTF_MAGIC`.
pub const MAGIC: u16 = 0xeb9f;

const WHAT: &str = "btf";
const HEADER_LEN: usize = 24;
const TYPE_LEN: usize = 12;

/// BTF kinds (`BTF_KIND_*`) that lookups distinguish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// `BTF_KIND_INT`.
    Int = 1,
    /// `BTF_KIND_PTR`.
    Ptr = 2,
    /// `BTF_KIND_ARRAY`.
    Array = 3,
    /// `BTF_KIND_STRUCT`.
    Struct = 4,
    /// `BTF_KIND_UNION`.
    Union = 5,
    /// `BTF_KIND_ENUM`.
    Enum = 6,
    /// `BTF_KIND_TYPEDEF`.
    Typedef = 8,
    /// `BTF_KIND_FUNC`.
    Func = 12,
}

/// A struct or union member, resolved through anonymous members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Byte offset from the start of the outer struct.
    pub offset: u32,
    /// The member's type id.
    pub type_id: u32,
}

/// A parsed BTF blob, borrowing the input.
#[derive(Debug)]
pub struct Btf<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// Start of each type's record in `types`, indexed by id - 1 (id 0 is `void`).
    starts: Vec<u32>,
}

/// Bytes that follow a type's 12-byte record, by kind (`btf.h`).
fn trailer_len(kind: u8, vlen: usize) -> Option<usize> {
    Some(match kind {
        1 => 4,                    // INT: encoding
        2 | 7..=12 | 16 | 18 => 0, // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
        3 => 12,                   // ARRAY
        4 | 5 => vlen * 12,        // STRUCT, UNION: btf_member
        6 => vlen * 8,             // ENUM: btf_enum
        13 => vlen * 8,            // FUNC_PROTO: btf_param
        14 => 4,                   // VAR
        15 => vlen * 12,           // DATASEC: btf_var_secinfo
        17 => 4,                   // DECL_TAG
        19 => vlen * 12,           // ENUM64
        _ => return None,
    })
}

impl<'a> Btf<'a> {
    /// Checks the header and indexes every type of a BTF blob (native byte order, as the kernel
    /// exports it).
    pub fn parse(data: &'a [u8]) -> Result<Btf<'a>, DecodeError> {
        if data.len() < HEADER_LEN {
            return Err(DecodeError::truncated(WHAT, HEADER_LEN, data.len()));
        }
        let field = |off: usize| u32_ne(data, off).unwrap_or(0) as usize;
        if u16_ne(data, 0) != Some(MAGIC) {
            return Err(DecodeError::malformed(
                WHAT,
                0,
                "bad magic (not BTF, or other-endian)",
            ));
        }
        let hdr_len = field(4);
        if hdr_len < HEADER_LEN || hdr_len > data.len() {
            return Err(DecodeError::malformed(
                WHAT,
                4,
                "header length out of range",
            ));
        }
        let section = |off_field: usize| -> Result<&'a [u8], DecodeError> {
            let start = hdr_len
                .checked_add(field(off_field))
                .ok_or(DecodeError::malformed(
                    WHAT,
                    off_field,
                    "section offset overflows",
                ))?;
            let end = start
                .checked_add(field(off_field + 4))
                .ok_or(DecodeError::malformed(
                    WHAT,
                    off_field,
                    "section length overflows",
                ))?;
            data.get(start..end).ok_or(DecodeError::malformed(
                WHAT,
                off_field,
                "section outside the blob",
            ))
        };
        let types = section(8)?;
        let strings = section(16)?;
        let mut starts = Vec::with_capacity(types.len() / 24);
        let mut pos = 0usize;
        while pos < types.len() {
            let info = u32_ne(types, pos + 4).ok_or(DecodeError::truncated(
                WHAT,
                pos + TYPE_LEN,
                types.len(),
            ))?;
            let kind = ((info >> 24) & 0x1f) as u8;
            let vlen = (info & 0xffff) as usize;
            let extra = trailer_len(kind, vlen).ok_or(DecodeError::malformed(
                WHAT,
                pos,
                "unknown type kind",
            ))?;
            let next = pos + TYPE_LEN + extra;
            if next > types.len() {
                return Err(DecodeError::truncated(WHAT, next, types.len()));
            }
            let start =
                u32::try_from(pos).map_err(|_| DecodeError::malformed(WHAT, pos, "too large"))?;
            starts.push(start);
            pos = next;
        }
        Ok(Btf {
            types,
            strings,
            starts,
        })
    }

    /// Number of types (ids run from 1 to this).
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// True when the blob holds no types.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    fn record(&self, id: u32) -> Option<(usize, u8, usize, u32, u32)> {
        let start = *self.starts.get((id as usize).checked_sub(1)?)? as usize;
        let name_off = u32_ne(self.types, start)?;
        let info = u32_ne(self.types, start + 4)?;
        let size_or_type = u32_ne(self.types, start + 8)?;
        Some((
            start,
            ((info >> 24) & 0x1f) as u8,
            (info & 0xffff) as usize,
            name_off,
            size_or_type,
        ))
    }

    fn name_is(&self, name_off: u32, name: &[u8]) -> bool {
        let Some(rest) = self.strings.get(name_off as usize..) else {
            return false;
        };
        rest.len() > name.len() && rest.starts_with(name) && rest[name.len()] == 0
    }

    /// The id of the first type of `kind` named `name`.
    pub fn find(&self, kind: Kind, name: &str) -> Option<u32> {
        let name = name.as_bytes();
        (1..=self.starts.len() as u32).find(|&id| {
            self.record(id)
                .is_some_and(|(_, k, _, off, _)| k == kind as u8 && self.name_is(off, name))
        })
    }

    /// The ids of the first type of each (kind, name), in one pass over the types (each
    /// [`find`](Btf::find) is a pass of its own).
    pub fn find_all(&self, wanted: &[(Kind, &str)]) -> Vec<Option<u32>> {
        let mut found: Vec<Option<u32>> = vec![None; wanted.len()];
        let mut left = wanted.len();
        for id in 1..=self.starts.len() as u32 {
            if left == 0 {
                break;
            }
            let Some((_, k, _, off, _)) = self.record(id) else {
                continue;
            };
            if off == 0 {
                continue;
            }
            for (slot, (kind, name)) in found.iter_mut().zip(wanted) {
                if slot.is_none() && k == *kind as u8 && self.name_is(off, name.as_bytes()) {
                    *slot = Some(id);
                    left -= 1;
                }
            }
        }
        found
    }

    /// The member `name` of the struct or union `id`, looking inside anonymous struct and union
    /// members (the kernel wraps fields in those, e.g. `randomized_struct_fields_start`).
    /// Bitfields are not returned: nothing here can load them.
    pub fn member(&self, id: u32, name: &str) -> Option<Member> {
        self.member_at(id, name.as_bytes(), 0, 0)
    }

    fn member_at(&self, id: u32, name: &[u8], base: u32, depth: u8) -> Option<Member> {
        if depth > 8 {
            return None;
        }
        let (start, kind, vlen, _, _) = self.record(id)?;
        if kind != Kind::Struct as u8 && kind != Kind::Union as u8 {
            return None;
        }
        let kind_flag = u32_ne(self.types, start + 4)? >> 31 == 1;
        for i in 0..vlen {
            let m = start + TYPE_LEN + i * 12;
            let m_name = u32_ne(self.types, m)?;
            let m_type = u32_ne(self.types, m + 4)?;
            let raw_off = u32_ne(self.types, m + 8)?;
            // With kind_flag, the top 8 bits are a bitfield size and the rest the bit offset.
            let (bits, bitfield) = if kind_flag {
                (raw_off & 0x00ff_ffff, raw_off >> 24 != 0)
            } else {
                (raw_off, false)
            };
            if m_name == 0 {
                let resolved = self.skip_modifiers(m_type)?;
                if bits % 8 == 0 {
                    if let Some(found) =
                        self.member_at(resolved, name, base.checked_add(bits / 8)?, depth + 1)
                    {
                        return Some(found);
                    }
                }
                continue;
            }
            if self.name_is(m_name, name) {
                if bitfield || bits % 8 != 0 {
                    return None;
                }
                return Some(Member {
                    offset: base.checked_add(bits / 8)?,
                    type_id: m_type,
                });
            }
        }
        None
    }

    /// Follows typedef, volatile, const, restrict and type tags to the underlying type.
    pub fn skip_modifiers(&self, mut id: u32) -> Option<u32> {
        for _ in 0..32 {
            let (_, kind, _, _, next) = self.record(id)?;
            match kind {
                8..=11 | 18 => id = next,
                _ => return Some(id),
            }
        }
        None
    }

    /// The size in bytes of a type: integers, enums, structs and unions by their declared size,
    /// pointers as 8 (the BTF of a 64-bit kernel), arrays by element size times count.
    ///
    /// Arrays of arrays are followed at most 32 deep, so an array that is (through modifiers) its
    /// own element, which only a corrupt BTF can say, has no size instead of no end.
    pub fn size_of(&self, id: u32) -> Option<u32> {
        let mut id = id;
        let mut count: u32 = 1;
        for _ in 0..32 {
            id = self.skip_modifiers(id)?;
            let (start, kind, _, _, size) = self.record(id)?;
            match kind {
                1 | 4 | 5 | 6 | 16 | 19 => return size.checked_mul(count),
                2 => return 8u32.checked_mul(count),
                3 => {
                    id = u32_ne(self.types, start + TYPE_LEN)?;
                    count = count.checked_mul(u32_ne(self.types, start + TYPE_LEN + 8)?)?;
                }
                _ => return None,
            }
        }
        None
    }

    /// The kind of a type after modifiers, if it is one of [`Kind`]'s.
    pub fn kind_of(&self, id: u32) -> Option<Kind> {
        let (_, kind, _, _, _) = self.record(self.skip_modifiers(id)?)?;
        Some(match kind {
            1 => Kind::Int,
            2 => Kind::Ptr,
            3 => Kind::Array,
            4 => Kind::Struct,
            5 => Kind::Union,
            6 => Kind::Enum,
            8 => Kind::Typedef,
            12 => Kind::Func,
            _ => return None,
        })
    }

    /// For an array type, its element type.
    pub fn array_elem(&self, id: u32) -> Option<u32> {
        let id = self.skip_modifiers(id)?;
        let (start, kind, _, _, _) = self.record(id)?;
        (kind == Kind::Array as u8).then(|| u32_ne(self.types, start + TYPE_LEN))?
    }

    /// For a pointer type, the type it points to (after modifiers).
    pub fn pointee(&self, id: u32) -> Option<u32> {
        let id = self.skip_modifiers(id)?;
        let (_, kind, _, _, target) = self.record(id)?;
        (kind == Kind::Ptr as u8).then(|| self.skip_modifiers(target))?
    }
}

impl Btf<'_> {
    /// The parameter types of a function, a function prototype, or a typedef of a pointer to
    /// one (what the kernel's `btf_trace_<tracepoint>` typedefs are), in order. `None` when
    /// `id` is none of those.
    pub fn params(&self, id: u32) -> Option<Vec<u32>> {
        let mut id = self.skip_modifiers(id)?;
        for _ in 0..4 {
            let (start, kind, vlen, _, next) = self.record(id)?;
            match kind {
                12 | 2 => id = self.skip_modifiers(next)?, // FUNC, PTR: to the prototype
                13 => {
                    return (0..vlen)
                        .map(|i| u32_ne(self.types, start + TYPE_LEN + i * 8 + 4))
                        .collect();
                }
                _ => return None,
            }
        }
        None
    }

    /// The return type of a function or function prototype (0 for `void`).
    pub fn return_type(&self, id: u32) -> Option<u32> {
        let (_, kind, _, _, next) = self.record(self.skip_modifiers(id)?)?;
        match kind {
            12 => self.return_type(next),
            13 => Some(next),
            _ => None,
        }
    }

    /// The name of a type (empty for anonymous ones).
    pub fn name_of(&self, id: u32) -> Option<&str> {
        let (_, _, _, off, _) = self.record(id)?;
        self.string(off)
    }

    fn string(&self, off: u32) -> Option<&str> {
        let rest = self.strings.get(off as usize..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        std::str::from_utf8(&rest[..end]).ok()
    }

    /// Every (name, value) of the enum `id` (32- or 64-bit, values as signed 64-bit).
    pub fn enum_members(&self, id: u32) -> Option<Vec<(&str, i64)>> {
        let id = self.skip_modifiers(id)?;
        let (start, kind, vlen, _, _) = self.record(id)?;
        let signed = u32_ne(self.types, start + 4)? >> 31 == 1;
        let mut out = Vec::with_capacity(vlen);
        for i in 0..vlen {
            let (name_off, value) = match kind {
                6 => {
                    let m = start + TYPE_LEN + i * 8;
                    let v = u32_ne(self.types, m + 4)?;
                    let v = if signed {
                        i64::from(v as i32)
                    } else {
                        i64::from(v)
                    };
                    (u32_ne(self.types, m)?, v)
                }
                19 => {
                    let m = start + TYPE_LEN + i * 12;
                    let lo = u64::from(u32_ne(self.types, m + 4)?);
                    let hi = u64::from(u32_ne(self.types, m + 8)?);
                    (u32_ne(self.types, m)?, ((hi << 32) | lo) as i64)
                }
                _ => return None,
            };
            out.push((self.string(name_off)?, value));
        }
        Some(out)
    }

    /// The value of the enumerator `name` in the first enum that has one.
    pub fn enum_value(&self, name: &str) -> Option<i64> {
        (1..=self.starts.len() as u32).find_map(|id| {
            let (_, kind, _, _, _) = self.record(id)?;
            if kind != 6 && kind != 19 {
                return None;
            }
            self.enum_members(id)?
                .into_iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v)
        })
    }

    /// The member reached from struct `id` through named members, e.g.
    /// `["__sk_common", "skc_family"]` in `struct sock`: its offset from the start of `id` and
    /// its type.
    pub fn member_path(&self, id: u32, path: &[&str]) -> Option<Member> {
        let mut offset = 0u32;
        let mut ty = id;
        for name in path {
            let m = self.member(self.skip_modifiers(ty)?, name)?;
            offset = offset.checked_add(m.offset)?;
            ty = m.type_id;
        }
        Some(Member {
            offset,
            type_id: ty,
        })
    }
}

/// Builds BTF blobs for tests (here, in the live-kernel tests and in the fuzz seeds).
#[doc(hidden)]
pub mod build {
    /// A BTF blob under construction: types get ids 1, 2, ... in the order they are added.
    #[derive(Debug, Default)]
    pub struct Builder {
        types: Vec<u8>,
        strings: Vec<u8>,
        next_id: u32,
    }

    impl Builder {
        /// An empty blob (the string section starts with the empty name).
        pub fn new() -> Builder {
            Builder {
                types: Vec::new(),
                strings: vec![0],
                next_id: 1,
            }
        }

        fn name(&mut self, name: &str) -> u32 {
            if name.is_empty() {
                return 0;
            }
            let off = self.strings.len() as u32;
            self.strings.extend_from_slice(name.as_bytes());
            self.strings.push(0);
            off
        }

        fn push(&mut self, name: &str, kind: u32, vlen: u32, flag: bool, size_or_type: u32) -> u32 {
            let name = self.name(name);
            self.types.extend_from_slice(&name.to_ne_bytes());
            let info = (u32::from(flag) << 31) | (kind << 24) | vlen;
            self.types.extend_from_slice(&info.to_ne_bytes());
            self.types.extend_from_slice(&size_or_type.to_ne_bytes());
            let id = self.next_id;
            self.next_id += 1;
            id
        }

        /// An integer of `size` bytes.
        pub fn int(&mut self, name: &str, size: u32) -> u32 {
            let id = self.push(name, 1, 0, false, size);
            self.types.extend_from_slice(&(size * 8).to_ne_bytes());
            id
        }

        /// A pointer to `target`.
        pub fn ptr(&mut self, target: u32) -> u32 {
            self.push("", 2, 0, false, target)
        }

        /// A typedef.
        pub fn typedef(&mut self, name: &str, target: u32) -> u32 {
            self.push(name, 8, 0, false, target)
        }

        /// An array of `n` elements.
        pub fn array(&mut self, elem: u32, index: u32, n: u32) -> u32 {
            let id = self.push("", 3, 0, false, 0);
            for v in [elem, index, n] {
                self.types.extend_from_slice(&v.to_ne_bytes());
            }
            id
        }

        /// A struct (or a union with `union`) with (name, type, bit offset) members.
        pub fn composite(
            &mut self,
            name: &str,
            union: bool,
            size: u32,
            members: &[(&str, u32, u32)],
        ) -> u32 {
            let id = self.push(
                name,
                if union { 5 } else { 4 },
                members.len() as u32,
                false,
                size,
            );
            for &(m, ty, bits) in members {
                let n = self.name(m);
                for v in [n, ty, bits] {
                    self.types.extend_from_slice(&v.to_ne_bytes());
                }
            }
            id
        }

        /// A function (its prototype is not needed by the lookups).
        pub fn func(&mut self, name: &str) -> u32 {
            self.push(name, 12, 0, false, 0)
        }

        /// A function prototype with these parameter types (unnamed).
        pub fn func_proto(&mut self, ret: u32, params: &[u32]) -> u32 {
            let id = self.push("", 13, params.len() as u32, false, ret);
            for &p in params {
                self.types.extend_from_slice(&0u32.to_ne_bytes());
                self.types.extend_from_slice(&p.to_ne_bytes());
            }
            id
        }

        /// A function whose prototype is `proto`.
        pub fn func_of(&mut self, name: &str, proto: u32) -> u32 {
            self.push(name, 12, 0, false, proto)
        }

        /// A 4-byte enum with these (name, value) members.
        pub fn enumeration(&mut self, name: &str, members: &[(&str, i32)]) -> u32 {
            let id = self.push(name, 6, members.len() as u32, true, 4);
            for &(m, v) in members {
                let n = self.name(m);
                self.types.extend_from_slice(&n.to_ne_bytes());
                self.types.extend_from_slice(&v.to_ne_bytes());
            }
            id
        }

        /// The finished blob.
        pub fn finish(&self) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&super::MAGIC.to_ne_bytes());
            out.extend_from_slice(&[1, 0]);
            for v in [
                24u32,
                0,
                self.types.len() as u32,
                self.types.len() as u32,
                self.strings.len() as u32,
            ] {
                out.extend_from_slice(&v.to_ne_bytes());
            }
            out.extend_from_slice(&self.types);
            out.extend_from_slice(&self.strings);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::build::Builder;
    use super::*;

    fn sample() -> Vec<u8> {
        let mut b = Builder::new();
        let int = b.int("int", 4); // 1
        let ushort = b.int("unsigned short", 2); // 2
        let umode = b.typedef("umode_t", ushort); // 3
        let ulong = b.int("unsigned long", 8); // 4
        let inode = b.composite(
            "inode",
            false,
            16,
            &[("i_mode", umode, 0), ("i_ino", ulong, 64)],
        ); // 5
        let pinode = b.ptr(inode); // 6
                                   // An anonymous union wrapping the pointer, as bpf_iter__task_file does.
        let anon = b.composite("", true, 8, &[("f_inode", pinode, 0)]); // 7
        b.composite("file", false, 24, &[("f_count", int, 0), ("", anon, 128)]); // 8
        let arr = b.array(int, int, 0); // 9
        b.composite("pid", false, 8, &[("level", int, 0), ("numbers", arr, 64)]); // 10
        b.func("bpf_iter_task_file"); // 11
        b.finish()
    }

    #[test]
    fn finds_types_members_and_sizes() {
        let data = sample();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.len(), 11);
        assert_eq!(btf.find(Kind::Func, "bpf_iter_task_file"), Some(11));
        assert_eq!(btf.find(Kind::Struct, "bpf_iter_task_file"), None);
        assert_eq!(btf.find(Kind::Struct, "file"), Some(8));
        assert_eq!(
            btf.find_all(&[
                (Kind::Struct, "file"),
                (Kind::Func, "bpf_iter_task_file"),
                (Kind::Struct, "nope"),
                (Kind::Struct, "inode")
            ]),
            [Some(8), Some(11), None, Some(5)]
        );
        // A prefix of a name is not the name.
        assert_eq!(btf.find(Kind::Struct, "fil"), None);
        let inode = btf.find(Kind::Struct, "inode").unwrap();
        let mode = btf.member(inode, "i_mode").unwrap();
        assert_eq!(mode.offset, 0);
        assert_eq!(btf.size_of(mode.type_id), Some(2));
        assert_eq!(btf.kind_of(mode.type_id), Some(Kind::Int));
        let ino = btf.member(inode, "i_ino").unwrap();
        assert_eq!((ino.offset, btf.size_of(ino.type_id)), (8, Some(8)));
        // Through the anonymous union at byte 16.
        let f = btf.member(8, "f_inode").unwrap();
        assert_eq!(f.offset, 16);
        assert_eq!(btf.pointee(f.type_id), Some(inode));
        assert_eq!(btf.member(8, "missing"), None);
        let numbers = btf.member(10, "numbers").unwrap();
        assert_eq!(numbers.offset, 8);
        assert_eq!(btf.array_elem(numbers.type_id), Some(1));
        assert_eq!(btf.size_of(numbers.type_id), Some(0));
    }

    #[test]
    fn bitfields_are_not_members_we_can_load() {
        let mut b = Builder::new();
        let int = b.int("int", 4);
        b.composite("s", false, 4, &[("whole", int, 0)]);
        let mut data = b.finish();
        // Turn on kind_flag with a 3-bit field at bit 0.
        // The struct's record follows the header (24) and the INT's 12 + 4 bytes; info is its
        // second word, the member's bit offset the last word of the member after it.
        let info_at = 24 + 16 + 4;
        let info = u32::from_ne_bytes(data[info_at..info_at + 4].try_into().unwrap());
        data[info_at..info_at + 4].copy_from_slice(&(info | 1 << 31).to_ne_bytes());
        let off_at = info_at + 16;
        data[off_at..off_at + 4].copy_from_slice(&(3u32 << 24).to_ne_bytes());
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.member(2, "whole"), None);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let data = sample();
        for cut in 0..data.len() {
            if let Ok(btf) = Btf::parse(&data[..cut]) {
                // A cut inside the string section still parses; lookups then fail cleanly.
                let _ = btf
                    .find(Kind::Struct, "inode")
                    .and_then(|id| btf.member(id, "i_ino"));
            }
        }
        let mut bad = data.clone();
        bad[0] ^= 0xff;
        assert!(matches!(
            Btf::parse(&bad),
            Err(DecodeError::Malformed { .. })
        ));
        let mut kind = data;
        // Kind 31 does not exist (the top byte of the first type's info word, little-endian).
        kind[24 + 7] = 0x1f;
        assert!(Btf::parse(&kind).is_err());
    }

    #[test]
    fn prototypes_enums_and_paths() {
        let mut b = Builder::new();
        let int = b.int("int", 4); // 1
        let short = b.int("unsigned short", 2); // 2
        let common = b.composite("sock_common", false, 16, &[("skc_family", short, 64)]); // 3
        let sock = b.composite(
            "sock",
            false,
            32,
            &[("__sk_common", common, 0), ("sk_err", int, 192)],
        ); // 4
        let psock = b.ptr(sock); // 5
        let reason = b.enumeration(
            "skb_drop_reason",
            &[
                ("SKB_DROP_REASON_NO_SOCKET", 3),
                ("SKB_DROP_REASON_TCP_CSUM", 10),
            ],
        ); // 6
        let proto = b.func_proto(0, &[0, psock, int, reason]); // 7
        let pproto = b.ptr(proto); // 8
        b.typedef("btf_trace_x", pproto); // 9
        let ret = b.func_proto(psock, &[psock, int]); // 10
        b.func_of("accept", ret); // 11
        let data = b.finish();
        let btf = Btf::parse(&data).unwrap();
        let td = btf.find(Kind::Typedef, "btf_trace_x").unwrap();
        assert_eq!(btf.params(td), Some(vec![0, psock, int, reason]));
        let f = btf.find(Kind::Func, "accept").unwrap();
        assert_eq!(btf.params(f).map(|p| p.len()), Some(2));
        assert_eq!(btf.return_type(f), Some(psock));
        assert_eq!(btf.pointee(psock), Some(sock));
        assert_eq!(btf.params(sock), None);
        assert_eq!(btf.enum_value("SKB_DROP_REASON_TCP_CSUM"), Some(10));
        assert_eq!(btf.enum_value("SKB_DROP_REASON_NOPE"), None);
        let m = btf.enum_members(reason).unwrap();
        assert_eq!(
            m,
            vec![
                ("SKB_DROP_REASON_NO_SOCKET", 3),
                ("SKB_DROP_REASON_TCP_CSUM", 10)
            ]
        );
        assert_eq!(btf.name_of(reason), Some("skb_drop_reason"));
        let fam = btf
            .member_path(sock, &["__sk_common", "skc_family"])
            .unwrap();
        assert_eq!((fam.offset, btf.size_of(fam.type_id)), (8, Some(2)));
        assert_eq!(btf.member_path(sock, &["sk_err"]).unwrap().offset, 24);
        assert_eq!(btf.member_path(sock, &["__sk_common", "nope"]), None);
    }

    #[test]
    fn modifier_loops_end() {
        let mut b = Builder::new();
        // A typedef pointing at itself (id 1 -> 1).
        b.typedef("loop", 1);
        let data = b.finish();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.skip_modifiers(1), None);
        assert_eq!(btf.size_of(1), None);
    }

    /// Found by the `btf` fuzz target in its first seconds: an array whose element type is the
    /// array itself (here through a typedef) made `size_of` recurse until the stack overflowed.
    #[test]
    fn an_array_that_is_its_own_element_has_no_size() {
        let mut b = Builder::new();
        let int = b.int("int", 4); // 1
        let direct = b.array(2, int, 4); // 2: int[4] of itself
        let via = b.array(4, int, 2); // 3: element 4 ...
        let td = b.typedef("again", via); // 4: ... which is 3
        let fine = b.array(int, int, 3); // 5: a real int[3]
        let nested = b.array(fine, int, 2); // 6: int[2][3]
        let data = b.finish();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!((direct, via, td, fine, nested), (2, 3, 4, 5, 6));
        assert_eq!(btf.size_of(direct), None);
        assert_eq!(btf.size_of(via), None);
        assert_eq!(btf.size_of(td), None);
        assert_eq!(btf.size_of(fine), Some(12));
        assert_eq!(btf.size_of(nested), Some(24));
        // The fuzzer's input itself is replayed from fuzz/regressions/btf/array-of-itself.
    }
}
