//! Shared by the diagnose tests: running the binary and validating its JSON against
//! doc/diagnose.schema.json.
#![allow(dead_code)]

use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_sockstat");

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/doc/diagnose.schema.json");
        let text = std::fs::read_to_string(path).expect("doc/diagnose.schema.json");
        let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
        jsonschema::validator_for(&schema).expect("schema compiles")
    })
}

/// Asserts that a diagnose document matches doc/diagnose.schema.json.
pub fn validate(v: &Value) {
    let errors: Vec<String> = validator()
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "JSON does not match doc/diagnose.schema.json:\n{}\n{}",
        errors.join("\n"),
        serde_json::to_string_pretty(v).unwrap_or_default()
    );
}

/// Parses and validates the stdout of `sockstat diagnose --json`, checking the exit status
/// agrees with the findings (1 iff one is at warning level or above).
pub fn parse(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    validate(&v);
    let problems = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["severity"] != "info");
    assert_eq!(
        out.status.code(),
        Some(if problems { 1 } else { 0 }),
        "exit status vs findings: {v:#}"
    );
    v
}

/// Runs the binary with these arguments.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run sockstat")
}

/// The findings of one rule.
pub fn findings<'a>(v: &'a Value, rule: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == rule)
        .collect()
}
