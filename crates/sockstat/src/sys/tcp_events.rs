//! Loads and runs the connection-event programs of `sockstat_wire::tcp_events` (BTF-typed
//! tracepoint and fexit programs assembled from the running kernel's BTF) and reads what they
//! write: records from a ring buffer, and the counters of what the kernel could not hand over.
//!
//! Needs CAP_BPF and CAP_PERFMON (or root), kernel BTF (`/sys/kernel/btf/vmlinux`) and Linux
//! 5.12 or later (`bpf_get_socket_cookie` on a BTF socket pointer). Nothing needs tracefs,
//! kprobes, BPF trampolines or a compiler. What the kernel holds, and its bounds (see
//! doc/events.md):
//!
//! - the connection table: one [`ENTRY_LEN`]-byte entry per TCP connection opened while
//!   tracing and not yet closed, at most [`CONNS_MAX`], allocated on insert and deleted when
//!   the connection reaches CLOSE (a connection that finds the table full is counted);
//! - the ring buffer ([`RING_BYTES`]), in which unread records wait;
//! - a 64-byte counters array.
//!
//! Every object is a file descriptor of this process: when it exits, however it exits, the
//! programs are detached and the memory freed.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use sockstat_wire::btf::Btf;
use sockstat_wire::tcp_events::{self, Layout, Maps, Record, StatePart, COUNTERS_LEN, ENTRY_LEN};

use super::bpf::{self, MapSpec, ProgSpec, ProgStats, RingReader};
use crate::events::Lost;

/// Size of the ring buffer by default: 16 MiB, about 100,000 records, over a second of 20,000
/// connections per second on both ends even if the reader stalls.
pub const RING_BYTES: usize = 16 << 20;

/// Capacity of the connection table: connections open at once that events follow from open
/// to close. The table's buckets take 16 bytes each up front (4 MiB); entries are allocated as
/// connections open and freed as they close.
pub const CONNS_MAX: u32 = 1 << 18;

/// The name of the program that handles `CLOSE -> SYN_SENT` alone.
const CONNECT_PROG: &str = "inet_sock_set_state(connect)";

/// Why tracing cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// What is missing, in one line: the privilege, the kernel feature, the failing step.
    pub message: String,
    /// True when the cause is a missing privilege (rather than a kernel that lacks something).
    pub privilege: bool,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Unavailable {}

fn unavailable(step: &str, e: &io::Error) -> Unavailable {
    let hint = bpf::explain(e);
    let privilege = matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES));
    Unavailable {
        message: if hint.is_empty() {
            format!("{step}: {e}")
        } else {
            format!("{step}: {e} ({hint})")
        },
        privilege,
    }
}

fn load_failed(step: &str, e: bpf::LoadError) -> Unavailable {
    let mut u = unavailable(step, &e.error);
    if !e.verifier.is_empty() {
        u.message.push_str("; verifier: ");
        u.message.push_str(&e.verifier);
    }
    u
}

/// One attached program.
struct Attached {
    name: &'static str,
    prog: OwnedFd,
    _link: OwnedFd,
}

/// The connection tracer: programs attached, records waiting in the ring.
pub struct Tracer {
    ring: RingReader,
    counters: OwnedFd,
    _conns: OwnedFd,
    progs: Vec<Attached>,
    /// Why accepted connections carry no process and no accept wait, when they do not.
    pub accept_unavailable: Option<String>,
    /// How long loading took: reading BTF, assembling, verifying and attaching.
    pub load_time: Duration,
    stats: Option<OwnedFd>,
}

/// Reads the kernel's BTF and the layout of everything the programs touch, and why accepts
/// cannot be traced if they cannot.
pub fn layout() -> Result<(Layout, Option<String>), Unavailable> {
    let data = super::bpf::kernel_btf().map_err(|e| Unavailable {
        message: super::bpf::btf_unreadable(&e),
        privilege: false,
    })?;
    let btf = Btf::parse(&data).map_err(|e| Unavailable {
        message: format!("{}: {e}", super::bpf::VMLINUX_BTF),
        privilege: false,
    })?;
    Layout::from_btf(&btf).map_err(|message| Unavailable {
        message,
        privilege: false,
    })
}

