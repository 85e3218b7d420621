//! The holder itself: parse specs, open sockets, report, hold until stdin closes.

use std::ffi::{CString, OsStr, OsString};
use std::io::Write;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use crate::{Addr, HeldFile, Item, Report, Sock, HOLDER_ENV};

/// When [`HOLDER_ENV`] is set, runs the holder with this process's arguments (read from
/// `/proc/self/cmdline`, so it works before `main`) and never returns. Otherwise returns at once.
///
/// Meant to be called from an ELF constructor in a test binary, so that the test binary can be
/// re-executed as a holder:
///
/// ```ignore
/// #[used]
/// #[link_section = ".init_array"]
/// static HOLDER: extern "C" fn() = holder_ctor;
/// extern "C" fn holder_ctor() {
///     sockstat_testkit::holder::run_if_requested();
/// }
/// ```
pub fn run_if_requested() {
    if std::env::var_os(HOLDER_ENV).is_none() {
        return;
    }
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let args: Vec<OsString> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(&cmdline)
        .split(|&b| b == 0)
        .skip(1)
        .map(|a| OsStr::from_bytes(a).to_os_string())
        .collect();
    main(&args)
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("sockholder: {msg}");
    // SAFETY: _exit is always safe to call; no destructors need to run.
    unsafe { libc::_exit(2) }
}

fn check(rc: libc::c_int, what: &str) -> libc::c_int {
    if rc < 0 {
        fail(format!("{what}: {}", std::io::Error::last_os_error()));
    }
    rc
}

/// Runs the holder with these specs; never returns.
pub fn main(args: &[OsString]) -> ! {
    let parent = unsafe { libc::getppid() };
    set_comm(b"sockholder");
    arm_parent_death(parent);
    raise_fd_limit();
    let mut h = Holder {
        items: Vec::new(),
        child_pid: None,
    };
    for a in args {
        h.apply(a.as_bytes());
    }
    let report = Report {
        pid: std::process::id(),
        child_pid: h.child_pid,
        uid: unsafe { libc::geteuid() },
        items: h.items,
    };
    let mut line = serde_json::to_vec(&report).unwrap_or_else(|e| fail(e));
    line.push(b'\n');
    let mut out = std::io::stdout().lock();
    if out.write_all(&line).and_then(|()| out.flush()).is_err() {
        fail("cannot write the report");
    }
    wait_for_stdin_eof();
    unsafe { libc::_exit(0) }
}

/// SIGKILL when the parent (the thread that spawned us) dies; exit at once if it already has.
fn arm_parent_death(parent: libc::pid_t) {
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != parent {
            libc::_exit(3);
        }
    }
}

