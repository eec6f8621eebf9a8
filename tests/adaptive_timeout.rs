//! Timeouts from measured latency (SPEC section 15b): `timeout = adaptive(p, factor, min, max)`
//! and `PolicyBuilder::adaptive_timeout`, on tokio's paused clock and on virtual time.

use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use retry_runtime::latency::Latencies;
use retry_runtime::time::VirtualTime;
use retry_runtime::timeout::Adaptive;
use retry_runtime::{NoBackoff, Policy, robust};
use tokio::time::Instant;

mod common;
use common::*;

static SEEN: std::sync::Mutex<Vec<Duration>> = std::sync::Mutex::new(Vec::new());

#[robust(timeout = adaptive(p = 99, factor = 2, min = 20ms, max = 2s), retries = 1,
         backoff = none, attempt = ctx)]
async fn fetch(wait: u64) -> io::Result<u32> {
    SEEN.lock().unwrap().push(ctx.timeout().unwrap());
    tokio::time::sleep(ms(wait)).await;
    Ok(ctx.retries())
}

#[tokio::test(start_paused = true)]
async fn the_timeout_starts_at_max_and_follows_the_latencies() {
    // No samples: every attempt gets `max`, and a 1.5 s attempt succeeds.
    let t0 = Instant::now();
    assert_eq!(fetch(1500).await.unwrap(), 0);
    assert_eq!(t0.elapsed(), ms(1500));
    assert_eq!(SEEN.lock().unwrap().pop(), Some(secs(2)));
    // p99 needs 500 samples; the percentile is recomputed every 64: 575 fast calls later
    // (576 samples with the first), the limit is 2 × p99 of ~10 ms.
    for _ in 0..575 {
        fetch(10).await.unwrap();
    }
    SEEN.lock().unwrap().clear();
    let t0 = Instant::now();
    let r = fetch(1500).await;
    // Both attempts are cut: 2 × 10 ms (10 ms rounded up to its bucket, 10.24 ms).
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    let limits = std::mem::take(&mut *SEEN.lock().unwrap());
    assert_eq!(limits.len(), 2);
    for l in &limits {
        assert!(*l >= ms(20) && *l <= Duration::from_micros(21_300), "{l:?}");
    }
    // (tokio's timer rounds each up to the next millisecond.)
    let took = t0.elapsed();
    assert!(
        took >= limits[0] + limits[1] && took <= limits[0] + limits[1] + ms(2),
        "{took:?}"
    );
}

#[robust(timeout = adaptive(p = 50, factor = 1, min = 100ms, max = 1s), retries = 0, attempt = ctx)]
fn blocking(latency: Duration, time: &VirtualTime) -> io::Result<Duration> {
    time.advance(latency);
    Ok(ctx.timeout().unwrap())
}

#[test]
fn a_blocking_fn_clamps_the_limit_to_min() {
    let time = VirtualTime::new();
    let ((), _) = on_virtual_time(None, || {
        assert_eq!(blocking(ms(1), &time).unwrap(), secs(1));
        for _ in 0..63 {
            blocking(ms(1), &time).unwrap();
        }
        // The median is 1 ms, below `min`: the limit is `min`.
        assert_eq!(blocking(ms(1), &time).unwrap(), ms(100));
    });
}

static MATCHED: Latencies = Latencies::new();

#[tokio::test(start_paused = true)]
async fn only_successes_are_recorded() {
    let policy = Policy::builder()
        .adaptive_timeout(Adaptive::new(&MATCHED, 90.0, 1.0, ms(1), secs(1)).unwrap())
        .on_ok(retry_runtime::kind::OkIf(|v: &u32| *v == 503))
        .retries(1)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    // An error, then a matched value (a failed attempt): neither is a latency to learn from.
    let r: io::Result<u32> = policy
        .call_async(|_| async {
            tokio::time::sleep(ms(5)).await;
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(ErrorKind::ConnectionReset.into())
            } else {
                Ok(503)
            }
        })
        .await;
    assert_eq!(r.unwrap(), 503);
    assert_eq!(MATCHED.samples(), 0);
    let r: io::Result<u32> = policy
        .call_async(|_| async {
            tokio::time::sleep(ms(5)).await;
            Ok(200)
        })
        .await;
    assert_eq!(r.unwrap(), 200);
    assert_eq!(MATCHED.samples(), 1);
}

#[test]
fn the_builder_validates_the_adaptive_timeout() {
    static L: Latencies = Latencies::new();
    let bad = [
        (0.0, 2.0, ms(1), secs(1), "p"),
        (100.0, 2.0, ms(1), secs(1), "p"),
        (0.99, 2.0, ms(1), secs(1), "p"), // a fraction: the 0.99th percentile
        (49.9, 2.0, ms(1), secs(1), "p"),
        (99.95, 2.0, ms(1), secs(1), "p"), // above what the window can tell
        (99.0, 0.5, ms(1), secs(1), "factor"),
        (99.0, f64::NAN, ms(1), secs(1), "factor"),
        (99.0, 2.0, Duration::ZERO, secs(1), "min"),
        (99.0, 2.0, secs(2), secs(1), "min"),
    ];
    for (p, f, lo, hi, which) in bad {
        assert_eq!(
            Adaptive::new(&L, p, f, lo, hi).unwrap_err().parameter(),
            which
        );
    }
    // Equal bounds stay allowed (the latencies are still recorded for their readers).
    assert!(Adaptive::new(&L, 50.0, 1.0, ms(1), ms(1)).is_ok());
}