impl Tracer {
    /// Loads and attaches the programs. With `run_stats`, the kernel's per-program run-time
    /// accounting is turned on for as long as the tracer lives (see [`Tracer::run_stats`]).
    /// `ring_bytes` is the ring buffer's size: a power of two, at least one page (see
    /// [`RING_BYTES`]).
    pub fn start(run_stats: bool, ring_bytes: usize) -> Result<Tracer, Unavailable> {
        let t0 = Instant::now();
        let (layout, accept_missing) = layout()?;
        let conns = bpf::map_create(&MapSpec {
            map_type: bpf::MAP_TYPE_HASH,
            key_size: 8,
            value_size: ENTRY_LEN,
            max_entries: CONNS_MAX,
            flags: bpf::F_NO_PREALLOC,
            name: "sockstat_conns",
        })
        .map_err(|e| unavailable("creating the connection table", &e))?;
        let ring = bpf::map_create(&MapSpec {
            map_type: bpf::MAP_TYPE_RINGBUF,
            key_size: 0,
            value_size: 0,
            max_entries: u32::try_from(ring_bytes).unwrap_or(u32::MAX),
            flags: 0,
            name: "sockstat_events",
        })
        .map_err(|e| unavailable("creating the ring buffer", &e))?;
        let counters = bpf::map_create(&MapSpec {
            map_type: bpf::MAP_TYPE_ARRAY,
            key_size: 4,
            value_size: COUNTERS_LEN,
            max_entries: 1,
            flags: 0,
            name: "sockstat_counts",
        })
        .map_err(|e| unavailable("creating the counters map", &e))?;
        use std::os::fd::AsRawFd;
        let maps = Maps {
            conns: conns.as_raw_fd(),
            ring: ring.as_raw_fd(),
            counters: counters.as_raw_fd(),
        };
        let stats = if run_stats {
            Some(
                bpf::enable_run_time_stats()
                    .map_err(|e| unavailable("turning on BPF run-time statistics", &e))?,
            )
        } else {
            None
        };
        let mut progs = Vec::new();
        for (part, name, prog_name) in [
            (StatePart::Rest, "inet_sock_set_state", "sockstat_state"),
            (StatePart::Connect, CONNECT_PROG, "sockstat_connect"),
        ] {
            let code =
                tcp_events::set_state_program(&layout, &maps, part).map_err(|e| Unavailable {
                    message: format!("assembling the state-change program: {e}"),
                    privilege: false,
                })?;
            let prog = bpf::prog_load(&ProgSpec {
                prog_type: bpf::PROG_TYPE_TRACING,
                attach_type: bpf::TRACE_RAW_TP,
                attach_btf_id: layout.set_state_btf_id,
                code: &code,
                name: prog_name,
            })
            .map_err(|e| load_failed("loading the tp_btf/inet_sock_set_state program", e))?;
            let link = bpf::attach_tracing(&prog).map_err(|e| {
                unavailable("attaching to the sock:inet_sock_set_state tracepoint", &e)
            })?;
            progs.push(Attached {
                name,
                prog,
                _link: link,
            });
        }
        let accept_unavailable = match accept_missing {
            Some(why) => Some(why),
            None => match attach_accept(&layout, &maps) {
                Ok(a) => {
                    progs.push(a);
                    None
                }
                Err(why) => Some(why),
            },
        };
        let ring = RingReader::new(ring, ring_bytes)
            .map_err(|e| unavailable("mapping the ring buffer", &e))?;
        Ok(Tracer {
            ring,
            counters,
            _conns: conns,
            progs,
            accept_unavailable,
            load_time: t0.elapsed(),
            stats,
        })
    }

    /// Hands every record waiting in the ring to `f`; returns how many there were. A record
    /// that does not decode (which the programs never write) is skipped and counted in the
    /// return value's second half.
    pub fn drain(&mut self, mut f: impl FnMut(Record)) -> (usize, usize) {
        let mut bad = 0;
        let n = self.ring.drain(|b| match Record::parse(b) {
            Some(r) => f(r),
            None => bad += 1,
        });
        (n, bad)
    }

