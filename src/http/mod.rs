//! The exporter's HTTP server: HTTP/1.1 over TCP, or over TLS (rustls), with the exporter
//! toolkit's web configuration file (`--web.config.file`: TLS, client certificates, basic
//! authentication, extra headers, a rate limit; [`webconfig`]).
//!
//! It assumes hostile clients. One thread per connection, one request per connection
//! (`Connection: close`: a scraper connects once per scrape interval, so keep-alive would save
//! one TLS handshake per scrape and cost an idle thread in between). What one client can take
//! is bounded:
//!
//! - **time**: a connection has [`REQUEST_DEADLINE`] from its accept to a complete request head,
//!   the TLS handshake included (one deadline for the whole stage, not per read, so trickling
//!   bytes does not extend it); [`WRITE_DEADLINE`] to take the answer; [`LINGER`] to close;
//! - **places**: [`pool`]: [`pool::MAX_CONNECTIONS`] in all, [`pool::PER_PEER`] per client
//!   address; a new connection takes the place of an incomplete or unauthenticated one before
//!   it is refused, and an authenticated one is never evicted, so Prometheus gets in while
//!   others trickle;
//! - **work before authentication**: a request head of at most [`MAX_HEAD`], no body read; one
//!   bcrypt at a time, one waiting per client, a few in all, the rest answered 429 at once
//!   ([`auth`]); the rate limit per client, after authentication.
//!
//! The threads that accept connections and speak HTTP and TLS hold no capabilities (they are
//! dropped in the accepting thread before its first `accept`, and its connection threads
//! inherit that): a bug in parsing what a client sends cannot use what the collection thread
//! keeps to read other processes' `/proc` (doc/serve.md, "Privileges").
//!
//! The configuration file is checked at start (a bad file stops the exporter with one line
//! naming it). Afterwards, as in the toolkit, it is read again when it or a file it names
//! changes, so a renewed certificate or a changed password takes effect on the next connection
//! without a restart; a file that went bad refuses connections (logged once per change) rather
//! than serving with less protection than configured. Whether TLS is on is decided at start.
//! The files are read by a thread of their own: with the caller's credentials when sockstat has
//! more privilege than its caller (file capabilities), else with CAP_DAC_READ_SEARCH only (a
//! service's key may stay root's).
//!
//! It knows nothing of metrics: a handler answers each authenticated request.

mod auth;
pub mod pool;
mod tls;
pub mod webconfig;

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use pool::{Admission, Peer, Pool, Stage, Ticket};
use webconfig::WebConfig;

/// From accept to a complete request head, the TLS handshake included.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// To write the answer (a large /metrics body to a slow reader), and TLS's closing alert.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(30);
/// After the answer: how long what the client still sends is read and dropped, so that unread
/// bytes do not make the kernel reset the connection before the client has read the answer.
pub const LINGER: Duration = Duration::from_secs(1);
/// Largest request head taken.
pub const MAX_HEAD: usize = 16 * 1024;
/// Stack of a connection's thread: parsing, TLS and bcrypt need little, and a bounded pool of
/// small stacks keeps the exporter's address space small.
const CONNECTION_STACK: usize = 512 * 1024;
/// Connections the kernel may hold for `accept` (capped by `net.core.somaxconn`).
const LISTEN_BACKLOG: i32 = 4096;
/// How often the log may say that connections were refused or evicted.
const LIMIT_LOG_EVERY: Duration = Duration::from_secs(60);

/// A request method, as far as routing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    /// Anything else (POST, PUT, ...).
    Other,
}

/// An authenticated request.
#[derive(Debug)]
pub struct Request<'a> {
    pub method: Method,
    /// The path, without the query string.
    pub path: &'a str,
}

/// An answer.
#[derive(Debug)]
pub struct Response {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
    /// Whether `Content-Length` is known (a HEAD answered without computing the body omits it).
    length_known: bool,
    allow: Option<&'static str>,
    /// Seconds after which to try again (`Retry-After`, with 429).
    retry_after: Option<u32>,
}

impl Response {
    /// 200 with a body (sent for GET; for HEAD, only its length).
    pub fn ok(content_type: &'static str, body: Vec<u8>) -> Response {
        Response {
            status: 200,
            content_type,
            body,
            length_known: true,
            allow: None,
            retry_after: None,
        }
    }

    /// 200 to a HEAD whose body would be costly to compute: the headers without
    /// `Content-Length` (RFC 9110 §9.3.2 allows leaving out what only the body would tell).
    pub fn head_only(content_type: &'static str) -> Response {
        Response {
            length_known: false,
            ..Response::ok(content_type, Vec::new())
        }
    }

    fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
            length_known: true,
            allow: None,
            retry_after: None,
        }
    }

    /// 404.
    pub fn not_found() -> Response {
        Response::text(404, "not found: try /metrics\n")
    }

    /// 405 with the methods the path takes.
    pub fn method_not_allowed(allow: &'static str) -> Response {
        Response {
            allow: Some(allow),
            ..Response::text(405, "method not allowed\n")
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        _ => "",
    }
}

/// The answer to one request.
pub type Handler = dyn Fn(&Request<'_>) -> Response + Send + Sync;

/// Identity of a file's current content, to notice a change without reading it.
type Stamp = Vec<Option<(u64, u64, u64, i64, i64, i64, i64)>>;

fn stamp(files: &[PathBuf]) -> Stamp {
    files
        .iter()
        .map(|f| {
            std::fs::metadata(f).ok().map(|m| {
                (
                    m.dev(),
                    m.ino(),
                    m.size(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec(),
                )
            })
        })
        .collect()
}

/// The configuration in force and how to notice it changed; owned by the thread that reads the
/// files.
struct Loaded {
    path: PathBuf,
    tls: bool,
    files: Vec<PathBuf>,
    stamp: Stamp,
    current: Result<Arc<WebConfig>, String>,
}

impl Loaded {
    /// The configuration for a new connection: read again when the file or one it names changed.
    fn refresh(&mut self) -> Result<Arc<WebConfig>, String> {
        let now = stamp(&self.files);
        if now != self.stamp {
            let next = webconfig::load(&self.path).and_then(|c| match (self.tls, c.tls.is_some()) {
                (true, false) => Err(format!(
                    "{}: tls_server_config no longer sets TLS; restart sockstat to serve plain HTTP",
                    self.path.display()
                )),
                (false, true) => Err(format!(
                    "{}: tls_server_config now sets TLS; restart sockstat to serve HTTPS",
                    self.path.display()
                )),
                _ => Ok(c),
            });
            self.stamp = now;
            match next {
                Ok(c) => {
                    eprintln!("sockstat: reloaded {}", self.path.display());
                    if c.files != self.files {
                        // It names other files now: watch those (as they are after this read).
                        self.files = c.files.clone();
                        self.stamp = stamp(&self.files);
                    }
                    self.current = Ok(Arc::new(c));
                }
                Err(e) => {
                    eprintln!("sockstat: error: {e}; refusing connections until it is fixed");
                    self.current = Err(e);
                }
            }
        }
        self.current.clone()
    }
}

/// A request for the configuration in force, and where to send it.
type Ask = mpsc::SyncSender<Result<Arc<WebConfig>, String>>;

/// What `--web.config.file` set up, shared by the connections.
struct Web {
    tls: bool,
    /// The file reader's mailbox (set when serving starts).
    reader: Mutex<Option<mpsc::Sender<Ask>>>,
    auth: auth::BasicAuth,
    limiter: Mutex<Option<auth::RateLimiter>>,
}

impl Web {
    /// The configuration for a new connection, from the thread that reads the files.
    fn current(&self) -> Result<Arc<WebConfig>, String> {
        let (tx, rx) = mpsc::sync_channel(1);
        let sent = self
            .reader
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|r| r.send(tx).is_ok());
        if !sent {
            return Err("the web configuration reader has stopped".into());
        }
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| Err("the web configuration reader did not answer".into()))
    }
}

/// Starts the thread that reads the configuration files for the connections: with the caller's
/// credentials when sockstat has more privilege than its caller, else keeping only
/// CAP_DAC_READ_SEARCH of what the process kept (a root-only key stays readable to a service).
fn start_reader(mut loaded: Loaded) -> io::Result<mpsc::Sender<Ask>> {
    let (tx, rx) = mpsc::channel::<Ask>();
    let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
    std::thread::Builder::new()
        .name("web-config".into())
        .spawn(move || {
            let creds = if sockstat::privilege::secure_exec() {
                sockstat::privilege::become_caller()
            } else {
                crate::privileges::keep_in_this_thread(
                    rustix::thread::CapabilitySet::DAC_READ_SEARCH,
                )
                .map(|_| ())
            };
            let ok = creds.is_ok();
            let _ = ready_tx.send(creds);
            if !ok {
                return;
            }
            for ask in rx {
                let _ = ask.send(loaded.refresh());
            }
        })?;
    ready_rx
        .recv()
        .map_err(|_| io::Error::other("the web configuration reader stopped"))??;
    Ok(tx)
}

