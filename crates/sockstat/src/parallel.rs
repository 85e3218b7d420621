//! The parallel helpers on the ground floor (doc/architecture.md): how many cores this process
//! may use, asked once, for the joins, rules and tables that split their work into parts on a
//! big table. The gathering (`sys`), the analyses and the renderers all ask here, so none of
//! them reaches into another floor for it.

/// The cores this process may use, asked once: `available_parallelism` reads the cgroup's CPU
/// quota (a dozen system calls), and a listing asks for its thread counts several times.
pub(crate) fn cores() -> Option<usize> {
    static CORES: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().ok().map(|n| n.get()))
}

/// How many parts a job of `len` items is split into: 1 below `threshold` items, else every
/// core, at most `max`.
pub(crate) fn parts(len: usize, threshold: usize, max: usize) -> usize {
    if len >= threshold {
        cores().unwrap_or(1).clamp(1, max)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_jobs_stay_whole_and_big_ones_stay_under_the_cap() {
        assert_eq!(parts(10, 8192, 4), 1);
        let p = parts(100_000, 8192, 4);
        assert!((1..=4).contains(&p), "{p}");
        assert_eq!(p, cores().unwrap_or(1).clamp(1, 4));
    }
}
