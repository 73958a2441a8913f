//! The process's allocator (mimalloc), and the work counts the CI guards read
//! (`bench/guard.py`): with `TAU_ALLOC_STATS=<file>` set, every allocation is counted and, as
//! tau exits, the number of allocations, the bytes they asked for and the most bytes live at
//! once are written to that file as one JSON object. Counts, unlike times, do not move with
//! the load of a shared machine, so a budget on them can fail CI without flaking.
//!
//! mimalloc instead of glibc's allocator (built without transparent huge pages, which cost
//! 8 MB of RSS at startup): opening a long session allocates every string of every message,
//! and the streaming path allocates per delta; measured 1.7× faster on 100,000-entry sessions
//! (`cargo bench -p tau-store --bench load`).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

pub struct Counting {
    inner: mimalloc::MiMalloc,
    enabled: AtomicBool,
    allocations: AtomicU64,
    bytes: AtomicU64,
    live: AtomicUsize,
    peak: AtomicUsize,
}

impl Counting {
    pub const fn new() -> Self {
        Self {
            inner: mimalloc::MiMalloc,
            enabled: AtomicBool::new(false),
            allocations: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    fn grew(&self, size: usize) {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(size as u64, Ordering::Relaxed);
        let live = self.live.fetch_add(size, Ordering::Relaxed) + size;
        self.peak.fetch_max(live, Ordering::Relaxed);
    }

    fn shrank(&self, size: usize) {
        // Saturating: blocks allocated before counting began may be freed after.
        let _ = self
            .live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                Some(live.saturating_sub(size))
            });
    }

    /// Starts counting if `TAU_ALLOC_STATS` names a file; the file it names.
    pub fn start_from_env(&self) -> Option<std::path::PathBuf> {
        let file = std::env::var_os("TAU_ALLOC_STATS")?;
        self.enabled.store(true, Ordering::Relaxed);
        Some(file.into())
    }

    /// The counts so far, as the JSON object written at exit.
    pub fn report(&self) -> String {
        format!(
            "{{\"allocations\":{},\"bytes\":{},\"peakBytes\":{}}}\n",
            self.allocations.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
            self.peak.load(Ordering::Relaxed)
        )
    }
}

// SAFETY: every call is forwarded unchanged to mimalloc, which upholds the GlobalAlloc
// contract; the wrapper only adds counters.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.enabled.load(Ordering::Relaxed) {
            self.grew(layout.size());
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if self.enabled.load(Ordering::Relaxed) {
            self.grew(layout.size());
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if self.enabled.load(Ordering::Relaxed) {
            self.shrank(layout.size());
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if self.enabled.load(Ordering::Relaxed) {
            self.shrank(layout.size());
            self.grew(new_size);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.realloc(ptr, layout, new_size) }
    }
}
