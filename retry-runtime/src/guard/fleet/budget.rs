//! The retry budget shared by a fleet: tokens in Redis, a small lease in each instance.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::FleetShared;
use super::store::{BudgetPush, BudgetReply, BudgetSync};
use crate::guard::{AsBudget, Budget, RetryBudget};

/// Tokens are counted in thousandths, as in [`RetryBudget`].
const MILLI: f64 = 1000.0;

/// After this many syncs in a row with no retry asked for (made or refused), an instance gives
/// its unspent lease back to the fleet's bucket (1 s at the default interval).
pub(crate) const IDLE_SYNCS: u32 = 5;

pub(crate) struct BudgetCell {
    pub(super) key: String,
    fallback: RetryBudget,
    capacity: u64,
    earn: u64,
    cost: u64,
    ttl_ms: u64,
    fleet: Arc<FleetShared>,
    /// Until when (ms since the fleet's epoch) this guard follows the fleet: set by each
    /// round that synced its key, 0 after a round (or this key) failed.
    valid_until: AtomicU64,
    /// The key failed at the last round (one WARN per change).
    key_failing: AtomicBool,
    /// Tokens granted to this instance and not spent yet (thousandths).
    lease: AtomicU64,
    /// The lease the sync tops up to, in thousandths.
    lease_target: AtomicU64,
    /// Calls credited since the last sync.
    deposits: AtomicU64,
    /// A retry was asked for (made or refused) since the last sync: the lease is topped up.
    active: AtomicBool,
    /// Syncs in a row with no retry asked for (the sync thread's own count).
    idle_syncs: AtomicU32,
    /// Idle syncs after which the unspent lease goes back ([`SharedBudget::keep_lease`]);
    /// `u32::MAX`: never, and the lease is kept topped up.
    idle_limit: AtomicU32,
    /// Retries paid from the lease, and the fleet's free tokens at the last sync
    /// ([`NEVER_SYNCED`] before the first).
    spent: AtomicU64,
    fleet_tokens: AtomicU64,
}

/// `fleet_tokens` before a round has synced the key (a bucket holds at most 10^15
/// thousandths).
const NEVER_SYNCED: u64 = u64::MAX;

/// A guard dropped (its last handle gone) gives back what it holds: its unspent lease and the
/// calls credited since the last round, pushed to its key by the fleet's next round. (Lost,
/// such tokens would drain the bucket of a fleet whose guards come and go, one per tenant
/// say, and for good with no earnings.)
impl Drop for BudgetCell {
    fn drop(&mut self) {
        let back = *self.lease.get_mut();
        let calls = *self.deposits.get_mut();
        let earned = calls.saturating_mul(self.earn).saturating_add(back);
        if earned > 0 {
            let push = BudgetPush {
                capacity: self.capacity,
                earned,
                want: 0,
                ttl_ms: self.ttl_ms,
                cost: self.cost,
            };
            self.fleet
                .orphans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((std::mem::take(&mut self.key), push));
        }
    }
}

impl BudgetCell {
    pub(crate) fn new(
        key: String,
        fleet_settings: &RetryBudget,
        fallback: RetryBudget,
        fleet: Arc<FleetShared>,
    ) -> Self {
        let (capacity, earn, cost) = fleet_settings.milli_settings();
        let ttl_ms = u64::try_from(fleet.options.ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        Self {
            key,
            fallback,
            capacity,
            earn,
            cost,
            ttl_ms,
            fleet,
            valid_until: AtomicU64::new(0),
            key_failing: AtomicBool::new(false),
            lease: AtomicU64::new(0),
            lease_target: AtomicU64::new(cost),
            deposits: AtomicU64::new(0),
            // No lease until a retry is asked for: an idle instance holds no tokens.
            active: AtomicBool::new(false),
            idle_syncs: AtomicU32::new(0),
            idle_limit: AtomicU32::new(IDLE_SYNCS),
            spent: AtomicU64::new(0),
            fleet_tokens: AtomicU64::new(NEVER_SYNCED),
        }
    }

    /// Whether this guard follows the fleet at `now`.
    #[inline]
    fn live(&self, now: Instant) -> bool {
        self.fleet.ms(now) < self.valid_until.load(Ordering::Acquire)
    }

    /// The fallback budget decides from now until a round syncs this key again.
    pub(super) fn invalidate(&self) {
        self.valid_until.store(0, Ordering::Release);
    }

    /// This guard's part of a round.
    pub(super) fn sync_request(&self) -> BudgetSync<'_> {
        BudgetSync {
            key: &self.key,
            push: self.take_push(),
        }
    }

