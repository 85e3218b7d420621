//! sockgen: builds a realistic socket table and holds it until stopped.
//!
//! `sockgen -n N -p P [--truth FILE] [--dir DIR] [--seed S] [--tw-period SECS] [--max-seconds S]
//! [--netns]`
//!
//! `--netns`: build the table in a network namespace of its own (unshare(CLONE_NEWNET), `lo`
//! up), as a container would hold it; `sockbench serve` starts one sockgen per zone this way.
//!
//! Workload (fractions of N, as in doc/reference/BENCHMARKS.md and the baseline study):
//!   TCP listeners 2 %, established loopback pairs 40 % (20 % of N connections, each
//!   with its client and server end in two different processes), TIME_WAIT 5 %,
//!   UDP 10 % (4/5 bound, 1/5 connected), unix stream 30 % (listeners with a path or an
//!   abstract name, connections through them, socketpairs), unix dgram 13 % (/dev/log-like
//!   receivers with ~9 connected clients each, socketpairs). About 20 % of TCP and UDP is
//!   on ::1, the rest on 127.0.0.0/8. Every worker also holds non-socket fds (regular
//!   files, /dev/null, pipes, eventfds): about 0.47 per socket in total.
//!
//! TIME_WAIT is kept steady: a helper process makes the initial TIME_WAIT sockets (the
//! client closes first) and then re-opens and closes each 4-tuple again every
//! `--tw-period` seconds (default 50 s < the 60 s TIME_WAIT lifetime), binding the same
//! local port, which replaces the old TIME_WAIT entry. So TIME_WAIT sockets come and go
//! at about N*5 %/50 s per second while their count stays at N*5 %. The trickle's own
//! short-lived sockets all have port 1999 at one end (`churn_ports` in the truth file).
//!
//! Process tree: the coordinator (this process, holds no sockets), one TIME_WAIT helper,
//! P workers. Every child sets PR_SET_PDEATHSIG; the coordinator cleans up on
//! SIGTERM/SIGINT/SIGHUP, when its own parent dies (PR_SET_PDEATHSIG(SIGTERM)) and after
//! `--max-seconds`. When the table is built it prints one line `READY ...` on stdout.
//! `--truth FILE` writes the expected counts (per category and per pid) as JSON
//! (`--truth -`: one JSON line on stdout, just before the READY line).

use std::ffi::CString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

const TW_PORT: u16 = 1999;
const TCP_PORT_BASE: u16 = 2000;
const TCP_PORTS_PER_ADDR: usize = 7000;
const UDP_PORT_BASE: u16 = 10000;
const TW_SRC_PORT_BASE: u16 = 10000;
const TW_SRC_PORTS: usize = 10000;
const UDP_PORTS_PER_ADDR: usize = 20000;

