use std::time::Duration;

use rand::Rng;

use super::Backoff;
use crate::{ConfigError, duration_from_secs};

/// Constant backoff: `v_x = base`.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{Backoff, Constant};
/// # use rand::SeedableRng;
/// let b = Constant::new(Duration::from_millis(200));
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
/// assert_eq!(b.delay(7, &mut rng), Duration::from_millis(200));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Constant {
    base: Duration,
}

impl Constant {
    /// A constant delay of `base`.
    pub const fn new(base: Duration) -> Self {
        Self { base }
    }

    /// The same from a number of seconds. Error: negative, NaN or infinite.
    pub fn from_secs(base: f64) -> Result<Self, ConfigError> {
        Ok(Self::new(duration_from_secs("base", base)?))
    }
}

impl Backoff for Constant {
    #[inline]
    fn delay(&self, _x: u32, _rng: &mut dyn Rng) -> Duration {
        self.base
    }
    #[inline]
    fn base(&self) -> Duration {
        self.base
    }
    #[inline]
    fn max(&self) -> Duration {
        self.base
    }
}

/// No backoff: `v_x = 0`; retries follow each other at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoBackoff;

impl Backoff for NoBackoff {
    #[inline]
    fn delay(&self, _x: u32, _rng: &mut dyn Rng) -> Duration {
        Duration::ZERO
    }
    #[inline]
    fn max(&self) -> Duration {
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn constant_and_none() {
        let c = Constant::new(Duration::from_millis(5));
        assert_eq!(seq(&c, 3), vec![Duration::from_millis(5); 3]);
        assert_eq!(c.delay(u32::MAX, &mut rng()), Duration::from_millis(5));
        assert_eq!(seq(&NoBackoff, 3), vec![Duration::ZERO; 3]);
        assert_eq!(NoBackoff.max(), Duration::ZERO);
    }
}
