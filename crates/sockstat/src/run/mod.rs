//! The use cases (doc/architecture.md): each subcommand's work as one library function that
//! gathers (through `sys`), analyses (through the pure modules) and returns a report, for the
//! command, the Python binding and the exporter to render. Nothing below this floor imports it;
//! the renderers read the reports it returns.

pub mod diagnose;
pub mod drops;
pub mod events;
