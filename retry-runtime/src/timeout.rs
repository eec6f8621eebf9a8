//! Timeouts: the per-attempt limit (a setting), and the one attempt race and the one call
//! timer that the async loops of the builder and of `#[robust]` share.
//!
//! An async call keeps one tokio timer for its whole life: it bounds each attempt and then
//! times the backoff. One `Sleep` instead of one per await point keeps the future small; it is
//! created only when a timeout or a backoff first needs it. Blocking calls have no race: their
//! timeout is cooperative (see [`Attempt::remaining`](crate::Attempt::remaining)).

use std::time::Duration;

#[cfg(feature = "tokio")]
use crate::checks::IsResult;
use crate::latency::{Latencies, Quantile};
#[cfg(feature = "tokio")]
use crate::time::Sleep;
use crate::{ConfigError, Elapsed};

/// No per-attempt timeout (the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoTimeout;

/// A per-attempt timeout; `None` inside means infinite (a negative number in the SPEC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerAttempt(pub(crate) Option<Duration>);

/// A timeout setting, read by the loop before each attempt.
pub trait AttemptTimeout {
    /// The limit for one attempt, `None` for infinite.
    fn limit(&self) -> Option<Duration>;

    /// The limit for the whole call, from the start of its first attempt (SPEC section 12),
    /// `None` for none. Set with [`PolicyBuilder::deadline`](crate::PolicyBuilder::deadline).
    #[inline]
    fn deadline(&self) -> Option<Duration> {
        None
    }

    /// The longest an attempt may run under this setting, whatever it has learned (an
    /// [`Adaptive`] timeout's `max`), `None` for no limit; the deadline is apart.
    #[inline]
    fn longest(&self) -> Option<Duration> {
        self.limit()
    }

    /// The shortest an attempt's limit can be under this setting (an [`Adaptive`] timeout's
    /// `min`), `None` for no limit; the deadline is apart.
    #[inline]
    fn shortest(&self) -> Option<Duration> {
        self.limit()
    }

    /// Whether the setting learns from latencies ([`Adaptive`], or hedging after a
    /// percentile): the loops then time each successful attempt, and each one its own timeout
    /// cut, and [`record`](Self::record) it.
    const MEASURED: bool = false;

    /// Records the latency of a successful attempt, or the time an attempt its own timeout cut
    /// ran (see [`MEASURED`](Self::MEASURED)).
    #[inline]
    fn record(&self, latency: Duration) {
        let _ = latency;
    }

    /// The histogram [`record`](Self::record) writes to, if any.
    #[inline]
    fn histogram(&self) -> Option<&Latencies> {
        None
    }

    /// Whether attempts are hedged ([`Hedged`](crate::hedge::Hedged)).
    const HEDGED: bool = false;

    /// Whether the setting never limits an attempt nor the call ([`NoTimeout`]): known when
    /// the code is compiled, so that a loop can send an attempt without arming anything.
    #[doc(hidden)]
    const UNLIMITED: bool = false;

    /// The hedging setting, if any (SPEC section 15).
    #[inline]
    fn hedge(&self) -> Option<&crate::hedge::Hedge<'_>> {
        None
    }
}

/// The bounds of an attempt's limit ([`AttemptTimeout::longest`] and
/// [`shortest`](AttemptTimeout::shortest)) for a wrapper of the setting `self.timeout`:
/// forwarded to it.
macro_rules! forward_bounds {
    () => {
        #[inline]
        fn longest(&self) -> Option<Duration> {
            self.timeout.longest()
        }
        #[inline]
        fn shortest(&self) -> Option<Duration> {
            self.timeout.shortest()
        }
    };
}
pub(crate) use forward_bounds;

