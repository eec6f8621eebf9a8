//! Backoff strategies: the delay `v_x` before retry number `x + 1`.
//!
//! Every strategy implements [`Backoff`]. Constructors validate their parameters and return
//! [`crate::ConfigError`] on a broken rule; once built, a strategy never panics,
//! overflows or produces NaN for any `x` up to `u32::MAX`: values saturate at `max`.

use std::time::Duration;

use rand::Rng;

mod constant;
mod exponential;
mod fibonacci;
mod linear;
mod polynomial;
mod random;

/// The default `unit` of [`Fibonacci`] and [`Polynomial`]: one second (the published design's
/// implicit unit, made explicit).
pub const DEFAULT_UNIT: Duration = Duration::from_secs(1);

pub use constant::{Constant, NoBackoff};
pub use exponential::Exponential;
pub use fibonacci::Fibonacci;
pub use linear::Linear;
pub use polynomial::Polynomial;
pub use random::Random;

use crate::ConfigError;

/// A backoff strategy: maps the backoff exponent `x` to a delay `v_x`.
///
/// Implement it for a custom strategy (`backoff = custom(EXPR)` in the attribute,
/// [`PolicyBuilder::backoff`](crate::PolicyBuilder::backoff) in the builder). `base` and `max`
/// are read by jitter algorithms that need them (`aws_decorrelated`), and `base`, as a bound
/// no delay is below, by [`PolicyBuilder::build`](crate::PolicyBuilder::build) (a backoff whose
/// shortest delay leaves no retry before the deadline or `max_delay` is refused); their
/// defaults are zero and [`Duration::MAX`]: leave `base` at zero unless no delay is ever below
/// it.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::Backoff;
///
/// /// 10 ms, 20 ms, 30 ms, ... capped at one second.
/// struct Steps;
/// impl Backoff for Steps {
///     fn delay(&self, x: u32, _rng: &mut dyn rand::Rng) -> Duration {
///         Duration::from_millis(10).saturating_mul(x.saturating_add(1)).min(self.max())
///     }
///     fn max(&self) -> Duration { Duration::from_secs(1) }
/// }
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
/// # use rand::SeedableRng;
/// assert_eq!(Steps.delay(2, &mut rng), Duration::from_millis(30));
/// assert_eq!(Steps.delay(u32::MAX, &mut rng), Duration::from_secs(1));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a backoff strategy",
    label = "expected a value implementing `retry_runtime::Backoff`",
    note = "built-in strategies: `Exponential`, `Linear`, `Fibonacci`, `Polynomial`, `Random`, `Constant`, `NoBackoff`"
)]
pub trait Backoff {
    /// The delay for backoff exponent `x` (0 before the first retry).
    fn delay(&self, x: u32, rng: &mut dyn Rng) -> Duration;

    /// The smallest delay this strategy returns (`v_base`).
    #[inline]
    fn base(&self) -> Duration {
        Duration::ZERO
    }

    /// The largest delay this strategy returns (`v_max`).
    #[inline]
    fn max(&self) -> Duration {
        Duration::MAX
    }
}

/// A strategy behind a reference, a `Box` or an `Arc` is the strategy.
macro_rules! through {
    ($($ty:ty),*) => {$(
        impl<B: Backoff + ?Sized> Backoff for $ty {
            #[inline]
            fn delay(&self, x: u32, rng: &mut dyn Rng) -> Duration {
                (**self).delay(x, rng)
            }
            #[inline]
            fn base(&self) -> Duration {
                (**self).base()
            }
            #[inline]
            fn max(&self) -> Duration {
                (**self).max()
            }
        }
    )*};
}

