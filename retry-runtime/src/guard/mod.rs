//! Guards against overload: a retry budget and a circuit breaker, each trait beside its
//! implementation (`()` stands for "none" and costs nothing); a concurrency limit and an
//! adaptive throttle, which turn attempts away with [`Rejected`].

use std::time::{Duration, Instant};

mod breaker;
mod budget;
#[cfg(feature = "redis")]
pub mod fleet;
mod keyed;
mod limit;
mod source;
mod throttle;

pub use breaker::{BreakerState, CircuitBreaker, MAX_WINDOW, Open, Permit};
pub use budget::RetryBudget;
pub use keyed::{Keyed, KeyedBreaker, KeyedBudget, Template};
pub use limit::{Acquire, ConcurrencyLimit, LimitPermit, Rejected};
pub use source::{AsBreaker, AsBudget};
pub use throttle::{AdaptiveThrottle, COARSE_TICK, Stamp};

/// A retry budget, or `()` for none.
pub trait Budget {
    /// Credits one call.
    fn deposit(&self);
    /// Spends one retry; `false` if the budget is empty.
    fn try_withdraw(&self) -> bool;
}

impl Budget for () {
    #[inline(always)]
    fn deposit(&self) {}
    #[inline(always)]
    fn try_withdraw(&self) -> bool {
        true
    }
}

impl Budget for &RetryBudget {
    #[inline]
    fn deposit(&self) {
        RetryBudget::deposit(self)
    }
    #[inline]
    fn try_withdraw(&self) -> bool {
        RetryBudget::try_withdraw(self)
    }
}

/// The latest instant a decided retry may start at (its rule's `max_delay` from the first
/// attempt's start), which bounds its wait for a slot of a concurrency limit: an
/// `Option<Instant>` beside a limit, nothing (`()`, no byte in the call) without one.
#[doc(hidden)]
pub trait StartBy: Copy + Default + Send + Sync + std::fmt::Debug {
    /// The instant, if any.
    fn get(self) -> Option<Instant>;
    /// Sets the instant.
    fn set(&mut self, at: Option<Instant>);
}

impl StartBy for () {
    #[inline(always)]
    fn get(self) -> Option<Instant> {
        None
    }
    #[inline(always)]
    fn set(&mut self, _: Option<Instant>) {}
}

impl StartBy for Option<Instant> {
    #[inline]
    fn get(self) -> Option<Instant> {
        self
    }
    #[inline]
    fn set(&mut self, at: Option<Instant>) {
        *self = at;
    }
}

/// Whether a call holds a permit it has neither recorded nor given back (a call dropped then
/// gives it back): a `bool` beside a breaker, nothing (`()`, no byte in the call) without one.
pub trait PendingFlag: Copy + Default + Send + Sync + std::fmt::Debug {
    /// Whether it tracks anything (`bool`): it must for a breaker ([`Breaker::ACTIVE`]), or a
    /// call dropped with a pending permit would never give it back (checked when the call's
    /// loop is compiled).
    const TRACKS: bool;
    /// Whether a permit is pending.
    fn get(self) -> bool;
    /// Sets whether a permit is pending.
    fn set(&mut self, pending: bool);
}

impl PendingFlag for () {
    const TRACKS: bool = false;
    #[inline(always)]
    fn get(self) -> bool {
        false
    }
    #[inline(always)]
    fn set(&mut self, _: bool) {}
}

impl PendingFlag for bool {
    const TRACKS: bool = true;
    #[inline(always)]
    fn get(self) -> bool {
        self
    }
    #[inline(always)]
    fn set(&mut self, pending: bool) {
        *self = pending;
    }
}

/// A circuit breaker, or `()` for none.
pub trait Breaker {
    /// Whether there is a breaker (the loop reads the clock for it only then).
    const ACTIVE: bool;
    /// What a call keeps to know whether its permit is pending: `bool`, or `()` for none.
    type Pending: PendingFlag;
    /// Lets an attempt start at `now`, or not.
    fn acquire(&self, now: Instant) -> Option<Permit>;
    /// Records the outcome of an attempt admitted with `permit`.
    fn record(&self, now: Instant, permit: Permit, success: bool);
    /// Whether an attempt at `now` would be admitted, changing nothing.
    fn would_admit(&self, now: Instant) -> bool {
        let _ = now;
        true
    }
    /// Gives back the permit of an attempt that was admitted but never made, or cancelled
    /// before its outcome (the concurrency limit refused it, a hedge lost its round): a
    /// half-open breaker's probe goes to the next attempt. (Required: a breaker that keeps a
    /// probe it will never hear about stays half-open, rejecting, until the probe goes stale.)
    fn release(&self, permit: Permit);
}

