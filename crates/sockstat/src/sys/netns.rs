//! Finding every network namespace on the host and reading sockets inside one.
//!
//! Discovery: the distinct `/proc/*/ns/net` links, the `ip netns` mounts under `/run/netns`,
//! Docker's `/run/docker/netns`, and (without the privilege to read other processes' namespace
//! links) the per-namespace `/proc/PID/net/tcp` entries, whose inode is unique per namespace.
//! Each namespace is dumped from a thread that joined it with `setns` (this process's own
//! namespace is never changed); where joining is not permitted, its `/proc/PID/net` text is
//! read instead and a warning says what is missing.
//!
//! Namespaces come and go while they are read (containers start and stop): one that is gone by
//! the time it is entered (its mount removed, its last known member exited) is an
//! [`ErrorKind::Gone`] error, which callers treat as "not there any more", not as a failure.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use sockstat_wire::fd_link::netns_inode;

use crate::error::{Error, ErrorKind, SysError};
use crate::model::{Warning, WarningCode};
use crate::query::ZoneSelect;
use crate::sample::Reach;
use crate::sys::counters::ProcPaths;
use crate::zone::{self, Zone, ZoneKind};

/// Directories where namespaces are kept by name: `ip netns` (and CNI/Podman, which use it),
/// and Docker's sandboxes.
const MOUNT_DIRS: [(&str, ZoneKind); 4] = [
    ("/run/netns", ZoneKind::Netns),
    ("/var/run/netns", ZoneKind::Netns),
    ("/run/docker/netns", ZoneKind::Docker),
    ("/var/run/docker/netns", ZoneKind::Docker),
];

/// One namespace to read.
#[derive(Debug, Clone)]
pub struct ZoneTarget {
    /// Identity used in `Socket::netns`: the netns inode, or (when that cannot be read) the
    /// inode of the namespace's `/proc/PID/net/tcp` entry.
    pub key: u64,
    /// How it is shown.
    pub zone: Zone,
    /// Files to `setns` into, tried in order: its `ip netns` (or Docker) mount, then
    /// `/proc/PID/ns/net` of each member found (when this user may read those links).
    pub enter: Vec<PathBuf>,
    /// Processes living in it (at most 8, lowest pid first), for the `/proc/PID/net` fallback;
    /// the first one still alive is used.
    pub members: Vec<u32>,
    /// True for the namespace this process runs in (no `setns` needed).
    pub own: bool,
}

fn readlink_ns(proc_fd: &OwnedFd, rel: &str) -> Option<u64> {
    let mut buf = [0u8; 64];
    let n = rustix::fs::readlinkat_raw(proc_fd, rel, &mut buf[..]).ok()?;
    netns_inode(&buf[..n.min(buf.len())])
}

fn stat_ino(proc_fd: &OwnedFd, rel: &str) -> Option<u64> {
    rustix::fs::statat(proc_fd, rel, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| st.st_ino)
}

struct Found {
    netns: Option<u64>,
    members: Vec<u32>,
    /// How many of `members` (the first ones) were found through their readable namespace
    /// link: only those links can be opened to join it.
    linked: usize,
}

