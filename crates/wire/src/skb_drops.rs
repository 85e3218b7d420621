//! The BPF program behind `sockstat drops`: every packet the kernel frees as dropped
//! (`skb:kfree_skb`, with its `enum skb_drop_reason` since Linux 5.17), counted in the kernel by
//! (reason, protocol, port) in a hash map, so that a flood of drops costs a map update each
//! and nothing crosses to user space until the map is read.
//!
//! The port is the local port of the receiving socket where the tracepoint names one (`rx_sk`,
//! Linux 6.8), otherwise the destination port in the packet's TCP or UDP header when its
//! transport header is set. In C:
//!
//! ```c
//! SEC("tp_btf/kfree_skb")
//! int drop(u64 *ctx) {
//!     struct sk_buff *skb = (void *)ctx[SKB]; struct sock *sk = (void *)ctx[RX_SK];
//!     struct key k = { .reason = ctx[REASON] };
//!     if (sk) {   // TIME_WAIT and request sockets are TCP's and have no sk_protocol
//!         k.proto = sk->skc_state == TCP_TIME_WAIT || sk->skc_state == TCP_NEW_SYN_RECV
//!                   ? IPPROTO_TCP : sk->sk_protocol;
//!         k.port = sk->skc_num; k.how = SOCKET;
//!     }
//!     else if (skb) {
//!         unsigned char *head = skb->head; u8 proto;
//!         if (skb->protocol == htons(ETH_P_IP)) probe_read(&proto, 1, head + skb->network_header + 9);
//!         else if (skb->protocol == htons(ETH_P_IPV6)) probe_read(&proto, 1, head + skb->network_header + 6);
//!         k.proto = proto;
//!         if ((proto == IPPROTO_TCP || proto == IPPROTO_UDP) && skb->transport_header != 0xffff) {
//!             probe_read(&k.port, 2, head + skb->transport_header + 2); k.how = PACKET_DST;
//!         }
//!     }
//!     u64 *n = bpf_map_lookup_elem(&drops, &k);
//!     if (n) __sync_fetch_and_add(n, 1);
//!     else if (bpf_map_update_elem(&drops, &k, &one, BPF_NOEXIST) &&
//!              !(n = bpf_map_lookup_elem(&drops, &k))) counters[DROPS_UNCOUNTED]++;
//!     else if (n) __sync_fetch_and_add(n, 1);
//!     return 0;
//! }
//! ```

use crate::bpf_asm::{helper, Alu, Asm, Cond, Size, FP, R0, R1, R2, R3, R4, R6, R7, R8, R9};
use crate::btf::{Btf, Kind};
use crate::tcp_events::DROPS_UNCOUNTED;

/// Where the port of a drop came from.
pub mod how {
    /// No port.
    pub const NONE: u8 = 0;
    /// The receiving socket's local port (host order in the key).
    pub const SOCKET: u8 = 1;
    /// The destination port in the packet's header (network order in the key).
    pub const PACKET_DST: u8 = 2;
}

/// Size of a key of the drops map.
pub const KEY_LEN: u32 = 8;

/// Where the program's fields live, and the drop reasons' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// BTF id of the typedef `btf_trace_kfree_skb`.
    pub btf_id: u32,
    /// Context slots of the skb, the reason and (6.8+) the receiving socket.
    pub skb_arg: u32,
    /// The reason's slot.
    pub reason_arg: u32,
    /// The receiving socket's slot, when the tracepoint has one.
    pub sk_arg: Option<u32>,
    /// `struct sk_buff`: `head`.
    pub head: u32,
    /// `struct sk_buff`: `network_header`.
    pub network_header: u32,
    /// `struct sk_buff`: `transport_header`.
    pub transport_header: u32,
    /// `struct sk_buff`: `protocol` (the ethertype, network order).
    pub protocol: u32,
    /// `struct sock`: `sk_protocol` and its size.
    pub sk_protocol: (u32, u32),
    /// `struct sock`: `skc_num`.
    pub sk_num: u32,
    /// `struct sock`: `skc_state` (a TIME-WAIT or request socket has no `sk_protocol`: it is
    /// the small `sock_common` only, and TCP).
    pub sk_state: u32,
    /// `enum skb_drop_reason`: (value, name without the `SKB_DROP_REASON_` prefix).
    pub reasons: Vec<(u32, String)>,
}

