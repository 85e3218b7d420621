//! `sockstat trace` on loopback: a reader that stops reading gives a zero-window stall the
//! trace must show (peer window 0, acked bytes flat, the stall counted in the summary), the
//! trace follows one end by its id and notices when the connection closes, and bad requests
//! (no output, a PNG name, two matching connections, none) are one-line errors with status 2.
//! Needs no root: sock_diag shows tcp_info of every socket to any user. (The send-buffer
//! plateau over a 20 ms path is in diagnose_live.rs, which has the namespaces.)

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

const SOCKSTAT: &str = env!("CARGO_BIN_EXE_sockstat");

fn sockstat(args: &[&str]) -> Output {
    Command::new(SOCKSTAT).args(args).output().unwrap()
}

fn set_int(fd: i32, opt: i32, v: i32) {
    // SAFETY: setsockopt on a socket we own, with a valid int.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}

/// The socket's inode: what `sockstat -i` shows as its id.
fn inode(fd: i32) -> u64 {
    std::fs::metadata(format!("/proc/self/fd/{fd}"))
        .unwrap()
        .ino()
}

/// A loopback connection whose server end never reads: the client fills the server's small
/// receive buffer and then its own send buffer, so the peer's window goes to zero.
fn stalled() -> (TcpListener, TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    set_int(l.as_raw_fd(), libc::SO_RCVBUF, 4096);
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (srv, _) = l.accept().unwrap();
    c.set_nonblocking(true).unwrap();
    let chunk = vec![0x5a; 16 * 1024];
    let mut w = &c;
    // Write until the kernel takes no more (bounded: the buffers are small).
    for _ in 0..10_000 {
        match w.write(&chunk) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("write: {e}"),
        }
    }
    // Let the zero-window state settle (the last window update and the first probe).
    std::thread::sleep(Duration::from_millis(300));
    (l, c, srv)
}

fn json_lines(out: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_zero_window_stall_is_traced_and_drawn() {
    let _timing = crate::common::timing_sensitive();
    let (l, c, _srv) = stalled();
    let port = l.local_addr().unwrap().port().to_string();
    let id = inode(c.as_raw_fd()).to_string();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("stall.svg");
    let out = sockstat(&[
        "trace",
        "-p",
        &port,
        "--id",
        &id,
        "--duration",
        "0.6",
        "--interval",
        "0.05",
        "--json",
        "-o",
        svg.to_str().unwrap(),
    ]);
    let lines = json_lines(&out);
    let (last, samples) = lines.split_last().unwrap();
    assert!(samples.len() >= 5, "{lines:?}");
    for s in samples {
        assert_eq!(s["peer_window_bytes"], 0, "{s}");
        assert!(s["not_sent_bytes"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(s["state"], "ESTABLISHED");
    }
    let acked: Vec<u64> = samples
        .iter()
        .map(|s| s["bytes_acked"].as_u64().unwrap())
        .collect();
    assert!(
        acked.iter().all(|&a| a == acked[0]),
        "nothing acked during the stall: {acked:?}"
    );
    let summary = &last["summary"];
    assert_eq!(summary["zero_window_samples"], samples.len(), "{last}");
    assert_eq!(summary["acked_bytes_per_sec"], 0.0, "{last}");
    let connection = last["connection"].as_str().unwrap();
    assert!(
        connection.contains(&format!("127.0.0.1:{port} ESTABLISHED")),
        "{connection}"
    );

    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let header: String = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        header.contains(&format!(
            "zero window in {} of {} samples",
            samples.len(),
            samples.len()
        )),
        "{header}"
    );
    // The peer-window line lies on the floor of the lower panel at every sample.
    let floor = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("peer_window"))
        .unwrap()
        .attribute("points")
        .unwrap()
        .split_whitespace()
        .map(|p| p.split_once(',').unwrap().1.parse::<f64>().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(floor.len(), samples.len());
    // The lower panel's "0 B" tick label sits 4 units below its zero line.
    let zero = doc
        .descendants()
        .filter(|n| n.has_tag_name("text") && n.text() == Some("0 B"))
        .filter_map(|n| n.attribute("y")?.parse::<f64>().ok())
        .fold(f64::MIN, f64::max)
        - 4.0;
    assert!(
        floor.iter().all(|&y| (y - zero).abs() < 0.11),
        "peer window at {floor:?}, zero at {zero}"
    );
}

#[test]
fn a_closed_connection_ends_the_trace() {
    let _timing = crate::common::timing_sensitive();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (srv, _) = l.accept().unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let id = inode(c.as_raw_fd()).to_string();
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        drop(srv);
        drop(c);
    });
    let out = sockstat(&[
        "trace",
        "-p",
        &port,
        "--id",
        &id,
        "--duration",
        "20",
        "--interval",
        "0.05",
        "--json",
    ]);
    closer.join().unwrap();
    let lines = json_lines(&out);
    let last = lines.last().unwrap();
    // Closed 0.7 s after the trace was started; the trace's clock starts at its first sample,
    // which a busy host's first owner scan delays.
    let closed = last["closed_at_s"].as_f64().expect("closed_at_s");
    assert!(closed > 0.0 && closed < 10.0, "{last}");
}

#[test]
fn bad_requests_are_one_line_and_status_2_and_nothing_to_trace_is_4() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (_srv, _) = l.accept().unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let free = {
        let t = TcpListener::bind("127.0.0.1:0").unwrap();
        t.local_addr().unwrap().port().to_string()
    };
    for (args, want) in [
        (
            vec!["trace", "-p", &port],
            "trace needs -o FILE.svg for the picture, or --json for the samples",
        ),
        (
            vec!["trace", "-p", &port, "-o", "x.png"],
            "cannot write 'x.png': trace draws SVG",
        ),
        (
            vec!["trace", "-p", &port, "--json", "--duration", "1"],
            "2 TCP connections match (",
        ),
        (
            vec!["trace", "-p", &port, "--json", "--interval", "0"],
            "invalid sampling interval '0'",
        ),
        (
            vec!["trace", "-p", &port, "--json", "-P", "udp"],
            "-P does not apply to 'trace'",
        ),
        (
            vec!["trace", "-p", &port, "--json", "--watch", "1"],
            "--watch does not apply to 'trace'",
        ),
    ] {
        let out = sockstat(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let errors: Vec<&str> = stderr.lines().collect();
        assert_eq!(errors.len(), 1, "{args:?}: {stderr}");
        assert!(errors[0].contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"));
    }
    // Nothing to trace within --duration: the work stopped (4), not bad usage; and off a
    // terminal, no line about waiting.
    let out = sockstat(&["trace", "-p", &free, "--json", "--duration", "0.3"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "sockstat: no TCP connection matched the filters within 0.3 s"
    );
}
