//! [`Latencies`]: the recent attempt latencies of one function, from which hedging
//! (`hedge(after = p95)`, SPEC section 15) and adaptive timeouts (`timeout = adaptive(..)`,
//! SPEC section 15b) read a percentile.
//!
//! The histogram is lock-free and fixed in size (about 5 KB, no allocation): log-linear
//! buckets of 1/16 of an octave (a percentile is reported to within 6.25%, rounded up), from
//! 1 µs to 12 days (shorter latencies count as 1 µs, longer ones as 12 days). It keeps two
//! halves of [`WINDOW`] samples each: samples go into the current half, and when it is full the
//! older half is cleared and becomes the current one; a percentile is read over both. So it
//! always reflects the last `WINDOW` to `2 × WINDOW` samples: a shift in the service's latency
//! is fully seen after `2 × WINDOW` calls, whatever the time between them.
//!
//! Reading a percentile is one atomic load: the percentiles asked for (at most
//! [`CACHED`] distinct ones per histogram, more are computed on demand) are recomputed by the
//! recording thread every [`REFRESH`] samples.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::ConfigError;

/// Samples per half of the window (see the [module docs](self)).
pub const WINDOW: u64 = 4096;
/// The cached percentiles are recomputed every `REFRESH` samples.
pub const REFRESH: u64 = 64;
/// How many distinct percentiles a histogram caches.
pub const CACHED: usize = 2;

/// Sub-buckets per octave (a power of two).
const SUB: u64 = 16;
const SUB_BITS: u32 = SUB.trailing_zeros();
/// The largest octave: latencies are clamped to `2^MAX_OCTAVE` µs (about 12.7 days).
const MAX_OCTAVE: u32 = 40;
const BUCKETS: usize = (SUB + (MAX_OCTAVE - SUB_BITS) as u64 * SUB) as usize;
/// "No value": not enough samples, or an empty cache slot.
const NONE: u64 = u64::MAX;
/// [`Latencies::compute`]'s answer while a half is being cleared.
const PENDING: u64 = u64::MAX - 1;

/// A percentile, as a fraction in (0, 1): `p99.9` is `Quantile::new(99.9)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantile(f64);

impl Quantile {
    /// The `p`-th percentile; `p` must be in (0, 100).
    pub const fn new(p: f64) -> Result<Self, ConfigError> {
        if p.is_nan() || p <= 0.0 || p >= 100.0 {
            return Err(ConfigError::new(
                "p",
                "must be a percentile strictly between 0 and 100, like 95 or 99.9",
            ));
        }
        Ok(Quantile(p / 100.0))
    }

    /// A percentile the attribute has validated (in (0, 100)).
    pub(crate) const fn from_percent(p: f64) -> Self {
        Quantile(p / 100.0)
    }

    /// The percentile, in (0, 100).
    pub fn percent(self) -> f64 {
        self.0 * 100.0
    }

    /// The cache key: the fraction's bits, so that a cached percentile is recomputed for
    /// exactly the fraction it was asked for (a key rounded to 0.001% recomputed 99.9999 as
    /// 100, and gave two percentiles closer than that one slot). A fraction in (0, 1) is never
    /// `NONE` nor `PENDING` (both NaN patterns).
    fn key(self) -> u64 {
        self.0.to_bits()
    }

    /// How many samples the histogram needs before this percentile is reported:
    /// `5 / (1 - q)` (5 samples above it on average), at least 50 and at most [`WINDOW`].
    pub fn min_samples(self) -> u64 {
        let need = (5.0 / (1.0 - self.0)).ceil();
        if need.is_finite() {
            (need as u64).clamp(50, WINDOW)
        } else {
            WINDOW
        }
    }
}

