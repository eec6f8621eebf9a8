//! The hedged async loop (SPEC section 15): rounds of concurrent attempts, the first success
//! winning. The rules are in [`crate::hedge`].

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::decide::LazyNow;
use super::{Call, Settled, Step, Timed, finish, start};
use crate::Elapsed;
use crate::checks::IsResult;
use crate::guard::{Breaker, Budget, Limit, PendingFlag, Permit, Stamp, Throttle};
use crate::kind::Failure;
use crate::policy::{AsyncRetryPolicy, PolicyCore, RetryPolicy};
use crate::time::{AsyncSleep, Clock};
use crate::timeout::{AsyncTimeout, AttemptTimeout, after};

/// What a hedged tower layer's rounds share with the maker of their attempts, whose attempts
/// are sent only once their service is ready: how many were sent, and the current round's
/// latest start while it is not made. A round after a retry whose rule has a `max_delay` is
/// made once one of its attempts is sent, or ends (a timeout cuts its wait), before the
/// `max_delay` is spent; one that has done neither by then is not made: the call returns the
/// failure the retry follows (SPEC section 2: a retry is made only if it can start before its
/// `max_delay` is spent), its attempts still waiting for their service are dropped, and an
/// attempt whose service became ready after that instant, having had to wait, is not sent.
#[derive(Debug, Default)]
pub(crate) struct StartGate {
    /// Attempts sent (their request handed to their service) so far.
    sent: std::sync::atomic::AtomicU32,
    /// The current round's latest start, while it is not made.
    round: std::sync::Mutex<Option<RoundBound>>,
    /// An attempt of the current round was held back: the round's start is missed, and no
    /// attempt of it is sent any more, even one whose service is ready at once (the round
    /// ends at its next poll).
    closed: std::sync::atomic::AtomicBool,
    /// Whether the current round has a latest start (`round` is set): read without the lock.
    bounded: std::sync::atomic::AtomicBool,
}

/// A retry's round's latest start, on tokio's clock and on the call's, and the attempts sent
/// before the round.
#[derive(Debug, Clone, Copy)]
struct RoundBound {
    by: tokio::time::Instant,
    by_call: Instant,
    sent_before: u32,
}

