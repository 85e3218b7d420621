//! Shared helpers: running sockstat, validating its JSON, parsing its table, holders, network
//! namespaces.

#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
pub use sockstat_testkit::{Addr, Item, Report, Sock};

/// The binary under test.
pub const SOCKSTAT: &str = env!("CARGO_BIN_EXE_sockstat");

/// How long any one command may take before the test fails (the suite must never hang).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Returns from the test, loudly, when not root.
macro_rules! require_root {
    ($what:expr) => {
        if !$crate::common::is_root() {
            eprintln!("SKIPPED: {} needs root", $what);
            return;
        }
    };
}
pub(crate) use require_root;

/// The harness's name of test function `f` in the module whose `module_path!()` is `module`
/// (`watch::f` for `it::watch`): what `--exact` needs to run that one test when this binary is
/// re-run as a helper.
pub fn test_path(module: &str, f: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{f}"),
        None => f.to_string(),
    }
}

/// Tests that load the whole machine (`hardening_churn`'s fork storms: thousands of processes
/// and sockets a second) hold this exclusively; tests whose assertions depend on timing (watch
/// refreshes, trace samples every 50 ms) hold it shared. So the two never overlap inside this
/// harness, as they could not when each was a binary of its own; everything else runs freely.
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Held by a test that loads the whole machine (see [`MACHINE`]).
pub fn loads_the_machine() -> std::sync::RwLockWriteGuard<'static, ()> {
    // A test that failed while holding it leaves it poisoned; the next one may still run.
    MACHINE.write().unwrap_or_else(|e| e.into_inner())
}

/// Held by a test whose assertions depend on timing (see [`MACHINE`]).
pub fn timing_sensitive() -> std::sync::RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}

/// A name unique to this test process and call: `tag-<pid>-<n>`.
pub fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A temporary directory others may traverse (0755), for paths a holder binds or a dropped
/// user must reach.
pub fn tempdir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("sst")
        .tempdir()
        .expect("tempdir");
    set_mode(d.path(), 0o755);
    d
}

/// Copies the sockstat binary to `path` (mode 755) and returns once it can be executed.
///
/// While the copy is written, another test's thread may fork a child that inherits the
/// writable descriptor until it execs; executing the copy meanwhile fails with ETXTBSY ("Text
/// file busy"). Once one run of the copy has started, no process holds it open for writing
/// (the descriptor was closed before, and children forked with it have exec'd), so later runs
/// cannot fail so.
pub fn copy_sockstat(path: &Path) {
    std::fs::copy(SOCKSTAT, path).expect("copy sockstat");
    set_mode(path, 0o755);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match std::process::Command::new(path).arg("--version").output() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{}: still busy after 10 s",
                    path.display()
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("run the copy {}: {e}", path.display()),
            Ok(_) => return,
        }
    }
}

/// A copy of the binary at `path` carrying the README's file capabilities
/// (`cap_sys_ptrace,cap_dac_read_search+ep`), made once; its path.
pub fn copy_with_file_caps(path: &Path) -> String {
    if !path.exists() {
        copy_sockstat(path);
        let st = std::process::Command::new("setcap")
            .arg("cap_sys_ptrace,cap_dac_read_search+ep")
            .arg(path)
            .status()
            .expect("setcap (libcap2-bin)");
        assert!(st.success(), "setcap failed");
    }
    path.display().to_string()
}

pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

// ---------------------------------------------------------------------------------------------
// Running sockstat

/// What a command did.
#[derive(Debug)]
pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stdout_raw: Vec<u8>,
    pub stderr: String,
    pub what: String,
}

impl Out {
    /// Asserts exit status 0 and no panic; returns self.
    pub fn ok(self) -> Out {
        assert_eq!(self.code, Some(0), "{} failed: {self:#?}", self.what);
        self.no_panic()
    }

    pub fn no_panic(self) -> Out {
        assert!(
            !self.stderr.contains("panicked"),
            "{} panicked: {}",
            self.what,
            self.stderr
        );
        self
    }

    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }

    pub fn json(&self) -> Value {
        let v: Value = serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}):\n{}", self.what, self.stdout));
        validate(&v);
        v
    }

    pub fn table(&self) -> Table {
        parse_table(&self.stdout, true)
    }
}

