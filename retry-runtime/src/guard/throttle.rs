//! Adaptive throttling, the client-side throttling of Google's SRE book ("Handling Overload"):
//! a client that sees its requests fail sheds part of them locally, before they reach the
//! overloaded service, with a probability that grows with the failures it saw recently.
//!
//! The throttle is plain data (atomics), so that a `static` can take it out of `new`'s
//! `Result` on every platform, and lock-free: a record is a few atomic updates (an accepted
//! request in the latest bucket is one).

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::ConfigError;

/// The window is counted in this many buckets of `window / BUCKETS`.
const BUCKETS: u64 = 10;

/// A count in a bucket word: the low 32 bits (saturating), below the bucket's lap.
const COUNT: u64 = u32::MAX as u64;

/// The instant epochs are counted from, for every throttle: 2^32 s (136 years) before the
/// first instant any throttle saw, or as far back as the platform's `Instant` goes, so that
/// the instants a caller passes come after it.
static ORIGIN: OnceLock<Instant> = OnceLock::new();

fn origin(now: Instant) -> Instant {
    *ORIGIN.get_or_init(|| {
        (0..=32)
            .rev()
            .find_map(|b| now.checked_sub(Duration::from_secs(1 << b)))
            .unwrap_or(now)
    })
}

/// Nanoseconds from the origin to `now` (0 before it).
fn since_origin(now: Instant) -> u128 {
    now.saturating_duration_since(origin(now)).as_nanos()
}

/// An instant as a throttle counts it: nanoseconds since an origin shared by every throttle.
/// [`Stamp::of`] converts an `Instant` of any clock (a virtual one included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(u128);

impl Stamp {
    /// The origin itself (what a caller without a throttle passes: it is not read).
    pub const ORIGIN: Stamp = Stamp(0);

    /// The stamp of `now`.
    #[inline]
    pub fn of(now: Instant) -> Stamp {
        Stamp(since_origin(now))
    }

    /// The system's monotonic clock (the one `Instant::now()` reads), read coarsely: the
    /// value the kernel last stored (`CLOCK_MONOTONIC_COARSE`, updated every tick, a few
    /// milliseconds apart, and up to two ticks old), which costs a fifth of an exact reading.
    /// `None` where there is no such clock (not Linux or Android), or its ticks are further
    /// apart than [`COARSE_TICK`].
    #[inline]
    fn coarse() -> Option<Stamp> {
        coarse::now().map(Stamp)
    }
}

/// The widest tick of the coarse clock a throttle uses: 10 ms (a kernel ticking at 100 Hz).
/// Its readings are up to two ticks old (measured: 3.6 to 7.6 ms with 4 ms ticks).
pub const COARSE_TICK: Duration = Duration::from_millis(10);

/// The narrowest bucket (a tenth of the window) counted on the coarse clock: 100 ms, five
/// times the oldest a reading can be. A count lands in the next bucket up to two ticks late.
const COARSE_WIDTH: u128 = 100_000_000;

#[cfg(any(target_os = "linux", target_os = "android"))]
mod coarse {
    use std::sync::OnceLock;
    use std::time::Instant;

    use rustix::time::{ClockId, Timespec, clock_getres, clock_gettime};

