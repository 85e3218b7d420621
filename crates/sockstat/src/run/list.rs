//! The listing (`sockstat`, [`crate::collect`]): plans how the holders of the sockets are
//! found from what the query selects, gathers the sockets and their holders through `sys` (on
//! two threads when both are wanted), joins them (`join`), applies the owner filters, orders
//! the rows (`order`) and says what the listing could not see. `sys` gathers what it is asked
//! for and decides none of this.

use std::time::Instant;

use crate::error::{Error, SysError};
use crate::join::{self, OwnerIndex, Unseen};
use crate::model::{counted, Endpoint, OwnersStatus, Snapshot, Socket, Warning, WarningCode};
use crate::order::sort_sockets;
use crate::query::{Families, Query, Source};
use crate::run::holders::HolderCache;
use crate::sys::{dump, netns, owners, scan_threads, timing, unlisted, users, walk_threads};

/// How a listing finds the holders of its sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnerPlan {
    /// No owner scan (`--no-owners`, `--summary`).
    Off,
    /// Every socket's holders, scanned while the sockets are dumped (the full listing, or
    /// filters that select most sockets, `-L`, `-c`, or that a socket in no table can pass:
    /// `-4`, `-6`, `-u`, `-P` of a kind whose sockets enter their table only when bound).
    All,
    /// The sockets first (their filters applied in the kernel), then the holders of just those
    /// sockets and of their unix peers: `-l`, `--state`, `-p`, `--sport`, `--dport`, `--src`,
    /// `--dst`, `--connected-to`, `-P unix`, `-P raw`, `-P packet`.
    Shown,
    /// `--pid`, `--command`: only the fd tables of the processes those select, then the holders
    /// of the unix peers of the sockets they hold.
    Candidates,
}

impl OwnerPlan {
    fn of(q: &Query) -> OwnerPlan {
        if !q.gather.owners {
            OwnerPlan::Off
        } else if q.select.pids.is_some() || q.select.command.is_some() {
            OwnerPlan::Candidates
        } else if (q.select.listening && !q.select.connected)
            || q.select.states.is_some()
            || q.select.ports.is_some()
            || q.select.sport.is_some()
            || q.select.dport.is_some()
            || q.select.src.is_some()
            || q.select.dst.is_some()
            || q.select.connected_to.is_some()
            || q.select
                .protos
                .as_ref()
                .is_some_and(|p| !(q.gather.unlisted && p.iter().any(|&p| may_be_unbound(p))))
        {
            OwnerPlan::Shown
        } else {
            OwnerPlan::All
        }
    }
}

