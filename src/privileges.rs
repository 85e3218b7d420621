//! Dropping every Linux capability a long-running command does not use, once it has started.
//!
//! `sockstat serve` reads the holders of listening sockets from other users' `/proc/PID/fd`,
//! which takes exactly CAP_DAC_READ_SEARCH (to list the directory) and CAP_SYS_PTRACE (to read
//! its links); with `-Z` it also joins other network namespaces, which takes CAP_SYS_ADMIN.
//! doc/serve.md shows the measurements. Whatever else the process was started with
//! (all of root's capabilities, or a service manager's ambient set) is dropped from the
//! effective, permitted, inheritable and ambient sets, and from the bounding set when the
//! process may change it (CAP_SETPCAP), so that nothing it runs later, nor a bug in it, can use
//! them.
//!
//! Capabilities are per thread: [`keep_only`] must run before the process starts any thread,
//! and [`keep_in_this_thread`] narrows one thread further (the exporter's HTTP threads hold
//! none).
//!
//! It also draws the privilege boundary of the command line ([`check_inputs`]): when sockstat
//! runs with more privilege than its caller (file capabilities, setuid), an input that would
//! make it read or write a path the caller names with those privileges is refused, and the
//! files it still opens for the caller are opened with the caller's credentials
//! (`sockstat::privilege::as_caller`). SECURITY.md lists every input and what it does then.

use std::io;

use rustix::thread::{CapabilitySet, CapabilitySets};

/// What `sockstat serve` keeps: naming the processes that hold listening sockets.
pub const EXPORTER: CapabilitySet = CapabilitySet::DAC_READ_SEARCH.union(CapabilitySet::SYS_PTRACE);

/// What `sockstat serve -Z` keeps: [`EXPORTER`], and joining other network namespaces with
/// `setns`, which takes CAP_SYS_ADMIN (over the namespace's user namespace: the host's).
pub const EXPORTER_ZONES: CapabilitySet = EXPORTER.union(CapabilitySet::SYS_ADMIN);

/// What the BPF owner scan needs besides root's fd access: loading and running the iterator.
pub const BPF_SCAN: CapabilitySet = CapabilitySet::BPF.union(CapabilitySet::PERFMON);

/// The capabilities of this thread after [`keep_only`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// Effective and permitted: the wanted set, less what the process did not have.
    pub effective: CapabilitySet,
    /// Wanted capabilities the process did not have at start.
    pub missing: CapabilitySet,
    /// Capabilities dropped from the effective or permitted set.
    pub dropped: CapabilitySet,
}

/// The capability names of a set, `CAP_DAC_READ_SEARCH` style, in bit order.
pub fn names(set: CapabilitySet) -> Vec<String> {
    set.iter_names()
        .map(|(name, _)| format!("CAP_{name}"))
        .collect()
}

/// The highest capability number this kernel knows (`/proc/sys/kernel/cap_last_cap`).
fn last_cap() -> io::Result<u32> {
    let text = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::other(format!("cap_last_cap is '{}'", text.trim())))
}

/// Keeps `want` (where the process has it) and drops every other capability of the calling
/// thread, from all its sets; the bounding set too when CAP_SETPCAP allows it. Call it before
/// starting any thread: threads started later inherit the result.
pub fn keep_only(want: CapabilitySet) -> io::Result<Kept> {
    let before = rustix::thread::capabilities(None)?;
    let keep = before.permitted & want;
    // The bounding set needs CAP_SETPCAP, which the capset below removes: trim it first. It
    // only limits what an execve could regain, and the exporter never executes anything, so a
    // process without CAP_SETPCAP (a service started with just its ambient set) leaves it as the
    // service manager bounded it.
    if before.effective.contains(CapabilitySet::SETPCAP) {
        for n in 0..=last_cap()?.min(63) {
            let cap = CapabilitySet::from_bits_retain(1 << n);
            if !keep.contains(cap) && rustix::thread::capability_is_in_bounding_set(cap)? {
                rustix::thread::remove_capability_from_bounding_set(cap)?;
            }
        }
    }
    // The ambient set would survive an execve; it is emptied whatever it held (keep is still
    // in the permitted set).
    rustix::thread::clear_ambient_capability_set()?;
    keep_in_this_thread(keep)?;
    let after = rustix::thread::capabilities(None)?;
    if after.effective != keep || after.permitted != keep {
        return Err(io::Error::other(format!(
            "the kernel kept {:?} after dropping to {:?}",
            after.permitted, keep
        )));
    }
    Ok(Kept {
        effective: keep,
        missing: want - before.permitted,
        dropped: (before.effective | before.permitted) - keep,
    })
}

/// Keeps `want` (where this thread has it) in the calling thread's effective and permitted
/// sets and drops the rest, from this thread only (and the threads it starts later): the
/// process's other threads keep theirs. Returns what it kept.
pub fn keep_in_this_thread(want: CapabilitySet) -> io::Result<CapabilitySet> {
    let before = rustix::thread::capabilities(None)?;
    let keep = before.permitted & want;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: keep,
            permitted: keep,
            inheritable: CapabilitySet::empty(),
        },
    )?;
    Ok(keep)
}

