//! The functions the benchmarks compare: the same body called directly, under `#[robust]`,
//! in a hand-written retry loop with the same settings, and under backon.
//!
//! Settings everywhere: 3 retries, exponential backoff 100 ms .. 20 s with m = 2 and full
//! jitter (the attribute's defaults), a 2 s per-attempt timeout for the async functions.
//! The retry-path variants use no backoff (zero delay) so that only the loop is measured.

use std::cell::Cell;
use std::hint::black_box;
use std::io::{self, ErrorKind};
use std::time::Duration;

use backon::{BlockingRetryable, ConstantBuilder, ExponentialBuilder, Retryable};
use rand::RngExt;
use rand::rngs::SmallRng;
use retry_runtime::robust;

/// The body: a little arithmetic the optimiser cannot see through.
#[inline(never)]
pub fn body(x: u64) -> io::Result<u64> {
    Ok(black_box(x).wrapping_mul(3).rotate_left(7))
}

/// The body, async.
#[inline(never)]
pub async fn body_async(x: u64) -> io::Result<u64> {
    Ok(black_box(x).wrapping_mul(3).rotate_left(7))
}

/// A body that fails while `fails` is above zero.
#[inline(never)]
pub fn flaky(x: u64, fails: &Cell<u32>) -> io::Result<u64> {
    if fails.get() > 0 {
        fails.set(fails.get() - 1);
        return Err(ErrorKind::ConnectionReset.into());
    }
    body(x)
}

// --- sync success path -----------------------------------------------------------------------

/// `#[robust]` with the default settings written out.
#[robust(retries = 3, backoff = exponential(base = "100ms", max = "20s", m = 2), jitter = full)]
pub fn robust_sync(x: u64) -> io::Result<u64> {
    body(x)
}

const BASE: Duration = Duration::from_millis(100);
const MAX: Duration = Duration::from_secs(20);

/// The same settings, written by hand.
pub fn hand_sync(x: u64) -> io::Result<u64> {
    let mut retries = 0u32;
    let mut rng: Option<SmallRng> = None;
    loop {
        match body(x) {
            Ok(v) => return Ok(v),
            Err(e) if retries >= 3 => return Err(e),
            Err(_) => {
                let v = BASE.saturating_mul(1 << retries.min(31)).min(MAX);
                let rng = rng.get_or_insert_with(rand::make_rng);
                let d = Duration::from_nanos(rng.random_range(0..=v.as_nanos() as u64));
                std::thread::sleep(d);
                retries += 1;
            }
        }
    }
}

fn backon_exponential() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(BASE)
        .with_max_delay(MAX)
        .with_factor(2.0)
        .with_jitter()
        .with_max_times(3)
}

/// The same settings with backon's blocking retry.
pub fn backon_sync(x: u64) -> io::Result<u64> {
    (|| body(x))
        .retry(backon_exponential())
        .sleep(std::thread::sleep)
        .call()
}

// --- async success path with a 2 s timeout ---------------------------------------------------

const TIMEOUT: Duration = Duration::from_secs(2);

/// `#[robust]` with a per-attempt timeout.
#[robust(timeout = "2s", retries = 3, backoff = exponential(base = "100ms", max = "20s", m = 2), jitter = full)]
pub async fn robust_async(x: u64) -> io::Result<u64> {
    body_async(x).await
}

/// `#[robust]` without a timeout, for the future's size against the body alone.
#[robust(retries = 3, backoff = exponential(base = "100ms", max = "20s", m = 2), jitter = full)]
pub async fn robust_async_plain(x: u64) -> io::Result<u64> {
    body_async(x).await
}

/// `tokio::time::timeout` written by hand (no retry at all).
pub async fn hand_timeout(x: u64) -> io::Result<u64> {
    tokio::time::timeout(TIMEOUT, body_async(x)).await?
}

/// backon with the same timeout around each attempt.
pub async fn backon_async(x: u64) -> io::Result<u64> {
    (|| async { tokio::time::timeout(TIMEOUT, body_async(x)).await? })
        .retry(backon_exponential())
        .await
}

// --- retry path: the first two attempts fail, no backoff --------------------------------------