    /// This round's push: the calls credited since the last round, the tokens wanted to top
    /// the lease up after a retry, or, after [`IDLE_SYNCS`] idle syncs, the unspent lease
    /// given back (with the earnings: both go into the bucket, up to its capacity).
    pub(super) fn take_push(&self) -> BudgetPush {
        let target = self.lease_target.load(Ordering::Relaxed);
        // A lease above its target (`set_lease` lowered it) gives the excess back.
        let mut back = match self
            .lease
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                (l > target).then_some(target)
            }) {
            Ok(old) => old - target,
            Err(_) => 0,
        };
        let lease = self.lease.load(Ordering::Acquire);
        let limit = self.idle_limit.load(Ordering::Relaxed);
        // (A lease kept for good is topped up whether or not a retry was asked for.)
        let asked = self.active.swap(false, Ordering::AcqRel);
        let want = if asked || limit == u32::MAX {
            self.idle_syncs.store(0, Ordering::Relaxed);
            target.saturating_sub(lease)
        } else {
            let idle = self.idle_syncs.load(Ordering::Relaxed).saturating_add(1);
            self.idle_syncs.store(idle, Ordering::Relaxed);
            if idle >= limit && lease > 0 {
                // A retry racing with this takes what it finds: the rest goes back.
                back = back.saturating_add(self.lease.swap(0, Ordering::AcqRel));
            }
            0
        };
        let calls = self.deposits.swap(0, Ordering::AcqRel);
        BudgetPush {
            capacity: self.capacity,
            earned: calls.saturating_mul(self.earn).saturating_add(back),
            want,
            ttl_ms: self.ttl_ms,
            cost: self.cost,
        }
    }

    /// The key's answer to this round (`push` is what the round sent for it).
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(super) fn apply(
        &self,
        reply: Result<BudgetReply, String>,
        push: &BudgetPush,
        fleet: &FleetShared,
        valid_until: u64,
    ) {
        match reply {
            Ok(r) => {
                self.lease.fetch_add(r.grant, Ordering::AcqRel);
                self.fleet_tokens.store(r.tokens, Ordering::Relaxed);
                self.valid_until.store(valid_until, Ordering::Release);
                if self.key_failing.swap(false, Ordering::AcqRel) {
                    #[cfg(feature = "tracing")]
                    tracing::warn!(
                        target: "retry_runtime",
                        namespace = %fleet.options.namespace,
                        key = %self.key,
                        "fleet: this key answers again, its guard rejoins the fleet"
                    );
                }
            }
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
            }
        }
    }

    /// The round failed for this key: the fallback budget decides, and the lease is asked for
    /// again at the next round. The calls credited and a lease given back are lost (the
    /// bucket may then hold less than it should, never more: Redis may have applied them).
    pub(super) fn failed(&self, push: &BudgetPush) {
        self.invalidate();
        if push.want > 0 {
            self.active.store(true, Ordering::Release);
        }
    }

    // The fallback budget runs all along: while the fleet decides, it is credited with each
    // call (and not charged: the fleet's tokens pay the retries), so that an outage finds it
    // refilled by this instance's traffic since the last one (frozen, a budget drained by one
    // outage stayed empty into the next).
    #[inline]
    fn deposit(&self) {
        if self.earn > 0 && self.live(self.fleet.now()) {
            self.deposits.fetch_add(1, Ordering::Relaxed);
        }
        self.fallback.deposit();
    }

    #[inline]
    fn try_withdraw(&self) -> bool {
        if !self.live(self.fleet.now()) {
            return self.fallback.try_withdraw();
        }
        self.active.store(true, Ordering::Relaxed);
        let paid = self
            .lease
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                t.checked_sub(self.cost)
            })
            .is_ok();
        if paid {
            self.spent.fetch_add(1, Ordering::Relaxed);
        }
        paid
    }
}

