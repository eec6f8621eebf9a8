//! The async retry loop on tokio's paused clock: virtual time, no real waiting.

use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

mod common;
use common::*;

use retry_runtime::kind::{Io, Timeout};
use retry_runtime::{Constant, Elapsed, Exponential, NoBackoff, NoJitter, Policy};
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn sleeps_the_computed_delays_on_the_tokio_timer() {
    let p = Policy::builder()
        .retries(4)
        .backoff(Exponential::new(secs(1), secs(60), 2.0).unwrap())
        .jitter(NoJitter)
        .build()
        .unwrap();
    let start = Instant::now();
    let stamps = Mutex::new(Vec::new());
    let r: io::Result<()> = p
        .call_async(|_| {
            stamps.lock().unwrap().push(start.elapsed());
            async { Err(ErrorKind::Other.into()) }
        })
        .await;
    assert!(r.is_err());
    assert_eq!(
        *stamps.lock().unwrap(),
        [secs(0), secs(1), secs(3), secs(7), secs(15)]
    );
}

/// Sets its flag when dropped.
struct DropGuard(Arc<AtomicBool>);
impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_is_cancelled_and_fails_as_timeout() {
    let p = Policy::builder()
        .timeout(secs(1))
        .retries(1)
        .backoff(NoBackoff)
        .on(Timeout)
        .build()
        .unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let errors = Mutex::new(Vec::new());
    let r: io::Result<u32> = p
        .call_async(|a| {
            let guard = DropGuard(dropped.clone());
            let finished = finished.clone();
            let dropped = dropped.clone();
            let errors = &errors;
            async move {
                if a.retries() == 0 {
                    tokio::time::sleep(secs(10)).await;
                    finished.store(true, Ordering::SeqCst);
                    drop(guard);
                    return Ok(0);
                }
                // Second attempt: the first one's future must already be gone.
                errors.lock().unwrap().push(dropped.load(Ordering::SeqCst));
                Ok(1)
            }
        })
        .await;
    assert_eq!(r.unwrap(), 1);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the timed-out future was not dropped"
    );
    assert!(
        !finished.load(Ordering::SeqCst),
        "the timed-out future ran to completion"
    );
    assert_eq!(*errors.lock().unwrap(), [true]);
    assert_eq!(start.elapsed(), secs(1));
}

#[tokio::test(start_paused = true)]
async fn the_timeout_error_is_built_from_elapsed() {
    let p = Policy::builder()
        .timeout(Duration::from_millis(100))
        .retries(2)
        .backoff(Constant::new(secs(1)))
        .jitter(NoJitter)
        .build()
        .unwrap();
    let start = Instant::now();
    let r: io::Result<()> = p
        .call_async(|_| async {
            tokio::time::sleep(secs(60)).await;
            Ok(())
        })
        .await;
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert!(e.get_ref().is_some_and(|inner| inner.is::<Elapsed>()));
    // 3 attempts of 100 ms and 2 sleeps of 1 s.
    assert_eq!(start.elapsed(), Duration::from_millis(2300));

    // Boxed errors get `From<Elapsed>` through `std::error::Error`.
    let r: Result<(), Box<dyn std::error::Error + Send + Sync>> = p
        .call_async(|_| async {
            tokio::time::sleep(secs(60)).await;
            Ok(())
        })
        .await;
    assert!(r.unwrap_err().is::<Elapsed>());
}

#[tokio::test(start_paused = true)]
async fn timeouts_and_io_errors_follow_their_own_rules() {
    let p = Policy::builder()
        .timeout(secs(1))
        .retries(5)
        .backoff(NoBackoff)
        .on(Io::ANY)
        .when(Timeout, |s| s.retries(1))
        .build()
        .unwrap();
    let attempts = AtomicU32::new(0);
    let r: io::Result<()> = p
        .call_async(|_| {
            attempts.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(secs(2)).await;
                Ok(())
            }
        })
        .await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn success_calls_on_success_once_and_returns_the_value() {
    let successes = AtomicU32::new(0);
    let p = Policy::builder()
        .timeout(secs(1))
        .on_success(|| {
            successes.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let r: io::Result<&str> = p.call_async(|_| async { Ok("ok") }).await;
    assert_eq!(r.unwrap(), "ok");
    assert_eq!(successes.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_future_is_send_and_calls_are_independent() {
    type Shared = retry_runtime::Policy<
        (),
        retry_runtime::kind::AnyError,
        retry_runtime::policy::settings::RuleSettings<NoBackoff, retry_runtime::FullJitter>,
        retry_runtime::timeout::PerAttempt,
    >;
    static POLICY: std::sync::LazyLock<Shared> = std::sync::LazyLock::new(|| {
        Policy::builder()
            .retries(3)
            .backoff(NoBackoff)
            .timeout(secs(5))
            .build()
            .unwrap()
    });
    let mut handles = Vec::new();
    for i in 0..16u32 {
        handles.push(tokio::spawn(async move {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let s = seen.clone();
            let r: io::Result<u32> = POLICY
                .call_async(move |a| {
                    s.lock().unwrap().push(a.retries());
                    async move {
                        tokio::task::yield_now().await;
                        if a.retries() < i % 4 {
                            Err(ErrorKind::Other.into())
                        } else {
                            Ok(i)
                        }
                    }
                })
                .await;
            (r.unwrap(), seen.lock().unwrap().clone())
        }));
    }
    for (i, h) in handles.into_iter().enumerate() {
        let (v, seen) = h.await.unwrap();
        assert_eq!(v, i as u32);
        assert_eq!(seen, (0..=(i as u32 % 4)).collect::<Vec<_>>());
    }
}

/// A retry with no wait makes no timer: `NoBackoff` works on a runtime whose timer is not
/// enabled (it panicked there: "timers are disabled"), as the attribute's loop does.
#[test]
fn a_zero_backoff_needs_no_timer() {
    let p = Policy::builder()
        .retries(3)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let r: io::Result<u32> = rt.block_on(p.call_async(|_| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if n < 2 {
                Err(ErrorKind::Other.into())
            } else {
                Ok(n)
            }
        }
    }));
    assert_eq!(r.unwrap(), 2);
}
