//! [`Policy`]: every setting of one retried function; [`PolicyBuilder`] to make one; the
//! traits generic code names ([`PolicyCore`], [`RetryPolicy`], [`AsyncRetryPolicy`]);
//! [`DynPolicy`](dynamic::DynPolicy) to store one; per-rule settings and the rules' order.

mod builder;
pub mod dynamic;
pub mod rules;
pub mod settings;

pub use builder::{NoRuleYet, PolicyBuilder};

use std::fmt;
use std::time::Duration;

use crate::call::{Attempt, Blocking, Call, LazyTimes, Timed, Untimed};
use crate::callbacks::{
    Describe, Fallback, Hint, Noop, OnError, OnRetry, OnSuccess, RetryInfo, RuleId,
};
use crate::guard::{Breaker, Budget, Limit, Refuse, Reject, Throttle};
use crate::kind::AnyError;
use crate::kind::{Classify, ClassifyValue, Failure};
use crate::policy::rules::{PlanVisitor, Rules, ValueRules};
use crate::policy::settings::Plan;
use crate::policy::settings::RuleSettings;
#[cfg(feature = "tokio")]
use crate::time::AsyncSleep;
use crate::time::Env;
use crate::time::{DefaultEnv, Seeded};
#[cfg(feature = "tokio")]
use crate::timeout::AsyncTimeout;
use crate::timeout::AttemptTimeout;
use crate::timeout::NoTimeout;

/// The overload-protection and observation settings of a policy: budget `Bu`, breaker `Br`,
/// hint `H`, `on_retry` callback `R`, the description `N` its tracing events give of the
/// call ([`Describe`]), the `Ok(..)` kind of the `on` rule `V` ([`ClassifyValue`], `()` for
/// none) and the [`Fallback`] `Fb`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras<Bu = (), Br = (), H = Noop, R = Noop, N = (), V = (), Fb = Noop, Th = (), L = ()>
{
    pub(crate) budget: Bu,
    pub(crate) breaker: Br,
    pub(crate) hint: H,
    pub(crate) on_retry: R,
    pub(crate) describe: N,
    pub(crate) on_ok: V,
    pub(crate) fallback: Fb,
    pub(crate) throttle: Th,
    pub(crate) limit: L,
}

impl Extras {
    /// Nothing: no budget, no breaker, no hint, no callback, no name.
    pub const NONE: Self = Extras {
        budget: (),
        breaker: (),
        hint: Noop,
        on_retry: Noop,
        describe: (),
        on_ok: (),
        fallback: Noop,
        throttle: (),
        limit: (),
    };
}

/// Every setting of a retried function: rules, timeout, callbacks, clock and sleeper, seed.
///
/// Build one with [`Policy::builder`]; run calls with [`Policy::call`] (blocking) or
/// [`Policy::call_async`] (tokio). A policy holds no per-call state: one policy can serve any
/// number of concurrent calls, and every call starts from a fresh retry count.
///
/// The type parameters are the rules added with `when` (`W`), the `on` kind (`K`), the settings
/// of the `on` rule (`P`, a [`RuleSettings`] with its backoff and jitter types), the timeout
/// (`T`), the callbacks (`S`, `F`) and the environment (`C`); they are all inferred from the
/// builder calls.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{Constant, NoJitter, Policy};
///
/// let policy = Policy::builder()
///     .retries(2)
///     .backoff(Constant::new(Duration::from_millis(1)))
///     .jitter(NoJitter)
///     .build()?;
/// let mut attempts = 0;
/// let result: Result<u32, &str> = policy.call(|_| {
///     attempts += 1;
///     if attempts < 3 { Err("busy") } else { Ok(attempts) }
/// });
/// assert_eq!(result, Ok(3));
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Policy<
    W = (),
    K = AnyError,
    P = RuleSettings,
    T = NoTimeout,
    S = Noop,
    F = Noop,
    C = Seeded<DefaultEnv>,
    X = Extras,
