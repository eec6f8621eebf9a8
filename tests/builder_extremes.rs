//! No panic, overflow or NaN on any configuration (the developers' standard): generated
//! builder chains, every strategy and jitter with values at and past their edges (NaN,
//! infinities, zero, `Duration::MAX`, 10^300, `u32::MAX` retries and more), a `when` rule with
//! values as extreme, a timeout, deadline and `max_delay` from the same sets, and a hedge (its
//! policy called async only). `build()`
//! either refuses the chain or gives a policy; a policy is then called (blocking, on
//! `VirtualTime`, and async, on tokio's paused clock; itself, behind a `DynPolicy` and through
//! a `RobustLayer`) with a body that fails a few times, then succeeds: each call ends, with at
//! most one attempt more than the failures, and the sleeps add up without panicking.

use std::cell::Cell;
use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use retry_runtime::hedge::Hedge;
use retry_runtime::kind::{Io, Timeout};
use retry_runtime::time::VirtualTime;
use retry_runtime::tower::RobustLayer;
use retry_runtime::{
    AsyncRetryPolicy, AwsDecorrelated, Backoff, Constant, Decorrelated, EqualJitter, Exponential,
    Fibonacci, FullJitter, Jitter, Linear, NoBackoff, NoJitter, Policy, Polynomial, Random,
};
use tower::{Layer, ServiceExt};

#[path = "common/scripts.rs"]
mod scripts;
use scripts::paused;

/// Seconds at and past the edges of what the setters take.
const SECS: [f64; 14] = [
    f64::NAN,
    f64::NEG_INFINITY,
    -1.0,
    -0.0,
    0.0,
    1e-12,
    1e-9,
    0.001,
    1.0,
    3600.0,
    1e18,
    1e19,
    1e300,
    f64::INFINITY,
];

/// Multipliers, exponents, scales.
const FACTORS: [f64; 10] = [
    f64::NAN,
    -1.0,
    0.0,
    1e-300,
    0.5,
    1.0,
    2.0,
    3.7,
    1e300,
    f64::INFINITY,
];

/// Durations at the edges.
const DURATIONS: [Duration; 7] = [
    Duration::ZERO,
    Duration::from_nanos(1),
    Duration::from_millis(1),
    Duration::from_secs(1),
    Duration::from_secs(1_000_000_000),
    Duration::from_secs(u64::MAX),
    Duration::MAX,
];

const RETRIES: [i64; 7] = [-1, 0, 1, 3, 100, u32::MAX as i64, i64::MAX];

/// Chains tried, chains built (and called both ways), calls that made a retry.
static TRIED: AtomicU32 = AtomicU32::new(0);
static BUILT: AtomicU32 = AtomicU32::new(0);
static RETRIED: AtomicU32 = AtomicU32::new(0);
/// Hedged chains built (and called).
static HEDGED: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, Clone)]
struct Knobs {
    strategy: usize,
    jitter: usize,
    d: [usize; 3],
    f: [usize; 2],
    retries: Option<usize>,
    max_delay: Option<usize>,
    scale: Option<usize>,
    timeout: Option<usize>,
    deadline: Option<usize>,
    when: usize,
    when_retries: Option<usize>,
    when_max_delay: Option<usize>,
    when_scale: Option<usize>,
    /// A hedge: its `after` (from `DURATIONS`) and `max` (0 and 11 are refused).
    hedge: Option<(usize, u32)>,
    failures: u32,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    // Each setting is left out half the time (or more), so that chains with only a few
    // values past the edges get built and called.
    let some = |n: usize| proptest::option::weighted(0.4, 0..n);
    (
        (0usize..7, 0usize..5, [0usize..7, 0usize..7, 0usize..7]),
        ([0usize..10, 0usize..10], some(7), some(14), some(10)),
        (some(14), some(14)),
        (0usize..3, some(7), some(14), some(10), 0u32..6),
        proptest::option::weighted(0.3, (0usize..7, 0u32..12)),
    )
        .prop_map(
            |(
                (strategy, jitter, d),
                (f, retries, max_delay, scale),
                (timeout, deadline),
                (when, when_retries, when_max_delay, when_scale, failures),
                hedge,
            )| Knobs {
                strategy,
                jitter,
                d,
                f,
                retries,
                max_delay,
                scale,
                timeout,
                deadline,
                when,
                when_retries,
                when_max_delay,
                when_scale,
                hedge,
                failures,
            },
        )
}