    /// What the kernel could not hand over so far: records the ring had no room for,
    /// connections the table had no room for, and program runs the kernel skipped.
    pub fn lost(&self) -> io::Result<Lost> {
        let mut v = [0u8; COUNTERS_LEN as usize];
        bpf::map_lookup(&self.counters, &0u32.to_ne_bytes(), &mut v)?;
        let slot = |i: u32| {
            let at = i as usize * 8;
            v.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_ne_bytes)
        };
        let mut missed = 0;
        // The connect program's misses are of state changes it ignores (see StatePart).
        for p in self.progs.iter().filter(|p| p.name != CONNECT_PROG) {
            missed += bpf::prog_stats(&p.prog)?.recursion_misses;
        }
        Ok(Lost {
            ring_full: slot(tcp_events::LOST_RING),
            table_full: slot(tcp_events::LOST_STORAGE),
            missed_runs: missed,
        })
    }

    /// Per program: (name, statistics); runs and run time only when started with `run_stats`.
    pub fn run_stats(&self) -> Vec<(&'static str, ProgStats)> {
        self.progs
            .iter()
            .filter_map(|p| Some((p.name, bpf::prog_stats(&p.prog).ok()?)))
            .collect()
    }

    /// True when the kernel's run-time accounting is on for this tracer.
    pub fn run_time_stats_on(&self) -> bool {
        self.stats.is_some()
    }
}

/// A [`Tracer`] read on a thread of its own: every 10 ms it moves what the kernel wrote out of
/// the ring buffer (a copy per record, nothing else), so the ring stays nearly empty even when
/// the consumer spends microseconds per event or is descheduled for a while on a busy host. The
/// records wait in memory for the consumer, at most `max_backlog` of them; past that they are
/// dropped and counted with the kernel's `ring_full`, never silently.
pub struct BackgroundReader {
    rx: std::sync::mpsc::Receiver<Vec<Record>>,
    backlog: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    shared: std::sync::Arc<std::sync::Mutex<(Lost, u64, u64)>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Tracer>>,
}

impl Tracer {
    /// Moves the tracer onto a reading thread (see [`BackgroundReader`]).
    pub fn spawn_reader(mut self, max_backlog: usize) -> io::Result<BackgroundReader> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::{Arc, Mutex};
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Record>>();
        let backlog = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Mutex::new((Lost::default(), 0u64, 0u64)));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, sh, st) = (Arc::clone(&backlog), Arc::clone(&shared), Arc::clone(&stop));
        let handle = std::thread::Builder::new()
            .name("events-ring".into())
            .spawn(move || {
                let mut dropped = 0u64;
                let mut bad = 0u64;
                loop {
                    let last = st.load(Ordering::Acquire);
                    let mut batch = Vec::new();
                    let (_, bad_now) = self.drain(|r| batch.push(r));
                    bad += bad_now as u64;
                    if !batch.is_empty() {
                        let n = batch.len();
                        if b.load(Ordering::Relaxed) + n > max_backlog {
                            dropped += n as u64;
                        } else {
                            b.fetch_add(n, Ordering::Relaxed);
                            if tx.send(batch).is_err() {
                                break;
                            }
                        }
                    }
                    if let Ok(l) = self.lost() {
                        let mut g = sh.lock().unwrap_or_else(|p| p.into_inner());
                        *g = (l, dropped, bad);
                    }
                    if last {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                self
            })?;
        Ok(BackgroundReader {
            rx,
            backlog,
            shared,
            stop,
            handle: Some(handle),
        })
    }
}

impl BackgroundReader {
    /// Every batch waiting, after waiting up to `timeout` for the first.
    pub fn recv(&self, timeout: std::time::Duration) -> Vec<Vec<Record>> {
        use std::sync::atomic::Ordering;
        let mut out = Vec::new();
        if let Ok(b) = self.rx.recv_timeout(timeout) {
            out.push(b);
            while let Ok(b) = self.rx.try_recv() {
                out.push(b);
            }
        }
        let n: usize = out.iter().map(Vec::len).sum();
        self.backlog.fetch_sub(n, Ordering::Relaxed);
        out
    }

    /// What was lost so far: the kernel's counts, with the records this reader dropped
    /// because the consumer was too far behind added to `ring_full`; and records that did not
    /// decode (which the programs never write).
    pub fn lost(&self) -> (Lost, u64) {
        let g = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let (mut l, dropped, bad) = *g;
        l.ring_full += dropped;
        (l, bad)
    }

    /// Stops the reading thread after one last drain; returns the tracer and the batches that
    /// were still waiting. [`BackgroundReader::lost`] then gives the final counts.
    pub fn stop(&mut self) -> (Option<Tracer>, Vec<Vec<Record>>) {
        use std::sync::atomic::Ordering;
        self.stop.store(true, Ordering::Release);
        let tracer = self.handle.take().and_then(|h| h.join().ok());
        let mut rest = Vec::new();
        while let Ok(b) = self.rx.try_recv() {
            rest.push(b);
        }
        (tracer, rest)
    }
}