/// The latency and hedging items of [`AttemptTimeout`] for a wrapper of the setting
/// `self.timeout: T`: forwarded to it.
macro_rules! forward_learning {
    () => {
        crate::timeout::forward_bounds!();
        const MEASURED: bool = T::MEASURED;
        #[inline]
        fn record(&self, latency: Duration) {
            self.timeout.record(latency)
        }
        #[inline]
        fn histogram(&self) -> Option<&Latencies> {
            self.timeout.histogram()
        }
        const HEDGED: bool = T::HEDGED;
        #[inline]
        fn hedge(&self) -> Option<&crate::hedge::Hedge<'_>> {
            self.timeout.hedge()
        }
    };
}

/// A timeout setting whose limits are fixed when the policy is built (not [`Adaptive`], not
/// hedged): what a [`DynPolicy`](crate::DynPolicy) can copy.
#[diagnostic::on_unimplemented(
    message = "a `DynPolicy` takes a policy whose timeout is fixed or absent, not `{Self}`",
    label = "this policy hedges or has an adaptive timeout",
    note = "keep the concrete `Policy` type for a hedged policy or an adaptive timeout"
)]
pub trait FixedTimeout: AttemptTimeout {}
impl FixedTimeout for NoTimeout {}
impl FixedTimeout for PerAttempt {}
impl<T: FixedTimeout> FixedTimeout for WithDeadline<T> {}
impl<T: FixedTimeout, E> FixedTimeout for AsyncDeadline<T, E> {}
impl<E> FixedTimeout for AsyncLimit<E> {}

/// A per-attempt timeout setting `T` and a deadline for the whole call (SPEC section 12), as
/// [`PolicyBuilder::deadline`](crate::PolicyBuilder::deadline) sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WithDeadline<T> {
    pub(crate) timeout: T,
    /// `None`: "no deadline" (`deadline_secs` with a negative value), which reads no clock.
    pub(crate) deadline: Option<Duration>,
}

impl<T: AttemptTimeout> AttemptTimeout for WithDeadline<T> {
    #[inline]
    fn limit(&self) -> Option<Duration> {
        self.timeout.limit()
    }
    #[inline]
    fn deadline(&self) -> Option<Duration> {
        self.deadline
    }
    forward_learning!();
}

/// An async attempt cut by the deadline fails with `E::from(Elapsed)`, as one cut by its
/// timeout does.
impl<E: From<Elapsed>, T: AttemptTimeout> AsyncTimeout<E> for WithDeadline<T> {
    #[inline]
    fn elapsed(&self, elapsed: Elapsed) -> Option<E> {
        Some(E::from(elapsed))
    }
}

/// The deadline of an async fn under `#[robust]`, with the error type's conversion taken where
/// the user wrote `deadline` (so a missing `From<Elapsed>` is reported once, there).
pub struct AsyncDeadline<T, E> {
    pub(crate) timeout: T,
    pub(crate) deadline: Duration,
    pub(crate) convert: fn(Elapsed) -> E,
}

impl<T: std::fmt::Debug, E> std::fmt::Debug for AsyncDeadline<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncDeadline")
            .field("timeout", &self.timeout)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl<T: Clone, E> Clone for AsyncDeadline<T, E> {
    fn clone(&self) -> Self {
        AsyncDeadline {
            timeout: self.timeout.clone(),
            deadline: self.deadline,
            convert: self.convert,
        }
    }
}
impl<T: Copy, E> Copy for AsyncDeadline<T, E> {}

impl<T: AttemptTimeout, E> AttemptTimeout for AsyncDeadline<T, E> {
    #[inline]
    fn limit(&self) -> Option<Duration> {
        self.timeout.limit()
    }
    #[inline]
    fn deadline(&self) -> Option<Duration> {
        Some(self.deadline)
    }
    forward_learning!();
}

impl<T: AttemptTimeout, E> AsyncTimeout<E> for AsyncDeadline<T, E> {
    #[inline]
    fn elapsed(&self, elapsed: Elapsed) -> Option<E> {
        Some((self.convert)(elapsed))
    }
}

/// The deadline of a blocking fn under `#[robust]` (cooperative, as its timeout).
#[inline(always)]
pub const fn sync_deadline<T>(timeout: T, deadline: Duration) -> WithDeadline<T> {
    WithDeadline {
        timeout,
        deadline: Some(deadline),
    }
}

