//! Entry points shared by the cargo-fuzz targets in `fuzz/` and the stable replay test
//! `tests/fuzz_corpus.rs`. Not part of the API.
//!
//! Each function must never panic on any input, except through the `assert!`s that check
//! properties (those are the bugs fuzzing looks for).

use crate::bytecode::{self, BcSocket, Cond, Expr};
use crate::netlink::{self, Control};
use crate::tcp_info::TcpInfo;
use crate::{fd_link, inet_diag, netlink_diag, packet_diag, proc_net, snmp, unix_diag};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn touch_tcp_info(b: &[u8]) {
    let t = TcpInfo::from_bytes(b);
    for (_, v) in t.fields() {
        std::hint::black_box(v);
    }
    std::hint::black_box((
        t.snd_wscale(),
        t.rcv_wscale(),
        t.delivery_rate_app_limited(),
        t.fastopen_client_fail(),
        format!("{t:?}"),
    ));
}

fn data_payloads(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    netlink::messages(data)
        .map_while(Result::ok)
        .filter_map(|m| {
            std::hint::black_box(m.dump_interrupted());
            match netlink::classify(&m) {
                Ok(Control::Data(p)) => Some(p),
                _ => None,
            }
        })
}

/// A recv() buffer from an inet_diag dump.
pub fn fuzz_netlink_inet(data: &[u8]) {
    for p in data_payloads(data) {
        if let Ok(m) = inet_diag::decode_msg(p) {
            if let Some(info) = m.attrs.info {
                touch_tcp_info(info);
            }
            std::hint::black_box(format!("{m:?}"));
        }
        for a in inet_diag::raw_attrs(p) {
            std::hint::black_box(a.ok());
        }
    }
    // The same buffer as the answer to a SOCK_DESTROY request or to a one-socket lookup
    // (`sockstat kill`), for the sequence number of its first message.
    let seq = data
        .get(8..12)
        .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    std::hint::black_box(crate::sock_destroy::answer(data, seq).ok());
    std::hint::black_box(crate::sock_destroy::lookup_answer(data, seq).ok());
}

/// A recv() buffer from a unix_diag dump.
pub fn fuzz_netlink_unix(data: &[u8]) {
    for p in data_payloads(data) {
        if let Ok(m) = unix_diag::decode_msg(p) {
            std::hint::black_box((m.icons_iter().count(), m.name_kind(), format!("{m:?}")));
        }
    }
}

/// A recv() buffer from a packet_diag dump.
pub fn fuzz_netlink_packet(data: &[u8]) {
    for p in data_payloads(data) {
        if let Ok(m) = packet_diag::decode_msg(p) {
            std::hint::black_box((m.info.map(|i| i.running()), format!("{m:?}")));
        }
    }
}

/// A recv() buffer from a netlink_diag dump.
pub fn fuzz_netlink_netlink(data: &[u8]) {
    for p in data_payloads(data) {
        if let Ok(m) = netlink_diag::decode_msg(p) {
            if let Some(g) = &m.groups {
                assert!(g.windows(2).all(|w| w[0] < w[1]), "groups in order");
                assert!(g.iter().all(|&n| n >= 1), "groups count from 1");
            }
            std::hint::black_box((
                m.connected(),
                netlink_diag::protocol_name(m.protocol),
                format!("{m:?}"),
            ));
        }
    }
}

/// Raw `tcp_info` bytes of any length.
pub fn fuzz_tcp_info(data: &[u8]) {
    touch_tcp_info(data);
    let t = TcpInfo::from_bytes(data);
    assert_eq!(t.len(), data.len().min(TcpInfo::SIZE_6_18));
    for (&(name, off, size), (n2, v)) in crate::tcp_info::FIELDS.iter().zip(t.fields()) {
        assert_eq!(name, n2);
        assert_eq!(v.is_some(), off + size <= t.len(), "{name}");
    }
}

