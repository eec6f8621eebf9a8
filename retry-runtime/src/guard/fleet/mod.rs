//! A circuit breaker and a retry budget shared by every instance of a service, through Redis
//! (feature `redis`).
//!
//! A [`CircuitBreaker`] or a [`RetryBudget`] lives in one process. Run a service as fifty
//! instances and both fail: each instance's breaker sees a fiftieth of the traffic and, at low
//! traffic, never collects enough attempts to open; each instance's budget starts full, so the
//! fleet can burst fifty times its capacity in retries. A [`Fleet`] shares them:
//!
//! - [`SharedBreaker`] opens for the whole fleet when, over the last `window`, the fleet's
//!   attempts reach `min_calls` and their failure ratio reaches the threshold; after the break,
//!   `probes` probes are granted across the fleet, and their answers close or reopen it.
//! - [`SharedBudget`] keeps the fleet's tokens in Redis; each instance leases a few and spends
//!   them locally.
//!
//! **The hot path never waits on the network.** `acquire`, `record`, `deposit` and
//! `try_withdraw` read and write atomics in the process (and the local breaker's short
//! critical section). One background thread per [`Fleet`] publishes each guard's counts and
//! reads the fleet's state every `interval` (200 ms by default): one Lua script per key, run
//! atomically by Redis, with Redis's own clock, and `PEXPIRE` on every key.
//!
//! **Fail-safe.** Every Redis command has a timeout (100 ms by default). When Redis is slow or
//! gone, or before the first sync, each guard decides with its local state: the
//! [`CircuitBreaker`] and the fallback [`RetryBudget`] it was made with, which keep running all
//! along. They fall back as soon as a sync fails (within `interval + timeout` of Redis
//! going away), and also when the last successful sync is older than `stale_after` (by default
//! `2 × interval + 2 × timeout`: a sync thread that is stuck or starved). The thread
//! reconnects with backoff (from `interval` up to 5 s) and the guards rejoin at the first
//! successful sync. With the `tracing` feature, a WARN event says when the fleet falls back
//! and when it rejoins (once per change), and another when the fleet's breaker opens.
//!
//! **Propagation bound.** A breaker opened by the fleet (written to Redis by one instance's
//! sync) is seen by every instance that can reach Redis at its next sync: within
//! `interval + timeout` (300 ms by default) of being written, and so within
//! `2 × (interval + timeout)` of the failure that tipped the ratio.
//!
//! **Budget conservation.** While every withdrawal is made with Redis reachable, the retries
//! the whole fleet makes never exceed the bucket's capacity plus the earnings credited to it:
//! every token spent was granted to a lease by the script, atomically, and a lease is never
//! granted more than the bucket holds. At every moment, the tokens in Redis, plus those in the
//! leases, plus those spent, equal the capacity plus the earnings credited (less what the cap
//! clipped, and less the leases of instances that have gone away, which are lost, never
//! re-created). With Redis gone, each instance adds at most what its fallback budget allows.
//!
//! ## Data layout
//! Keys are `{namespace}:breaker:{name}` and `{namespace}:budget:{name}` (namespace `robust`
//! by default), Redis hashes, each given `PEXPIRE ttl` (60 s by default) at every sync, so the
//! keys of a dependency no instance names any more disappear.
//!
//! | key | field | meaning |
//! |---|---|---|
//! | `…:breaker:NAME` | `state` | 0 closed, 1 open, 2 half-open |
//! | | `until` | while open: when the break ends (Redis time, ms since the Unix epoch) |
//! | | `round`, `left`, `pok`, `pfail`, `since` | half-open: round number, probes left to grant, probe successes and failures, when the round began |
//! | | `e0`..`e9`, `a0`..`a9`, `f0`..`f9` | the window in 10 slots: slot epoch (`time / (window / 10)`), attempts, failures |
//! | `…:budget:NAME` | `tokens` | the tokens not leased, in thousandths |
//!
//! ```no_run
//! use std::sync::LazyLock;
//! use std::time::Duration;
//! use retry_runtime::guard::fleet::{Fleet, FleetOptions, SharedBreaker, SharedBudget};
//! use retry_runtime::{CircuitBreaker, Policy, RetryBudget};
//!
//! static FLEET: LazyLock<Fleet> = LazyLock::new(|| {
//!     Fleet::connect("redis://127.0.0.1:6379/", FleetOptions::new()).expect("a valid URL")
//! });
//! static PAYMENTS: LazyLock<SharedBreaker> = LazyLock::new(|| {
//!     // Locally: the last 20 attempts; for the fleet: the last 10 s, at least 20 attempts.
//!     let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).expect("valid");
//!     FLEET.breaker("payments", local, Duration::from_secs(10), 20).expect("valid")
//! });
//! static RETRIES: LazyLock<SharedBudget> = LazyLock::new(|| {
//!     let fleet = RetryBudget::new(100.0, 0.1, 1.0).expect("valid");
//!     let fallback = RetryBudget::new(5.0, 0.1, 1.0).expect("valid");
//!     FLEET.budget("payments", fleet, fallback).expect("valid")
//! });
//!
//! let policy = Policy::builder().retries(3).breaker(&PAYMENTS).budget(&RETRIES).build()?;
//! # let _ = policy;
//! # Ok::<(), retry_runtime::ConfigError>(())
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::{CircuitBreaker, RetryBudget};
use crate::ConfigError;

