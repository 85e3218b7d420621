//! The diagnosis as text or JSON (`sockstat diagnose`), from a finished [`Report`]. No I/O other
//! than writing the output. Every string that may carry another process's bytes (command
//! names inside summaries and advice) is sanitized before it reaches a terminal.
//!
//! JSON (schema in doc/diagnose.schema.json, version 1):
//! `{"version":1,"interval_s":1.0,"connections":N,"findings":[...],"warnings":[...]}`, each
//! finding exactly as [`Finding`] serializes (one shape: the library's, documented in the
//! schema); `socket` is null for host findings and for findings about several connections.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use super::json::{warning, JsonWarning};
use super::Options;
use crate::diagnose::{Finding, Report, Severity};
use crate::text::sanitize::for_terminal;

/// The JSON schema version of the diagnose document.
pub const VERSION: u32 = 1;

/// One finding as its JSON object (with `"zone"` when zones were read): the library's own
/// serialization of [`Finding`].
pub fn finding_json(f: &Finding) -> Value {
    serde_json::to_value(f).unwrap_or(Value::Null)
}

/// The `sockstat diagnose --json` document (doc/diagnose.schema.json), declared once: the
/// command writes it ([`write_json`]) and Python's `diagnose()` builds its `DiagnoseReport`
/// from it.
#[derive(Serialize)]
pub struct Document<'a> {
    version: u32,
    interval_s: f64,
    connections: usize,
    findings: &'a [Finding],
    warnings: Vec<JsonWarning<'a>>,
}

/// The document of `r`; the warnings' details with `verbose`.
pub fn document(r: &Report, verbose: bool) -> Document<'_> {
    Document {
        version: VERSION,
        interval_s: r.interval_s,
        connections: r.connections,
        findings: &r.findings,
        warnings: r.warnings.iter().map(|w| warning(w, verbose)).collect(),
    }
}

/// Writes the report as one JSON document, on one line.
pub fn write_json(r: &Report, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &document(r, opts.verbose))?;
    out.write_all(b"\n")
}

pub(crate) fn severity_label(s: Severity, color: bool) -> String {
    let (text, code) = match s {
        Severity::Critical => ("CRITICAL", "1;31"),
        Severity::Warning => ("WARNING", "33"),
        Severity::Info => ("INFO", "36"),
    };
    if color {
        format!("\x1b[{code}m{text:<8}\x1b[0m")
    } else {
        format!("{text:<8}")
    }
}

fn clean(s: &str) -> String {
    for_terminal(s.as_bytes()).into_owned()
}

