//! sockfloor: the minimal program a socket lister cannot beat (shares no code with sockstat).
//!
//! Modes (each prints one summary line; `--reps K` repeats in-process and prints each time):
//!   dump   (a) sock_diag dump alone: tcp4, tcp6, udp4, udp6, unix (names and peers
//!              requested), counting records
//!   scan   (b) one-thread /proc/*/fd scan: getdents64 + readlinkat relative to the
//!              directory fds, building an inode -> (pid, fd) map
//!   join   (c) (a) + (b) + join, one thread
//!   par    (d) the scan on 2 threads while a third runs the dump, then the join
//!   truth      (c) plus a per-category and per-pid count as JSON, for the checker
//!              (`--churn-port P` leaves out short-lived sockets with port P at one end,
//!              except listeners; `--probe-port P` also counts inet sockets with port P)
//!
//! Everything is plain syscalls through libc: netlink socket, sendto, recvfrom (32 KiB
//! buffer), open, getdents64, openat, readlinkat.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RECV_BUF: usize = 32 * 1024;

#[derive(Default)]
struct IdHasher(u64);
impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!()
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
type Map = HashMap<u64, (u32, u32), BuildHasherDefault<IdHasher>>;

fn die(msg: &str) -> ! {
    eprintln!("sockfloor: {msg}");
    std::process::exit(2)
}

// ---------------------------------------------------------------- sock_diag

#[derive(Clone, Copy)]
struct Rec {
    inode: u64,
    /// 0 tcp4 1 tcp6 2 udp4 3 udp6 4 unix
    kind: u8,
    state: u8,
    utype: u8,
    sport: u16,
    dport: u16,
}

struct Diag {
    fd: i32,
    buf: Vec<u8>,
    seq: u32,
    recvs: usize,
    bytes: usize,
}