/// Why [`Server::bind`] failed, naming the file or the address (and, as its source, the
/// system's error).
#[derive(Debug)]
pub enum BindError {
    /// The web configuration file (or a file it names) is unreadable or wrong.
    WebConfig(String),
    /// The address cannot be listened on (in use, not local, or a port below 1024 without
    /// CAP_NET_BIND_SERVICE): the system's error is the source.
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindError::WebConfig(why) => f.write_str(why),
            // The source follows, as the error's cause.
            BindError::Listen { addr, .. } => write!(f, "cannot listen on {addr}"),
        }
    }
}

impl std::error::Error for BindError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BindError::WebConfig(_) => None,
            BindError::Listen { source, .. } => Some(source),
        }
    }
}

/// A bound listener and its configuration, not yet serving.
pub struct Server {
    listener: TcpListener,
    web: Option<(Arc<Web>, Loaded)>,
    notes: Vec<String>,
}

impl Server {
    /// Checks `web_config` (when given) and binds `addr`. The error is one line naming the
    /// address or the file. The file, and those it names, are read with the caller's
    /// credentials when sockstat has more privilege than its caller.
    pub fn bind(addr: SocketAddr, web_config: Option<&Path>) -> Result<Server, BindError> {
        let (web, notes) = match web_config {
            None => (None, Vec::new()),
            Some(path) => {
                let c = sockstat::privilege::as_caller(|| webconfig::load(path))
                    .map_err(|e| {
                        BindError::WebConfig(format!("cannot read {}: {e}", path.display()))
                    })?
                    .map_err(BindError::WebConfig)?;
                let notes = c.notes.clone();
                let files = c.files.clone();
                let web = Web {
                    tls: c.tls.is_some(),
                    reader: Mutex::new(None),
                    auth: auth::BasicAuth::default(),
                    limiter: Mutex::new(None),
                };
                let loaded = Loaded {
                    path: path.to_path_buf(),
                    tls: c.tls.is_some(),
                    stamp: stamp(&files),
                    files,
                    current: Ok(Arc::new(c)),
                };
                (Some((Arc::new(web), loaded)), notes)
            }
        };
        let listener =
            TcpListener::bind(addr).map_err(|source| BindError::Listen { addr, source })?;
        // The standard library listens with a backlog of 128: a burst of connections from one
        // client (hundreds reconnecting at once) would fill it, and the kernel then drops every
        // SYN, Prometheus's too, which waits a second to retry. The kernel caps this at
        // net.core.somaxconn (4096 by default).
        rustix::net::listen(&listener, LISTEN_BACKLOG).map_err(|e| BindError::Listen {
            addr,
            source: e.into(),
        })?;
        Ok(Server {
            listener,
            web,
            notes,
        })
    }

    /// Where it listens (the port chosen when asked for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.web.as_ref().is_some_and(|(w, _)| w.tls) {
            "https"
        } else {
            "http"
        }
    }

    /// True when the configuration asks every client for a password or a verified
    /// certificate.
    pub fn authenticates(&self) -> bool {
        self.web.as_ref().is_some_and(|(_, l)| {
            l.current
                .as_ref()
                .is_ok_and(|c| !c.users.is_empty() || c.clients_verified)
        })
    }

    /// What the configuration file asks that is done differently, for one line each at start.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Serves until the process ends. Starts the configuration reader (from this thread, so
    /// that it starts with what this thread holds), then drops every capability of this thread
    /// before the first `accept`: the connection threads it starts hold none.
    pub fn run(self, handler: Arc<Handler>) -> io::Result<()> {
        let web = match self.web {
            Some((web, loaded)) => {
                let reader = start_reader(loaded)?;
                *web.reader.lock().unwrap_or_else(|p| p.into_inner()) = Some(reader);
                Some(web)
            }
            None => None,
        };
        crate::privileges::keep_in_this_thread(rustix::thread::CapabilitySet::empty())?;
        let pool = Arc::new(Pool::default());
        let live = Arc::new(Live::default());
        let mut accept_error_logged = false;
        let mut limited = LimitLog::default();
        let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
        loop {
            // An evicted connection's thread leaves as soon as it runs again; until then it
            // counts here, and new connections wait in the kernel's queue rather than add
            // threads beyond MAX_THREADS.
            live.wait_for_room(&mut threads);
            let (stream, from) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before accept: wait a
                    // moment rather than spin, and say so once.
                    if !accept_error_logged {
                        eprintln!("sockstat: warning: accepting a connection failed: {e}");
                        accept_error_logged = true;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            let accepted = Instant::now();
            let peer = Peer::of(from.ip());
            let (ticket, admission) = pool.admit(peer, &stream);
            limited.count(&admission);
            let Some(ticket) = ticket else {
                continue;
            };
            let (web, handler) = (web.clone(), Arc::clone(&handler));
            let alive = Live::enter(&live);
            // A thread that cannot start drops its connection and frees its place.
            let started = std::thread::Builder::new()
                .name("http".into())
                .stack_size(CONNECTION_STACK)
                .spawn(move || {
                    let _alive = alive;
                    serve_connection(&stream, peer, &ticket, web.as_deref(), &*handler, accepted);
                });
            if let Ok(handle) = started {
                threads.push(handle);
            }
        }
    }
}

