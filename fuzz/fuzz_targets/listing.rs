#![no_main]
//! See `sockstat::fuzzing::listing`; the same function is replayed on the corpus by
//! crates/sockstat/tests/fuzz_corpus.rs on stable.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = sockstat::fuzzing::listing(data);
});
