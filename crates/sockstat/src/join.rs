//! Joining sockets with their holders: the pure half of the owner scan. The scan
//! (`sys::owners`) gathers every (pid, fd) holding a socket into an [`OwnerIndex`] and
//! says which processes it could not read ([`Unseen`]); [`join`] gives each socket its holders
//! and decides, from that evidence, whether its holder list is complete. The owner filters
//! (`--pid`, `--user`, `--command`) and the order of sockets that tie on their addresses are
//! here too. Nothing here reads the system.

use std::collections::HashSet;

use crate::model::{counted, Owner, OwnersStatus, Snapshot, Socket, Warning, WarningCode};
use crate::query::Query;

/// One socket fd found by the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Holder {
    /// Socket inode.
    pub inode: u64,
    /// Who holds it.
    pub owner: Owner,
}

/// Every (pid, fd) holding each socket inode, sorted by inode, then pid, then fd, with a
/// directory of where each span of inodes starts: a look-up is a jump and a short search, not
/// a binary search of every holder, whose last steps each miss the cache (the join of 34,000
/// sockets with their holders, once a second in the live view, 3.5 -> 1 ms).
#[derive(Debug, Clone, Default)]
pub struct OwnerIndex {
    holders: Vec<Holder>,
    /// The smallest inode.
    base: u64,
    /// Inodes `base + (k << shift)` up to `base + ((k + 1) << shift)` (excluded) start at
    /// `starts[k]` and end at `starts[k + 1]`.
    shift: u32,
    starts: Vec<u32>,
}

impl OwnerIndex {
    /// An index of these holders (in any order).
    pub fn new(mut holders: Vec<Holder>) -> OwnerIndex {
        holders.sort_unstable();
        holders.dedup();
        let (Some(first), Some(last)) = (holders.first(), holders.last()) else {
            return OwnerIndex::default();
        };
        let (base, span) = (first.inode, last.inode - first.inode);
        // About two holders a slot, as slots are spread evenly over the inodes' span.
        let slots = (holders.len() / 2).max(1).next_power_of_two() as u64;
        let mut shift = 0;
        while shift < 63 && (span >> shift) >= slots {
            shift += 1;
        }
        let mut starts = Vec::with_capacity(slots as usize + 1);
        for (i, h) in holders.iter().enumerate() {
            let k = ((h.inode - base) >> shift) as usize;
            while starts.len() <= k {
                starts.push(i as u32);
            }
        }
        starts.push(holders.len() as u32);
        OwnerIndex {
            holders,
            base,
            shift,
            starts,
        }
    }

    /// The holders of socket `inode`, by pid then fd.
    pub fn holders_of(&self, inode: u64) -> &[Holder] {
        let Some(k) = inode
            .checked_sub(self.base)
            .map(|d| (d >> self.shift) as usize)
            .filter(|&k| k + 1 < self.starts.len())
        else {
            return &[];
        };
        let h = &self.holders[self.starts[k] as usize..self.starts[k + 1] as usize];
        let start = h.partition_point(|x| x.inode < inode);
        let end = start + h[start..].partition_point(|x| x.inode == inode);
        &h[start..end]
    }

    /// Every holder.
    pub fn holders(&self) -> &[Holder] {
        &self.holders
    }

    /// How many (socket, holder) pairs.
    pub fn len(&self) -> usize {
        self.holders.len()
    }

    /// True when no socket fd was found.
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }
}

/// What one owner scan found: the holders of every socket, and the processes they name.
#[derive(Debug, Clone, Default)]
pub struct Owners {
    /// Every (pid, fd) holding a socket.
    pub index: OwnerIndex,
    /// The processes that hold sockets, by pid.
    pub processes: std::collections::HashMap<u32, crate::model::Process>,
    /// Why the BPF iterator could not run, when [`crate::OwnerScan::Bpf`] asked for it (the
    /// scan then read `/proc`, as it does for `Auto` without a word).
    pub bpf_unavailable: Option<String>,
    /// What the scan could not see: the evidence [`join`] decides owner statuses from.
    pub unseen: Unseen,
}

pub use crate::model::{HidePid, Unseen};

impl Unseen {
    /// True when nothing was out of sight: every process could be read.
    pub fn is_empty(&self) -> bool {
        self.unreadable.is_empty() && self.failed.is_empty() && self.hidepid == HidePid::No
    }

