//! Reading [`Sysctls`] from the sysctl tree [`ProcPaths::sys`] names (`/proc/sys`, or a fake
//! one in tests). Values are per network namespace, that of the reading thread, except the
//! globals (doc/reference/linux.md#sysctls). A sysctl this kernel lacks is `None` and nothing is
//! said; one that exists but cannot be read or parsed is `None` and named in
//! [`SysctlRead::unreadable`], which [`unreadable_warning`] reports.

use std::io;

use sockstat_wire::sysctl as text;

use crate::model::{counted, Warning, WarningCode};
use crate::query::PortSet;
pub use crate::sys::counters::ProcPaths;
use crate::sysctl::Sysctls;

/// The sysctls of one namespace and what could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SysctlRead {
    /// The values read.
    pub sysctls: Sysctls,
    /// `net.ipv4.tcp_wmem: Permission denied (os error 13)`, one per sysctl that exists but
    /// could not be read or parsed.
    pub unreadable: Vec<String>,
}

/// The `sysctls-unreadable` warning for these `name: why` lines, when there are any.
pub fn unreadable_warning(unreadable: Vec<String>, consequence: &str) -> Option<Warning> {
    (!unreadable.is_empty()).then(|| {
        Warning::new(
            WarningCode::SysctlsUnreadable,
            format!(
                "{} could not be read: {consequence} (-v for which and why)",
                counted(unreadable.len(), "sysctl", "sysctls")
            ),
        )
        .count(unreadable.len() as u64)
        .details(unreadable)
    })
}

struct Reader<'a> {
    paths: &'a ProcPaths,
    unreadable: Vec<String>,
}

impl Reader<'_> {
    /// The text of `name` (`net.ipv4.tcp_tw_reuse`); `None` when absent or unreadable (the
    /// latter noted).
    fn text(&mut self, name: &str) -> Option<String> {
        let dir = self.paths.sys.as_ref()?;
        let path = dir.join(name.replace('.', "/"));
        match super::procfs::read_to_string(&path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                self.unreadable.push(format!("{name}: {e}"));
                None
            }
        }
    }

    fn parse<T>(
        &mut self,
        name: &str,
        parse: impl Fn(&str) -> Result<T, sockstat_wire::DecodeError>,
    ) -> Option<T> {
        let t = self.text(name)?;
        match parse(&t) {
            Ok(v) => Some(v),
            Err(e) => {
                self.unreadable
                    .push(format!("{name}: unexpected value {:?}: {e}", t.trim()));
                None
            }
        }
    }

    fn num(&mut self, name: &str) -> Option<u64> {
        self.parse(name, text::number)
    }

    fn three(&mut self, name: &str) -> Option<[u64; 3]> {
        self.parse(name, text::triple)
    }
}

/// Reads every sysctl of [`Sysctls`] under `paths` (nothing when `paths.sys` is `None`: a
/// namespace read from outside, whose sysctls no path shows).
pub fn read(paths: &ProcPaths) -> SysctlRead {
    let mut r = Reader {
        paths,
        unreadable: Vec::new(),
    };
    let sysctls = Sysctls {
        ip_local_port_range: r.parse("net.ipv4.ip_local_port_range", text::port_range),
        ip_local_reserved_ports: r
            .parse("net.ipv4.ip_local_reserved_ports", text::port_list)
            .map(PortSet::from_ranges),
        tcp_tw_reuse: r.num("net.ipv4.tcp_tw_reuse"),
        tcp_tw_reuse_delay_ms: r.num("net.ipv4.tcp_tw_reuse_delay"),
        tcp_timestamps: r.num("net.ipv4.tcp_timestamps"),
        tcp_max_tw_buckets: r.num("net.ipv4.tcp_max_tw_buckets"),
        tcp_wmem: r.three("net.ipv4.tcp_wmem"),
        tcp_rmem: r.three("net.ipv4.tcp_rmem"),
        tcp_window_scaling: r.num("net.ipv4.tcp_window_scaling"),
        tcp_moderate_rcvbuf: r.num("net.ipv4.tcp_moderate_rcvbuf"),
        somaxconn: r.num("net.core.somaxconn"),
        tcp_syncookies: r.num("net.ipv4.tcp_syncookies"),
        tcp_syn_retries: r.num("net.ipv4.tcp_syn_retries"),
        tcp_synack_retries: r.num("net.ipv4.tcp_synack_retries"),
        tcp_syn_linear_timeouts: r.num("net.ipv4.tcp_syn_linear_timeouts"),
        wmem_max: r.num("net.core.wmem_max"),
        rmem_max: r.num("net.core.rmem_max"),
        tcp_mem: r.three("net.ipv4.tcp_mem"),
    };
    SysctlRead {
        sysctls,
        unreadable: r.unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_fake_proc_and_names_what_it_could_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let v4 = dir.path().join("sys/net/ipv4");
        std::fs::create_dir_all(&v4).unwrap();
        std::fs::write(v4.join("ip_local_port_range"), "40000\t40049\n").unwrap();
        std::fs::write(v4.join("ip_local_reserved_ports"), "\n").unwrap();
        std::fs::write(v4.join("tcp_tw_reuse"), "2\n").unwrap();
        std::fs::write(v4.join("tcp_max_tw_buckets"), "131072\n").unwrap();
        std::fs::write(v4.join("tcp_wmem"), "4096 16384\n").unwrap();
        // A directory where a file should be: exists, cannot be read as text.
        std::fs::create_dir_all(v4.join("tcp_timestamps")).unwrap();
        let r = read(&ProcPaths::new(dir.path()));
        let s = &r.sysctls;
        assert_eq!(s.ip_local_port_range, Some((40000, 40049)));
        assert_eq!(s.ip_local_reserved_ports, Some(PortSet::default()));
        assert_eq!(s.tcp_tw_reuse, Some(2));
        assert_eq!(s.tcp_tw_reuse_delay_ms, None);
        assert_eq!(s.tcp_max_tw_buckets, Some(131072));
        assert_eq!(s.tcp_wmem, None);
        assert_eq!(s.tcp_timestamps, None);
        assert_eq!(r.unreadable.len(), 2, "{:?}", r.unreadable);
        assert!(r.unreadable[0].starts_with("net.ipv4.tcp_timestamps: "));
        assert!(r.unreadable[1].starts_with("net.ipv4.tcp_wmem: unexpected value \"4096 16384\""));
        let w = unreadable_warning(r.unreadable.clone(), "skipped").unwrap();
        assert_eq!(w.code, WarningCode::SysctlsUnreadable);
        assert_eq!(w.count, Some(2));
        assert!(w
            .message
            .starts_with("2 sysctls could not be read: skipped"));
        // A namespace whose sysctls cannot be read from outside: everything unknown, and
        // nothing "unreadable" (the caller says why once, for the whole zone).
        let m = read(&ProcPaths::member(dir.path(), 1));
        assert_eq!(m, SysctlRead::default());
    }

    #[test]
    fn reads_this_host() {
        let r = read(&ProcPaths::new(std::path::Path::new("/proc")));
        assert!(r.unreadable.is_empty(), "{:?}", r.unreadable);
        let s = r.sysctls;
        assert!(s.ip_local_port_range.is_some());
        assert!(s.tcp_rmem.is_some() && s.tcp_wmem.is_some());
        assert!(s.somaxconn.is_some());
    }
}
