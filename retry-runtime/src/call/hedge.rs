//! The hedged async loop (SPEC section 15): rounds of concurrent attempts, the first success
//! winning. The rules are in [`crate::hedge`].

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::decide::{LazyNow, Matched};
use super::{Call, Step, Timed, finish, refused, start};
use crate::Elapsed;
use crate::checks::IsResult;
use crate::guard::{Breaker, Budget, Limit, Permit, Throttle};
use crate::kind::Failure;
use crate::policy::{PolicyCore, RetryPolicy};
use crate::time::{AsyncSleep, Clock};
use crate::timeout::{AsyncTimeout, AttemptTimeout, after};

/// What the loop knows of a running attempt besides its future.
struct Meta<S> {
    /// Its time (its timeout, or less when the call's deadline comes first).
    limit: Option<Duration>,
    /// When its timer cuts it, on tokio's clock: set when it is first seen pending.
    cut: Option<tokio::time::Instant>,
    /// Its deadline on the call's clock (an error after it counts as a timeout).
    deadline: Option<Instant>,
    /// When it started, on the call's clock.
    started: Instant,
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

/// The hedged loop of an async call: what [`Policy::call_async`](crate::Policy::call_async) runs for a hedged policy, and
/// `#[robust(hedge(..))]`. The fallback is not applied here: the caller applies it.
///
/// An attempt that answers on its first poll costs one clock reading (its start) and no
/// timer: the clock is read again, and the round's timer made, only when an attempt is
/// pending.
pub async fn hedged_loop<'p, P, R, E, G, Fut>(policy: &'p P, mut make: G) -> Result<R, E>
where
    P: RetryPolicy<R, E>,
    P::Env: AsyncSleep,
    P::Timeout: AsyncTimeout<E>,
    G: FnMut(crate::Attempt<'p>) -> Fut,
    Fut: Future,
    Fut::Output: IsResult<Ok = R, Err = E>,
{
    // The first attempt reads the call's first instant.
    let mut call = start(policy, Timed::default());
    let mut timer = std::pin::pin!(None::<tokio::time::Sleep>);
    let mut hedges: Vec<Running<Fut, <P::Limit as Limit>::Slot>> = Vec::new();
    loop {
        if let Some(rejected) = call.admit() {
            return rejected;
        }
        let slot = match policy.limit().wait().await {
            Ok(slot) => Some(slot),
            Err(_) => match refused(policy) {
                Some(r) => return r,
                None => None,
            },
        };
        let attempt = call.attempt();
        let meta = Meta {
            limit: attempt.limit(),
            cut: None,
            deadline: attempt.deadline(),
            started: attempt.started,
            permit: call.permit,
            _slot: slot,
        };
        let primary = std::pin::pin!(Some(make(attempt)));
        let (result, timed_out) = std::future::poll_fn({
            let mut round = Round {
                call: &mut call,
                make: &mut make,
                primary,
                primary_meta: Some(meta),
                hedges: &mut hedges,
                timer: timer.as_mut(),
                started: attempt.started,
                clocked: false,
                next: None,
                sent: 0,
                last: None,
            };
            move |cx| round.poll(cx)
        })
        .await;
        hedges.clear();
        match call.settle(result, timed_out) {
            Step::Return(r) => return r,
            Step::Retry(delay) => policy.env().sleep_async(delay).await,
        }
    }
}

/// [`hedged_loop`] with the fallback applied: what `call_async` runs for a hedged policy.
pub(crate) async fn run_hedged<'p, P, R, E, G, Fut>(policy: &'p P, make: G) -> Result<R, E>
where
    P: RetryPolicy<R, E>,
    P::Env: AsyncSleep,
    P::Timeout: AsyncTimeout<E>,
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
    /// When the round's first attempt started (its winner's latency is measured from here).
    started: Instant,
    /// Whether the first attempt's cut and the first hedge are scheduled (at its first
    /// pending poll).
    clocked: bool,
    /// When the next hedge is due (tokio's clock), once known.
    next: Option<tokio::time::Instant>,
    /// Hedges sent in this round.
    sent: u32,
    /// The latest retryable failure while other attempts still run.
    last: Option<Failed<R, E>>,
}