/// `#[robust]`, no backoff.
#[robust(retries = 3, backoff = none, jitter = none)]
pub fn robust_retry(x: u64, fails: &Cell<u32>) -> io::Result<u64> {
    flaky(x, fails)
}

/// A hand-written loop, no backoff.
pub fn hand_retry(x: u64, fails: &Cell<u32>) -> io::Result<u64> {
    let mut retries = 0u32;
    loop {
        match flaky(x, fails) {
            Ok(v) => return Ok(v),
            Err(e) if retries >= 3 => return Err(e),
            Err(_) => retries += 1,
        }
    }
}

/// backon, zero constant delay.
pub fn backon_retry(x: u64, fails: &Cell<u32>) -> io::Result<u64> {
    (|| flaky(x, fails))
        .retry(
            ConstantBuilder::default()
                .with_delay(Duration::ZERO)
                .with_max_times(3),
        )
        .sleep(std::thread::sleep)
        .call()
}

/// The async body of the retry path under `#[robust]`.
#[robust(retries = 3, backoff = none, jitter = none)]
pub async fn robust_retry_async(x: u64, fails: &Cell<u32>) -> io::Result<u64> {
    flaky(x, fails)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_computes_the_same_value() {
        let want = body(5).unwrap();
        assert_eq!(robust_sync(5).unwrap(), want);
        assert_eq!(hand_sync(5).unwrap(), want);
        assert_eq!(backon_sync(5).unwrap(), want);
        for f in [robust_retry, hand_retry, backon_retry] {
            let fails = Cell::new(2);
            assert_eq!(f(5, &fails).unwrap(), want);
            assert_eq!(fails.get(), 0);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(robust_async(5).await.unwrap(), want);
            assert_eq!(hand_timeout(5).await.unwrap(), want);
            assert_eq!(backon_async(5).await.unwrap(), want);
            assert_eq!(robust_retry_async(5, &Cell::new(2)).await.unwrap(), want);
        });
    }
}

// --- sync success path with a kind list -------------------------------------------------------

/// A body the optimiser cannot prove always succeeds: it fails for one input.
#[inline(never)]
pub fn fallible(x: u64) -> io::Result<u64> {
    let x = black_box(x);
    if x == u64::MAX {
        return Err(ErrorKind::ConnectionReset.into());
    }
    Ok(x.wrapping_mul(3).rotate_left(7))
}

/// `#[robust]` retrying only I/O errors.
#[robust(retries = 3, on = [Io])]
pub fn robust_sync_io(x: u64) -> io::Result<u64> {
    fallible(x)
}

/// The same, by hand: the error's kind is looked at only when there is an error.
pub fn hand_sync_io(x: u64) -> io::Result<u64> {
    let mut retries = 0u32;
    let mut rng: Option<SmallRng> = None;
    loop {
        match fallible(x) {
            Ok(v) => return Ok(v),
            Err(e) if retries >= 3 => return Err(e),
            Err(e)
                if (&e as &dyn std::error::Error)
                    .downcast_ref::<io::Error>()
                    .is_none() =>
            {
                return Err(e);
            }
            Err(_) => {
                let v = BASE.saturating_mul(1 << retries.min(31)).min(MAX);
                let rng = rng.get_or_insert_with(rand::make_rng);
                let d = Duration::from_nanos(rng.random_range(0..=v.as_nanos() as u64));
                std::thread::sleep(d);
                retries += 1;
            }
        }
    }
}

/// [`fallible`], async.
#[inline(never)]
pub async fn fallible_async(x: u64) -> io::Result<u64> {
    fallible(x)
}

/// `#[robust]` with a 2 s timeout, retrying only I/O errors.
#[robust(timeout = "2s", retries = 3, on = [Io])]
pub async fn robust_async_io(x: u64) -> io::Result<u64> {
    fallible_async(x).await
}