> {
    pub(crate) whens: W,
    pub(crate) on: K,
    pub(crate) settings: P,
    pub(crate) timeout: T,
    pub(crate) on_success: S,
    pub(crate) on_error: F,
    pub(crate) env: C,
    pub(crate) extras: X,
}

pub(crate) mod sealed {
    /// Only this crate's policies implement [`PolicyCore`](super::PolicyCore).
    pub trait Sealed {}
}

impl<W, K, P, T, S, F, C, X> sealed::Sealed for Policy<W, K, P, T, S, F, C, X> {}
impl<P: sealed::Sealed + ?Sized> sealed::Sealed for &P {}

/// What every built policy has, whatever its error type: an environment, a timeout setting
/// and guards. Sealed; generic code names [`RetryPolicy<T, E>`], which implies it.
///
/// Its methods are the retry loop's view of a policy; they change without notice.
pub trait PolicyCore: sealed::Sealed {
    /// The clock and sleepers.
    type Env: Env + Sync;
    /// The per-attempt timeout setting.
    type Timeout: AttemptTimeout;
    /// The retry budget, `()` for none.
    type Budget: Budget + ?Sized;
    /// The circuit breaker, `()` for none.
    type Breaker: Breaker + ?Sized;
    /// The client-side throttle, `()` for none.
    type Throttle: Throttle + ?Sized;
    /// The concurrency limit, `()` for none.
    type Limit: Limit;

    /// The clock and sleepers.
    fn env(&self) -> &Self::Env;
    #[doc(hidden)]
    fn timeout_setting(&self) -> &Self::Timeout;
    #[doc(hidden)]
    fn budget(&self) -> &Self::Budget;
    #[doc(hidden)]
    fn breaker(&self) -> &Self::Breaker;
    #[doc(hidden)]
    fn throttle(&self) -> &Self::Throttle;
    #[doc(hidden)]
    fn limit(&self) -> &Self::Limit;

    /// Starts a call: a fresh retry count and clock reading. The call reads the async loop's
    /// clock ([`Clock::now`](crate::time::Clock::now)); a loop that waits with
    /// [`Sleep::sleep`](crate::time::Sleep::sleep) uses [`start_blocking`](Self::start_blocking).
    fn start(&self) -> Call<'_, Self>
    where
        Self: Sized,
    {
        crate::call::start(self, Timed::now(self.env(), false))
    }

    /// Starts a call that reads the clock only when something needs it: use it when no
    /// attempt context is read, no rule has a `max_delay`, the policy has no deadline and the
    /// timeout (if any) is enforced by cancellation (async), as the `#[robust]` expansion does.
    /// Such a call's success path reads no clock at all. (Without the `tracing` feature it
    /// does not know when its first attempt started: a deadline would bound each attempt
    /// from its own start instead of the call, and a `max_delay` would never be spent. Use
    /// [`start`](Self::start) for those.)
    ///
    /// With the `tracing` feature this is [`start`](Self::start), so that events report the
    /// time since the first attempt.
    fn start_lazy(&self) -> Call<'_, Self, LazyTimes>
    where
        Self: Sized,
    {
        #[cfg(feature = "tracing")]
        {
            self.start()
        }
        #[cfg(not(feature = "tracing"))]
        {
            self.start_untimed()
        }
    }

    /// Starts a blocking call: as [`start`](Self::start), but every clock reading of the call
    /// (and of its [`Attempt`]s) is [`Clock::now_blocking`](crate::time::Clock::now_blocking), the clock that agrees with
    /// [`Sleep::sleep`](crate::time::Sleep::sleep). For [`DefaultEnv`]
    /// that is the system's monotonic clock even where tokio's clock is paused, so a
    /// `max_delay` budget and a cooperative timeout count the time the thread slept.
    /// [`Policy::call`] and `#[robust]` on a plain `fn` start their calls this way.
    fn start_blocking(&self) -> Call<'_, Self, Blocking>
    where
        Self: Sized,
    {
        crate::call::start(self, Blocking::new(Timed::now(self.env(), true)))
    }