/// How an input is treated when sockstat runs with more privilege than its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// Refused: one line saying why, exit status 2.
    Refused(&'static str),
    /// Taken, and its file opened with the caller's credentials only.
    AsCaller,
}

/// Every flag that names a file or directory, or that makes sockstat do with its privileges
/// something the capabilities it may be given are not for: (clap id, flag, treatment). A test
/// checks that every flag taking a FILE, DIR or PATH is here.
pub const INPUTS: [(&str, &str, Boundary); 6] = [
    (
        "proc_root",
        "--proc-root",
        Boundary::Refused("it would read the process tree you name with those privileges"),
    ),
    (
        "replay_netlink",
        "--replay-netlink",
        Boundary::Refused("it would read the directory you name with those privileges"),
    ),
    (
        "record_netlink",
        "--record-netlink",
        Boundary::Refused("it would write into the directory you name with those privileges"),
    ),
    (
        "exact_locks",
        "--exact-locks",
        Boundary::Refused(
            "it duplicates other processes' sockets (pidfd_getfd), which only root may ask for",
        ),
    ),
    ("web_config_file", "--web.config.file", Boundary::AsCaller),
    ("output", "--output", Boundary::AsCaller),
];

/// Refuses, when sockstat runs with more privilege than its caller (`AT_SECURE`: file
/// capabilities, setuid or setgid), the inputs of [`INPUTS`] marked refused and the library's
/// test hooks (`sockstat::privilege::TEST_HOOKS`). The error is the one line to print; the
/// command exits with status 2 (a usage error).
pub fn check_inputs() -> Result<(), String> {
    if !sockstat::privilege::secure_exec() {
        return Ok(());
    }
    let because = "sockstat runs with privileges you do not have (file capabilities or setuid)";
    for name in sockstat::privilege::TEST_HOOKS {
        if std::env::var_os(name).is_some() {
            return Err(format!(
                "{name} is refused: it is a test hook, and {because}; unset it (SECURITY.md)"
            ));
        }
    }
    use clap::CommandFactory as _;
    // Parsed again, as matches: they say which flags were given on the command line, at any
    // level of subcommands (main has parsed the same arguments already).
    // Arranged as `cli::parse_from` arranged them, so that the flags seen are the flags used; a
    // command line that does not parse here is refused rather than let through unchecked.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Ok(matches) = crate::cli::Cli::command().try_get_matches_from(crate::cli::arranged(&args))
    else {
        return Err(format!(
            "the command line could not be checked, and {because}; run it as root, or a copy \
             without the capabilities (SECURITY.md)"
        ));
    };
    let mut level = Some(&matches);
    while let Some(m) = level {
        for (id, flag, treatment) in INPUTS {
            let given = m.try_contains_id(id).unwrap_or(false)
                && m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
            if let (true, Boundary::Refused(why)) = (given, treatment) {
                return Err(format!(
                    "{flag} is refused: {because}, and {why}; run it as root, or a copy without \
                     the capabilities (SECURITY.md)"
                ));
            }
        }
        level = m.subcommand().map(|(_, sub)| sub);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag of every subcommand whose value names a file or directory is classified in
    /// INPUTS (a new one fails here until its treatment under file capabilities is decided),
    /// and every entry of INPUTS is a flag that exists.
    #[test]
    fn every_path_flag_is_classified() {
        use clap::CommandFactory as _;
        fn walk(c: &clap::Command, found: &mut Vec<(String, String)>) {
            for a in c.get_arguments() {
                let names = a.get_value_names().unwrap_or_default();
                let path = names
                    .iter()
                    .any(|n| matches!(n.as_str(), "FILE" | "DIR" | "PATH"))
                    || matches!(
                        a.get_value_hint(),
                        clap::ValueHint::AnyPath
                            | clap::ValueHint::FilePath
                            | clap::ValueHint::DirPath
                    );
                found.push((
                    a.get_id().to_string(),
                    if path { "path" } else { "" }.to_string(),
                ));
            }
            for sub in c.get_subcommands() {
                walk(sub, found);
            }
        }
        let mut found = Vec::new();
        walk(&crate::cli::Cli::command(), &mut found);
        for (id, kind) in &found {
            if kind == "path" {
                assert!(
                    INPUTS.iter().any(|(i, _, _)| i == id),
                    "--{id} names a path: classify it in privileges::INPUTS and SECURITY.md"
                );
            }
        }
        for (id, flag, _) in INPUTS {
            assert!(
                found.iter().any(|(i, _)| i == id),
                "{flag} ({id}) is in INPUTS but no such flag exists"
            );
        }
    }

    #[test]
    fn names_are_the_kernel_spelling() {
        assert_eq!(
            names(EXPORTER),
            vec![
                "CAP_DAC_READ_SEARCH".to_string(),
                "CAP_SYS_PTRACE".to_string()
            ]
        );
    }
}
