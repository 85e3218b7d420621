//! Issue 16: a filtered listing finds its sockets and their holders its own way (the filters
//! pushed into the kernel's dump, an owner scan that looks only for the sockets shown, `--pid`
//! and `--command` reading only the selected processes' fd tables, a second scan for the unix
//! peers' holders), and must give the same answer as the full listing filtered afterwards. Here,
//! over random filters, against a table that churns meanwhile (a thread in the test's namespace
//! opens and closes TCP connections the whole time), with the BPF and the /proc owner scans in
//! turn: the same sockets, the same holders with the same status, the same unix peers' holders.

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sockstat::{Endpoint, Owner, OwnerScan, PortSet, Proto, Query, Snapshot, Socket, State};

use crate::common::*;

/// How many random queries one run compares.
const QUERIES: usize = 40;
/// The churn stops after this long even if the test does not finish.
const CHURN_LIMIT: Duration = Duration::from_secs(120);

/// A deterministic generator (xorshift), seeded per run; the seed is printed to reproduce it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn chance(&mut self, in_n: u64) -> bool {
        self.next() % in_n == 0
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[(self.next() % v.len() as u64) as usize]
    }
}

/// A thread inside the namespace that connects to its own listener and closes, again and again,
/// until told to stop (or [`CHURN_LIMIT`]): TCP sockets come and go, and TIME-WAIT entries pile
/// up, on the port it returns.
struct Churn {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
    port: u16,
}

