//! Subcommands: views other than the listing. Each lives in its own file and owns its flags;
//! `run` dispatches. They share the filters of `crate::cli::FilterArgs` where they make sense.

pub mod counters;

use crate::cli::Cli;

/// The subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Kernel TCP/IP counters as deltas over an interval, with their meanings.
    ///
    /// The counters of /proc/net/snmp, /proc/net/netstat and /proc/net/snmp6 (of the network
    /// namespace sockstat runs in), paired by name, each with a one-line meaning. With SECONDS:
    /// the deltas over that interval; without: the values since boot (or since the namespace was
    /// created). Sorted smallest first, so the biggest movers end just above the prompt. A '!'
    /// marks counters whose rise signals trouble (drops, overflows, timeouts, PAWS rejects). A
    /// counter that went down (reset, namespace recreated) is shown as 'reset', never as a huge
    /// number.
    Counters(counters::CountersArgs),
}

/// Runs a subcommand; returns the process exit status.
pub fn run(cmd: &Command, cli: &Cli) -> anyhow::Result<std::process::ExitCode> {
    match cmd {
        Command::Counters(a) => counters::run(a, cli),
    }
}
