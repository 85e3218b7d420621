//! A small WAN lab for tests: two network namespaces joined by a path with delay, loss, a rate
//! limit and a bottleneck queue, and helpers to run code inside a namespace.
//!
//! The path is a [`Forwarder`]: one TUN device in each namespace, and a thread that copies IP
//! packets between them through a delay line, dropping a share of them and pacing them to a rate
//! through a bounded queue when asked. The kernel this project is developed on has no
//! `sch_netem`, and a rate limit (`tbf`) on a sender's own device would not make a bottleneck
//! queue anyway: TCP Small Queues keeps each socket's packets in the local qdisc to about a
//! millisecond, so competing flows would never see queueing delay. The forwarder's queue is
//! away from the senders, like a router's, and behaves the same on every kernel.
//!
//! Everything is torn down in `Drop` (namespaces deleted, forwarder stopped), and the forwarder
//! stops by itself after a bounded run time. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).

pub mod matrix;
pub mod sock;
pub mod workload;

use std::collections::VecDeque;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// True when running as root (the lab needs it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs a command, failing with its stderr when it fails.
pub fn sh(args: &[&str]) -> io::Result<()> {
    let out = Command::new(args[0]).args(&args[1..]).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// A named network namespace (`ip netns add`), deleted on drop.
pub struct Netns {
    /// The `ip netns` name.
    pub name: String,
}

impl Netns {
    /// Creates the namespace (replacing a stale one of the same name) with `lo` up.
    pub fn new(name: &str) -> io::Result<Netns> {
        let _ = sh(&["ip", "netns", "del", name]);
        sh(&["ip", "netns", "add", name])?;
        let ns = Netns { name: name.into() };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// `ip -n NAME ARGS...`.
    pub fn ip(&self, args: &[&str]) -> io::Result<()> {
        let mut v = vec!["ip", "-n", &self.name];
        v.extend_from_slice(args);
        sh(&v)
    }

    /// Sets a sysctl inside the namespace (`net.ipv4.tcp_window_scaling`).
    pub fn sysctl(&self, key: &str, value: &str) -> io::Result<()> {
        sh(&[
            "ip",
            "netns",
            "exec",
            &self.name,
            "sysctl",
            "-q",
            "-w",
            &format!("{key}={value}"),
        ])
    }

    /// Runs `f` on a new thread that has joined this namespace; sockets it creates live there.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || -> io::Result<T> {
            enter(&path)?;
            Ok(f())
        })
        .join()
        .map_err(|_| io::Error::other("namespace thread panicked"))?
    }

    /// Spawns a long-lived thread inside the namespace.
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<io::Result<T>> {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || -> io::Result<T> {
            enter(&path)?;
            Ok(f())
        })
    }

    /// A command that runs inside the namespace (`ip netns exec NAME PROGRAM`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = sh(&["ip", "netns", "del", &self.name]);
    }
}

