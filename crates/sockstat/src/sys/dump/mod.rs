//! Gathering the socket table: one sock_diag dump per (family, protocol), TCP of both families
//! in one when both are wanted ([`plan::Target::TcpBothFamilies`]), with the query's state
//! mask and port/address filters pushed into the kernel request, and `/proc/net/*` text as the
//! fallback for any family whose dump fails (or for all of them with `Source::Proc`).
//!
//! Produces model [`Socket`]s; owners are joined later by the listing (`run::list`). This file
//! runs the dumps (in parallel, retried, deduplicated, joined in order); `plan` says which a
//! query needs and the kernel filter program, `convert` makes sockets of the records,
//! `procnet` reads the `/proc/net` text instead, `census` reads the tables a query leaves out
//! for their inodes, and `columns` says what text-read sockets lack.

use std::path::Path;

use rustc_hash::FxHashSet;
use sockstat_wire::inet_diag::{self};
use sockstat_wire::{netlink_diag, packet_diag, unix_diag};

use crate::error::Error;
use crate::model::{Endpoint, Family, Proto, Socket, State, UnixName, Warning, WarningCode};
use crate::query::{Query, Source};
use crate::sys::netlink::{self, DumpError, Transport};

mod census;
mod columns;
mod convert;
mod inuse;
mod plan;
mod procnet;

use census::{census_target, census_targets};
pub(crate) use columns::column_warnings;
pub(crate) use convert::{
    socket_from_inet, socket_from_netlink, socket_from_packet, socket_from_unix,
};
use plan::{both_tcp_families, filter_program, proc_only, targets, Ask, Target};
use procnet::from_proc_net;

const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// How many times a dump flagged `NLM_F_DUMP_INTR` (or failed with ENOBUFS) is repeated before
/// its last result is kept with a warning.
const DUMP_ATTEMPTS: usize = 3;

/// The result of gathering: sockets (deduplicated by cookie) and what could not be seen.
#[derive(Default)]
pub struct Gathered {
    /// Every socket that passed the kernel-side filters.
    pub sockets: Vec<Socket>,
    /// Problems met on the way.
    pub warnings: Vec<Warning>,
    /// Names of the interfaces the sockets are bound to (packet sockets, `SO_BINDTODEVICE`), by
    /// index, in the namespace they were read in ([`interface_names`]).
    pub interfaces: Vec<(u32, String)>,
    /// The same for several zones, by (zone key, index) (filled by `sys::gather_zones`).
    pub zone_interfaces: std::collections::HashMap<(Option<u64>, u32), String>,
    /// TIME-WAIT entries left out by `Selection::hide_time_wait` (the namespace's count from
    /// `sockstat`), when it could be read.
    pub hidden_time_wait: u64,
    /// The inodes of sockets the tables gave that the query's socket filters left out, and
    /// those of the tables a census read ([`gather`]): a socket the owner scan meets that no
    /// table listed is a row (`sys::unlisted`), and one of these must not be taken for one.
    pub left_out: Vec<u64>,
}

/// The names of the interfaces `sockets` refer to (a packet socket's interface, a bound
/// device), asked of the kernel with `SIOCGIFNAME` on a socket made by the calling thread, so in
/// that thread's network namespace: call it where the sockets were dumped, never for a
/// namespace read from outside. An index with no interface any more is left out (shown as a
/// number).
pub fn interface_names(sockets: &[Socket]) -> Vec<(u32, String)> {
    let mut wanted: Vec<u32> = sockets
        .iter()
        .filter_map(|s| match s.local {
            Endpoint::Packet { ifindex, .. } if ifindex != 0 => Some(ifindex),
            _ => s.bound_ifindex.map(|i| i.get()),
        })
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    wanted.sort_unstable();
    wanted.dedup();
    let Ok(fd) = rustix::net::socket(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::DGRAM,
        None,
    ) else {
        return Vec::new();
    };
    wanted
        .into_iter()
        .filter_map(|i| Some((i, rustix::net::netdevice::index_to_name(&fd, i).ok()?)))
        .collect()
}

