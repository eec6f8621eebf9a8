//! [`Policy`]: every setting of one retried function, and [`PolicyBuilder`] to make one.

// The builder changes one type parameter per call; spelling those types out is the design.
#![allow(clippy::type_complexity)]

use std::fmt;
use std::time::Duration;

use crate::backoff::Exponential;
use crate::call::{Attempt, Blocking, Call, LazyTimes, Timed, Untimed};
use crate::callbacks::{Describe, Hint, Noop, OnError, OnRetry, OnSuccess, RetryInfo, RuleId};
use crate::guard::{Breaker, Budget, Reject};
use crate::guard::{CircuitBreaker, RetryBudget};
use crate::jitter::FullJitter;
use crate::kind::AnyError;
use crate::kind::{Classify, Failure};
use crate::rules::Rule;
use crate::rules::{PlanVisitor, Rules};
use crate::settings::Plan;
use crate::settings::{Retries, RuleSettings, Settings};
#[cfg(feature = "tokio")]
use crate::time::AsyncSleep;
use crate::time::Env;
use crate::time::{DefaultEnv, Seeded};
#[cfg(feature = "tokio")]
use crate::timeout::AsyncTimeout;
use crate::timeout::AttemptTimeout;
use crate::timeout::{NoTimeout, PerAttempt};
use crate::{ConfigError, limit_from_secs};

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

impl Policy {
    /// A builder with the SPEC defaults: 3 retries, no timeout, no `max_delay`,
    /// `exponential(base = 100 ms, max = 20 s, m = 2)`, full jitter, scale 1, every error
    /// retried, no callbacks, real time.
    pub const fn builder() -> PolicyBuilder {
        PolicyBuilder {
            policy: Policy {
                whens: (),
                on: AnyError,
                settings: Settings::new(),
                timeout: NoTimeout,
                on_success: Noop,
                on_error: Noop,
                env: DefaultEnv,
                extras: Extras::NONE,
            },
            error: None,
            seed: None,
        }
    }
}

pub(crate) mod sealed {
    /// Only this crate's policies implement [`PolicyCore`](super::PolicyCore).
    pub trait Sealed {}
}

impl<W, K, P, T, S, F, C, X> sealed::Sealed for Policy<W, K, P, T, S, F, C, X> {}

/// What every built policy has, whatever its error type: an environment, a timeout setting
/// and guards. Sealed; generic code names [`RetryPolicy<E>`], which implies it.
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

    /// The clock and sleepers.
    fn env(&self) -> &Self::Env;
    #[doc(hidden)]
    fn timeout_setting(&self) -> &Self::Timeout;
    #[doc(hidden)]
    fn budget(&self) -> &Self::Budget;
    #[doc(hidden)]
    fn breaker(&self) -> &Self::Breaker;

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
    /// attempt context is read, no rule has a `max_delay` and the timeout (if any) is enforced
    /// by cancellation (async), as the `#[robust]` expansion does. Such a call's success path
    /// reads no clock at all.
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
    /// [`Sleep::sleep`](crate::time::Sleep::sleep). For [`DefaultEnv`](crate::time::DefaultEnv)
    /// that is the system's monotonic clock even where tokio's clock is paused, so a
    /// `max_delay` budget and a cooperative timeout count the time the thread slept.
    /// [`Policy::call`] and `#[robust]` on a plain `fn` start their calls this way.
    fn start_blocking(&self) -> Call<'_, Self, Blocking>
    where
        Self: Sized,
    {
        crate::call::start(self, Blocking(Timed::now(self.env(), true)))
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
            crate::call::start(self, Blocking(Untimed))
        }
    }

    /// Starts a call that keeps no instants at all ([`Untimed`]), for policies whose rules
    /// have no `max_delay` and that have no `on_retry` callback: such a call does not know when
    /// its first attempt started, so a `max_delay` budget would never be spent and
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

