//! The privilege boundary: whether this process runs with more privilege than whoever started
//! it, and doing work with that person's credentials only.
//!
//! sockstat is meant to be given capabilities (`setcap cap_sys_ptrace,cap_dac_read_search+ep`)
//! that let it read every process's `/proc/PID/fd`. Those capabilities are for the owner scan;
//! a file the caller names, or a file outside `/proc` the caller could not read, must never be
//! opened with them. The kernel says when a program runs with more than its caller had: it
//! sets `AT_SECURE` in the auxiliary vector for file capabilities and setuid or setgid bits
//! (not for root, nor for a service manager's ambient capabilities, where the caller already
//! had them). [`secure_exec`] reads it; [`as_caller`] runs work on a thread holding only the
//! caller's credentials; `test_hook` reads a test seam's variable only when that seam cannot
//! reach more than the caller could.
//!
//! This module only reads the process's state and changes the credentials of threads it starts
//! itself; the caller's thread and the rest of the process keep theirs.

use std::io;

/// Environment variables that change what the library does, for tests only. They are read
/// through `test_hook`, which ignores them in a process that runs with more privilege than
/// its caller; a command may refuse them outright (`sockstat` does).
pub const TEST_HOOKS: [&str; 1] = ["SOCKSTAT_TEST_PAUSE_AFTER_ITERATOR_MS"];

/// Whether this thread holds what reading every process's fd table takes: CAP_SYS_PTRACE and
/// CAP_DAC_READ_SEARCH in its effective set (root has them, unless a container dropped them;
/// `setcap` gives them to the command). A process it then still cannot read is kept from it by
/// something no privilege of sockstat's changes (Yama, a security module, a user namespace
/// boundary), and the warnings say that instead of asking for privileges it has.
pub fn reads_every_fd_table() -> bool {
    rustix::thread::capabilities(None).is_ok_and(|c| {
        c.effective.contains(
            rustix::thread::CapabilitySet::SYS_PTRACE
                | rustix::thread::CapabilitySet::DAC_READ_SEARCH,
        )
    })
}

/// True when this process runs with privileges its caller did not have: the kernel set
/// `AT_SECURE` at exec (file capabilities, setuid, setgid; also a security module's
/// transition). Root running sockstat, or a service started with ambient capabilities, is not
/// this: the caller already had those privileges.
pub fn secure_exec() -> bool {
    // SAFETY: getauxval only reads the auxiliary vector the kernel gave the process.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// The value of test hook `name` (one of [`TEST_HOOKS`]), unless this process runs with more
/// privilege than its caller: a test seam must not let a caller steer a privileged process.
pub(crate) fn test_hook(name: &str) -> Option<String> {
    debug_assert!(
        TEST_HOOKS.contains(&name),
        "{name} is not listed in TEST_HOOKS"
    );
    if secure_exec() {
        return None;
    }
    std::env::var(name).ok()
}

/// Runs `work` with the caller's credentials when this process runs with more privilege than
/// its caller ([`secure_exec`]): on a thread of its own that first drops every capability and
/// takes the real user and group ids as its effective, saved and filesystem ids, so that files
/// are opened, created and searched exactly as the caller could. Otherwise `work` runs here, as
/// it is. Credentials are per thread on Linux (the system calls are made directly, not through
/// the C library, which would change every thread): the rest of the process keeps its own.
///
/// The error is the thread's: it could not start or could not drop its credentials (then
/// `work` did not run).
pub fn as_caller<T: Send>(work: impl FnOnce() -> T + Send) -> io::Result<T> {
    if !secure_exec() {
        return Ok(work());
    }
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("as-caller".into())
            .spawn_scoped(s, || -> io::Result<T> {
                become_caller()?;
                Ok(work())
            })?
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// Gives the calling thread the caller's credentials for good: no capabilities, and the real
/// uid and gid as effective, saved and filesystem ids (the supplementary groups are the
/// caller's already: exec does not change them). Call it only on a thread that does nothing
/// else with privileges afterwards.
pub fn become_caller() -> io::Result<()> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )?;
    let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
    // Each new id is the real one, which an unprivileged thread may always take.
    rustix::thread::set_thread_res_gid(gid, gid, gid)?;
    rustix::thread::set_thread_res_uid(uid, uid, uid)?;
    let now = rustix::thread::capabilities(None)?;
    if !now.effective.is_empty() || rustix::process::geteuid() != uid {
        return Err(io::Error::other(
            "the thread kept privileges after dropping them",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_run_is_not_a_secure_exec_and_runs_work_in_place() {
        // `cargo test` starts this binary without file capabilities or a setuid bit.
        assert!(!secure_exec());
        let here = std::thread::current().id();
        assert_eq!(as_caller(|| std::thread::current().id()).unwrap(), here);
    }
}