/// Gathers every socket the query selects. Fails only when netlink was forced
/// (`Source::Netlink`) and a dump failed; otherwise failures fall back to /proc with a warning.
///
/// Each protocol and family is its own dump, on its own netlink socket, so on a machine with
/// cores to spare the dumps run on several threads at once ([`Dumps`]; the kernel's part,
/// walking its tables and writing the records, is most of a dump's cost) and are joined in
/// their fixed order: the result is the same as one after the other. A recording or a replay
/// keeps one transport and one thread.
///
/// With `census`, the tables the query does not read are read too, for their sockets' inodes
/// alone, which go to [`Gathered::left_out`] ([`census_targets`]); not for a recording or a
/// replay.
pub fn gather(q: &Query, ext: u8, net_dir: &Path, census: bool) -> Result<Gathered, Error> {
    match Dumps::new(q, ext, net_dir, census) {
        Some(d) => {
            let threads = crate::parallel::cores()
                .unwrap_or(1)
                .min(MAX_DUMP_THREADS)
                .min(d.targets.len() + d.census.len());
            std::thread::scope(|sc| {
                for _ in 1..threads {
                    sc.spawn(|| d.work());
                }
                d.work();
            });
            d.finish()
        }
        None => gather_in_turn(q, ext, net_dir),
    }
}

/// The dumps of one query, taken in turn by whichever thread calls [`Dumps::work`]: the
/// threads [`gather`] starts, or a thread that has finished other work (the owner scan of a
/// full listing, which runs beside the dumps and takes what is left of them when it is done,
/// instead of a dump thread taking turns with it on the cores from the start).
pub struct Dumps<'a> {
    q: &'a Query,
    ext: u8,
    net_dir: &'a Path,
    program: Option<Vec<u8>>,
    targets: Vec<Target>,
    /// The sockets each target's vector is made room for before its dump.
    capacity: Vec<usize>,
    /// The tables read for their inodes alone ([`census_targets`]), after the targets.
    census: Vec<Target>,
    /// The targets' indices in the order they are taken: the big tables first (TCP, unix), so
    /// that the last dump to start is a small one.
    order: Vec<usize>,
    next: std::sync::atomic::AtomicUsize,
    done: std::sync::Mutex<Vec<(usize, Result<Gathered, Error>)>>,
    ended: std::sync::Condvar,
}