fn die(msg: &str) -> ! {
    eprintln!("sockgen: {msg}");
    std::process::exit(2)
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn check(r: libc::c_int, what: &str) -> libc::c_int {
    if r < 0 {
        die(&format!("{what}: {}", std::io::Error::last_os_error()));
    }
    r
}

// ---------------------------------------------------------------- plan

#[derive(Clone, Copy)]
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[derive(Clone, Copy)]
struct InetAddr {
    v6: bool,
    a4: [u8; 4],
    port: u16,
}

struct TcpL {
    owner: usize,
    addr: InetAddr,
    conns: usize,
}

struct UxL {
    owner: usize,
    name: Vec<u8>, // sun_path bytes; abstract names start with 0
    conns: usize,
}

#[derive(Default)]
struct NonSock {
    files: usize,
    pipes: usize,
    eventfds: usize,
}

struct Plan {
    p: usize,
    tcp_l: Vec<TcpL>,
    tcp_c: Vec<(usize, usize)>,
    udp_s: Vec<(usize, InetAddr)>,
    udp_c: Vec<(usize, usize)>,
    ux_l: Vec<UxL>,
    ux_c: Vec<(usize, usize)>,
    ux_sp: Vec<usize>,
    ux_dr: Vec<UxL>,
    ux_dc: Vec<(usize, usize)>,
    ux_dp: Vec<usize>,
    nonsock: Vec<NonSock>,
    tw: usize,
    dir: String,
}

fn frac(n: usize, f: f64) -> usize {
    (n as f64 * f).round() as usize
}

fn tcp_addr(v6: bool, k: usize) -> InetAddr {
    if v6 {
        if k >= 60000 {
            die("too many v6 TCP listeners");
        }
        InetAddr {
            v6,
            a4: [0; 4],
            port: TCP_PORT_BASE + k as u16,
        }
    } else {
        let a = 1 + k / TCP_PORTS_PER_ADDR;
        if a > 250 {
            die("too many v4 TCP listeners");
        }
        InetAddr {
            v6,
            a4: [127, 0, 0, a as u8],
            port: TCP_PORT_BASE + (k % TCP_PORTS_PER_ADDR) as u16,
        }
    }
}

fn udp_addr(v6: bool, k: usize) -> InetAddr {
    if v6 {
        if k >= 22000 {
            die("too many v6 UDP sockets");
        }
        InetAddr {
            v6,
            a4: [0; 4],
            port: UDP_PORT_BASE + k as u16,
        }
    } else {
        let a = 1 + k / UDP_PORTS_PER_ADDR;
        if a > 250 {
            die("too many v4 UDP sockets");
        }
        InetAddr {
            v6,
            a4: [127, 0, 0, a as u8],
            port: UDP_PORT_BASE + (k % UDP_PORTS_PER_ADDR) as u16,
        }
    }
}

fn other_owner(rng: &mut Rng, p: usize, not: usize) -> usize {
    if p <= 1 {
        return 0;
    }
    let o = rng.below(p - 1);
    if o >= not {
        o + 1
    } else {
        o
    }
}

fn make_plan(n: usize, p: usize, seed: u64, dir: &str, cpid: u32) -> Plan {
    let mut rng = Rng(seed);
    let tw = frac(n, 0.05);
    // TCP listeners: 2 % of N, two of them belong to the TIME_WAIT helper.
    let n_tl = frac(n, 0.02).saturating_sub(2).max(2);
    let n_conn = frac(n, 0.20).max(1);
    let n_udp = frac(n, 0.10).max(2);
    let n_udp_c = n_udp / 5;
    let n_udp_s = n_udp - n_udp_c;
    let n_uxl = frac(n, 0.01).max(1);
    let n_uxc = frac(n, 0.05);
    let n_uxsp = frac(n, 0.30).saturating_sub(n_uxl + 2 * n_uxc) / 2;
    let n_uxdr = frac(n, 0.005).max(1);
    let n_uxdc = frac(n, 0.045);
    let n_uxdp = frac(n, 0.13).saturating_sub(n_uxdr + n_uxdc) / 2;

    let (mut k4, mut k6) = (0, 0);
    let mut tcp_l = Vec::with_capacity(n_tl);
    let (mut l4, mut l6) = (Vec::new(), Vec::new());
    for i in 0..n_tl {
        let v6 = i % 5 == 4;
        let addr = if v6 {
            k6 += 1;
            l6.push(i);
            tcp_addr(true, k6 - 1)
        } else {
            k4 += 1;
            l4.push(i);
            tcp_addr(false, k4 - 1)
        };
        tcp_l.push(TcpL {
            owner: i % p,
            addr,
            conns: 0,
        });
    }
    let mut tcp_c = Vec::with_capacity(n_conn);
    for j in 0..n_conn {
        let pool = if j % 5 == 4 && !l6.is_empty() {
            &l6
        } else {
            &l4
        };
        let li = pool[rng.below(pool.len())];
        tcp_l[li].conns += 1;
        let owner = other_owner(&mut rng, p, tcp_l[li].owner);
        tcp_c.push((owner, li));
    }
    let (mut u4, mut u6) = (0, 0);
    let mut udp_s = Vec::with_capacity(n_udp_s);
    for i in 0..n_udp_s {
        let v6 = i % 5 == 4;
        let addr = if v6 {
            u6 += 1;
            udp_addr(true, u6 - 1)
        } else {
            u4 += 1;
            udp_addr(false, u4 - 1)
        };
        udp_s.push((rng.below(p), addr));
    }
    let mut udp_c = Vec::with_capacity(n_udp_c);
    for _ in 0..n_udp_c {
        let si = rng.below(udp_s.len());
        let owner = other_owner(&mut rng, p, udp_s[si].0);
        udp_c.push((owner, si));
    }
    let mut ux_l = Vec::with_capacity(n_uxl);
    for k in 0..n_uxl {
        let name = if k % 5 == 4 {
            let mut v = vec![0u8];
            v.extend_from_slice(format!("sockgen.{cpid}.s{k}").as_bytes());
            v
        } else {
            format!("{dir}/s{k}").into_bytes()
        };
        ux_l.push(UxL {
            owner: rng.below(p),
            name,
            conns: 0,
        });
    }
    let mut ux_c = Vec::with_capacity(n_uxc);
    for _ in 0..n_uxc {
        let li = rng.below(ux_l.len());
        ux_l[li].conns += 1;
        let owner = other_owner(&mut rng, p, ux_l[li].owner);
        ux_c.push((owner, li));
    }
    let ux_sp = (0..n_uxsp).map(|_| rng.below(p)).collect();
    let mut ux_dr = Vec::with_capacity(n_uxdr);
    for k in 0..n_uxdr {
        ux_dr.push(UxL {
            owner: rng.below(p),
            name: format!("{dir}/d{k}").into_bytes(),
            conns: 0,
        });
    }
    let mut ux_dc = Vec::with_capacity(n_uxdc);
    for _ in 0..n_uxdc {
        let ri = rng.below(ux_dr.len());
        ux_dr[ri].conns += 1;
        let owner = other_owner(&mut rng, p, ux_dr[ri].owner);
        ux_dc.push((owner, ri));
    }
    let ux_dp = (0..n_uxdp).map(|_| rng.below(p)).collect();
    // Non-socket fds: ~0.47 per socket: 40 % files, 40 % pipe ends, 20 % eventfds.
    let total_ns = frac(n, 0.47);
    let mut nonsock: Vec<NonSock> = (0..p).map(|_| NonSock::default()).collect();
    for (w, ns) in nonsock.iter_mut().enumerate() {
        let mine = total_ns / p + usize::from(w < total_ns % p);
        ns.pipes = mine * 2 / 10;
        ns.files = mine * 4 / 10;
        ns.eventfds = mine - ns.files - 2 * ns.pipes;
    }
    Plan {
        p,
        tcp_l,
        tcp_c,
        udp_s,
        udp_c,
        ux_l,
        ux_c,
        ux_sp,
        ux_dr,
        ux_dc,
        ux_dp,
        nonsock,
        tw,
        dir: dir.to_string(),
    }
}

// ---------------------------------------------------------------- socket helpers

fn sockaddr_in(a: &InetAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    if a.v6 {
        let s6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
        s6.sin6_family = libc::AF_INET6 as _;
        s6.sin6_port = a.port.to_be();
        s6.sin6_addr.s6_addr[15] = 1; // ::1
        (ss, std::mem::size_of::<libc::sockaddr_in6>() as _)
    } else {
        let s4 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
        s4.sin_family = libc::AF_INET as _;
        s4.sin_port = a.port.to_be();
        s4.sin_addr.s_addr = u32::from_ne_bytes(a.a4);
        (ss, std::mem::size_of::<libc::sockaddr_in>() as _)
    }
}

fn sockaddr_un(name: &[u8]) -> (libc::sockaddr_un, libc::socklen_t) {
    let mut su: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    su.sun_family = libc::AF_UNIX as _;
    if name.len() >= su.sun_path.len() {
        die("unix socket name too long");
    }
    for (d, s) in su.sun_path.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    let base = std::mem::size_of::<libc::sa_family_t>();
    // abstract names: exact length; paths: include the terminating NUL
    let len = if name.first() == Some(&0) {
        base + name.len()
    } else {
        base + name.len() + 1
    };
    (su, len as _)
}

fn socket(domain: i32, ty: i32) -> i32 {
    check(
        unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0) },
        "socket",
    )
}