/// A built policy that retries errors of type `E`: the one bound generic code writes instead
/// of a policy's type parameters (like tower's `retry::Policy`). Sealed: every
/// [`Policy`] whose rules, kinds and callbacks accept `E` implements it.
///
/// ```
/// use std::io;
/// use std::time::Duration;
/// use retry_runtime::{Constant, NoJitter, Policy, RetryPolicy};
///
/// /// Reads a value through any policy that retries `io::Error`s.
/// fn read_with<P: RetryPolicy<io::Error>>(policy: &P, tries: &mut u32) -> io::Result<u32> {
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
pub trait RetryPolicy<E>: PolicyCore {
    /// Whether there is an `on_retry` callback (the loop computes its [`RetryInfo`] only then).
    #[doc(hidden)]
    const ON_RETRY: bool;
    #[doc(hidden)]
    fn reject(&self) -> Option<E>;
    #[doc(hidden)]
    fn on_success(&self);
    #[doc(hidden)]
    fn on_error(&self, error: &E, retries: u32);
    #[doc(hidden)]
    fn hint(&self, error: &E) -> Option<Duration>;
    #[doc(hidden)]
    fn on_retry(&self, error: &E, info: &RetryInfo);
    #[doc(hidden)]
    fn name(&self) -> Option<&'static str>;
    #[doc(hidden)]
    fn write_error(&self, error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// Visits the settings of the first rule that matches `failure` (the `when` rules in the
    /// order written, then `on`); `None` when none does.
    #[doc(hidden)]
    fn select<V: PlanVisitor>(&self, failure: &Failure<'_, E>, visitor: V) -> Option<V::Out>;

    /// Runs `body` under this policy, blocking the thread while backing off: see
    /// [`Policy::call`].
    fn call<'p, R, G>(&'p self, body: G) -> Result<R, E>
    where
        Self: Sized,
        G: FnMut(Attempt<'p>) -> Result<R, E>,
    {
        crate::call::run_blocking(self, body)
    }
}

/// A built policy that retries errors of type `E` in async code: a [`RetryPolicy<E>`] whose
/// environment sleeps asynchronously and whose timeout can turn an expiry into an `E`
/// (`E: From<Elapsed>` when a timeout is set). Implemented for every such policy.
///
/// ```
/// use std::io;
/// use std::time::Duration;
/// use retry_runtime::{AsyncRetryPolicy, Policy};
///
/// async fn fetch_with<P: AsyncRetryPolicy<io::Error>>(policy: &P) -> io::Result<&'static str> {
///     policy.call_async(|_attempt| async { Ok("ok") }).await
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = Policy::builder().timeout(Duration::from_secs(2)).build()?;
/// assert_eq!(fetch_with(&policy).await?, "ok");
/// # Ok(()) }
/// ```
#[cfg(feature = "tokio")]
pub trait AsyncRetryPolicy<E>:
    RetryPolicy<E> + PolicyCore<Env: AsyncSleep, Timeout: AsyncTimeout<E>>
{
    /// Runs the future `body` makes under this policy, on the tokio timer: see
    /// [`Policy::call_async`].
    fn call_async<'p, R, G, Fut>(&'p self, body: G) -> impl Future<Output = Result<R, E>>
    where
        Self: Sized,
        G: FnMut(Attempt<'p>) -> Fut,
        Fut: Future<Output = Result<R, E>>,
    {
        crate::call::run_async(self, body)
    }
}

#[cfg(feature = "tokio")]
impl<E, P> AsyncRetryPolicy<E> for P where
    P: RetryPolicy<E> + PolicyCore<Env: AsyncSleep, Timeout: AsyncTimeout<E>>
{
}

impl<W, K, P, T, S, F, C, Bu, Br, H, Rt, N> PolicyCore
    for Policy<W, K, P, T, S, F, C, Extras<Bu, Br, H, Rt, N>>
where
    T: AttemptTimeout,
    C: Env + Sync,
    Bu: Budget,
    Br: Breaker,
{
    type Env = C;
    type Timeout = T;
    type Budget = Bu;
    type Breaker = Br;

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
}

impl<E, W, K, P, T, S, F, C, Bu, Br, H, Rt, N> RetryPolicy<E>
    for Policy<W, K, P, T, S, F, C, Extras<Bu, Br, H, Rt, N>>
where
    W: Rules<E>,
    K: Classify<E>,
    P: Plan,
    T: AttemptTimeout,
    S: OnSuccess,
    F: OnError<E>,
    C: Env + Sync,
    Bu: Budget,
    Br: Breaker + Reject<E>,
    H: Hint<E>,
    Rt: OnRetry<E>,
    N: Describe<E>,
{
    const ON_RETRY: bool = Rt::ACTIVE;

    #[inline(always)]
    fn reject(&self) -> Option<E> {
        self.extras.breaker.reject()
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
    fn on_retry(&self, error: &E, info: &RetryInfo) {
        self.extras.on_retry.on_retry(error, info)
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
    fn select<V: PlanVisitor>(&self, failure: &Failure<'_, E>, visitor: V) -> Option<V::Out> {
        match self.whens.select(failure, visitor) {
            Ok(out) => Some(out),
            Err(visitor) if self.on.matches(failure) => {
                Some(visitor.visit(&self.settings, RuleId::On))
            }
            Err(_) => None,
        }
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

/// Builds a [`Policy`], validating every value; [`build`](Self::build) reports the first
/// invalid one as a [`ConfigError`].
///
/// ```
/// use std::io::ErrorKind::ConnectionRefused;
/// use std::time::Duration;
/// use retry_runtime::kind::{ClassifyExt, Io, Timeout};
/// use retry_runtime::{Constant, Exponential, FullJitter, NoJitter, Policy};
///
/// let policy = Policy::builder()
///     .timeout(Duration::from_secs(2))
///     .backoff(Exponential::new(Duration::from_secs(1), Duration::from_secs(60), 2.0)?)
///     .jitter(FullJitter)
///     .retries(5)
///     .on(Timeout.or(Io::ANY))
///     .when(Io::of([ConnectionRefused]), |s| s.retries(0))
///     .when(Timeout, |s| s.retries(10).backoff(Constant::new(Duration::from_millis(200))).jitter(NoJitter))
///     .on_error(|e: &std::io::Error, retries| eprintln!("retry {retries}: {e}"))
///     .build()?;
/// # let _ = policy;
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PolicyBuilder<
    W = (),
    K = AnyError,
    B = Exponential,
    J = FullJitter,
    T = NoTimeout,
    S = Noop,
    F = Noop,
    C = DefaultEnv,
    X = Extras,
> {
    policy: Policy<W, K, Settings<B, J>, T, S, F, C, X>,
    error: Option<ConfigError>,
    seed: Option<u64>,
}

impl<W, K, B, J, T, S, F, C, X> PolicyBuilder<W, K, B, J, T, S, F, C, X> {
    fn fail(mut self, e: ConfigError) -> Self {
        self.error.get_or_insert(e);
        self
    }

    fn map_settings<B2, J2>(
        self,
        f: impl FnOnce(Settings<B, J>) -> Settings<B2, J2>,
    ) -> PolicyBuilder<W, K, B2, J2, T, S, F, C, X> {
        let p = self.policy;
        PolicyBuilder {
            policy: Policy {
                whens: p.whens,
                on: p.on,
                settings: f(p.settings),
                timeout: p.timeout,
                on_success: p.on_success,
                on_error: p.on_error,
                env: p.env,
                extras: p.extras,
            },
            error: self.error,
            seed: self.seed,
        }
    }

    /// At most `n` retries of the `on` rule (default 3); negative = forever, 0 = never.
    pub fn retries(self, n: impl Into<Retries>) -> Self {
        let n = n.into();
        self.map_settings(|s| s.retries(n))
    }

    /// The `max_delay` budget of the `on` rule: total time since the first attempt; a retry
    /// is made only if it can start before the budget is spent. Default: infinite.
    pub fn max_delay(self, budget: Duration) -> Self {
        self.map_settings(|s| s.max_delay(budget))
    }

    /// `max_delay` in seconds, negative = infinite. NaN or infinite is an error.
    pub fn max_delay_secs(self, secs: f64) -> Self {
        self.map_settings(|s| s.max_delay_secs(secs))
    }

    /// Multiplies every delay of the `on` rule by `factor` (finite, > 0), applied last.
    pub fn scale(self, factor: f64) -> Self {
        self.map_settings(|s| s.scale(factor))
    }

    /// The backoff strategy of the `on` rule (default `exponential(100 ms, 20 s, 2)`).
    pub fn backoff<B2>(self, backoff: B2) -> PolicyBuilder<W, K, B2, J, T, S, F, C, X> {
        self.map_settings(|s| s.backoff(backoff))
    }

    /// The jitter algorithm of the `on` rule (default [`FullJitter`]).
    pub fn jitter<J2>(self, jitter: J2) -> PolicyBuilder<W, K, B, J2, T, S, F, C, X> {
        self.map_settings(|s| s.jitter(jitter))
    }

    /// Seeds the per-call random number generator: every call then draws the same jitter
    /// sequence. For tests and simulations; by default each call is seeded from the thread's
    /// random generator.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Which errors the `on` rule retries (default: every error). Combine kinds with
    /// [`ClassifyExt::or`](crate::kind::ClassifyExt::or).
    pub fn on<K2>(self, kind: K2) -> PolicyBuilder<W, K2, B, J, T, S, F, C, X> {
        let p = self.policy;
        PolicyBuilder {
            policy: Policy {
                whens: p.whens,
                on: kind,
                settings: p.settings,
                timeout: p.timeout,
                on_success: p.on_success,
                on_error: p.on_error,
                env: p.env,
                extras: p.extras,
            },
            error: self.error,
            seed: self.seed,
        }
    }

    /// Adds a rule: failures matching `kind` use the settings `f` makes from the current
    /// `on` settings. Rules are tried in the order added, before the `on` rule.
    pub fn when<K2, B2, J2>(
        self,
        kind: K2,
        f: impl FnOnce(Settings<B, J>) -> Settings<B2, J2>,
    ) -> PolicyBuilder<(W, Rule<K2, RuleSettings<B2, J2>>), K, B, J, T, S, F, C, X>
    where
        B: Clone,
        J: Clone,
    {
        let p = self.policy;
        let settings = f(p.settings.clone());
        let mut error = self.error;
        if let Some(e) = settings.error {
            error.get_or_insert(e);
        }
        PolicyBuilder {
            policy: Policy {
                whens: (p.whens, Rule::new(kind, settings.rule)),
                on: p.on,
                settings: p.settings,
                timeout: p.timeout,
                on_success: p.on_success,
                on_error: p.on_error,
                env: p.env,
                extras: p.extras,
            },
            error,
            seed: self.seed,
        }
    }

    /// A per-attempt timeout. `Duration::ZERO` is an error (an attempt could never succeed).
    pub fn timeout(self, limit: Duration) -> PolicyBuilder<W, K, B, J, PerAttempt, S, F, C, X> {
        let zero = limit.is_zero();
        let b = self.with_timeout(PerAttempt(Some(limit)));
        if zero {
            b.fail(ConfigError::new(
                "timeout",
                "must be > 0 (use a negative value for none)",
            ))
        } else {
            b
        }
    }

    /// A per-attempt timeout in seconds; negative = infinite; 0, NaN or infinite is an error.
    pub fn timeout_secs(self, secs: f64) -> PolicyBuilder<W, K, B, J, PerAttempt, S, F, C, X> {
        match limit_from_secs("timeout", secs) {
            Ok(Some(d)) => self.timeout(d),
            Ok(None) => self.with_timeout(PerAttempt(None)),
            Err(e) => self.with_timeout(PerAttempt(None)).fail(e),
        }
    }

    fn with_timeout<T2>(self, timeout: T2) -> PolicyBuilder<W, K, B, J, T2, S, F, C, X> {
        let p = self.policy;
        PolicyBuilder {
            policy: Policy {
                whens: p.whens,
                on: p.on,
                settings: p.settings,
                timeout,
                on_success: p.on_success,
                on_error: p.on_error,
                env: p.env,
                extras: p.extras,
            },
            error: self.error,
            seed: self.seed,
        }
    }

    /// Called once when an attempt succeeds: any `Fn()`.
    pub fn on_success<S2: Fn()>(self, callback: S2) -> PolicyBuilder<W, K, B, J, T, S2, F, C, X> {
        let p = self.policy;
        PolicyBuilder {
            policy: Policy {
                whens: p.whens,
                on: p.on,
                settings: p.settings,
                timeout: p.timeout,
                on_success: callback,
                on_error: p.on_error,
                env: p.env,
                extras: p.extras,
            },
            error: self.error,
            seed: self.seed,
        }
    }

    /// Called after every failed attempt (the last one too), before the retry decision, with
    /// the error and the number of retries made so far (the failed attempt's
    /// [`Attempt::retries`](crate::Attempt::retries): 0 for the first attempt): any
    /// `Fn(&E, u32)`.
    pub fn on_error<E, F2: Fn(&E, u32)>(
        self,
        callback: F2,
    ) -> PolicyBuilder<W, K, B, J, T, S, F2, C, X> {
        let p = self.policy;
        PolicyBuilder {
            policy: Policy {
                whens: p.whens,
                on: p.on,
                settings: p.settings,
                timeout: p.timeout,
                on_success: p.on_success,
                on_error: callback,
                env: p.env,
                extras: p.extras,
            },
            error: self.error,
            seed: self.seed,
        }
    }

    /// The clock and sleepers (default [`DefaultEnv`]); tests pass a
    /// [`VirtualTime`](crate::time::VirtualTime).
    pub fn env<C2>(self, env: C2) -> PolicyBuilder<W, K, B, J, T, S, F, C2, X> {
        let p = self.policy;
        PolicyBuilder {
            policy: Policy {
                whens: p.whens,
                on: p.on,
                settings: p.settings,
                timeout: p.timeout,
                on_success: p.on_success,
                on_error: p.on_error,
                env,
                extras: p.extras,
            },
            error: self.error,
            seed: self.seed,
        }
    }

    fn map_extras<X2>(self, f: impl FnOnce(X) -> X2) -> PolicyBuilder<W, K, B, J, T, S, F, C, X2> {
        let p = self.policy;
        let extras = f(p.extras);
        PolicyBuilder {
            policy: Policy {
                whens: p.whens,
                on: p.on,
                settings: p.settings,
                timeout: p.timeout,
                on_success: p.on_success,
                on_error: p.on_error,
                env: p.env,
                extras,
            },
            error: self.error,
            seed: self.seed,
        }
    }

    /// The policy, or the first invalid value given to the builder.
    pub fn build(
        self,
    ) -> Result<Policy<W, K, RuleSettings<B, J>, T, S, F, Seeded<C>, X>, ConfigError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let p = self.policy;
        Ok(Policy {
            whens: p.whens,
            on: p.on,
            settings: p.settings.build()?,
            timeout: p.timeout,
            on_success: p.on_success,
            on_error: p.on_error,
            env: Seeded {
                env: p.env,
                seed: self.seed,
            },
            extras: p.extras,
        })
    }
}

impl<W, K, B, J, T, S, F, C, Bu, Br, H, R, N>
    PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, Br, H, R, N>>
{
    /// Shares a retry budget: every call earns tokens, every retry spends them, and a retry
    /// that finds the budget empty is not made.
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::{CircuitBreaker, NoBackoff, Policy, RetryBudget};
    ///
    /// let budget = RetryBudget::new(1.0, 0.0, 1.0)?;
    /// let breaker = CircuitBreaker::new(10, 5, 0.5, Duration::from_secs(30), 2)?;
    /// let policy = Policy::builder()
    ///     .retries(5)
    ///     .backoff(NoBackoff)
    ///     .budget(&budget)
    ///     .breaker(&breaker)
    ///     .hint(|e: &std::io::Error| None)
    ///     .on_retry(|e: &std::io::Error, info| eprintln!("retry {} in {:?}", info.retry, info.delay))
    ///     .build()?;
    /// let mut attempts = 0;
    /// let r: std::io::Result<()> = policy.call(|_| {
    ///     attempts += 1;
    ///     Err(std::io::ErrorKind::Other.into())
    /// });
    /// assert!(r.is_err());
    /// assert_eq!(attempts, 2); // one token: one retry
    /// # Ok::<(), retry_runtime::ConfigError>(())
    /// ```
    pub fn budget(
        self,
        budget: &RetryBudget,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<&RetryBudget, Br, H, R, N>> {
        self.map_extras(|x| Extras {
            budget,
            breaker: x.breaker,
            hint: x.hint,
            on_retry: x.on_retry,
            describe: x.describe,
        })
    }

    /// Shares a circuit breaker: while it is open, attempts fail fast with
    /// `E::from(Open)` without running the body.
    pub fn breaker(
        self,
        breaker: &CircuitBreaker,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, &CircuitBreaker, H, R, N>> {
        self.map_extras(|x| Extras {
            budget: x.budget,
            breaker,
            hint: x.hint,
            on_retry: x.on_retry,
            describe: x.describe,
        })
    }

    /// A delay asked for by the failure itself (a `Retry-After` header, say): when the closure
    /// returns one, it replaces the computed backoff, still bounded by `max_delay`.
    pub fn hint<E, H2: Fn(&E) -> Option<Duration>>(
        self,
        hint: H2,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, Br, H2, R, N>> {
        self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint,
            on_retry: x.on_retry,
            describe: x.describe,
        })
    }

    /// Called before each retry's sleep with the error and a [`RetryInfo`](crate::RetryInfo):
    /// the number of the retry (1 for the first), the delay, the time since the first attempt
    /// and the rule that matched.
    pub fn on_retry<E, R2: Fn(&E, &crate::RetryInfo)>(
        self,
        on_retry: R2,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, Br, H, R2, N>> {
        self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint: x.hint,
            on_retry,
            describe: x.describe,
        })
    }

    /// Names the function this policy retries, for its tracing events (feature `tracing`):
    /// each event then carries `function = "<name>"`. Without the feature the name is not
    /// kept and costs nothing. (`#[robust]` names its fn by itself.)
    ///
    /// ```
    /// use retry_runtime::{NoBackoff, Policy};
    ///
    /// let policy = Policy::builder().name("fetch").retries(1).backoff(NoBackoff).build()?;
    /// // Events: "attempt failed, retrying" with function = "fetch", retry = 1, then
    /// // "giving up: returning the last error" with function = "fetch", retries = 1.
    /// let r: std::io::Result<()> = policy.call(|_| Err(std::io::ErrorKind::Other.into()));
    /// assert!(r.is_err());
    /// # Ok::<(), retry_runtime::ConfigError>(())
    /// ```
    pub fn name(
        self,
        name: &'static str,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, Br, H, R, crate::Name>> {
        self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint: x.hint,
            on_retry: x.on_retry,
            describe: crate::Name::new(name),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_reports_the_first_error() {
        let e = Policy::builder().scale(0.0).build().unwrap_err();
        assert_eq!(e.parameter(), "scale");
        let e = Policy::builder()
            .timeout(Duration::ZERO)
            .build()
            .unwrap_err();
        assert_eq!(e.parameter(), "timeout");
        let e = Policy::builder()
            .timeout_secs(f64::NAN)
            .build()
            .unwrap_err();
        assert_eq!(e.parameter(), "timeout");
        let e = Policy::builder()
            .when(AnyError, |s| s.scale(-2.0))
            .build()
            .unwrap_err();
        assert_eq!(e.parameter(), "scale");
        assert_eq!(
            Policy::builder()
                .timeout_secs(-1.0)
                .build()
                .unwrap()
                .timeout,
            PerAttempt(None)
        );
    }
}