impl Breaker for () {
    const ACTIVE: bool = false;
    type Pending = ();
    #[inline(always)]
    fn acquire(&self, _: Instant) -> Option<Permit> {
        Some(Permit::NONE)
    }
    #[inline(always)]
    fn record(&self, _: Instant, _: Permit, _: bool) {}
    #[inline(always)]
    fn release(&self, _: Permit) {}
}

impl Breaker for &CircuitBreaker {
    const ACTIVE: bool = true;
    type Pending = bool;
    #[inline]
    fn acquire(&self, now: Instant) -> Option<Permit> {
        CircuitBreaker::acquire(self, now)
    }
    #[inline]
    fn record(&self, now: Instant, permit: Permit, success: bool) {
        CircuitBreaker::record_permit(self, now, permit, success)
    }
    #[inline]
    fn would_admit(&self, now: Instant) -> bool {
        CircuitBreaker::would_admit(self, now)
    }
    #[inline]
    fn release(&self, permit: Permit) {
        CircuitBreaker::release_permit(self, permit)
    }
}

/// A concurrency limit ([`ConcurrencyLimit`]), or `()` for none: an attempt holds a slot while
/// it runs (not while backing off).
pub trait Limit {
    /// Whether there is a limit.
    const ACTIVE: bool;
    /// What an attempt holds while it runs; dropping it frees the slot.
    type Slot;
    /// What a call keeps of a decided retry's latest start ([`StartBy`]): `()` without a limit.
    type StartBy: StartBy;
    /// Waiting for a slot, in FIFO order.
    type Wait: Future<Output = Result<Self::Slot, Rejected>>;
    /// Waits for a slot (async): `Err(Rejected)` at once when the queue is full.
    fn wait(&self) -> Self::Wait;
    /// Waits for a slot, blocking the thread.
    fn wait_blocking(&self) -> Result<Self::Slot, Rejected>;
    /// [`wait_blocking`](Self::wait_blocking) for at most `left` (`None`: no end); `Ok(None)`
    /// when it ran out first (the waiter has left the queue).
    fn wait_blocking_for(&self, left: Option<Duration>) -> Result<Option<Self::Slot>, Rejected>;
    /// A free slot now, without waiting (for a hedge), or `None`.
    fn try_slot(&self) -> Option<Self::Slot>;
}

impl Limit for () {
    const ACTIVE: bool = false;
    type Slot = ();
    type StartBy = ();
    type Wait = std::future::Ready<Result<(), Rejected>>;
    #[inline(always)]
    fn wait(&self) -> Self::Wait {
        std::future::ready(Ok(()))
    }
    #[inline(always)]
    fn wait_blocking(&self) -> Result<(), Rejected> {
        Ok(())
    }
    #[inline(always)]
    fn wait_blocking_for(&self, _: Option<Duration>) -> Result<Option<()>, Rejected> {
        Ok(Some(()))
    }
    #[inline(always)]
    fn try_slot(&self) -> Option<()> {
        Some(())
    }
}

impl<'l> Limit for &'l ConcurrencyLimit {
    const ACTIVE: bool = true;
    type Slot = LimitPermit<'l>;
    type StartBy = Option<Instant>;
    type Wait = Acquire<'l>;
    #[inline]
    fn wait(&self) -> Acquire<'l> {
        ConcurrencyLimit::acquire(self)
    }
    #[inline]
    fn wait_blocking(&self) -> Result<LimitPermit<'l>, Rejected> {
        ConcurrencyLimit::acquire_blocking(self)
    }
    #[inline]
    fn wait_blocking_for(
        &self,
        left: Option<Duration>,
    ) -> Result<Option<LimitPermit<'l>>, Rejected> {
        ConcurrencyLimit::acquire_blocking_for(self, left)
    }
    #[inline]
    fn try_slot(&self) -> Option<LimitPermit<'l>> {
        ConcurrencyLimit::try_acquire(self)
    }
}

