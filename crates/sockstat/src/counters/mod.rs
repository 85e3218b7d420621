//! The kernel's TCP/IP counters (`/proc/net/snmp`, `/proc/net/netstat`, `/proc/net/snmp6`) as a
//! [`CounterSet`], their deltas over an interval, and what each well-known counter means.
//!
//! Pure: the files are read by `sys::counters`; this module pairs names with values
//! (always by name: kernels insert new names in the middle of a line, doc/reference/linux.md#counters),
//! subtracts, sorts and explains. It never reads the system and never prints.

use std::collections::BTreeMap;

use serde::Serialize;
use sockstat_wire::snmp;

use crate::model::{Warning, WarningCode};
use crate::zone::Zone;

mod glossary;

pub use glossary::{describe, Meaning, MEANINGS};

/// One counter's identity: its group (`Tcp`, `TcpExt`, `Ip6`, ...) and name (`ListenOverflows`).
///
/// snmp6 names carry their group as a prefix (`Ip6InReceives`); the prefix is split off so every
/// counter is written the same way, `Ip6.InReceives`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct CounterName {
    /// The group, as the file names it (`Tcp`, `TcpExt`, `IpExt`, `MPTcpExt`, `Ip6`, `Udp6`, ...).
    pub group: String,
    /// The counter within the group.
    pub name: String,
}

impl CounterName {
    /// A name from its parts.
    pub fn new(group: &str, name: &str) -> CounterName {
        CounterName {
            group: group.to_string(),
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for CounterName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.group, self.name)
    }
}

/// A counter file that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterParseError {
    /// Which file (`snmp`, `netstat`, `snmp6`).
    pub file: &'static str,
    /// What the decoder said.
    pub message: String,
}

impl std::fmt::Display for CounterParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot parse /proc/net/{}: {}", self.file, self.message)
    }
}

impl std::error::Error for CounterParseError {}

/// Every counter of one network namespace at one moment, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterSet {
    values: BTreeMap<CounterName, i64>,
}

impl CounterSet {
    /// Parses the three files' contents; a file that is absent (`None`: IPv6 disabled, a fake
    /// /proc) contributes nothing.
    pub fn parse(
        snmp_text: Option<&str>,
        netstat_text: Option<&str>,
        snmp6_text: Option<&str>,
    ) -> Result<CounterSet, CounterParseError> {
        let mut set = CounterSet::default();
        for (file, text) in [("snmp", snmp_text), ("netstat", netstat_text)] {
            let Some(text) = text else { continue };
            let parsed = snmp::parse_paired(text).map_err(|e| CounterParseError {
                file,
                message: e.to_string(),
            })?;
            for c in parsed {
                set.values
                    .insert(CounterName::new(c.group, c.name), c.value);
            }
        }
        if let Some(text) = snmp6_text {
            let parsed = snmp::parse_snmp6(text).map_err(|e| CounterParseError {
                file: "snmp6",
                message: e.to_string(),
            })?;
            for c in parsed {
                let name = c.name.strip_prefix(c.group).filter(|n| !n.is_empty());
                let name = name.unwrap_or(c.name);
                set.values.insert(CounterName::new(c.group, name), c.value);
            }
        }
        Ok(set)
    }

    /// A set from explicit values (tests, library users with their own source).
    pub fn from_values<'a>(
        values: impl IntoIterator<Item = (&'a str, &'a str, i64)>,
    ) -> CounterSet {
        CounterSet {
            values: values
                .into_iter()
                .map(|(g, n, v)| (CounterName::new(g, n), v))
                .collect(),
        }
    }

    /// One counter's value, if this kernel has it.
    pub fn get(&self, group: &str, name: &str) -> Option<i64> {
        // BTreeMap lookups need an owned key; the sets are small (~400 entries).
        self.values.get(&CounterName::new(group, name)).copied()
    }

    /// Every counter, sorted by group then name.
    pub fn iter(&self) -> impl Iterator<Item = (&CounterName, i64)> {
        self.values.iter().map(|(k, v)| (k, *v))
    }

    /// How many counters.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no counter was read.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// How one counter moved from `self` (earlier) to `later`; `None` when either lacks it.
    pub fn change(&self, later: &CounterSet, group: &str, name: &str) -> Option<Change> {
        let before = self.get(group, name)?;
        let after = later.get(group, name)?;
        Some(Change::between(
            before,
            after,
            describe(group, name).is_some_and(|m| m.gauge),
        ))
    }
}

