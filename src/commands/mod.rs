//! Subcommands: views other than the listing. Each lives in its own file and owns its flags;
//! `run` dispatches. They share the filters of `crate::cli::FilterArgs` where they make sense.

use crate::cli::Cli;

/// The subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {}

/// Runs a subcommand; returns the process exit status.
pub fn run(cmd: &Command, _cli: &Cli) -> anyhow::Result<std::process::ExitCode> {
    match *cmd {}
}