    /// [`start_lazy`](Self::start_lazy) for a blocking call: reads the clock only when
    /// something needs it, and then the blocking one (see
    /// [`start_blocking`](Self::start_blocking)).
    fn start_lazy_blocking(&self) -> Call<'_, Self, Blocking<LazyTimes>>
    where
        Self: Sized,
    {
        #[cfg(feature = "tracing")]
        {
            self.start_blocking()
        }
        #[cfg(not(feature = "tracing"))]
        {
            crate::call::start(self, Blocking::new(Untimed))
        }
    }

    /// Starts a call that keeps no instants at all ([`Untimed`]), for policies whose rules
    /// have no `max_delay`, that have no deadline and no `on_retry` callback: such a call does
    /// not know when its first attempt started, so a `max_delay` budget would never be spent,
    /// a deadline would bound each attempt from its own start (not the call), and
    /// [`RetryInfo::elapsed`](crate::RetryInfo) would read zero. Use [`start`](Self::start)
    /// otherwise.
    fn start_untimed(&self) -> Call<'_, Self, Untimed>
    where
        Self: Sized,
    {
        crate::call::start(self, Untimed)
    }

    /// Starts a call whose random generator is seeded with `seed`, whatever the policy's own
    /// seed: for simulations where every client must draw its own jitter reproducibly. It reads
    /// the clock as [`start`](Self::start) does (the same as the blocking one for a
    /// [`VirtualTime`](crate::time::VirtualTime)).
    fn start_seeded(&self, seed: u64) -> Call<'_, Self>
    where
        Self: Sized,
    {
        self.start().with_seed(seed)
    }
}