/// Builds the chain the knobs give with `backoff` and `jitter`, and calls its policy.
fn run<B, J>(backoff: B, jitter: J, k: &Knobs)
where
    B: Backoff + Clone + Send + Sync + 'static,
    J: Jitter + Clone + Send + Sync + 'static,
{
    let time = VirtualTime::new();
    let _installed = time.install();
    let mut top = Policy::builder();
    if let Some(i) = k.retries {
        top = top.retries(RETRIES[i]);
    }
    if let Some(i) = k.max_delay {
        top = top.max_delay_secs(SECS[i]);
    }
    if let Some(i) = k.scale {
        top = top.scale(FACTORS[i]);
    }
    let top = top.backoff(backoff).jitter(jitter);
    // (A `when` rule sets at least its retries: one that sets nothing is refused.)
    let rule = |mut s: retry_runtime::Settings<B, J>| {
        s = s.retries(RETRIES[k.when_retries.unwrap_or(3)]);
        if let Some(i) = k.when_max_delay {
            s = s.max_delay_secs(SECS[i]);
        }
        if let Some(i) = k.when_scale {
            s = s.scale(FACTORS[i]);
        }
        s
    };
    // The timeout and deadline, each set or not, and a `when` rule on a timeout, on any I/O
    // error, or none.
    macro_rules! finish {
        ($b:expr) => {{
            let b = $b;
            let f = k.failures;
            // A hedged policy: async only, and through the hedged layer.
            if let Some((after, max)) = k.hedge {
                let Ok(hedge) = Hedge::after(DURATIONS[after], max) else {
                    return;
                };
                let result = match (k.timeout, k.deadline) {
                    (None, None) => b.hedge(hedge).build().map(|p| hedged(p, f)),
                    (Some(t), None) => b
                        .timeout_secs(SECS[t])
                        .hedge(hedge)
                        .build()
                        .map(|p| hedged(p, f)),
                    (None, Some(d)) => b
                        .deadline_secs(SECS[d])
                        .hedge(hedge)
                        .build()
                        .map(|p| hedged(p, f)),
                    (Some(t), Some(d)) => b
                        .timeout_secs(SECS[t])
                        .deadline_secs(SECS[d])
                        .hedge(hedge)
                        .build()
                        .map(|p| hedged(p, f)),
                };
                if result.is_ok() {
                    HEDGED.fetch_add(1, Ordering::Relaxed);
                }
                check_results(result.map(|r| vec![r]), k);
                return;
            }
            let result = match (k.timeout, k.deadline) {
                (None, None) => b.build().map(|p| both_ways(p, f)),
                (Some(t), None) => b.timeout_secs(SECS[t]).build().map(|p| both_ways(p, f)),
                (None, Some(d)) => b.deadline_secs(SECS[d]).build().map(|p| both_ways(p, f)),
                (Some(t), Some(d)) => b
                    .timeout_secs(SECS[t])
                    .deadline_secs(SECS[d])
                    .build()
                    .map(|p| both_ways(p, f)),
            };
            check_results(result, k);
            // (Adding the sleeps up must not overflow either.)
            let _ = time.slept();
        }};
    }
    match k.when {
        0 => finish!(top),
        1 => finish!(top.when(Timeout, rule)),
        _ => finish!(top.when(Io::ANY, rule)),
    }
}

/// Counts the chain, and checks each call's result and attempts, when it was built.
fn check_results<E>(result: Result<Vec<(io::Result<u32>, u32)>, E>, k: &Knobs) {
    let f = k.failures;
    TRIED.fetch_add(1, Ordering::Relaxed);
    if let Ok(results) = result {
        BUILT.fetch_add(1, Ordering::Relaxed);
        for (r, made) in results {
            if made > 1 {
                RETRIED.fetch_add(1, Ordering::Relaxed);
            }
            assert!(made >= 1 && made <= f + 1, "{made} attempts: {k:?}");
            match r {
                Ok(n) => assert_eq!(n, f, "{k:?}"),
                Err(_) => assert!(made <= f, "{k:?}"),
            }
        }
    }
}

/// A hedged policy's async call (every attempt answers at once, so the attempts still come
/// one after the other).
fn hedged<P: AsyncRetryPolicy<u32, io::Error>>(policy: P, failures: u32) -> (io::Result<u32>, u32) {
    async_call(&policy, failures)
}

/// `policy`'s async call on tokio's paused clock, with the attempts it made.
fn async_call<P: AsyncRetryPolicy<u32, io::Error>>(
    policy: &P,
    failures: u32,
) -> (io::Result<u32>, u32) {
    let attempts = Cell::new(0u32);
    let r = paused(policy.call_async(|_| {
        std::future::ready(answer(attempts.replace(attempts.get() + 1), failures))
    }));
    (r, attempts.get())
}