impl Diag {
    fn new() -> Diag {
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            die(&format!(
                "netlink socket: {}",
                std::io::Error::last_os_error()
            ));
        }
        Diag {
            fd,
            buf: vec![0u8; RECV_BUF],
            seq: 0,
            recvs: 0,
            bytes: 0,
        }
    }

    fn send(&mut self, body: &[u8]) {
        self.seq += 1;
        let len = 16 + body.len();
        let mut m = Vec::with_capacity(len);
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
        m.extend_from_slice(&self.seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(body);
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as _;
        let r = unsafe {
            libc::sendto(
                self.fd,
                m.as_ptr() as *const _,
                m.len(),
                0,
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as _,
            )
        };
        if r < 0 {
            die(&format!("sendto: {}", std::io::Error::last_os_error()));
        }
    }

    /// Receives one dump; calls f(payload) for each record. Returns the record count.
    fn recv_all(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        loop {
            let r =
                unsafe { libc::recv(self.fd, self.buf.as_mut_ptr() as *mut _, self.buf.len(), 0) };
            if r < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                die(&format!("recv: {}", std::io::Error::last_os_error()));
            }
            self.recvs += 1;
            self.bytes += r as usize;
            let data = &self.buf[..r as usize];
            let mut off = 0;
            while off + 16 <= data.len() {
                let len = u32::from_ne_bytes(data[off..off + 4].try_into().unwrap()) as usize;
                let ty = u16::from_ne_bytes(data[off + 4..off + 6].try_into().unwrap());
                if len < 16 || off + len > data.len() {
                    die("bad netlink message");
                }
                match ty {
                    NLMSG_DONE => return n,
                    NLMSG_ERROR => {
                        let e = i32::from_ne_bytes(data[off + 16..off + 20].try_into().unwrap());
                        if e != 0 {
                            die(&format!(
                                "sock_diag: {}",
                                std::io::Error::from_raw_os_error(-e)
                            ));
                        }
                    }
                    SOCK_DIAG_BY_FAMILY => {
                        n += 1;
                        f(&data[off + 16..off + len]);
                    }
                    _ => {}
                }
                off += (len + 3) & !3;
            }
            if r == 0 {
                return n;
            }
        }
    }

    fn inet(&mut self, family: u8, proto: u8, kind: u8, out: &mut Vec<Rec>) -> usize {
        // struct inet_diag_req_v2: family, protocol, ext, pad, states, inet_diag_sockid (48)
        let mut body = [0u8; 56];
        body[0] = family;
        body[1] = proto;
        body[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        self.send(&body);
        self.recv_all(|p| {
            if p.len() < 72 {
                return;
            }
            // inet_diag_msg: family, state, timer, retrans, id{sport be16, dport be16, ...},
            // expires, rqueue, wqueue, uid, inode at 68
            out.push(Rec {
                inode: u32::from_ne_bytes(p[68..72].try_into().unwrap()) as u64,
                kind,
                state: p[1],
                utype: 0,
                sport: u16::from_be_bytes([p[4], p[5]]),
                dport: u16::from_be_bytes([p[6], p[7]]),
            });
        })
    }

    fn unix(&mut self, out: &mut Vec<Rec>) -> usize {
        // struct unix_diag_req: family, protocol, pad, states, ino, show, cookie[2]
        let mut body = [0u8; 24];
        body[0] = libc::AF_UNIX as u8;
        body[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        body[12..16].copy_from_slice(&(1u32 | 4).to_ne_bytes()); // UDIAG_SHOW_NAME | UDIAG_SHOW_PEER
        self.send(&body);
        self.recv_all(|p| {
            if p.len() < 16 {
                return;
            }
            // unix_diag_msg: family, type, state, pad, ino, cookie
            out.push(Rec {
                inode: u32::from_ne_bytes(p[4..8].try_into().unwrap()) as u64,
                kind: 4,
                state: p[2],
                utype: p[1],
                sport: 0,
                dport: 0,
            });
        })
    }
}

fn dump_all(d: &mut Diag) -> Vec<Rec> {
    let mut v = Vec::with_capacity(4096);
    d.inet(libc::AF_INET as u8, libc::IPPROTO_TCP as u8, 0, &mut v);
    d.inet(libc::AF_INET6 as u8, libc::IPPROTO_TCP as u8, 1, &mut v);
    d.inet(libc::AF_INET as u8, libc::IPPROTO_UDP as u8, 2, &mut v);
    d.inet(libc::AF_INET6 as u8, libc::IPPROTO_UDP as u8, 3, &mut v);
    d.unix(&mut v);
    v
}

// ---------------------------------------------------------------- /proc scan

struct Dirents {
    buf: Vec<u8>,
}

impl Dirents {
    fn new() -> Dirents {
        Dirents {
            buf: vec![0u8; 32 * 1024],
        }
    }
    /// Calls f(name) for every entry of the open directory `fd` but "." and "..".
    fn each(&mut self, fd: i32, mut f: impl FnMut(&[u8])) {
        loop {
            let r = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    fd,
                    self.buf.as_mut_ptr(),
                    self.buf.len(),
                )
            };
            if r <= 0 {
                return;
            }
            let mut off = 0usize;
            while off < r as usize {
                // linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name
                let reclen = u16::from_ne_bytes([self.buf[off + 16], self.buf[off + 17]]) as usize;
                let name = &self.buf[off + 19..off + reclen];
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                let name = &name[..end];
                if name != b"." && name != b".." {
                    f(name);
                }
                off += reclen;
            }
        }
    }
}

fn parse_u32(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    let mut v: u32 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u32)?;
    }
    Some(v)
}