fn field(btf: &Btf<'_>, s: &str, path: &[&str], sizes: &[u32]) -> Result<(u32, u32), String> {
    let id = btf
        .find(Kind::Struct, s)
        .ok_or_else(|| format!("no struct {s} in the kernel's BTF"))?;
    let m = btf
        .member_path(id, path)
        .ok_or_else(|| format!("no member {s}.{} in the kernel's BTF", path.join(".")))?;
    let size = btf.size_of(m.type_id).unwrap_or(0);
    if !sizes.contains(&size) || m.offset > i16::MAX as u32 - 8 {
        return Err(format!(
            "{s}.{} has an unexpected size or offset",
            path.join(".")
        ));
    }
    Ok((m.offset, size))
}

impl Layout {
    /// Reads the layout from a kernel's BTF; the error names what is missing.
    pub fn from_btf(btf: &Btf<'_>) -> Result<Layout, String> {
        let btf_id = btf
            .find(Kind::Typedef, "btf_trace_kfree_skb")
            .ok_or("the kernel has no skb:kfree_skb tracepoint in its BTF")?;
        let params = btf
            .params(btf_id)
            .ok_or("skb:kfree_skb has an unexpected prototype")?;
        let reason_enum = btf
            .find(Kind::Enum, "skb_drop_reason")
            .ok_or("the kernel has no enum skb_drop_reason (drop reasons need Linux 5.17)")?;
        let skb = btf.find(Kind::Struct, "sk_buff");
        let sock = btf.find(Kind::Struct, "sock");
        // The first parameter is the tracepoint's own data pointer; the context starts after.
        let mut skb_arg = None;
        let mut reason_arg = None;
        let mut sk_arg = None;
        for (i, &t) in params.iter().enumerate().skip(1) {
            let slot = (i - 1) as u32;
            let target = btf.pointee(t);
            if btf.skip_modifiers(t) == Some(reason_enum) {
                reason_arg = Some(slot);
            } else if target.is_some() && target == skb && skb_arg.is_none() {
                skb_arg = Some(slot);
            } else if target.is_some() && target == sock && sk_arg.is_none() {
                sk_arg = Some(slot);
            }
        }
        let reasons = btf
            .enum_members(reason_enum)
            .ok_or("enum skb_drop_reason is unreadable")?
            .into_iter()
            .filter_map(|(name, v)| {
                let short = name.strip_prefix("SKB_DROP_REASON_").unwrap_or(name);
                Some((u32::try_from(v).ok()?, short.to_string()))
            })
            .collect();
        Ok(Layout {
            btf_id,
            skb_arg: skb_arg.ok_or("skb:kfree_skb passes no sk_buff")?,
            reason_arg: reason_arg.ok_or("skb:kfree_skb passes no drop reason (Linux 5.17)")?,
            sk_arg,
            head: field(btf, "sk_buff", &["head"], &[8])?.0,
            network_header: field(btf, "sk_buff", &["network_header"], &[2])?.0,
            transport_header: field(btf, "sk_buff", &["transport_header"], &[2])?.0,
            protocol: field(btf, "sk_buff", &["protocol"], &[2])?.0,
            sk_protocol: field(btf, "sock", &["sk_protocol"], &[1, 2])?,
            sk_num: field(btf, "sock", &["__sk_common", "skc_num"], &[2])?.0,
            sk_state: field(btf, "sock", &["__sk_common", "skc_state"], &[1])?.0,
            reasons,
        })
    }

    /// The name of a drop reason (`NO_SOCKET`), or its number when this kernel has no name.
    pub fn reason_name(&self, v: u32) -> String {
        self.reasons
            .iter()
            .find(|(n, _)| *n == v)
            .map_or_else(|| v.to_string(), |(_, s)| s.clone())
    }
}

const KEY: i64 = -8;
const SCRATCH: i64 = -16;

