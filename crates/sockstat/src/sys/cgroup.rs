//! The service or container of a socket without a `/proc` scan and without privilege: the kernel
//! reports each inet socket's cgroup-v2 id (`INET_DIAG_CGROUP_ID`, 5.8+), which is the inode
//! number of its directory under the cgroup2 mount (kernel.md §5.4; iproute2 `lib/cg_map.c` does
//! the same walk). The id is the cgroup of the process that created the socket, at creation time.

use std::collections::HashMap;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the cgroup2 hierarchy is mounted, from `mountinfo` text: the first `cgroup2` mount of
/// the hierarchy's root (`/`), else any `cgroup2` mount.
pub fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    let mut any = None;
    for line in mountinfo.lines() {
        // id parent maj:min root mountpoint options [optional...] - fstype source superopts
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        if post.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let f: Vec<&str> = pre.split_whitespace().collect();
        let (Some(root), Some(point)) = (f.get(3), f.get(4)) else {
            continue;
        };
        let point = PathBuf::from(std::ffi::OsString::from_vec(super::unescape_mountinfo(
            point,
        )));
        if *root == "/" {
            return Some(point);
        }
        any.get_or_insert(point);
    }
    any
}

/// Maps every cgroup directory's inode (its cgroup id) to its path below the mount (`/` for the
/// root). Directories that vanish during the walk are skipped; the walk never follows symlinks.
pub fn id_paths(mount: &Path) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    if let Ok(md) = std::fs::symlink_metadata(mount) {
        out.insert(md.ino(), "/".to_string());
    }
    let mut stack = vec![(mount.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_root_mount() {
        let mi = "\
25 1 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
30 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
35 25 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            cgroup2_mount(mi),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let nested = "40 1 0:31 /system.slice /mnt/cg rw - cgroup2 none rw\n41 1 0:31 / /mnt/my\\040cg rw - cgroup2 none rw\n";
        assert_eq!(cgroup2_mount(nested), Some(PathBuf::from("/mnt/my cg")));
        assert_eq!(
            cgroup2_mount("40 1 0:31 /x /mnt/cg rw - cgroup2 none rw\n"),
            Some(PathBuf::from("/mnt/cg"))
        );
        assert_eq!(
            cgroup2_mount("30 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n"),
            None
        );
    }
}