/// How the builder sets a per-attempt timeout `N` ([`PerAttempt`] or [`Adaptive`]) on a
/// setting that may already carry a deadline or hedging: those are kept.
pub trait SetTimeout<N> {
    /// The setting with a per-attempt timeout.
    type With: AttemptTimeout;
    /// Sets the per-attempt timeout.
    fn set_timeout(self, timeout: N) -> Self::With;
}

impl<N: AttemptTimeout> SetTimeout<N> for NoTimeout {
    type With = N;
    fn set_timeout(self, timeout: N) -> N {
        timeout
    }
}

impl<N: AttemptTimeout> SetTimeout<N> for PerAttempt {
    type With = N;
    fn set_timeout(self, timeout: N) -> N {
        timeout
    }
}

impl<N: AttemptTimeout> SetTimeout<N> for Adaptive<'_> {
    type With = N;
    fn set_timeout(self, timeout: N) -> N {
        timeout
    }
}

// The timeout under a deadline is set as it would be without one: a hedge under the deadline
// (`.hedge(..).deadline(..).timeout(..)`) keeps hedging.
impl<T: SetTimeout<N>, N> SetTimeout<N> for WithDeadline<T> {
    type With = WithDeadline<T::With>;
    fn set_timeout(self, timeout: N) -> Self::With {
        WithDeadline {
            timeout: self.timeout.set_timeout(timeout),
            deadline: self.deadline,
        }
    }
}

impl AttemptTimeout for NoTimeout {
    #[inline]
    fn limit(&self) -> Option<Duration> {
        None
    }
    const UNLIMITED: bool = true;
}

impl AttemptTimeout for PerAttempt {
    #[inline]
    fn limit(&self) -> Option<Duration> {
        self.0
    }
}

/// A timeout setting usable by async calls returning errors of type `E`: a timed-out attempt
/// fails with `E::from(Elapsed)`.
#[diagnostic::on_unimplemented(
    message = "a per-attempt timeout needs `{E}: From<retry_runtime::Elapsed>`",
    label = "the timed-out attempt must fail with a `{E}` built from `retry_runtime::Elapsed`",
    note = "implement `From<retry_runtime::Elapsed>` for `{E}` (it is provided for `std::io::Error`, boxed errors and `anyhow::Error`)"
)]
pub trait AsyncTimeout<E>: AttemptTimeout {
    /// The error of an attempt that ran out of the limit: `E::from(elapsed)`; `None` only for
    /// a setting without a limit (which never expires).
    fn elapsed(&self, elapsed: Elapsed) -> Option<E>;
}

impl<E> AsyncTimeout<E> for NoTimeout {
    #[inline]
    fn elapsed(&self, _: Elapsed) -> Option<E> {
        None
    }
}

impl<E: From<Elapsed>> AsyncTimeout<E> for PerAttempt {
    #[inline]
    fn elapsed(&self, elapsed: Elapsed) -> Option<E> {
        Some(E::from(elapsed))
    }
}

/// An async per-attempt timeout built for the error type `E`. The conversion is taken when
/// it is built, so the `From<Elapsed>` check is made once, where the user wrote `timeout`.
pub struct AsyncLimit<E> {
    /// The limit in nanoseconds (saturating at about 584 years): one word instead of a
    /// `Duration`'s two, since this value lives in every async call's future.
    pub(crate) limit_nanos: u64,
    pub(crate) convert: fn(Elapsed) -> E,
}

impl<E> std::fmt::Debug for AsyncLimit<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncLimit")
            .field("limit", &Duration::from_nanos(self.limit_nanos))
            .finish()
    }
}

impl<E> Clone for AsyncLimit<E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for AsyncLimit<E> {}

impl<E> AttemptTimeout for AsyncLimit<E> {
    #[inline]
    fn limit(&self) -> Option<Duration> {
        Some(Duration::from_nanos(self.limit_nanos))
    }
}