fn set_reuseaddr(fd: i32) {
    let one: libc::c_int = 1;
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            &one as *const _ as *const libc::c_void,
            4,
        )
    };
}

fn bind_in(fd: i32, a: &InetAddr) -> libc::c_int {
    let (ss, len) = sockaddr_in(a);
    unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) }
}

fn connect_in(fd: i32, a: &InetAddr) -> libc::c_int {
    let (ss, len) = sockaddr_in(a);
    loop {
        let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) };
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        return r;
    }
}

fn fam(v6: bool) -> i32 {
    if v6 {
        libc::AF_INET6
    } else {
        libc::AF_INET
    }
}

fn tcp_listen(a: &InetAddr) -> i32 {
    let fd = socket(fam(a.v6), libc::SOCK_STREAM);
    set_reuseaddr(fd);
    if bind_in(fd, a) < 0 {
        die(&format!(
            "bind tcp port {}: {}",
            a.port,
            std::io::Error::last_os_error()
        ));
    }
    check(unsafe { libc::listen(fd, 4096) }, "listen");
    fd
}

fn tcp_connect(a: &InetAddr) -> i32 {
    let fd = socket(fam(a.v6), libc::SOCK_STREAM);
    if connect_in(fd, a) < 0 {
        die(&format!(
            "connect tcp port {}: {}",
            a.port,
            std::io::Error::last_os_error()
        ));
    }
    fd
}