    /// True when a process that could not be seen (hidden by `hidepid`) may hold a socket of
    /// uid `uid` (every other user's; any, when the uid is not known).
    fn invisible_may_hold(&self, uid: Option<u32>) -> bool {
        self.hidepid != HidePid::No && uid != Some(self.euid)
    }

    /// The processes that could not be read (with their uid) and may hold a socket of uid `uid`:
    /// those running as it, those whose uid is not known, and, when the socket's uid is not
    /// known, every one.
    fn unreadable_suspects(&self, uid: Option<u32>) -> impl Iterator<Item = &(u32, Option<u32>)> {
        self.unreadable
            .iter()
            .filter(move |(_, u)| uid.is_none() || u.is_none() || *u == uid)
    }

    /// [`Unseen::unreadable_suspects`] among the processes that failed for another reason.
    fn failed_suspects(
        &self,
        uid: Option<u32>,
    ) -> impl Iterator<Item = &(u32, Option<u32>, String)> {
        self.failed
            .iter()
            .filter(move |(_, u, _)| uid.is_none() || u.is_none() || *u == uid)
    }

    /// True when a process this scan could not see or read may hold a socket of uid `uid`: the
    /// kernel's uid of the socket is its creator's, and a process can hold a socket it did not
    /// create only by inheriting it or being passed it. A socket whose uid the source does
    /// not give (`/proc/net/unix`, netlink_diag) may be held by any of them.
    pub fn may_hold(&self, uid: Option<u32>) -> bool {
        self.invisible_may_hold(uid)
            || self.unreadable_suspects(uid).next().is_some()
            || self.failed_suspects(uid).next().is_some()
    }
}

/// Gives every socket its holders from `index` and its [`OwnersStatus`], from evidence: what
/// the scan could not see (`unseen`), never from which processes a filter had read. Call it
/// with an index that holds every holder of these sockets the scan could see (a listing under
/// `--pid` completes its index first: `run::list`), before the owner filters cut the holder
/// lists.
///
/// A process that could not be read (or, under `hidepid`, seen) may hold a socket when it
/// runs as the socket's uid, the kernel's uid of the socket: its creator's ([`Unseen::may_hold`];
/// any such process when the uid is not known). With no holder found, the socket is `hidden`
/// when such a process exists, else `none`. With holders found, it is `partial` when its
/// creator is not among them (no holder runs as the socket's uid) and such a process exists,
/// else `known`: a root daemon's listener shared with its unprivileged workers is partial to
/// those workers' user, a socket whose creator is in view is not. Kernel threads hold no files
/// and are never counted (the scan leaves them out). Sockets without an inode (TIME-WAIT,
/// request sockets) and the kernel's own sockets ([`Socket::is_kernel_socket`]) have no
/// holder: `none`. `processes` gives the holders' uids.
pub fn join(
    sockets: &mut [Socket],
    index: &OwnerIndex,
    unseen: &Unseen,
    processes: &std::collections::HashMap<u32, crate::model::Process>,
) {
    // Each socket's holders are its own: a big table is joined in parts on every core (a
    // holder list is an allocation per socket: the join and its warnings took 7.8 ms of the full
    // listing at 60k on one core).
    let parts = crate::parallel::parts(sockets.len(), 8192, 4);
    let chunk = sockets.len().div_ceil(parts).max(1);
    std::thread::scope(|sc| {
        let mut chunks = sockets.chunks_mut(chunk);
        let first = chunks.next();
        for c in chunks {
            sc.spawn(move || join_part(c, index, unseen, processes));
        }
        if let Some(c) = first {
            join_part(c, index, unseen, processes);
        }
    });
}

/// [`join`] again for the sockets it left `partial`, once `index` holds more of their holders
/// (a scan of more processes than the first): their creator may be among them.
pub fn rejoin_partial(
    sockets: &mut [Socket],
    index: &OwnerIndex,
    unseen: &Unseen,
    processes: &std::collections::HashMap<u32, crate::model::Process>,
) {
    for s in sockets
        .iter_mut()
        .filter(|s| s.owners_status == OwnersStatus::Partial)
    {
        join_part(std::slice::from_mut(s), index, unseen, processes);
    }
}

