//! [`DynPolicy`]: a built policy behind one shared allocation, with a type to name.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::callbacks::{RetryInfo, RuleId};
use crate::guard::{Breaker, Budget, Permit, Stamp, Throttle};
use crate::kind::Failure;
use crate::policy::rules::PlanVisitor;
use crate::policy::settings::Plan;
use crate::policy::{PolicyCore, RetryPolicy, sealed};
use crate::time::{Clock, Env, Sleep};
use crate::timeout::{AsyncTimeout, AttemptTimeout};

/// A built policy for calls returning `Result<T, E>`, behind one shared allocation: the type
/// to write where a policy is stored (a field of a struct, a `static` made once) or chosen at
/// run time.
///
/// Any [`RetryPolicy<T, E>`] that is `Send + Sync + 'static`, with no concurrency limit and a
/// fixed timeout or none (not hedged, not adaptive: [`DynPolicy::new`] says so at compile
/// time), converts into one ([`DynPolicy::new`]); it is a `RetryPolicy<T, E>` itself (and an
/// [`AsyncRetryPolicy<T, E>`](crate::AsyncRetryPolicy) when `E: From<Elapsed>`). Clones share
/// the policy.
///
/// A `DynPolicy` serves one return type, as it keeps the policy's `Ok(..)` kinds, `on_retry`
/// and fallback, which are typed by it; a policy with none of them converts into a
/// `DynPolicy<T, E>` for any `T`.
///
/// As its breaker and budget are hidden, a tower layer made from it cannot take a breaker or a
/// budget per key (`breaker_per`, `budget_per`: they would replace the ones it may hold, which
/// is a compile error); build such a layer from the concrete policy.
///
/// ```
/// use std::io;
/// use std::time::Duration;
/// use retry_runtime::{Constant, DynPolicy, NoJitter, Policy};
///
/// struct Client {
///     policy: DynPolicy<&'static str, io::Error>,
/// }
///
/// impl Client {
///     fn new() -> Result<Self, retry_runtime::ConfigError> {
///         let policy = Policy::builder()
///             .retries(2)
///             .backoff(Constant::new(Duration::ZERO))
///             .jitter(NoJitter)
///             .build()?;
///         Ok(Client { policy: DynPolicy::new(policy) })
///     }
///
///     fn get(&self, failures: &mut u32) -> io::Result<&'static str> {
///         self.policy.call(|_attempt| {
///             if *failures > 0 {
///                 *failures -= 1;
///                 return Err(io::ErrorKind::ConnectionReset.into());
///             }
///             Ok("body")
///         })
///     }
/// }
///
/// let client = Client::new()?;
/// assert_eq!(client.get(&mut 2)?, "body");
/// assert!(client.get(&mut 3).is_err()); // 2 retries, 3 failures
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Cost
/// One allocation when made; none per blocking call. Every decision goes through a virtual
/// call, the breaker and `on_retry` are consulted whether or not the policy has them (so the
/// clock is read before each attempt and each retry), and an async call that backs off boxes
/// each backoff's sleep. Keep the concrete [`Policy`](crate::Policy) type where the
/// nanoseconds matter.
pub struct DynPolicy<T, E> {
    inner: Arc<dyn Erased<T, E>>,
    env: DynEnv,
    timeout: DynTimeout,
}

/// The timeout and deadline of a [`DynPolicy`]: its policy's, read when it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynTimeout {
    limit: Option<Duration>,
    deadline: Option<Duration>,
}

impl AttemptTimeout for DynTimeout {
    #[inline]
    fn limit(&self) -> Option<Duration> {
        self.limit
    }
    #[inline]
    fn deadline(&self) -> Option<Duration> {
        self.deadline
    }
}

impl<E: From<crate::Elapsed>> AsyncTimeout<E> for DynTimeout {
    #[inline]
    fn elapsed(&self, elapsed: crate::Elapsed) -> Option<E> {
        Some(E::from(elapsed))
    }
}