/// `/proc/net/{tcp,tcp6,udp,...,raw}`, `/proc/net/packet` and `/proc/net/netlink` text.
pub fn fuzz_proc_net_inet(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        for e in proc_net::parse_inet_table(s) {
            std::hint::black_box(e.ok());
        }
        for e in proc_net::parse_packet_table(s) {
            std::hint::black_box(e.ok());
        }
        for e in proc_net::parse_netlink_table(s) {
            std::hint::black_box(e.ok());
        }
    }
}

/// `/proc/net/unix` bytes.
pub fn fuzz_proc_net_unix(data: &[u8]) {
    for e in proc_net::parse_unix_table(data).flatten() {
        if let Some(p) = e.path {
            // The path is a sub-slice of the line and never carries the line break.
            assert!(!p.contains(&b'\n'));
        }
    }
}

/// `/proc/net/{snmp,netstat,snmp6}` text.
pub fn fuzz_snmp(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        std::hint::black_box(snmp::parse_paired(s).ok());
        std::hint::black_box(snmp::parse_snmp6(s).ok());
    }
}

/// A kernel BTF blob: the decoder, the lookups the BPF owner scan makes, and, when they succeed,
/// the program assembled from the layout (every jump must stay inside it).
pub fn fuzz_btf(data: &[u8]) {
    use crate::btf::{Btf, Kind};
    use crate::task_file::{program, Layout, Maps};
    let Ok(btf) = Btf::parse(data) else { return };
    for id in 0..=btf.len() as u32 + 1 {
        std::hint::black_box((
            btf.size_of(id),
            btf.kind_of(id),
            btf.pointee(id),
            btf.array_elem(id),
        ));
        std::hint::black_box(btf.member(id, "i_ino"));
    }
    std::hint::black_box(btf.find(Kind::Struct, "task_struct"));
    if let Ok(l) = Layout::from_btf(&btf) {
        let p = program(
            &l,
            Maps {
                last: 3,
                wanted: Some(4),
            },
        );
        for (at, i) in p.iter().enumerate() {
            let b = i.to_le_bytes();
            if b[0] & 0x07 == 0x05 && b[0] != 0x85 && b[0] != 0x95 {
                let off = i16::from_le_bytes([b[2], b[3]]);
                assert!(off >= 0 && at + 1 + (off as usize) < p.len());
            }
        }
    }
}

/// `/proc/<pid>/fd/<n>` link targets.
pub fn fuzz_fd_link(data: &[u8]) {
    if let Some(n) = fd_link::socket_inode(data) {
        assert!(data.starts_with(b"socket:[") && data.ends_with(b"]"));
        let digits = &data[8..data.len() - 1];
        let trimmed: &[u8] = match digits.iter().position(|&c| c != b'0') {
            Some(i) => &digits[i..],
            None => b"0",
        };
        assert_eq!(trimmed, n.to_string().as_bytes());
    }
    std::hint::black_box(fd_link::netns_inode(data));
}

/// Reads bytes off the front of the fuzz input.
struct Take<'a>(&'a [u8]);

