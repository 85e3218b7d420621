#![no_main]
//! See `sockstat::sys::fuzz_proc_files`; the same function is replayed on the corpus by
//! crates/sockstat/tests/fuzz_corpus.rs on stable.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sockstat::sys::fuzz_proc_files(data);
});