impl<E> AsyncTimeout<E> for AsyncLimit<E> {
    #[inline]
    fn elapsed(&self, e: Elapsed) -> Option<E> {
        Some((self.convert)(e))
    }
}

/// The timeout of a blocking fn (cooperative).
#[inline(always)]
pub const fn sync_timeout(limit: Duration) -> PerAttempt {
    PerAttempt(Some(limit))
}

/// Runs one async attempt under `timeout` with a timer of its own, armed for `limit` (the
/// attempt's time: its timeout, or less when the call's deadline comes first): the result and
/// whether the timer fired (in which case the attempt's future was dropped). The builder's
/// [`Policy::call_async`](crate::Policy::call_async) uses it; it is [`race`] on a fresh timer.
#[cfg(feature = "tokio")]
pub async fn run_attempt<R, E, T, Fut>(
    timeout: &T,
    limit: Option<Duration>,
    attempt: Fut,
) -> (Result<R, E>, bool)
where
    T: AsyncTimeout<E>,
    Fut: Future<Output = Result<R, E>>,
{
    let Some(limit) = limit else {
        return (attempt.await, false);
    };
    let timer = std::pin::pin!(tokio::time::sleep(limit));
    let attempt = std::pin::pin!(attempt);
    race::<Result<R, E>, T, Fut>(timer, attempt, timeout, false).await
}

/// The timer of an async call with a timeout, created with the first attempt's deadline and
/// reset for every later attempt and every backoff.
#[cfg(feature = "tokio")]
#[inline]
pub fn timer_for<T: AttemptTimeout>(timeout: &T) -> tokio::time::Sleep {
    tokio::time::sleep(timeout.limit().unwrap_or(Duration::ZERO))
}

/// Sets the call's timer (see [`timer_for`]) to end the timeout from now: for a first attempt
/// that waited for a concurrency limit's slot after the timer was made (the attempt starts
/// when it holds the slot, and the wait is not its time).
#[cfg(feature = "tokio")]
#[inline]
pub fn timer_restart<T: AttemptTimeout>(
    timer: std::pin::Pin<&mut tokio::time::Sleep>,
    timeout: &T,
) {
    if let Some(limit) = timeout.limit() {
        timer.reset(deadline_in(limit));
    }
}

/// The timer of an async call whose attempts' starts are read (an adaptive timeout, a deadline,
/// an attempt context...): none until [`race_from`] makes it for the first attempt, from the
/// attempt's start; reset after that.
#[cfg(feature = "tokio")]
#[inline]
pub const fn timer_unarmed() -> Option<tokio::time::Sleep> {
    None
}

/// Sets `timer` to end at `deadline`: made the first time, reset after.
#[cfg(feature = "tokio")]
#[inline]
fn arm(mut timer: std::pin::Pin<&mut Option<tokio::time::Sleep>>, deadline: tokio::time::Instant) {
    match timer.as_mut().as_pin_mut() {
        Some(sleep) => sleep.reset(deadline),
        None => timer.set(Some(tokio::time::sleep_until(deadline))),
    }
}

/// When an attempt that started at `started` and may run `d` ends, on tokio's clock. `started`
/// was read from [`DefaultEnv`](crate::time::DefaultEnv)'s async clock (the attribute's
/// policies use no other): tokio's, so no reading is needed, unless a virtual clock is
/// installed on this thread, in which case `d` counts from now on tokio's clock.
#[cfg(feature = "tokio")]
#[inline]
pub(crate) fn deadline_from(started: std::time::Instant, d: Duration) -> tokio::time::Instant {
    match crate::time::installed() {
        None => after(tokio::time::Instant::from_std(started), d),
        Some(_) => deadline_in(d),
    }
}

/// `now + d` on tokio's clock, saturating about thirty years ahead (what tokio itself uses for
/// "never").
#[cfg(feature = "tokio")]
#[inline]
pub(crate) fn deadline_in(d: Duration) -> tokio::time::Instant {
    after(tokio::time::Instant::now(), d)
}