/// Connection threads alive: those serving a place in the pool, and those evicted but not yet
/// gone (and those waiting for a password check, which a shutdown does not wake).
pub const MAX_THREADS: usize = pool::MAX_CONNECTIONS + auth::MAX_WAITING + 8;

/// The count of connection threads serving, and a signal when one is done.
#[derive(Default)]
struct Live {
    count: Mutex<usize>,
    left: std::sync::Condvar,
}

/// One connection thread, counted while it lives.
struct Alive(Arc<Live>);

impl Live {
    fn enter(live: &Arc<Live>) -> Alive {
        *live.count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Alive(Arc::clone(live))
    }

    /// Waits until fewer than [`MAX_THREADS`] connection threads exist, joining those that
    /// are done. A thread counts until it is joined, not only while it serves: one that has
    /// dropped its [`Alive`] still exists in the kernel (and against the unit's TasksMax)
    /// until it has unwound and exited, which the join waits for.
    fn wait_for_room(&self, threads: &mut Vec<std::thread::JoinHandle<()>>) {
        loop {
            let mut i = 0;
            while i < threads.len() {
                if threads[i].is_finished() {
                    // A connection thread's panic was its own; the place it held is free.
                    let _ = threads.swap_remove(i).join();
                } else {
                    i += 1;
                }
            }
            if threads.len() < MAX_THREADS {
                return;
            }
            // Woken when a thread is done serving; it may still be exiting, so look again soon.
            let count = self.count.lock().unwrap_or_else(|p| p.into_inner());
            let _ = self.left.wait_timeout(count, Duration::from_millis(10));
        }
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        *self.0.count.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.0.left.notify_one();
    }
}

/// Counts connections refused or evicted by the limits, and says so in the log at most once
/// per [`LIMIT_LOG_EVERY`] (a flood must not flood the log too).
#[derive(Default)]
struct LimitLog {
    refused: u64,
    evicted: u64,
    since: Option<Instant>,
}

impl LimitLog {
    fn count(&mut self, a: &Admission) {
        match a {
            Admission::Admitted => return,
            Admission::Evicted(_) => self.evicted += 1,
            Admission::Refused => self.refused += 1,
        }
        let now = Instant::now();
        if self
            .since
            .is_none_or(|t| now.duration_since(t) >= LIMIT_LOG_EVERY)
        {
            eprintln!(
                "sockstat: warning: connection limits: {} connections refused and {} incomplete \
                 or unauthenticated ones closed for newer ones since the last such line (at most \
                 {} connections, {} per client address; doc/serve.md)",
                self.refused,
                self.evicted,
                pool::MAX_CONNECTIONS,
                pool::PER_PEER
            );
            self.refused = 0;
            self.evicted = 0;
            self.since = Some(now);
        }
    }
}

/// A socket whose reads and writes all end by one deadline (moved on from stage to stage): a
/// client that sends or takes a byte at a time does not get more time for it.
struct Timed<'a> {
    sock: &'a TcpStream,
    deadline: &'a Cell<Instant>,
}

impl Timed<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self
            .deadline
            .get()
            .saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
        }
        // A zero timeout would mean none at all.
        Ok(left.max(Duration::from_millis(1)))
    }

    /// Waits (within the deadline) for the client's first bytes and looks at them without
    /// taking them.
    fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.set_read_timeout(Some(self.left()?))?;
        self.sock.peek(buf)
    }
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.set_read_timeout(Some(self.left()?))?;
        (&mut &*self.sock).read(buf)
    }
}

impl Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.set_write_timeout(Some(self.left()?))?;
        (&mut &*self.sock).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Does the client's first data look like a plain HTTP request (a method name and a space)
