//! The library's floors (doc/architecture.md) hold: every module imports only from its own
//! floor or the floors it stands on, and no two modules import each other in a circle.
//!
//! Read from the source as text: every `crate::…` path outside comments and test modules,
//! resolved to the module it names (a name the crate root re-exports resolves to the module it
//! comes from). `FLOORS_SRC=DIR cargo test -p sockstat --test floors -- --nocapture` counts
//! another tree's imports (an older commit's `crates/sockstat/src`) against the same table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, from the ground up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Floor {
    /// Data and pure helpers: the model, the selection, counters and samples as data, text
    /// formatting, the kill command a finding prints, the parallel helpers, the error type.
    Ground,
    /// Pure analyses that read nothing from the system.
    Analysis,
    /// Gathering from the kernel and /proc, and the probes: decides nothing.
    Gathering,
    /// The use cases: gather, analyse, return a report.
    UseCase,
    /// Renderers over models and reports.
    Render,
    /// The crate's face (lib.rs) and its hidden fuzzing entry points.
    Face,
}

use Floor::*;

/// Each module (a path below `crate`) and its floor; a file belongs to the longest entry that
/// names its module or one of its parents. The one table of the floors.
const FLOORS: &[(&str, Floor)] = &[
    ("model", Ground),
    ("finding", Ground),
    ("zone", Ground),
    ("privilege", Ground),
    ("error", Ground),
    ("query", Ground),
    ("sysctl", Ground),
    ("counters", Ground),
    ("sample", Ground),
    ("text", Ground),
    ("parallel", Ground),
    ("join", Analysis),
    ("ports", Analysis),
    ("diagnose", Analysis),
    ("events", Analysis),
    ("trace", Analysis),
    ("top", Analysis),
    ("order", Analysis),
    ("sys", Gathering),
    ("run", UseCase),
    ("kill", UseCase),
    ("render", Render),
    ("lib", Face),
    ("fuzzing", Face),
];

/// What a floor may import besides itself.
fn may_import(from: Floor, to: Floor) -> bool {
    from == to
        || match from {
            Ground => false,
            Analysis => to == Ground,
            Gathering => matches!(to, Ground | Analysis),
            UseCase => matches!(to, Ground | Analysis | Gathering),
            // Renderers read models and reports, never the system.
            Render => matches!(to, Ground | Analysis | UseCase),
            Face => true,
        }
}

fn src_dir() -> PathBuf {
    match std::env::var_os("FLOORS_SRC") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
    }
}

/// Every `.rs` file below `dir`, with its module path (`sys::dump`, `lib`, `render`).
fn files(dir: &Path, prefix: &[String], out: &mut Vec<(PathBuf, Vec<String>)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    // A file the module above declares only under `#[cfg(test)]` is a test module: it may
    // reach any floor to check what it tests, as the inline test modules `code` skips do.
    let parent_text = |dir: &Path| {
        ["mod.rs", "lib.rs"]
            .iter()
            .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
            .collect::<String>()
    };
    let declared = parent_text(dir);
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            let mut next = prefix.to_vec();
            next.push(name);
            files(&p, &next, out);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if declared.contains(&format!("#[cfg(test)]\nmod {stem};")) {
                continue;
            }
            let mut module = prefix.to_vec();
            if stem != "mod" && !(prefix.is_empty() && stem == "lib") {
                module.push(stem.to_string());
            }
            if module.is_empty() {
                module.push("lib".into());
            }
            out.push((p, module));
        }
    }
}

/// The code of a file without comments and without its test modules (from a
/// `#[cfg(test)]` that opens a module to the end of the file, where they stand).
fn code(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut cfg_test = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let opens_module = (t.starts_with("mod ") || t.contains(" mod ")) && t.ends_with('{');
        if cfg_test && opens_module {
            break;
        }
        cfg_test = t.starts_with("#[cfg(test)]");
        let code = match t.find("//") {
            Some(k) => &t[..k],
            None => t,
        };
        lines.push((i + 1, code.to_string()));
    }
    lines
}