#[robust(timeout = adaptive(p = 99.9, factor = 3, min = 10ms, max = 1s), deadline = 1500ms,
         retries = -1, backoff = none)]
async fn with_deadline() -> io::Result<()> {
    tokio::time::sleep(secs(10)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_deadline_still_bounds_the_call() {
    let t0 = Instant::now();
    let r = with_deadline().await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    // 1 s (max: no samples), then the 500 ms left.
    assert_eq!(t0.elapsed(), ms(1500));
}

/// An attempt the call's deadline cuts before its own timeout is not a latency: the first
/// attempt is cut by its timeout at 1 s (`max`: no samples yet) and counts as 1 s; the second
/// is cut by the 1.5 s deadline after 500 ms, which says nothing of the service's latency
/// (it was counted before, and pulled the percentile down). The same in a hedged round.
#[tokio::test(start_paused = true)]
async fn an_attempt_cut_by_the_calls_deadline_is_not_recorded() {
    static PLAIN: Latencies = Latencies::new();
    static HEDGED: Latencies = Latencies::new();
    let adaptive = |l| Adaptive::new(l, 99.0, 2.0, ms(10), secs(1)).unwrap();
    let base = || Policy::builder().retries(5).backoff(NoBackoff);
    let hang = |_| async {
        tokio::time::sleep(secs(10)).await;
        io::Result::Ok(())
    };
    let plain = base()
        .adaptive_timeout(adaptive(&PLAIN))
        .deadline(ms(1500))
        .build()
        .unwrap();
    let t0 = Instant::now();
    let r = plain.call_async(hang).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(t0.elapsed(), ms(1500));
    assert_eq!(PLAIN.samples(), 1, "only the attempt its own timeout cut");
    let hedged = base()
        .adaptive_timeout(adaptive(&HEDGED))
        .hedge(retry_runtime::hedge::Hedge::after(ms(100), 1).unwrap())
        .deadline(ms(1500))
        .build()
        .unwrap();
    let t0 = Instant::now();
    let r = hedged.call_async(hang).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(t0.elapsed(), ms(1500));
    // Round 1: the first attempt (0 to 1 s) and its hedge (100 ms to 1.1 s) are cut by their
    // timeouts; round 2 (1.1 s) is cut by the deadline at 1.5 s, hedge and all.
    assert_eq!(
        HEDGED.samples(),
        2,
        "only the attempts their own timeouts cut"
    );
}

/// The same when the adaptive limit shrinks while the attempt runs (other calls record fast
/// latencies): the second attempt, started at 1 s under a limit of 1 s (`max`), is cut by the
/// 1.5 s deadline; at 1.2 s, 1000 latencies of 1 ms bring the limit down to its 10 ms `min`.
/// The attempt is still not recorded. (It was before: its limit, read again when it ended,
/// put its own end at 1.01 s, before the deadline.)
#[tokio::test(start_paused = true)]
async fn an_attempt_cut_by_the_calls_deadline_is_not_recorded_when_the_limit_moved() {
    static SHRINKING: Latencies = Latencies::new();
    let policy = Policy::builder()
        .retries(5)
        .backoff(NoBackoff)
        .adaptive_timeout(Adaptive::new(&SHRINKING, 99.0, 2.0, ms(10), secs(1)).unwrap())
        .deadline(ms(1500))
        .build()
        .unwrap();
    let t0 = Instant::now();
    let call = policy.call_async(|_| async {
        tokio::time::sleep(secs(10)).await;
        io::Result::Ok(())
    });
    let others = async {
        tokio::time::sleep(ms(1200)).await;
        for _ in 0..1000 {
            SHRINKING.record(ms(1));
        }
    };
    let (r, ()) = tokio::join!(call, others);
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(t0.elapsed(), ms(1500));
    assert_eq!(
        SHRINKING.samples(),
        1 + 1000,
        "the first attempt (cut by its own timeout) and the others' latencies"
    );
}

/// A blocking attempt's timeout is cooperative: one that fails after 3 s, past both the call's
/// 1 s deadline and its own 2 s limit, ran that long, and is recorded (a slow service's
/// evidence), though the call's deadline was its deadline.
#[test]
fn a_blocking_attempt_that_overran_both_deadlines_is_recorded() {
    static BLOCKING: Latencies = Latencies::new();
    let time = VirtualTime::new();
    let policy = Policy::builder()
        .retries(0)
        .adaptive_timeout(Adaptive::new(&BLOCKING, 99.0, 2.0, ms(10), secs(2)).unwrap())
        .deadline(secs(1))
        .env(time.clone())
        .build()
        .unwrap();
    let r: io::Result<()> = policy.call(|_| {
        time.advance(secs(3));
        Err(ErrorKind::ConnectionReset.into())
    });
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(BLOCKING.samples(), 1);
}

/// A blocking attempt is judged by the limit it started with: started under a limit of about
/// 1.2 s (p99 of 600 ms latencies, doubled) and the call's 1 s deadline, it fails after 1.5 s,
/// past both, so it is a latency and is recorded, though other calls' latencies (recorded
/// while it ran) raised the limit to about 4 s, which it did not reach. (Read again when the
/// attempt ended, the limit put its own end after it, and the attempt was taken as cut by
/// the call's deadline and not recorded.)
#[test]
fn a_blocking_attempt_is_judged_by_the_limit_it_started_with() {
    static GROWING: Latencies = Latencies::new();
    for _ in 0..1000 {
        GROWING.record(ms(600));
    }
    let time = VirtualTime::new();
    let policy = Policy::builder()
        .retries(0)
        .adaptive_timeout(Adaptive::new(&GROWING, 99.0, 2.0, ms(10), secs(5)).unwrap())
        .deadline(secs(1))
        .env(time.clone())
        .build()
        .unwrap();
    let r: io::Result<Duration> = policy.call(|attempt| {
        let limit = attempt.timeout().unwrap();
        for _ in 0..4000 {
            GROWING.record(secs(2));
        }
        time.advance(ms(1500));
        Err(io::Error::other(format!("{limit:?}")))
    });
    let started_with = r.unwrap_err().to_string();
    assert_eq!(GROWING.samples(), 1000 + 4000 + 1);
    let limit_now = policy.call(|attempt| io::Result::Ok(attempt.timeout().unwrap()));
    let limit_now = limit_now.unwrap();
    assert!(
        started_with.starts_with("1.2") && limit_now > secs(3),
        "{started_with} then {limit_now:?}"
    );
}

#[robust(timeout = adaptive(p = 99, factor = 2, min = 5ms, max = 5s), retries = 0)]
async fn shifting(wait: u64) -> io::Result<()> {
    tokio::time::sleep(ms(wait)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_slower_service_raises_the_timeout_instead_of_being_cut_for_ever() {
    // The service answers in 10 ms: the limit settles at about 20 ms.
    for _ in 0..640 {
        shifting(10).await.unwrap();
    }
    // It slows down to 60 ms: the first calls are cut, and each cut attempt counts as a
    // latency of its limit (a lower bound), so the percentile, and the limit, rise.
    let mut cut = 0;
    for _ in 0..400 {
        if shifting(60).await.is_err() {
            cut += 1;
        }
    }
    assert!(cut > 0 && cut < 200, "{cut} of 400 calls cut");
    // Adapted: every call succeeds now.
    for _ in 0..100 {
        shifting(60).await.unwrap();
    }
}

/// The attribute's helpers in `retry_runtime::checks` are public (so that their messages name a
/// path): called by hand with values the attribute would refuse, they neither panic nor send
/// more than ten hedges a round.
#[test]
fn the_public_helpers_do_not_panic_on_values_the_attribute_refuses() {
    use retry_runtime::timeout::AttemptTimeout;
    static MEASURED: Latencies = Latencies::new();
    // `min` above `max`: the limit is `max` (a `clamp` would panic once samples exist).
    let upside_down =
        retry_runtime::checks::adaptive_timeout(&MEASURED, 99.0, 2.0, ms(900), ms(100));
    assert_eq!(upside_down.limit(), Some(ms(100)));
    // (p99 needs 500 samples, known at the refresh after them.)
    for _ in 0..512 {
        MEASURED.record(ms(300));
    }
    assert_eq!(
        MEASURED
            .percentile(retry_runtime::latency::Quantile::new(99.0).unwrap())
            .map(|p| p >= ms(300)),
        Some(true)
    );
    assert_eq!(upside_down.limit(), Some(ms(100)));
    // Out-of-range factors and percentiles fall back to a bound.
    for (p, factor) in [
        (f64::NAN, 2.0),
        (99.0, f64::NAN),
        (99.0, -1.0),
        (250.0, f64::INFINITY),
    ] {
        let odd = retry_runtime::checks::adaptive_timeout(&MEASURED, p, factor, ms(10), ms(2000));
        let limit = odd.limit().unwrap();
        assert!(
            (ms(10)..=ms(2000)).contains(&limit),
            "{p} {factor}: {limit:?}"
        );
    }
    // A hedge count outside 1..=10 is brought into it.
    assert_eq!(
        retry_runtime::checks::hedge_after(Duration::ZERO, u32::MAX).max(),
        10
    );
    assert_eq!(retry_runtime::checks::hedge_after(ms(5), 0).max(), 1);
    assert_eq!(
        retry_runtime::checks::hedge_percentile(&MEASURED, 95.0, 99).max(),
        10
    );
}
