//! The retry loop: per-call state ([`Call`]), the attempt context ([`Attempt`]) and the
//! blocking and async entry points.

use std::fmt;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::callbacks::{RetryInfo, RuleId};
use crate::guard::{Breaker, Budget};
use crate::jitter::JitterState;
use crate::kind::Failure;
use crate::policy::{Extras, Policy, PolicyCore, RetryPolicy};
use crate::rules::PlanVisitor;
use crate::settings::Plan;
#[cfg(feature = "tokio")]
use crate::time::AsyncSleep;
use crate::time::{Clock, Env, Sleep};
#[cfg(feature = "tokio")]
use crate::timeout::AsyncTimeout;
use crate::timeout::AttemptTimeout;

/// What the body of a retried function can know about the attempt it runs in (SPEC section 9).
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::Policy;
///
/// let policy = Policy::builder().timeout(Duration::from_secs(5)).build()?;
/// let r: Result<(), std::io::Error> = policy.call(|attempt| {
///     assert_eq!(attempt.retries(), 0);
///     assert_eq!(attempt.timeout(), Some(Duration::from_secs(5)));
///     // A blocking body hands the time left to its socket:
///     let left = attempt.remaining().unwrap();
///     assert!(left <= Duration::from_secs(5));
///     Ok(())
/// });
/// # r.unwrap();
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Clone, Copy)]
pub struct Attempt<'a> {
    retries: u32,
    /// Whether the call is blocking: it then reads [`Clock::now_blocking`].
    blocking: bool,
    timeout: Option<Duration>,
    started: Instant,
    first: Instant,
    clock: &'a (dyn Clock + Sync),
}

impl fmt::Debug for Attempt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("retries", &self.retries)
            .field("timeout", &self.timeout)
            .field("started", &self.started)
            .field("first", &self.first)
            .finish_non_exhaustive()
    }
}

impl Attempt<'_> {
    /// The current instant on the call's clock.
    fn now(&self) -> Instant {
        if self.blocking {
            self.clock.now_blocking()
        } else {
            self.clock.now()
        }
    }

    /// Retries made so far in this call: 0 in the first attempt, n in the attempt that retry n
    /// started. Retries are numbered from 1: the second attempt is retry 1, as `on_retry`'s
    /// [`RetryInfo::retry`](crate::RetryInfo::retry) and the tracing events' `retry` field
    /// number it.
    pub const fn retries(&self) -> u32 {
        self.retries
    }

    /// The 1-based number of this attempt.
    pub const fn number(&self) -> u32 {
        self.retries.saturating_add(1)
    }

    /// This attempt's timeout, `None` for infinite.
    pub const fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// When this attempt started.
    pub const fn started(&self) -> Instant {
        self.started
    }

    /// This attempt's deadline, `None` without a timeout.
    pub fn deadline(&self) -> Option<Instant> {
        self.timeout.and_then(|t| self.started.checked_add(t))
    }

    /// Time left before the deadline (zero once past it), `None` without a timeout.
    pub fn remaining(&self) -> Option<Duration> {
        let deadline = self.deadline()?;
        Some(deadline.saturating_duration_since(self.now()))
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.remaining().is_some_and(|r| r.is_zero())
    }

    /// Time since the first attempt of this call started.
    pub fn elapsed(&self) -> Duration {
        self.now().saturating_duration_since(self.first)
    }
}

/// What to do after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<T, E> {
    /// The call is over: return this (the success, or the last error unchanged).
    Return(Result<T, E>),
    /// Sleep this long, then run the next attempt.
    Retry(Duration),
}

/// The state of one call of a retried function: retry count, backoff exponent, previous
/// delay, start time and random generator. It lives on the caller's stack and is never shared.
///
/// The closure-based [`Policy::call`] and [`Policy::call_async`] drive it; the `#[robust]`
/// attribute writes the same loop inline around the function body:
///
/// ```
/// use retry_runtime::{Policy, NoBackoff, Step};
/// use retry_runtime::time::Sleep;
///
/// let policy = Policy::builder().retries(2).backoff(NoBackoff).build()?;
/// let mut call = policy.start_blocking(); // a blocking loop: it sleeps with `Sleep::sleep`
/// let mut attempts = 0;
/// let result: Result<(), &str> = loop {
///     let _attempt = call.attempt();
///     attempts += 1;
///     match call.settle(Err("down"), false) {
///         Step::Return(r) => break r,
///         Step::Retry(delay) => policy.env().sleep(delay),
///     }
/// };
/// assert_eq!((result, attempts), (Err("down"), 3));
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct Call<'p, P, Tm = Timed> {
    policy: &'p P,
    retries: u32,
    /// The breaker's permit for the current attempt.
    permit: crate::Permit,
    jitter: JitterState,
    times: Tm,
    seed: CallSeed,
}