/// The same by hand: `tokio::time::timeout` around each attempt, the error's kind looked at
/// only when there is an error.
pub async fn hand_async_io(x: u64) -> io::Result<u64> {
    let mut retries = 0u32;
    loop {
        match tokio::time::timeout(TIMEOUT, fallible_async(x)).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) if retries >= 3 => return Err(e),
            Ok(Err(e))
                if (&e as &dyn std::error::Error)
                    .downcast_ref::<io::Error>()
                    .is_none() =>
            {
                return Err(e);
            }
            Err(elapsed) if retries >= 3 => return Err(elapsed.into()),
            _ => {
                let v = BASE.saturating_mul(1 << retries.min(31)).min(MAX);
                let d = Duration::from_nanos(rand::rng().random_range(0..=v.as_nanos() as u64));
                tokio::time::sleep(d).await;
                retries += 1;
            }
        }
    }
}

/// `#[robust]` without a timeout, retrying only I/O errors.
#[robust(retries = 3, on = [Io])]
pub async fn robust_async_plain_io(x: u64) -> io::Result<u64> {
    fallible_async(x).await
}

/// The same by hand, without a timeout.
pub async fn hand_async_plain_io(x: u64) -> io::Result<u64> {
    let mut retries = 0u32;
    loop {
        match fallible_async(x).await {
            Ok(v) => return Ok(v),
            Err(e) if retries >= 3 => return Err(e),
            Err(e)
                if (&e as &dyn std::error::Error)
                    .downcast_ref::<io::Error>()
                    .is_none() =>
            {
                return Err(e);
            }
            Err(_) => {
                let v = BASE.saturating_mul(1 << retries.min(31)).min(MAX);
                let d = Duration::from_nanos(rand::rng().random_range(0..=v.as_nanos() as u64));
                tokio::time::sleep(d).await;
                retries += 1;
            }
        }
    }
}

// --- success path with a guard (SPEC 16) ------------------------------------------------------

use retry_runtime::{AdaptiveThrottle, ConcurrencyLimit};

/// The concurrency limit of the guarded variants: never full in the benchmarks.
pub static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(64, 64) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};

/// The adaptive throttle of the guarded variants: every attempt succeeds, so it never rejects.
pub static THROTTLE: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    Ok(t) => t,
    Err(_) => panic!("invalid throttle"),
};

/// A local breaker and budget, the baseline of the fleet's shared ones.
pub static LOCAL_BREAKER: std::sync::LazyLock<retry_runtime::CircuitBreaker> =
    std::sync::LazyLock::new(|| {
        retry_runtime::CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1)
            .expect("a valid breaker")
    });
/// See [`LOCAL_BREAKER`].
pub static LOCAL_BUDGET: std::sync::LazyLock<retry_runtime::RetryBudget> =
    std::sync::LazyLock::new(|| retry_runtime::RetryBudget::new(100.0, 0.1, 1.0).expect("valid"));

static STORE: std::sync::LazyLock<retry_runtime::guard::fleet::MemoryStore> =
    std::sync::LazyLock::new(retry_runtime::guard::fleet::MemoryStore::new);
/// A fleet on the embedded store, syncing in the background every 200 ms as on Redis (the
/// hot path is the same: it never touches the store).
static FLEET: std::sync::LazyLock<retry_runtime::guard::fleet::Fleet> =
    std::sync::LazyLock::new(|| {
        retry_runtime::guard::fleet::Fleet::in_memory(
            &STORE,
            retry_runtime::guard::fleet::FleetOptions::new(),
        )
        .expect("valid options")
    });
/// A breaker shared by the fleet (same local settings as [`LOCAL_BREAKER`]).
pub static SHARED_BREAKER: std::sync::LazyLock<retry_runtime::guard::fleet::SharedBreaker> =
    std::sync::LazyLock::new(|| {
        let local = retry_runtime::CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1)
            .expect("a valid breaker");
        FLEET
            .breaker("bench", local, Duration::from_secs(10), 20)
            .expect("a valid breaker")
    });
/// A budget shared by the fleet (same settings as [`LOCAL_BUDGET`]).
pub static SHARED_BUDGET: std::sync::LazyLock<retry_runtime::guard::fleet::SharedBudget> =
    std::sync::LazyLock::new(|| {
        let fleet = retry_runtime::RetryBudget::new(100.0, 0.1, 1.0).expect("valid");
        let fallback = retry_runtime::RetryBudget::new(5.0, 0.1, 1.0).expect("valid");
        FLEET
            .budget("bench", fleet, fallback)
            .expect("a valid budget")
    });

