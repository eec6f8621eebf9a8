//! The success path with a guard (SPEC 16) against the same attribute without one, in the same
//! run: a blocking fn and an async fn (tokio current-thread runtime), each plain, with
//! `limit = LIMIT` and with `throttle = THROTTLE`, and async with `hedge(..)` (no hedge fires:
//! the body returns at once) and with an adaptive timeout against a fixed one; the body returns
//! `Ok` at once. See docs/BENCHMARKS.md, sections 10 and 11.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use robust_bench::*;

fn sync_guards(c: &mut Criterion) {
    let mut g = c.benchmark_group("guards_sync");
    g.bench_function("plain", |b| b.iter(|| guard_none(black_box(7))));
    g.bench_function("limit", |b| b.iter(|| guard_limit(black_box(7))));
    g.bench_function("throttle", |b| b.iter(|| guard_throttle(black_box(7))));
    g.bench_function("breaker_budget_local", |b| {
        b.iter(|| guard_local_pair(black_box(7)))
    });
    g.bench_function("breaker_budget_fleet", |b| {
        b.iter(|| guard_shared_pair(black_box(7)))
    });
    g.finish();
}

fn async_guards(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let mut g = c.benchmark_group("guards_async");
    g.bench_function("plain", |b| {
        b.to_async(&rt).iter(|| guard_none_async(black_box(7)))
    });
    g.bench_function("limit", |b| {
        b.to_async(&rt).iter(|| guard_limit_async(black_box(7)))
    });
    g.bench_function("throttle", |b| {
        b.to_async(&rt).iter(|| guard_throttle_async(black_box(7)))
    });
    g.bench_function("hedge_50ms", |b| {
        b.to_async(&rt).iter(|| guard_hedge_async(black_box(7)))
    });
    g.bench_function("hedge_p95", |b| {
        b.to_async(&rt).iter(|| guard_hedge_p95_async(black_box(7)))
    });
    g.bench_function("timeout_2s", |b| {
        b.to_async(&rt).iter(|| guard_timeout_async(black_box(7)))
    });
    g.bench_function("timeout_adaptive", |b| {
        b.to_async(&rt).iter(|| guard_adaptive_async(black_box(7)))
    });
    g.finish();
}

/// What the throttle's success path is made of: a clock read, the decision and the record
/// (the call reads the clock twice: before the attempt and after it).
fn throttle_parts(c: &mut Criterion) {
    let mut g = c.benchmark_group("guards_parts");
    let now = Instant::now();
    g.bench_function("clock_read", |b| b.iter(Instant::now));
    g.bench_function("throttle_should_reject", |b| {
        b.iter(|| THROTTLE.should_reject(black_box(now), black_box(0.5)))
    });
    g.bench_function("throttle_record", |b| {
        b.iter(|| THROTTLE.record(black_box(now), black_box(true)))
    });
    g.bench_function("limit_try_acquire", |b| b.iter(|| LIMIT.try_acquire()));
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
    targets = sync_guards, async_guards, throttle_parts
}
criterion_main!(benches);