/// A command line to run: sockstat (or another program), optionally inside a network namespace
/// or under another prefix (setpriv).
pub struct Cmd {
    prefix: Vec<OsString>,
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
}

/// `sockstat ARGS` (NO_COLOR and TERM removed from the environment, so tests start neutral).
pub fn sockstat<S: AsRef<OsStr>>(args: &[S]) -> Cmd {
    Cmd {
        prefix: Vec::new(),
        program: SOCKSTAT.into(),
        args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
        env: vec![("NO_COLOR".into(), None), ("TERM".into(), None)],
    }
}

impl Cmd {
    pub fn program(mut self, p: impl AsRef<OsStr>) -> Cmd {
        self.program = p.as_ref().to_owned();
        self
    }

    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Cmd {
        self.args.push(a.as_ref().to_owned());
        self
    }

    pub fn args<S: AsRef<OsStr>>(mut self, a: &[S]) -> Cmd {
        self.args.extend(a.iter().map(|x| x.as_ref().to_owned()));
        self
    }

    pub fn prefix<S: AsRef<OsStr>>(mut self, p: &[S]) -> Cmd {
        let mut new: Vec<OsString> = p.iter().map(|x| x.as_ref().to_owned()).collect();
        new.append(&mut self.prefix);
        self.prefix = new;
        self
    }

    pub fn netns(self, ns: &Netns) -> Cmd {
        self.prefix(&["ip", "netns", "exec", ns.name.as_str()])
    }

    pub fn env(mut self, k: &str, v: &str) -> Cmd {
        self.env.push((k.into(), Some(v.into())));
        self
    }

    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .prefix
            .iter()
            .chain(std::iter::once(&self.program))
            .chain(self.args.iter())
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if let Some(p) = parts.iter_mut().find(|p| p.as_str() == SOCKSTAT) {
            *p = "sockstat".into();
        }
        parts.join(" ")
    }

    pub fn command(&self) -> Command {
        let mut c = match self.prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&self.program);
                c
            }
            None => Command::new(&self.program),
        };
        c.args(&self.args);
        for (k, v) in &self.env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    /// Runs to completion (with a timeout), capturing everything. A copy of the binary that a
    /// concurrently forked test process still holds open for writing cannot be executed
    /// (ETXTBSY, "Text file busy") until that child execs: such a start is retried.
    pub fn run(self) -> Out {
        for _ in 0..20 {
            let out = self.run_once();
            if out.code != Some(0) && out.stderr.contains("Text file busy") {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            return out;
        }
        self.run_once()
    }

    fn run_once(&self) -> Out {
        let what = self.describe();
        // A binary copied for another user (setpriv tests) cannot be executed while a process
        // forked by a concurrent test still holds the copy open for writing (ETXTBSY, until that
        // child execs): retry briefly.
        let mut tries = 0;
        let child = loop {
            let mut c = self.command();
            c.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            match c.spawn() {
                Ok(child) => break child,
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 40 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("cannot run {what}: {e}"),
            }
        };
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let output = match rx.recv_timeout(COMMAND_TIMEOUT) {
            Ok(o) => o.expect("wait"),
            Err(_) => {
                // SAFETY: kill on the pid of a child we spawned and have not reaped.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                panic!("{what} did not finish within {COMMAND_TIMEOUT:?}");
            }
        };
        Out {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stdout_raw: output.stdout,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            what,
        }
    }

    /// Runs and asserts success.
    pub fn ok(self) -> Out {
        self.run().ok()
    }

    /// Adds `--json`, runs, asserts success, parses and validates against the schema.
    pub fn json(self) -> Value {
        self.arg("--json").ok().json()
    }
}

// ---------------------------------------------------------------------------------------------
// JSON

