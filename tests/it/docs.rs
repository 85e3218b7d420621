//! The documentation stays true to the tree: every relative link and anchor in the repository's
//! markdown resolves, and every `doc/...` file the code, the packaging, the man page and the
//! completions cite exists (with its anchor, where one is given). Offline and fast: it reads
//! files only. (`--help`, the man page and the completions are kept from drifting apart by
//! `src/generate.rs`'s tests.)

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Directories no document of ours lives in: build output, VCS data, fuzz inputs.
const SKIP_DIRS: &[&str] = &[
    "target",
    ".git",
    "corpus",
    "artifacts",
    "regressions",
    ".venv",
];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            if !SKIP_DIRS.contains(&name.as_ref()) && !name.starts_with('.') || name == ".ci" {
                walk(&p, out);
            }
        } else if ft.is_file() {
            out.push(p);
        }
    }
}

fn files() -> Vec<PathBuf> {
    let mut out = vec![];
    walk(Path::new(ROOT), &mut out);
    out.sort();
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(ROOT).unwrap_or(p).display().to_string()
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (but `-` and `_`), spaces
/// turned into `-`; a repeated heading gets `-1`, `-2`, ...
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors a markdown text defines: its headings' slugs and any `id`/`name` attributes.
fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for ev in Parser::new_ext(text, Options::all()) {
        match ev {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                out.insert(if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                });
                *n += 1;
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Html(h) | Event::InlineHtml(h) => {
                for attr in ["id=\"", "name=\""] {
                    let mut rest = h.as_ref();
                    while let Some(i) = rest.find(attr) {
                        rest = &rest[i + attr.len()..];
                        if let Some(end) = rest.find('"') {
                            out.insert(rest[..end].to_string());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Every link destination in a markdown text (inline, reference and image links), outside code.
fn links(text: &str) -> Vec<String> {
    Parser::new_ext(text, Options::all())
        .filter_map(|ev| match ev {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .collect()
}

/// Checks `path#anchor` seen from `from` (a markdown file or the repository root); `None` when
/// it resolves, else why not.
fn check(
    from_dir: &Path,
    target: &str,
    cache: &mut BTreeMap<PathBuf, HashSet<String>>,
) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        return None; // handled by the caller (same-file anchors)
    } else {
        from_dir.join(path)
    };
    if !file.exists() {
        return Some(format!("{} does not exist", rel(&file)));
    }
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if file.extension().is_some_and(|e| e == "md") {
        let set = cache
            .entry(file.clone())
            .or_insert_with(|| anchors(&std::fs::read_to_string(&file).unwrap_or_default()));
        if !set.contains(anchor) {
            return Some(format!("{} has no heading #{anchor}", rel(&file)));
        }
    }
    None
}

#[test]
fn every_relative_link_and_anchor_in_the_markdown_resolves() {
    let mut cache = BTreeMap::new();
    let mut broken = vec![];
    let mut checked = 0;
    for md in files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        let text = std::fs::read_to_string(&md).expect("markdown is UTF-8");
        let dir = md.parent().expect("a file has a directory");
        for dest in links(&text) {
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let why = if let Some(a) = dest.strip_prefix('#') {
                let set = cache.entry(md.clone()).or_insert_with(|| anchors(&text));
                (!set.contains(a)).then(|| format!("no heading #{a} in this file"))
            } else {
                check(dir, &dest, &mut cache)
            };
            if let Some(why) = why {
                broken.push(format!("{}: ({dest}): {why}", rel(&md)));
            }
        }
    }
    assert!(
        checked >= 100,
        "only {checked} relative links found: is the walk right?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// `doc/...` citations in one text: each `doc/PATH.md`, `.json` or `.1`, with its anchor, that is
/// not part of a longer path (`/usr/share/doc/...` is the package's, checked by `package_deb`).
fn citations(text: &str) -> Vec<String> {
    let mut out = vec![];
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find("doc/") {
        let at = from + i;
        from = at + 4;
        if at > 0 {
            let c = bytes[at - 1];
            if c.is_ascii_alphanumeric() || b"/_-.".contains(&c) {
                continue;
            }
        }
        let end = text[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-#".contains(c)))
            .map_or(text.len(), |n| at + n);
        let cited = text[at..end].trim_end_matches(['.', '-']);
        let path = cited.split('#').next().unwrap_or(cited);
        if [".md", ".json", ".1"].iter().any(|e| path.ends_with(e)) {
            out.push(cited.to_string());
        }
    }
    out
}

#[test]
fn every_doc_path_the_code_and_packaging_cite_exists() {
    let root = Path::new(ROOT);
    let mut cache = BTreeMap::new();
    let mut broken = vec![];
    let mut checked = 0;
    let cites_docs = |p: &Path| {
        let r = rel(p);
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        ([
            "rs", "py", "pyi", "toml", "sh", "service", "conf", "yml", "default", "1", "bash",
            "zsh", "fish",
        ]
        .contains(&ext)
            || r == ".ci/run")
            && !r.starts_with("tests/fixtures")
            // This file cites missing documents on purpose, to check the checker.
            && r != "tests/it/docs.rs"
    };
    for f in files().into_iter().filter(|p| cites_docs(p)) {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for cited in citations(&text) {
            checked += 1;
            if let Some(why) = check(root, &cited, &mut cache) {
                broken.push(format!("{}: {cited}: {why}", rel(&f)));
            }
        }
    }
    assert!(
        checked >= 100,
        "only {checked} doc/ citations found: is the scan right?"
    );
    assert!(
        broken.is_empty(),
        "stale doc/ citations:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_checkers_see_what_they_check() {
    // Anchors as GitHub makes them, duplicates numbered.
    let a = anchors("# A `b` c\n## Why? (R1) — x\n## Why? (R1) — x\n<a id=\"here\"></a>\n");
    for want in ["a-b-c", "why-r1--x", "why-r1--x-1", "here"] {
        assert!(a.contains(want), "{want} in {a:?}");
    }
    // Links outside code only.
    assert_eq!(
        links("[a](x.md#y) `[b](no.md)`\n\n```\n[c](no.md)\n```\n![i](p.svg)\n[r]\n\n[r]: z.md\n"),
        ["x.md#y", "p.svg", "z.md"]
    );
    // Citations, not parts of longer paths; trailing punctuation dropped.
    assert_eq!(
        citations("see doc/kill.md#results. /usr/share/doc/sockstat-rs/doc/serve.md `doc/sockstat.1` doc/...\n"),
        ["doc/kill.md#results", "doc/sockstat.1"]
    );
}

#[test]
fn a_missing_file_or_anchor_is_reported() {
    let mut cache = BTreeMap::new();
    let root = Path::new(ROOT);
    assert!(check(root, "doc/kill.md#results", &mut cache).is_none());
    assert!(check(root, "doc/no-such-guide.md", &mut cache).is_some());
    assert!(check(root, "doc/kill.md#no-such-heading", &mut cache).is_some());
}

/// What `--help` says `--no-owners` does to the listing is what it does: the process columns
/// are left out (a `?` in them would say "a holder exists that cannot be seen").
#[test]
fn no_owners_help_says_what_the_listing_does() {
    use crate::common::sockstat;
    let help = sockstat(&["--help"]).run().no_panic();
    let words = help.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("the listing leaves out its COMMAND, PID and FD columns"),
        "{words}"
    );
    // The header is printed with or without rows: one port keeps the dump small.
    let out = sockstat(&["--no-owners", "-s", "-4", "-p", "1"])
        .run()
        .no_panic();
    assert_eq!(out.code, Some(0), "{out:#?}");
    let header = out.stdout.lines().next().unwrap_or_default();
    assert!(header.starts_with("USER PROTO"), "{header:?}");
    for col in ["COMMAND", "PID", "FD"] {
        assert!(!header.split_whitespace().any(|c| c == col), "{header:?}");
    }
}