impl<'a> Dumps<'a> {
    /// The dumps `q` needs, or `None` when they must run on one transport in turn (a recording
    /// or a replay).
    pub fn new(q: &'a Query, ext: u8, net_dir: &'a Path, census: bool) -> Option<Dumps<'a>> {
        if matches!(q.gather.source, Source::Replay(_)) || q.gather.record_netlink.is_some() {
            return None;
        }
        // Tables the namespace has no socket in are not walked (`inuse`).
        let program = filter_program(q);
        let tcp_states = q.kernel_states(Proto::Tcp);
        let time_wait = tcp_states & State::TimeWait.kernel_mask() != 0;
        let counts = inuse::Counts::read(net_dir, time_wait);
        let empty = counts.empty();
        let walked = |t: &Target| !matches!(t, Target::Inet(p, _) if empty.contains(p));
        let mut targets = both_tcp_families(targets(q));
        targets.retain(walked);
        // How many sockets each dump brings when nothing but TIME-WAIT is left out in the
        // kernel: its vector is made that large before it fills (`inuse`), and the largest
        // also holds the others' (`finish` moves them into it). Filtered dumps start empty.
        let unfiltered = |p: Proto| {
            program.is_none() && q.kernel_states(p) | State::TimeWait.kernel_mask() == u32::MAX
        };
        let expected: Vec<usize> = targets
            .iter()
            .map(|&t| match t {
                Target::TcpBothFamilies if unfiltered(Proto::Tcp) => {
                    counts.expected(Proto::Tcp, &[Family::Inet, Family::Inet6], time_wait)
                }
                Target::Inet(p @ (Proto::Tcp | Proto::Udp), f) if unfiltered(p) => {
                    counts.expected(p, &[f], time_wait)
                }
                _ => 0,
            })
            .collect();
        let mut order: Vec<usize> = (0..targets.len()).collect();
        order.sort_by_key(|&i| match targets[i] {
            Target::Inet(Proto::Tcp, _) | Target::TcpBothFamilies => 0,
            Target::Unix => 1,
            _ => 2,
        });
        let biggest = (0..targets.len()).max_by_key(|&i| expected[i]);
        let capacity = (0..targets.len())
            .map(|i| match biggest {
                Some(b) if b == i => expected.iter().sum(),
                _ => expected[i],
            })
            .collect();
        Some(Dumps {
            q,
            ext,
            net_dir,
            program,
            capacity,
            census: if census {
                let mut c = census_targets(q);
                c.retain(walked);
                c
            } else {
                Vec::new()
            },
            targets,
            order,
            next: std::sync::atomic::AtomicUsize::new(0),
            done: std::sync::Mutex::new(Vec::new()),
            ended: std::sync::Condvar::new(),
        })
    }

    /// Runs dumps not yet started until none is left.
    pub fn work(&self) {
        let mut transport = netlink::Kernel::default();
        loop {
            let k = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&i) = self.order.get(k) else {
                // The census, once every dump has started.
                let c = k - self.order.len();
                let Some(&t) = self.census.get(c) else {
                    return;
                };
                let i = self.targets.len() + c;
                let mut pending = Pending {
                    dumps: self,
                    i,
                    ended: false,
                };
                let mut part = Gathered::default();
                super::timing::phase(&format!("census {}", t.key()), || {
                    census_target(self.q, t, self.net_dir, &mut transport, &mut part.left_out)
                });
                pending.ended = true;
                self.lock().push((i, Ok(part)));
                self.ended.notify_all();
                continue;
            };
            let t = self.targets[i];
            // Should this thread panic, the dump still ends (as an error), so that
            // `finish` does not wait for it forever.
            let mut pending = Pending {
                dumps: self,
                i,
                ended: false,
            };
            let mut part = Gathered::default();
            part.sockets.reserve_exact(self.capacity[i]);
            let r = super::timing::phase(&t.key(), || {
                gather_target(
                    self.q,
                    t,
                    self.ext,
                    self.program.as_deref(),
                    self.net_dir,
                    &mut transport,
                    &mut part,
                )
            });
            pending.ended = true;
            self.lock().push((i, r.map(|()| part)));
            self.ended.notify_all();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(usize, Result<Gathered, Error>)>> {
        self.done.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the dumps other threads are running, then joins them all in order: the
    /// query's sockets. Call it after [`Dumps::work`], which leaves no dump unstarted.
    pub fn finish(&self) -> Result<Gathered, Error> {
        let mut done = self.lock();
        while done.len() < self.targets.len() + self.census.len() {
            done = self.ended.wait(done).unwrap_or_else(|p| p.into_inner());
        }
        let mut parts = std::mem::take(&mut *done);
        drop(done);
        parts.sort_by_key(|(i, _)| *i);
        let mut parts = parts
            .into_iter()
            .map(|(_, p)| p)
            .collect::<Result<Vec<Gathered>, Error>>()?;
        // The sockets go into the biggest part's vector, which is not copied; the others are
        // moved over from their ends a slice at a time, each part's vector shrunk as it empties,
        // so that no part is ever held twice (at a million sockets a whole copy was 50 MB more
        // at the peak: doc/reference/BENCHMARKS.md, "Big tables"). Their order is the sort's business;
        // the warnings keep the targets' order.
        const SLICE: usize = 16_384;
        let mut g = Gathered::default();
        let biggest = (0..parts.len()).max_by_key(|&i| parts[i].sockets.len());
        if let Some(b) = biggest {
            g.sockets = std::mem::take(&mut parts[b].sockets);
        }
        move_in_parallel(
            &mut g.sockets,
            &mut parts,
            crate::parallel::cores().unwrap_or(1).min(4),
        );
        for mut part in parts {
            while !part.sockets.is_empty() {
                let from = part.sockets.len().saturating_sub(SLICE);
                g.sockets.extend(part.sockets.drain(from..));
                part.sockets.shrink_to_fit();
            }
            g.warnings.extend(part.warnings);
            g.left_out.extend(part.left_out);
        }
        Ok(complete(self.q, self.net_dir, g))
    }
}

/// Moves the parts' sockets to the end of `into` on `threads` threads, when there are enough to be
/// worth it and few enough that holding the parts and the whole at once costs little (the
/// bound of the parallel sort, `crate::parallel::PARALLEL_MAX`): the move took 4 ms on one core at 60k
/// sockets, much of it page faults on the memory the vector grows into. Otherwise the parts are
/// left for the caller to move a slice at a time.
fn move_in_parallel(into: &mut Vec<Socket>, parts: &mut [Gathered], threads: usize) {
    let moved: usize = parts.iter().map(|p| p.sockets.len()).sum();
    if threads < 2 || moved < 8192 || into.len() + moved > crate::parallel::PARALLEL_MAX {
        return;
    }
    into.reserve_exact(moved);
    let start = into.len();
    // Deal the parts out over the threads, biggest first, each to the one with least so far.
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(parts[i].sockets.len()));
    let mut load = vec![0usize; threads];
    let mut share: Vec<Vec<usize>> = vec![Vec::new(); threads];
    for i in order {
        let t = (0..threads).min_by_key(|&t| load[t]).unwrap_or(0);
        load[t] += parts[i].sockets.len();
        share[t].push(i);
    }
    // The spare capacity, cut into one slot range per part, in the parts' order.
    let mut slots: Vec<Option<&mut [std::mem::MaybeUninit<Socket>]>> = Vec::new();
    let mut rest = &mut into.spare_capacity_mut()[..moved];
    for p in parts.iter() {
        let (mine, tail) = rest.split_at_mut(p.sockets.len());
        slots.push(Some(mine));
        rest = tail;
    }
    let mut sources: Vec<Option<Vec<Socket>>> = parts
        .iter_mut()
        .map(|p| Some(std::mem::take(&mut p.sockets)))
        .collect();
    std::thread::scope(|sc| {
        for list in share {
            let work: Vec<_> = list
                .iter()
                .filter_map(|&i| Some((slots[i].take()?, sources[i].take()?)))
                .collect();
            sc.spawn(move || {
                for (slots, sockets) in work {
                    for (slot, s) in slots.iter_mut().zip(sockets) {
                        slot.write(s);
                    }
                }
            });
        }
    });
    // SAFETY: the slot ranges partition `start..start + moved` of the capacity reserved above,
    // each range is as long as its part's vector, and its thread wrote every slot of it (the
    // scope returns only once every thread has; a thread that panicked would have panicked the
    // scope, and this line is not reached: what was written then leaks, nothing is read).
    unsafe { into.set_len(start + moved) };
}

