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

/// `amount` (finite, in `0..=LIMIT`) in thousandths of a token, rounded to the nearest
/// (`2.01` is 2010 thousandths, although `2.01 * 1000.0` is `2009.999…`). Ties round up.
/// Saturates instead of overflowing, and a NaN gives 0, though callers pass validated values.
const fn thousandths(amount: f64) -> u64 {
    // `f64::round` is not `const` on the minimum supported Rust: round half up by hand, which
    // is exact here since `amount * MILLI + 0.5` stays far below 2^52.
    // (`as` saturates, and maps NaN to 0.)
    (amount * MILLI + 0.5) as u64
}

/// Whether a non-negative `amount` is below the thousandth of a token the bucket counts in,
/// allowing for the floating-point error of a value meant to be 0.001 (such as `0.1 * 0.01`).
const fn below_a_thousandth(amount: f64) -> bool {
    amount * MILLI < 1.0 - 1e-9
}

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
    /// earning that is not a finite number >= 0, any value above 10^12, or a cost above the
    /// capacity (no retry could ever be paid). An earning of 0 makes the capacity a one-off
    /// allowance: once spent, no retry is made again.
    ///
    /// Amounts are counted in thousandths of a token, rounded to the nearest (`2.01` is
    /// exactly 2.01 tokens). A capacity, or a non-zero earning, below 0.001 is an error (it
    /// would be zero); a cost below 0.001 costs 0.001.
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
        // Amounts are kept in thousandths: a non-zero amount below that would silently be zero.
        if below_a_thousandth(capacity) {
            return Err(ConfigError::new(
                "capacity",
                "must be at least 0.001 token (amounts are counted in thousandths)",
            ));
        }
        if earn_per_call > 0.0 && below_a_thousandth(earn_per_call) {
            return Err(ConfigError::new(
                "earn_per_call",
                "must be 0 or at least 0.001 token (amounts are counted in thousandths)",
            ));
        }
        let capacity = thousandths(capacity);
        let earn = thousandths(earn_per_call);
        let cost = thousandths(cost_per_retry);
        // A bucket that can never hold one retry's cost would never allow a retry (a
        // capacity and a cost written the wrong way round, `new(0.1, 0.5, 1.0)`).
        if cost > capacity {
            return Err(ConfigError::new(
                "cost_per_retry",
                "must be at most `capacity`: a budget that can never hold one retry's cost never allows a retry",
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

    /// A new full bucket with the settings of this one.
    pub(crate) fn fresh(&self) -> Self {
        Self {
            milli: AtomicU64::new(self.capacity),
            capacity: self.capacity,
            earn: self.earn,
            cost: self.cost,
        }
    }

    /// Capacity, earning per call and cost per retry, in thousandths of a token.
    #[cfg(feature = "redis")]
    pub(crate) fn milli_settings(&self) -> (u64, u64, u64) {
        (self.capacity, self.earn, self.cost)
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
        // A cost above the capacity could never be paid.
        assert_eq!(
            RetryBudget::new(0.5, 0.1, 1.0).unwrap_err().parameter(),
            "cost_per_retry"
        );
        assert_eq!(
            RetryBudget::new(1.0, 0.1, 1.001).unwrap_err().parameter(),
            "cost_per_retry"
        );
        assert!(RetryBudget::new(1.0, 0.1, 1.0).is_ok());
        // A tiny cost still costs one thousandth.
        let b = RetryBudget::new(0.002, 0.0, 0.0001).unwrap();
        assert!(b.try_withdraw() && b.try_withdraw() && !b.try_withdraw());
    }

    #[test]
    fn amounts_round_to_the_nearest_thousandth() {
        // 2.01 * 1000.0 is 2009.999…: truncated, it was 2.009 tokens.
        let b = RetryBudget::new(2.01, 0.0, 1.0).unwrap();
        assert_eq!(b.capacity(), 2.01);
        assert_eq!(b.tokens(), 2.01);
        assert!(b.try_withdraw() && b.try_withdraw());
        assert_eq!(b.tokens(), 0.01);
        // 1.001 * 1000.0 is 1000.999…: truncated, three costs did not empty 3.003 tokens.
        let b = RetryBudget::new(3.003, 0.0, 1.001).unwrap();
        assert!(b.try_withdraw() && b.try_withdraw() && b.try_withdraw());
        assert!(!b.try_withdraw(), "three costs of 1.001 empty 3.003");
        assert_eq!(b.tokens(), 0.0);
        for amount in [0.3, 0.1 + 0.2, 2.01, 1.001, 4.35, 0.001, 0.1 * 0.01] {
            let b = RetryBudget::new(amount, amount, amount).unwrap();
            let expect = (amount * 1000.0).round() / 1000.0;
            assert_eq!(b.capacity(), expect, "{amount}");
            assert!(b.try_withdraw(), "{amount}: one cost fits the capacity");
            assert_eq!(b.tokens(), 0.0, "{amount}: cost = capacity");
            b.deposit();
            assert_eq!(b.tokens(), expect, "{amount}: earning");
        }
        // Every whole number of thousandths up to 100 tokens is kept exactly.
        for k in 1..100_000u32 {
            let amount = f64::from(k) / 1000.0;
            assert_eq!(thousandths(amount), u64::from(k), "{amount}");
        }
    }

    #[test]
    fn no_value_panics() {
        let values = [
            0.0,
            -0.0,
            5e-324,
            0.000_999_9,
            0.0005,
            0.001,
            1e12,
            1e12 + 1.0,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for &c in &values {
            for &e in &values {
                for &k in &values {
                    if let Ok(b) = RetryBudget::new(c, e, k) {
                        b.deposit();
                        let _ = b.try_withdraw();
                        assert!(b.tokens().is_finite() && b.tokens() <= b.capacity());
                    }
                }
            }
        }
        assert_eq!(
            RetryBudget::new(0.0009999, 0.1, 1.0)
                .unwrap_err()
                .parameter(),
            "capacity"
        );
        assert_eq!(
            RetryBudget::new(1.0, 0.0006, 1.0).unwrap_err().parameter(),
            "earn_per_call"
        );
        assert_eq!(
            RetryBudget::new(1e12, 1e12, 1e12).unwrap().capacity(),
            1e12,
            "the largest values are kept exactly"
        );
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