#[cfg_attr(not(feature = "tower"), allow(dead_code))]
impl StartGate {
    /// An attempt was sent. (The call's one task polls every attempt of its rounds: no two
    /// sends race, and a load and a store do without a locked operation.)
    pub(crate) fn sent(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.sent
            .store(self.sent.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// Whether an attempt whose service became ready at `now` (tokio's clock), having had to
    /// wait, is held back: its round has sent nothing, and its latest start has passed, by
    /// tokio's clock or by the call's (`clock`, which may be a virtual one).
    pub(crate) fn holds_back(&self, now: tokio::time::Instant, clock: &dyn Clock) -> bool {
        let Some(r) = *self.round.lock().unwrap_or_else(|p| p.into_inner()) else {
            return false;
        };
        let held = self.sent_so_far() == r.sent_before && (now >= r.by || clock.now() >= r.by_call);
        if held {
            self.closed
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        held || self.closed()
    }

    /// Whether the current round's start was missed (an attempt of it was held back): no
    /// attempt of it is sent.
    pub(crate) fn closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the current round, which has a latest start, has sent an attempt.
    fn round_sent(&self) -> bool {
        let round = *self.round.lock().unwrap_or_else(|p| p.into_inner());
        round.is_some_and(|r| self.sent_so_far() != r.sent_before)
    }

    fn set_round(&self, round: Option<RoundBound>) {
        use std::sync::atomic::Ordering::Relaxed;
        self.bounded.store(round.is_some(), Relaxed);
        *self.round.lock().unwrap_or_else(|p| p.into_inner()) = round;
        self.closed.store(false, Relaxed);
    }

    /// Whether the current round has a latest start, as its attempt is made: an attempt made
    /// without one is never held back.
    pub(crate) fn bounded(&self) -> bool {
        self.bounded.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn sent_so_far(&self) -> u32 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Under a [`StartGate`], the latest start of the retry decided last (its rule's `max_delay`)
/// and the failure it follows, from the retry's decision until its round is made. Boxed: the
/// rounds without a gate (the attribute's) stay as small as before.
struct KeptRound<R, E> {
    /// On the call's clock.
    by: Instant,
    /// On tokio's clock, once the round has started.
    by_tokio: Option<tokio::time::Instant>,
    failure: Option<Result<R, E>>,
}

/// What the loop knows of a running attempt besides its future.
struct Meta<S> {
    /// Its time (its timeout, or less when the call's deadline comes first).
    limit: Option<Duration>,
    /// When its timer cuts it, on tokio's clock: set when it is first seen pending.
    cut: Option<tokio::time::Instant>,
    /// Its deadline on the call's clock (an error after it counts as a timeout).
    deadline: Option<Instant>,
    /// When it started, on the call's clock: unknown for a round's first attempt whose start
    /// is read lazily (at its first pending poll) until then.
    started: Option<Instant>,
    permit: Permit,
    /// Its slot of the concurrency limit, held while it runs.
    _slot: Option<S>,
}

/// A hedge in flight.
struct Running<Fut, S> {
    fut: Pin<Box<Fut>>,
    meta: Meta<S>,
}

/// A finished attempt that failed in a way some rule retries, kept until the round ends.
struct Failed<R, E> {
    result: Result<R, E>,
    timed_out: bool,
    deadline: Option<Instant>,
    permit: Permit,
}

/// Whether a failure that a rule matches asks for a delay of its own (a value rule's hint, or
/// for an error the policy's hint, `error_hint`, asked only once a rule matches) that the loop
/// would wait: more than none (a `Retry-After: 0` asks for nothing a hedge would disturb),
/// while the rule has a retry left (`retries`: the call's retries so far), and within the
/// rule's `max_delay` and the call's deadline (`fits`, given the delay and the rule's
/// `max_delay`), as the loop's decision requires. Such a failure decides the round's backoff.
struct AsksForDelay<H, F> {
    retries: u32,
    error_hint: H,
    fits: F,
}

impl<H, F> crate::policy::rules::PlanVisitor for AsksForDelay<H, F>
where
    H: FnOnce() -> Option<Duration>,
    F: FnOnce(Duration, Option<Duration>) -> bool,
{
    /// `None`: the rule never retries (`retries = 0`), so its failure is not retryable and
    /// wins the round, as an error no rule matches does.
    type Out = Option<bool>;
    #[inline]
    fn visit<Pl: crate::policy::settings::Plan>(
        self,
        plan: &Pl,
        _: crate::RuleId,
        hint: Option<Duration>,
    ) -> Option<bool> {
        let limit = plan.retry_limit();
        if !limit.allows(0) {
            return None;
        }
        if !limit.allows(self.retries) {
            return Some(false);
        }
        Some(match hint.or_else(self.error_hint) {
            Some(delay) if !delay.is_zero() => (self.fits)(delay, plan.budget()),
            _ => false,
        })
    }
}

/// The hedged loop of an async call: what [`Policy::call_async`](crate::Policy::call_async) runs for a hedged policy, and
/// `#[robust(hedge(..))]`. The fallback is not applied here: the caller applies it.
///
/// An attempt that answers on its first poll costs one clock reading (its start, for its
/// context) and no timer: the clock is read again, and the round's timer made, only when an
/// attempt is pending.
pub fn hedged_loop<'p, P, R, E, G, Fut>(
    policy: &'p P,
    make: G,
) -> impl Future<Output = Result<R, E>>
where
    P: AsyncRetryPolicy<R, E>,
    G: FnMut(crate::Attempt<'p>) -> Fut,
    Fut: Future,
    Fut::Output: IsResult<Ok = R, Err = E>,
{
    rounds(policy, make, false, false, None, None)
}

/// [`hedged_loop`] for attempts that do not read their context (`#[robust(hedge(..))]` on a
/// fn without `attempt = ..`, the hedged tower layer). A round's first attempt then starts its
/// clock at its first pending poll, as its timers already do: one that answers on its first
/// poll reads no clock for its round (a breaker or a throttle still reads its own), and
/// counts as taking no time for a latency percentile, unless the call needs its start anyway
/// (a deadline, a `max_delay`, `on_retry`, tracing). Time spent inside an attempt's first
/// poll is then outside its latency and its timeout; a round whose first attempt fails on its
/// first poll starts when its first hedge is sent.
pub fn hedged_loop_blind<P, R, E, G, Fut>(
    policy: &P,
    mut make: G,
) -> impl Future<Output = Result<R, E>>
where
    P: AsyncRetryPolicy<R, E>,
    G: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: IsResult<Ok = R, Err = E>,
{
    // (Not an `async fn`: the rounds' future is returned as it is, one state machine less.)
    rounds(policy, move |_| make(), true, false, None, None)
}

/// The rounds of a hedged call; `blind`: `make` ignores the attempt's context; `credited`:
/// the call's budget deposit was made already (the hedged tower layer credits it in `call`,
/// as the plain layer does, whether or not the future is polled); `gate`: the hedged tower
/// layer's [`StartGate`], whose attempts start when their service is ready (a retry's round
/// not made by its `max_delay` ends the call with the failure the retry follows); `stop`: set
/// by an attempt of the hedged tower layer that met its service's readiness error, which ends
/// the call (see [`Round::stopped`]).
pub(crate) async fn rounds<'p, P, R, E, G, Fut>(
    policy: &'p P,
    mut make: G,
    blind: bool,
    credited: bool,
    gate: Option<&StartGate>,
    stop: Option<&std::sync::atomic::AtomicBool>,
) -> Result<R, E>
where
    P: AsyncRetryPolicy<R, E>,
    G: FnMut(crate::Attempt<'p>) -> Fut,
    Fut: Future,
    Fut::Output: IsResult<Ok = R, Err = E>,
{
    // A round's start is read lazily when nothing else needs it.
    let lazy = blind && !policy.needs_call_start();
    // The first attempt reads the call's first instant.
    let mut call = if credited {
        super::start_credited(policy, Timed::default())
    } else {
        start(policy, Timed::default())
    };
    // Each round's first attempt, made in place.
    let mut primary = std::pin::pin!(None::<Fut>);
    // A lazy call whose first attempt nothing admits nor queues makes and polls that attempt
    // before anything else: a success no value rule can match is returned at once (it took
    // no time); any other answer, or a pending attempt, starts the first round below.
    let mut made_first = None;
    if lazy
        && !<P::Breaker as Breaker>::ACTIVE
        && !<P::Throttle as Throttle>::ACTIVE
        && !<P::Limit as Limit>::ACTIVE
    {
        let unread = call.unread_attempt();
        primary.set(Some(make(unread)));
        let first = match first_poll(primary.as_mut()).await {
            Poll::Ready(result) if !P::VALUES && result.is_ok() => {
                primary.set(None);
                won_at_once(&mut call);
                return result;
            }
            first => first,
        };
        // (Without a limit there is always a slot.)
        made_first = Some((policy.limit().try_slot(), first, unread.limit()));
    }
    let mut timer = std::pin::pin!(None::<tokio::time::Sleep>);
    let mut hedges: Vec<Running<Fut, <P::Limit as Limit>::Slot>> = Vec::new();
    let mut kept: Option<Box<KeptRound<R, E>>> = None;
    // Whether the last round was not made (it sent nothing by its latest start).
    let mut missed = false;
    loop {
        let (slot, context, first, limit) = match made_first.take() {
            Some((slot, first, limit)) => (slot, None, first, limit),
            None => {
                if let Some(rejected) = call.admit() {
                    return rejected;
                }
                // A free slot is taken without waiting (always, without a limit).
                // (A retry whose `max_delay` is spent while it waits for a slot ends the call
                // with the failure it follows, when one is kept.)
                let slot = match policy.limit().try_slot() {
                    Some(slot) => Some(slot),
                    None => {
                        let mut failure = kept.as_mut().map(|k| &mut k.failure);
                        let take = || failure.as_mut().and_then(|f| f.take());
                        match super::slot_for_keeping(&mut call, take).await {
                            Ok(slot) => slot,
                            Err(r) => return r,
                        }
                    }
                };
                // Under a gate, the round's latest start, for its attempts and itself. (A round
                // without one finds none: every round ends made, which clears it, or ends the
                // call.)
                if let Some(gate) = gate
                    && let Some(k) = kept.as_mut()
                {
                    let by = crate::timeout::deadline_in(call.left_until(k.by));
                    k.by_tokio = Some(by);
                    gate.set_round(Some(RoundBound {
                        by,
                        by_call: k.by,
                        sent_before: gate.sent_so_far(),
                    }));
                }
                // A lazy round's first attempt has no start yet, hence no deadline either (the
                // call has none: it would need its start); its own is set when its start is
                // read. Its `make` reads at most its limit: it gets a context not read from the
                // clock.
                let context = (!lazy).then(|| call.attempt());
                // A round whose first attempt has no time left is not started.
                if let Some(e) = context.and_then(|a| call.out_of_time(a.limit())) {
                    return Err(e);
                }
                let made = context.unwrap_or_else(|| call.unread_attempt());
                primary.set(Some(make(made)));
                // A lazy round's first attempt is polled once before the round is set up (as
                // above); any answer but a success is handed to the round, and so is a
                // pending attempt, which the round does not poll again in the same wake.
                let first = if lazy {
                    first_poll(primary.as_mut()).await
                } else {
                    Poll::Pending
                };
                (slot, context, first, made.limit())
            }
        };
        let meta = Meta {
            // (The limit its `make` was given: a hedged tower attempt judges its own time by
            // it, and an adaptive timeout's may change in between.)
            limit,
            cut: None,
            deadline: context.and_then(|a| a.deadline()),
            started: context.map(|a| a.started),
            // (Given back by the round if it is dropped unsettled.)
            permit: call.hand_permit(),
            _slot: slot,
        };
        let started = meta.started;
        let (result, timed_out) = match first {
            Poll::Ready(result) if !P::VALUES && result.is_ok() => {
                primary.set(None);
                let (deadline, permit) = (meta.deadline, meta.permit);
                // The attempt's slot is freed.
                drop(meta);
                call.adopt(permit, deadline);
                won_at_once(&mut call);
                return result;
            }
            first => {
                let polled = first.is_pending() && lazy;
                let answered = match first {
                    Poll::Ready(result) => {
                        primary.set(None);
                        Some(result)
                    }
                    Poll::Pending => None,
                };
                std::future::poll_fn({
                    let mut round = Round {
                        call: &mut call,
                        make: &mut make,
                        primary: primary.as_mut(),
                        primary_meta: Some(meta),
                        hedges: &mut hedges,
                        timer: timer.as_mut(),
                        started,
                        answered,
                        polled,
                        clocked: false,
                        next: None,
                        sent: 0,
                        last: None,
                        asked: false,
                        held: None,
                        gate,
                        stop,
                        start: kept.take(),
                        missed: &mut missed,
                    };
                    move |cx| round.poll(cx)
                })
                .await
            }
        };
        hedges.clear();
        if missed {
            // The round was not made: the failure its retry follows is the call's.
            #[cfg(feature = "tracing")]
            call.trace_missed_start(&result);
            return result;
        }
        let delay = match gate {
            // The failure a retry whose rule has a `max_delay` follows is kept for its round.
            Some(_) => match call.settle_keeping_start(result, timed_out) {
                (Settled::Return(r), _) => return r,
                (Settled::Retry(delay, failure), by) => {
                    kept = by.map(|by| {
                        Box::new(KeptRound {
                            by,
                            by_tokio: None,
                            failure: Some(failure),
                        })
                    });
                    delay
                }
            },
            None => match call.settle(result, timed_out) {
                Step::Return(r) => return r,
                Step::Retry(delay) => delay,
            },
        };
        policy.env().sleep_async(delay).await;
    }
}

/// The answer of an attempt on one poll, or `Pending`.
fn first_poll<F, R, E>(mut attempt: Pin<&mut Option<F>>) -> impl Future<Output = Poll<Result<R, E>>>
where
    F: Future<Output: IsResult<Ok = R, Err = E>>,
{
    std::future::poll_fn(move |cx| {
        Poll::Ready(match attempt.as_mut().as_pin_mut() {
            Some(fut) => fut.poll(cx).map(IsResult::into_result),
            None => Poll::Pending,
        })
    })
}

/// A round's first attempt succeeded on its first poll, and no value rule can match: it took
/// no time, for a policy that learns from latencies, and it is settled as `settle` settles
/// such a success.
fn won_at_once<P: AsyncRetryPolicy<R, E>, R, E>(call: &mut Call<'_, P, Timed>) {
    let policy = call.policy;
    if measured(policy) {
        policy.timeout_setting().record(Duration::ZERO);
    }
    call.success::<R, E>();
}

/// Whether the policy learns from latencies (an adaptive timeout or `after = pNN`).
fn measured<P: PolicyCore>(policy: &P) -> bool {
    <P::Timeout as AttemptTimeout>::MEASURED && policy.timeout_setting().histogram().is_some()
}

impl<P: PolicyCore> Call<'_, P, Timed> {
    /// The call goes on with the permit and deadline of the attempt that decided a round, and
    /// holds the permit until it records it (dropped before that, it gives it back).
    fn adopt(&mut self, permit: Permit, deadline: Option<Instant>) {
        self.permit = permit;
        self.pending.set(<P::Breaker as Breaker>::ACTIVE);
        crate::call::Times::set_deadline(&mut self.times, deadline);
    }
}

/// [`hedged_loop`] with the fallback applied: what `call_async` runs for a hedged policy.
pub(crate) async fn run_hedged<'p, P, R, E, G, Fut>(policy: &'p P, make: G) -> Result<R, E>
where
    P: AsyncRetryPolicy<R, E>,
    G: FnMut(crate::Attempt<'p>) -> Fut,
    Fut: Future<Output = Result<R, E>>,
{
    let r = hedged_loop(policy, make).await;
    finish(policy, r)
}

/// One round: the first attempt (`primary`, in place) and its hedges.
struct Round<'c, 'p, P: PolicyCore, G, Fut, R, E> {
    call: &'c mut Call<'p, P, Timed>,
    make: &'c mut G,
    primary: Pin<&'c mut Option<Fut>>,
    primary_meta: Option<Meta<<P::Limit as Limit>::Slot>>,
    hedges: &'c mut Vec<Running<Fut, <P::Limit as Limit>::Slot>>,
    /// The call's timer, made the first time a round waits.
    timer: Pin<&'c mut Option<tokio::time::Sleep>>,
    /// When the round's first attempt started (its winner's latency is measured from here);
    /// unknown until its first pending poll when read lazily (an attempt that answers on its
    /// first poll then takes no time).
    started: Option<Instant>,
    /// The first attempt's answer on the poll made before the round was set up, not handled
    /// yet.
    answered: Option<Result<R, E>>,
    /// The first attempt was polled, and was pending, in this wake before the round was set
    /// up: the round's first poll does not poll it again.
    polled: bool,
    /// Whether the first attempt's cut and the first hedge are scheduled (at its first
    /// pending poll).
    clocked: bool,
    /// When the next hedge is due (tokio's clock), once known.
    next: Option<tokio::time::Instant>,
    /// Hedges sent in this round.
    sent: u32,
    /// The latest retryable failure while other attempts still run (the latest that asked
    /// for its own delay, once one has).
    last: Option<Failed<R, E>>,
    /// A failure of this round asked for its own delay: no more hedges are sent (the server
    /// asked to be left alone for that long), and that failure decides the round's backoff.
    asked: bool,
    /// The permit of an attempt the round is handling outside its attempts: one that ended,
    /// while the rules (code of the user's) classify its outcome, or a hedge whose future is
    /// being made. Given back if the round is dropped then (a panic).
    held: Option<Permit>,
    /// The gate of a hedged tower layer's rounds.
    gate: Option<&'c StartGate>,
    /// Set when an attempt of the hedged tower layer met its service's readiness error.
    stop: Option<&'c std::sync::atomic::AtomicBool>,
    /// Under a gate, a retry's round's latest start (its rule's `max_delay`) and the failure
    /// the retry follows, until the round is made.
    start: Option<Box<KeptRound<R, E>>>,
    /// Set when the round ends because it sent nothing by its latest start: the failure it
    /// returns is then the one its retry follows, and the call's.
    missed: &'c mut bool,
}

/// A round ends (decided, or its call dropped) with attempts still running, which are then
/// cancelled: their breaker permits go back (a half-open breaker's probes would otherwise stay
/// taken, with no outcome ever recorded, and every call be rejected until the probes go
/// stale). A failure the round kept while they ran happened: the breaker and the throttle
/// record it, as the round would have, had it gone on.
impl<P: PolicyCore, G, Fut, R, E> Drop for Round<'_, '_, P, G, Fut, R, E> {
    fn drop(&mut self) {
        let policy = self.call.policy;
        if <P::Breaker as Breaker>::ACTIVE {
            let breaker = policy.breaker();
            let running = self.primary_meta.iter().map(|m| m.permit);
            let hedges = self.hedges.iter().map(|h| h.meta.permit);
            for permit in running.chain(hedges).chain(self.held) {
                breaker.release(permit);
            }
        }
        let mut now = LazyNow {
            clock: policy.env(),
            blocking: false,
            at: None,
        };
        self.drop_last(&mut now);
    }
}

impl<P: PolicyCore, G, Fut, R, E> Round<'_, '_, P, G, Fut, R, E> {
    /// Records the kept failure (superseded by a later outcome, or left when the round is
    /// dropped) with the breaker and throttle.
    fn drop_last(&mut self, now: &mut LazyNow<'_>) {
        if let Some(failed) = self.last.take() {
            let policy = self.call.policy;
            if <P::Breaker as Breaker>::ACTIVE {
                policy.breaker().record(now.get(), failed.permit, false);
            }
            if <P::Throttle as Throttle>::ACTIVE {
                policy.throttle().record(Stamp::of(now.get()), false);
            }
        }
    }
}

impl<'p, P, G, Fut, R, E> Round<'_, 'p, P, G, Fut, R, E>
where
    P: RetryPolicy<R, E>,
    P::Timeout: AsyncTimeout<E>,
    G: FnMut(crate::Attempt<'p>) -> Fut,
    Fut: Future,
    Fut::Output: IsResult<Ok = R, Err = E>,
{
    /// Whether an attempt met its service's readiness error (the hedged tower layer), which
    /// ends the call: the round then stops where it is, pending, and acts on no clock in this
    /// poll (no cut, no missed start, no hedge made; a timer due in the same wake would
    /// otherwise settle the round and start the next one, whose first attempt a ready
    /// service would be sent), and the layer returns the error when the rounds' poll returns.
    /// (The hedges polled after the one that met the error, in the same pass, are polled: an
    /// answer of theirs is handled as usual, and a success ends the call with it.)
    fn stopped(&self) -> bool {
        self.stop
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn live(&self) -> usize {
        usize::from(self.primary.is_some()) + self.hedges.len()
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<(Result<R, E>, bool)> {
        let policy = self.call.policy;
        let timeout = policy.timeout_setting();
        if let Some(result) = self.answered.take()
            && let Some(done) = self.primary_ended(result, false)
        {
            return Poll::Ready(done);
        }
        loop {
            if self.stopped() {
                return Poll::Pending;
            }
            // The attempts (the first one unless it was just polled, before the round).
            if !std::mem::take(&mut self.polled)
                && let Some(fut) = self.primary.as_mut().as_pin_mut()
                && let Poll::Ready(out) = fut.poll(cx)
            {
                self.primary.set(None);
                if let Some(done) = self.primary_ended(out.into_result(), false) {
                    return Poll::Ready(done);
                }
                continue;
            }
            if let Some(i) =
                (0..self.hedges.len()).find_map(|i| match self.hedges[i].fut.as_mut().poll(cx) {
                    Poll::Ready(out) => Some((i, out)),
                    Poll::Pending => None,
                })
            {
                let (i, out) = i;
                // The finished future goes first, and the hedge's slot in `hedge_ended`: the
                // next hedge a failure starts may need it.
                let Running { fut, meta } = self.hedges.swap_remove(i);
                drop(fut);
                if let Some(done) = self.hedge_ended(meta, out.into_result(), false) {
                    return Poll::Ready(done);
                }
                continue;
            }
            if self.stopped() {
                return Poll::Pending;
            }
            // Every attempt is pending: the clock decides the rest.
            let now = tokio::time::Instant::now();
            if !self.clocked {
                self.clocked = true;
                if let Some(m) = self.primary_meta.as_mut() {
                    m.cut = m.limit.map(|l| after(now, l));
                    if m.started.is_none() {
                        // The lazily read start, and the attempt's own deadline from it.
                        let started = policy.env().now();
                        m.started = Some(started);
                        m.deadline = m.limit.and_then(|l| started.checked_add(l));
                        self.started = Some(started);
                    }
                }
                if let Some(d) = timeout.hedge().and_then(|h| h.delay()) {
                    self.next = Some(after(now, d));
                }
            }
            // A retry's round that has sent nothing by its latest start is not made (its
            // attempts, still waiting for their service, are dropped with it); once it has
            // sent one, it is.
            if let Some(start) = self.start.as_ref() {
                // (A cut due before the latest start, seen late, goes first: it makes the
                // round.)
                let by = start.by_tokio;
                let passed = || by.is_some_and(|by| by <= now) || policy.env().now() >= start.by;
                let cut_first = || {
                    self.primary_meta
                        .iter()
                        .chain(self.hedges.iter().map(|h| &h.meta))
                        .filter_map(|m| m.cut)
                        .any(|c| c <= now && by.is_some_and(|by| c < by))
                };
                if self.gate.is_none_or(StartGate::round_sent) {
                    self.made();
                } else if passed()
                    && !cut_first()
                    && let Some(failure) = self.start.as_mut().and_then(|s| s.failure.take())
                {
                    *self.missed = true;
                    return Poll::Ready((failure, false));
                }
            }
            // An attempt whose time is up fails with `E::from(Elapsed)` and is dropped.
            if self.primary.is_some()
                && self
                    .primary_meta
                    .as_ref()
                    .and_then(|m| m.cut)
                    .is_some_and(|c| c <= now)
                && let Some(e) = timeout.elapsed(Elapsed::new())
            {
                self.primary.set(None);
                if let Some(done) = self.primary_ended(Err(e), true) {
                    return Poll::Ready(done);
                }
                continue;
            }
            if let Some(i) = self
                .hedges
                .iter()
                .position(|h| h.meta.cut.is_some_and(|c| c <= now))
                && let Some(e) = timeout.elapsed(Elapsed::new())
            {
                // Cut: its future is dropped (cancelled) before a next hedge is made.
                let Running { fut, meta } = self.hedges.swap_remove(i);
                drop(fut);
                if let Some(done) = self.hedge_ended(meta, Err(e), true) {
                    return Poll::Ready(done);
                }
                continue;
            }
            // A hedge that is due.
            if let Some(next) = self.next
                && next <= now
            {
                self.next = None;
                if self.send_hedge() {
                    continue;
                }
            }
            // Wait for an attempt, the next hedge or the first cut still ahead.
            let cuts = self
                .primary_meta
                .iter()
                .chain(self.hedges.iter().map(|h| &h.meta))
                .filter_map(|m| m.cut)
                .filter(|c| *c > now);
            let start = self
                .start
                .as_ref()
                .and_then(|s| s.by_tokio)
                .filter(|by| *by > now);
            let Some(at) = cuts.chain(self.next).chain(start).min() else {
                return Poll::Pending;
            };
            match self.timer.as_mut().as_pin_mut() {
                Some(t) if t.deadline() == at => {}
                Some(t) => t.reset(at),
                None => self.timer.set(Some(tokio::time::sleep_until(at))),
            }
            let fired = self
                .timer
                .as_mut()
                .as_pin_mut()
                .is_some_and(|t| t.poll(cx).is_ready());
            if !fired {
                return Poll::Pending;
            }
        }
    }

    /// The round is made (under a gate): it no longer ends at its latest start, and its
    /// attempts are sent whenever their service is ready.
    #[inline]
    fn made(&mut self) {
        if self.start.take().is_some()
            && let Some(gate) = self.gate
        {
            gate.set_round(None);
        }
    }

    /// The first attempt has ended with `result`.
    #[inline(always)]
    fn primary_ended(
        &mut self,
        result: Result<R, E>,
        timed_out: bool,
    ) -> Option<(Result<R, E>, bool)> {
        // An attempt that ended (answered, or cut while it waited for its service) makes its
        // round.
        self.made();
        let (deadline, started, permit) = self
            .primary_meta
            .take()
            .map_or((None, self.started, Permit::NONE), |m| {
                (m.deadline, m.started, m.permit)
            });
        self.finished(result, timed_out, deadline, started, permit)
    }

    /// A hedge has ended with `result` (its slot is freed here).
    fn hedge_ended(
        &mut self,
        meta: Meta<<P::Limit as Limit>::Slot>,
        result: Result<R, E>,
        timed_out: bool,
    ) -> Option<(Result<R, E>, bool)> {
        self.made();
        let Meta {
            deadline,
            started,
            permit,
            _slot: slot,
            ..
        } = meta;
        drop(slot);
        self.finished(result, timed_out, deadline, started, permit)
    }

    /// Handles an attempt's outcome: `Some` when the round is over.
    #[inline(always)]
    fn finished(
        &mut self,
        result: Result<R, E>,
        timed_out: bool,
        deadline: Option<Instant>,
        started: Option<Instant>,
        permit: Permit,
    ) -> Option<(Result<R, E>, bool)> {
        let policy = self.call.policy;
        let setting = policy.timeout_setting();
        // The clock is read only when something needs it.
        let measured = measured(policy);
        let mut now = LazyNow {
            clock: policy.env(),
            blocking: false,
            at: None,
        };
        // An error after the attempt's deadline counts as a timeout, as in `settle`.
        let timed_out = timed_out || (result.is_err() && deadline.is_some_and(|d| now.get() >= d));
        self.held = Some(permit);
        // Whether a rule retries it, and whether it asks for its own delay.
        let retries = self.call.retries;
        // Whether a retry after `delay` could be made, as the loop decides it: it must start
        // before the rule's `max_delay` is spent and end its backoff, even as late as the
        // timer may fire ([`Clock::async_resolution`](crate::time::Clock::async_resolution)),
        // before the deadline.
        let call = &*self.call;
        let late = policy.env().async_resolution();
        let fits = |delay: Duration, max_delay: Option<Duration>| {
            let now = now.get();
            let first = super::Times::first(&call.times).unwrap_or(now);
            let elapsed = now.saturating_duration_since(first);
            max_delay.is_none_or(|m| elapsed.saturating_add(delay) < m)
                && call
                    .call_deadline(first)
                    .is_none_or(|end| super::backoff_ends_in_time(now, delay, late, end))
        };
        let (retryable, matched_value) = match &result {
            Ok(v) => {
                if P::VALUES {
                    let asks = AsksForDelay {
                        retries,
                        error_hint: || None,
                        fits,
                    };
                    let selected = policy.select_value(v, asks);
                    (selected.flatten(), selected.is_some())
                } else {
                    (None, false)
                }
            }
            Err(e) => {
                let asks = AsksForDelay {
                    retries,
                    error_hint: || policy.hint(e),
                    fits,
                };
                (
                    policy.select(&Failure::new(e, timed_out), asks).flatten(),
                    false,
                )
            }
        };
        self.held = None;
        let Some(asks) = retryable else {
            // The winner: the round's last failure, if any, is recorded as such. A value a
            // rule matched (one that never retries) is no success latency.
            self.drop_last(&mut now);
            if result.is_ok() && !matched_value && measured {
                // A round whose start was never read answered on its first poll: no time.
                let latency = self
                    .started
                    .map_or(Duration::ZERO, |s| now.get().saturating_duration_since(s));
                setting.record(latency);
            } else {
                self.record_cut(timed_out, started, deadline, &mut now);
            }
            return Some(self.decide(result, timed_out, deadline, permit));
        };
        self.record_cut(timed_out, started, deadline, &mut now);
        // A retryable failure starts the next hedge at once, if one is left, whatever else
        // still runs; one not sent leaves the next due time as it was. One that asks for its
        // own delay stops the round's hedges, and is kept over later failures that do not ask
        // (which are recorded as they come), so that the round's backoff is the one asked for.
        let failed = Failed {
            result,
            timed_out,
            deadline,
            permit,
        };
        if self.asked && !asks {
            let kept = self.last.replace(failed);
            self.drop_last(&mut now);
            self.last = kept;
        } else {
            self.drop_last(&mut now);
            self.last = Some(failed);
        }
        self.asked |= asks;
        let next = self.next;
        if !self.send_hedge() {
            self.next = next;
            if self.live() == 0 {
                let last = self.last.take()?;
                // A kept failure that ended before its deadline is no timeout, however late the
                // round ends: its deadline is not the loop's to judge it by again.
                let deadline = last.deadline.filter(|_| last.timed_out);
                return Some(self.decide(last.result, last.timed_out, deadline, last.permit));
            }
        }
        None
    }

    /// Records an attempt cut by its timeout as its time so far (see `Call::measure`), for a
    /// setting that learns from latencies; not one the call's deadline (its `deadline`) cut.
    fn record_cut(
        &self,
        timed_out: bool,
        started: Option<Instant>,
        deadline: Option<Instant>,
        now: &mut LazyNow<'_>,
    ) {
        if timed_out
            && measured(self.call.policy)
            && let Some(started) = started
            && !self.call.cut_by_the_call(deadline, now.get())
        {
            let latency = now.get().saturating_duration_since(started);
            self.call.policy.timeout_setting().record(latency);
        }
    }

    /// The round's outcome, settled by the loop with this attempt's permit and deadline.
    fn decide(
        &mut self,
        result: Result<R, E>,
        timed_out: bool,
        deadline: Option<Instant>,
        permit: Permit,
    ) -> (Result<R, E>, bool) {
        self.call.adopt(permit, deadline);
        (result, timed_out)
    }

    /// Starts a hedge if one is left and the guards allow it; schedules the one after.
    fn send_hedge(&mut self) -> bool {
        if self.asked {
            return false;
        }
        let policy = self.call.policy;
        let Some(hedge) = policy.timeout_setting().hedge() else {
            return false;
        };
        // After a percentile not known yet, no hedge at all (not even after a failure).
        let Some(delay) = hedge.delay() else {
            return false;
        };
        if self.sent >= hedge.max() {
            return false;
        }
        let now = policy.env().now();
        // No hedge once the call's deadline has passed: it would have no time at all.
        let attempt = self.call.hedge_attempt(now);
        let limit = attempt.limit();
        if limit.is_some_and(|l| l.is_zero()) {
            return false;
        }
        // A round whose start was never read (its first attempt failed on its first poll)
        // starts now, for the latency of the winner.
        self.started.get_or_insert(now);
        let allowed = (|| {
            if <P::Throttle as Throttle>::ACTIVE
                && policy.throttle().reject_probability(Stamp::of(now)) > 0.0
            {
                return None;
            }
            let slot = policy.limit().try_slot()?;
            let permit = if <P::Breaker as Breaker>::ACTIVE {
                policy.breaker().acquire(now)?
            } else {
                Permit::NONE
            };
            if !policy.budget().try_withdraw() {
                // Not sent: the breaker's permit (a half-open breaker's probe) goes back.
                if <P::Breaker as Breaker>::ACTIVE {
                    policy.breaker().release(permit);
                }
                return None;
            }
            Some((slot, permit))
        })();
        // The next hedge is due `after` this one (or this one's due time, had it been sent).
        let tokio_now = tokio::time::Instant::now();
        self.next = Some(after(tokio_now, delay));
        let Some((slot, permit)) = allowed else {
            return false;
        };
        self.sent += 1;
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "retry_runtime",
            function = policy.name(),
            retries = self.call.retries,
            hedge = self.sent,
            "hedging: another attempt started"
        );
        let mut meta = Meta {
            limit,
            cut: None,
            deadline: attempt.deadline(),
            started: Some(attempt.started),
            permit,
            _slot: Some(slot),
        };
        self.held = Some(permit);
        let fut = Box::pin((self.make)(attempt));
        self.held = None;
        // Its time counts from after it is made, on tokio's clock: an attempt that judges
        // its own time (the hedged tower layer's, before it sends a request) may read the
        // clock when it is made and cannot count from later than the round does.
        meta.cut = limit.map(|l| after(tokio::time::Instant::now(), l));
        self.hedges.push(Running { fut, meta });
        true
    }
}

// Without the `tracing` feature (whose events report the time since the first attempt, so
// that every call reads its start): `.ci/run` runs the library's tests without it.
#[cfg(all(test, not(feature = "tracing")))]
mod tests {
    use std::io;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::{hedged_loop, hedged_loop_blind};
    use crate::hedge::Hedge;
    use crate::latency::{Latencies, Quantile};
    use crate::timeout::Adaptive;
    use crate::{NoBackoff, Policy};

    /// Tokio's clock plus `ahead` milliseconds, counting how often the call reads it. A test
    /// moves it `ahead` to stand for time spent inside a poll.
    #[derive(Clone, Default)]
    struct CountingClock {
        reads: Arc<AtomicU32>,
        ahead: Arc<AtomicU32>,
    }

    impl crate::time::Clock for CountingClock {
        fn now(&self) -> std::time::Instant {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let ahead = u64::from(self.ahead.load(Ordering::SeqCst));
            tokio::time::Instant::now().into_std() + ms(ahead)
        }
    }

    impl crate::time::Sleep for CountingClock {
        fn sleep(&self, d: Duration) {
            std::thread::sleep(d)
        }
    }

    impl crate::time::AsyncSleep for CountingClock {
        fn sleep_async(&self, d: Duration) -> impl Future<Output = ()> + Send {
            tokio::time::sleep(d)
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn attempts_without_a_context_start_their_clock_when_they_first_wait() {
        static L: Latencies = Latencies::new();
        let env = CountingClock::default();
        let reads = || env.reads.load(Ordering::SeqCst);
        let policy = Policy::builder()
            .retries(1)
            .backoff(NoBackoff)
            .adaptive_timeout(Adaptive::new(&L, 99.0, 2.0, ms(10), ms(2000)).unwrap())
            .hedge(Hedge::percentile(&L, 95.0, 1).unwrap())
            .env(env.clone())
            .build()
            .unwrap();

        // An answer on the first poll: no clock reading, and a latency of zero.
        let r: io::Result<u32> = hedged_loop_blind(&policy, || async { Ok(7) }).await;
        assert_eq!((r.unwrap(), reads(), L.samples()), (7, 0, 1));
        // With a context, the attempt's start is read for it.
        let r: io::Result<u32> = hedged_loop(&policy, |a| async move { Ok(a.retries()) }).await;
        assert_eq!((r.unwrap(), L.samples()), (0, 2));
        assert_eq!(reads(), 2, "the context's start, and the end to measure it");
        for _ in 0..62 {
            let r: io::Result<u32> = hedged_loop_blind(&policy, || async { Ok(1) }).await;
            r.unwrap();
        }
        assert_eq!(reads(), 2);
        assert_eq!(L.samples(), 64);
        let p50 = Quantile::new(50.0).unwrap();
        assert!(
            L.percentile(p50).unwrap() < ms(1),
            "answers at once take no time"
        );

        // An attempt that waits reads the clock at its first pending poll, and its latency
        // counts from there: its first poll takes 3 ms (on the call's clock) before it waits
        // 5 ms, and 5 ms are recorded (8 had the start been read before the poll).
        static L2: Latencies = Latencies::new();
        let policy = Policy::builder()
            .retries(0)
            .adaptive_timeout(Adaptive::new(&L2, 50.0, 2.0, ms(10), ms(2000)).unwrap())
            .hedge(Hedge::after(ms(100), 1).unwrap())
            .env(env.clone())
            .build()
            .unwrap();
        // (The percentile in use is recomputed every 64 samples.)
        for i in 0..64 {
            let before = reads();
            let t0 = tokio::time::Instant::now();
            let r: io::Result<u32> = hedged_loop_blind(&policy, || async {
                env.ahead.fetch_add(3, Ordering::SeqCst);
                tokio::time::sleep(ms(5)).await;
                Ok(2)
            })
            .await;
            assert_eq!((r.unwrap(), t0.elapsed()), (2, ms(5)));
            assert_eq!(reads() - before, 2, "call {i}: its start and its end");
        }
        let median = L2.percentile(Quantile::new(50.0).unwrap()).unwrap();
        assert!(median >= ms(5) && median < ms(6), "{median:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lazy_start_still_times_out_and_hedges_on_time() {
        let env = CountingClock::default();
        // (A rule that retries, at once: a timeout its rule never retries would win its
        // round, and drop the hedge before its own timeout.)
        let policy = Policy::builder()
            .retries(1)
            .backoff(NoBackoff)
            .timeout(ms(100))
            .hedge(Hedge::after(ms(30), 1).unwrap())
            .env(env.clone())
            .build()
            .unwrap();
        // This policy's rounds start lazily: an answer at once reads no clock.
        let r: io::Result<u32> = hedged_loop_blind(&policy, || async { Ok(0) }).await;
        assert_eq!((r.unwrap(), env.reads.load(Ordering::SeqCst)), (0, 0));
        let n = AtomicU32::new(0);
        let t0 = tokio::time::Instant::now();
        // The first attempt hangs: the hedge goes at 30 ms and answers 10 ms later.
        let r: io::Result<u32> = hedged_loop_blind(&policy, || async {
            let i = n.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(ms(if i == 0 { 10_000 } else { 10 })).await;
            Ok(i)
        })
        .await;
        assert_eq!((r.unwrap(), t0.elapsed()), (1, ms(40)));
        // Every attempt hangs: each is cut by its timeout, at 100 and 130 ms, then, in the
        // second round, at 230 and 260 ms.
        let t0 = tokio::time::Instant::now();
        let r: io::Result<u32> = hedged_loop_blind(&policy, || async {
            std::future::pending::<()>().await;
            Ok(0)
        })
        .await;
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert_eq!(t0.elapsed(), ms(260));
    }

    #[tokio::test(start_paused = true)]
    async fn a_first_attempt_is_polled_once_per_wake_and_answers_at_once_go_to_the_round() {
        /// Counts the polls of the future it wraps.
        struct Counted<'a, F>(&'a AtomicU32, std::pin::Pin<Box<F>>);
        impl<F: Future> Future for Counted<'_, F> {
            type Output = F::Output;
            fn poll(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<F::Output> {
                self.0.fetch_add(1, Ordering::SeqCst);
                self.1.as_mut().poll(cx)
            }
        }
        let policy = Policy::builder()
            .retries(1)
            .backoff(NoBackoff)
            .on_ok(crate::kind::OkIf(|v: &u32| *v == 503))
            .hedge(Hedge::after(ms(100), 1).unwrap())
            .env(CountingClock::default())
            .build()
            .unwrap();
        // Pending on its first poll (before the round is set up), then woken once, 10 ms
        // later: two polls, not three.
        let polls = AtomicU32::new(0);
        let t0 = tokio::time::Instant::now();
        let r: io::Result<u32> = hedged_loop_blind(&policy, || {
            Counted(
                &polls,
                Box::pin(async {
                    tokio::time::sleep(ms(10)).await;
                    Ok(4)
                }),
            )
        })
        .await;
        assert_eq!((r.unwrap(), t0.elapsed()), (4, ms(10)));
        assert_eq!(polls.load(Ordering::SeqCst), 2);
        // A value the `Ok(..)` kind matches, answered on the first poll, is a failed attempt:
        // the hedge goes at once and its answer wins.
        let n = AtomicU32::new(0);
        let r: io::Result<u32> = hedged_loop_blind(&policy, || async {
            match n.fetch_add(1, Ordering::SeqCst) {
                0 => Ok(503),
                _ => Ok(200),
            }
        })
        .await;
        assert_eq!((r.unwrap(), n.load(Ordering::SeqCst)), (200, 2));
        // Only matched values and errors, at once: the round fails, the retry runs another.
        let n = AtomicU32::new(0);
        let r: io::Result<u32> = hedged_loop_blind(&policy, || async {
            match n.fetch_add(1, Ordering::SeqCst) {
                0 => Err(io::ErrorKind::ConnectionReset.into()),
                1 | 2 => Ok(503),
                _ => Ok(201),
            }
        })
        .await;
        assert_eq!((r.unwrap(), n.load(Ordering::SeqCst)), (201, 4));
    }

    /// With a guard that admits each round (a breaker), the round's first attempt is still
    /// polled once before the round is set up: an answer at once reads only the breaker's
    /// clock, and a pending attempt is polled once per wake.
    #[tokio::test(start_paused = true)]
    async fn a_guarded_lazy_round_also_polls_its_first_attempt_once_per_wake() {
        static B: crate::CircuitBreaker =
            match crate::CircuitBreaker::new(10, 10, 0.5, Duration::from_secs(30), 1) {
                Ok(b) => b,
                Err(_) => panic!("invalid breaker"),
            };
        static L: Latencies = Latencies::new();
        let env = CountingClock::default();
        let policy = Policy::builder()
            .retries(0)
            .breaker(&B)
            .adaptive_timeout(Adaptive::new(&L, 50.0, 2.0, ms(10), ms(2000)).unwrap())
            .hedge(Hedge::after(ms(100), 1).unwrap())
            .env(env.clone())
            .build()
            .unwrap();
        let r: io::Result<u32> = hedged_loop_blind(&policy, || async { Ok(3) }).await;
        assert_eq!(r.unwrap(), 3);
        assert_eq!(L.samples(), 1, "a latency of zero");
        let reads = env.reads.load(Ordering::SeqCst);
        assert_eq!(reads, 2, "the breaker's admission and record, no more");
        // Pending on its first poll, woken once 10 ms later: two polls, not three.
        let polls = AtomicU32::new(0);
        let r: io::Result<u32> = hedged_loop_blind(&policy, || {
            let polls = &polls;
            let mut sleep = Box::pin(tokio::time::sleep(ms(10)));
            std::future::poll_fn(move |cx| {
                polls.fetch_add(1, Ordering::SeqCst);
                sleep.as_mut().poll(cx).map(|()| Ok(5))
            })
        })
        .await;
        assert_eq!((r.unwrap(), polls.load(Ordering::SeqCst)), (5, 2));
    }

    /// A lazy call admitted by its breaker but without a free slot waits for one in its first
    /// round without being admitted again: a half-open breaker's only probe is the call's.
    #[tokio::test(start_paused = true)]
    async fn a_lazy_call_waiting_for_a_slot_is_admitted_once() {
        static B: crate::CircuitBreaker =
            match crate::CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1) {
                Ok(b) => b,
                Err(_) => panic!("invalid breaker"),
            };
        // (Two slots: a hedge needs one beside its attempt's.)
        static LIMIT: crate::ConcurrencyLimit = match crate::ConcurrencyLimit::new(2, 4) {
            Ok(l) => l,
            Err(_) => panic!("invalid limit"),
        };
        let policy = Policy::builder()
            .retries(0)
            .breaker(&B)
            .limit(&LIMIT)
            .hedge(Hedge::after(ms(100), 1).unwrap())
            .env(CountingClock::default())
            .build()
            .unwrap();
        // Two failures open the breaker; 30 s later it lets one probe through.
        for _ in 0..2 {
            let r: io::Result<u32> = hedged_loop_blind(&policy, || async {
                Err(io::ErrorKind::ConnectionReset.into())
            })
            .await;
            assert!(r.is_err());
        }
        assert_eq!(B.state(), crate::BreakerState::Open);
        tokio::time::advance(Duration::from_secs(30)).await;
        // Both slots are held for 10 ms: the call, admitted (its probe taken), waits for one.
        let held = (
            LIMIT.try_acquire().expect("a free slot"),
            LIMIT.try_acquire().expect("a free slot"),
        );
        let t0 = tokio::time::Instant::now();
        let (r, ()) = tokio::join!(
            hedged_loop_blind(&policy, || async { Ok::<u32, io::Error>(9) }),
            async {
                tokio::time::sleep(ms(10)).await;
                drop(held);
            }
        );
        assert_eq!((r.unwrap(), t0.elapsed()), (9, ms(10)));
        assert_eq!(
            B.state(),
            crate::BreakerState::Closed,
            "the probe's success closes it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_whose_first_attempt_fails_at_once_counts_from_its_hedge() {
        // The first attempt of each call fails on its first poll (a refused connection), the
        // hedge sent at once answers 200 ms later: the latencies recorded are 200 ms. (The
        // refusal's rule retries: one that never does would win the round.)
        static L: Latencies = Latencies::new();
        let policy = Policy::builder()
            .retries(1)
            .adaptive_timeout(Adaptive::new(&L, 50.0, 2.0, ms(10), ms(2000)).unwrap())
            .hedge(Hedge::after(ms(100), 1).unwrap())
            .env(CountingClock::default())
            .build()
            .unwrap();
        for _ in 0..64 {
            let first = AtomicU32::new(0);
            let r: io::Result<u32> = hedged_loop_blind(&policy, || async {
                if first.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(io::ErrorKind::ConnectionRefused.into());
                }
                tokio::time::sleep(ms(200)).await;
                Ok(1)
            })
            .await;
            assert_eq!(r.unwrap(), 1);
        }
        let median = L.percentile(Quantile::new(50.0).unwrap()).unwrap();
        assert!(median >= ms(200) && median < ms(213), "{median:?}");
    }

    /// Many lazy rounds at once on a multi-threaded runtime, answering at once, after a wait,
    /// or after a first attempt that failed on its first poll: each returns its own answer,
    /// and every success is recorded once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn many_lazy_rounds_at_once() {
        static L: Latencies = Latencies::new();
        let policy: &'static _ = Box::leak(Box::new(
            Policy::builder()
                .retries(1)
                .backoff(NoBackoff)
                .hedge(Hedge::percentile(&L, 90.0, 2).unwrap())
                .env(CountingClock::default())
                .build()
                .unwrap(),
        ));
        let tasks: Vec<_> = (0..300u32)
            .map(|i| {
                tokio::spawn(async move {
                    let tries = AtomicU32::new(0);
                    hedged_loop_blind(policy, || async {
                        let n = tries.fetch_add(1, Ordering::SeqCst);
                        match i % 3 {
                            1 => tokio::task::yield_now().await,
                            2 if n == 0 => return Err(io::ErrorKind::ConnectionReset.into()),
                            _ => {}
                        }
                        Ok::<u32, io::Error>(i)
                    })
                    .await
                })
            })
            .collect();
        for (i, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.unwrap().unwrap(), i as u32);
        }
        assert_eq!(L.samples(), 300);
    }
}
