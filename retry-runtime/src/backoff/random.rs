use std::time::Duration;

use rand::{Rng, RngExt};

use super::{Backoff, check_range, from_nanos};
use crate::{ConfigError, duration_from_secs};

/// Random backoff: `v_x` uniform in `[base, max]`, whatever `x`.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{Backoff, Random};
/// # use rand::SeedableRng;
/// let b = Random::new(Duration::from_secs(1), Duration::from_secs(60))?;
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
/// let v = b.delay(3, &mut rng);
/// assert!(v >= Duration::from_secs(1) && v <= Duration::from_secs(60));
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Random {
    base: Duration,
    max: Duration,
}

impl Random {
    /// The same from numbers of seconds. Errors: a negative, NaN or infinite duration;
    /// `base > max`.
    pub fn from_secs(base: f64, max: f64) -> Result<Self, ConfigError> {
        Self::new(
            duration_from_secs("base", base)?,
            duration_from_secs("max", max)?,
        )
    }

    /// No validation: for parameters already checked (by the attribute, at compile time).
    #[doc(hidden)]
    pub const fn new_unchecked(base: Duration, max: Duration) -> Self {
        Self { base, max }
    }

    /// A new random backoff. Errors: `base > max`; `max` = 0 (every delay would be 0: use
    /// [`NoBackoff`](crate::NoBackoff), as the attribute's `random(max = 0)` says).
    pub fn new(base: Duration, max: Duration) -> Result<Self, ConfigError> {
        check_range(base, max)?;
        if max.is_zero() {
            return Err(ConfigError::new(
                "max",
                "must be above 0: a random delay between `base` and a `max` of 0 is always 0; use `NoBackoff` for no wait",
            ));
        }
        Ok(Self { base, max })
    }
}

impl Backoff for Random {
    #[inline]
    fn delay(&self, _x: u32, rng: &mut dyn Rng) -> Duration {
        // (`min`: a `base` above `max`, which only the unchecked constructor lets through,
        // draws `max`, as the other strategies cap their delays, instead of panicking.)
        let max = self.max.as_nanos();
        from_nanos(rng.random_range(self.base.as_nanos().min(max)..=max))
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

    /// The unchecked constructor (the attribute's, for parameters it checked) given a `base`
    /// above `max` caps every delay at `max` instead of panicking in the range draw.
    #[test]
    fn an_unchecked_base_above_max_draws_max() {
        let r = Random::new_unchecked(Duration::from_secs(2), Duration::from_secs(1));
        let mut g = rng();
        for x in [0, 1, u32::MAX] {
            assert_eq!(r.delay(x, &mut g), Duration::from_secs(1));
        }
    }

    #[test]
    fn stays_in_range_and_spreads() {
        let b = Random::new(Duration::from_secs(1), Duration::from_secs(3)).unwrap();
        let mut r = rng();
        let v: Vec<f64> = (0..10_000u32)
            .map(|x| b.delay(x, &mut r).as_secs_f64())
            .collect();
        assert!(v.iter().all(|s| (1.0..=3.0).contains(s)));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        // Uniform on [1, 3]: mean 2, standard error of the mean ~0.006.
        assert!((mean - 2.0).abs() < 0.03, "mean {mean}");
    }

    #[test]
    fn degenerate_range() {
        let b = Random::new(Duration::from_secs(2), Duration::from_secs(2)).unwrap();
        assert_eq!(b.delay(0, &mut rng()), Duration::from_secs(2));
    }
}
