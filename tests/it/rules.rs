//! contrib/prometheus/sockstat.rules.yml: `promtool check rules` accepts it, `promtool test
//! rules` passes its unit tests (sockstat.rules.test.yml), every alert has a test in which it
//! fires and one in which it stays silent, every metric the rules read is one the exporter
//! serves (so renaming a metric cannot silently disable an alert), and every kernel counter they
//! read is one `serve -Z` writes for every zone (so the alert works in containers too).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_yaml_ng::Value;

use crate::serve::{get, serve, which};

const RULES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/contrib/prometheus/sockstat.rules.yml"
);
const TESTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/contrib/prometheus/sockstat.rules.test.yml"
);

fn yaml(path: &str) -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect(path)).expect(path)
}

/// Every rule of the rules file: (alert name, expression).
fn alerts() -> Vec<(String, String)> {
    let v = yaml(RULES);
    let mut out = Vec::new();
    for g in v["groups"].as_sequence().expect("groups") {
        for r in g["rules"].as_sequence().expect("rules") {
            out.push((
                r["alert"]
                    .as_str()
                    .expect("only alerting rules")
                    .to_string(),
                r["expr"].as_str().expect("expr").to_string(),
            ));
        }
    }
    out
}

#[test]
fn promtool_checks_the_rules_and_passes_their_unit_tests() {
    if !which("promtool") {
        eprintln!("SKIPPED: promtool not found (Debian package prometheus)");
        return;
    }
    for args in [["check", "rules", RULES], ["test", "rules", TESTS]] {
        let out = Command::new("promtool")
            .args(args)
            .output()
            .expect("promtool");
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn every_alert_has_a_case_that_fires_and_one_that_stays_silent() {
    let tests = yaml(TESTS);
    let mut fires: BTreeMap<String, usize> = BTreeMap::new();
    let mut silent: BTreeMap<String, usize> = BTreeMap::new();
    for t in tests["tests"].as_sequence().expect("tests") {
        for case in t["alert_rule_test"].as_sequence().expect("alert_rule_test") {
            let name = case["alertname"].as_str().expect("alertname").to_string();
            let expected = case["exp_alerts"].as_sequence().map_or(0, |s| s.len());
            let counter = if expected > 0 {
                &mut fires
            } else {
                &mut silent
            };
            *counter.entry(name).or_default() += 1;
        }
    }
    let names: BTreeSet<String> = alerts().into_iter().map(|(n, _)| n).collect();
    assert!(names.len() >= 8, "{names:?}");
    for name in &names {
        assert!(fires.contains_key(name), "no test where {name} fires");
        assert!(
            silent.contains_key(name),
            "no test where {name} stays silent"
        );
    }
    for name in fires.keys().chain(silent.keys()) {
        assert!(
            names.contains(name),
            "a test of {name}, which the rules do not define"
        );
    }
}

#[test]
fn the_rules_read_only_metrics_the_exporter_serves() {
    let server = serve();
    let _ = get(&server.addr, "/metrics").expect("first scrape");
    // The second scrape has the families that need two collections (findings).
    let body = get(&server.addr, "/metrics").expect("second scrape").body;
    let served: BTreeSet<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
        .collect();
    for (alert, expr) in alerts() {
        let used: BTreeSet<&str> = expr
            .match_indices("sockstat_")
            .map(|(i, _)| {
                let rest = &expr[i..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                &rest[..end]
            })
            .collect();
        assert!(!used.is_empty(), "{alert} reads no sockstat metric: {expr}");
        for m in used {
            assert!(
                served.contains(m),
                "{alert} reads {m}, which the exporter does not serve: {served:?}"
            );
        }
    }
}

#[test]
fn the_counters_the_rules_read_are_written_for_every_zone() {
    let per_zone = sockstat::render::metrics::ZONE_COUNTERS;
    let mut read = 0;
    for (alert, expr) in alerts() {
        // sockstat_kernel_trouble_total{group="G",name="N"} or name=~"A|B".
        for (i, _) in expr.match_indices("sockstat_kernel_trouble_total{") {
            let sel = &expr[i..];
            let sel = &sel[..sel.find('}').expect("selector end")];
            let value = |key: &str| -> Option<&str> {
                let at = sel.find(key)? + key.len();
                let rest = &sel[at..];
                Some(&rest[..rest.find('"')?])
            };
            let group = value("group=\"").expect("a group");
            let names = value("name=\"")
                .or_else(|| value("name=~\""))
                .expect("a name");
            for name in names.split('|') {
                assert!(
                    per_zone.contains(&(group, name)),
                    "{alert} reads {group}{name}, which serve -Z does not write for other zones"
                );
                read += 1;
            }
        }
    }
    assert!(read >= 4, "{read} counters read");
}
