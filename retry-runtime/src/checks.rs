//! The checks `#[robust]` makes through the type system, each with the message you see when it
//! fails.
//!
//! The attribute validates what it can read (keys, durations, numbers, names) while it
//! expands. What only the compiler knows (the return type, the error type, the type of a
//! callback or of an argument) it checks by calling the items of this module, whose bounds
//! carry a `#[diagnostic::on_unimplemented]` message that says what is wrong and how to fix
//! it. They are public so that those messages name a path you can read; you do not call them
//! yourself.

use std::io::ErrorKind;
use std::marker::PhantomData;
use std::time::Duration;

use crate::guard::{AsBreaker, AsBudget, BreakerOf};
use crate::kind::{ErrorView as Inspector, Io, Timeout, Viewed};
use crate::timeout::AsyncLimit;
use crate::{Elapsed, RetryInfo};

/// The `Ok` and `Err` types of a `Result` return type.
#[diagnostic::on_unimplemented(
    message = "`#[robust]` needs a function that returns a `Result`, found `{Self}`",
    label = "this return type is not a `Result`",
    note = "failures are recognised by their `Err` value: return `Result<T, E>` (or an alias such as `std::io::Result<T>`)"
)]
pub trait IsResult {
    /// The success type.
    type Ok;
    /// The error type.
    type Err;
    /// Converts into the `Result`.
    fn into_result(self) -> Result<Self::Ok, Self::Err>;
    /// Converts back from the `Result`.
    fn from_result(r: Result<Self::Ok, Self::Err>) -> Self;
}

impl<T, E> IsResult for Result<T, E> {
    type Ok = T;
    type Err = E;
    #[inline(always)]
    fn into_result(self) -> Result<T, E> {
        self
    }
    #[inline(always)]
    fn from_result(r: Result<T, E>) -> Self {
        r
    }
}

/// Owned arguments are cloned for each attempt.
#[diagnostic::on_unimplemented(
    message = "`#[robust]` clones owned arguments for every attempt, but `{Self}` is not `Clone`",
    label = "this argument is taken by value and `{Self}` does not implement `Clone`",
    note = "take the argument by reference (`&{Self}`), or implement `Clone` for it"
)]
pub trait CloneArg: Sized {
    /// A copy for the next attempt.
    fn clone_arg(&self) -> Self;
}

impl<T: Clone> CloneArg for T {
    #[inline(always)]
    fn clone_arg(&self) -> Self {
        self.clone()
    }
}

/// A clone of an owned argument for one attempt.
#[inline(always)]
pub fn clone_arg<T: CloneArg>(arg: &T) -> T {
    arg.clone_arg()
}

/// `timeout` on an async fn needs `E: From<Elapsed>`.
#[diagnostic::on_unimplemented(
    message = "`timeout` and `deadline` need the error type `{Self}` to implement `From<retry_runtime::Elapsed>`",
    label = "an attempt cut by its timeout or the call's deadline fails with `{Self}::from(retry_runtime::Elapsed)`",
    note = "implement `From<retry_runtime::Elapsed>` for `{Self}`; `std::io::Error`, boxed errors and `anyhow::Error` have it"
)]
pub trait FromElapsed {
    /// The conversion.
    fn from_elapsed(e: Elapsed) -> Self;
}

impl<E: From<Elapsed>> FromElapsed for E {
    #[inline]
    fn from_elapsed(e: Elapsed) -> Self {
        E::from(e)
    }
}

/// The timeout of an async fn: checks `E: From<Elapsed>` where the user wrote `timeout`.
#[inline(always)]
pub fn async_timeout<E: FromElapsed>(limit: Duration) -> AsyncLimit<E> {
    AsyncLimit {
        limit_nanos: u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX),
        convert: E::from_elapsed,
    }
}

