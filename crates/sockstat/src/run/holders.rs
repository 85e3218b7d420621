//! The holders a view keeps between its samples (`sockstat top`; doc/top.md, "Holders between
//! walks"). Finding every socket's holders walks every process's descriptors, which at 60k
//! sockets costs as much CPU as dumping the sockets themselves. A view that samples every second
//! keeps the last walk and uses it again while it is younger than `max_age` and has seen every
//! socket the new dump holds; a socket it has not seen (a new connection, a new listener) makes
//! the next walk at once, so no socket is ever shown without holders for lack of a walk. What
//! a kept walk can miss is a change of holder of a socket that it saw (a `fork`, a process
//! passing the socket on or closing its copy, an `exec` renaming the holder): for at most
//! `max_age`, and the view says how old its holders are ([`crate::sample::Sample::holders_age`]).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sys::owners::Scan;

/// The last walk, with the sockets it was made for.
struct Kept {
    scan: Scan,
    /// Why the kernel's iterator was refused, when the walk fell back to `/proc`: said again
    /// with every use, as the walk said it.
    refused: Option<String>,
    /// The inodes of the sockets dumped before the walk began, sorted: every one of them was
    /// either found with its holders or held by none the walk could see.
    seen: Vec<u64>,
    at: Instant,
}

/// The last walk and when to walk again.
pub(crate) struct HolderCache {
    max_age: Duration,
    kept: Mutex<Option<Kept>>,
}

impl std::fmt::Debug for HolderCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HolderCache")
            .field("max_age", &self.max_age)
            .finish_non_exhaustive()
    }
}

impl HolderCache {
    /// Walks are kept for at most `max_age` (zero: never).
    pub(crate) fn new(max_age: Duration) -> HolderCache {
        HolderCache {
            max_age,
            kept: Mutex::new(None),
        }
    }

    /// The kept walk, with why the iterator was refused and its age, when it may stand for a
    /// walk now: younger than `max_age`, and made after a dump that held every socket of
    /// `inodes` (sorted).
    pub(crate) fn reuse(&self, inodes: &[u64]) -> Option<(Scan, Option<String>, Duration)> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let k = kept.as_ref()?;
        let age = k.at.elapsed();
        if age >= self.max_age || !is_subset(inodes, &k.seen) {
            return None;
        }
        Some((k.scan.clone(), k.refused.clone(), age))
    }

    /// Keeps a walk that began at `at`, after the dump of the sockets `seen` (sorted).
    pub(crate) fn keep(&self, scan: &Scan, refused: Option<String>, seen: Vec<u64>, at: Instant) {
        if self.max_age.is_zero() {
            return;
        }
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = Some(Kept {
            scan: scan.clone(),
            refused,
            seen,
            at,
        });
    }

    /// Forgets the kept walk (it failed: the next gathering must walk).
    pub(crate) fn forget(&self) {
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Whether every element of `a` is in `b` (both sorted).
fn is_subset(a: &[u64], b: &[u64]) -> bool {
    let mut j = 0;
    for &x in a {
        while j < b.len() && b[j] < x {
            j += 1;
        }
        if j == b.len() || b[j] != x {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_of_sorted_lists() {
        assert!(is_subset(&[], &[]));
        assert!(is_subset(&[], &[1]));
        assert!(is_subset(&[2, 5], &[1, 2, 3, 5]));
        assert!(!is_subset(&[2, 4], &[1, 2, 3, 5]));
        assert!(!is_subset(&[6], &[1, 2, 3, 5]));
        assert!(!is_subset(&[1], &[]));
    }

    #[test]
    fn a_walk_is_kept_while_young_and_while_every_socket_is_known() {
        let c = HolderCache::new(Duration::from_secs(60));
        assert!(c.reuse(&[1, 2]).is_none(), "nothing kept yet");
        c.keep(&Scan::default(), None, vec![1, 2, 3], Instant::now());
        let (_, _, age) = c.reuse(&[1, 3]).expect("every socket known, and young");
        assert!(age < Duration::from_secs(60));
        assert!(c.reuse(&[1, 4]).is_none(), "a socket the walk did not see");
        c.forget();
        assert!(c.reuse(&[1]).is_none());
        let old = Instant::now()
            .checked_sub(Duration::from_secs(61))
            .expect("the clock is past a minute");
        c.keep(&Scan::default(), None, vec![1], old);
        assert!(c.reuse(&[1]).is_none(), "older than max_age");
        let never = HolderCache::new(Duration::ZERO);
        never.keep(&Scan::default(), None, vec![1], Instant::now());
        assert!(never.reuse(&[1]).is_none(), "max_age 0 keeps nothing");
    }
}
