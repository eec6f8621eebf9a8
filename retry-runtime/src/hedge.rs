//! Hedging (SPEC section 15): when an async attempt has not finished after a delay, another
//! one starts beside it; the first success wins and the others are dropped.
//!
//! [`Hedge`] is the setting ([`PolicyBuilder::hedge`](crate::PolicyBuilder::hedge), or
//! `hedge(after = .., max = ..)` in `#[robust]`); [`Hedged`] is the timeout setting that
//! carries it. The rules of a round, as [`Policy::call_async`](crate::Policy::call_async)
//! and `#[robust]` run it:
//! - the first attempt starts; while it runs, after `after` another starts, and so on, up to
//!   `max` extra attempts (hedges);
//! - the first success (a value no `Ok(..)` kind matches) wins, and so does an error no rule
//!   retries; every other attempt of the round is dropped (cancelled);
//! - a retryable failure (an error a rule matches, a matched value, a timeout) starts the next
//!   hedge at once if one is left, unless it asks for its own delay (a hint: a `Retry-After`)
//!   that the loop would wait (its rule has a retry left, and the delay ends before its
//!   `max_delay` and the deadline), which stops the round's hedges; when every attempt of the round has failed, the round is
//!   one failed attempt for the retry loop (its last failure decides, or the last that asked
//!   for a delay, whose delay is then the backoff), which backs off and starts a new round;
//! - each hedge withdraws from the retry budget like a retry, asks the circuit breaker for a
//!   permit and reports its outcome to it, and takes a slot of the concurrency limit without
//!   waiting: a hedge that finds the budget empty, the breaker open or no free slot is not
//!   sent (the round goes on with the attempts it has). No hedge is sent while the adaptive
//!   throttle rejects anything (its probability is above zero): hedges add load, which is
//!   what the throttle is shedding;
//! - each attempt has its own timeout; they share the call's deadline;
//! - callbacks (`on_error`, `on_retry`) see the round's deciding outcome, once per round;
//!   the body's [`Attempt::retries`](crate::Attempt::retries) is the round's for every hedge.
//!
//! With `after` a percentile (`Hedge::percentile`), the delay is that percentile of the
//! function's recent latencies (a [`Latencies`] histogram: the time from the start of a round
//! to its winning success, and the time an attempt cut by its timeout ran); until the
//! histogram holds enough samples, no hedge is sent. When more than (100 − NN)% of attempts
//! are cut, the pNN is at least the timeout, and hedges go out no sooner than it.

use std::time::Duration;

use crate::ConfigError;
use crate::latency::{Latencies, Quantile};
use crate::timeout::{AsyncTimeout, AttemptTimeout, SetTimeout};

/// The most hedges per round (the attribute checks it too): every live attempt is polled at
/// each wake-up, and more than a few hedges is a configuration mistake.
pub const MAX_HEDGES: u32 = 10;

/// When a hedge starts: a fixed delay, or a percentile of recent latencies.
#[derive(Debug, Clone, Copy)]
pub enum After<'a> {
    /// After this long.
    Fixed(Duration),
    /// After this percentile of the latencies in the histogram.
    Percentile(Quantile, &'a Latencies),
}

/// The hedging setting (see the [module docs](self)).
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::hedge::Hedge;
/// use retry_runtime::latency::Latencies;
///
/// let fixed = Hedge::after(Duration::from_millis(50), 2)?;
/// assert_eq!(fixed.delay(), Some(Duration::from_millis(50)));
///
/// static LATENCIES: Latencies = Latencies::new();
/// let adaptive = Hedge::percentile(&LATENCIES, 95.0, 1)?;
/// assert_eq!(adaptive.delay(), None); // no hedge until enough samples
/// assert!(Hedge::after(Duration::ZERO, 1).is_err());
/// assert!(Hedge::after(Duration::from_millis(50), 0).is_err());
/// assert!(Hedge::after(Duration::from_millis(50), 11).is_err());
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Hedge<'a> {
    after: After<'a>,
    max: u32,
}

impl<'a> Hedge<'a> {
    /// Up to `max` hedges, each started `after` the previous attempt. Errors: `after` zero,
    /// `max` not in 1..=[`MAX_HEDGES`].
    pub const fn after(after: Duration, max: u32) -> Result<Self, ConfigError> {
        if after.is_zero() {
            return Err(ConfigError::new(
                "after",
                "must be > 0 (a hedge at once doubles every call: raise `max` on a plain retry instead)",
            ));
        }
        Self::checked(After::Fixed(after), max)
    }

