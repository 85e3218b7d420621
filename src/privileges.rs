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
//! Capabilities are per thread: [`keep_only`] must run before the process starts any thread.

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
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: keep,
            permitted: keep,
            inheritable: CapabilitySet::empty(),
        },
    )?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
