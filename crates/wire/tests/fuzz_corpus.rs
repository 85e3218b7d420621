//! Replays every file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` through the
//! same function the cargo-fuzz target calls (`sockstat_wire::fuzzing`), on stable, so the
//! seeds and every crash ever found stay fixed without a nightly toolchain.

use std::path::PathBuf;

use sockstat_wire::fuzzing::TARGETS;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

#[test]
fn replay_corpus_and_regressions() {
    let mut total = 0;
    for (name, f) in TARGETS {
        let n = sockstat_wire::fuzzing::replay(&fuzz_dir(), name, *f);
        assert!(n > 0, "no seeds for fuzz target {name}");
        total += n;
    }
    eprintln!("replayed {total} fuzz inputs");
}

#[test]
fn every_target_has_a_cargo_fuzz_binary() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    for (name, _) in TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml lacks [[bin]] {name}"
        );
        assert!(fuzz_dir().join(format!("fuzz_targets/{name}.rs")).exists());
    }
}

#[test]
fn prefixes_of_every_seed() {
    for (name, f) in TARGETS {
        let dir = fuzz_dir().join("corpus").join(name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let data = std::fs::read(e.unwrap().path()).unwrap();
            // Step so that large seeds stay quick; small ones get every prefix.
            let step = (data.len() / 512).max(1);
            for n in (0..=data.len()).step_by(step) {
                f(&data[..n]);
            }
        }
    }
}
