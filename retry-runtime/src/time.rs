//! Clocks and sleepers: where the retry loop reads time and waits.
//!
//! The loop never calls `Instant::now()` or sleeps directly; it asks its [`Env`]. Each loop
//! reads the clock that agrees with the way it waits, so that time spent sleeping is time
//! seen to pass (a `max_delay` budget is spent, a cooperative timeout counts down):
//!
//! - the **blocking** loop ([`Policy::call`](crate::Policy::call), `#[robust]` on a plain
//!   `fn`) reads [`Clock::now_blocking`] and waits with [`Sleep::sleep`]; for [`DefaultEnv`]
//!   that is the system's monotonic clock (`std::time::Instant::now()`) and
//!   `std::thread::sleep`, even inside a tokio runtime whose clock is paused;
//! - the **async** loop ([`Policy::call_async`](crate::Policy::call_async), `#[robust]` on an
//!   `async fn`) reads [`Clock::now`] and waits with [`AsyncSleep`] or tokio's timer; for
//!   [`DefaultEnv`] with the `tokio` feature that is tokio's clock
//!   (`tokio::time::Instant::now()`), so tokio's paused clock drives it in tests
//!   (`#[tokio::test(start_paused = true)]`);
//! - a [`VirtualTime`] overrides both: sleeping only advances a counter. Installed with
//!   [`VirtualTime::install`], it replaces the clock and sleepers of [`DefaultEnv`] on one
//!   thread.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// A source of the current time.
pub trait Clock {
    /// The current instant, as the async loop reads it: the clock that agrees with
    /// [`AsyncSleep`] (for [`DefaultEnv`], tokio's clock when the `tokio` feature is on).
    fn now(&self) -> Instant;

    /// The current instant, as the blocking loop reads it: the clock that agrees with
    /// [`Sleep::sleep`] (for [`DefaultEnv`], the system's monotonic clock, whatever tokio's
    /// clock says).
    ///
    /// The default is [`now`](Self::now), right for a clock whose blocking and async sleepers
    /// both advance it (a virtual clock). Override it when they wait on different clocks.
    #[inline]
    fn now_blocking(&self) -> Instant {
        self.now()
    }

    /// Whether [`now_blocking`](Self::now_blocking) reads the system's monotonic clock (what
    /// `std::time::Instant::now()` reads), so that a guard counting in wide windows (an
    /// [`AdaptiveThrottle`](crate::AdaptiveThrottle) of a second or more) may read that clock
    /// coarsely instead, for a fifth of the cost. `false` by default: a clock of your own is
    /// always read through `now_blocking`.
    #[inline]
    fn blocking_is_system(&self) -> bool {
        false
    }

    /// How much later than asked a wait of the async sleeper ([`AsyncSleep`]) may end: its
    /// timer's resolution. An async call with a deadline makes no retry whose backoff, this
    /// much late, would end after the deadline: its timer could fire when no time is left for
    /// the attempt, and the call would end with `E::from(Elapsed)` instead of the failure the
    /// retry follows (SPEC section 12). Zero by default, right for a clock whose sleeps end
    /// when asked (a virtual clock); [`DefaultEnv`] says two milliseconds with the `tokio`
    /// feature, zero while a [`VirtualTime`] is installed: tokio's timer rounds a wait up to
    /// its next millisecond tick, and its driver, which counts the time to that tick from the
    /// last whole millisecond, may sleep up to one more.
    #[inline]
    fn async_resolution(&self) -> Duration {
        Duration::ZERO
    }

    /// A fixed seed for the random generator of calls made in this environment, if the
    /// environment fixes one (a [`VirtualTime`] made with [`VirtualTime::seeded`] does). A seed
    /// set on the policy takes precedence.
    fn seed(&self) -> Option<u64> {
        None
    }
}

/// A way to wait in blocking code. The blocking loop reads [`Clock::now_blocking`], which
/// must see the time slept pass.
pub trait Sleep {
    /// Blocks the current thread for `d` (or, for a virtual clock, advances it).
    fn sleep(&self, d: Duration);
}

/// A way to wait in async code. The async loop reads [`Clock::now`], which must see the time
/// slept pass.
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
/// The blocking loop reads the system's monotonic clock ([`Clock::now_blocking`]:
/// `std::time::Instant::now()`) and sleeps with `std::thread::sleep`. The async loop reads
/// [`Clock::now`]: with the `tokio` feature that is `tokio::time::Instant::now()`, which
/// follows tokio's paused clock in tests and is the system's monotonic clock otherwise, and
/// it sleeps on tokio's timer. A [`VirtualTime`] installed on the thread replaces both.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultEnv;