/// How a counter moved over an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// It rose by this much (or, for a gauge such as `Tcp.CurrEstab`, changed by this much,
    /// possibly negative).
    Delta(i64),
    /// A counter went down: the namespace was recreated, the counter was reset or it wrapped.
    /// The delta is unknown.
    Reset {
        /// The earlier value.
        before: i64,
        /// The later value.
        after: i64,
    },
}

impl Change {
    /// The change from `before` to `after`. Counters only grow, so a decrease is a reset;
    /// gauges move both ways.
    pub fn between(before: i64, after: i64, gauge: bool) -> Change {
        if gauge || after >= before {
            Change::Delta(after.wrapping_sub(before))
        } else {
            Change::Reset { before, after }
        }
    }

    /// The delta when known.
    pub fn delta(self) -> Option<i64> {
        match self {
            Change::Delta(d) => Some(d),
            Change::Reset { .. } => None,
        }
    }
}

/// One line of a counters report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CounterRow {
    /// The zone (network namespace) the counter belongs to; present with `-z`/`-Z`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<Zone>,
    /// Group (`TcpExt`).
    pub group: String,
    /// Name (`ListenOverflows`).
    pub name: String,
    /// The value since boot (namespace creation); present when no interval was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// The change over the interval; `null` when the counter went down (see `reset`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<i64>,
    /// The counter went down during the interval (reset, wrapped, namespace recreated).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    /// One line for a person; `null` for counters the table does not know.
    pub meaning: Option<&'static str>,
    /// A rise of this counter signals trouble.
    pub trouble: bool,
}

impl CounterRow {
    /// The number shown: the delta, or the value.
    pub fn amount(&self) -> Option<i64> {
        self.delta.or(self.value)
    }
}

/// The counters report: rows sorted smallest first, the biggest movers last (as
/// doc/reference/cases.md#case-003-an-illumos-time-wait-review's DTrace aggregation prints them, so they sit just above the prompt).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CounterReport {
    /// The interval the deltas cover, seconds; `None` for values since boot.
    pub interval_s: Option<f64>,
    /// The rows shown.
    pub counters: Vec<CounterRow>,
    /// Rows left out because they were zero (shown with `--all`).
    pub hidden_zero: usize,
    /// What could not be read, and counters that went backwards.
    pub warnings: Vec<Warning>,
}

fn row(name: &CounterName, value: Option<i64>, change: Option<Change>) -> CounterRow {
    let meaning = describe(&name.group, &name.name);
    CounterRow {
        zone: None,
        group: name.group.clone(),
        name: name.name.clone(),
        value,
        delta: change.and_then(Change::delta),
        reset: matches!(change, Some(Change::Reset { .. })),
        meaning: meaning.map(|m| m.text),
        trouble: meaning.is_some_and(|m| m.trouble),
    }
}

fn finish(mut rows: Vec<CounterRow>, all: bool, interval_s: Option<f64>) -> CounterReport {
    let before = rows.len();
    if !all {
        rows.retain(|r| r.reset || r.amount() != Some(0));
    }
    let hidden_zero = before - rows.len();
    // Resets first (their size is unknown), then ascending; ties by name for a stable order.
    rows.sort_by(|a, b| {
        (!a.reset, a.amount(), &a.group, &a.name).cmp(&(!b.reset, b.amount(), &b.group, &b.name))
    });
    CounterReport {
        interval_s,
        counters: rows,
        hidden_zero,
        warnings: Vec::new(),
    }
}

/// Values since boot (or since the network namespace was created). Zero values are left out
/// unless `all`.
pub fn since_boot(set: &CounterSet, all: bool) -> CounterReport {
    let rows = set.iter().map(|(n, v)| row(n, Some(v), None)).collect();
    finish(rows, all, None)
}

