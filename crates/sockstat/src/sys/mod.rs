//! Gathering from the running system (Linux): the sock_diag dumps and the /proc owner scan run
//! concurrently, then are joined into a [`Snapshot`]. Nothing here renders.

pub mod bpf;
pub mod buflock;
pub mod cgroup;
pub mod counters;
pub mod destroy;
pub mod dump;
pub mod netlink;
pub mod netns;
pub mod owners;
pub mod procfs;
pub mod sampler;
pub mod skb_drops;
pub mod sysctl;
pub mod taskfile;
pub mod tcp_events;
pub mod timing;
pub mod unlisted;
pub mod users;

use crate::model::{counted, WarningCode};
use std::collections::HashSet;

use crate::error::{Error, ErrorKind};
use crate::join::{self, OwnerIndex, Unseen};
use crate::model::{Endpoint, OwnersStatus, Snapshot, Socket, Warning};
use crate::query::{Query, Source};

/// Threads for the owner scan: the scan parallelises across processes, and the dump runs on the
/// calling thread meanwhile (doc/reference/baseline-study.md#the-floor: 2 scan threads + concurrent dump is
/// the floor on 2 cores).
pub(crate) fn scan_threads() -> usize {
    cores().unwrap_or(2).clamp(2, 4)
}

pub(crate) use crate::parallel::{cores, par_sort_by, PARALLEL_MAX};

/// Threads for the BPF iterator's walk of the fd tables ([`owners::scan_any`]): every core (up
/// to 4) when the scan runs alone, one fewer when it runs beside the socket dump, so the two do
/// not take turns on the same cores. One thread walks every task in one iterator; more walk
/// one process per iterator (doc/reference/BENCHMARKS.md, "Where a listing's time goes").
pub(crate) fn walk_threads(beside_dump: bool) -> usize {
    cores()
        .unwrap_or(1)
        .saturating_sub(usize::from(beside_dump))
        .clamp(1, 4)
}

/// How a listing finds the holders of its sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnerPlan {
    /// No owner scan (`--no-owners`, `--summary`).
    Off,
    /// Every socket's holders, scanned while the sockets are dumped (the full listing, or
    /// filters that select most sockets: `-4`, `-6`, `-u`, `-L`, `-c`).
    All,
    /// The sockets first (their filters applied in the kernel), then the holders of just those
    /// sockets and of their unix peers: `-l`, `--state`, `-p`, `--sport`, `--dport`, `--src`,
    /// `--dst`, `-P`, `--connected-to`.
    Shown,
    /// `--pid`, `--command`: only the fd tables of the processes those select, then the holders
    /// of the unix peers of the sockets they hold.
    Candidates,
}

impl OwnerPlan {
    fn of(q: &Query) -> OwnerPlan {
        if !q.owners {
            OwnerPlan::Off
        } else if q.pids.is_some() || q.command.is_some() {
            OwnerPlan::Candidates
        } else if (q.listening && !q.connected)
            || q.states.is_some()
            || q.ports.is_some()
            || q.sport.is_some()
            || q.dport.is_some()
            || q.src.is_some()
            || q.dst.is_some()
            || q.protos.is_some()
            || q.connected_to.is_some()
        {
            OwnerPlan::Shown
        } else {
            OwnerPlan::All
        }
    }
}