/// A dump a thread has started: on a panic before it ended, its end is an error.
struct Pending<'d, 'a> {
    dumps: &'d Dumps<'a>,
    i: usize,
    ended: bool,
}

impl Drop for Pending<'_, '_> {
    fn drop(&mut self) {
        if !self.ended {
            let bug = crate::error::SysError::other(
                "a socket dump",
                crate::error::ErrorKind::Bug,
                "its thread panicked",
            );
            self.dumps.lock().push((self.i, Err(bug.into())));
            self.dumps.ended.notify_all();
        }
    }
}

/// [`gather`] on one transport, one dump after the other: a replay, or a recording (whose
/// files are numbered in request order).
fn gather_in_turn(q: &Query, ext: u8, net_dir: &Path) -> Result<Gathered, Error> {
    let mut g = Gathered::default();
    let mut transport: Box<dyn Transport> = match &q.gather.source {
        Source::Replay(dir) => Box::new(netlink::Replay::new(dir)),
        _ => match &q.gather.record_netlink {
            Some(dir) => match netlink::Recorder::new(netlink::Kernel::default(), dir) {
                Ok(r) => Box::new(r),
                Err(e) => {
                    g.warnings.push(Warning {
                        code: WarningCode::RecordFailed,
                        count: None,
                        message: format!("cannot record netlink replies in {}: {e}", dir.display()),
                        details: vec![],
                    });
                    Box::new(netlink::Kernel::default())
                }
            },
            None => Box::new(netlink::Kernel::default()),
        },
    };
    let program = filter_program(q);
    for t in targets(q) {
        gather_target(
            q,
            t,
            ext,
            program.as_deref(),
            net_dir,
            &mut *transport,
            &mut g,
        )?;
    }
    Ok(complete(q, net_dir, g))
}

/// What follows the dumps: the count of TIME-WAIT entries left out, the unix peers' names, and
/// the filters the kernel could not apply.
fn complete(q: &Query, net_dir: &Path, mut g: Gathered) -> Gathered {
    // The kernel applied the state mask and the filter program where it could; the rest (-L,
    // unix and datagram roles, anything a replayed or older kernel ignored) is applied here, so
    // every source selects the same sockets.
    if q.select.hide_time_wait && q.select.states.is_none() {
        g.hidden_time_wait += hidden_time_wait(q, net_dir);
    }
    // Unix peers are named before filtering, so a client keeps its server's name (and
    // `--connected-to PATH` finds it) whether or not the server's end is selected.
    if q.unix_names_needed() {
        fill_unix_peer_names(&mut g.sockets);
    }
    let mut left_out = std::mem::take(&mut g.left_out);
    g.sockets.retain(|s| {
        let keep = q.matches_socket(s);
        if !keep {
            left_out.extend(s.id);
        }
        keep
    });
    g.left_out = left_out;
    g
}

