//! Issue 7 item 7: kernel faults through the replay seam, and write errors on stdout.
//!
//! Every recording here is made from real captured bytes (`crates/wire/tests/fixtures/netlink`,
//! replies of a 6.x kernel) with one field edited: a flag, an errno, a length. The replay reads
//! `<key>.nl` (and `<key>.<n>.nl` on the n-th start of the same dump, so a fault can go away on
//! retry), and `--proc-root` points at a fake `/proc` so the `/proc/net` fallback is exercised
//! without touching this host's tables. No root needed.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;

const NLM_F_DUMP_INTR: u16 = 0x10;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const ENOBUFS: i32 = 105;
const EPERM: i32 = 1;
const ENOENT: i32 = 2;

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/wire/tests/fixtures/netlink")
        .join(format!("{name}.bin"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The netlink messages of a capture, each with its padding.
fn split(buf: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < buf.len() {
        let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
        assert!(len >= 16 && off + len <= buf.len(), "bad capture at {off}");
        let end = (off + ((len + 3) & !3)).min(buf.len());
        out.push(buf[off..end].to_vec());
        off = end;
    }
    out
}

fn msg_type(m: &[u8]) -> u16 {
    u16::from_ne_bytes([m[4], m[5]])
}

fn set_flag(m: &mut [u8], flag: u16) {
    let f = u16::from_ne_bytes([m[6], m[7]]) | flag;
    m[6..8].copy_from_slice(&f.to_ne_bytes());
}

fn set_errno(m: &mut [u8], errno: i32) {
    m[16..20].copy_from_slice(&(-errno).to_ne_bytes());
}

/// The real tcp4 dump: its data messages and its NLMSG_DONE.
fn tcp4() -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut msgs = split(&fixture("tcp4"));
    let done = msgs.pop().unwrap();
    assert_eq!(msg_type(&done), NLMSG_DONE);
    assert!(msgs.iter().all(|m| msg_type(m) == 20));
    (msgs, done)
}

/// A real NLMSG_ERROR (the kernel's answer to a bad filter program) with another errno.
fn nlmsg_error(errno: i32) -> Vec<u8> {
    let mut m = split(&fixture("tcp4_bad_bytecode")).remove(0);
    assert_eq!(msg_type(&m), NLMSG_ERROR);
    set_errno(&mut m, errno);
    m
}

/// A recording: one (u32 LE length, bytes) record per receive buffer.
fn write_recording(path: &Path, recvs: &[Vec<u8>]) {
    let mut out = Vec::new();
    for r in recvs {
        out.extend_from_slice(&(r.len() as u32).to_le_bytes());
        out.extend_from_slice(r);
    }
    std::fs::write(path, out).unwrap();
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    /// An empty recording directory and an empty fake /proc (with an empty `net`).
    fn new() -> Case {
        let dir = tempdir();
        std::fs::create_dir_all(dir.path().join("nl")).unwrap();
        std::fs::create_dir_all(dir.path().join("proc/net")).unwrap();
        Case { dir }
    }

    fn nl(&self, file: &str) -> PathBuf {
        self.dir.path().join("nl").join(file)
    }

    fn proc_net(&self, file: &str, text: &str) {
        std::fs::write(self.dir.path().join("proc/net").join(file), text).unwrap();
    }

    fn args(&self, more: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = vec![
            "--replay-netlink".into(),
            self.dir.path().join("nl").display().to_string(),
            "--proc-root".into(),
            self.dir.path().join("proc").display().to_string(),
            "-a".into(),
        ];
        v.extend(more.iter().map(|s| s.to_string()));
        v
    }

    fn json(&self, more: &[&str]) -> Value {
        let out = sockstat(&self.args(more)).arg("--json").run().no_panic();
        assert_eq!(out.code, Some(0), "{}: {}", out.what, out.stderr);
        out.json()
    }
}

fn codes(v: &Value) -> Vec<String> {
    warnings(v)
        .iter()
        .map(|w| w["code"].as_str().unwrap_or("").to_string())
        .collect()
}

fn warning<'a>(v: &'a Value, code: &str) -> &'a Value {
    warnings(v)
        .iter()
        .find(|w| w["code"] == code)
        .unwrap_or_else(|| panic!("no {code} warning in {:?}", warnings(v)))
}