fn accept(fd: i32) -> i32 {
    loop {
        let r = unsafe {
            libc::accept4(
                fd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        return check(r, "accept");
    }
}

fn ux_bind(ty: i32, name: &[u8]) -> i32 {
    let fd = socket(libc::AF_UNIX, ty);
    let (su, len) = sockaddr_un(name);
    check(
        unsafe { libc::bind(fd, &su as *const _ as *const libc::sockaddr, len) },
        "bind unix",
    );
    fd
}

fn ux_connect(ty: i32, name: &[u8]) -> i32 {
    let fd = socket(libc::AF_UNIX, ty);
    let (su, len) = sockaddr_un(name);
    loop {
        let r = unsafe { libc::connect(fd, &su as *const _ as *const libc::sockaddr, len) };
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        check(r, "connect unix");
        return fd;
    }
}

fn socketpair(ty: i32) {
    let mut sv = [0i32; 2];
    check(
        unsafe { libc::socketpair(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) },
        "socketpair",
    );
}

fn close(fd: i32) {
    unsafe { libc::close(fd) };
}

fn write_all(fd: i32, buf: &[u8]) -> bool {
    let mut off = 0;
    while off < buf.len() {
        let r = unsafe { libc::write(fd, buf[off..].as_ptr() as *const _, buf.len() - off) };
        if r < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return false;
        }
        off += r as usize;
    }
    true
}

/// Reads one byte; returns None on EOF/error.
fn read_byte(fd: i32) -> Option<u8> {
    let mut b = [0u8; 1];
    loop {
        let r = unsafe { libc::read(fd, b.as_mut_ptr() as *mut _, 1) };
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        return if r == 1 { Some(b[0]) } else { None };
    }
}

// ---------------------------------------------------------------- children

fn child_setup(sig: i32, expected_parent: i32) {
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0);
        if libc::getppid() != expected_parent {
            libc::_exit(1);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        // stdin/stdout to /dev/null, so the reader of our READY line sees EOF when the
        // coordinator is gone; stderr stays for error messages.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
}

fn report(fd: i32, idx: usize, status: u8) {
    let mut b = [0u8; 5];
    b[..4].copy_from_slice(&(idx as u32).to_ne_bytes());
    b[4] = status;
    write_all(fd, &b);
}

fn worker(plan: &Plan, w: usize, ctl: i32, rep: i32) -> ! {
    // phase 1: non-socket fds, listeners, bound sockets, socketpairs
    if read_byte(ctl) != Some(1) {
        unsafe { libc::_exit(0) };
    }
    let mut tcp_fds: Vec<(usize, i32)> = Vec::new();
    let mut ux_fds: Vec<(usize, i32)> = Vec::new();
    let ns = &plan.nonsock[w];
    let regular = CString::new(format!("{}/f{}", plan.dir, w)).unwrap();
    for i in 0..ns.files {
        let fd = if i % 2 == 0 {
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) }
        } else {
            unsafe {
                libc::open(
                    regular.as_ptr(),
                    libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                    0o600,
                )
            }
        };
        check(fd, "open");
    }
    for _ in 0..ns.pipes {
        let mut p = [0i32; 2];
        check(
            unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) },
            "pipe",
        );
    }
    for _ in 0..ns.eventfds {
        check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) }, "eventfd");
    }
    for (i, l) in plan.tcp_l.iter().enumerate() {
        if l.owner == w {
            tcp_fds.push((i, tcp_listen(&l.addr)));
        }
    }
    for (owner, a) in &plan.udp_s {
        if *owner == w {
            let fd = socket(fam(a.v6), libc::SOCK_DGRAM);
            if bind_in(fd, a) < 0 {
                die(&format!(
                    "bind udp port {}: {}",
                    a.port,
                    std::io::Error::last_os_error()
                ));
            }
        }
    }
    for (i, l) in plan.ux_l.iter().enumerate() {
        if l.owner == w {
            let fd = ux_bind(libc::SOCK_STREAM, &l.name);
            check(unsafe { libc::listen(fd, 4096) }, "listen unix");
            ux_fds.push((i, fd));
        }
    }
    for r in &plan.ux_dr {
        if r.owner == w {
            ux_bind(libc::SOCK_DGRAM, &r.name);
        }
    }
    for o in &plan.ux_sp {
        if *o == w {
            socketpair(libc::SOCK_STREAM);
        }
    }
    for o in &plan.ux_dp {
        if *o == w {
            socketpair(libc::SOCK_DGRAM);
        }
    }
    report(rep, w, 0);
    // phase 2: connect
    if read_byte(ctl) != Some(2) {
        unsafe { libc::_exit(0) };
    }
    for (o, li) in &plan.tcp_c {
        if *o == w {
            tcp_connect(&plan.tcp_l[*li].addr);
        }
    }
    for (o, si) in &plan.udp_c {
        if *o == w {
            let a = &plan.udp_s[*si].1;
            let fd = socket(fam(a.v6), libc::SOCK_DGRAM);
            check(connect_in(fd, a), "connect udp");
        }
    }
    for (o, li) in &plan.ux_c {
        if *o == w {
            ux_connect(libc::SOCK_STREAM, &plan.ux_l[*li].name);
        }
    }
    for (o, ri) in &plan.ux_dc {
        if *o == w {
            ux_connect(libc::SOCK_DGRAM, &plan.ux_dr[*ri].name);
        }
    }
    report(rep, w, 0);
    // phase 3: accept
    if read_byte(ctl) != Some(3) {
        unsafe { libc::_exit(0) };
    }
    for (i, fd) in &tcp_fds {
        for _ in 0..plan.tcp_l[*i].conns {
            accept(*fd);
        }
    }
    for (i, fd) in &ux_fds {
        for _ in 0..plan.ux_l[*i].conns {
            accept(*fd);
        }
    }
    report(rep, w, 0);
    // hold until the coordinator goes away
    while read_byte(ctl).is_some() {}
    unsafe { libc::_exit(0) }
}