/// The recent attempt latencies of one function (see the [module docs](self)).
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::latency::{Latencies, Quantile};
///
/// static LATENCIES: Latencies = Latencies::new();
/// let p90 = Quantile::new(90.0)?;
/// assert_eq!(LATENCIES.percentile(p90), None); // not enough samples yet
/// for ms in 1..=128 {
///     LATENCIES.record(Duration::from_millis(ms));
/// }
/// // Recomputed every 64 samples: 90% of the 128 samples are at most 116 ms (to within 6.25%).
/// let p = LATENCIES.percentile(p90).unwrap();
/// assert!(p >= Duration::from_millis(116) && p <= Duration::from_millis(124), "{p:?}");
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
pub struct Latencies {
    halves: [[AtomicU32; BUCKETS]; 2],
    /// Samples recorded since creation.
    samples: AtomicU64,
    /// Per half, the last switch to it (`samples / WINDOW` at the switch) whose clearing is
    /// done: a percentile is not computed while either half may still hold the samples of an
    /// older window (the thread that clears it was paused before it was done). Per half, so
    /// that a later switch, to the other half, does not hide a clear still in progress.
    cleared: [AtomicU64; 2],
    /// The cached percentiles: their keys ([`Quantile::key`], `NONE` for a free slot) and
    /// values in nanoseconds (`NONE`: not enough samples).
    keys: [AtomicU64; CACHED],
    values: [AtomicU64; CACHED],
}