/// The deadline of an async fn: checks `E: From<Elapsed>` where the user wrote `deadline`.
#[inline(always)]
pub fn async_deadline<E: FromElapsed, T>(
    timeout: T,
    deadline: Duration,
) -> crate::timeout::AsyncDeadline<T, E> {
    crate::timeout::AsyncDeadline {
        timeout,
        deadline,
        convert: E::from_elapsed,
    }
}

/// The adaptive timeout of a blocking fn (SPEC section 15b), its values validated by the
/// attribute.
#[inline(always)]
pub fn adaptive_timeout(
    latencies: &'static crate::latency::Latencies,
    p: f64,
    factor: f64,
    min: Duration,
    max: Duration,
) -> crate::timeout::Adaptive<'static> {
    crate::timeout::Adaptive::from_parts(latencies, p, factor, min, max)
}

/// The adaptive timeout of an async fn: checks `E: From<Elapsed>` where the user wrote
/// `timeout`.
#[inline(always)]
pub fn async_adaptive<E: FromElapsed>(
    latencies: &'static crate::latency::Latencies,
    p: f64,
    factor: f64,
    min: Duration,
    max: Duration,
) -> crate::timeout::ElapsedAs<crate::timeout::Adaptive<'static>, E> {
    crate::timeout::ElapsedAs {
        timeout: adaptive_timeout(latencies, p, factor, min, max),
        convert: E::from_elapsed,
    }
}

/// `hedge(after = DURATION, max = N)`, validated by the attribute.
#[inline(always)]
pub const fn hedge_after(after: Duration, max: u32) -> crate::hedge::Hedge<'static> {
    crate::hedge::Hedge::from_parts(crate::hedge::After::Fixed(after), max)
}

/// `hedge(after = pNN, max = N)`, validated by the attribute.
#[inline(always)]
pub fn hedge_percentile(
    latencies: &'static crate::latency::Latencies,
    p: f64,
    max: u32,
) -> crate::hedge::Hedge<'static> {
    crate::hedge::Hedge::from_parts(
        crate::hedge::After::Percentile(crate::latency::Quantile::from_percent(p), latencies),
        max,
    )
}

/// A timeout setting with hedging.
#[inline(always)]
pub const fn hedged<T>(
    timeout: T,
    hedge: crate::hedge::Hedge<'static>,
) -> crate::hedge::Hedged<'static, T> {
    crate::hedge::Hedged { timeout, hedge }
}

/// Checks an `on_success` callback.
#[inline(always)]
pub fn on_success<F: Fn()>(f: F) -> F {
    f
}

/// A callback checked against the error type where the user wrote it. Its trait impls hold
/// for every `F`: the call goes through `call`, made when `F`'s bound was proven, so a
/// callback of the wrong type is reported once, at the callback, and not again at each use.
pub struct Checked<F, C> {
    f: F,
    call: C,
}

impl<F, C> std::fmt::Debug for Checked<F, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Checked")
    }
}

impl<E, F> crate::callbacks::OnError<E> for Checked<F, fn(&F, &E, u32)> {
    #[inline(always)]
    fn on_error(&self, error: &E, retries: u32) {
        (self.call)(&self.f, error, retries)
    }
}

/// The call of a checked `on_retry` callback.
pub type OnRetryCall<R, T, E> = fn(&R, &Result<T, E>, &RetryInfo);

impl<T, E, F> crate::callbacks::OnRetry<T, E> for Checked<F, OnRetryCall<F, T, E>> {
    #[inline(always)]
    fn on_retry(&self, outcome: &Result<T, E>, info: &RetryInfo) {
        (self.call)(&self.f, outcome, info)
    }
}

/// The call of a checked `hint` closure.
pub type HintCall<H, E> = fn(&H, &E) -> Option<Duration>;

impl<E, F> crate::callbacks::Hint<E> for Checked<F, HintCall<F, E>> {
    #[inline(always)]
    fn hint(&self, error: &E) -> Option<Duration> {
        (self.call)(&self.f, error)
    }
}

