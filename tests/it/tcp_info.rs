//! `-T`, `-C` and `-m` against real loopback sockets held by this test process: the kernel's
//! numbers reach the table and the `"tcp"`/`"memory"`/`"timer"` JSON objects, with their units,
//! and what the kernel does not send (TIME_WAIT has no tcp_info) is absent rather than zero.
//! Needs no root: sock_diag shows tcp_info of every socket to any user.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;

use crate::common::validate;

const SOCKSTAT: &str = env!("CARGO_BIN_EXE_sockstat");

fn run(args: &[&str]) -> (i32, String) {
    let o = Command::new(SOCKSTAT).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

fn set_sndbuf(s: &TcpStream, bytes: i32) {
    // SAFETY: setsockopt on a socket we own, with a valid int.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}

#[test]
fn tcp_internals_and_memory_of_a_real_connection() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (_a, _) = l.accept().unwrap();
    // An application-fixed send buffer: the kernel doubles it (sk_sndbuf = 2 x SO_SNDBUF).
    set_sndbuf(&c, 16384);
    c.write_all(&[7u8; 1000]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let client = c.local_addr().unwrap().port();
    let pid = std::process::id().to_string();
    let p = port.to_string();

    let (code, out) = run(&["-T", "-m", "--json", "-4", "-p", &p, "--pid", &pid]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    validate(&v);
    let socks = v["sockets"].as_array().unwrap();
    let conn = socks
        .iter()
        .find(|s| s["local"]["port"] == client)
        .unwrap_or_else(|| panic!("client socket missing: {v}"));
    let t = &conn["tcp"];
    assert!(t["rtt_us"].as_u64().unwrap() > 0, "{t}");
    assert!(t["min_rtt_us"].as_u64().is_some(), "{t}");
    assert!(t["cwnd_pkts"].as_u64().unwrap() >= 1, "{t}");
    assert!(t["snd_mss_bytes"].as_u64().unwrap() > 0, "{t}");
    assert!(t["snd_wnd_bytes"].as_u64().unwrap() > 0, "{t}");
    assert!(t["rcv_wnd_bytes"].as_u64().unwrap() > 0, "{t}");
    assert_eq!(
        t["options"]["wscale"], true,
        "loopback negotiates window scaling: {t}"
    );
    assert!(t["snd_wscale"].as_u64().is_some() && t["rcv_wscale"].as_u64().is_some());
    assert!(
        t["congestion"].as_str().is_some_and(|c| !c.is_empty()),
        "{t}"
    );
    assert_eq!(
        t["bytes_acked"].as_u64().unwrap(),
        1001,
        "1000 bytes + SYN: {t}"
    );
    assert!(t["busy_time_us"].as_u64().is_some());
    assert_eq!(t["ca_state"], "open");
    let m = &conn["memory"];
    assert_eq!(
        m["sndbuf_bytes"], 32768,
        "SO_SNDBUF 16384 doubled by the kernel: {m}"
    );
    assert!(m["rcvbuf_bytes"].as_u64().unwrap() > 0);
    assert!(conn["timer"]["kind"].as_str().is_some());

    // The listener: the kernel fills only queue, cwnd and pacing; the table shows '-' for RTT.
    let (code, out) = run(&["-T", "-l", "-4", "-p", &p, "--pid", &pid]);
    assert_eq!(code, 0);
    let header = out.lines().next().unwrap();
    for col in [
        "RTT", "MINRTT", "CWND", "WSCALE", "SNDWND", "RCVWND", "DELIVERY", "CC",
    ] {
        assert!(
            header.split_whitespace().any(|h| h == col),
            "{col} missing: {header}"
        );
    }
    let row = out.lines().nth(1).unwrap();
    assert!(row.contains(" - "), "listener RTT shown as -: {row}");

    // -C alone: the congestion column and "tcp" with only "congestion" (no tcp_info asked).
    let (code, out) = run(&["-C", "--json", "-4", "-p", &p, "--pid", &pid]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    validate(&v);
    for s in v["sockets"].as_array().unwrap() {
        assert!(s["tcp"]["congestion"].as_str().is_some(), "{s}");
        assert!(
            s["tcp"].get("rtt_us").is_none(),
            "-C alone asks for no tcp_info: {s}"
        );
    }
}

#[test]
fn time_wait_has_no_tcp_info_and_no_zeros() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (a, _) = l.accept().unwrap();
    let client = c.local_addr().unwrap().port();
    drop(c); // the client closes first: TIME_WAIT on the client side
    drop(a);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let (code, out) = run(&[
        "-T",
        "-m",
        "--json",
        "--state",
        "TIME_WAIT",
        "-p",
        &client.to_string(),
        "--no-owners",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    validate(&v);
    let tw = v["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["local"]["port"] == client)
        .unwrap_or_else(|| panic!("no TIME_WAIT for {client}: {v}"));
    assert!(
        tw.get("tcp").is_none(),
        "TIME_WAIT carries no tcp_info: {tw}"
    );
    assert!(
        tw.get("memory").is_none(),
        "TIME_WAIT carries no skmem: {tw}"
    );
    assert_eq!(tw["timer"]["kind"], "time_wait");
    assert!(tw["timer"]["expires_ms"].as_u64().unwrap() <= 60_000);
    assert_eq!(tw["uid"], serde_json::Value::Null);
}
