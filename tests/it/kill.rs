//! Issue 21: `sockstat kill` against real connections in a network namespace the test creates.
//!
//! The test process makes the sockets itself, from a thread that joined the namespace (the
//! sockets stay in it), so it can see what each end's process sees after the kill: the killed
//! end's next read fails with ECONNABORTED, its local peer's with ECONNRESET.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// Runs `f` on a thread that joined the namespace `ns`: the sockets it makes live there.
pub(crate) fn in_ns<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{}", ns.name);
    std::thread::scope(|s| {
        s.spawn(|| {
            let fd = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns on an fd we own; it changes only this thread's namespace.
            let rc = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("namespace thread")
    })
}

/// A connection to `l`: (client, accepted server end).
fn connect(l: &TcpListener) -> (TcpStream, TcpStream) {
    let c = TcpStream::connect(l.local_addr().unwrap()).expect("connect");
    let (s, _) = l.accept().expect("accept");
    (c, s)
}

/// Data goes both ways over the connection.
fn works(a: &mut TcpStream, b: &mut TcpStream) -> bool {
    fn one_way(x: &mut TcpStream, y: &mut TcpStream) -> bool {
        let mut buf = [0u8; 4];
        y.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        x.write_all(b"ping").is_ok() && y.read_exact(&mut buf).is_ok() && &buf == b"ping"
    }
    one_way(a, b) && one_way(b, a)
}

/// The errno this end's next read fails with (None if it did not fail).
fn read_error(s: &mut TcpStream) -> Option<i32> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 16];
    match s.read(&mut buf) {
        Ok(_n) => None,
        Err(e) => e.raw_os_error(),
    }
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut n = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|x| x.parse::<u32>().unwrap_or(0));
    (n.next().unwrap_or(0), n.next().unwrap_or(0)) >= (major, minor)
}

