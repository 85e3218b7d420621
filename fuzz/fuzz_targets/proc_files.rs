#![no_main]
//! See `sockstat::fuzzing::proc_files`; the same function is replayed on the corpus by
//! crates/sockstat/tests/fuzz_corpus.rs on stable.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sockstat::fuzzing::proc_files(data);
});
