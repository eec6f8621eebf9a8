//! A circuit breaker: stops calling a resource that keeps failing, then probes it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ConfigError;

/// The error of a call rejected by an open [`CircuitBreaker`]: the body was not run.
///
/// With `breaker = ...`, the error type `E` must implement `From<Open>`; the conversion is
/// provided for `std::io::Error` (kind `Other`), and `Open` implements `std::error::Error`,
/// so boxed errors and `anyhow::Error` have it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Open(());

impl Open {
    /// A new `Open` value.
    pub const fn new() -> Self {
        Self(())
    }
}

impl std::fmt::Display for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("circuit breaker is open: the call was not made")
    }
}

impl std::error::Error for Open {}

impl From<Open> for std::io::Error {
    fn from(e: Open) -> Self {
        std::io::Error::other(e)
    }
}

/// The state of a [`CircuitBreaker`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through; outcomes are recorded in the rolling window.
    Closed,
    /// Calls fail fast with [`Open`] until the break duration has passed.
    Open,
    /// A limited number of probe calls go through; their failure ratio closes or reopens it.
    HalfOpen,
}

/// Proof that [`CircuitBreaker::acquire`] let an attempt through, in a given state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permit(u32);

impl Permit {
    /// The permit of a call without a breaker.
    pub const NONE: Permit = Permit(0);
    /// The bits of the generation (it wraps within them).
    pub(crate) const GENERATION: u32 = u32::MAX >> 1;

    /// A permit from its bits (the top bit is free for other breakers' own use).
    #[cfg(feature = "redis")]
    pub(crate) const fn from_bits(bits: u32) -> Self {
        Permit(bits)
    }

    /// The bits of the permit.
    #[cfg(feature = "redis")]
    pub(crate) const fn bits(self) -> u32 {
        self.0
    }
}

/// The largest rolling window, in calls.
pub const MAX_WINDOW: u32 = 1024;

#[derive(Debug)]
struct Inner {
    state: BreakerState,
    /// Bumped on every change of state or of half-open round: an outcome recorded with an
    /// older permit belongs to an attempt admitted before, and does not count.
    generation: u32,
    /// The last `window` outcomes, one bit each (1 = failure), as a ring.
    ring: [u64; (MAX_WINDOW / 64) as usize],
    next: u32,
    recorded: u32,
    failures: u32,
    opened_at: Option<Instant>,
    /// When the current half-open round let its newest probe through (or began): a round
    /// whose probes are all taken starts again once that probe has been out for a whole
    /// break without an answer (timed from the round's start instead, a probe let through
    /// late in a long-idle round would be voided by the next caller, and one more let
    /// through).
    probed_at: Option<Instant>,
    probes_started: u32,
    probes_succeeded: u32,
    probes_failed: u32,
}

impl Inner {
    /// A closed breaker with nothing recorded.
    const CLOSED: Inner = Inner {
        state: BreakerState::Closed,
        generation: 0,
        ring: [0; (MAX_WINDOW / 64) as usize],
        next: 0,
        recorded: 0,
        failures: 0,
        opened_at: None,
        probed_at: None,
        probes_started: 0,
        probes_succeeded: 0,
        probes_failed: 0,
    };
}

/// A circuit breaker shared by every call that names it (`breaker = MY_BREAKER` in the
/// attribute, [`PolicyBuilder::breaker`](crate::PolicyBuilder::breaker) in the builder).
///
/// Closed, it records each attempt's outcome in a rolling window of the last `window`
/// attempts (every error is a failure, whether or not a rule retries it, as Polly's and
/// resilience4j's breakers count every exception by default; a value is one when an `Ok(..)`
/// kind matches it); when at least `min_calls` are recorded and the failure ratio reaches
/// `failure_ratio`, it opens. Open, every attempt fails fast with [`Open`] for
/// `break_duration`; then it is half-open: `probes` attempts go through, and once they all
/// have answered, it closes (with an empty window) if their failure ratio is below
/// `failure_ratio`, and opens again otherwise. Probes that never answer (their calls were
/// dropped) do not keep it half-open: once every probe is taken and the newest has been out
/// for a whole `break_duration`, the round starts again, and answers of the old round no
/// longer count. Time comes from the policy's clock, so tests drive it with a virtual one.
///
/// ```
/// use std::time::{Duration, Instant};
/// use retry_runtime::{BreakerState, CircuitBreaker};
///
/// let breaker = CircuitBreaker::new(10, 4, 0.5, Duration::from_secs(30), 1).unwrap();
/// let t0 = Instant::now();
/// for _ in 0..4 {
///     assert!(breaker.try_acquire(t0));
///     breaker.record(t0, false);
/// }
/// assert_eq!(breaker.state(), BreakerState::Open);
/// assert!(!breaker.try_acquire(t0 + Duration::from_secs(1)));      // fails fast
/// assert!(breaker.try_acquire(t0 + Duration::from_secs(30)));      // a probe
/// breaker.record(t0 + Duration::from_secs(30), true);
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// ```
#[derive(Debug)]
pub struct CircuitBreaker {
    window: u32,
    min_calls: u32,
    failure_ratio: f64,
    break_duration: Duration,
    probes: u32,
    inner: Mutex<Inner>,
}