/// Deltas from `before` to `after` over `interval_s` seconds. Zero deltas are left out unless
/// `all`. A counter that went down is kept with `reset` and reported in a warning; counters
/// present in only one set (a module loaded meanwhile) are left out.
pub fn deltas(
    before: &CounterSet,
    after: &CounterSet,
    interval_s: f64,
    all: bool,
) -> CounterReport {
    let mut rows = Vec::new();
    let mut resets = Vec::new();
    for (name, new) in after.iter() {
        let Some(old) = before.values.get(name).copied() else {
            continue;
        };
        let gauge = describe(&name.group, &name.name).is_some_and(|m| m.gauge);
        let change = Change::between(old, new, gauge);
        if let Change::Reset { before, after } = change {
            resets.push(format!("{name}: {before} -> {after}"));
        }
        rows.push(row(name, None, Some(change)));
    }
    let mut report = finish(rows, all, Some(interval_s));
    if !resets.is_empty() {
        report.warnings.push(Warning {
            code: WarningCode::CountersReset,
            count: Some(resets.len() as u64),
            message: format!(
                "{} counters went down during the interval (reset, wrapped, or the network \
                 namespace was recreated); their deltas are unknown and shown as 'reset'",
                resets.len()
            ),
            details: resets,
        });
    }
    report
}