/// Loads and attaches the accept program; the error says why accepted connections will carry
/// no process.
fn attach_accept(layout: &Layout, maps: &Maps) -> Result<Attached, String> {
    let Some(code) = tcp_events::accept_program(layout, maps) else {
        return Err("the kernel's BTF lacks what the accept program reads".into());
    };
    let code = code.map_err(|e| format!("assembling the accept program: {e}"))?;
    let btf_id = layout.accept.map(|a| a.btf_id).unwrap_or(0);
    let prog = bpf::prog_load(&ProgSpec {
        prog_type: bpf::PROG_TYPE_TRACING,
        attach_type: bpf::TRACE_RAW_TP,
        attach_btf_id: btf_id,
        code: &code,
        name: "sockstat_accept",
    })
    .map_err(|e| load_failed("loading the tp_btf/sys_exit accept program", e).message)?;
    let link = bpf::attach_tracing(&prog).map_err(|e| {
        unavailable("attaching to the raw_syscalls:sys_exit tracepoint", &e).message
    })?;
    Ok(Attached {
        name: "sys_exit",
        prog,
        _link: link,
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use sockstat_wire::tcp_events::{flag, kind, side, Record};

    /// As root, one loopback connection made by this process gives a connect, an accept and
    /// two closes, with this process on both sides and the payload in the byte counters.
    #[test]
    fn one_connection_from_open_to_close() {
        if !rustix::process::geteuid().is_root() {
            eprintln!(
                "SKIPPED one_connection_from_open_to_close: needs root (CAP_BPF + CAP_PERFMON)"
            );
            return;
        }
        let mut t =
            super::Tracer::start(true, super::RING_BYTES).expect("the tracer starts as root");
        assert!(t.load_time.as_secs() < 10);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[1u8; 100]).unwrap();
        s.read_exact(&mut [0u8; 100]).unwrap();
        s.write_all(&[2u8; 200]).unwrap();
        c.read_exact(&mut [0u8; 200]).unwrap();
        drop(c);
        s.read_to_end(&mut Vec::new()).unwrap();
        drop(s);
        let mut mine: Vec<Record> = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while mine.iter().filter(|r| r.kind == kind::CLOSE).count() < 2 {
            assert!(std::time::Instant::now() < deadline, "records: {mine:?}");
            std::thread::sleep(std::time::Duration::from_millis(20));
            t.drain(|r| {
                if r.local_port == port || r.remote_port == port {
                    mine.push(r)
                }
            });
        }
        let me = std::process::id();
        let find = |k: u8, sd: u8| {
            mine.iter()
                .find(|r| r.kind == k && r.side == sd)
                .unwrap_or_else(|| panic!("no record {k}/{sd} in {mine:?}"))
        };
        let connect = find(kind::CONNECT, side::CLIENT);
        assert_eq!(connect.pid, me);
        assert_eq!(connect.remote_port, port);
        assert!(connect.established_ns >= connect.start_ns && connect.start_ns > 0);
        let accept = find(kind::ACCEPT, side::SERVER);
        assert_eq!((accept.pid, accept.local_port), (me, port));
        assert!(accept.accepted_ns >= accept.established_ns);
        let client = find(kind::CLOSE, side::CLIENT);
        assert_eq!(client.cookie, connect.cookie);
        // 100 + FIN acknowledged (the SYN is in the baseline); 200 received, and the peer's
        // FIN when it arrived before this end left FIN_WAIT2 (a race on loopback).
        assert_eq!(client.bytes_acked - client.bytes_acked_at_establish, 101);
        let peer_fin = u64::from(client.flags & flag::PEER_FIN != 0);
        assert_eq!(
            client.bytes_received - client.bytes_received_at_establish - peer_fin,
            200
        );
        let server = find(kind::CLOSE, side::SERVER);
        assert_eq!((server.cookie, server.pid), (accept.cookie, me));
        assert_eq!(
            server.bytes_received - server.bytes_received_at_establish,
            101
        );
        assert_eq!(t.lost().unwrap().events(), 0);
        let stats = t.run_stats();
        assert_eq!(stats.len(), 3, "{stats:?}");
        assert!(stats.iter().all(|(_, s)| s.runs > 0), "{stats:?}");
    }
}