impl CircuitBreaker {
    /// A closed breaker. Errors: `window` not in 1..=1024; `min_calls` not in 1..=`window`;
    /// `failure_ratio` not in (0, 1]; `probes` = 0; `break_duration` zero (it would never
    /// reject a call).
    pub const fn new(
        window: u32,
        min_calls: u32,
        failure_ratio: f64,
        break_duration: Duration,
        probes: u32,
    ) -> Result<Self, ConfigError> {
        if window == 0 || window > MAX_WINDOW {
            return Err(ConfigError::new(
                "window",
                "must be between 1 and 1024 calls",
            ));
        }
        if min_calls == 0 || min_calls > window {
            return Err(ConfigError::new(
                "min_calls",
                "must be between 1 and the window size",
            ));
        }
        if !(failure_ratio > 0.0 && failure_ratio <= 1.0) {
            return Err(ConfigError::new(
                "failure_ratio",
                "must be a number in (0, 1]",
            ));
        }
        if probes == 0 {
            return Err(ConfigError::new("probes", "must be at least 1"));
        }
        if break_duration.is_zero() {
            return Err(ConfigError::new(
                "break_duration",
                "must be > 0: a breaker whose break is over at once never rejects a call",
            ));
        }
        Ok(Self {
            window,
            min_calls,
            failure_ratio,
            break_duration,
            probes,
            inner: Mutex::new(Inner::CLOSED),
        })
    }

    /// A new closed breaker with the settings of this one.
    pub(crate) fn fresh(&self) -> Self {
        Self {
            window: self.window,
            min_calls: self.min_calls,
            failure_ratio: self.failure_ratio,
            break_duration: self.break_duration,
            probes: self.probes,
            inner: Mutex::new(Inner::CLOSED),
        }
    }