/// The validator of `doc/<schema>`, compiled once. The listing schema (`sockstat.schema.json`,
/// `$id` `listing-v1.json`) is registered, so the schemas that refer to its definitions (the
/// event and series records) resolve without a network.
fn validator(schema: &'static str) -> &'static jsonschema::Validator {
    static V: OnceLock<std::sync::Mutex<HashMap<&'static str, &'static jsonschema::Validator>>> =
        OnceLock::new();
    let read = |name: &str| -> Value {
        let path = format!("{}/doc/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
    };
    let mut m = V.get_or_init(Default::default).lock().unwrap();
    m.entry(schema).or_insert_with(|| {
        let listing = read("sockstat.schema.json");
        let id = listing["$id"]
            .as_str()
            .expect("the listing schema has an $id")
            .to_string();
        let resource = jsonschema::Resource::from_contents(listing).expect("listing schema");
        let v = jsonschema::options()
            .with_resource(id, resource)
            .build(&read(schema))
            .unwrap_or_else(|e| panic!("doc/{schema} does not compile: {e}"));
        Box::leak(Box::new(v))
    })
}

/// What `doc/<schema>` finds wrong with `v` (empty: it matches).
pub fn schema_errors(schema: &'static str, v: &Value) -> Vec<String> {
    validator(schema)
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

/// Validates JSON against `doc/<schema>` (e.g. `series.schema.json`).
pub fn validate_against(schema: &'static str, v: &Value) {
    let errors = schema_errors(schema, v);
    assert!(
        errors.is_empty(),
        "JSON does not match doc/{schema}:\n{}\n{}",
        errors.join("\n"),
        serde_json::to_string_pretty(v).unwrap_or_default()
    );
}

/// Validates a sockstat JSON document against doc/sockstat.schema.json.
pub fn validate(v: &Value) {
    validate_against("sockstat.schema.json", v);
}

pub fn sockets(v: &Value) -> &Vec<Value> {
    v["sockets"].as_array().expect("sockets array")
}

/// The pids a warning's details name (`pid 123 (uid 0): ...`, one line each).
pub fn detail_pids(w: &Value) -> Vec<u32> {
    w["details"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| {
            d.as_str()?
                .strip_prefix("pid ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

pub fn warnings(v: &Value) -> &Vec<Value> {
    v["warnings"].as_array().expect("warnings array")
}

/// Sockets by id (sockets without id are left out).
pub fn by_id(v: &Value) -> HashMap<u64, &Value> {
    sockets(v)
        .iter()
        .filter_map(|s| Some((s["id"].as_u64()?, s)))
        .collect()
}

/// The set of socket ids in a document.
pub fn ids(v: &Value) -> BTreeSet<u64> {
    sockets(v).iter().filter_map(|s| s["id"].as_u64()).collect()
}

/// The (pid, fd) owners of a socket, in document order.
pub fn owners(s: &Value) -> Vec<(u64, u64)> {
    s["owners"]
        .as_array()
        .expect("owners")
        .iter()
        .map(|o| (o["pid"].as_u64().unwrap(), o["fd"].as_u64().unwrap()))
        .collect()
}

/// The sockets of a document whose local or remote inet port is `port`.
pub fn with_port(v: &Value, port: u16) -> Vec<&Value> {
    let p = Value::from(port);
    sockets(v)
        .iter()
        .filter(|s| s["local"]["port"] == p || s["remote"]["port"] == p)
        .collect()
}

/// `{"address": a, "port": p}`.
pub fn inet(a: &str, p: u16) -> Value {
    serde_json::json!({"address": a, "port": p})
}

/// The JSON form of a holder address (inet or unix local).
pub fn addr_json(a: &Addr) -> Value {
    match (&a.address, a.port, &a.path) {
        (Some(ad), Some(p), _) => inet(ad, p),
        (_, _, Some(path)) => serde_json::json!({ "path": path }),
        _ => serde_json::json!({}),
    }
}

// ---------------------------------------------------------------------------------------------
// Table

/// A parsed table: header titles (when there is a header) and rows of cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn col(&self, title: &str) -> usize {
        self.header
            .iter()
            .position(|h| h == title)
            .unwrap_or_else(|| panic!("no {title} column in {:?}", self.header))
    }

    /// Rows whose `title` column is `value`.
    pub fn rows_where(&self, title: &str, value: &str) -> Vec<&Vec<String>> {
        let c = self.col(title);
        self.rows.iter().filter(|r| r[c] == value).collect()
    }
}

/// Splits a row into cells: whitespace separated, except that `[pid fd]` and `[inode N]` (unix
/// peers) are one cell.
pub fn cells(line: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for tok in line.split_whitespace() {
        if open {
            let last = out.last_mut().unwrap();
            last.push(' ');
            last.push_str(tok);
            open = !tok.contains(']');
        } else {
            out.push(tok.to_string());
            open = tok.starts_with('[') && !tok.contains(']');
        }
    }
    out
}

/// Parses a table; `header` says whether its first line is the header.
pub fn parse_table(text: &str, header: bool) -> Table {
    let mut lines = text.lines();
    let header = if header {
        let h = lines
            .next()
            .unwrap_or_else(|| panic!("no header in {text:?}"));
        let mut titles = Vec::new();
        let toks: Vec<&str> = h.split_whitespace().collect();
        let mut i = 0;
        while i < toks.len() {
            if toks[i] == "LOCAL" || toks[i] == "FOREIGN" {
                titles.push(format!("{} {}", toks[i], toks[i + 1]));
                i += 2;
            } else {
                titles.push(toks[i].to_string());
                i += 1;
            }
        }
        titles
    } else {
        Vec::new()
    };
    Table {
        header,
        rows: lines.map(cells).collect(),
    }
}

/// The table spelling of a holder address: `127.0.0.1:80`, `[::1]:80`, a unix path, `*`.
pub fn addr_cell(a: Option<&Addr>) -> String {
    match a {
        None => "*:*".into(),
        Some(a) => match (&a.address, a.port, &a.path) {
            (Some(ad), Some(p), _) => {
                let ip: std::net::IpAddr = ad.parse().unwrap();
                let host = if ip.is_unspecified() {
                    "*".to_string()
                } else if ip.is_ipv6() {
                    format!("[{ad}]")
                } else {
                    ad.clone()
                };
                let port = if p == 0 { "*".into() } else { p.to_string() };
                format!("{host}:{port}")
            }
            (_, _, Some(p)) => p.clone(),
            _ => "*".into(),
        },
    }
}

/// One expected table row.
pub fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// Holders

/// A running sockholder. Dropping it closes its stdin (it exits), then kills and reaps it.
pub struct Holder {
    child: Child,
    pub report: Report,
    /// Its working directory (where `file-named-like-socket` files go), when the holder made it.
    _dir: Option<tempfile::TempDir>,
}

/// How to start a holder.
#[derive(Default)]
pub struct HolderOpts<'a> {
    pub netns: Option<&'a Netns>,
    pub cwd: Option<&'a Path>,
}

impl Holder {
    /// Starts a holder in the current namespace, in a fresh working directory.
    pub fn spawn<S: AsRef<OsStr>>(specs: &[S]) -> Holder {
        Holder::spawn_with(HolderOpts::default(), specs)
    }

    /// Starts a holder inside a network namespace.
    pub fn spawn_in<S: AsRef<OsStr>>(ns: &Netns, specs: &[S]) -> Holder {
        Holder::spawn_with(
            HolderOpts {
                netns: Some(ns),
                ..Default::default()
            },
            specs,
        )
    }

    pub fn spawn_with<S: AsRef<OsStr>>(opts: HolderOpts<'_>, specs: &[S]) -> Holder {
        let exe = std::env::current_exe().expect("current_exe");
        let mut c = match opts.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns.name.as_str()]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let dir = match opts.cwd {
            Some(_) => None,
            None => Some(tempdir()),
        };
        let cwd: PathBuf = opts
            .cwd
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.as_ref().unwrap().path().to_path_buf());
        c.args(specs)
            .env(sockstat_testkit::HOLDER_ENV, "1")
            .current_dir(&cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn holder");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
        let report: Report = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let mut err = String::new();
                let _ = stderr.read_to_string(&mut err);
                let specs: Vec<String> = specs
                    .iter()
                    .map(|s| s.as_ref().to_string_lossy().into_owned())
                    .collect();
                panic!("holder {specs:?} failed: stdout {line:?}, stderr {err:?}");
            }
        };
        Holder {
            child,
            report,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.report.pid
    }

    pub fn child_pid(&self) -> u32 {
        self.report.child_pid.expect("the holder forked")
    }

    /// `--pid` value for the holder (and its forked child, if any).
    pub fn pids(&self) -> String {
        match self.report.child_pid {
            Some(c) => format!("{},{}", self.pid(), c),
            None => self.pid().to_string(),
        }
    }

    /// Every inode the holder (or its child) holds an fd for.
    pub fn inodes(&self) -> BTreeSet<u64> {
        self.report
            .items
            .iter()
            .flat_map(|i| i.socks.iter().filter_map(|s| s.inode))
            .collect()
    }

    pub fn item(&self, i: usize) -> &Item {
        self.report.item(i)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Network namespaces

/// A network namespace made for one test (`ip netns add sockstat-t-<pid>-<n>`, `lo` up); deleted
/// on drop, also when the test panics.
pub struct Netns {
    pub name: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    pub fn new() -> Netns {
        let ns = Netns {
            name: unique("sockstat-t"),
        };
        ip(&["netns", "add", &ns.name]);
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Adds an address to `lo` (e.g. `192.0.2.1/32`, `2001:db8::1/128`).
    pub fn add_addr(&self, cidr: &str) {
        if cidr.contains(':') {
            // No duplicate address detection: usable at once, not "tentative".
            ip(&["-n", &self.name, "addr", "add", cidr, "dev", "lo", "nodad"]);
        } else {
            ip(&["-n", &self.name, "addr", "add", cidr, "dev", "lo"]);
        }
    }

    /// Lets every group make ping sockets in the namespace (`net.ipv4.ping_group_range`, per
    /// namespace; the default "1 0" lets none).
    pub fn allow_ping(&self) {
        let out = self.exec(
            "sysctl",
            &["-q", "-w", "net.ipv4.ping_group_range=0 2147483647"],
        );
        assert_eq!(out.code, Some(0), "{out:#?}");
    }

    /// Runs a program inside the namespace.
    pub fn exec<S: AsRef<OsStr>>(&self, program: &str, args: &[S]) -> Out {
        Cmd {
            prefix: vec![
                "ip".into(),
                "netns".into(),
                "exec".into(),
                self.name.clone().into(),
            ],
            program: program.into(),
            args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
            env: Vec::new(),
        }
        .run()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

// ---------------------------------------------------------------------------------------------
// Terminals

/// A pseudo-terminal: (master, slave).
pub fn open_pty() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: plain libc pty calls; every fd is checked and owned right away.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(m >= 0, "posix_openpt");
        let master = OwnedFd::from_raw_fd(m);
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let s = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(s >= 0, "open pty slave");
        (master, OwnedFd::from_raw_fd(s))
    }
}

/// Everything written on the terminal of `master` until every writer closed it.
fn read_pty(master: std::os::fd::OwnedFd) -> Vec<u8> {
    let mut f = std::fs::File::from(master);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match f.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => break, // EIO once the slave side is closed
        }
    }
    buf
}

/// Runs a command with its stdout on a pseudo-terminal; returns what it wrote there and its
/// exit status.
pub fn run_on_pty(cmd: Cmd) -> (Option<i32>, Vec<u8>) {
    let (master, slave) = open_pty();
    let mut c = cmd.command();
    c.stdin(Stdio::null())
        .stdout(Stdio::from(slave))
        .stderr(Stdio::null());
    let mut child = c.spawn().expect("spawn on pty");
    drop(c); // closes our copy of the slave
    let buf = read_pty(master);
    let status = child.wait().expect("wait");
    (status.code(), buf)
}

/// Runs a command with its standard error on a pseudo-terminal (as in an interactive shell)
/// and its standard output piped (as in `sockstat ... > file`); returns its exit status, its
/// standard output and what it wrote on the terminal.
pub fn run_with_stderr_on_pty(cmd: Cmd) -> (Option<i32>, String, String) {
    let (master, slave) = open_pty();
    let mut c = cmd.command();
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave));
    let mut child = c.spawn().expect("spawn with stderr on a pty");
    drop(c); // closes our copy of the slave
    let mut stdout = child.stdout.take().expect("stdout");
    let out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let tty = read_pty(master);
    let status = child.wait().expect("wait");
    let out = out.join().expect("stdout reader");
    (
        status.code(),
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&tty).into_owned(),
    )
}

/// This process's effective uid and user name.
pub fn me() -> (u32, String) {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let out = Command::new("id").arg("-un").output().expect("id -un");
    (uid, String::from_utf8_lossy(&out.stdout).trim().to_string())
}