impl<T, E> Clone for DynPolicy<T, E> {
    fn clone(&self) -> Self {
        DynPolicy {
            inner: Arc::clone(&self.inner),
            env: self.env.clone(),
            timeout: self.timeout,
        }
    }
}

impl<T, E> fmt::Debug for DynPolicy<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynPolicy")
            .field("timeout", &self.timeout.limit())
            .finish_non_exhaustive()
    }
}

impl<T: 'static, E: 'static> DynPolicy<T, E> {
    /// `policy` behind one allocation.
    pub fn new<P>(policy: P) -> Self
    where
        P: RetryPolicy<T, E> + PolicyCore<Limit = ()> + Send + Sync + 'static,
        P::Timeout: crate::timeout::FixedTimeout,
        P::Env: Clone + Send + Sync + 'static + DynSleep,
    {
        let env = DynEnv(Arc::new(policy.env().clone()));
        let setting = policy.timeout_setting();
        let timeout = DynTimeout {
            limit: setting.limit(),
            deadline: setting.deadline(),
        };
        DynPolicy {
            inner: Arc::new(policy),
            env,
            timeout,
        }
    }
}

impl<T, E> DynPolicy<T, E> {
    /// Runs `body` under this policy, blocking the thread while backing off: see
    /// [`Policy::call`](crate::Policy::call).
    pub fn call<'p, G>(&'p self, body: G) -> Result<T, E>
    where
        G: FnMut(crate::Attempt<'p>) -> Result<T, E>,
    {
        crate::call::run_blocking(self, body)
    }

    /// Runs the future `body` makes under this policy, on the tokio timer: see
    /// [`Policy::call_async`](crate::Policy::call_async).
    #[cfg(feature = "tokio")]
    pub async fn call_async<'p, G, Fut>(&'p self, body: G) -> Result<T, E>
    where
        E: From<crate::Elapsed>,
        G: FnMut(crate::Attempt<'p>) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        crate::call::run_async(self, body).await
    }
}

/// The environment of a [`DynPolicy`]: the policy's own, shared.
#[derive(Clone)]
pub struct DynEnv(Arc<dyn DynSleep>);

impl fmt::Debug for DynEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DynEnv")
    }
}

