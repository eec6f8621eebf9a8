//! [`Attempt`]: what the body of a retried function can know about the attempt it runs in.

use std::fmt;
use std::time::{Duration, Instant};

use crate::time::Clock;

/// What the body of a retried function can know about the attempt it runs in (SPEC section 9).
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::Policy;
///
/// let policy = Policy::builder().timeout(Duration::from_secs(5)).build()?;
/// let r: Result<(), std::io::Error> = policy.call(|attempt| {
///     assert_eq!(attempt.retries(), 0);
///     assert_eq!(attempt.timeout(), Some(Duration::from_secs(5)));
///     // A blocking body hands the time left to its socket:
///     let left = attempt.remaining().unwrap();
///     assert!(left <= Duration::from_secs(5));
///     Ok(())
/// });
/// # r.unwrap();
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Clone, Copy)]
pub struct Attempt<'a> {
    pub(crate) retries: u32,
    /// Whether the call is blocking: it then reads [`Clock::now_blocking`].
    pub(crate) blocking: bool,
    pub(crate) timeout: Option<Duration>,
    pub(crate) started: Instant,
    pub(crate) first: Instant,
    /// When the whole call must end (its deadline), if it has one.
    pub(crate) call_deadline: Option<Instant>,
    pub(crate) clock: &'a (dyn Clock + Sync),
}

impl fmt::Debug for Attempt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("retries", &self.retries)
            .field("timeout", &self.timeout)
            .field("started", &self.started)
            .field("first", &self.first)
            .finish_non_exhaustive()
    }
}

impl Attempt<'_> {
    /// The current instant on the call's clock.
    fn now(&self) -> Instant {
        if self.blocking {
            self.clock.now_blocking()
        } else {
            self.clock.now()
        }
    }

    /// Retries made so far in this call: 0 in the first attempt, n in the attempt that retry n
    /// started. Retries are numbered from 1: the second attempt is retry 1, as `on_retry`'s
    /// [`RetryInfo::retry`](crate::RetryInfo::retry) and the tracing events' `retry` field
    /// number it.
    pub const fn retries(&self) -> u32 {
        self.retries
    }

    /// The 1-based number of this attempt.
    pub const fn number(&self) -> u32 {
        self.retries.saturating_add(1)
    }

    /// This attempt's timeout, `None` for infinite.
    pub const fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// When this attempt started.
    pub const fn started(&self) -> Instant {
        self.started
    }

    /// This attempt's deadline: the earlier of its timeout's end and the call's deadline,
    /// `None` with neither.
    pub fn deadline(&self) -> Option<Instant> {
        let own = self.timeout.and_then(|t| self.started.checked_add(t));
        match (own, self.call_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The time this attempt may take: from its start to its [`deadline`](Self::deadline),
    /// `None` without one.
    pub fn limit(&self) -> Option<Duration> {
        self.deadline()
            .map(|d| d.saturating_duration_since(self.started))
    }

    /// Time left before the deadline (zero once past it), `None` without one: the smaller of
    /// the attempt's and the call's time left.
    pub fn remaining(&self) -> Option<Duration> {
        let deadline = self.deadline()?;
        Some(deadline.saturating_duration_since(self.now()))
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.remaining().is_some_and(|r| r.is_zero())
    }

    /// Time since the first attempt of this call started.
    pub fn elapsed(&self) -> Duration {
        self.now().saturating_duration_since(self.first)
    }
}
