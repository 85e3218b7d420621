//! `sockstat diagnose` against real sockets, for what the scenario matrix
//! (`diagnose_matrix.rs`) does not check: running as `nobody` (uid 65534), where owners of
//! other users' processes are hidden and buffer locks are inferred; the exact locks read as
//! root (`--exact-locks`); naming the process that does not read; the global `tcp_mem`; a SYN
//! for a server's TIME-WAIT tuple sent from a raw socket; a 5% lossy path; the seed's
//! loopback negatives; and `sockstat trace`'s picture of a send-buffer plateau.
//!
//! The traffic is `sockstat-netlab`'s (blocking writers, as applications write), over its TUN
//! delay line. Needs root (namespaces, TUN, tc): otherwise every test prints a SKIPPED line and
//! passes. The cases run one at a time (one lock). No check is retried: a rule that holds only
//! on a quiet machine is a defect (doc/diagnose.md, Calibration).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::diagnose_support::*;
use serde_json::Value;
use sockstat_netlab::sock::{Cc, Opts};
use sockstat_netlab::workload::{self as wl, BulkSpec};
use sockstat_netlab::{is_root, Netns, Path, PathSpec};

/// One at a time: these tests and the matrix's (`diagnose_matrix.rs`) measure throughput, and
/// `memory_pressure` sets `net.ipv4.tcp_mem`, which is global: every TCP socket on the host,
/// in every namespace, feels the pressure it creates (receive windows shrink to a few KiB).
pub(crate) static LOCK: Mutex<()> = Mutex::new(());

pub(crate) fn lab(name: &str) -> Option<MutexGuard<'static, ()>> {
    if !is_root() {
        eprintln!("SKIPPED {name}: needs root (network namespaces, TUN devices, tc)");
        return None;
    }
    Some(LOCK.lock().unwrap_or_else(|e| e.into_inner()))
}

// ---------------------------------------------------------------------------------------------
// Running sockstat, as root and as nobody

#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    Root,
    Nobody,
}

const BOTH: [Who; 2] = [Who::Root, Who::Nobody];

/// A copy of the binary that uid 65534 can run (the build tree may not be reachable).
fn nobody_bin() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        // One fixed place, replaced atomically by each run, so runs do not pile up copies.
        let dir = std::env::temp_dir().join("sockstat-diagnose-live");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let tmp = dir.join(format!("sockstat.{}", std::process::id()));
        std::fs::copy(BIN, &tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = dir.join("sockstat");
        std::fs::rename(&tmp, &p).unwrap();
        p
    })
}

/// Runs a command; a binary copy that a concurrently forked test process still holds open for
/// writing cannot be executed (ETXTBSY, "Text file busy") until that child execs: retry then.
fn output_retrying_etxtbsy(make: impl Fn() -> Command) -> std::process::Output {
    for _ in 0..20 {
        let out = make().output().expect("run sockstat");
        if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("Text file busy")
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        }
        return out;
    }
    make().output().expect("run sockstat")
}

/// `sockstat diagnose --json ARGS` in `ns` (None: this process's namespace) as `who`.
fn diagnose_cmd_in(ns: Option<&Netns>, who: Who, args: &[&str]) -> Command {
    let cmd = |program: &str| match ns {
        Some(ns) => ns.command(program),
        None => Command::new(program),
    };
    let mut c = match who {
        Who::Root => cmd(BIN),
        Who::Nobody => {
            let mut c = cmd("setpriv");
            c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"]);
            c.arg(nobody_bin());
            c
        }
    };
    c.args(["diagnose", "--json"]).args(args);
    c
}

fn diagnose_cmd(ns: &Netns, who: Who, args: &[&str]) -> Command {
    diagnose_cmd_in(Some(ns), who, args)
}

/// Runs `sockstat diagnose --json ARGS` in the namespace; validates the document.
fn diagnose(ns: &Netns, who: Who, args: &[&str]) -> Value {
    let out = output_retrying_etxtbsy(|| diagnose_cmd(ns, who, args));
    let v = parse(&out);
    eprintln!(
        "{who:?} {}: {}",
        ns.name,
        serde_json::to_string(&v["findings"]).unwrap()
    );
    v
}

/// The findings of `rule` about a connection with port `port` at either end.
fn on_port<'a>(v: &'a Value, rule: &str, port: u16) -> Vec<&'a Value> {
    findings(v, rule)
        .into_iter()
        .filter(|f| {
            let s = &f["socket"];
            s["local"]["port"] == port || s["remote"]["port"] == port
        })
        .collect()
}

fn num(f: &Value, k: &str) -> f64 {
    f["evidence"][k]
        .as_f64()
        .unwrap_or_else(|| panic!("no {k} in {f:#}"))
}

