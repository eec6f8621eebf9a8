use std::time::Duration;

use rand::Rng;

use super::{Backoff, check_range, from_nanos};
use crate::{ConfigError, duration_from_secs};

/// Linear backoff: `v_x = min(max, base + interval * x)`.
///
/// With `interval = base` ([`Linear::new`]) this is `base * (x + 1)`.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{Backoff, Linear};
/// # use rand::SeedableRng;
/// let b = Linear::with_interval(Duration::from_secs(1), Duration::from_secs(8), Duration::from_secs(2))?;
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
/// let v: Vec<u64> = (0..6).map(|x| b.delay(x, &mut rng).as_secs()).collect();
/// assert_eq!(v, [1, 3, 5, 7, 8, 8]);
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Linear {
    base: Duration,
    max: Duration,
    interval: Duration,
}

impl Linear {
    /// `v_x = min(max, base * (x + 1))`. Errors: `base > max`; `base` or `max` zero (every
    /// delay would be 0; [`NoBackoff`](crate::NoBackoff) says "no wait").
    pub fn new(base: Duration, max: Duration) -> Result<Self, ConfigError> {
        // (Its interval is its base: a base of 0 is the mistake, reported as such.)
        if base.is_zero() && !max.is_zero() {
            return Err(ConfigError::new(
                "base",
                "must be above 0: `Linear::new` grows by its base, so every retry would wait 0; use `NoBackoff` for no wait, or `Linear::with_interval` to grow from 0",
            ));
        }
        Self::with_interval(base, max, base)
    }

    /// The same from numbers of seconds. Errors: a negative (`interval < 0` included), NaN or
    /// infinite duration, or one above 0 that rounds to 0 ns; and every error of
    /// [`with_interval`](Self::with_interval).
    pub fn from_secs(base: f64, max: f64, interval: f64) -> Result<Self, ConfigError> {
        Self::with_interval(
            duration_from_secs("base", base)?,
            duration_from_secs("max", max)?,
            duration_from_secs("interval", interval)?,
        )
    }

    /// No validation: for parameters already checked (by the attribute, at compile time).
    #[doc(hidden)]
    pub const fn new_unchecked(base: Duration, max: Duration, interval: Duration) -> Self {
        Self {
            base,
            max,
            interval,
        }
    }

    /// `v_x = min(max, base + interval * x)`. Errors: `base > max`; `max` zero, or `base` and
    /// `interval` both zero (every delay would be 0). (A `Duration` interval is
    /// never negative; the attribute rejects `interval < 0` at compile time.)
    ///
    /// An interval other than `base` given beside a `base` equal to the `max` is an error too:
    /// every delay is `base` ([`Constant`](crate::Constant) says so).
    pub fn with_interval(
        base: Duration,
        max: Duration,
        interval: Duration,
    ) -> Result<Self, ConfigError> {
        check_range(base, max)?;
        super::check_waits(base, max, ("interval", interval))?;
        // (An interval equal to `base` is `Linear::new`'s own.)
        if interval != base {
            super::check_room(base, max, "interval")?;
        }
        Ok(Self {
            base,
            max,
            interval,
        })
    }
}

impl Backoff for Linear {
    #[inline]
    fn delay(&self, x: u32, _rng: &mut dyn Rng) -> Duration {
        // interval <= ~1.8e28 ns and x < 2^32: the product fits a u128.
        let n = self
            .base
            .as_nanos()
            .saturating_add(self.interval.as_nanos().saturating_mul(u128::from(x)));
        from_nanos(n).min(self.max)
    }
    #[inline]
    fn base(&self) -> Duration {
        self.base
    }
    #[inline]
    fn max(&self) -> Duration {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn interval_defaults_to_base() {
        let b = Linear::new(Duration::from_secs(1), Duration::from_secs(60)).unwrap();
        assert_eq!(seq(&b, 5), secs(&[1.0, 2.0, 3.0, 4.0, 5.0]));
    }

    #[test]
    fn explicit_interval_and_cap() {
        let b = Linear::with_interval(
            Duration::from_secs(1),
            Duration::from_secs(60),
            Duration::from_secs(2),
        )
        .unwrap();
        assert_eq!(seq(&b, 5), secs(&[1.0, 3.0, 5.0, 7.0, 9.0]));
        assert_eq!(b.delay(40, &mut rng()), Duration::from_secs(60));
        assert_eq!(b.delay(u32::MAX, &mut rng()), Duration::from_secs(60));
    }

    #[test]
    fn zero_interval_is_constant() {
        let b = Linear::with_interval(
            Duration::from_secs(2),
            Duration::from_secs(9),
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(b.delay(1000, &mut rng()), Duration::from_secs(2));
    }

    #[test]
    fn extreme_values_saturate() {
        let b =
            Linear::with_interval(Duration::from_secs(1), Duration::MAX, Duration::MAX).unwrap();
        assert_eq!(b.delay(u32::MAX, &mut rng()), Duration::MAX);
    }

    #[test]
    fn rejects_base_above_max() {
        let e = Linear::new(Duration::from_secs(2), Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.parameter(), "base");
    }
}
