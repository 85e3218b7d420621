//! Reading the counter files of one network namespace: `snmp`, `netstat`, `snmp6`, and the
//! TIME-WAIT total of `sockstat`, from the directory [`ProcPaths::net`] names. Parsing is in
//! [`crate::counters`]; this module only reads.

use std::io;
use std::path::{Path, PathBuf};

use sockstat_wire::snmp;

use crate::counters::CounterSet;
use crate::error::{Error, ErrorKind, SysError};
use crate::model::{Warning, WarningCode};

/// The counters, with a warning for each optional file that was missing.
#[derive(Debug, Clone, Default)]
pub struct CounterRead {
    /// Every counter read.
    pub set: CounterSet,
    /// TIME-WAIT entries in the namespace: `tw` on the `TCP:` line of `sockstat`.
    pub time_wait_total: Option<u64>,
    /// Pages TCP sockets use, system-wide: `mem` on the `TCP:` line of `sockstat` (global, so
    /// the namespace it is read from does not matter).
    pub tcp_mem_pages: Option<u64>,
    /// What could not be read (e.g. `snmp6` when IPv6 is disabled).
    pub warnings: Vec<Warning>,
}

/// Where one network namespace's counter files and sysctls are read from.
///
/// `/proc/net` is the namespace of the thread-group leader and `/proc/sys/net` that of the
/// reading thread (doc/reference/linux.md#sysctls), so a thread that joined another namespace reads
/// its counters through `/proc/thread-self/net` and its sysctls through `/proc/sys` read from
/// that thread. Without the privilege to join, `/proc/PID/net` of a member process still gives
/// the counters (readable by anyone, doc/reference/linux.md#privileges), but no path gives the sysctls.
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
    match super::procfs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::proc(path, e)),
    }
}

/// Reads every counter. `/proc/net/snmp` is required; `netstat` and `snmp6` may be absent
/// (a warning says so).
pub fn read(paths: &ProcPaths) -> Result<CounterRead, Error> {
    let net = &paths.net;
    let snmp = read_optional(&net.join("snmp"))?.ok_or_else(|| {
        Error::Proc(SysError::other(
            format!("cannot read {}", net.join("snmp").display()),
            ErrorKind::Gone,
            format!("no such file (is {} in a proc filesystem?)", net.display()),
        ))
    })?;
    let netstat = read_optional(&net.join("netstat"))?;
    let snmp6 = read_optional(&net.join("snmp6"))?;
    let set =
        CounterSet::parse(Some(&snmp), netstat.as_deref(), snmp6.as_deref()).map_err(|e| {
            Error::Proc(SysError::new(
                format!("cannot parse {}", net.join(e.file).display()),
                io::Error::new(io::ErrorKind::InvalidData, e.message),
            ))
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
    let sockstat = read_optional(&net.join("sockstat"))?;
    let field = |name| {
        sockstat
            .as_deref()
            .and_then(|t| snmp::sockstat_tcp_field(t, name))
    };
    let (time_wait_total, tcp_mem_pages) = (field("tw"), field("mem"));
    // Every kernel has the file (a fake --proc-root may not): say so only when it is there
    // and lacks what is read from it.
    if sockstat.is_some() && (time_wait_total.is_none() || tcp_mem_pages.is_none()) {
        warnings.push(Warning::new(
            WarningCode::CountersMissing,
            format!(
                "{} has no TCP line with 'tw' and 'mem': the TIME-WAIT total and TCP's memory \
                 use are unknown",
                net.join("sockstat").display()
            ),
        ));
    }
    Ok(CounterRead {
        set,
        time_wait_total,
        tcp_mem_pages,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
        assert_eq!(r.time_wait_total, None);
        std::fs::write(dir.path().join("net/sockstat"), "TCP: inuse 5\n").unwrap();
        assert_eq!(read(&paths).unwrap().warnings.len(), 3);
        std::fs::write(
            dir.path().join("net/sockstat"),
            "sockets: used 120\nTCP: inuse 5 orphan 0 tw 27 alloc 7 mem 1\nUDP: inuse 1 mem 0\n",
        )
        .unwrap();
        let r = read(&paths).unwrap();
        assert_eq!((r.time_wait_total, r.tcp_mem_pages), (Some(27), Some(1)));
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
        std::fs::write(dir.path().join("net/netstat"), "TcpExt: TW\nTcpExt: x\n").unwrap();
        let e = read(&paths).unwrap_err();
        assert!(e.to_string().contains("/net/netstat: "), "{e}");
        assert_eq!(e.kind(), crate::error::ErrorKind::Invalid);
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