/// One report from the reports of several zones (`-Z`): each zone's rows, in the order given
/// (each zone sorted as one report is: resets first, then smallest amount first), tagged with
/// their zone; warnings named after their zone; `hidden_zero` summed. The interval is the first
/// report's.
pub fn merge_zones(reports: Vec<(Zone, CounterReport)>) -> CounterReport {
    let mut out = CounterReport {
        interval_s: reports.first().and_then(|(_, r)| r.interval_s),
        counters: Vec::new(),
        hidden_zero: 0,
        warnings: Vec::new(),
    };
    for (zone, r) in reports {
        out.hidden_zero += r.hidden_zero;
        out.warnings
            .extend(r.warnings.into_iter().map(|w| w.in_zone(&zone.name)));
        out.counters.extend(r.counters.into_iter().map(|mut c| {
            c.zone = Some(zone.clone());
            c
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NETSTAT: &str = include_str!("../../../wire/tests/fixtures/proc/netstat");
    const SNMP: &str = include_str!("../../../wire/tests/fixtures/proc/snmp");
    const SNMP6: &str = include_str!("../../../wire/tests/fixtures/proc/snmp6");

    #[test]
    fn captured_files_parse_by_name() {
        let set = CounterSet::parse(Some(SNMP), Some(NETSTAT), Some(SNMP6)).unwrap();
        assert_eq!(set.get("Tcp", "ActiveOpens"), Some(5));
        assert_eq!(set.get("Tcp", "MaxConn"), Some(-1));
        assert_eq!(set.get("Tcp", "CurrEstab"), Some(10));
        assert_eq!(set.get("TcpExt", "TCPPureAcks"), Some(6));
        assert_eq!(set.get("TcpExt", "PAWSTimewait"), Some(0));
        assert_eq!(set.get("IpExt", "InOctets"), Some(1825));
        // snmp6 names lose their group prefix.
        assert_eq!(set.get("Ip6", "InReceives"), Some(3));
        assert!(set.get("Ip6", "Ip6InReceives").is_none());
        assert!(set.len() > 300, "{}", set.len());
    }

    #[test]
    fn a_name_inserted_mid_line_does_not_shift_the_others() {
        // 6.16 inserted PAWSOldAck and PAWSTimewait after PAWSEstab.
        let old = "TcpExt: TW PAWSEstab DelayedACKs ListenOverflows\nTcpExt: 1 2 3 4\n";
        let new = "TcpExt: TW PAWSEstab PAWSOldAck PAWSTimewait DelayedACKs ListenOverflows\n\
                   TcpExt: 1 2 70 80 3 4\n";
        for text in [old, new] {
            let set = CounterSet::parse(None, Some(text), None).unwrap();
            assert_eq!(set.get("TcpExt", "DelayedACKs"), Some(3));
            assert_eq!(set.get("TcpExt", "ListenOverflows"), Some(4));
        }
        let set = CounterSet::parse(None, Some(new), None).unwrap();
        assert_eq!(set.get("TcpExt", "PAWSTimewait"), Some(80));
    }

    #[test]
    fn a_malformed_file_is_an_error_naming_it() {
        let e = CounterSet::parse(Some("Tcp: A B\nTcp: 1\n"), None, None).unwrap_err();
        assert_eq!(e.file, "snmp");
        assert!(e.to_string().contains("/proc/net/snmp"), "{e}");
        let e = CounterSet::parse(None, None, Some("Ip6InReceives x\n")).unwrap_err();
        assert_eq!(e.file, "snmp6");
    }

    #[test]
    fn deltas_sort_smallest_first_and_hide_zeros() {
        let a = CounterSet::from_values([
            ("Tcp", "OutRsts", 10),
            ("Tcp", "InSegs", 100),
            ("TcpExt", "ListenOverflows", 0),
            ("Tcp", "AttemptFails", 5),
        ]);
        let b = CounterSet::from_values([
            ("Tcp", "OutRsts", 13),
            ("Tcp", "InSegs", 200),
            ("TcpExt", "ListenOverflows", 0),
            ("Tcp", "AttemptFails", 6),
        ]);
        let r = deltas(&a, &b, 2.0, false);
        let names: Vec<String> = r
            .counters
            .iter()
            .map(|c| format!("{}.{}={:?}", c.group, c.name, c.delta))
            .collect();
        assert_eq!(
            names,
            [
                "Tcp.AttemptFails=Some(1)",
                "Tcp.OutRsts=Some(3)",
                "Tcp.InSegs=Some(100)"
            ]
        );
        assert_eq!(r.hidden_zero, 1);
        assert!(r.counters[0].trouble && r.counters[0].meaning.is_some());
        assert!(!r.counters[2].trouble);
        let all = deltas(&a, &b, 2.0, true);
        assert_eq!(all.counters.len(), 4);
        assert_eq!(all.counters[0].name, "ListenOverflows");
        assert!(all.counters[0].trouble);
    }

    #[test]
    fn a_decrease_is_a_reset_not_a_huge_number() {
        let a = CounterSet::from_values([("Tcp", "OutRsts", 1000), ("Tcp", "CurrEstab", 50)]);
        let b = CounterSet::from_values([("Tcp", "OutRsts", 3), ("Tcp", "CurrEstab", 40)]);
        let r = deltas(&a, &b, 1.0, false);
        let rst = r.counters.iter().find(|c| c.name == "OutRsts").unwrap();
        assert!(rst.reset && rst.delta.is_none());
        // A gauge goes down without being reset.
        let est = r.counters.iter().find(|c| c.name == "CurrEstab").unwrap();
        assert_eq!(est.delta, Some(-10));
        assert!(!est.reset);
        assert_eq!(r.warnings.len(), 1);
        assert_eq!(r.warnings[0].code, WarningCode::CountersReset);
        assert_eq!(r.warnings[0].details, ["Tcp.OutRsts: 1000 -> 3"]);
        // Resets sort first.
        assert!(r.counters[0].reset);
        let json = serde_json::to_value(rst).unwrap();
        assert_eq!(json["reset"], true);
        assert!(json.get("delta").is_none());
    }

    #[test]
    fn values_at_the_extremes_do_not_overflow() {
        // u64 values above i64::MAX arrive as negative i64 from the parser.
        let a = CounterSet::from_values([("IpExt", "InOctets", i64::MAX)]);
        let b = CounterSet::from_values([("IpExt", "InOctets", i64::MIN)]);
        let r = deltas(&a, &b, 1.0, false);
        assert!(r.counters[0].reset);
        let c = Change::between(i64::MIN, i64::MAX, true);
        assert_eq!(c, Change::Delta(-1));
    }

    #[test]
    fn since_boot_keeps_values() {
        let set = CounterSet::parse(Some(SNMP), Some(NETSTAT), None).unwrap();
        let r = since_boot(&set, false);
        assert!(r.interval_s.is_none());
        assert!(r
            .counters
            .iter()
            .all(|c| c.value.is_some() && c.delta.is_none()));
        assert!(r.counters.iter().all(|c| c.value != Some(0)));
        // Levels count too: Tcp.RtoMax (120000 ms) is the biggest number in the capture.
        let last = r.counters.last().unwrap();
        assert_eq!((last.group.as_str(), last.name.as_str()), ("Tcp", "RtoMax"));
        // Tcp.MaxConn is -1: the smallest, first.
        assert_eq!(r.counters[0].name, "MaxConn");
    }

    #[test]
    fn every_counter_of_kernel_md_3_4_has_a_meaning() {
        for name in [
            "TW",
            "TWKilled",
            "TWRecycled",
            "PAWSEstab",
            "PAWSTimewait",
            "PAWSActive",
            "PAWSOldAck",
            "TCPACKSkippedTimeWait",
            "ListenOverflows",
            "ListenDrops",
            "TCPReqQFullDrop",
            "TCPReqQFullDoCookies",
            "SyncookiesSent",
            "TCPSynRetrans",
            "TCPTimeouts",
            "TCPAbortOnTimeout",
            "TCPToZeroWindowAdv",
            "TCPFromZeroWindowAdv",
            "TCPWantZeroWindowAdv",
            "TCPWinProbe",
            "TCPZeroWindowDrop",
            "TCPRcvQDrop",
            "PruneCalled",
            "RcvPruned",
            "OfoPruned",
            "TCPMemoryPressures",
            "TCPMemoryPressuresChrono",
            "TCPAbortOnMemory",
            "DelayedACKs",
            "DelayedACKLocked",
            "DelayedACKLost",
            "TCPTimeWaitOverflow",
        ] {
            assert!(describe("TcpExt", name).is_some(), "{name}");
        }
        for name in [
            "ListenOverflows",
            "ListenDrops",
            "TCPTimeouts",
            "TCPAbortOnTimeout",
            "PAWSEstab",
            "PAWSTimewait",
            "TCPZeroWindowDrop",
            "TCPRcvQDrop",
            "TCPMemoryPressures",
            "TCPTimeWaitOverflow",
            "TCPReqQFullDrop",
            "RcvPruned",
        ] {
            assert!(describe("TcpExt", name).unwrap().trouble, "{name}");
        }
        // No duplicate entries.
        for (i, a) in MEANINGS.iter().enumerate() {
            assert!(
                !MEANINGS[i + 1..]
                    .iter()
                    .any(|b| a.group == b.group && a.name == b.name),
                "{}.{} twice",
                a.group,
                a.name
            );
        }
    }

    #[test]
    fn zones_merge_in_order_with_their_names() {
        use crate::zone::ZoneKind;
        let zone = |name: &str, kind| Zone {
            name: name.into(),
            kind,
            netns_inode: Some(7),
            container_id: None,
            runtime: None,
            pod: None,
        };
        let a = CounterSet::from_values([("Tcp", "OutRsts", 10), ("Tcp", "InSegs", 5)]);
        let b = CounterSet::from_values([("Tcp", "OutRsts", 4), ("Tcp", "InSegs", 5)]);
        let host = deltas(&a, &a, 1.5, false);
        let web = deltas(&a, &b, 1.6, false);
        let m = merge_zones(vec![
            (zone("global", ZoneKind::Global), host),
            (zone("web", ZoneKind::Netns), web),
        ]);
        assert_eq!(m.interval_s, Some(1.5));
        assert_eq!(m.hidden_zero, 3);
        assert_eq!(m.counters.len(), 1);
        assert_eq!(m.counters[0].zone.as_ref().unwrap().name, "web");
        assert!(m.counters[0].reset);
        assert!(
            m.warnings[0].message.starts_with("zone web: "),
            "{:?}",
            m.warnings
        );
        let v = serde_json::to_value(&m.counters[0]).unwrap();
        assert_eq!(v["zone"]["name"], "web");
        assert_eq!(v["zone"]["kind"], "netns");
    }
}
