//! Heap allocations made by the retry loop, counted by a global allocator.
//!
//! The counter is per thread, so other test threads do not disturb it.

use std::cell::Cell;
use std::io::{self, ErrorKind};
use std::time::Duration;

use retry_runtime::kind::{Io, Timeout};
use retry_runtime::{NoBackoff, Policy};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::allocations;

#[test]
fn the_counter_sees_allocations() {
    let (_, n) = allocations(|| std::hint::black_box(vec![1u8; 16]));
    assert!(n >= 1, "the counting allocator is not installed");
}

#[test]
fn sync_success_path_does_not_allocate() {
    let p = Policy::builder()
        .timeout(Duration::from_secs(2))
        .retries(5)
        .on(Timeout)
        .when(Io::of([ErrorKind::ConnectionRefused]), |s| s.retries(0))
        .on_success(|| {})
        .on_error(|_: &io::Error, _| {})
        .build()
        .unwrap();
    let (r, n) = allocations(|| p.call(|_| Ok::<_, io::Error>(42)));
    assert_eq!(r.unwrap(), 42);
    assert_eq!(n, 0);
}

#[derive(Debug)]
struct Busy;

#[test]
fn sync_retry_path_does_not_allocate() {
    // (The default jitter, `FullJitter`, draws each delay: over `NoBackoff` it is 0.)
    let p = Policy::builder()
        .retries(3)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    let run = || {
        let mut n = 0;
        p.call(|_| {
            n += 1;
            if n < 4 { Err(Busy) } else { Ok(n) }
        })
    };
    // The first call on a thread initialises the thread's random generator (one allocation
    // per thread, by `rand`); every call after that allocates nothing.
    let _ = run();
    for _ in 0..10 {
        let (r, n) = allocations(run);
        assert_eq!(r.unwrap(), 4);
        assert_eq!(n, 0);
    }

    // With a fixed seed even the first call allocates nothing.
    let seeded = Policy::builder()
        .retries(3)
        .backoff(NoBackoff)
        .seed(9)
        .build()
        .unwrap();
    let (r, n) = allocations(|| {
        std::thread::scope(|s| {
            s.spawn(|| {
                allocations(|| {
                    let mut k = 0;
                    seeded.call(|_| {
                        k += 1;
                        if k < 4 { Err(Busy) } else { Ok(k) }
                    })
                })
            })
            .join()
            .unwrap()
        })
    });
    let _ = n; // spawning the thread allocates; only the inner count matters
    let (r, inner) = r;
    assert_eq!(r.unwrap(), 4);
    assert_eq!(inner, 0);
}

/// The async loop: measured on a current-thread runtime, inside one task.
#[test]
fn async_paths_allocations() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let plain = Policy::builder()
        .retries(3)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    let timed = Policy::builder()
        .retries(3)
        .backoff(NoBackoff)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    rt.block_on(async {
        // Warm up the thread's random generator (a jittered non-zero delay draws from it) and
        // tokio's timer wheel.
        let warm = Policy::builder()
            .retries(1)
            .backoff(retry_runtime::Constant::new(Duration::from_millis(1)))
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let _ = warm
            .call_async(|a| async move {
                if a.retries() < 1 {
                    Err(io::Error::from(ErrorKind::Other))
                } else {
                    Ok(())
                }
            })
            .await;

        let before = counting_alloc::allocated();
        let r: io::Result<u32> = plain.call_async(|_| async { Ok(1) }).await;
        let success_plain = counting_alloc::allocated() - before;
        assert_eq!(r.unwrap(), 1);
        assert_eq!(success_plain, 0, "async success path without timeout");

        let before = counting_alloc::allocated();
        let r: io::Result<u32> = timed.call_async(|_| async { Ok(1) }).await;
        let success_timed = counting_alloc::allocated() - before;
        assert_eq!(r.unwrap(), 1);
        assert_eq!(success_timed, 0, "async success path with a timeout");

        assert_eq!(
            allocated_by_three_failures(&plain).await,
            0,
            "async retry path (zero delay) without timeout"
        );

        let sleeping = Policy::builder()
            .retries(3)
            .backoff(retry_runtime::Constant::new(Duration::from_millis(5)))
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        assert_eq!(
            allocated_by_three_failures(&sleeping).await,
            0,
            "async retry path with timer sleeps and a timeout"
        );

        let sleeping_untimed = Policy::builder()
            .retries(3)
            .backoff(retry_runtime::Constant::new(Duration::from_millis(5)))
            .build()
            .unwrap();
        assert_eq!(
            allocated_by_three_failures(&sleeping_untimed).await,
            0,
            "async retry path with timer sleeps and no timeout"
        );
    });
}