const TCP4: &[&str] = &["-P", "tcp", "-4"];

#[test]
fn clean_recording_lists_every_socket() {
    let c = Case::new();
    let (msgs, done) = tcp4();
    let n = msgs.len();
    write_recording(&c.nl("tcp4.nl"), &[[msgs.concat(), done].concat()]);
    let v = c.json(TCP4);
    assert_eq!(sockets(&v).len(), n);
    assert!(warnings(&v).is_empty(), "{:?}", warnings(&v));
}

#[test]
fn dump_intr_once_is_retried_silently() {
    let c = Case::new();
    let (mut msgs, done) = tcp4();
    let n = msgs.len();
    let clean = [msgs.concat(), done.clone()].concat();
    // The kernel flags the message where the table changed under the dump.
    set_flag(&mut msgs[n / 2], NLM_F_DUMP_INTR);
    write_recording(&c.nl("tcp4.nl"), &[[msgs.concat(), done].concat()]);
    write_recording(&c.nl("tcp4.2.nl"), &[clean]);
    let v = c.json(TCP4);
    assert_eq!(sockets(&v).len(), n, "the retry's listing, not both");
    assert!(warnings(&v).is_empty(), "{:?}", warnings(&v));
}

#[test]
fn dump_intr_every_time_is_kept_with_a_warning() {
    let c = Case::new();
    let (mut msgs, mut done) = tcp4();
    let n = msgs.len();
    set_flag(&mut msgs[0], NLM_F_DUMP_INTR);
    // The kernel also flags NLMSG_DONE of an interrupted dump.
    set_flag(&mut done, NLM_F_DUMP_INTR);
    write_recording(&c.nl("tcp4.nl"), &[[msgs.concat(), done].concat()]);
    let v = c.json(TCP4);
    assert_eq!(sockets(&v).len(), n, "the last attempt is kept");
    assert_eq!(codes(&v), ["dump-inconsistent"]);
    let w = warning(&v, "dump-inconsistent");
    assert!(w["message"].as_str().unwrap().contains("tcp4"), "{w}");
    // The table says it on stderr, once.
    let out = sockstat(&c.args(TCP4)).ok();
    let lines: Vec<_> = out.stderr_lines();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].starts_with("sockstat: warning: "),
        "{}",
        out.stderr
    );
}

#[test]
fn dump_intr_only_on_done_is_seen() {
    let c = Case::new();
    let (msgs, mut done) = tcp4();
    set_flag(&mut done, NLM_F_DUMP_INTR);
    write_recording(&c.nl("tcp4.nl"), &[[msgs.concat(), done].concat()]);
    let v = c.json(TCP4);
    assert_eq!(codes(&v), ["dump-inconsistent"]);
}

/// The two ways a kernel reports that a dump overran the socket: an NLMSG_ERROR in the stream,
/// or `recv()` itself failing (once it has dropped a message for a full receive queue).
#[derive(Debug, Clone, Copy)]
enum Fault {
    Message,
    Recv,
}

/// Writes `<key>` as the reply buffers `recvs` followed by a failure with `errno`, in the way
/// `fault` says. A failed `recv()` is recorded as the length word with its top bit set and the
/// errno below it (`RECORDED_ERROR` in sockstat's `sys::netlink`).
fn write_failing_recording(path: &Path, recvs: &[Vec<u8>], fault: Fault, errno: i32) {
    let mut recvs = recvs.to_vec();
    if let Fault::Message = fault {
        recvs.push(nlmsg_error(errno));
    }
    write_recording(path, &recvs);
    if let Fault::Recv = fault {
        let mut data = std::fs::read(path).unwrap();
        data.extend_from_slice(&(0x8000_0000u32 | errno as u32).to_le_bytes());
        std::fs::write(path, data).unwrap();
    }
}