/// `at + d`, `d` cut to about thirty years, as tokio's `sleep` cuts it. (Not only where the sum
/// would overflow an `Instant`: tokio's paused clock reaches a timer further away than its
/// wheel spans, about two years, in steps of that span, so a wait of 10^14 s took seconds of
/// CPU time to pass in a test, where tokio's own `sleep` of it passes at once.)
#[cfg(feature = "tokio")]
#[inline]
pub(crate) fn after(at: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    tokio::time::Instant::from_std(crate::time::far_add(at.into_std(), d.min(crate::time::FAR)))
}

/// Runs one async attempt (already pinned in the caller) under the policy's timeout, on the
/// call's timer (`rearm`: reset it for this attempt; the first attempt's is fresh): the
/// result, and whether the timeout fired first (the error is then `E::from(Elapsed)`, and the
/// caller drops the attempt right after, which cancels it).
#[cfg(feature = "tokio")]
pub fn race<'a, Ret, T, Fut>(
    timer: std::pin::Pin<&'a mut tokio::time::Sleep>,
    attempt: std::pin::Pin<&'a mut Fut>,
    timeout: &'a T,
    rearm: bool,
) -> impl Future<Output = (Result<Ret::Ok, Ret::Err>, bool)> + 'a
where
    Ret: IsResult,
    Ret::Err: 'a,
    T: AsyncTimeout<Ret::Err>,
    Fut: Future<Output = Ret>,
{
    race_until::<Ret, T, Fut>(timer, attempt, timeout, timeout.limit().filter(|_| rearm))
}

/// [`race`] with the timer reset first to end `reset` from now, if given. (The attribute's fns
/// that read each attempt's start, a deadline's among them, use [`race_from`] instead.)
#[cfg(feature = "tokio")]
pub fn race_until<'a, Ret, T, Fut>(
    mut timer: std::pin::Pin<&'a mut tokio::time::Sleep>,
    attempt: std::pin::Pin<&'a mut Fut>,
    timeout: &'a T,
    reset: Option<Duration>,
) -> impl Future<Output = (Result<Ret::Ok, Ret::Err>, bool)> + 'a
where
    Ret: IsResult,
    Ret::Err: 'a,
    T: AsyncTimeout<Ret::Err>,
    Fut: Future<Output = Ret>,
{
    if let Some(limit) = reset {
        timer.as_mut().reset(deadline_in(limit));
    }
    // ([`first_of`], with the late error judged from the timer's own deadline: keeping a copy
    // of it in the future would make every timed attribute fn's future 16 bytes larger.)
    let mut attempt = attempt;
    std::future::poll_fn(move |cx| {
        if let std::task::Poll::Ready(r) = attempt.as_mut().poll(cx) {
            let r = r.into_result();
            // An error returned at or after the attempt's deadline (its body held the thread
            // past it, or was polled first in the wake its timer fired) is a timeout, as the
            // loops that keep each attempt's deadline judge it: one clock reading, on errors
            // only.
            let late = r.is_err() && tokio::time::Instant::now() >= timer.deadline();
            return std::task::Poll::Ready((r, late));
        }
        if timer.as_mut().poll(cx).is_ready()
            && let Some(e) = timeout.elapsed(Elapsed::new())
        {
            return std::task::Poll::Ready((Err(e), true));
        }
        std::task::Poll::Pending
    })
}

