//! User names through the system's user database (NSS: files, LDAP, sssd, systemd-userdb...),
//! not only `/etc/passwd`, via the reentrant libc calls.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Set while a lookup thread that overran its budget is still blocked in the user database:
/// later lookups in this process (watch mode, `serve`) do not start another one behind it.
static STALLED: AtomicBool = AtomicBool::new(false);

/// The names of `uids`, looked up on a helper thread for at most `budget`: a directory service
/// that does not answer (LDAP, sssd, a hung NFS home with `files`) must cost numbers, not a hung
/// listing. Returns the names found (`None`: no such user) and how many uids were left
/// unresolved because the lookup ran out of time (or an earlier one is still stuck).
pub fn names_of(uids: &[u32], budget: Duration) -> (HashMap<u32, Option<String>>, usize) {
    let mut names = HashMap::with_capacity(uids.len());
    if uids.is_empty() {
        return (names, 0);
    }
    if STALLED.load(Ordering::Acquire) {
        return (names, uids.len());
    }
    let (tx, rx) = mpsc::channel();
    let todo = uids.to_vec();
    let spawned = std::thread::Builder::new()
        .name("sockstat-nss".into())
        .spawn(move || {
            for uid in todo {
                if tx.send((uid, name_of(uid))).is_err() {
                    break;
                }
            }
            // A lookup that finished late clears the flag for the next listing.
            STALLED.store(false, Ordering::Release);
        });
    if spawned.is_err() {
        // No thread to spare: look up inline, as before.
        for &uid in uids {
            names.insert(uid, name_of(uid));
        }
        return (names, 0);
    }
    let deadline = Instant::now() + budget;
    while names.len() < uids.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((uid, name)) => {
                names.insert(uid, name);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                STALLED.store(true, Ordering::Release);
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let missing = uids.len() - names.len();
    (names, missing)
}

/// Looks up the name of `uid`; `None` when the database has no such user.
pub fn name_of(uid: u32) -> Option<String> {
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: a zeroed passwd is a valid out-parameter; buf outlives the call and its length
        // is passed; result is only read when the call reports success.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success pw_name points into buf, NUL-terminated.
        let name = unsafe { CStr::from_ptr(pwd.pw_name) };
        return Some(name.to_string_lossy().into_owned());
    }
}

/// Looks up the uid of a user name; `None` when the database has no such user.
pub fn uid_of(name: &str) -> Option<u32> {
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: as in `name_of`.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || result.is_null() {
            return None;
        }
        return Some(pwd.pw_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_resolves_both_ways() {
        assert_eq!(name_of(0).as_deref(), Some("root"));
        assert_eq!(uid_of("root"), Some(0));
        assert_eq!(uid_of("no-such-user-sockstat-test"), None);
    }
}
