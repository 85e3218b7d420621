//! The service or container of a socket without a `/proc` scan and without privilege: the kernel
//! reports each inet socket's cgroup-v2 id (`INET_DIAG_CGROUP_ID`, 5.8+), which is the inode
//! number of its directory under the cgroup2 mount (doc/reference/linux.md#cgroups; iproute2 `lib/cg_map.c`
//! does the same walk). The id is the cgroup of the process that created the socket, at creation
//! time.

use std::collections::HashMap;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

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