/// The attempt's answer, or the timeout's error once `fired` says the timer fired: the result
/// and whether it timed out.
#[cfg(feature = "tokio")]
#[inline]
fn first_of<'a, Ret, T, Fut>(
    mut attempt: std::pin::Pin<&'a mut Fut>,
    timeout: &'a T,
    mut fired: impl FnMut(&mut std::task::Context<'_>) -> bool + 'a,
) -> impl Future<Output = (Result<Ret::Ok, Ret::Err>, bool)> + 'a
where
    Ret: IsResult,
    Ret::Err: 'a,
    T: AsyncTimeout<Ret::Err>,
    Fut: Future<Output = Ret>,
{
    std::future::poll_fn(move |cx| {
        if let std::task::Poll::Ready(r) = attempt.as_mut().poll(cx) {
            return std::task::Poll::Ready((r.into_result(), false));
        }
        if fired(cx)
            && let Some(e) = timeout.elapsed(Elapsed::new())
        {
            return std::task::Poll::Ready((Err(e), true));
        }
        std::task::Poll::Pending
    })
}

/// [`race`] for an attempt whose start was read (`started`, from
/// [`DefaultEnv`](crate::time::DefaultEnv)'s async clock: the attribute's), on a timer from
/// [`timer_unarmed`]: the timer is armed for the attempt's `limit` from its start, without
/// reading the clock again; without a limit it is not waited for.
#[cfg(feature = "tokio")]
pub fn race_from<'a, Ret, T, Fut>(
    mut timer: std::pin::Pin<&'a mut Option<tokio::time::Sleep>>,
    attempt: std::pin::Pin<&'a mut Fut>,
    timeout: &'a T,
    limit: Option<Duration>,
    started: std::time::Instant,
) -> impl Future<Output = (Result<Ret::Ok, Ret::Err>, bool)> + 'a
where
    Ret: IsResult,
    Ret::Err: 'a,
    T: AsyncTimeout<Ret::Err>,
    Fut: Future<Output = Ret>,
{
    let armed = limit.is_some();
    if let Some(limit) = limit {
        arm(timer.as_mut(), deadline_from(started, limit));
    }
    first_of::<Ret, T, Fut>(attempt, timeout, move |cx| {
        armed
            && timer
                .as_mut()
                .as_pin_mut()
                .is_some_and(|t| t.poll(cx).is_ready())
    })
}

/// [`backoff_on`] on a timer from [`timer_unarmed`] (made here if no attempt made it).
#[cfg(feature = "tokio")]
pub fn backoff_from(
    mut timer: std::pin::Pin<&mut Option<tokio::time::Sleep>>,
    d: Duration,
) -> impl Future<Output = ()> + '_ {
    let armed = match backoff_deadline(d) {
        Some(deadline) => {
            arm(timer.as_mut(), deadline);
            true
        }
        None => false,
    };
    std::future::poll_fn(move |cx| match timer.as_mut().as_pin_mut() {
        Some(sleep) if armed => sleep.poll(cx),
        _ => no_wait(cx),
    })
}

/// A backoff with nothing to wait for (no delay, or a virtual clock that has advanced): it
/// still spends a unit of the task's cooperative budget, as a tokio timer would, so that a
/// call retrying at once (`NoBackoff`, a service that fails on its first poll, retries
/// without end) yields to the runtime when the task's budget is spent instead of holding its
/// thread. (Outside a tokio runtime there is no budget: ready at once.)
#[cfg(feature = "tokio")]
#[inline]
pub(crate) fn no_wait(cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
    tokio::task::coop::poll_proceed(cx).map(|progress| progress.made_progress())
}

/// When a backoff of `d` ends on the tokio timer; `None` when there is nothing to wait for:
/// `d` is zero, or an installed virtual clock has already advanced by `d`.
#[cfg(feature = "tokio")]
fn backoff_deadline(d: Duration) -> Option<tokio::time::Instant> {
    match crate::time::installed() {
        Some(t) => {
            Sleep::sleep(&t, d);
            None
        }
        None if d.is_zero() => None,
        None => Some(deadline_in(d)),
    }
}

/// Sleeps `d` between async attempts on the call's timer (or on an installed virtual clock).
#[cfg(feature = "tokio")]
pub fn backoff_on(
    mut timer: std::pin::Pin<&mut tokio::time::Sleep>,
    d: Duration,
) -> impl Future<Output = ()> + '_ {
    let armed = match backoff_deadline(d) {
        Some(deadline) => {
            timer.as_mut().reset(deadline);
            true
        }
        None => false,
    };
    std::future::poll_fn(move |cx| {
        if armed {
            timer.as_mut().poll(cx)
        } else {
            no_wait(cx)
        }
    })
}

