//! # retry_runtime
//!
//! Resilient calls for Rust: per-attempt timeouts, retry policies, backoff strategies, jitter,
//! scaling, per-error-kind rules and callbacks, for blocking and async (tokio) code. This is the
//! runtime behind the `#[robust(...)]` attribute, and a builder API of its own.
//!
//! ```
//! use std::time::Duration;
//! use retry_runtime::{Exponential, FullJitter, Policy};
//!
//! let policy = Policy::builder()
//!     .backoff(Exponential::new(Duration::from_millis(1), Duration::from_millis(8), 2.0)?)
//!     .jitter(FullJitter)
//!     .retries(5)
//!     .build()?;
//!
//! let mut calls = 0;
//! let value: Result<&str, std::io::Error> = policy.call(|_attempt| {
//!     calls += 1;
//!     if calls < 3 { Err(std::io::ErrorKind::ConnectionReset.into()) } else { Ok("done") }
//! });
//! assert_eq!(value.unwrap(), "done");
//! # Ok::<(), retry_runtime::ConfigError>(())
//! ```
//!
//! ## What is where
//! - Strategies ([`Backoff`]): [`Exponential`], [`Linear`], [`Fibonacci`], [`Polynomial`],
//!   [`Random`], [`Constant`], [`NoBackoff`], or your own.
//! - Jitter ([`Jitter`]): [`NoJitter`], [`FullJitter`], [`EqualJitter`], [`Decorrelated`],
//!   [`AwsDecorrelated`], or your own.
//! - Kinds ([`kind`]): [`AnyError`](kind::AnyError), [`Timeout`](kind::Timeout),
//!   [`Io`](kind::Io), [`Predicate`](kind::Predicate); `Ok(..)` kinds over values,
//!   [`OkIf`](kind::OkIf) ([`PolicyBuilder::on_ok`], [`PolicyBuilder::when_ok`]); a
//!   [`fallback`](PolicyBuilder::fallback).
//! - [`Policy`] and [`PolicyBuilder`]: every setting; [`Policy::call`] and
//!   [`Policy::call_async`] run a call; [`Call`] is the loop's state for hand-written loops
//!   (its parts in [`call`]).
//! - Generic code names one bound, [`RetryPolicy<T, E>`] ([`AsyncRetryPolicy<T, E>`] for
//!   async calls returning `Result<T, E>`), not a policy's type parameters;
//!   [`DynPolicy<T, E>`] is a type to store a policy under (a struct field). The [`policy`]
//!   module has the per-rule settings and rules.
//! - [`timeout`]: per-attempt timeouts; [`callbacks`]: `on_success`, `on_error`, `on_retry`,
//!   `hint`; [`guard`]: overload protection, [`RetryBudget`] and [`CircuitBreaker`]
//!   ([`PolicyBuilder::budget`] and the methods after it), [`ConcurrencyLimit`] and
//!   [`AdaptiveThrottle`] (which turn attempts away with [`Rejected`]), and guards per key
//!   ([`guard::Keyed`]).
//! - [`hedge`]: hedging async attempts ([`PolicyBuilder::hedge`]); [`latency`]: the
//!   per-function latency histogram that hedging after a percentile and adaptive timeouts
//!   ([`timeout::Adaptive`], [`PolicyBuilder::adaptive_timeout`]) read.
//! - [`time`]: the clock and sleepers, and [`VirtualTime`](time::VirtualTime) for tests.
//! - [`parse_duration`]: durations written as text, read as the attribute reads them.
//! - [`checks`]: the compile-time checks of `#[robust]` that go through types, with their
//!   messages.
//!
//! ## Cost
//! A policy is a plain value (no boxes); a call keeps its state on the stack. The blocking
//! loop allocates nothing, on success or per retry, and neither does [`Policy::call_async`],
//! but for three cases: under `#[robust]`, an async fn without a timeout allocates its backoff
//! timer the first time it sleeps (once per call that backs off), which keeps its future
//! small; a hedged call boxes its rounds once and each hedge it sends; and a retry that waits
//! for a concurrency-limit slot, with a deadline or a `max_delay` to end the wait, boxes that
//! wait. (Any wait for a slot, blocking or async, may allocate its limit's queue: see
//! [`ConcurrencyLimit`]. And the first retry of a thread that needs randomness makes `rand`'s
//! thread-local generator, none with a `seed`.) See `docs/BENCHMARKS.md`.
//!
//! ## Features
//! - `tokio` (default): [`Policy::call_async`] and async timeouts.
//! - `macros` (default): re-exports the `#[robust]` attribute.
//! - `anyhow` (default): the `Io` and `Timeout` kinds look inside `anyhow::Error`.
//! - `tracing`: events for retries, give-ups, rejected attempts (breaker, throttle, limit
//!   queue) and hedges, naming the function
//!   ([`PolicyBuilder::name`]; `#[robust]` gives its fn's name) and the error.
//! - `tower`: `retry_runtime::tower::RobustLayer`, a `tower::Layer` from a built policy.
//! - `redis`: `retry_runtime::guard::fleet`, a circuit breaker and a retry budget shared by every
//!   instance of a service through Redis, each with a local fallback.

#![warn(missing_docs)]

pub mod backoff;
pub mod call;
pub mod callbacks;
pub mod checks;
mod duration;
mod error;
pub mod guard;
pub mod hedge;
pub mod jitter;
pub mod kind;
pub mod latency;
pub mod policy;
pub mod time;
pub mod timeout;
#[cfg(feature = "tower")]
pub mod tower;

#[doc(hidden)]
pub mod __private;

// The user's vocabulary; the loop's parts stay in their modules.
pub use backoff::{
    Backoff, Constant, Exponential, Fibonacci, Linear, NoBackoff, Polynomial, Random,
};
pub use call::{Attempt, Call, Step};
pub use callbacks::{RetryInfo, RuleId};
pub use duration::{duration_from_secs, limit_from_secs, parse_duration};
pub use error::{ConfigError, Elapsed};
pub use guard::{
    AdaptiveThrottle, BreakerState, CircuitBreaker, ConcurrencyLimit, Open, Rejected, RetryBudget,
};
pub use jitter::{
    AwsDecorrelated, Decorrelated, EqualJitter, FullJitter, Jitter, JitterState, NoJitter,
};
pub use kind::Inspect;
#[cfg(feature = "tokio")]
pub use policy::AsyncRetryPolicy;
pub use policy::dynamic::DynPolicy;
pub use policy::settings::{Retries, Settings};
pub use policy::{Policy, PolicyBuilder, RetryPolicy};

#[cfg(feature = "macros")]
#[doc = include_str!("robust.md")]
pub use retry_macros::robust;
