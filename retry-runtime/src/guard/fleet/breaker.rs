//! The breaker shared by a fleet: the local breaker, with the fleet's state laid over it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::FleetShared;
use super::store::{BreakerConf, BreakerPush, BreakerReply, BreakerSync, CLOSED, HALF_OPEN, OPEN};
use crate::guard::{AsBreaker, Breaker, BreakerState, CircuitBreaker, Open, Permit, Reject};

/// The top bit of a permit: a probe granted by the fleet (its other bits: the round).
const PROBE: u32 = 1 << 31;

/// The most probe answers of one kind pushed in one round (a 16-bit field; more saturate).
const PROBE_COUNT_MAX: u64 = 0xFFFF;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The half-open round in the high half of a packed word.
#[inline]
fn round_of(word: u64) -> u32 {
    (word >> 32) as u32
}

#[inline]
fn with_round(round: u32) -> u64 {
    u64::from(round) << 32
}

pub(crate) struct BreakerCell {
    pub(super) key: String,
    local: CircuitBreaker,
    conf: BreakerConf,
    fleet: Arc<FleetShared>,
    /// Until when (ms since the fleet's epoch) this guard follows the fleet: set by each
    /// round that synced its key, 0 after a round (or this key) failed.
    valid_until: AtomicU64,
    /// The key failed at the last round (one WARN per change).
    key_failing: AtomicBool,
    /// The fleet's state at the last sync, and while open, until when (ms since the fleet's
    /// epoch).
    state: AtomicU8,
    open_until: AtomicU64,
    /// The half-open round (high half) and the probes of it granted to this instance and not
    /// yet used (low half): one word, so that a probe always carries the round it was
    /// granted in.
    grants: AtomicU64,
    /// The round (high half) and the probe answers recorded for it since the last sync:
    /// successes (bits 16..32) and failures (bits 0..16). One word, so that an answer is
    /// counted in its own round or not at all.
    probes: AtomicU64,
    /// Outcomes since the last sync, recorded while this guard followed the fleet: attempts
    /// (high half) and failures (low half). One word, so that a push never carries a failure
    /// without its attempt (taken between two swaps, that made a window of 20 attempts and 10
    /// failures of what were 21 and 10, and could open the fleet's breaker early).
    outcomes: AtomicU64,
    /// An attempt found the fleet half-open with no probe granted here.
    want: AtomicBool,
    /// The fleet's window at the last sync.
    fleet_attempts: AtomicU64,
    fleet_failures: AtomicU64,
}

impl BreakerCell {
    pub(crate) fn new(
        key: String,
        local: CircuitBreaker,
        window: Duration,
        min_calls: u32,
        fleet: Arc<FleetShared>,
    ) -> Self {
        let (ratio, break_duration, probes) = local.fleet_settings();
        let conf = BreakerConf {
            window_ms: millis(window),
            min_calls: u64::from(min_calls),
            ratio,
            break_ms: millis(break_duration),
            probes: u64::from(probes),
            ttl_ms: millis(fleet.options.ttl).max(1),
        };
        Self {
            key,
            local,
            conf,
            fleet,
            valid_until: AtomicU64::new(0),
            key_failing: AtomicBool::new(false),
            state: AtomicU8::new(CLOSED),
            open_until: AtomicU64::new(0),
            grants: AtomicU64::new(0),
            probes: AtomicU64::new(0),
            outcomes: AtomicU64::new(0),
            want: AtomicBool::new(false),
            fleet_attempts: AtomicU64::new(0),
            fleet_failures: AtomicU64::new(0),
        }
    }

    /// Whether this guard follows the fleet at `now`.
    #[inline]
    pub(crate) fn live(&self, now: Instant) -> bool {
        self.fleet.ms(now) < self.valid_until.load(Ordering::Acquire)
    }

    /// The local breaker decides from now until a round syncs this key again.
    pub(super) fn invalidate(&self) {
        self.valid_until.store(0, Ordering::Release);
    }

    /// The round that carried `push` failed: the guard decides locally, and its request for a
    /// probe is asked again at the next round (it would otherwise wait for another attempt to
    /// find the fleet half-open).
    pub(super) fn failed(&self, push: &BreakerPush) {
        self.invalidate();
        if push.want > 0 {
            self.want.store(true, Ordering::Release);
        }
    }