/// The inodes of `sockets` and of their unix peers, sorted: what a [`OwnerPlan::Shown`] scan
/// looks for.
fn shown_inodes(sockets: &[Socket]) -> Vec<u64> {
    let mut v: Vec<u64> = sockets
        .iter()
        .flat_map(|s| s.id.into_iter().chain(unix_peer(s)))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The inode of a unix socket's peer.
fn unix_peer(s: &Socket) -> Option<u64> {
    match s.remote {
        Some(Endpoint::UnixPeer { peer, .. }) => Some(peer),
        _ => None,
    }
}

/// Runs a query against the running system.
///
/// The owner scan (the dominant cost) is planned from the filters ([`OwnerPlan`]): for the full
/// listing it starts first on its own threads, while this thread dumps the sockets, fills unix
/// peer names and sorts by address, so that only the join and the tie order by holder remain
/// once the scan is done; for a filtered listing the dump (filtered in the kernel) comes first
/// and the scan keeps only the holders of the sockets it returned.
pub fn collect(q: &Query) -> Result<Snapshot, Error> {
    collect_in(q, netns::select(&q.proc_root, &q.zones)?)
}

/// [`collect`] in zones already selected (`None`: the namespace sockstat runs in).
pub(crate) fn collect_in(
    q: &Query,
    selected: Option<netns::SelectedZones>,
) -> Result<Snapshot, Error> {
    timing::begin();
    let ext = q.inet_diag_ext();
    let plan = OwnerPlan::of(q);
    // A scan beside the dumps (the full listing's, `--pid`'s) takes the dumps left when it is
    // done, rather than a dump thread taking turns with it on the cores from the start: the
    // scan is as long as the dumps at 60k sockets, and a dump thread beside it made it the
    // last to end (`-4 -6` 70 -> 74 ms on 2 cores).
    let net_dir = q.proc_root.join("net");
    let shared = match (&selected, plan) {
        (None, OwnerPlan::All | OwnerPlan::Candidates) => dump::Dumps::new(q, ext, &net_dir),
        _ => None,
    };
    let shared = shared.as_ref();
    let prepare = move || -> Result<_, Error> {
        let (mut g, zones) = timing::phase("dump", || match shared {
            Some(d) => {
                d.work();
                let mut g = d.finish()?;
                g.interfaces = dump::interface_names(&g.sockets);
                Ok((g, std::collections::BTreeMap::new()))
            }
            None => gather_zones(q, ext, selected),
        })?;
        // Under `Candidates` most sockets go once the holders are known (`--pid 10` keeps 175
        // of 60k): they are sorted then, not here (7 ms at 60k).
        if q.sorted && plan != OwnerPlan::Candidates {
            timing::phase("sort", || sort_sockets(&mut g.sockets, &zones));
        }
        Ok((g, zones))
    };
    let panicked = || {
        (
            Err(crate::error::SysError::other(
                "the owner scan",
                crate::error::ErrorKind::Bug,
                "its thread panicked",
            )),
            None,
        )
    };
    let (prepared, scan) = match plan {
        OwnerPlan::Off => (prepare(), None),
        OwnerPlan::All | OwnerPlan::Candidates => std::thread::scope(|s| {
            let scanner = s.spawn(|| {
                let scan = timing::phase("owner scan", || match plan {
                    // Only the selected processes' fd tables: /proc reads no other (but learns
                    // which it could not have read).
                    OwnerPlan::Candidates => (
                        owners::scan_candidates(&q.proc_root, q, scan_threads()),
                        None,
                    ),
                    _ => owners::scan_any(q, scan_threads(), walk_threads(true), None),
                });
                if let Some(d) = shared {
                    d.work();
                }
                scan
            });
            let prepared = prepare();
            let scan = scanner.join().unwrap_or_else(|_| panicked());
            (prepared, Some(scan))
        }),
        OwnerPlan::Shown => {
            let prepared = prepare()?;
            let wanted = shown_inodes(&prepared.0.sockets);
            let scan = if wanted.is_empty() {
                (Ok(owners::Scan::default()), None)
            } else {
                timing::phase("owner scan", || {
                    owners::scan_any(q, scan_threads(), walk_threads(false), Some(&wanted))
                })
            };
            (Ok(prepared), Some(scan))
        }
    };
    let (mut gathered, zones) = prepared?;
    let mut snap = Snapshot {
        warnings: std::mem::take(&mut gathered.warnings),
        zones,
        interfaces: std::mem::take(&mut gathered.zone_interfaces),
        ..Snapshot::default()
    };
    snap.interfaces.extend(
        std::mem::take(&mut gathered.interfaces)
            .into_iter()
            .map(|(i, n)| ((None, i), n)),
    );
    let mut sockets = gathered.sockets;
    let left_out = std::mem::take(&mut gathered.left_out);
    if gathered.hidden_time_wait > 0 {
        snap.warnings.push(
            Warning::new(
                WarningCode::TimeWaitHidden,
                format!(
                    "{} not shown: with -T they are left out (they have no TCP internals); \
                     --time-wait or --state TIME_WAIT shows them",
                    counted(
                        gathered.hidden_time_wait as usize,
                        "TIME-WAIT entry is",
                        "TIME-WAIT entries are"
                    )
                ),
            )
            .count(gathered.hidden_time_wait),
        );
    }

    let scan = scan.map(|(scan, bpf_refused)| {
        if let Some(why) = bpf_refused {
            snap.warnings.push(Warning {
                code: WarningCode::OwnerScanBpfUnavailable,
                count: None,
                message: format!("--owner-scan bpf: {why}; scanned /proc instead"),
                details: vec![],
            });
        }
        scan
    });
    let mut index = None;
    let mut unseen = None;
    let mut args_stuck = Vec::new();
    match scan {
        None => {
            for s in &mut sockets {
                s.owners_status = OwnersStatus::NotRequested;
            }
        }
        Some(Err(e)) => {
            for s in &mut sockets {
                s.owners_status = if s.id.is_some() && !s.is_kernel_socket() {
                    OwnersStatus::Hidden
                } else {
                    OwnersStatus::None
                };
            }
            snap.warnings.push(Warning {
                code: WarningCode::OwnersUnavailable,
                count: None,
                message: format!("no process information: {e}"),
                details: vec![],
            });
        }
        Some(Ok(scan)) => {
            args_stuck = scan.args_stuck;
            let seen = unseen_of(q, scan.unreadable, &scan.failed);
            let mut processes = scan.processes;
            let mut owner_index = OwnerIndex::new(scan.holders);
            if unlisted::wanted(q, plan) {
                let found = timing::phase("unlisted", || {
                    unlisted::sockets(q, &owner_index, &sockets, &left_out, &snap.zones)
                });
                if !found.is_empty() {
                    let sort_now = q.sorted && plan != OwnerPlan::Candidates;
                    if sort_now && snap.zones.is_empty() {
                        // Kind other sorts last (`Proto::Other`): after the others, in order.
                        let mut found = found;
                        sort_sockets(&mut found, &snap.zones);
                        sockets.extend(found);
                    } else {
                        sockets.extend(found);
                        if sort_now {
                            sort_sockets(&mut sockets, &snap.zones);
                        }
                    }
                }
            }
            unlisted::fill_uids(q, &owner_index, &mut sockets);
            join::join(&mut sockets, &owner_index, &seen, &processes);
            if plan == OwnerPlan::Candidates {
                // Only the selected processes were read: complete the holders the listing's
                // statuses and unix peers depend on, and decide the partial ones again.
                if let Some(more) = beyond_candidates(q, &sockets, &processes) {
                    let mut holders = owner_index.holders().to_vec();
                    holders.extend_from_slice(more.index.holders());
                    owner_index = OwnerIndex::new(holders);
                    for (pid, p) in more.processes {
                        processes.entry(pid).or_insert(p);
                    }
                    join::rejoin_partial(&mut sockets, &owner_index, &seen, &processes);
                }
            }
            snap.processes = processes;
            index = Some(owner_index);
            unseen = Some(seen);
        }
    }

    join::apply_owner_filters(q, &mut sockets, &snap);
    if q.sorted {
        if plan == OwnerPlan::Candidates {
            timing::phase("sort", || sort_sockets(&mut sockets, &snap.zones));
        }
        join::order_ties_by_owner(&mut sockets);
    }
    if let Some(index) = &index {
        peer_owners(q, index, &sockets, &mut snap);
    }
    // What the listing says about itself is about the sockets it shows: counted after every
    // filter.
    if let Some(u) = &unseen {
        let proc_root = &q.proc_root;
        let unread = join::unread_selected(q, u, |pid| owners::command_of(proc_root, pid));
        snap.warnings.extend(join::selected_warning(
            &unread,
            u,
            crate::privilege::reads_every_fd_table(),
        ));
    }
    snap.owners_unseen = unseen;
    snap.warnings
        .extend(shown_warnings(q, &sockets, snap.owners_unseen.as_ref()));

    let referenced: rustc_hash::FxHashSet<u32> = sockets
        .iter()
        .flat_map(|s| s.owners.iter().map(|o| o.pid))
        .chain(snap.peer_owners.values().flatten().map(|o| o.pid))
        .collect();
    snap.processes.retain(|pid, _| referenced.contains(pid));
    args_stuck.retain(|pid| referenced.contains(pid));
    if !args_stuck.is_empty() {
        snap.warnings.push(Warning {
            code: WarningCode::ArgsUnavailable,
            count: Some(args_stuck.len() as u64),
            message: format!(
                "the arguments of {} could not be read within {:.2} s: their \
                 memory map is locked (a process stuck in a page fault, e.g. on a hung \
                 NFS or FUSE file); ARGS shows ? for them",
                counted(args_stuck.len(), "process", "processes"),
                owners::ARGS_ONE_READ.as_secs_f64()
            ),
            details: args_stuck.iter().map(|pid| format!("pid {pid}")).collect(),
        });
    }
    if q.resolve_users {
        let mut uids: HashSet<u32> = sockets.iter().filter_map(|s| s.uid).collect();
        uids.extend(snap.processes.values().filter_map(|p| p.uid));
        let uids: Vec<u32> = uids.into_iter().collect();
        let (names, missing) = users::names_of(&uids, q.user_lookup_budget);
        snap.users = names;
        if missing > 0 {
            snap.warnings.push(Warning {
                code: WarningCode::UsersUnresolved,
                count: Some(missing as u64),
                message: format!(
                    "the user database did not answer within {:.1} s (NSS: a directory service \
                     such as LDAP or sssd, or a hung file system under 'files'): {missing} users \
                     are shown as numbers; -n skips the lookup",
                    q.user_lookup_budget.as_secs_f64()
                ),
                details: vec![],
            });
        }
    }
    if q.cgroups {
        name_cgroups(q, &sockets, &mut snap);
    }
    snap.sockets = sockets;
    Ok(snap)
}

/// The warnings that count the sockets `shown` (call it once every filter has chosen them):
/// those whose holders may be hidden (`owners-hidden`, `owners-incomplete`, from what the owner
/// scan could not see), and the columns their source did not give (`column-unavailable`).
pub(crate) fn shown_warnings(q: &Query, shown: &[Socket], unseen: Option<&Unseen>) -> Vec<Warning> {
    let mut out = match unseen {
        Some(u) => join::warnings(shown, u, crate::privilege::reads_every_fd_table()),
        None => Vec::new(),
    };
    out.extend(dump::column_warnings(q, shown));
    out
}

/// Counts [`shown_warnings`] again over `snap.sockets`, after a consumer narrowed them
/// ([`crate::kill::select`]): what was counted over the sockets it left out goes.
pub(crate) fn recount_shown_warnings(q: &Query, snap: &mut Snapshot) {
    use WarningCode::{ColumnUnavailable, OwnersHidden, OwnersIncomplete};
    snap.warnings
        .retain(|w| !matches!(w.code, OwnersHidden | OwnersIncomplete | ColumnUnavailable));
    let again = shown_warnings(q, &snap.sockets, snap.owners_unseen.as_ref());
    snap.warnings.extend(again);
}

/// What a scan could not see, as [`join::join`] takes it: the processes it could not read
/// (`unreadable`, `failed`), whether `hidepid` hides others, and whose eyes these are.
pub(crate) fn unseen_of(
    q: &Query,
    unreadable: Vec<(u32, Option<u32>)>,
    failed: &[(u32, Option<u32>, rustix::io::Errno)],
) -> Unseen {
    Unseen {
        unreadable,
        failed: failed
            .iter()
            .map(|(pid, uid, e)| (*pid, *uid, std::io::Error::from(*e).to_string()))
            .collect(),
        hidepid: owners::hidepid_hides_others(&q.proc_root),
        euid: rustix::process::geteuid().as_raw(),
    }
}

/// Fills `snap.peer_owners`: every holder of the unix peers of the sockets shown, for the peers
/// whose holders the listing does not show in full itself: a peer not listed, or, when an owner
/// filter (`--pid`, `--user`, `--command`) cut the holder lists, any peer. `index` holds every
/// peer's holders (under [`OwnerPlan::Candidates`], from [`beyond_candidates`]).
fn peer_owners(q: &Query, index: &OwnerIndex, sockets: &[Socket], snap: &mut Snapshot) {
    let mut peers: Vec<u64> = sockets.iter().filter_map(unix_peer).collect();
    if peers.is_empty() {
        return;
    }
    peers.sort_unstable();
    peers.dedup();
    let mut shown: Vec<u64> = Vec::new();
    if !q.filters_owners() {
        shown = sockets
            .iter()
            .filter(|s| s.proto == crate::model::Proto::Unix)
            .filter_map(|s| s.id)
            .collect();
        shown.sort_unstable();
    }
    for p in peers
        .into_iter()
        .filter(|p| shown.binary_search(p).is_err())
    {
        let held = index.holders_of(p);
        if !held.is_empty() {
            snap.peer_owners
                .insert(p, held.iter().map(|h| h.owner).collect());
        }
    }
}

/// What [`beyond_candidates`] found.
struct Beyond {
    index: OwnerIndex,
    processes: std::collections::HashMap<u32, crate::model::Process>,
}

/// Under [`OwnerPlan::Candidates`] the scan read only the fd tables of the processes `--pid` or
/// `--command` select. What the listing shows of the sockets they hold must not depend on
/// that: a socket that comes out `partial` from their holders alone may have its creator among
/// other processes' holders (then it is `known`, as in the full listing), and a unix peer's
/// holders are every process's. One more scan, of every process, looks for just those inodes
/// (cheap through the BPF iterator; through `/proc`, as without root, it reads every fd table
/// the reader may read). `None` when nothing needs it, or the scan failed (the peers then
/// show as inodes, and a partial socket stays partial: less is never shown as complete).
fn beyond_candidates(
    q: &Query,
    sockets: &[Socket],
    processes: &std::collections::HashMap<u32, crate::model::Process>,
) -> Option<Beyond> {
    let selected = |s: &Socket| {
        s.owners
            .iter()
            .any(|o| q.matches_owner(o, processes.get(&o.pid)))
    };
    let mut wanted: Vec<u64> = sockets
        .iter()
        .filter(|s| selected(s))
        .flat_map(|s| {
            let partial = (s.owners_status == OwnersStatus::Partial).then_some(s.id);
            partial.flatten().into_iter().chain(unix_peer(s))
        })
        .collect();
    if wanted.is_empty() {
        return None;
    }
    wanted.sort_unstable();
    wanted.dedup();
    let mut all = q.clone();
    all.pids = None;
    all.command = None;
    all.uid = None;
    let (scan, _) = timing::phase("peer owner scan", || {
        owners::scan_any(&all, scan_threads(), walk_threads(false), Some(&wanted))
    });
    let scan = scan.ok()?;
    Some(Beyond {
        index: OwnerIndex::new(scan.holders),
        processes: scan.processes,
    })
}

/// Fills `snap.cgroups` for the cgroup ids the sockets carry, or says why it cannot.
fn name_cgroups(q: &Query, sockets: &[Socket], snap: &mut Snapshot) {
    let mountinfo_path = q.proc_root.join("self/mountinfo");
    let mountinfo = match procfs::read_to_string(&mountinfo_path) {
        Ok(t) => t,
        Err(e) => {
            snap.warnings.push(Warning {
                code: WarningCode::CgroupUnknown,
                count: None,
                message: format!(
                    "cannot read {}: {e}; sockets' cgroups cannot be named (the CGROUP column shows ?)",
                    mountinfo_path.display()
                ),
                details: vec![],
            });
            return;
        }
    };
    let Some(mount) = cgroup::cgroup2_mount(&mountinfo) else {
        snap.warnings.push(Warning {
            code: WarningCode::Cgroup2Unmounted,
            count: None,
            message: "no cgroup2 hierarchy is mounted here, so sockets' cgroups cannot be named \
                      (the CGROUP column shows ?); mount one (mount -t cgroup2 none /sys/fs/cgroup) \
                      or use the owner columns"
                .into(),
            details: vec![],
        });
        return;
    };
    let wanted: HashSet<u64> = sockets.iter().filter_map(|s| s.cgroup_id).collect();
    if wanted.is_empty() {
        return;
    }
    let (all, unlisted) = cgroup::id_paths(&mount);
    let mut missing = 0;
    for id in wanted {
        match all.get(&id) {
            Some(p) => {
                snap.cgroups.insert(id, p.clone());
            }
            None => missing += 1,
        }
    }
    if missing > 0 {
        let why = if unlisted.is_empty() {
            "removed since the socket was made, or in another cgroup namespace".to_string()
        } else {
            format!(
                "{} could not be listed (-v for which), or the cgroups were removed since the \
                 socket was made",
                counted(unlisted.len(), "directory", "directories")
            )
        };
        snap.warnings.push(
            Warning::new(
                WarningCode::CgroupUnknown,
                format!(
                    "{missing} cgroup ids of sockets have no directory under {} ({why})",
                    mount.display()
                ),
            )
            .count(missing)
            .details(unlisted),
        );
    }
}

/// Gathers the sockets of the selected zones (`None`: the namespace sockstat runs in), each
/// tagged with its zone key.
fn gather_zones(
    q: &Query,
    ext: u8,
    selected: Option<netns::SelectedZones>,
) -> Result<
    (
        dump::Gathered,
        std::collections::BTreeMap<u64, crate::zone::Zone>,
    ),
    Error,
> {
    let mut zones = std::collections::BTreeMap::new();
    let Some((selected, mut warnings)) = selected else {
        let mut g = dump::gather(q, ext, &q.proc_root.join("net"))?;
        g.interfaces = dump::interface_names(&g.sockets);
        return Ok((g, zones));
    };
    let mut all = dump::Gathered::default();
    let (mut fallback, mut skipped) = (Vec::new(), Vec::new());
    for t in selected {
        zones.insert(t.key, t.zone.clone());
        let thread_net = q.proc_root.join("thread-self/net");
        let joined = netns::run_in(&t, || {
            let net = if t.own {
                q.proc_root.join("net")
            } else {
                thread_net.clone()
            };
            dump::gather(q, ext, &net).map(|mut g| {
                g.interfaces = dump::interface_names(&g.sockets);
                g
            })
        });
        let mut g = match joined {
            Ok(g) => g?,
            // Gone since discovery (a container that stopped): not in this listing, and not
            // worth a warning.
            Err(why) if why.kind() == ErrorKind::Gone => continue,
            Err(why) => {
                // Not permitted to join: read its /proc/PID/net text through a member process.
                let pid = match netns::live_member(&t, &q.proc_root) {
                    Ok(Some(pid)) => pid,
                    Ok(None) => {
                        skipped.push(format!(
                            "zone {}: {why}; no visible process in it",
                            t.zone.name
                        ));
                        continue;
                    }
                    Err(_) => continue,
                };
                let mut pq = q.clone();
                pq.source = Source::Proc;
                let net = q.proc_root.join(format!("{pid}/net"));
                match dump::gather(&pq, 0, &net) {
                    // Its member exited while it was read (an exited process's files read as
                    // absent, which is an empty list): gone, like a zone that cannot be entered.
                    Ok(_) if !net.join("tcp").exists() => continue,
                    Ok(g) => {
                        fallback.push(format!(
                            "zone {}: {why}; listed from /proc/{pid}/net",
                            t.zone.name
                        ));
                        g
                    }
                    // Its last member exited while it was read.
                    Err(e) if e.kind() == ErrorKind::Gone => continue,
                    Err(e) => return Err(e),
                }
            }
        };
        for s in &mut g.sockets {
            s.netns = Some(t.key);
        }
        all.sockets.append(&mut g.sockets);
        all.warnings.append(&mut g.warnings);
        all.hidden_time_wait += g.hidden_time_wait;
        all.left_out.append(&mut g.left_out);
        all.zone_interfaces
            .extend(g.interfaces.into_iter().map(|(i, n)| ((Some(t.key), i), n)));
    }
    if !fallback.is_empty() || !skipped.is_empty() {
        warnings.push(Warning {
            code: WarningCode::ZonesNotJoined,
            count: Some((fallback.len() + skipped.len()) as u64),
            message: format!(
                "{} zones could not be joined with these privileges: {} listed from /proc/PID/net text (no socket cookies, TCP internals or unix peers), {} with no visible process not listed; run as root to read them fully",
                fallback.len() + skipped.len(),
                fallback.len(),
                skipped.len()
            ),
            details: fallback.into_iter().chain(skipped).collect(),
        });
    }
    all.warnings.append(&mut warnings);
    Ok((all, zones))
}

/// The part of the output order that fits in integers: zone rank, protocol and family, and the
/// endpoints where integers decide them: inet addresses and ports (every IPv4 before IPv6, as
/// `IpAddr` orders), and an unnamed unix socket's peer inode. `exact` is false when names must
/// still be compared (a bound unix path or abstract name, packet sockets).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct SortKey {
    head: u64,
    local: u128,
    mid: u32,
    remote: u128,
    tail: u16,
    exact: bool,
}