/// Where a call keeps the instants it needs: [`Timed`] keeps the first attempt's start and the
/// current attempt's deadline; [`Untimed`] keeps nothing, for calls that never read them (no
/// attempt context, no `max_delay`, no cooperative timeout, no `on_retry`), which keeps async
/// futures small.
pub trait Times: Default {
    /// Whether the call blocks its thread to wait ([`Blocking`]): it then reads the clock that
    /// agrees with [`Sleep::sleep`](crate::time::Sleep::sleep),
    /// [`Clock::now_blocking`], instead of [`Clock::now`].
    const BLOCKING: bool = false;
    /// When the first attempt started; records `now` if that is not known.
    fn first_or(&mut self, now: Instant) -> Instant;
    /// The current attempt's deadline.
    fn deadline(&self) -> Option<Instant>;
    /// Sets the current attempt's deadline.
    fn set_deadline(&mut self, deadline: Option<Instant>);
}

/// The instants of a call that reads time (see [`Times`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Timed {
    first: Option<Instant>,
    deadline: Option<Instant>,
}

impl Timed {
    /// The instants of a call whose first attempt starts now on `clock` (its blocking reading
    /// for a blocking call).
    #[inline]
    pub(crate) fn now<C: Clock + ?Sized>(clock: &C, blocking: bool) -> Self {
        let now = if blocking {
            clock.now_blocking()
        } else {
            clock.now()
        };
        Timed {
            first: Some(now),
            deadline: None,
        }
    }
}

impl Times for Timed {
    #[inline]
    fn first_or(&mut self, now: Instant) -> Instant {
        *self.first.get_or_insert(now)
    }
    #[inline]
    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
    #[inline]
    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }
}

/// No instants: the first attempt is taken to start now, there is no deadline (see [`Times`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Untimed;

impl Times for Untimed {
    #[inline(always)]
    fn first_or(&mut self, now: Instant) -> Instant {
        now
    }
    #[inline(always)]
    fn deadline(&self) -> Option<Instant> {
        None
    }
    #[inline(always)]
    fn set_deadline(&mut self, _: Option<Instant>) {}
}

/// The instants `Tm` of a blocking call (see [`Times`]), read from the clock that agrees with
/// the blocking sleeper ([`Clock::now_blocking`]). [`Policy::start_blocking`] and
/// [`Policy::start_lazy_blocking`] make such calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct Blocking<Tm = Timed>(pub(crate) Tm);

impl<Tm: Times> Times for Blocking<Tm> {
    const BLOCKING: bool = true;
    #[inline(always)]
    fn first_or(&mut self, now: Instant) -> Instant {
        self.0.first_or(now)
    }
    #[inline(always)]
    fn deadline(&self) -> Option<Instant> {
        self.0.deadline()
    }
    #[inline(always)]
    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.0.set_deadline(deadline)
    }
}

/// What [`Policy::start_lazy`] keeps: nothing, unless the `tracing` feature is on, whose events
/// report the time since the first attempt.
#[cfg(not(feature = "tracing"))]
pub type LazyTimes = Untimed;
/// What [`Policy::start_lazy`] keeps: nothing, unless the `tracing` feature is on, whose events
/// report the time since the first attempt.
#[cfg(feature = "tracing")]
pub type LazyTimes = Timed;

/// The moment an attempt's outcome is settled, read from the clock at most once, and only if
/// something (breaker, deadline, budget, `on_retry`) asks for it.
struct LazyNow<'a> {
    clock: &'a dyn Clock,
    blocking: bool,
    at: Option<Instant>,
}

impl LazyNow<'_> {
    #[inline]
    fn get(&mut self) -> Instant {
        let (clock, blocking) = (self.clock, self.blocking);
        *self.at.get_or_insert_with(|| {
            if blocking {
                clock.now_blocking()
            } else {
                clock.now()
            }
        })
    }
}