/// The backoff timer of an async call without a timeout: allocated on the first backoff that
/// sleeps (so the success path and the future stay small), reset on the next ones.
#[cfg(feature = "tokio")]
pub type BoxedTimer = Option<std::pin::Pin<Box<tokio::time::Sleep>>>;

/// An empty boxed timer.
#[cfg(feature = "tokio")]
#[inline(always)]
pub const fn boxed_timer() -> BoxedTimer {
    None
}

/// Sleeps `d` between async attempts on the call's boxed timer (or on an installed virtual
/// clock).
#[cfg(feature = "tokio")]
pub fn backoff_boxed(timer: &mut BoxedTimer, d: Duration) -> impl Future<Output = ()> + '_ {
    let armed = match backoff_deadline(d) {
        Some(deadline) => {
            match timer {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => *timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            true
        }
        None => false,
    };
    std::future::poll_fn(move |cx| match timer {
        Some(sleep) if armed => sleep.as_mut().poll(cx),
        _ => no_wait(cx),
    })
}

/// A per-attempt timeout set from measured latency (SPEC section 15b): `factor` × the `p`-th
/// percentile of the function's recent attempt latencies, clamped to `[min, max]`; `max` until
/// the histogram holds enough samples
/// ([`Quantile::min_samples`](crate::latency::Quantile::min_samples)).
///
/// The retry loop records each success and each attempt cut by this timeout (as the time it
/// ran, a lower bound of its latency), so that a service slower than the current limit raises
/// it instead of being cut for ever. An attempt the call's deadline cuts first is not
/// recorded: it ran out of time, which says nothing of the service's latency. When more than (100 − `p`)% of attempts are cut, the
/// percentile is at least the limit, and each recomputation sets the limit to at least
/// `factor` times it (with `factor` 1, the histogram's rounding up still raises it), up to
/// `max`.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::latency::Latencies;
/// use retry_runtime::timeout::{Adaptive, AttemptTimeout};
///
/// static LATENCIES: Latencies = Latencies::new();
/// let t = Adaptive::new(&LATENCIES, 99.0, 2.0, Duration::from_millis(50), Duration::from_secs(5))?;
/// assert_eq!(t.limit(), Some(Duration::from_secs(5))); // no samples yet: `max`
/// for _ in 0..1000 {
///     t.record(Duration::from_millis(40));
/// }
/// let limit = t.limit().unwrap(); // 2 × p99 (40 ms, within its bucket's 6.25%)
/// assert!(limit >= Duration::from_millis(80) && limit <= Duration::from_millis(85), "{limit:?}");
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Adaptive<'a> {
    latencies: &'a Latencies,
    quantile: Quantile,
    factor: f64,
    min: Duration,
    max: Duration,
}

impl<'a> Adaptive<'a> {
    /// An adaptive timeout over `latencies`. Errors: `p` not in [50, 99.9] (a timeout from a
    /// percentile under the median follows the fast attempts, not the slow ones, and `p` is a
    /// percentile, not a fraction: `0.99` would be the 0.99th; above 99.9 the histogram's
    /// window holds too few samples, as for [`Hedge::percentile`](crate::hedge::Hedge::percentile));
    /// `factor` below 1 or not finite; `min` zero; `min` above `max`. (The attribute also
    /// refuses `min` equal to `max`, a fixed timeout written as an adaptive one; here equal
    /// bounds stay allowed: the timeout still records its attempts' latencies into
    /// `latencies`, which another policy's hedge or adaptive timeout may read.)
    pub fn new(
        latencies: &'a Latencies,
        p: f64,
        factor: f64,
        min: Duration,
        max: Duration,
    ) -> Result<Self, ConfigError> {
        let quantile = Quantile::new(p)?;
        if p < 50.0 {
            return Err(ConfigError::new(
                "p",
                "must be at least 50 (a percentile, not a fraction: 99 for the 99th): a timeout from a percentile under the median follows the fast attempts, not the slow ones (take p50 or above, and `factor` for the margin)",
            ));
        }
        if p > 99.9 {
            return Err(ConfigError::new(
                "p",
                "must be at most 99.9: the histogram's window holds too few samples above it (the result would be its slowest sample, not the percentile asked for)",
            ));
        }
        if !(factor.is_finite() && factor >= 1.0) {
            return Err(ConfigError::new("factor", "must be a finite number >= 1"));
        }
        if min.is_zero() {
            return Err(ConfigError::new("min", "must be > 0"));
        }
        if min > max {
            return Err(ConfigError::new("min", "must be at most `max`"));
        }
        Ok(Adaptive {
            latencies,
            quantile,
            factor,
            min,
            max,
        })
    }