mod breaker;
mod budget;
mod store;

pub use breaker::SharedBreaker;
pub use budget::SharedBudget;
pub use store::MemoryStore;

use breaker::BreakerCell;
use budget::BudgetCell;
use store::{Backend, MemoryBackend, RedisBackend, ms};

/// How a [`Fleet`] syncs. Defaults: namespace `robust`, interval 200 ms, timeout 100 ms,
/// `stale_after` = 2 × interval + 2 × timeout, key TTL 60 s, reconnect backoff up to 5 s.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    namespace: String,
    interval: Duration,
    timeout: Duration,
    stale_after: Option<Duration>,
    ttl: Duration,
    max_reconnect_delay: Duration,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl FleetOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self {
            namespace: "robust".to_owned(),
            interval: Duration::from_millis(200),
            timeout: Duration::from_millis(100),
            stale_after: None,
            ttl: Duration::from_secs(60),
            max_reconnect_delay: Duration::from_secs(5),
        }
    }

    /// The prefix of every key: `{namespace}:breaker:{name}`, `{namespace}:budget:{name}`.
    pub fn namespace(mut self, namespace: &str) -> Self {
        namespace.clone_into(&mut self.namespace);
        self
    }

    /// How often the guards sync (> 0).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The connect, read and write timeout of every Redis command (> 0).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long the fleet's view is trusted after a successful sync when no other sync ends
    /// (a stuck or starved sync thread); past that the guards decide locally (a failed sync
    /// makes them do so at once). At least `interval`.
    pub fn stale_after(mut self, stale_after: Duration) -> Self {
        self.stale_after = Some(stale_after);
        self
    }

    /// The time to live of every key, renewed at each sync: at least the breakers' window and
    /// break duration, at most 30 days.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The longest wait between two attempts to reconnect (at least `interval`).
    pub fn max_reconnect_delay(mut self, delay: Duration) -> Self {
        self.max_reconnect_delay = delay;
        self
    }

    fn stale(&self) -> Duration {
        self.stale_after.unwrap_or(
            self.interval
                .saturating_mul(2)
                .saturating_add(self.timeout.saturating_mul(2)),
        )
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.interval.is_zero() {
            return Err(ConfigError::new("interval", "must be longer than 0"));
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::new("timeout", "must be longer than 0"));
        }
        if self.stale() < self.interval {
            return Err(ConfigError::new(
                "stale_after",
                "must be at least the sync interval",
            ));
        }
        if self.ttl < Duration::from_millis(1) || self.ttl > MAX_TTL {
            return Err(ConfigError::new("ttl", "must be between 1 ms and 30 days"));
        }
        if self.max_reconnect_delay < self.interval {
            return Err(ConfigError::new(
                "max_reconnect_delay",
                "must be at least the sync interval",
            ));
        }
        Ok(())
    }
}

