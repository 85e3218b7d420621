//! The traffic of the scenarios: bulk transfers (free-running, application-paced, or with a
//! receiver that never reads), request/response exchanges, churns of short connections, idle
//! keep-alive connections, a listener flooded with connects, and SYNs for a server's TIME-WAIT
//! tuples. Every workload runs on threads that joined the namespaces, is bounded in time (a
//! deadline) and in count, and is stopped and joined when dropped.

use std::io::{self, Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sock::{self, Opts};
use crate::Netns;

/// Stops a workload's threads: a flag and a deadline, whichever comes first.
#[derive(Clone)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    deadline: Instant,
}

impl Stop {
    /// A stop that fires by itself after `limit`.
    pub fn after(limit: Duration) -> Stop {
        Stop {
            flag: Arc::new(AtomicBool::new(false)),
            deadline: Instant::now() + limit,
        }
    }

    /// True once stopped or past the deadline.
    pub fn done(&self) -> bool {
        self.flag.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }

    /// Stops.
    pub fn set(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// Sleeps `d`, or less when stopped meanwhile.
    pub fn sleep(&self, d: Duration) {
        let end = Instant::now() + d;
        while !self.done() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }
}

/// Threads that stop and are joined on drop. Sockets registered with [`Holder::hold`] are shut
/// down when the task stops (on drop or at its deadline), which wakes threads blocked in
/// read() or write() on them: the traffic uses blocking calls, as most applications do.
pub struct Task {
    stop: Stop,
    threads: Vec<JoinHandle<io::Result<()>>>,
    errors: Arc<Mutex<Vec<String>>>,
    held: Arc<Mutex<Vec<TcpStream>>>,
}

impl Task {
    fn new(stop: Stop) -> Task {
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (s, h) = (stop.clone(), held.clone());
        // The watchdog: shuts the sockets down once stopped or past the deadline.
        let watchdog = std::thread::spawn(move || {
            while !s.done() {
                std::thread::sleep(Duration::from_millis(20));
            }
            if let Ok(v) = h.lock() {
                for c in v.iter() {
                    let _ = c.shutdown(std::net::Shutdown::Both);
                }
            }
            Ok(())
        });
        Task {
            stop,
            threads: vec![watchdog],
            errors: Arc::default(),
            held,
        }
    }

    /// Runs `f` on a thread inside `ns`; its error, if any, is kept for [`Task::errors`].
    fn spawn(&mut self, ns: &Netns, f: impl FnOnce(Holder) -> io::Result<()> + Send + 'static) {
        let errors = self.errors.clone();
        let holder = Holder {
            held: self.held.clone(),
            stop: self.stop.clone(),
        };
        let h = ns.spawn(move || {
            if let Err(e) = f(holder.clone()) {
                // An error caused by the shutdown that stops the task is no error.
                if !holder.stop.done() {
                    if let Ok(mut v) = errors.lock() {
                        v.push(e.to_string());
                    }
                }
            }
        });
        self.threads.push(std::thread::spawn(move || {
            h.join()
                .map_err(|_| io::Error::other("workload thread panicked"))?
        }));
    }