/// Validates a kill document against doc/kill.schema.json (which builds on the listing's).
fn validate_kill(v: &Value) {
    let read = |name: &str| -> Value {
        let path = format!("{}/doc/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).expect("schema file")).expect("JSON")
    };
    let listing = read("sockstat.schema.json");
    let id = listing["$id"].as_str().unwrap().to_string();
    let validator = jsonschema::options()
        .with_resource(
            id,
            jsonschema::Resource::from_contents(listing).expect("listing schema"),
        )
        .build(&read("kill.schema.json"))
        .expect("kill schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "kill JSON: {errors:#?}\n{v:#}");
}

fn kill_json(out: &Out) -> Value {
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {out:#?}", out.what));
    validate_kill(&v);
    v
}

/// `(local port, remote port) -> result` for every socket of a kill document.
fn results(v: &Value) -> Vec<((u64, u64), String)> {
    sockets(v)
        .iter()
        .map(|s| {
            (
                (
                    s["local"]["port"].as_u64().unwrap(),
                    s["remote"]["port"].as_u64().unwrap_or(0),
                ),
                s["result"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn kill_by_port_and_state_aborts_exactly_those() {
    require_root!("kill_by_port_and_state_aborts_exactly_those (network namespace)");
    let ns = Netns::new();
    // Three connections to one listener, one to another, and the two listeners.
    let (l1, l2, mut conns, mut other) = in_ns(&ns, || {
        let l1 = TcpListener::bind("127.0.0.1:0").unwrap();
        let l2 = TcpListener::bind("127.0.0.1:0").unwrap();
        let conns: Vec<_> = (0..3).map(|_| connect(&l1)).collect();
        let other = connect(&l2);
        (l1, l2, conns, other)
    });
    let p1 = l1.local_addr().unwrap().port();
    let p = p1.to_string();

    let out = sockstat(&[
        "kill",
        "-p",
        &p,
        "--state",
        "ESTABLISHED",
        "--yes",
        "--json",
    ])
    .netns(&ns)
    .run()
    .no_panic();
    assert_eq!(out.code, Some(0), "{out:#?}");
    let v = kill_json(&out);
    assert_eq!(v["dry_run"], false);
    assert_eq!(
        v["summary"]["matched"], 6,
        "both ends of 3 connections: {v:#}"
    );
    let r = results(&v);
    let mut ends: Vec<(u64, u64)> = r.iter().map(|(e, _)| *e).collect();
    ends.sort();
    let mut want: Vec<(u64, u64)> = conns
        .iter()
        .flat_map(|(c, _)| {
            let cp = u64::from(c.local_addr().unwrap().port());
            [(cp, u64::from(p1)), (u64::from(p1), cp)]
        })
        .collect();
    want.sort();
    assert_eq!(ends, want, "exactly the connections on port {p1}");
    // One end of each local pair is killed; the other is closed by that kill's reset before its
    // own turn comes (gone), unless it came first.
    assert!(
        r.iter().all(|(_, res)| res == "killed" || res == "gone"),
        "{v:#}"
    );
    assert_eq!(v["summary"]["killed"].as_u64().unwrap(), 3, "{v:#}");
    for s in sockets(&v) {
        assert_eq!(s["state"], "ESTABLISHED");
        if s["result"] == "gone" {
            assert!(s["reason"].as_str().unwrap().contains("local peer"), "{s}");
        }
    }
    // What each process sees: the killed end ECONNABORTED, its peer the reset.
    for (c, s) in &mut conns {
        let errs = [read_error(c), read_error(s)];
        assert!(
            errs.contains(&Some(libc::ECONNABORTED)),
            "one end was aborted: {errs:?}"
        );
        assert!(
            errs.iter()
                .all(|e| matches!(*e, Some(libc::ECONNABORTED) | Some(libc::ECONNRESET))),
            "both ends failed: {errs:?}"
        );
    }
    // The other connection and both listeners are untouched.
    assert!(works(&mut other.0, &mut other.1), "the other connection");
    let (mut a, mut b) = in_ns(&ns, || connect(&l1));
    assert!(works(&mut a, &mut b), "the listener on the killed port");
    drop(l2);
}

#[test]
fn text_output_has_a_result_for_every_socket() {
    require_root!("text_output_has_a_result_for_every_socket (network namespace)");
    let ns = Netns::new();
    let (l, mut conn) = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = connect(&l);
        (l, c)
    });
    let p = l.local_addr().unwrap().port().to_string();
    let out = sockstat(&["kill", "-p", &p, "--yes"]).netns(&ns).ok();
    let t = parse_table(
        &out.stdout.lines().take(3).collect::<Vec<_>>().join("\n"),
        true,
    );
    assert_eq!(t.header[0], "RESULT", "{}", out.stdout);
    assert_eq!(t.header[1..4], ["USER", "COMMAND", "PID"], "{}", out.stdout);
    assert_eq!(t.rows.len(), 2, "{}", out.stdout);
    let me = std::process::id().to_string();
    for r in &t.rows {
        assert!(r[0] == "killed" || r[0] == "gone", "{r:?}");
        assert_eq!(r[3], me, "the holder's pid: {r:?}");
    }
    let summary = out.stdout.lines().nth(3).unwrap();
    assert!(summary.starts_with("killed "), "{}", out.stdout);
    // The listener matched the port too, and was left alone with a warning saying so.
    assert!(
        out.stderr
            .contains("1 listening or unconnected socket matches"),
        "{}",
        out.stderr
    );
    assert!(read_error(&mut conn.0).is_some() && read_error(&mut conn.1).is_some());
    let (mut a, mut b) = in_ns(&ns, || connect(&l));
    assert!(works(&mut a, &mut b), "the listener still accepts");
}

#[test]
fn dry_run_changes_nothing() {
    require_root!("dry_run_changes_nothing (network namespace)");
    let ns = Netns::new();
    let (l, mut conn) = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = connect(&l);
        (l, c)
    });
    let p = l.local_addr().unwrap().port().to_string();
    let before = sockstat(&["-p", &p]).netns(&ns).json();
    let out = sockstat(&["kill", "-p", &p, "-l", "-c", "--dry-run"])
        .netns(&ns)
        .ok();
    assert!(
        out.stdout
            .contains("would kill 3 sockets (dry run: nothing was killed)"),
        "{}",
        out.stdout
    );
    let out = sockstat(&["kill", "-p", &p, "-l", "-c", "--dry-run", "--json"])
        .netns(&ns)
        .ok();
    let v = kill_json(&out);
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["summary"]["matched"], 3);
    assert!(sockets(&v).iter().all(|s| s["result"] == "would-kill"));
    let after = sockstat(&["-p", &p]).netns(&ns).json();
    let cookies =
        |v: &Value| -> Vec<Value> { sockets(v).iter().map(|s| s["cookie"].clone()).collect() };
    assert_eq!(
        cookies(&before),
        cookies(&after),
        "every socket is still there"
    );
    assert!(works(&mut conn.0, &mut conn.1));
}

#[test]
fn refused_without_a_filter_or_off_a_terminal_without_yes() {
    // As root the refusals are checked inside a namespace of the test's own, so that a broken
    // refusal could not close anything else; without root the kernel would refuse anyway.
    let ns = is_root().then(Netns::new);
    let run = |args: &[&str]| match &ns {
        Some(ns) => sockstat(args).netns(ns).run().no_panic(),
        None => sockstat(args).run().no_panic(),
    };
    for args in [
        &["kill", "--yes"][..],
        &["kill", "-4", "-6", "-c", "-L", "-P", "tcp", "--yes"][..],
        &["kill", "-Z", "--yes"][..],
    ] {
        let out = run(args);
        assert_eq!(out.code, Some(2), "{out:#?}");
        assert_eq!(
            out.stderr_lines(),
            [
                "sockstat: kill needs a filter that names what to close (-p, --sport, --dport, \
              --src, --dst, --pid, --user, --command, --state, -l, --connected-to, -z or \
              --cookie): without one it would close every connection"
            ],
            "{args:?}"
        );
        assert!(out.stdout.is_empty());
    }
    for (args, msg) in [
        (
            &["-u", "kill", "-p", "80"][..],
            "-u does not apply to 'kill'",
        ),
        (
            &["kill", "-u", "-p", "80"][..],
            "-u does not apply to 'kill'",
        ),
        (&["kill", "-P", "raw", "-p", "80"][..], "not 'raw'"),
        (&["kill", "--cookie", "12x"][..], "invalid value '12x'"),
        (
            &["kill", "-p", "80", "--watch", "1"][..],
            "--watch does not apply to 'kill'",
        ),
    ] {
        let out = run(args);
        assert_eq!(out.code, Some(2), "{out:#?}");
        assert_eq!(out.stderr_lines().len(), 1, "{out:#?}");
        assert!(out.stderr.contains(msg), "{args:?}: {}", out.stderr);
    }

    // Off a terminal without --yes: the count, how to go on, and nothing closed.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let make = || -> (TcpListener, (TcpStream, TcpStream)) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = connect(&l);
        (l, c)
    };
    let (l, mut conn) = match &ns {
        Some(ns) => in_ns(ns, make),
        None => {
            drop(l);
            make()
        }
    };
    let p = l.local_addr().unwrap().port().to_string();
    let out = run(&["kill", "-p", &p, "--state", "ESTABLISHED"]);
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(
        out.stderr_lines(),
        [
            "sockstat: 2 sockets match and there is no terminal to confirm on: add --yes to kill \
          them (or --dry-run to list them)"
        ]
    );
    assert!(works(&mut conn.0, &mut conn.1));
}

/// Without CAP_NET_ADMIN every socket is refused: each says so, nothing is closed, and the exit
/// status is 3 (missing privileges), not 1 (some sockets could not be closed).
#[test]
fn an_unprivileged_user_gets_not_permitted_for_each_socket() {
    require_root!("an_unprivileged_user_gets_not_permitted_for_each_socket (setpriv)");
    let ns = Netns::new();
    let (l, mut conns) = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c: Vec<_> = (0..2).map(|_| connect(&l)).collect();
        (l, c)
    });
    let dir = tempdir();
    let bin = dir.path().join("sockstat");
    copy_sockstat(&bin);
    let p = l.local_addr().unwrap().port().to_string();
    let out = sockstat(&["kill", "-p", &p, "--yes", "--json"])
        .program(&bin)
        .prefix(&[
            "setpriv",
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
        ])
        .netns(&ns)
        .run()
        .no_panic();
    assert_eq!(out.code, Some(3), "{out:#?}");
    let v = kill_json(&out);
    assert_eq!(v["summary"]["matched"], 4);
    assert_eq!(v["summary"]["not_permitted"], 4);
    for s in sockets(&v) {
        assert_eq!(s["result"], "not-permitted", "{s}");
        assert!(s["reason"].as_str().unwrap().contains("CAP_NET_ADMIN"));
    }
    for (c, s) in &mut conns {
        assert!(works(c, s), "nothing was closed");
    }
}

/// SO_LINGER {on, 0}: close() sends a RST and leaves no TIME-WAIT entry, so the same addresses
/// can be used again at once.
fn close_with_reset(s: TcpStream) {
    let lin = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt with a valid linger struct on an fd we own.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&lin as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    drop(s);
}

/// A client bound to `local` (SO_REUSEADDR) connected to `l`. Reusing the four addresses of a
/// connection just reset waits for the kernel to have let go of them: on a loaded machine the
/// reset may be processed a little later (softirq work handed to ksoftirqd, a thread like any
/// other), and connect() meanwhile says EADDRNOTAVAIL (seen once in a suite run beside two
/// CPU-bound loops). Up to 10 s.
fn connect_from(local: SocketAddr, l: &TcpListener) -> (TcpStream, TcpStream) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match try_connect_from(local, l) {
            Ok(pair) => return pair,
            Err(e)
                if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("connect from {local}: {e}"),
        }
    }
}