impl std::fmt::Debug for Latencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latencies")
            .field("samples", &self.samples.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    /// An empty histogram, usable as a `static`.
    pub const fn new() -> Self {
        #[allow(clippy::declare_interior_mutable_const)]
        const ZERO: AtomicU32 = AtomicU32::new(0);
        #[allow(clippy::declare_interior_mutable_const)]
        const HALF: [AtomicU32; BUCKETS] = [ZERO; BUCKETS];
        #[allow(clippy::declare_interior_mutable_const)]
        const FREE: AtomicU64 = AtomicU64::new(NONE);
        Latencies {
            halves: [HALF, HALF],
            samples: AtomicU64::new(0),
            cleared: [AtomicU64::new(0), AtomicU64::new(0)],
            keys: [FREE; CACHED],
            values: [FREE; CACHED],
        }
    }

    /// Records one latency.
    #[inline]
    pub fn record(&self, latency: Duration) {
        let n = self.samples.fetch_add(1, Ordering::Relaxed);
        let half = ((n / WINDOW) % 2) as usize;
        if n > 0 && n.is_multiple_of(WINDOW) {
            // The older half becomes the current one: forget what it held. Samples other
            // threads add to it meanwhile may be lost; the histogram is an estimate. (The
            // fence orders the count's increment before the clearing stores, for a reader
            // that sees a cleared bucket and then reads the count again: `compute_from`.)
            std::sync::atomic::fence(Ordering::Release);
            for b in &self.halves[half] {
                b.store(0, Ordering::Relaxed);
            }
            self.cleared[half].fetch_max(n / WINDOW, Ordering::Release);
        }
        self.halves[half][bucket(latency)].fetch_add(1, Ordering::Relaxed);
        if (n + 1).is_multiple_of(REFRESH) {
            self.refresh();
        }
    }

    /// Samples recorded since creation.
    pub fn samples(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }

    /// The `q` percentile of the recent latencies (rounded up to its bucket's end), or `None`
    /// until the window holds [`Quantile::min_samples`] samples. One atomic load for a cached
    /// percentile; the first call for a new one registers it in the cache (or computes it
    /// when the cache is full).
    #[inline]
    pub fn percentile(&self, q: Quantile) -> Option<Duration> {
        let key = q.key();
        for (k, v) in self.keys.iter().zip(&self.values) {
            if k.load(Ordering::Acquire) == key {
                return nanos(v.load(Ordering::Relaxed));
            }
        }
        self.register(q)
    }

    #[cold]
    fn register(&self, q: Quantile) -> Option<Duration> {
        let key = q.key();
        let value = match self.compute(q) {
            PENDING => NONE,
            v => v,
        };
        for (k, v) in self.keys.iter().zip(&self.values) {
            match k.compare_exchange(NONE, key, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    v.store(value, Ordering::Relaxed);
                    break;
                }
                Err(taken) if taken == key => break,
                Err(_) => {}
            }
        }
        nanos(value)
    }

    /// Recomputes the cached percentiles.
    #[cold]
    fn refresh(&self) {
        for (k, v) in self.keys.iter().zip(&self.values) {
            let key = k.load(Ordering::Acquire);
            if key != NONE {
                let q = Quantile(f64::from_bits(key));
                // (While a half is being cleared, the value computed before stays.)
                let value = self.compute(q);
                if value != PENDING {
                    v.store(value, Ordering::Relaxed);
                }
            }
        }
    }

    /// The `q` percentile over both halves in nanoseconds, `NONE` without enough samples,
    /// `PENDING` while the current half is not yet cleared (it may hold, besides its own
    /// samples, a whole window's older ones, and the rank taken from the count would fall far
    /// below the percentile: p95 read near the median).
    /// One pass over the buckets, stopping at the percentile's: the window's size is known
    /// from the sample count (the current half holds the samples since it became current,
    /// the older one a whole half); a second when samples were lost.
    fn compute(&self, q: Quantile) -> u64 {
        self.compute_from(self.samples.load(Ordering::Relaxed), q)
    }

    /// [`compute`](Self::compute) with the sample count read at its start: `PENDING` too when
    /// a switch of halves came while the buckets were read (the count they were read for no
    /// longer says what they hold: the older half may have been cleared under the scan).
    fn compute_from(&self, samples: u64, q: Quantile) -> u64 {
        let window = samples.saturating_sub(1) / WINDOW;
        // The switch to each half, the current one's and (before it) the older one's, is
        // cleared. (The first window's half was never switched to: nothing to clear.)
        let done = |w: u64| self.cleared[(w % 2) as usize].load(Ordering::Acquire) >= w;
        if samples > WINDOW && (!done(window) || !done(window - 1)) {
            return PENDING;
        }
        let value = self.percentile_of(samples, q);
        // (Paired with `record`'s fence: a clear seen by the scan shows its switch here.)
        std::sync::atomic::fence(Ordering::Acquire);
        let now = self.samples.load(Ordering::Relaxed);
        if samples > 0 && (now.saturating_sub(1) / WINDOW) != window {
            return PENDING;
        }
        value
    }

    /// The percentile the buckets give for `samples` recorded (see [`compute`](Self::compute)).
    fn percentile_of(&self, samples: u64, q: Quantile) -> u64 {
        let total = match samples {
            0 => return NONE,
            s if s <= WINDOW => s,
            s => WINDOW + (s - 1) % WINDOW + 1,
        };
        if total < q.min_samples() {
            return NONE;
        }
        // The smallest bucket at or below which at least q of the samples lie. Samples lost
        // to a concurrent clear, or counted and not yet in their bucket (a record in
        // progress), so that the buckets hold fewer than the count says, give the
        // percentile of the samples the buckets do hold, in a second pass (rare), rather than
        // the largest latency seen, which would put p99.9 at the window's slowest sample.
        match self.end_of_rank(rank_of(q, total)) {
            Ok(end) => end,
            Err(0) => NONE,
            Err(held) => self.end_of_rank(rank_of(q, held)).unwrap_or(NONE),
        }
    }

    /// The end (in nanoseconds) of the first bucket by which `rank` samples have been seen,
    /// counting both halves, or `Err` with the samples the buckets hold when they are fewer.
    fn end_of_rank(&self, rank: u64) -> Result<u64, u64> {
        let mut seen = 0u64;
        for i in 0..BUCKETS {
            seen += u64::from(self.halves[0][i].load(Ordering::Relaxed))
                + u64::from(self.halves[1][i].load(Ordering::Relaxed));
            if seen >= rank {
                return Ok(upper_micros(i).saturating_mul(1000));
            }
        }
        Err(seen)
    }
}

/// The rank of the `q` percentile among `total` samples (`total` at least 1): at least 1, at
/// most `total`.
fn rank_of(q: Quantile, total: u64) -> u64 {
    ((q.0 * total as f64).ceil() as u64).clamp(1, total)
}

fn nanos(v: u64) -> Option<Duration> {
    (v != NONE).then(|| Duration::from_nanos(v))
}