/// Assembles the program; `drops` is the hash map's fd, `counters` the counters array's.
pub fn program(l: &Layout, drops: i32, counters: i32) -> Result<Vec<u64>, String> {
    const IPPROTO_TCP: i32 = 6;
    const IPPROTO_UDP: i32 = 17;
    const BPF_NOEXIST: i32 = 1;
    let eth = |t: u16| i32::from(u16::from_ne_bytes(t.to_be_bytes()));
    let mut a = Asm::new();
    let count = a.label();
    let no_sk = a.label();
    let out = a.label();
    a.mov(R6, R1);
    a.load(Size::DW, R7, R6, i64::from(l.skb_arg) * 8);
    a.load(Size::DW, R8, R6, i64::from(l.reason_arg) * 8);
    a.store_imm(Size::DW, FP, KEY, 0);
    a.store(Size::W, FP, KEY, R8);
    if let Some(sk) = l.sk_arg {
        a.load(Size::DW, R9, R6, i64::from(sk) * 8);
        a.jump_imm(Cond::Eq, R9, 0, no_sk);
        // TIME_WAIT (6) and NEW_SYN_RECV (12) sockets are TCP's small ones, with no
        // sk_protocol to read.
        let mini = a.label();
        let proto_known = a.label();
        a.load(Size::B, R1, R9, l.sk_state.into());
        a.jump_imm(Cond::Eq, R1, 6, mini);
        a.jump_imm(Cond::Eq, R1, 12, mini);
        let size = Size::of(l.sk_protocol.1).unwrap_or(Size::H);
        a.load(size, R1, R9, l.sk_protocol.0.into());
        a.goto(proto_known);
        a.place(mini);
        a.mov_imm(R1, IPPROTO_TCP);
        a.place(proto_known);
        a.store(Size::B, FP, KEY + 6, R1);
        a.load(Size::H, R1, R9, l.sk_num.into());
        a.store(Size::H, FP, KEY + 4, R1);
        a.store_imm(Size::B, FP, KEY + 7, how::SOCKET.into());
        a.goto(count);
    }
    a.place(no_sk);
    a.jump_imm(Cond::Eq, R7, 0, count);
    // R9 = head + network_header + the offset of the protocol field for this ethertype.
    let read_proto = a.label();
    a.load(Size::H, R1, R7, l.protocol.into());
    a.mov_imm(R2, 9);
    a.jump_imm(Cond::Eq, R1, eth(0x0800), read_proto);
    a.mov_imm(R2, 6);
    a.jump_imm(Cond::Eq, R1, eth(0x86dd), read_proto);
    a.goto(count);
    a.place(read_proto);
    a.load(Size::DW, R9, R7, l.head.into());
    a.load(Size::H, R3, R7, l.network_header.into());
    a.alu(Alu::Add, R3, R9);
    a.alu(Alu::Add, R3, R2);
    a.store_imm(Size::DW, FP, SCRATCH, 0);
    a.mov(R1, FP);
    a.alu_imm(Alu::Add, R1, SCRATCH as i32);
    a.mov_imm(R2, 1);
    a.call(helper::PROBE_READ_KERNEL);
    a.jump_imm(Cond::Ne, R0, 0, count);
    a.load(Size::B, R1, FP, SCRATCH);
    a.store(Size::B, FP, KEY + 6, R1);
    let ports = a.label();
    a.jump_imm(Cond::Eq, R1, IPPROTO_TCP, ports);
    a.jump_imm(Cond::Ne, R1, IPPROTO_UDP, count);
    a.place(ports);
    a.load(Size::H, R3, R7, l.transport_header.into());
    a.jump_imm(Cond::Eq, R3, 0xffff, count);
    a.alu(Alu::Add, R3, R9);
    a.alu_imm(Alu::Add, R3, 2);
    a.mov(R1, FP);
    a.alu_imm(Alu::Add, R1, (KEY + 4) as i32);
    a.mov_imm(R2, 2);
    a.call(helper::PROBE_READ_KERNEL);
    a.jump_imm(Cond::Ne, R0, 0, count);
    a.store_imm(Size::B, FP, KEY + 7, how::PACKET_DST.into());
    // Count: add to the key's counter, creating it when new.
    a.place(count);
    let add = a.label();
    for attempt in 0..2 {
        a.ld_map_fd(R1, drops);
        a.mov(R2, FP);
        a.alu_imm(Alu::Add, R2, KEY as i32);
        a.call(helper::MAP_LOOKUP_ELEM);
        a.jump_imm(Cond::Ne, R0, 0, add);
        if attempt == 0 {
            a.store_imm(Size::DW, FP, SCRATCH, 1);
            a.ld_map_fd(R1, drops);
            a.mov(R2, FP);
            a.alu_imm(Alu::Add, R2, KEY as i32);
            a.mov(R3, FP);
            a.alu_imm(Alu::Add, R3, SCRATCH as i32);
            a.mov_imm(R4, BPF_NOEXIST);
            a.call(helper::MAP_UPDATE_ELEM);
            // Another CPU created it first (EEXIST), or the map is full (E2BIG): look again.
            a.jump_imm(Cond::Eq, R0, 0, out);
        }
    }
    a.ld_map_value(R1, counters, DROPS_UNCOUNTED * 8);
    a.mov_imm(R2, 1);
    a.atomic_add(Size::DW, R1, 0, R2);
    a.goto(out);
    a.place(add);
    a.mov_imm(R1, 1);
    a.atomic_add(Size::DW, R0, 0, R1);
    a.place(out);
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

/// One key of the drops map, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// `enum skb_drop_reason` value.
    pub reason: u32,
    /// IP protocol (6 TCP, 17 UDP), 0 when not read.
    pub proto: u8,
    /// The port, host order, and where it came from ([`how`]).
    pub port: Option<(u16, u8)>,
}