impl<E: From<Rejected>> Refuse<E> for &ConcurrencyLimit {
    #[inline]
    fn refuse(&self) -> Option<E> {
        Some(E::from(Rejected::new()))
    }
}

/// A concurrency limit with the error type's rejection taken where the user wrote `limit` (by
/// the attribute's `checks::check_limit`), so that a missing `From<Rejected>` is reported once,
/// there.
pub struct LimitOf<'a, E> {
    pub(crate) limit: &'a ConcurrencyLimit,
    pub(crate) reject: fn() -> E,
}

impl<E> std::fmt::Debug for LimitOf<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.limit.fmt(f)
    }
}

impl<'a, E> Limit for LimitOf<'a, E> {
    const ACTIVE: bool = true;
    type Slot = LimitPermit<'a>;
    type StartBy = Option<Instant>;
    type Wait = Acquire<'a>;
    #[inline]
    fn wait(&self) -> Acquire<'a> {
        self.limit.acquire()
    }
    #[inline]
    fn wait_blocking(&self) -> Result<LimitPermit<'a>, Rejected> {
        self.limit.acquire_blocking()
    }
    #[inline]
    fn wait_blocking_for(
        &self,
        left: Option<Duration>,
    ) -> Result<Option<LimitPermit<'a>>, Rejected> {
        self.limit.acquire_blocking_for(left)
    }
    #[inline]
    fn try_slot(&self) -> Option<LimitPermit<'a>> {
        self.limit.try_acquire()
    }
}

impl<E> Refuse<E> for LimitOf<'_, E> {
    #[inline]
    fn refuse(&self) -> Option<E> {
        Some((self.reject)())
    }
}

/// Client-side throttling ([`AdaptiveThrottle`]), or `()` for none: before each attempt the
/// call may be rejected locally, and every attempt's outcome is recorded.
pub trait Throttle {
    /// Whether there is a throttle (the loop draws and reads the clock for it only then).
    const ACTIVE: bool;
    /// An instant the throttle can count with, read without the caller's clock, for a caller
    /// whose clock is the system's (`system`): [`AdaptiveThrottle::coarse_now`]. `None`: the
    /// loop reads its clock and passes [`Stamp::of`] its instant.
    fn coarse_now(&self, system: bool) -> Option<Stamp>;
    /// The probability of rejecting an attempt at `now` (the loop draws only when it is above
    /// zero).
    fn reject_probability(&self, now: Stamp) -> f64;
    /// Records an attempt made (or rejected) at `now`: `accepted` unless it failed with a
    /// retryable error or was rejected.
    fn record(&self, now: Stamp, accepted: bool);
    /// Records an attempt whose admission asked for
    /// [`reject_probability`](Self::reject_probability), without reading the clock: in the
    /// latest bucket the throttle has seen, the one it was admitted in or a later one.
    fn record_recent(&self, accepted: bool);
}

/// Builds the error of an attempt the throttle rejects: `E::from(Rejected)`.
#[diagnostic::on_unimplemented(
    message = "a `throttle` or a `limit` needs the error type `{E}` to implement `From<retry_runtime::Rejected>`",
    label = "an attempt the throttle or the limit rejects fails with `{E}::from(retry_runtime::Rejected)`",
    note = "implement `From<retry_runtime::Rejected>` for `{E}`; `std::io::Error`, boxed errors and `anyhow::Error` have it"
)]
pub trait Refuse<E> {
    /// The rejection error, `None` without a throttle.
    fn refuse(&self) -> Option<E>;
}

impl<E> Refuse<E> for () {
    #[inline(always)]
    fn refuse(&self) -> Option<E> {
        None
    }
}

impl Throttle for () {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn coarse_now(&self, _: bool) -> Option<Stamp> {
        Some(Stamp::ORIGIN)
    }
    #[inline(always)]
    fn reject_probability(&self, _: Stamp) -> f64 {
        0.0
    }
    #[inline(always)]
    fn record(&self, _: Stamp, _: bool) {}
    #[inline(always)]
    fn record_recent(&self, _: bool) {}
}