/// The body: fails `failures` times (a reset, then a timeout, in turn), then answers with the
/// number of attempts before it.
fn answer(n: u32, failures: u32) -> io::Result<u32> {
    match n {
        n if n < failures && n % 2 == 0 => Err(ErrorKind::ConnectionReset.into()),
        n if n < failures => Err(ErrorKind::TimedOut.into()),
        n => Ok(n),
    }
}

/// `policy`'s blocking call, then its async call on tokio's paused clock: each result with
/// the attempts it made.
fn calls<P: AsyncRetryPolicy<u32, io::Error>>(
    policy: &P,
    failures: u32,
) -> [(io::Result<u32>, u32); 2] {
    let attempts = Cell::new(0u32);
    let blocking = policy.call(|_| answer(attempts.replace(attempts.get() + 1), failures));
    [(blocking, attempts.get()), async_call(policy, failures)]
}

/// [`calls`] on `policy`, then on it behind a [`DynPolicy`](retry_runtime::DynPolicy), then
/// through a `RobustLayer` over a service that answers as the body does.
fn both_ways<P>(policy: P, failures: u32) -> Vec<(io::Result<u32>, u32)>
where
    P: AsyncRetryPolicy<u32, io::Error>
        + Clone
        + retry_runtime::policy::PolicyCore<Limit = ()>
        + Send
        + Sync
        + 'static,
    P::Timeout: retry_runtime::timeout::FixedTimeout + retry_runtime::tower::Unhedged,
    P::Env: Clone + Send + Sync + 'static + retry_runtime::policy::dynamic::DynSleep,
    retry_runtime::tower::PerKey: retry_runtime::tower::Guards<u32, P, u32, io::Error>,
{
    let mut results = Vec::from(calls(&policy, failures));
    let erased: retry_runtime::DynPolicy<u32, io::Error> =
        retry_runtime::DynPolicy::new(policy.clone());
    results.extend(calls(&erased, failures));
    let attempts = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&attempts);
    let service = tower::service_fn(move |_: u32| {
        std::future::ready(answer(counter.fetch_add(1, Ordering::Relaxed), failures))
    });
    let layered = paused(RobustLayer::new(policy).layer(service).oneshot(7));
    results.push((layered, attempts.load(Ordering::Relaxed)));
    results
}

fn with_jitter<B: Backoff + Clone + Send + Sync + 'static>(backoff: B, k: &Knobs) {
    match k.jitter {
        0 => run(backoff, NoJitter, k),
        1 => run(backoff, FullJitter, k),
        2 => run(backoff, EqualJitter, k),
        3 => run(backoff, Decorrelated, k),
        _ => run(backoff, AwsDecorrelated, k),
    }
}

fn check(k: &Knobs) {
    let [a, b, c] = k.d.map(|i| DURATIONS[i]);
    let [m, p] = k.f.map(|i| FACTORS[i]);
    // (A strategy its constructor refuses is a chain that never gets built.)
    match k.strategy {
        0 => with_jitter(NoBackoff, k),
        1 => with_jitter(Constant::new(a), k),
        2 => {
            if let Ok(s) = Exponential::new(a, b, m) {
                with_jitter(s, k)
            }
        }
        3 => {
            if let Ok(s) = Linear::with_interval(a, b, c) {
                with_jitter(s, k)
            }
        }
        4 => {
            if let Ok(s) = Fibonacci::new(a, b) {
                with_jitter(s, k)
            }
        }
        5 => {
            if let Ok(s) = Polynomial::new(a, b, [p, m]) {
                with_jitter(s, k)
            }
        }
        _ => {
            if let Ok(s) = Random::new(a, b) {
                with_jitter(s, k)
            }
        }
    }
}

#[test]
fn no_configuration_panics() {
    let config = ProptestConfig {
        cases: 10_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(k in knobs())| check(&k));
    // The generator reaches the calls, and their retries, often enough to mean something.
    let (tried, built, retried) = (
        TRIED.load(Ordering::Relaxed),
        BUILT.load(Ordering::Relaxed),
        RETRIED.load(Ordering::Relaxed),
    );
    let hedged = HEDGED.load(Ordering::Relaxed);
    eprintln!(
        "{tried} chains tried, {built} built and called ({hedged} hedged); {retried} calls retried"
    );
    assert!(hedged * 100 >= tried, "{hedged} hedged of {tried}");
    assert!(built * 10 >= tried, "{built} of {tried} built");
    assert!(retried * 20 >= tried, "{retried} of {tried} retried");
}
