//! The service or container of a socket without a `/proc` scan and without privilege: the kernel
//! reports each inet socket's cgroup-v2 id (`INET_DIAG_CGROUP_ID`, 5.8+), which is the inode
//! number of its directory under the cgroup2 mount (doc/reference/linux.md#cgroups; iproute2 `lib/cg_map.c`
//! does the same walk). The id is the cgroup of the process that created the socket, at creation
//! time.

use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::model::{counted, Snapshot, Socket, Warning, WarningCode};
use crate::query::Query;

/// Where the cgroup2 hierarchy is mounted, from `mountinfo` text
/// ([`sockstat_wire::mountinfo::cgroup2_mount`]).
pub fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    sockstat_wire::mountinfo::cgroup2_mount(mountinfo)
        .map(|b| PathBuf::from(std::ffi::OsString::from_vec(b)))
}

/// Every cgroup directory's inode (its cgroup id) mapped to its path below the mount (`/` for
/// the root), and the directories that could not be listed (their subtrees are missing from
/// the map). Directories that vanish during the walk are skipped; the walk never follows
/// symlinks.
pub fn id_paths(mount: &Path) -> (HashMap<u64, String>, Vec<String>) {
    let mut out = HashMap::new();
    let mut unreadable = Vec::new();
    if let Ok(md) = std::fs::symlink_metadata(mount) {
        out.insert(md.ino(), "/".to_string());
    }
    let mut stack = vec![(mount.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                unreadable.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if !ft.is_dir() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let path = format!("{rel}/{name}");
            if let Ok(md) = e.metadata() {
                out.insert(md.ino(), path.clone());
            }
            stack.push((e.path(), path));
        }
    }
    (out, unreadable)
}

/// Fills `snap.cgroups` for the cgroup ids the sockets carry, or says why it cannot.
pub(crate) fn name_cgroups(q: &Query, sockets: &[Socket], snap: &mut Snapshot) {
    let mountinfo_path = q.gather.proc_root.join("self/mountinfo");
    let mountinfo = match super::procfs::read_to_string(&mountinfo_path) {
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
    let Some(mount) = cgroup2_mount(&mountinfo) else {
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
    let (all, unlisted) = id_paths(&mount);
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