/// Checks an `on_error` callback against the error type `E` (reported once, here).
#[inline(always)]
pub fn on_error<E, F: Fn(&E, u32)>(f: F) -> Checked<F, fn(&F, &E, u32)> {
    Checked {
        f,
        call: |f, e, n| f(e, n),
    }
}

/// The view found by the probe: `E` can be seen as `&dyn Error`.
#[derive(Debug)]
pub struct View<E>(pub(crate) Inspector<E>);

/// What the probe finds for an error type with no `&dyn Error` view.
#[derive(Debug)]
pub struct NoView<E>(pub(crate) PhantomData<fn() -> E>);

impl<E> Clone for View<E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for View<E> {}
impl<E> Clone for NoView<E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for NoView<E> {}

/// An `Io` kind needs a view of the error: without one it could never match.
#[diagnostic::on_unimplemented(
    message = "`Io` can never match: the error type `{E}` gives no `std::error::Error` view",
    label = "`Io` looks for a `std::io::Error` in the error and its `source()` chain",
    note = "implement `std::error::Error` for `{E}` (or `retry_runtime::Inspect`), or match its variants with a pattern such as `MyError::Io(_)`"
)]
pub trait IoView<E> {
    /// The inspector.
    fn inspector(self) -> Inspector<E>;
}
impl<E> IoView<E> for View<E> {
    #[inline(always)]
    fn inspector(self) -> Inspector<E> {
        self.0
    }
}

/// A `Timeout` kind without a `timeout` needs a view of the error: it can then only match an
/// `std::io::Error` of kind `TimedOut` in the error's `source()` chain. (A `deadline` alone
/// does not help: an attempt it cuts leaves no time for a retry.)
#[diagnostic::on_unimplemented(
    message = "`Timeout` can never be retried: no `timeout` is set and the error type `{E}` gives no `std::error::Error` view",
    label = "without a `timeout`, `Timeout` only matches an `std::io::Error` of kind `TimedOut` in the error's `source()` chain",
    note = "set a `timeout` (an attempt the `deadline` cuts is never retried: no time is left), implement `std::error::Error` for `{E}` (or `retry_runtime::Inspect`), or match its variants with a pattern such as `MyError::TimedOut`"
)]
pub trait TimeoutView<E> {
    /// The inspector.
    fn inspector(self) -> Inspector<E>;
}
impl<E> TimeoutView<E> for View<E> {
    #[inline(always)]
    fn inspector(self) -> Inspector<E> {
        self.0
    }
}

/// Any view, or none: a `Timeout` kind with a `timeout` matches the attempts that ran out of
/// it whatever the error type.
pub trait AnyView<E> {
    /// The inspector.
    fn inspector(self) -> Inspector<E>;
}
impl<E> AnyView<E> for View<E> {
    #[inline(always)]
    fn inspector(self) -> Inspector<E> {
        self.0
    }
}
impl<E> AnyView<E> for NoView<E> {
    #[inline(always)]
    fn inspector(self) -> Inspector<E> {
        |_| None
    }
}

/// `Io(...)`: checks that the error type has a view.
#[inline(always)]
pub fn io_kind<E, V: IoView<E>, const N: usize>(
    view: V,
    kinds: [ErrorKind; N],
) -> Viewed<Io<N>, E> {
    Viewed::new(Io::any_or(kinds), view.inspector())
}

/// `Timeout` with a `timeout` set: matches with or without a view.
#[inline(always)]
pub fn timeout_kind<E, V: AnyView<E>>(view: V) -> Viewed<Timeout, E> {
    Viewed::new(Timeout, view.inspector())
}

/// `Timeout` without a `timeout`: checks that the error type has a view.
#[inline(always)]
pub fn timeout_kind_viewed<E, V: TimeoutView<E>>(view: V) -> Viewed<Timeout, E> {
    Viewed::new(Timeout, view.inspector())
}