/// One attempt of [`connect_from`].
fn try_connect_from(local: SocketAddr, l: &TcpListener) -> std::io::Result<(TcpStream, TcpStream)> {
    // SAFETY: plain socket calls on an fd we own from here on.
    let fd = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        OwnedFd::from_raw_fd(fd)
    };
    let one: libc::c_int = 1;
    let SocketAddr::V4(a) = local else {
        panic!("IPv4 only")
    };
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: valid option and address structs for this fd.
    unsafe {
        assert_eq!(
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&one as *const libc::c_int).cast(),
                4
            ),
            0
        );
        assert_eq!(
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
            ),
            0,
            "bind {local}: {}",
            std::io::Error::last_os_error()
        );
    }
    let c = TcpStream::from(fd);
    let SocketAddr::V4(to) = l.local_addr().unwrap() else {
        panic!("IPv4 only")
    };
    let ta = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: to.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*to.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a valid address struct.
    let rc = unsafe {
        libc::connect(
            c.as_raw_fd(),
            (&ta as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let (s, _) = l.accept().unwrap();
    Ok((c, s))
}

/// The library's own kill path: list, then the connection is replaced by a new one with the
/// same four addresses (a new cookie), then kill what was listed. The kernel finds the new
/// socket by the addresses, sees another cookie and refuses: both ends are reported gone and
/// the new connection works.
#[test]
fn a_socket_replaced_after_the_listing_survives() {
    require_root!("a_socket_replaced_after_the_listing_survives (network namespace)");
    let ns = Netns::new();
    in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (c, s) = connect_from("127.0.0.1:0".parse().unwrap(), &l);
        let client_addr = c.local_addr().unwrap();
        let mut q = sockstat::Query::new();
        q.select.ports = Some(sockstat::PortSet::parse(&client_addr.port().to_string()).unwrap());
        q.select.protos = Some(vec![sockstat::Proto::Tcp]);
        q.gather.source = sockstat::Source::Netlink;
        let snap = sockstat::collect(&q).expect("collect");
        let listed = sockstat::kill::select(snap, &q, None);
        assert_eq!(listed.sockets.len(), 2, "both ends: {:#?}", listed.sockets);

        close_with_reset(c);
        drop(s);
        let (mut c2, mut s2) = connect_from(client_addr, &l);
        assert_eq!(c2.local_addr().unwrap(), client_addr, "same addresses");

        let attempts = sockstat::kill::close(&listed, std::path::Path::new("/proc"));
        for a in &attempts {
            assert_eq!(a.outcome, sockstat::kill::Outcome::Gone, "{attempts:#?}");
            assert!(a.reason.as_deref().unwrap().contains("another socket"));
        }
        assert!(works(&mut c2, &mut s2), "the new connection is untouched");

        // The new client socket named with a cookie it does not have: the kernel refuses
        // (ENOENT: the reason, from the lookup that follows it, names the live cookie) and the
        // socket is not touched. With its own cookie, it is closed.
        let now = sockstat::kill::select(sockstat::collect(&q).expect("collect"), &q, None);
        let mut one = now.clone();
        one.sockets.retain(|s| {
            s.local
                == (sockstat::Endpoint::Inet {
                    addr: client_addr.ip(),
                    port: client_addr.port(),
                })
        });
        assert_eq!(one.sockets.len(), 1, "{:#?}", now.sockets);
        let live = one.sockets[0].cookie.unwrap();
        assert!(
            !listed.sockets.iter().any(|s| s.cookie == Some(live)),
            "a new cookie"
        );
        let mut wrong = one.clone();
        wrong.sockets[0].cookie = Some(live ^ 0x5555);
        let a = sockstat::kill::close(&wrong, std::path::Path::new("/proc"));
        assert_eq!(a[0].outcome, sockstat::kill::Outcome::Gone, "{a:#?}");
        assert_eq!(
            a[0].reason.as_deref(),
            Some(
                format!(
                    "another socket has these addresses now (cookie {live}); it was left alone"
                )
                .as_str()
            )
        );
        assert!(works(&mut c2, &mut s2), "a wrong cookie closes nothing");
        let a = sockstat::kill::close(&one, std::path::Path::new("/proc"));
        assert_eq!(a[0].outcome, sockstat::kill::Outcome::Killed, "{a:#?}");
        assert_eq!(read_error(&mut c2), Some(libc::ECONNABORTED));
    });
}