/// The retry decision for the rule that matched (SPEC section 6, step 2 and 3).
struct Decide<'a, 'n, Tm> {
    retries: u32,
    jitter: &'a mut JitterState,
    seed: &'a mut CallSeed,
    times: &'a mut Tm,
    env: &'a dyn Clock,
    now: &'a mut LazyNow<'n>,
    /// The delay the failure asked for, which replaces the backoff.
    hinted: Option<Duration>,
}

/// Why a call stops retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GiveUp {
    /// No rule matches the error: it is not retried at all.
    NotRetryable,
    /// The matching rule's `retries` are used up.
    RetryLimit,
    /// The next retry could not start within `max_delay`.
    MaxDelay,
    /// The retry budget is empty.
    Budget,
}

impl<Tm: Times> PlanVisitor for Decide<'_, '_, Tm> {
    type Out = Result<(Duration, RuleId), GiveUp>;

    #[inline]
    fn visit<P: Plan>(self, plan: &P, rule: RuleId) -> Self::Out {
        if !plan.retry_limit().allows(self.retries) {
            return Err(GiveUp::RetryLimit);
        }
        let budget = plan.budget();
        if budget.is_some_and(|b| b.is_zero()) {
            return Err(GiveUp::MaxDelay);
        }
        let mut rng = RetryRng {
            seed: self.seed,
            env: self.env,
            retries: self.retries,
            rng: None,
        };
        let delay = match self.hinted {
            Some(hint) => hint,
            None => plan.next_delay(self.jitter, &mut rng),
        };
        if let Some(budget) = budget {
            let now = self.now.get();
            let elapsed = now.saturating_duration_since(self.times.first_or(now));
            if elapsed.saturating_add(delay) >= budget {
                return Err(GiveUp::MaxDelay);
            }
        }
        Ok((delay, rule))
    }
}

/// The call's randomness: one seed, drawn (or taken from the policy) the first time a retry
/// needs a random number. Each retry's delay draws from a generator seeded with the call's
/// seed and the retry count, so the call keeps one word, whatever the generator's size, and a
/// call that never draws seeds nothing.
#[derive(Debug, Default, Clone, Copy)]
struct CallSeed(Option<std::num::NonZeroU64>);

impl CallSeed {
    /// One word: seed 0 is kept as `u64::MAX` (so those two seeds share a stream).
    fn new(seed: u64) -> Self {
        CallSeed(Some(
            std::num::NonZeroU64::new(seed).unwrap_or(std::num::NonZeroU64::MAX),
        ))
    }
}

/// The generator of one retry, made on its first draw.
struct RetryRng<'a> {
    seed: &'a mut CallSeed,
    env: &'a dyn Clock,
    retries: u32,
    rng: Option<SmallRng>,
}

impl RetryRng<'_> {
    fn get(&mut self) -> &mut SmallRng {
        let (seed, env, retries) = (&mut *self.seed, self.env, self.retries);
        self.rng.get_or_insert_with(|| {
            let call = match seed.0 {
                Some(s) => s.get(),
                None => {
                    let drawn = env
                        .seed()
                        .unwrap_or_else(|| rand::Rng::next_u64(&mut rand::rng()));
                    *seed = CallSeed::new(drawn);
                    seed.0.map_or(drawn, std::num::NonZeroU64::get)
                }
            };
            // `seed_from_u64` scrambles its input: consecutive retries get unrelated streams.
            let mixed = call.wrapping_add(u64::from(retries).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            SmallRng::seed_from_u64(mixed)
        })
    }
}

impl rand::TryRng for RetryRng<'_> {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(rand::Rng::next_u32(self.get()))
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(rand::Rng::next_u64(self.get()))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        rand::Rng::fill_bytes(self.get(), dst);
        Ok(())
    }
}

