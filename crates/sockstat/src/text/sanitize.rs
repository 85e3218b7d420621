//! Making strings that came from other processes (command names, arguments, unix socket paths)
//! safe to print on a terminal: a process must not be able to move the cursor, recolour the
//! screen, reorder text with bidirectional controls or hide characters from the admin who
//! inspects it.
//!
//! Escapes are unambiguous: a backslash is doubled, so `\x1b` in the output always means the
//! byte 0x1b was there.

use std::borrow::Cow;
use std::fmt::Write;

use crate::model::RawString;

/// True for characters that must never reach a terminal raw: C0 and C1 controls, DEL, and the
/// invisible format characters that change how surrounding text is displayed (bidi embeddings,
/// overrides and isolates, zero-width characters, the BOM).
fn is_dangerous(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// True when `s` holds no character that [`for_terminal`] would escape other than `\\` (text
/// that was escaped already, or never needed it).
pub fn is_printable(s: &str) -> bool {
    !s.chars().any(is_dangerous)
}

/// Escapes `bytes` for display: invalid UTF-8 as `\xNN`, control and format characters as
/// `\n`, `\t`, `\xNN` or `\u{NNNN}`, and `\` as `\\`. Returns the input unchanged (borrowed) when
/// nothing needs escaping.
pub fn for_terminal(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        if !s.chars().any(|c| c == '\\' || is_dangerous(c)) {
            return Cow::Borrowed(s);
        }
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if (c as u32) < 0x80 && is_dangerous(c) => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c if is_dangerous(c) => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out)
}

/// The text as the listing shows it ([`for_terminal`]): UTF-8 as it is, invalid bytes as
/// `\xNN`, control and format characters escaped, `\` doubled. Safe to print on a terminal;
/// [`RawString::to_string_lossy`] gives the text with U+FFFD instead, and
/// [`RawString::as_bytes`] the bytes.
impl std::fmt::Display for RawString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&for_terminal(self.as_bytes()))
    }
}

/// The zone's name as the ZONE column shows it (escaped as [`for_terminal`] escapes: a container
/// or pod name is chosen by whoever made it).
impl std::fmt::Display for crate::zone::Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&for_terminal(self.name.as_bytes()))
    }
}

/// Neutralizes a CSV cell that a spreadsheet would run as a formula (leading `=`, `+`, `-`, `@`,
/// tab or carriage return; OWASP "CSV injection") by prefixing a single quote.
pub fn for_csv_cell(cell: &str) -> Cow<'_, str> {
    match cell.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') => Cow::Owned(format!("'{cell}")),
        _ => Cow::Borrowed(cell),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(for_terminal(b"nginx"), Cow::Borrowed("nginx")));
        assert!(matches!(for_terminal("日本".as_bytes()), Cow::Borrowed(_)));
    }

    #[test]
    fn escapes_reach_the_terminal_escaped() {
        assert_eq!(for_terminal(b"a\x1b[31mred"), "a\\x1b[31mred");
        assert_eq!(for_terminal(b"two\nlines"), "two\\nlines");
        assert_eq!(for_terminal(b"del\x7f"), "del\\x7f");
        assert_eq!(
            for_terminal("\u{202e}gnp.exe".as_bytes()),
            "\\u{202e}gnp.exe"
        );
        assert_eq!(for_terminal("c1\u{9b}".as_bytes()), "c1\\u{9b}");
        assert_eq!(for_terminal("zw\u{200b}j".as_bytes()), "zw\\u{200b}j");
    }

    #[test]
    fn invalid_utf8_and_backslash_are_unambiguous() {
        assert_eq!(for_terminal(b"bad\xff\xfe"), "bad\\xff\\xfe");
        assert_eq!(for_terminal(b"lit\\x1b"), "lit\\\\x1b");
        assert_ne!(for_terminal(b"lit\\x1b"), for_terminal(b"lit\x1b"));
    }

    #[test]
    fn display_of_a_raw_string_is_the_tables_escaping() {
        for raw in [
            &b"nginx"[..],
            b"a\x1b[31mred",
            b"bad\xff\xfe",
            b"lit\\x1b",
            "\u{202e}gnp.exe".as_bytes(),
        ] {
            assert_eq!(RawString::new(raw).to_string(), for_terminal(raw));
        }
        assert_eq!(RawString::new(b"x\ny\xff").to_string(), "x\\ny\\xff");
    }

    #[test]
    fn unix_names_endpoints_and_zones_display_escaped() {
        use crate::model::{Endpoint, UnixName};
        let path = UnixName::Path(RawString::new(b"/run/a\x1bb.sock"));
        assert_eq!(path.to_string(), "/run/a\\x1bb.sock");
        let abs = UnixName::Abstract(RawString::new(b"bus\xff"));
        assert_eq!(abs.to_string(), "@bus\\xff");
        assert_eq!(Endpoint::Unix(Some(abs)).to_string(), "@bus\\xff");
        assert_eq!(Endpoint::Unix(None).to_string(), "*");
        let v6 = Endpoint::Inet {
            addr: "2001:db8::1".parse().unwrap(),
            port: 443,
        };
        assert_eq!(v6.to_string(), "[2001:db8::1]:443");
        let any = Endpoint::Inet {
            addr: "0.0.0.0".parse().unwrap(),
            port: 22,
        };
        assert_eq!(any.to_string(), "*:22");
        let zone = crate::zone::Zone {
            name: "web\u{202e}1".into(),
            kind: crate::zone::ZoneKind::Docker,
            netns_inode: None,
            container_id: None,
            runtime: None,
            pod: None,
        };
        assert_eq!(zone.to_string(), "web\\u{202e}1");
    }

    #[test]
    fn csv_formulas_are_neutralized() {
        assert_eq!(for_csv_cell("=1+1"), "'=1+1");
        assert_eq!(for_csv_cell("+x"), "'+x");
        assert_eq!(for_csv_cell("-x"), "'-x");
        assert_eq!(for_csv_cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(for_csv_cell("nginx"), "nginx");
    }
}