/// The bytes `policy` allocates for an async call whose first three attempts fail and whose
/// fourth answers (checked).
async fn allocated_by_three_failures<P: retry_runtime::AsyncRetryPolicy<u32, io::Error>>(
    policy: &P,
) -> usize {
    let before = counting_alloc::allocated();
    let r: io::Result<u32> = policy
        .call_async(|a| async move {
            if a.retries() < 3 {
                Err(io::Error::from(ErrorKind::Other))
            } else {
                Ok(3)
            }
        })
        .await;
    let allocated = counting_alloc::allocated() - before;
    assert_eq!(r.unwrap(), 3);
    allocated
}

mod attribute {
    use super::*;
    use retry_runtime::robust;

    #[robust(timeout = "2s", retries = 5, backoff = exponential(base = 1, max = 60), jitter = full,
             on = [Timeout, Io], when(Io(ConnectionRefused), retries = 0),
             on_success = || {}, on_error = |_e: &io::Error, _n| {})]
    fn annotated(fail: &Cell<u32>) -> io::Result<u32> {
        if fail.get() > 0 {
            fail.set(fail.get() - 1);
            return Err(ErrorKind::ConnectionReset.into());
        }
        Ok(1)
    }

    #[robust(retries = 3, backoff = none)]
    async fn annotated_async(fail: &Cell<u32>) -> io::Result<u32> {
        if fail.get() > 0 {
            fail.set(fail.get() - 1);
            return Err(ErrorKind::ConnectionReset.into());
        }
        Ok(2)
    }

    #[robust(timeout = "2s", retries = 3, backoff = constant(base = "1ms"))]
    async fn annotated_async_timeout(fail: &Cell<u32>) -> io::Result<u32> {
        // (An await that is ready at once: the attempt answers at its first poll.)
        std::future::ready(()).await;
        if fail.get() > 0 {
            fail.set(fail.get() - 1);
            return Err(ErrorKind::ConnectionReset.into());
        }
        Ok(3)
    }

    #[robust(retries = 3, backoff = none)]
    fn retried(fail: &Cell<u32>) -> io::Result<u32> {
        if fail.get() > 0 {
            fail.set(fail.get() - 1);
            return Err(ErrorKind::ConnectionReset.into());
        }
        Ok(4)
    }

    #[test]
    fn annotated_sync_fn_does_not_allocate() {
        // Warm up the thread's random generator (one allocation per thread, by `rand`).
        let _ = retried(&Cell::new(3));
        let (r, n) = allocations(|| annotated(&Cell::new(0)));
        assert_eq!(r.unwrap(), 1);
        assert_eq!(n, 0, "success path with a timeout, rules and callbacks");
        let (r, n) = allocations(|| retried(&Cell::new(3)));
        assert_eq!(r.unwrap(), 4);
        assert_eq!(n, 0, "retry path");
    }

    #[test]
    fn annotated_async_fn_does_not_allocate() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let _ = annotated_async_timeout(&Cell::new(1)).await;
            let _ = annotated_async(&Cell::new(1)).await;
            for (fail, name) in [(0, "success"), (3, "retry")] {
                let before = counting_alloc::allocated();
                let r = annotated_async(&Cell::new(fail)).await;
                assert_eq!(r.unwrap(), 2);
                assert_eq!(counting_alloc::allocated() - before, 0, "{name} path");

                let before = counting_alloc::allocated();
                let r = annotated_async_timeout(&Cell::new(fail)).await;
                assert_eq!(r.unwrap(), 3);
                assert_eq!(
                    counting_alloc::allocated() - before,
                    0,
                    "{name} path with timeout"
                );
            }
        });
    }
}

mod boxed_timer {
    use super::*;
    use retry_runtime::robust;

    /// No timeout, a backoff that sleeps: the call's timer is allocated on its first backoff.
    #[robust(retries = 3, backoff = constant(base = "5ms"), jitter = none)]
    async fn sleeps_between_attempts(fail: &Cell<u32>) -> io::Result<u32> {
        if fail.get() > 0 {
            fail.set(fail.get() - 1);
            return Err(ErrorKind::ConnectionReset.into());
        }
        Ok(5)
    }

