//! The retry loop: per-call state ([`Call`]), the attempt context ([`Attempt`]) and the
//! blocking and async entry points.

mod attempt;
mod decide;
#[cfg(feature = "tokio")]
mod hedge;
mod times;

pub use attempt::Attempt;
use decide::{CallSeed, Decide, GiveUp, LazyNow};
#[cfg(feature = "tower")]
pub(crate) use hedge::StartGate;
#[cfg(feature = "tower")]
pub(crate) use hedge::rounds as hedged_rounds;
#[cfg(feature = "tokio")]
pub use hedge::{hedged_loop, hedged_loop_blind};
pub use times::{Blocking, LazyTimes, Timed, Times, Untimed};

#[cfg(feature = "tracing")]
use std::fmt;
use std::time::{Duration, Instant};

use crate::callbacks::RetryInfo;
use crate::guard::{Breaker, Budget, Limit, PendingFlag, Stamp, StartBy as _, Throttle};
use crate::jitter::JitterState;
use crate::kind::Failure;
use crate::policy::{Extras, Policy, PolicyCore, RetryPolicy};
#[cfg(feature = "tokio")]
use crate::time::AsyncSleep;
use crate::time::{Clock, Env, Sleep};
#[cfg(feature = "tokio")]
use crate::timeout::AsyncTimeout;
use crate::timeout::AttemptTimeout;

/// What to do after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<T, E> {
    /// The call is over: return this (the success, or the last error unchanged).
    Return(Result<T, E>),
    /// Sleep this long, then run the next attempt.
    Retry(Duration),
}

/// What [`Call::settle_keeping`] decides: [`Step`], with the failure a retry follows.
#[doc(hidden)]
#[derive(Debug)]
pub enum Settled<T, E> {
    /// The call is over: return this.
    Return(Result<T, E>),
    /// Sleep this long, then run the next attempt; the failure it follows.
    Retry(Duration, Result<T, E>),
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
pub struct Call<'p, P: PolicyCore, Tm = Timed> {
    policy: &'p P,
    retries: u32,
    /// The breaker's permit for the current attempt.
    permit: crate::guard::Permit,
    /// Whether the current attempt's permit is neither recorded nor given back: dropped then
    /// (an async call cancelled while it waits for a slot or its attempt runs), the call gives
    /// it back, so that a half-open breaker's probe goes to another attempt.
    pending: <P::Breaker as Breaker>::Pending,
    jitter: JitterState,
    times: Tm,
    seed: CallSeed,
    /// The latest start of the retry decided last (its rule's `max_delay`), which bounds its
    /// wait for a slot of the concurrency limit; nothing without a limit.
    start_by: <P::Limit as Limit>::StartBy,
}

impl<P: PolicyCore, Tm: std::fmt::Debug> std::fmt::Debug for Call<'_, P, Tm> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("retries", &self.retries)
            .field("permit", &self.permit)
            .field("jitter", &self.jitter)
            .field("times", &self.times)
            .finish_non_exhaustive()
    }
}

impl<P: PolicyCore, Tm> Drop for Call<'_, P, Tm> {
    #[inline]
    fn drop(&mut self) {
        if <P::Breaker as Breaker>::ACTIVE && self.pending.get() {
            self.policy.breaker().release(self.permit);
        }
    }
}

/// A hedged policy cannot start a call driven by hand (a compile error where it is asked to).
macro_rules! refuse_hedged {
    () => {
        const {
            assert!(
                !T::HEDGED,
                "a hedged policy runs a round's attempts concurrently: call it with `call_async` (a call driven by hand makes one attempt at a time and would never hedge)"
            )
        }
    };
}

impl<W, K, P, T, S, F, C, Bu, Br, H, Rt, N, V, Fb, Th, L>
    Policy<W, K, P, T, S, F, C, Extras<Bu, Br, H, Rt, N, V, Fb, Th, L>>
where
    T: AttemptTimeout,
    C: Env + Sync,
    Bu: Budget,
    Br: Breaker,
    Th: Throttle,
    L: crate::guard::Limit,
{
    /// See [`PolicyCore::start`].
    #[inline]
    pub fn start(&self) -> Call<'_, Self> {
        refuse_hedged!();
        PolicyCore::start(self)
    }

    /// See [`PolicyCore::start_lazy`].
    #[inline]
    pub fn start_lazy(&self) -> Call<'_, Self, LazyTimes> {
        refuse_hedged!();
        PolicyCore::start_lazy(self)
    }

    /// See [`PolicyCore::start_blocking`].
    #[inline]
    pub fn start_blocking(&self) -> Call<'_, Self, Blocking> {
        refuse_hedged!();
        PolicyCore::start_blocking(self)
    }

    /// See [`PolicyCore::start_lazy_blocking`].
    #[inline]
    pub fn start_lazy_blocking(&self) -> Call<'_, Self, Blocking<LazyTimes>> {
        refuse_hedged!();
        PolicyCore::start_lazy_blocking(self)
    }

    /// See [`PolicyCore::start_untimed`].
    #[inline]
    pub fn start_untimed(&self) -> Call<'_, Self, Untimed> {
        refuse_hedged!();
        PolicyCore::start_untimed(self)
    }

    /// See [`PolicyCore::start_seeded`].
    #[inline]
    pub fn start_seeded(&self, seed: u64) -> Call<'_, Self> {
        refuse_hedged!();
        PolicyCore::start_seeded(self, seed)
    }

    /// Runs `body` under this policy, blocking the thread while backing off.
    ///
    /// A configured timeout is cooperative here (a running thread cannot be cancelled): the
    /// body reads its deadline through the [`Attempt`]; an error returned after the deadline
    /// counts as a `Timeout` too (it matches a `Timeout` kind, and still the kinds of its own:
    /// the first rule either matches takes it, where an async attempt, cut at its timeout,
    /// fails with `E::from(Elapsed)`); a late success is still returned.
    ///
    /// The call reads the clock that agrees with its sleeper ([`Clock::now_blocking`], see
    /// [`start_blocking`](Self::start_blocking)): called inside a tokio runtime whose clock is
    /// paused, it still sees real time pass while it sleeps.
    pub fn call<'p, R, E, G>(&'p self, body: G) -> Result<R, E>
    where
        Self: RetryPolicy<R, E> + PolicyCore<Env = C>,
        C: Env,
        G: FnMut(Attempt<'p>) -> Result<R, E>,
    {
        run_blocking(self, body)
    }

    /// Runs the future `body` makes under this policy, on the tokio timer.
    ///
    /// With a timeout, each attempt races a `tokio::time::sleep` of the timeout: on expiry
    /// its future is dropped (cancelled) and the attempt fails with `E::from(Elapsed)`, which
    /// counts as a `Timeout`.
    ///
    /// # Panics
    /// Outside a tokio runtime with its time driver enabled (`Builder::enable_time`), the
    /// first timer the call makes (a timeout, a deadline, a backoff's sleep) panics, as tokio's
    /// own timers do.
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
    #[cfg(feature = "tokio")]
    pub async fn call_async<'p, R, E, G, Fut>(&'p self, body: G) -> Result<R, E>
    where
        Self: RetryPolicy<R, E> + PolicyCore<Env = C, Timeout = T>,
        T: AsyncTimeout<E>,
        C: crate::time::AsyncSleep,
        G: FnMut(Attempt<'p>) -> Fut,
        Fut: Future<Output = Result<R, E>>,
    {
        run_async(self, body).await
    }
}