impl Take<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn addr(&mut self, v6: bool) -> IpAddr {
        if v6 {
            let mut b = [0u8; 16];
            // Bias towards v4-mapped addresses, the interesting corner.
            let mapped = self.u8() & 1 == 1;
            for x in b.iter_mut() {
                *x = self.u8();
            }
            if mapped {
                b[..10].fill(0);
                b[10] = 0xff;
                b[11] = 0xff;
            }
            IpAddr::V6(Ipv6Addr::from(b))
        } else {
            IpAddr::V4(Ipv4Addr::from(self.u32()))
        }
    }
    fn socket(&mut self) -> BcSocket {
        let v6 = self.u8() & 1 == 1;
        BcSocket {
            src: self.addr(v6),
            dst: self.addr(v6),
            sport: self.u16() % 16,
            dport: self.u16() % 16,
            autobound: self.u8() & 1 == 1,
            ifindex: u32::from(self.u8() % 3),
            cgroup_id: u64::from(self.u8() % 3),
            mark: self.u32(),
        }
    }
    fn expr(&mut self, depth: u32) -> Expr {
        let k = self.u8();
        if depth > 5 || self.0.is_empty() {
            return Expr::True;
        }
        match k % 8 {
            0 => Expr::True,
            1 => {
                let n = self.u8() % 4;
                Expr::And((0..n).map(|_| self.expr(depth + 1)).collect())
            }
            2 => {
                let n = self.u8() % 4;
                Expr::Or((0..n).map(|_| self.expr(depth + 1)).collect())
            }
            3 => Expr::not(self.expr(depth + 1)),
            _ => Expr::Cond(self.cond()),
        }
    }
    fn cond(&mut self) -> Cond {
        let p = self.u16() % 16;
        match self.u8() % 11 {
            0 => Cond::SrcPortGe(p),
            1 => Cond::SrcPortLe(p),
            2 => Cond::DstPortGe(p),
            3 => Cond::DstPortLe(p),
            4 => Cond::SrcPortEq(p),
            5 => Cond::DstPortEq(p),
            6 => {
                let v6 = self.u8() & 1 == 1;
                Cond::SrcPrefix {
                    addr: self.addr(v6),
                    prefix_len: self.u8(),
                }
            }
            7 => {
                let v6 = self.u8() & 1 == 1;
                Cond::DstPrefix {
                    addr: self.addr(v6),
                    prefix_len: self.u8(),
                }
            }
            8 => Cond::AutoBound,
            9 => Cond::Cgroup(u64::from(self.u8() % 3)),
            _ => Cond::Dev(u32::from(self.u8() % 3)),
        }
    }
}

/// Two properties at once. (1) Arbitrary program bytes go through `audit` and `run` without
/// panicking or looping. (2) An expression built from the same bytes compiles to a program
/// the audit accepts and that agrees with `eval` on a socket built from the bytes, with and
/// without the 4.16 `EQ` ops.
pub fn fuzz_bytecode_run(data: &[u8]) {
    let mut t = Take(data);
    let sock = t.socket();
    let program = t.0;
    let audited = bytecode::audit(program);
    let verdict = bytecode::run(program, &sock);
    std::hint::black_box((audited, verdict, bytecode::audit_as(program, false).ok()));

    let mut t = Take(data);
    let sock = t.socket();
    let e = t.expr(0);
    for port_eq_ops in [true, false] {
        let opts = bytecode::CompileOptions { port_eq_ops };
        let Ok(prog) = bytecode::try_compile(&e, opts) else {
            continue;
        };
        assert!(
            bytecode::audit_as(&prog, false).is_ok(),
            "{e:?} -> {prog:?}"
        );
        assert_eq!(
            bytecode::run(&prog, &sock),
            bytecode::eval(&e, &sock),
            "{e:?} on {sock:?}"
        );
    }
}

/// A fuzz entry point.
pub type Target = fn(&[u8]);

/// Runs every file of `<fuzz_dir>/corpus/<name>/` and `<fuzz_dir>/regressions/<name>/` through
/// `f` (the stable replay of a cargo-fuzz target), panicking with the file's path when one
/// panics. Returns how many files were replayed.
pub fn replay(fuzz_dir: &std::path::Path, name: &str, f: Target) -> usize {
    let mut n = 0;
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir.join(kind).join(name)) else {
            continue;
        };
        for e in entries {
            let path = e.expect("a readable fuzz directory").path();
            let data = std::fs::read(&path).expect("a readable fuzz input");
            let r = std::panic::catch_unwind(|| f(&data));
            assert!(r.is_ok(), "{} panics", path.display());
            n += 1;
        }
    }
    n
}

/// Every target by name, for the replay test.
pub const TARGETS: &[(&str, Target)] = &[
    ("netlink_inet", fuzz_netlink_inet),
    ("netlink_unix", fuzz_netlink_unix),
    ("netlink_packet", fuzz_netlink_packet),
    ("netlink_netlink", fuzz_netlink_netlink),
    ("tcp_info", fuzz_tcp_info),
    ("proc_net_inet", fuzz_proc_net_inet),
    ("proc_net_unix", fuzz_proc_net_unix),
    ("snmp", fuzz_snmp),
    ("bytecode_run", fuzz_bytecode_run),
    ("fd_link", fuzz_fd_link),
    ("btf", fuzz_btf),
];