    /// The nanoseconds `t` holds, 0 for a negative reading (none is).
    fn nanos(t: Timespec) -> i64 {
        let secs = u64::try_from(t.tv_sec).unwrap_or(0);
        let ns = secs
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0));
        i64::try_from(ns).unwrap_or(i64::MAX)
    }

    /// What to add to a reading of the monotonic clock to count it from the origin, or
    /// `None` when the coarse clock ticks more than `COARSE_TICK` apart. Found once, from an
    /// `Instant::now()` between two exact readings (all three read `CLOCK_MONOTONIC`) at most
    /// 20 µs apart (tried eight times, for a thread descheduled between them): the later
    /// one is taken, so that a coarse reading is never ahead of an exact one.
    fn offset() -> Option<i64> {
        static OFFSET: OnceLock<Option<i64>> = OnceLock::new();
        *OFFSET.get_or_init(|| {
            let tick = clock_getres(ClockId::MonotonicCoarse);
            if nanos(tick) > super::COARSE_TICK.as_nanos() as i64 {
                return None;
            }
            let mut offset = None;
            for _ in 0..8 {
                let before = nanos(clock_gettime(ClockId::Monotonic));
                let now = Instant::now();
                let after = nanos(clock_gettime(ClockId::Monotonic));
                let since = i64::try_from(super::since_origin(now)).ok()?;
                offset = since.checked_sub(after);
                if after.saturating_sub(before) <= 20_000 {
                    break;
                }
            }
            offset
        })
    }

    /// The coarse clock's reading, counted from the origin.
    #[inline]
    pub(super) fn now() -> Option<u128> {
        let offset = offset()?;
        let raw = nanos(clock_gettime(ClockId::MonotonicCoarse));
        Some(u128::try_from(raw.saturating_add(offset)).unwrap_or(0))
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod coarse {
    #[inline]
    pub(super) fn now() -> Option<u128> {
        None
    }
}

/// Which lap of the ring a bucket of `epoch` counts, modulo 2^32: the tag of its words.
const fn lap(epoch: u64) -> u64 {
    (epoch / BUCKETS) & COUNT
}

/// A bucket word holding `count` for `lap`.
const fn word(lap: u64, count: u64) -> u64 {
    lap << 32 | count
}

/// Client-side adaptive throttling (SPEC section 16: `throttle = MY_THROTTLE` in the
/// attribute), shared by every call that names it.
///
/// Over the last `window`, it counts the *requests* (attempts the application made) and the
/// *accepts* (those the service accepted: that did not fail with a retryable error, one a
/// policy's rule matches, whatever that rule's retries). Before each attempt, it rejects
/// locally with probability
///
/// `max(0, (requests − k·accepts) / (requests + 1))`
///
/// so while the service accepts at least one request in `k`, nothing is rejected, and as it
/// fails more, the client sends less (a `k` of 2, the book's, lets through about twice what
/// the service accepts; a larger `k` is more lenient).
///
/// Randomness and time are the caller's: [`should_reject`](Self::should_reject) takes a draw
/// from the caller's (seedable) RNG, and every method the instant from the caller's clock.
/// The window is counted in ten buckets of `window / 10`: a count is forgotten between
/// 0.9·`window` and `window` after it was recorded. An instant earlier than one already
/// recorded (a clock that went back) counts as the latest one. (The retry loop of a blocking
/// call on the system's clock admits its first attempt, for a window of a second or more, at
/// the system clock's coarse reading instead: [`coarse_now`](Self::coarse_now), the one
/// method that reads a clock itself.) A bucket counts up to
/// 2^32 − 1 requests, and as many of them not accepted (more saturate).
///
/// The retry loop counts an attempt in the bucket of its admission (or a later one another
/// call has moved to), when its outcome comes, without reading the clock again: keep the
/// `window` well above the longest an attempt may take (the book uses two minutes). An
/// attempt that outlasts the window has left it by the time it fails, and under bursty
/// traffic (no admission in between to move the window on) its failure never raises the
/// probability.
///
/// In the book, requests the throttle rejected count as requests too (the application asked
/// for them; they are not accepts): record them with `accepted = false`. That is what keeps
/// the probability up while the service keeps failing, and brings it down once the service
/// accepts again.
///
/// ```
/// use std::time::{Duration, Instant};
/// use retry_runtime::AdaptiveThrottle;
///
/// static THROTTLE: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
///     Ok(t) => t,
///     Err(_) => panic!("invalid throttle"), // evaluated at compile time
/// };
///
/// let t0 = Instant::now();
/// // 9 requests, 2 accepted: (9 - 2·2) / (9 + 1) = 0.5
/// for i in 0..9 {
///     THROTTLE.record(t0, i < 2);
/// }
/// assert_eq!(THROTTLE.reject_probability(t0), 0.5);
/// assert!(THROTTLE.should_reject(t0, 0.3));  // a draw below 0.5 rejects
/// assert!(!THROTTLE.should_reject(t0, 0.7));
/// // A minute later those counts are forgotten.
/// assert_eq!(THROTTLE.reject_probability(t0 + Duration::from_secs(60)), 0.0);
/// ```
pub struct AdaptiveThrottle {
    k: f64,
    window: Duration,
    /// `window / BUCKETS` in nanoseconds, at least 1.
    width: u128,
    /// Whether a bucket is wide enough to be counted on the coarse clock (`COARSE_WIDTH`).
    coarse: bool,
    /// The latest epoch (`width`s since the origin) recorded.
    latest: AtomicU64,
    /// Bucket `e % BUCKETS` counts epoch `e`: each word holds `lap(e)` in its high half and
    /// the count in its low half, so that a count and the epoch it belongs to change in one
    /// atomic step. (A word is read only if its lap is the one expected: a bucket that was
    /// not written for a multiple of 2^32 laps would count again, 136 years for a 1 s window.)
    /// (A bucket's accepts are its requests less its refusals: an accepted request is
    /// counted with one atomic update.)
    requests: [AtomicU64; BUCKETS as usize],
    refusals: [AtomicU64; BUCKETS as usize],
    /// How many times the window changed in a way that can raise the probability: a request
    /// recorded as not accepted, or the head moving on (which forgets a bucket).
    changes: AtomicU64,
    /// The value `changes` had when the probability was last found to be 0, or `NO_ZERO`:
    /// while `changes` keeps it, the probability is still 0, given without reading the
    /// window's counters (an accepted request cannot raise it).
    zero: AtomicU64,
}

/// No probability known to be 0 (`changes` never reaches it: one increment per record).
const NO_ZERO: u64 = u64::MAX;

// What lets a `static` take a throttle out of `new`'s `Result` on every platform.
const _: () = assert!(!std::mem::needs_drop::<AdaptiveThrottle>());

impl fmt::Debug for AdaptiveThrottle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveThrottle")
            .field("k", &self.k)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl AdaptiveThrottle {
    /// A throttle with multiplier `k` over the last `window`. Errors: `k` not a finite number
    /// >= 1; a `window` under 10 ns (it is counted in ten buckets of whole nanoseconds).
    pub const fn new(k: f64, window: Duration) -> Result<Self, ConfigError> {
        if !(k.is_finite() && k >= 1.0) {
            return Err(ConfigError::new("k", "must be a finite number >= 1"));
        }
        let width = window.as_nanos() / BUCKETS as u128;
        if width == 0 {
            return Err(ConfigError::new(
                "window",
                "must be at least 10 nanoseconds (it is counted in ten buckets)",
            ));
        }
        Ok(Self {
            k,
            window,
            width,
            coarse: width >= COARSE_WIDTH,
            latest: AtomicU64::new(0),
            requests: [const { AtomicU64::new(0) }; BUCKETS as usize],
            refusals: [const { AtomicU64::new(0) }; BUCKETS as usize],
            changes: AtomicU64::new(0),
            zero: AtomicU64::new(NO_ZERO),
        })
    }

    /// The epoch of `now`: `width`s since the origin (0 before it, `u64::MAX` past 2^64).
    #[cfg(test)]
    fn epoch(&self, now: Instant) -> u64 {
        self.epoch_at(since_origin(now))
    }

    /// The epoch of the instant `nanos` after the origin.
    fn epoch_at(&self, nanos: u128) -> u64 {
        // A 64-bit division when both fit (the time since the origin for 584 years, a window
        // up to 5,800 years), which is several times cheaper than a 128-bit one.
        match (u64::try_from(nanos), u64::try_from(self.width)) {
            (Ok(n), Ok(w)) => n / w,
            _ => u64::try_from(nanos / self.width).unwrap_or(u64::MAX),
        }
    }

    /// Adds one to `counter` for `epoch`, replacing the count of an older lap. Not if a newer lap
    /// holds the word: then `epoch` has left the window.
    fn add(&self, counter: &AtomicU64, epoch: u64) {
        let lap = lap(epoch);
        let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
            if w >> 32 == lap {
                Some(word(lap, (w & COUNT).saturating_add(1).min(COUNT)))
            } else if self.latest.load(Ordering::Acquire) >= epoch.saturating_add(BUCKETS) {
                // A later record moved `latest` on before it wrote this word.
                None
            } else {
                Some(word(lap, 1))
            }
        });
    }

    /// Counts one request at `now`, and whether the service accepted it (it did not fail
    /// with a retryable error).
    pub fn record(&self, now: Instant, accepted: bool) {
        self.record_at(Stamp::of(now), accepted);
    }

    /// [`record`](Self::record) at `now`.
    pub fn record_at(&self, now: Stamp, accepted: bool) {
        self.count_in(self.advance(self.epoch_at(now.0)), accepted);
    }

    /// The current instant read from the system's monotonic clock coarsely (up to two ticks
    /// old, a few milliseconds: see [`COARSE_TICK`]), for a caller whose clock is the
    /// system's: `None` when this throttle's buckets are narrower than 100 ms (a window under
    /// a second), or there is no coarse clock (only Linux and Android have one). The loop
    /// asks this first, and reads its own clock only on `None`: an exact reading costs five
    /// times as much.
    #[inline]
    pub fn coarse_now(&self) -> Option<Stamp> {
        if self.coarse { Stamp::coarse() } else { None }
    }

    /// Whether the instant `nanos` after the origin is in the bucket of `epoch` or an earlier
    /// one: `epoch_at(nanos) <= epoch`, without the division.
    fn not_after(&self, nanos: u128, epoch: u64) -> bool {
        // (Epochs saturate at `u64::MAX`.)
        epoch == u64::MAX || nanos < (u128::from(epoch) + 1).saturating_mul(self.width)
    }

    /// Counts one request in the bucket of `epoch`.
    fn count_in(&self, epoch: u64, accepted: bool) {
        let i = (epoch % BUCKETS) as usize;
        self.add(&self.requests[i], epoch);
        if !accepted {
            self.add(&self.refusals[i], epoch);
            self.changed();
        }
    }

    /// After a change that can raise the probability (a request counted as not accepted, the
    /// head moved): a probability of 0 known before is no longer. The change is made first, so
    /// that whoever reads the new `changes` sees it.
    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Moves the latest bucket up to `epoch`: the head, `epoch` or a later one.
    fn advance(&self, epoch: u64) -> u64 {
        let latest = self.latest.fetch_max(epoch, Ordering::AcqRel);
        if latest < epoch {
            self.changed();
        }
        latest.max(epoch)
    }

    /// Counts one request in the latest bucket anyone has seen (no clock reading): for an
    /// attempt whose admission asked for [`reject_probability`](Self::reject_probability),
    /// which moved the latest bucket up to its own, so the attempt is counted in the bucket it
    /// was admitted in or a later one.
    pub fn record_recent(&self, accepted: bool) {
        self.count_in(self.latest.load(Ordering::Acquire), accepted);
    }

    /// The requests and accepts of the window that ends at `now`; moves the latest bucket up
    /// to `now`'s.
    #[cfg(test)]
    fn counts(&self, now: Instant) -> (u64, u64) {
        self.counts_at(self.head_at(self.epoch(now)))
    }

    /// The head of the window at `now_epoch`: `now_epoch` or a later latest one. The latest
    /// bucket moves up to `now_epoch` (what `record_recent` counts in from now on).
    fn head_at(&self, now_epoch: u64) -> u64 {
        let latest = self.latest.load(Ordering::Acquire);
        if now_epoch > latest {
            self.advance(now_epoch)
        } else {
            latest
        }
    }

    /// The requests and accepts of the window that ends at `head`.
    fn counts_at(&self, head: u64) -> (u64, u64) {
        let (mut requests, mut accepts) = (0, 0);
        for i in 0..BUCKETS {
            // The epoch of bucket `i` in the window (none yet near the origin).
            let Some(epoch) = head.checked_sub((head % BUCKETS + BUCKETS - i) % BUCKETS) else {
                continue;
            };
            let count = |word: &AtomicU64| {
                let w = word.load(Ordering::Acquire);
                if w >> 32 == lap(epoch) { w & COUNT } else { 0 }
            };
            // At most 10 · (2^32 − 1) each: no overflow. Refusals are read before requests
            // (a refused request is written the other way round), so a record made between
            // the two reads adds only requests, read as accepted. The bucket may also be
            // recycled between them (the head moved on): its refusals are then read and its
            // requests are not. The accepts are counted bucket by bucket, so such a bucket
            // adds nothing, instead of taking its refusals from the other buckets' accepts.
            let refused = count(&self.refusals[i as usize]);
            let made = count(&self.requests[i as usize]);
            requests += made;
            accepts += made.saturating_sub(refused);
        }
        (requests, accepts)
    }

    /// The probability of rejecting an attempt at `now`:
    /// `max(0, (requests − k·accepts) / (requests + 1))` over the last `window`, a number in
    /// `[0, 1]` (never NaN).
    ///
    /// Only a request recorded as not accepted, or the head moving on, can raise the
    /// probability (an accepted request adds one request and one accept, and `k >= 1`), so
    /// once the counters gave 0, the throttle gives 0 again without reading them until one
    /// of those happens. (A reader that overlaps such a change may still be given the 0 from
    /// before it, as it would had it come first.)
    pub fn reject_probability(&self, now: Instant) -> f64 {
        self.reject_probability_at(Stamp::of(now))
    }

    /// [`reject_probability`](Self::reject_probability) at `now`.
    pub fn reject_probability_at(&self, now: Stamp) -> f64 {
        let nanos = now.0;
        let latest = self.latest.load(Ordering::Acquire);
        if self.not_after(nanos, latest)
            && self.zero.load(Ordering::Acquire) == self.changes.load(Ordering::Acquire)
        {
            return 0.0;
        }
        let head = self.head_at(self.epoch_at(nanos));
        // Read after the head moved and before the counts: a later change is a new value.
        let changes = self.changes.load(Ordering::Acquire);
        let (requests, accepts) = self.counts_at(head);
        let p = probability(self.k, requests, accepts);
        if p == 0.0 {
            self.zero.store(changes, Ordering::Release);
        }
        p
    }

    /// Whether to reject an attempt at `now`, given `draw`, a number drawn uniformly from
    /// `[0, 1)` by the caller: `draw < reject_probability(now)`. Never rejects while the
    /// probability is 0, nor for a NaN draw. Records nothing.
    pub fn should_reject(&self, now: Instant, draw: f64) -> bool {
        let p = self.reject_probability(now);
        p > 0.0 && draw < p
    }

    /// The multiplier `k`.
    pub const fn k(&self) -> f64 {
        self.k
    }

    /// The window over which requests and accepts are counted.
    pub const fn window(&self) -> Duration {
        self.window
    }
}

