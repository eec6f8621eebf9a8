//! A retry budget: a token bucket shared by every call that names it.
//!
//! Backoff and jitter spread retries out but do not reduce how many there are: when a service
//! is overloaded, every failed call still comes back up to `retries` times. A budget bounds
//! the extra load: every call earns a fraction of a token, every retry spends one, and a retry
//! that finds the bucket empty is not made (the error is returned). With 0.1 token per call,
//! retries add at most about 10% to the load, however badly the service fails.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ConfigError;

/// Tokens are counted in thousandths, so that fractional earnings add up exactly.
const MILLI: f64 = 1000.0;
/// The largest capacity or amount accepted, in tokens.
const LIMIT: f64 = 1e12;

/// A token bucket shared by every call that names it (`budget = MY_BUDGET` in the attribute,
/// [`PolicyBuilder::budget`](crate::PolicyBuilder::budget) in the builder).
///
/// Lock-free: each call and each retry is one compare-and-swap loop on one atomic word. It
/// starts full.
///
/// ```
/// use retry_runtime::RetryBudget;
///
/// static BUDGET: RetryBudget = match RetryBudget::new(5.0, 0.1, 1.0) {
///     Ok(b) => b,
///     Err(_) => panic!("invalid retry budget"), // evaluated at compile time
/// };
///
/// assert_eq!(BUDGET.tokens(), 5.0);
/// for _ in 0..5 {
///     assert!(BUDGET.try_withdraw());
/// }
/// assert!(!BUDGET.try_withdraw()); // empty: the next retry is not made
/// for _ in 0..10 {
///     BUDGET.deposit(); // ten calls earn one token
/// }
/// assert!(BUDGET.try_withdraw());
/// ```
#[derive(Debug)]
pub struct RetryBudget {
    milli: AtomicU64,
    capacity: u64,
    earn: u64,
    cost: u64,
}

impl RetryBudget {
    /// A full bucket of `capacity` tokens; each call earns `earn_per_call`, each retry spends
    /// `cost_per_retry`. Errors: a capacity or cost that is not a finite number > 0, an
    /// earning that is not a finite number >= 0, or any value above 10^12.
    pub const fn new(
        capacity: f64,
        earn_per_call: f64,
        cost_per_retry: f64,
    ) -> Result<Self, ConfigError> {
        if !(capacity.is_finite() && capacity > 0.0 && capacity <= LIMIT) {
            return Err(ConfigError::new(
                "capacity",
                "must be a finite number of tokens > 0 (at most 10^12)",
            ));
        }
        if !(earn_per_call.is_finite() && earn_per_call >= 0.0 && earn_per_call <= LIMIT) {
            return Err(ConfigError::new(
                "earn_per_call",
                "must be a finite number of tokens >= 0 (at most 10^12)",
            ));
        }
        if !(cost_per_retry.is_finite() && cost_per_retry > 0.0 && cost_per_retry <= LIMIT) {
            return Err(ConfigError::new(
                "cost_per_retry",
                "must be a finite number of tokens > 0 (at most 10^12)",
            ));
        }
        let capacity = (capacity * MILLI) as u64;
        let earn = (earn_per_call * MILLI) as u64;
        let cost = (cost_per_retry * MILLI) as u64;
        // Amounts are kept in thousandths: a non-zero amount below that would silently be zero.
        if capacity == 0 {
            return Err(ConfigError::new(
                "capacity",
                "must be at least 0.001 token (amounts are counted in thousandths)",
            ));
        }
        if earn == 0 && earn_per_call > 0.0 {
            return Err(ConfigError::new(
                "earn_per_call",
                "must be 0 or at least 0.001 token (amounts are counted in thousandths)",
            ));
        }
        Ok(Self {
            milli: AtomicU64::new(capacity),
            capacity,
            earn,
            // A cost below one thousandth of a token still costs something.
            cost: if cost == 0 { 1 } else { cost },
        })
    }

    /// Credits one call's earnings, up to the capacity.
    #[inline]
    pub fn deposit(&self) {
        if self.earn == 0 {
            return;
        }
        let _ = self
            .milli
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |t| {
                (t < self.capacity).then(|| t.saturating_add(self.earn).min(self.capacity))
            });
    }

    /// Spends the cost of one retry; `false` (and nothing spent) if the bucket holds less.
    #[inline]
    pub fn try_withdraw(&self) -> bool {
        self.milli
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |t| {
                t.checked_sub(self.cost)
            })
            .is_ok()
    }

    /// The tokens in the bucket now.
    pub fn tokens(&self) -> f64 {
        self.milli.load(Ordering::Relaxed) as f64 / MILLI
    }

    /// The capacity, in tokens.
    pub fn capacity(&self) -> f64 {
        self.capacity as f64 / MILLI
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_invalid_values() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e13] {
            assert_eq!(
                RetryBudget::new(bad, 0.1, 1.0).unwrap_err().parameter(),
                "capacity"
            );
            assert_eq!(
                RetryBudget::new(5.0, 0.1, bad).unwrap_err().parameter(),
                "cost_per_retry"
            );
        }
        for bad in [-0.1, f64::NAN, f64::INFINITY, 1e13] {
            assert_eq!(
                RetryBudget::new(5.0, bad, 1.0).unwrap_err().parameter(),
                "earn_per_call"
            );
        }
        assert!(RetryBudget::new(5.0, 0.0, 1.0).is_ok());
        // Below a thousandth of a token nothing would ever be earned or held.
        assert_eq!(
            RetryBudget::new(0.0005, 0.1, 1.0).unwrap_err().parameter(),
            "capacity"
        );
        assert_eq!(
            RetryBudget::new(5.0, 0.0004, 1.0).unwrap_err().parameter(),
            "earn_per_call"
        );
        // A tiny cost still costs one thousandth.
        let b = RetryBudget::new(0.002, 0.0, 0.0001).unwrap();
        assert!(b.try_withdraw() && b.try_withdraw() && !b.try_withdraw());
    }

    #[test]
    fn earns_and_spends_exactly() {
        let b = RetryBudget::new(2.0, 0.1, 1.0).unwrap();
        assert!(b.try_withdraw() && b.try_withdraw());
        assert!(!b.try_withdraw());
        assert_eq!(b.tokens(), 0.0);
        for _ in 0..9 {
            b.deposit();
        }
        assert!(!b.try_withdraw(), "0.9 tokens are not enough");
        b.deposit();
        assert!(b.try_withdraw());
        for _ in 0..1000 {
            b.deposit();
        }
        assert_eq!(b.tokens(), 2.0, "capped at the capacity");
    }
}