/// An environment a [`DynPolicy`] can keep: a clock that sleeps (and, with the `tokio`
/// feature, sleeps asynchronously: a custom environment then needs
/// [`AsyncSleep`](crate::time::AsyncSleep) too, as the built-in ones have). Implemented for
/// every such type.
pub trait DynSleep: Send + Sync {
    #[doc(hidden)]
    fn dyn_now(&self) -> Instant;
    #[doc(hidden)]
    fn dyn_now_blocking(&self) -> Instant;
    #[doc(hidden)]
    fn dyn_blocking_is_system(&self) -> bool;
    #[doc(hidden)]
    fn dyn_seed(&self) -> Option<u64>;
    #[doc(hidden)]
    fn dyn_async_resolution(&self) -> Duration;
    #[doc(hidden)]
    fn dyn_sleep(&self, d: Duration);
    #[cfg(feature = "tokio")]
    #[doc(hidden)]
    fn dyn_sleep_async(
        &self,
        d: Duration,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// [`AsyncSleep`](crate::time::AsyncSleep) with the `tokio` feature, nothing without: what a
/// [`DynPolicy`]'s environment needs besides [`Env`].
#[cfg(feature = "tokio")]
pub trait MaybeAsyncSleep: crate::time::AsyncSleep {}
#[cfg(feature = "tokio")]
impl<C: crate::time::AsyncSleep> MaybeAsyncSleep for C {}
/// [`AsyncSleep`](crate::time::AsyncSleep) with the `tokio` feature, nothing without: what a
/// [`DynPolicy`]'s environment needs besides [`Env`].
#[cfg(not(feature = "tokio"))]
pub trait MaybeAsyncSleep {}
#[cfg(not(feature = "tokio"))]
impl<C> MaybeAsyncSleep for C {}

impl<C: Env + MaybeAsyncSleep + Send + Sync> DynSleep for C {
    fn dyn_now(&self) -> Instant {
        self.now()
    }
    fn dyn_now_blocking(&self) -> Instant {
        self.now_blocking()
    }
    fn dyn_blocking_is_system(&self) -> bool {
        self.blocking_is_system()
    }
    fn dyn_seed(&self) -> Option<u64> {
        self.seed()
    }
    fn dyn_async_resolution(&self) -> Duration {
        self.async_resolution()
    }
    fn dyn_sleep(&self, d: Duration) {
        self.sleep(d)
    }
    #[cfg(feature = "tokio")]
    fn dyn_sleep_async(
        &self,
        d: Duration,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.sleep_async(d))
    }
}

impl Clock for DynEnv {
    #[inline]
    fn now(&self) -> Instant {
        self.0.dyn_now()
    }
    #[inline]
    fn now_blocking(&self) -> Instant {
        self.0.dyn_now_blocking()
    }
    #[inline]
    fn blocking_is_system(&self) -> bool {
        self.0.dyn_blocking_is_system()
    }
    #[inline]
    fn async_resolution(&self) -> Duration {
        self.0.dyn_async_resolution()
    }
    #[inline]
    fn seed(&self) -> Option<u64> {
        self.0.dyn_seed()
    }
}

impl Sleep for DynEnv {
    #[inline]
    fn sleep(&self, d: Duration) {
        self.0.dyn_sleep(d)
    }
}

#[cfg(feature = "tokio")]
impl crate::time::AsyncSleep for DynEnv {
    fn sleep_async(&self, d: Duration) -> impl Future<Output = ()> + Send {
        self.0.dyn_sleep_async(d)
    }
}

/// The object-safe face of a policy for `Result<T, E>`, implemented for every
/// `RetryPolicy<T, E> + Send + Sync`: what a [`DynPolicy`] calls.
#[doc(hidden)]
pub trait Erased<T, E>: Send + Sync {
    fn deposit(&self);
    fn try_withdraw(&self) -> bool;
    fn acquire(&self, now: Instant) -> Option<Permit>;
    fn record(&self, now: Instant, permit: Permit, success: bool);
    fn would_admit(&self, now: Instant) -> bool;
    fn release(&self, permit: Permit);
    fn throttle_coarse_now(&self, system: bool) -> Option<Stamp>;
    fn reject_probability(&self, now: Stamp) -> f64;
    fn record_throttle(&self, now: Stamp, accepted: bool);
    fn record_throttle_recent(&self, accepted: bool);
    fn throttled(&self) -> bool;
    fn refuse(&self) -> Option<E>;
    fn reject(&self) -> Option<E>;
    fn on_success(&self);
    fn on_error(&self, error: &E, retries: u32);
    fn hint(&self, error: &E) -> Option<Duration>;
    fn on_retry(&self, outcome: &Result<T, E>, info: &RetryInfo);
    fn fallback(&self, error: E) -> Result<T, E>;
    fn values(&self) -> bool;
    fn name(&self) -> Option<&'static str>;
    fn write_error(&self, error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// Calls `visit` with the settings of the first matching rule; false when none matches.
    fn select_dyn(&self, failure: &Failure<'_, E>, visit: &mut DynVisit<'_>) -> bool;
    /// Calls `visit` with the settings of the first `Ok(..)` rule matching `value`.
    fn select_value_dyn(&self, value: &T, visit: &mut DynVisit<'_>) -> bool;
}

/// A visit of the settings of a rule, as `&dyn Plan`.
pub type DynVisit<'a> = dyn FnMut(&dyn Plan, RuleId, Option<Duration>) + 'a;

/// A visitor that hands the rule's settings to a callback, as `&dyn Plan`.
struct ToDyn<'a, 'b>(&'a mut DynVisit<'b>);

impl PlanVisitor for ToDyn<'_, '_> {
    type Out = ();
    fn visit<P: Plan>(self, plan: &P, rule: RuleId, hint: Option<Duration>) {
        (self.0)(plan, rule, hint)
    }
}

impl<T, E, P: RetryPolicy<T, E> + Send + Sync> Erased<T, E> for P {
    fn deposit(&self) {
        self.budget().deposit()
    }
    fn try_withdraw(&self) -> bool {
        self.budget().try_withdraw()
    }
    fn acquire(&self, now: Instant) -> Option<Permit> {
        if <P::Breaker as Breaker>::ACTIVE {
            self.breaker().acquire(now)
        } else {
            Some(Permit::NONE)
        }
    }
    fn record(&self, now: Instant, permit: Permit, success: bool) {
        if <P::Breaker as Breaker>::ACTIVE {
            self.breaker().record(now, permit, success)
        }
    }
    fn would_admit(&self, now: Instant) -> bool {
        !<P::Breaker as Breaker>::ACTIVE || self.breaker().would_admit(now)
    }
    fn release(&self, permit: Permit) {
        self.breaker().release(permit)
    }
    fn throttle_coarse_now(&self, system: bool) -> Option<Stamp> {
        // (Without a throttle, nothing is read.)
        if <P::Throttle as Throttle>::ACTIVE {
            self.throttle().coarse_now(system)
        } else {
            Some(Stamp::ORIGIN)
        }
    }
    fn reject_probability(&self, now: Stamp) -> f64 {
        if <P::Throttle as Throttle>::ACTIVE {
            self.throttle().reject_probability(now)
        } else {
            0.0
        }
    }
    fn record_throttle(&self, now: Stamp, accepted: bool) {
        if <P::Throttle as Throttle>::ACTIVE {
            self.throttle().record(now, accepted)
        }
    }
    fn record_throttle_recent(&self, accepted: bool) {
        if <P::Throttle as Throttle>::ACTIVE {
            self.throttle().record_recent(accepted)
        }
    }
    fn throttled(&self) -> bool {
        <P::Throttle as Throttle>::ACTIVE
    }
    fn refuse(&self) -> Option<E> {
        RetryPolicy::refuse(self)
    }
    fn reject(&self) -> Option<E> {
        RetryPolicy::reject(self)
    }
    fn on_success(&self) {
        RetryPolicy::on_success(self)
    }
    fn on_error(&self, error: &E, retries: u32) {
        RetryPolicy::on_error(self, error, retries)
    }
    fn hint(&self, error: &E) -> Option<Duration> {
        RetryPolicy::hint(self, error)
    }
    fn on_retry(&self, outcome: &Result<T, E>, info: &RetryInfo) {
        if P::ON_RETRY {
            RetryPolicy::on_retry(self, outcome, info)
        }
    }
    fn fallback(&self, error: E) -> Result<T, E> {
        RetryPolicy::fallback(self, error)
    }
    fn values(&self) -> bool {
        P::VALUES
    }
    fn name(&self) -> Option<&'static str> {
        RetryPolicy::name(self)
    }
    fn write_error(&self, error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        RetryPolicy::write_error(self, error, f)
    }
    fn select_dyn(&self, failure: &Failure<'_, E>, visit: &mut DynVisit<'_>) -> bool {
        self.select(failure, ToDyn(visit)).is_some()
    }
    fn select_value_dyn(&self, value: &T, visit: &mut DynVisit<'_>) -> bool {
        self.select_value(value, ToDyn(visit)).is_some()
    }
}

impl<T, E> Budget for dyn Erased<T, E> {
    #[inline]
    fn deposit(&self) {
        Erased::deposit(self)
    }
    #[inline]
    fn try_withdraw(&self) -> bool {
        Erased::try_withdraw(self)
    }
}

impl<T, E> Throttle for dyn Erased<T, E> {
    const ACTIVE: bool = true;
    #[inline]
    fn coarse_now(&self, system: bool) -> Option<Stamp> {
        Erased::throttle_coarse_now(self, system)
    }
    #[inline]
    fn reject_probability(&self, now: Stamp) -> f64 {
        Erased::reject_probability(self, now)
    }
    #[inline]
    fn record(&self, now: Stamp, accepted: bool) {
        Erased::record_throttle(self, now, accepted)
    }
    #[inline]
    fn record_recent(&self, accepted: bool) {
        Erased::record_throttle_recent(self, accepted)
    }
}

impl<T, E> Breaker for dyn Erased<T, E> {
    const ACTIVE: bool = true;
    type Pending = bool;
    #[inline]
    fn acquire(&self, now: Instant) -> Option<Permit> {
        Erased::acquire(self, now)
    }
    #[inline]
    fn record(&self, now: Instant, permit: Permit, success: bool) {
        Erased::record(self, now, permit, success)
    }
    #[inline]
    fn would_admit(&self, now: Instant) -> bool {
        Erased::would_admit(self, now)
    }
    #[inline]
    fn release(&self, permit: Permit) {
        Erased::release(self, permit)
    }
}

impl<T, E> sealed::Sealed for DynPolicy<T, E> {}

impl<T, E> PolicyCore for DynPolicy<T, E> {
    type Env = DynEnv;
    type Timeout = DynTimeout;
    type Budget = dyn Erased<T, E>;
    type Breaker = dyn Erased<T, E>;
    type Throttle = dyn Erased<T, E>;
    type Limit = ();