/// Runs `check` once and fails with its message (no retry: the rules must hold on a busy
/// machine).
fn check(what: &str, check: impl FnOnce() -> Result<(), String>) {
    if let Err(e) = check() {
        panic!("{what}: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Sockets

fn sockaddr(addr: &str, port: u16) -> libc::sockaddr_in {
    let ip: Ipv4Addr = addr.parse().unwrap();
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn setopt(fd: i32, level: i32, name: i32, v: i32) {
    // SAFETY: a valid fd and an int option.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as u32,
        )
    };
    assert_eq!(
        r,
        0,
        "setsockopt {name}: {}",
        std::io::Error::last_os_error()
    );
}

fn tcp_socket() -> i32 {
    // SAFETY: plain socket creation.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    fd
}

/// A listener; `rcvbuf` is set before listen() (as in the seed's 8 KiB case).
fn listen(addr: &str, port: u16, backlog: i32, rcvbuf: Option<i32>) -> TcpListener {
    let fd = tcp_socket();
    setopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
    if let Some(b) = rcvbuf {
        setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b);
    }
    let sa = sockaddr(addr, port);
    // SAFETY: a valid sockaddr_in.
    let r = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    assert_eq!(
        r,
        0,
        "bind {addr}:{port}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a bound socket.
    assert_eq!(unsafe { libc::listen(fd, backlog) }, 0);
    // SAFETY: fd is ours.
    unsafe { TcpListener::from_raw_fd(fd) }
}

/// A client; `sndbuf`/`rcvbuf` set before connect().
fn connect(addr: &str, port: u16, sndbuf: Option<i32>, rcvbuf: Option<i32>) -> TcpStream {
    let fd = tcp_socket();
    if let Some(b) = sndbuf {
        setopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, b);
    }
    if let Some(b) = rcvbuf {
        setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b);
    }
    let sa = sockaddr(addr, port);
    // SAFETY: a valid sockaddr_in.
    let r = unsafe {
        libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    assert_eq!(
        r,
        0,
        "connect {addr}:{port}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: fd is ours.
    unsafe { TcpStream::from_raw_fd(fd) }
}

/// A bulk transfer from `client_ns` to a server in `server_ns` (netlab's: blocking 16 KiB
/// writes with TCP_NODELAY, as a database server writes); stopped on drop; bounded to 60 s.
pub(crate) struct Bulk(wl::Bulk);

#[derive(Clone, Copy, Default)]
pub(crate) struct BulkOpts {
    pub(crate) client_sndbuf: Option<i32>,
    pub(crate) server_rcvbuf: Option<i32>,
}

impl Bulk {
    pub(crate) fn start(
        client_ns: &Netns,
        server_ns: &Netns,
        addr: &str,
        port: u16,
        o: BulkOpts,
    ) -> Bulk {
        let mut spec = BulkSpec::new(port, Cc::Bbr);
        spec.client = Opts {
            sndbuf: o.client_sndbuf,
            nodelay: true,
            ..Opts::cc(Cc::Bbr)
        };
        spec.server.rcvbuf = o.server_rcvbuf;
        spec.write_size = 16 * 1024;
        Bulk(
            wl::Bulk::start(client_ns, server_ns, addr, spec, Duration::from_secs(60))
                .expect("start the transfer"),
        )
    }

    /// Bytes the server read so far.
    fn received(&self) -> u64 {
        self.0.received.load(Ordering::Relaxed)
    }

    /// Bytes the server read while `f` ran, per second, and what `f` returned.
    fn measure<T>(&self, f: impl FnOnce() -> T) -> (f64, T) {
        let (b0, t0) = (self.received(), Instant::now());
        let v = f();
        (
            (self.received() - b0) as f64 / t0.elapsed().as_secs_f64(),
            v,
        )
    }
}

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The 20 ms, 20 Mbit/s path of doc/reference/calibration.md#experiments (scaled down from 100 Mbit/s to
/// spare the CPU).
pub(crate) fn wan(tag: &str, seed: u8, loss: f64, rate_bits: u64) -> Path {
    Path::new(
        tag,
        seed,
        PathSpec {
            one_way: ms(10),
            loss_ab: loss,
            rate_bits,
            queue: ms(400),
        },
    )
    .expect("build the namespaces and the path")
}

pub(crate) const RATE: u64 = 20_000_000;
const RATE_BYTES: f64 = RATE as f64 / 8.0;

// ---------------------------------------------------------------------------------------------
// Case 001 cases

/// Experiment B: SO_SNDBUF 16 KiB at 20 ms.
#[test]
fn send_buffer_limited() {
    let Some(_g) = lab("send_buffer_limited") else {
        return;
    };
    let p = wan("dsb", 1, 0.0, RATE);
    let bulk = Bulk::start(
        &p.a,
        &p.b,
        &p.addr_b,
        5001,
        BulkOpts {
            client_sndbuf: Some(16384),
            ..BulkOpts::default()
        },
    );
    std::thread::sleep(ms(1500));
    for who in BOTH {
        check(&format!("send-buffer-limited as {who:?}"), || {
            let (goodput, v) = bulk.measure(|| {
                diagnose(
                    &p.a,
                    who,
                    &["-p", "5001", "--bandwidth", "20mbit", "--interval", "1"],
                )
            });
            let f = on_port(&v, "send-buffer-limited", 5001);
            let f = f.first().ok_or(format!("no finding: {v:#}"))?;
            let ceiling = num(f, "ceiling_bytes_per_sec");
            let rtt = num(f, "min_rtt_us") / 1e6;
            let bdp = RATE_BYTES * rtt;
            // What the flow achieves against the ceiling the limit implies (the matrix's
            // bound flows: 0.62-1.37 of it).
            if !(0.5..=1.5).contains(&(goodput / ceiling)) {
                return Err(format!("ceiling {ceiling} vs measured goodput {goodput}"));
            }
            let claimed = num(f, "goodput_bytes_per_sec");
            if (claimed - goodput).abs() > 0.25 * goodput {
                return Err(format!("claimed goodput {claimed} vs measured {goodput}"));
            }
            assert!(num(f, "advised_sndbuf_bytes") >= bdp, "{f:#}");
            assert_eq!(num(f, "sndbuf_bytes"), 32768.0);
            assert_eq!(f["evidence"]["cause"], "set-by-application");
            assert!(f["advice"]
                .as_str()
                .unwrap()
                .contains("setsockopt(SO_SNDBUF)"));
            if who == Who::Root {
                let pid = std::process::id();
                assert!(
                    f["socket"]["owners"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|o| o["pid"] == pid),
                    "root names the holder: {f:#}"
                );
            }
            Ok(())
        });
    }
    // Exactly, as root (pidfd_getfd + SO_BUF_LOCK); as nobody the flag only warns.
    let v = diagnose(
        &p.a,
        Who::Root,
        &["-p", "5001", "--exact-locks", "--interval", "1"],
    );
    let f = on_port(&v, "send-buffer-limited", 5001);
    assert_eq!(f.len(), 1, "{v:#}");
    assert_eq!(f[0]["evidence"]["lock"], "exact", "{v:#}");
    let v = diagnose(
        &p.a,
        Who::Nobody,
        &["-p", "5001", "--exact-locks", "--interval", "0.5"],
    );
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "exact-locks-need-root"),
        "{v:#}"
    );
}