/// Finds every namespace visible from `proc_root`, named.
pub fn discover(proc_root: &Path) -> (Vec<ZoneTarget>, Vec<Warning>) {
    let mut warnings = Vec::new();
    let proc_fd = match rustix::fs::open(
        proc_root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(e) => {
            warnings.push(Warning {
                code: WarningCode::ZonesUnavailable,
                count: None,
                message: format!(
                    "cannot open {}: {e}; only this namespace is listed",
                    proc_root.display()
                ),
                details: vec![],
            });
            return (Vec::new(), warnings);
        }
    };
    let own = readlink_ns(&proc_fd, "thread-self/ns/net")
        .or_else(|| readlink_ns(&proc_fd, "self/ns/net"));
    let global = readlink_ns(&proc_fd, "1/ns/net").or(own);
    // proc-net entry inode -> netns inode, learnt from every process whose link we can read.
    let mut procnet_to_ns: HashMap<u64, u64> = HashMap::new();
    if let (Some(o), Some(pn)) = (own, stat_ino(&proc_fd, "thread-self/net/tcp")) {
        procnet_to_ns.insert(pn, o);
    }
    let mut by_key: BTreeMap<u64, Found> = BTreeMap::new();
    let mut hidden_members: Vec<(u64, u32)> = Vec::new();
    let pids = match super::owners::list_pids(&proc_fd) {
        Ok(p) => p,
        Err(e) => {
            warnings.push(Warning {
                code: WarningCode::ZonesPartial,
                count: None,
                message: format!(
                    "cannot list {}: {e}; only namespaces bound under /run/netns or /run/docker/netns are found",
                    proc_root.display()
                ),
                details: vec![],
            });
            Vec::new()
        }
    };
    for pid in pids {
        match readlink_ns(&proc_fd, &format!("{pid}/ns/net")) {
            Some(ino) => {
                let f = by_key.entry(ino).or_insert(Found {
                    netns: Some(ino),
                    members: vec![],
                    linked: 0,
                });
                if f.members.len() < 8 {
                    if f.members.is_empty() {
                        if let Some(pn) = stat_ino(&proc_fd, &format!("{pid}/net/tcp")) {
                            procnet_to_ns.insert(pn, ino);
                        }
                    }
                    f.members.push(pid);
                    f.linked += 1;
                }
            }
            None => {
                // Not ours to read (or gone): group it by its /proc/PID/net entry instead.
                if let Some(pn) = stat_ino(&proc_fd, &format!("{pid}/net/tcp")) {
                    hidden_members.push((pn, pid));
                }
            }
        }
    }
    let mounts = named_mounts();
    // A namespace seen only through /proc/PID/net (this user may not read its members' links)
    // that is also mounted by name would be listed twice, by name and as pid:N: joining the
    // mount (CAP_SYS_ADMIN) shows which /proc/PID/net entry is its own.
    if hidden_members
        .iter()
        .any(|(pn, _)| !procnet_to_ns.contains_key(pn))
    {
        let known: std::collections::HashSet<u64> = procnet_to_ns.values().copied().collect();
        for (ino, (path, _, _)) in &mounts {
            if known.contains(ino) {
                continue;
            }
            if let Some(pn) = procnet_inode_through(path, *ino, proc_root) {
                procnet_to_ns.insert(pn, *ino);
            }
        }
    }
    let mut unmapped = 0usize;
    for (pn, pid) in hidden_members {
        let key = procnet_to_ns.get(&pn).copied();
        let f = by_key.entry(key.unwrap_or(pn)).or_insert_with(|| {
            if key.is_none() {
                unmapped += 1;
            }
            Found {
                netns: key,
                members: vec![],
                linked: 0,
            }
        });
        if f.members.len() < 8 {
            f.members.push(pid);
        }
    }
    for ino in mounts.keys() {
        by_key.entry(*ino).or_insert(Found {
            netns: Some(*ino),
            members: vec![],
            linked: 0,
        });
    }
    if unmapped > 0 {
        warnings.push(Warning {
            code: WarningCode::ZonesPartial,
            count: Some(unmapped as u64),
            message: format!(
                "{unmapped} network namespaces were found only through processes whose namespace links this user may not read; they are named by a member pid and listed from /proc/PID/net (run as root for names, TCP internals and unix peers)"
            ),
            details: vec![],
        });
    }
    let mut out: Vec<ZoneTarget> = by_key
        .into_iter()
        .map(|(key, f)| {
            let mount = f.netns.and_then(|n| mounts.get(&n));
            let zone = name_zone(&proc_fd, key, &f, global, mount);
            let mut enter: Vec<PathBuf> =
                mount.map(|(path, _, _)| path.clone()).into_iter().collect();
            enter.extend(
                f.members[..f.linked]
                    .iter()
                    .map(|pid| proc_root.join(format!("{pid}/ns/net"))),
            );
            ZoneTarget {
                key,
                own: f.netns.is_some() && f.netns == own,
                zone,
                enter,
                members: f.members,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (a.zone.kind != ZoneKind::Global, &a.zone.name, a.key).cmp(&(
            b.zone.kind != ZoneKind::Global,
            &b.zone.name,
            b.key,
        ))
    });
    (out, warnings)
}

use std::os::unix::fs::MetadataExt;

/// A namespace kept by name: its mount, its name, and the runtime that keeps it.
type Mount = (PathBuf, String, ZoneKind);

/// The namespaces mounted under [`MOUNT_DIRS`], by namespace inode.
fn named_mounts() -> HashMap<u64, Mount> {
    let mut mounts: HashMap<u64, Mount> = HashMap::new();
    for (dir, kind) in MOUNT_DIRS {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in rd.flatten() {
            let path = e.path();
            let Ok(md) = std::fs::metadata(&path) else {
                continue;
            };
            // An nsfs bind mount stats as the namespace itself; a leftover empty file does not.
            if md.len() != 0 || md.ino() < 0xf000_0000 {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            mounts.entry(md.ino()).or_insert((path, name, kind));
        }
    }
    mounts
}

/// The inode of `/proc/thread-self/net/tcp` seen from inside the namespace mounted at `path`
/// (which must still be namespace `ino`): what its members' `/proc/PID/net/tcp` stat as. `None`
/// when it cannot be joined (no CAP_SYS_ADMIN) or is gone.
fn procnet_inode_through(path: &Path, ino: u64, proc_root: &Path) -> Option<u64> {
    let fd = open_ns(path, Some(ino)).ok()?;
    let tcp = proc_root.join("thread-self/net/tcp");
    join_with(fd, || std::fs::metadata(&tcp).map(|m| m.ino()).ok())
        .ok()
        .flatten()
}

fn name_zone(
    proc_fd: &OwnedFd,
    key: u64,
    f: &Found,
    global: Option<u64>,
    mount: Option<&(PathBuf, String, ZoneKind)>,
) -> Zone {
    let mut z = Zone {
        name: String::new(),
        kind: ZoneKind::Unnamed,
        netns_inode: f.netns,
        container_id: None,
        runtime: None,
        pod: None,
    };
    if f.netns.is_some() && f.netns == global {
        z.name = "global".into();
        z.kind = ZoneKind::Global;
        return z;
    }
    // A container that lives here names it (a pod's containers share the namespace).
    for pid in &f.members {
        let Ok(text) = super::procfs::read_pid_file(proc_fd, *pid, c"cgroup") else {
            continue;
        };
        let text = String::from_utf8_lossy(&text);
        let Some(c) = sockstat_wire::cgroup::paths(&text)
            .into_iter()
            .find_map(zone::container_from_cgroup)
        else {
            continue;
        };
        z.kind = c.kind;
        z.runtime = c.runtime;
        z.container_id = c.id.clone();
        z.name = match c.kind {
            ZoneKind::Kubernetes => {
                let pod = c.pod_uid.as_deref().and_then(|uid| {
                    let dirs = runtime_dir("/var/log/pods");
                    zone::pod_from_log_dirs(dirs.iter().map(String::as_str), uid)
                });
                z.pod = pod.clone();
                pod.unwrap_or_else(|| format!("pod-{}", short(c.pod_uid.as_deref().unwrap_or("?"))))
            }
            ZoneKind::Docker => {
                c.id.as_deref()
                    .and_then(|id| {
                        runtime_file(&format!("/var/lib/docker/containers/{id}/config.v2.json"))
                    })
                    .and_then(|j| zone::docker_name(&j))
                    .unwrap_or_else(|| short(c.id.as_deref().unwrap_or("?")))
            }
            ZoneKind::Podman => c
                .id
                .as_deref()
                .and_then(|id| {
                    runtime_file("/var/lib/containers/storage/overlay-containers/containers.json")
                        .and_then(|j| zone::storage_name(&j, id))
                })
                .unwrap_or_else(|| short(c.id.as_deref().unwrap_or("?"))),
            _ => c
                .name
                .clone()
                .unwrap_or_else(|| short(c.id.as_deref().unwrap_or("?"))),
        };
        return z;
    }
    if let Some((_, name, kind)) = mount {
        z.name = name.clone();
        z.kind = *kind;
        if *kind == ZoneKind::Docker {
            z.runtime = Some("docker");
        }
        return z;
    }
    z.name = match (f.netns, f.members.first()) {
        (Some(n), _) => n.to_string(),
        (None, Some(pid)) => format!("pid:{pid}"),
        (None, None) => format!("procnet:{key}"),
    };
    z
}

/// A container runtime's file (a container's name is in it), read with the caller's own
/// rights: these files are not what the capabilities sockstat may be given are for, and a
/// Docker container's `config.v2.json` holds its environment too
/// ([`crate::privilege::as_caller`]).
fn runtime_file(path: &str) -> Option<String> {
    crate::privilege::as_caller(|| std::fs::read_to_string(path).ok())
        .ok()
        .flatten()
}

/// The entry names of a container runtime's directory, listed with the caller's own rights
/// (as [`runtime_file`]).
fn runtime_dir(path: &str) -> Vec<String> {
    crate::privilege::as_caller(|| {
        std::fs::read_dir(path)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    })
    .unwrap_or_default()
}

fn short(id: &str) -> String {
    id.chars().take(12).collect()
}

/// The filesystem of namespace files (`NSFS_MAGIC`, include/uapi/linux/magic.h).
const NSFS_MAGIC: i64 = 0x6e73_6673;

/// Opens namespace file `path` to join it; when `expect` is given, the file must still be
/// that namespace (a member's pid may have been reused since it was found). A file that is gone,
/// or is another namespace now, is [`ErrorKind::Gone`]. `/proc/PID/ns/net` is a link the
/// kernel means to be followed; what it leads to must be a namespace (nsfs), so that a tree
/// given as `--proc-root` cannot make it open another file.
fn open_ns(path: &Path, expect: Option<u64>) -> Result<OwnedFd, SysError> {
    // O_NONBLOCK: opening a FIFO put in its place returns at once (setns ignores the flag).
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| SysError::new(format!("cannot open {}", path.display()), e))?;
    let fs = rustix::fs::fstatfs(&fd)
        .map_err(|e| SysError::new(format!("cannot stat {}", path.display()), e))?;
    // A mount removed by `ip netns del` leaves an empty file behind for a moment: that
    // namespace is gone, as is one whose file is no namespace at all.
    #[allow(clippy::unnecessary_cast)] // f_type is i64 on some targets, i32 on others
    if fs.f_type as i64 != NSFS_MAGIC {
        return Err(SysError::other(
            format!("cannot open {}", path.display()),
            ErrorKind::Gone,
            "it is not a namespace (any more)",
        ));
    }
    if let Some(ino) = expect {
        let st = rustix::fs::fstat(&fd)
            .map_err(|e| SysError::new(format!("cannot stat {}", path.display()), e))?;
        if st.st_ino != ino {
            return Err(SysError::other(
                format!("cannot open {}", path.display()),
                ErrorKind::Gone,
                "it is another namespace now",
            ));
        }
    }
    Ok(fd)
}

/// Runs `work` on a thread that joined namespace `fd`.
fn join_with<T: Send>(fd: OwnedFd, work: impl FnOnce() -> T + Send) -> Result<T, SysError> {
    std::thread::scope(|s| {
        s.spawn(move || {
            rustix::thread::move_into_link_name_space(
                rustix::fd::AsFd::as_fd(&fd),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .map_err(|e| SysError::new("cannot join it (needs CAP_SYS_ADMIN over it)", e))?;
            Ok(work())
        })
        .join()
        .unwrap_or_else(|_| {
            Err(SysError::other(
                "reading it",
                ErrorKind::Bug,
                "the namespace thread panicked",
            ))
        })
    })
}

/// Runs `work` on a thread that has joined the namespace of `target` (or on this thread for
/// this process's own namespace), entered through the first of its files that still opens.
/// `Err` means the namespace could not be joined; [`ErrorKind::Gone`] that it is gone (every
/// file it could be entered through has disappeared since discovery).
pub fn run_in<T: Send>(
    target: &ZoneTarget,
    work: impl FnOnce() -> T + Send,
) -> Result<T, SysError> {
    if target.own {
        return Ok(work());
    }
    let mut gone = None;
    for path in &target.enter {
        match open_ns(path, target.zone.netns_inode) {
            Ok(fd) => return join_with(fd, work),
            Err(e) if e.kind() == ErrorKind::Gone => gone = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(gone.unwrap_or_else(|| {
        SysError::other(
            "cannot join it",
            ErrorKind::Unsupported,
            "no file to enter it through",
        )
    }))
}

/// The first member of `t` still alive, for reading its namespace through `/proc/PID/net`:
/// `Ok(None)` when it has no visible member, [`ErrorKind::Gone`] when every member has exited
/// since discovery.
pub fn live_member(t: &ZoneTarget, proc_root: &Path) -> Result<Option<u32>, SysError> {
    if t.members.is_empty() {
        return Ok(None);
    }
    t.members
        .iter()
        .copied()
        .find(|pid| proc_root.join(format!("{pid}/net/tcp")).exists())
        .map(Some)
        .ok_or_else(|| {
            SysError::other(
                "reading it through its processes",
                ErrorKind::Gone,
                "every process found in it has exited",
            )
        })
}

/// Zones chosen by [`select`], with what their discovery could not see.
pub type SelectedZones = (Vec<ZoneTarget>, Vec<Warning>);

/// The zones `select` asks for, in display order (global first, then by name), with what
/// discovery could not see; `None` for [`ZoneSelect::Current`] (no discovery needed). A named
/// zone that does not exist is [`Error::UnknownZone`], listing the known ones.
pub fn select(proc_root: &Path, select: &ZoneSelect) -> Result<Option<SelectedZones>, Error> {
    let spec = match select {
        ZoneSelect::Current => return Ok(None),
        ZoneSelect::All => None,
        ZoneSelect::Named(spec) => Some(spec),
    };
    let (targets, warnings) = discover(proc_root);
    let Some(spec) = spec else {
        return Ok(Some((targets, warnings)));
    };
    let known = targets.iter().map(|t| t.zone.name.clone()).collect();
    let hit: Vec<ZoneTarget> = targets
        .into_iter()
        .filter(|t| t.zone.matches(spec))
        .collect();
    if hit.is_empty() {
        return Err(Error::UnknownZone {
            name: spec.clone(),
            known,
        });
    }
    Ok(Some((hit, warnings)))
}

/// Runs `work` with the paths of zone `t`'s counter files and sysctls: on a thread that joined
/// it (`/proc/thread-self/net`, `/proc/sys` read from that thread), on this thread for this
/// process's own namespace, or, when joining is not permitted, here with the paths of a member
/// process (counters only: [`Reach::Member`]). `Err` when the zone cannot be reached at all;
/// [`ErrorKind::Gone`] when it went away since discovery.
pub fn in_zone<T: Send>(
    t: &ZoneTarget,
    proc_root: &Path,
    work: impl Fn(&ProcPaths) -> T + Send + Sync,
) -> Result<(T, Reach), SysError> {
    let paths = if t.own {
        ProcPaths::new(proc_root)
    } else {
        ProcPaths::thread(proc_root)
    };
    match run_in(t, || work(&paths)) {
        Ok(v) => Ok((v, Reach::Joined)),
        Err(why) if why.kind() == ErrorKind::Gone => Err(why),
        Err(why) => match live_member(t, proc_root)? {
            Some(pid) => Ok((
                work(&ProcPaths::member(proc_root, pid)),
                Reach::Member(pid, why.to_string()),
            )),
            None => Err(SysError::new(
                format!("{}; no visible process in it", why.what),
                why.source,
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Query;
    use std::time::{Duration, Instant};

    /// A namespace whose only process exits after discovery is gone: joining it, reading it
    /// through its process and listing it say so ([`ErrorKind::Gone`], or leave it out without
    /// a warning), rather than "not permitted" or an error that stops the listing.
    #[test]
    fn a_zone_whose_last_process_exited_since_discovery_is_gone() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("SKIPPED: a_zone_whose_last_process_exited_since_discovery_is_gone needs root (unshare --net)");
            return;
        }
        let Ok(mut child) = std::process::Command::new("unshare")
            .args(["--net", "sleep", "30"])
            .spawn()
        else {
            eprintln!(
                "SKIPPED: a_zone_whose_last_process_exited_since_discovery_is_gone: no unshare(1)"
            );
            return;
        };
        let proc_root = Path::new("/proc");
        let deadline = Instant::now() + Duration::from_secs(10);
        let t = loop {
            let (targets, _) = discover(proc_root);
            if let Some(t) = targets
                .into_iter()
                .find(|t| !t.own && t.members.contains(&child.id()))
            {
                break t;
            }
            assert!(
                Instant::now() < deadline,
                "the child's namespace never showed"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        // Found, and readable, while its process lives.
        assert!(run_in(&t, || ()).is_ok());
        child.kill().unwrap();
        child.wait().unwrap();

        let e = run_in(&t, || ()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Gone, "{e}");
        let e = in_zone(&t, proc_root, |_| ()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Gone, "{e}");
        let e = live_member(&t, proc_root).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Gone, "{e}");
        let mut q = Query::new();
        q.gather.owners = false;
        let (snap, _) =
            crate::run::list::collect_in(&q, Some((vec![t.clone()], vec![])), None).unwrap();
        assert!(snap.sockets.iter().all(|s| s.netns != Some(t.key)));
        assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);
    }
}