/// Source address of TIME_WAIT tuple k: its own port range (10000..19999, below the
/// default ephemeral range, which the runner moves to 20000..65535) and, for v4, its own
/// address 127.0.0.250 and down, so that binding it never meets another socket.
fn tw_src(k: usize) -> InetAddr {
    let v6 = k % 5 == 4;
    if v6 {
        let k6 = k / 5;
        if k6 >= TW_SRC_PORTS {
            die("too many TIME_WAIT sockets");
        }
        InetAddr {
            v6,
            a4: [0; 4],
            port: TW_SRC_PORT_BASE + k6 as u16,
        }
    } else {
        let k4 = k - k / 5;
        let a = 250 - (k4 / TW_SRC_PORTS).min(100);
        InetAddr {
            v6,
            a4: [127, 0, 0, a as u8],
            port: TW_SRC_PORT_BASE + (k4 % TW_SRC_PORTS) as u16,
        }
    }
}

/// One TIME_WAIT socket: connect from `src` (binding it replaces an old TIME_WAIT entry
/// of the same 4-tuple), accept, the client closes first.
fn tw_once(l4: i32, l6: i32, src: &InetAddr) -> bool {
    let dst = InetAddr {
        v6: src.v6,
        a4: [127, 0, 0, 1],
        port: TW_PORT,
    };
    let fd = socket(fam(src.v6), libc::SOCK_STREAM);
    set_reuseaddr(fd);
    if bind_in(fd, src) < 0 || connect_in(fd, &dst) < 0 {
        eprintln!(
            "sockgen: time-wait tuple port {}: {}",
            src.port,
            std::io::Error::last_os_error()
        );
        close(fd);
        return false;
    }
    let s = accept(if src.v6 { l6 } else { l4 });
    close(fd); // active close: the client side goes to TIME_WAIT
    close(s);
    true
}

fn tw_helper(n_tw: usize, period: f64, ctl: i32, rep: i32, idx: usize, deadline: Instant) -> ! {
    let l4 = tcp_listen(&InetAddr {
        v6: false,
        a4: [127, 0, 0, 1],
        port: TW_PORT,
    });
    let l6 = tcp_listen(&InetAddr {
        v6: true,
        a4: [0; 4],
        port: TW_PORT,
    });
    let ring: Vec<InetAddr> = (0..n_tw).map(tw_src).collect();
    for src in &ring {
        if !tw_once(l4, l6, src) {
            report(rep, idx, 1);
            unsafe { libc::_exit(1) }
        }
    }
    report(rep, idx, 0);
    if ring.is_empty() || period <= 0.0 {
        while read_byte(ctl).is_some() {}
        unsafe { libc::_exit(0) }
    }
    let start = Instant::now();
    let mut done: u64 = 0; // recycles made so far
    let mut failed: u64 = 0;
    let mut pfd = libc::pollfd {
        fd: ctl,
        events: libc::POLLIN,
        revents: 0,
    };
    while Instant::now() < deadline {
        let r = unsafe { libc::poll(&mut pfd, 1, 100) };
        // EOF (or anything) on the control pipe: the coordinator is gone
        if r > 0 && read_byte(ctl).is_none() {
            break;
        }
        let due = (start.elapsed().as_secs_f64() / period * ring.len() as f64) as u64;
        // bounded catch-up: at most one full ring per tick
        let mut budget = ring.len();
        while done < due && budget > 0 {
            let k = (done % ring.len() as u64) as usize;
            if !tw_once(l4, l6, &ring[k]) {
                failed += 1;
                if failed > 100 {
                    eprintln!("sockgen: time-wait trickle keeps failing, stopping it");
                    while read_byte(ctl).is_some() {}
                    unsafe { libc::_exit(1) }
                }
            }
            done += 1;
            budget -= 1;
        }
    }
    unsafe { libc::_exit(0) }
}

// ---------------------------------------------------------------- coordinator

struct Args {
    n: usize,
    p: usize,
    truth: Option<String>,
    dir: Option<String>,
    seed: u64,
    tw_period: f64,
    max_seconds: u64,
    netns: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: sockgen -n SOCKETS -p PROCS [--truth FILE|-] [--dir DIR] [--seed S] \
         [--tw-period SECS (0 = no trickle)] [--max-seconds S] [--netns]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        n: 1000,
        p: 50,
        truth: None,
        dir: None,
        seed: 1,
        tw_period: 50.0,
        max_seconds: 6 * 3600,
        netns: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| usage());
        match k.as_str() {
            "-n" => a.n = parse_scale(&v()),
            "-p" => a.p = v().parse().unwrap_or_else(|_| usage()),
            "--truth" => a.truth = Some(v()),
            "--dir" => a.dir = Some(v()),
            "--seed" => a.seed = v().parse().unwrap_or_else(|_| usage()),
            "--tw-period" => a.tw_period = v().parse().unwrap_or_else(|_| usage()),
            "--max-seconds" => a.max_seconds = v().parse().unwrap_or_else(|_| usage()),
            "--netns" => a.netns = true,
            _ => usage(),
        }
    }
    if a.p == 0 || a.n < 20 {
        usage();
    }
    a
}

