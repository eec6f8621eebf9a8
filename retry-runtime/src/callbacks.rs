//! Callbacks and observers: `on_success()` after a successful attempt, `on_error(&E, retries)`
//! after every failed one, `on_retry(&Result<T, E>, &RetryInfo)` before each retry's sleep,
//! the `hint` that reads a delay from a failure, the [`Fallback`] called when the call gives
//! up, and what tracing events say about a call ([`Describe`]).

use std::fmt;
use std::time::Duration;

/// No callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Noop;

/// Called once when an attempt succeeds. Implemented for every `Fn()`.
#[diagnostic::on_unimplemented(
    message = "`on_success` must be a `Fn()` callback",
    label = "expected a closure or fn taking no arguments"
)]
pub trait OnSuccess {
    /// The callback.
    fn on_success(&self);
}

impl OnSuccess for Noop {
    #[inline]
    fn on_success(&self) {}
}

impl<F: Fn()> OnSuccess for F {
    #[inline]
    fn on_success(&self) {
        self()
    }
}

/// Called after every failed attempt, the last one too, with the error and the number of
/// retries made so far: the failed attempt's [`Attempt::retries`](crate::Attempt::retries),
/// 0 for the first attempt, 1 for the attempt retry 1 started, and so on. Implemented for
/// every `Fn(&E, u32)`.
#[diagnostic::on_unimplemented(
    message = "`on_error` must be a `Fn(&{E}, u32)` callback",
    label = "expected a closure or fn taking the error and the retry count"
)]
pub trait OnError<E> {
    /// The callback.
    fn on_error(&self, error: &E, retries: u32);
}

impl<E> OnError<E> for Noop {
    #[inline]
    fn on_error(&self, _: &E, _: u32) {}
}

impl<E, F: Fn(&E, u32)> OnError<E> for F {
    #[inline]
    fn on_error(&self, error: &E, retries: u32) {
        self(error, retries)
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
    /// The rule that matched the failure (an error, or a value an `Ok(..)` kind matched).
    pub rule: RuleId,
    /// Whether the delay came from the hint rather than the backoff strategy.
    pub hinted: bool,
}

/// Called before each retry's sleep with the outcome that is retried and a [`RetryInfo`]:
/// `Err(e)` for an error, `Ok(v)` for a value an `Ok(..)` kind matched. Implemented for every
/// `Fn(&Result<T, E>, &RetryInfo)`.
///
/// It is called when the retry is decided (its budget token already spent): a retry that is
/// then not made (the breaker opened during the backoff, the call's deadline passed while it
/// waited for a slot of the concurrency limit or left it no time when its backoff ended, the
/// limit's queue was full) has been reported all the same.
#[diagnostic::on_unimplemented(
    message = "`on_retry` must be a `Fn(&Result<{T}, {E}>, &retry_runtime::RetryInfo)` callback",
    label = "expected a closure or fn taking the retried outcome and the retry's details"
)]
pub trait OnRetry<T, E> {
    /// Whether there is a callback (the loop computes [`RetryInfo`] only then).
    const ACTIVE: bool = true;
    /// The callback.
    fn on_retry(&self, outcome: &Result<T, E>, info: &RetryInfo);
}

impl<T, E> OnRetry<T, E> for Noop {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn on_retry(&self, _: &Result<T, E>, _: &RetryInfo) {}
}

impl<T, E, F: Fn(&Result<T, E>, &RetryInfo)> OnRetry<T, E> for F {
    #[inline]
    fn on_retry(&self, outcome: &Result<T, E>, info: &RetryInfo) {
        self(outcome, info)
    }
}

/// What a call returns instead of giving up with an error (SPEC section 14): called once with
/// the error the call would return (not retried, retries used up, `max_delay`, deadline, empty
/// budget, open breaker); its result is returned. Never called on success, nor when a value an
/// `Ok(..)` kind matched is returned after the retries. Implemented for every
/// `Fn(E) -> Result<T, E>`; [`Noop`] returns the error.
#[diagnostic::on_unimplemented(
    message = "`fallback` must be a `Fn({E}) -> Result<{T}, {E}>`",
    label = "expected a closure or fn taking the error by value and returning the fn's `Result`"
)]
pub trait Fallback<T, E> {
    /// Whether there is a fallback.
    const ACTIVE: bool = true;
    /// The result to return instead of `Err(error)`.
    fn fallback(&self, error: E) -> Result<T, E>;
}

impl<T, E> Fallback<T, E> for Noop {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn fallback(&self, error: E) -> Result<T, E> {
        Err(error)
    }
}

impl<T, E, F: Fn(E) -> Result<T, E>> Fallback<T, E> for F {
    #[inline]
    fn fallback(&self, error: E) -> Result<T, E> {
        self(error)
    }
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