/// The blocking loop of [`RetryPolicy::call`].
pub(crate) fn run_blocking<'p, P, R, E, G>(policy: &'p P, mut body: G) -> Result<R, E>
where
    P: RetryPolicy<R, E>,
    G: FnMut(Attempt<'p>) -> Result<R, E>,
{
    const {
        assert!(
            !<P::Timeout as AttemptTimeout>::HEDGED,
            "hedging runs attempts concurrently: call a hedged policy with `call_async`"
        )
    };
    // The first attempt reads the call's first instant.
    let mut call = start(policy, Blocking::new(Timed::default()));
    // The failure a retry follows, kept while the retry's start may come at or after the
    // call's deadline (a backoff that ended late, after slow callbacks or a late wake-up, or a
    // wait for a slot of the concurrency limit) or while it waits for a slot until its rule's
    // `max_delay` is spent (a policy that may have one reads the first attempt's start:
    // `needs_start`): it is then what the call returns.
    let keep = policy.timeout_setting().deadline().is_some()
        || <P::Limit as Limit>::ACTIVE && policy.needs_start();
    let mut last = None;
    loop {
        if let Some(rejected) = call.admit() {
            return finish(policy, rejected);
        }
        // A slot of the concurrency limit is held while the attempt runs.
        let slot = match slot_blocking(&mut call, &mut last) {
            Ok(slot) => slot,
            Err(r) => return finish(policy, r),
        };
        let attempt = call.attempt();
        let started = attempt.started;
        let result = body(attempt);
        drop(slot);
        call.measure(started, &result, false);
        // (`settle` keeps its in-line success path where nothing needs the failure kept.)
        let delay = if keep {
            match call.settle_keeping(result, false) {
                Settled::Return(r) => return finish(policy, r),
                Settled::Retry(delay, failure) => {
                    last = Some(failure);
                    delay
                }
            }
        } else {
            match call.settle(result, false) {
                Step::Return(r) => return finish(policy, r),
                Step::Retry(delay) => delay,
            }
        };
        policy.env().sleep(delay);
    }
}

/// A slot of the concurrency limit for `call`'s next attempt, blocking the thread (`None`: the
/// limit refused it, and the policy has no error for that), or the call's result when it ends
/// here: the queue was full; the call's deadline passed before a retry's slot came, or when
/// its backoff ended (without a limit, this is the check that the backoff ended in time); or
/// the retry's rule's `max_delay` was spent while it waited for a slot (a free slot is still
/// taken once it is spent, as a retry without a limit still starts). The retry is then not
/// made: `last`, the failure it follows, is returned, as when the deadline leaves no time for
/// a retry's backoff. Either way the attempt's breaker permit is given back. Without `last`
/// the wait has no end; `last` is cleared when the attempt goes ahead.
pub(crate) fn slot_blocking<P, R, E, Tm>(
    call: &mut Call<'_, P, Tm>,
    last: &mut Option<Result<R, E>>,
) -> Result<Option<<P::Limit as Limit>::Slot>, Result<R, E>>
where
    P: RetryPolicy<R, E>,
    Tm: Times,
{
    // (Only a wait with an end, which `last` gives, runs out: without `last` the loop never
    // runs twice.)
    loop {
        let left = last.as_ref().and_then(|_| call.start_left());
        // No time left to wait: a retry takes a free slot, unless the deadline has passed
        // (read once: taking a free slot does not wait).
        let (slot, in_time) = if left.is_some_and(|l| l.is_zero()) {
            if call.deadline_left().is_some_and(|l| l.is_zero()) {
                (None, false)
            } else {
                (call.policy.limit().try_slot(), true)
            }
        } else {
            match call.policy.limit().wait_blocking_for(left) {
                // A slot that came as the deadline passed leaves the retry no time either: it
                // is not made, as in the async loops.
                Ok(slot) => (
                    slot,
                    left.is_none() || call.deadline_left().is_none_or(|l| !l.is_zero()),
                ),
                Err(_) => {
                    let refused = refused(call);
                    if refused.is_none() {
                        // (The attempt runs without a slot: the failure is not kept.)
                        *last = None;
                    }
                    return refused.map_or(Ok(None), Err);
                }
            }
        };
        match slot {
            Some(slot) if in_time => {
                // The failure is not kept while the retry runs.
                *last = None;
                return Ok(Some(slot));
            }
            _ => {
                if let Some(failure) = last.take() {
                    #[cfg(feature = "tracing")]
                    let why = if call.max_delay_first() {
                        GiveUp::MaxDelay
                    } else {
                        GiveUp::Deadline
                    };
                    call.release();
                    #[cfg(feature = "tracing")]
                    call.trace_give_up(&failure, why);
                    return Err(failure);
                }
            }
        }
    }
}

/// Whether a backoff of `delay` from `now` ends before the call's deadline `end`, even if its
/// timer fires as much as `late` after it (an async sleeper's resolution: zero for a blocking
/// call). A retry with no backoff makes no timer, and is never late.
pub(crate) fn backoff_ends_in_time(
    now: Instant,
    delay: Duration,
    late: Duration,
    end: Instant,
) -> bool {
    let late = if delay.is_zero() {
        Duration::ZERO
    } else {
        late
    };
    now.checked_add(delay)
        .is_some_and(|wake| wake < end && wake.checked_add(late).is_some_and(|last| last <= end))
}

/// The result of an attempt the concurrency limit rejected (its queue is full):
/// `Err(E::from(Rejected))`, not retried.
#[cold]
pub(crate) fn refused<P: RetryPolicy<R, E>, R, E, Tm: Times>(
    call: &mut Call<'_, P, Tm>,
) -> Option<Result<R, E>> {
    let policy = call.policy;
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "retry_runtime",
        function = policy.name(),
        "concurrency limit: queue full, attempt rejected without running it"
    );
    let refused = policy.refuse().map(Err);
    if refused.is_some() {
        // The breaker admitted the attempt: its permit (a half-open breaker's probe) goes to
        // the next one.
        call.release();
    }
    refused
}