through!(&B, Box<B>, std::sync::Arc<B>);

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Converts nanoseconds to a `Duration`, saturating at [`Duration::MAX`].
#[inline]
pub(crate) fn from_nanos(n: u128) -> Duration {
    let secs = n / NANOS_PER_SEC;
    match u64::try_from(secs) {
        // The remainder is below one billion, so it fits a u32.
        Ok(secs) => Duration::new(secs, (n % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

/// Converts a non-negative float number of nanoseconds to a `Duration`, capped at `cap`.
/// NaN maps to zero; infinity and anything at or past `cap` map to `cap`.
#[inline]
pub(crate) fn from_nanos_f64(n: f64, cap: Duration) -> Duration {
    if n.is_nan() || n <= 0.0 {
        return Duration::ZERO;
    }
    let cap_n = cap.as_nanos();
    if n >= cap_n as f64 {
        return cap;
    }
    // `as` saturates; `n` is finite and below `cap_n` here.
    from_nanos((n.round() as u128).min(cap_n))
}

/// Checks `base <= max`.
pub(crate) fn check_range(base: Duration, max: Duration) -> Result<(), ConfigError> {
    if base > max {
        Err(ConfigError::new("base", "must not exceed `max`"))
    } else {
        Ok(())
    }
}

/// A growing strategy that would wait 0 before every retry is an error (as the attribute
/// makes it one; SPEC 3 allows `base = 0`, which stays fine where the strategy grows from
/// it): a `max` of 0 caps every delay at 0, and a `base` of 0 with no growth (`growth` the
/// parameter that would add to it, zero) never moves. [`NoBackoff`] and
/// [`Constant::new(Duration::ZERO)`](Constant::new) say "no wait" plainly.
pub(crate) fn check_waits(
    base: Duration,
    max: Duration,
    growth: (&'static str, Duration),
) -> Result<(), ConfigError> {
    if max.is_zero() {
        return Err(ConfigError::new(
            "max",
            "must be above 0: every delay is capped at `max`, so every retry would wait 0; use `NoBackoff` for no wait",
        ));
    }
    if base.is_zero() && growth.1.is_zero() {
        return Err(ConfigError::new(
            growth.0,
            "must be above 0 when `base` is 0: the strategy would wait 0 before every retry; use `NoBackoff` for no wait",
        ));
    }
    Ok(())
}

/// A growth (`growth`, the parameter's name) given beside a `base` equal to the `max` is
/// read by nothing: every delay is `base` (as the attribute refuses it).
pub(crate) fn check_room(
    base: Duration,
    max: Duration,
    growth: &'static str,
) -> Result<(), ConfigError> {
    if base == max {
        return Err(ConfigError::new(
            growth,
            "has no effect: `base` equals `max`, so every delay is `base`; use `Constant::new(base)`, or raise `max`",
        ));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod test_util {
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use std::time::Duration;

    pub fn rng() -> SmallRng {
        SmallRng::seed_from_u64(7)
    }

    pub fn secs(v: &[f64]) -> Vec<Duration> {
        v.iter().map(|s| Duration::from_secs_f64(*s)).collect()
    }

    pub fn seq(b: &dyn super::Backoff, n: u32) -> Vec<Duration> {
        let mut r = rng();
        (0..n).map(|x| b.delay(x, &mut r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanos_conversion_saturates() {
        assert_eq!(from_nanos(1_500_000_000), Duration::from_millis(1500));
        assert_eq!(from_nanos(u128::MAX), Duration::MAX);
        assert_eq!(from_nanos_f64(f64::NAN, Duration::MAX), Duration::ZERO);
        assert_eq!(from_nanos_f64(f64::INFINITY, Duration::MAX), Duration::MAX);
        assert_eq!(
            from_nanos_f64(2.0e9, Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        assert_eq!(
            from_nanos_f64(2.5e8, Duration::from_secs(1)),
            Duration::from_millis(250)
        );
    }
}

#[cfg(test)]
mod from_secs_tests {
    use super::*;

    #[test]
    fn every_invalid_number_is_a_config_error() {
        let bad = [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300];
        for v in bad {
            assert_eq!(
                Exponential::from_secs(v, 60.0, 2.0)
                    .unwrap_err()
                    .parameter(),
                "base"
            );
            assert_eq!(
                Exponential::from_secs(1.0, v, 2.0).unwrap_err().parameter(),
                "max"
            );
            assert_eq!(
                Linear::from_secs(1.0, 60.0, v).unwrap_err().parameter(),
                "interval"
            );
            assert_eq!(
                Fibonacci::from_secs(1.0, 60.0, v).unwrap_err().parameter(),
                "unit"
            );
            assert_eq!(
                Polynomial::from_secs(v, 60.0, [2.0], 1.0)
                    .unwrap_err()
                    .parameter(),
                "base"
            );
            assert_eq!(Random::from_secs(1.0, v).unwrap_err().parameter(), "max");
            assert_eq!(Constant::from_secs(v).unwrap_err().parameter(), "base");
        }
        assert_eq!(Random::from_secs(2.0, 1.0).unwrap_err().parameter(), "base");
        // Every delay 0 (the attribute's `random(base = 0, max = 0)` is refused too).
        assert_eq!(Random::from_secs(0.0, 0.0).unwrap_err().parameter(), "max");
        assert!(Random::from_secs(0.0, 0.001).is_ok());
        assert_eq!(
            Exponential::from_secs(1.0, 2.0, 0.5)
                .unwrap_err()
                .parameter(),
            "m"
        );
        assert_eq!(
            Polynomial::from_secs(1.0, 2.0, [1.0], 1.0)
                .unwrap_err()
                .parameter(),
            "p"
        );
        // Strategies that would wait 0 before every retry (`NoBackoff` says that plainly).
        assert_eq!(
            Linear::from_secs(0.0, 0.0, 0.0).unwrap_err().parameter(),
            "max"
        );
        assert_eq!(
            Linear::from_secs(0.0, 5.0, 0.0).unwrap_err().parameter(),
            "interval"
        );
        assert!(Linear::from_secs(0.0, 5.0, 1.0).is_ok());
        // `Linear::new` grows by its base: the base is what to fix.
        let zero = Duration::ZERO;
        assert_eq!(
            Linear::new(zero, Duration::from_secs(5))
                .unwrap_err()
                .parameter(),
            "base"
        );
        assert_eq!(Linear::new(zero, zero).unwrap_err().parameter(), "max");
        assert_eq!(
            Exponential::from_secs(0.0, 5.0, 2.0)
                .unwrap_err()
                .parameter(),
            "base"
        );
        assert_eq!(
            Fibonacci::from_secs(0.0, 5.0, 0.0).unwrap_err().parameter(),
            "unit"
        );
        assert!(Fibonacci::from_secs(0.0, 5.0, 1.0).is_ok());
        assert_eq!(
            Polynomial::from_secs(0.0, 5.0, [2.0], 0.0)
                .unwrap_err()
                .parameter(),
            "unit"
        );
        assert_eq!(
            Polynomial::from_secs(1.0, 0.0, [2.0], 1.0)
                .unwrap_err()
                .parameter(),
            "base"
        );
        assert!(Constant::from_secs(0.0).is_ok());
    }
}