impl Throttle for &AdaptiveThrottle {
    const ACTIVE: bool = true;
    #[inline]
    fn coarse_now(&self, system: bool) -> Option<Stamp> {
        if system {
            AdaptiveThrottle::coarse_now(self)
        } else {
            None
        }
    }
    #[inline]
    fn reject_probability(&self, now: Stamp) -> f64 {
        AdaptiveThrottle::reject_probability_at(self, now)
    }
    #[inline]
    fn record(&self, now: Stamp, accepted: bool) {
        AdaptiveThrottle::record_at(self, now, accepted)
    }
    #[inline]
    fn record_recent(&self, accepted: bool) {
        AdaptiveThrottle::record_recent(self, accepted)
    }
}

impl<E: From<Rejected>> Refuse<E> for &AdaptiveThrottle {
    #[inline]
    fn refuse(&self) -> Option<E> {
        Some(E::from(Rejected::new()))
    }
}

/// A throttle with the error type's rejection taken where the user wrote `throttle` (by the
/// attribute's `checks::check_throttle`), so that a missing `From<Rejected>` is reported once,
/// there.
pub struct ThrottleOf<'a, E> {
    pub(crate) throttle: &'a AdaptiveThrottle,
    pub(crate) reject: fn() -> E,
}

impl<E> std::fmt::Debug for ThrottleOf<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.throttle.fmt(f)
    }
}

impl<E> Throttle for ThrottleOf<'_, E> {
    const ACTIVE: bool = true;
    #[inline]
    fn coarse_now(&self, system: bool) -> Option<Stamp> {
        Throttle::coarse_now(&self.throttle, system)
    }
    #[inline]
    fn reject_probability(&self, now: Stamp) -> f64 {
        self.throttle.reject_probability_at(now)
    }
    #[inline]
    fn record(&self, now: Stamp, accepted: bool) {
        self.throttle.record_at(now, accepted)
    }
    #[inline]
    fn record_recent(&self, accepted: bool) {
        self.throttle.record_recent(accepted)
    }
}

impl<E> Refuse<E> for ThrottleOf<'_, E> {
    #[inline]
    fn refuse(&self) -> Option<E> {
        Some((self.reject)())
    }
}

/// Builds the error of a call rejected by an open breaker.
#[diagnostic::on_unimplemented(
    message = "`breaker` needs the error type `{E}` to implement `From<retry_runtime::Open>`",
    label = "a call rejected by the open breaker fails with `{E}::from(retry_runtime::Open)`",
    note = "implement `From<retry_runtime::Open>` for `{E}`; `std::io::Error`, boxed errors and `anyhow::Error` have it"
)]
pub trait Reject<E> {
    /// The rejection error, `None` without a breaker.
    fn reject(&self) -> Option<E>;
}

impl<E> Reject<E> for () {
    #[inline(always)]
    fn reject(&self) -> Option<E> {
        None
    }
}

impl<E: From<Open>> Reject<E> for &CircuitBreaker {
    #[inline]
    fn reject(&self) -> Option<E> {
        Some(E::from(Open::new()))
    }
}

/// A breaker with the error type's rejection taken where the user wrote `breaker` (by the
/// attribute's `checks::check_breaker`), so that a missing `From<Open>` is reported once, there.
/// `B` is the borrowed breaker (`&CircuitBreaker`, or a fleet's shared one).
pub struct BreakerOf<B, E> {
    pub(crate) breaker: B,
    pub(crate) reject: fn() -> E,
}

impl<B: std::fmt::Debug, E> std::fmt::Debug for BreakerOf<B, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.breaker.fmt(f)
    }
}

impl<B: Breaker, E> Breaker for BreakerOf<B, E> {
    const ACTIVE: bool = true;
    type Pending = bool;
    #[inline]
    fn acquire(&self, now: Instant) -> Option<Permit> {
        self.breaker.acquire(now)
    }
    #[inline]
    fn record(&self, now: Instant, permit: Permit, success: bool) {
        self.breaker.record(now, permit, success)
    }
    #[inline]
    fn would_admit(&self, now: Instant) -> bool {
        self.breaker.would_admit(now)
    }
    #[inline]
    fn release(&self, permit: Permit) {
        self.breaker.release(permit)
    }
}

impl<B, E> Reject<E> for BreakerOf<B, E> {
    #[inline]
    fn reject(&self) -> Option<E> {
        Some((self.reject)())
    }
}
