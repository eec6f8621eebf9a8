use std::time::Duration;

use rand::Rng;

use super::{Backoff, check_range, from_nanos};
use crate::{ConfigError, duration_from_secs};

/// Fibonacci backoff: `v_x = min(max, base + Fib(x) * unit)`, with `Fib(0) = 0`, `Fib(1) = 1`,
/// `Fib(2) = 1`, `Fib(3) = 2`, ... and `unit = 1 s` by default.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{Backoff, Fibonacci};
/// # use rand::SeedableRng;
/// let b = Fibonacci::new(Duration::from_secs(1), Duration::from_secs(60))?;
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
/// let v: Vec<u64> = (0..7).map(|x| b.delay(x, &mut rng).as_secs()).collect();
/// assert_eq!(v, [1, 2, 2, 3, 4, 6, 9]);
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fibonacci {
    base: Duration,
    max: Duration,
    unit: Duration,
}

impl Fibonacci {
    /// `unit = 1 s`. Errors: `base > max`; `max` zero (every delay would be 0).
    pub fn new(base: Duration, max: Duration) -> Result<Self, ConfigError> {
        Self::with_unit(base, max, super::DEFAULT_UNIT)
    }

    /// The same from numbers of seconds. Errors: a negative, NaN or infinite duration, or one
    /// above 0 that rounds to 0 ns; and every error of [`with_unit`](Self::with_unit).
    pub fn from_secs(base: f64, max: f64, unit: f64) -> Result<Self, ConfigError> {
        Self::with_unit(
            duration_from_secs("base", base)?,
            duration_from_secs("max", max)?,
            duration_from_secs("unit", unit)?,
        )
    }

    /// No validation: for parameters already checked (by the attribute, at compile time).
    #[doc(hidden)]
    pub const fn new_unchecked(base: Duration, max: Duration, unit: Duration) -> Self {
        Self { base, max, unit }
    }

    /// Fibonacci backoff counting in `unit`s. Errors: `base > max`; `max` zero, or `base` and
    /// `unit` both zero (every delay would be 0); a unit other than 1 s beside a `base` equal
    /// to the `max` (every delay is `base`: the unit would have no effect).
    pub fn with_unit(base: Duration, max: Duration, unit: Duration) -> Result<Self, ConfigError> {
        check_range(base, max)?;
        super::check_waits(base, max, ("unit", unit))?;
        if unit != super::DEFAULT_UNIT {
            super::check_room(base, max, "unit")?;
        }
        Ok(Self { base, max, unit })
    }
}

impl Backoff for Fibonacci {
    #[inline]
    fn delay(&self, x: u32, _rng: &mut dyn Rng) -> Duration {
        let base = self.base.as_nanos();
        let unit = self.unit.as_nanos();
        let cap = self.max.as_nanos();
        if unit == 0 {
            return self.base;
        }
        // Iterate Fib until x or until the value passes the cap: with unit >= 1 ns that
        // happens within ~140 steps, so this is O(1) for any x.
        let (mut a, mut b): (u128, u128) = (0, 1);
        for _ in 0..x {
            let next = a.saturating_add(b);
            a = b;
            b = next;
            if a.saturating_mul(unit) >= cap {
                return self.max;
            }
        }
        from_nanos(base.saturating_add(a.saturating_mul(unit))).min(self.max)
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
    fn hand_computed_sequence() {
        let b = Fibonacci::new(Duration::from_secs(1), Duration::from_secs(60)).unwrap();
        assert_eq!(
            seq(&b, 12),
            secs(&[
                1.0, 2.0, 2.0, 3.0, 4.0, 6.0, 9.0, 14.0, 22.0, 35.0, 56.0, 60.0
            ])
        );
    }

    #[test]
    fn unit_scales_the_fibonacci_term() {
        let b = Fibonacci::with_unit(
            Duration::from_millis(100),
            Duration::from_secs(10),
            Duration::from_millis(10),
        )
        .unwrap();
        let ms: Vec<u128> = seq(&b, 6).iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, [100, 110, 110, 120, 130, 150]);
    }

    #[test]
    fn saturates() {
        let b =
            Fibonacci::with_unit(Duration::ZERO, Duration::MAX, Duration::from_nanos(1)).unwrap();
        assert_eq!(b.delay(u32::MAX, &mut rng()), Duration::MAX);
        let z =
            Fibonacci::with_unit(Duration::from_secs(3), Duration::MAX, Duration::ZERO).unwrap();
        assert_eq!(z.delay(u32::MAX, &mut rng()), Duration::from_secs(3));
    }
}