/// A kill from outside the namespace with -z enters it as the listing does.
#[test]
fn zone_kill_enters_the_namespace() {
    require_root!("zone_kill_enters_the_namespace (network namespace)");
    let ns = Netns::new();
    let (l, mut conn) = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = connect(&l);
        (l, c)
    });
    let p = l.local_addr().unwrap().port().to_string();
    let out = sockstat(&["kill", "-z", &ns.name, "-p", &p, "-c", "--yes", "--json"])
        .run()
        .no_panic();
    assert_eq!(out.code, Some(0), "{out:#?}");
    let v = kill_json(&out);
    assert_eq!(v["summary"]["matched"], 2, "{v:#}");
    for s in sockets(&v) {
        assert_eq!(s["zone"]["name"], ns.name.as_str(), "{s}");
    }
    assert_eq!(v["summary"]["killed"], 1, "{v:#}");
    assert!(read_error(&mut conn.0).is_some() && read_error(&mut conn.1).is_some());
}

/// TIME-WAIT entries: dropped on Linux 6.0 and later; reported unsupported before.
#[test]
fn time_wait_entries() {
    require_root!("time_wait_entries (network namespace)");
    let ns = Netns::new();
    let (l, client_port) = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (c, mut s) = connect(&l);
        let port = c.local_addr().unwrap().port();
        // The client closes first: the TIME-WAIT entry is on its side.
        c.shutdown(Shutdown::Both).unwrap();
        drop(c);
        let mut buf = [0u8; 1];
        let _ = s.read(&mut buf);
        drop(s);
        (l, port)
    });
    let p = client_port.to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    while sockets(
        &sockstat(&["-p", &p, "--state", "TIME_WAIT"])
            .netns(&ns)
            .json(),
    )
    .is_empty()
    {
        assert!(Instant::now() < deadline, "no TIME-WAIT entry appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = sockstat(&["kill", "--state", "TIME_WAIT", "-p", &p, "--yes", "--json"])
        .netns(&ns)
        .run()
        .no_panic();
    let v = kill_json(&out);
    assert_eq!(v["summary"]["matched"], 1, "{v:#}");
    if kernel_at_least(6, 0) {
        assert_eq!(out.code, Some(0), "{out:#?}");
        assert_eq!(sockets(&v)[0]["result"], "killed");
        let left = sockstat(&["-p", &p, "--state", "TIME_WAIT"])
            .netns(&ns)
            .json();
        assert!(sockets(&left).is_empty(), "{left:#}");
    } else {
        assert_eq!(out.code, Some(1), "{out:#?}");
        assert_eq!(sockets(&v)[0]["result"], "unsupported");
    }
    drop(l);
}

/// A UDP socket: its pending receive fails with ECONNABORTED; an unconnected one is only
/// closed when asked for by state.
#[test]
fn udp_sockets() {
    require_root!("udp_sockets (network namespace)");
    let ns = Netns::new();
    let (connected, unconnected) = in_ns(&ns, || {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        (a, b)
    });
    let pa = connected.local_addr().unwrap().port();
    let pb = unconnected.local_addr().unwrap().port();
    let ports = format!("{pa},{pb}");
    let out = sockstat(&["kill", "-P", "udp", "-p", &ports, "--yes", "--json"])
        .netns(&ns)
        .ok();
    let v = kill_json(&out);
    assert_eq!(
        results(&v),
        [((u64::from(pa), u64::from(pb)), "killed".to_string())],
        "{v:#}"
    );
    assert!(warnings(&v).iter().any(|w| w["code"] == "listeners-kept"));
    connected
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 8];
    let e = connected.recv(&mut buf).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ECONNABORTED), "{e}");

    let out = sockstat(&["kill", "-p", &pb.to_string(), "--state", "UNCONN", "--yes"])
        .netns(&ns)
        .ok();
    assert!(
        out.stdout.lines().nth(1).unwrap().starts_with("killed "),
        "{}",
        out.stdout
    );
}