/// Experiment D: the peer's namespace has tcp_window_scaling=0 (the seed's LVS).
#[test]
fn window_scaling_missing() {
    let Some(_g) = lab("window_scaling_missing") else {
        return;
    };
    let p = wan("dws", 2, 0.0, 2 * RATE);
    p.b.sysctl("net.ipv4.tcp_window_scaling", "0").unwrap();
    let bulk = Bulk::start(&p.a, &p.b, &p.addr_b, 5002, BulkOpts::default());
    std::thread::sleep(ms(1500));
    for who in BOTH {
        check(&format!("window-scaling-missing as {who:?}"), || {
            let (goodput, v) =
                bulk.measure(|| diagnose(&p.a, who, &["-p", "5002", "--interval", "1"]));
            let f = on_port(&v, "window-scaling-missing", 5002);
            let f = f.first().ok_or(format!("no finding: {v:#}"))?;
            assert!(num(f, "snd_wnd_bytes") <= 65535.0);
            assert_eq!(f["evidence"]["wscale_negotiated"], false);
            let ceiling = num(f, "ceiling_bytes_per_sec");
            // What the flow achieves against the ceiling the limit implies (the matrix's
            // bound flows: 0.62-1.37 of it).
            if !(0.5..=1.5).contains(&(goodput / ceiling)) {
                return Err(format!("ceiling {ceiling} vs measured goodput {goodput}"));
            }
            let claimed = num(f, "goodput_bytes_per_sec");
            if (claimed - goodput).abs() > 0.25 * goodput {
                return Err(format!("claimed goodput {claimed} vs measured {goodput}"));
            }
            assert!(f["advice"].as_str().unwrap().contains("middlebox"));
            Ok(())
        });
        // The peer's own namespace: a host finding with no socket.
        let v = diagnose(&p.b, who, &["-p", "5002", "--interval", "0.3"]);
        let host: Vec<_> = findings(&v, "window-scaling-missing")
            .into_iter()
            .filter(|f| f["socket"].is_null())
            .collect();
        assert_eq!(host.len(), 1, "{v:#}");
    }
}