/// Tag and value of an endpoint in the key; `None` when only the name can order it.
fn endpoint_key(ep: Option<&Endpoint>) -> Option<(u8, u128, u16)> {
    match ep {
        None => Some((0, 0, 0)),
        Some(Endpoint::Inet {
            addr: std::net::IpAddr::V4(a),
            port,
        }) => Some((1, u128::from(u32::from(*a)), *port)),
        Some(Endpoint::Inet {
            addr: std::net::IpAddr::V6(a),
            port,
        }) => Some((2, u128::from(*a), *port)),
        // Endpoint::Unix(None) sorts before any named unix socket.
        Some(Endpoint::Unix(None)) => Some((0, 0, 0)),
        // Peers are ordered by inode first; two sockets with the same peer share its name.
        Some(Endpoint::UnixPeer { peer, .. }) => Some((5, u128::from(*peer), 0)),
        Some(_) => None,
    }
}

impl SortKey {
    /// A 192-bit prefix of the key that orders as the key does wherever it differs (each word
    /// is a non-decreasing image of the key's fields, so equal prefixes are settled by the
    /// whole key): the head; the local end with its port and the remote end's kind; the remote
    /// end with its port. Addresses fit whole where they are small (IPv4, `::1`, `::`,
    /// IPv4-mapped); larger IPv6 addresses keep their leading bits. Named endpoints (tag 0xff)
    /// contribute nothing and go to the whole key.
    fn prefix(&self) -> (u64, u64, u64) {
        let ltag = self.head & 0xff;
        let lport = u64::from(self.mid >> 8);
        let rtag = u64::from(self.mid & 0xff);
        // The local word, and whether it holds the local end whole (then the remote word may
        // order what it leaves equal; if not, the remote word must stay 0).
        let (local, whole) = match ltag {
            // addr (32) | port (16) | remote kind (8)
            1 => (((self.local as u64) << 24) | (lport << 8) | rtag, true),
            2 => v6_image(self.local, lport, 62),
            5 if self.local < (1u128 << 56) => (((self.local as u64) << 8) | rtag, true),
            5 => (u64::MAX, false),
            // No local end, or an unnamed unix socket: nothing to order but the remote end.
            0 => (rtag, true),
            _ => (0, false),
        };
        if !whole {
            return (self.head, local, 0);
        }
        let remote_value = match rtag {
            1 => ((self.remote as u64) << 16) | u64::from(self.tail),
            2 => v6_image(self.remote, u64::from(self.tail), 55).0,
            5 => self.remote.min((1u128 << 56) - 1) as u64,
            _ => 0,
        };
        (self.head, local, (rtag << 56) | remote_value)
    }
}