    #[inline]
    fn env(&self) -> &DynEnv {
        &self.env
    }
    #[inline]
    fn timeout_setting(&self) -> &DynTimeout {
        &self.timeout
    }
    #[inline]
    fn budget(&self) -> &(dyn Erased<T, E> + 'static) {
        &*self.inner
    }
    #[inline]
    fn breaker(&self) -> &(dyn Erased<T, E> + 'static) {
        &*self.inner
    }
    #[inline]
    fn throttle(&self) -> &(dyn Erased<T, E> + 'static) {
        &*self.inner
    }
    #[inline]
    fn limit(&self) -> &() {
        &()
    }
}

impl<T, E> RetryPolicy<T, E> for DynPolicy<T, E> {
    const ON_RETRY: bool = true;
    const VALUES: bool = true;

    #[inline]
    fn reject(&self) -> Option<E> {
        self.inner.reject()
    }
    #[inline]
    fn refuse(&self) -> Option<E> {
        self.inner.refuse()
    }
    #[inline]
    fn on_success(&self) {
        self.inner.on_success()
    }
    #[inline]
    fn on_error(&self, error: &E, retries: u32) {
        self.inner.on_error(error, retries)
    }
    #[inline]
    fn hint(&self, error: &E) -> Option<Duration> {
        self.inner.hint(error)
    }
    #[inline]
    fn on_retry(&self, outcome: &Result<T, E>, info: &RetryInfo) {
        self.inner.on_retry(outcome, info)
    }
    #[inline]
    fn fallback(&self, error: E) -> Result<T, E> {
        self.inner.fallback(error)
    }
    #[inline]
    fn name(&self) -> Option<&'static str> {
        self.inner.name()
    }
    #[inline]
    fn write_error(&self, error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.write_error(error, f)
    }
    fn select<V: PlanVisitor>(&self, failure: &Failure<'_, E>, visitor: V) -> Option<V::Out> {
        let mut visitor = Some(visitor);
        let mut out = None;
        self.inner.select_dyn(failure, &mut |plan, rule, hint| {
            if let Some(v) = visitor.take() {
                out = Some(v.visit(&plan, rule, hint));
            }
        });
        out
    }
    fn select_value<V: PlanVisitor>(&self, value: &T, visitor: V) -> Option<V::Out> {
        if !self.inner.values() {
            return None;
        }
        let mut visitor = Some(visitor);
        let mut out = None;
        self.inner.select_value_dyn(value, &mut |plan, rule, hint| {
            if let Some(v) = visitor.take() {
                out = Some(v.visit(&plan, rule, hint));
            }
        });
        out
    }
}