impl<W, K, P, T, S, F, C, Bu, Br, H, Rt, N> Policy<W, K, P, T, S, F, C, Extras<Bu, Br, H, Rt, N>>
where
    T: AttemptTimeout,
    C: Env + Sync,
    Bu: Budget,
    Br: Breaker,
{
    /// See [`PolicyCore::start`].
    #[inline]
    pub fn start(&self) -> Call<'_, Self> {
        PolicyCore::start(self)
    }

    /// See [`PolicyCore::start_lazy`].
    #[inline]
    pub fn start_lazy(&self) -> Call<'_, Self, LazyTimes> {
        PolicyCore::start_lazy(self)
    }

    /// See [`PolicyCore::start_blocking`].
    #[inline]
    pub fn start_blocking(&self) -> Call<'_, Self, Blocking> {
        PolicyCore::start_blocking(self)
    }

    /// See [`PolicyCore::start_lazy_blocking`].
    #[inline]
    pub fn start_lazy_blocking(&self) -> Call<'_, Self, Blocking<LazyTimes>> {
        PolicyCore::start_lazy_blocking(self)
    }

    /// See [`PolicyCore::start_untimed`].
    #[inline]
    pub fn start_untimed(&self) -> Call<'_, Self, Untimed> {
        PolicyCore::start_untimed(self)
    }

    /// See [`PolicyCore::start_seeded`].
    #[inline]
    pub fn start_seeded(&self, seed: u64) -> Call<'_, Self> {
        PolicyCore::start_seeded(self, seed)
    }

    /// Runs `body` under this policy, blocking the thread while backing off.
    ///
    /// A configured timeout is cooperative here (a running thread cannot be cancelled): the
    /// body reads its deadline through the [`Attempt`]; an error returned after the deadline
    /// counts as a `Timeout`; a late success is still returned.
    ///
    /// The call reads the clock that agrees with its sleeper ([`Clock::now_blocking`], see
    /// [`start_blocking`](Self::start_blocking)): called inside a tokio runtime whose clock is
    /// paused, it still sees real time pass while it sleeps.
    pub fn call<'p, R, E, G>(&'p self, body: G) -> Result<R, E>
    where
        Self: RetryPolicy<E> + PolicyCore<Env = C>,
        C: Env,
        G: FnMut(Attempt<'p>) -> Result<R, E>,
    {
        run_blocking(self, body)
    }
}

/// The blocking loop of [`RetryPolicy::call`].
pub(crate) fn run_blocking<'p, P, R, E, G>(policy: &'p P, mut body: G) -> Result<R, E>
where
    P: RetryPolicy<E>,
    G: FnMut(Attempt<'p>) -> Result<R, E>,
{
    let mut call = start(policy, Blocking(Timed::now(policy.env(), true)));
    loop {
        if let Some(rejected) = call.admit() {
            return rejected;
        }
        let attempt = call.attempt();
        match call.settle(body(attempt), false) {
            Step::Return(r) => return r,
            Step::Retry(delay) => policy.env().sleep(delay),
        }
    }
}

/// A call of `policy` keeping its instants in `times`; credits the budget once.
#[inline]
pub(crate) fn start<P: PolicyCore, Tm>(policy: &P, times: Tm) -> Call<'_, P, Tm> {
    policy.budget().deposit();
    Call {
        policy,
        retries: 0,
        permit: crate::Permit::NONE,
        jitter: JitterState::default(),
        times,
        seed: CallSeed::default(),
    }
}

#[cfg(feature = "tokio")]
impl<W, K, P, T, S, F, C, Bu, Br, H, Rt, N> Policy<W, K, P, T, S, F, C, Extras<Bu, Br, H, Rt, N>>
where
    T: AttemptTimeout,
    C: Env + Sync,
    Bu: Budget,
    Br: Breaker,
{
    /// Runs the future `body` makes under this policy, on the tokio timer.
    ///
    /// With a timeout, each attempt runs under `tokio::time::timeout`: on expiry its future
    /// is dropped (cancelled) and the attempt fails with `E::from(Elapsed)`, which counts as
    /// a `Timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::Policy;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let policy = Policy::builder().timeout(Duration::from_millis(50)).retries(1).build()?;
    /// let r: std::io::Result<()> = policy
    ///     .call_async(|attempt| async move {
    ///         if attempt.retries() == 0 {
    ///             tokio::time::sleep(Duration::from_secs(1)).await; // cancelled after 50 ms
    ///         }
    ///         Ok(())
    ///     })
    ///     .await;
    /// assert!(r.is_ok());
    /// # Ok(()) }
    /// ```
    pub async fn call_async<'p, R, E, G, Fut>(&'p self, body: G) -> Result<R, E>
    where
        Self: RetryPolicy<E> + PolicyCore<Env = C, Timeout = T>,
        T: AsyncTimeout<E>,
        C: crate::time::AsyncSleep,
        G: FnMut(Attempt<'p>) -> Fut,
        Fut: Future<Output = Result<R, E>>,
    {
        run_async(self, body).await
    }
}