/// A bare name written as a kind must name a value of the error type (a constant, unit
/// struct or unit variant): `let _: E = NAME` in a closure that is never called checks it.
#[inline(always)]
pub fn is_value_of<E>(_: fn() -> E) {}

/// Checks a `budget = ...` value (a `RetryBudget` or a fleet's shared budget, by value or
/// behind a pointer: [`AsBudget`]).
#[inline(always)]
pub fn budget<G: AsBudget + ?Sized>(b: &G) -> G::Ref<'_> {
    b.as_budget()
}

/// Checks a `hint` closure against the error type `E` (reported once, here).
#[inline(always)]
pub fn hint<E, H: Fn(&E) -> Option<Duration>>(h: H) -> Checked<H, HintCall<H, E>> {
    Checked {
        f: h,
        call: |h, e| h(e),
    }
}

/// Checks an `on_retry` callback against the fn's `Result<T, E>` (reported once, here).
#[inline(always)]
pub fn on_retry<T, E, R: Fn(&Result<T, E>, &RetryInfo)>(r: R) -> Checked<R, OnRetryCall<R, T, E>> {
    Checked {
        f: r,
        call: |r, o, i| r(o, i),
    }
}

/// A checked `Ok(..)` kind of the fn's `Ok` type `T`, with its `hint` (`Noop` for none).
pub struct OkKind<T, F, H> {
    test: F,
    hint: H,
    call: fn(&F, &T) -> bool,
    hint_call: fn(&H, &T) -> Option<Duration>,
}

impl<T, F, H> std::fmt::Debug for OkKind<T, F, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OkKind")
    }
}

impl<T, F, H> crate::kind::ClassifyValue<T> for OkKind<T, F, H> {
    #[inline(always)]
    fn matches_value(&self, value: &T) -> bool {
        (self.call)(&self.test, value)
    }
    #[inline(always)]
    fn hint_value(&self, value: &T) -> Option<Duration> {
        (self.hint_call)(&self.hint, value)
    }
}

/// `Ok(CLOSURE)` or `Ok(PATTERN)` (as a closure): checks it against the fn's `Ok` type `T`,
/// where it is written (a direct `Fn` bound, so that `Ok(|v| ...)` infers `v: &T`).
#[inline(always)]
pub fn ok_kind<T, F: Fn(&T) -> bool>(test: F) -> OkKind<T, F, crate::callbacks::Noop> {
    OkKind {
        test,
        hint: crate::callbacks::Noop,
        call: |f, v| f(v),
        hint_call: |_, _| None,
    }
}

/// `hint = ...` inside `when(Ok(..), ...)`: checks it against the fn's `Ok` type `T`.
#[inline(always)]
pub fn ok_hint<T, F, H: Fn(&T) -> Option<Duration>>(
    kind: OkKind<T, F, crate::callbacks::Noop>,
    hint: H,
) -> OkKind<T, F, H> {
    OkKind {
        test: kind.test,
        hint,
        call: kind.call,
        hint_call: |h, v| h(v),
    }
}

/// A checked fallback: `F` was proven to be one where the attribute's `fallback` is written,
/// and is called through `call`, which has no bound left to fail (so a wrong fallback is one
/// error, there).
pub struct FallbackChecked<F, E, O> {
    f: F,
    call: fn(F, E) -> O,
}

impl<F, E, O> std::fmt::Debug for FallbackChecked<F, E, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FallbackChecked")
    }
}

impl<F, E, O> FallbackChecked<F, E, O> {
    /// Calls the fallback with the error. It takes the fallback by value, and calls it once
    /// (an `FnOnce`: it may move what it captured, or use `&mut self`): the fallback (which
    /// may borrow the fn's arguments) is gone here, not held across an async fn's `.await` of
    /// what it returned.
    #[inline(always)]
    pub fn run(self, error: E) -> O {
        (self.call)(self.f, error)
    }
}