    #[test]
    fn an_async_fn_without_timeout_allocates_its_timer_once_when_it_first_sleeps() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let _ = sleeps_between_attempts(&Cell::new(1)).await;
            for (fail, expected) in [(0, 0), (1, 1), (3, 1)] {
                let before = counting_alloc::allocated();
                let r = sleeps_between_attempts(&Cell::new(fail)).await;
                assert_eq!(r.unwrap(), 5);
                assert_eq!(
                    counting_alloc::allocated() - before,
                    expected,
                    "{fail} failures: one timer for the whole call, none on success"
                );
            }
        });
    }
}

/// The success path with a guard (SPEC 16): a concurrency limit that has a free slot and an
/// adaptive throttle that does not reject allocate nothing, blocking or async.
mod guards {
    use super::*;
    use retry_runtime::{AdaptiveThrottle, ConcurrencyLimit, robust};

    static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(4, 4) {
        Ok(l) => l,
        Err(_) => panic!("invalid limit"),
    };

    static THROTTLE: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
        Ok(t) => t,
        Err(_) => panic!("invalid throttle"),
    };

    #[robust(retries = 3, limit = LIMIT)]
    fn limited() -> io::Result<u32> {
        Ok(1)
    }

    #[robust(retries = 3, throttle = THROTTLE)]
    fn throttled() -> io::Result<u32> {
        Ok(2)
    }

    #[robust(retries = 3, limit = LIMIT)]
    async fn limited_async() -> io::Result<u32> {
        Ok(3)
    }

    #[robust(retries = 3, throttle = THROTTLE)]
    async fn throttled_async() -> io::Result<u32> {
        Ok(4)
    }

    #[test]
    fn a_guarded_blocking_success_does_not_allocate() {
        // Warm up the thread's random generator (the throttle's draw; one allocation per
        // thread, by `rand`).
        let _ = throttled();
        for _ in 0..10 {
            let (r, n) = allocations(limited);
            assert_eq!(r.unwrap(), 1);
            assert_eq!(n, 0, "success with a concurrency limit");
            let (r, n) = allocations(throttled);
            assert_eq!(r.unwrap(), 2);
            assert_eq!(n, 0, "success with an adaptive throttle");
        }
    }

    #[test]
    fn a_guarded_async_success_does_not_allocate() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let _ = throttled_async().await;
            let _ = limited_async().await;
            for _ in 0..10 {
                let before = counting_alloc::allocated();
                let r = limited_async().await;
                assert_eq!(r.unwrap(), 3);
                let n = counting_alloc::allocated() - before;
                assert_eq!(n, 0, "async success with a concurrency limit");

                let before = counting_alloc::allocated();
                let r = throttled_async().await;
                assert_eq!(r.unwrap(), 4);
                let n = counting_alloc::allocated() - before;
                assert_eq!(n, 0, "async success with an adaptive throttle");
            }
        });
    }

    #[robust(retries = 3, hedge(after = 50ms, max = 2))]
    async fn hedged_async() -> io::Result<u32> {
        // (An await that is ready at once: the attempt answers at its first poll. A body
        // that never awaits is refused beside a hedge.)
        std::future::ready(()).await;
        Ok(5)
    }

    #[robust(retries = 3, hedge(after = p95), timeout = adaptive(p = 99, min = 1ms, max = 1s))]
    async fn hedged_adaptive_async() -> io::Result<u32> {
        // (An await that is ready at once: the attempt answers at its first poll.)
        std::future::ready(()).await;
        Ok(6)
    }

    /// Waits (tokio's paused clock) before answering, under the `after` delay: the round is
    /// set up (its timer armed, its clock read) and no hedge is sent.
    #[robust(retries = 3, hedge(after = 50ms, max = 2))]
    async fn hedged_slow_async() -> io::Result<u32> {
        tokio::time::sleep(Duration::from_millis(10)).await;
        Ok(7)
    }

    #[robust(retries = 3, hedge(after = p95), timeout = adaptive(p = 99, min = 1ms, max = 1s))]
    async fn hedged_adaptive_slow_async() -> io::Result<u32> {
        tokio::time::sleep(Duration::from_millis(10)).await;
        Ok(8)
    }

    #[test]
    fn a_hedged_async_success_without_a_hedge_does_not_allocate() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..100 {
                let before = counting_alloc::allocated();
                assert_eq!(hedged_async().await.unwrap(), 5);
                assert_eq!(hedged_adaptive_async().await.unwrap(), 6);
                let n = counting_alloc::allocated() - before;
                assert_eq!(n, 0, "hedged success, no hedge sent");
            }
            // The same when the attempt waits first (the warm-up lets tokio's timer wheel
            // grow once, and gives the percentile its 100 samples: it is known from the
            // refresh at 128, about 10.24 ms, so its hedge is armed and does not fire).
            let _ = hedged_slow_async().await;
            for _ in 0..128 {
                let _ = hedged_adaptive_slow_async().await;
            }
            for _ in 0..100 {
                let before = counting_alloc::allocated();
                assert_eq!(hedged_slow_async().await.unwrap(), 7);
                assert_eq!(hedged_adaptive_slow_async().await.unwrap(), 8);
                let n = counting_alloc::allocated() - before;
                assert_eq!(n, 0, "hedged success after a wait, no hedge sent");
            }
        });
    }
}