fn join_part(
    sockets: &mut [Socket],
    index: &OwnerIndex,
    unseen: &Unseen,
    processes: &std::collections::HashMap<u32, crate::model::Process>,
) {
    let nothing_unseen = unseen.is_empty();
    for s in sockets.iter_mut() {
        let Some(id) = s.id else {
            s.owners = Vec::new();
            s.owners_status = OwnersStatus::None;
            continue;
        };
        let held = index.holders_of(id);
        s.owners = held.iter().map(|x| x.owner).collect();
        s.owners_status = status(s, processes, || !nothing_unseen && unseen.may_hold(s.uid));
    }
}

/// The [`OwnersStatus`] of a socket whose `owners` already list every holder the scan could
/// see, decided as [`join`] decides it (for a consumer that keeps holders of its own, as the
/// exporter's owner cache does). `processes` gives the holders' uids.
pub fn status_of(
    s: &Socket,
    unseen: &Unseen,
    processes: &std::collections::HashMap<u32, crate::model::Process>,
) -> OwnersStatus {
    status(s, processes, || unseen.may_hold(s.uid))
}

/// The status of a socket whose `owners` are every holder the scan could see; `maybe_more`
/// says whether a process that could not be read may hold it (asked only when it matters).
fn status(
    s: &Socket,
    processes: &std::collections::HashMap<u32, crate::model::Process>,
    maybe_more: impl FnOnce() -> bool,
) -> OwnersStatus {
    if s.owners.is_empty() {
        return if !s.is_kernel_socket() && maybe_more() {
            OwnersStatus::Hidden
        } else {
            OwnersStatus::None
        };
    }
    let creator_in_view = s.owners.iter().any(|o| {
        let uid = processes.get(&o.pid).and_then(|p| p.uid);
        uid.is_none() || uid == s.uid
    });
    if !creator_in_view && maybe_more() {
        OwnersStatus::Partial
    } else {
        OwnersStatus::Known
    }
}