/// Checks a blocking fn's `fallback` against its `Result<T, E>`, where it is written (a direct
/// `FnOnce` bound, so that `|e| ...` infers `e: E`; it is called once).
#[inline(always)]
pub fn fallback<T, E, F: FnOnce(E) -> Result<T, E>>(f: F) -> FallbackChecked<F, E, Result<T, E>> {
    FallbackChecked {
        f,
        call: |f, e| f(e),
    }
}

/// Checks an async fn's `fallback` against its error type `E`: it returns the fn's `Result`
/// or a future of it (told apart by [`FallbackIsResult`] and [`FallbackIsFuture`]).
#[inline(always)]
pub fn async_fallback<E, O, F: FnOnce(E) -> O>(f: F) -> FallbackChecked<F, E, O> {
    FallbackChecked {
        f,
        call: |f, e| f(e),
    }
}

/// Tells apart what an async fn's fallback returned, by autoref: a `Result` is returned as it
/// is ([`FallbackResult`]), a future is awaited ([`FallbackAwait`]).
pub trait FallbackIsResult {
    /// The tag of a `Result`.
    fn fallback_kind(&self) -> FallbackResult {
        FallbackResult
    }
}
impl<T, E> FallbackIsResult for Result<T, E> {}

/// See [`FallbackIsResult`]: the tag of a future.
pub trait FallbackIsFuture {
    /// The tag of a future.
    fn fallback_kind(&self) -> FallbackAwait {
        FallbackAwait
    }
}
impl<F> FallbackIsFuture for &F {}

/// What an async fn's fallback returns, when it is not a `Result`: a future of one.
#[diagnostic::on_unimplemented(
    message = "`fallback` must return `Result<{T}, {E}>` or a future of it, found `{Self}`",
    label = "the value of this fallback is returned by the fn",
    note = "an async fallback returns a future whose output is the fn's `Result` type"
)]
pub trait FallbackFuture<T, E>: Future<Output = Result<T, E>> {}
impl<T, E, F: Future<Output = Result<T, E>>> FallbackFuture<T, E> for F {}

/// The fallback returned a `Result`.
#[derive(Debug, Clone, Copy)]
pub struct FallbackResult;

impl FallbackResult {
    /// The `Result`, now: nothing is awaited (a ready future that held it across its
    /// `.await` would make the fn's future `Send` only for a `T` and an `E` that are).
    #[inline(always)]
    pub fn split<T, E, R: FallbackResultOf<T, E>>(self, r: R) -> FallbackNow<T, E, NoFuture<T, E>> {
        FallbackNow::Now(r.into_result())
    }
}

/// What an async fn's fallback gave: its `Result` now, or a future of it to await.
#[derive(Debug)]
pub enum FallbackNow<T, E, F> {
    /// The `Result` the fallback returned.
    Now(Result<T, E>),
    /// The future it returned.
    Later(F),
}

/// The future of a fallback that returned a `Result`: there is none (never made).
#[derive(Debug)]
pub struct NoFuture<T, E> {
    never: std::convert::Infallible,
    _result: PhantomData<fn() -> (T, E)>,
}

impl<T, E> Future for NoFuture<T, E> {
    type Output = Result<T, E>;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<T, E>> {
        match self.never {}
    }
}

/// A fallback's `Result` must be the fn's.
#[diagnostic::on_unimplemented(
    message = "`fallback` must return `Result<{T}, {E}>` or a future of it, found `{Self}`",
    label = "the value of this fallback is returned by the fn"
)]
pub trait FallbackResultOf<T, E> {
    /// The `Result`.
    fn into_result(self) -> Result<T, E>;
}
impl<T, E> FallbackResultOf<T, E> for Result<T, E> {
    #[inline(always)]
    fn into_result(self) -> Result<T, E> {
        self
    }
}

/// The fallback returned a future.
#[derive(Debug, Clone, Copy)]
pub struct FallbackAwait;