/// `RobustLayer`'s response future (feature `tower`), held by an `Arc` or a `&'static`
/// reference: a success allocates nothing, with or without a timeout (a timed policy keeps its
/// timer in the future); a request retried twice allocates once per backoff sleep, once for
/// its retries' state (made by the first retry, reused by the next), and nothing else: with a
/// `max_delay` and no timeout too, whose retries make no timer when their service is ready at
/// once.
#[test]
fn tower_layer_allocations() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use retry_runtime::tower::RobustLayer;
    use tower::{Layer, Service, ServiceExt};

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let untimed = || {
        Policy::builder()
            .retries(3)
            .backoff(retry_runtime::Constant::new(Duration::from_millis(5)))
            .build()
            .unwrap()
    };
    let bounded = || {
        Policy::builder()
            .retries(3)
            .backoff(retry_runtime::Constant::new(Duration::from_millis(5)))
            .max_delay(Duration::from_secs(10))
            .build()
            .unwrap()
    };
    let timed = || {
        Policy::builder()
            .retries(3)
            .backoff(retry_runtime::Constant::new(Duration::from_millis(5)))
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    };
    // A service whose calls fail while `failing` is above zero (counting it down).
    let failing = Arc::new(AtomicU32::new(0));
    let left = Arc::clone(&failing);
    let svc = tower::service_fn(move |n: u32| {
        let fail = left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(1))
            .is_ok();
        std::future::ready(if fail {
            Err(io::Error::from(ErrorKind::ConnectionReset))
        } else {
            Ok(n)
        })
    });
    /// The allocations of a request through `client` whose first `fails` attempts fail.
    async fn measured<S>(client: &mut S, failing: &AtomicU32, fails: u32) -> usize
    where
        S: Service<u32, Response = u32, Error = io::Error>,
    {
        // Warm-up: tokio's timer wheel and the thread's random generator.
        failing.store(1, Ordering::SeqCst);
        client.ready().await.unwrap().call(1).await.unwrap();
        failing.store(fails, Ordering::SeqCst);
        let before = counting_alloc::allocated();
        let r = client.ready().await.unwrap().call(7).await;
        let n = counting_alloc::allocated() - before;
        assert_eq!(r.unwrap(), 7);
        n
    }
    rt.block_on(async {
        let mut shared_untimed = RobustLayer::new(untimed()).layer(svc.clone());
        let mut shared_timed = RobustLayer::new(timed()).layer(svc.clone());
        let mut static_untimed =
            RobustLayer::from_static(Box::leak(Box::new(untimed()))).layer(svc.clone());
        let mut static_timed =
            RobustLayer::from_static(Box::leak(Box::new(timed()))).layer(svc.clone());
        let mut shared_bounded = RobustLayer::new(bounded()).layer(svc.clone());
        for fails in [0, 2] {
            // One box per sleep, and one for the retries' state.
            let sleeps = fails as usize + usize::from(fails > 0);
            let counts = [
                measured(&mut shared_untimed, &failing, fails).await,
                measured(&mut shared_timed, &failing, fails).await,
                measured(&mut static_untimed, &failing, fails).await,
                measured(&mut static_timed, &failing, fails).await,
                measured(&mut shared_bounded, &failing, fails).await,
            ];
            assert_eq!(
                counts, [sleeps; 5],
                "{fails} failures: Arc, Arc timed, static, static timed, Arc with max_delay"
            );
        }
    });
}