/// A non-decreasing image of a remote end in the order `Option<Endpoint>` sorts: the kind
/// (none, inet, unix name, unix peer, packet, netlink, unlisted), then a unix peer's inode; what it leaves equal
/// the whole key settles.
fn remote_image(e: Option<&Endpoint>) -> u64 {
    const KIND: u32 = 60;
    match e {
        None => 0,
        Some(Endpoint::Inet { .. }) => 1 << KIND,
        Some(Endpoint::Unix(_)) => 2 << KIND,
        Some(Endpoint::UnixPeer { peer, .. }) => (3 << KIND) | (*peer).min((1 << KIND) - 1),
        Some(Endpoint::Packet { .. }) => 4 << KIND,
        Some(Endpoint::Netlink { .. }) => 5 << KIND,
        Some(Endpoint::Unlisted(_)) => 6 << KIND,
    }
}

/// A non-decreasing image of (IPv6 address, port) in `bits + 1` bits, and whether it is exact:
/// small addresses (`::`, `::1`, IPv4-mapped) whole with the port, in the lower half; others by
/// their leading bits only, in the upper half.
fn v6_image(addr: u128, port: u64, bits: u32) -> (u64, bool) {
    let small = bits - 16;
    if addr < (1u128 << small) {
        (((addr as u64) << 16) | port, true)
    } else {
        ((1u64 << bits) | (addr >> (128 - bits)) as u64, false)
    }
}

