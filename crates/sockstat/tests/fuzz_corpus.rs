//! Replays `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` through the bodies of the
//! cargo-fuzz targets that fuzz this crate (`filters`, `proc_files`, `listing`) on stable, so
//! their seeds and any crash they found stay fixed without a nightly toolchain.

use std::path::PathBuf;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 3] = [
    ("filters", sockstat::query::fuzz_filters),
    ("proc_files", sockstat::fuzzing::proc_files),
    ("listing", |d| {
        sockstat::fuzzing::listing(d);
    }),
];

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

#[test]
fn replay_corpus_and_regressions() {
    for (name, f) in TARGETS {
        let n = sockstat_wire::fuzzing::replay(&fuzz_dir(), name, f);
        assert!(n >= 10, "only {n} seeds for the {name} fuzz target");
        let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml lacks [[bin]] {name}"
        );
    }
}

/// The `listing` seeds are real dumps: each lists sockets (a body that decoded nothing would
/// fuzz nothing past the framing).
#[test]
fn listing_seeds_list_sockets() {
    let dir = fuzz_dir().join("corpus/listing");
    let mut seeds = 0;
    for name in [
        "tcp4-00",
        "tcp4-ff",
        "tcp6-ff",
        "udp4-ff",
        "unix-ff",
        "packet-ff",
    ] {
        let data = std::fs::read(dir.join(name)).unwrap();
        assert!(
            sockstat::fuzzing::listing(&data) > 0,
            "{name} lists nothing"
        );
        seeds += 1;
    }
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with("live-") {
            let data = std::fs::read(e.path()).unwrap();
            assert!(sockstat::fuzzing::listing(&data) > 0, "{:?}", e.file_name());
            seeds += 1;
        }
    }
    assert!(seeds >= 12);
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
