//! TCP sockets with the options the scenarios need (buffer sizes, congestion control, Nagle,
//! keep-alive), made with plain `libc` calls so every option is set where a real application
//! would set it: before `listen()`, before `connect()`, or after `accept()`.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A congestion control, set per socket with `TCP_CONGESTION` (a namespace's default may be
/// refused there: `tcp_allowed_congestion_control` need not list it, while root may set any
/// available one per socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cc {
    /// Loss-based, Linux's default; no pacing of its own.
    Cubic,
    /// Model-based, paces its sends.
    Bbr,
}

impl Cc {
    /// Both, in table order.
    pub const ALL: [Cc; 2] = [Cc::Cubic, Cc::Bbr];

    /// The kernel's name.
    pub fn name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Bbr => "bbr",
        }
    }
}

/// Options set on a socket before it connects or listens.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opts {
    /// `SO_SNDBUF` (the kernel doubles it and stops autotuning).
    pub sndbuf: Option<i32>,
    /// `SO_RCVBUF` (doubled; fixes the window scale when set before the handshake).
    pub rcvbuf: Option<i32>,
    /// `TCP_CONGESTION`.
    pub cc: Option<Cc>,
    /// `TCP_NODELAY` (Nagle off).
    pub nodelay: bool,
    /// `SO_KEEPALIVE`.
    pub keepalive: bool,
}

impl Opts {
    /// Just a congestion control.
    pub fn cc(cc: Cc) -> Opts {
        Opts {
            cc: Some(cc),
            ..Opts::default()
        }
    }
}

fn last(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Sets an int socket option.
pub fn set_int(fd: RawFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: a valid fd and a pointer to an int of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(last(&format!("setsockopt({level}, {name}, {v})")))
    }
}

/// Sets `TCP_CONGESTION`.
pub fn set_cc(fd: RawFd, cc: Cc) -> io::Result<()> {
    let name = cc.name().as_bytes();
    // SAFETY: a valid fd and a byte buffer of the given length.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(last(&format!("TCP_CONGESTION {}", cc.name())))
    }
}

/// Applies `o` to a socket.
pub fn apply(fd: RawFd, o: &Opts) -> io::Result<()> {
    if let Some(b) = o.sndbuf {
        set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, b)?;
    }
    if let Some(b) = o.rcvbuf {
        set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b)?;
    }
    if let Some(cc) = o.cc {
        set_cc(fd, cc)?;
    }
    if o.nodelay {
        set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    }
    if o.keepalive {
        set_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    }
    Ok(())
}

fn tcp_socket(nonblocking: bool) -> io::Result<OwnedFd> {
    let flags =
        libc::SOCK_STREAM | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: plain socket creation.
    let fd = unsafe { libc::socket(libc::AF_INET, flags, 0) };
    if fd < 0 {
        return Err(last("socket"));
    }
    // SAFETY: fd was just created and is ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The `sockaddr_in` of `addr:port`.
pub fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// `addr:port` as a socket address.
pub fn v4(addr: &str, port: u16) -> io::Result<SocketAddrV4> {
    let ip: Ipv4Addr = addr
        .parse()
        .map_err(|_| io::Error::other(format!("not an IPv4 address: {addr}")))?;
    Ok(SocketAddrV4::new(ip, port))
}

/// A listener on `addr:port` with `o` set before `listen(backlog)` (SO_REUSEADDR always).
pub fn listen(addr: &str, port: u16, backlog: i32, o: &Opts) -> io::Result<TcpListener> {
    let fd = tcp_socket(false)?;
    set_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    apply(fd.as_raw_fd(), o)?;
    let sa = sockaddr(v4(addr, port)?);
    // SAFETY: a valid sockaddr_in of the given size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(last(&format!("bind {addr}:{port}")));
    }
    // SAFETY: a bound socket.
    if unsafe { libc::listen(fd.as_raw_fd(), backlog) } != 0 {
        return Err(last("listen"));
    }
    Ok(TcpListener::from(fd))
}

/// A connected client with `o` set before `connect()`.
pub fn connect(addr: &str, port: u16, o: &Opts) -> io::Result<TcpStream> {
    let fd = tcp_socket(false)?;
    apply(fd.as_raw_fd(), o)?;
    let sa = sockaddr(v4(addr, port)?);
    // SAFETY: a valid sockaddr_in of the given size.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(last(&format!("connect {addr}:{port}")));
    }
    Ok(TcpStream::from(fd))
}

/// Starts a non-blocking `connect()` and returns at once (the handshake may stay pending, as
/// against a listener whose queue is full).
pub fn connect_nonblocking(addr: &str, port: u16, o: &Opts) -> io::Result<TcpStream> {
    let fd = tcp_socket(true)?;
    apply(fd.as_raw_fd(), o)?;
    let sa = sockaddr(v4(addr, port)?);
    // SAFETY: a valid sockaddr_in of the given size.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINPROGRESS) {
        return Err(last(&format!("connect {addr}:{port}")));
    }
    Ok(TcpStream::from(fd))
}

/// The stream's local address, as IPv4.
pub fn local_v4(s: &TcpStream) -> io::Result<SocketAddrV4> {
    match s.local_addr()? {
        std::net::SocketAddr::V4(a) => Ok(a),
        other => Err(io::Error::other(format!("not IPv4: {other}"))),
    }
}
