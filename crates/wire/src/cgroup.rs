//! `/proc/PID/cgroup`: `hierarchy-id:controllers:path` lines, the cgroup2 one being `0::/path`.
//! Anyone with a delegated subtree names the cgroups below it.

/// The cgroup paths, the cgroup2 line's first, then the v1 lines'.
pub fn paths(text: &str) -> Vec<&str> {
    let mut v2 = Vec::new();
    let mut v1 = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(_ctl), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" {
            v2.push(path);
        } else {
            v1.push(path);
        }
    }
    v2.extend(v1);
    v2
}

#[cfg(test)]
mod tests {
    #[test]
    fn v2_first() {
        let t = "12:pids:/v1path\n0::/system.slice/docker-ab.scope\nbroken\n";
        assert_eq!(
            super::paths(t),
            ["/system.slice/docker-ab.scope", "/v1path"]
        );
    }
}