/// Whether a socket of kind `p` can be in no table while a process holds it: those that enter
/// their table when bound, connected or used (`sys::unlisted`), not unix, raw and packet
/// sockets, hashed when made.
fn may_be_unbound(p: crate::model::Proto) -> bool {
    use crate::model::Proto;
    !matches!(p, Proto::Unix | Proto::Raw | Proto::Packet)
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
/// The owner scan (the dominant cost) is planned from the filters (`OwnerPlan`): for the full
/// listing it starts first on its own threads, while this thread dumps the sockets, fills unix
/// peer names and sorts by address, so that only the join and the tie order by holder remain
/// once the scan is done; for a filtered listing the dump (filtered in the kernel) comes first
/// and the scan keeps only the holders of the sockets it returned.
pub fn collect(q: &Query) -> Result<Snapshot, Error> {
    collect_in(
        q,
        netns::select(&q.gather.proc_root, &q.select.zones)?,
        None,
    )
    .map(|(snapshot, _)| snapshot)
}

/// [`collect`] in zones already selected (`None`: the namespace sockstat runs in), with the
/// holders of an earlier walk used again when `kept` allows it (`run::holders`; a view's
/// samples, never a listing); with the age of that walk when its holders were used.
pub(crate) fn collect_in(
    q: &Query,
    selected: Option<netns::SelectedZones>,
    kept: Option<&HolderCache>,
) -> Result<(Snapshot, Option<std::time::Duration>), Error> {
    timing::begin();
    let ext = q.inet_diag_ext();
    let plan = OwnerPlan::of(q);
    // Kept walks stand for the walks of every socket (`All`) or of the ones shown (`Shown`),
    // never beside the sockets no table lists (those are found by the walk itself).
    let kept = kept
        .filter(|_| matches!(plan, OwnerPlan::All | OwnerPlan::Shown) && !wants_unlisted(q, plan));
    // A scan beside the dumps (the full listing's, `--pid`'s) takes the dumps left when it is
    // done, rather than a dump thread taking turns with it on the cores from the start: the
    // scan is as long as the dumps at 60k sockets, and a dump thread beside it made it the
    // last to end (`-4 -6` 70 -> 74 ms on 2 cores).
    let net_dir = q.gather.proc_root.join("net");
    // A full scan with a socket filter that leaves tables out (`-4`, `-P udp`) reads those
    // tables' inodes too, so that a socket the scan meets in none of the tables it read is
    // known to be in no table (one row, `sys::unlisted`) without asking about each.
    let census = plan == OwnerPlan::All
        && wants_unlisted(q, plan)
        && (q.select.protos.is_some() || q.select.families != Families::default());
    let shared = match (&selected, plan) {
        (None, OwnerPlan::All | OwnerPlan::Candidates) => {
            dump::Dumps::new(q, ext, &net_dir, census)
        }
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
            None => crate::sys::zones::gather(q, ext, selected, census),
        })?;
        // Under `Candidates` most sockets go once the holders are known (`--pid 10` keeps 175
        // of 60k): they are sorted then, not here (7 ms at 60k).
        if q.gather.sorted && plan != OwnerPlan::Candidates {
            timing::phase("sort", || sort_sockets(&mut g.sockets, &zones));
        }
        Ok((g, zones))
    };
    let panicked = || {
        (
            Err(SysError::other(
                "the owner scan",
                crate::error::ErrorKind::Bug,
                "its thread panicked",
            )),
            None,
        )
    };
    let mut holders_age = None;
    let (prepared, scan) = match (plan, kept) {
        (OwnerPlan::Off, _) => (prepare(), None),
        // The sockets first, then the walk (unless the kept one stands for it): a socket
        // dumped before the walk began is one the walk found the holders of, if it has any.
        (_, Some(kept)) => {
            let prepared = prepare()?;
            let inodes = shown_inodes(&prepared.0.sockets);
            let scan = match kept.reuse(&inodes) {
                Some((scan, refused, age)) => {
                    holders_age = Some(age);
                    (Ok(scan), refused)
                }
                None if inodes.is_empty() => {
                    kept.keep(&owners::Scan::default(), None, inodes, Instant::now());
                    (Ok(owners::Scan::default()), None)
                }
                None => {
                    let at = Instant::now();
                    let wanted = (plan == OwnerPlan::Shown).then_some(&inodes[..]);
                    let (scan, refused) = timing::phase("owner scan", || {
                        owners::scan_any(q, scan_threads(), walk_threads(false), wanted)
                    });
                    let refused = refused.map(|e| e.to_string());
                    match &scan {
                        Ok(s) => kept.keep(s, refused.clone(), inodes, at),
                        Err(_) => kept.forget(),
                    }
                    (scan, refused)
                }
            };
            (Ok(prepared), Some(scan))
        }
        (OwnerPlan::All | OwnerPlan::Candidates, None) => std::thread::scope(|s| {
            let scanner = s.spawn(|| {
                let scan = timing::phase("owner scan", || match plan {
                    // Only the selected processes' fd tables: /proc reads no other (but learns
                    // which it could not have read).
                    OwnerPlan::Candidates => (
                        owners::scan_candidates(&q.gather.proc_root, q, scan_threads()),
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
            let (scan, refused) = scanner.join().unwrap_or_else(|_| panicked());
            (prepared, Some((scan, refused.map(|e| e.to_string()))))
        }),
        (OwnerPlan::Shown, None) => {
            let prepared = prepare()?;
            let wanted = shown_inodes(&prepared.0.sockets);
            let scan = if wanted.is_empty() {
                (Ok(owners::Scan::default()), None)
            } else {
                let (scan, refused) = timing::phase("owner scan", || {
                    owners::scan_any(q, scan_threads(), walk_threads(false), Some(&wanted))
                });
                (scan, refused.map(|e| e.to_string()))
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
            let seen = owners::unseen_of(q, scan.unreadable, &scan.failed);
            let mut processes = scan.processes;
            let mut owner_index = OwnerIndex::new(scan.holders);
            if wants_unlisted(q, plan) {
                let found = timing::phase("unlisted", || {
                    unlisted::sockets(q, &owner_index, &sockets, &left_out, &snap.zones)
                });
                if !found.is_empty() {
                    let sort_now = q.gather.sorted && plan != OwnerPlan::Candidates;
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
    if q.gather.sorted {
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
        let proc_root = &q.gather.proc_root;
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
    if q.gather.resolve_users {
        let uids: rustc_hash::FxHashSet<u32> = sockets
            .iter()
            .filter_map(|s| s.uid)
            .chain(snap.processes.values().filter_map(|p| p.uid))
            .collect();
        let uids: Vec<u32> = uids.into_iter().collect();
        let (names, missing) = users::names_of(&uids, q.gather.user_lookup_budget);
        snap.users = names;
        if missing > 0 {
            snap.warnings.push(Warning {
                code: WarningCode::UsersUnresolved,
                count: Some(missing as u64),
                message: format!(
                    "the user database did not answer within {:.1} s (NSS: a directory service \
                     such as LDAP or sssd, or a hung file system under 'files'): {missing} users \
                     are shown as numbers; -n skips the lookup",
                    q.gather.user_lookup_budget.as_secs_f64()
                ),
                details: vec![],
            });
        }
    }
    if q.gather.cgroups {
        crate::sys::cgroup::name_cgroups(q, &sockets, &mut snap);
    }
    snap.sockets = sockets;
    Ok((snap, holders_age))
}

/// Whether a listing looks for the sockets no table lists: when such a socket can pass its
/// filters (an unbound socket has no state a state filter names, no role, address or port; `-P`
/// and the family filters select it by the kind the kernel names), and its scan reads every
/// socket fd of the processes it reads: the full listing and its family and `-P` filters (with
/// a census of the tables they leave out), and `--pid`, `--command` (whose few sockets the
/// tables did not give are asked about one by one).
fn wants_unlisted(q: &Query, plan: OwnerPlan) -> bool {
    let can_pass = q.gather.unlisted
        && q.select.states.is_none()
        && q.select.connected == q.select.listening
        && !q.inet_only()
        && q.select.connected_to.is_none()
        && q.select.protos
            .as_ref()
            .is_none_or(|p| p.iter().any(|&p| may_be_unbound(p)))
        // Every unix socket is in the unix table: `-u` alone needs no look.
        && (q.select.families == Families::default()
            || q.select.families.inet
            || q.select.families.inet6
            || q.wants_proto(crate::model::Proto::Netlink))
        && !matches!(q.gather.source, Source::Replay(_));
    can_pass && matches!(plan, OwnerPlan::All | OwnerPlan::Candidates)
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
    all.select.pids = None;
    all.select.command = None;
    all.select.uid = None;
    let (scan, _) = timing::phase("peer owner scan", || {
        owners::scan_any(&all, scan_threads(), walk_threads(false), Some(&wanted))
    });
    let scan = scan.ok()?;
    Some(Beyond {
        index: OwnerIndex::new(scan.holders),
        processes: scan.processes,
    })
}

/// Every (process, fd) holding a socket, from one scan of the processes `q` selects, without
/// the socket dump ([`crate::scan_owners`]: what the exporter's owner cache refreshes from).
pub fn scan_owners(q: &Query) -> Result<join::Owners, Error> {
    let (scan, bpf_refused) = owners::scan_any(q, scan_threads(), walk_threads(false), None);
    let scan = scan?;
    Ok(join::Owners {
        unseen: owners::unseen_of(q, scan.unreadable, &scan.failed),
        index: OwnerIndex::new(scan.holders),
        processes: scan.processes,
        bpf_unavailable: bpf_refused.map(|e| e.to_string()),
    })
}