/// `max(0, (requests − k·accepts) / (requests + 1))`, in `[0, 1]`. With `k` finite and >= 1
/// and counts below 2^64, nothing is NaN: `k·accepts` may round to infinity only when it
/// dwarfs `requests`, and then the quotient is −∞, clamped to 0.
fn probability(k: f64, requests: u64, accepts: u64) -> f64 {
    let requests = requests as f64;
    let p = (requests - k * accepts as f64) / (requests + 1.0);
    p.clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn throttle(k: f64, window: Duration) -> AdaptiveThrottle {
        AdaptiveThrottle::new(k, window).unwrap()
    }

    /// What a reader sees when the oldest bucket is recycled between its two reads: that
    /// bucket's refusals (1000, all its requests) are of the window's lap, its requests of
    /// the next one. The bucket adds nothing: the other bucket's 500 accepted requests stay
    /// accepted (before, the 1000 refusals were taken from them: no accept, p near 1).
    #[test]
    fn a_bucket_recycled_between_its_reads_takes_no_accepts_from_the_others() {
        let t = throttle(2.0, secs(10));
        let head = BUCKETS + 3;
        t.latest.store(head, Ordering::Release);
        let oldest = head + 1 - BUCKETS;
        let o = (oldest % BUCKETS) as usize;
        t.refusals[o].store(word(lap(oldest), 1000), Ordering::Release);
        t.requests[o].store(word(lap(oldest + BUCKETS), 7), Ordering::Release);
        let h = (head % BUCKETS) as usize;
        t.requests[h].store(word(lap(head), 500), Ordering::Release);
        assert_eq!(t.counts_at(head), (500, 500));
    }

    /// The start of the bucket of `now` (buckets are counted from an origin shared by every
    /// throttle, not from the first record).
    fn bucket_start(t: &AdaptiveThrottle, now: Instant) -> Instant {
        let nanos = u128::from(t.epoch(now)) * t.width;
        origin(now) + Duration::from_nanos(u64::try_from(nanos).unwrap())
    }

    /// Records `requests` requests at `now`, the first `accepts` of them accepted.
    fn record(t: &AdaptiveThrottle, now: Instant, requests: u64, accepts: u64) {
        for i in 0..requests {
            t.record(now, i < accepts);
        }
    }

    #[test]
    fn rejects_invalid_values() {
        let p = |r: Result<AdaptiveThrottle, ConfigError>| r.unwrap_err().parameter();
        for k in [0.0, 0.999, -2.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(p(AdaptiveThrottle::new(k, secs(1))), "k");
        }
        for w in [Duration::ZERO, Duration::from_nanos(9)] {
            assert_eq!(p(AdaptiveThrottle::new(2.0, w)), "window");
        }
        assert!(AdaptiveThrottle::new(1.0, Duration::from_nanos(10)).is_ok());
        assert!(AdaptiveThrottle::new(f64::MAX, Duration::MAX).is_ok());
        let t = throttle(1.5, secs(30));
        assert_eq!((t.k(), t.window()), (1.5, secs(30)));
    }

    #[test]
    fn the_probability_follows_the_formula() {
        let t0 = Instant::now();
        let t = throttle(2.0, secs(60));
        assert_eq!(t.reject_probability(t0), 0.0, "nothing recorded");
        record(&t, t0, 9, 2);
        assert_eq!(t.reject_probability(t0), 0.5, "(9 - 2·2) / 10");
        let t = throttle(2.0, secs(60));
        record(&t, t0, 10, 4);
        assert_eq!(t.reject_probability(t0), (10.0 - 8.0) / 11.0);
        let t = throttle(1.5, secs(60));
        record(&t, t0, 100, 20);
        assert_eq!(t.reject_probability(t0), (100.0 - 1.5 * 20.0) / 101.0);
        // Every request failed: n / (n + 1).
        let t = throttle(2.0, secs(60));
        record(&t, t0, 3, 0);
        assert_eq!(t.reject_probability(t0), 0.75);
        // Enough accepts: never negative.
        for (requests, accepts) in [(10, 5), (10, 6), (10, 10), (1, 1)] {
            let t = throttle(2.0, secs(60));
            record(&t, t0, requests, accepts);
            assert_eq!(t.reject_probability(t0), 0.0, "{requests} / {accepts}");
        }
        // k = 1: rejects in proportion to the failures, just below it.
        let t = throttle(1.0, secs(60));
        record(&t, t0, 99, 49);
        assert_eq!(t.reject_probability(t0), 0.5, "(99 - 49) / 100");
    }

    #[test]
    fn counts_are_spread_over_the_window() {
        let t0 = Instant::now();
        let t = throttle(2.0, secs(10));
        // One request a second, all failed, for the whole window: 10 / 11.
        for s in 0..10 {
            t.record(t0 + secs(s), false);
        }
        assert_eq!(t.reject_probability(t0 + secs(9)), 10.0 / 11.0);
        assert_eq!(t.counts(t0 + secs(9)), (10, 0));
    }

    #[test]
    fn old_counts_are_forgotten() {
        let t = throttle(2.0, secs(10));
        let t0 = bucket_start(&t, Instant::now());
        record(&t, t0, 9, 0);
        let ms = |m: u64| t0 + Duration::from_millis(m);
        assert_eq!(t.reject_probability(ms(9_999)), 0.9, "still in the window");
        assert_eq!(t.reject_probability(ms(10_000)), 0.0, "a window later");
        // Newer counts stay while older ones leave, bucket by bucket (on a throttle that has
        // not been asked about later instants: asking moves its head, see
        // `asking_moves_the_head_and_record_recent_counts_there`).
        let t = throttle(2.0, secs(10));
        record(&t, t0, 9, 0);
        record(&t, ms(5_500), 3, 0);
        assert_eq!(t.reject_probability(ms(9_999)), 12.0 / 13.0);
        assert_eq!(t.reject_probability(ms(10_000)), 0.75);
        assert_eq!(t.reject_probability(ms(14_999)), 0.75);
        assert_eq!(t.reject_probability(ms(15_000)), 0.0);
        // A bucket reused after a window starts from zero.
        record(&t, ms(20_000), 1, 0);
        assert_eq!(t.counts(ms(20_000)), (1, 0));
        assert_eq!(t.reject_probability(ms(20_000)), 0.5);
        // Long after, everything is gone.
        assert_eq!(t.reject_probability(t0 + secs(1_000_000)), 0.0);
        record(&t, t0 + secs(1_000_000), 1, 1);
        assert_eq!(t.counts(t0 + secs(1_000_000)), (1, 1));
    }

    #[test]
    fn asking_moves_the_head_and_record_recent_counts_there() {
        let t = throttle(2.0, secs(10));
        let t0 = bucket_start(&t, Instant::now());
        // Nothing seen yet: recorded in the first bucket there is.
        t.reject_probability(t0);
        t.record_recent(false);
        assert_eq!(t.counts(t0), (1, 0));
        // Asked at 5.5 s: what is recorded without an instant counts there, and leaves the
        // window a window after it, not after t0.
        let later = t0 + Duration::from_millis(5_500);
        t.reject_probability(later);
        t.record_recent(true);
        t.record_recent(false);
        assert_eq!(t.counts(later), (3, 1));
        assert_eq!(t.counts(t0 + secs(10)), (2, 1));
        assert_eq!(t.counts(t0 + Duration::from_millis(14_999)), (2, 1));
        assert_eq!(t.counts(t0 + secs(15)), (0, 0));
    }

    #[test]
    fn a_clock_that_goes_back_counts_as_the_latest_instant() {
        let t0 = Instant::now();
        let t = throttle(2.0, secs(10));
        let late = t0 + secs(100);
        record(&t, late, 1, 0);
        // An earlier instant reads and records as the latest one.
        if let Some(early) = t0.checked_sub(secs(3600)) {
            record(&t, early, 1, 0);
        }
        record(&t, t0, 1, 0);
        assert_eq!(t.reject_probability(t0), t.reject_probability(late));
        assert!(t.reject_probability(t0) > 0.6);
        assert_eq!(t.reject_probability(late + secs(10)), 0.0);
    }

    #[test]
    fn a_known_zero_gives_way_to_a_refusal_and_to_the_window_moving_on() {
        let t = throttle(2.0, secs(10));
        let t0 = bucket_start(&t, Instant::now());
        // Ten accepts in the first bucket: 0, now known for this bucket.
        record(&t, t0, 10, 10);
        assert_eq!(t.reject_probability(t0), 0.0);
        assert_eq!(t.reject_probability(t0), 0.0);
        // Refusals in the same bucket count at once: (10 + 12 - 2·10) / (22 + 1).
        for _ in 0..12 {
            t.record_recent(false);
        }
        assert_eq!(t.reject_probability(t0), 2.0 / 23.0);
        // Accepts bring it back to 0: (32 - 2·20) / 33, below 0.
        record(&t, t0, 10, 10);
        assert_eq!(t.reject_probability(t0), 0.0);
        // Five refusals half a window later: still 0 while the accepts are in the window
        // ((37 - 40) / 38), and 5 / 6 once their bucket has left it, with no record in
        // between.
        let half = t0 + secs(5);
        record(&t, half, 5, 0);
        assert_eq!(t.reject_probability(half), 0.0);
        assert_eq!(t.reject_probability(half), 0.0);
        assert_eq!(t.reject_probability(t0 + Duration::from_millis(9_999)), 0.0);
        assert_eq!(t.reject_probability(t0 + secs(10)), 5.0 / 6.0);
    }

    #[test]
    fn a_known_zero_gives_way_to_a_head_moved_by_an_accepted_request() {
        let t = throttle(2.0, secs(10));
        let t0 = bucket_start(&t, Instant::now());
        // 20 accepts, then 5 refusals half a window later: (25 - 40) / 26, so 0, known.
        record(&t, t0, 20, 20);
        let half = t0 + secs(5);
        record(&t, half, 5, 0);
        assert_eq!(t.reject_probability(half), 0.0);
        // An accepted request a window after t0 moves the head: the accepts leave the window,
        // (6 - 2) / 7, though nothing was refused since the 0 was known and the instant asked
        // about is not past the head.
        let later = t0 + secs(10);
        t.record(later, true);
        assert_eq!(t.reject_probability(later), 4.0 / 7.0);
    }

    #[test]
    fn a_known_zero_is_the_counters_answer_after_concurrent_records() {
        // Threads record accepts and refusals, the more so refusals, and ask for the
        // probability between records; once they are done, the answer is the counters'.
        for seed in 0..20u64 {
            let t = throttle(1.5, secs(3600));
            let t0 = Instant::now();
            // (As a call's admission does before its outcome is recorded.)
            assert_eq!(t.reject_probability(t0), 0.0);
            std::thread::scope(|s| {
                for i in 0..4u64 {
                    let t = &t;
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(seed * 4 + i);
                        for _ in 0..2_000 {
                            // Accepted 2 times in 3: the probability hovers around 0.
                            t.record_recent(rng.random_range(0..3) > 0);
                            let p = t.reject_probability(t0);
                            assert!((0.0..=1.0).contains(&p));
                        }
                    });
                }
            });
            let p = t.reject_probability(t0);
            let (requests, accepts) = t.counts(t0);
            assert_eq!(requests, 8_000);
            assert_eq!(p, probability(1.5, requests, accepts), "seed {seed}");
        }
    }

    /// The coarse clock is the exact one as the kernel last stored it: never ahead of a
    /// reading made after it, and at most two ticks (and a millisecond for a late timer
    /// interrupt and the calibration) behind one made before it, at every phase of three
    /// ticks of real time; only a window of a second or more (buckets of 100 ms) reads it.
    /// (A host that delays the kernel's timer interrupt, a loaded virtual machine, makes the
    /// coarse clock later than that now and then: up to 1% of the readings may be, by at most
    /// 100 ms: a run of the whole suite beside a build once saw one such reading.)
    #[test]
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn the_coarse_clock_is_the_exact_one_up_to_two_ticks_late() {
        let wide = throttle(2.0, secs(1));
        let narrow = throttle(2.0, Duration::from_millis(999));
        assert_eq!(narrow.coarse_now(), None);
        let tick = rustix::time::clock_getres(rustix::time::ClockId::MonotonicCoarse);
        let tick = u128::try_from(tick.tv_nsec).unwrap();
        let late = 2 * tick + 1_000_000;
        let start = Stamp::of(Instant::now());
        let (mut seen, mut delayed) = (0u32, 0u32);
        loop {
            let before = Stamp::of(Instant::now());
            let coarse = wide.coarse_now().expect("a coarse clock on Linux");
            let after = Stamp::of(Instant::now());
            assert!(coarse <= after, "{coarse:?} after {after:?}");
            assert!(
                coarse.0 + 100_000_000 >= before.0,
                "{coarse:?} more than 100 ms before {before:?}"
            );
            if coarse.0 + late < before.0 {
                delayed += 1;
            }
            seen += 1;
            if after.0 - start.0 > 3 * tick && seen >= 1_000 {
                break;
            }
        }
        assert!(
            delayed * 100 <= seen,
            "{delayed} of {seen} readings more than two ticks late"
        );
    }

    /// Counts made on the coarse clock and on the exact one land in the same window.
    #[test]
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn coarse_and_exact_readings_count_in_one_window() {
        let t = throttle(2.0, secs(60));
        for i in 0..10 {
            let now = t.coarse_now().expect("a coarse clock on Linux");
            t.record_at(now, i < 2);
        }
        // 10 requests, 2 accepted: (10 - 2·2) / 11.
        assert_eq!(t.reject_probability(Instant::now()), 6.0 / 11.0);
        assert_eq!(t.reject_probability(Instant::now() + secs(60)), 0.0);
    }

    #[test]
    fn should_reject_compares_the_draw() {
        let t0 = Instant::now();
        let t = throttle(2.0, secs(60));
        for draw in [-1.0, 0.0, 0.5, f64::NAN, f64::NEG_INFINITY] {
            assert!(!t.should_reject(t0, draw), "probability 0, draw {draw}");
        }
        record(&t, t0, 9, 2); // 0.5
        assert!(t.should_reject(t0, 0.0));
        assert!(t.should_reject(t0, 0.499_999));
        assert!(!t.should_reject(t0, 0.5));
        assert!(!t.should_reject(t0, f64::NAN));
        assert!(!t.should_reject(t0, f64::INFINITY));
        assert!(t.should_reject(t0, f64::NEG_INFINITY));
    }

    #[test]
    fn concurrent_records_are_all_counted() {
        let t = throttle(2.0, secs(10));
        let t0 = bucket_start(&t, Instant::now());
        // 8 threads, each across five buckets of the window, in its own order.
        std::thread::scope(|scope| {
            for thread in 0..8u64 {
                let t = &t;
                scope.spawn(move || {
                    for i in 0..5_000u64 {
                        let at = Duration::from_millis((i * 7 + thread * 131) % 5_000);
                        t.record(t0 + at, i % 4 == 0);
                    }
                });
            }
        });
        assert_eq!(t.counts(t0 + secs(5)), (40_000, 10_000));
        // Ten seconds after the last bucket they were counted in, all are forgotten, while
        // new records count from zero.
        std::thread::scope(|scope| {
            for _ in 0..8 {
                let t = &t;
                scope.spawn(move || {
                    for _ in 0..1_000 {
                        t.record(t0 + secs(15), true);
                    }
                });
            }
        });
        assert_eq!(t.counts(t0 + secs(15)), (8_000, 8_000));
    }

    /// With a fixed seed, the share rejected matches the probability. 100,000 draws: the
    /// standard deviation of the share is at most sqrt(0.25 / 100,000) ≈ 0.0016; the
    /// tolerance, 0.01, is over six of them.
    #[test]
    fn should_reject_rejects_with_the_probability() {
        const DRAWS: u32 = 100_000;
        const TOLERANCE: f64 = 0.01;
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(0x5EED);
        for (requests, accepts, k) in [(9, 2, 2.0), (10, 4, 2.0), (100, 0, 2.0), (100, 30, 1.5)] {
            let t = throttle(k, secs(60));
            record(&t, t0, requests, accepts);
            let p = t.reject_probability(t0);
            let rejected = (0..DRAWS)
                .filter(|_| t.should_reject(t0, rng.random::<f64>()))
                .count();
            let share = rejected as f64 / f64::from(DRAWS);
            assert!(
                (share - p).abs() < TOLERANCE,
                "{requests}/{accepts}, k = {k}: rejected {share}, probability {p}"
            );
        }
    }

    #[test]
    fn saturated_counts_stay_finite() {
        let t0 = Instant::now();
        let t = throttle(2.0, secs(10));
        t.record(t0, false);
        // Every bucket of the window full; accepts only in the latest.
        let head = t.latest.load(Ordering::SeqCst);
        for back in 0..BUCKETS {
            let epoch = head - back;
            let i = (epoch % BUCKETS) as usize;
            t.requests[i].store(word(lap(epoch), COUNT), Ordering::SeqCst);
            let refusals = if back == 0 { 0 } else { COUNT };
            t.refusals[i].store(word(lap(epoch), refusals), Ordering::SeqCst);
        }
        assert_eq!(t.counts(t0), (10 * COUNT, COUNT));
        let p = t.reject_probability(t0);
        assert!((p - 0.8).abs() < 1e-9, "(10c - 2c) / (10c + 1): {p}");
        t.record(t0, true);
        assert_eq!(t.counts(t0), (10 * COUNT, COUNT), "saturated");
        // Requests saturated, no accepts: as good as 1.
        assert_eq!(probability(2.0, u64::MAX, 0), 1.0);
        assert_eq!(probability(f64::MAX, u64::MAX, u64::MAX), 0.0);
        assert_eq!(probability(1.0, 0, 0), 0.0);
    }

    #[test]
    fn extreme_windows_and_instants() {
        let t0 = Instant::now();
        for window in [
            Duration::from_nanos(10),
            Duration::from_nanos(11),
            Duration::MAX,
        ] {
            let t = throttle(2.0, window);
            for offset in [Duration::ZERO, secs(1), secs(u64::MAX / 4), Duration::MAX] {
                if let Some(now) = t0.checked_add(offset) {
                    t.record(now, false);
                    let p = t.reject_probability(now);
                    assert!((0.0..=1.0).contains(&p), "{window:?} {offset:?}: {p}");
                }
            }
        }
        // With a huge window nothing is ever forgotten.
        let t = throttle(2.0, Duration::MAX);
        record(&t, t0, 3, 0);
        if let Some(late) = t0.checked_add(secs(u64::MAX / 4)) {
            assert_eq!(t.reject_probability(late), 0.75);
        }
    }

    /// Nanoseconds from now, forwards or backwards: within 10 s, or up to ~292 years.
    fn offset() -> impl Strategy<Value = i64> {
        prop_oneof![-10_000_000_000..10_000_000_000i64, any::<i64>()]
    }

    proptest! {
        #[test]
        fn no_input_panics_or_gives_nan(
            k in prop_oneof![1.0..1e6f64, 1.0..f64::MAX, Just(1.0), Just(f64::MAX)],
            window_nanos in 10u128..=Duration::MAX.as_nanos(),
            steps in prop::collection::vec((offset(), any::<bool>(), any::<f64>()), 1..60),
        ) {
            let window = Duration::new(
                u64::try_from(window_nanos / 1_000_000_000).unwrap_or(u64::MAX),
                (window_nanos % 1_000_000_000) as u32,
            );
            let t = throttle(k, window);
            let t0 = Instant::now();
            for (offset, accepted, draw) in steps {
                let delta = Duration::from_nanos(offset.unsigned_abs());
                let now = if offset >= 0 { t0.checked_add(delta) } else { t0.checked_sub(delta) };
                let Some(now) = now else { continue };
                t.record(now, accepted);
                let p = t.reject_probability(now);
                prop_assert!((0.0..=1.0).contains(&p), "{}", p);
                let _ = t.should_reject(now, draw);
            }
        }

        /// The probability given without reading the counters (a 0 known for the bucket)
        /// is the one the counters give, whatever is recorded, when and how, in between.
        #[test]
        fn a_known_zero_is_the_counters_answer(
            k in prop_oneof![Just(1.0), 1.0..4.0f64],
            steps in prop::collection::vec((0u64..3_000, 0u8..4), 1..200),
        ) {
            let t = throttle(k, secs(10));
            let mut now = Instant::now();
            for (advance_ms, op) in steps {
                // Mostly within a bucket (1 s), sometimes across one or the whole window.
                now += Duration::from_millis(advance_ms.saturating_sub(2_000));
                match op {
                    0 => t.record_recent(true),
                    1 => t.record_recent(false),
                    2 => t.record(now, advance_ms % 2 == 0),
                    _ => {}
                }
                let p = t.reject_probability(now);
                let (requests, accepts) = t.counts(now);
                prop_assert_eq!(p, probability(k, requests, accepts));
            }
        }

        /// The test of the known zero's path, without a division, is the epoch's.
        #[test]
        fn not_after_is_the_epochs_comparison(
            width in prop_oneof![1u128..20, 1u128..=u128::from(u64::MAX), 1u128..=Duration::MAX.as_nanos()],
            nanos in prop_oneof![0u128..1_000, any::<u64>().prop_map(u128::from), 0..=Duration::MAX.as_nanos()],
            epoch in prop_oneof![0u64..1_000, any::<u64>(), Just(u64::MAX)],
        ) {
            let t = throttle(2.0, Duration::from_nanos(1_000));
            let t = AdaptiveThrottle { width, ..t };
            prop_assert_eq!(t.not_after(nanos, epoch), t.epoch_at(nanos) <= epoch);
            // At a bucket's edges (as far as an `Instant` goes).
            let start = u128::from(epoch).saturating_mul(width);
            let edges = [start.saturating_sub(1), start, start.saturating_add(width - 1), start.saturating_add(width)];
            for nanos in edges.into_iter().filter(|n| *n <= Duration::MAX.as_nanos()) {
                prop_assert_eq!(t.not_after(nanos, epoch), t.epoch_at(nanos) <= epoch);
            }
        }

        #[test]
        fn the_probability_is_a_probability(
            k in 1.0..f64::MAX,
            requests in any::<u64>(),
            accepts in any::<u64>(),
        ) {
            let accepts = accepts.min(requests);
            let p = probability(k, requests, accepts);
            prop_assert!((0.0..=1.0).contains(&p), "{}", p);
        }
    }
}
