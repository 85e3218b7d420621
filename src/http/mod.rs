//! The exporter's HTTP server: HTTP/1.1 over TCP, or over TLS (rustls), with the exporter
//! toolkit's web configuration file (`--web.config.file`: TLS, client certificates, basic
//! authentication, extra headers, a rate limit; [`webconfig`]).
//!
//! One thread per connection, at most [`MAX_CONNECTIONS`] at once, one request per connection
//! (`Connection: close`): a scraper connects every scrape interval, so keep-alive would save
//! one TLS handshake per scrape and cost idle threads in between. Every read and write has a
//! deadline, so a client that stalls holds its own thread only, never the others'.
//!
//! The configuration file is checked at start (a bad file stops the exporter with one line
//! naming it). Afterwards, as in the toolkit, it is read again when it or a file it names
//! changes, so a renewed certificate or a changed password takes effect on the next connection
//! without a restart; a file that went bad refuses connections (logged once per change) rather
//! than serving with less protection than configured. Whether TLS is on is decided at start.
//!
//! It knows nothing of metrics: a handler answers each authenticated request.

mod auth;
mod tls;
pub mod webconfig;

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use webconfig::WebConfig;

/// Connections served at once; more are closed as they arrive.
pub const MAX_CONNECTIONS: usize = 32;
/// Time for a client to complete the TLS handshake and send its request head.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// Time for a client to take the answer (a large /metrics body to a slow reader).
const WRITE_DEADLINE: Duration = Duration::from_secs(60);
/// Largest request head taken.
const MAX_HEAD: usize = 16 * 1024;

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

/// The configuration in force and how to notice it changed.
struct Loaded {
    files: Vec<PathBuf>,
    stamp: Stamp,
    current: Result<Arc<WebConfig>, String>,
}

/// What `--web.config.file` set up.
struct Web {
    path: PathBuf,
    tls: bool,
    loaded: Mutex<Loaded>,
    auth: auth::BasicAuth,
    limiter: Mutex<Option<auth::RateLimiter>>,
}

impl Web {
    /// The configuration for a new connection: re-read when the file or one it names changed.
    fn current(&self) -> Result<Arc<WebConfig>, String> {
        let mut l = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let now = stamp(&l.files);
        if now != l.stamp {
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
            l.stamp = now;
            match next {
                Ok(c) => {
                    eprintln!("sockstat: reloaded {}", self.path.display());
                    if c.files != l.files {
                        // It names other files now: watch those (as they are after this read).
                        l.files = c.files.clone();
                        l.stamp = stamp(&l.files);
                    }
                    l.current = Ok(Arc::new(c));
                }
                Err(e) => {
                    eprintln!("sockstat: error: {e}; refusing connections until it is fixed");
                    l.current = Err(e);
                }
            }
        }
        l.current.clone()
    }
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
    web: Option<Arc<Web>>,
    notes: Vec<String>,
}

impl Server {
    /// Checks `web_config` (when given) and binds `addr`. The error is one line naming the
    /// address or the file.
    pub fn bind(addr: SocketAddr, web_config: Option<&Path>) -> Result<Server, BindError> {
        let (web, notes) = match web_config {
            None => (None, Vec::new()),
            Some(path) => {
                let c = webconfig::load(path).map_err(BindError::WebConfig)?;
                let notes = c.notes.clone();
                let files = c.files.clone();
                let web = Web {
                    path: path.to_path_buf(),
                    tls: c.tls.is_some(),
                    loaded: Mutex::new(Loaded {
                        stamp: stamp(&files),
                        files,
                        current: Ok(Arc::new(c)),
                    }),
                    auth: auth::BasicAuth::default(),
                    limiter: Mutex::new(None),
                };
                (Some(Arc::new(web)), notes)
            }
        };
        let listener =
            TcpListener::bind(addr).map_err(|source| BindError::Listen { addr, source })?;
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
        if self.web.as_ref().is_some_and(|w| w.tls) {
            "https"
        } else {
            "http"
        }
    }

    /// True when the configuration asks every client for a password or a verified
    /// certificate.
    pub fn authenticates(&self) -> bool {
        self.web.as_ref().is_some_and(|w| {
            w.loaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .current
                .as_ref()
                .is_ok_and(|c| !c.users.is_empty() || c.clients_verified)
        })
    }