    /// This guard's part of a round.
    pub(super) fn sync_request(&self, now: Instant) -> BreakerSync<'_> {
        BreakerSync {
            key: &self.key,
            conf: &self.conf,
            push: self.take_push(now),
        }
    }

    /// This round's push: the outcomes since the last round, taken (a round that fails drops
    /// them: they are never pushed later, as if fresh).
    pub(super) fn take_push(&self, now: Instant) -> BreakerPush {
        let round = round_of(self.probes.load(Ordering::Acquire));
        let p = self.probes.swap(with_round(round), Ordering::AcqRel);
        // A probe held here and not used yet is granted again if a restarted round voids it:
        // one, however many are held (a probe given back by an attempt that was never made
        // can leave more here, which would otherwise be granted again beside each round's own,
        // one round after the other).
        let held = (self.grants.load(Ordering::Acquire) & 0xFFFF_FFFF).min(1);
        let want = self.want.swap(false, Ordering::AcqRel) && held == 0;
        let outcomes = self.outcomes.swap(0, Ordering::AcqRel);
        BreakerPush {
            attempts: outcomes >> 32,
            failures: outcomes & 0xFFFF_FFFF,
            round: u64::from(round_of(p)),
            probe_ok: (p >> 16) & PROBE_COUNT_MAX,
            probe_fail: p & PROBE_COUNT_MAX,
            want: u64::from(want),
            held,
            hold_ms: self.hold_for_a_new_key(now),
        }
    }

    /// What a key made anew (lost) starts open for, sent with each round: what is left of the
    /// break this instance holds from the fleet's last answer; or, when the fleet's breaker
    /// was half-open (or open with its break over) at its last answer and this instance's
    /// local breaker, which followed it, has not closed since, 1 ms, so that a key lost then
    /// comes back open for 1 ms and then half-open (probes decide, as before the loss), not
    /// closed. That holds through failed rounds (a Redis restart without persistence): the
    /// local breaker, which decides while the fleet is not followed, closes when its own
    /// probe succeeds, and the key then comes back closed. (An instance that made no call
    /// since keeps its view however long the outage: a key it remakes comes back half-open,
    /// and one round of probes decides.)
    #[inline]
    fn hold_for_a_new_key(&self, now: Instant) -> u64 {
        match self.held_break_ms(now) {
            0 if self.state.load(Ordering::Acquire) != CLOSED
                && self.local.state() != BreakerState::Closed =>
            {
                1
            }
            held => held,
        }
    }

    /// The key's answer to this round: the fleet's state, followed until `valid_until` (ms
    /// since the fleet's epoch); or the key's error, after which the local breaker decides.
    pub(super) fn apply(
        &self,
        reply: Result<BreakerReply, String>,
        push: &BreakerPush,
        fleet: &FleetShared,
        sent: Instant,
        valid_until: u64,
    ) {
        let r = match reply {
            Ok(r) => r,
            Err(_e) => {
                self.failed(push);
                if !self.key_failing.swap(true, Ordering::AcqRel) {
                    #[cfg(feature = "tracing")]
                    tracing::warn!(
                        target: "retry_runtime",
                        namespace = %fleet.options.namespace,
                        key = %self.key,
                        error = %_e,
                        "fleet: this key fails, its guard decides locally"
                    );
                }
                return;
            }
        };
        if self.key_failing.swap(false, Ordering::AcqRel) {
            #[cfg(feature = "tracing")]
            tracing::warn!(
                target: "retry_runtime",
                namespace = %fleet.options.namespace,
                key = %self.key,
                "fleet: this key answers again, its guard rejoins the fleet"
            );
        }
        let old_round = round_of(self.grants.load(Ordering::Acquire));
        let new_round = (r.round & u64::from(Permit::GENERATION)) as u32;
        if new_round != old_round {
            // Answers recorded from now on for the old round are void.
            self.probes.store(with_round(new_round), Ordering::Release);
        }
        if new_round != old_round || r.state != HALF_OPEN {
            // Probes granted for another round (or a closed or open breaker) are void.
            self.grants.store(with_round(new_round), Ordering::Release);
        }
        if r.state == HALF_OPEN && r.grant > 0 {
            let grant = r.grant.min(0xFFFF_FFFF);
            let _ = self
                .grants
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                    let n = (w & 0xFFFF_FFFF).saturating_add(grant).min(0xFFFF_FFFF);
                    Some((w & !0xFFFF_FFFF) | n)
                });
        }
        // The break's end, counted from when the round was sent (before the script read its
        // clock: never later than the fleet's end, however long the round took) and never
        // longer than a break (a step back of Redis's clock would stretch it): an instance
        // that stops following the fleet holds this break to its end.
        self.open_until.store(
            fleet
                .ms(sent)
                .saturating_add(r.remaining_ms.min(self.conf.break_ms)),
            Ordering::Release,
        );
        self.fleet_attempts.store(r.attempts, Ordering::Relaxed);
        self.fleet_failures.store(r.failures, Ordering::Relaxed);
        // (Only the sync thread writes the state.)
        let was = self.state.load(Ordering::Acquire);
        // The local breaker follows the fleet's changes: it opens with it (its break ending
        // with the fleet's, as far as this round tells), is open with its break over when the
        // instance finds the fleet half-open, and closes with it with an empty window. Outcomes
        // of attempts admitted before a change do not count after it (a new generation). So an
        // instance that stops following the fleet during a break or a half-open round probes
        // on its own after the break, instead of letting everything through. A local breaker
        // that closed on its own while the fleet was not followed (its probe succeeded) is
        // opened again when the fleet's is not closed. (The local breaker changes before the
        // state is published: an attempt that reads the new state finds it changed.)
        let break_ms = self.conf.break_ms;
        let opened_ago = |left_ms: u64| {
            let ago = Duration::from_millis(break_ms.saturating_sub(left_ms.min(break_ms)));
            sent.checked_sub(ago).unwrap_or(sent)
        };
        let local = self.local.state();
        match r.state {
            OPEN if was != OPEN || local != BreakerState::Open => {
                self.local.follow_open(opened_ago(r.remaining_ms));
            }
            HALF_OPEN if was == CLOSED || local == BreakerState::Closed => {
                self.local.follow_open(opened_ago(0));
            }
            CLOSED if was != CLOSED => self.local.follow_closed(),
            _ => {}
        }
        self.state.store(r.state, Ordering::Release);
        self.valid_until.store(valid_until, Ordering::Release);
        if was != r.state && r.state == OPEN {
            #[cfg(feature = "tracing")]
            tracing::warn!(
                target: "retry_runtime",
                namespace = %fleet.options.namespace,
                key = %self.key,
                remaining_ms = r.remaining_ms,
                "fleet: the shared circuit breaker is open"
            );
        }
    }

    /// What is left at `now` (ms, on this instance's clock) of the break the fleet's breaker
    /// announced at the last sync, 0 if it was not open then or the break is over.
    #[inline]
    fn held_break_ms(&self, now: Instant) -> u64 {
        if self.state.load(Ordering::Acquire) == OPEN {
            self.open_until
                .load(Ordering::Acquire)
                .saturating_sub(self.fleet.ms(now))
        } else {
            0
        }
    }

    /// Whether a break the fleet's breaker announced at the last sync is not over at `now`:
    /// it holds whether or not the view is still followed (a round that failed, Redis gone, a
    /// stuck sync thread), since the fleet judged the dependency down until then.
    #[inline]
    fn announced_break(&self, now: Instant) -> bool {
        self.held_break_ms(now) > 0
    }

    #[inline]
    fn acquire(&self, now: Instant) -> Option<Permit> {
        if !self.live(now) {
            if self.announced_break(now) {
                return None;
            }
            return self.local.acquire(now);
        }
        match self.state.load(Ordering::Acquire) {
            CLOSED => self.local.acquire(now),
            OPEN if self.fleet.ms(now) < self.open_until.load(Ordering::Acquire) => None,
            // Half-open: only with a probe granted by the fleet. Open with its break over: the
            // next sync makes it half-open and grants the probes.
            state => {
                if state == HALF_OPEN
                    && let Ok(w) =
                        self.grants
                            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                                (w & 0xFFFF_FFFF > 0).then(|| w - 1)
                            })
                {
                    return Some(Permit::from_bits(
                        PROBE | (round_of(w) & Permit::GENERATION),
                    ));
                }
                self.want.store(true, Ordering::Release);
                None
            }
        }
    }

    #[inline]
    fn record(&self, now: Instant, permit: Permit, success: bool) {
        let bits = permit.bits();
        if bits & PROBE != 0 {
            let round = bits & !PROBE;
            // Counted in the probe's own round, or dropped if that round is over.
            let _ = self
                .probes
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                    if round_of(w) != round {
                        return None;
                    }
                    let (ok, fail) = ((w >> 16) & PROBE_COUNT_MAX, w & PROBE_COUNT_MAX);
                    let (ok, fail) = if success {
                        ((ok + 1).min(PROBE_COUNT_MAX), fail)
                    } else {
                        (ok, (fail + 1).min(PROBE_COUNT_MAX))
                    };
                    Some((w & !0xFFFF_FFFF) | (ok << 16) | fail)
                });
            return;
        }
        // Only outcomes seen while following the fleet are pushed: those of an outage would
        // land, at the rejoin, in the window's current slot as if they were fresh; and only
        // those of attempts admitted since the fleet's breaker last left the closed state
        // (the others are from before it opened, not for the window it starts anew).
        let counted = self.local.record_counted(now, permit, success);
        if counted && self.live(now) {
            // (2^32 outcomes between two syncs would carry into the attempts: not within
            // an interval.)
            self.outcomes
                .fetch_add((1 << 32) | u64::from(!success), Ordering::AcqRel);
        }
    }

    /// Gives back the permit of an attempt that was never made: a probe goes back to this
    /// instance's grants if its round is still the current one; a local permit (a half-open
    /// local breaker's probe) to the local breaker.
    #[inline]
    fn release(&self, permit: Permit) {
        let bits = permit.bits();
        if bits & PROBE != 0 {
            let round = bits & !PROBE;
            let _ = self
                .grants
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                    (round_of(w) & Permit::GENERATION == round)
                        .then(|| (w & !0xFFFF_FFFF) | ((w & 0xFFFF_FFFF) + 1).min(0xFFFF_FFFF))
                });
            return;
        }
        self.local.release_permit(permit);
    }

    #[inline]
    fn would_admit(&self, now: Instant) -> bool {
        if !self.live(now) {
            return !self.announced_break(now) && self.local.would_admit(now);
        }
        match self.state.load(Ordering::Acquire) {
            CLOSED => self.local.would_admit(now),
            HALF_OPEN => self.grants.load(Ordering::Acquire) & 0xFFFF_FFFF > 0,
            _ => false,
        }
    }
}