// ---------------------------------------------------------------------------------------------
// The confirmation prompt, on a pseudo-terminal.

/// A command running with standard input, output and error on a pseudo-terminal.
struct Pty {
    master: File,
    child: std::process::Child,
    seen: Vec<u8>,
}

impl Pty {
    fn spawn(cmd: Cmd) -> Pty {
        use std::process::Stdio;
        // SAFETY: plain libc pty calls; every fd is checked and owned right away.
        let (master, slave) = unsafe {
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
        };
        let mut c = cmd.command();
        c.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        let child = c.spawn().expect("spawn on pty");
        drop(c);
        Pty {
            master: File::from(master),
            child,
            seen: Vec::new(),
        }
    }

    /// Reads until `what` has appeared (or the output ends, or 20 s pass); returns the output
    /// so far, without carriage returns.
    fn read_until(&mut self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut chunk = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&self.seen).replace('\r', "");
            if text.contains(what) || Instant::now() > deadline {
                return text;
            }
            let mut pfd = libc::pollfd {
                fd: self.master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, 100) };
            if n <= 0 {
                continue;
            }
            match self.master.read(&mut chunk) {
                Ok(0) | Err(_) => return text, // EIO: every slave fd is closed
                Ok(n) => self.seen.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn answer(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
    }

    fn finish(mut self) -> (Option<i32>, String) {
        let text = self.read_until("\u{0}never\u{0}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return (st.code(), text);
            }
            assert!(Instant::now() < deadline, "did not exit: {text}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// On a terminal: the list with its owners and a count, then the question. "n" closes nothing;
/// "y" closes what was listed, and a connection replaced while the question waited is left
/// alone (gone) while its replacement keeps working.
#[test]
fn confirmation_on_a_terminal() {
    require_root!("confirmation_on_a_terminal (network namespace)");
    let ns = Netns::new();
    let (l, mut keep, victim) = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let keep = connect(&l);
        let victim = connect_from("127.0.0.1:0".parse().unwrap(), &l);
        (l, keep, victim)
    });
    let p = l.local_addr().unwrap().port().to_string();
    let args = ["kill", "-p", &p, "--state", "ESTABLISHED"];

    let mut pty = Pty::spawn(sockstat(&args).netns(&ns));
    let text = pty.read_until("[y/N] ");
    assert!(text.ends_with("kill these 4 sockets? [y/N] "), "{text}");
    let t = parse_table(
        text.lines().take(5).collect::<Vec<_>>().join("\n").as_str(),
        true,
    );
    assert_eq!(t.header[..3], ["USER", "COMMAND", "PID"], "{text}");
    assert_eq!(t.rows.len(), 4, "{text}");
    pty.answer("n\n");
    let (code, text) = pty.finish();
    assert_eq!(code, Some(1), "{text}");
    assert!(text.ends_with("nothing killed\n"), "{text}");
    assert!(works(&mut keep.0, &mut keep.1), "declined: nothing closed");

    let mut pty = Pty::spawn(sockstat(&args).netns(&ns));
    let text = pty.read_until("[y/N] ");
    assert!(text.ends_with("kill these 4 sockets? [y/N] "), "{text}");
    // While the question waits, the victim connection is replaced by another with the same
    // addresses.
    let client_addr = victim.0.local_addr().unwrap();
    close_with_reset(victim.0);
    drop(victim.1);
    let (mut c2, mut s2) = in_ns(&ns, || connect_from(client_addr, &l));
    pty.answer("y\n");
    let (code, text) = pty.finish();
    assert_eq!(code, Some(0), "{text}");
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("RESULT"))
        .collect();
    let t = parse_table(&table[..5].join("\n"), true);
    let local = t.col("LOCAL ADDRESS");
    let foreign = t.col("FOREIGN ADDRESS");
    let victim_cell = format!("127.0.0.1:{}", client_addr.port());
    for r in &t.rows {
        let is_victim = r[local] == victim_cell || r[foreign] == victim_cell;
        if is_victim {
            assert_eq!(r[0], "gone", "the replaced connection: {text}");
        } else {
            assert!(r[0] == "killed" || r[0] == "gone", "{text}");
        }
    }
    assert!(
        works(&mut c2, &mut s2),
        "the replacement is untouched: {text}"
    );
    assert!(
        read_error(&mut keep.0).is_some(),
        "the listed connection was closed"
    );
}