/// The bucket of a latency.
fn bucket(latency: Duration) -> usize {
    let us = u64::try_from(latency.as_micros())
        .unwrap_or(u64::MAX)
        .clamp(1, (1u64 << MAX_OCTAVE) - 1);
    if us < SUB {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros(); // >= SUB_BITS
    let sub = (us >> (octave - SUB_BITS)) & (SUB - 1);
    (SUB + u64::from(octave - SUB_BITS) * SUB + sub) as usize
}

/// The end of bucket `i` in microseconds (exclusive): every latency in it is below this.
fn upper_micros(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i + 1;
    }
    let octave = (i - SUB) / SUB + u64::from(SUB_BITS);
    let sub = (i - SUB) % SUB;
    (SUB + sub + 1) << (octave - u64::from(SUB_BITS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_their_latencies() {
        // Every latency falls below its bucket's end and at or above the previous one's.
        for us in (1..5000u64).chain([1 << 20, (1 << 20) + 12345, (1u64 << 40) - 1]) {
            let i = bucket(Duration::from_micros(us));
            assert!(i < BUCKETS);
            assert!(us < upper_micros(i), "{us} µs in bucket {i}");
            if i > 0 {
                assert!(us >= upper_micros(i - 1), "{us} µs in bucket {i}");
            }
            // 1/16 of an octave: the bucket's end is within 6.25% (or 1 µs) of the latency.
            assert!(upper_micros(i) as f64 <= (us as f64 * 1.0625).max(us as f64 + 1.0));
        }
        assert_eq!(bucket(Duration::ZERO), 1);
        assert_eq!(bucket(Duration::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_of_a_uniform_sample() {
        let h = Latencies::new();
        let p50 = Quantile::new(50.0).unwrap();
        let p99 = Quantile::new(99.0).unwrap();
        for i in 1..=1000u64 {
            h.record(Duration::from_micros(i * 100)); // 0.1 ms .. 100 ms
        }
        let within = |got: Duration, want_ms: f64| {
            let got = got.as_secs_f64() * 1000.0;
            assert!(
                got >= want_ms && got <= want_ms * 1.0625 + 0.001,
                "{got} ms for {want_ms} ms"
            );
        };
        within(h.percentile(p50).unwrap(), 50.0);
        within(h.percentile(p99).unwrap(), 99.0);
    }

    /// Samples lost to a concurrent clear (the buckets hold fewer than the count says) do not
    /// turn a high percentile into the window's slowest sample: it is the percentile of the
    /// samples the buckets hold.
    #[test]
    fn lost_samples_leave_the_percentile_of_those_held() {
        let h = Latencies::new();
        let p999 = Quantile::new(99.9).unwrap();
        // A whole half of the window (p99.9 needs as many samples).
        for _ in 0..WINDOW - 3 {
            h.record(Duration::from_millis(1));
        }
        for _ in 0..3 {
            h.record(Duration::from_secs(5));
        }
        let fast = h.compute(p999);
        assert_eq!(
            nanos(fast),
            Some(Duration::from_micros(upper_micros(bucket(
                Duration::from_millis(1)
            ))))
        );
        // Five fast samples lost: 4091 held, of which the 4087th (99.9%) is still fast (the
        // count's rank, 4092, is past them).
        h.halves[0][bucket(Duration::from_millis(1))].fetch_sub(5, Ordering::Relaxed);
        assert_eq!(h.compute(p999), fast);
        // All lost: no percentile.
        for half in &h.halves {
            for b in half {
                b.store(0, Ordering::Relaxed);
            }
        }
        assert_eq!(h.compute(p999), NONE);
    }

    /// A thread that switched halves (drew the sample that starts one) and was paused before it
    /// cleared the half, while others record into it: the half then holds a whole older window
    /// besides its new samples, and a percentile computed from the count would fall far below
    /// the true one (p95 near the median). The cached value stays as it was until the clear.
    #[test]
    fn a_half_not_yet_cleared_leaves_the_cached_percentile() {
        let h = Latencies::new();
        let p95 = Quantile::new(95.0).unwrap();
        // Two windows: 1 ms, then 10 ms with 10% at 1 s (p95 is 1 s).
        for _ in 0..WINDOW {
            h.record(Duration::from_millis(1));
        }
        for i in 0..WINDOW {
            h.record(if i % 10 == 0 {
                Duration::from_secs(1)
            } else {
                Duration::from_millis(10)
            });
        }
        let before = h.percentile(p95).unwrap();
        assert!(before >= Duration::from_secs(1), "{before:?}");
        // The switch: its thread takes the sample's number and is paused before the clear.
        h.samples.fetch_add(1, Ordering::Relaxed);
        // Others record 63 more (the 64th refreshes), into the half that still holds the 1 ms
        // window.
        for i in 0..REFRESH - 1 {
            h.record(if i % 10 == 0 {
                Duration::from_secs(1)
            } else {
                Duration::from_millis(10)
            });
        }
        assert_eq!(h.compute(p95), PENDING);
        assert_eq!(h.percentile(p95), Some(before), "kept until the clear");
    }

    /// A cached percentile is recomputed for the fraction asked for, however close to 100 it
    /// is, and two close ones are cached apart (their keys differ).
    #[test]
    fn a_cached_percentile_keeps_its_exact_fraction() {
        let h = Latencies::new();
        let close = Quantile::new(99.9999).unwrap();
        let p99 = Quantile::new(99.0).unwrap();
        for i in 0..WINDOW {
            // 4095 samples at 1 ms, one at 10 s.
            h.record(if i == 7 {
                Duration::from_secs(10)
            } else {
                Duration::from_millis(1)
            });
        }
        // p99.9999 of 4096 samples: the rank is 4096 (the slowest), as asked.
        let first = h.percentile(close).unwrap();
        assert!(first >= Duration::from_secs(10), "{first:?}");
        assert!(h.percentile(p99).unwrap() < Duration::from_millis(2));
        for _ in 0..REFRESH {
            h.record(Duration::from_millis(1));
        }
        // Refreshed for the same fraction: the 10 s sample is still in the window.
        assert_eq!(h.percentile(close), Some(first));
        assert_ne!(close.key(), Quantile::new(99.9998).unwrap().key());
    }

    /// A clear still in progress is not hidden by the next switch, which clears the other
    /// half: until it is done, the older half may hold two windows, counted as one.
    #[test]
    fn a_later_switch_does_not_hide_a_clear_in_progress() {
        let h = Latencies::new();
        let p95 = Quantile::new(95.0).unwrap();
        let slow_tail = |i: u64| {
            if i.is_multiple_of(10) {
                Duration::from_secs(1)
            } else {
                Duration::from_millis(10)
            }
        };
        // Windows 0 (1 ms) and 1 (p95 at 1 s).
        for _ in 0..WINDOW {
            h.record(Duration::from_millis(1));
        }
        for i in 0..WINDOW {
            h.record(slow_tail(i));
        }
        assert!(h.percentile(p95).unwrap() >= Duration::from_secs(1));
        // The switch to window 2 (half 0): its thread is paused before the clear; window 2's
        // samples go into half 0 beside window 0's.
        h.samples.fetch_add(1, Ordering::Relaxed);
        for i in 1..WINDOW {
            h.record(slow_tail(i));
        }
        // The switch to window 3 (half 1) is done by another thread, and more samples come.
        for i in 0..REFRESH {
            h.record(slow_tail(i));
        }
        // Half 0 holds windows 0 and 2, counted as one: p95 would fall towards 1 ms.
        assert_eq!(h.compute(p95), PENDING, "half 0 is not cleared yet");
        assert!(
            h.percentile(p95).unwrap() >= Duration::from_secs(1),
            "the cached value is kept"
        );
    }

    /// A switch of halves that comes while the buckets are read makes the result `PENDING`:
    /// the count the scan started from no longer says what the buckets hold.
    #[test]
    fn a_switch_during_the_scan_keeps_the_cached_percentile() {
        let h = Latencies::new();
        let p50 = Quantile::new(50.0).unwrap();
        for _ in 0..2 * WINDOW + 10 {
            h.record(Duration::from_millis(5));
        }
        let now = h.samples();
        assert_ne!(h.compute_from(now, p50), PENDING);
        // A scan that started before the last switch (its count is of the window before).
        assert_eq!(h.compute_from(2 * WINDOW - 5, p50), PENDING);
    }

    #[test]
    fn no_percentile_until_enough_samples() {
        let h = Latencies::new();
        let p99 = Quantile::new(99.0).unwrap();
        assert_eq!(p99.min_samples(), 500);
        for _ in 0..499 {
            h.record(Duration::from_millis(1));
        }
        assert_eq!(h.percentile(p99), None);
        // Cached now: refreshed on the next multiple of REFRESH samples.
        for _ in 0..(512 - 499) {
            h.record(Duration::from_millis(1));
        }
        assert!(h.percentile(p99).is_some());
        assert_eq!(Quantile::new(99.9).unwrap().min_samples(), WINDOW);
        assert_eq!(Quantile::new(10.0).unwrap().min_samples(), 50);
    }

    #[test]
    fn the_window_forgets_old_samples() {
        let h = Latencies::new();
        let p50 = Quantile::new(50.0).unwrap();
        for _ in 0..2 * WINDOW {
            h.record(Duration::from_millis(10));
        }
        assert!(h.percentile(p50).unwrap() < Duration::from_millis(11));
        // After two more halves of slow samples, the fast ones are gone.
        for _ in 0..2 * WINDOW {
            h.record(Duration::from_secs(1));
        }
        let p = h.percentile(Quantile::new(1.0).unwrap()).unwrap();
        assert!(p >= Duration::from_secs(1), "{p:?}");
    }

    #[test]
    fn more_percentiles_than_the_cache_holds() {
        let h = Latencies::new();
        for i in 1..=1000u64 {
            h.record(Duration::from_millis(i));
        }
        let ps: Vec<_> = [10.0, 50.0, 90.0, 99.0]
            .iter()
            .map(|p| h.percentile(Quantile::new(*p).unwrap()).unwrap())
            .collect();
        assert!(ps.windows(2).all(|w| w[0] < w[1]), "{ps:?}");
        // Asked again (cached or computed), the same values.
        let again: Vec<_> = [10.0, 50.0, 90.0, 99.0]
            .iter()
            .map(|p| h.percentile(Quantile::new(*p).unwrap()).unwrap())
            .collect();
        assert_eq!(ps, again);
    }

    #[test]
    fn quantiles_are_validated() {
        for bad in [0.0, 100.0, -1.0, 150.0, f64::NAN, f64::INFINITY] {
            assert_eq!(Quantile::new(bad).unwrap_err().parameter(), "p");
        }
    }

    #[test]
    fn many_threads_record_at_once() {
        let h = Latencies::new();
        let p50 = Quantile::new(50.0).unwrap();
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let h = &h;
                s.spawn(move || {
                    for i in 0..1000u64 {
                        h.record(Duration::from_micros(1000 + (i + t) % 100));
                        let _ = h.percentile(p50);
                    }
                });
            }
        });
        assert_eq!(h.samples(), 8000);
        let p = h.percentile(p50).unwrap();
        assert!(
            p >= Duration::from_micros(1000) && p <= Duration::from_micros(1100),
            "{p:?}"
        );
    }

    proptest::proptest! {
        /// Any latencies, any percentile: no panic, and percentiles grow with `p`.
        #[test]
        fn any_input_gives_ordered_percentiles(
            nanos in proptest::collection::vec(proptest::prelude::any::<u64>(), 1..300),
            secs in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..20),
            p in 0.001f64..99.999,
        ) {
            let h = Latencies::new();
            for n in &nanos {
                h.record(Duration::from_nanos(*n));
            }
            for s in &secs {
                h.record(Duration::from_secs(*s)); // up to Duration's largest
            }
            let lo = Quantile::new(p / 2.0).unwrap();
            let hi = Quantile::new(p).unwrap();
            // Asked for the first time, each is computed on the spot: known exactly when the
            // window holds the samples it needs.
            let n = (nanos.len() + secs.len()) as u64;
            let (a, b) = (h.percentile(lo), h.percentile(hi));
            proptest::prop_assert_eq!(a.is_some(), n >= lo.min_samples());
            proptest::prop_assert_eq!(b.is_some(), n >= hi.min_samples());
            if let (Some(a), Some(b)) = (a, b) {
                proptest::prop_assert!(a <= b, "{:?} > {:?}", a, b);
            }
        }
    }
}