/// How many TIME-WAIT entries `q` would show without `hide_time_wait`: none when its other
/// filters leave every one out (an owner filter: a TIME-WAIT entry has no holder and no uid;
/// `-l`; no TCP; no inet family), the namespace's count (`/proc/net/sockstat`, free) when none
/// of them can leave one out, else the entries a dump of TIME-WAIT alone finds that pass them
/// (its port and address filters applied in the kernel).
fn hidden_time_wait(q: &Query, net_dir: &Path) -> u64 {
    let (listening, connected) = (q.select.listening, q.select.connected);
    if !q.wants_proto(Proto::Tcp)
        || q.filters_owners()
        || (listening && !connected)
        || !(q.select.families.inet || q.select.families.inet6)
    {
        return 0;
    }
    let narrowed = q.select.ports.is_some()
        || q.select.sport.is_some()
        || q.select.dport.is_some()
        || q.select.src.is_some()
        || q.select.dst.is_some()
        || q.select.no_loopback
        || q.select.connected_to.is_some()
        || !(q.select.families.inet && q.select.families.inet6);
    if !narrowed {
        return super::procfs::read_to_string(&net_dir.join("sockstat"))
            .ok()
            .and_then(|text| sockstat_wire::snmp::sockstat_tcp_field(&text, "tw"))
            .unwrap_or(0);
    }
    let mut tw = q.clone();
    tw.select.hide_time_wait = false;
    tw.select.states = Some(vec![State::TimeWait]);
    tw.select.protos = Some(vec![Proto::Tcp]);
    tw.select.families.unix = false;
    tw.gather.tcp_info = false;
    tw.gather.congestion = false;
    tw.gather.memory = false;
    tw.gather.unix_details = false;
    tw.gather.record_netlink = None;
    gather(&tw, 0, net_dir, false).map_or(0, |g| g.sockets.len() as u64)
}

/// At most this many dumps at once: past the number of large tables (TCP over two families,
/// unix), more threads only wait.
const MAX_DUMP_THREADS: usize = 3;

/// One target's sockets, appended to `g`: its dump, or `/proc/net` when the dump fails (with a
/// warning) or the kernel has no dump for it.
fn gather_target(
    q: &Query,
    t: Target,
    ext: u8,
    program: Option<&[u8]>,
    net_dir: &Path,
    transport: &mut dyn Transport,
    g: &mut Gathered,
) -> Result<(), Error> {
    let replay = matches!(q.gather.source, Source::Replay(_));
    if replay && proc_only(t) && q.gather.proc_root == Path::new("/proc") {
        // Never mix a recording with this host's live /proc/net.
        return Ok(());
    }
    let from_proc = q.gather.source == Source::Proc || proc_only(t);
    if t == Target::TcpBothFamilies {
        if !from_proc {
            let mut seen = seen_set(g);
            if dump_target(transport, q, t, ext, program, t.seq(), g, &mut seen).is_ok() {
                return Ok(());
            }
        }
        // Each family apart, as any other target: its dump, or /proc/net with a warning.
        for family in [Family::Inet, Family::Inet6] {
            let part = Target::Inet(Proto::Tcp, family);
            gather_target(q, part, ext, program, net_dir, transport, g)?;
        }
        return Ok(());
    }
    if !from_proc {
        // Cookies seen in this dump: a socket that moved in the kernel's table while it was
        // walked can be met twice.
        let mut seen = seen_set(g);
        match dump_target(transport, q, t, ext, program, t.seq(), g, &mut seen) {
            Ok(()) => return Ok(()),
            Err(e) if replay && q.gather.proc_root == Path::new("/proc") => {
                // Never mix a recording with this host's live /proc/net.
                if !fallback_expected(t, &e) {
                    g.warnings.push(Warning {
                        code: WarningCode::DumpNotRecorded,
                        count: None,
                        message: format!(
                            "the recording has no usable {} dump ({e}); those sockets are not listed",
                            t.key()
                        ),
                        details: vec![],
                    });
                }
                return Ok(());
            }
            Err(e) => {
                if q.gather.source == Source::Netlink && !fallback_expected(t, &e) {
                    return Err(Error::Dump {
                        what: t.key(),
                        source: e,
                    });
                }
                if !fallback_expected(t, &e) {
                    g.warnings.push(Warning {
                        code: WarningCode::DumpFailed,
                        count: None,
                        message: format!(
                            "sock_diag dump of {} failed ({e}); read /proc/net instead (what that text lacks is said below)",
                            t.key()
                        ),
                        details: vec![],
                    });
                }
            }
        }
    }
    from_proc_net(q, t, net_dir, g);
    Ok(())
}