impl FallbackAwait {
    /// The future, to await. It is checked here, where the fallback is written; the future
    /// returned is awaitable whatever `F` is, so a wrong one is reported once.
    #[inline(always)]
    pub fn split<T, E, F: FallbackFuture<T, E>>(
        self,
        f: F,
    ) -> FallbackNow<T, E, FallbackFut<F, T, E>> {
        FallbackNow::Later(FallbackFut {
            fut: f,
            poll: |f, cx| f.poll(cx),
        })
    }
}

pin_project_lite::pin_project! {
    /// An async fallback's future, polled through the function its check made.
    pub struct FallbackFut<F, T, E> {
        #[pin]
        fut: F,
        poll: fn(std::pin::Pin<&mut F>, &mut std::task::Context<'_>) -> std::task::Poll<Result<T, E>>,
    }
}

impl<F, T, E> std::fmt::Debug for FallbackFut<F, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FallbackFut")
    }
}

impl<F, T, E> Future for FallbackFut<F, T, E> {
    type Output = Result<T, E>;
    #[inline(always)]
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<T, E>> {
        let this = self.project();
        (this.poll)(this.fut, cx)
    }
}
/// `breaker` needs `E: From<Open>`.
#[diagnostic::on_unimplemented(
    message = "`breaker` needs the error type `{Self}` to implement `From<retry_runtime::Open>`",
    label = "a call rejected by the open breaker fails with `{Self}::from(retry_runtime::Open)`",
    note = "implement `From<retry_runtime::Open>` for `{Self}`; `std::io::Error`, boxed errors and `anyhow::Error` have it"
)]
pub trait FromOpen {
    /// The rejection error.
    fn from_open() -> Self;
}
impl<E: From<crate::Open>> FromOpen for E {
    #[inline]
    fn from_open() -> Self {
        E::from(crate::Open::new())
    }
}

/// `budget`, `breaker`, `throttle` or `limit` given as a path (`limit = LIMIT`): the path names
/// a `static`, one guard shared by every call. A `const` would make a new guard each time it
/// is named (a guard has interior mutability, so `&CONST` is a temporary), which would never
/// run dry, open, throttle or limit: rustc reports that temporary, at the path ("temporary
/// value dropped while borrowed"). Declare the guard `static`.
#[inline(always)]
pub fn static_guard<G: ?Sized>(guard: &'static G) {
    let _ = guard;
}

/// A guard's expression that is a value made by the call (a call, a method call, a block) must
/// not give a guard itself, which would be new for each call: this bound, which no type meets,
/// is put on the guards' own types ([`OwnedGuard`]) when such an expression gives one.
#[diagnostic::on_unimplemented(
    message = "this expression makes a new `{Self}` for each call, which would never run dry, open, throttle or limit anything",
    label = "a guard made here serves one call only",
    note = "declare the guard once, as a `static` (a `LazyLock` for one built with `?` or `.unwrap()`), and name it: `breaker = BREAKER`",
    note = "a reference or an `Arc` to a guard made once is fine: a keyed map's `BREAKERS.get(host)`, a fn returning `&'static CircuitBreaker`",
    note = "a fleet's `SharedBreaker` or `SharedBudget` taken by value may be one made here (`Fleet::breaker(..)` registers a new one each time): name it through a `static`, a fn returning a `&'static` reference to it, or an `Arc` (a registry per host)"
)]
pub trait SharedGuard {}

