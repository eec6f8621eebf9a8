//! `DynPolicy`: a policy behind one allocation decides exactly as the concrete policy it was
//! made from (delays, limits, kinds, callbacks, budget, breaker, timeouts), and can be stored,
//! cloned and shared across threads.

use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;
use common::*;

use retry_runtime::kind::Io;
use retry_runtime::time::VirtualTime;
use retry_runtime::{
    CircuitBreaker, DynPolicy, Exponential, FullJitter, Policy, RetryBudget, RetryInfo, RetryPolicy,
};

/// Runs `call` (which always fails with `kind`) on a fresh seeded virtual clock; returns the
/// attempts made, the delays slept and the error returned.
fn run(
    call: impl FnOnce(&dyn Fn() -> io::Result<()>) -> io::Result<()>,
    kind: ErrorKind,
) -> (u32, Vec<Duration>, ErrorKind) {
    let time = VirtualTime::seeded(11);
    let _guard = time.install();
    let attempts = AtomicU32::new(0);
    let body = || {
        attempts.fetch_add(1, Ordering::SeqCst);
        Err(io::Error::from(kind))
    };
    let err = call(&body).unwrap_err();
    (attempts.into_inner(), time.sleeps(), err.kind())
}

#[test]
fn a_dyn_policy_decides_as_its_policy() {
    let retried = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&retried);
    let make = || {
        let seen = Arc::clone(&seen);
        Policy::builder()
            .retries(4)
            .backoff(Exponential::new(ms(10), ms(200), 2.0).unwrap())
            .jitter(FullJitter)
            .on(Io::of([ErrorKind::ConnectionReset]))
            .on_retry(move |_: &io::Result<()>, info: &RetryInfo| {
                seen.lock().unwrap().push(info.retry)
            })
            .build()
            .unwrap()
    };
    let concrete = make();
    let dynamic = DynPolicy::new(make());
    for kind in [ErrorKind::ConnectionReset, ErrorKind::NotFound] {
        let a = run(|body| concrete.call(|_| body()), kind);
        let b = run(|body| dynamic.call(|_| body()), kind);
        assert_eq!(a, b, "{kind:?}");
    }
    // Retried: 5 attempts, 4 jittered delays within their bounds; not retried: 1 attempt.
    let (attempts, sleeps, _) = run(|body| dynamic.call(|_| body()), ErrorKind::ConnectionReset);
    assert_eq!(attempts, 5);
    for (x, d) in sleeps.iter().enumerate() {
        assert!(*d <= ms(10 << x), "retry {x}: {d:?}");
    }
    assert_eq!(
        run(|body| dynamic.call(|_| body()), ErrorKind::NotFound).0,
        1
    );
    // on_retry saw the same numbering through both: 1..=4, three times each way.
    let numbers = retried.lock().unwrap().clone();
    assert_eq!(numbers, [1, 2, 3, 4].repeat(3));
}

static BUDGET: RetryBudget = match RetryBudget::new(2.0, 0.0, 1.0) {
    Ok(b) => b,
    Err(_) => panic!("valid budget"),
};

#[test]
fn the_budget_is_the_policys_and_clones_share_it() {
    let policy = Policy::builder()
        .retries(10)
        .backoff(retry_runtime::NoBackoff)
        .budget(&BUDGET)
        .build()
        .unwrap();
    let a = DynPolicy::<_, io::Error>::new(policy);
    let b = a.clone();
    // Two tokens for both: the first call retries twice, the second not at all.
    assert_eq!(run(|body| a.call(|_| body()), ErrorKind::Other).0, 3);
    assert_eq!(run(|body| b.call(|_| body()), ErrorKind::Other).0, 1);
    assert_eq!(BUDGET.tokens(), 0.0);
}

#[test]
fn an_open_breaker_rejects_through_a_dyn_policy() {
    let breaker: &'static CircuitBreaker = Box::leak(Box::new(
        CircuitBreaker::new(4, 4, 0.5, Duration::from_secs(60), 1).unwrap(),
    ));
    let policy = Policy::builder()
        .retries(3)
        .backoff(retry_runtime::NoBackoff)
        .breaker(breaker)
        .build()
        .unwrap();
    let dynamic = DynPolicy::<_, io::Error>::new(policy);
    // Four failed attempts open it; the next call is rejected without running its body.
    assert_eq!(run(|body| dynamic.call(|_| body()), ErrorKind::Other).0, 4);
    let (attempts, _, kind) = run(|body| dynamic.call(|_| body()), ErrorKind::Other);
    assert_eq!(attempts, 0);
    assert_eq!(kind, io::Error::from(retry_runtime::Open::new()).kind());
}

#[test]
fn generic_code_takes_either() {
    fn attempts<P: RetryPolicy<(), io::Error>>(policy: &P) -> u32 {
        run(|body| policy.call(|_| body()), ErrorKind::Other).0
    }
    let make = || {
        Policy::builder()
            .retries(2)
            .backoff(retry_runtime::NoBackoff)
            .build()
            .unwrap()
    };
    assert_eq!(attempts(&make()), 3);
    assert_eq!(attempts(&DynPolicy::new(make())), 3);
}

#[test]
fn one_dyn_policy_serves_many_threads() {
    let policy = DynPolicy::<_, io::Error>::new(
        Policy::builder()
            .retries(3)
            .backoff(retry_runtime::NoBackoff)
            .build()
            .unwrap(),
    );
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let policy = policy.clone();
            s.spawn(move || {
                for i in 0..200u32 {
                    // Fails (t + i) % 5 times before succeeding: retried while within 3.
                    let fails = (t + i) % 5;
                    let mut n = 0;
                    let r = policy.call(|_| {
                        n += 1;
                        if n <= fails {
                            Err(io::Error::other("x"))
                        } else {
                            Ok(n)
                        }
                    });
                    if fails <= 3 {
                        assert_eq!(r.unwrap(), fails + 1);
                    } else {
                        assert!(r.is_err());
                        assert_eq!(n, 4);
                    }
                }
            });
        }
    });
}

#[tokio::test(start_paused = true)]
async fn async_calls_are_timed_and_back_off() {
    let policy = DynPolicy::<_, io::Error>::new(
        Policy::builder()
            .timeout(ms(100))
            .retries(2)
            .backoff(retry_runtime::Constant::new(ms(50)))
            .jitter(retry_runtime::NoJitter)
            .build()
            .unwrap(),
    );
    let start = tokio::time::Instant::now();
    let attempts = AtomicU32::new(0);
    let r: io::Result<()> = policy
        .call_async(|_| async {
            attempts.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(())
        })
        .await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(attempts.into_inner(), 3);
    // Three attempts cut at 100 ms, two backoffs of 50 ms.
    assert_eq!(start.elapsed(), ms(400));
}