/// One listening socket, inode 777001, in /proc/net/tcp text.
const PROC_NET_TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777001 1 0000000000000000 100 0 0 10 0\n";

#[test]
fn enobufs_once_is_retried_silently() {
    for fault in [Fault::Message, Fault::Recv] {
        let c = Case::new();
        let (msgs, done) = tcp4();
        let n = msgs.len();
        // Half the dump arrives, then the socket overran; the retry is clean.
        write_failing_recording(&c.nl("tcp4.nl"), &[msgs[..n / 2].concat()], fault, ENOBUFS);
        write_recording(&c.nl("tcp4.2.nl"), &[[msgs.concat(), done].concat()]);
        let v = c.json(TCP4);
        assert_eq!(
            sockets(&v).len(),
            n,
            "{fault:?}: no socket from the failed attempt is kept twice"
        );
        assert!(warnings(&v).is_empty(), "{fault:?}: {:?}", warnings(&v));
    }
}

/// ENOBUFS on every attempt, either way: the family comes from /proc/net and the warning names
/// the dump and the error. Another errno from `recv()` is not retried at all.
#[test]
fn enobufs_every_time_falls_back_to_proc_net_with_a_warning() {
    for (fault, errno, text) in [
        (Fault::Message, ENOBUFS, "No buffer space"),
        (Fault::Recv, ENOBUFS, "No buffer space"),
        (Fault::Recv, EPERM, "not permitted"),
    ] {
        let c = Case::new();
        write_failing_recording(&c.nl("tcp4.nl"), &[], fault, errno);
        if errno != ENOBUFS {
            // Were EPERM retried, this clean second attempt would be the answer.
            let (msgs, done) = tcp4();
            write_recording(&c.nl("tcp4.2.nl"), &[[msgs.concat(), done].concat()]);
        }
        c.proc_net("tcp", PROC_NET_TCP);
        let v = c.json(TCP4);
        let w = warning(&v, "dump-failed");
        let msg = w["message"].as_str().unwrap();
        assert!(
            msg.contains("tcp4") && msg.contains(text),
            "{fault:?}: {msg}"
        );
        assert_eq!(
            ids(&v),
            [777001].into_iter().collect(),
            "{fault:?} {errno}: from /proc/net/tcp"
        );
    }
}

/// A reply cut in the middle of a message: the dump is not trusted, the user is told, and the
/// family comes from /proc/net (or is reported missing).
#[test]
fn truncated_message_is_a_warning_not_silence() {
    let (msgs, done) = tcp4();
    let whole = [msgs.concat(), done].concat();
    // Cut inside the fourth message (its header says more than the buffer holds).
    let cut = msgs[..3].concat().len() + 40;
    for (name, recvs) in [
        ("mid-message", vec![whole[..cut].to_vec()]),
        ("mid-header", vec![whole[..msgs[0].len() + 7].to_vec()]),
        (
            "cut-then-more",
            vec![whole[..cut].to_vec(), whole[cut..].to_vec()],
        ),
    ] {
        let c = Case::new();
        write_recording(&c.nl("tcp4.nl"), &recvs);
        let v = c.json(TCP4);
        let w = warning(&v, "dump-failed");
        let msg = w["message"].as_str().unwrap();
        assert!(msg.contains("tcp4"), "{name}: {msg}");
        assert!(
            msg.contains("undecodable") || msg.contains("truncated"),
            "{name}: {msg}"
        );
        assert!(
            sockets(&v).is_empty(),
            "{name}: nothing from the half-read dump is listed: {v}"
        );
    }
}