/// A built policy for calls that return `Result<T, E>`: the one bound generic code writes
/// instead of a policy's type parameters (like tower's `retry::Policy<Req, Res, E>`). Sealed:
/// every [`Policy`] whose rules, kinds and callbacks accept `T` and `E` implements it; a policy
/// with no `Ok(..)` kind, `on_retry` or fallback implements it for every `T`.
///
/// ```
/// use std::io;
/// use std::time::Duration;
/// use retry_runtime::{Constant, NoJitter, Policy, RetryPolicy};
///
/// /// Reads a value through any policy that retries `io::Result<u32>` calls.
/// fn read_with<P: RetryPolicy<u32, io::Error>>(policy: &P, tries: &mut u32) -> io::Result<u32> {
///     policy.call(|_attempt| {
///         *tries += 1;
///         if *tries < 3 { Err(io::ErrorKind::ConnectionReset.into()) } else { Ok(*tries) }
///     })
/// }
///
/// let policy = Policy::builder()
///     .backoff(Constant::new(Duration::ZERO))
///     .jitter(NoJitter)
///     .build()?;
/// let mut tries = 0;
/// assert_eq!(read_with(&policy, &mut tries)?, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait RetryPolicy<T, E>: PolicyCore {
    /// Whether there is an `on_retry` callback (the loop computes its [`RetryInfo`] only then).
    #[doc(hidden)]
    const ON_RETRY: bool;
    /// Whether a successful value can match a rule (an `Ok(..)` kind).
    #[doc(hidden)]
    const VALUES: bool;
    #[doc(hidden)]
    fn reject(&self) -> Option<E>;
    /// The error of an attempt the throttle rejects (`E::from(Rejected)`).
    #[doc(hidden)]
    fn refuse(&self) -> Option<E> {
        None
    }
    #[doc(hidden)]
    fn on_success(&self);
    #[doc(hidden)]
    fn on_error(&self, error: &E, retries: u32);
    #[doc(hidden)]
    fn hint(&self, error: &E) -> Option<Duration>;
    #[doc(hidden)]
    fn on_retry(&self, outcome: &Result<T, E>, info: &RetryInfo);
    #[doc(hidden)]
    fn fallback(&self, error: E) -> Result<T, E>;
    #[doc(hidden)]
    fn name(&self) -> Option<&'static str>;
    #[doc(hidden)]
    fn write_error(&self, error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// Visits the settings of the first rule that matches `failure` (the `when` rules in the
    /// order written, then `on`); `None` when none does.
    #[doc(hidden)]
    fn select<V: PlanVisitor>(&self, failure: &Failure<'_, E>, visitor: V) -> Option<V::Out>;
    /// Visits the settings of the first `Ok(..)` rule that matches `value`; `None` when none
    /// does.
    #[doc(hidden)]
    fn select_value<V: PlanVisitor>(&self, value: &T, visitor: V) -> Option<V::Out>;
    /// Whether a call must know when its first attempt started: a `max_delay`, a deadline,
    /// an `on_retry` callback or tracing events read it. A call that needs not may leave the
    /// clock alone on its success path.
    #[doc(hidden)]
    fn needs_start(&self) -> bool {
        true
    }
    /// [`needs_start`](Self::needs_start) but for a timeout that learns from latencies: what
    /// the hedged loop asks, which measures a round's latency itself.
    #[doc(hidden)]
    fn needs_call_start(&self) -> bool {
        self.needs_start()
    }
    /// Whether a rule may have a `max_delay` (the top level's, a `when`'s or an `Ok(..)`
    /// rule's): the tower layers then keep the failure a retry follows until the retry starts.
    /// Implies [`needs_call_start`](Self::needs_call_start).
    #[doc(hidden)]
    fn may_bound_start(&self) -> bool {
        true
    }

    /// Runs `body` under this policy, blocking the thread while backing off: see
    /// [`Policy::call`].
    fn call<'p, G>(&'p self, body: G) -> Result<T, E>
    where
        Self: Sized,
        G: FnMut(Attempt<'p>) -> Result<T, E>,
    {
        crate::call::run_blocking(self, body)
    }
}

/// A built policy for async calls that return `Result<T, E>`: a [`RetryPolicy<T, E>`] whose
/// environment sleeps asynchronously and whose timeout can turn an expiry into an `E`
/// (`E: From<Elapsed>` when a timeout is set). Implemented for every such policy.
///
/// ```
/// use std::io;
/// use std::time::Duration;
/// use retry_runtime::{AsyncRetryPolicy, Policy};
///
/// async fn fetch_with<P: AsyncRetryPolicy<&'static str, io::Error>>(policy: &P) -> io::Result<&'static str> {
///     policy.call_async(|_attempt| async { Ok("ok") }).await
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = Policy::builder().timeout(Duration::from_secs(2)).build()?;
/// assert_eq!(fetch_with(&policy).await?, "ok");
/// # Ok(()) }
/// ```
#[cfg(feature = "tokio")]
pub trait AsyncRetryPolicy<T, E>:
    RetryPolicy<T, E> + PolicyCore<Env: AsyncSleep, Timeout: AsyncTimeout<E>>
{
    /// Runs the future `body` makes under this policy, on the tokio timer: see
    /// [`Policy::call_async`].
    fn call_async<'p, G, Fut>(&'p self, body: G) -> impl Future<Output = Result<T, E>>
    where
        Self: Sized,
        G: FnMut(Attempt<'p>) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        crate::call::run_async(self, body)
    }
}

#[cfg(feature = "tokio")]
impl<T, E, P> AsyncRetryPolicy<T, E> for P where
    P: RetryPolicy<T, E> + PolicyCore<Env: AsyncSleep, Timeout: AsyncTimeout<E>>
{
}

impl<W, K, P, T, S, F, C, Bu, Br, H, Rt, N, V, Fb, Th, L> PolicyCore
    for Policy<W, K, P, T, S, F, C, Extras<Bu, Br, H, Rt, N, V, Fb, Th, L>>