/// A slot of the concurrency limit for `call`'s next attempt (`None`: the limit refused it,
/// and the policy has no error for that), or the call's result when it ends here: the queue
/// was full, or a retry's time to start ran out while it waited (once the first attempt has
/// started, a retry does not wait past the deadline, nor past its rule's `max_delay`: the call
/// then ends with `E::from(Elapsed)` at the deadline, as when the deadline cuts an attempt,
/// and with `E::from(Rejected)` at the `max_delay`; a slot that comes after the `max_delay`
/// is not taken). Either way the attempt's breaker permit is given back. A free slot is taken
/// at once; only a bounded wait is boxed.
#[cfg(feature = "tokio")]
pub(crate) async fn slot_for<P, R, E, Tm>(
    call: &mut Call<'_, P, Tm>,
) -> Result<Option<<P::Limit as Limit>::Slot>, Result<R, E>>
where
    P: RetryPolicy<R, E> + PolicyCore<Timeout: AsyncTimeout<E>>,
    Tm: Times,
{
    // (Nothing is kept: the future holds no `R` nor `E`, and is `Send` for those that are not.)
    slot_for_keeping(call, || None).await
}

/// [`slot_for`], for a caller that keeps the failure the retry follows (`failure` takes it): a
/// retry whose rule's `max_delay` is spent while it waits ends the call with it instead of
/// `E::from(Rejected)`, as a blocking call does.
#[cfg(feature = "tokio")]
pub(crate) async fn slot_for_keeping<P, R, E, Tm>(
    call: &mut Call<'_, P, Tm>,
    mut failure: impl FnMut() -> Option<Result<R, E>>,
) -> Result<Option<<P::Limit as Limit>::Slot>, Result<R, E>>
where
    P: RetryPolicy<R, E> + PolicyCore<Timeout: AsyncTimeout<E>>,
    Tm: Times,
{
    let limit = call.policy.limit();
    if let Some(slot) = limit.try_slot() {
        return Ok(Some(slot));
    }
    let mut left = call.start_left();
    // A retry with no time left is not made, whether or not the queue has room.
    if left.is_some_and(|l| l.is_zero())
        && let Some(r) = missed_slot(call, &mut failure)
    {
        return Err(r);
    }
    loop {
        let waited = match left {
            // Armed on tokio's timer for the time left on the call's clock, as attempts are.
            Some(left) => {
                let deadline = crate::timeout::deadline_in(left);
                Box::pin(until(limit.wait(), deadline)).await
            }
            None => Some(limit.wait().await),
        };
        match waited {
            // (A slot that came once the rule's `max_delay` was spent is not taken: tokio's
            // timer may fire a little late.)
            Some(Ok(slot)) if left.is_none() || !call.start_passed() => return Ok(Some(slot)),
            Some(Ok(slot)) => {
                return match missed_slot(call, &mut failure) {
                    Some(r) => {
                        drop(slot);
                        Err(r)
                    }
                    None => Ok(Some(slot)),
                };
            }
            Some(Err(_)) => return refused(call).map_or(Ok(None), Err),
            None => match missed_slot(call, &mut failure) {
                Some(r) => return Err(r),
                // (A deadline's error always converts; a setting whose does not never ends the
                // call early: the wait goes on.)
                None => left = None,
            },
        }
    }
}

/// A retry not made because its rule's `max_delay` was spent before it could start (no slot
/// of the limit, or, under the tower layers, its service not ready, in time): the attempt's
/// breaker permit goes back, and the call returns `failure`, the failure the retry follows.
#[cfg(feature = "tokio")]
pub(crate) fn not_made<P, R, E, Tm>(
    call: &mut Call<'_, P, Tm>,
    failure: Result<R, E>,
) -> Result<R, E>
where
    P: RetryPolicy<R, E>,
    Tm: Times,
{
    call.release();
    #[cfg(feature = "tracing")]
    call.trace_missed_start(&failure);
    failure
}

/// What ends a call whose retry ran out of time to start while it waited for a slot: the kept
/// failure the retry follows (`failure` takes it, if kept) when its rule's `max_delay` was
/// spent ([`not_made`]), [`start_missed`]'s error otherwise.
#[cfg(feature = "tokio")]
pub(crate) fn missed_slot<P, R, E, Tm>(
    call: &mut Call<'_, P, Tm>,
    failure: impl FnOnce() -> Option<Result<R, E>>,
) -> Option<Result<R, E>>
where
    P: RetryPolicy<R, E> + PolicyCore<Timeout: AsyncTimeout<E>>,
    Tm: Times,
{
    if call.max_delay_first()
        && let Some(failure) = failure()
    {
        return Some(not_made(call, failure));
    }
    start_missed(call).map(Err)
}

/// The error that ends an async call whose retry ran out of time to start while it waited for
/// a slot (or when its backoff ended, with no slot free): its rule's `max_delay` was spent
/// (`E::from(Rejected)`: the limit gave it no slot in time) or the call's deadline passed
/// (`E::from(Elapsed)`, as when the deadline cuts an attempt). The attempt's breaker permit is
/// given back. `None`: the policy has no such error (the wait goes on).
#[cfg(feature = "tokio")]
pub(crate) fn start_missed<P, R, E, Tm>(call: &mut Call<'_, P, Tm>) -> Option<E>
where
    P: RetryPolicy<R, E> + PolicyCore<Timeout: AsyncTimeout<E>>,
    Tm: Times,
{
    if call.max_delay_first() {
        let e = call.policy.refuse()?;
        call.release();
        Some(e)
    } else {
        call.end_unmade()
    }
}

/// `wait`'s output, or `None` if `deadline` comes first (the wait is then dropped: it leaves
/// the queue).
#[cfg(feature = "tokio")]
async fn until<T>(wait: impl Future<Output = T>, deadline: tokio::time::Instant) -> Option<T> {
    let mut wait = std::pin::pin!(wait);
    let mut timer = std::pin::pin!(tokio::time::sleep_until(deadline));
    std::future::poll_fn(|cx| {
        if let std::task::Poll::Ready(r) = wait.as_mut().poll(cx) {
            return std::task::Poll::Ready(Some(r));
        }
        if timer.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(None);
        }
        std::task::Poll::Pending
    })
    .await
}

/// `d` in whole milliseconds for an event's field, `u64::MAX` past it (a hint of
/// `Duration::MAX` wrapped to a small number).
#[cfg(feature = "tracing")]
fn whole_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What a call returns: `result`, or the fallback's result for an error.
#[inline(always)]
pub(crate) fn finish<P: RetryPolicy<R, E>, R, E>(policy: &P, result: Result<R, E>) -> Result<R, E> {
    match result {
        Err(e) => policy.fallback(e),
        ok => ok,
    }
}

/// A call of `policy` keeping its instants in `times`; credits the budget once.
#[inline]
pub(crate) fn start<P: PolicyCore, Tm>(policy: &P, times: Tm) -> Call<'_, P, Tm> {
    policy.budget().deposit();
    start_credited(policy, times)
}

