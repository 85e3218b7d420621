//! Reading the counter files of the caller's network namespace: `<proc_root>/net/snmp`,
//! `net/netstat`, `net/snmp6`, and the TIME-WAIT total of `net/sockstat`. Parsing is in
//! [`crate::counters`]; this module only reads.

use std::io;
use std::path::Path;

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
pub fn read(proc_root: &Path) -> Result<CounterRead, Error> {
    let net = proc_root.join("net");
    let snmp = read_optional(&net.join("snmp"))?.ok_or_else(|| Error::Proc {
        message: format!(
            "cannot read {}: no such file (is {} a proc filesystem?)",
            net.join("snmp").display(),
            proc_root.display()
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
            code: "counters-missing",
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
            code: "counters-missing",
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

/// The netns-wide TIME-WAIT count: `tw` on the `TCP:` line of `<proc_root>/net/sockstat`
/// (`sockstat_seq_show`, `net/ipv4/proc.c`). `None` when the file or the field is missing.
pub fn read_time_wait_total(proc_root: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(proc_root.join("net/sockstat")).ok()?;
    parse_sockstat_tw(&text)
}

/// Finds `tw N` on the `TCP:` line of `/proc/net/sockstat` text (by name: the line is
/// `TCP: inuse 5 orphan 0 tw 2 alloc 7 mem 1`).
pub fn parse_sockstat_tw(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("TCP:"))?;
    let mut words = line.split_ascii_whitespace();
    while let Some(w) = words.next() {
        if w == "tw" {
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
        assert_eq!(parse_sockstat_tw(t), Some(27));
        assert_eq!(parse_sockstat_tw("TCP: inuse 5 orphan 0\n"), None);
        assert_eq!(parse_sockstat_tw(""), None);
    }

    #[test]
    fn reads_a_fake_proc_and_warns_about_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("net")).unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("net/snmp"), "{e}");
        std::fs::write(
            dir.path().join("net/snmp"),
            "Tcp: ActiveOpens OutRsts\nTcp: 3 4\n",
        )
        .unwrap();
        let r = read(dir.path()).unwrap();
        assert_eq!(r.set.get("Tcp", "OutRsts"), Some(4));
        assert_eq!(r.warnings.len(), 2);
        std::fs::write(dir.path().join("net/netstat"), "TcpExt: TW\nTcpExt: x\n").unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("/proc/net/netstat"), "{e}");
    }
}