impl Clock for DefaultEnv {
    #[inline]
    fn now(&self) -> Instant {
        if let Some(t) = installed() {
            return t.now();
        }
        #[cfg(feature = "tokio")]
        {
            tokio::time::Instant::now().into_std()
        }
        #[cfg(not(feature = "tokio"))]
        {
            Instant::now()
        }
    }

    #[inline]
    fn now_blocking(&self) -> Instant {
        if let Some(t) = installed() {
            return t.now();
        }
        Instant::now()
    }

    #[inline]
    fn blocking_is_system(&self) -> bool {
        installed().is_none()
    }

    #[inline]
    fn async_resolution(&self) -> Duration {
        if cfg!(feature = "tokio") && installed().is_none() {
            retry_grammar::TOKIO_TIMER_LATENESS
        } else {
            Duration::ZERO
        }
    }

    #[inline]
    fn seed(&self) -> Option<u64> {
        Self::installed_seed()
    }
}

impl DefaultEnv {
    #[inline]
    fn installed_seed() -> Option<u64> {
        installed().and_then(|t| t.seed())
    }
}

impl Sleep for DefaultEnv {
    #[inline]
    fn sleep(&self, d: Duration) {
        if let Some(t) = installed() {
            return Sleep::sleep(&t, d);
        }
        if !d.is_zero() {
            std::thread::sleep(d);
        }
    }
}

#[cfg(feature = "tokio")]
impl AsyncSleep for DefaultEnv {
    fn sleep_async(&self, d: Duration) -> impl Future<Output = ()> + Send {
        let installed = installed();
        if let Some(t) = &installed {
            Sleep::sleep(t, d);
        }
        // No timer for no wait (as the attribute's loop makes none): a zero backoff then also
        // runs where tokio's timer is not enabled. It spends a unit of the task's cooperative
        // budget instead (`no_wait`).
        let real = (installed.is_none() && !d.is_zero()).then(|| tokio::time::sleep(d));
        async move {
            match real {
                Some(sleep) => sleep.await,
                None => std::future::poll_fn(crate::timeout::no_wait).await,
            }
        }
    }
}

/// Whether any thread has a [`VirtualTime`] installed: one relaxed load on the real-time path.
static ANY_INSTALLED: AtomicUsize = AtomicUsize::new(0);
/// The virtual clocks installed with [`VirtualTime::install`]: thread, install id, clock, in
/// the order they were installed.
static INSTALLED: Mutex<Vec<(ThreadId, u64, VirtualTime)>> = Mutex::new(Vec::new());
/// The id of the next install: each [`InstallGuard`] removes exactly its own entry.
static NEXT_INSTALL: AtomicU64 = AtomicU64::new(0);

#[inline]
pub(crate) fn installed() -> Option<VirtualTime> {
    if ANY_INSTALLED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    installed_here()
}

#[cold]
fn installed_here() -> Option<VirtualTime> {
    let me = std::thread::current().id();
    let list = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    list.iter()
        .rev()
        .find(|(t, _, _)| *t == me)
        .map(|(_, _, v)| v.clone())
}