    /// Errors the threads ended with so far (a failed workload makes a run invalid, not a
    /// verdict).
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// Registers sockets to shut down when the task stops.
#[derive(Clone)]
pub struct Holder {
    held: Arc<Mutex<Vec<TcpStream>>>,
    stop: Stop,
}

impl Holder {
    /// Shuts `c` down when the task stops (a socket registered after the stop is shut down at
    /// once).
    pub fn hold(&self, c: &TcpStream) -> io::Result<()> {
        let clone = c.try_clone()?;
        if let Ok(mut v) = self.held.lock() {
            v.push(clone);
        }
        if self.stop.done() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        Ok(())
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.stop.set();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn timeouts(s: &TcpStream, d: Duration) -> io::Result<()> {
    s.set_read_timeout(Some(d))?;
    s.set_write_timeout(Some(d))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Accepts one connection, giving up when stopped (the listener is polled, not blocked on).
fn accept_one(l: &TcpListener, stop: &Stop) -> io::Result<Option<TcpStream>> {
    l.set_nonblocking(true)?;
    while !stop.done() {
        match l.accept() {
            Ok((c, _)) => {
                c.set_nonblocking(false)?;
                return Ok(Some(c));
            }
            Err(e) if is_timeout(&e) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// What the receiving application does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// Reads everything as it comes.
    Reads,
    /// Accepts and never reads (its receive buffer fills, the window closes).
    Never,
}

/// A one-way transfer from a client in one namespace to a server in another.
#[derive(Debug, Clone, Copy)]
pub struct BulkSpec {
    /// The server's port (names the flow).
    pub port: u16,
    /// The sender's options, set before connect().
    pub client: Opts,
    /// The listener's options, set before listen().
    pub server: Opts,
    /// SO_RCVBUF set on the accepted socket, after the handshake.
    pub rcvbuf_after_accept: Option<i32>,
    /// Bytes per write().
    pub write_size: usize,
    /// Application pacing: `(bytes, period)`, one write of that many bytes per period.
    pub pace: Option<(usize, Duration)>,
    /// The receiving application.
    pub reader: Reader,
}

impl BulkSpec {
    /// A free-running transfer with default buffers and 64 KiB writes.
    pub fn new(port: u16, cc: crate::sock::Cc) -> BulkSpec {
        BulkSpec {
            port,
            client: Opts::cc(cc),
            server: Opts::cc(cc),
            rcvbuf_after_accept: None,
            write_size: 64 * 1024,
            pace: None,
            reader: Reader::Reads,
        }
    }
}

/// A running transfer; counts what the receiving application read.
pub struct Bulk {
    /// Bytes the server read.
    pub received: Arc<AtomicU64>,
    /// The spec it runs.
    pub spec: BulkSpec,
    task: Task,
}

impl Bulk {
    /// Starts the transfer from `client` to `server_addr:spec.port` in `server`.
    pub fn start(
        client: &Netns,
        server: &Netns,
        server_addr: &str,
        spec: BulkSpec,
        limit: Duration,
    ) -> io::Result<Bulk> {
        let stop = Stop::after(limit);
        let received = Arc::new(AtomicU64::new(0));
        let addr = server_addr.to_string();
        let listener = server.run(move || sock::listen(&addr, spec.port, 16, &spec.server))??;
        let mut task = Task::new(stop.clone());
        let (r, s) = (received.clone(), stop.clone());
        task.spawn(server, move |holder| {
            let Some(mut c) = accept_one(&listener, &s)? else {
                return Ok(());
            };
            holder.hold(&c)?;
            if let Some(b) = spec.rcvbuf_after_accept {
                sock::set_int(c.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, b)?;
            }
            if let Some(cc) = spec.server.cc {
                sock::set_cc(c.as_raw_fd(), cc)?;
            }
            if spec.reader == Reader::Never {
                // Holds the connection open without reading.
                while !s.done() {
                    s.sleep(Duration::from_millis(100));
                }
                return Ok(());
            }
            let mut buf = vec![0u8; 256 * 1024];
            while !s.done() {
                match c.read(&mut buf)? {
                    0 => break,
                    n => r.fetch_add(n as u64, Ordering::Relaxed),
                };
            }
            Ok(())
        });
        let (s, addr) = (stop.clone(), server_addr.to_string());
        task.spawn(client, move |holder| {
            let mut c = sock::connect(&addr, spec.port, &spec.client)?;
            holder.hold(&c)?;
            // Blocking writes with no timeout: a writer that blocks is woken only once the send
            // buffer has room (a write() retried after a timeout re-enters tcp_sendmsg and may
            // append to the unsent tail past SO_SNDBUF, doc/diagnose.md).
            let chunk = vec![0x5au8; spec.write_size.max(1)];
            let mut next = Instant::now();
            while !s.done() {
                if let Some((bytes, period)) = spec.pace {
                    let now = Instant::now();
                    if now < next {
                        s.sleep(next - now);
                        continue;
                    }
                    next += period;
                    let mut left = bytes;
                    while left > 0 && !s.done() {
                        left -= c.write(&chunk[..left.min(chunk.len())])?;
                    }
                    continue;
                }
                c.write_all(&chunk)?;
            }
            Ok(())
        });
        Ok(Bulk {
            received,
            spec,
            task,
        })
    }

    /// Errors the transfer's threads ended with.
    pub fn errors(&self) -> Vec<String> {
        self.task.errors()
    }
}

/// A request/response exchange on one long-lived connection: the client writes the request
/// in `request` pieces (more than one piece with Nagle on is the write-write-read pattern),
/// then reads the response.
#[derive(Debug, Clone)]
pub struct RrSpec {
    /// The server's port.
    pub port: u16,
    /// Client options (TCP_NODELAY or not).
    pub client: Opts,
    /// Server options.
    pub server: Opts,
    /// Sizes of the client's writes making up one request.
    pub request: Vec<usize>,
    /// Bytes of the response.
    pub response: usize,
}

/// A running request/response exchange.
pub struct Rr {
    /// Exchanges completed.
    pub exchanges: Arc<AtomicU64>,
    task: Task,
}

impl Rr {
    /// Starts the exchange loop.
    pub fn start(
        client: &Netns,
        server: &Netns,
        server_addr: &str,
        spec: RrSpec,
        limit: Duration,
    ) -> io::Result<Rr> {
        let stop = Stop::after(limit);
        let exchanges = Arc::new(AtomicU64::new(0));
        let addr = server_addr.to_string();
        let sopts = spec.server;
        let port = spec.port;
        let listener = server.run(move || sock::listen(&addr, port, 16, &sopts))??;
        let mut task = Task::new(stop.clone());
        let req_len: usize = spec.request.iter().sum();
        let resp_len = spec.response;
        let s = stop.clone();
        task.spawn(server, move |_| {
            let Some(mut c) = accept_one(&listener, &s)? else {
                return Ok(());
            };
            if sopts.nodelay {
                c.set_nodelay(true)?;
            }
            timeouts(&c, Duration::from_millis(200))?;
            let mut req = vec![0u8; req_len];
            let resp = vec![7u8; resp_len];
            while !s.done() {
                match read_full(&mut c, &mut req, &s) {
                    Ok(true) => c.write_all(&resp)?,
                    Ok(false) => break,
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        });
        let (s, addr, n) = (stop.clone(), server_addr.to_string(), exchanges.clone());
        task.spawn(client, move |_| {
            let mut c = sock::connect(&addr, spec.port, &spec.client)?;
            timeouts(&c, Duration::from_millis(200))?;
            let mut resp = vec![0u8; resp_len];
            while !s.done() {
                for &piece in &spec.request {
                    c.write_all(&vec![1u8; piece])?;
                }
                if !read_full(&mut c, &mut resp, &s)? {
                    break;
                }
                n.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        });
        Ok(Rr { exchanges, task })
    }

    /// Errors the exchange's threads ended with.
    pub fn errors(&self) -> Vec<String> {
        self.task.errors()
    }
}

/// Reads exactly `buf.len()` bytes, riding out read timeouts; false on EOF or when stopped.
fn read_full(c: &mut TcpStream, buf: &mut [u8], stop: &Stop) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        if stop.done() {
            return Ok(false);
        }
        match c.read(&mut buf[got..]) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(e) if is_timeout(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Short connections: each client connects, sends a request, reads the response and closes;
/// the server accepts at once and answers.
#[derive(Debug, Clone, Copy)]
pub struct ChurnSpec {
    /// The server's port.
    pub port: u16,
    /// Client options.
    pub client: Opts,
    /// Server options.
    pub server: Opts,
    /// The listen() backlog.
    pub backlog: i32,
    /// Concurrent client threads.
    pub clients: usize,
    /// Request bytes.
    pub request: usize,
    /// Response bytes.
    pub response: usize,
    /// True: the server closes first (its side keeps the TIME-WAIT); false: the client does.
    pub server_closes_first: bool,
    /// Pause between one client's connections.
    pub pause: Duration,
    /// Connections per client, at most.
    pub max_per_client: usize,
}

/// A running churn.
pub struct Churn {
    /// Connections completed.
    pub completed: Arc<AtomicU64>,
    /// connect() failures (EADDRNOTAVAIL when the ports run out).
    pub failed: Arc<AtomicU64>,
    task: Task,
}

impl Churn {
    /// Starts the server and the clients.
    pub fn start(
        client: &Netns,
        server: &Netns,
        server_addr: &str,
        spec: ChurnSpec,
        limit: Duration,
    ) -> io::Result<Churn> {
        let stop = Stop::after(limit);
        let addr = server_addr.to_string();
        let listener =
            server.run(move || sock::listen(&addr, spec.port, spec.backlog, &spec.server))??;
        let mut task = Task::new(stop.clone());
        let s = stop.clone();
        task.spawn(server, move |_| {
            listener.set_nonblocking(true)?;
            let mut handlers: Vec<JoinHandle<()>> = vec![];
            while !s.done() {
                match listener.accept() {
                    Ok((c, _)) => {
                        let s2 = s.clone();
                        handlers.push(std::thread::spawn(move || {
                            let _ = serve_one(c, &spec, &s2);
                        }));
                        handlers.retain(|h| !h.is_finished());
                    }
                    Err(e) if is_timeout(&e) => std::thread::sleep(Duration::from_millis(1)),
                    Err(e) => return Err(e),
                }
            }
            for h in handlers {
                let _ = h.join();
            }
            Ok(())
        });
        let completed = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        for _ in 0..spec.clients {
            let (s, addr) = (stop.clone(), server_addr.to_string());
            let (ok, bad) = (completed.clone(), failed.clone());
            task.spawn(client, move |_| {
                for _ in 0..spec.max_per_client {
                    if s.done() {
                        break;
                    }
                    match sock::connect(&addr, spec.port, &spec.client) {
                        Ok(mut c) => {
                            timeouts(&c, Duration::from_millis(500))?;
                            c.write_all(&vec![1u8; spec.request])?;
                            let mut resp = vec![0u8; spec.response];
                            if read_full(&mut c, &mut resp, &s)? {
                                if spec.server_closes_first {
                                    let mut b = [0u8; 1];
                                    let _ = c.read(&mut b); // the server's FIN
                                }
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(_) => {
                            bad.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    s.sleep(spec.pause);
                }
                Ok(())
            });
        }
        Ok(Churn {
            completed,
            failed,
            task,
        })
    }

    /// Errors the churn's threads ended with.
    pub fn errors(&self) -> Vec<String> {
        self.task.errors()
    }
}

fn serve_one(mut c: TcpStream, spec: &ChurnSpec, stop: &Stop) -> io::Result<()> {
    timeouts(&c, Duration::from_millis(500))?;
    let mut req = vec![0u8; spec.request];
    if !read_full(&mut c, &mut req, stop)? {
        return Ok(());
    }
    c.write_all(&vec![7u8; spec.response])?;
    if !spec.server_closes_first {
        // Wait for the client's FIN, so the client's side keeps the TIME-WAIT.
        let mut b = [0u8; 1];
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !stop.done() {
            match c.read(&mut b) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {}
                Err(_) => break,
            }
        }
    }
    Ok(())
}

/// Idle connections: each exchanges one small message, then stays open (with keep-alive when
/// the options say so) until dropped.
pub struct Idle {
    _pairs: Vec<(TcpStream, TcpStream)>,
}

impl Idle {
    /// Opens `n` connections from `client` to `server_addr:port` in `server`.
    pub fn open(
        client: &Netns,
        server: &Netns,
        server_addr: &str,
        port: u16,
        n: usize,
        o: Opts,
    ) -> io::Result<Idle> {
        let addr = server_addr.to_string();
        let listener = server.run(move || sock::listen(&addr, port, 64, &o))??;
        let mut pairs = vec![];
        for _ in 0..n {
            let addr = server_addr.to_string();
            let mut c = client.run(move || sock::connect(&addr, port, &o))??;
            let (mut s, _) = listener.accept()?;
            s.write_all(b"hello")?;
            let mut b = [0u8; 5];
            c.read_exact(&mut b)?;
            c.write_all(b"ok")?;
            let mut b = [0u8; 2];
            s.read_exact(&mut b)?;
            pairs.push((c, s));
        }
        Ok(Idle { _pairs: pairs })
    }
}

/// A listener that never accepts, and clients whose connects pile up against it: each client
/// connects (non-blocking, the connects spread over a while, so later SYNs meet a full accept
/// queue) and sends a small request as soon as its connect completes, as a real client would.
pub struct Flood {
    _listener: TcpListener,
    /// When the first connect was started.
    pub started: Instant,
    task: Task,
}

impl Flood {
    /// `n` clients in `client`, spread over `spread`, against a listener with `backlog` in
    /// `server`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        client: &Netns,
        server: &Netns,
        server_addr: &str,
        port: u16,
        backlog: i32,
        n: usize,
        spread: Duration,
        o: Opts,
        limit: Duration,
    ) -> io::Result<Flood> {
        let addr = server_addr.to_string();
        let listener = server.run(move || sock::listen(&addr, port, backlog, &o))??;
        let stop = Stop::after(limit);
        let mut task = Task::new(stop.clone());
        let started = Instant::now();
        let addr = server_addr.to_string();
        task.spawn(client, move |holder| {
            let step = spread / n.max(1) as u32;
            // (socket, request sent)
            let mut clients: Vec<(TcpStream, bool)> = vec![];
            let mut next = Instant::now();
            while !stop.done() {
                if clients.len() < n && Instant::now() >= next {
                    let c = sock::connect_nonblocking(&addr, port, &o)?;
                    holder.hold(&c)?;
                    clients.push((c, false));
                    next += step;
                }
                let mut fds: Vec<libc::pollfd> = clients
                    .iter()
                    .map(|(c, sent)| libc::pollfd {
                        fd: c.as_raw_fd(),
                        events: if *sent { 0 } else { libc::POLLOUT },
                        revents: 0,
                    })
                    .collect();
                // SAFETY: a valid array of pollfd of the given length.
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 10) };
                for (p, (c, sent)) in fds.iter().zip(clients.iter_mut()) {
                    if !*sent && p.revents & libc::POLLOUT != 0 && c.take_error()?.is_none() {
                        // Connected (the client believes so): send the request.
                        let _ = (&*c).write(&[1u8; 100]);
                        *sent = true;
                    }
                }
            }
            Ok(())
        });
        Ok(Flood {
            _listener: listener,
            started,
            task,
        })
    }

    /// Errors the clients' thread ended with.
    pub fn errors(&self) -> Vec<String> {
        self.task.errors()
    }
}

/// Connections the server closed first, so it holds each tuple in TIME-WAIT: their client
/// addresses, for [`send_syns`].
pub fn server_time_wait(
    client: &Netns,
    server: &Netns,
    server_addr: &str,
    port: u16,
    n: usize,
    o: Opts,
) -> io::Result<Vec<SocketAddrV4>> {
    let addr = server_addr.to_string();
    let listener = server.run(move || sock::listen(&addr, port, 64, &o))??;
    let mut clients = vec![];
    for _ in 0..n {
        let addr = server_addr.to_string();
        let mut c = client.run(move || sock::connect(&addr, port, &o))??;
        let (s, _) = listener.accept()?;
        drop(s);
        let mut b = [0u8; 1];
        c.set_read_timeout(Some(Duration::from_secs(2)))?;
        let _ = c.read(&mut b); // EOF: the server's FIN
        clients.push(sock::local_v4(&c)?);
    }
    Ok(clients)
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Sends a bare SYN (no options) from `src` to `dst` through a raw socket, as a client behind
/// a NAT reusing a port would: its sequence number bears no relation to the old connection's.
fn send_syn(raw: i32, src: SocketAddrV4, dst: SocketAddrV4, seq: u32) -> io::Result<()> {
    let mut tcp = [0u8; 20];
    tcp[0..2].copy_from_slice(&src.port().to_be_bytes());
    tcp[2..4].copy_from_slice(&dst.port().to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x02; // SYN
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    let mut pseudo = Vec::with_capacity(32);
    pseudo.extend_from_slice(&src.ip().octets());
    pseudo.extend_from_slice(&dst.ip().octets());
    pseudo.extend_from_slice(&[0, 6, 0, 20]);
    pseudo.extend_from_slice(&tcp);
    let c = checksum(&pseudo);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    let mut ip = [0u8; 40];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&40u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.ip().octets());
    ip[16..20].copy_from_slice(&dst.ip().octets());
    let hc = checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&hc.to_be_bytes());
    ip[20..].copy_from_slice(&tcp);
    let sa = sock::sockaddr(SocketAddrV4::new(*dst.ip(), 0));
    // SAFETY: a valid buffer and sockaddr_in.
    let n = unsafe {
        libc::sendto(
            raw,
            ip.as_ptr().cast(),
            ip.len(),
            0,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if n == 40 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// From `ns`, sends `per_tuple` SYNs for each of `clients` to `dst`, with sequence numbers
/// from a fixed pseudo-random series: some fall below what the server's TIME-WAIT entry
/// expects and are answered with a (rate-limited) ACK instead of a new connection.
pub fn send_syns(
    ns: &Netns,
    clients: Vec<SocketAddrV4>,
    dst: SocketAddrV4,
    per_tuple: usize,
) -> io::Result<()> {
    ns.run(move || -> io::Result<()> {
        // SAFETY: a raw socket (IPPROTO_RAW implies IP_HDRINCL).
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(dst.port());
        let mut res = Ok(());
        for src in &clients {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for _ in 0..per_tuple {
                if let Err(e) = send_syn(raw, *src, dst, seed as u32) {
                    res = Err(e);
                }
            }
        }
        // SAFETY: closing our fd.
        unsafe { libc::close(raw) };
        res
    })?
}