impl Churn {
    fn start(ns: &Netns) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let path = format!("/run/netns/{}", ns.name);
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let f = std::fs::File::open(&path).expect("open the namespace");
            // SAFETY: setns on this thread only, with a valid namespace fd.
            let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            let l = TcpListener::bind("127.0.0.1:0").expect("churn listener");
            let addr = l.local_addr().unwrap();
            tx.send(addr.port()).unwrap();
            let t0 = Instant::now();
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) && t0.elapsed() < CHURN_LIMIT {
                if let Ok(c) = TcpStream::connect(addr) {
                    if let Ok((s, _)) = l.accept() {
                        drop(c);
                        drop(s);
                        n += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            n
        });
        let port = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("churn port");
        Churn {
            stop,
            thread: Some(thread),
            port,
        }
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// True for the churn's own sockets, which differ between any two listings.
fn churning(s: &Socket, port: u16) -> bool {
    let p = |e: Option<&Endpoint>| matches!(e, Some(Endpoint::Inet { port: x, .. }) if *x == port);
    p(Some(&s.local)) || p(s.remote.as_ref())
}

/// What a listing says about one socket: its holders (sorted), their status, and its unix
/// peer's holders (sorted).
type Said = (Vec<Owner>, sockstat::OwnersStatus, Option<Vec<Owner>>);

fn said(snap: &Snapshot, sockets: &[Socket], churn: u16) -> BTreeMap<u64, Said> {
    let listed: std::collections::HashMap<u64, &Socket> = snap
        .sockets
        .iter()
        .filter(|s| s.proto == Proto::Unix)
        .filter_map(|s| Some((s.id?, s)))
        .collect();
    sockets
        .iter()
        .filter(|s| !churning(s, churn))
        .map(|s| {
            let mut owners = s.owners.clone();
            owners.sort();
            let peer = match s.remote {
                Some(Endpoint::UnixPeer { peer, .. }) => {
                    let mut h = snap
                        .peer_holders(peer, |p| listed.get(&p).copied())
                        .to_vec();
                    h.sort();
                    Some(h)
                }
                _ => None,
            };
            (
                s.cookie.expect("a sock_diag socket has a cookie"),
                (owners, s.owners_status, peer),
            )
        })
        .collect()
}

/// Whether `s` passes the query's port filters, read here from the socket's own ends and the
/// sets' ranges (not by the library's filter): `-p` either end, `--sport` the local one,
/// `--dport` the remote one; with any of them, only Internet sockets that have ports (not raw
/// or ping sockets, whose "port" is a protocol or an identifier).
fn ports_pass(q: &Query, s: &Socket) -> bool {
    if q.select.ports.is_none() && q.select.sport.is_none() && q.select.dport.is_none() {
        return true;
    }
    let port = |e: Option<&Endpoint>| match e {
        Some(Endpoint::Inet { port, .. }) => Some(*port),
        _ => None,
    };
    if !matches!(
        s.proto,
        Proto::Tcp | Proto::Udp | Proto::Udplite | Proto::Sctp | Proto::Mptcp
    ) {
        return false;
    }
    let (lp, rp) = (port(Some(&s.local)), port(s.remote.as_ref()));
    let within = |set: &Option<PortSet>, p: Option<u16>| match set {
        None => true,
        Some(set) => p.is_some_and(|p| set.ranges().iter().any(|&(lo, hi)| (lo..=hi).contains(&p))),
    };
    let either =
        q.select.ports.is_none() || within(&q.select.ports, lp) || within(&q.select.ports, rp);
    either && within(&q.select.sport, lp) && within(&q.select.dport, rp)
}

/// A random query over the namespace `zone`, and the command-line form of its filters (for the
/// failure message).
fn random_query(
    r: &mut Rng,
    zone: &str,
    ports: &[u16],
    pids: &[u32],
    root: bool,
) -> (Query, String) {
    let mut q = Query::new();
    q.select.zones = sockstat::ZoneSelect::Named(zone.to_string());
    q.gather.resolve_users = false;
    let mut args = Vec::new();
    if r.chance(3) {
        let fam = r.next() % 7 + 1;
        q.select.families.inet = fam & 1 != 0;
        q.select.families.inet6 = fam & 2 != 0;
        q.select.families.unix = fam & 4 != 0;
        args.push(format!("families {fam:03b}"));
    }
    match r.next() % 4 {
        0 => {
            q.select.listening = true;
            args.push("-l".into());
        }
        1 => {
            q.select.connected = true;
            args.push("-c".into());
        }
        _ => {}
    }
    if r.chance(4) {
        let p = *r.pick(&[Proto::Tcp, Proto::Udp, Proto::Unix]);
        q.select.protos = Some(vec![p]);
        args.push(format!("-P {}", p.name()));
    }
    if r.chance(4) {
        let p = *r.pick(ports);
        q.select.ports = Some(PortSet::parse(&p.to_string()).unwrap());
        args.push(format!("-p {p}"));
    }
    if r.chance(4) {
        let p = *r.pick(ports);
        q.select.sport = Some(PortSet::parse(&p.to_string()).unwrap());
        args.push(format!("--sport {p}"));
    }
    if r.chance(4) {
        // A port, or a range around one: the remote ends of connections to it and from it.
        let p = *r.pick(ports);
        let text = if r.chance(2) {
            p.to_string()
        } else {
            format!("{}-{}", p.saturating_sub(1), p.saturating_add(1))
        };
        q.select.dport = Some(PortSet::parse(&text).unwrap());
        args.push(format!("--dport {text}"));
    }
    if r.chance(5) {
        let a = *r.pick(&["127.0.0.1", "::1", "127.0.0.0/8"]);
        q.select.src = Some(sockstat::query::parse_prefix(a).unwrap());
        args.push(format!("--src {a}"));
    }
    if r.chance(6) {
        let a = *r.pick(&["127.0.0.1", "::1"]);
        q.select.dst = Some(sockstat::query::parse_prefix(a).unwrap());
        args.push(format!("--dst {a}"));
    }
    if r.chance(5) {
        let st = *r.pick(&[
            State::Listen,
            State::Established,
            State::TimeWait,
            State::Unconn,
        ]);
        q.select.states = Some(vec![st]);
        args.push(format!("--state {}", st.name()));
    }
    match r.next() % 5 {
        0 => {
            let p = *r.pick(pids);
            q.select.pids = Some(vec![p]);
            args.push(format!("--pid {p}"));
        }
        1 => {
            let c = *r.pick(&["fe-alpha", "fe-*", "nomatch"]);
            q.select.command = Some(sockstat::query::CommandMatch::parse(c).unwrap());
            args.push(format!("--command {c}"));
        }
        2 => {
            q.select.uid = Some(0);
            args.push("--user 0".into());
        }
        _ => {}
    }
    q.gather.owner_scan = if root && r.chance(2) {
        OwnerScan::Bpf
    } else {
        OwnerScan::Proc
    };
    args.push(format!("--owner-scan {:?}", q.gather.owner_scan));
    (q, args.join(" "))
}

#[test]
fn filtered_listings_equal_the_full_listing_filtered_afterwards() {
    require_root!(
        "filtered_listings_equal_the_full_listing_filtered_afterwards (a network namespace)"
    );
    let _quiet = timing_sensitive();
    let ns = Netns::new();
    let dir = tempdir();
    let d = dir.path().display();
    // alpha: a bit of everything, then a fork that shares all of it (every socket two holders);
    // beta: more of its own.
    let alpha = Holder::spawn_in(
        &ns,
        &[
            "comm:fe-alpha".to_string(),
            "tcp4-listen:127.0.0.1:0".into(),
            "tcp6-listen:[::1]:0".into(),
            "tcp4-pair".into(),
            "tcp6-pair".into(),
            "udp4:127.0.0.1:0".into(),
            "udp6:[::1]:0".into(),
            format!("unix-listen:{d}/a-l.sock"),
            format!("unix-conn:{d}/a-c.sock"),
            "unix-pair".into(),
            format!("unix-dgram:{d}/a-d.sock"),
            "timewait:127.0.0.1".into(),
            "fork".into(),
        ],
    );
    let beta = Holder::spawn_in(
        &ns,
        &[
            "comm:fe-beta".to_string(),
            "tcp4-pair".into(),
            "udp4:127.0.0.1:0".into(),
            format!("unix-conn:{d}/b-c.sock"),
            "unix-pairs:3".into(),
        ],
    );
    let churn = Churn::start(&ns);
    let mut ports: Vec<u16> = [&alpha, &beta]
        .iter()
        .flat_map(|h| h.report.items.iter())
        .flat_map(|i| i.socks.iter())
        .filter_map(|s| s.local.as_ref().and_then(|a| a.port))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    let pids = [alpha.pid(), alpha.child_pid(), beta.pid()];
    // The port beta's client connected to: its listener's and server end's local port, its
    // client's remote one.
    let served = beta
        .report
        .items
        .iter()
        .find(|i| i.kind == "tcp4-pair")
        .expect("beta's tcp4-pair")
        .role("listener")
        .port();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("filter_equivalence: seed {seed}");
    let mut r = Rng(seed);
    let root = is_root();
    let mut nonempty = 0;
    // A few queries every run makes (each plan of the owner scan, unix peers held by two
    // processes), then random ones.
    let fixed = |i: usize| -> Option<(Query, String)> {
        let mut q = Query::new();
        q.select.zones = sockstat::ZoneSelect::Named(ns.name.clone());
        q.gather.resolve_users = false;
        q.gather.owner_scan = if root && i % 2 == 0 {
            OwnerScan::Bpf
        } else {
            OwnerScan::Proc
        };
        let args = match i {
            0 => {
                q.select.pids = Some(vec![pids[1]]);
                "--pid (alpha's child)"
            }
            1 => {
                q.select.pids = Some(vec![pids[0]]);
                q.select.families.inet = false;
                q.select.families.inet6 = false;
                "-u --pid (alpha)"
            }
            2 => {
                q.select.command = Some(sockstat::query::CommandMatch::parse("fe-b*").unwrap());
                "--command 'fe-b*'"
            }
            3 => {
                q.select.listening = true;
                "-l"
            }
            4 => {
                q.select.connected = true;
                q.select.families.inet = false;
                q.select.families.inet6 = false;
                "-c -u"
            }
            5 => {
                q.select.states = Some(vec![State::TimeWait, State::Established]);
                "--state time-wait,established"
            }
            6 => {
                q.select.sport = Some(PortSet::parse(&served.to_string()).unwrap());
                "--sport (beta's listener)"
            }
            7 => {
                q.select.dport = Some(PortSet::parse(&served.to_string()).unwrap());
                "--dport (beta's listener)"
            }
            8 => {
                q.select.sport = Some(PortSet::parse("1024-65535").unwrap());
                q.select.dport = Some(PortSet::parse(&format!("1-{served}")).unwrap());
                q.select.connected = true;
                "-c --sport 1024-65535 --dport 1-(beta's listener)"
            }
            _ => return None,
        };
        let args = format!("{args} --owner-scan {:?}", q.gather.owner_scan);
        Some((q, args))
    };
    for i in 0..QUERIES {
        let (q, args) = match fixed(i) {
            Some(f) => f,
            None => random_query(&mut r, &ns.name, &ports, &pids, root),
        };
        // The full listing, owners by the default scan, filtered here.
        let mut full_q = Query::new();
        full_q.select.zones = q.select.zones.clone();
        full_q.gather.resolve_users = false;
        let full = sockstat::collect(&full_q).expect("full listing");
        // The port filters are applied here by the test's own reading of each socket's ends;
        // the rest by the library's filter.
        let mut others = q.clone();
        others.select.ports = None;
        others.select.sport = None;
        others.select.dport = None;
        let inet_only =
            q.select.ports.is_some() || q.select.sport.is_some() || q.select.dport.is_some();
        let mut expect: Vec<Socket> = full
            .sockets
            .iter()
            .filter(|s| others.matches_socket(s) && ports_pass(&q, s))
            .filter(|s| !inet_only || s.proto.is_inet())
            .cloned()
            .collect();
        sockstat::join::apply_owner_filters(&q, &mut expect, &full);
        let got = sockstat::collect(&q).expect("filtered listing");
        let (want, have) = (
            said(&full, &expect, churn.port),
            said(&got, &got.sockets, churn.port),
        );
        let only_want: Vec<_> = want.keys().filter(|k| !have.contains_key(k)).collect();
        let only_have: Vec<_> = have.keys().filter(|k| !want.contains_key(k)).collect();
        assert!(
            only_want.is_empty() && only_have.is_empty(),
            "query {i} ({args}, seed {seed}): sockets only in the full listing filtered: {only_want:?}; only in the filtered listing: {only_have:?}"
        );
        for (cookie, w) in &want {
            assert_eq!(
                &have[cookie], w,
                "query {i} ({args}, seed {seed}): socket {cookie}: filtered listing (left) vs the full listing filtered (right)"
            );
        }
        let peers = want.values().filter(|w| w.2.is_some()).count();
        eprintln!(
            "query {i} ({args}): {} sockets, {peers} with a unix peer",
            want.len()
        );
        if !want.is_empty() {
            nonempty += 1;
        }
    }
    drop(churn);
    assert!(
        nonempty >= QUERIES / 4,
        "only {nonempty} of {QUERIES} queries selected anything: the filters drawn test little"
    );
}