/// The listing's socket is left open in the schema so that the kill document can extend it:
/// the listing itself still rejects a field it does not define.
#[test]
fn the_listing_schema_still_rejects_unknown_socket_fields() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let p = l.local_addr().unwrap().port().to_string();
    let mut v = sockstat(&["-l", "-p", &p]).json();
    assert_eq!(sockets(&v).len(), 1);
    v["sockets"][0]["result"] = "killed".into();
    let listing: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/doc/sockstat.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&listing).unwrap();
    assert!(
        !validator.is_valid(&v),
        "a listing socket with \"result\" must not validate"
    );
    // The same object in a kill document is valid.
    let doc = serde_json::json!({
        "version": 1, "dry_run": false, "sockets": v["sockets"].clone(),
        "summary": {"matched": 1, "killed": 1, "gone": 0, "not_permitted": 0,
                    "unsupported": 0, "failed": 0},
        "warnings": []
    });
    validate_kill(&doc);
}

/// `--cookie` names sockets exactly, as the listing's JSON shows them (one or a list).
#[test]
fn kill_by_cookie() {
    require_root!("kill_by_cookie (network namespace)");
    let ns = Netns::new();
    let (l, mut a, mut b) = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = connect(&l);
        let b = connect(&l);
        (l, a, b)
    });
    let p = l.local_addr().unwrap().port();
    let listing = sockstat(&["-p", &p.to_string(), "-c"]).netns(&ns).json();
    let cookie_of = |port: u16| -> String {
        sockets(&listing)
            .iter()
            .find(|s| s["local"]["port"] == port)
            .unwrap()["cookie"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let client_a = cookie_of(a.0.local_addr().unwrap().port());
    let out = sockstat(&["kill", "--cookie", &client_a, "--yes", "--json"])
        .netns(&ns)
        .ok();
    let v = kill_json(&out);
    assert_eq!(v["summary"]["matched"], 1, "{v:#}");
    assert_eq!(sockets(&v)[0]["cookie"], client_a.as_str());
    assert_eq!(sockets(&v)[0]["result"], "killed");
    assert_eq!(read_error(&mut a.0), Some(libc::ECONNABORTED));
    assert!(works(&mut b.0, &mut b.1), "the other connection");
    // A list: the first connection's client (gone now), the second's, and a cookie no socket
    // has: exactly the one that still exists matches.
    let client_b = cookie_of(b.0.local_addr().unwrap().port());
    let list = format!("{client_a},{client_b},1");
    let out = sockstat(&["kill", "--cookie", &list, "--dry-run", "--json"])
        .netns(&ns)
        .ok();
    let v = kill_json(&out);
    assert_eq!(v["summary"]["matched"], 1, "{v:#}");
    assert_eq!(sockets(&v)[0]["cookie"], client_b.as_str());
}

/// `sockstat ports`'s critical "ports running out" finding ends with the command that frees the
/// ports held in TIME-WAIT; run as printed, it does.
#[test]
fn the_ports_finding_prints_the_command_that_frees_them() {
    require_root!("the_ports_finding_prints_the_command_that_frees_them (network namespace)");
    if !kernel_at_least(6, 0) {
        eprintln!("SKIPPED: the_ports_finding_prints_the_command_that_frees_them: TIME-WAIT entries can be closed from Linux 6.0");
        return;
    }
    let ns = Netns::new();
    ns.exec(
        "sysctl",
        &["-q", "-w", "net.ipv4.ip_local_port_range=40000 40009"],
    )
    .ok();
    let l = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:5555").unwrap();
        for _ in 0..9 {
            let (c, mut s) = connect(&l);
            // The client closes first: the TIME-WAIT entry holds its ephemeral port.
            drop(c);
            let mut buf = [0u8; 1];
            let _ = s.read(&mut buf);
        }
        l
    });
    let out = sockstat(&["ports", "--json"]).netns(&ns).ok();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let f = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "ephemeral-ports-critical")
        .unwrap_or_else(|| panic!("no critical finding: {v:#}"));
    let advice = f["advice"].as_str().unwrap();
    let (_, args) = advice
        .rsplit_once(": sockstat kill ")
        .unwrap_or_else(|| panic!("no kill command in {advice:?}"));
    assert_eq!(
        args, "--state TIME_WAIT --src 127.0.0.1 --dst 127.0.0.1 --dport 5555",
        "{advice}"
    );
    let mut cmd: Vec<&str> = vec!["kill"];
    cmd.extend(args.split(' '));
    cmd.extend(["--yes", "--json"]);
    let out = sockstat(&cmd).netns(&ns).ok();
    let k = kill_json(&out);
    assert_eq!(k["summary"]["matched"], 9, "{k:#}");
    assert_eq!(k["summary"]["killed"], 9, "{k:#}");
    let after: Value =
        serde_json::from_str(&sockstat(&["ports", "--json"]).netns(&ns).ok().stdout).unwrap();
    assert_eq!(after["destinations"], serde_json::json!([]), "{after:#}");
    drop(l);
}