/// Writes to `fd` at `rate` bytes per second, measured from the start: every 5 ms it writes
/// what the elapsed time allows and was not written yet. Ends when a write fails.
fn pace(fd: libc::c_int, rate: u64) {
    let chunk = vec![b'x'; 64 * 1024];
    let start = Instant::now();
    let mut written: u64 = 0;
    loop {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        while written < due {
            let n = (due - written).min(chunk.len() as u64) as usize;
            let w = unsafe { libc::write(fd, chunk.as_ptr().cast(), n) };
            if w <= 0 {
                return;
            }
            written += w as u64;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_for_stdin_eof() {
    let mut buf = [0u8; 256];
    loop {
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 {
            return;
        }
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

fn set_comm(name: &[u8]) {
    let c = CString::new(name).unwrap_or_else(|_| fail("comm: NUL in name"));
    check(
        unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr() as libc::c_ulong, 0, 0, 0) },
        "prctl(PR_SET_NAME)",
    );
}

fn raise_fd_limit() {
    let mut lim: libc::rlimit = unsafe { zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < lim.rlim_max
    {
        lim.rlim_cur = lim.rlim_max;
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

struct Holder {
    items: Vec<Item>,
    child_pid: Option<u32>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn parse_sockaddr(s: &str) -> SocketAddr {
    s.parse()
        .unwrap_or_else(|_| fail(format!("bad address '{s}' (want 127.0.0.1:0 or [::1]:0)")))
}

fn parse_ip(s: &str) -> IpAddr {
    let t = s.trim_start_matches('[').trim_end_matches(']');
    t.parse()
        .unwrap_or_else(|_| fail(format!("bad IP address '{s}'")))
}

fn family_default(kind: &str) -> IpAddr {
    if kind.starts_with("tcp6") {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    }
}

impl Holder {
    fn apply(&mut self, arg: &[u8]) {
        let spec = text(arg);
        let (kind, rest) = match arg.iter().position(|&b| b == b':') {
            Some(i) => (text(&arg[..i]), &arg[i + 1..]),
            None => (spec.clone(), &b""[..]),
        };
        let rest_s = text(rest);
        let mut item = Item {
            spec: spec.clone(),
            kind: kind.clone(),
            socks: Vec::new(),
            file: None,
        };
        match kind.as_str() {
            "tcp4-listen" | "tcp6-listen" => {
                let fd = tcp_listener(parse_sockaddr(&rest_s));
                item.socks.push(describe("listener", fd));
            }
            "tcp4-pair" | "tcp6-pair" | "tcp4-pending" | "tcp6-pending" => {
                let ip = if rest.is_empty() {
                    family_default(&kind)
                } else {
                    parse_ip(&rest_s)
                };
                let l = tcp_listener(SocketAddr::new(ip, 0));
                let c = tcp_connect(local_sockaddr(l));
                item.socks.push(describe("listener", l));
                item.socks.push(describe("client", c));
                if kind.ends_with("pair") {
                    let s = check(
                        unsafe { libc::accept(l, std::ptr::null_mut(), std::ptr::null_mut()) },
                        "accept",
                    );
                    item.socks.push(describe("server", s));
                } else {
                    let client = describe("client", c);
                    item.socks.push(Sock {
                        role: "pending".into(),
                        fd: None,
                        inode: None,
                        local: client.peer.clone(),
                        peer: client.local.clone(),
                    });
                }
            }
            "udp4" | "udp6" => {
                let fd = udp_socket(parse_sockaddr(&rest_s));
                item.socks.push(describe("socket", fd));
            }
            "udp4-connected" | "udp6-connected" => {
                let (local, remote) = rest_s
                    .split_once("->")
                    .unwrap_or_else(|| fail(format!("{spec}: want LOCAL->REMOTE")));
                let fd = udp_socket(parse_sockaddr(local));
                let remote = self.resolve_port_ref(remote);
                connect_to(fd, remote);
                item.socks.push(describe("socket", fd));
            }
            "packet" => {
                // An AF_PACKET socket for ETH_P_PROTO (hex, e.g. 0003 = ETH_P_ALL, 0806 = ARP)
                // bound to interface IFNAME (`packet:0003:lo`), or to every interface (`*`).
                let (proto, ifname) = rest_s
                    .split_once(':')
                    .unwrap_or_else(|| fail(format!("{spec}: want PROTO:IFNAME")));
                let proto = u16::from_str_radix(proto, 16)
                    .unwrap_or_else(|_| fail(format!("{spec}: PROTO is hex (0003)")));
                let fd = check(
                    unsafe {
                        libc::socket(
                            libc::AF_PACKET,
                            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                            i32::from(proto.to_be()),
                        )
                    },
                    "socket(AF_PACKET)",
                );
                if ifname != "*" {
                    let name = CString::new(ifname).unwrap_or_else(|e| fail(e));
                    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
                    if index == 0 {
                        fail(format!("{spec}: no interface {ifname}"));
                    }
                    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
                    sll.sll_family = libc::AF_PACKET as u16;
                    sll.sll_protocol = proto.to_be();
                    sll.sll_ifindex = index as i32;
                    bind_to(fd, &sll, "bind(AF_PACKET)");
                }
                item.socks.push(describe("socket", fd));
            }
            "udp4-bound-dev" | "udp6-bound-dev" => {
                // A UDP socket bound to ADDR on device IFNAME (SO_BINDTODEVICE):
                // `udp4-bound-dev:127.0.0.1:0%lo`.
                let (addr, ifname) = rest_s
                    .rsplit_once('%')
                    .unwrap_or_else(|| fail(format!("{spec}: want ADDR%IFNAME")));
                let addr = parse_sockaddr(addr);
                let domain = if addr.is_ipv6() {
                    libc::AF_INET6
                } else {
                    libc::AF_INET
                };
                let fd = check(
                    unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
                    "socket",
                );
                check(
                    unsafe {
                        libc::setsockopt(
                            fd,
                            libc::SOL_SOCKET,
                            libc::SO_BINDTODEVICE,
                            ifname.as_ptr().cast(),
                            ifname.len() as libc::socklen_t,
                        )
                    },
                    "setsockopt(SO_BINDTODEVICE)",
                );
                let (sa, len) = to_sockaddr(addr);
                check(
                    unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len) },
                    &format!("bind {addr}"),
                );
                item.socks.push(describe("socket", fd));
            }
            "icmp4" | "icmp6" => {
                // A ping socket (what unprivileged ping uses), bound to ADDR (port 0: the
                // kernel picks the ICMP identifier); needs the caller's group in
                // net.ipv4.ping_group_range.
                let addr = parse_sockaddr(&rest_s);
                let fd = ping_socket(addr.is_ipv6());
                let (sa, len) = to_sockaddr(addr);
                check(
                    unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len) },
                    &format!("bind {addr}"),
                );
                item.socks.push(describe("socket", fd));
            }
            // The tables whose dumps a gathering skips when the namespace has none of their
            // sockets: an MPTCP listener, a UDP-Lite socket and a raw socket (protocol 253,
            // experimental) bound to ADDR.
            "mptcp4-listen" | "mptcp6-listen" => {
                let fd = inet_socket_of(
                    parse_sockaddr(&rest_s),
                    libc::SOCK_STREAM,
                    libc::IPPROTO_MPTCP,
                );
                check(unsafe { libc::listen(fd, 16) }, "listen");
                item.socks.push(describe("listener", fd));
            }
            "udplite4" | "udplite6" => {
                let addr = parse_sockaddr(&rest_s);
                let fd = inet_socket_of(addr, libc::SOCK_DGRAM, libc::IPPROTO_UDPLITE);
                item.socks.push(describe("socket", fd));
            }
            "raw4" | "raw6" => {
                let addr = parse_sockaddr(&rest_s);
                let fd = inet_socket_of(addr, libc::SOCK_RAW, 253);
                item.socks.push(describe("socket", fd));
            }
            "icmp4-unbound" | "icmp6-unbound" => {
                // What `ping` run as a user holds before it sends: in no kernel table.
                let fd = ping_socket(kind.starts_with("icmp6"));
                item.socks.push(describe("socket", fd));
            }
            "netlink" => {
                let proto: i32 = rest_s
                    .parse()
                    .unwrap_or_else(|_| fail(format!("{spec}: want a netlink protocol number")));
                let fd = check(
                    unsafe {
                        libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto)
                    },
                    "socket(AF_NETLINK)",
                );
                let mut nl: libc::sockaddr_nl = unsafe { zeroed() };
                nl.nl_family = libc::AF_NETLINK as libc::sa_family_t;
                bind_to(fd, &nl, "bind(AF_NETLINK)");
                item.socks.push(describe("socket", fd));
            }
            "udp4-unbound" | "udp6-unbound" => {
                let domain = if kind.starts_with("udp6") {
                    libc::AF_INET6
                } else {
                    libc::AF_INET
                };
                let fd = check(
                    unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
                    "socket",
                );
                item.socks.push(describe("socket", fd));
            }
            "unix-dgram-unbound" => {
                let fd = unix_socket(libc::SOCK_DGRAM);
                item.socks.push(describe("socket", fd));
            }
            "unix-listen" => {
                let fd = unix_socket(libc::SOCK_STREAM);
                bind_unix(fd, rest, false);
                check(unsafe { libc::listen(fd, 128) }, "listen");
                item.socks.push(describe("listener", fd));
            }
            "unix-abstract-listen" => {
                let fd = unix_socket(libc::SOCK_STREAM);
                bind_unix(fd, rest, true);
                check(unsafe { libc::listen(fd, 128) }, "listen");
                item.socks.push(describe("listener", fd));
            }
            "unix-conn" => {
                let l = unix_socket(libc::SOCK_STREAM);
                bind_unix(l, rest, false);
                check(unsafe { libc::listen(l, 128) }, "listen");
                let c = unix_socket(libc::SOCK_STREAM);
                let (sa, len) = sockaddr_un(rest, false);
                check(
                    unsafe { libc::connect(c, (&sa as *const libc::sockaddr_un).cast(), len) },
                    "connect(unix)",
                );
                let s = check(
                    unsafe { libc::accept(l, std::ptr::null_mut(), std::ptr::null_mut()) },
                    "accept(unix)",
                );
                item.socks.push(describe("listener", l));
                item.socks.push(describe("client", c));
                item.socks.push(describe("server", s));
            }
            "unix-dgram" => {
                let fd = unix_socket(libc::SOCK_DGRAM);
                bind_unix(fd, rest, false);
                item.socks.push(describe("socket", fd));
            }
            "unix-pair" | "unix-pairs" => {
                let n: usize = if kind == "unix-pair" {
                    1
                } else {
                    rest_s
                        .parse()
                        .unwrap_or_else(|_| fail(format!("{spec}: want unix-pairs:N")))
                };
                for _ in 0..n {
                    let mut fds = [0 as libc::c_int; 2];
                    check(
                        unsafe {
                            libc::socketpair(
                                libc::AF_UNIX,
                                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                                0,
                                fds.as_mut_ptr(),
                            )
                        },
                        "socketpair",
                    );
                    item.socks.push(describe("a", fds[0]));
                    item.socks.push(describe("b", fds[1]));
                }
            }
            "timewait" | "finwait2" => {
                let ip = parse_ip(&rest_s);
                let l = tcp_listener(SocketAddr::new(ip, 0));
                let lsa = local_sockaddr(l);
                let c = tcp_connect(lsa);
                let s = check(
                    unsafe { libc::accept(l, std::ptr::null_mut(), std::ptr::null_mut()) },
                    "accept",
                );
                let client = describe("client", c);
                let port = client.port();
                unsafe { libc::close(c) };
                unsafe { libc::close(l) };
                if kind == "timewait" {
                    // Wait for the client's FIN, then close: our FIN puts the client in TIME_WAIT.
                    let mut b = [0u8; 16];
                    while unsafe { libc::read(s, b.as_mut_ptr().cast(), b.len()) } > 0 {}
                    unsafe { libc::close(s) };
                    wait_for_tcp_state(ip.is_ipv6(), port, 0x06);
                } else {
                    wait_for_tcp_state(ip.is_ipv6(), port, 0x05);
                    item.socks.push(describe("server", s));
                }
                item.socks.insert(
                    0,
                    Sock {
                        role: kind.clone(),
                        fd: None,
                        inode: None,
                        local: client.local,
                        peer: client.peer,
                    },
                );
            }
            "fork" => self.fork(),
            "file-named-like-socket" => {
                let n: usize = rest_s
                    .parse()
                    .unwrap_or_else(|_| fail(format!("{spec}: want an item index")));
                let inode = self
                    .items
                    .get(n)
                    .and_then(|i| i.socks.iter().find_map(|s| s.inode))
                    .unwrap_or_else(|| fail(format!("{spec}: item {n} has no held socket")));
                let dir = std::env::current_dir().unwrap_or_else(|e| fail(e));
                let path = dir.join(format!("socket:[{inode}]"));
                let c = CString::new(path.as_os_str().as_bytes()).unwrap_or_else(|e| fail(e));
                let fd = check(
                    unsafe {
                        libc::open(
                            c.as_ptr(),
                            libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                            0o600,
                        )
                    },
                    "open(socket:[N] file)",
                );
                item.file = Some(HeldFile {
                    fd,
                    path: path.to_string_lossy().into_owned(),
                    named_inode: inode,
                });
            }
            "comm" => set_comm(rest),
            "tcp-send" => {
                // tcp-send:ADDR:PORT:BYTES_PER_SEC: a connection that a background thread
                // feeds at that pace (by bytes per elapsed time, so a late wake-up catches up),
                // until the holder exits; 0 keeps it idle.
                let (to, rate) = rest_s
                    .rsplit_once(':')
                    .unwrap_or_else(|| fail(format!("{spec}: want ADDR:PORT:BYTES_PER_SEC")));
                let rate: u64 = rate
                    .parse()
                    .unwrap_or_else(|_| fail(format!("{spec}: bad rate '{rate}'")));
                let fd = tcp_connect(parse_sockaddr(to));
                item.socks.push(describe("client", fd));
                if rate > 0 {
                    std::thread::spawn(move || pace(fd, rate));
                }
            }
            "setuid" => {
                let uid: u32 = rest_s
                    .parse()
                    .unwrap_or_else(|_| fail(format!("{spec}: want a numeric uid")));
                let parent = unsafe { libc::getppid() };
                unsafe {
                    check(libc::setgroups(0, std::ptr::null()), "setgroups");
                    check(libc::setresgid(uid, uid, uid), "setresgid");
                    check(libc::setresuid(uid, uid, uid), "setresuid");
                }
                // A credential change clears the parent-death signal and makes the process
                // undumpable (its /proc/PID/fd owned by root): undo both, so it is an ordinary
                // process of that user.
                arm_parent_death(parent);
                unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
            }
            _ => fail(format!("unknown spec '{spec}'")),
        }
        self.items.push(item);
    }

    /// `127.0.0.1:#3` -> the port of item 3's first socket.
    fn resolve_port_ref(&self, s: &str) -> SocketAddr {
        match s.rsplit_once(":#") {
            Some((host, idx)) => {
                let i: usize = idx
                    .parse()
                    .unwrap_or_else(|_| fail(format!("bad ref '{s}'")));
                let port = self
                    .items
                    .get(i)
                    .and_then(|it| it.socks.first())
                    .and_then(|s| s.local.as_ref())
                    .and_then(|a| a.port)
                    .unwrap_or_else(|| fail(format!("item {i} has no port")));
                SocketAddr::new(parse_ip(host), port)
            }
            None => parse_sockaddr(s),
        }
    }

    fn fork(&mut self) {
        let parent = unsafe { libc::getpid() };
        let pid = check(unsafe { libc::fork() }, "fork");
        if pid == 0 {
            unsafe {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                if libc::getppid() != parent {
                    libc::_exit(3);
                }
                // Only the parent talks on stdout.
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
                if null >= 0 {
                    libc::dup2(null, 1);
                    libc::close(null);
                }
            }
            wait_for_stdin_eof();
            unsafe { libc::_exit(0) }
        }
        self.child_pid = Some(pid as u32);
    }
}

/// Polls /proc/net/tcp{,6} until the socket with local port `port` is in `state` (hex code).
fn wait_for_tcp_state(v6: bool, port: u16, state: u8) {
    let file = if v6 {
        "/proc/net/tcp6"
    } else {
        "/proc/net/tcp"
    };
    let want_port = format!(":{port:04X}");
    let want_state = format!("{state:02X}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let t = std::fs::read_to_string(file).unwrap_or_default();
        let found = t.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&want_port) && f[3] == want_state
        });
        if found {
            return;
        }
        if Instant::now() > deadline {
            fail(format!(
                "port {port} never reached state {want_state} in {file}"
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn inet_socket(addr: SocketAddr, ty: libc::c_int) -> libc::c_int {
    inet_socket_of(addr, ty, 0)
}

/// A socket of type `ty` and protocol `proto` bound to `addr` (IPv6 only for an IPv6 address).
fn inet_socket_of(addr: SocketAddr, ty: libc::c_int, proto: libc::c_int) -> libc::c_int {
    let domain = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let fd = check(
        unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) },
        &format!("socket(type {ty}, protocol {proto})"),
    );
    if addr.is_ipv6() {
        let one: libc::c_int = 1;
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&one as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    let (sa, len) = to_sockaddr(addr);
    check(
        unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len) },
        &format!("bind {addr}"),
    );
    fd
}

fn tcp_listener(addr: SocketAddr) -> libc::c_int {
    let fd = inet_socket(addr, libc::SOCK_STREAM);
    check(unsafe { libc::listen(fd, 128) }, "listen");
    fd
}

fn udp_socket(addr: SocketAddr) -> libc::c_int {
    inet_socket(addr, libc::SOCK_DGRAM)
}

fn tcp_connect(to: SocketAddr) -> libc::c_int {
    let domain = if to.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let fd = check(
        unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) },
        "socket",
    );
    connect_to(fd, to);
    fd
}