where
    T: AttemptTimeout,
    C: Env + Sync,
    Bu: Budget,
    Br: Breaker,
    Th: Throttle,
    L: Limit,
{
    type Env = C;
    type Timeout = T;
    type Budget = Bu;
    type Breaker = Br;
    type Throttle = Th;
    type Limit = L;

    #[inline(always)]
    fn env(&self) -> &C {
        &self.env
    }
    #[inline(always)]
    fn timeout_setting(&self) -> &T {
        &self.timeout
    }
    #[inline(always)]
    fn budget(&self) -> &Bu {
        &self.extras.budget
    }
    #[inline(always)]
    fn breaker(&self) -> &Br {
        &self.extras.breaker
    }
    #[inline(always)]
    fn throttle(&self) -> &Th {
        &self.extras.throttle
    }
    #[inline(always)]
    fn limit(&self) -> &L {
        &self.extras.limit
    }
}

impl<R, E, W, K, P, T, S, F, C, Bu, Br, H, Rt, N, V, Fb, Th, L> RetryPolicy<R, E>
    for Policy<W, K, P, T, S, F, C, Extras<Bu, Br, H, Rt, N, V, Fb, Th, L>>
where
    W: Rules<E> + ValueRules<R>,
    K: Classify<E>,
    P: Plan,
    T: AttemptTimeout,
    S: OnSuccess,
    F: OnError<E>,
    C: Env + Sync,
    Bu: Budget,
    Br: Breaker + Reject<E>,
    H: Hint<E>,
    Rt: OnRetry<R, E>,
    N: Describe<E>,
    V: ClassifyValue<R>,
    Fb: Fallback<R, E>,
    Th: Throttle + Refuse<E>,
    L: Limit + Refuse<E>,
{
    const ON_RETRY: bool = Rt::ACTIVE;
    const VALUES: bool = <W as ValueRules<R>>::ACTIVE || V::ACTIVE;

    #[inline(always)]
    fn reject(&self) -> Option<E> {
        self.extras.breaker.reject()
    }
    #[inline(always)]
    fn refuse(&self) -> Option<E> {
        match self.extras.throttle.refuse() {
            Some(e) => Some(e),
            None => self.extras.limit.refuse(),
        }
    }
    #[inline(always)]
    fn on_success(&self) {
        self.on_success.on_success()
    }
    #[inline(always)]
    fn on_error(&self, error: &E, retries: u32) {
        self.on_error.on_error(error, retries)
    }
    #[inline(always)]
    fn hint(&self, error: &E) -> Option<Duration> {
        self.extras.hint.hint(error)
    }
    #[inline(always)]
    fn on_retry(&self, outcome: &Result<R, E>, info: &RetryInfo) {
        self.extras.on_retry.on_retry(outcome, info)
    }
    #[inline(always)]
    fn fallback(&self, error: E) -> Result<R, E> {
        self.extras.fallback.fallback(error)
    }
    #[inline(always)]
    fn name(&self) -> Option<&'static str> {
        self.extras.describe.name()
    }
    #[inline]
    fn write_error(&self, error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.extras.describe.write_error(error, f)
    }
    #[inline(always)]
    fn select<Vi: PlanVisitor>(&self, failure: &Failure<'_, E>, visitor: Vi) -> Option<Vi::Out> {
        match self.whens.select(failure, visitor) {
            Ok(out) => Some(out),
            Err(visitor) if self.on.matches(failure) => {
                Some(visitor.visit(&self.settings, RuleId::On, None))
            }
            Err(_) => None,
        }
    }
    #[inline]
    fn needs_start(&self) -> bool {
        T::MEASURED || RetryPolicy::<R, E>::needs_call_start(self)
    }
    #[inline]
    fn needs_call_start(&self) -> bool {
        Rt::ACTIVE
            || cfg!(feature = "tracing")
            || self.timeout.deadline().is_some()
            || RetryPolicy::<R, E>::may_bound_start(self)
    }
    #[inline]
    fn may_bound_start(&self) -> bool {
        self.settings.budget().is_some() || <W as Rules<E>>::any_max_delay(&self.whens)
    }
    #[inline(always)]
    fn select_value<Vi: PlanVisitor>(&self, value: &R, visitor: Vi) -> Option<Vi::Out> {
        match self.whens.select_value(value, visitor) {
            Ok(out) => Some(out),
            Err(visitor) if self.extras.on_ok.matches_value(value) => Some(visitor.visit(
                &self.settings,
                RuleId::On,
                self.extras.on_ok.hint_value(value),
            )),
            Err(_) => None,
        }
    }
}

