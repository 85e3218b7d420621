//! What could not be seen ([`Warning`], with a [`WarningCode`]) and how bad a finding is
//! ([`Severity`]): the one vocabulary every view uses to say that something is missing or wrong.

use serde::Serialize;

/// How bad a finding is, for every kind of finding (diagnosis, ports). Ordered:
/// `Critical > Warning > Info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; does not change an exit status.
    Info,
    /// Something limits a connection or the host (`diagnose` exits 1).
    Warning,
    /// A connection or the host is severely limited or failing (`diagnose` exits 1).
    Critical,
}

impl Severity {
    /// The name used in JSON and text.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

macro_rules! warning_codes {
    ($($(#[doc = $doc:literal])+ $variant:ident => $name:literal,)+) => {
        /// The stable, machine-readable code of a [`Warning`] (kebab-case on the wire; every
        /// code is listed in doc/json-schema.md, "Warning codes").
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum WarningCode {
            $($(#[doc = $doc])+ $variant,)+
        }

        impl WarningCode {
            /// Every code, in documentation order.
            pub const ALL: &'static [WarningCode] = &[$(WarningCode::$variant,)+];

            /// The code as written in JSON.
            pub fn name(self) -> &'static str {
                match self {
                    $(WarningCode::$variant => $name,)+
                }
            }
        }
    };
}

warning_codes! {
    /// Some of the sockets listed may be held by processes whose fd tables these privileges
    /// cannot read; the count is those sockets.
    OwnersHidden => "owners-hidden",
    /// The owner scan failed as a whole: no socket has its holders.
    OwnersUnavailable => "owners-unavailable",
    /// Processes an owner filter (`--pid`, `--command`, `--user`) selects could not be read:
    /// the sockets only they hold are not listed; `count` is the processes.
    SelectedUnreadable => "selected-unreadable",
    /// Some processes' fd tables could not be read for another reason than privileges (too
    /// many open files, no memory): sockets listed may show no holder, or only some; the count
    /// is those sockets.
    OwnersIncomplete => "owners-incomplete",
    /// `--owner-scan bpf` could not run; /proc was scanned instead.
    OwnerScanBpfUnavailable => "owner-scan-bpf-unavailable",
    /// Some processes' arguments could not be read in time (locked memory map).
    ArgsUnavailable => "args-unavailable",
    /// The user database did not answer in time: some users are shown as numbers.
    UsersUnresolved => "users-unresolved",
    /// TIME-WAIT entries were left out on purpose (`-T` without `--time-wait`); the count is
    /// how many the listing would have shown.
    TimeWaitHidden => "time-wait-hidden",
    /// A protocol this kernel lacks (no module, no diag support) was not listed.
    ProtoUnavailable => "proto-unavailable",
    /// A sock_diag dump failed; that family was read from /proc/net text instead.
    DumpFailed => "dump-failed",
    /// A dump kept changing under churn; the last attempt was kept.
    DumpInconsistent => "dump-inconsistent",
    /// A /proc/net file could not be read.
    ProcNetUnreadable => "proc-net-unreadable",
    /// A /proc/net file had lines that could not be parsed; they were skipped.
    ProcNetMalformed => "proc-net-malformed",
    /// A column of some listed sockets is not shown: the source they were read from
    /// (`/proc/net` text) does not give it. One warning per column; `count` is the sockets.
    ColumnUnavailable => "column-unavailable",
    /// `--record-netlink` could not write its recording.
    RecordFailed => "record-failed",
    /// A dump answered from /proc/net text was not recorded.
    DumpNotRecorded => "dump-not-recorded",
    /// A cgroup id of a socket could not be named.
    CgroupUnknown => "cgroup-unknown",
    /// No cgroup2 hierarchy is mounted: sockets' cgroups cannot be named.
    Cgroup2Unmounted => "cgroup2-unmounted",
    /// Namespaces cannot be discovered at all (/proc unreadable): only this one is read.
    ZonesUnavailable => "zones-unavailable",
    /// Namespace discovery saw only part of the host.
    ZonesPartial => "zones-partial",
    /// Some zones could not be joined: they were read through a member's /proc/PID/net text.
    ZonesNotJoined => "zones-not-joined",
    /// Some zones could not be read at all.
    ZonesNotRead => "zones-not-read",
    /// Some zones' sysctls could not be read (not joinable with these privileges).
    ZoneSysctlsUnreadable => "zone-sysctls-unreadable",
    /// Sysctls that exist could not be read; the analysis that needs them was skipped.
    SysctlsUnreadable => "sysctls-unreadable",
    /// An optional counter file (netstat, snmp6) is missing.
    CountersMissing => "counters-missing",
    /// A counter went backwards (reset, namespace recreated) and is shown as `reset`.
    CountersReset => "counters-reset",
    /// The namespace's counters could not be read: the rules that need them were skipped.
    CountersUnavailable => "counters-unavailable",
    /// `net.ipv4.tcp_mem` is not visible from this namespace.
    TcpMemHidden => "tcp-mem-hidden",
    /// Sockets without cookies (from /proc/net text) cannot be joined across samples.
    NoCookies => "no-cookies",
    /// `--exact-locks` needs root; buffer locks were inferred.
    ExactLocksNeedRoot => "exact-locks-need-root",
    /// Some buffer locks could not be read exactly; those were inferred.
    ExactLocksUnavailable => "exact-locks-unavailable",
    /// Not root: buffer locks are inferred and other users' processes are not named.
    BufferLocksInferred => "buffer-locks-inferred",
    /// `sockstat diagnose`: connection events could not be traced (privileges or kernel), so
    /// connect latencies were not measured.
    ConnectEventsUnavailable => "connect-events-unavailable",
    /// `sockstat top`: connection events could not be traced, so connections that opened and
    /// closed between two refreshes are not seen and the last bytes of those that closed are
    /// not counted.
    ShortConnectionsUncounted => "short-connections-uncounted",
    /// `sockstat top`: connections closed during the interval whose last bytes are not counted
    /// (their close events were lost); the count is those connections, or the events lost.
    ClosedUncounted => "closed-uncounted",
    /// `sockstat top`: sockets of protocols without byte counters (UDP, raw, ...) are shown with
    /// their queues and drops, their rates unknown; the count is those sockets.
    RatesUnknown => "rates-unknown",
    /// `sockstat kill`: listening or unconnected sockets matched and were left alone (neither
    /// `-l` nor `--state` asked for them).
    ListenersKept => "listeners-kept",
}

impl Serialize for WarningCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for WarningCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Something that could not be seen, and how to see it; collected, then reported once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// Stable machine-readable code.
    pub code: WarningCode,
    /// How many things it concerns (sockets, processes, ...), when countable.
    pub count: Option<u64>,
    /// One line for a person: what is missing and how to get it.
    pub message: String,
    /// Details shown with `-v` (e.g. the pids that could not be read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

impl Warning {
    /// A warning with no count and no details.
    pub fn new(code: WarningCode, message: impl Into<String>) -> Warning {
        Warning {
            code,
            count: None,
            message: message.into(),
            details: Vec::new(),
        }
    }

    /// With how many things it concerns.
    pub fn count(mut self, n: u64) -> Warning {
        self.count = Some(n);
        self
    }

    /// With details for `-v`.
    pub fn details(mut self, details: Vec<String>) -> Warning {
        self.details = details;
        self
    }

    /// The same warning about zone `zone` (its message begins `zone NAME:`).
    pub fn in_zone(mut self, zone: &str) -> Warning {
        self.message = format!("zone {zone}: {}", self.message);
        self
    }
}

/// "1 socket", "2 sockets": counts in warnings read as words.
pub fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_kebab_case_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for c in WarningCode::ALL {
            let n = c.name();
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{n}"
            );
            assert!(seen.insert(n), "{n} twice");
            assert_eq!(serde_json::to_string(c).unwrap(), format!("\"{n}\""));
        }
    }

    #[test]
    fn every_code_is_documented() {
        let doc = include_str!("../../../../doc/json-schema.md");
        for c in WarningCode::ALL {
            assert!(
                doc.contains(&format!("`{}`", c.name())),
                "doc/json-schema.md does not list the warning code {}",
                c.name()
            );
        }
    }
}