/// The async loop of [`RetryPolicy::call_async`].
#[cfg(feature = "tokio")]
pub(crate) async fn run_async<'p, P, R, E, G, Fut>(policy: &'p P, mut body: G) -> Result<R, E>
where
    P: RetryPolicy<E>,
    P::Env: crate::time::AsyncSleep,
    P::Timeout: AsyncTimeout<E>,
    G: FnMut(Attempt<'p>) -> Fut,
    Fut: Future<Output = Result<R, E>>,
{
    let mut call = start(policy, Timed::now(policy.env(), false));
    loop {
        if let Some(rejected) = call.admit() {
            return rejected;
        }
        let attempt = call.attempt();
        let (result, fired) =
            crate::timeout::run_attempt(policy.timeout_setting(), body(attempt)).await;
        match call.settle(result, fired) {
            Step::Return(r) => return r,
            Step::Retry(delay) => policy.env().sleep_async(delay).await,
        }
    }
}

impl<'p, P: PolicyCore, Tm: Times> Call<'p, P, Tm> {
    /// This call with its random generator seeded with `seed`.
    #[inline]
    pub(crate) fn with_seed(self, seed: u64) -> Self {
        Call {
            seed: CallSeed::new(seed),
            ..self
        }
    }

    /// The current instant on the call's clock: [`Clock::now_blocking`] for a blocking call,
    /// [`Clock::now`] otherwise.
    #[inline]
    fn now(&self) -> Instant {
        if Tm::BLOCKING {
            self.policy.env().now_blocking()
        } else {
            self.policy.env().now()
        }
    }

    /// Asks the circuit breaker (if any) whether the next attempt may start: `Some` with the
    /// error to return at once (`E::from(Open)`) when the breaker is open.
    #[inline]
    pub fn admit<R, E>(&mut self) -> Option<Result<R, E>>
    where
        P: RetryPolicy<E>,
    {
        if !<P::Breaker as Breaker>::ACTIVE {
            return None;
        }
        let breaker = self.policy.breaker();
        if let Some(permit) = breaker.acquire(self.now()) {
            self.permit = permit;
            return None;
        }
        #[cfg(feature = "tracing")]
        tracing::warn!(
            target: "retry_runtime",
            function = self.policy.name(),
            retries = self.retries,
            "circuit breaker open: attempt rejected without running it"
        );
        self.policy.reject().map(Err)
    }

    /// Marks the start of an attempt and returns its context.
    pub fn attempt(&mut self) -> Attempt<'p> {
        let started = self.now();
        let first = self.times.first_or(started);
        let timeout = self.policy.timeout_setting().limit();
        self.times
            .set_deadline(timeout.and_then(|t| started.checked_add(t)));
        Attempt {
            retries: self.retries,
            blocking: Tm::BLOCKING,
            timeout,
            started,
            first,
            clock: self.policy.env(),
        }
    }

    /// Retries made so far: 0 during the first attempt, n during the attempt retry n started.
    pub const fn retries(&self) -> u32 {
        self.retries
    }

    /// Decides what follows an attempt's `result` (SPEC section 6). `timed_out` says the
    /// attempt was cancelled by its timeout; an error returned at or after the attempt's
    /// deadline also counts as timed out.
    ///
    /// On success, `on_success()` is called and the value returned. On error, `on_error(&e,
    /// retries)` is called (`retries` is the failed attempt's [`Attempt::retries`]); then the
    /// first matching rule decides: no rule, its retry limit reached, or its `max_delay`
    /// budget unable to fit the next delay returns the error unchanged; otherwise `on_retry`
    /// is called (with [`RetryInfo::retry`] = the number of the retry about to be made, 1 for
    /// the first) and the delay (strategy, jitter, scale) is returned for sleeping.
    #[inline]
    pub fn settle<R, E>(&mut self, result: Result<R, E>, timed_out: bool) -> Step<R, E>
    where
        P: RetryPolicy<E>,
    {
        let mut now = LazyNow {
            clock: self.policy.env(),
            blocking: Tm::BLOCKING,
            at: None,
        };
        if <P::Breaker as Breaker>::ACTIVE {
            self.policy
                .breaker()
                .record(now.get(), self.permit, result.is_ok());
        }
        match result {
            Ok(value) => {
                self.policy.on_success();
                Step::Return(Ok(value))
            }
            Err(error) => match self.retry_delay(&error, timed_out, &mut now) {
                Ok(delay) => Step::Retry(delay),
                Err(_reason) => {
                    #[cfg(feature = "tracing")]
                    self.trace_give_up(&error, _reason);
                    Step::Return(Err(error))
                }
            },
        }
    }

    #[cfg(feature = "tracing")]
    #[cold]
    fn trace_give_up<E>(&mut self, error: &E, reason: GiveUp)
    where
        P: RetryPolicy<E>,
    {
        let function = self.policy.name();
        let error_type = std::any::type_name::<E>();
        let error = ErrorText(self.policy, error);
        if reason == GiveUp::NotRetryable {
            tracing::debug!(
                target: "retry_runtime",
                function,
                retries = self.retries,
                error = %error,
                error_type,
                "error not retried: no rule matches it"
            );
        } else if tracing::enabled!(target: "retry_runtime", tracing::Level::ERROR) {
            let now = self.now();
            let elapsed = now.saturating_duration_since(self.times.first_or(now));
            tracing::error!(
                target: "retry_runtime",
                function,
                retries = self.retries,
                elapsed_ms = elapsed.as_millis() as u64,
                reason = ?reason,
                error = %error,
                error_type,
                "giving up: returning the last error"
            );
        }
    }

    /// The error path of [`settle`](Self::settle): the delay before the next attempt, or
    /// `None` to give up.
    #[inline]
    fn retry_delay<E>(
        &mut self,
        error: &E,
        timed_out: bool,
        now: &mut LazyNow<'_>,
    ) -> Result<Duration, GiveUp>
    where
        P: RetryPolicy<E>,
    {
        let p = self.policy;
        let timed_out = timed_out || self.times.deadline().is_some_and(|d| now.get() >= d);
        p.on_error(error, self.retries);

        let failure = Failure::new(error, timed_out);
        let hinted = p.hint(error);
        let visitor = Decide {
            retries: self.retries,
            jitter: &mut self.jitter,
            seed: &mut self.seed,
            times: &mut self.times,
            env: p.env(),
            now,
            hinted,
        };
        let (delay, rule) = match p.select(&failure, visitor) {
            Some(decision) => decision?,
            None => return Err(GiveUp::NotRetryable),
        };
        if !p.budget().try_withdraw() {
            return Err(GiveUp::Budget);
        }
        // The clock is read for the callback, or for a tracing subscriber that wants the event.
        #[cfg(feature = "tracing")]
        let trace = tracing::enabled!(target: "retry_runtime", tracing::Level::WARN);
        #[cfg(not(feature = "tracing"))]
        let trace = false;
        if P::ON_RETRY || trace {
            let now = now.get();
            let info = RetryInfo {
                retry: self.retries.saturating_add(1),
                delay,
                elapsed: now.saturating_duration_since(self.times.first_or(now)),
                rule,
                hinted: hinted.is_some(),
            };
            p.on_retry(error, &info);
            #[cfg(feature = "tracing")]
            tracing::warn!(
                target: "retry_runtime",
                function = p.name(),
                retry = info.retry,
                delay_ms = info.delay.as_millis() as u64,
                elapsed_ms = info.elapsed.as_millis() as u64,
                rule = ?info.rule,
                hinted = info.hinted,
                error = %ErrorText(p, error),
                error_type = std::any::type_name::<E>(),
                "attempt failed, retrying"
            );
        }
        self.retries = self.retries.saturating_add(1);
        self.jitter.exponent = self.jitter.exponent.saturating_add(1);
        Ok(delay)
    }
}

/// An error as a policy writes it, for the `error` field of tracing events.
#[cfg(feature = "tracing")]
struct ErrorText<'a, P, E>(&'a P, &'a E);

#[cfg(feature = "tracing")]
impl<P: RetryPolicy<E>, E> fmt::Display for ErrorText<'_, P, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write_error(self.1, f)
    }
}