/// Experiment E: the peer's listener set SO_RCVBUF 8 KiB before listen().
#[test]
fn peer_receive_buffer_locked() {
    let Some(_g) = lab("peer_receive_buffer_locked") else {
        return;
    };
    let p = wan("drb", 3, 0.0, RATE);
    let bulk = Bulk::start(
        &p.a,
        &p.b,
        &p.addr_b,
        5003,
        BulkOpts {
            server_rcvbuf: Some(8192),
            ..BulkOpts::default()
        },
    );
    std::thread::sleep(ms(1500));
    for who in BOTH {
        check(&format!("receive-window-limited as {who:?}"), || {
            let (goodput, v) = bulk.measure(|| {
                diagnose(
                    &p.a,
                    who,
                    &["-p", "5003", "--bandwidth", "20mbit", "--interval", "1"],
                )
            });
            let f = on_port(&v, "receive-window-limited", 5003);
            let f = f.first().ok_or(format!("no finding: {v:#}"))?;
            assert_eq!(f["evidence"]["cause"], "peer-receive-buffer-fixed", "{f:#}");
            assert_eq!(num(f, "snd_wscale"), 0.0);
            let ceiling = num(f, "ceiling_bytes_per_sec");
            // What the flow achieves against the ceiling the limit implies (the matrix's
            // bound flows: 0.62-1.37 of it).
            if !(0.5..=1.5).contains(&(goodput / ceiling)) {
                return Err(format!("ceiling {ceiling} vs measured goodput {goodput}"));
            }
            let claimed = num(f, "goodput_bytes_per_sec");
            if (claimed - goodput).abs() > 0.25 * goodput {
                return Err(format!("claimed goodput {claimed} vs measured {goodput}"));
            }
            assert!(num(f, "advised_peer_rcvbuf_bytes") >= RATE_BYTES * num(f, "min_rtt_us") / 1e6);
            Ok(())
        });
        // The receiver's namespace: its own buffer is locked (R4), naming the reader.
        check(&format!("receive-buffer-locked as {who:?}"), || {
            let v = diagnose(
                &p.b,
                who,
                &["-p", "5003", "--bandwidth", "20mbit", "--interval", "1"],
            );
            let f = on_port(&v, "receive-buffer-locked", 5003);
            let f = f.first().ok_or(format!("no finding: {v:#}"))?;
            assert_eq!(num(f, "rcv_wscale"), 0.0);
            assert!(num(f, "expected_rcv_wscale") > 0.0);
            assert_eq!(num(f, "rcvbuf_bytes"), 16384.0);
            Ok(())
        });
    }
}

/// Experiment F: the receiving process never reads; the local reader is named.
#[test]
fn receiver_not_reading() {
    let Some(_g) = lab("receiver_not_reading") else {
        return;
    };
    let ns = Netns::new("dnr").unwrap();
    let listener = ns.run(|| listen("127.0.0.1", 5004, 4, None)).unwrap();
    // The reader: a process of uid 65534 (so nobody's sockstat may name it too) that connects
    // and sleeps, never reading.
    let mut reader = ns
        .command("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "bash",
            "-c",
        ])
        .arg("exec 3<>/dev/tcp/127.0.0.1/5004; echo $$; exec sleep 30")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _kill = KillOnDrop(&mut reader as *mut Child);
    let mut line = String::new();
    // SAFETY: the child outlives this borrow (killed in _kill's drop, after it).
    let child = unsafe { &mut *_kill.0 };
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let reader_pid: u32 = line.trim().parse().unwrap();
    let (mut c, _) = listener.accept().unwrap();
    c.set_nonblocking(true).unwrap();
    let chunk = vec![1u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stalled_since = None;
    while Instant::now() < deadline {
        match c.write(&chunk) {
            Ok(n) if n > 0 => stalled_since = None,
            _ => {
                let t = *stalled_since.get_or_insert_with(Instant::now);
                if t.elapsed() > ms(1500) {
                    break;
                }
                std::thread::sleep(ms(50));
            }
        }
    }
    for who in BOTH {
        let v = diagnose(&ns, who, &["-p", "5004", "--interval", "0.5"]);
        let f = on_port(&v, "receiver-not-reading", 5004);
        let recv_side: Vec<_> = f
            .iter()
            .filter(|f| f["socket"]["local"]["port"] != 5004)
            .collect();
        assert_eq!(recv_side.len(), 1, "{v:#}");
        let owners = recv_side[0]["socket"]["owners"].as_array().unwrap();
        assert!(
            owners.iter().any(|o| o["pid"] == reader_pid),
            "names the reader {reader_pid}: {v:#}"
        );
        assert!(recv_side[0]["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {reader_pid}")));
        let send_side: Vec<_> = f
            .iter()
            .filter(|f| f["socket"]["local"]["port"] == 5004)
            .collect();
        assert_eq!(send_side.len(), 1, "sender sees the zero window: {v:#}");
        assert_eq!(num(send_side[0], "snd_wnd_bytes"), 0.0);
    }
    // The zero window lasted the whole interval: the sender's fix ends with the command that
    // drops that one connection. Run it as printed: the sender's next write fails.
    let v = diagnose(&ns, Who::Root, &["-p", "5004", "--interval", "0.5"]);
    let f = on_port(&v, "receiver-not-reading", 5004);
    let send = f
        .iter()
        .find(|f| f["socket"]["local"]["port"] == 5004)
        .unwrap();
    let advice = send["advice"].as_str().unwrap();
    let cookie = send["socket"]["cookie"].as_str().unwrap();
    let (_, args) = advice
        .rsplit_once(": sockstat kill ")
        .unwrap_or_else(|| panic!("no kill command in {advice:?}"));
    assert_eq!(args, format!("--cookie {cookie}"), "{advice}");
    let out = ns
        .command(BIN)
        .arg("kill")
        .args(args.split(' '))
        .arg("--yes")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("killed 1 socket"),
        "{out:?}"
    );
    let e = c.write(&chunk).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ECONNABORTED), "{e}");
}