/// A well-framed message whose inet_diag record is cut short (a kernel or middlebox bug): the
/// dump is refused as a whole, with a warning, never half-listed and never a panic.
#[test]
fn short_record_inside_a_message_is_a_warning() {
    let c = Case::new();
    let (msgs, done) = tcp4();
    let mut short = msgs[1][..16 + 20].to_vec();
    short[0..4].copy_from_slice(&(36u32).to_ne_bytes());
    let body = [msgs[0].clone(), short, msgs[2..].concat(), done].concat();
    write_recording(&c.nl("tcp4.nl"), &[body]);
    let v = c.json(TCP4);
    let msg = warning(&v, "dump-failed")["message"].as_str().unwrap();
    assert!(msg.contains("tcp4") && msg.contains("undecodable"), "{msg}");
    assert!(sockets(&v).is_empty(), "{v}");
}

/// A recording that stops (no NLMSG_DONE, or a record cut short): the kernel stopped talking.
#[test]
fn recording_that_stops_is_a_warning() {
    let (msgs, _done) = tcp4();
    for (name, bytes) in [
        ("no-done", {
            let mut b = (msgs.concat().len() as u32).to_le_bytes().to_vec();
            b.extend_from_slice(&msgs.concat());
            b
        }),
        ("record-cut", {
            let mut b = 4000u32.to_le_bytes().to_vec();
            b.extend_from_slice(&msgs[0]);
            b
        }),
    ] {
        let c = Case::new();
        std::fs::write(c.nl("tcp4.nl"), bytes).unwrap();
        let v = c.json(TCP4);
        let w = warning(&v, "dump-failed");
        assert!(w["message"].as_str().unwrap().contains("tcp4"), "{name}");
        assert!(sockets(&v).is_empty(), "{name}");
    }
}

#[test]
fn error_inside_done_is_reported() {
    for (errno, text) in [(EPERM, "not permitted"), (ENOENT, "No such file")] {
        let c = Case::new();
        let (msgs, mut done) = tcp4();
        set_errno(&mut done, errno);
        write_recording(&c.nl("tcp4.nl"), &[[msgs.concat(), done].concat()]);
        let v = c.json(TCP4);
        let w = warning(&v, "dump-failed");
        let msg = w["message"].as_str().unwrap();
        assert!(msg.contains("tcp4") && msg.contains(text), "{errno}: {msg}");
        assert!(
            sockets(&v).is_empty(),
            "{errno}: the records before the error are not kept as if complete"
        );
        // The table names the failure on stderr, in one line.
        let out = sockstat(&c.args(TCP4)).ok();
        assert_eq!(out.stderr_lines().len(), 1, "{errno}: {}", out.stderr);
        assert!(out.stderr.contains(text), "{errno}: {}", out.stderr);
    }
}

#[test]
fn nlmsg_error_as_first_reply_is_reported() {
    let c = Case::new();
    write_recording(&c.nl("tcp4.nl"), &[nlmsg_error(EPERM)]);
    let v = c.json(TCP4);
    let msg = warning(&v, "dump-failed")["message"].as_str().unwrap();
    assert!(msg.contains("not permitted"), "{msg}");
}