/// rather than a TLS record?
fn looks_like_http(first: &[u8]) -> bool {
    let word = first.iter().take_while(|b| b.is_ascii_uppercase()).count();
    word > 0 && (word == first.len() || first[word] == b' ')
}

/// One connection, from accept to close, on its own thread.
fn serve_connection(
    stream: &TcpStream,
    peer: Peer,
    ticket: &Ticket,
    web: Option<&Web>,
    handler: &Handler,
    accepted: Instant,
) {
    let _ = stream.set_nodelay(true);
    let deadline = Cell::new(accepted + REQUEST_DEADLINE);
    let mut io = Timed {
        sock: stream,
        deadline: &deadline,
    };
    let config = match web.map(Web::current).transpose() {
        Ok(c) => c,
        Err(_) => {
            // Logged when it went bad. A TLS port closes; a plain one says why.
            if !web.is_some_and(|w| w.tls) {
                deadline.set(Instant::now() + WRITE_DEADLINE);
                let _ = write_response(
                    &mut io,
                    Method::Get,
                    &Response::text(500, "the web configuration file is invalid\n"),
                    &[],
                );
            }
            linger(&mut io, &deadline);
            return;
        }
    };
    let conn = Conn {
        peer,
        ticket,
        web,
        config: config.as_deref(),
        handler,
        deadline: &deadline,
    };
    match config.as_ref().and_then(|c| c.tls.clone()) {
        // Web::current refuses a configuration whose TLS differs from the one at start.
        Some(tls) => {
            // The client's first bytes (within the deadline) tell HTTP from TLS.
            let mut first = [0u8; 8];
            let n = match io.peek(&mut first) {
                Ok(n) if n > 0 => n,
                _ => return,
            };
            if looks_like_http(&first[..n]) {
                deadline.set(Instant::now() + WRITE_DEADLINE);
                let _ = write_response(
                    &mut io,
                    Method::Get,
                    &Response::text(400, "client sent an HTTP request to an HTTPS server\n"),
                    &[],
                );
                linger(&mut io, &deadline);
                return;
            }
            let Ok(mut tls) = rustls::ServerConnection::new(tls) else {
                return;
            };
            while tls.is_handshaking() {
                // A failed handshake (no client certificate, an unknown CA, a wrong version, a
                // malformed record) has sent its alert; nothing to add.
                if tls.complete_io(&mut io).is_err() {
                    return;
                }
            }
            // rustls consults the client verifier only for a certificate that was sent; a
            // policy that requires one is checked here again, so that no session without one
            // gets past it whatever the verifier did.
            if conn.config.is_some_and(|c| c.clients_verified) && tls.peer_certificates().is_none()
            {
                return;
            }
            conn.exchange(&mut rustls::Stream::new(&mut tls, &mut io));
            tls.send_close_notify();
            let _ = tls.complete_io(&mut io);
            linger(&mut io, &deadline);
        }
        None => {
            conn.exchange(&mut io);
            linger(&mut io, &deadline);
        }
    }
}

/// Closes the sending side and reads what the client still sends, for at most [`LINGER`] and
/// 64 KiB, so that unread request bytes (a POST body) do not make the kernel answer with a reset
/// that could destroy the response before the client has read it. A client that closes (as
/// Prometheus does once it has the answer) ends it at once.
fn linger(io: &mut Timed<'_>, deadline: &Cell<Instant>) {
    let _ = io.sock.shutdown(Shutdown::Write);
    deadline.set(Instant::now() + LINGER);
    let mut sink = [0u8; 4096];
    let mut left = 64 * 1024;
    while left > 0 {
        match io.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left -= n.min(left),
        }
    }
}

/// What one connection answers with.
struct Conn<'a> {
    peer: Peer,
    ticket: &'a Ticket,
    web: Option<&'a Web>,
    config: Option<&'a WebConfig>,
    handler: &'a Handler,
    deadline: &'a Cell<Instant>,
}

