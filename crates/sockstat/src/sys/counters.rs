//! Reading the counter files of one network namespace: `snmp`, `netstat`, `snmp6`, and the
//! TIME-WAIT total of `sockstat`, from the directory [`ProcPaths::net`] names. Parsing is in
//! [`crate::counters`]; this module only reads.

use crate::model::WarningCode;
use std::io;
use std::path::{Path, PathBuf};

use crate::counters::CounterSet;
use crate::error::Error;
use crate::model::Warning;

/// The counters, with a warning for each optional file that was missing.
#[derive(Debug, Clone, Default)]
pub struct CounterRead {
    /// Every counter read.
    pub set: CounterSet,
    /// What could not be read (e.g. `snmp6` when IPv6 is disabled).
    pub warnings: Vec<Warning>,
}

/// Where one network namespace's counter files and sysctls are read from.
///
/// `/proc/net` is the namespace of the thread-group leader and `/proc/sys/net` that of the
/// reading thread (research/kernel.md §3.5), so a thread that joined another namespace reads
/// its counters through `/proc/thread-self/net` and its sysctls through `/proc/sys` read from
/// that thread. Without the privilege to join, `/proc/PID/net` of a member process still gives
/// the counters (readable by anyone, kernel.md §1.8), but no path gives the sysctls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcPaths {
    /// The directory with `snmp`, `netstat`, `snmp6` and `sockstat`.
    pub net: PathBuf,
    /// The sysctl tree (`/proc/sys`); `None` when this namespace's sysctls cannot be read.
    pub sys: Option<PathBuf>,
}

impl ProcPaths {
    /// The namespace sockstat runs in: `<proc_root>/net` and `<proc_root>/sys` (a fake
    /// `--proc-root` works the same way).
    pub fn new(proc_root: &Path) -> ProcPaths {
        ProcPaths {
            net: proc_root.join("net"),
            sys: Some(proc_root.join("sys")),
        }
    }

    /// The namespace of the calling thread, for a thread that joined another namespace with
    /// `setns`: `<proc_root>/thread-self/net`, and `<proc_root>/sys` (read from that thread).
    pub fn thread(proc_root: &Path) -> ProcPaths {
        ProcPaths {
            net: proc_root.join("thread-self/net"),
            sys: Some(proc_root.join("sys")),
        }
    }

    /// The namespace of process `pid`, read from outside it: its counters only.
    pub fn member(proc_root: &Path, pid: u32) -> ProcPaths {
        ProcPaths {
            net: proc_root.join(format!("{pid}/net")),
            sys: None,
        }
    }
}

fn read_optional(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Proc {
            message: format!("cannot read {}: {e}", path.display()),
        }),
    }
}

/// Reads every counter. `/proc/net/snmp` is required; `netstat` and `snmp6` may be absent
/// (a warning says so).
pub fn read(paths: &ProcPaths) -> Result<CounterRead, Error> {
    let net = &paths.net;
    let snmp = read_optional(&net.join("snmp"))?.ok_or_else(|| Error::Proc {
        message: format!(
            "cannot read {}: no such file (is {} in a proc filesystem?)",
            net.join("snmp").display(),
            net.display()
        ),
    })?;
    let netstat = read_optional(&net.join("netstat"))?;
    let snmp6 = read_optional(&net.join("snmp6"))?;
    let set =
        CounterSet::parse(Some(&snmp), netstat.as_deref(), snmp6.as_deref()).map_err(|e| {
            Error::Proc {
                message: e.to_string(),
            }
        })?;
    let mut warnings = Vec::new();
    if netstat.is_none() {
        warnings.push(Warning {
            code: WarningCode::CountersMissing,
            count: None,
            message: format!(
                "{} is missing: the TcpExt and IpExt counters are not shown",
                net.join("netstat").display()
            ),
            details: vec![],
        });
    }
    if snmp6.is_none() {
        warnings.push(Warning {
            code: WarningCode::CountersMissing,
            count: None,
            message: format!(
                "{} is missing (IPv6 disabled?): the Ip6, Icmp6 and Udp6 counters are not shown",
                net.join("snmp6").display()
            ),
            details: vec![],
        });
    }
    Ok(CounterRead { set, warnings })
}

/// The netns-wide TIME-WAIT count: `tw` on the `TCP:` line of `<net>/sockstat`
/// (`sockstat_seq_show`, `net/ipv4/proc.c`). `None` when the file or the field is missing.
pub fn read_time_wait_total(paths: &ProcPaths) -> Option<u64> {
    let text = std::fs::read_to_string(paths.net.join("sockstat")).ok()?;
    sockstat_tcp_field(&text, "tw")
}

/// Finds the field `name` (`tw`, `mem`, ...) on the `TCP:` line of `/proc/net/sockstat` text,
/// by name: the line is `TCP: inuse 5 orphan 0 tw 2 alloc 7 mem 1`.
pub fn sockstat_tcp_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("TCP:"))?;
    let mut words = line.split_ascii_whitespace();
    while let Some(w) = words.next() {
        if w == name {
            return words.next()?.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockstat_tw_by_name() {
        let t =
            "sockets: used 120\nTCP: inuse 5 orphan 0 tw 27 alloc 7 mem 1\nUDP: inuse 1 mem 0\n";
        assert_eq!(sockstat_tcp_field(t, "tw"), Some(27));
        assert_eq!(sockstat_tcp_field(t, "mem"), Some(1));
        // The UDP line's mem is not TCP's.
        assert_eq!(sockstat_tcp_field("UDP: inuse 1 mem 2\n", "mem"), None);
        assert_eq!(sockstat_tcp_field("TCP: inuse 5 orphan 0\n", "tw"), None);
        assert_eq!(sockstat_tcp_field("", "tw"), None);
    }

    #[test]
    fn reads_a_fake_proc_and_warns_about_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("net")).unwrap();
        let paths = ProcPaths::new(dir.path());
        let e = read(&paths).unwrap_err();
        assert!(e.to_string().contains("net/snmp"), "{e}");
        std::fs::write(
            dir.path().join("net/snmp"),
            "Tcp: ActiveOpens OutRsts\nTcp: 3 4\n",
        )
        .unwrap();
        let r = read(&paths).unwrap();
        assert_eq!(r.set.get("Tcp", "OutRsts"), Some(4));
        assert_eq!(r.warnings.len(), 2);
        std::fs::write(dir.path().join("net/netstat"), "TcpExt: TW\nTcpExt: x\n").unwrap();
        let e = read(&paths).unwrap_err();
        assert!(e.to_string().contains("/proc/net/netstat"), "{e}");
    }

    #[test]
    fn paths_of_a_thread_and_a_member() {
        let root = Path::new("/proc");
        assert_eq!(ProcPaths::new(root).net, Path::new("/proc/net"));
        let t = ProcPaths::thread(root);
        assert_eq!(t.net, Path::new("/proc/thread-self/net"));
        assert_eq!(t.sys.as_deref(), Some(Path::new("/proc/sys")));
        let m = ProcPaths::member(root, 42);
        assert_eq!(m.net, Path::new("/proc/42/net"));
        assert!(m.sys.is_none());
    }
}
