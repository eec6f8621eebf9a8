//! Clocks and sleepers: where the retry loop reads time and waits.
//!
//! The loop never calls `Instant::now()` or sleeps directly; it asks its [`Env`]. The default,
//! [`DefaultEnv`], uses the tokio clock when the `tokio` feature is on (so tokio's paused clock
//! drives it in tests) and `std::thread::sleep` / `tokio::time::sleep` to wait. Tests and
//! simulations use [`VirtualTime`], where sleeping only advances a counter.

use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A source of the current time.
pub trait Clock {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// A way to wait in blocking code.
pub trait Sleep {
    /// Blocks the current thread for `d` (or, for a virtual clock, advances it).
    fn sleep(&self, d: Duration);
}

/// A way to wait in async code.
pub trait AsyncSleep {
    /// A future that completes after `d`.
    fn sleep_async(&self, d: Duration) -> impl Future<Output = ()> + Send;
}

/// Everything the retry loop needs from the outside world: a clock and sleepers.
///
/// Implemented for every type that is a [`Clock`] and a [`Sleep`]; async calls also need
/// [`AsyncSleep`].
pub trait Env: Clock + Sleep {}
impl<T: Clock + Sleep> Env for T {}

/// The real clock and real sleeping.
///
/// With the `tokio` feature, time is read from `tokio::time::Instant`, which follows tokio's
/// paused clock in tests and is the system's monotonic clock otherwise.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultEnv;

impl Clock for DefaultEnv {
    #[inline]
    fn now(&self) -> Instant {
        #[cfg(feature = "tokio")]
        {
            tokio::time::Instant::now().into_std()
        }
        #[cfg(not(feature = "tokio"))]
        {
            Instant::now()
        }
    }
}

impl Sleep for DefaultEnv {
    fn sleep(&self, d: Duration) {
        if !d.is_zero() {
            std::thread::sleep(d);
        }
    }
}

#[cfg(feature = "tokio")]
impl AsyncSleep for DefaultEnv {
    fn sleep_async(&self, d: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }
}

/// A virtual clock for tests and simulations: sleeping advances it instantly and records the
/// duration slept. Clones share the same clock.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::time::{Clock, Sleep, VirtualTime};
///
/// let time = VirtualTime::new();
/// let start = time.now();
/// time.sleep(Duration::from_secs(3));
/// assert_eq!(time.now() - start, Duration::from_secs(3));
/// assert_eq!(time.sleeps(), vec![Duration::from_secs(3)]);
/// ```
#[derive(Debug, Clone)]
pub struct VirtualTime {
    inner: Arc<Mutex<VirtualState>>,
}

#[derive(Debug)]
struct VirtualState {
    now: Instant,
    sleeps: Vec<Duration>,
}

impl Default for VirtualTime {
    fn default() -> Self {
        Self::new()
    }
}

impl VirtualTime {
    /// A new virtual clock, starting at the current real instant.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(VirtualState {
                now: Instant::now(),
                sleeps: Vec::new(),
            })),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, VirtualState> {
        // A poisoned lock only means another test thread panicked; the state is still valid.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the clock forward by `d` without recording a sleep (time spent in an attempt).
    pub fn advance(&self, d: Duration) {
        let mut s = self.state();
        s.now = s.now.checked_add(d).unwrap_or(s.now);
    }

    /// Every duration slept so far, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.state().sleeps.clone()
    }

    /// The sum of every duration slept so far.
    pub fn slept(&self) -> Duration {
        self.state()
            .sleeps
            .iter()
            .fold(Duration::ZERO, |a, d| a.saturating_add(*d))
    }
}

impl Clock for VirtualTime {
    fn now(&self) -> Instant {
        self.state().now
    }
}

impl Sleep for VirtualTime {
    fn sleep(&self, d: Duration) {
        let mut s = self.state();
        s.now = s.now.checked_add(d).unwrap_or(s.now);
        s.sleeps.push(d);
    }
}

impl AsyncSleep for VirtualTime {
    fn sleep_async(&self, d: Duration) -> impl Future<Output = ()> + Send {
        Sleep::sleep(self, d);
        std::future::ready(())
    }
}