/// The guards' own types: a value of one made by the call is a new guard. A fleet's
/// `SharedBreaker` and `SharedBudget` are among them: a clone of one shares its guard, but
/// one made by the call (`Fleet::breaker(..)`, directly or in a fn the expression calls)
/// registers a new shared guard, with a new local one, whose counts end with the call; the
/// value alone cannot tell the two apart, so a handle is named as a guard is (a `static`, or
/// a reference a fn returns).
pub trait OwnedGuard {}
impl OwnedGuard for crate::CircuitBreaker {}
impl OwnedGuard for crate::RetryBudget {}
impl OwnedGuard for crate::AdaptiveThrottle {}
impl OwnedGuard for crate::ConcurrencyLimit {}
#[cfg(feature = "redis")]
impl OwnedGuard for crate::guard::fleet::SharedBreaker {}
#[cfg(feature = "redis")]
impl OwnedGuard for crate::guard::fleet::SharedBudget {}
/// A keyed map made by the call (`Keyed::new(..).unwrap().get(host)`, `make_map().get(host)`)
/// makes a new guard for each key on each call.
impl<K, G> OwnedGuard for crate::guard::Keyed<K, G> {}
impl<T: OwnedGuard + ?Sized> OwnedGuard for Box<T> {}
impl<T: OwnedGuard, F> OwnedGuard for std::sync::LazyLock<T, F> {}

/// What a guard's value is checked through (by autoref: [`OwnedGuardCheck`] for a guard's own
/// type, [`AnyValueCheck`], which accepts it, for anything else: a reference, an `Arc`, or a
/// value of another type, whose error is the guard key's own).
#[derive(Debug)]
pub struct GuardValue<'a, T: ?Sized>(pub &'a T);

/// A guard's own type, made by the call: an error ([`SharedGuard`]).
pub trait OwnedGuardCheck {
    /// The guard's type.
    type Guard: ?Sized;
    /// Does not compile: the guard would be new for each call.
    #[inline(always)]
    fn robust_shared_guard(&self)
    where
        Self::Guard: SharedGuard,
    {
    }
}
impl<T: OwnedGuard + ?Sized> OwnedGuardCheck for GuardValue<'_, T> {
    type Guard = T;
}

/// Any other value: accepted here.
pub trait AnyValueCheck {
    /// Accepts the value.
    #[inline(always)]
    fn robust_shared_guard(&self) {}
}
impl<T: ?Sized> AnyValueCheck for &GuardValue<'_, T> {}

/// `breaker = ...`: checks `E: From<Open>` (the breaker is a `CircuitBreaker` or a fleet's
/// shared breaker, itself or behind a pointer: [`AsBreaker`]).
#[inline(always)]
pub fn check_breaker<E: FromOpen, G: AsBreaker + ?Sized>(breaker: &G) -> BreakerOf<G::Ref<'_>, E> {
    BreakerOf {
        breaker: breaker.as_breaker(),
        reject: E::from_open,
    }
}

/// `throttle` needs `E: From<Rejected>`.
#[diagnostic::on_unimplemented(
    message = "`throttle` and `limit` need the error type `{Self}` to implement `From<retry_runtime::Rejected>`",
    label = "an attempt the throttle or the limit rejects fails with `{Self}::from(retry_runtime::Rejected)`",
    note = "implement `From<retry_runtime::Rejected>` for `{Self}`; `std::io::Error`, boxed errors and `anyhow::Error` have it"
)]
pub trait FromRejected {
    /// The rejection error.
    fn from_rejected() -> Self;
}
impl<E: From<crate::Rejected>> FromRejected for E {
    #[inline]
    fn from_rejected() -> Self {
        E::from(crate::Rejected::new())
    }
}

/// `throttle = ...`: checks `E: From<Rejected>`.
#[inline(always)]
pub fn check_throttle<E: FromRejected>(
    throttle: &crate::AdaptiveThrottle,
) -> crate::guard::ThrottleOf<'_, E> {
    crate::guard::ThrottleOf {
        throttle,
        reject: E::from_rejected,
    }
}

/// `limit = ...`: checks `E: From<Rejected>`.
#[inline(always)]
pub fn check_limit<E: FromRejected>(
    limit: &crate::ConcurrencyLimit,
) -> crate::guard::LimitOf<'_, E> {
    crate::guard::LimitOf {
        limit,
        reject: E::from_rejected,
    }
}