/// Moves the calling thread into the network namespace at `path`.
pub fn enter(path: &str) -> io::Result<()> {
    let f = File::open(path)?;
    // SAFETY: a valid fd and a namespace type; affects only the calling thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens a TUN device `name` (IFF_TUN | IFF_NO_PI: raw IP packets) in the caller's namespace,
/// non-blocking.
pub fn open_tun(name: &str) -> io::Result<OwnedFd> {
    let path = CString::new("/dev/net/tun").map_err(io::Error::other)?;
    // SAFETY: a valid C string; the fd is owned below.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is ours.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    let n = name.as_bytes();
    if n.len() >= libc::IFNAMSIZ {
        return Err(io::Error::other(format!("interface name too long: {name}")));
    }
    req.name[..n.len()].copy_from_slice(n);
    // SAFETY: TUNSETIFF takes a struct ifreq, which IfReq lays out (name, then the union).
    if unsafe { libc::ioctl(fd, libc::TUNSETIFF as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(owned)
}

/// What the path does to packets in each direction.
#[derive(Debug, Clone, Copy)]
pub struct Impairment {
    /// One-way delay.
    pub delay: Duration,
    /// Share of packets dropped, 0..1.
    pub loss: f64,
    /// Rate limit in bytes per second (0: none), applied by the forwarder.
    pub rate: u64,
    /// With a rate limit, a packet that would wait longer than this for its turn is dropped.
    pub queue: Duration,
}

/// Packet counters of a running forwarder.
#[derive(Debug, Default)]
pub struct Stats {
    /// Packets forwarded.
    pub forwarded: AtomicU64,
    /// Packets dropped on purpose.
    pub dropped: AtomicU64,
}

/// A thread copying packets between two TUN devices through delay queues.
pub struct Forwarder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Counters.
    pub stats: Arc<Stats>,
}

struct Pending {
    due: Instant,
    packet: Vec<u8>,
}

struct Direction {
    queue: VecDeque<Pending>,
    /// When the rate limiter lets the next packet go.
    free_at: Instant,
}

impl Forwarder {
    /// Starts forwarding between `a` and `b` (packets read from `a` are written to `b` after
    /// `a_to_b`, and the other way round), for at most `max_run`.
    pub fn start(
        a: OwnedFd,
        b: OwnedFd,
        a_to_b: Impairment,
        b_to_a: Impairment,
        max_run: Duration,
        seed: u64,
    ) -> Forwarder {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Stats::default());
        let (s, st) = (stop.clone(), stats.clone());
        let thread = std::thread::spawn(move || {
            forward(a, b, [a_to_b, b_to_a], &s, &st, max_run, seed);
        });
        Forwarder {
            stop,
            thread: Some(thread),
            stats,
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn forward(
    a: OwnedFd,
    b: OwnedFd,
    imp: [Impairment; 2],
    stop: &AtomicBool,
    stats: &Stats,
    max_run: Duration,
    seed: u64,
) {
    let fds = [a.as_raw_fd(), b.as_raw_fd()];
    let start = Instant::now();
    let mut dirs = [
        Direction {
            queue: VecDeque::new(),
            free_at: start,
        },
        Direction {
            queue: VecDeque::new(),
            free_at: start,
        },
    ];
    let mut rng = seed | 1;
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) && start.elapsed() < max_run {
        let now = Instant::now();
        // Deliver what is due.
        for (d, dir) in dirs.iter_mut().enumerate() {
            while dir.queue.front().is_some_and(|p| p.due <= now) {
                let p = dir.queue.pop_front().unwrap_or_else(|| unreachable!());
                let out = fds[1 - d];
                // SAFETY: writing a buffer we own to an open fd.
                unsafe { libc::write(out, p.packet.as_ptr().cast(), p.packet.len()) };
                stats.forwarded.fetch_add(1, Ordering::Relaxed);
            }
        }
        let next_due = dirs
            .iter()
            .filter_map(|d| d.queue.front().map(|p| p.due))
            .min();
        let timeout_ms = match next_due {
            Some(t) => {
                let us = t.saturating_duration_since(Instant::now()).as_micros();
                (us.div_ceil(1000)).min(5) as i32
            }
            None => 5,
        };
        let mut pfd = [
            libc::pollfd {
                fd: fds[0],
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: fds[1],
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfd entries.
        unsafe { libc::poll(pfd.as_mut_ptr(), 2, timeout_ms) };
        for (d, p) in pfd.iter().enumerate() {
            if p.revents & libc::POLLIN == 0 {
                continue;
            }
            loop {
                // SAFETY: reading into a buffer we own from an open non-blocking fd.
                let n = unsafe { libc::read(fds[d], buf.as_mut_ptr().cast(), buf.len()) };
                if n <= 0 {
                    break;
                }
                let n = n as usize;
                // xorshift64: reproducible losses.
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let i = imp[d];
                if i.loss > 0.0 && (rng % 1_000_000) as f64 / 1e6 < i.loss {
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let now = Instant::now();
                let dir = &mut dirs[d];
                let mut leave = now;
                if i.rate > 0 {
                    if dir.free_at > now + i.queue {
                        stats.dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let tx = Duration::from_secs_f64(n as f64 / i.rate as f64);
                    leave = dir.free_at.max(now) + tx;
                    dir.free_at = leave;
                }
                dir.queue.push_back(Pending {
                    due: leave + i.delay,
                    packet: buf[..n].to_vec(),
                });
            }
        }
    }
}

/// Two namespaces `a` and `b` with addresses `addr_a` and `addr_b` (a /24 each side), joined by
/// an impaired path.
pub struct Path {
    /// The forwarder carrying the path.
    pub forwarder: Forwarder,
    /// Client side.
    pub a: Netns,
    /// Server side.
    pub b: Netns,
    /// Address of `a`.
    pub addr_a: String,
    /// Address of `b`.
    pub addr_b: String,
}

/// Options for [`Path::new`].
#[derive(Debug, Clone, Copy)]
pub struct PathSpec {
    /// One-way delay each direction.
    pub one_way: Duration,
    /// Drop share a -> b.
    pub loss_ab: f64,
    /// Rate cap a -> b, bits per second (0: none).
    pub rate_bits: u64,
    /// With a rate cap, how long a packet may wait in the bottleneck queue before it is dropped:
    /// a deep queue turns competing traffic into queueing delay, a shallow one into loss.
    pub queue: Duration,
}

impl PathSpec {
    /// A path of `one_way` delay each way, no loss, no rate cap.
    pub fn delay(one_way: Duration) -> PathSpec {
        PathSpec {
            one_way,
            loss_ab: 0.0,
            rate_bits: 0,
            queue: Duration::from_millis(400),
        }
    }
}

/// How long a path's forwarder runs at most.
pub const MAX_RUN: Duration = Duration::from_secs(180);

impl Path {
    /// Builds namespaces `<tag>a` and `<tag>b` (tag at most 9 characters) with 198.51.100.1
    /// and 198.51.100.2 (each pair of namespaces is its own network, so every path can use the
    /// same documentation addresses); `seed` makes the forwarder's losses reproducible.
    pub fn new(tag: &str, seed: u8, spec: PathSpec) -> io::Result<Path> {
        let a = Netns::new(&format!("{tag}a"))?;
        let b = Netns::new(&format!("{tag}b"))?;
        let addr_a = "198.51.100.1".to_string();
        let addr_b = "198.51.100.2".to_string();
        let (ta, tb) = (format!("{tag}ta"), format!("{tag}tb"));
        let ta2 = ta.clone();
        let fa = a.run(move || open_tun(&ta2))??;
        let tb2 = tb.clone();
        let fb = b.run(move || open_tun(&tb2))??;
        for (ns, dev, addr) in [(&a, &ta, &addr_a), (&b, &tb, &addr_b)] {
            ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ns.ip(&["link", "set", dev, "up"])?;
        }
        let imp = |loss, rate| Impairment {
            delay: spec.one_way,
            loss,
            rate,
            queue: spec.queue,
        };
        let forwarder = Forwarder::start(
            fa,
            fb,
            imp(spec.loss_ab, spec.rate_bits / 8),
            imp(0.0, 0),
            MAX_RUN,
            0x5eed ^ u64::from(seed),
        );
        Ok(Path {
            forwarder,
            a,
            b,
            addr_a,
            addr_b,
        })
    }
}
