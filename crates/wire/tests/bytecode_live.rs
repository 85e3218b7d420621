//! Compiled programs against the running kernel: the kernel's audit must accept every program
//! `compile` produces and select exactly the sockets `eval` describes; and on random programs
//! the kernel's verdicts must match `audit` and its selections must match `run`.
//!
//! Needs root: the test moves its own thread into a fresh network namespace
//! (`unshare(CLONE_NEWNET)`) so that exactly the sockets it creates exist. Without root it
//! prints "SKIPPED" and passes.

use std::collections::BTreeSet;
use std::io;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use sockstat_wire::bytecode::{
    self, audit_as, either_port_in, eval, ports_in, prefix, run, try_compile, AuditError, BcSocket,
    CompileOptions, Cond, Expr, Side,
};
use sockstat_wire::inet_diag::{self, InetDiagReq, AF_INET, AF_INET6, IPPROTO_TCP};
use sockstat_wire::netlink::{classify, messages, Control, NETLINK_SOCK_DIAG};

const LISTEN_V4: &[u16] = &[22, 80, 7999, 8000, 8050, 8100, 8101, 9000];

struct Diag(OwnedFd);

/// One dumped socket, owned.
#[derive(Debug, Clone)]
struct Sock {
    cookie: u64,
    bc: BcSocket,
}

