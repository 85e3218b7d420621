//! Integration tests of the `sockstat` command, run against real sockets: one test binary, so a
//! change links once. Each module is one subject (`cargo test --test it watch::` runs one).
//!
//! Sockets are opened by *sockholder* (crate `sockstat-testkit`). This test binary re-executes
//! itself in other roles, chosen by an environment variable that the ELF constructor below reads
//! before the test harness starts: a holder (`SOCKSTAT_TESTKIT_HOLDER`, see `common::Holder`), a
//! pid namespace's init (`hardening_churn`), the target of a locked memory map
//! (`hardening_stuck`). Other helpers re-run one test of this binary by name with `--exact`
//! (`ports_support::Netns::helper`, `zones`'s holders; see `common::test_path`). So a plain
//! `cargo test` builds everything the tests need, with no nested cargo and no path guessing.
//!
//! Tests that need root (network namespaces, other users) print a `SKIPPED:` line and return
//! when not run as root; so do tests whose tool is missing. `package_deb` runs only with
//! `SOCKSTAT_TEST_DEB=1`.

mod common;
// The diagnose tests' JSON validation, in its own directory as it always was.
#[path = "../diagnose_support/mod.rs"]
mod diagnose_support;
mod ports_support;

mod bad_input;
mod completeness;
mod counters;
mod diagnose_cli;
mod diagnose_live;
mod diagnose_matrix;
mod diagnose_zones;
mod docs;
mod events;
mod exit_status;
mod filter_equivalence;
mod filters;
mod hardening_churn;
mod hardening_faults;
mod hardening_privileges;
mod hardening_stuck;
mod hostile;
mod interface;
mod kill;
mod listing;
mod netns;
mod output;
mod owner_scan;
mod package_deb;
mod pipe;
mod ports;
mod privilege_boundary;
mod query_options;
mod replay;
mod rules;
mod serve;
mod serve_hostile;
mod serve_privileges;
mod serve_tls;
mod serve_zones;
mod service;
mod socket_kinds;
mod tcp_info;
mod top;
mod trace;
mod unprivileged;
mod waits;
mod watch;
mod zones;

#[used]
#[link_section = ".init_array"]
static ROLES_CTOR: extern "C" fn() = roles_ctor;

extern "C" fn roles_ctor() {
    hardening_churn::run_role_if_requested();
    hardening_stuck::run_role_if_requested();
    sockstat_testkit::holder::run_if_requested();
    events::workload_if_requested();
}