/// The set of a dump's cookies, with room for the sockets `g` has room for.
fn seen_set(g: &Gathered) -> FxHashSet<u64> {
    let mut seen = FxHashSet::default();
    seen.reserve(g.sockets.capacity() - g.sockets.len());
    seen
}

/// A missing handler (ENOENT) for raw sockets is normal on kernels without CONFIG_INET_RAW_DIAG;
/// for SCTP and MPTCP it means the protocol is not there, which `from_proc_net` reports.
fn fallback_expected(t: Target, e: &DumpError) -> bool {
    matches!(t, Target::Inet(Proto::Raw | Proto::Sctp | Proto::Mptcp, _))
        && e.errno() == Some(libc::ENOENT)
}

#[allow(clippy::too_many_arguments)]
fn dump_target(
    transport: &mut dyn Transport,
    q: &Query,
    t: Target,
    ext: u8,
    program: Option<&[u8]>,
    seq: u32,
    g: &mut Gathered,
    seen: &mut FxHashSet<u64>,
) -> Result<(), DumpError> {
    let key = t.key();
    let mut use_program = program.is_some();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let request = t.request(
            seq,
            &Ask {
                states: q.kernel_states(t.inet_proto().unwrap_or(Proto::Unix)),
                ext,
                bytecode: program.filter(|_| use_program),
                unix_show: if q.unix_names_needed() {
                    unix_diag::show::NAME
                        | unix_diag::show::PEER
                        | unix_diag::show::RQLEN
                        | unix_diag::show::UID
                        | if q.gather.memory {
                            unix_diag::show::MEMINFO
                        } else {
                            0
                        }
                } else {
                    unix_diag::show::RQLEN
                },
                // MEMINFO for the queues (recv_q, send_q): without it packet_diag sends none.
                packet_show: packet_diag::show::INFO | packet_diag::show::MEMINFO,
                netlink_show: netlink_diag::show::MEMINFO,
            },
        );
        let start = g.sockets.len();
        let mut dup = 0usize;
        let result = netlink::dump(transport, &key, &request, |payload, received| {
            let s = match t {
                Target::Inet(..) | Target::TcpBothFamilies => {
                    let proto = t.inet_proto().unwrap_or(Proto::Tcp);
                    let mut s = socket_from_inet(&inet_diag::decode_msg(payload)?, proto);
                    if let Some(tcp) = s.tcp.as_mut() {
                        tcp.read_at = Some(received);
                    }
                    s
                }
                Target::Unix => socket_from_unix(&unix_diag::decode_msg(payload)?),
                Target::Packet => socket_from_packet(&packet_diag::decode_msg(payload)?),
                Target::Netlink => {
                    let s = socket_from_netlink(&netlink_diag::decode_msg(payload)?);
                    // This process's own sock_diag sockets, which exist only while it reads.
                    if s.id.is_some_and(netlink::is_own_socket) {
                        return Ok(());
                    }
                    s
                }
            };
            if let Some(c) = s.cookie {
                if !seen.insert(c) {
                    dup += 1;
                    return Ok(());
                }
            }
            g.sockets.push(s);
            Ok(())
        });
        match result {
            Ok(stats) if stats.interrupted && attempt < DUMP_ATTEMPTS => {
                drop_from(g, seen, start);
                continue;
            }
            Ok(stats) => {
                if stats.interrupted {
                    g.warnings.push(Warning {
                        code: WarningCode::DumpInconsistent,
                        count: None,
                        message: format!(
                            "the {key} table changed during every one of {DUMP_ATTEMPTS} dumps; the listing may miss or repeat sockets"
                        ),
                        details: vec![],
                    });
                }
                return Ok(());
            }
            Err(DumpError::Kernel(libc::EINVAL)) if use_program => {
                // An old kernel that rejects a filter op: filter in user space instead.
                drop_from(g, seen, start);
                use_program = false;
            }
            Err(e) if e.errno() == Some(libc::ENOBUFS) && attempt < DUMP_ATTEMPTS => {
                drop_from(g, seen, start);
            }
            Err(e) => {
                drop_from(g, seen, start);
                return Err(e);
            }
        }
    }
}

fn drop_from(g: &mut Gathered, seen: &mut FxHashSet<u64>, start: usize) {
    for s in g.sockets.drain(start..) {
        if let Some(c) = s.cookie {
            seen.remove(&c);
        }
    }
}