/// The longest time to live of a key (which bounds the window and the break duration too).
const MAX_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// Whether a [`Fleet`]'s guards follow the fleet or decide locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetStatus {
    /// No sync has succeeded yet: the guards decide locally.
    Connecting,
    /// The last sync succeeded: the guards follow the fleet.
    Connected,
    /// Redis is slow or gone: the guards decide locally until it answers again.
    Fallback,
}

const CONNECTING: u8 = 0;
const CONNECTED: u8 = 1;
const FALLBACK: u8 = 2;

/// What a fleet's guards share with its sync thread.
pub(crate) struct FleetShared {
    epoch: Instant,
    /// Until when (ms since `epoch`) the fleet's view is trusted.
    valid_until: AtomicU64,
    status: AtomicU8,
    fallbacks: AtomicU64,
    options: FleetOptions,
    breakers: Mutex<Vec<Weak<BreakerCell>>>,
    budgets: Mutex<Vec<Weak<BudgetCell>>>,
}

impl fmt::Debug for FleetShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("namespace", &self.options.namespace)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl FleetShared {
    /// `t` in ms since the fleet's epoch.
    #[inline]
    pub(crate) fn ms(&self, t: Instant) -> u64 {
        ms(self.epoch, t)
    }

    /// Whether the fleet's view is to be followed at `now`.
    #[inline]
    pub(crate) fn live(&self, now: Instant) -> bool {
        self.ms(now) < self.valid_until.load(Ordering::Acquire)
    }

    fn status(&self) -> FleetStatus {
        match self.status.load(Ordering::Acquire) {
            CONNECTED => FleetStatus::Connected,
            FALLBACK => FleetStatus::Fallback,
            _ => FleetStatus::Connecting,
        }
    }

    /// One sync of every guard. Any error fails the round.
    fn sync_round(&self, backend: &mut dyn Backend, now: Instant) -> Result<(), String> {
        backend.ready()?;
        let breakers = live(&self.breakers);
        let budgets = live(&self.budgets);
        for b in &breakers {
            b.sync(backend, self, now)?;
        }
        for b in &budgets {
            b.sync(backend, now)?;
        }
        let until = self
            .ms(now)
            .saturating_add(u64::try_from(self.options.stale().as_millis()).unwrap_or(u64::MAX));
        self.valid_until.store(until, Ordering::Release);
        Ok(())
    }

    /// Records the outcome of a round, with an event on each change.
    fn report(&self, result: &Result<(), String>) {
        match result {
            Ok(()) => {
                let was = self.status.swap(CONNECTED, Ordering::AcqRel);
                if was == FALLBACK {
                    #[cfg(feature = "tracing")]
                    tracing::warn!(
                        target: "retry_runtime",
                        namespace = %self.options.namespace,
                        "fleet: redis answers again, the shared guards rejoin the fleet"
                    );
                }
            }
            Err(_e) => {
                // The guards decide locally from now on, until a sync succeeds.
                self.valid_until.store(0, Ordering::Release);
                let was = self.status.swap(FALLBACK, Ordering::AcqRel);
                if was != FALLBACK {
                    self.fallbacks.fetch_add(1, Ordering::Relaxed);
                    #[cfg(feature = "tracing")]
                    tracing::warn!(
                        target: "retry_runtime",
                        namespace = %self.options.namespace,
                        error = %_e,
                        "fleet: redis is unreachable, the shared guards fall back to their local state"
                    );
                }
            }
        }
    }

    fn key(&self, kind: &str, name: &str) -> String {
        format!("{}:{kind}:{name}", self.options.namespace)
    }
}

fn live<T>(list: &Mutex<Vec<Weak<T>>>) -> Vec<Arc<T>> {
    let mut l = list.lock().unwrap_or_else(|e| e.into_inner());
    l.retain(|w| w.strong_count() > 0);
    l.iter().filter_map(Weak::upgrade).collect()
}