    /// The failure ratio, break duration and number of probes (a fleet's breaker shares them).
    #[cfg(feature = "redis")]
    pub(crate) fn fleet_settings(&self) -> (f64, Duration, u32) {
        (self.failure_ratio, self.break_duration, self.probes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The state stays consistent even if a holder panicked: every update is complete.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state the breaker is in: the state the last attempt or outcome moved it to. An open
    /// breaker whose break is over still reads as open until an attempt asks to start
    /// ([`acquire`](Self::acquire), [`try_acquire`](Self::try_acquire)) and moves it to
    /// half-open.
    pub fn state(&self) -> BreakerState {
        self.lock().state
    }

    /// Whether an attempt may start at `now`. Moves an open breaker whose break is over to
    /// half-open, and counts the probes it lets through. Prefer [`acquire`](Self::acquire),
    /// whose permit keeps late outcomes from counting in a later state.
    pub fn try_acquire(&self, now: Instant) -> bool {
        self.acquire(now).is_some()
    }

    /// Whether [`acquire`](Self::acquire) would let an attempt start at `now`, changing
    /// nothing: closed, open with its break over, or half-open with a probe left (or a stale
    /// round).
    pub fn would_admit(&self, now: Instant) -> bool {
        let s = self.lock();
        match s.state {
            BreakerState::Closed => true,
            BreakerState::Open => s
                .opened_at
                .is_none_or(|t| now.saturating_duration_since(t) >= self.break_duration),
            BreakerState::HalfOpen => {
                s.probes_started < self.probes
                    || s.probed_at
                        .is_some_and(|t| now.saturating_duration_since(t) >= self.break_duration)
            }
        }
    }

    /// Lets an attempt start at `now`, or not: the permit goes back to
    /// [`record_permit`](Self::record_permit) with the attempt's outcome.
    pub fn acquire(&self, now: Instant) -> Option<Permit> {
        let mut s = self.lock();
        if s.state == BreakerState::Open {
            let over = s
                .opened_at
                .is_none_or(|t| now.saturating_duration_since(t) >= self.break_duration);
            if !over {
                return None;
            }
            s.state = BreakerState::HalfOpen;
            s.generation = s.generation.wrapping_add(1) & Permit::GENERATION;
            s.probed_at = Some(now);
            s.probes_started = 0;
            s.probes_succeeded = 0;
            s.probes_failed = 0;
        }
        if s.state == BreakerState::HalfOpen {
            // Probes that never answer (their call was dropped, or panicked) must not keep the
            // breaker half-open for ever: after another break the round starts again.
            let stale = s
                .probed_at
                .is_some_and(|t| now.saturating_duration_since(t) >= self.break_duration);
            if s.probes_started >= self.probes && stale {
                s.probes_started = 0;
                s.probes_succeeded = 0;
                s.probes_failed = 0;
                s.generation = s.generation.wrapping_add(1) & Permit::GENERATION;
            }
            if s.probes_started >= self.probes {
                return None;
            }
            s.probes_started += 1;
            s.probed_at = Some(now);
        }
        Some(Permit(s.generation))
    }

    /// Gives back `permit`, whose attempt was admitted but never made (a concurrency limit
    /// refused it): a half-open breaker's probe goes to the next attempt instead of waiting for
    /// an outcome that will not come.
    pub fn release_permit(&self, permit: Permit) {
        let mut s = self.lock();
        if s.state == BreakerState::HalfOpen
            && permit.0 == s.generation
            && s.probes_started > s.probes_succeeded + s.probes_failed
        {
            s.probes_started -= 1;
        }
    }

    /// Records the outcome of an attempt that [`try_acquire`](Self::try_acquire) let through
    /// (whatever state the breaker has moved to since; see [`record_permit`](Self::record_permit)).
    pub fn record(&self, now: Instant, success: bool) {
        let mut s = self.lock();
        self.record_locked(&mut s, now, success);
    }

    /// Records the outcome of an attempt admitted with `permit`. An outcome whose permit is
    /// from an earlier state (an attempt that started before the breaker opened, finishing
    /// while it probes, say) does not count.
    pub fn record_permit(&self, now: Instant, permit: Permit, success: bool) {
        self.record_counted(now, permit, success);
    }

    /// [`record_permit`](Self::record_permit), saying whether the outcome counted.
    pub(crate) fn record_counted(&self, now: Instant, permit: Permit, success: bool) -> bool {
        let mut s = self.lock();
        let counts = permit.0 == s.generation;
        if counts {
            self.record_locked(&mut s, now, success);
        }
        counts
    }

    /// Opens this breaker as a fleet's breaker opened, its break counted from `opened_at`
    /// (the fleet's break's start, as far as the instance knows; a break already over leaves
    /// it half-open at its next attempt), with an empty window and a new generation: the
    /// outcomes of attempts admitted before do not count. An instance that stops following
    /// the fleet then probes on its own once the break is over, as a breaker of its own would.
    /// (A breaker already open keeps the later of the two starts: one it opened on its own
    /// more recently is not cut short.)
    #[cfg(feature = "redis")]
    pub(crate) fn follow_open(&self, opened_at: Instant) {
        let mut s = self.lock();
        let generation = s.generation.wrapping_add(1) & Permit::GENERATION;
        let opened_at = match (s.state, s.opened_at) {
            (BreakerState::Open, Some(own)) => own.max(opened_at),
            _ => opened_at,
        };
        *s = Inner {
            state: BreakerState::Open,
            generation,
            opened_at: Some(opened_at),
            ..Inner::CLOSED
        };
    }

    /// Closes this breaker as a fleet's breaker closed: a breaker that has just closed, with
    /// an empty window and a new generation (outcomes of attempts admitted before, from the
    /// fleet's open or half-open time, do not count).
    #[cfg(feature = "redis")]
    pub(crate) fn follow_closed(&self) {
        let mut s = self.lock();
        let generation = s.generation.wrapping_add(1) & Permit::GENERATION;
        *s = Inner {
            generation,
            ..Inner::CLOSED
        };
    }

    fn record_locked(&self, s: &mut Inner, now: Instant, success: bool) {
        match s.state {
            BreakerState::Closed => {
                let i = s.next;
                let (word, bit) = ((i / 64) as usize, i % 64);
                if s.recorded == self.window {
                    // The oldest outcome leaves the window.
                    if s.ring[word] >> bit & 1 == 1 {
                        s.failures -= 1;
                    }
                } else {
                    s.recorded += 1;
                }
                if success {
                    s.ring[word] &= !(1 << bit);
                } else {
                    s.ring[word] |= 1 << bit;
                    s.failures += 1;
                }
                s.next = (i + 1) % self.window;
                if s.recorded >= self.min_calls
                    && f64::from(s.failures) >= self.failure_ratio * f64::from(s.recorded)
                {
                    s.state = BreakerState::Open;
                    s.generation = s.generation.wrapping_add(1) & Permit::GENERATION;
                    s.opened_at = Some(now);
                }
            }
            BreakerState::HalfOpen => {
                if success {
                    s.probes_succeeded += 1;
                } else {
                    s.probes_failed += 1;
                }
                // Once every probe has answered, their failure ratio decides.
                if s.probes_succeeded + s.probes_failed >= self.probes {
                    if f64::from(s.probes_failed) >= self.failure_ratio * f64::from(self.probes) {
                        s.state = BreakerState::Open;
                        s.generation = s.generation.wrapping_add(1) & Permit::GENERATION;
                        s.opened_at = Some(now);
                    } else {
                        s.state = BreakerState::Closed;
                        s.generation = s.generation.wrapping_add(1) & Permit::GENERATION;
                        s.ring = [0; (MAX_WINDOW / 64) as usize];
                        s.next = 0;
                        s.recorded = 0;
                        s.failures = 0;
                    }
                }
            }
            // An attempt that started before the breaker opened: its outcome no longer counts.
            BreakerState::Open => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn rejects_invalid_values() {
        let p = |r: Result<CircuitBreaker, ConfigError>| r.unwrap_err().parameter();
        assert_eq!(p(CircuitBreaker::new(0, 1, 0.5, secs(1), 1)), "window");
        assert_eq!(p(CircuitBreaker::new(2000, 1, 0.5, secs(1), 1)), "window");
        assert_eq!(p(CircuitBreaker::new(10, 0, 0.5, secs(1), 1)), "min_calls");
        assert_eq!(p(CircuitBreaker::new(10, 11, 0.5, secs(1), 1)), "min_calls");
        for r in [0.0, -0.5, 1.5, f64::NAN] {
            assert_eq!(
                p(CircuitBreaker::new(10, 5, r, secs(1), 1)),
                "failure_ratio"
            );
        }
        assert_eq!(p(CircuitBreaker::new(10, 5, 0.5, secs(1), 0)), "probes");
        assert_eq!(
            p(CircuitBreaker::new(10, 5, 0.5, Duration::ZERO, 1)),
            "break_duration"
        );
        assert!(CircuitBreaker::new(10, 5, 0.5, Duration::from_nanos(1), 1).is_ok());
    }

    #[test]
    fn opens_only_with_enough_calls_and_failures() {
        let b = CircuitBreaker::new(10, 5, 0.5, secs(10), 2).unwrap();
        let t = Instant::now();
        for _ in 0..4 {
            b.record(t, false);
        }
        assert_eq!(b.state(), BreakerState::Closed, "4 calls < min_calls");
        b.record(t, true);
        // 4 failures / 5 calls = 0.8 >= 0.5
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[test]
    fn the_window_rolls() {
        let b = CircuitBreaker::new(4, 4, 0.75, secs(10), 1).unwrap();
        let t = Instant::now();
        // F F S S: 2/4 = 0.5 < 0.75
        for ok in [false, false, true, true] {
            b.record(t, ok);
        }
        assert_eq!(b.state(), BreakerState::Closed);
        // The two failures roll out and successes come in: S S S S
        b.record(t, true);
        b.record(t, true);
        assert_eq!(b.state(), BreakerState::Closed);
        // S S F F then one more F: window S F F F = 0.75
        b.record(t, false);
        b.record(t, false);
        assert_eq!(b.state(), BreakerState::Closed);
        b.record(t, false);
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[test]
    fn outcomes_from_an_earlier_state_do_not_count() {
        let b = CircuitBreaker::new(4, 1, 0.5, secs(10), 1).unwrap();
        let t = Instant::now();
        let slow = b.acquire(t).expect("closed");
        let fast = b.acquire(t).expect("closed");
        b.record_permit(t, fast, false);
        assert_eq!(b.state(), BreakerState::Open);
        let probe = b.acquire(t + secs(10)).expect("the probe");
        // The slow attempt of the closed state succeeds now: it is not the probe's answer.
        b.record_permit(t + secs(11), slow, true);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.record_permit(t + secs(11), probe, false);
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[test]
    fn probes_that_never_answer_do_not_block_for_ever() {
        let b = CircuitBreaker::new(4, 1, 0.5, secs(10), 1).unwrap();
        let t = Instant::now();
        b.record(t, false);
        assert!(b.try_acquire(t + secs(10)), "the probe");
        // Its call is dropped: no outcome is recorded.
        assert!(!b.try_acquire(t + secs(15)));
        assert!(
            b.try_acquire(t + secs(20)),
            "a new round after another break"
        );
        b.record(t + secs(21), true);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    /// A round is stale a whole break after its newest probe, not after it began: a probe let
    /// through late in a round that sat idle is not voided by the next caller (who would get
    /// one more probe than `probes`), whether the probe before it answered or was given back.
    #[test]
    fn a_probe_let_through_late_in_a_round_is_not_voided() {
        let b = CircuitBreaker::new(4, 1, 0.5, secs(30), 2).unwrap();
        let t = Instant::now();
        b.record(t, false);
        let p1 = b.acquire(t + secs(30)).expect("the first probe");
        b.record_permit(t + secs(30), p1, true);
        // Idle for 40 s, then the second probe.
        let p2 = b.acquire(t + secs(70)).expect("the second probe");
        assert!(
            b.acquire(t + secs(70) + Duration::from_millis(1)).is_none(),
            "two probes out of two are taken"
        );
        assert!(!b.would_admit(t + secs(71)));
        assert!(
            b.record_counted(t + secs(71), p2, true),
            "p2's answer counts"
        );
        assert_eq!(b.state(), BreakerState::Closed);

        // One probe, given back (a concurrency limit refused it), taken again late.
        let b = CircuitBreaker::new(4, 1, 0.5, secs(30), 1).unwrap();
        b.record(t, false);
        let p1 = b.acquire(t + secs(30)).expect("the probe");
        b.release_permit(p1);
        let p2 = b.acquire(t + secs(70)).expect("the probe, again");
        assert!(
            b.acquire(t + secs(71)).is_none(),
            "one probe out of one is taken"
        );
        assert!(b.record_counted(t + secs(71), p2, false));
        assert_eq!(b.state(), BreakerState::Open);
        // A probe that never answers still frees the round a break after it was let through.
        let p3 = b.acquire(t + secs(101)).expect("a probe after the break");
        assert!(b.acquire(t + secs(130)).is_none());
        let p4 = b.acquire(t + secs(131)).expect("a new round");
        assert!(
            !b.record_counted(t + secs(132), p3, true),
            "p3's round is over"
        );
        assert!(b.record_counted(t + secs(132), p4, true));
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn half_open_probes_close_or_reopen() {
        let b = CircuitBreaker::new(4, 2, 0.5, secs(10), 2).unwrap();
        let t = Instant::now();
        b.record(t, false);
        b.record(t, false);
        assert!(!b.try_acquire(t + secs(9)));
        // Break over: two probes, no third.
        assert!(b.try_acquire(t + secs(10)));
        assert!(b.try_acquire(t + secs(10)));
        assert!(!b.try_acquire(t + secs(10)));
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.record(t + secs(11), false);
        assert_eq!(
            b.state(),
            BreakerState::HalfOpen,
            "one of two probes answered"
        );
        b.record(t + secs(11), true);
        // 1 failure / 2 probes = 0.5 >= 0.5: open again, from that moment.
        assert_eq!(b.state(), BreakerState::Open);
        assert!(!b.try_acquire(t + secs(20)));
        assert!(b.try_acquire(t + secs(21)));
        assert!(b.try_acquire(t + secs(21)));
        b.record(t + secs(22), true);
        b.record(t + secs(22), true);
        assert_eq!(b.state(), BreakerState::Closed);
        // Closed with an empty window: one failure is below min_calls.
        b.record(t + secs(23), false);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    /// Following a fleet's breaker that opened earlier does not cut short a break this
    /// breaker started on its own since; a breaker that follows it closed starts empty.
    #[cfg(feature = "redis")]
    #[test]
    fn following_the_fleet_keeps_a_later_own_break() {
        let b = CircuitBreaker::new(10, 2, 0.5, secs(10), 1).unwrap();
        let t0 = Instant::now() + secs(100);
        for _ in 0..2 {
            let p = b.acquire(t0).unwrap();
            b.record_permit(t0, p, false);
        }
        assert_eq!(b.state(), BreakerState::Open);
        // The fleet's break began 8 s before this one's.
        b.follow_open(t0 - secs(8));
        assert!(
            b.acquire(t0 + secs(3)).is_none(),
            "its own break still runs"
        );
        assert!(b.acquire(t0 + secs(10)).is_some());
        b.follow_closed();
        assert_eq!(b.state(), BreakerState::Closed);
        let p = b.acquire(t0 + secs(10)).unwrap();
        b.record_permit(t0 + secs(10), p, false);
        assert_eq!(
            b.state(),
            BreakerState::Closed,
            "one failure in an empty window"
        );
    }
}