fn parse_scale(s: &str) -> usize {
    let s = s.to_ascii_lowercase();
    let (num, mul) = if let Some(x) = s.strip_suffix('k') {
        (x, 1000)
    } else {
        (s.as_str(), 1)
    };
    num.parse::<usize>()
        .map(|x| x * mul)
        .unwrap_or_else(|_| usage())
}

/// Moves this process into a new network namespace (the workers it forks follow) and brings
/// its `lo` up, as `ip link set lo up` does (SIOCSIFFLAGS).
fn own_netns() {
    check(
        unsafe { libc::unshare(libc::CLONE_NEWNET) },
        "unshare(CLONE_NEWNET)",
    );
    #[repr(C)]
    struct IfreqFlags {
        name: [u8; 16],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    let mut req = IfreqFlags {
        name: [0; 16],
        flags: 0,
        _pad: [0; 22],
    };
    req.name[..2].copy_from_slice(b"lo");
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM);
    check(
        unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) },
        "SIOCGIFFLAGS lo",
    );
    req.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    check(
        unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) },
        "SIOCSIFFLAGS lo",
    );
    close(fd);
}

fn raise_nofile(need: u64) {
    let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20);
    let want = need.max(65536).min(nr_open);
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut cur) };
    if cur.rlim_cur >= want {
        return;
    }
    let r = libc::rlimit {
        rlim_cur: want,
        rlim_max: want.max(cur.rlim_max),
    };
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } < 0 {
        let r = libc::rlimit {
            rlim_cur: cur.rlim_max,
            rlim_max: cur.rlim_max,
        };
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
        if cur.rlim_max < need {
            die(&format!(
                "RLIMIT_NOFILE hard limit {} is below the {} fds a worker needs",
                cur.rlim_max, need
            ));
        }
    }
}

struct Coord {
    pids: Vec<i32>,
    dir: String,
    made_dir: bool,
}

impl Coord {
    fn cleanup(&self) {
        for &pid in &self.pids {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for &pid in &self.pids {
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        }
        if self.made_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
    fn fail(&self, msg: &str) -> ! {
        eprintln!("sockgen: {msg}");
        self.cleanup();
        std::process::exit(1)
    }
}

/// Waits until every worker (indices < nworkers) has reported for this phase and, if
/// `want_helper`, the TIME_WAIT helper (index nworkers) has reported at some point.
fn wait_reports(
    c: &Coord,
    rep: i32,
    nworkers: usize,
    helper_done: &mut bool,
    want_helper: bool,
    phase: &str,
    timeout: Duration,
) {
    let count = nworkers;
    let t0 = Instant::now();
    let mut got = 0;
    let mut buf = [0u8; 5 * 256];
    let mut pending: Vec<u8> = Vec::new();
    while got < count || (want_helper && !*helper_done) {
        let left = timeout.saturating_sub(t0.elapsed());
        if left.is_zero() {
            c.fail(&format!(
                "timeout in phase {phase}: {got}/{count} processes done"
            ));
        }
        if pending_signal() {
            c.fail("stopped by signal while building");
        }
        let mut pfd = libc::pollfd {
            fd: rep,
            events: libc::POLLIN,
            revents: 0,
        };
        let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(200) as i32) };
        if r <= 0 {
            continue;
        }
        let r = unsafe { libc::read(rep, buf.as_mut_ptr() as *mut _, buf.len()) };
        if r <= 0 {
            c.fail(&format!("report pipe closed in phase {phase}"));
        }
        pending.extend_from_slice(&buf[..r as usize]);
        while pending.len() >= 5 {
            let idx = u32::from_ne_bytes(pending[..4].try_into().unwrap());
            if pending[4] != 0 {
                c.fail(&format!("process #{idx} failed in phase {phase}"));
            }
            pending.drain(..5);
            if idx as usize == nworkers {
                *helper_done = true;
            } else {
                got += 1;
            }
        }
    }
}

