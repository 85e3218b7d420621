#![no_main]
//! See `sockstat::query::fuzz_filters`; the same function is replayed on the corpus by
//! crates/sockstat/tests/fuzz_filters.rs on stable.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sockstat::query::fuzz_filters(data);
});
