//! Overload protection and observation: retry budget, circuit breaker, server-hinted delays,
//! the `on_retry` callback and what tracing events call the function. Each is a type
//! parameter of [`Extras`] whose default does nothing and costs nothing.

use std::fmt;
use std::time::{Duration, Instant};

use crate::breaker::{CircuitBreaker, Open, Permit};
use crate::budget::RetryBudget;
use crate::hooks::Noop;

/// The overload-protection and observation settings of a policy: budget `Bu`, breaker `Br`,
/// hint `H`, `on_retry` callback `R` and the description `N` its tracing events give of the
/// call ([`Describe`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras<Bu = (), Br = (), H = Noop, R = Noop, N = ()> {
    pub(crate) budget: Bu,
    pub(crate) breaker: Br,
    pub(crate) hint: H,
    pub(crate) on_retry: R,
    pub(crate) describe: N,
}

impl Extras {
    /// Nothing: no budget, no breaker, no hint, no callback, no name.
    pub const NONE: Self = Extras {
        budget: (),
        breaker: (),
        hint: Noop,
        on_retry: Noop,
        describe: (),
    };
}

/// What the tracing events of a policy's calls say about them: the name of the retried
/// function (the `function` field) and how an error is written (the `error` field).
///
/// `()`, the default, names no function and writes the error's type name; [`Name`], set with
/// [`PolicyBuilder::name`](crate::PolicyBuilder::name), names the function; `#[robust]` gives
/// the fn's name and writes the error's `Display` text when its type has one. Nothing reads it
/// without the `tracing` feature.
pub trait Describe<E> {
    /// The name of the retried function, if known.
    fn name(&self) -> Option<&'static str> {
        None
    }

    /// Writes `error` for an event: by default, the name of its type.
    fn write_error(&self, error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let _ = error;
        f.write_str(std::any::type_name::<E>())
    }
}

impl<E> Describe<E> for () {}

/// The name of a policy's function for its tracing events, set with
/// [`PolicyBuilder::name`](crate::PolicyBuilder::name). Without the `tracing` feature it is
/// not kept (nothing would read it) and takes no space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Name {
    #[cfg(feature = "tracing")]
    name: &'static str,
}

impl Name {
    /// A function name.
    pub const fn new(name: &'static str) -> Self {
        #[cfg(not(feature = "tracing"))]
        let _ = name;
        Name {
            #[cfg(feature = "tracing")]
            name,
        }
    }

    /// The name; `None` without the `tracing` feature, which does not keep it.
    pub const fn get(&self) -> Option<&'static str> {
        #[cfg(feature = "tracing")]
        {
            Some(self.name)
        }
        #[cfg(not(feature = "tracing"))]
        {
            None
        }
    }
}

impl<E> Describe<E> for Name {
    #[inline]
    fn name(&self) -> Option<&'static str> {
        self.get()
    }
}

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

/// A circuit breaker, or `()` for none.
pub trait Breaker {
    /// Whether there is a breaker (the loop reads the clock for it only then).
    const ACTIVE: bool;
    /// Lets an attempt start at `now`, or not.
    fn acquire(&self, now: Instant) -> Option<Permit>;
    /// Records the outcome of an attempt admitted with `permit`.
    fn record(&self, now: Instant, permit: Permit, success: bool);
}

impl Breaker for () {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn acquire(&self, _: Instant) -> Option<Permit> {
        Some(Permit::NONE)
    }
    #[inline(always)]
    fn record(&self, _: Instant, _: Permit, _: bool) {}
}

impl Breaker for &CircuitBreaker {
    const ACTIVE: bool = true;
    #[inline]
    fn acquire(&self, now: Instant) -> Option<Permit> {
        CircuitBreaker::acquire(self, now)
    }
    #[inline]
    fn record(&self, now: Instant, permit: Permit, success: bool) {
        CircuitBreaker::record_permit(self, now, permit, success)
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

/// A delay suggested by the failure itself (a `Retry-After` header, say): when it returns
/// one, it replaces the computed backoff (still bounded by `max_delay`). Implemented for every
/// `Fn(&E) -> Option<Duration>`.
pub trait Hint<E> {
    /// The delay the failure asks for, if any.
    fn hint(&self, error: &E) -> Option<Duration>;
}

impl<E> Hint<E> for Noop {
    #[inline(always)]
    fn hint(&self, _: &E) -> Option<Duration> {
        None
    }
}

impl<E, F: Fn(&E) -> Option<Duration>> Hint<E> for F {
    #[inline]
    fn hint(&self, error: &E) -> Option<Duration> {
        self(error)
    }
}

/// Which rule decided a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleId {
    /// The `when` rule at this position (0 for the first written).
    When(usize),
    /// The `on` rule.
    On,
}

/// What `on_retry` learns about the retry about to be made.
///
/// Retries are numbered from 1 everywhere: [`retry`](Self::retry) is 1 for the first retry,
/// the `retry` field of the tracing event for it says 1, and the attempt it starts sees
/// [`Attempt::retries`](crate::Attempt::retries) = 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryInfo {
    /// The number of this retry: 1 for the first. It is also the
    /// [`Attempt::retries`](crate::Attempt::retries) of the attempt this retry starts.
    pub retry: u32,
    /// The delay about to be slept.
    pub delay: Duration,
    /// Time since the first attempt of the call started.
    pub elapsed: Duration,
    /// The rule that matched the error.
    pub rule: RuleId,
    /// Whether the delay came from the hint rather than the backoff strategy.
    pub hinted: bool,
}

/// Called before each retry's sleep with the error and a [`RetryInfo`]. Implemented for every
/// `Fn(&E, &RetryInfo)`.
pub trait OnRetry<E> {
    /// Whether there is a callback (the loop computes [`RetryInfo`] only then).
    const ACTIVE: bool = true;
    /// The callback.
    fn on_retry(&self, error: &E, info: &RetryInfo);
}

impl<E> OnRetry<E> for Noop {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn on_retry(&self, _: &E, _: &RetryInfo) {}
}

impl<E, F: Fn(&E, &RetryInfo)> OnRetry<E> for F {
    #[inline]
    fn on_retry(&self, error: &E, info: &RetryInfo) {
        self(error, info)
    }
}