fn blocked_set() -> libc::sigset_t {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// True if SIGTERM/SIGINT/SIGHUP is pending (consumes it); SIGCHLD of a dead worker
/// counts too, since the table is then incomplete.
fn pending_signal() -> bool {
    let set = blocked_set();
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let s = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    s > 0
}

fn main() {
    let args = parse_args();
    let parent = unsafe { libc::getppid() };
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != parent {
            std::process::exit(1);
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let set = blocked_set();
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    if args.netns {
        own_netns();
    }
    let cpid = std::process::id();
    let (dir, made_dir) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => (format!("/tmp/sockgen.{cpid}"), true),
    };
    if std::fs::create_dir_all(&dir).is_err() {
        die(&format!("cannot create {dir}"));
    }
    let t_start = Instant::now();
    let deadline = t_start + Duration::from_secs(args.max_seconds);
    let plan = make_plan(args.n, args.p, args.seed, &dir, cpid);
    let per_worker = (args.n as u64 * 2 / args.p as u64) + 1024;
    // The TIME_WAIT helper opens one connection at a time (`tw_once`), so only the workers'
    // share sets the limit (asking for the TIME_WAIT count too broke 500k sockets on a host
    // whose hard limit is 20,000).
    raise_nofile(per_worker);

    // report pipe (children -> coordinator), one control pipe per child
    let mut rp = [0i32; 2];
    check(
        unsafe { libc::pipe2(rp.as_mut_ptr(), libc::O_CLOEXEC) },
        "pipe",
    );
    let nchild = args.p + 1; // workers + TIME_WAIT helper (index p)
    let mut ctl_w = Vec::with_capacity(nchild);
    let mut c = Coord {
        pids: Vec::with_capacity(nchild),
        dir: dir.clone(),
        made_dir,
    };
    for idx in 0..nchild {
        let mut cp = [0i32; 2];
        check(
            unsafe { libc::pipe2(cp.as_mut_ptr(), libc::O_CLOEXEC) },
            "pipe",
        );
        let me = unsafe { libc::getpid() };
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            c.fail(&format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            child_setup(libc::SIGKILL, me);
            for &fd in &ctl_w {
                close(fd);
            }
            close(cp[1]);
            close(rp[0]);
            if idx == args.p {
                tw_helper(plan.tw, args.tw_period, cp[0], rp[1], idx, deadline);
            } else {
                worker(&plan, idx, cp[0], rp[1]);
            }
        }
        close(cp[0]);
        ctl_w.push(cp[1]);
        c.pids.push(pid);
    }
    close(rp[1]);
    let tmo = Duration::from_secs(600);
    let mut helper_done = false;
    // phase 1 (the TIME_WAIT helper starts on its own and reports once when done)
    for fd in &ctl_w[..args.p] {
        write_all(*fd, &[1]);
    }
    wait_reports(
        &c,
        rp[0],
        args.p,
        &mut helper_done,
        false,
        "1 (listen/bind)",
        tmo,
    );
    for fd in &ctl_w[..args.p] {
        write_all(*fd, &[2]);
    }
    wait_reports(
        &c,
        rp[0],
        args.p,
        &mut helper_done,
        false,
        "2 (connect)",
        tmo,
    );
    for fd in &ctl_w[..args.p] {
        write_all(*fd, &[3]);
    }
    // phase 3 of the workers, plus the TIME_WAIT helper's single report
    wait_reports(
        &c,
        rp[0],
        args.p,
        &mut helper_done,
        true,
        "3 (accept, time-wait)",
        tmo,
    );
    let build_s = t_start.elapsed().as_secs_f64();

    let truth = truth_json(&plan, &c.pids, cpid, build_s, args.tw_period);
    if args.truth.as_deref() == Some("-") {
        print!("{truth}");
    } else if let Some(path) = &args.truth {
        let tmp = format!("{path}.tmp");
        if std::fs::write(&tmp, &truth)
            .and_then(|_| std::fs::rename(&tmp, path))
            .is_err()
        {
            c.fail(&format!("cannot write {path}"));
        }
    }
    let (tot, _, _) = totals(&plan);
    println!(
        "READY coord_pid={cpid} sockets={tot} procs={} tw={} build_s={build_s:.2}",
        args.p, plan.tw
    );
    let _ = std::io::stdout().flush();

    // hold until a signal, a dead child, our parent's death (SIGTERM) or the deadline
    let set = blocked_set();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            eprintln!("sockgen: --max-seconds reached, stopping");
            break;
        }
        let ts = libc::timespec {
            tv_sec: left.as_secs().min(3600) as _,
            tv_nsec: 0,
        };
        let s = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
        if s == libc::SIGCHLD {
            // a child died: the table is no longer what the truth says
            let mut st = 0;
            let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
            if pid > 0 {
                eprintln!("sockgen: child {pid} exited (status {st}), stopping");
                c.pids.retain(|&p| p != pid);
                break;
            }
        } else if s > 0 {
            break;
        }
    }
    for fd in ctl_w {
        close(fd);
    }
    c.cleanup();
}

