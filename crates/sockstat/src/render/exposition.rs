//! The Prometheus text exposition format's primitives (version 0.0.4): a family's HELP and
//! TYPE lines, and one sample with its escaped labels. Shared by the snapshot metrics
//! ([`super::metrics`]) and the event metrics ([`super::event_metrics`]).

use std::borrow::Cow;
use std::io::{self, Write};

/// Escapes a label value: `\` → `\\`, `"` → `\"`, newline → `\n` (the exposition format's three
/// escapes; everything else is taken literally, and the text is UTF-8 by construction).
pub fn escape_label(v: &str) -> Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len() + 8);
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A family's `# HELP` and `# TYPE` lines.
pub(crate) fn header(out: &mut impl Write, name: &str, kind: &str, help: &str) -> io::Result<()> {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} {kind}")
}

/// One sample: `name{labels} value`.
pub(crate) fn sample(
    out: &mut impl Write,
    name: &str,
    labels: &[(&str, &str)],
    value: impl std::fmt::Display,
) -> io::Result<()> {
    out.write_all(name.as_bytes())?;
    if !labels.is_empty() {
        out.write_all(b"{")?;
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{k}=\"{}\"", escape_label(v))?;
        }
        out.write_all(b"}")?;
    }
    writeln!(out, " {value}")
}
