//! The retry budget shared by a fleet: tokens in Redis, a small lease in each instance.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::FleetShared;
use super::store::{Backend, BudgetPush};
use crate::guard::{AsBudget, Budget, RetryBudget};

/// Tokens are counted in thousandths, as in [`RetryBudget`].
const MILLI: f64 = 1000.0;

pub(crate) struct BudgetCell {
    key: String,
    fallback: RetryBudget,
    capacity: u64,
    earn: u64,
    cost: u64,
    ttl_ms: u64,
    fleet: Arc<FleetShared>,
    /// Tokens granted to this instance and not spent yet (thousandths).
    lease: AtomicU64,
    /// The lease the sync tops up to, in thousandths.
    lease_target: AtomicU64,
    /// Calls credited since the last sync.
    deposits: AtomicU64,
    /// A retry was made or refused since the last sync: the lease is topped up.
    active: AtomicBool,
    /// Retries paid from the lease, and the fleet's free tokens at the last sync.
    spent: AtomicU64,
    fleet_tokens: AtomicU64,
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
            lease: AtomicU64::new(0),
            lease_target: AtomicU64::new(cost),
            deposits: AtomicU64::new(0),
            // The first sync takes a lease, so that the first retry finds one.
            active: AtomicBool::new(true),
            spent: AtomicU64::new(0),
            fleet_tokens: AtomicU64::new(capacity),
        }
    }

    /// One sync: credit this instance's calls, top its lease up if it retried.
    pub(crate) fn sync(&self, backend: &mut dyn Backend, now: Instant) -> Result<(), String> {
        let lease = self.lease.load(Ordering::Acquire);
        let want = if self.active.swap(false, Ordering::AcqRel) {
            self.lease_target
                .load(Ordering::Relaxed)
                .saturating_sub(lease)
        } else {
            0
        };
        let calls = self.deposits.swap(0, Ordering::AcqRel);
        let push = BudgetPush {
            capacity: self.capacity,
            earned: calls.saturating_mul(self.earn),
            want,
            ttl_ms: self.ttl_ms,
        };
        match backend.budget(&self.key, &push, now) {
            Ok(r) => {
                self.lease.fetch_add(r.grant, Ordering::AcqRel);
                self.fleet_tokens.store(r.tokens, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                // Ask again at the next sync (the calls credited are lost: the bucket only
                // ever holds less than it should, never more).
                if want > 0 {
                    self.active.store(true, Ordering::Release);
                }
                Err(e)
            }
        }
    }

    #[inline]
    fn deposit(&self) {
        if self.fleet.live(Instant::now()) {
            if self.earn > 0 {
                self.deposits.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            self.fallback.deposit();
        }
    }

    #[inline]
    fn try_withdraw(&self) -> bool {
        if !self.fleet.live(Instant::now()) {
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
/// compare-and-swap), and an empty lease refuses the retry. After a retry (made or refused),
/// the next sync tops the lease up from the bucket, and credits the calls made since. So
/// the fleet's retries never exceed the bucket's capacity plus what its calls earned, however
/// many instances there are (see the [module docs](super) for the exact bound), and each
/// instance makes at most `lease / cost` retries per sync interval.
///
/// While Redis is out of reach (or before the first sync), the `fallback` budget decides.
/// (`deposit` and `try_withdraw` take no instant: they read the real clock once, to know
/// whether the fleet's view is fresh.)
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

    /// Credits one call: to the fleet's bucket (at the next sync) while the fleet's view is
    /// fresh, to the fallback budget otherwise.
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

    /// The tokens left in the fleet's bucket at the last sync (not counting the leases).
    pub fn fleet_tokens(&self) -> f64 {
        self.cell.fleet_tokens.load(Ordering::Relaxed) as f64 / MILLI
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