impl Diag {
    fn open() -> io::Result<Diag> {
        // SAFETY: plain socket(2); the fd is owned by the returned OwnedFd.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh, valid descriptor we own.
        Ok(Diag(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// TCP dump of one family with an optional program: the sockets, or the positive errno
    /// from NLMSG_ERROR / NLMSG_DONE.
    fn dump(&self, family: u8, bytecode: Option<Vec<u8>>) -> Result<Vec<Sock>, i32> {
        let req = InetDiagReq {
            family,
            protocol: IPPROTO_TCP,
            ext: 0,
            raw_protocol: 0,
            states: u32::MAX,
            sport: 0,
            dport: 0,
            bytecode,
        }
        .encode(1);
        // SAFETY: req is a valid buffer of req.len() bytes.
        let n = unsafe { libc::send(self.0.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
        assert_eq!(
            n,
            req.len() as isize,
            "send: {}",
            io::Error::last_os_error()
        );
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            // SAFETY: buf is a valid writable buffer of buf.len() bytes.
            let n =
                unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            assert!(n > 0, "recv: {}", io::Error::last_os_error());
            for m in messages(&buf[..n as usize]) {
                match classify(&m.unwrap()).unwrap() {
                    Control::Data(p) => {
                        let d = inet_diag::decode_msg(p).unwrap();
                        out.push(Sock {
                            cookie: d.cookie,
                            bc: BcSocket {
                                src: d.src,
                                dst: d.dst,
                                sport: d.sport,
                                dport: d.dport,
                                // Only the listeners bound a port explicitly. Accepted
                                // children count as auto-bound: sk_clone_lock() clears
                                // SOCK_BINDPORT_LOCK (net/core/sock.c).
                                autobound: d.state != 10,
                                ifindex: d.ifindex,
                                cgroup_id: d.attrs.cgroup_id.unwrap_or(0),
                                mark: d.attrs.mark.unwrap_or(0),
                            },
                        });
                    }
                    Control::Done { errno: None } => return Ok(out),
                    Control::Done { errno: Some(e) } | Control::Error { errno: e } => {
                        return Err(e)
                    }
                    _ => {}
                }
            }
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Moves the calling thread into a new network namespace and brings `lo` up.
fn enter_private_netns() -> io::Result<()> {
    // SAFETY: unshare only affects the calling thread's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: ioctl on a socket we own with a zero-initialised, correctly sized ifreq.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (d, s) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
            *d = *s as libc::c_char;
        }
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) < 0 {
            return Err(io::Error::last_os_error());
        }
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Runs `f` on a new thread inside a private netns; `false` if that is not possible here.
fn with_private_netns(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    if !is_root() {
        eprintln!("SKIPPED {name}: needs root (unshare(CLONE_NEWNET) for a private netns)");
        return false;
    }
    let r = std::thread::spawn(move || {
        if let Err(e) = enter_private_netns() {
            eprintln!("SKIPPED: cannot create a private netns: {e}");
            return;
        }
        f();
    })
    .join();
    if let Err(p) = r {
        std::panic::resume_unwind(p);
    }
    true
}

/// The sockets: v4 listeners on LISTEN_V4, a v6-only listener [::1]:8080, a dual-stack
/// listener [::]:8060, and clients to 22, 8050, 9000, 8101, [::1]:8080 and 127.0.0.1:8060.
fn make_sockets() -> (Vec<TcpListener>, Vec<TcpStream>) {
    let mut ls: Vec<TcpListener> = LISTEN_V4
        .iter()
        .map(|p| TcpListener::bind(("127.0.0.1", *p)).unwrap())
        .collect();
    ls.push(TcpListener::bind("[::1]:8080").unwrap());
    ls.push(TcpListener::bind("[::]:8060").unwrap());
    let mut streams = Vec::new();
    for (addr, li) in [
        ("127.0.0.1:22", 0),
        ("127.0.0.1:8050", 4),
        ("127.0.0.1:9000", 7),
        ("127.0.0.1:8101", 6),
        ("[::1]:8080", 8),
        ("127.0.0.1:8060", 9),
    ] {
        streams.push(TcpStream::connect(addr).unwrap());
        streams.push(ls[li].accept().unwrap().0);
    }
    (ls, streams)
}

fn cookies<'a>(v: impl IntoIterator<Item = &'a Sock>) -> BTreeSet<u64> {
    v.into_iter().map(|s| s.cookie).collect()
}

#[test]
fn kernel_selects_exactly_what_eval_describes() {
    with_private_netns("kernel_selects_exactly_what_eval_describes", || {
        let _keep = make_sockets();
        let diag = Diag::open().unwrap();
        let all4 = diag.dump(AF_INET, None).unwrap();
        let all6 = diag.dump(AF_INET6, None).unwrap();
        // v4: 8 listeners, 4 pairs, and the v4 client of the dual-stack listener.
        // v6: 2 listeners, the [::1]:8080 pair, and the v4-mapped accepted end on 8060.
        assert_eq!((all4.len(), all6.len()), (17, 5));

        let cg = all4[0].bc.cgroup_id;
        let lo8 = (IpAddr::from([127, 0, 0, 0]), 8);
        let ports = either_port_in(&[(22, 22), (80, 80), (8000, 8100)]);
        let exprs = vec![
            Expr::True,
            Expr::never(),
            ports.clone(),
            Expr::And(vec![
                ports.clone(),
                prefix(Side::Src, lo8.0, lo8.1),
                prefix(Side::Dst, lo8.0, lo8.1),
            ]),
            Expr::not(ports.clone()),
            ports_in(Side::Src, &[(8000, 8100)]),
            ports_in(Side::Dst, &[(8050, 8050), (9000, 9000), (8080, 8080)]),
            Expr::Cond(Cond::AutoBound),
            Expr::And(vec![
                Expr::not(Expr::Cond(Cond::AutoBound)),
                Expr::Cond(Cond::Cgroup(cg)),
            ]),
            Expr::Cond(Cond::Cgroup(cg.wrapping_add(12345))),
            Expr::Or(vec![
                Expr::Cond(Cond::Dev(1)),
                Expr::Cond(Cond::DstPortEq(22)),
            ]),
            Expr::Cond(Cond::Dev(0)),
            prefix(Side::Src, "::1".parse().unwrap(), 128),
            prefix(Side::Dst, "::ffff:127.0.0.1".parse().unwrap(), 128),
            prefix(Side::Src, "0.0.0.0".parse().unwrap(), 0),
        ];
        let mut nonempty = 0;
        for e in &exprs {
            for port_eq_ops in [true, false] {
                let prog = try_compile(e, CompileOptions { port_eq_ops }).unwrap();
                for (fam, all) in [(AF_INET, &all4), (AF_INET6, &all6)] {
                    let got = diag
                        .dump(fam, Some(prog.clone()))
                        .unwrap_or_else(|errno| panic!("kernel rejected {e:?}: errno {errno}"));
                    let want: Vec<&Sock> = all.iter().filter(|s| eval(e, &s.bc)).collect();
                    assert_eq!(
                        cookies(&got),
                        cookies(want.iter().copied()),
                        "{e:?} family {fam}"
                    );
                    nonempty += usize::from(!got.is_empty());
                }
            }
        }
        assert!(nonempty > 20);
        eprintln!(
            "live bytecode: {} expressions x 2 dialects x 2 families agree",
            exprs.len()
        );
    });
}

mod common;
use common::Rng;

/// A random program, 4-byte aligned: ops with plausible operands whose `no` targets are
/// mostly legal (an op boundary, the end, or the reject word past the end) and sometimes not.
fn random_program(r: &mut Rng) -> Vec<u8> {
    let n_ops = 1 + r.next() % 5;
    let mut ops: Vec<(u8, u8, Vec<u8>)> = Vec::new();
    for _ in 0..n_ops {
        let code = r.pick(&[0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 13, 7, 8, 14]);
        let (mut yes, operand): (u8, Vec<u8>) = match code {
            2..=5 | 11 | 12 => {
                let port = r.pick(&[
                    0u16, 22, 80, 8000, 8050, 8060, 8080, 8100, 9000, 40000, 65535,
                ]);
                let mut v = vec![0, 0];
                v.extend_from_slice(&port.to_ne_bytes());
                (8, v)
            }
            7 | 8 => {
                let fam = r.pick(&[0u8, 2, 2, 10, 10, 7]);
                let alen = match fam {
                    2 => 4,
                    10 => 16,
                    _ => r.pick(&[0usize, 4]),
                };
                let plen = r.pick(&[0u8, 1, 8, 24, 32, 33, 96, 104, 127, 128, 129]);
                let port = r.pick(&[-1i32, -1, 22, 8050, 8060, 0]);
                let mut v = vec![fam, plen, 0, 0];
                v.extend_from_slice(&port.to_ne_bytes());
                let addr: [u8; 16] = r.pick(&[
                    [0u8; 16],
                    [127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
                ]);
                v.extend_from_slice(&addr[..alen]);
                ((12 + alen) as u8, v)
            }
            9 => (8, r.pick(&[0u32, 1]).to_ne_bytes().to_vec()),
            13 => (12, r.pick(&[0u64, 1, 2]).to_ne_bytes().to_vec()),
            _ => (4, Vec::new()),
        };
        if r.next() % 16 == 0 {
            yes = r.pick(&[0u8, 4, 8, 12, 16, 6]);
        }
        ops.push((code, yes, operand));
    }
    let total: usize = ops.iter().map(|(_, _, o)| 4 + o.len()).sum();
    let mut p = Vec::with_capacity(total);
    let mut boundaries = Vec::new();
    let mut off = 0;
    for (_, _, o) in &ops {
        boundaries.push(off);
        off += 4 + o.len();
    }
    for (i, (code, yes, operand)) in ops.into_iter().enumerate() {
        let here = boundaries[i];
        let rem = total - here;
        let no = match r.next() % 6 {
            0 => rem + 4,
            1 => rem,
            2 | 3 => {
                // A later op boundary.
                let later: Vec<usize> = boundaries[i + 1..].iter().map(|b| b - here).collect();
                if later.is_empty() {
                    rem + 4
                } else {
                    r.pick(&later)
                }
            }
            4 => r.pick(&[0usize, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 64]),
            _ => rem + 4 + r.pick(&[0usize, 4]),
        };
        p.push(code);
        p.push(yes);
        p.extend_from_slice(&(no as u16).to_ne_bytes());
        p.extend_from_slice(&operand);
    }
    p
}

#[test]
fn random_programs_audit_and_run_match_the_kernel() {
    with_private_netns("random_programs_audit_and_run_match_the_kernel", || {
        let _keep = make_sockets();
        let diag = Diag::open().unwrap();
        let all4 = diag.dump(AF_INET, None).unwrap();
        let all6 = diag.dump(AF_INET6, None).unwrap();
        let mut r = Rng(0xdecafbad);
        let (mut accepted, mut rejected) = (0, 0);
        for i in 0..1000 {
            let prog = random_program(&mut r);
            let fam = if i % 2 == 0 { AF_INET } else { AF_INET6 };
            let all = if fam == AF_INET { &all4 } else { &all6 };
            let ours = audit_as(&prog, true);
            match (diag.dump(fam, Some(prog.clone())), ours) {
                (Ok(got), Ok(())) => {
                    accepted += 1;
                    let want = all.iter().filter(|s| run(&prog, &s.bc));
                    assert_eq!(cookies(&got), cookies(want), "run() disagrees on {prog:?}");
                }
                (Err(libc::EINVAL), Err(AuditError::Invalid { .. })) => rejected += 1,
                (k, o) => panic!("kernel {:?} vs audit {o:?} on {prog:?}", k.map(|v| v.len())),
            }
        }
        eprintln!("random programs: {accepted} accepted, {rejected} rejected, all agree");
        assert!(accepted > 100 && rejected > 100, "{accepted} / {rejected}");
        // MARK_COND: accepted for root (CAP_NET_ADMIN), and `audit_as(_, false)` says EPERM.
        let mark = [vec![bytecode::op::MARK_COND, 12, 16, 0], vec![0; 8]].concat();
        assert_eq!(
            audit_as(&mark, false),
            Err(AuditError::NeedsNetAdmin { offset: 0 })
        );
        assert!(diag.dump(AF_INET, Some(mark)).is_ok());
    });
}