fn open_dir(at: i32, path: &[u8]) -> i32 {
    let mut p = [0u8; 64];
    p[..path.len()].copy_from_slice(path);
    unsafe {
        libc::openat(
            at,
            p.as_ptr() as *const libc::c_char,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    }
}

fn list_pids(proc_fd: i32, de: &mut Dirents) -> Vec<u32> {
    let mut pids = Vec::with_capacity(1024);
    unsafe { libc::lseek(proc_fd, 0, libc::SEEK_SET) };
    de.each(proc_fd, |name| {
        if let Some(p) = parse_u32(name) {
            pids.push(p);
        }
    });
    pids
}

struct ScanStats {
    fds: usize,
}

/// Scans /proc/PID/fd of one pid into `map`.
fn scan_pid(
    proc_fd: i32,
    pid: u32,
    de: &mut Dirents,
    names: &mut Vec<u8>,
    map: &mut Map,
    st: &mut ScanStats,
) {
    let mut path = [0u8; 32];
    let mut n = 0;
    let mut s = [0u8; 10];
    let mut k = 0;
    let mut x = pid;
    loop {
        s[k] = b'0' + (x % 10) as u8;
        k += 1;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    while k > 0 {
        k -= 1;
        path[n] = s[k];
        n += 1;
    }
    path[n..n + 3].copy_from_slice(b"/fd");
    n += 3;
    let dfd = open_dir(proc_fd, &path[..n]);
    if dfd < 0 {
        return; // exited or not ours
    }
    // collect the names first (the getdents buffer is reused), then readlinkat each
    names.clear();
    de.each(dfd, |name| {
        names.extend_from_slice(name);
        names.push(0);
    });
    let mut link = [0u8; 64];
    let mut start = 0;
    while start < names.len() {
        let end = start + names[start..].iter().position(|&b| b == 0).unwrap();
        st.fds += 1;
        let r = unsafe {
            libc::readlinkat(
                dfd,
                names[start..].as_ptr() as *const libc::c_char,
                link.as_mut_ptr() as *mut libc::c_char,
                link.len(),
            )
        };
        if r > 9 && &link[..8] == b"socket:[" && link[r as usize - 1] == b']' {
            if let (Some(ino), Some(fd)) = (
                parse_u32(&link[8..r as usize - 1]),
                parse_u32(&names[start..end]),
            ) {
                map.insert(ino as u64, (pid, fd));
            }
        }
        start = end + 1;
    }
    unsafe { libc::close(dfd) };
}

fn open_proc() -> i32 {
    let fd = unsafe {
        libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        die("cannot open /proc");
    }
    fd
}

fn scan_one_thread() -> (Map, ScanStats) {
    let proc_fd = open_proc();
    let mut de = Dirents::new();
    let pids = list_pids(proc_fd, &mut de);
    let mut map = Map::default();
    let mut st = ScanStats { fds: 0 };
    let mut names = Vec::with_capacity(4096);
    for pid in pids {
        scan_pid(proc_fd, pid, &mut de, &mut names, &mut map, &mut st);
    }
    unsafe { libc::close(proc_fd) };
    (map, st)
}

fn join(recs: &[Rec], maps: &[&Map]) -> usize {
    let mut owned = 0;
    for r in recs {
        if maps.iter().any(|m| m.contains_key(&r.inode)) {
            owned += 1;
        }
    }
    owned
}

/// (d): the dump on one thread, the scan on two, then the join (`with_dump` false: the
/// two-thread scan alone).
fn par(with_dump: bool) -> (usize, usize, usize) {
    let proc_fd = open_proc();
    let next = AtomicUsize::new(0);
    let mut de = Dirents::new();
    let pids = list_pids(proc_fd, &mut de);
    let (recs, m1, m2) = std::thread::scope(|s| {
        let dump = s.spawn(move || {
            if !with_dump {
                return Vec::new();
            }
            let mut d = Diag::new();
            let v = dump_all(&mut d);
            unsafe { libc::close(d.fd) };
            v
        });
        let pids = &pids;
        let next = &next;
        let worker = move || {
            let mut de = Dirents::new();
            let mut map = Map::default();
            let mut st = ScanStats { fds: 0 };
            let mut names = Vec::with_capacity(4096);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= pids.len() {
                    break;
                }
                scan_pid(proc_fd, pids[i], &mut de, &mut names, &mut map, &mut st);
            }
            map
        };
        let t2 = s.spawn(worker);
        let m1 = worker();
        let m2 = t2.join().unwrap();
        (dump.join().unwrap(), m1, m2)
    });
    unsafe { libc::close(proc_fd) };
    let owned = join(&recs, &[&m1, &m2]);
    (recs.len(), m1.len() + m2.len(), owned)
}

// ---------------------------------------------------------------- truth

const TCP_LISTEN: u8 = 10;
const TCP_TIME_WAIT: u8 = 6;

fn truth(churn: &[u16], probe: Option<u16>) -> String {
    let mut d = Diag::new();
    let recs = dump_all(&mut d);
    let (map, _) = scan_one_thread();
    let keys = [
        "tcp4_listen",
        "tcp6_listen",
        "tcp4_estab",
        "tcp6_estab",
        "udp4",
        "udp6",
        "unix_stream",
        "unix_dgram",
        "unix_other",
        "tcp4_tw",
        "tcp6_tw",
    ];
    let mut counts = [0usize; 11];
    let mut per_pid: std::collections::BTreeMap<u32, (usize, usize)> = Default::default();
    let (mut churn_n, mut probe_n, mut unix_listen) = (0usize, 0usize, 0usize);
    for r in &recs {
        let k = match r.kind {
            0 | 1 => {
                let v6 = (r.kind == 1) as usize;
                if r.state == TCP_TIME_WAIT {
                    9 + v6
                } else if r.state == TCP_LISTEN {
                    v6
                } else if churn.contains(&r.sport) || churn.contains(&r.dport) {
                    churn_n += 1;
                    continue;
                } else {
                    2 + v6
                }
            }
            2 | 3 => 4 + (r.kind - 2) as usize,
            _ => match r.utype as i32 {
                libc::SOCK_STREAM => {
                    if r.state == TCP_LISTEN {
                        unix_listen += 1;
                    }
                    6
                }
                libc::SOCK_DGRAM => 7,
                _ => 8,
            },
        };
        counts[k] += 1;
        if let Some(p) = probe {
            if r.kind < 4 && (r.sport == p || r.dport == p) {
                probe_n += 1;
            }
        }
        if let Some((pid, _)) = map.get(&r.inode) {
            let e = per_pid.entry(*pid).or_default();
            if r.kind < 4 {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }
    let mut s = String::from("{\"counts\":{");
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("\"{k}\":{}", counts[i]));
    }
    s.push_str(&format!(
        "}},\"records\":{},\"churn_skipped\":{churn_n},\"unix_listen\":{unix_listen},\"probe_count\":{probe_n},\"per_pid\":{{",
        recs.len()
    ));
    for (i, (pid, (a, b))) in per_pid.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("\"{pid}\":{{\"inet\":{a},\"unix\":{b}}}"));
    }
    s.push_str("}}");
    s
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let mut reps = 1usize;
    let mut churn = Vec::new();
    let mut probe = None;
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| die("missing value"));
        match a.as_str() {
            "--reps" => reps = v().parse().unwrap_or_else(|_| die("bad --reps")),
            "--churn-port" => churn.push(v().parse().unwrap_or_else(|_| die("bad --churn-port"))),
            "--probe-port" => probe = Some(v().parse().unwrap_or_else(|_| die("bad --probe-port"))),
            _ => die(&format!("unknown argument {a}")),
        }
    }
    for rep in 0..reps.max(1) {
        let t = Instant::now();
        let line = match mode.as_str() {
            "dump" => {
                let mut d = Diag::new();
                let v = dump_all(&mut d);
                format!("records={} recvs={} bytes={}", v.len(), d.recvs, d.bytes)
            }
            "scan" => {
                let (m, st) = scan_one_thread();
                format!("fds={} sockets={}", st.fds, m.len())
            }
            "join" => {
                let mut d = Diag::new();
                let recs = dump_all(&mut d);
                let (m, st) = scan_one_thread();
                format!("records={} fds={} sockets={} owned={}", recs.len(), st.fds, m.len(), join(&recs, &[&m]))
            }
            "scan2" => {
                let (_, s, _) = par(false);
                format!("sockets={s}")
            }
            "par" => {
                let (r, s, o) = par(true);
                format!("records={r} sockets={s} owned={o}")
            }
            "truth" => truth(&churn, probe),
            _ => die("usage: sockfloor dump|scan|join|par|truth [--reps K] [--churn-port P] [--probe-port P]"),
        };
        if reps > 1 {
            println!("rep={rep} ms={:.3} {line}", t.elapsed().as_secs_f64() * 1e3);
        } else {
            println!("{line}");
        }
    }
}