/// A circuit breaker shared by a fleet through Redis (feature `redis`), made by
/// [`Fleet::breaker`](super::Fleet::breaker): it plugs in wherever a [`CircuitBreaker`] does
/// (`breaker = SHARED` in the attribute, with `SHARED` a `static LazyLock<SharedBreaker>`;
/// [`PolicyBuilder::breaker`](crate::PolicyBuilder::breaker)). Clones share the breaker.
///
/// While the fleet's view is fresh: the fleet's breaker open, attempts fail fast with
/// [`Open`]; half-open, only the probes the fleet granted to this instance go through; closed,
/// the local breaker decides (it may open on its own when this instance sees enough
/// failures). Every outcome of an attempt the local breaker admitted is recorded locally, and
/// pushed to the fleet at the next round if it was recorded while the fleet's view was
/// followed; a probe's answer goes to the fleet only (its round decides). The local breaker
/// follows the fleet's changes: it opens when the fleet's opens (its break ending with the
/// fleet's), is open with its break over when the instance first finds the fleet's
/// half-open, and closes with an empty window when the fleet's closes, as a breaker that has
/// just closed. Otherwise (Redis slow or gone, this
/// key failing, or before the guard's first round) the local breaker alone decides, and the
/// outcomes it records then are never pushed (at the rejoin they would look fresh); but a
/// break the fleet announced at the last sync holds to its end (on this instance's clock):
/// a round that fails during a break does not let this instance's traffic through to a
/// dependency the fleet judged down; after it, the local breaker, open with the fleet's,
/// lets its own probes through.
///
/// The hot path (`acquire`, `record`) reads and writes atomics and the local breaker; it
/// never waits on the network and allocates nothing.
///
/// Its instants come from the policy's clock, and the fleet's view from the sync thread's
/// real clock: give a breaker synced by a thread a policy on the real clock (the default). A
/// simulation on a virtual clock syncs a [`Fleet::manual_on`](super::Fleet::manual_on) fleet
/// of that clock at its virtual instants instead ([`state`](Self::state), which is given no
/// instant, reads the fleet's clock).
#[derive(Clone)]
pub struct SharedBreaker {
    cell: Arc<BreakerCell>,
}

