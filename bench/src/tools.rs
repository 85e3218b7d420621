//! The tools under test, how to run them, and how to check what they print.

use crate::check::Scope;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Port of the generator's first TCP listeners (`127.0.0.1:2000` and `[::1]:2000`).
pub const PROBE_PORT: u16 = 2000;
/// A generator worker's pid in its pid namespace (the coordinator is pid 6, its workers follow):
/// the `--pid` query.
pub const PROBE_PID: u32 = 10;
/// One of the generator's loopback addresses: the `--src`/`--dst` queries.
pub const PROBE_ADDR: &str = "127.0.0.3";
/// Where the exporter listens inside the benchmark namespace.
pub const SERVE_ADDR: &str = "127.0.0.1:19277";

/// The filtered queries, each beside the `ss` query that selects the same sockets without
/// process mapping: (sockstat tool id, ss tool id, what is asked). `ss` ids may be absent.
pub const FILTERED: &[(&str, &str, &str)] = &[
    ("sockstat-l", "ss-ln", "listening sockets"),
    ("sockstat-l46", "ss-tuln", "listening inet sockets"),
    ("sockstat-p46", "ss-port", "one port, inet"),
    ("sockstat-src", "ss-src", "one local address"),
    ("sockstat-dst", "ss-dst", "one remote address"),
    ("sockstat-tw", "ss-tw", "one state (TIME-WAIT)"),
    ("sockstat-pid", "", "one process (--pid)"),
    ("sockstat-cmd", "", "a command that matches nothing"),
    (
        "sockstat-summary",
        "ss-an",
        "counts only (ss: every socket, no owners)",
    ),
    (
        "sockstat-46",
        "ss-tuan",
        "every inet socket (ss: no owners)",
    ),
    (
        "sockstat-T",
        "ss-tin",
        "TCP connections with internals (ss: no owners)",
    ),
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Parser {
    Ss,
    Netstat,
    Lsof,
    Psutil,
    DebSockstat,
    SockstatJson,
    SockstatTable,
    Floor,
}

pub struct CheckSpec {
    pub argv: Vec<String>,
    pub parser: Parser,
    pub scope: Scope,
    pub owners: bool,
    /// a mismatch is a failure of the kit or of sockstat (not a peer's known limitation)
    pub required: bool,
}

pub struct Tool {
    pub id: &'static str,
    pub label: String,
    pub argv: Vec<String>,
    pub check: Option<CheckSpec>,
}

impl Tool {
    /// The command as timed: `sh -c 'exec TOOL >/dev/null 2>&1'` (as in
    /// doc/reference/baseline-study.md#method).
    pub fn shell(&self) -> String {
        format!("exec {} >/dev/null 2>&1", self.argv.join(" "))
    }
}

#[derive(Clone, Default)]
pub struct Env {
    pub sockgen: PathBuf,
    pub sockfloor: PathBuf,
    pub sockstat: Option<PathBuf>,
    pub python: Option<PathBuf>,
    pub scripts: PathBuf,
    pub ss: bool,
    pub netstat: bool,
    pub lsof: bool,
    pub debsockstat: bool,
    /// `python` imports the sockstat package too: the Python call rows (crate::pycall).
    pub pycall: bool,
}

const PSUTIL_CALL: &str = "import psutil\npsutil.net_connections('all')\n";
const PSUTIL_PRINT: &str = "import psutil, socket\n\
out = []\n\
for c in psutil.net_connections('all'):\n\
\x20   lp = c.laddr.port if c.laddr and not isinstance(c.laddr, str) else 0\n\
\x20   rp = c.raddr.port if c.raddr and not isinstance(c.raddr, str) else 0\n\
\x20   out.append('%d\\t%d\\t%d\\t%d\\t%s\\t%s' % (int(c.family), int(c.type), lp, rp, c.status, '' if c.pid is None else c.pid))\n\
print('\\n'.join(out))\n";

impl Env {
    pub fn detect(sockstat: Option<PathBuf>, scripts: &Path, python: Option<&Path>) -> Env {
        let exe = std::env::current_exe().expect("current_exe");
        let bin = exe.parent().unwrap().to_path_buf();
        let scripts = scripts.to_path_buf();
        let _ = std::fs::create_dir_all(&scripts);
        let _ = std::fs::write(scripts.join("psutil_call.py"), PSUTIL_CALL);
        let _ = std::fs::write(scripts.join("psutil_print.py"), PSUTIL_PRINT);
        // the real interpreter (a pyenv shim would add its own start-up to every run)
        let python = Command::new(python.unwrap_or(Path::new("python3")))
            .args(["-c", "import sys, psutil; print(sys.executable)"])
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
        if python.is_none() {
            eprintln!("sockbench: python3 with psutil not found (pip install psutil): psutil rows skipped");
        }
        let pycall = python.as_deref().is_some_and(crate::pycall::available);
        if python.is_some() && !pycall {
            eprintln!("sockbench: this python cannot import the sockstat package (pip install ./python): Python call rows skipped");
        }
        let debsockstat = Path::new("/usr/bin/sockstat").is_file();
        if !debsockstat {
            eprintln!("sockbench: /usr/bin/sockstat (Debian package sockstat) not found: its rows skipped");
        }
        Env {
            sockgen: bin.join("sockgen"),
            sockfloor: bin.join("sockfloor"),
            sockstat,
            python,
            scripts,
            ss: crate::which("ss").is_some(),
            netstat: crate::which("netstat").is_some(),
            lsof: crate::which("lsof").is_some(),
            debsockstat,
            pycall,
        }
    }

    /// An environment with every tool present, for their labels only.
    pub fn default_labels() -> Env {
        Env {
            sockstat: Some(PathBuf::from("sockstat")),
            ss: true,
            ..Env::default()
        }
    }

    pub fn to_arg(&self) -> String {
        let p = |x: &Option<PathBuf>| x.as_ref().map(|x| x.display().to_string());
        json!({
            "sockgen": self.sockgen.display().to_string(),
            "sockfloor": self.sockfloor.display().to_string(),
            "sockstat": p(&self.sockstat),
            "python": p(&self.python),
            "scripts": self.scripts.display().to_string(),
            "ss": self.ss, "netstat": self.netstat, "lsof": self.lsof, "debsockstat": self.debsockstat,
            "pycall": self.pycall,
        })
        .to_string()
    }

    pub fn from_arg(s: &str) -> Env {
        let v: Value = serde_json::from_str(s).expect("env json");
        let p = |k: &str| v.get(k).and_then(Value::as_str).map(PathBuf::from);
        let b = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        Env {
            sockgen: p("sockgen").unwrap(),
            sockfloor: p("sockfloor").unwrap(),
            sockstat: p("sockstat"),
            python: p("python"),
            scripts: p("scripts").unwrap(),
            ss: b("ss"),
            netstat: b("netstat"),
            lsof: b("lsof"),
            debsockstat: b("debsockstat"),
            pycall: b("pycall"),
        }
    }
}

/// True if `path --json` prints a schema-1 document.
pub fn sockstat_works(path: &Path) -> bool {
    let Ok(o) = Command::new(path)
        .arg("--json")
        .stderr(Stdio::null())
        .output()
    else {
        return false;
    };
    let v: Option<Value> = serde_json::from_slice(&o.stdout).ok();
    o.status.success() && v.and_then(|v| v.get("version").and_then(Value::as_u64)) == Some(1)
}

fn sv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

pub fn all_tools(env: &Env) -> Vec<Tool> {
    let mut t = Vec::new();
    let spec = |argv: Vec<String>, parser, scope, owners, required| {
        Some(CheckSpec {
            argv,
            parser,
            scope,
            owners,
            required,
        })
    };
    if let Some(s) = &env.sockstat {
        let s = s.display().to_string();
        let port = PROBE_PORT.to_string();
        let with = |extra: &[&str]| {
            let mut v = vec![s.clone()];
            v.extend(extra.iter().map(|x| x.to_string()));
            v
        };
        t.push(Tool {
            id: "sockstat",
            label: "`sockstat` (this project)".into(),
            argv: with(&[]),
            check: spec(with(&[]), Parser::SockstatTable, Scope::Full, true, true),
        });
        t.push(Tool {
            id: "sockstat-46",
            label: "`sockstat -4 -6`".into(),
            argv: with(&["-4", "-6"]),
            check: spec(
                with(&["-4", "-6", "--json"]),
                Parser::SockstatJson,
                Scope::InetAll,
                true,
                true,
            ),
        });
        t.push(Tool {
            id: "sockstat-l",
            label: "`sockstat -l`".into(),
            argv: with(&["-l"]),
            check: spec(
                with(&["-l", "--json"]),
                Parser::SockstatJson,
                Scope::Listen,
                false,
                true,
            ),
        });
        t.push(Tool {
            id: "sockstat-p",
            label: format!("`sockstat -p {PROBE_PORT}`"),
            argv: with(&["-p", &port]),
            check: spec(
                with(&["-p", &port, "--json"]),
                Parser::SockstatJson,
                Scope::Probe,
                false,
                true,
            ),
        });
        t.push(Tool {
            id: "sockstat-json",
            label: "`sockstat --json`".into(),
            argv: with(&["--json"]),
            check: spec(
                with(&["--json"]),
                Parser::SockstatJson,
                Scope::Full,
                true,
                true,
            ),
        });
        // The same two listings with the /proc owner scan, for comparison with the default
        // (the BPF iterator as root).
        t.push(Tool {
            id: "sockstat-proc",
            label: "`sockstat --owner-scan proc`".into(),
            argv: with(&["--owner-scan", "proc"]),
            check: spec(
                with(&["--owner-scan", "proc"]),
                Parser::SockstatTable,
                Scope::Full,
                true,
                true,
            ),
        });
        t.push(Tool {
            id: "sockstat-46-proc",
            label: "`sockstat -4 -6 --owner-scan proc`".into(),
            argv: with(&["-4", "-6", "--owner-scan", "proc"]),
            check: spec(
                with(&["-4", "-6", "--owner-scan", "proc", "--json"]),
                Parser::SockstatJson,
                Scope::InetAll,
                true,
                true,
            ),
        });
        t.push(Tool {
            id: "sockstat-noowners",
            label: "`sockstat --no-owners`".into(),
            argv: with(&["--no-owners"]),
            check: spec(
                with(&["--no-owners", "--json"]),
                Parser::SockstatJson,
                Scope::Full,
                false,
                true,
            ),
        });
    }
    if let Some(s) = &env.sockstat {
        // The filtered queries (doc/reference/BENCHMARKS.md, "Filtered queries"), timed, not checked.
        let s = s.display().to_string();
        let port = PROBE_PORT.to_string();
        let pid = PROBE_PID.to_string();
        let q = |id: &'static str, extra: &[&str]| {
            let mut argv = vec![s.clone()];
            argv.extend(extra.iter().map(|x| x.to_string()));
            Tool {
                id,
                label: format!("`sockstat {}`", extra.join(" ")),
                argv,
                check: None,
            }
        };
        t.push(q("sockstat-l46", &["-l", "-4", "-6"]));
        t.push(q("sockstat-p46", &["-p", &port, "-4", "-6"]));
        t.push(q("sockstat-src", &["--src", PROBE_ADDR]));
        t.push(q("sockstat-dst", &["--dst", PROBE_ADDR]));
        t.push(q("sockstat-tw", &["--state", "time-wait"]));
        t.push(q("sockstat-pid", &["--pid", &pid]));
        t.push(q("sockstat-cmd", &["--command", "nomatch"]));
        t.push(q("sockstat-summary", &["--summary"]));
        t.push(q("sockstat-T", &["-T", "-c", "-4", "-6"]));
        t.push(Tool {
            id: "sockstat-version",
            label: "`sockstat --version` (process start)".into(),
            argv: vec![s.clone(), "--version".into()],
            check: None,
        });
        t.push(Tool {
            id: "serve-scrape",
            label: format!(
                "`sockstat serve` scrape (`curl http://{SERVE_ADDR}/metrics`, curl's start included)"
            ),
            argv: vec![
                "curl".into(),
                "-sf".into(),
                "-o".into(),
                "/dev/null".into(),
                format!("http://{SERVE_ADDR}/metrics"),
            ],
            check: None,
        });
    }
    if env.ss {
        let ss = |id: &'static str, args: &[&str]| Tool {
            id,
            label: format!("`ss {}`", args.join(" ")),
            argv: std::iter::once("ss".to_string())
                .chain(args.iter().map(|a| {
                    if a.contains(' ') {
                        format!("\"{a}\"")
                    } else {
                        a.to_string()
                    }
                }))
                .collect(),
            check: None,
        };
        let port = PROBE_PORT.to_string();
        t.push(ss("ss-ln", &["-ln"]));
        t.push(ss("ss-tuln", &["-tuln"]));
        t.push(ss(
            "ss-port",
            &["-tuan", &format!("sport = :{port} or dport = :{port}")],
        ));
        t.push(ss("ss-src", &["-tuan", "src", PROBE_ADDR]));
        t.push(ss("ss-dst", &["-tuan", "dst", PROBE_ADDR]));
        t.push(ss("ss-tw", &["-tan", "state", "time-wait"]));
        t.push(ss("ss-an", &["-an"]));
        t.push(ss("ss-tin", &["-tin"]));
        t.push(ss("ss-tinp", &["-tinp"]));
        t.push(Tool {
            id: "ss-tuanp",
            label: "`ss -tuanp`".into(),
            argv: sv(&["ss", "-tuanp"]),
            check: spec(
                sv(&["ss", "-tuanp"]),
                Parser::Ss,
                Scope::InetAll,
                true,
                true,
            ),
        });
        t.push(Tool {
            id: "ss-tuan",
            label: "`ss -tuan` (no process mapping)".into(),
            argv: sv(&["ss", "-tuan"]),
            check: spec(
                sv(&["ss", "-tuan"]),
                Parser::Ss,
                Scope::InetAll,
                false,
                true,
            ),
        });
    }
    if env.netstat {
        t.push(Tool {
            id: "netstat",
            label: "`netstat -tuanp`".into(),
            argv: sv(&["netstat", "-tuanp"]),
            check: spec(
                sv(&["netstat", "-tuanp"]),
                Parser::Netstat,
                Scope::InetAll,
                true,
                false,
            ),
        });
    }
    if env.lsof {
        t.push(Tool {
            id: "lsof",
            label: "`lsof -nP -i`".into(),
            argv: sv(&["lsof", "-nP", "-i"]),
            check: spec(
                sv(&["lsof", "-nP", "-i"]),
                Parser::Lsof,
                Scope::InetFds,
                true,
                false,
            ),
        });
    }
    if let Some(py) = &env.python {
        let py = py.display().to_string();
        let call = env.scripts.join("psutil_call.py").display().to_string();
        let print = env.scripts.join("psutil_print.py").display().to_string();
        t.push(Tool {
            id: "psutil",
            label: "psutil `net_connections('all')`, call only".into(),
            argv: vec![py.clone(), call],
            check: spec(vec![py, print], Parser::Psutil, Scope::Full, true, false),
        });
    }
    if env.debsockstat {
        t.push(Tool {
            id: "debsockstat",
            label: "Debian `sockstat` (inet only)".into(),
            argv: sv(&["/usr/bin/sockstat"]),
            check: spec(
                sv(&["/usr/bin/sockstat"]),
                Parser::DebSockstat,
                Scope::InetFds,
                true,
                false,
            ),
        });
        t.push(Tool {
            id: "debsockstat-u",
            label: "Debian `sockstat -u` (inet + unix)".into(),
            argv: sv(&["/usr/bin/sockstat", "-u"]),
            check: spec(
                sv(&["/usr/bin/sockstat", "-u"]),
                Parser::DebSockstat,
                Scope::FdsAllUnixTotal,
                true,
                false,
            ),
        });
    }
    let f = env.sockfloor.display().to_string();
    let floor = |mode: &str| vec![f.clone(), mode.to_string()];
    t.push(Tool {
        id: "floor-a",
        label: "**floor (a)**: sock_diag dump tcp4+tcp6+udp4+udp6+unix, count records".into(),
        argv: floor("dump"),
        check: spec(floor("dump"), Parser::Floor, Scope::Full, false, true),
    });
    t.push(Tool {
        id: "floor-b",
        label: "**floor (b)**: /proc/*/fd scan, 1 thread → inode→pid map".into(),
        argv: floor("scan"),
        check: spec(floor("scan"), Parser::Floor, Scope::Full, false, true),
    });
    t.push(Tool {
        id: "floor-c",
        label: "**floor (c)**: (a)+(b)+join, 1 thread".into(),
        argv: floor("join"),
        check: spec(floor("join"), Parser::Floor, Scope::Full, false, true),
    });
    t.push(Tool {
        id: "floor-d",
        label: "**floor (d)**: scan on 2 threads, dump concurrently, join".into(),
        argv: floor("par"),
        check: spec(floor("par"), Parser::Floor, Scope::Full, false, true),
    });
    t.push(Tool {
        id: "wrapper",
        label: "`sh -c 'exec true'` (wrapper cost, included above)".into(),
        argv: sv(&["true"]),
        check: None,
    });
    t
}
