//! The breaker shared by a fleet: the local breaker, with the fleet's state laid over it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::FleetShared;
use super::store::{Backend, BreakerConf, BreakerPush, CLOSED, HALF_OPEN, OPEN};
use crate::guard::{AsBreaker, Breaker, BreakerState, CircuitBreaker, Open, Permit, Reject};

/// The top bit of a permit: a probe granted by the fleet (its other bits: the round).
const PROBE: u32 = 1 << 31;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) struct BreakerCell {
    key: String,
    local: CircuitBreaker,
    conf: BreakerConf,
    fleet: Arc<FleetShared>,
    /// The fleet's state at the last sync, and while open, until when (ms since the fleet's
    /// epoch).
    state: AtomicU8,
    open_until: AtomicU64,
    /// The half-open round, and the probes of it granted to this instance and not yet used.
    round: AtomicU32,
    grants: AtomicU32,
    /// Outcomes since the last sync.
    attempts: AtomicU64,
    failures: AtomicU64,
    probe_ok: AtomicU64,
    probe_fail: AtomicU64,
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
            state: AtomicU8::new(CLOSED),
            open_until: AtomicU64::new(0),
            round: AtomicU32::new(0),
            grants: AtomicU32::new(0),
            attempts: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            probe_ok: AtomicU64::new(0),
            probe_fail: AtomicU64::new(0),
            want: AtomicBool::new(false),
            fleet_attempts: AtomicU64::new(0),
            fleet_failures: AtomicU64::new(0),
        }
    }

    /// One sync: push this instance's outcomes, read the fleet's state.
    pub(crate) fn sync(
        &self,
        backend: &mut dyn Backend,
        fleet: &FleetShared,
        now: Instant,
    ) -> Result<(), String> {
        let round = self.round.load(Ordering::Acquire);
        let want =
            self.want.swap(false, Ordering::AcqRel) && self.grants.load(Ordering::Acquire) == 0;
        let push = BreakerPush {
            attempts: self.attempts.swap(0, Ordering::AcqRel),
            failures: self.failures.swap(0, Ordering::AcqRel),
            round: u64::from(round),
            probe_ok: self.probe_ok.swap(0, Ordering::AcqRel),
            probe_fail: self.probe_fail.swap(0, Ordering::AcqRel),
            want: u64::from(want),
        };
        let r = backend.breaker(&self.key, &self.conf, &push, now)?;
        let new_round = (r.round & u64::from(Permit::GENERATION)) as u32;
        if new_round != round || r.state != HALF_OPEN {
            // Probes granted for another round (or a closed or open breaker) are void.
            self.grants.store(0, Ordering::Release);
            self.round.store(new_round, Ordering::Release);
        }
        if r.state == HALF_OPEN {
            let grant = u32::try_from(r.grant).unwrap_or(u32::MAX);
            self.grants.fetch_add(grant, Ordering::AcqRel);
        }
        self.open_until.store(
            fleet.ms(now).saturating_add(r.remaining_ms),
            Ordering::Release,
        );
        self.fleet_attempts.store(r.attempts, Ordering::Relaxed);
        self.fleet_failures.store(r.failures, Ordering::Relaxed);
        let was = self.state.swap(r.state, Ordering::AcqRel);
        if was != r.state && r.state == OPEN {
            #[cfg(feature = "tracing")]
            tracing::warn!(
                target: "retry_runtime",
                key = %self.key,
                remaining_ms = r.remaining_ms,
                "fleet: the shared circuit breaker is open"
            );
        }
        Ok(())
    }

    #[inline]
    fn acquire(&self, now: Instant) -> Option<Permit> {
        if !self.fleet.live(now) {
            return self.local.acquire(now);
        }
        match self.state.load(Ordering::Acquire) {
            CLOSED => self.local.acquire(now),
            OPEN if self.fleet.ms(now) < self.open_until.load(Ordering::Acquire) => None,
            // Half-open: only with a probe granted by the fleet. Open with its break over: the
            // next sync makes it half-open and grants the probes.
            state => {
                if state == HALF_OPEN
                    && self
                        .grants
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |g| g.checked_sub(1))
                        .is_ok()
                {
                    return Some(Permit::from_bits(
                        PROBE | self.round.load(Ordering::Acquire),
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
            if bits & !PROBE == self.round.load(Ordering::Acquire) {
                let n = if success {
                    &self.probe_ok
                } else {
                    &self.probe_fail
                };
                n.fetch_add(1, Ordering::AcqRel);
            }
            return;
        }
        self.local.record_permit(now, permit, success);
        self.attempts.fetch_add(1, Ordering::AcqRel);
        if !success {
            self.failures.fetch_add(1, Ordering::AcqRel);
        }
    }

    #[inline]
    fn would_admit(&self, now: Instant) -> bool {
        if !self.fleet.live(now) {
            return self.local.would_admit(now);
        }
        match self.state.load(Ordering::Acquire) {
            CLOSED => self.local.would_admit(now),
            HALF_OPEN => self.grants.load(Ordering::Acquire) > 0,
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
/// failures). Every outcome is recorded locally and pushed to the fleet at the next sync.
/// Otherwise (Redis slow or gone, or no sync yet) the local breaker alone decides.
///
/// The hot path (`acquire`, `record`) reads and writes atomics and the local breaker; it
/// never waits on the network and allocates nothing.
///
/// Its instants come from the policy's clock, and the fleet's view from the sync thread's
/// real clock: give a breaker synced by a thread a policy on the real clock (the default). A
/// simulation on a virtual clock syncs a [`Fleet::manual`](super::Fleet::manual) at its
/// virtual instants instead.
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
    /// reads as the local breaker's), the local breaker's otherwise.
    pub fn state(&self) -> BreakerState {
        let now = Instant::now();
        if !self.cell.fleet.live(now) {
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
        if !self.cell.fleet.live(now) {
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
}

impl Breaker for &SharedBreaker {
    const ACTIVE: bool = true;
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
