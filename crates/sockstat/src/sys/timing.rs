//! Phase timings for the benchmark's fixed-cost breakdown (doc/reference/BENCHMARKS.md): with
//! `SOCKSTAT_TIMINGS` set in the environment, each phase of a listing prints one line to stderr,
//! `sockstat: timing: PHASE +X.XX ms (Y.YY ms since start)`. Unset, a mark costs one relaxed
//! atomic load after the first.

use std::sync::OnceLock;
use std::time::Instant;

/// When the first mark was asked for (the library's start), if timings are on.
fn start() -> Option<&'static (Instant, std::sync::Mutex<Instant>)> {
    static ON: OnceLock<Option<(Instant, std::sync::Mutex<Instant>)>> = OnceLock::new();
    ON.get_or_init(|| {
        std::env::var_os("SOCKSTAT_TIMINGS").map(|_| {
            let now = Instant::now();
            (now, std::sync::Mutex::new(now))
        })
    })
    .as_ref()
}

/// Starts the clock (a no-op when timings are off or already started).
pub fn begin() {
    let _ = start();
}

/// Says how long `phase` took since the previous mark (on any thread) and since the start.
pub fn mark(phase: &str) {
    let Some((t0, last)) = start() else { return };
    let now = Instant::now();
    let mut prev = last.lock().unwrap_or_else(|e| e.into_inner());
    eprintln!(
        "sockstat: timing: {phase} +{:.2} ms ({:.2} ms since start)",
        (now - *prev).as_secs_f64() * 1e3,
        (now - *t0).as_secs_f64() * 1e3
    );
    *prev = now;
}

/// Times one phase: the duration of `f` alone (other threads' marks do not cut it).
pub fn phase<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let Some((t0, _)) = start() else { return f() };
    let a = Instant::now();
    let v = f();
    let b = Instant::now();
    eprintln!(
        "sockstat: timing: {name} took {:.2} ms (ended {:.2} ms since start)",
        (b - a).as_secs_f64() * 1e3,
        (b - *t0).as_secs_f64() * 1e3
    );
    v
}