/// A server that never closes what its clients closed: `diagnose` reports the pile-up in
/// CLOSE_WAIT as one finding with the count, and the command it prints aborts exactly those
/// connections, leaving the listener and a live connection on the same port alone, and this
/// host's own connection to another server's port of the same number, in CLOSE_WAIT too (which
/// a kill by `-p`, either end's port, took with them: issue 28).
#[test]
fn diagnose_prints_the_kill_for_a_close_wait_pileup_and_it_frees_exactly_those() {
    require_root!("diagnose_prints_the_kill_for_a_close_wait_pileup (network namespace)");
    let ns = Netns::new();
    let (l, held, mut live, outgoing) = in_ns(&ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        // Ten clients that close at once: the server ends get their FIN and sit in CLOSE_WAIT.
        // The server reads four of them to the end (read() returns 0); the last client sends 5
        // bytes before closing, which the server leaves unread.
        let held: Vec<TcpStream> = (0..10)
            .map(|i| {
                let (mut c, mut s) = connect(&l);
                if i == 9 {
                    c.write_all(b"hello").unwrap();
                }
                drop(c);
                if i < 4 {
                    assert_eq!(s.read(&mut [0u8; 16]).unwrap(), 0, "the end of the stream");
                }
                s
            })
            .collect();
        let live = connect(&l);
        // Another server on the same port number (on 127.0.0.2) closes this host's connection
        // to it: the client end, from 127.0.0.1 as the pile-up, sits in CLOSE_WAIT.
        let port = l.local_addr().unwrap().port();
        let other = TcpListener::bind(("127.0.0.2", port)).unwrap();
        let (outgoing, server) = connect_from("127.0.0.1:0".parse().unwrap(), &other);
        drop(server);
        drop(other);
        (l, held, live, outgoing)
    });
    let port = l.local_addr().unwrap().port();
    let p = port.to_string();
    let out = sockstat(&["diagnose", "--interval", "0.3", "-p", &p, "--json"])
        .netns(&ns)
        .run()
        .no_panic();
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("diagnose JSON ({e}): {out:#?}"));
    validate_against("diagnose.schema.json", &v);
    let found: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "close-wait")
        .collect();
    assert_eq!(found.len(), 1, "one finding for the pile-up: {v:#}");
    let f = found[0];
    assert_eq!(out.code, Some(1), "a warning sets exit status 1: {out:#?}");
    assert_eq!(f["count"], 10, "{f:#}");
    assert_eq!(f["severity"], "warning", "{f:#}");
    assert_eq!(f["evidence"]["side"], "server", "{f:#}");
    // The kernel's receive queue counts each unread FIN as a byte: 6 ends not read, 5 bytes of
    // data, and the summary says both (doc/diagnose.md#close-wait-r11).
    assert_eq!(f["evidence"]["recv_q_bytes_total"], 11, "{f:#}");
    assert_eq!(f["evidence"]["eof_unread"], 6, "{f:#}");
    assert_eq!(f["evidence"]["unread_data_bytes"], 5, "{f:#}");
    assert_eq!(f["evidence"]["with_unread_data"], 1, "{f:#}");
    let summary = f["summary"].as_str().unwrap();
    assert!(
        summary.contains("read the end of 4 of them (read() returned 0), not of the other 6")
            && summary.contains("1 still holds 5 bytes of data unread"),
        "{summary}"
    );
    let advice = f["advice"].as_str().unwrap();
    let want = format!(
        "sockstat kill --state CLOSE_WAIT --src 127.0.0.1 --sport {port} --pid {}",
        std::process::id()
    );
    assert!(advice.ends_with(&want), "{advice}");

    // The printed command, as an operator would paste it (with --yes off a terminal).
    let args: Vec<&str> = want.split(' ').skip(1).collect();
    let out = sockstat(&args)
        .args(&["--yes", "--json"])
        .netns(&ns)
        .run()
        .no_panic();
    assert_eq!(out.code, Some(0), "{out:#?}");
    let k = kill_json(&out);
    assert_eq!(k["summary"]["killed"], 10, "{k:#}");
    for s in sockets(&k) {
        assert_eq!(s["state"], "CLOSE_WAIT", "{s}");
        assert_eq!(s["local"]["port"], u64::from(port), "{s}");
    }
    // Gone from the kernel's table although their process still holds the descriptors (a read
    // on one returns the EOF it already had: the FIN came first); the outgoing connection in
    // CLOSE_WAIT, to port {port} elsewhere, is still there.
    let left = sockstat(&["--state", "CLOSE_WAIT", "-p", &p, "--json"])
        .netns(&ns)
        .ok()
        .json();
    let left = sockets(&left);
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(
        left[0]["local"]["port"],
        u64::from(outgoing.local_addr().unwrap().port()),
        "{left:#?}"
    );
    assert_eq!(left[0]["remote"]["address"], "127.0.0.2", "{left:#?}");
    drop(held);
    drop(outgoing);
    assert!(works(&mut live.0, &mut live.1), "the live connection");
    let (mut a, mut b) = in_ns(&ns, || connect(&l));
    assert!(works(&mut a, &mut b), "the listener");
}
