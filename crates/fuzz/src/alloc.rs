//! How many bytes a decoder allocates: a global allocator that counts, per thread, the bytes
//! live and the most that were live, so a target can hold a decoder to what its input can
//! justify (a length field claiming 4 GiB in a 10-byte input must not reserve 4 GiB).
//!
//! A binary that runs the targets installs it:
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOCATOR: mote_fuzz::alloc::Counting = mote_fuzz::alloc::Counting;
//! ```
//!
//! The counts are thread-local: tests run targets on several threads at once, and each
//! measures only its own decoding.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The system allocator, counting.
pub struct Counting;

static INSTALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    // Const-initialised cells without destructors: touching them never allocates, which an
    // allocator must not do.
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(bytes: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add(bytes);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn shrank(bytes: usize) {
    // Memory allocated before a measurement may be freed during it.
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(bytes)));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// counting touches only thread-local cells, which neither allocate nor unwind.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        grew(layout.size());
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        grew(layout.size());
        // SAFETY: the caller's contract for `alloc_zeroed` is `System::alloc_zeroed`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: the caller's contract for `dealloc` is `System::dealloc`'s.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Both blocks are live while the bytes are copied.
        grew(new_size);
        shrank(layout.size());
        // SAFETY: the caller's contract for `realloc` is `System::realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns what it returned with the most bytes it had allocated at once on this
/// thread, beyond what was live when it started.
///
/// # Panics
///
/// If [`Counting`] is not the global allocator: the measurement would be zero, and a bound
/// checked against it would hold vacuously.
pub fn peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(before));
    let out = f();
    assert!(
        INSTALLED.load(Ordering::Relaxed),
        "mote_fuzz::alloc::Counting is not the global allocator; install it in the binary that runs the targets"
    );
    (out, PEAK.with(Cell::get) - before)
}

/// Panics unless a decoder that read `input` bytes allocated at most `per_byte` bytes for each
/// of them plus `fixed`: what a decoder's own bookkeeping and the input's values can justify.
pub fn assert_within(what: &str, input: usize, allocated: usize, per_byte: usize, fixed: usize) {
    let bound = input.saturating_mul(per_byte).saturating_add(fixed);
    assert!(
        allocated <= bound,
        "{what} allocated {allocated} bytes at once to read {input} bytes (allowed: {per_byte} per byte + {fixed})"
    );
}