/// Fills each connected unix socket's peer name from the peer's own record.
pub fn fill_unix_peer_names(sockets: &mut [Socket]) {
    let mut names: Vec<(u64, UnixName)> = sockets
        .iter()
        .filter_map(|s| match (&s.local, s.id) {
            (Endpoint::Unix(Some(n)), Some(id)) => Some((id, n.clone())),
            _ => None,
        })
        .collect();
    names.sort_unstable_by_key(|(id, _)| *id);
    for s in sockets.iter_mut() {
        if let Some(Endpoint::UnixPeer { peer, name }) = &mut s.remote {
            if let Ok(i) = names.binary_search_by_key(peer, |(id, _)| *id) {
                *name = Some(names[i].1.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SockType;

    #[test]
    fn tcp_of_both_families_is_one_dump_in_the_first_ones_place() {
        let mut q = Query::new();
        q.select.protos = Some(vec![Proto::Tcp, Proto::Udp]);
        assert_eq!(
            both_tcp_families(targets(&q)),
            vec![
                Target::TcpBothFamilies,
                Target::Inet(Proto::Udp, Family::Inet),
                Target::Inet(Proto::Udp, Family::Inet6),
            ]
        );
        // One family: its own dump, as before.
        q.select.families.inet6 = false;
        assert_eq!(
            both_tcp_families(targets(&q)),
            vec![
                Target::Inet(Proto::Tcp, Family::Inet),
                Target::Inet(Proto::Udp, Family::Inet),
            ]
        );
    }

    /// The one dump finds what the two dumps of the families find (a listener of each family,
    /// a connection over each): the same sockets, by cookie.
    #[test]
    fn one_dump_of_both_tcp_families_finds_what_two_find() {
        use std::net::{TcpListener, TcpStream};
        let l4 = TcpListener::bind("127.0.0.1:0").unwrap();
        let c4 = TcpStream::connect(l4.local_addr().unwrap()).unwrap();
        let Ok(l6) = TcpListener::bind("[::1]:0") else {
            eprintln!("SKIPPED: no IPv6 loopback");
            return;
        };
        let c6 = TcpStream::connect(l6.local_addr().unwrap()).unwrap();
        let ports = [
            l4.local_addr().unwrap().port(),
            l6.local_addr().unwrap().port(),
        ];
        let mut q = Query::new();
        q.select.protos = Some(vec![Proto::Tcp]);
        q.select.ports =
            Some(crate::query::PortSet::parse(&format!("{},{}", ports[0], ports[1])).unwrap());
        let program = filter_program(&q);
        let cookies = |targets: &[Target]| {
            let mut g = Gathered::default();
            let mut transport = netlink::Kernel::default();
            for &t in targets {
                let mut seen = FxHashSet::default();
                dump_target(
                    &mut transport,
                    &q,
                    t,
                    0,
                    program.as_deref(),
                    t.seq(),
                    &mut g,
                    &mut seen,
                )
                .unwrap();
            }
            let mut c: Vec<(Option<u64>, Family)> =
                g.sockets.iter().map(|s| (s.cookie, s.family)).collect();
            c.sort();
            c
        };
        let one = cookies(&[Target::TcpBothFamilies]);
        let two = cookies(&[
            Target::Inet(Proto::Tcp, Family::Inet),
            Target::Inet(Proto::Tcp, Family::Inet6),
        ]);
        // Two listeners, two clients, two accepted: six, three of each family.
        assert_eq!(one.len(), 6, "{one:?}");
        assert_eq!(
            one.iter().filter(|c| c.1 == Family::Inet6).count(),
            3,
            "{one:?}"
        );
        assert_eq!(one, two);
        drop((c4, c6));
    }

    fn part(ids: std::ops::Range<u64>) -> Gathered {
        Gathered {
            sockets: ids
                .map(|i| Socket {
                    id: Some(i),
                    ..Socket::new(
                        Proto::Tcp,
                        Family::Inet,
                        SockType::Stream,
                        crate::model::State::Established,
                        Endpoint::Inet {
                            addr: std::net::Ipv4Addr::LOCALHOST.into(),
                            port: (i % 60_000) as u16,
                        },
                        None,
                    )
                })
                .collect(),
            ..Gathered::default()
        }
    }

    /// The parallel move keeps every socket once, and empties the parts; with one thread, or
    /// too few sockets, it leaves them to the caller.
    #[test]
    fn parts_moved_in_parallel_are_all_there_once() {
        for threads in [1, 2, 3, 4] {
            let mut into = part(0..5_000).sockets;
            let mut parts = vec![
                part(5_000..5_001),
                part(5_001..12_000),
                Gathered::default(),
                part(12_000..15_500),
                part(15_500..15_600),
            ];
            move_in_parallel(&mut into, &mut parts, threads);
            if threads == 1 {
                assert_eq!(into.len(), 5_000);
                assert_eq!(parts.iter().map(|p| p.sockets.len()).sum::<usize>(), 10_600);
                continue;
            }
            assert!(parts.iter().all(|p| p.sockets.is_empty()));
            let mut ids: Vec<u64> = into.iter().filter_map(|s| s.id).collect();
            assert_eq!(ids.len(), 15_600);
            ids.sort_unstable();
            assert!(ids.iter().copied().eq(0..15_600), "{threads} threads");
            // Each socket is whole: its port still follows its id.
            assert!(into
                .iter()
                .all(|s| s.local.port() == Some((s.id.unwrap() % 60_000) as u16)));
        }
        // Too few to be worth threads: left alone.
        let mut into = part(0..10).sockets;
        let mut parts = vec![part(10..20)];
        move_in_parallel(&mut into, &mut parts, 4);
        assert_eq!((into.len(), parts[0].sockets.len()), (10, 10));
    }

    /// The program the kernel runs for -p, --sport and --dport selects the sockets whose ports
    /// are in the sets, each on its own end: checked over every pair of ports around the sets'
    /// edges with the kernel's interpreter as the crate's mirror runs it, against a direct
    /// reading of the sets and against the userspace filter.
    #[test]
    fn port_programs_test_the_end_each_flag_names() {
        use sockstat_wire::bytecode::{run, BcSocket};
        let set = |s: &str| Some(crate::query::PortSet::parse(s).unwrap());
        let ports = [
            0u16, 21, 22, 23, 79, 80, 81, 443, 8000, 8050, 8100, 8101, 65535,
        ];
        let cases: [(&str, Query); 5] = [
            (
                "-p",
                Query {
                    select: crate::query::Selection {
                        ports: set("22,8000-8100"),
                        ..Default::default()
                    },
                    ..Query::new()
                },
            ),
            (
                "--sport",
                Query {
                    select: crate::query::Selection {
                        sport: set("22,8000-8100"),
                        ..Default::default()
                    },
                    ..Query::new()
                },
            ),
            (
                "--dport",
                Query {
                    select: crate::query::Selection {
                        dport: set("80,443"),
                        ..Default::default()
                    },
                    ..Query::new()
                },
            ),
            (
                "--sport --dport",
                Query {
                    select: crate::query::Selection {
                        sport: set("8000-8100"),
                        dport: set("80"),
                        ..Default::default()
                    },
                    ..Query::new()
                },
            ),
            (
                "-p --dport",
                Query {
                    select: crate::query::Selection {
                        ports: set("22"),
                        dport: set("0-79"),
                        ..Default::default()
                    },
                    ..Query::new()
                },
            ),
        ];
        let within = |set: &Option<crate::query::PortSet>, p: u16| {
            set.as_ref()
                .is_none_or(|s| s.ranges().iter().any(|&(lo, hi)| (lo..=hi).contains(&p)))
        };
        for (flags, q) in cases {
            let program = filter_program(&q).expect("a program");
            let mut selected = 0;
            for &sport in &ports {
                for &dport in &ports {
                    let expect = (q.select.ports.is_none()
                        || within(&q.select.ports, sport)
                        || within(&q.select.ports, dport))
                        && within(&q.select.sport, sport)
                        && within(&q.select.dport, dport);
                    let sock = BcSocket {
                        src: std::net::Ipv4Addr::new(192, 0, 2, 1).into(),
                        dst: std::net::Ipv4Addr::new(198, 51, 100, 2).into(),
                        sport,
                        dport,
                        autobound: false,
                        ifindex: 0,
                        cgroup_id: 0,
                        mark: 0,
                    };
                    assert_eq!(run(&program, &sock), expect, "{flags}: {sport} -> {dport}");
                    let s = Socket::new(
                        Proto::Tcp,
                        Family::Inet,
                        SockType::Stream,
                        crate::model::State::Established,
                        Endpoint::Inet {
                            addr: sock.src,
                            port: sport,
                        },
                        Some(Endpoint::Inet {
                            addr: sock.dst,
                            port: dport,
                        }),
                    );
                    assert_eq!(q.matches_socket(&s), expect, "{flags}: {sport} -> {dport}");
                    selected += usize::from(expect);
                }
            }
            assert!(
                selected > 0 && selected < ports.len() * ports.len(),
                "{flags}"
            );
        }
    }
}