/// Keeps a [`VirtualTime`] installed for [`DefaultEnv`] on this thread; uninstalls it when
/// dropped.
///
/// Guards may be dropped in any order: each removes exactly the clock it installed, and the
/// clock in force is the most recently installed one whose guard is still alive.
#[derive(Debug)]
#[must_use = "the virtual clock is uninstalled when the guard is dropped"]
pub struct InstallGuard {
    id: u64,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for InstallGuard {
    fn drop(&mut self) {
        let mut list = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = list.iter().position(|(_, id, _)| *id == self.id) {
            list.remove(i);
            ANY_INSTALLED.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A virtual clock for tests and simulations: sleeping advances it instantly and records the
/// duration slept. Clones share the same clock. Every sleep is kept (16 bytes each) until
/// [`take_sleeps`](Self::take_sleeps) drains them: a simulation of millions of retries
/// (`retries = -1`) that reads them as it goes keeps its memory bounded that way.
///
/// It is made for blocking calls, whose attempts it can see take time (an attempt that
/// [`advance`](Self::advance)s it). In an async call it is the retry loop's clock (a backoff
/// advances it at once), but the attempts' own work runs on tokio's clock, which it does not
/// see: a `deadline` or `max_delay` then counts the backoffs and what is `advance`d, not the
/// time attempts take, and an attempt's timeout (or what is left of the deadline) is timed on
/// tokio's timer from the attempt's start. A call whose attempts wait on tokio's clock can
/// then run for many times its deadline (`retries = -1` beside a timeout: for ever). Test
/// async calls on tokio's paused clock instead (`#[tokio::test(start_paused = true)]`), which
/// sees both the attempts and the backoffs.
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
    seed: Option<u64>,
}

impl Default for VirtualTime {
    fn default() -> Self {
        Self::new()
    }
}

impl VirtualTime {
    /// Makes [`DefaultEnv`] read and sleep on this virtual clock, on the current thread,
    /// until the guard is dropped. This is how tests drive code that uses the default
    /// environment (such as functions under `#[robust]`) without real waiting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::time::{Clock, DefaultEnv, Sleep, VirtualTime};
    ///
    /// let time = VirtualTime::new();
    /// let _guard = time.install();
    /// let before = DefaultEnv.now();
    /// DefaultEnv.sleep(Duration::from_secs(3600)); // returns at once
    /// assert_eq!(DefaultEnv.now() - before, Duration::from_secs(3600));
    /// assert_eq!(time.sleeps(), [Duration::from_secs(3600)]);
    /// ```
    ///
    /// Installs nest: the clock in force is the most recently installed one whose guard is
    /// still alive, whatever the order the guards are dropped in.
    pub fn install(&self) -> InstallGuard {
        let thread = std::thread::current().id();
        let id = NEXT_INSTALL.fetch_add(1, Ordering::Relaxed);
        INSTALLED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((thread, id, self.clone()));
        ANY_INSTALLED.fetch_add(1, Ordering::Relaxed);
        InstallGuard {
            id,
            _not_send: std::marker::PhantomData,
        }
    }

    /// A new virtual clock, starting at the current real instant.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(VirtualState {
                now: Instant::now(),
                sleeps: Vec::new(),
                seed: None,
            })),
        }
    }

    /// A new virtual clock that also fixes the seed of every call's random generator, so
    /// jitter is reproducible (a throttle's decisions draw from the seed and the thread's count
    /// of them: see [`PolicyBuilder::seed`](crate::PolicyBuilder::seed)).
    pub fn seeded(seed: u64) -> Self {
        let t = Self::new();
        t.state().seed = Some(seed);
        t
    }

    fn state(&self) -> std::sync::MutexGuard<'_, VirtualState> {
        // A poisoned lock only means another test thread panicked; the state is still valid.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the clock forward by `d` without recording a sleep (time spent in an attempt).
    /// A `d` past what an `Instant` can hold moves it thirty years, as the real clock's
    /// sleepers treat such a wait (never over in practice).
    pub fn advance(&self, d: Duration) {
        let mut s = self.state();
        s.now = far_add(s.now, d);
    }

    /// Every duration slept so far (since the last [`take_sleeps`](Self::take_sleeps)), in
    /// order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.state().sleeps.clone()
    }

    /// Every duration slept since the clock was made or last drained, in order, forgotten
    /// here: [`sleeps`](Self::sleeps) and [`slept`](Self::slept) start over (the clock's
    /// instant does not move).
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::time::{Sleep, VirtualTime};
    ///
    /// let time = VirtualTime::new();
    /// time.sleep(Duration::from_secs(1));
    /// time.sleep(Duration::from_secs(2));
    /// assert_eq!(time.take_sleeps(), [Duration::from_secs(1), Duration::from_secs(2)]);
    /// assert!(time.sleeps().is_empty());
    /// time.sleep(Duration::from_secs(3));
    /// assert_eq!(time.slept(), Duration::from_secs(3));
    /// ```
    pub fn take_sleeps(&self) -> Vec<Duration> {
        std::mem::take(&mut self.state().sleeps)
    }

    /// The sum of every duration slept so far (since the last
    /// [`take_sleeps`](Self::take_sleeps)).
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

    fn seed(&self) -> Option<u64> {
        self.state().seed
    }
}

impl Sleep for VirtualTime {
    fn sleep(&self, d: Duration) {
        let mut s = self.state();
        s.now = far_add(s.now, d);
        s.sleeps.push(d);
    }
}