impl<'p, P, G, Fut, R, E> Round<'_, 'p, P, G, Fut, R, E>
where
    P: RetryPolicy<R, E>,
    P::Timeout: AsyncTimeout<E>,
    G: FnMut(crate::Attempt<'p>) -> Fut,
    Fut: Future,
    Fut::Output: IsResult<Ok = R, Err = E>,
{
    fn live(&self) -> usize {
        usize::from(self.primary.is_some()) + self.hedges.len()
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<(Result<R, E>, bool)> {
        let policy = self.call.policy;
        let timeout = policy.timeout_setting();
        loop {
            // The attempts.
            if let Some(fut) = self.primary.as_mut().as_pin_mut()
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
                let h = self.hedges.swap_remove(i);
                if let Some(done) = self.hedge_ended(h.meta, out.into_result(), false) {
                    return Poll::Ready(done);
                }
                continue;
            }
            // Every attempt is pending: the clock decides the rest.
            let now = tokio::time::Instant::now();
            if !self.clocked {
                self.clocked = true;
                if let Some(m) = self.primary_meta.as_mut() {
                    m.cut = m.limit.map(|l| after(now, l));
                }
                if let Some(d) = timeout.hedge().and_then(|h| h.delay()) {
                    self.next = Some(after(now, d));
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
                let h = self.hedges.swap_remove(i);
                if let Some(done) = self.hedge_ended(h.meta, Err(e), true) {
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
            let Some(at) = cuts.chain(self.next).min() else {
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

    /// The first attempt has ended with `result`.
    fn primary_ended(
        &mut self,
        result: Result<R, E>,
        timed_out: bool,
    ) -> Option<(Result<R, E>, bool)> {
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
        let Meta {
            deadline,
            started,
            permit,
            ..
        } = meta;
        self.finished(result, timed_out, deadline, started, permit)
    }

    /// Handles an attempt's outcome: `Some` when the round is over.
    fn finished(
        &mut self,
        result: Result<R, E>,
        timed_out: bool,
        deadline: Option<Instant>,
        started: Instant,
        permit: Permit,
    ) -> Option<(Result<R, E>, bool)> {
        let policy = self.call.policy;
        let setting = policy.timeout_setting();
        // The clock is read only when something needs it.
        let measured = <P::Timeout as AttemptTimeout>::MEASURED && setting.histogram().is_some();
        let mut now = LazyNow {
            clock: policy.env(),
            blocking: false,
            at: None,
        };
        // An error after the attempt's deadline counts as a timeout, as in `settle`.
        let timed_out = timed_out || (result.is_err() && deadline.is_some_and(|d| now.get() >= d));
        let retryable = match &result {
            Ok(v) => P::VALUES && policy.select_value(v, Matched).is_some(),
            Err(e) => policy
                .select(&Failure::new(e, timed_out), Matched)
                .is_some(),
        };
        if !retryable {
            // The winner: the round's last failure, if any, is recorded as such.
            self.drop_last(&mut now);
            if result.is_ok() && measured {
                setting.record(now.get().saturating_duration_since(self.started));
            }
            return Some(self.decide(result, timed_out, deadline, permit));
        }
        // An attempt cut by its timeout is recorded as its time so far (see `Call::measure`).
        if timed_out && measured {
            setting.record(now.get().saturating_duration_since(started));
        }
        // A retryable failure starts the next hedge at once, if one is left.
        self.drop_last(&mut now);
        self.last = Some(Failed {
            result,
            timed_out,
            deadline,
            permit,
        });
        if self.live() == 0 && !self.send_hedge() {
            let last = self.last.take()?;
            return Some(self.decide(last.result, last.timed_out, last.deadline, last.permit));
        }
        None
    }

    /// The round's outcome, settled by the loop with this attempt's permit and deadline.
    fn decide(
        &mut self,
        result: Result<R, E>,
        timed_out: bool,
        deadline: Option<Instant>,
        permit: Permit,
    ) -> (Result<R, E>, bool) {
        self.call.permit = permit;
        crate::call::Times::set_deadline(&mut self.call.times, deadline);
        (result, timed_out)
    }

    /// Records the kept failure (superseded by a later outcome) with the breaker and throttle.
    fn drop_last(&mut self, now: &mut LazyNow<'_>) {
        if let Some(failed) = self.last.take() {
            let policy = self.call.policy;
            if <P::Breaker as Breaker>::ACTIVE {
                policy.breaker().record(now.get(), failed.permit, false);
            }
            if <P::Throttle as Throttle>::ACTIVE {
                policy.throttle().record(now.get(), false);
            }
        }
    }

    /// Starts a hedge if one is left and the guards allow it; schedules the one after.
    fn send_hedge(&mut self) -> bool {
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
        let allowed = (|| {
            if <P::Throttle as Throttle>::ACTIVE && policy.throttle().reject_probability(now) > 0.0
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
        let attempt = self.call.hedge_attempt(now);
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "retry_runtime",
            function = policy.name(),
            retries = self.call.retries,
            hedge = self.sent,
            "hedging: another attempt started"
        );
        let limit = attempt.limit();
        let meta = Meta {
            limit,
            cut: limit.map(|l| after(tokio_now, l)),
            deadline: attempt.deadline(),
            started: attempt.started,
            permit,
            _slot: Some(slot),
        };
        let fut = Box::pin((self.make)(attempt));
        self.hedges.push(Running { fut, meta });
        true
    }
}