    /// Up to `max` hedges, each started when the previous attempt has run longer than the
    /// `p`-th percentile of `latencies`. Errors: `p` not in [50, 99.9]; `max` not in
    /// 1..=[`MAX_HEDGES`].
    pub fn percentile(latencies: &'a Latencies, p: f64, max: u32) -> Result<Self, ConfigError> {
        if !(50.0..=99.9).contains(&p) {
            return Err(ConfigError::new(
                "after",
                "a hedging percentile must be between p50 and p99.9",
            ));
        }
        Self::checked(After::Percentile(Quantile::new(p)?, latencies), max)
    }

    /// A setting the attribute has validated. (Reached through the public
    /// [`checks`](crate::checks) helpers, so a `max` outside 1..=[`MAX_HEDGES`] is brought
    /// into it rather than trusted: a round never sends more than ten hedges.)
    pub(crate) const fn from_parts(after: After<'a>, max: u32) -> Self {
        let max = if max == 0 {
            1
        } else if max > MAX_HEDGES {
            MAX_HEDGES
        } else {
            max
        };
        Hedge { after, max }
    }

    const fn checked(after: After<'a>, max: u32) -> Result<Self, ConfigError> {
        if max == 0 || max > MAX_HEDGES {
            return Err(ConfigError::new(
                "max",
                "must be from 1 to 10 hedges per round (leave hedging out for none)",
            ));
        }
        Ok(Hedge { after, max })
    }

    /// When hedges start.
    pub const fn when(&self) -> After<'a> {
        self.after
    }

    /// The most hedges per round.
    pub const fn max(&self) -> u32 {
        self.max
    }

    /// How long an attempt runs before the next hedge starts: `None` when a percentile is not
    /// known yet (no hedge is sent then).
    #[inline]
    pub fn delay(&self) -> Option<Duration> {
        match self.after {
            After::Fixed(d) => Some(d),
            After::Percentile(q, latencies) => latencies.percentile(q),
        }
    }

    /// The histogram a percentile is read from.
    fn latencies(&self) -> Option<&'a Latencies> {
        match self.after {
            After::Fixed(_) => None,
            After::Percentile(_, l) => Some(l),
        }
    }
}

/// A timeout setting `T` with hedging (see the [module docs](self)).
#[derive(Debug, Clone, Copy)]
pub struct Hedged<'a, T> {
    pub(crate) timeout: T,
    pub(crate) hedge: Hedge<'a>,
}

impl<'a, T: AttemptTimeout> AttemptTimeout for Hedged<'a, T> {
    #[inline]
    fn limit(&self) -> Option<Duration> {
        self.timeout.limit()
    }
    crate::timeout::forward_bounds!();
    #[inline]
    fn deadline(&self) -> Option<Duration> {
        self.timeout.deadline()
    }
    const MEASURED: bool = true;
    #[inline]
    fn record(&self, latency: Duration) {
        let own = self.hedge.latencies();
        if let Some(l) = own {
            l.record(latency);
        }
        // The timeout's histogram too, unless it is the same one.
        if T::MEASURED
            && !self
                .timeout
                .histogram()
                .zip(own)
                .is_some_and(|(a, b)| std::ptr::eq(a, b))
        {
            self.timeout.record(latency);
        }
    }
    #[inline]
    fn histogram(&self) -> Option<&Latencies> {
        self.hedge.latencies().or_else(|| self.timeout.histogram())
    }
    const HEDGED: bool = true;
    #[inline]
    fn hedge(&self) -> Option<&Hedge<'_>> {
        Some(&self.hedge)
    }
}

impl<T: AsyncTimeout<E>, E> AsyncTimeout<E> for Hedged<'_, T> {
    #[inline]
    fn elapsed(&self, elapsed: crate::Elapsed) -> Option<E> {
        self.timeout.elapsed(elapsed)
    }
}

impl<'a, T: SetTimeout<N>, N> SetTimeout<N> for Hedged<'a, T> {
    type With = Hedged<'a, T::With>;
    fn set_timeout(self, timeout: N) -> Self::With {
        Hedged {
            timeout: self.timeout.set_timeout(timeout),
            hedge: self.hedge,
        }
    }
}