/// The module paths a line names: `crate::a::b::C`, and each branch of `crate::a::{b, c::D}`.
fn paths(line: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(k) = rest.find("crate::") {
        let before = rest[..k].chars().last();
        rest = &rest[k + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `sockstat_crate::`, `other_crate::`
        }
        let mut head = Vec::new();
        let mut s = rest;
        loop {
            let n = s
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(s.len());
            if n == 0 {
                break;
            }
            head.push(s[..n].to_string());
            s = &s[n..];
            if let Some(t) = s.strip_prefix("::") {
                s = t;
            } else {
                break;
            }
        }
        if let Some(group) = s.strip_prefix('{') {
            // One level of braces: `crate::a::{b, c::D}` names `a::b` and `a::c::D`.
            let inner = group.split('}').next().unwrap_or("");
            for branch in inner.split(',') {
                let mut p = head.clone();
                p.extend(
                    branch
                        .trim()
                        .split("::")
                        .map(|w| w.split_whitespace().next().unwrap_or("").to_string())
                        .filter(|w| !w.is_empty() && w != "self"),
                );
                found.push(p);
            }
        } else if !head.is_empty() {
            found.push(head);
        }
    }
    found
}

/// The names the crate root re-exports (`pub use a::b::{X, Y}`), with the module they come
/// from.
fn root_exports(lib: &str) -> BTreeMap<String, Vec<String>> {
    let mut map = BTreeMap::new();
    let mut statement = String::new();
    for (_, line) in code(lib) {
        if statement.is_empty() && !line.starts_with("pub use ") {
            continue;
        }
        statement.push_str(&line);
        if !line.contains(';') {
            continue;
        }
        let body = statement
            .trim_start_matches("pub use ")
            .trim_end_matches(';')
            .replace(' ', "");
        statement.clear();
        let (base, names) = match body.split_once("::{") {
            Some((b, n)) => (b.to_string(), n.trim_end_matches('}').to_string()),
            None => match body.rsplit_once("::") {
                Some((b, n)) => (b.to_string(), n.to_string()),
                None => continue,
            },
        };
        let module: Vec<String> = base.split("::").map(str::to_string).collect();
        for n in names.split(',').filter(|n| !n.is_empty()) {
            map.insert(n.to_string(), module.clone());
        }
    }
    map
}

/// The table entry a module path falls under: the longest that is a prefix of it.
fn entry(module: &[String]) -> Option<(&'static str, Floor)> {
    FLOORS
        .iter()
        .filter(|(name, _)| {
            let parts: Vec<&str> = name.split("::").collect();
            parts.len() <= module.len() && parts.iter().zip(module).all(|(a, b)| a == b)
        })
        .max_by_key(|(name, _)| name.len())
        .copied()
}

