//! Integration tests of the `sockstat` command, run against real sockets.
//!
//! Sockets are opened by *sockholder* (crate `sockstat-testkit`). This test binary re-executes
//! itself as a holder: when `SOCKSTAT_TESTKIT_HOLDER` is set, the ELF constructor below turns the
//! process into a holder before the test harness starts (see `common::Holder`). So a plain
//! `cargo test` builds everything the tests need, with no nested cargo and no path guessing.
//!
//! Tests that need root (network namespaces, other users) print a `SKIPPED:` line and return
//! when not run as root.

mod common;

mod bad_input;
mod filters;
mod hostile;
mod kill;
mod listing;
mod netns;
mod output;
mod owner_scan;
mod pipe;
mod replay;
mod unprivileged;

#[used]
#[link_section = ".init_array"]
static HOLDER_CTOR: extern "C" fn() = holder_ctor;

extern "C" fn holder_ctor() {
    sockstat_testkit::holder::run_if_requested();
}