/// (total sockets incl. TIME_WAIT, socket fds, non-socket fds)
fn totals(plan: &Plan) -> (usize, usize, usize) {
    let fds = plan.tcp_l.len()
        + 2
        + 2 * plan.tcp_c.len()
        + plan.udp_s.len()
        + plan.udp_c.len()
        + plan.ux_l.len()
        + 2 * plan.ux_c.len()
        + 2 * plan.ux_sp.len()
        + plan.ux_dr.len()
        + plan.ux_dc.len()
        + 2 * plan.ux_dp.len();
    let ns: usize = plan
        .nonsock
        .iter()
        .map(|n| n.files + 2 * n.pipes + n.eventfds)
        .sum();
    (fds + plan.tw, fds, ns)
}

fn truth_json(plan: &Plan, pids: &[i32], cpid: u32, build_s: f64, tw_period: f64) -> String {
    let p = plan.p;
    let mut inet = vec![0usize; p + 1];
    let mut unix = vec![0usize; p + 1];
    let (mut tl4, mut tl6, mut te4, mut te6) = (1usize, 1usize, 0usize, 0usize); // helper listeners
    inet[p] = 2;
    for l in &plan.tcp_l {
        inet[l.owner] += 1;
        if l.addr.v6 {
            tl6 += 1;
        } else {
            tl4 += 1;
        }
    }
    for (o, li) in &plan.tcp_c {
        let l = &plan.tcp_l[*li];
        inet[*o] += 1;
        inet[l.owner] += 1;
        if l.addr.v6 {
            te6 += 2;
        } else {
            te4 += 2;
        }
    }
    let (mut u4, mut u6) = (0usize, 0usize);
    for (o, a) in &plan.udp_s {
        inet[*o] += 1;
        if a.v6 {
            u6 += 1;
        } else {
            u4 += 1;
        }
    }
    for (o, si) in &plan.udp_c {
        inet[*o] += 1;
        if plan.udp_s[*si].1.v6 {
            u6 += 1;
        } else {
            u4 += 1;
        }
    }
    for l in &plan.ux_l {
        unix[l.owner] += 1 + l.conns;
    }
    for (o, _) in &plan.ux_c {
        unix[*o] += 1;
    }
    for o in &plan.ux_sp {
        unix[*o] += 2;
    }
    for r in &plan.ux_dr {
        unix[r.owner] += 1;
    }
    for (o, _) in &plan.ux_dc {
        unix[*o] += 1;
    }
    for o in &plan.ux_dp {
        unix[*o] += 2;
    }
    let ux_stream = plan.ux_l.len() + 2 * plan.ux_c.len() + 2 * plan.ux_sp.len();
    let ux_dgram = plan.ux_dr.len() + plan.ux_dc.len() + 2 * plan.ux_dp.len();
    let tw6 = (0..plan.tw).filter(|i| i % 5 == 4).count();
    let tw4 = plan.tw - tw6;
    // -p probe: the first v4 listener's port (2000); inet sockets with that local or remote port
    let probe_port = TCP_PORT_BASE;
    let mut probe = 0usize;
    for l in &plan.tcp_l {
        if l.addr.port == probe_port {
            probe += 1 + 2 * l.conns;
        }
    }
    for (_, a) in &plan.udp_s {
        if a.port == probe_port {
            probe += 1;
        }
    }
    let (tot, sfds, nsfds) = totals(plan);
    // TIME_WAIT range: each trickle step briefly turns one TIME_WAIT back into a live
    // connection; allow for a few steps in flight during a tool's read.
    let per_tick = if tw_period > 0.0 {
        (plan.tw as f64 / tw_period * 0.1).ceil() as usize
    } else {
        0
    };
    let tw_min = plan.tw.saturating_sub(3 * per_tick + 2);
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\"version\":1,\"coord_pid\":{cpid},\"procs\":{p},\"build_s\":{build_s:.3},\
         \"total_sockets\":{tot},\"socket_fds\":{sfds},\"nonsocket_fds\":{nsfds},\
         \"counts\":{{\"tcp4_listen\":{tl4},\"tcp6_listen\":{tl6},\"tcp4_estab\":{te4},\"tcp6_estab\":{te6},\
         \"udp4\":{u4},\"udp6\":{u6},\"unix_stream\":{ux_stream},\"unix_dgram\":{ux_dgram}}},\
         \"unix_listen\":{},\
         \"tw\":{{\"expected\":{},\"v4\":{tw4},\"v6\":{tw6},\"min\":{tw_min},\"max\":{},\"period_s\":{tw_period}}},\
         \"churn_ports\":[{TW_PORT}],\"probe_port\":{probe_port},\"probe_count\":{probe},\
         \"tw_pid\":{},\"per_pid\":{{",
        plan.ux_l.len(),
        plan.tw,
        plan.tw,
        pids[p],
    );
    for (i, pid) in pids.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "\"{pid}\":{{\"inet\":{},\"unix\":{}}}", inet[i], unix[i]);
    }
    s.push_str("}}\n");
    s
}