impl fmt::Debug for SharedBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBreaker")
            .field("key", &self.cell.key)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl SharedBreaker {
    pub(crate) fn from_cell(cell: Arc<BreakerCell>) -> Self {
        Self { cell }
    }

    /// The Redis key.
    pub fn key(&self) -> &str {
        &self.cell.key
    }

    /// The state that decides now: the fleet's while its view is fresh (its closed state
    /// reads as the local breaker's), the local breaker's otherwise, but open until the end of
    /// a break the fleet announced at the last sync.
    pub fn state(&self) -> BreakerState {
        let now = self.cell.fleet.now();
        if !self.cell.live(now) {
            if self.cell.announced_break(now) {
                return BreakerState::Open;
            }
            return self.cell.local.state();
        }
        match self.cell.state.load(Ordering::Acquire) {
            CLOSED => self.cell.local.state(),
            HALF_OPEN => BreakerState::HalfOpen,
            _ => BreakerState::Open,
        }
    }

    /// The fleet's state at the last sync, `None` if its view is not fresh at `now`.
    pub fn fleet_state(&self, now: Instant) -> Option<BreakerState> {
        if !self.cell.live(now) {
            return None;
        }
        Some(match self.cell.state.load(Ordering::Acquire) {
            CLOSED => BreakerState::Closed,
            HALF_OPEN => BreakerState::HalfOpen,
            _ => BreakerState::Open,
        })
    }

    /// The fleet's attempts and failures in its window at the last sync (closed state).
    pub fn fleet_counts(&self) -> (u64, u64) {
        (
            self.cell.fleet_attempts.load(Ordering::Relaxed),
            self.cell.fleet_failures.load(Ordering::Relaxed),
        )
    }

    /// The local breaker.
    pub fn local(&self) -> &CircuitBreaker {
        &self.cell.local
    }

    /// Lets an attempt start at `now`, or not (see the type's docs).
    #[inline]
    pub fn acquire(&self, now: Instant) -> Option<Permit> {
        self.cell.acquire(now)
    }

    /// Records the outcome of an attempt admitted with `permit`.
    #[inline]
    pub fn record_permit(&self, now: Instant, permit: Permit, success: bool) {
        self.cell.record(now, permit, success)
    }

    /// Whether an attempt at `now` would be admitted, changing nothing.
    #[inline]
    pub fn would_admit(&self, now: Instant) -> bool {
        self.cell.would_admit(now)
    }

    /// Gives back `permit`, whose attempt was admitted but never made (a concurrency limit
    /// refused it, a hedge was cancelled): a probe goes to the next attempt.
    #[inline]
    pub fn release_permit(&self, permit: Permit) {
        self.cell.release(permit)
    }
}

impl Breaker for &SharedBreaker {
    const ACTIVE: bool = true;
    type Pending = bool;
    #[inline]
    fn acquire(&self, now: Instant) -> Option<Permit> {
        self.cell.acquire(now)
    }
    #[inline]
    fn record(&self, now: Instant, permit: Permit, success: bool) {
        self.cell.record(now, permit, success)
    }
    #[inline]
    fn would_admit(&self, now: Instant) -> bool {
        self.cell.would_admit(now)
    }
    #[inline]
    fn release(&self, permit: Permit) {
        self.cell.release(permit)
    }
}

impl<E: From<Open>> Reject<E> for &SharedBreaker {
    #[inline]
    fn reject(&self) -> Option<E> {
        Some(E::from(Open::new()))
    }
}

impl AsBreaker for SharedBreaker {
    type Ref<'a> = &'a SharedBreaker;
    #[inline(always)]
    fn as_breaker(&self) -> &SharedBreaker {
        self
    }
}
