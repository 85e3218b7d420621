//! `compile` + `run` against `eval` over many sockets and expressions; `audit` against the
//! kernel's rules (net/ipv4/inet_diag.c `inet_diag_bc_audit`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use sockstat_wire::bytecode::{
    self, audit, audit_as, compile, either_port_in, eval, port_range, ports_in, prefix, run,
    try_compile, AuditError, BcSocket, CompileOptions, Cond, Expr, Side,
};

mod common;
use common::Rng;

const PORTS: &[u16] = &[
    0, 1, 2, 3, 21, 22, 23, 79, 80, 81, 7999, 8000, 8050, 8100, 8101, 65534, 65535,
];

fn v4(s: &str) -> IpAddr {
    IpAddr::V4(s.parse::<Ipv4Addr>().unwrap())
}
fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
}

fn addrs() -> Vec<IpAddr> {
    [
        "10.0.0.1",
        "10.1.2.3",
        "10.255.255.255",
        "11.0.0.1",
        "127.0.0.1",
        "0.0.0.0",
        "192.168.1.7",
    ]
    .iter()
    .map(|s| v4(s))
    .chain(
        [
            "::",
            "::1",
            "::ffff:10.1.2.3",
            "::ffff:127.0.0.1",
            "::ffff:11.0.0.1",
            "::fffe:10.1.2.3",
            "::10.1.2.3",
            "2001:db8::1",
            "2001:db8:ffff::1",
            "2001:db9::1",
            "fe80::1",
        ]
        .iter()
        .map(|s| v6(s)),
    )
    .collect()
}

fn random_socket(r: &mut Rng, addrs: &[IpAddr]) -> BcSocket {
    let v6 = r.below(2) == 1;
    let fam: Vec<IpAddr> = addrs
        .iter()
        .copied()
        .filter(|a| a.is_ipv6() == v6)
        .collect();
    BcSocket {
        src: r.pick(&fam),
        dst: r.pick(&fam),
        sport: r.pick(PORTS),
        dport: r.pick(PORTS),
        autobound: r.below(2) == 1,
        ifindex: r.below(3) as u32,
        cgroup_id: r.below(3),
        mark: r.next() as u32,
    }
}

fn random_cond(r: &mut Rng, addrs: &[IpAddr]) -> Cond {
    let p = r.pick(PORTS);
    let plen = |r: &mut Rng, a: IpAddr| -> u8 {
        let max = if a.is_ipv4() { 32 } else { 128 };
        // Mostly valid lengths, sometimes over-long (clamped), biased to byte boundaries.
        match r.below(4) {
            0 => r
                .pick(&[0u8, 8, 16, 24, 32, 96, 104, 112, 120, 128])
                .min(max),
            1 => r.below(u64::from(max) + 1) as u8,
            2 => r.below(256) as u8,
            _ => max,
        }
    };
    match r.below(11) {
        0 => Cond::SrcPortGe(p),
        1 => Cond::SrcPortLe(p),
        2 => Cond::DstPortGe(p),
        3 => Cond::DstPortLe(p),
        4 => Cond::SrcPortEq(p),
        5 => Cond::DstPortEq(p),
        6 => {
            let addr = r.pick(addrs);
            Cond::SrcPrefix {
                addr,
                prefix_len: plen(r, addr),
            }
        }
        7 => {
            let addr = r.pick(addrs);
            Cond::DstPrefix {
                addr,
                prefix_len: plen(r, addr),
            }
        }
        8 => Cond::AutoBound,
        9 => Cond::Cgroup(r.below(3)),
        _ => Cond::Dev(r.below(3) as u32),
    }
}

fn random_expr(r: &mut Rng, addrs: &[IpAddr], depth: u32) -> Expr {
    let leaf = depth >= 4 || r.below(3) == 0;
    if leaf {
        return match r.below(12) {
            0 => Expr::True,
            1 => Expr::never(),
            _ => Expr::Cond(random_cond(r, addrs)),
        };
    }
    match r.below(3) {
        0 => Expr::And(
            (0..r.below(4))
                .map(|_| random_expr(r, addrs, depth + 1))
                .collect(),
        ),
        1 => Expr::Or(
            (0..r.below(4))
                .map(|_| random_expr(r, addrs, depth + 1))
                .collect(),
        ),
        _ => Expr::not(random_expr(r, addrs, depth + 1)),
    }
}