/// The state of a [`Call`] without its policy: what a hand-written future keeps between polls
/// (beside the policy it owns), to rebuild the call with [`Call::resume`].
#[cfg(feature = "tower")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallState<Tm, Sb = ()> {
    retries: u32,
    permit: crate::guard::Permit,
    jitter: JitterState,
    times: Tm,
    seed: CallSeed,
    start_by: Sb,
}

/// The state of a call of `P` keeping its instants in `Tm`.
#[cfg(feature = "tower")]
pub(crate) type StateOf<P, Tm> = CallState<Tm, <<P as PolicyCore>::Limit as Limit>::StartBy>;

#[cfg(feature = "tower")]
impl<'p, P: PolicyCore, Tm: Copy> Call<'p, P, Tm> {
    /// The call's state, to keep while the policy is not borrowed (with its permit: the call
    /// no longer gives it back when dropped, the holder of the state does).
    #[inline]
    pub(crate) fn into_state(mut self) -> StateOf<P, Tm> {
        self.pending.set(false);
        self.state()
    }

    /// The call (resumed from a state) holds its attempt's breaker permit until it records it:
    /// dropped before that (a rule or callback of the user's panicked), it gives it back.
    #[inline]
    pub(crate) fn owns_permit(&mut self) {
        self.pending.set(true);
    }

    /// The call's state, to keep while the policy is not borrowed.
    #[inline]
    pub(crate) fn state(&self) -> StateOf<P, Tm> {
        CallState {
            retries: self.retries,
            permit: self.permit,
            jitter: self.jitter,
            times: self.times,
            seed: self.seed,
            start_by: self.start_by,
        }
    }

    /// The call with `state`, on `policy` again.
    #[inline]
    pub(crate) fn resume(policy: &'p P, state: StateOf<P, Tm>) -> Self {
        Call {
            policy,
            retries: state.retries,
            permit: state.permit,
            pending: Default::default(),
            jitter: state.jitter,
            times: state.times,
            seed: state.seed,
            start_by: state.start_by,
        }
    }
}

/// A call of `policy` whose budget was already credited for it.
#[inline]
pub(crate) fn start_credited<P: PolicyCore, Tm>(policy: &P, times: Tm) -> Call<'_, P, Tm> {
    Call {
        policy,
        retries: 0,
        permit: crate::guard::Permit::NONE,
        pending: Default::default(),
        jitter: JitterState::default(),
        times,
        seed: CallSeed::default(),
        start_by: Default::default(),
    }
}