impl Key {
    /// Decodes a key; `None` when `b` is not [`KEY_LEN`] bytes.
    pub fn parse(b: &[u8]) -> Option<Key> {
        let b: &[u8; 8] = b.try_into().ok()?;
        let reason = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        let how = b[7];
        let port = match how {
            how::SOCKET => Some((u16::from_ne_bytes([b[4], b[5]]), how)),
            how::PACKET_DST => Some((u16::from_be_bytes([b[4], b[5]]), how)),
            _ => None,
        };
        Some(Key {
            reason,
            proto: b[6],
            port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf_asm::{called_helper, check_jumps, decode};
    use crate::btf::build::Builder;

    fn kernel_like(with_rx_sk: bool) -> Vec<u8> {
        let mut b = Builder::new();
        let u16t = b.int("short unsigned int", 2);
        let u8t = b.int("unsigned char", 1);
        let pu8 = b.ptr(u8t);
        let common = b.composite(
            "sock_common",
            false,
            136,
            &[("skc_num", u16t, 112), ("skc_state", u8t, 144)],
        );
        let sock = b.composite(
            "sock",
            false,
            760,
            &[("__sk_common", common, 0), ("sk_protocol", u16t, 4224)],
        );
        let skb = b.composite(
            "sk_buff",
            false,
            224,
            &[
                ("protocol", u16t, 1408),
                ("transport_header", u16t, 1424),
                ("network_header", u16t, 1440),
                ("head", pu8, 1536),
            ],
        );
        let reason = b.enumeration(
            "skb_drop_reason",
            &[
                ("SKB_DROP_REASON_NOT_SPECIFIED", 2),
                ("SKB_DROP_REASON_NO_SOCKET", 3),
            ],
        );
        let pskb = b.ptr(skb);
        let psock = b.ptr(sock);
        let pvoid = b.ptr(0);
        let mut params = vec![0, pskb, pvoid, reason];
        if with_rx_sk {
            params.push(psock);
        }
        let proto = b.func_proto(0, &params);
        let p = b.ptr(proto);
        b.typedef("btf_trace_kfree_skb", p);
        b.finish()
    }

    #[test]
    fn layout_finds_the_arguments_and_names() {
        let data = kernel_like(true);
        let l = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap();
        assert_eq!((l.skb_arg, l.reason_arg, l.sk_arg), (0, 2, Some(3)));
        assert_eq!(
            (l.protocol, l.transport_header, l.network_header, l.head),
            (176, 178, 180, 192)
        );
        assert_eq!(l.reason_name(3), "NO_SOCKET");
        assert_eq!(l.reason_name(99), "99");
        let data = kernel_like(false);
        let l = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap();
        assert_eq!(l.sk_arg, None);
        let e = Layout::from_btf(&Btf::parse(&Builder::new().finish()).unwrap()).unwrap_err();
        assert!(e.contains("kfree_skb"), "{e}");
    }

    #[test]
    fn program_shape() {
        for rx in [true, false] {
            let data = kernel_like(rx);
            let l = Layout::from_btf(&Btf::parse(&data).unwrap()).unwrap();
            let p = program(&l, 7, 8).unwrap();
            check_jumps(&p).unwrap();
            let calls: Vec<i32> = p.iter().filter_map(|&i| called_helper(i)).collect();
            assert_eq!(
                calls,
                [
                    helper::PROBE_READ_KERNEL,
                    helper::PROBE_READ_KERNEL,
                    helper::MAP_LOOKUP_ELEM,
                    helper::MAP_UPDATE_ELEM,
                    helper::MAP_LOOKUP_ELEM
                ]
            );
            // The IPv4 ethertype, as a native load of the network-order field sees it.
            let imms: Vec<i32> = p.iter().map(|&i| decode(i).4).collect();
            assert!(imms.contains(&i32::from(u16::from_ne_bytes([0x08, 0x00]))));
        }
    }

    #[test]
    fn keys_decode() {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&3u32.to_ne_bytes());
        b[4..6].copy_from_slice(&47001u16.to_be_bytes());
        b[6] = 6;
        b[7] = how::PACKET_DST;
        assert_eq!(
            Key::parse(&b),
            Some(Key {
                reason: 3,
                proto: 6,
                port: Some((47001, how::PACKET_DST))
            })
        );
        b[4..6].copy_from_slice(&8080u16.to_ne_bytes());
        b[7] = how::SOCKET;
        assert_eq!(Key::parse(&b).unwrap().port, Some((8080, how::SOCKET)));
        b[7] = 0;
        assert_eq!(Key::parse(&b).unwrap().port, None);
        assert_eq!(Key::parse(&b[..7]), None);
    }
}