/// `at + d`, or thirty years after `at` when `at + d` is past what an `Instant` holds (a wait
/// that long is never over: what tokio itself uses for "never"; `VirtualTime` took it as no
/// wait at all).
pub(crate) fn far_add(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// About thirty years: a wait that long is never over (tokio's own "never", to which its
/// `sleep` cuts any longer wait).
pub(crate) const FAR: Duration = Duration::from_secs(86400 * 365 * 30);

impl AsyncSleep for VirtualTime {
    fn sleep_async(&self, d: Duration) -> impl Future<Output = ()> + Send {
        Sleep::sleep(self, d);
        // (A unit of the task's cooperative budget, as `DefaultEnv` spends for no wait.)
        #[cfg(feature = "tokio")]
        return std::future::poll_fn(crate::timeout::no_wait);
        #[cfg(not(feature = "tokio"))]
        std::future::ready(())
    }
}

/// The environment of a built policy: `C`'s time and sleeping, and the seed given to
/// [`PolicyBuilder::seed`](crate::PolicyBuilder::seed), if any, which takes precedence over
/// `C`'s own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seeded<C> {
    pub(crate) env: C,
    pub(crate) seed: Option<u64>,
}

impl<C> Seeded<C> {
    /// The inner environment.
    pub const fn inner(&self) -> &C {
        &self.env
    }
}

impl<C: Clock> Clock for Seeded<C> {
    #[inline]
    fn now(&self) -> Instant {
        self.env.now()
    }

    #[inline]
    fn now_blocking(&self) -> Instant {
        self.env.now_blocking()
    }

    #[inline]
    fn blocking_is_system(&self) -> bool {
        self.env.blocking_is_system()
    }

    #[inline]
    fn async_resolution(&self) -> Duration {
        self.env.async_resolution()
    }

    #[inline]
    fn seed(&self) -> Option<u64> {
        self.seed.or_else(|| self.env.seed())
    }
}

impl<C: Sleep> Sleep for Seeded<C> {
    #[inline]
    fn sleep(&self, d: Duration) {
        self.env.sleep(d)
    }
}

impl<C: AsyncSleep> AsyncSleep for Seeded<C> {
    fn sleep_async(&self, d: Duration) -> impl Future<Output = ()> + Send {
        self.env.sleep_async(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_virtual_wait_too_long_for_an_instant_is_thirty_years_not_none() {
        let time = VirtualTime::new();
        let start = time.now();
        Sleep::sleep(&time, Duration::MAX);
        let thirty_years = Duration::from_secs(86400 * 365 * 30);
        assert_eq!(time.now() - start, thirty_years);
        assert_eq!(time.sleeps(), [Duration::MAX]);
        time.advance(Duration::MAX);
        assert_eq!(time.now() - start, thirty_years * 2);
    }

    #[cfg(feature = "tokio")]
    #[tokio::test(start_paused = true)]
    async fn the_blocking_clock_agrees_with_the_blocking_sleeper_in_a_paused_runtime() {
        let (tokio_before, std_before) = (DefaultEnv.now(), DefaultEnv.now_blocking());
        DefaultEnv.sleep(Duration::from_millis(2));
        assert_eq!(DefaultEnv.now(), tokio_before, "tokio's clock is paused");
        assert!(DefaultEnv.now_blocking() - std_before >= Duration::from_millis(2));
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(DefaultEnv.now() - tokio_before, Duration::from_secs(3600));
        let time = VirtualTime::new();
        let _guard = time.install();
        assert_eq!(
            DefaultEnv.now_blocking(),
            time.now(),
            "a virtual clock overrides both"
        );
        assert_eq!(DefaultEnv.now(), time.now());
    }

    /// Whether `clock` is the virtual clock in force on this thread.
    fn in_force(clock: &VirtualTime) -> bool {
        installed().is_some_and(|t| Arc::ptr_eq(&t.inner, &clock.inner))
    }

    #[test]
    fn guards_dropped_out_of_order_remove_their_own_clock() {
        let a = VirtualTime::new();
        let b = VirtualTime::new();
        a.advance(Duration::from_secs(3600));
        b.advance(Duration::from_secs(7200));
        let guard_a = a.install();
        assert!(in_force(&a));
        let guard_b = b.install();
        assert!(in_force(&b));
        drop(guard_a);
        assert!(in_force(&b), "dropping A's guard must leave B in force");
        assert_eq!(DefaultEnv.now(), b.now());
        drop(guard_b);
        assert!(installed().is_none(), "no clock left installed");
        // Back to real time: the real clock is far behind the virtual ones.
        let real = Instant::now();
        let now = DefaultEnv.now();
        assert!(now < b.now() && now < a.now());
        assert!(now.saturating_duration_since(real) < Duration::from_secs(60));
    }

    #[test]
    fn guards_dropped_in_order_restore_the_previous_clock() {
        let a = VirtualTime::new();
        let b = VirtualTime::new();
        let guard_a = a.install();
        let guard_b = b.install();
        drop(guard_b);
        assert!(in_force(&a));
        drop(guard_a);
        assert!(installed().is_none());
    }
}