/// The warnings a join leaves about the sockets `shown` (call it once the filters have
/// chosen them, so that every count is of sockets the listing shows): `owners-hidden` for the
/// shown sockets whose holders these privileges may hide (`hidden` and `partial`), naming
/// with `-v` the processes that may hold them; `owners-incomplete` for those that processes
/// which could not be read for another reason may hold. `privileged` says whether the reader
/// holds what reading every fd table takes ([`crate::privilege::reads_every_fd_table`]: then
/// privileges are not the reason).
pub fn warnings(shown: &[Socket], unseen: &Unseen, privileged: bool) -> Vec<Warning> {
    let mut out = Vec::new();
    let doubtful: Vec<&Socket> = shown
        .iter()
        .filter(|s| {
            matches!(
                s.owners_status,
                OwnersStatus::Hidden | OwnersStatus::Partial
            )
        })
        .collect();
    if doubtful.is_empty() {
        return out;
    }
    // The uids of the doubtful sockets (`None`: a socket whose uid is not known, which any
    // process may hold).
    let uids: HashSet<Option<u32>> = doubtful.iter().map(|s| s.uid).collect();
    let suspects = |u: Option<u32>| uids.contains(&None) || u.is_none() || uids.contains(&u);
    let failed: Vec<&(u32, Option<u32>, String)> = unseen
        .failed
        .iter()
        .filter(|(_, u, _)| suspects(*u))
        .collect();
    if !failed.is_empty() {
        let concerned = doubtful
            .iter()
            .filter(|s| unseen.failed_suspects(s.uid).next().is_some())
            .count();
        out.push(
            Warning::new(
                WarningCode::OwnersIncomplete,
                format!(
                    "the fd tables of {} could not be read ({}): they may hold {} shown with \
                     no holder or only some (-v for which)",
                    counted(failed.len(), "process", "processes"),
                    failed[0].2,
                    counted(concerned, "socket", "sockets"),
                ),
            )
            .count(concerned as u64)
            .details(
                failed
                    .iter()
                    .map(|(pid, _, e)| format!("pid {pid}: /proc/{pid}/fd: {e}"))
                    .collect(),
            ),
        );
    }
    let hidden_by_privilege = |s: &&&Socket| {
        unseen.invisible_may_hold(s.uid) || unseen.unreadable_suspects(s.uid).next().is_some()
    };
    let hidden = doubtful
        .iter()
        .filter(hidden_by_privilege)
        .filter(|s| s.owners_status == OwnersStatus::Hidden)
        .count();
    let partial = doubtful
        .iter()
        .filter(hidden_by_privilege)
        .filter(|s| s.owners_status == OwnersStatus::Partial)
        .count();
    if hidden + partial == 0 {
        return out;
    }
    let unreadable: Vec<&(u32, Option<u32>)> = unseen
        .unreadable
        .iter()
        .filter(|(_, u)| suspects(*u))
        .collect();
    let mut details: Vec<String> = vec![
        "a socket is hidden (no holder shown) or partial (holders shown, others may exist) when \
         a process that could not be inspected runs as the socket's uid, the uid of the process \
         that created it (or the socket's uid is not known)"
            .to_string(),
    ];
    details.extend(unreadable.iter().map(|(pid, uid)| match uid {
        Some(u) => format!("pid {pid} (uid {u}): /proc/{pid}/fd not readable"),
        None => format!("pid {pid}: /proc/{pid}/fd not readable"),
    }));
    let see = "run as root, or give sockstat CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (see \
               README), to see them";
    let n = counted(hidden + partial, "socket", "sockets");
    let which = match (hidden, partial) {
        (_, 0) => format!("hidden processes may hold {n} shown with no holder"),
        (0, _) => format!("hidden processes may also hold {n} whose holders are shown"),
        (h, p) => {
            format!("hidden processes may hold {n} shown ({h} with no holder, {p} with some)")
        }
    };
    let why = match &unseen.hidepid {
        HidePid::Hides {
            mount_point,
            option,
        } => format!(
            "{} is mounted with {option}, which hides other users' processes from uid {}; {see}",
            mount_point.display(),
            unseen.euid
        ),
        HidePid::Unknown(why) => {
            format!("whether /proc hides other users' processes cannot be told ({why}); {see}")
        }
        HidePid::No if privileged => format!(
            "even with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH the fd tables of {} cannot be \
             read here (ptrace access denied: Yama, a security module or a user namespace \
             boundary)",
            counted(unreadable.len(), "process", "processes")
        ),
        HidePid::No => format!(
            "uid {} may not read the fd tables of {} that may hold them; {see}",
            unseen.euid,
            counted(unreadable.len(), "process", "processes")
        ),
    };
    let message = format!("{which}: {why}");
    out.push(
        Warning::new(WarningCode::OwnersHidden, message)
            .count((hidden + partial) as u64)
            .details(details),
    );
    out
}