    /// What the configuration file asks that is done differently, for one line each at start.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Serves until the process ends.
    pub fn run(self, handler: Arc<Handler>) -> io::Result<()> {
        let active = Arc::new(AtomicUsize::new(0));
        let mut accept_error_logged = false;
        for stream in self.listener.incoming() {
            let stream = match stream {
                Ok(s) => s,
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
            if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                active.fetch_sub(1, Ordering::AcqRel);
                drop(stream);
                continue;
            }
            let (web, handler, active2) =
                (self.web.clone(), Arc::clone(&handler), Arc::clone(&active));
            let spawned = std::thread::Builder::new()
                .name("http".into())
                .spawn(move || {
                    connection(stream, web.as_deref(), &*handler);
                    active2.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                active.fetch_sub(1, Ordering::AcqRel);
            }
        }
        Ok(())
    }
}

/// Does the client's first data look like a plain HTTP request (a method name and a space)
/// rather than a TLS record?
fn looks_like_http(stream: &TcpStream) -> bool {
    let mut first = [0u8; 8];
    match stream.peek(&mut first) {
        Ok(n) if n > 0 => {
            let head = &first[..n];
            let word = head.iter().take_while(|b| b.is_ascii_uppercase()).count();
            word > 0 && (word == n || head[word] == b' ')
        }
        _ => false,
    }
}

fn connection(stream: TcpStream, web: Option<&Web>, handler: &Handler) {
    let _ = stream.set_nodelay(true);
    if stream
        .set_read_timeout(Some(REQUEST_DEADLINE))
        .and(stream.set_write_timeout(Some(WRITE_DEADLINE)))
        .is_err()
    {
        return;
    }
    let config = match web.map(Web::current).transpose() {
        Ok(c) => c,
        Err(_) => {
            // Logged when it went bad. A TLS port closes; a plain one says why.
            if !web.is_some_and(|w| w.tls) {
                let mut s = &stream;
                let _ = write_response(
                    &mut s,
                    Method::Get,
                    &Response::text(500, "the web configuration file is invalid\n"),
                    &[],
                );
            }
            linger(&stream);
            return;
        }
    };
    let tls = config.as_ref().and_then(|c| c.tls.clone());
    match tls {
        // Web::current refuses a configuration whose TLS differs from the one at start.
        Some(tls) => {
            // Wait for the client's first bytes (within the deadline) to tell HTTP from TLS.
            let mut probe = [0u8; 1];
            if !matches!(stream.peek(&mut probe), Ok(1)) {
                return;
            }
            if looks_like_http(&stream) {
                let mut s = &stream;
                let _ = write_response(
                    &mut s,
                    Method::Get,
                    &Response::text(400, "client sent an HTTP request to an HTTPS server\n"),
                    &[],
                );
                linger(&stream);
                return;
            }
            let Ok(conn) = rustls::ServerConnection::new(tls) else {
                return;
            };
            let mut tls = rustls::StreamOwned::new(conn, stream);
            while tls.conn.is_handshaking() {
                // A failed handshake (no client certificate, an unknown CA, a wrong version)
                // has sent its alert; nothing to add.
                if tls.conn.complete_io(&mut tls.sock).is_err() {
                    return;
                }
            }
            exchange(&mut tls, web, config.as_deref(), handler);
            tls.conn.send_close_notify();
            let _ = tls.flush();
            linger(&tls.sock);
        }
        None => {
            let mut s = &stream;
            exchange(&mut s, web, config.as_deref(), handler);
            linger(&stream);
        }
    }
}

/// Closes the sending side and reads what the client still sends for a moment, so that unread
/// request bytes (a POST body) do not make the kernel answer with a reset that could destroy the
/// response before the client has read it.
fn linger(stream: &TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut sink = [0u8; 4096];
    let mut left = 64 * 1024;
    let mut s = stream;
    while left > 0 {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left -= n.min(left),
        }
    }
}

/// Reads one request head, checks the limit and the credentials, and answers.
fn exchange(
    s: &mut (impl Read + Write),
    web: Option<&Web>,
    config: Option<&WebConfig>,
    handler: &Handler,
) {
    let extra: &[(String, String)] = config.map_or(&[], |c| &c.headers);
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        let response = match req.parse(&buf) {
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => continue,
            Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
                Response::text(431, "request head too large\n")
            }
            Err(_) => Response::text(400, "bad request\n"),
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
                let response = answer(web, config, method, path, authorization, handler);
                let _ = write_response(s, method, &response, extra);
                return;
            }
        };
        let _ = write_response(s, Method::Get, &response, extra);
        return;
    }
}

fn answer(
    web: Option<&Web>,
    config: Option<&WebConfig>,
    method: Method,
    path: &str,
    authorization: Option<&[u8]>,
    handler: &Handler,
) -> Response {
    if let (Some(web), Some(config)) = (web, config) {
        if let Some(limit) = config.rate_limit {
            let mut l = web.limiter.lock().unwrap_or_else(|p| p.into_inner());
            if !l
                .as_ref()
                .is_some_and(|r| r.is(limit.interval, limit.burst))
            {
                *l = Some(auth::RateLimiter::new(limit.interval, limit.burst));
            }
            if l.as_mut().is_some_and(|r| !r.allow(Instant::now())) {
                return Response::text(429, "too many requests\n");
            }
        }
        if !config.users.is_empty() && !web.auth.allows(&config.users, authorization) {
            return Response::text(401, "unauthorized\n");
        }
    }
    handler(&Request { method, path })
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
