//! Replays `fuzz/corpus/filters/` and `fuzz/regressions/filters/` through the body of the
//! `filters` cargo-fuzz target on stable, so its seeds and any crash it found stay fixed without
//! a nightly toolchain.

use std::path::PathBuf;

#[test]
fn replay_filters_corpus_and_regressions() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut n = 0;
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(kind).join("filters")) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let r = std::panic::catch_unwind(|| sockstat::query::fuzz_filters(&data));
            assert!(r.is_ok(), "{} panics", path.display());
            n += 1;
        }
    }
    assert!(n >= 10, "only {n} seeds for the filters fuzz target");
}

#[test]
fn filter_errors_are_one_escaped_line() {
    for bad in ["8\n0", "\u{1b}[31m80", "80\u{202e}"] {
        let e = sockstat::PortSet::parse(bad).unwrap_err().to_string();
        assert!(!e.chars().any(char::is_control), "{e:?}");
        assert!(!e.contains('\u{202e}'), "{e:?}");
    }
    let e = sockstat::PortSet::parse("8\n0").unwrap_err().to_string();
    assert!(
        e.contains(r"'8\n0'"),
        "the bad value is named, escaped: {e}"
    );
}