/// A finding's evidence as `name=value` pairs on one line, sanitized.
pub fn evidence_text(f: &Finding) -> String {
    f.evidence
        .0
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={}", clean(s)),
            Value::Array(a) => format!("{k}=[{} items]", a.len()),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes the report for people: one block per finding (severity, rule, connection, verdict,
/// evidence, fix), then a one-line total; a healthy host gets one line saying so.
pub fn write_text(r: &Report, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    for f in &r.findings {
        let target = match &f.socket {
            Some(s) => {
                let conn =
                    crate::text::fmt::connection_ends(&s.local, s.remote.as_ref()).to_string();
                let owners: Vec<String> = s
                    .owners
                    .iter()
                    .map(|o| {
                        format!(
                            "pid {} ({}) fd {}",
                            o.pid,
                            clean(o.command.as_deref().unwrap_or("?")),
                            o.fd
                        )
                    })
                    .collect();
                if owners.is_empty() {
                    conn
                } else {
                    format!("{conn}  {}", owners.join(", "))
                }
            }
            None => match f.count {
                Some(n) if n > 1 => format!("{n} connections"),
                _ => "host".into(),
            },
        };
        let target = match &f.zone {
            Some(z) => format!("[zone {}] {target}", clean(&z.name)),
            None => target,
        };
        writeln!(
            out,
            "{} {}  {}",
            severity_label(f.severity, opts.color),
            f.code,
            target
        )?;
        writeln!(out, "  {}", clean(&f.summary))?;
        writeln!(out, "  evidence: {}", evidence_text(f))?;
        writeln!(
            out,
            "  confidence: {}{}",
            f.confidence.level.name(),
            if f.confidence.because.is_empty() {
                String::new()
            } else {
                format!(" ({})", clean(&f.confidence.because.join("; ")))
            }
        )?;
        writeln!(out, "  fix: {}", clean(&f.advice))?;
        writeln!(out)?;
    }
    if r.findings.is_empty() {
        writeln!(
            out,
            "No problems found: {} TCP connections examined over {:.1} s.",
            r.connections, r.interval_s
        )?;
    } else {
        let count = |s| r.findings.iter().filter(|f| f.severity == s).count();
        let n = r.findings.len();
        writeln!(
            out,
            "{n} finding{} ({} critical, {} warning, {} info) in {} TCP connections over {:.1} s.",
            if n == 1 { "" } else { "s" },
            count(Severity::Critical),
            count(Severity::Warning),
            count(Severity::Info),
            r.connections,
            r.interval_s
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::{Confidence, Evidence, OwnerRef, RuleId, SocketRef};
    use crate::finding::Subject;
    use crate::model::{Endpoint, State};

    fn report() -> Report {
        let mut ev = Evidence::default();
        ev.int("sndbuf_bytes", 32768u64)
            .text("cause", "set-by-application");
        Report {
            findings: vec![Finding {
                zone: None,
                rule: Some(RuleId::SendBufferLimited),
                code: RuleId::SendBufferLimited.id(),
                subject: Subject::Namespace,
                severity: Severity::Critical,
                socket: Some(SocketRef {
                    id: Some(5),
                    cookie: Some(77),
                    state: State::Established,
                    local: Endpoint::Inet {
                        addr: "192.0.2.1".parse().unwrap(),
                        port: 40000,
                    },
                    remote: Some(Endpoint::Inet {
                        addr: "2001:db8::2".parse().unwrap(),
                        port: 5001,
                    }),
                    owners: vec![OwnerRef {
                        pid: 9,
                        fd: 3,
                        command: Some("evil\x1b[2J".into()),
                    }],
                }),
                summary: "slow (pid 9 evil\x1b[2J)".into(),
                evidence: ev,
                advice: "remove it".into(),
                count: Some(1),
                confidence: Confidence::counted("because \x1b[2J"),
            }],
            warnings: vec![],
            connections: 3,
            interval_s: 1.0,
        }
    }

    #[test]
    fn json_shape() {
        let mut out = vec![];
        write_json(&report(), &Options::new(), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["version"], 1);
        let f = &v["findings"][0];
        assert_eq!(f["rule"], "send-buffer-limited");
        assert_eq!(f["severity"], "critical");
        assert_eq!(f["socket"]["cookie"], "77");
        assert_eq!(f["socket"]["remote"]["address"], "2001:db8::2");
        assert_eq!(f["socket"]["owners"][0]["command"], "evil\u{1b}[2J");
        assert_eq!(f["evidence"]["sndbuf_bytes"], 32768);
        assert_eq!(f["count"], 1);
        assert_eq!(f["confidence"]["level"], "high");
        assert_eq!(f["confidence"]["because"][0], "because \u{1b}[2J");
        // One shape: what the library serializes is what is written.
        assert_eq!(*f, serde_json::to_value(&report().findings[0]).unwrap());
    }

    #[test]
    fn text_is_sanitized_and_counts() {
        let mut out = vec![];
        write_text(&report(), &Options::new(), &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(!t.contains('\x1b'), "{t:?}");
        assert!(
            t.starts_with("CRITICAL send-buffer-limited  192.0.2.1:40000 -> [2001:db8::2]:5001")
        );
        assert!(t.contains("1 finding (1 critical, 0 warning, 0 info) in 3 TCP connections"));
        let mut out = vec![];
        write_text(
            &Report {
                connections: 4,
                interval_s: 1.0,
                ..Report::default()
            },
            &Options::new(),
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "No problems found: 4 TCP connections examined over 1.0 s.\n"
        );
    }
}