fn sort_key(s: &Socket, zone: u32) -> SortKey {
    let head = (u64::from(zone) << 32) | ((s.proto as u64) << 16) | ((s.family as u64) << 8);
    match (
        endpoint_key(Some(&s.local)),
        endpoint_key(s.remote.as_ref()),
    ) {
        (Some(l), Some(r)) => SortKey {
            head: head | u64::from(l.0),
            local: l.1,
            mid: (u32::from(l.2) << 8) | u32::from(r.0),
            remote: r.1,
            tail: r.2,
            exact: true,
        },
        // A named local end: compare the names, then the remote end.
        _ => SortKey {
            head: head | 0xff,
            local: 0,
            mid: 0,
            remote: 0,
            tail: 0,
            exact: false,
        },
    }
}

/// Output order: zone (global first, then by name), protocol, family, local address and port,
/// remote address and port, then the first holder's pid and fd, then identity (so the order is
/// total and stable). Integer keys are computed once per socket and sorted with their index;
/// only bound unix and packet names are compared as endpoints. The permutation is then applied
/// in place, so no second copy of the sockets is made.
pub fn sort_sockets(
    sockets: &mut [Socket],
    zones: &std::collections::BTreeMap<u64, crate::zone::Zone>,
) {
    // Rank zones as they are shown: global first, then by name.
    let mut ranked: Vec<(&u64, &crate::zone::Zone)> = zones.iter().collect();
    ranked.sort_by(|a, b| {
        (a.1.kind != crate::zone::ZoneKind::Global, &a.1.name, a.0).cmp(&(
            b.1.kind != crate::zone::ZoneKind::Global,
            &b.1.name,
            b.0,
        ))
    });
    let rank: std::collections::HashMap<u64, u32> = ranked
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (**k, i as u32 + 1))
        .collect();
    // Sorted as 32-byte items (a 192-bit prefix of the key, and the index) rather than with the
    // whole 64-byte key: at a million sockets that is 32 MB less. Ties on the prefix, which
    // only large IPv6 addresses sharing their leading bits and named endpoints produce, are
    // settled with the whole key.
    //
    // A named local end (a bound unix or packet socket) has no integer image of its own, and
    // many sockets share one (every connection a unix server accepted carries its path): its
    // place among the distinct named ends stands in for it, and the remote end's kind and unix
    // peer inode follow, so that the names are compared once per distinct name, not once per
    // comparison (9 of the sort's 12 ms at 60k sockets, half of them unix).
    let mut named: rustc_hash::FxHashMap<&Endpoint, u64> = sockets
        .iter()
        .filter(|s| {
            endpoint_key(Some(&s.local)).is_none() || endpoint_key(s.remote.as_ref()).is_none()
        })
        .map(|s| (&s.local, 0))
        .collect();
    let mut distinct: Vec<&Endpoint> = named.keys().copied().collect();
    distinct.sort_unstable();
    for (r, e) in distinct.into_iter().enumerate() {
        named.insert(e, r as u64);
    }
    let mut items: Vec<(u64, u64, u64, u32)> = sockets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let zone = s.netns.and_then(|k| rank.get(&k).copied()).unwrap_or(0);
            let (k0, mut k1, mut k2) = sort_key(s, zone).prefix();
            if k0 & 0xff == 0xff {
                k1 = named.get(&s.local).copied().unwrap_or(u64::MAX);
                k2 = remote_image(s.remote.as_ref());
            }
            (k0, k1, k2, i as u32)
        })
        .collect();
    // In parts from 8192 sockets; past [`PARALLEL_MAX`] in place on one thread, as the merge
    // copies half the items aside (16 MB at a million sockets).
    let parts = if (8192..=PARALLEL_MAX).contains(&items.len()) {
        cores().unwrap_or(1).clamp(1, 4)
    } else {
        1
    };
    par_sort_by(&mut items, parts, |&(a0, a1, a2, i), &(b0, b1, b2, j)| {
        (a0, a1, a2).cmp(&(b0, b1, b2)).then_with(|| {
            let (a, b) = (&sockets[i as usize], &sockets[j as usize]);
            let identity =
                || (a.owners.first(), a.id, a.cookie).cmp(&(b.owners.first(), b.id, b.cookie));
            if a0 & 0xff == 0xff {
                // A named local end (the head's tag): the names decide, then identity.
                return (&a.local, &a.remote)
                    .cmp(&(&b.local, &b.remote))
                    .then_with(identity);
            }
            // The zone rank is the head's top half.
            let (ka, kb) = (
                sort_key(a, (a0 >> 32) as u32),
                sort_key(b, (b0 >> 32) as u32),
            );
            ka.cmp(&kb).then_with(identity)
        })
    });
    let mut order: Vec<u32> = items.into_iter().map(|(_, _, _, i)| i).collect();
    for start in 0..order.len() {
        let mut cur = start;
        while order[cur] as usize != start {
            let next = order[cur] as usize;
            sockets.swap(cur, next);
            order[cur] = cur as u32;
            cur = next;
        }
        order[cur] = cur as u32;
    }
}

