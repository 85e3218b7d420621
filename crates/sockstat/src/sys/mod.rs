//! Gathering from the running system (Linux): the sock_diag dumps, the /proc owner scan,
//! namespaces, counters, sysctls and the probes. Each reader fills the model with what it was
//! asked for and says what it could not read; what to gather, and how the parts are joined,
//! ordered and judged, is decided by the use cases (`run/`). Nothing here renders.

pub mod bpf;
pub mod buflock;
pub mod cgroup;
pub mod counters;
pub mod destroy;
pub mod dump;
pub mod netlink;
pub mod netns;
pub mod owners;
pub mod procfs;
pub mod skb_drops;
pub mod sysctl;
pub mod taskfile;
pub mod tcp_events;
pub mod timing;
pub mod unlisted;
pub mod users;
pub mod zones;

use crate::parallel::cores;

/// Threads for the owner scan: the scan parallelises across processes, and the dump runs on the
/// calling thread meanwhile (doc/reference/baseline-study.md#the-floor: 2 scan threads + concurrent dump is
/// the floor on 2 cores).
pub(crate) fn scan_threads() -> usize {
    cores().unwrap_or(2).clamp(2, 4)
}

/// Threads for the BPF iterator's walk of the fd tables ([`owners::scan_any`]): every core (up
/// to 4) when the scan runs alone, one fewer when it runs beside the socket dump, so the two do
/// not take turns on the same cores. One thread walks every task in one iterator; more walk
/// one process per iterator (doc/reference/BENCHMARKS.md, "Where a listing's time goes").
pub(crate) fn walk_threads(beside_dump: bool) -> usize {
    cores()
        .unwrap_or(1)
        .saturating_sub(usize::from(beside_dump))
        .clamp(1, 4)
}

/// `AT_PAGESZ`: the page size, in the auxiliary vector.
pub(crate) const AT_PAGESZ: u64 = 6;
/// `AT_CLKTCK`: clock ticks per second (`USER_HZ`) as `/proc` reports times in.
pub(crate) const AT_CLKTCK: u64 = 17;

/// One value of this process's auxiliary vector (`/proc/self/auxv`).
pub(crate) fn auxv(key: u64) -> Option<u64> {
    let b = std::fs::read("/proc/self/auxv").ok()?;
    let w = std::mem::size_of::<usize>();
    b.chunks_exact(2 * w).find_map(|e| {
        let mut k = [0u8; 8];
        let mut v = [0u8; 8];
        k[..w].copy_from_slice(&e[..w]);
        v[..w].copy_from_slice(&e[w..]);
        (u64::from_ne_bytes(k) == key).then(|| u64::from_ne_bytes(v))
    })
}