fn check(e: &Expr, socks: &[BcSocket]) {
    for port_eq_ops in [true, false] {
        let prog = try_compile(e, CompileOptions { port_eq_ops }).unwrap();
        assert_eq!(
            audit_as(&prog, false),
            Ok(()),
            "audit rejects {e:?}: {prog:?}"
        );
        if !port_eq_ops {
            // The legacy dialect must not use the 4.16 EQ ops.
            let mut off = 0;
            while off < prog.len() {
                assert!(prog[off] != bytecode::op::S_EQ && prog[off] != bytecode::op::D_EQ);
                off += usize::from(prog[off + 1]);
            }
        }
        for s in socks {
            assert_eq!(
                run(&prog, s),
                eval(e, s),
                "{e:?} on {s:?} (eq ops {port_eq_ops})"
            );
        }
    }
}

#[test]
fn every_single_port_condition_on_every_port_pair() {
    let mut socks = Vec::new();
    for &sport in PORTS {
        for &dport in PORTS {
            socks.push(BcSocket {
                src: v4("1.2.3.4"),
                dst: v4("5.6.7.8"),
                sport,
                dport,
                autobound: false,
                ifindex: 0,
                cgroup_id: 0,
                mark: 0,
            });
        }
    }
    for &p in PORTS {
        for c in [
            Cond::SrcPortGe(p),
            Cond::SrcPortLe(p),
            Cond::DstPortGe(p),
            Cond::DstPortLe(p),
            Cond::SrcPortEq(p),
            Cond::DstPortEq(p),
        ] {
            check(&Expr::Cond(c.clone()), &socks);
            check(&Expr::not(Expr::Cond(c)), &socks);
        }
        for &q in PORTS {
            for side in [Side::Src, Side::Dst] {
                let e = port_range(side, p, q);
                check(&e, &socks);
                for s in &socks {
                    let port = if side == Side::Src { s.sport } else { s.dport };
                    assert_eq!(eval(&e, s), (p..=q).contains(&port));
                }
            }
        }
    }
}

#[test]
fn the_real_use_ports_either_side_and_two_prefixes() {
    let set = [(22, 22), (80, 80), (8000, 8100)];
    let local = (v4("10.0.0.0"), 8u8);
    let remote = (v6("2001:db8::"), 32u8);
    let e = Expr::And(vec![
        either_port_in(&set),
        prefix(Side::Src, local.0, local.1),
        prefix(Side::Dst, remote.0, remote.1),
    ]);
    let prog = compile(&e);
    assert!(audit(&prog));
    let in_set = |p: u16| p == 22 || p == 80 || (8000..=8100).contains(&p);
    let addrs = addrs();
    let mut n = 0;
    for &src in &addrs {
        for &dst in &addrs {
            if src.is_ipv4() != dst.is_ipv4() {
                continue;
            }
            for &sport in PORTS {
                for &dport in PORTS {
                    let s = BcSocket {
                        src,
                        dst,
                        sport,
                        dport,
                        autobound: true,
                        ifindex: 0,
                        cgroup_id: 0,
                        mark: 0,
                    };
                    let want = (in_set(sport) || in_set(dport))
                        && bytecode_prefix_ok(src, local)
                        && bytecode_prefix_ok(dst, remote);
                    assert_eq!(run(&prog, &s), want, "{s:?}");
                    assert_eq!(eval(&e, &s), want);
                    n += usize::from(want);
                }
            }
        }
    }
    assert!(n > 0);
}

/// The prefix rule spelled out once more, independently: v4 prefixes also match v4-mapped v6.
fn bytecode_prefix_ok(a: IpAddr, (net, len): (IpAddr, u8)) -> bool {
    match (net, a) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            len == 0
                || (u32::from(n) >> (32 - u32::from(len)))
                    == (u32::from(a) >> (32 - u32::from(len)))
        }
        (IpAddr::V4(n), IpAddr::V6(a)) => a
            .to_ipv4_mapped()
            .is_some_and(|a| bytecode_prefix_ok(IpAddr::V4(a), (IpAddr::V4(n), len))),
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            len == 0
                || (u128::from(n) >> (128 - u32::from(len)))
                    == (u128::from(a) >> (128 - u32::from(len)))
        }
        (IpAddr::V6(_), IpAddr::V4(_)) => false,
    }
}

