//! Wrapper cost when nothing fails, and cost per retry: `#[robust]` against the body called
//! directly, a hand-written loop with the same settings, and backon. Ratios are computed from
//! one run by `bench/ratios.py` (see docs/BENCHMARKS.md).

use std::cell::Cell;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use robust_bench::*;

fn sync_success(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync_success");
    g.bench_function("direct", |b| b.iter(|| body(black_box(7))));
    g.bench_function("robust", |b| b.iter(|| robust_sync(black_box(7))));
    g.bench_function("hand", |b| b.iter(|| hand_sync(black_box(7))));
    g.bench_function("backon", |b| b.iter(|| backon_sync(black_box(7))));
    g.finish();
}

fn async_success(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let mut g = c.benchmark_group("async_success_timeout");
    g.bench_function("direct", |b| {
        b.to_async(&rt).iter(|| body_async(black_box(7)))
    });
    g.bench_function("robust", |b| {
        b.to_async(&rt).iter(|| robust_async(black_box(7)))
    });
    g.bench_function("hand", |b| {
        b.to_async(&rt).iter(|| hand_timeout(black_box(7)))
    });
    g.bench_function("backon", |b| {
        b.to_async(&rt).iter(|| backon_async(black_box(7)))
    });
    g.finish();
}

fn retry_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("retry_path");
    // Two failed attempts, then a success: the cost per retry is (this - success) / 2,
    // with the success path measured in the same group (`*_0`).
    for (name, f) in [
        (
            "robust",
            robust_retry as fn(u64, &Cell<u32>) -> std::io::Result<u64>,
        ),
        ("hand", hand_retry),
        ("backon", backon_retry),
    ] {
        g.bench_function(format!("{name}_0"), |b| {
            b.iter(|| f(black_box(7), &Cell::new(0)))
        });
        g.bench_function(format!("{name}_2"), |b| {
            b.iter(|| f(black_box(7), &Cell::new(2)))
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = sync_success, async_success, retry_path
}
criterion_main!(benches);