/// The async loop of [`RetryPolicy::call_async`].
#[cfg(feature = "tokio")]
pub(crate) async fn run_async<'p, P, R, E, G, Fut>(policy: &'p P, mut body: G) -> Result<R, E>
where
    P: RetryPolicy<R, E>,
    P::Env: crate::time::AsyncSleep,
    P::Timeout: AsyncTimeout<E>,
    G: FnMut(Attempt<'p>) -> Fut,
    Fut: Future<Output = Result<R, E>>,
{
    if <P::Timeout as AttemptTimeout>::HEDGED {
        // Boxed: the rounds' state stays out of every other call's future. (Its type is still
        // in this future's: a call's future is `Send` only for an `R` and an `E` that are,
        // since the rounds keep failures across their waits.)
        return Box::pin(hedge::run_hedged(policy, body)).await;
    }
    // The first attempt reads the call's first instant.
    let mut call = start(policy, Timed::default());
    loop {
        if let Some(rejected) = call.admit() {
            return finish(policy, rejected);
        }
        // A slot of the concurrency limit is held while the attempt runs.
        let slot = match slot_for(&mut call).await {
            Ok(slot) => slot,
            Err(r) => return finish(policy, r),
        };
        let attempt = call.attempt();
        let limit = attempt.limit();
        if let Some(e) = call.out_of_time(limit) {
            return finish(policy, Err(e));
        }
        let started = attempt.started;
        // The result lives in a block that ends before the sleep: a local once borrowed (to
        // measure it), or a `Step` matched, counts as held until its scope ends, and the
        // call's future would not be `Send` for an `R` or an `E` that is not.
        let delay = {
            let (result, fired) =
                crate::timeout::run_attempt(policy.timeout_setting(), limit, body(attempt)).await;
            drop(slot);
            call.measure(started, &result, fired);
            match call.settle(result, fired) {
                Step::Return(r) => return finish(policy, r),
                Step::Retry(delay) => delay,
            }
        };
        policy.env().sleep_async(delay).await;
    }
}

impl<'p, P: PolicyCore, Tm: Times> Call<'p, P, Tm> {
    /// The call's end when its deadline has passed before its next attempt was made (while it
    /// waited for a slot of the concurrency limit, or when its backoff's timer fired late):
    /// the attempt is not made, its breaker permit goes back, and the call ends with
    /// `E::from(Elapsed)`. `None` for a setting with no such error, which never ends a call
    /// early.
    #[cfg(feature = "tokio")]
    #[cold]
    pub(crate) fn end_unmade<E>(&mut self) -> Option<E>
    where
        P::Timeout: AsyncTimeout<E>,
    {
        let e = self
            .policy
            .timeout_setting()
            .elapsed(crate::Elapsed::new())?;
        self.release();
        Some(e)
    }

    /// [`end_unmade`](Self::end_unmade) if the next attempt's time, `limit`, is zero: an
    /// attempt with no time left is not made (its first poll would send it).
    #[cfg(feature = "tokio")]
    #[inline]
    pub(crate) fn out_of_time<E>(&mut self, limit: Option<Duration>) -> Option<E>
    where
        P::Timeout: AsyncTimeout<E>,
    {
        if limit.is_some_and(|l| l.is_zero()) {
            self.end_unmade()
        } else {
            None
        }
    }

    /// The time left before the call's deadline, on the call's own clock, once its first
    /// attempt has started (before it, the deadline has not begun); `None` without one.
    #[inline]
    pub(crate) fn deadline_left(&self) -> Option<Duration> {
        let d = self.policy.timeout_setting().deadline()?;
        let end = self.times.first()?.checked_add(d)?;
        Some(end.saturating_duration_since(self.now()))
    }

    /// The time left before a decided retry must start: before the call's deadline and its
    /// rule's `max_delay` (`None`: no end). What bounds a retry's wait for a slot.
    #[inline]
    pub(crate) fn start_left(&self) -> Option<Duration> {
        let by = self
            .start_by
            .get()
            .map(|at| at.saturating_duration_since(self.now()));
        match (self.deadline_left(), by) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether a decided retry's time to start ends with its rule's `max_delay` rather than
    /// with the call's deadline (which bound a wait that ran out): read from the two instants,
    /// not from the clock, which a virtual clock may not have moved while tokio's timer ran.
    #[cfg(any(feature = "tokio", feature = "tracing"))]
    #[inline]
    pub(crate) fn max_delay_first(&self) -> bool {
        self.start_by.get().is_some_and(|by| {
            self.times
                .first()
                .and_then(|first| self.call_deadline(first))
                .is_none_or(|end| by < end)
        })
    }

    /// Whether a decided retry's rule's `max_delay` has been spent (a clock reading only when
    /// it has one).
    #[cfg(feature = "tokio")]
    #[inline]
    pub(crate) fn start_passed(&self) -> bool {
        self.start_by.get().is_some_and(|by| self.now() >= by)
    }

    /// Whether the instant `now` gives is at or past the current attempt's deadline: an error
    /// returned then counts as a timeout. `now` is called only when there is a deadline (a call
    /// without one reads no clock here).
    #[inline]
    fn past_deadline(&self, now: impl FnOnce() -> Instant) -> bool {
        self.times.deadline().is_some_and(|d| now() >= d)
    }

    /// Gives back the breaker's permit of an attempt that was admitted but never made.
    #[inline]
    pub(crate) fn release(&mut self) {
        self.pending.set(false);
        if <P::Breaker as Breaker>::ACTIVE {
            self.policy.breaker().release(self.permit);
        }
    }

    /// The current attempt's permit, handed to whoever records or releases it (a hedged
    /// round): the call no longer gives it back when dropped.
    #[cfg(feature = "tokio")]
    #[inline]
    pub(crate) fn hand_permit(&mut self) -> crate::guard::Permit {
        self.pending.set(false);
        self.permit
    }

    /// This call with its random generator seeded with `seed`.
    #[inline]
    pub(crate) fn with_seed(mut self, seed: u64) -> Self {
        self.seed = CallSeed::new(seed);
        self
    }

    /// The first attempt starts now after all: it waited for a slot of a concurrency limit since
    /// the call started (a lazy call keeps its first instant for the `tracing` events'
    /// elapsed times only, which count from the first attempt's start).
    #[doc(hidden)]
    #[inline]
    pub fn first_attempt_starts_now(&mut self) {
        if self.retries == 0 && self.times.first().is_some() {
            let now = self.now();
            self.times.restart_first(now);
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

    /// Asks the throttle and the circuit breaker (if any) whether the next attempt may start:
    /// `Some` with the error to return at once, `E::from(Rejected)` when the throttle rejects a
    /// first attempt (the rejection is recorded by the throttle, as a failure), or
    /// `E::from(Open)` when the breaker is open. Before a retry, the throttle moves its latest
    /// bucket up to the retry's start, where the retry's outcome is then counted.
    #[inline]
    pub fn admit<R, E>(&mut self) -> Option<Result<R, E>>
    where
        P: RetryPolicy<R, E>,
    {
        // The throttle decides the first attempt here (a retry's when it is decided, before
        // its backoff: asked again here, it moves its latest bucket up to the retry's start,
        // where the retry's outcome is then counted).
        if <P::Throttle as Throttle>::ACTIVE {
            let throttle = self.policy.throttle();
            // A blocking call's first attempt on the system's clock lets the throttle read it
            // coarsely (a retry reads it exactly: it is off the success path).
            let system =
                Tm::BLOCKING && self.retries == 0 && self.policy.env().blocking_is_system();
            let now = match throttle.coarse_now(system) {
                Some(now) => now,
                None => Stamp::of(self.now()),
            };
            // The draw (and the generator's seeding) only when a rejection is possible.
            let chance = throttle.reject_probability(now);
            if self.retries == 0
                && chance > 0.0
                && decide::throttle_draw(&mut self.seed, self.policy.env(), 0) < chance
            {
                throttle.record(now, false);
                #[cfg(feature = "tracing")]
                tracing::warn!(
                    target: "retry_runtime",
                    function = self.policy.name(),
                    "throttled: attempt rejected without running it"
                );
                return self.policy.refuse().map(Err);
            }
        }
        const {
            assert!(
                <P::Breaker as Breaker>::ACTIVE
                    == <<P::Breaker as Breaker>::Pending as PendingFlag>::TRACKS,
                "a breaker's `Pending` must be `bool` (and `()` without a breaker)"
            )
        };
        if !<P::Breaker as Breaker>::ACTIVE {
            return None;
        }
        let breaker = self.policy.breaker();
        if let Some(permit) = breaker.acquire(self.now()) {
            self.permit = permit;
            self.pending.set(true);
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

    /// Takes a slot of the policy's concurrency limit for the next attempt, without waiting
    /// (a loop of your own that does not wait, or a limit without a queue), after
    /// [`admit`](Self::admit): `Ok` with the slot to hold while the attempt runs (`Some(())`
    /// without a limit; `None` when the limit refused and the policy has no error for it); when
    /// no slot is free, `Err` with the call's result, `Err(E::from(Rejected))`: the call ends
    /// there, not retried (SPEC section 16), and the attempt's breaker permit is given back.
    ///
    /// ```
    /// use retry_runtime::{ConcurrencyLimit, Policy, Rejected};
    ///
    /// let limit = ConcurrencyLimit::new(1, 0)?;
    /// let policy = Policy::builder().retries(2).limit(&limit).build()?;
    /// let held = limit.try_acquire(); // every slot taken
    /// let mut call = policy.start();
    /// assert!(call.admit::<(), std::io::Error>().is_none());
    /// let refused = call.try_slot::<(), std::io::Error>().unwrap_err().unwrap_err();
    /// assert!(refused.get_ref().is_some_and(|e| e.is::<Rejected>()));
    /// drop(held);
    /// let mut call = policy.start();
    /// assert!(call.admit::<(), std::io::Error>().is_none());
    /// let slot = call.try_slot::<(), std::io::Error>().ok().flatten();
    /// assert_eq!((slot.is_some(), limit.in_flight()), (true, 1));
    /// # Ok::<(), retry_runtime::ConfigError>(())
    /// ```
    pub fn try_slot<R, E>(&mut self) -> Result<Option<<P::Limit as Limit>::Slot>, Result<R, E>>
    where
        P: RetryPolicy<R, E>,
    {
        match Limit::try_slot(self.policy.limit()) {
            Some(slot) => Ok(Some(slot)),
            None => match refused(self) {
                Some(result) => Err(result),
                None => Ok(None),
            },
        }
    }

    /// Marks the start of an attempt and returns its context.
    pub fn attempt(&mut self) -> Attempt<'p> {
        let started = self.now();
        let first = self.times.first_or(started);
        let attempt = self.context(started, first);
        self.times.set_deadline(attempt.deadline());
        if Tm::BLOCKING && <P::Timeout as AttemptTimeout>::MEASURED {
            self.times
                .set_own_end(attempt.timeout.and_then(|t| started.checked_add(t)));
        }
        attempt
    }

    /// The context of an attempt of this call started at `started`, the call's first at
    /// `first`.
    #[inline]
    fn context(&self, started: Instant, first: Instant) -> Attempt<'p> {
        Attempt {
            retries: self.retries,
            blocking: Tm::BLOCKING,
            timeout: self.policy.timeout_setting().limit(),
            started,
            first,
            call_deadline: self.call_deadline(first),
            clock: self.policy.env(),
        }
    }

    /// A context for an attempt that never reads it (the hedged loop's blind attempts),
    /// made without reading the clock: its instants are the process's first reading.
    #[cfg(feature = "tokio")]
    pub(crate) fn unread_attempt(&self) -> Attempt<'p> {
        static UNREAD: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let at = *UNREAD.get_or_init(Instant::now);
        self.context(at, at)
    }

    /// The context of a hedge started at `now` (SPEC section 15): the round's retry count,
    /// its own start and timeout; the call's deadline and first instant are unchanged.
    #[cfg(feature = "tokio")]
    pub(crate) fn hedge_attempt(&mut self, now: Instant) -> Attempt<'p> {
        let first = self.times.first_or(now);
        self.context(now, first)
    }

    /// Records the latency of an attempt started at `started`, for a timeout setting that
    /// learns from latencies (SPEC section 15b); nothing otherwise. A success is recorded;
    /// so is an attempt cut by its timeout (`timed_out`, or an error at or after its deadline),
    /// as its time so far, a lower bound of its latency: a service that slows down then raises
    /// the percentile instead of being cut for ever. Other failures (a value an `Ok(..)` kind
    /// matches, an error before the deadline, an attempt the call's deadline cut before its
    /// own timeout) say nothing about the latency of a success and are not recorded. An
    /// attempt whose deadline was the call's is taken as cut by it in an async call (its timer
    /// was armed for it), and in a blocking call only if it ended before its own timeout,
    /// as read when it started, would have.
    #[inline(always)]
    pub fn measure<R, E>(&self, started: Instant, result: &Result<R, E>, timed_out: bool)
    where
        P: RetryPolicy<R, E>,
    {
        if <P::Timeout as AttemptTimeout>::MEASURED {
            self.record_latency(started, result, timed_out);
        }
    }

    #[inline]
    fn record_latency<R, E>(&self, started: Instant, result: &Result<R, E>, timed_out: bool)
    where
        P: RetryPolicy<R, E>,
    {
        let now = match result {
            Ok(v) if P::VALUES && self.policy.select_value(v, decide::Matched).is_some() => return,
            Ok(_) => self.now(),
            Err(_) => {
                let deadline = self.times.deadline();
                if !timed_out && deadline.is_none() {
                    return;
                }
                let now = self.now();
                // An error before the attempt's deadline says nothing of its latency; nor does
                // one the call's deadline cut before the attempt's own timeout (cut for want of
                // time, not for being slow: its time so far would pull the percentile down).
                if !timed_out && deadline.is_some_and(|d| now < d)
                    || self.cut_by_the_call(deadline, now)
                {
                    return;
                }
                now
            }
        };
        self.policy
            .timeout_setting()
            .record(now.saturating_duration_since(started));
    }

    /// Whether the current attempt, whose deadline was `deadline`, and over at `now` was cut
    /// by the call's deadline: that deadline was the attempt's (it came before the attempt's
    /// own timeout's end), and, for a blocking attempt, whose timeout is cooperative and which
    /// may run past both, it ended before its own timeout, as read when it started, would have
    /// cut it (its time is otherwise a measure of its latency). An async attempt's timer was
    /// armed for the call's deadline: it was cut by it. Neither reads an adaptive timeout's
    /// limit again: other calls' latencies may have moved it while the attempt ran.
    #[inline]
    pub(crate) fn cut_by_the_call(&self, deadline: Option<Instant>, now: Instant) -> bool {
        deadline.is_some()
            && self
                .times
                .first()
                .is_some_and(|first| self.call_deadline(first) == deadline)
            && (!Tm::BLOCKING || self.times.own_end().is_none_or(|own_end| now < own_end))
    }

    /// When the call must end, for a call whose first attempt started at `first`.
    #[inline]
    fn call_deadline(&self, first: Instant) -> Option<Instant> {
        self.policy
            .timeout_setting()
            .deadline()
            .and_then(|d| first.checked_add(d))
    }

    /// Retries made so far: 0 during the first attempt, n during the attempt retry n started.
    pub const fn retries(&self) -> u32 {
        self.retries
    }

    /// Decides what follows an attempt's `result` (SPEC sections 6 and 13). `timed_out` says
    /// the attempt was cancelled by its timeout; an error returned at or after the attempt's
    /// deadline also counts as timed out.
    ///
    /// On success, a value that no `Ok(..)` kind matches calls `on_success()` and is returned.
    /// On error, `on_error(&e, retries)` is called (`retries` is the failed attempt's
    /// [`Attempt::retries`]). Then, for an error or a matched value, the first matching rule
    /// decides: no rule, its retry limit reached, or its `max_delay` budget unable to fit the
    /// next delay returns the outcome unchanged (an error as `Err`, a matched value as `Ok`);
    /// otherwise `on_retry` is called (with [`RetryInfo::retry`] = the number of the retry
    /// about to be made, 1 for the first) and the delay (strategy, jitter, scale) is returned
    /// for sleeping. The fallback, if any, is not applied here: the loops apply it to what
    /// they return.
    #[inline(always)]
    pub fn settle<R, E>(&mut self, result: Result<R, E>, timed_out: bool) -> Step<R, E>
    where
        P: RetryPolicy<R, E>,
    {
        // The attempt's permit is recorded below, whatever the outcome (until it is, a call
        // dropped by a panic, in a rule of the user's, gives it back).
        // A success no value rule can match, the common case, is settled in line: the outcome
        // is not moved into a call and back out of it.
        if !P::VALUES && result.is_ok() {
            let mut now = self.lazy_now();
            return self.succeeded(&mut now, result);
        }
        match self.settle_any(result, timed_out, &mut None) {
            Settled::Return(r) => Step::Return(r),
            Settled::Retry(delay, _) => Step::Retry(delay),
        }
    }

    /// [`settle`](Self::settle), keeping the failure a retry follows: a blocking loop returns
    /// it when the retry is not made after all (the call's deadline passed before its backoff
    /// ended or while it waited for a slot of the concurrency limit, or its rule's `max_delay`
    /// was spent while it waited).
    #[doc(hidden)]
    #[inline]
    pub fn settle_keeping<R, E>(&mut self, result: Result<R, E>, timed_out: bool) -> Settled<R, E>
    where
        P: RetryPolicy<R, E>,
    {
        self.settle_any(result, timed_out, &mut None)
    }

    /// [`settle_keeping`](Self::settle_keeping), with the latest start of a decided retry (its
    /// rule's `max_delay`, counted from the first attempt's start; `None` without one): what
    /// bounds the tower layers' wait for a retry's service to be ready.
    #[cfg(feature = "tokio")]
    #[inline]
    pub(crate) fn settle_keeping_start<R, E>(
        &mut self,
        result: Result<R, E>,
        timed_out: bool,
    ) -> (Settled<R, E>, Option<Instant>)
    where
        P: RetryPolicy<R, E>,
    {
        let mut start_by = None;
        let settled = self.settle_any(result, timed_out, &mut start_by);
        (settled, start_by)
    }

    /// The time left until `at` on the call's clock (zero once it has passed).
    #[cfg(feature = "tokio")]
    #[inline]
    pub(crate) fn left_until(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.now())
    }

    /// The give-up event of a retry not made because its rule's `max_delay` was spent before
    /// it could start (no slot, or under the tower layers its service not ready, in time):
    /// `outcome` is the failure it followed, which the call returns.
    #[cfg(all(feature = "tokio", feature = "tracing"))]
    pub(crate) fn trace_missed_start<R, E>(&mut self, outcome: &Result<R, E>)
    where
        P: RetryPolicy<R, E>,
    {
        self.trace_give_up(outcome, GiveUp::MaxDelay);
    }

    /// The call's clock, read when first asked.
    #[inline(always)]
    fn lazy_now(&self) -> LazyNow<'p> {
        LazyNow {
            clock: self.policy.env(),
            blocking: Tm::BLOCKING,
            at: None,
        }
    }

    /// A success: the breaker and the throttle record it, `on_success` is called.
    #[inline(always)]
    fn succeeded<R, E>(&mut self, now: &mut LazyNow<'_>, result: Result<R, E>) -> Step<R, E>
    where
        P: RetryPolicy<R, E>,
    {
        self.record_success::<R, E>(now);
        Step::Return(result)
    }

    /// What [`settle`](Self::settle) does with a success no value rule can match (`!P::VALUES`),
    /// for a caller that keeps the value: the breaker and the throttle record it, `on_success`
    /// is called.
    #[cfg(feature = "tokio")]
    #[inline(always)]
    pub(crate) fn success<R, E>(&mut self)
    where
        P: RetryPolicy<R, E>,
    {
        let mut now = self.lazy_now();
        self.record_success::<R, E>(&mut now);
    }

    /// The breaker records the current attempt's outcome with its permit, which the call then
    /// no longer gives back when dropped.
    #[inline(always)]
    fn record_permit(&mut self, now: Instant, success: bool) {
        self.pending.set(false);
        self.policy.breaker().record(now, self.permit, success);
    }

    #[inline(always)]
    fn record_success<R, E>(&mut self, now: &mut LazyNow<'_>)
    where
        P: RetryPolicy<R, E>,
    {
        if <P::Breaker as Breaker>::ACTIVE {
            self.record_permit(now.get(), true);
        }
        // (The attempt's admission asked the throttle, which moved its latest bucket up to
        // then: recording there needs no clock reading.)
        if <P::Throttle as Throttle>::ACTIVE {
            self.policy.throttle().record_recent(true);
        }
        self.policy.on_success();
    }

    /// [`settle`](Self::settle) for any outcome.
    #[inline]
    fn settle_any<R, E>(
        &mut self,
        result: Result<R, E>,
        timed_out: bool,
        start_by: &mut Option<Instant>,
    ) -> Settled<R, E>
    where
        P: RetryPolicy<R, E>,
    {
        let mut now = self.lazy_now();
        if result.is_ok() && P::VALUES {
            // A value an `Ok(..)` kind matches is a failed attempt for every rule and guard.
            match self.retry_delay(&result, timed_out, &mut now, start_by) {
                Err(GiveUp::NotRetryable) => {}
                decided => {
                    // (The breaker and the throttle recorded the failure when the value
                    // matched.)
                    return match decided {
                        Ok(delay) => Settled::Retry(delay, result),
                        Err(_reason) => {
                            #[cfg(feature = "tracing")]
                            self.trace_give_up(&result, _reason);
                            Settled::Return(result)
                        }
                    };
                }
            }
        }
        if result.is_ok() {
            self.record_success::<R, E>(&mut now);
            return Settled::Return(result);
        }
        if <P::Breaker as Breaker>::ACTIVE {
            self.record_permit(now.get(), false);
        }
        let decided = self.retry_delay(&result, timed_out, &mut now, start_by);
        // Accepted unless it failed with a retryable error (which `retry_delay` recorded).
        if <P::Throttle as Throttle>::ACTIVE && decided == Err(GiveUp::NotRetryable) {
            self.policy.throttle().record_recent(true);
        }
        match decided {
            Ok(delay) => Settled::Retry(delay, result),
            Err(_reason) => {
                #[cfg(feature = "tracing")]
                self.trace_give_up(&result, _reason);
                Settled::Return(result)
            }
        }
    }

    /// Settles an attempt that cannot be retried (its request could not be copied): the
    /// breaker records it and the callbacks see it as [`settle`](Self::settle) would show them,
    /// and its outcome is returned whatever the rules say.
    #[cfg(feature = "tower")]
    pub(crate) fn settle_once<R, E>(
        &mut self,
        result: Result<R, E>,
        timed_out: bool,
    ) -> Result<R, E>
    where
        P: RetryPolicy<R, E>,
    {
        // A value an `Ok(..)` kind matches is a failed attempt here too.
        let failed = match &result {
            Err(_) => true,
            Ok(v) => P::VALUES && self.policy.select_value(v, decide::Matched).is_some(),
        };
        let mut now = self.lazy_now();
        if <P::Breaker as Breaker>::ACTIVE {
            self.record_permit(now.get(), !failed);
        }
        if <P::Throttle as Throttle>::ACTIVE {
            // Accepted unless it failed with an error (or a value) a rule retries, as in
            // `settle`: an error no rule retries is the service's answer.
            // (An error returned once the deadline has passed counts as a timeout, as there.)
            let now = now.get();
            let accepted = match &result {
                Err(e) => {
                    let timed_out = timed_out || self.past_deadline(|| now);
                    let failure = Failure::new(e, timed_out);
                    self.policy.select(&failure, decide::Matched).is_none()
                }
                Ok(_) => !failed,
            };
            self.policy.throttle().record(Stamp::of(now), accepted);
        }
        match &result {
            Err(e) => self.policy.on_error(e, self.retries),
            Ok(_) if !failed => self.policy.on_success(),
            Ok(_) => {}
        }
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "retry_runtime",
            function = self.policy.name(),
            retries = self.retries,
            "not retried: the request cannot be copied"
        );
        result
    }

    #[cfg(feature = "tracing")]
    #[cold]
    fn trace_give_up<R, E>(&mut self, outcome: &Result<R, E>, reason: GiveUp)
    where
        P: RetryPolicy<R, E>,
    {
        let function = self.policy.name();
        let error_type = std::any::type_name::<E>();
        let error = OutcomeText(self.policy, outcome);
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
            if outcome.is_ok() {
                tracing::error!(
                    target: "retry_runtime",
                    function,
                    retries = self.retries,
                    elapsed_ms = whole_ms(elapsed),
                    reason = ?reason,
                    value_type = std::any::type_name::<R>(),
                    "giving up: returning the last value"
                );
            } else {
                tracing::error!(
                    target: "retry_runtime",
                    function,
                    retries = self.retries,
                    elapsed_ms = whole_ms(elapsed),
                    reason = ?reason,
                    error = %error,
                    error_type,
                    "giving up: returning the last error"
                );
            }
        }
    }

    /// The failure path of [`settle`](Self::settle), for an error or a value: the delay
    /// before the next attempt, or why not to retry; `start_by` is set to the latest start of
    /// the retry decided (its rule's `max_delay`), if it has one.
    #[inline]
    fn retry_delay<R, E>(
        &mut self,
        outcome: &Result<R, E>,
        timed_out: bool,
        now: &mut LazyNow<'_>,
        start_by: &mut Option<Instant>,
    ) -> Result<Duration, GiveUp>
    where
        P: RetryPolicy<R, E>,
    {
        let p = self.policy;
        let selected = match outcome {
            Err(error) => {
                let timed_out = timed_out || self.past_deadline(|| now.get());
                p.on_error(error, self.retries);
                let failure = Failure::new(error, timed_out);
                let visitor = Decide {
                    retries: self.retries,
                    jitter: &mut self.jitter,
                    seed: &mut self.seed,
                    times: &mut self.times,
                    env: p.env(),
                    now,
                    error_hint: || p.hint(error),
                };
                p.select(&failure, visitor)
            }
            Ok(value) => {
                let visitor = Decide {
                    retries: self.retries,
                    jitter: &mut self.jitter,
                    seed: &mut self.seed,
                    times: &mut self.times,
                    env: p.env(),
                    now,
                    error_hint: || None,
                };
                p.select_value(value, visitor)
            }
        };
        let (delay, rule, hinted) = match selected {
            Some(decision) => {
                // A rule matched: the attempt failed with a retryable error, not accepted by
                // the throttle's count, which holds it before the retry is drawn (SPEC 16: the
                // retry's chance counts every attempt made before it).
                if <P::Throttle as Throttle>::ACTIVE {
                    p.throttle().record_recent(false);
                }
                // A matched value is a failed attempt for the breaker too.
                if outcome.is_ok() && <P::Breaker as Breaker>::ACTIVE {
                    self.record_permit(now.get(), false);
                }
                let (delay, rule, hinted, max_delay) = decision?;
                // The retry must start before its rule's `max_delay` is spent: a wait for a
                // slot of the limit after its backoff ends then (and, under the tower layer, a
                // wait for its service to be ready).
                let by = max_delay.and_then(|m| {
                    let now = now.get();
                    self.times.first_or(now).checked_add(m)
                });
                if <P::Limit as Limit>::ACTIVE {
                    self.start_by.set(by);
                }
                *start_by = by;
                (delay, rule, hinted)
            }
            None => return Err(GiveUp::NotRetryable),
        };
        // The call's deadline: no retry once it has passed, nor one whose backoff would end
        // at or after it (SPEC section 12). An async sleep may end up to its timer's
        // resolution late (`Clock::async_resolution`; tokio's may fire up to 2 ms late): nor
        // is a retry made whose timer could fire at or after the deadline, which would leave
        // its attempt no time and end the call with `Elapsed` instead of the failure it
        // follows.
        if p.timeout_setting().deadline().is_some() {
            let blocking = now.blocking;
            let now = now.get();
            let first = self.times.first_or(now);
            if let Some(end) = self.call_deadline(first) {
                let late = if blocking {
                    Duration::ZERO
                } else {
                    p.env().async_resolution()
                };
                if !backoff_ends_in_time(now, delay, late, end) {
                    return Err(GiveUp::Deadline);
                }
            }
        }
        // A value is not retried while the breaker is open: the rule gives up and the value is
        // returned (the retry of an error, or of a value whose breaker opens during the
        // backoff, is rejected when it starts, with `E::from(Open)`).
        if outcome.is_ok() && <P::Breaker as Breaker>::ACTIVE && !p.breaker().would_admit(now.get())
        {
            return Err(GiveUp::Breaker);
        }
        // The throttle may reject the retry: it is not made, and the last failure is returned.
        if <P::Throttle as Throttle>::ACTIVE {
            let now = Stamp::of(now.get());
            let chance = p.throttle().reject_probability(now);
            if chance > 0.0
                && decide::throttle_draw(&mut self.seed, p.env(), self.retries.saturating_add(1))
                    < chance
            {
                p.throttle().record(now, false);
                return Err(GiveUp::Throttle);
            }
        }
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
                hinted,
            };
            p.on_retry(outcome, &info);
            #[cfg(feature = "tracing")]
            if outcome.is_ok() {
                tracing::warn!(
                    target: "retry_runtime",
                    function = p.name(),
                    retry = info.retry,
                    delay_ms = whole_ms(info.delay),
                    elapsed_ms = whole_ms(info.elapsed),
                    rule = ?info.rule,
                    hinted = info.hinted,
                    value_type = std::any::type_name::<R>(),
                    "attempt returned a value an Ok(..) kind matches, retrying"
                );
            } else {
                tracing::warn!(
                    target: "retry_runtime",
                    function = p.name(),
                    retry = info.retry,
                    delay_ms = whole_ms(info.delay),
                    elapsed_ms = whole_ms(info.elapsed),
                    rule = ?info.rule,
                    hinted = info.hinted,
                    error = %OutcomeText(p, outcome),
                    error_type = std::any::type_name::<E>(),
                    "attempt failed, retrying"
                );
            }
        }
        self.retries = self.retries.saturating_add(1);
        self.jitter.exponent = self.jitter.exponent.saturating_add(1);
        Ok(delay)
    }
}

