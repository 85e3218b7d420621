//! Text helpers on the ground floor (doc/architecture.md): how numbers, endpoints and times are
//! spelled ([`fmt`]), how strings from other processes are made safe to print ([`sanitize`]),
//! and the `sockstat kill` command line a finding prints ([`kill_command`]). They read nothing
//! from the system and know nothing of the layers above, so every analysis and renderer may
//! use them.

pub mod fmt;
pub mod kill_command;
pub mod sanitize;