// A reference to a policy is a policy: generic code and wrappers can borrow one.
impl<P: PolicyCore + ?Sized> PolicyCore for &P {
    type Env = P::Env;
    type Timeout = P::Timeout;
    type Budget = P::Budget;
    type Breaker = P::Breaker;
    type Throttle = P::Throttle;
    type Limit = P::Limit;

    #[inline(always)]
    fn env(&self) -> &P::Env {
        (**self).env()
    }
    #[inline(always)]
    fn timeout_setting(&self) -> &P::Timeout {
        (**self).timeout_setting()
    }
    #[inline(always)]
    fn budget(&self) -> &P::Budget {
        (**self).budget()
    }
    #[inline(always)]
    fn breaker(&self) -> &P::Breaker {
        (**self).breaker()
    }
    #[inline(always)]
    fn throttle(&self) -> &P::Throttle {
        (**self).throttle()
    }
    #[inline(always)]
    fn limit(&self) -> &P::Limit {
        (**self).limit()
    }
}

impl<R, E, P: RetryPolicy<R, E> + ?Sized> RetryPolicy<R, E> for &P {
    const ON_RETRY: bool = P::ON_RETRY;
    const VALUES: bool = P::VALUES;

    #[inline(always)]
    fn reject(&self) -> Option<E> {
        (**self).reject()
    }
    #[inline(always)]
    fn refuse(&self) -> Option<E> {
        (**self).refuse()
    }
    #[inline(always)]
    fn on_success(&self) {
        (**self).on_success()
    }
    #[inline(always)]
    fn on_error(&self, error: &E, retries: u32) {
        (**self).on_error(error, retries)
    }
    #[inline(always)]
    fn hint(&self, error: &E) -> Option<Duration> {
        (**self).hint(error)
    }
    #[inline(always)]
    fn on_retry(&self, outcome: &Result<R, E>, info: &RetryInfo) {
        (**self).on_retry(outcome, info)
    }
    #[inline(always)]
    fn fallback(&self, error: E) -> Result<R, E> {
        (**self).fallback(error)
    }
    #[inline(always)]
    fn name(&self) -> Option<&'static str> {
        (**self).name()
    }
    #[inline]
    fn write_error(&self, error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).write_error(error, f)
    }
    #[inline(always)]
    fn select<Vi: PlanVisitor>(&self, failure: &Failure<'_, E>, visitor: Vi) -> Option<Vi::Out> {
        (**self).select(failure, visitor)
    }
    #[inline(always)]
    fn select_value<Vi: PlanVisitor>(&self, value: &R, visitor: Vi) -> Option<Vi::Out> {
        (**self).select_value(value, visitor)
    }
    #[inline(always)]
    fn needs_start(&self) -> bool {
        (**self).needs_start()
    }
    #[inline(always)]
    fn needs_call_start(&self) -> bool {
        (**self).needs_call_start()
    }
    #[inline(always)]
    fn may_bound_start(&self) -> bool {
        (**self).may_bound_start()
    }
}

impl<W, K, P, T, S, F, C, X> Policy<W, K, P, T, S, F, C, X> {
    /// The environment (clock and sleepers) of this policy; a built policy's is its builder's
    /// environment with the seed given to [`PolicyBuilder::seed`], if any.
    pub const fn env(&self) -> &C {
        &self.env
    }

    /// The settings of the `on` rule.
    pub const fn settings(&self) -> &P {
        &self.settings
    }

    /// The per-attempt timeout setting.
    pub const fn timeout(&self) -> &T {
        &self.timeout
    }

    /// The fixed RNG seed of the environment, if it fixes one (see [`PolicyBuilder::seed`]).
    pub fn seed(&self) -> Option<u64>
    where
        C: crate::time::Clock,
    {
        self.env.seed()
    }
}