fn connect_to(fd: libc::c_int, to: SocketAddr) {
    let (sa, len) = to_sockaddr(to);
    check(
        unsafe { libc::connect(fd, (&sa as *const libc::sockaddr_storage).cast(), len) },
        &format!("connect {to}"),
    );
}

fn local_sockaddr(fd: libc::c_int) -> SocketAddr {
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    check(
        unsafe {
            libc::getsockname(
                fd,
                (&mut ss as *mut libc::sockaddr_storage).cast(),
                &mut len,
            )
        },
        "getsockname",
    );
    from_sockaddr(&ss, len)
        .and_then(|a| a.port.map(|p| SocketAddr::new(parse_ip(a.address()), p)))
        .unwrap_or_else(|| fail("not an inet socket"))
}

fn to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = unsafe {
                &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            (ss, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            let sin6 = unsafe {
                &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_scope_id = a.scope_id();
            (ss, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// A ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP` or `IPPROTO_ICMPV6`); the caller's group must be
/// in `net.ipv4.ping_group_range`.
fn ping_socket(v6: bool) -> libc::c_int {
    let (domain, proto) = if v6 {
        (libc::AF_INET6, libc::IPPROTO_ICMPV6)
    } else {
        (libc::AF_INET, libc::IPPROTO_ICMP)
    };
    check(
        unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, proto) },
        "socket(IPPROTO_ICMP)",
    )
}

/// `bind(fd, addr)` for a `sockaddr_*` struct of any family, failing the holder on error.
fn bind_to<T>(fd: libc::c_int, addr: &T, what: &str) {
    check(
        unsafe {
            libc::bind(
                fd,
                (addr as *const T).cast(),
                size_of::<T>() as libc::socklen_t,
            )
        },
        what,
    );
}

fn from_sockaddr(ss: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<Addr> {
    match i32::from(ss.ss_family) {
        libc::AF_NETLINK => {
            let nl = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_nl>() };
            Some(Addr {
                port_id: Some(nl.nl_pid),
                ..Addr::default()
            })
        }
        libc::AF_INET => {
            let sin =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(Addr {
                address: Some(ip.to_string()),
                port: Some(u16::from_be(sin.sin_port)),
                ..Addr::default()
            })
        }
        libc::AF_INET6 => {
            let sin6 =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(Addr {
                address: Some(ip.to_string()),
                port: Some(u16::from_be(sin6.sin6_port)),
                ..Addr::default()
            })
        }
        libc::AF_UNIX => {
            let sun =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_un>() };
            let base = size_of::<libc::sa_family_t>();
            let n = (len as usize).saturating_sub(base).min(sun.sun_path.len());
            let raw: Vec<u8> = sun.sun_path[..n].iter().map(|&c| c as u8).collect();
            let path = match raw.split_first() {
                None => None,
                Some((0, rest)) => Some(format!("@{}", text(rest))),
                Some(_) => {
                    let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
                    Some(text(&raw[..end]))
                }
            };
            Some(Addr {
                path,
                ..Addr::default()
            })
        }
        _ => None,
    }
}

fn unix_socket(ty: libc::c_int) -> libc::c_int {
    check(
        unsafe { libc::socket(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0) },
        "socket(AF_UNIX)",
    )
}

fn sockaddr_un(name: &[u8], abstract_name: bool) -> (libc::sockaddr_un, libc::socklen_t) {
    let mut sun: libc::sockaddr_un = unsafe { zeroed() };
    sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let off = usize::from(abstract_name);
    if name.len() + off >= sun.sun_path.len() {
        fail(format!("unix name too long: {}", text(name)));
    }
    for (i, &b) in name.iter().enumerate() {
        sun.sun_path[i + off] = b as libc::c_char;
    }
    let base = size_of::<libc::sa_family_t>();
    let len = if abstract_name {
        base + 1 + name.len()
    } else {
        base + name.len() + 1
    };
    (sun, len as libc::socklen_t)
}

fn bind_unix(fd: libc::c_int, name: &[u8], abstract_name: bool) {
    let (sun, len) = sockaddr_un(name, abstract_name);
    check(
        unsafe { libc::bind(fd, (&sun as *const libc::sockaddr_un).cast(), len) },
        &format!("bind unix {}", text(name)),
    );
}

fn describe(role: &str, fd: libc::c_int) -> Sock {
    let mut st: libc::stat = unsafe { zeroed() };
    check(unsafe { libc::fstat(fd, &mut st) }, "fstat");
    let name = |peer: bool| {
        let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let p = (&mut ss as *mut libc::sockaddr_storage).cast();
        let rc = unsafe {
            if peer {
                libc::getpeername(fd, p, &mut len)
            } else {
                libc::getsockname(fd, p, &mut len)
            }
        };
        if rc < 0 {
            None
        } else {
            from_sockaddr(&ss, len)
        }
    };
    Sock {
        role: role.to_string(),
        fd: Some(fd),
        inode: Some(st.st_ino),
        local: name(false),
        peer: name(true),
    }
}