/// An outcome as a policy writes it, for the `error` field of tracing events: the error's
/// text, or the value's type.
#[cfg(feature = "tracing")]
struct OutcomeText<'a, P, R, E>(&'a P, &'a Result<R, E>);

/// The WARN event of a call a tower service ended by failing to become ready: its error is the
/// call's, unretried, and no request was sent for it (tower's contract: such a service is to be
/// discarded). The other ways a call ends each have theirs; this one is how a call through a
/// `Buffer` or a balancer fails when the stack below is gone.
#[cfg(feature = "tracing")]
#[cold]
pub(crate) fn trace_not_ready<P: RetryPolicy<R, E>, R, E>(policy: &P, outcome: &Result<R, E>) {
    tracing::warn!(
        target: "retry_runtime",
        function = policy.name(),
        error = %OutcomeText(policy, outcome),
        error_type = std::any::type_name::<E>(),
        "the service failed to become ready: the call ends with its error, not retried (no request was sent)"
    );
}

#[cfg(feature = "tracing")]
impl<P: RetryPolicy<R, E>, R, E> fmt::Display for OutcomeText<'_, P, R, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Err(e) => self.0.write_error(e, f),
            Ok(_) => write!(f, "a value of type {}", std::any::type_name::<R>()),
        }
    }
}