/// `#[robust]` with a local breaker and budget.
#[robust(retries = 3, breaker = LOCAL_BREAKER, budget = LOCAL_BUDGET)]
pub fn guard_local_pair(x: u64) -> io::Result<u64> {
    body(x)
}

/// `#[robust]` with a breaker and a budget shared by a fleet.
#[robust(retries = 3, breaker = SHARED_BREAKER, budget = SHARED_BUDGET)]
pub fn guard_shared_pair(x: u64) -> io::Result<u64> {
    body(x)
}

/// `#[robust]` with no guard, the baseline of the guarded variants.
#[robust(retries = 3)]
pub fn guard_none(x: u64) -> io::Result<u64> {
    body(x)
}

/// `#[robust]` with a concurrency limit.
#[robust(retries = 3, limit = LIMIT)]
pub fn guard_limit(x: u64) -> io::Result<u64> {
    body(x)
}

/// `#[robust]` with an adaptive throttle.
#[robust(retries = 3, throttle = THROTTLE)]
pub fn guard_throttle(x: u64) -> io::Result<u64> {
    body(x)
}

/// `#[robust]` with no guard, async.
#[robust(retries = 3)]
pub async fn guard_none_async(x: u64) -> io::Result<u64> {
    body_async(x).await
}

/// `#[robust]` with a concurrency limit, async.
#[robust(retries = 3, limit = LIMIT)]
pub async fn guard_limit_async(x: u64) -> io::Result<u64> {
    body_async(x).await
}

/// `#[robust]` with hedging after a fixed delay, async (the body answers at once: no hedge).
#[robust(retries = 3, hedge(after = 50ms))]
pub async fn guard_hedge_async(x: u64) -> io::Result<u64> {
    body_async(x).await
}

/// `#[robust]` with hedging after the fn's p95, async (no hedge: the body answers at once).
#[robust(retries = 3, hedge(after = p95))]
pub async fn guard_hedge_p95_async(x: u64) -> io::Result<u64> {
    body_async(x).await
}

/// `#[robust]` with a fixed timeout, async: the baseline of the adaptive one.
#[robust(retries = 3, timeout = 2s)]
pub async fn guard_timeout_async(x: u64) -> io::Result<u64> {
    body_async(x).await
}

/// `#[robust]` with an adaptive timeout, async.
#[robust(retries = 3, timeout = adaptive(p = 99, factor = 2, min = 10ms, max = 2s))]
pub async fn guard_adaptive_async(x: u64) -> io::Result<u64> {
    body_async(x).await
}

/// `#[robust]` with an adaptive throttle, async.
#[robust(retries = 3, throttle = THROTTLE)]
pub async fn guard_throttle_async(x: u64) -> io::Result<u64> {
    body_async(x).await
}

#[cfg(test)]
mod guard_tests {
    use super::*;

    #[test]
    fn guarded_variants_compute_the_same_value_and_release_their_slot() {
        let want = body(5).unwrap();
        for f in [guard_none, guard_limit, guard_throttle] {
            assert_eq!(f(5).unwrap(), want);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(guard_none_async(5).await.unwrap(), want);
            assert_eq!(guard_limit_async(5).await.unwrap(), want);
            assert_eq!(guard_throttle_async(5).await.unwrap(), want);
            assert_eq!(guard_hedge_async(5).await.unwrap(), want);
            assert_eq!(guard_hedge_p95_async(5).await.unwrap(), want);
            assert_eq!(guard_timeout_async(5).await.unwrap(), want);
            assert_eq!(guard_adaptive_async(5).await.unwrap(), want);
            assert_eq!(guard_local_pair(5).unwrap(), want);
            assert_eq!(guard_shared_pair(5).unwrap(), want);
        });
        assert_eq!((LIMIT.in_flight(), LIMIT.queued()), (0, 0));
        assert_eq!(THROTTLE.reject_probability(std::time::Instant::now()), 0.0);
    }
}