    /// A timeout the attribute has validated.
    pub(crate) fn from_parts(
        latencies: &'a Latencies,
        p: f64,
        factor: f64,
        min: Duration,
        max: Duration,
    ) -> Self {
        Adaptive {
            latencies,
            quantile: Quantile::from_percent(p),
            factor,
            min,
            max,
        }
    }

    /// The histogram this timeout reads and records into.
    pub fn latencies(&self) -> &'a Latencies {
        self.latencies
    }
}

impl AttemptTimeout for Adaptive<'_> {
    #[inline]
    fn longest(&self) -> Option<Duration> {
        Some(self.max)
    }
    #[inline]
    fn shortest(&self) -> Option<Duration> {
        Some(self.min)
    }
    #[inline]
    fn limit(&self) -> Option<Duration> {
        Some(match self.latencies.percentile(self.quantile) {
            None => self.max,
            // (`max(min).min(max)`, not `clamp`, which panics on `min > max`: a setting made
            // through the public `checks` helpers is not validated.)
            Some(p) => Duration::try_from_secs_f64(p.as_secs_f64() * self.factor)
                .unwrap_or(self.max)
                .max(self.min)
                .min(self.max),
        })
    }
    const MEASURED: bool = true;
    #[inline]
    fn record(&self, latency: Duration) {
        self.latencies.record(latency)
    }
    #[inline]
    fn histogram(&self) -> Option<&Latencies> {
        Some(self.latencies)
    }
}

impl<E: From<Elapsed>> AsyncTimeout<E> for Adaptive<'_> {
    #[inline]
    fn elapsed(&self, elapsed: Elapsed) -> Option<E> {
        Some(E::from(elapsed))
    }
}

/// A timeout setting `T` whose expiry builds the error with `convert` (how `#[robust]` takes
/// the `From<Elapsed>` conversion where the user wrote the key).
pub struct ElapsedAs<T, E> {
    pub(crate) timeout: T,
    pub(crate) convert: fn(Elapsed) -> E,
}

impl<T: std::fmt::Debug, E> std::fmt::Debug for ElapsedAs<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.timeout.fmt(f)
    }
}

impl<T: Clone, E> Clone for ElapsedAs<T, E> {
    fn clone(&self) -> Self {
        ElapsedAs {
            timeout: self.timeout.clone(),
            convert: self.convert,
        }
    }
}
impl<T: Copy, E> Copy for ElapsedAs<T, E> {}

impl<T: AttemptTimeout, E> AttemptTimeout for ElapsedAs<T, E> {
    #[inline]
    fn limit(&self) -> Option<Duration> {
        self.timeout.limit()
    }
    #[inline]
    fn deadline(&self) -> Option<Duration> {
        self.timeout.deadline()
    }
    forward_learning!();
}

impl<T: AttemptTimeout, E> AsyncTimeout<E> for ElapsedAs<T, E> {
    #[inline]
    fn elapsed(&self, elapsed: Elapsed) -> Option<E> {
        Some((self.convert)(elapsed))
    }
}