#[test]
fn prefix_semantics_by_hand() {
    let s = |src: IpAddr| BcSocket {
        src,
        dst: src,
        sport: 1,
        dport: 1,
        autobound: false,
        ifindex: 0,
        cgroup_id: 0,
        mark: 0,
    };
    let m =
        |net: IpAddr, len: u8, sock: IpAddr| run(&compile(&prefix(Side::Src, net, len)), &s(sock));
    assert!(m(v4("10.0.0.0"), 8, v4("10.1.2.3")));
    assert!(!m(v4("10.0.0.0"), 8, v4("11.1.2.3")));
    // AF_INET conditions match v4-mapped AF_INET6 sockets...
    assert!(m(v4("10.0.0.0"), 8, v6("::ffff:10.1.2.3")));
    assert!(!m(v4("10.0.0.0"), 8, v6("::fffe:10.1.2.3")));
    // ...so 0.0.0.0/0 means "IPv4 or v4-mapped", not "anything".
    assert!(m(v4("0.0.0.0"), 0, v6("::ffff:1.2.3.4")));
    assert!(!m(v4("0.0.0.0"), 0, v6("2001:db8::1")));
    // AF_INET6 conditions never match AF_INET sockets.
    assert!(!m(v6("::"), 0, v4("1.2.3.4")));
    assert!(m(v6("::ffff:0.0.0.0"), 96, v6("::ffff:1.2.3.4")));
    assert!(!m(v6("::ffff:0.0.0.0"), 96, v4("1.2.3.4")));
    // Over-long prefixes are clamped to the address width.
    assert!(m(v4("10.1.2.3"), 200, v4("10.1.2.3")));
    assert!(!m(v4("10.1.2.3"), 200, v4("10.1.2.4")));
    // Non-byte-aligned prefixes.
    assert!(m(v4("10.128.0.0"), 9, v4("10.200.0.1")));
    assert!(!m(v4("10.128.0.0"), 9, v4("10.100.0.1")));
    assert!(m(v6("2001:db8:8000::"), 33, v6("2001:db8:ffff::1")));
    assert!(!m(v6("2001:db8:8000::"), 33, v6("2001:db8:7fff::1")));
}

#[test]
fn random_expressions_agree_with_eval() {
    let addrs = addrs();
    let mut r = Rng(0x0005_eed0_f50c_57a7);
    let socks: Vec<BcSocket> = (0..300).map(|_| random_socket(&mut r, &addrs)).collect();
    for _ in 0..3000 {
        let e = random_expr(&mut r, &addrs, 0);
        check(&e, &socks);
    }
}

#[test]
fn helpers() {
    assert_eq!(port_range(Side::Src, 5, 4), Expr::never());
    assert_eq!(port_range(Side::Dst, 0, 65535), Expr::True);
    assert_eq!(
        port_range(Side::Src, 80, 80),
        Expr::Cond(Cond::SrcPortEq(80))
    );
    assert_eq!(
        port_range(Side::Src, 0, 80),
        Expr::Cond(Cond::SrcPortLe(80))
    );
    assert_eq!(
        port_range(Side::Dst, 80, 65535),
        Expr::Cond(Cond::DstPortGe(80))
    );
    assert_eq!(ports_in(Side::Src, &[]), Expr::never());
    let e = either_port_in(&[(22, 22)]);
    assert_eq!(compile(&e).len(), 20);
    assert_eq!(compile(&Expr::True), op(bytecode::op::NOP, 4, 8));
    assert_eq!(compile(&Expr::never()), op(bytecode::op::JMP, 4, 8));
}

#[test]
fn deep_and_long_expressions() {
    let mut e = Expr::Cond(Cond::SrcPortEq(1));
    for _ in 0..100 {
        e = Expr::not(e);
    }
    let prog = compile(&e);
    assert!(audit(&prog));
    let mut e = Expr::True;
    for _ in 0..(bytecode::MAX_DEPTH + 2) {
        e = Expr::not(e);
    }
    assert_eq!(
        try_compile(&e, CompileOptions::default()),
        Err(bytecode::CompileError::TooDeep)
    );
    assert!(audit(&compile(&e)), "the fallback is the match-all program");
    // The largest port list that fits: a few thousand conditions.
    let ranges: Vec<(u16, u16)> = (0..1500u16).map(|p| (p, p)).collect();
    let prog = try_compile(&ports_in(Side::Src, &ranges), CompileOptions::default()).unwrap();
    assert!(prog.len() <= bytecode::MAX_PROGRAM_LEN);
    assert!(audit(&prog));
    let s = BcSocket {
        src: v4("1.1.1.1"),
        dst: v4("1.1.1.1"),
        sport: 1499,
        dport: 0,
        autobound: false,
        ifindex: 0,
        cgroup_id: 0,
        mark: 0,
    };
    assert!(run(&prog, &s));
    assert!(!run(&prog, &BcSocket { sport: 1500, ..s }));
}

fn op(code: u8, yes: u8, no: u16) -> Vec<u8> {
    let mut v = vec![code, yes];
    v.extend_from_slice(&no.to_ne_bytes());
    v
}