/// `AT_PAGESZ`: the page size, in the auxiliary vector.
pub(crate) const AT_PAGESZ: u64 = 6;
/// `AT_CLKTCK`: clock ticks per second (`USER_HZ`) as `/proc` reports times in.
pub(crate) const AT_CLKTCK: u64 = 17;

/// One value of this process's auxiliary vector (`/proc/self/auxv`).
pub(crate) fn auxv(key: u64) -> Option<u64> {
    let b = std::fs::read("/proc/self/auxv").ok()?;
    let w = std::mem::size_of::<usize>();
    b.chunks_exact(2 * w).find_map(|e| {
        let mut k = [0u8; 8];
        let mut v = [0u8; 8];
        k[..w].copy_from_slice(&e[..w]);
        v[..w].copy_from_slice(&e[w..]);
        (u64::from_ne_bytes(k) == key).then(|| u64::from_ne_bytes(v))
    })
}

#[cfg(test)]
mod sort_tests {
    use super::*;
    use crate::model::{Family, Proto, RawString, SockType, State, UnixName};

    /// Sorting in parts and merging gives what one sort gives, for sizes below, at and past the
    /// parallel threshold, with runs of equal keys (told apart by a second field the comparison
    /// ignores only where it must not matter).
    #[test]
    fn sorting_in_parts_matches_one_sort() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for (n, parts) in [
            (0, 2),
            (1, 2),
            (100, 3),
            (8191, 1),
            (8192, 2),
            (20_001, 2),
            (20_001, 3),
            (20_001, 4),
            (7, 5),
        ] {
            let items: Vec<(u64, u32)> = (0..n as u32)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 5000, i)
                })
                .collect();
            let mut sorted = items.clone();
            par_sort_by(&mut sorted, parts, |a, b| a.cmp(b));
            let mut one = items;
            one.sort_unstable();
            assert!(sorted == one, "{n} items in {parts} parts");
        }
    }

    fn sock(
        proto: Proto,
        family: Family,
        local: Endpoint,
        remote: Option<Endpoint>,
        id: u64,
    ) -> Socket {
        Socket {
            id: Some(id),
            cookie: Some(id),
            ..Socket::new(
                proto,
                family,
                SockType::Stream,
                State::Established,
                local,
                remote,
            )
        }
    }

    fn inet(a: &str, port: u16) -> Endpoint {
        Endpoint::Inet {
            addr: a.parse().unwrap(),
            port,
        }
    }

    /// Sorts `v` with `sort_sockets` and by comparing the fields themselves; the orders must
    /// be the same.
    fn assert_sorts_like_the_fields(mut v: Vec<Socket>) {
        let mut plain = v.clone();
        plain.sort_by(|a, b| {
            (a.proto, a.family, &a.local, &a.remote, a.id)
                .cmp(&(b.proto, b.family, &b.local, &b.remote, b.id))
        });
        sort_sockets(&mut v, &std::collections::BTreeMap::new());
        if let Some(k) = (0..v.len()).find(|&k| v[k].id != plain[k].id) {
            panic!(
                "at {k}: sorted {:?} {:?} {:?} {:?}, expected {:?} {:?} {:?} {:?}",
                v[k].proto,
                v[k].family,
                v[k].local,
                v[k].remote,
                plain[k].proto,
                plain[k].family,
                plain[k].local,
                plain[k].remote
            );
        }
    }

    /// The integer keys must order exactly as comparing the fields themselves does.
    #[test]
    fn keyed_sort_equals_the_plain_comparison() {
        let mut v = Vec::new();
        let addrs = [
            "127.0.0.1",
            "10.0.0.2",
            "0.0.0.0",
            "::1",
            "2001:db8::1",
            // Same first 64 bits as the one above: the sort prefix ties, the whole key decides.
            "2001:db8::2",
            "2001:db8::1:0:0:5",
            "::ffff:127.0.0.1",
            "::",
            "255.255.255.255",
        ];
        let mut id = 1;
        for (i, a) in addrs.iter().enumerate() {
            for b in [None, Some(addrs[(i + 3) % addrs.len()])] {
                for port in [0u16, 80, 65535] {
                    let fam = if a.contains(':') {
                        Family::Inet6
                    } else {
                        Family::Inet
                    };
                    for proto in [Proto::Tcp, Proto::Udp] {
                        v.push(sock(proto, fam, inet(a, port), b.map(|x| inet(x, 443)), id));
                        id += 1;
                    }
                }
            }
        }
        for name in [None, Some("/run/a"), Some("/run/b"), Some("@abs")] {
            // Accepted sockets share the listener's path; dgram clients share one peer.
            for peer in [None, Some(7u64), Some(3), Some(7), Some(9)] {
                let local =
                    Endpoint::Unix(name.map(|n| UnixName::Path(RawString::new(n.as_bytes()))));
                let remote = peer.map(|p| Endpoint::UnixPeer {
                    peer: p,
                    name: None,
                });
                v.push(sock(Proto::Unix, Family::Unix, local, remote, id));
                id += 1;
            }
        }
        // A deterministic shuffle.
        let n = v.len();
        for i in 0..n {
            v.swap(i, (i * 7919 + 13) % n);
        }
        assert_sorts_like_the_fields(v);
    }

    /// The same, on many random sockets drawn so that prefixes tie often: IPv6 addresses that
    /// share their leading bits, small and large ones, shared ports, unix peers with inodes
    /// beyond 2^56. A prefix that is not an order-preserving image of the key fails here.
    #[test]
    fn keyed_sort_equals_the_plain_comparison_at_random() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let v4 = [
            "127.0.0.1",
            "127.0.0.2",
            "10.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
        ];
        let v6 = [
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::2:0:0:1",
            "2001:db8::1",
            "2001:db8::2",
            "2001:db8::1:0:0:1",
            "fe80::1",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ];
        let ports = [0u16, 1, 80, 443, 8080, 65535];
        let mut v = Vec::new();
        // Past the size sorted in parts, so the merge is checked too.
        for id in 1..=12_000u64 {
            let r = next();
            let s = match r % 4 {
                0 | 1 => {
                    let six = r % 4 == 1;
                    let pick = |x: u64| -> &str {
                        if six {
                            v6[(x % v6.len() as u64) as usize]
                        } else {
                            v4[(x % v4.len() as u64) as usize]
                        }
                    };
                    let local = inet(pick(next()), ports[(next() % 6) as usize]);
                    let remote =
                        (next() % 3 != 0).then(|| inet(pick(next()), ports[(next() % 6) as usize]));
                    let fam = if six { Family::Inet6 } else { Family::Inet };
                    let proto = if next() % 2 == 0 {
                        Proto::Tcp
                    } else {
                        Proto::Udp
                    };
                    sock(proto, fam, local, remote, id)
                }
                _ => {
                    let inode = |x: u64| match x % 4 {
                        0 => x % 50,
                        1 => (1u64 << 56) + x % 3,
                        2 => u64::MAX - x % 3,
                        _ => 1000 + x % 7,
                    };
                    // Names sharing long prefixes, as paths in one directory do.
                    let names = ["/run/sock/a", "/run/sock/ab", "/run/sock/b", "/run/"];
                    let name = |x: u64| {
                        let n = RawString::new(names[(x % 4) as usize].as_bytes());
                        if x % 5 == 0 {
                            UnixName::Abstract(n)
                        } else {
                            UnixName::Path(n)
                        }
                    };
                    // The ends the dump produces: a unix socket's own name (none, a path,
                    // an abstract name) and its peer; a packet socket's protocol and
                    // interface, with no remote end.
                    if next() % 5 == 0 {
                        let local = Endpoint::Packet {
                            protocol: (next() % 3) as u16,
                            ifindex: (next() % 2) as u32,
                        };
                        sock(Proto::Packet, Family::Packet, local, None, id)
                    } else {
                        let local = match next() % 3 {
                            0 => Endpoint::Unix(None),
                            _ => Endpoint::Unix(Some(name(next()))),
                        };
                        // A peer's name is the peer's: the same for every socket it serves.
                        let remote = (next() % 3 != 0).then(|| {
                            let peer = inode(next());
                            Endpoint::UnixPeer {
                                peer,
                                name: (peer % 2 == 0).then(|| name(peer / 2)),
                            }
                        });
                        sock(Proto::Unix, Family::Unix, local, remote, id)
                    }
                }
            };
            v.push(s);
        }
        assert_sorts_like_the_fields(v);
    }
}