impl Conn<'_> {
    /// Reads one request head (within the request deadline), checks the credentials and the
    /// rate limit, and answers (within the write deadline).
    fn exchange(&self, s: &mut (impl Read + Write)) {
        let extra: &[(String, String)] = self.config.map_or(&[], |c| &c.headers);
        let mut buf = Vec::with_capacity(1024);
        let mut chunk = [0u8; 2048];
        let (method, response) = loop {
            let n = match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => continue,
                Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
                    break (Method::Get, Response::text(431, "request head too large\n"));
                }
                Err(_) => break (Method::Get, Response::text(400, "bad request\n")),
                Ok(httparse::Status::Complete(_)) => {
                    let method = match req.method {
                        Some("GET") => Method::Get,
                        Some("HEAD") => Method::Head,
                        _ => Method::Other,
                    };
                    let path = req.path.unwrap_or("/");
                    let path = path.split('?').next().unwrap_or(path);
                    let authorization = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("authorization"))
                        .map(|h| h.value);
                    match self.answer(method, path, authorization) {
                        Some(r) => break (method, r),
                        None => return, // evicted meanwhile
                    }
                }
            }
        };
        self.deadline.set(Instant::now() + WRITE_DEADLINE);
        let _ = write_response(s, method, &response, extra);
    }

    /// The answer to a complete request; `None` when the connection was evicted meanwhile.
    fn answer(&self, method: Method, path: &str, authorization: Option<&[u8]>) -> Option<Response> {
        let (Some(web), Some(config)) = (self.web, self.config) else {
            self.ticket.advance(Stage::Trusted).then_some(())?;
            return Some((self.handler)(&Request { method, path }));
        };
        if !config.users.is_empty() {
            self.ticket.advance(Stage::Unauthenticated).then_some(())?;
            let still_here = || self.ticket.advance(Stage::Unauthenticated);
            match web.auth.check(
                &config.users,
                &config.decoy,
                authorization,
                self.peer,
                still_here,
            ) {
                auth::Verdict::Allowed => {}
                auth::Verdict::Refused => return Some(Response::text(401, "unauthorized\n")),
                auth::Verdict::Busy => {
                    return Some(Response {
                        retry_after: Some(1),
                        ..Response::text(429, "too many password checks waiting\n")
                    })
                }
            }
        }
        self.ticket.advance(Stage::Trusted).then_some(())?;
        if let Some(limit) = config.rate_limit {
            let mut l = web.limiter.lock().unwrap_or_else(|p| p.into_inner());
            if !l
                .as_ref()
                .is_some_and(|r| r.is(limit.interval, limit.burst))
            {
                *l = Some(auth::RateLimiter::new(limit.interval, limit.burst));
            }
            if l.as_mut()
                .is_some_and(|r| !r.allow(self.peer, Instant::now()))
            {
                return Some(Response::text(429, "too many requests\n"));
            }
        }
        Some((self.handler)(&Request { method, path }))
    }
}

fn write_response(
    s: &mut impl Write,
    method: Method,
    r: &Response,
    extra: &[(String, String)],
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nConnection: close\r\n",
        r.status,
        reason(r.status),
        r.content_type
    );
    if r.length_known {
        head.push_str(&format!("Content-Length: {}\r\n", r.body.len()));
    }
    if let Some(allow) = r.allow {
        head.push_str(&format!("Allow: {allow}\r\n"));
    }
    if let Some(secs) = r.retry_after {
        head.push_str(&format!("Retry-After: {secs}\r\n"));
    }
    if r.status == 401 {
        head.push_str("WWW-Authenticate: Basic realm=\"sockstat\", charset=\"UTF-8\"\r\n");
    }
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    if method != Method::Head {
        s.write_all(&r.body)?;
    }
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(method: Method, r: &Response) -> String {
        let mut out = Vec::new();
        write_response(
            &mut out,
            method,
            r,
            &[("X-Frame-Options".into(), "deny".into())],
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_wrong_method_gets_405_with_allow() {
        let t = written(Method::Other, &Response::method_not_allowed("GET, HEAD"));
        assert!(t.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{t}");
        assert!(t.contains("\r\nAllow: GET, HEAD\r\n"), "{t}");
        assert!(t.contains("\r\nX-Frame-Options: deny\r\n"), "{t}");
    }

    #[test]
    fn head_sends_the_length_but_no_body() {
        let t = written(Method::Head, &Response::ok("text/plain", b"hello".to_vec()));
        assert!(t.contains("Content-Length: 5\r\n"), "{t}");
        assert!(t.ends_with("\r\n\r\n"), "{t}");
        let t = written(Method::Head, &Response::head_only("text/plain"));
        assert!(!t.contains("Content-Length"), "{t}");
    }

    #[test]
    fn unauthorized_asks_for_basic_credentials() {
        let t = written(Method::Get, &Response::text(401, "unauthorized\n"));
        assert!(
            t.contains("WWW-Authenticate: Basic realm=\"sockstat\""),
            "{t}"
        );
    }
}