#[test]
fn audit_mirrors_the_kernel_rules() {
    use bytecode::op::*;
    let inval = |p: &[u8]| matches!(audit_as(p, true), Err(AuditError::Invalid { .. }));
    // Length.
    assert!(inval(&[]));
    assert!(inval(&[0, 4, 0]));
    // NOP: `no` unchecked, `yes` must be >= 4, a multiple of 4, <= len + 4.
    assert!(audit(&op(NOP, 4, 0xffff)));
    assert!(inval(&op(NOP, 0, 8)));
    assert!(inval(&op(NOP, 6, 8)));
    assert!(inval(&op(NOP, 12, 8))); // lands past the end
                                     // JMP with `no` = len + 4 rejects everything and is valid.
    assert!(audit(&op(JMP, 4, 8)));
    assert!(inval(&op(JMP, 4, 12)));
    assert!(inval(&op(JMP, 4, 0)));
    // Port ops need the operand word; yes/no >= 8.
    assert!(inval(&op(S_GE, 8, 12)[..]));
    assert!(audit(&[op(S_GE, 8, 12), op(0, 0, 80)].concat()));
    assert!(inval(&[op(S_GE, 4, 12), op(0, 0, 80)].concat()));
    assert!(inval(&[op(S_GE, 8, 4), op(0, 0, 80)].concat()));
    // A `no` target inside the program must be on the yes chain: jumping into the operand
    // word of a port op is refused.
    let p = [op(NOP, 4, 0), op(D_GE, 8, 12), op(0, 0, 80), op(NOP, 4, 0)].concat();
    assert!(audit(&p));
    let p = [op(JMP, 4, 8), op(D_GE, 8, 12), op(0, 0, 80), op(NOP, 4, 0)].concat();
    assert!(inval(&p), "JMP into the middle of D_GE");
    let p = [op(JMP, 4, 12), op(D_GE, 8, 12), op(0, 0, 80), op(NOP, 4, 0)].concat();
    assert!(audit(&p), "JMP over D_GE to the NOP");
    // Hostcond: family, address length, prefix length.
    let hc = |fam: u8, plen: u8, alen: usize| {
        let size = (12 + alen) as u8;
        let mut v = op(S_COND, size, u16::from(size) + 4);
        v.extend_from_slice(&[fam, plen, 0, 0]);
        v.extend_from_slice(&(-1i32).to_ne_bytes());
        v.extend(std::iter::repeat_n(0u8, alen));
        v
    };
    assert!(audit(&hc(2, 32, 4)));
    assert!(inval(&hc(2, 33, 4)));
    assert!(audit(&hc(10, 128, 16)));
    assert!(inval(&hc(10, 129, 16)));
    assert!(audit(&hc(0, 0, 0)));
    assert!(inval(&hc(0, 1, 0)));
    assert!(inval(&hc(1, 0, 4)));
    assert!(inval(&hc(10, 0, 4)), "AF_INET6 with a 4-byte address");
    // DEV_COND, CGROUP_COND operand sizes.
    assert!(audit(
        &[op(DEV_COND, 8, 12), 7u32.to_ne_bytes().to_vec()].concat()
    ));
    assert!(inval(&op(DEV_COND, 8, 12)));
    assert!(audit(
        &[op(CGROUP_COND, 12, 16), 7u64.to_ne_bytes().to_vec()].concat()
    ));
    assert!(inval(
        &[op(CGROUP_COND, 8, 12), 7u32.to_ne_bytes().to_vec()].concat()
    ));
    // MARK_COND needs CAP_NET_ADMIN: EPERM before any other check.
    let mark = [
        op(MARK_COND, 12, 16),
        1u32.to_ne_bytes().to_vec(),
        1u32.to_ne_bytes().to_vec(),
    ]
    .concat();
    assert!(audit(&mark));
    assert_eq!(
        audit_as(&mark, false),
        Err(AuditError::NeedsNetAdmin { offset: 0 })
    );
    // Unknown op codes.
    assert!(inval(&op(14, 4, 8)));
    assert!(inval(&op(255, 4, 8)));
}

#[test]
fn run_never_panics_or_loops_on_garbage() {
    let mut r = Rng(42);
    let addrs = addrs();
    let s = random_socket(&mut r, &addrs);
    for _ in 0..20000 {
        let n = r.below(40) as usize;
        let prog: Vec<u8> = (0..n)
            .map(|_| r.pick(&[0u8, 1, 2, 4, 7, 8, 11, 12, 13, 255]) ^ (r.below(2) as u8))
            .collect();
        let _ = std::hint::black_box((audit(&prog), audit_as(&prog, false), run(&prog, &s)));
    }
}
