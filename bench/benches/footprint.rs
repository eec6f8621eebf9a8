//! Heap allocations per call (counted by a global allocator) and the size of the futures, for
//! `#[robust]` and the alternatives. Prints a table; `cargo bench -p robust-bench --bench
//! footprint`.
#![allow(unsafe_code)] // a GlobalAlloc implementation is unsafe by definition

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use robust_bench::*;

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations per call, averaged over many calls after a warm-up call.
fn per_call(mut f: impl FnMut()) -> f64 {
    f();
    let before = ALLOCS.load(Ordering::Relaxed);
    const N: usize = 1000;
    for _ in 0..N {
        f();
    }
    (ALLOCS.load(Ordering::Relaxed) - before) as f64 / N as f64
}

fn main() {
    // Criterion-style flags (`--bench`) are ignored: this target only prints.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");

    println!("## Heap allocations per call\n");
    println!("| path | #[robust] | hand-written | backon |");
    println!("|---|---:|---:|---:|");
    let row = |name: &str, a: f64, b: f64, c: f64| println!("| {name} | {a} | {b} | {c} |");
    row(
        "sync success",
        per_call(|| drop(robust_sync(1))),
        per_call(|| drop(hand_sync(1))),
        per_call(|| drop(backon_sync(1))),
    );
    row(
        "sync retry path (2 failures)",
        per_call(|| drop(robust_retry(1, &Cell::new(2)))),
        per_call(|| drop(hand_retry(1, &Cell::new(2)))),
        per_call(|| drop(backon_retry(1, &Cell::new(2)))),
    );
    row(
        "async success, 2 s timeout",
        per_call(|| drop(rt.block_on(robust_async(1)))),
        per_call(|| drop(rt.block_on(hand_timeout(1)))),
        per_call(|| drop(rt.block_on(backon_async(1)))),
    );
    row(
        "async retry path (2 failures)",
        per_call(|| drop(rt.block_on(robust_retry_async(1, &Cell::new(2))))),
        f64::NAN,
        f64::NAN,
    );
    println!();
    println!("(`block_on` itself is included in the async rows and allocates nothing here.)\n");

    println!("## Size of the future\n");
    println!("| future | bytes |");
    println!("|---|---:|");
    let body = std::mem::size_of_val(&body_async(1));
    let timeout = std::mem::size_of_val(&hand_timeout(1));
    let robust = std::mem::size_of_val(&robust_async(1));
    let plain = std::mem::size_of_val(&robust_async_plain(1));
    let backon = std::mem::size_of_val(&backon_async(1));
    println!("| the body's own future | {body} |");
    println!("| `tokio::time::timeout(2 s, body)` by hand | {timeout} |");
    println!("| `#[robust(...)]` without a timeout | {plain} |");
    println!("| `#[robust(timeout = \"2s\", ...)]` | {robust} |");
    println!("| backon with the same timeout | {backon} |");
    println!();
    println!(
        "With a timeout, #[robust] adds {} bytes to the hand-written timeout; without one, {} bytes to the body.",
        robust as i64 - timeout as i64,
        plain as i64 - body as i64
    );
}