struct Import {
    file: String,
    line: usize,
    from: (&'static str, Floor),
    to: (&'static str, Floor),
    path: String,
}

/// Every import between two table entries, each (file, entry imported) once.
fn imports() -> (Vec<Import>, Vec<String>) {
    let src = src_dir();
    let mut all = Vec::new();
    files(&src, &[], &mut all);
    let exports = root_exports(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut found = Vec::new();
    let mut unplaced = Vec::new();
    for (path, module) in &all {
        let rel = path.strip_prefix(&src).unwrap().display().to_string();
        let Some(from) = entry(module) else {
            unplaced.push(rel);
            continue;
        };
        let text = std::fs::read_to_string(path).unwrap();
        let mut seen = BTreeSet::new();
        for (line, c) in code(&text) {
            for p in paths(&c) {
                // A name the root re-exports is its module's; any other name that is no
                // module of the table is defined in lib.rs itself.
                let target = match p.first() {
                    Some(n) if exports.contains_key(n) => exports[n].clone(),
                    Some(n) if FLOORS.iter().any(|(f, _)| f.split("::").next() == Some(n)) => {
                        p.clone()
                    }
                    _ => vec!["lib".to_string()],
                };
                let Some(to) = entry(&target) else {
                    unplaced.push(format!("{rel}:{line}: crate::{}", p.join("::")));
                    continue;
                };
                if to.0 == from.0 || !seen.insert(to.0) {
                    continue;
                }
                found.push(Import {
                    file: rel.clone(),
                    line,
                    from,
                    to,
                    path: p.join("::"),
                });
            }
        }
    }
    (found, unplaced)
}

/// Circles among the table's entries (each as the entries on it).
fn circles(imports: &[Import]) -> Vec<Vec<&'static str>> {
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for i in imports {
        edges.entry(i.from.0).or_default().insert(i.to.0);
    }
    // Tarjan's strongly connected components.
    struct State<'a> {
        edges: &'a BTreeMap<&'static str, BTreeSet<&'static str>>,
        index: BTreeMap<&'static str, usize>,
        low: BTreeMap<&'static str, usize>,
        stack: Vec<&'static str>,
        on_stack: BTreeSet<&'static str>,
        out: Vec<Vec<&'static str>>,
    }
    fn visit(s: &mut State<'_>, v: &'static str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let next: Vec<&'static str> = s
            .edges
            .get(v)
            .map(|e| e.iter().copied().collect())
            .unwrap_or_default();
        for w in next {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let edges_static: BTreeMap<&'static str, BTreeSet<&'static str>> = edges
        .into_iter()
        .map(|(k, v)| (entry_name(k), v.into_iter().map(entry_name).collect()))
        .collect();
    let mut s = State {
        edges: &edges_static,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    let nodes: Vec<&'static str> = FLOORS.iter().map(|(n, _)| *n).collect();
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn entry_name(name: &str) -> &'static str {
    FLOORS.iter().find(|(n, _)| *n == name).unwrap().0
}

#[test]
fn every_module_imports_only_its_own_floor_and_the_floors_below() {
    let (imports, unplaced) = imports();
    let upward: Vec<&Import> = imports
        .iter()
        .filter(|i| !may_import(i.from.1, i.to.1))
        .collect();
    let circles = circles(&imports);
    println!(
        "{} imports between modules, {} upward, {} circles",
        imports.len(),
        upward.len(),
        circles.len()
    );
    for i in &upward {
        println!(
            "upward: {}:{} ({}, {:?}) imports crate::{} ({}, {:?})",
            i.file, i.line, i.from.0, i.from.1, i.path, i.to.0, i.to.1
        );
    }
    for c in &circles {
        println!("circle: {}", c.join(" <-> "));
    }
    assert!(
        unplaced.is_empty(),
        "files or imports the floors table does not place (add them to FLOORS): {unplaced:#?}"
    );
    assert!(
        upward.is_empty(),
        "{} imports run up a floor (see the lines above; doc/architecture.md says what each \
         floor may import)",
        upward.len()
    );
    assert!(circles.is_empty(), "modules import each other: {circles:?}");
}

#[test]
fn the_reader_resolves_paths_groups_and_root_exports() {
    assert_eq!(
        paths("use crate::model::{Endpoint, tcp::Memory, self};"),
        vec![
            vec!["model".to_string(), "Endpoint".into()],
            vec!["model".to_string(), "tcp".into(), "Memory".into()],
            vec!["model".to_string()],
        ]
    );
    assert_eq!(
        paths("let n = crate::sys::cores(); other_crate::x();"),
        vec![vec!["sys".to_string(), "cores".into()]]
    );
    let exports =
        root_exports("pub use error::{Error, ErrorKind};\npub use sys::sampler::Sampler;\n");
    assert_eq!(exports["ErrorKind"], vec!["error".to_string()]);
    assert_eq!(
        exports["Sampler"],
        vec!["sys".to_string(), "sampler".into()]
    );
    assert_eq!(entry(&["sys".into(), "dump".into()]).unwrap().1, Gathering);
    assert_eq!(entry(&["text".into(), "fmt".into()]).unwrap().1, Ground);
    assert!(!may_import(Analysis, Render));
    assert!(!may_import(Render, Gathering));
    assert!(may_import(UseCase, Gathering));
    let comment = code(
        "// crate::render::fmt\n#[cfg(test)]\nmod testutil;\nuse crate::zone;\n#[cfg(test)]\nmod tests {\n use crate::sys;\n}\n",
    );
    assert!(
        comment.iter().any(|(_, l)| l.contains("crate::zone")),
        "{comment:?}"
    );
    assert!(
        comment
            .iter()
            .all(|(_, l)| !l.contains("crate::render") && !l.contains("crate::sys")),
        "{comment:?}"
    );
}