struct KillOnDrop(*mut Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: points at a Child that lives longer than this guard.
        let c = unsafe { &mut *self.0 };
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Experiment I: backlog 1, never accepting.
#[test]
fn listen_queue_overflow() {
    let Some(_g) = lab("listen_queue_overflow") else {
        return;
    };
    let ns = Netns::new("dlo").unwrap();
    let listener = ns.run(|| listen("127.0.0.1", 5005, 1, None)).unwrap();
    let clients = ns
        .run(|| {
            (0..4)
                .map(|_| {
                    let fd = tcp_socket();
                    // SAFETY: fd is ours; a non-blocking connect may stay pending.
                    unsafe {
                        libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
                        let sa = sockaddr("127.0.0.1", 5005);
                        libc::connect(
                            fd,
                            (&sa as *const libc::sockaddr_in).cast(),
                            std::mem::size_of::<libc::sockaddr_in>() as u32,
                        );
                        TcpStream::from_raw_fd(fd)
                    }
                })
                .collect::<Vec<_>>()
        })
        .unwrap();
    std::thread::sleep(ms(300));
    for who in BOTH {
        let v = diagnose(&ns, who, &["-p", "5005", "--interval", "0.5"]);
        let f = findings(&v, "listen-overflow");
        let l: Vec<_> = f
            .iter()
            .filter(|f| f["socket"]["state"] == "LISTEN" && f["socket"]["local"]["port"] == 5005)
            .collect();
        assert_eq!(l.len(), 1, "{v:#}");
        assert!(num(l[0], "accept_queue") > num(l[0], "backlog"));
        assert_eq!(num(l[0], "backlog"), 1.0);
        if who == Who::Root {
            assert_eq!(l[0]["socket"]["owners"][0]["pid"], std::process::id());
        }
    }
    drop(clients);
    drop(listener);
}

/// A path that drops 5% of the packets one way.
#[test]
fn retransmissions_on_a_lossy_path() {
    let Some(_g) = lab("retransmissions") else {
        return;
    };
    let p = wan("drt", 5, 0.05, RATE);
    let bulk = Bulk::start(&p.a, &p.b, &p.addr_b, 5007, BulkOpts::default());
    std::thread::sleep(ms(1500));
    for who in BOTH {
        check(&format!("retransmissions as {who:?}"), || {
            let v = diagnose(&p.a, who, &["-p", "5007", "--interval", "1"]);
            let f = on_port(&v, "retransmissions", 5007);
            let f = f.first().ok_or(format!("no finding: {v:#}"))?;
            let share = num(f, "retrans_share");
            if !(0.01..=0.25).contains(&share) {
                return Err(format!("retransmitted share {share} for a 5% drop"));
            }
            Ok(())
        });
    }
    drop(bulk);
}

// ---------------------------------------------------------------------------------------------
// Case 003: a SYN for a tuple the server still holds in TIME-WAIT

fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in data.chunks(2) {
        let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
        sum += u32::from(w);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Sends a bare SYN (no options) from src to dst through a raw socket.
fn send_syn(raw: i32, src: SocketAddrV4, dst: SocketAddrV4, seq: u32) {
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
    let sa = sockaddr(&dst.ip().to_string(), 0);
    // SAFETY: a valid buffer and sockaddr_in.
    let n = unsafe {
        libc::sendto(
            raw,
            ip.as_ptr().cast(),
            ip.len(),
            0,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    assert_eq!(n, 40, "raw sendto: {}", std::io::Error::last_os_error());
}

#[test]
fn syn_for_a_server_time_wait_tuple() {
    let Some(_g) = lab("syn_for_a_server_time_wait_tuple") else {
        return;
    };
    let ns = Netns::new("dtw").unwrap();
    // The SYN's ACK would reach the client's kernel, whose RST kills the TIME-WAIT entry
    // (RFC 1337 "TIME-WAIT assassination") before the next SYN; with tcp_rfc1337=1 the entry
    // ignores RSTs and the repeated SYNs meet it.
    ns.sysctl("net.ipv4.tcp_rfc1337", "1").unwrap();
    for (round, who) in BOTH.into_iter().enumerate() {
        let port = 5008 + round as u16;
        // Ten connections the server closes first: the server keeps each tuple in TIME-WAIT.
        let (listener, clients) = ns
            .run(move || {
                let l = listen("127.0.0.1", port, 16, None);
                let clients: Vec<SocketAddr> = (0..10)
                    .map(|_| {
                        let mut c = connect("127.0.0.1", port, None, None);
                        let (s, _) = l.accept().unwrap();
                        drop(s);
                        let mut b = [0u8; 1];
                        let _ = c.read(&mut b); // EOF
                        c.local_addr().unwrap()
                    })
                    .collect();
                (l, clients)
            })
            .unwrap();
        std::thread::sleep(ms(200));
        let child = diagnose_cmd(&ns, who, &["--interval", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        crate::ports_support::first_sample_taken(&child);
        ns.run(move || {
            // SAFETY: a raw socket (IPPROTO_RAW implies IP_HDRINCL).
            let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
            assert!(raw >= 0, "raw socket: {}", std::io::Error::last_os_error());
            let dst = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(port);
            for c in &clients {
                let SocketAddr::V4(src) = c else { continue };
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // An old sequence number is rejected with an ACK, rate-limited after the first
                // (TCPACKSkippedTimeWait); a newer one would reopen the tuple. Which one a random
                // number is depends on the old rcv_nxt: over ten tuples, some are old.
                for _ in 0..3 {
                    send_syn(raw, *src, dst, seed as u32);
                }
            }
            // SAFETY: closing our fd.
            unsafe { libc::close(raw) };
        })
        .unwrap();
        let out = child.wait_with_output().unwrap();
        let v = parse(&out);
        eprintln!(
            "{who:?}: {}",
            serde_json::to_string(&v["findings"]).unwrap()
        );
        let f = findings(&v, "timewait-syn-rejected");
        assert_eq!(f.len(), 1, "{v:#}");
        assert!(num(f[0], "ack_skipped_timewait_delta") >= 1.0);
        assert_eq!(num(f[0], "busiest_port"), f64::from(port));
        assert!(f[0]["socket"].is_null());
        drop(listener);
    }
}

// ---------------------------------------------------------------------------------------------
// 001's tcp_mem section: global, so serialized and always restored

/// Restores a global sysctl file when dropped, even when the test panics.
struct SysctlGuard {
    path: &'static str,
    orig: String,
}

impl SysctlGuard {
    /// Writes `value` to `path`; `None` when the kernel has no such file.
    fn set(path: &'static str, value: &str) -> Option<SysctlGuard> {
        let orig = std::fs::read_to_string(path).ok()?;
        let guard = SysctlGuard { path, orig };
        std::fs::write(path, value).unwrap_or_else(|e| panic!("write {path}: {e}"));
        Some(guard)
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        std::fs::write(self.path, &self.orig)
            .unwrap_or_else(|e| panic!("restore {}: {e}", self.path));
    }
}

#[test]
fn memory_pressure() {
    let Some(_g) = lab("memory_pressure") else {
        return;
    };
    let ns = Netns::new("dmp").unwrap();
    let listener = ns.run(|| listen("127.0.0.1", 5010, 64, None)).unwrap();
    // Receivers that do not read hold the memory. The kernel's global TCP page count (what
    // /proc/net/sockstat shows and what tcp_mem is compared with) lags each CPU's own count by up
    // to net.core.mem_pcpu_rsv pages (1 MiB by default, and its minimum), so a few hundred KiB
    // can still read "mem 0" on a quiet host: hold several MiB, on connections filled until the
    // sender would block (bounded in count and bytes).
    const TARGET: usize = 8 << 20;
    let chunk = vec![3u8; 64 * 1024];
    let mut held = 0usize;
    let mut conns = Vec::new();
    while held < TARGET && conns.len() < 48 {
        let client = ns.run(|| connect("127.0.0.1", 5010, None, None)).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let before = held;
        while held - before < 16 << 20 {
            match server.write(&chunk) {
                Ok(n) => held += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        conns.push((client, server));
    }
    let global_pages = || -> u64 {
        let text = std::fs::read_to_string("/proc/net/sockstat").unwrap();
        let tcp = text.lines().find(|l| l.starts_with("TCP:")).unwrap();
        let mut it = tcp.split_whitespace();
        it.find(|w| *w == "mem").unwrap();
        it.next().unwrap().parse().unwrap()
    };
    // A precondition the test cannot force, stated rather than assumed.
    assert!(
        global_pages() >= 2,
        "{held} bytes held on {} connections, yet the global TCP page count reads {}",
        conns.len(),
        global_pages()
    );
    let orig = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem").unwrap();
    let high = orig.split_whitespace().nth(2).unwrap().to_string();
    {
        // Then pressure from 2 pages on, the hard limit untouched: buffers shrink, nothing drops.
        let _tcp_mem = SysctlGuard::set("/proc/sys/net/ipv4/tcp_mem", &format!("1 2 {high}"))
            .expect("net.ipv4.tcp_mem exists");
        for who in BOTH {
            // tcp_mem is global and only visible from the initial namespace: diagnose there.
            let out = output_retrying_etxtbsy(|| {
                diagnose_cmd_in(None, who, &["-p", "5010", "--interval", "0.3"])
            });
            let v = parse(&out);
            let f = findings(&v, "memory-pressure");
            assert_eq!(f.len(), 1, "{held} bytes held: {v:#}");
            assert!(f[0]["socket"].is_null());
            assert!(num(f[0], "tcp_mem_pages") >= num(f[0], "tcp_mem_pressure_pages"));
            assert_eq!(num(f[0], "tcp_mem_pressure_pages"), 2.0);
        }
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem").unwrap(),
        orig
    );
    drop(conns);
}

// ---------------------------------------------------------------------------------------------
// No false alarms

fn assert_quiet(v: &Value, port: u16) {
    let about: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["socket"].is_null()
                || f["socket"]["local"]["port"] == port
                || f["socket"]["remote"]["port"] == port
        })
        .collect();
    assert!(
        about.is_empty(),
        "expected no finding for port {port}: {v:#}"
    );
}

/// The seed's negative cases: 16 KiB SO_SNDBUF and 8 KiB SO_RCVBUF at loopback RTT; an idle
/// keep-alive connection; a listener that accepts promptly.
#[test]
fn loopback_negative_cases() {
    let Some(_g) = lab("loopback_negative_cases") else {
        return;
    };
    let ns = Netns::new("dng").unwrap();
    let small_snd = Bulk::start(
        &ns,
        &ns,
        "127.0.0.1",
        5012,
        BulkOpts {
            client_sndbuf: Some(16384),
            ..BulkOpts::default()
        },
    );
    let small_rcv = Bulk::start(
        &ns,
        &ns,
        "127.0.0.1",
        5013,
        BulkOpts {
            server_rcvbuf: Some(8192),
            ..BulkOpts::default()
        },
    );
    // Idle keep-alive.
    let l = ns.run(|| listen("127.0.0.1", 5014, 4, None)).unwrap();
    let idle = ns.run(|| connect("127.0.0.1", 5014, None, None)).unwrap();
    let (mut idle_srv, _) = l.accept().unwrap();
    idle_srv.write_all(b"hello").unwrap();
    let mut b = [0u8; 5];
    (&idle).read_exact(&mut b).unwrap();
    // SAFETY: setting an int option on our socket.
    setopt(idle.as_raw_fd(), libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    // A prompt acceptor with backlog 1, and clients arriving all the time.
    let stop = Arc::new(AtomicBool::new(false));
    let acceptor_l = ns.run(|| listen("127.0.0.1", 5015, 1, None)).unwrap();
    acceptor_l.set_nonblocking(true).unwrap();
    let s = stop.clone();
    let acceptor = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
            match acceptor_l.accept() {
                Ok((c, _)) => drop(c),
                Err(_) => std::thread::sleep(ms(1)),
            }
        }
    });
    let s = stop.clone();
    let connector = ns.spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
            if let Ok(c) = TcpStream::connect("127.0.0.1:5015") {
                drop(c);
            }
            std::thread::sleep(ms(20));
        }
    });
    std::thread::sleep(ms(1000));
    for who in BOTH {
        let v = diagnose(
            &ns,
            who,
            &["--interval", "1", "--state", "ESTABLISHED,LISTEN"],
        );
        for port in [5012, 5013, 5014, 5015] {
            assert_quiet(&v, port);
        }
        assert!(small_snd.received() > 0);
        assert!(small_rcv.received() > 0);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = acceptor.join();
    let _ = connector.join();
}

// ---------------------------------------------------------------------------------------------
// sockstat trace: the picture of a send-buffer-limited transfer (issue 8 item 3)

/// `sockstat trace` follows the client of a 16 KiB-SO_SNDBUF transfer over the 20 ms path and
/// draws it: the send queue sits at the send buffer's limit (it overshoots by up to one
/// 64 KiB TSO packet, which the kernel allows) while the bytes in flight stay well under both
/// windows; the header names the send buffer as the limit (the share `diagnose` needs), and the
/// acked rate is the goodput the reader measured.
#[test]
fn trace_draws_a_send_buffer_plateau() {
    let Some(_g) = lab("trace_draws_a_send_buffer_plateau") else {
        return;
    };
    let p = wan("dtr", 9, 0.0, RATE);
    let bulk = Bulk::start(
        &p.a,
        &p.b,
        &p.addr_b,
        5009,
        BulkOpts {
            client_sndbuf: Some(16384),
            ..BulkOpts::default()
        },
    );
    std::thread::sleep(ms(1500));
    let dir = tempfile::tempdir().unwrap();
    let svg_path = dir.path().join("plateau.svg");
    let svg_arg = svg_path.to_str().unwrap().to_string();
    let (goodput, out) = bulk.measure(|| {
        output_retrying_etxtbsy(|| {
            let mut c = p.a.command(BIN);
            c.args([
                "trace",
                "-p",
                "5009",
                "--duration",
                "3",
                "--interval",
                "0.05",
                "--json",
                "-o",
                &svg_arg,
            ]);
            c
        })
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let (last, samples) = lines.split_last().unwrap();
    eprintln!("trace summary: {last}");
    assert!(samples.len() >= 30, "{} samples", samples.len());
    let n = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("no {k}: {v}"));
    for s in samples {
        assert_eq!(n(s, "sndbuf_bytes"), 32768.0, "{s}");
    }
    let median = |k: &str| {
        let mut v: Vec<f64> = samples.iter().map(|s| n(s, k)).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (inflight, queued) = (median("in_flight_bytes"), median("send_queued_bytes"));
    assert!(
        queued >= 0.9 * 32768.0,
        "the send queue is full: median {queued}"
    );
    assert!(
        median("peer_window_bytes") > 1.5 * inflight && median("cwnd_bytes") > 1.5 * inflight,
        "neither window is what limits it (in flight {inflight}): {samples:?}"
    );
    let summary = &last["summary"];
    let share = n(summary, "sndbuf_limited_share");
    assert!(
        share >= 0.2, // diagnose's SNDBUF_SHARE: the share R1 needs
        "send buffer named as the limit: {last}"
    );
    assert!(n(summary, "rwnd_limited_share") < 0.2, "{last}");
    let acked = n(summary, "acked_bytes_per_sec");
    assert!(
        (acked - goodput).abs() < 0.25 * goodput,
        "acked {acked} B/s vs goodput {goodput} B/s measured by the reader"
    );
    assert!(last["connection"]
        .as_str()
        .unwrap()
        .contains(&format!("{}:5009", p.addr_b)));

    // The file: well-formed SVG, one point per sample in each series, the in-flight line on or
    // under the send-buffer line at every sample (SVG's y grows downwards), the summary kept.
    let text = std::fs::read_to_string(&svg_path).unwrap();
    if let Some(keep) = std::env::var_os("SOCKSTAT_KEEP_TRACE") {
        // To look at the picture: SOCKSTAT_KEEP_TRACE=/tmp/plateau.svg cargo test ...
        std::fs::write(keep, &text).unwrap();
    }
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let line = |id: &str| -> Vec<(f64, f64)> {
        let node = doc
            .descendants()
            .find(|x| x.attribute("id") == Some(id))
            .unwrap_or_else(|| panic!("no polyline {id}"));
        node.attribute("points")
            .unwrap()
            .split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    };
    for id in [
        "bytes_acked",
        "cwnd",
        "peer_window",
        "sndbuf",
        "send_queued",
    ] {
        assert_eq!(line(id).len(), samples.len(), "{id}");
    }
    // Drawn: the in-flight line below both window lines (SVG's y grows downwards), the send
    // queue at the send buffer's line.
    let median_y = |id: &str| {
        let mut v: Vec<f64> = line(id).iter().map(|p| p.1).collect();
        assert_eq!(v.len(), samples.len(), "{id}");
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    assert!(median_y("in_flight") > median_y("cwnd"));
    assert!(median_y("in_flight") > median_y("peer_window"));
    assert!(median_y("send_queued") <= median_y("sndbuf") + 0.05);
    let meta = doc
        .descendants()
        .find(|x| x.attribute("id") == Some("summary"))
        .and_then(|m| m.text())
        .unwrap();
    let meta: Value = serde_json::from_str(meta).unwrap();
    assert_eq!(meta, *summary);
    let title = doc
        .descendants()
        .find(|x| x.has_tag_name("title"))
        .and_then(|t| t.text())
        .unwrap();
    assert!(title.contains(":5009 ESTABLISHED"), "{title}");
}