/// A connection to the fleet's shared state, and the thread that syncs its guards: make one
/// per process (a `static LazyLock<Fleet>`), then its guards with [`breaker`](Self::breaker)
/// and [`budget`](Self::budget). See the [module docs](self) for the design, the data layout
/// and the bounds.
///
/// The thread stops by itself once the `Fleet` and all its guards are dropped.
pub struct Fleet {
    shared: Arc<FleetShared>,
    /// A fleet synced by hand ([`Fleet::manual`]).
    manual: Option<Mutex<MemoryBackend>>,
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl Fleet {
    fn shared(options: FleetOptions) -> Result<Arc<FleetShared>, ConfigError> {
        options.validate()?;
        Ok(Arc::new(FleetShared {
            epoch: Instant::now(),
            valid_until: AtomicU64::new(0),
            status: AtomicU8::new(CONNECTING),
            fallbacks: AtomicU64::new(0),
            options,
            breakers: Mutex::new(Vec::new()),
            budgets: Mutex::new(Vec::new()),
        }))
    }

    /// A fleet on the Redis server at `url` (`redis://host:port/db`). Returns at once: the
    /// connection is made by the background thread, and until its first sync the guards
    /// decide locally ([`wait_connected`](Self::wait_connected) waits for it). Error: an
    /// invalid URL or option.
    pub fn connect(url: &str, options: FleetOptions) -> Result<Fleet, ConfigError> {
        let client = redis::Client::open(url)
            .map_err(|_| ConfigError::new("url", "must be a redis:// URL"))?;
        let shared = Self::shared(options)?;
        let timeout = shared.options.timeout;
        spawn(&shared, RedisBackend::new(client, timeout))?;
        Ok(Fleet {
            shared,
            manual: None,
        })
    }

    /// A fleet on a [`MemoryStore`], synced by a background thread as with Redis: the fleet of
    /// a test or a simulation whose instances are in one process, or where no Redis runs.
    pub fn in_memory(store: &MemoryStore, options: FleetOptions) -> Result<Fleet, ConfigError> {
        let shared = Self::shared(options)?;
        spawn(&shared, MemoryBackend(store.clone()))?;
        Ok(Fleet {
            shared,
            manual: None,
        })
    }

    /// A fleet on a [`MemoryStore`] with no thread: each [`sync`](Self::sync) is one round,
    /// at the time it is given (deterministic simulations on a virtual clock).
    pub fn manual(store: &MemoryStore, options: FleetOptions) -> Result<Fleet, ConfigError> {
        Ok(Fleet {
            shared: Self::shared(options)?,
            manual: Some(Mutex::new(MemoryBackend(store.clone()))),
        })
    }

    /// One sync round of a [`manual`](Self::manual) fleet at `now`; `false` if it failed (or
    /// the fleet is not manual).
    pub fn sync(&self, now: Instant) -> bool {
        let Some(m) = &self.manual else {
            return false;
        };
        let mut backend = m.lock().unwrap_or_else(|e| e.into_inner());
        let r = self.shared.sync_round(&mut *backend, now);
        self.shared.report(&r);
        r.is_ok()
    }

    /// A breaker shared by the fleet under `name`. `local` decides while Redis is out of
    /// reach, and keeps deciding for this instance all along (it may open on its own); its
    /// failure ratio, break duration and number of probes are the fleet's too. The fleet's
    /// breaker opens when, over the last `window`, the fleet recorded at least `min_calls`
    /// attempts and the failure ratio reached the threshold. Errors: `window` under 10 ms or
    /// longer than the keys' TTL, `min_calls` = 0, a break duration longer than the TTL.
    pub fn breaker(
        &self,
        name: &str,
        local: CircuitBreaker,
        window: Duration,
        min_calls: u32,
    ) -> Result<SharedBreaker, ConfigError> {
        let ttl = self.shared.options.ttl;
        if window < Duration::from_millis(10) || window > ttl {
            return Err(ConfigError::new(
                "window",
                "must be between 10 ms and the keys' TTL",
            ));
        }
        if min_calls == 0 {
            return Err(ConfigError::new("min_calls", "must be at least 1"));
        }
        if local.fleet_settings().1 > ttl {
            return Err(ConfigError::new(
                "break_duration",
                "must not be longer than the keys' TTL (the open state would expire)",
            ));
        }
        let cell = Arc::new(BreakerCell::new(
            self.shared.key("breaker", name),
            local,
            window,
            min_calls,
            Arc::clone(&self.shared),
        ));
        self.shared
            .breakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&cell));
        Ok(SharedBreaker::from_cell(cell))
    }

    /// A retry budget shared by the fleet under `name`: `fleet` gives the fleet-wide capacity
    /// (the bucket starts full), the earning per call and the cost per retry; `fallback` is
    /// this instance's own budget while Redis is out of reach. Each instance leases the cost
    /// of one retry at a time by default ([`SharedBudget::set_lease`]).
    pub fn budget(
        &self,
        name: &str,
        fleet: RetryBudget,
        fallback: RetryBudget,
    ) -> Result<SharedBudget, ConfigError> {
        let cell = Arc::new(BudgetCell::new(
            self.shared.key("budget", name),
            &fleet,
            fallback,
            Arc::clone(&self.shared),
        ));
        self.shared
            .budgets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&cell));
        Ok(SharedBudget::from_cell(cell))
    }

    /// Whether the guards follow the fleet now.
    pub fn status(&self) -> FleetStatus {
        self.shared.status()
    }

    /// How many times the fleet fell back to local decisions (each outage once).
    pub fn fallbacks(&self) -> u64 {
        self.shared.fallbacks.load(Ordering::Relaxed)
    }

    /// Waits (blocking, up to `timeout`) until a sync has succeeded; `true` if one has.
    pub fn wait_connected(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        loop {
            if self.status() == FleetStatus::Connected && self.shared.live(Instant::now()) {
                return true;
            }
            if start.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn spawn(
    shared: &Arc<FleetShared>,
    mut backend: impl Backend + 'static,
) -> Result<(), ConfigError> {
    let weak = Arc::downgrade(shared);
    let interval = shared.options.interval;
    let max_delay = shared.options.max_reconnect_delay;
    std::thread::Builder::new()
        .name("robust-fleet-sync".to_owned())
        .spawn(move || {
            let mut delay = interval;
            loop {
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                let start = Instant::now();
                let r = shared.sync_round(&mut backend, start);
                shared.report(&r);
                drop(shared);
                // After a failure, wait longer each time (up to the most); after a success,
                // the interval from the start of this round.
                let wait = if r.is_ok() {
                    delay = interval;
                    interval.saturating_sub(start.elapsed())
                } else {
                    let d = delay;
                    delay = delay.saturating_mul(2).min(max_delay);
                    d
                };
                std::thread::sleep(wait);
            }
        })
        .map(|_| ())
        .map_err(|_| ConfigError::new("thread", "the sync thread could not be started"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::{Breaker, BreakerState, Budget};

    fn options() -> FleetOptions {
        FleetOptions::new()
            .interval(Duration::from_millis(100))
            .timeout(Duration::from_millis(50))
    }

    fn breaker(fleet: &Fleet) -> SharedBreaker {
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(5), 1).unwrap();
        fleet
            .breaker("dep", local, Duration::from_secs(10), 10)
            .unwrap()
    }

    #[test]
    fn invalid_settings_are_errors() {
        let p = |r: Result<Fleet, ConfigError>| r.unwrap_err().parameter();
        let store = MemoryStore::new();
        assert_eq!(p(Fleet::connect("http://x", options())), "url");
        for (o, param) in [
            (options().interval(Duration::ZERO), "interval"),
            (options().timeout(Duration::ZERO), "timeout"),
            (
                options().stale_after(Duration::from_millis(1)),
                "stale_after",
            ),
            (options().ttl(Duration::ZERO), "ttl"),
            (options().ttl(Duration::MAX), "ttl"),
            (
                options().max_reconnect_delay(Duration::from_millis(1)),
                "max_reconnect_delay",
            ),
        ] {
            assert_eq!(p(Fleet::manual(&store, o.clone())), param);
            assert_eq!(p(Fleet::in_memory(&store, o)), param);
        }
        // Huge durations saturate instead of overflowing.
        let huge = options()
            .interval(Duration::MAX)
            .timeout(Duration::MAX)
            .max_reconnect_delay(Duration::MAX);
        assert!(Fleet::manual(&store, huge).is_ok());
        let fleet = Fleet::manual(&store, options().ttl(Duration::from_secs(60))).unwrap();
        let local = || CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(5), 1).unwrap();
        let b = |r: Result<SharedBreaker, ConfigError>| r.unwrap_err().parameter();
        assert_eq!(b(fleet.breaker("x", local(), Duration::ZERO, 1)), "window");
        assert_eq!(
            b(fleet.breaker("x", local(), Duration::from_secs(61), 1)),
            "window"
        );
        assert_eq!(
            b(fleet.breaker("x", local(), Duration::from_secs(1), 0)),
            "min_calls"
        );
        let long = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(61), 1).unwrap();
        assert_eq!(
            b(fleet.breaker("x", long, Duration::from_secs(1), 1)),
            "break_duration"
        );
        let ok = fleet
            .breaker("x", local(), Duration::from_secs(1), 1)
            .unwrap();
        assert_eq!(ok.key(), "robust:breaker:x");
        let named = Fleet::manual(&store, options().namespace("shop")).unwrap();
        let budget = RetryBudget::new(1.0, 0.0, 1.0).unwrap();
        let fallback = RetryBudget::new(1.0, 0.0, 1.0).unwrap();
        assert_eq!(
            named.budget("y", budget, fallback).unwrap().key(),
            "shop:budget:y"
        );
    }

    #[test]
    fn many_quiet_instances_open_the_fleet_s_breaker_together() {
        let store = MemoryStore::new();
        let fleets: Vec<Fleet> = (0..20)
            .map(|_| Fleet::manual(&store, options()).unwrap())
            .collect();
        let breakers: Vec<SharedBreaker> = fleets.iter().map(breaker).collect();
        let t0 = Instant::now();
        assert!(fleets.iter().all(|f| f.sync(t0)));
        // One failure each: far below each local minimum of 10.
        for b in &breakers {
            let p = (&b).acquire(t0).expect("closed");
            (&b).record(t0, p, false);
            assert_eq!(b.local().state(), BreakerState::Closed);
        }
        let t1 = t0 + Duration::from_millis(100);
        fleets.iter().for_each(|f| assert!(f.sync(t1)));
        let t2 = t1 + Duration::from_millis(100);
        fleets.iter().for_each(|f| assert!(f.sync(t2)));
        for b in &breakers {
            assert!((&b).acquire(t2).is_none(), "open for the whole fleet");
            assert!(!(&b).would_admit(t2));
        }
        // After the break: one probe for the whole fleet, granted at a sync to an instance
        // that asked for one.
        let t3 = t0 + Duration::from_secs(6);
        fleets.iter().for_each(|f| assert!(f.sync(t3)));
        assert_eq!(breakers[0].fleet_state(t3), Some(BreakerState::HalfOpen));
        for b in &breakers {
            assert!((&b).acquire(t3).is_none(), "a probe is asked for first");
        }
        fleets.iter().for_each(|f| assert!(f.sync(t3)));
        let probes: Vec<_> = breakers
            .iter()
            .enumerate()
            .filter_map(|(i, b)| Some((i, (&b).acquire(t3)?)))
            .collect();
        assert_eq!(probes.len(), 1);
        let (prober, permit) = probes[0];
        (&breakers[prober]).record(t3, permit, true);
        let t4 = t3 + Duration::from_millis(100);
        fleets.iter().for_each(|f| assert!(f.sync(t4)));
        fleets.iter().for_each(|f| assert!(f.sync(t4)));
        for b in &breakers {
            assert_eq!(b.fleet_state(t4), Some(BreakerState::Closed));
            assert!((&b).acquire(t4).is_some());
        }
    }

    #[test]
    fn an_outage_falls_back_to_the_local_breaker_and_rejoins() {
        let store = MemoryStore::new();
        let fleets: Vec<Fleet> = (0..10)
            .map(|_| Fleet::manual(&store, options()).unwrap())
            .collect();
        let breakers: Vec<SharedBreaker> = fleets.iter().map(breaker).collect();
        let t0 = Instant::now();
        fleets.iter().for_each(|f| assert!(f.sync(t0)));
        assert_eq!(fleets[0].status(), FleetStatus::Connected);
        for b in &breakers {
            let p = (&b).acquire(t0).unwrap();
            (&b).record(t0, p, false);
        }
        fleets.iter().for_each(|f| assert!(f.sync(t0)));
        fleets.iter().for_each(|f| assert!(f.sync(t0)));
        assert!(breakers.iter().all(|b| (&b).acquire(t0).is_none()));
        // No sync for longer than `stale_after` (300 ms; a stuck sync thread): each instance
        // decides with its own breaker, closed.
        let late = t0 + Duration::from_millis(350);
        assert!(
            breakers[0]
                .acquire(t0 + Duration::from_millis(250))
                .is_none()
        );
        assert!(breakers[0].acquire(late).is_some());
        assert!(fleets[0].sync(late));
        assert!(
            breakers[0].acquire(late).is_none(),
            "the fleet's view again"
        );
        // The store goes away: at the first failed sync, each instance decides alone.
        store.set_down(true);
        let t1 = t0 + Duration::from_millis(400);
        fleets.iter().for_each(|f| assert!(!f.sync(t1)));
        assert_eq!(fleets[0].status(), FleetStatus::Fallback);
        assert_eq!(fleets[0].fallbacks(), 1);
        assert!(breakers.iter().all(|b| (&b).acquire(t1).is_some()));
        assert_eq!(breakers[0].fleet_state(t1), None);
        let t2 = t0 + Duration::from_millis(450);
        assert!(!fleets[0].sync(t2));
        assert_eq!(fleets[0].fallbacks(), 1, "one event per outage");
        // Back: the fleet's breaker is still open.
        store.set_down(false);
        let t3 = t0 + Duration::from_millis(500);
        fleets.iter().for_each(|f| assert!(f.sync(t3)));
        assert_eq!(fleets[0].status(), FleetStatus::Connected);
        assert!(breakers.iter().all(|b| (&b).acquire(t3).is_none()));
    }

    #[test]
    fn the_fleet_s_retries_never_exceed_its_tokens() {
        let store = MemoryStore::new();
        let fleets: Vec<Fleet> = (0..10)
            .map(|_| Fleet::manual(&store, options()).unwrap())
            .collect();
        let budgets: Vec<SharedBudget> = fleets
            .iter()
            .map(|f| {
                let fleet = RetryBudget::new(7.0, 0.0, 1.0).unwrap();
                let fallback = RetryBudget::new(1.0, 0.0, 1.0).unwrap();
                let b = f.budget("dep", fleet, fallback).unwrap();
                b.set_lease(2);
                b
            })
            .collect();
        let mut t = Instant::now();
        let mut made = 0;
        for _ in 0..20 {
            fleets.iter().for_each(|f| assert!(f.sync(t)));
            for b in &budgets {
                for _ in 0..3 {
                    made += u32::from((&b).try_withdraw());
                }
            }
            let leased: f64 = budgets.iter().map(SharedBudget::lease).sum();
            let spent: u64 = budgets.iter().map(SharedBudget::spent).sum();
            assert_eq!(spent, u64::from(made));
            // What the bucket holds, what the leases hold and what was spent: the capacity.
            let bucket = budgets
                .iter()
                .map(|b| b.fleet_tokens())
                .fold(f64::MAX, f64::min);
            assert!(bucket + leased + spent as f64 >= 7.0 - 1e-9);
            t += Duration::from_millis(100);
        }
        assert_eq!(made, 7, "ten instances, seven tokens: seven retries");
    }
}