/// The processes an owner filter selects (`--pid`, `--command`, `--user`; `command` gives a
/// process's command name, read apart, as the scan did not read it) whose fd tables could not be
/// read, with their uid: the sockets only they hold cannot be listed, and a listing that said
/// nothing would present itself as complete. A process whose uid or name is not known may be
/// one (the filter cannot rule it out).
pub fn unread_selected(
    q: &Query,
    unseen: &Unseen,
    command: impl Fn(u32) -> Option<crate::model::RawString>,
) -> Vec<(u32, Option<u32>)> {
    if !q.filters_owners() {
        return Vec::new();
    }
    let mut v: Vec<(u32, Option<u32>)> = unseen
        .unreadable
        .iter()
        .copied()
        .chain(unseen.failed.iter().map(|(p, u, _)| (*p, *u)))
        .filter(|(pid, uid)| {
            q.select
                .pids
                .as_ref()
                .is_none_or(|p| p.binary_search(pid).is_ok())
                && q.select
                    .uid
                    .is_none_or(|want| uid.is_none_or(|u| u == want))
        })
        .filter(|(pid, _)| match &q.select.command {
            Some(m) => command(*pid).is_none_or(|c| m.matches(c.as_bytes())),
            None => true,
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The `selected-unreadable` warning for [`unread_selected`]'s processes (none when empty).
pub fn selected_warning(
    unread: &[(u32, Option<u32>)],
    unseen: &Unseen,
    privileged: bool,
) -> Option<Warning> {
    let (&(first, _), _) = unread.split_first()?;
    let fix = if privileged {
        "even with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH they cannot be read here (ptrace \
         access denied: a security module or a user namespace boundary)"
            .to_string()
    } else {
        format!(
            "uid {} may not read them; run as root, or give sockstat CAP_SYS_PTRACE and \
             CAP_DAC_READ_SEARCH (see README)",
            unseen.euid
        )
    };
    let which = if unread.len() == 1 {
        format!("pid {first}")
    } else {
        format!("pid {first} and others, -v for which")
    };
    Some(
        Warning::new(
            WarningCode::SelectedUnreadable,
            format!(
                "the filters select {} whose fd tables could not be read ({which}): the sockets \
                 only they hold are not listed; {fix}",
                counted(unread.len(), "process", "processes"),
            ),
        )
        .count(unread.len() as u64)
        .details(
            unread
                .iter()
                .map(|(pid, uid)| match uid {
                    Some(u) => format!("pid {pid} (uid {u}): /proc/{pid}/fd not readable"),
                    None => format!("pid {pid}: /proc/{pid}/fd not readable"),
                })
                .collect(),
        ),
    )
}

/// `--pid`, `--user`, `--command`: keep the holders that match; drop sockets left with none,
/// except that `--user` alone also keeps sockets with no known holder whose kernel uid matches.
pub fn apply_owner_filters(q: &Query, sockets: &mut Vec<Socket>, snap: &Snapshot) {
    if !q.filters_owners() {
        return;
    }
    let only_user = q.select.pids.is_none() && q.select.command.is_none();
    sockets.retain_mut(|s| {
        if s.owners.is_empty() {
            return only_user && q.select.uid.is_some() && s.uid == q.select.uid;
        }
        s.owners
            .retain(|o| q.matches_owner(o, snap.processes.get(&o.pid)));
        !s.owners.is_empty()
    });
}

/// Sockets with the same zone, protocol and addresses (SO_REUSEPORT groups, several UDP sockets
/// on one port) are ordered by their first holder's pid and fd once holders are known; the
/// address sort ran before, in parallel with the scan, with only ids to break ties.
pub fn order_ties_by_owner(sockets: &mut [Socket]) {
    let same = |a: &Socket, b: &Socket| {
        a.netns == b.netns
            && a.proto == b.proto
            && a.family == b.family
            && a.local == b.local
            && a.remote == b.remote
    };
    let mut start = 0;
    while start < sockets.len() {
        let mut end = start + 1;
        while end < sockets.len() && same(&sockets[start], &sockets[end]) {
            end += 1;
        }
        if end - start > 1 {
            sockets[start..end].sort_by(|a, b| {
                (a.owners.first(), a.id, a.cookie).cmp(&(b.owners.first(), b.id, b.cookie))
            });
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::State;
    use crate::ports::tests::sock;

    fn listener(inode: u64, uid: u32) -> Socket {
        let mut s = sock(State::Listen, ("0.0.0.0", 80), None);
        s.id = Some(inode);
        s.uid = Some(uid);
        s
    }

    fn procs(uids: &[(u32, u32)]) -> std::collections::HashMap<u32, crate::model::Process> {
        uids.iter()
            .map(|&(pid, uid)| {
                (
                    pid,
                    crate::model::Process {
                        pid,
                        uid: Some(uid),
                        ..Default::default()
                    },
                )
            })
            .collect()
    }

    fn holder(inode: u64, pid: u32, fd: u32) -> Holder {
        Holder {
            inode,
            owner: Owner { pid, fd },
        }
    }

    #[test]
    fn the_index_finds_every_holder_of_an_inode() {
        let i = OwnerIndex::new(vec![holder(7, 20, 3), holder(5, 10, 4), holder(7, 10, 9)]);
        let pids: Vec<(u32, u32)> = i
            .holders_of(7)
            .iter()
            .map(|h| (h.owner.pid, h.owner.fd))
            .collect();
        assert_eq!(pids, [(10, 9), (20, 3)]);
        assert!(i.holders_of(6).is_empty());
        assert_eq!(i.len(), 3);
    }

    #[test]
    fn the_directory_finds_what_a_search_of_every_holder_finds() {
        // Clusters far apart (a few old sockets, many new ones), shared inodes, the ends.
        let mut inodes: Vec<u64> = vec![1, 2, 2, 900, u64::from(u32::MAX), u64::MAX - 1];
        let mut x: u64 = 12345;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            inodes.push(3_000_000 + (x >> 33) % 40_000);
        }
        let all: Vec<Holder> = inodes
            .iter()
            .enumerate()
            .map(|(i, &n)| holder(n, i as u32 % 7, i as u32))
            .collect();
        let index = OwnerIndex::new(all.clone());
        let mut sorted = all;
        sorted.sort_unstable();
        let mut asked: Vec<u64> = inodes.clone();
        asked.extend([0, 3, 899, 901, 2_999_999, 3_040_000, u64::MAX]);
        for n in asked {
            let want: Vec<&Holder> = sorted.iter().filter(|h| h.inode == n).collect();
            let got: Vec<&Holder> = index.holders_of(n).iter().collect();
            assert_eq!(got, want, "inode {n}");
        }
        assert!(OwnerIndex::new(vec![]).holders_of(1).is_empty());
        let one = OwnerIndex::new(vec![holder(u64::MAX, 1, 1), holder(0, 1, 2)]);
        assert_eq!(one.holders_of(u64::MAX).len(), 1);
        assert_eq!(one.holders_of(0).len(), 1);
        assert!(one.holders_of(5).is_empty());
    }

    #[test]
    fn a_socket_is_hidden_only_when_an_unread_process_could_hold_it() {
        let index = OwnerIndex::new(vec![holder(1, 10, 3)]);
        let mut socks = vec![listener(1, 1000), listener(2, 0), listener(3, 1000)];
        let unseen = Unseen {
            unreadable: vec![(1, Some(0))],
            euid: 1000,
            ..Unseen::default()
        };
        join(&mut socks, &index, &unseen, &procs(&[(10, 1000)]));
        assert_eq!(socks[0].owners_status, OwnersStatus::Known);
        assert_eq!(socks[1].owners_status, OwnersStatus::Hidden);
        assert_eq!(socks[2].owners_status, OwnersStatus::None);
        let w = warnings(&socks, &unseen, false);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].code, WarningCode::OwnersHidden);
        assert_eq!(w[0].count, Some(1));
        assert!(
            w[0].message.starts_with(
                "hidden processes may hold 1 socket shown with no holder: uid 1000 may not read \
                 the fd tables of 1 process that may hold them"
            ),
            "{}",
            w[0].message
        );
    }

    #[test]
    fn a_root_made_socket_held_by_visible_workers_is_partial() {
        // nginx as seen by www-data (uid 33): the listener was made by the root master, whose
        // fd table cannot be read; the four workers can.
        let index = OwnerIndex::new((0..4).map(|i| holder(9, 100 + i, 6)).collect());
        let workers = procs(&[(100, 33), (101, 33), (102, 33), (103, 33)]);
        let mut socks = vec![listener(9, 0)];
        let unseen = Unseen {
            unreadable: vec![(99, Some(0))],
            euid: 33,
            ..Unseen::default()
        };
        join(&mut socks, &index, &unseen, &workers);
        assert_eq!(socks[0].owners_status, OwnersStatus::Partial);
        assert_eq!(socks[0].owners.len(), 4);
        let w = warnings(&socks, &unseen, false);
        assert!(
            w[0].message
                .starts_with("hidden processes may also hold 1 socket whose holders are shown"),
            "{}",
            w[0].message
        );
        // The same as root, with nothing unreadable: known.
        let mut socks = vec![listener(9, 0)];
        join(&mut socks, &index, &Unseen::default(), &workers);
        assert_eq!(socks[0].owners_status, OwnersStatus::Known);
        // A socket whose creator's uid is among the holders shown is known, even with root
        // processes unreadable (a sandbox whose pid 1 even root may not read).
        let mut socks = vec![listener(9, 33)];
        join(&mut socks, &index, &unseen, &workers);
        assert_eq!(socks[0].owners_status, OwnersStatus::Known);
    }

    /// Issue 31: the warnings count the sockets given to them (the shown ones), and name only
    /// the processes that may hold those.
    #[test]
    fn warnings_are_about_the_sockets_shown() {
        let index = OwnerIndex::new(vec![holder(1, 10, 3)]);
        let mut socks = vec![
            listener(1, 1000),
            listener(2, 0),
            listener(3, 0),
            listener(4, 7),
        ];
        let unseen = Unseen {
            unreadable: vec![(1, Some(0)), (2, Some(7)), (3, Some(0))],
            euid: 1000,
            ..Unseen::default()
        };
        join(&mut socks, &index, &unseen, &procs(&[(10, 1000)]));
        let st: Vec<OwnersStatus> = socks.iter().map(|s| s.owners_status).collect();
        use OwnersStatus::*;
        assert_eq!(st, [Known, Hidden, Hidden, Hidden]);
        let all = warnings(&socks, &unseen, false);
        assert_eq!(all[0].count, Some(3));
        // A filter that keeps the known socket and uid 7's: one hidden socket, one process.
        let shown = [socks[0].clone(), socks[3].clone()];
        let w = warnings(&shown, &unseen, false);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].count, Some(1));
        assert!(
            w[0].message.contains("of 1 process that may"),
            "{}",
            w[0].message
        );
        assert_eq!(w[0].details.len(), 2, "{:?}", w[0].details);
        assert!(
            w[0].details[1].starts_with("pid 2 (uid 7)"),
            "{:?}",
            w[0].details
        );
        // A filter that keeps only the known socket: no warning at all.
        assert!(warnings(&socks[..1], &unseen, false).is_empty());
    }

    /// A socket whose uid the source does not give may be held by any process that could not be
    /// read; the kernel's own sockets by none.
    #[test]
    fn an_unknown_uid_may_be_anyones_and_a_kernel_socket_no_ones() {
        let index = OwnerIndex::new(vec![holder(5, 10, 3)]);
        let mut unix = listener(4, 0);
        unix.uid = None;
        let mut held = listener(5, 0);
        held.uid = None;
        let mut kernel = listener(6, 0);
        kernel.uid = None;
        kernel.local = crate::model::Endpoint::Netlink {
            protocol: 0,
            port_id: 0,
            group: 0,
        };
        let mut socks = vec![unix, held, kernel];
        let unseen = Unseen {
            unreadable: vec![(1, Some(0))],
            euid: 1000,
            ..Unseen::default()
        };
        join(&mut socks, &index, &unseen, &procs(&[(10, 1000)]));
        assert_eq!(socks[0].owners_status, OwnersStatus::Hidden);
        assert_eq!(socks[1].owners_status, OwnersStatus::Partial);
        assert_eq!(socks[2].owners_status, OwnersStatus::None);
        // Nothing unseen: none and known.
        join(
            &mut socks,
            &index,
            &Unseen::default(),
            &procs(&[(10, 1000)]),
        );
        assert_eq!(socks[0].owners_status, OwnersStatus::None);
        assert_eq!(socks[1].owners_status, OwnersStatus::Known);
    }

    #[test]
    fn a_process_that_failed_for_another_reason_is_named_and_its_uid_counts() {
        let mut socks = vec![listener(2, 0)];
        let unseen = Unseen {
            failed: vec![(1, Some(0), "Too many open files (os error 24)".into())],
            euid: 0,
            ..Unseen::default()
        };
        join(&mut socks, &OwnerIndex::default(), &unseen, &procs(&[]));
        assert_eq!(socks[0].owners_status, OwnersStatus::Hidden);
        let w = warnings(&socks, &unseen, true);
        assert_eq!(w[0].code, WarningCode::OwnersIncomplete);
        assert!(
            w[0].message.contains("Too many open files"),
            "{}",
            w[0].message
        );
    }

    #[test]
    fn an_unreadable_mount_table_under_a_non_root_reader_hides_other_users_sockets() {
        let mut socks = vec![listener(2, 0), listener(3, 1000)];
        let unseen = Unseen {
            hidepid: HidePid::Unknown("cannot read /proc/self/mountinfo: EACCES".into()),
            euid: 1000,
            ..Unseen::default()
        };
        join(&mut socks, &OwnerIndex::default(), &unseen, &procs(&[]));
        assert_eq!(socks[0].owners_status, OwnersStatus::Hidden);
        assert_eq!(socks[1].owners_status, OwnersStatus::None);
        let w = warnings(&socks, &unseen, false);
        assert!(w[0].message.contains("cannot be told"), "{}", w[0].message);
        assert!(w[0].details[0].starts_with("a socket is hidden"));
    }
}