/// A retry budget shared by a fleet through Redis (feature `redis`), made by
/// [`Fleet::budget`](super::Fleet::budget): it plugs in wherever a [`RetryBudget`] does
/// (`budget = SHARED` in the attribute, [`PolicyBuilder::budget`](crate::PolicyBuilder::budget)).
/// Clones share the budget.
///
/// The fleet's bucket is in Redis (it starts full). Each instance holds a lease of tokens
/// granted by the bucket, the cost of one retry by default: a retry spends from the lease (one
/// compare-and-swap), and an empty lease refuses the retry. After a retry is asked for (made
/// or refused), the next round tops the lease up from the bucket; every round credits the
/// calls made since. An instance that asks for no retry in 5 rounds in a row gives its unspent
/// lease back, and one that never asks leases nothing: idle instances do not hoard the
/// fleet's tokens (so an instance whose retries are further apart has each refused, the lease
/// arriving at the round after it: [`keep_lease`](Self::keep_lease) keeps it longer). So the fleet's retries never exceed the bucket's capacity plus what its
/// calls earned, however many instances there are, while the key is not lost (see the
/// [module docs](super) for the exact statement), and each instance makes at most
/// `lease / cost` retries per sync interval.
///
/// While the fleet is not followed (Redis out of reach, this key failing, or before the
/// guard's first round), the `fallback` budget decides. (`deposit` and `try_withdraw` take no
/// instant: they read the fleet's clock once, to know whether the fleet's view is fresh: the
/// system's, or the one given to [`Fleet::manual_on`](super::Fleet::manual_on).)
#[derive(Clone)]
pub struct SharedBudget {
    cell: Arc<BudgetCell>,
}

impl fmt::Debug for SharedBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBudget")
            .field("key", &self.cell.key)
            .field("lease", &self.lease())
            .finish_non_exhaustive()
    }
}

impl SharedBudget {
    pub(crate) fn from_cell(cell: Arc<BudgetCell>) -> Self {
        Self { cell }
    }

    /// The Redis key.
    pub fn key(&self) -> &str {
        &self.cell.key
    }

    /// Sets the lease to the cost of `retries` retries (at least one): more retries per
    /// interval for this instance, more tokens held out of the others' reach.
    pub fn set_lease(&self, retries: u32) {
        self.cell.lease_target.store(
            self.cell.cost.saturating_mul(u64::from(retries.max(1))),
            Ordering::Relaxed,
        );
    }

    /// Keeps the unspent lease through `idle_rounds` rounds in a row without a retry asked
    /// for (5 by default) before giving it back; `u32::MAX` keeps it for good, and asks for it
    /// at the next round without waiting for a retry. An instance whose retries come further
    /// apart than its idle rounds finds its lease given back each time, and the retry refused
    /// (the lease comes at the round after it): such an instance keeps its lease longer, which
    /// holds those tokens out of the other instances' reach.
    pub fn keep_lease(&self, idle_rounds: u32) {
        self.cell
            .idle_limit
            .store(idle_rounds.max(1), Ordering::Relaxed);
    }

    /// Credits one call: to the fallback budget always (it runs all along), and to the
    /// fleet's bucket (at the next sync) while the fleet's view is fresh.
    #[inline]
    pub fn deposit(&self) {
        self.cell.deposit()
    }

    /// Spends one retry from the lease (or from the fallback budget while Redis is out of
    /// reach); `false` if it holds less than the cost.
    #[inline]
    pub fn try_withdraw(&self) -> bool {
        self.cell.try_withdraw()
    }

    /// The tokens leased to this instance and not spent.
    pub fn lease(&self) -> f64 {
        self.cell.lease.load(Ordering::Relaxed) as f64 / MILLI
    }

    /// The retries this instance paid from its leases.
    pub fn spent(&self) -> u64 {
        self.cell.spent.load(Ordering::Relaxed)
    }

    /// The tokens left in the fleet's bucket at the last sync that reached this guard's key
    /// (not counting the leases); `None` before the first (Redis not reached since the guard
    /// was made, or its key failing all along).
    pub fn fleet_tokens(&self) -> Option<f64> {
        match self.cell.fleet_tokens.load(Ordering::Relaxed) {
            NEVER_SYNCED => None,
            milli => Some(milli as f64 / MILLI),
        }
    }

    /// The fallback budget.
    pub fn fallback(&self) -> &RetryBudget {
        &self.cell.fallback
    }

    /// The cost of one retry, in tokens.
    pub fn cost(&self) -> f64 {
        self.cell.cost as f64 / MILLI
    }

    /// The time-to-live of the key.
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.cell.ttl_ms)
    }
}

impl Budget for &SharedBudget {
    #[inline]
    fn deposit(&self) {
        self.cell.deposit()
    }
    #[inline]
    fn try_withdraw(&self) -> bool {
        self.cell.try_withdraw()
    }
}

impl AsBudget for SharedBudget {
    type Ref<'a> = &'a SharedBudget;
    #[inline(always)]
    fn as_budget(&self) -> &SharedBudget {
        self
    }
}
