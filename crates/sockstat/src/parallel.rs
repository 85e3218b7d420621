//! The parallel helpers on the ground floor (doc/architecture.md): how many cores this process
//! may use, asked once, for the joins, rules and tables that split their work into parts on a
//! big table, and the listing's parallel sort. The gathering (`sys`), the analyses and the renderers all ask here, so none of
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

/// The largest table whose sort is split over the cores: merging the parts copies half the
/// sort's items aside, 16 MB at a million sockets, against the big tables' memory budget
/// (doc/reference/BENCHMARKS.md, "Big tables"). Past it the sort runs in place on one thread.
pub(crate) const PARALLEL_MAX: usize = 262_144;

/// Sorts `items` as `sort_unstable_by` would (the order of equal items aside), in `parts`
/// parts on as many threads, merged after: the listing's sort is 11 ms of one core at 60k
/// sockets.
pub(crate) fn par_sort_by<T, F>(items: &mut [T], parts: usize, cmp: F)
where
    T: Send + Copy,
    F: Fn(&T, &T) -> std::cmp::Ordering + Sync,
{
    if parts <= 1 || items.len() < 2 {
        items.sort_unstable_by(&cmp);
        return;
    }
    let chunk = items.len().div_ceil(parts);
    std::thread::scope(|sc| {
        for c in items.chunks_mut(chunk) {
            let cmp = &cmp;
            sc.spawn(move || c.sort_unstable_by(cmp));
        }
    });
    // Merge neighbouring runs until one is left, in place but for a copy of each left run (at
    // most half the items: the sort must not double the listing's memory at a million
    // sockets).
    let mut run = chunk;
    let mut buf: Vec<T> = Vec::new();
    while run < items.len() {
        let mut start = 0;
        while start + run < items.len() {
            let end = (start + 2 * run).min(items.len());
            merge_with_left_copy(&mut items[start..end], run, &mut buf, &cmp);
            start = end;
        }
        run *= 2;
    }
}

/// Merges `v[..mid]` and `v[mid..]`, each sorted, into `v`, copying only the left part aside:
/// the merged output never overtakes the right part's next unread item.
fn merge_with_left_copy<T: Copy, F: Fn(&T, &T) -> std::cmp::Ordering>(
    v: &mut [T],
    mid: usize,
    buf: &mut Vec<T>,
    cmp: &F,
) {
    buf.clear();
    buf.extend_from_slice(&v[..mid]);
    let (mut i, mut j, mut k) = (0, mid, 0);
    while i < buf.len() && j < v.len() {
        if cmp(&v[j], &buf[i]) == std::cmp::Ordering::Less {
            v[k] = v[j];
            j += 1;
        } else {
            v[k] = buf[i];
            i += 1;
        }
        k += 1;
    }
    // What is left of the right part is in place already.
    v[k..k + buf.len() - i].copy_from_slice(&buf[i..]);
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
