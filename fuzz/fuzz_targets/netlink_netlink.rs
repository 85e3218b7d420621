#![no_main]
//! See `sockstat_wire::fuzzing::fuzz_netlink_netlink`; the same function is replayed on the corpus
//! by crates/wire/tests/fuzz_corpus.rs on stable.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sockstat_wire::fuzzing::fuzz_netlink_netlink(data);
});
