//! The command's allocator: glibc's malloc, until `sockstat top` hands every later allocation
//! to mimalloc ([`use_mimalloc`]).
//!
//! The live view builds a sample of every socket each refresh and frees the one before. With
//! glibc's malloc each refresh paid for copying its vectors as they grew, for searching a heap
//! the previous sample's thousands of small blocks had fragmented, and for pages given back and
//! faulted in again: at 60k sockets the view took 26.8 % of a core with glibc and 13.1 % with
//! mimalloc keeping its freed pages (doc/reference/BENCHMARKS.md, "The view's allocator"). The
//! one-shot commands and the exporter stay with glibc: with mimalloc 3 for the whole command a
//! listing of 100k sockets peaked at 122 MiB instead of 42 (59 when it gives pages back at
//! once), with no gain in time once it did.
//!
//! A block is freed or grown by the allocator that made it: mimalloc knows its own blocks
//! (`mi_is_in_heap_region`: a look at its few arenas and a bit in its map of the segments it
//! mapped, false for any other address), so what glibc allocated before the switch stays
//! glibc's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use mimalloc::MiMalloc;

/// glibc's malloc, or mimalloc for every allocation after [`use_mimalloc`].
pub struct Allocator;

static MIMALLOC: AtomicBool = AtomicBool::new(false);

/// `mi_option_purge_delay` in mimalloc 2's `mi_option_t` (the sys crate does not name it); a
/// test checks that it still is the option whose default is 10 ms (its `src/options.c`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// From now on every allocation comes from mimalloc, which keeps the pages it frees for the next
/// refresh instead of giving them back after 10 ms and faulting them in again:
/// the view holds the memory of its largest refresh until it ends (doc/top.md, "What it costs").
/// Call it before the threads that will allocate start.
pub fn use_mimalloc() {
    // SAFETY: sets one of mimalloc's options, which it reads each time it considers giving pages
    // back; no mimalloc block exists yet.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    MIMALLOC.store(true, Ordering::Release);
}

/// mimalloc reads its options from `MIMALLOC_*` variables (in any case) when the program loads,
/// before `main`, and one of them has it print addresses. With more privilege than its caller
/// (`AT_SECURE`: file capabilities, setuid or setgid) the caller's environment must not steer the
/// allocator, as glibc ignores its own `MALLOC_*` variables then: this runs before the
/// constructors of default priority, mimalloc's among them, and takes those variables out of the
/// environment (SECURITY.md, "With more privilege than its caller"). Priorities up to 100 are
/// the C library's; Rust's own start-up uses 99.
#[used]
#[link_section = ".init_array.00101"]
static HIDE_ALLOCATOR_VARIABLES: extern "C" fn() = hide_allocator_variables;

extern "C" fn hide_allocator_variables() {
    extern "C" {
        static mut environ: *mut *mut libc::c_char;
    }
    // SAFETY: reads the auxiliary vector.
    if unsafe { libc::getauxval(libc::AT_SECURE) } == 0 {
        return;
    }
    // SAFETY: before `main`, on the only thread: `environ` is a null-terminated array of C
    // strings, compacted in place as `unsetenv` does.
    unsafe {
        let env = environ;
        if env.is_null() {
            return;
        }
        let (mut read, mut kept) = (0, 0);
        loop {
            let entry = *env.add(read);
            if entry.is_null() {
                break;
            }
            if !is_allocator_variable(std::ffi::CStr::from_ptr(entry).to_bytes()) {
                *env.add(kept) = entry;
                kept += 1;
            }
            read += 1;
        }
        *env.add(kept) = std::ptr::null_mut();
    }
}

/// Whether an environment entry (`NAME=value`) is one of mimalloc's options.
fn is_allocator_variable(entry: &[u8]) -> bool {
    const PREFIX: &[u8] = b"MIMALLOC_";
    entry.len() >= PREFIX.len() && entry[..PREFIX.len()].eq_ignore_ascii_case(PREFIX)
}

fn mimalloc_made(p: *mut u8) -> bool {
    // SAFETY: looks the address up in mimalloc's own tables without reading it; defined for any
    // address.
    unsafe { libmimalloc_sys::mi_is_in_heap_region(p.cast()) }
}

// SAFETY: each block is freed and grown by the allocator that made it (`mimalloc_made`), and
// both allocators honour the layouts they are given.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if MIMALLOC.load(Ordering::Acquire) {
            MiMalloc.alloc(layout)
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if MIMALLOC.load(Ordering::Acquire) {
            MiMalloc.alloc_zeroed(layout)
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if mimalloc_made(p) {
            MiMalloc.dealloc(p, layout)
        } else {
            System.dealloc(p, layout)
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if mimalloc_made(p) {
            MiMalloc.realloc(p, layout, new_size)
        } else {
            System.realloc(p, layout, new_size)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option index is mimalloc's enum position, not a name: an upgrade that moved it would
    /// set some other option. Its default identifies it.
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // SAFETY: reads an option; no test sets it.
        let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, 10, "mi_option_purge_delay is no longer option 15");
    }

    #[test]
    fn mimallocs_variables_are_told_by_their_prefix_in_any_case() {
        assert!(is_allocator_variable(b"MIMALLOC_VERBOSE=1"));
        assert!(is_allocator_variable(b"mimalloc_show_stats=1"));
        assert!(is_allocator_variable(b"MiMalloc_="));
        assert!(!is_allocator_variable(b"MIMALLOC"));
        assert!(!is_allocator_variable(b"MALLOC_ARENA_MAX=2"));
        assert!(!is_allocator_variable(b"PATH=/usr/bin"));
    }

    /// Blocks from either allocator are freed and grown by the one that made it, whichever is
    /// current. Uses the allocators directly: switching this test binary's allocator would
    /// change every other test's.
    #[test]
    fn each_block_goes_back_to_the_allocator_that_made_it() {
        let layout = Layout::from_size_align(1000, 8).unwrap();
        // SAFETY: each pointer is used within its layout and freed once.
        unsafe {
            let g = System.alloc(layout);
            let m = MiMalloc.alloc(layout);
            assert!(!g.is_null() && !m.is_null());
            assert!(!mimalloc_made(g), "a glibc block taken for mimalloc's");
            assert!(mimalloc_made(m), "a mimalloc block not recognised");
            g.write_bytes(7, 1000);
            m.write_bytes(9, 1000);
            let g = Allocator.realloc(g, layout, 100_000);
            let m = Allocator.realloc(m, layout, 100_000);
            assert!(
                !mimalloc_made(g) && mimalloc_made(m),
                "a block changed allocator when grown"
            );
            assert_eq!((*g, *g.add(999)), (7, 7));
            assert_eq!((*m, *m.add(999)), (9, 9));
            let big = Layout::from_size_align(100_000, 8).unwrap();
            Allocator.dealloc(g, big);
            Allocator.dealloc(m, big);
            // Blocks beyond mimalloc's segments (its huge objects) and glibc's mapped chunks.
            let huge = Layout::from_size_align(80 << 20, 4096).unwrap();
            let (g, m) = (System.alloc(huge), MiMalloc.alloc(huge));
            assert!(!g.is_null() && !m.is_null());
            assert!(
                !mimalloc_made(g) && mimalloc_made(m),
                "a huge block not told apart"
            );
            Allocator.dealloc(g, huge);
            Allocator.dealloc(m, huge);
        }
    }
}