/// No raw diag module (this is what a kernel without CONFIG_INET_RAW_DIAG answers): /proc/net/raw
/// is read with no word about the fallback, since that is the documented normal case; what its
/// text does not give (the cookie, the bound device) is said, as for any text (issue 31).
#[test]
fn missing_raw_diag_falls_back_to_proc_net_raw() {
    let c = Case::new();
    let real = split(&fixture("raw4_enoent"));
    assert_eq!(real.len(), 1);
    assert_eq!(msg_type(&real[0]), NLMSG_DONE);
    write_recording(&c.nl("raw4.nl"), &real);
    c.proc_net(
        "raw",
        "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n  1: 00000000:0001 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 888001 2 0000000000000000 0\n",
    );
    let v = c.json(&["-P", "raw", "-4"]);
    for w in warnings(&v) {
        assert_eq!(w["code"], "column-unavailable", "{:?}", warnings(&v));
        assert_eq!(w["count"], 1, "{w}");
        assert!(
            w["message"].as_str().unwrap().contains("/proc/net/raw"),
            "{w}"
        );
    }
    assert_eq!(
        warnings(&v).len(),
        2,
        "cookie, bound interface: {:?}",
        warnings(&v)
    );
    assert_eq!(ids(&v), [888001].into_iter().collect());
    // Against the live /proc, a replay never mixes in this host's tables.
    let out = sockstat(&[
        "--replay-netlink",
        c.dir.path().join("nl").to_str().unwrap(),
        "-P",
        "raw",
        "-4",
        "--json",
    ])
    .run()
    .no_panic();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(sockets(&out.json()).is_empty());
}

/// Runs sockstat with its standard output on /dev/full: (status, stderr).
fn onto_full_disk<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Option<i32>, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = sockstat(args)
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(full)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run sockstat");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A full disk: one clear line, status 4 (an I/O failure that stopped the work), whatever the
/// output format.
#[test]
fn full_disk_is_one_line_and_status_4() {
    let c = Case::new();
    let (msgs, done) = tcp4();
    write_recording(&c.nl("tcp4.nl"), &[[msgs.concat(), done].concat()]);
    for fmt in [&[][..], &["--json"][..], &["--csv"][..], &["-s"][..]] {
        let mut args = c.args(TCP4);
        args.extend(fmt.iter().map(|s| s.to_string()));
        let (code, err) = onto_full_disk(&args);
        assert_eq!(code, Some(4), "{fmt:?}: {err}");
        let lines: Vec<_> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{fmt:?}: {err}");
        assert!(
            lines[0].starts_with("sockstat: cannot write")
                && lines[0].contains("No space left on device"),
            "{fmt:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{fmt:?}: {err}");
    }
    // The live path too (a large real listing).
    let (code, err) = onto_full_disk(&["-a"]);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("sockstat: cannot write") && l.contains("No space left")),
        "{err}"
    );
    assert_eq!(
        err.lines()
            .filter(|l| !l.starts_with("sockstat: warning:"))
            .count(),
        1,
        "{err}"
    );
}

/// A full disk under every other view: one line naming what was being written, status 4.
#[test]
fn full_disk_names_the_view_it_was_writing() {
    use std::os::unix::io::AsRawFd;
    // A loopback connection for `trace` to follow.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _srv = l.accept().unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid fd and a stat buffer of the right type.
    assert_eq!(unsafe { libc::fstat(c.as_raw_fd(), &mut st) }, 0);
    let id = st.st_ino.to_string();
    let cases: [(&[&str], &str); 8] = [
        (&["counters"], "the counters"),
        (&["ports", "--json"], "the port report"),
        (
            &["diagnose", "--json", "--interval", "0.1"],
            "the diagnosis",
        ),
        (&["--watch", "0.1", "--count", "2"], "the refresh"),
        (&["ports", "--watch", "0.1", "--count", "2"], "the refresh"),
        (
            &["counters", "--json", "--watch", "0.1", "--count", "2"],
            "the refresh",
        ),
        (&["--generate", "man"], "the generated file"),
        (
            &[
                "trace",
                "--json",
                "--duration",
                "0.3",
                "-p",
                &port,
                "--id",
                &id,
            ],
            "the trace",
        ),
    ];
    for (args, what) in cases {
        let (code, err) = onto_full_disk(args);
        assert_eq!(code, Some(4), "{args:?}: {err}");
        let errors: Vec<_> = err
            .lines()
            .filter(|l| !l.starts_with("sockstat: warning:"))
            .collect();
        assert_eq!(
            errors,
            [format!(
                "sockstat: cannot write {what} to standard output: No space left on device (os error 28)"
            )],
            "{args:?}"
        );
    }
}
