//! `/proc/PID/mountinfo`: where the cgroup2 hierarchy is mounted, and whether a proc mount hides
//! other users' processes (`hidepid`). Mount points are written with space, tab, newline and
//! backslash escaped as `\ooo`; anyone allowed to mount (in a user namespace) chooses them.

/// A mount point or root as mountinfo writes it, unescaped: anything that is not a whole,
/// byte-sized octal escape is kept as it is.
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code = b.get(i + 1..i + 4).filter(|_| b[i] == b'\\').and_then(|d| {
            let digit = |c: u8| (b'0'..=b'7').contains(&c).then(|| u32::from(c - b'0'));
            let v = digit(d[0])? * 64 + digit(d[1])? * 8 + digit(d[2])?;
            u8::try_from(v).ok()
        });
        match code {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    out
}

/// One line: (the fields before ` - `, the fields after it), or `None` for a line that is not
/// `id parent maj:min root mount-point options [optional...] - fstype source super-options`.
fn split(line: &str) -> Option<(Vec<&str>, Vec<&str>)> {
    let (left, right) = line.split_once(" - ")?;
    let left: Vec<&str> = left.split(' ').collect();
    let right: Vec<&str> = right.split(' ').collect();
    (left.len() >= 6 && !right.is_empty()).then_some((left, right))
}

/// The mount point of the cgroup2 hierarchy: the first `cgroup2` mount of the hierarchy's root
/// (`/`), else any `cgroup2` mount.
pub fn cgroup2_mount(mountinfo: &str) -> Option<Vec<u8>> {
    let mut any = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = split(line) else {
            continue;
        };
        if right[0] != "cgroup2" {
            continue;
        }
        let point = unescape(left[4]);
        if left[3] == "/" {
            return Some(point);
        }
        any.get_or_insert(point);
    }
    any
}

/// The `hidepid` option (when it hides anything) and `gid=` of the proc mount at `mount_point`
/// (the last one listed there, which is the one on top).
pub fn hidepid_of(mountinfo: &str, mount_point: &[u8]) -> Option<(String, Option<u32>)> {
    let mut found = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = split(line) else {
            continue;
        };
        if right[0] != "proc" || unescape(left[4]) != mount_point {
            continue;
        }
        let opts = right.get(2).copied().unwrap_or("");
        let mut hide = None;
        let mut gid = None;
        for o in opts.split(',').chain(left[5].split(',')) {
            if let Some(v) = o.strip_prefix("hidepid=") {
                if !matches!(v, "0" | "off") {
                    hide = Some(o.to_string());
                }
            } else if let Some(v) = o.strip_prefix("gid=") {
                gid = v.parse().ok();
            }
        }
        found = Some(hide.map(|h| (h, gid)));
    }
    found.flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidepid_of_a_mount_point() {
        let mi = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                  99 22 0:50 / /proc rw,relatime - proc proc rw,hidepid=invisible,gid=4\n\
                  100 27 0:51 / /tmp/my\\040proc rw - proc proc rw,hidepid=2\n\
                  101 27 0:52 / /tmp/open rw - proc proc rw,hidepid=0\n";
        assert_eq!(
            hidepid_of(mi, b"/proc"),
            Some(("hidepid=invisible".into(), Some(4)))
        );
        assert_eq!(
            hidepid_of(mi, b"/tmp/my proc"),
            Some(("hidepid=2".into(), None))
        );
        assert_eq!(hidepid_of(mi, b"/tmp/open"), None);
        assert_eq!(hidepid_of(mi, b"/elsewhere"), None);
    }

    #[test]
    fn the_cgroup2_root_mount() {
        let mi = "\
25 1 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
30 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
35 25 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(cgroup2_mount(mi), Some(b"/sys/fs/cgroup/unified".to_vec()));
        let nested = "\
40 1 0:31 /sub /mnt/sub rw - cgroup2 cgroup2 rw
41 1 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw
";
        assert_eq!(cgroup2_mount(nested), Some(b"/sys/fs/cgroup".to_vec()));
        assert_eq!(cgroup2_mount("garbage\n"), None);
    }

    #[test]
    fn octal_escapes_and_what_is_not_one() {
        assert_eq!(unescape(r"/tmp/my\040proc"), b"/tmp/my proc");
        assert_eq!(unescape(r"a\011b\012c\134"), b"a\tb\nc\\");
        // Cut short at the end, not octal, or above a byte: kept as written.
        assert_eq!(unescape(r"x\04"), br"x\04");
        assert_eq!(unescape(r"x\"), br"x\");
        assert_eq!(unescape(r"x\089"), br"x\089");
        assert_eq!(unescape(r"x\777"), br"x\777");
    }
}
