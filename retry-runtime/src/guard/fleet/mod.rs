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
//! - [`SharedBudget`] keeps the fleet's tokens in Redis; each instance that needs retries
//!   leases a few and spends them locally, and an idle one gives its lease back.
//!
//! Requires Redis 5.0 or later (the scripts read `TIME` before they write, which older servers
//! refuse unless told to replicate effects).
//!
//! **The hot path never waits on the network.** `acquire`, `record`, `deposit` and
//! `try_withdraw` read and write atomics in the process (and the local breaker's short
//! critical section), and allocate nothing. One background thread per [`Fleet`] publishes
//! each guard's counts and reads the fleet's state every `interval` (200 ms by default): one
//! round sends one Lua script per key, all in one pipeline (one round trip, whatever the
//! number of guards); Redis runs each script atomically, with its own clock, and renews each
//! key's TTL. The scripts are loaded once per connection (`SCRIPT LOAD` at the head of its
//! first pipeline, and again if Redis answers `NOSCRIPT`).
//!
//! **Fail-safe.** Connecting, writing and reading each have a timeout (100 ms by default): a
//! round fails at the first reply that does not come within it, however many keys it holds.
//! When Redis is slow or gone, or before a guard's first sync, the guard decides with its
//! local state: the [`CircuitBreaker`] and the fallback [`RetryBudget`] it was made with,
//! which keep running all along. A guard follows the fleet for `stale_after` (by default
//! `2 × interval + 2 × timeout`) from the end of the last round that synced it, so the guards
//! fall back:
//! - as soon as a round fails (within `interval + timeout` of Redis going away);
//! - when a round took longer than `stale_after` (its answers are too old to follow: each
//!   read was within its timeout, the round as a whole was not);
//! - when the last round is older than `stale_after` (a sync thread that is stuck or
//!   starved);
//! - for one guard only, when its own key fails (a key of the wrong type, a script error):
//!   the other guards of the fleet keep following it. (A server that refuses every key, a
//!   read-only replica or one out of memory, fails the round: the first case above.)
//!
//! The first two are the fleet's fallbacks: [`Fleet::status`] says `Fallback` and
//! [`Fleet::fallbacks`] counts them, with an event. (A stuck thread changes no status, as
//! nothing runs to change it: its guards just stop following a view that is too old.) The
//! thread reconnects with backoff (from `interval`, doubling up to `max_reconnect_delay`, 5 s
//! by default, each wait drawn between half and all of it so that a fleet does not reconnect in
//! lockstep), and the guards rejoin at the first round that succeeds. What a guard records
//! while it does not follow the fleet, and what it pushed in a round that failed, is never
//! pushed later: outcomes of an outage do not land in the fleet's window as if they were
//! fresh. With the `tracing` feature, a WARN event says when the fleet falls back and when it
//! rejoins (once per change), when one key fails and when it answers again (naming the key),
//! and when the fleet's breaker opens; each names the fleet's namespace.
//!
//! **Propagation bound.** While rounds keep to their schedule (each shorter than `interval`),
//! a failure recorded by one instance reaches Redis in that instance's next round, within
//! `interval + timeout`; a breaker it opens is read by every instance that can reach Redis at
//! its next round, within `interval + timeout` more: `2 × (interval + timeout)` from the
//! failure that tipped the ratio (600 ms by default), for any number of guards (one pipeline
//! per round). An instance that is reconnecting (after a Redis restart or a network outage)
//! sees it only once it has reconnected: add its backoff wait, up to `max_reconnect_delay`,
//! and the connect time.
//!
//! **Budget conservation.** Every token an instance spends comes from its lease, and every
//! token of a lease was granted by the budget's script, atomically, never more than the bucket
//! held. So, as long as the budget's key is not lost, the tokens in Redis plus those in the
//! leases plus those spent are **at most** the capacity plus the earnings credited, and the
//! fleet's retries paid by the fleet never exceed the capacity plus the earnings. Equality
//! holds only while nothing was lost: tokens drop out of the count (the fleet then retries
//! less, never more) when a round's reply times out after Redis applied it (its grant, or
//! the calls it credited, or a lease given back, is lost), when an instance goes away holding
//! a lease (a guard dropped while its fleet runs gives its lease back at the next round), and
//! when the cap clips earnings or a lease given back.
//!
//! The key is lost, and the bucket comes back **full** (the fleet may then retry up to one
//! more capacity), when Redis restarts without persistence, evicts it (a `maxmemory` policy
//! that evicts keys with a TTL), fails over to a replica that had not received the last
//! writes, or when no instance synced for `ttl` (the TTL is at least `2 × stale_after`, so a
//! key does not expire between the rounds of instances that follow the fleet). Redis with
//! persistence and `noeviction` (or a `maxmemory` large enough) avoids the first two. While
//! an instance does not follow the fleet, its fallback budget decides: each adds at most what
//! that budget allows.
//!
//! ## Data layout
//! Keys are `{namespace}:breaker:{name}` and `{namespace}:budget:{name}` (namespace `robust`
//! by default), Redis hashes, each given `PEXPIRE ttl` (60 s by default) at every round, so
//! the keys of a dependency no instance names any more disappear. A missing budget key is a
//! full bucket.
//!
//! | key | field | meaning |
//! |---|---|---|
//! | `…:breaker:NAME` | `state` | 0 closed, 1 open, 2 half-open |
//! | | `until` | while open: when the break ends (Redis time, ms since the Unix epoch) |
//! | | `round`, `left`, `pok`, `pfail`, `since` | half-open: round number, probes left to grant, probe successes and failures, when the round granted its last probe (or began; the round starts again a break after it with every probe granted and unanswered) |
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
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::{CircuitBreaker, RetryBudget};
use crate::ConfigError;

mod breaker;
mod budget;
#[cfg(test)]
mod redis_server;
mod store;

pub use breaker::SharedBreaker;
pub use budget::SharedBudget;
pub use store::MemoryStore;

use breaker::BreakerCell;
use budget::BudgetCell;
use store::{Backend, BreakerSync, BudgetSync, MemoryBackend, RedisBackend, ms};

/// How a [`Fleet`] syncs. Defaults: namespace `robust`, interval 200 ms, timeout 100 ms,
/// `stale_after` = 2 × interval + 2 × timeout, key TTL 60 s, reconnect backoff up to 5 s.
///
/// The rules, checked when the fleet is made (a [`ConfigError`] names the option): `interval`
/// and `timeout` longer than 0; `interval + timeout ≤ stale_after` (two rounds on schedule
/// can end that far apart); `2 × stale_after ≤ ttl ≤ 30 days`; `interval ≤
/// max_reconnect_delay ≤ 5 minutes`. Each breaker also needs its window plus its break
/// duration within `ttl` ([`Fleet::breaker`]).
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

    /// The connect, read and write timeout of the sync thread's exchanges with Redis (> 0, at
    /// most `stale_after`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long the fleet's view is trusted from the end of a successful round when no other
    /// round ends (a stuck or starved sync thread); past that the guards decide locally (a
    /// failed round makes them do so at once, and so does a round that took longer than
    /// this). At least `interval + timeout`: two rounds on schedule can end that far apart
    /// (each starts `interval` after the last one started and may take up to `timeout`), and a
    /// shorter bound would let the guards stop following the fleet between them, for no fault
    /// (what they record meanwhile is never pushed).
    pub fn stale_after(mut self, stale_after: Duration) -> Self {
        self.stale_after = Some(stale_after);
        self
    }

    /// The time to live of every key, renewed at each round: at least `2 × stale_after` (so
    /// that a key does not expire between the rounds of instances that follow the fleet: an
    /// expired budget comes back as a full bucket) and each breaker's window plus its break
    /// duration, at most 30 days.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The longest wait between two attempts to reconnect: at least `interval`, at most 5
    /// minutes. The waits double from `interval` up to it, each drawn between half and all of
    /// its value.
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
        let stale = self.stale();
        if stale < self.interval {
            return Err(ConfigError::new(
                "stale_after",
                "must be at least the sync interval",
            ));
        }
        if self.timeout > stale {
            return Err(ConfigError::new(
                "timeout",
                "must not be longer than stale_after (a round that long falls back anyway)",
            ));
        }
        if stale < self.interval.saturating_add(self.timeout) {
            return Err(ConfigError::new(
                "stale_after",
                "must be at least interval + timeout (two rounds on schedule can end that far apart: a shorter bound lets the guards stop following the fleet between them, and what they record meanwhile is never pushed)",
            ));
        }
        if self.ttl < Duration::from_millis(1) || self.ttl > MAX_TTL {
            return Err(ConfigError::new("ttl", "must be between 1 ms and 30 days"));
        }
        if self.ttl < stale.saturating_mul(2) {
            return Err(ConfigError::new(
                "ttl",
                "must be at least 2 × stale_after (a key must outlive the gaps between syncs)",
            ));
        }
        if self.max_reconnect_delay < self.interval
            || self.max_reconnect_delay > MAX_RECONNECT_DELAY
        {
            return Err(ConfigError::new(
                "max_reconnect_delay",
                "must be between the sync interval and 5 minutes",
            ));
        }
        Ok(())
    }
}

/// The longest wait between two attempts to reconnect.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(300);

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
    /// The clock the guards read to know whether the fleet's view is fresh when they are given
    /// no instant (a budget's `deposit` and `try_withdraw`, a breaker's `state`): the
    /// system's, or the one a [`Fleet::manual_on`] fleet was given.
    clock: Option<Arc<dyn crate::time::Clock + Send + Sync>>,
    /// Until when (ms since `epoch`) the fleet's view is trusted (each guard keeps its own
    /// copy, which a failure of its key alone resets).
    valid_until: AtomicU64,
    status: AtomicU8,
    fallbacks: AtomicU64,
    /// Rounds started, and the number of the last round that succeeded.
    started: AtomicU64,
    ok_round: AtomicU64,
    options: FleetOptions,
    breakers: Mutex<Vec<Weak<BreakerCell>>>,
    budgets: Mutex<Vec<Weak<BudgetCell>>>,
    /// What budget guards dropped since the last round give back to their keys' buckets:
    /// their unspent leases and the calls they credited (pushed once, by the next round).
    orphans: Mutex<Vec<(String, store::BudgetPush)>>,
    /// Set when the last handle goes away: the sync thread stops (it is woken up).
    stop: Arc<AtomicBool>,
    /// Set by [`Fleet::wait_connected`]: the sync thread starts its next round at once (it is
    /// woken up) instead of at the end of its interval or reconnect delay.
    sync_now: Arc<AtomicBool>,
    thread: OnceLock<std::thread::Thread>,
}

impl Drop for FleetShared {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
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
    /// The current instant on the fleet's clock.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        match &self.clock {
            None => Instant::now(),
            Some(clock) => clock.now(),
        }
    }

    /// `t` in ms since the fleet's epoch.
    #[inline]
    pub(crate) fn ms(&self, t: Instant) -> u64 {
        ms(self.epoch, t)
    }

    /// Whether the fleet's view is to be followed at `now`.
    fn live(&self, now: Instant) -> bool {
        self.ms(now) < self.valid_until.load(Ordering::Acquire)
    }

    fn status(&self) -> FleetStatus {
        match self.status.load(Ordering::Acquire) {
            CONNECTED => FleetStatus::Connected,
            FALLBACK => FleetStatus::Fallback,
            _ => FleetStatus::Connecting,
        }
    }

    /// One sync of every guard, begun at `start`; `end` reads the clock when the round is
    /// over. All keys go in one exchange (one pipeline: one round trip with Redis). The
    /// round fails as a whole when the exchange does, or when it took longer than
    /// `stale_after` (its answers are too old to follow); an error of one key (a key of the
    /// wrong type, a script error) makes only that key's guard decide locally.
    ///
    /// Whatever a guard pushes in a round that fails for it is dropped, never pushed again.
    fn sync_round(
        &self,
        backend: &mut dyn Backend,
        start: Instant,
        end: &dyn Fn() -> Instant,
    ) -> Result<(), String> {
        let seq = self
            .started
            .fetch_add(1, Ordering::AcqRel)
            .saturating_add(1);
        let breakers = alive(&self.breakers);
        let budgets = alive(&self.budgets);
        let breaker_syncs: Vec<BreakerSync<'_>> =
            breakers.iter().map(|b| b.sync_request(start)).collect();
        // Dropped guards' give-backs go after the live guards' syncs (their replies are not
        // read; in a round that fails they are lost, as any push of such a round).
        let orphans = std::mem::take(&mut *self.orphans.lock().unwrap_or_else(|e| e.into_inner()));
        let budget_syncs: Vec<BudgetSync<'_>> = budgets
            .iter()
            .map(|b| b.sync_request())
            .chain(
                orphans
                    .iter()
                    .map(|(key, push)| BudgetSync { key, push: *push }),
            )
            .collect();
        let result = backend.round(&breaker_syncs, &budget_syncs, start);
        let end = end();
        let reply = match result {
            Ok(r) => r,
            Err(e) => {
                for (b, s) in breakers.iter().zip(&breaker_syncs) {
                    b.failed(&s.push);
                }
                for (b, s) in budgets.iter().zip(&budget_syncs) {
                    b.failed(&s.push);
                }
                return Err(e);
            }
        };
        let stale = self.options.stale();
        let took = end.saturating_duration_since(start);
        // Trusted for `stale_after` from the round's end; a round that overran is not
        // followed at all (what it granted is kept: the leases hold real tokens).
        let overran = took > stale;
        let until = if overran {
            0
        } else {
            self.ms(end)
                .saturating_add(u64::try_from(stale.as_millis()).unwrap_or(u64::MAX))
        };
        for ((b, r), s) in breakers.iter().zip(reply.breakers).zip(&breaker_syncs) {
            b.apply(r, &s.push, self, start, until);
        }
        for ((b, r), s) in budgets.iter().zip(reply.budgets).zip(&budget_syncs) {
            b.apply(r, &s.push, self, until);
        }
        if overran {
            return Err(format!(
                "a sync round took {} ms, longer than stale_after ({} ms)",
                took.as_millis(),
                stale.as_millis()
            ));
        }
        self.valid_until.store(until, Ordering::Release);
        self.ok_round.store(seq, Ordering::Release);
        Ok(())
    }

    /// Records the outcome of a round, with an event on each change. The event and the count
    /// come before the new status is seen: code that sees the status change finds them.
    /// (Rounds are reported one at a time: by the sync thread, or by `sync`, whose rounds
    /// take the store's lock in turn.)
    fn report(&self, result: &Result<(), String>) {
        match result {
            Ok(()) => {
                if self.status.load(Ordering::Acquire) == FALLBACK {
                    #[cfg(feature = "tracing")]
                    tracing::warn!(
                        target: "retry_runtime",
                        namespace = %self.options.namespace,
                        "fleet: redis answers again, the shared guards rejoin the fleet"
                    );
                }
                self.status.store(CONNECTED, Ordering::Release);
            }
            Err(_e) => {
                // The guards decide locally from now on, until a sync succeeds.
                self.valid_until.store(0, Ordering::Release);
                if self.status.load(Ordering::Acquire) != FALLBACK {
                    self.fallbacks.fetch_add(1, Ordering::Release);
                    #[cfg(feature = "tracing")]
                    tracing::warn!(
                        target: "retry_runtime",
                        namespace = %self.options.namespace,
                        error = %_e,
                        "fleet: redis is unreachable or too slow, the shared guards fall back to their local state"
                    );
                }
                self.status.store(FALLBACK, Ordering::Release);
            }
        }
    }

    fn key(&self, kind: &str, name: &str) -> String {
        format!("{}:{kind}:{name}", self.options.namespace)
    }
}

/// The guards still alive (the others are forgotten).
fn alive<T>(list: &Mutex<Vec<Weak<T>>>) -> Vec<Arc<T>> {
    let mut l = list.lock().unwrap_or_else(|e| e.into_inner());
    l.retain(|w| w.strong_count() > 0);
    l.iter().filter_map(Weak::upgrade).collect()
}

/// A connection to the fleet's shared state, and the thread that syncs its guards: make one
/// per process (a `static LazyLock<Fleet>`), then its guards with [`breaker`](Self::breaker)
/// and [`budget`](Self::budget). See the [module docs](self) for the design, the data layout
/// and the bounds.
///
/// The thread stops once the `Fleet` and all its guards are dropped: at once if it is waiting
/// for its next round (it is woken up), or at the end of the round in progress.
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
    fn shared(
        options: FleetOptions,
        clock: Option<Arc<dyn crate::time::Clock + Send + Sync>>,
    ) -> Result<Arc<FleetShared>, ConfigError> {
        options.validate()?;
        Ok(Arc::new(FleetShared {
            epoch: clock.as_ref().map_or_else(Instant::now, |c| c.now()),
            clock,
            valid_until: AtomicU64::new(0),
            status: AtomicU8::new(CONNECTING),
            fallbacks: AtomicU64::new(0),
            started: AtomicU64::new(0),
            ok_round: AtomicU64::new(0),
            options,
            breakers: Mutex::new(Vec::new()),
            budgets: Mutex::new(Vec::new()),
            orphans: Mutex::new(Vec::new()),
            stop: Arc::new(AtomicBool::new(false)),
            sync_now: Arc::new(AtomicBool::new(false)),
            thread: OnceLock::new(),
        }))
    }

    /// A fleet on the Redis server at `url` (`redis://host:port/db`). Returns at once: the
    /// connection is made by the background thread, and until its first sync the guards
    /// decide locally ([`wait_connected`](Self::wait_connected) waits for it). Error: an
    /// invalid URL or option.
    pub fn connect(url: &str, options: FleetOptions) -> Result<Fleet, ConfigError> {
        let client = redis::Client::open(url)
            .map_err(|_| ConfigError::new("url", "must be a redis:// URL"))?;
        let shared = Self::shared(options, None)?;
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
        let shared = Self::shared(options, None)?;
        spawn(&shared, MemoryBackend(store.clone()))?;
        Ok(Fleet {
            shared,
            manual: None,
        })
    }

    /// A fleet on a [`MemoryStore`] with no thread: each [`sync`](Self::sync) is one round,
    /// at the time it is given. Its guards read the system's clock to know whether the fleet's
    /// view is still fresh when they are given no instant (a budget's `deposit` and
    /// `try_withdraw`, a breaker's `state`): a simulation whose instants come from another
    /// clock uses [`manual_on`](Self::manual_on).
    pub fn manual(store: &MemoryStore, options: FleetOptions) -> Result<Fleet, ConfigError> {
        Ok(Fleet {
            shared: Self::shared(options, None)?,
            manual: Some(Mutex::new(MemoryBackend(store.clone()))),
        })
    }

    /// A [`manual`](Self::manual) fleet whose guards read `clock` (a
    /// [`VirtualTime`](crate::time::VirtualTime)) wherever they would read the system's: a
    /// deterministic simulation, whose syncs are given instants of that clock. (With
    /// [`manual`](Self::manual), such a simulation would judge the freshness of its fleet's
    /// view against the real time that passed while it ran.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::guard::fleet::{Fleet, FleetOptions, MemoryStore};
    /// use retry_runtime::time::{Clock, VirtualTime};
    /// use retry_runtime::RetryBudget;
    ///
    /// let time = VirtualTime::new();
    /// let fleet = Fleet::manual_on(&MemoryStore::new(), FleetOptions::new(), time.clone())?;
    /// let budget = fleet.budget(
    ///     "retries",
    ///     RetryBudget::new(10.0, 0.0, 1.0)?, // the fleet's bucket
    ///     RetryBudget::new(3.0, 0.0, 1.0)?,  // this instance's, while the fleet is not followed
    /// )?;
    /// assert!(fleet.sync(time.now()));
    /// assert!(!budget.try_withdraw()); // no lease yet: the next round asks for one
    /// time.advance(Duration::from_millis(200));
    /// assert!(fleet.sync(time.now()));
    /// assert!(budget.try_withdraw()); // paid from the lease
    /// assert_eq!(budget.fallback().tokens(), 3.0);
    /// // No sync for a minute of the virtual clock: the fallback budget pays.
    /// time.advance(Duration::from_secs(60));
    /// assert!(budget.try_withdraw());
    /// assert_eq!(budget.fallback().tokens(), 2.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn manual_on(
        store: &MemoryStore,
        options: FleetOptions,
        clock: impl crate::time::Clock + Send + Sync + 'static,
    ) -> Result<Fleet, ConfigError> {
        Ok(Fleet {
            shared: Self::shared(options, Some(Arc::new(clock)))?,
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
        let r = self.shared.sync_round(&mut *backend, now, &|| now);
        self.shared.report(&r);
        r.is_ok()
    }

    /// A breaker shared by the fleet under `name`. `local` decides while Redis is out of
    /// reach, and keeps deciding for this instance all along (it may open on its own); its
    /// failure ratio, break duration and number of probes are the fleet's too. The fleet's
    /// breaker opens when, over the last `window`, the fleet recorded at least `min_calls`
    /// attempts and the failure ratio reached the threshold. The guard follows the fleet from
    /// its first round on. Errors: `window` under 10 ms or longer than the keys' TTL, a
    /// break duration shorter than the sync interval plus the round's timeout (a probe's
    /// answer, pushed at its instance's next round, would come after the half-open round had
    /// restarted; a probe's own latency counts too: keep the break well above it),
    /// `min_calls` = 0, a window plus break duration longer than the TTL (an open state or
    /// the window could expire while nobody syncs). A half-open round whose probes have not
    /// all answered a break after it granted its last one restarts; a probe granted to an instance that has
    /// not used it yet is granted to it again in the new round, beside the round's own (which
    /// go to the instances that ask), so that instances calling less often than the break
    /// still close the breaker; the round's first `probes` answers decide it.
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
        let break_duration = local.fleet_settings().1;
        if window.saturating_add(break_duration) > ttl {
            return Err(ConfigError::new(
                "break_duration",
                "the window plus the break duration must not be longer than the keys' TTL",
            ));
        }
        // A half-open round whose probes have not all answered restarts after a break: the
        // answer of a probe reaches the fleet at its instance's next round, up to an interval
        // and a round's time after it came, so a shorter break voids every answer.
        let options = &self.shared.options;
        if break_duration < options.interval.saturating_add(options.timeout) {
            return Err(ConfigError::new(
                "break_duration",
                "must be at least the sync interval plus the round's timeout (a probe's answer reaches the fleet at the next round: a half-open round restarting sooner would never hear it)",
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
    /// this instance's own budget while Redis is out of reach (and before the guard's first
    /// round). An instance leases tokens only once it asks for a retry (the first is refused,
    /// the lease arrives at the next round), the cost of one retry at a time by default
    /// ([`SharedBudget::set_lease`]), and gives its unspent lease back after 5 rounds in a row
    /// without a retry asked for: idle instances hold no tokens. A guard dropped (its last
    /// handle gone) gives its lease back at the next round.
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

    /// Waits (blocking, up to `timeout`) until a sync round that began after this call has
    /// succeeded, so that every guard made before the call follows the fleet (unless its own
    /// key fails); `true` if one has. The sync thread is asked for that round at once, not at
    /// the end of its interval (or of its wait before reconnecting). A
    /// [`manual`](Self::manual) fleet does not wait: whether its last sync succeeded.
    pub fn wait_connected(&self, timeout: Duration) -> bool {
        if self.manual.is_some() {
            return self.status() == FleetStatus::Connected;
        }
        let target = self
            .shared
            .started
            .load(Ordering::Acquire)
            .saturating_add(1);
        // The next round now: the one in progress, if any, is followed by another at once.
        self.shared.sync_now.store(true, Ordering::Release);
        if let Some(t) = self.shared.thread.get() {
            t.unpark();
        }
        let start = Instant::now();
        loop {
            if self.status() == FleetStatus::Connected
                && self.shared.ok_round.load(Ordering::Acquire) >= target
                && self.shared.live(Instant::now())
            {
                return true;
            }
            if start.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A reconnect wait drawn between half and all of `d`, so that the instances of a fleet that
/// lost Redis together do not all reconnect at the same instants.
fn jittered<R: rand::Rng + ?Sized>(d: Duration, rng: &mut R) -> Duration {
    use rand::RngExt as _;
    let half = d / 2;
    half + rng.random_range(Duration::ZERO..=d - half)
}

fn spawn(
    shared: &Arc<FleetShared>,
    mut backend: impl Backend + 'static,
) -> Result<(), ConfigError> {
    let weak = Arc::downgrade(shared);
    let stop = Arc::clone(&shared.stop);
    let sync_now = Arc::clone(&shared.sync_now);
    let interval = shared.options.interval;
    let max_delay = shared.options.max_reconnect_delay;
    let handle = std::thread::Builder::new()
        .name("robust-fleet-sync".to_owned())
        .spawn(move || {
            let mut delay = interval;
            while !stop.load(Ordering::Acquire) {
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                let start = Instant::now();
                let r = shared.sync_round(&mut backend, start, &Instant::now);
                shared.report(&r);
                drop(shared);
                // After a success, the interval from the start of this round. After a
                // failure, twice as long each time (up to the most), with jitter (between half
                // and all of it) so that a fleet does not reconnect in lockstep.
                let wait = if r.is_ok() {
                    delay = interval;
                    interval.saturating_sub(start.elapsed())
                } else {
                    let d = delay;
                    delay = delay.saturating_mul(2).min(max_delay);
                    jittered(d, &mut rand::rng())
                };
                // Sleep, but wake up at once when the last handle goes away, or when
                // `wait_connected` asks for a round.
                let Some(deadline) = Instant::now().checked_add(wait) else {
                    continue;
                };
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero()
                        || stop.load(Ordering::Acquire)
                        || sync_now.swap(false, Ordering::AcqRel)
                    {
                        break;
                    }
                    std::thread::park_timeout(left);
                }
            }
        })
        .map_err(|_| ConfigError::new("thread", "the sync thread could not be started"))?;
    let _ = shared.thread.set(handle.thread().clone());
    Ok(())
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

    /// Ten instances on `store` whose one failure each opens the fleet's breaker at `at`
    /// (after a first sync at `first`, and one at `at`): the first round after the failures
    /// pushes them, the second reads the state they opened.
    fn tripped(
        store: &MemoryStore,
        first: Instant,
        at: Instant,
    ) -> (Vec<Fleet>, Vec<SharedBreaker>) {
        let fleets: Vec<Fleet> = (0..10)
            .map(|_| Fleet::manual(store, options()).unwrap())
            .collect();
        let breakers: Vec<SharedBreaker> = fleets.iter().map(breaker).collect();
        fleets.iter().for_each(|f| assert!(f.sync(first)));
        // (Followed at `at`: outcomes recorded while the view is not are never pushed.)
        fleets.iter().for_each(|f| assert!(f.sync(at)));
        assert_eq!(fleets[0].status(), FleetStatus::Connected);
        for b in &breakers {
            let p = (&b).acquire(at).unwrap();
            (&b).record(at, p, false);
        }
        fleets.iter().for_each(|f| assert!(f.sync(at)));
        fleets.iter().for_each(|f| assert!(f.sync(at)));
        assert_eq!(breakers[0].fleet_state(at), Some(BreakerState::Open));
        assert!(breakers.iter().all(|b| (&b).acquire(at).is_none()));
        (fleets, breakers)
    }

    /// [`tripped`] at an instant, then synced after its 5 s break: the fleet's breaker is
    /// half-open, for every instance; and that instant.
    fn half_open(store: &MemoryStore) -> (Vec<Fleet>, Vec<SharedBreaker>, Instant) {
        let t0 = Instant::now();
        let (fleets, breakers) = tripped(store, t0, t0);
        let t1 = t0 + Duration::from_millis(5_050);
        fleets.iter().for_each(|f| assert!(f.sync(t1)));
        assert_eq!(breakers[0].fleet_state(t1), Some(BreakerState::HalfOpen));
        (fleets, breakers, t1)
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
        // A TTL shorter than two staleness bounds: a key could expire between two syncs (a
        // budget's bucket would come back full each time); huge durations are errors, not
        // overflows.
        for (o, param) in [
            (options().ttl(Duration::from_millis(10)), "ttl"),
            (
                options()
                    .stale_after(Duration::from_secs(2))
                    .ttl(Duration::from_secs(3)),
                "ttl",
            ),
            (
                options().stale_after(Duration::from_millis(40)),
                "stale_after",
            ),
            // At least the interval and the timeout, but less than both together (100 + 50
            // ms): the guards would stop following between two rounds on schedule.
            (
                options().stale_after(Duration::from_millis(149)),
                "stale_after",
            ),
            (
                options()
                    .stale_after(Duration::from_millis(100))
                    .timeout(Duration::from_millis(150)),
                "timeout",
            ),
            (options().interval(Duration::MAX), "ttl"),
            (options().timeout(Duration::MAX), "ttl"),
            (
                options().max_reconnect_delay(Duration::from_secs(301)),
                "max_reconnect_delay",
            ),
            (
                options().max_reconnect_delay(Duration::MAX),
                "max_reconnect_delay",
            ),
        ] {
            assert_eq!(p(Fleet::manual(&store, o)), param);
        }
        let ok = options()
            .stale_after(Duration::from_secs(2))
            .ttl(Duration::from_secs(4))
            .max_reconnect_delay(Duration::from_secs(300));
        assert!(Fleet::manual(&store, ok).is_ok());
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
        // A break shorter than an interval and a round (100 + 50 ms): a probe's answer would
        // come after the next round had started.
        let short = CircuitBreaker::new(20, 10, 0.5, Duration::from_millis(149), 1).unwrap();
        assert_eq!(
            b(fleet.breaker("x", short, Duration::from_secs(1), 1)),
            "break_duration"
        );
        let enough = CircuitBreaker::new(20, 10, 0.5, Duration::from_millis(150), 1).unwrap();
        assert!(
            fleet
                .breaker("x", enough, Duration::from_secs(1), 1)
                .is_ok()
        );
        let long = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(61), 1).unwrap();
        assert_eq!(
            b(fleet.breaker("x", long, Duration::from_secs(1), 1)),
            "break_duration"
        );
        // The window and the break must both fit in the TTL: 50 s + 11 s > 60 s.
        let eleven = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(11), 1).unwrap();
        assert_eq!(
            b(fleet.breaker("x", eleven, Duration::from_secs(50), 1)),
            "break_duration"
        );
        let ten = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(10), 1).unwrap();
        assert!(fleet.breaker("x", ten, Duration::from_secs(50), 1).is_ok());
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

    /// The break an instance holds once it stops following the fleet is never longer than
    /// the breaker's own: a store whose clock stepped back (here, a sync 3 s in the past)
    /// reports a break 3 s longer, which is cut to the 5 s it can be.
    #[test]
    fn a_held_break_is_never_longer_than_a_break() {
        let store = MemoryStore::new();
        let t0 = Instant::now() + Duration::from_secs(100);
        // (The store counts its time from its first sync, 10 s before.)
        let (fleets, _breakers) = tripped(&store, t0 - Duration::from_secs(10), t0);
        // The store's clock goes back 3 s: its break has 8 s left by it, which an instance
        // that syncs for the first time then is told.
        let late = Fleet::manual(&store, options()).unwrap();
        let b = breaker(&late);
        let back = t0 - Duration::from_secs(3);
        assert!(late.sync(back));
        assert_eq!(b.fleet_state(back), Some(BreakerState::Open));
        drop(fleets);
        // No sync after it: the break it holds ends 5 s after that sync, not 8 (then its own
        // breaker, opened with the fleet's, lets one probe through).
        assert!(b.acquire(back + Duration::from_millis(4_900)).is_none());
        assert!(b.acquire(back + Duration::from_millis(5_100)).is_some());
        assert!(b.acquire(back + Duration::from_millis(5_100)).is_none());
    }

    /// A breaker's key lost during a break (evicted, or Redis restarted without it) is made
    /// anew open, for what is left of the break the syncing instance holds: the fleet's
    /// breaker stays open, and half-opens when the break ends. (It came back closed and
    /// empty, and the fleet's traffic went to the dependency.)
    #[test]
    fn a_key_lost_during_a_break_comes_back_open() {
        let store = MemoryStore::new();
        let t0 = Instant::now();
        let (fleets, breakers) = tripped(&store, t0, t0);
        store.lose(breakers[0].key());
        let t1 = t0 + Duration::from_secs(2);
        fleets.iter().for_each(|f| assert!(f.sync(t1)));
        for b in &breakers {
            assert_eq!(b.fleet_state(t1), Some(BreakerState::Open));
            assert!((&b).acquire(t1).is_none());
        }
        // The break ends when it would have: 5 s from its start.
        let t2 = t0 + Duration::from_millis(5_050);
        fleets.iter().for_each(|f| assert!(f.sync(t2)));
        assert_eq!(breakers[0].fleet_state(t2), Some(BreakerState::HalfOpen));
    }

    /// A breaker's key lost while the fleet's breaker is half-open (or open with its break
    /// over) is made anew open for 1 ms by the next instance that follows the fleet, then
    /// half-open: its probes decide, as before the loss. (It came back closed, and the
    /// fleet's traffic went to a dependency whose probes had not answered yet.)
    #[test]
    fn a_key_lost_while_half_open_comes_back_half_open() {
        let store = MemoryStore::new();
        let (fleets, breakers, t1) = half_open(&store);
        store.lose(breakers[0].key());
        let t2 = t1 + Duration::from_millis(100);
        fleets.iter().for_each(|f| assert!(f.sync(t2)));
        for b in &breakers {
            assert_ne!(b.fleet_state(t2), Some(BreakerState::Closed));
        }
        // The next round: half-open again, and an attempt without a probe is refused.
        let t3 = t2 + Duration::from_millis(100);
        fleets.iter().for_each(|f| assert!(f.sync(t3)));
        assert_eq!(breakers[0].fleet_state(t3), Some(BreakerState::HalfOpen));
        assert!(breakers.iter().all(|b| (&b).acquire(t3).is_none()));
        // An instance that asked gets the probe at the round after, and its success closes
        // the fleet's breaker (one probe here).
        let t4 = t3 + Duration::from_millis(100);
        fleets.iter().for_each(|f| assert!(f.sync(t4)));
        let probe = breakers
            .iter()
            .find_map(|b| (&b).acquire(t4).map(|p| (b, p)))
            .expect("a probe granted");
        (&probe.0).record(t4, probe.1, true);
        let t5 = t4 + Duration::from_millis(100);
        fleets.iter().for_each(|f| assert!(f.sync(t5)));
        assert_eq!(breakers[0].fleet_state(t5), Some(BreakerState::Closed));
    }

    /// A Redis restart without persistence during a half-open round: the rounds fail, then
    /// the key is gone. The first instance back remakes it open for 1 ms, then half-open (its
    /// local breaker, which decided meanwhile, has not closed): not closed.
    #[test]
    fn a_key_lost_in_an_outage_while_half_open_comes_back_half_open() {
        let store = MemoryStore::new();
        let (fleets, breakers, t1) = half_open(&store);
        store.set_down(true);
        let t2 = t1 + Duration::from_millis(100);
        fleets.iter().for_each(|f| assert!(!f.sync(t2)));
        store.lose(breakers[0].key());
        store.set_down(false);
        let t3 = t2 + Duration::from_millis(400);
        fleets.iter().for_each(|f| assert!(f.sync(t3)));
        assert_ne!(breakers[0].fleet_state(t3), Some(BreakerState::Closed));
        let t4 = t3 + Duration::from_millis(100);
        fleets.iter().for_each(|f| assert!(f.sync(t4)));
        assert_eq!(breakers[0].fleet_state(t4), Some(BreakerState::HalfOpen));
    }

    /// An instance whose local breaker closed while it did not follow the fleet (its own probe
    /// succeeded: the dependency answered) does not hold a key lost meanwhile to the half-open
    /// round it saw last: the key comes back closed.
    #[test]
    fn a_local_breaker_closed_since_does_not_remake_a_lost_key_half_open() {
        let store = MemoryStore::new();
        let (fleets, breakers, t1) = half_open(&store);
        store.lose(breakers[0].key());
        // Past `stale_after` (300 ms) since its last round: its local breaker decides, lets
        // its probe through, and closes at its success.
        let t2 = t1 + Duration::from_millis(400);
        assert_eq!(breakers[0].fleet_state(t2), None);
        let probe = breakers[0].acquire(t2).expect("the local probe");
        (&breakers[0]).record(t2, probe, true);
        assert_eq!(breakers[0].local().state(), BreakerState::Closed);
        assert!(fleets[0].sync(t2));
        assert_eq!(breakers[0].fleet_state(t2), Some(BreakerState::Closed));
    }

    #[test]
    fn an_outage_falls_back_to_the_local_breaker_and_rejoins() {
        let store = MemoryStore::new();
        let t0 = Instant::now();
        let (fleets, breakers) = tripped(&store, t0, t0);
        // No sync for longer than `stale_after` (300 ms; a stuck sync thread): the view is
        // not followed, but the break the fleet announced (5 s) holds to its end.
        let late = t0 + Duration::from_millis(350);
        assert!(
            breakers[0]
                .acquire(t0 + Duration::from_millis(250))
                .is_none()
        );
        assert_eq!(breakers[0].fleet_state(late), None);
        assert!(breakers[0].acquire(late).is_none(), "the break holds");
        assert!(!breakers[0].would_admit(late));
        assert!(fleets[0].sync(late));
        assert!(
            breakers[0].acquire(late).is_none(),
            "the fleet's view again"
        );
        // The store goes away: at the first failed sync, each instance decides alone, within
        // the announced break.
        store.set_down(true);
        let t1 = t0 + Duration::from_millis(400);
        fleets.iter().for_each(|f| assert!(!f.sync(t1)));
        assert_eq!(fleets[0].status(), FleetStatus::Fallback);
        assert_eq!(fleets[0].fallbacks(), 1);
        assert!(breakers.iter().all(|b| (&b).acquire(t1).is_none()));
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
        // Gone again until after the break: from its end, each instance's own breaker
        // (opened with the fleet's) decides.
        store.set_down(true);
        let t4 = t0 + Duration::from_millis(600);
        fleets.iter().for_each(|f| assert!(!f.sync(t4)));
        assert!(breakers.iter().all(|b| (&b).acquire(t4).is_none()));
        // Each local breaker opened with the fleet's: at the end of the break it lets one
        // probe through, not everything (it was closed and empty, and let all through).
        let t5 = t0 + Duration::from_millis(5_100);
        assert!(breakers[0].would_admit(t5));
        assert!(breakers.iter().all(|b| (&b).acquire(t5).is_some()));
        assert!(!breakers[0].would_admit(t5));
        assert!(breakers.iter().all(|b| (&b).acquire(t5).is_none()));
        assert_eq!(breakers[0].local().state(), BreakerState::HalfOpen);
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
                .map(|b| b.fleet_tokens().expect("synced"))
                .fold(f64::MAX, f64::min);
            assert!(bucket + leased + spent as f64 >= 7.0 - 1e-9);
            t += Duration::from_millis(100);
        }
        assert_eq!(made, 7, "ten instances, seven tokens: seven retries");
    }

    /// The fallback budget runs while the fleet decides: credited with each call (the fleet's
    /// tokens pay the retries), so that one outage that drained it does not leave it empty for
    /// the next.
    #[test]
    fn the_fallback_budget_runs_while_the_fleet_decides() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let b = fleet
            .budget(
                "dep",
                RetryBudget::new(100.0, 0.5, 1.0).unwrap(),
                RetryBudget::new(2.0, 0.5, 1.0).unwrap(),
            )
            .unwrap();
        let t0 = Instant::now();
        // An outage: the fallback decides, and is drained.
        store.set_down(true);
        assert!(!fleet.sync(t0));
        assert!(b.try_withdraw());
        assert!(b.try_withdraw());
        assert!(!b.try_withdraw(), "the fallback's two tokens are spent");
        // Redis is back; four calls while the fleet decides earn the fallback two tokens.
        store.set_down(false);
        assert!(fleet.sync(t0 + Duration::from_secs(1)));
        for _ in 0..4 {
            b.deposit();
        }
        // Retries the fleet pays for (from the lease the next round grants, once one is
        // asked for) are not charged to it.
        assert!(!b.try_withdraw(), "no lease yet");
        assert!(fleet.sync(t0 + Duration::from_millis(1100)));
        assert!(b.try_withdraw());
        // The next outage finds the two tokens earned.
        store.set_down(true);
        assert!(!fleet.sync(t0 + Duration::from_secs(2)));
        assert!(b.try_withdraw(), "earned while the fleet decided");
        assert!(b.try_withdraw());
        assert!(!b.try_withdraw());
    }

    /// A budget guard dropped gives its unspent lease (and the calls it credited) back to the
    /// fleet's bucket at the next round: guards that come and go do not drain it.
    #[test]
    fn a_dropped_budget_gives_its_lease_back() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let make = || {
            fleet
                .budget(
                    "dep",
                    RetryBudget::new(10.0, 0.0, 1.0).unwrap(),
                    RetryBudget::new(1.0, 0.0, 1.0).unwrap(),
                )
                .unwrap()
        };
        let a = make();
        a.set_lease(5);
        let t0 = Instant::now();
        assert!(fleet.sync(t0));
        assert!(!a.try_withdraw(), "no lease yet: one is asked for");
        assert!(fleet.sync(t0 + Duration::from_millis(100)));
        assert_eq!(a.lease(), 5.0);
        assert_eq!(a.fleet_tokens(), Some(5.0));
        drop(a);
        assert!(fleet.sync(t0 + Duration::from_millis(200)));
        let b = make();
        assert!(fleet.sync(t0 + Duration::from_millis(300)));
        assert_eq!(b.fleet_tokens(), Some(10.0), "the lease went back");
        // Once: when `b` has leased half, the next rounds give nothing more back.
        b.set_lease(5);
        assert!(!b.try_withdraw());
        assert!(fleet.sync(t0 + Duration::from_millis(400)));
        assert_eq!(b.fleet_tokens(), Some(5.0));
        assert!(fleet.sync(t0 + Duration::from_millis(500)));
        assert_eq!(b.fleet_tokens(), Some(5.0));
    }

    #[test]
    fn outcomes_of_an_outage_are_not_pushed_at_the_rejoin() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        // Locally: at least 50 attempts, so that the local breaker stays closed throughout.
        let local = CircuitBreaker::new(100, 50, 0.5, Duration::from_secs(5), 1).unwrap();
        let b = fleet
            .breaker("dep", local, Duration::from_secs(10), 10)
            .unwrap();
        let fail = |t: Instant, n: u32| {
            for _ in 0..n {
                let p = b.acquire(t).expect("admitted");
                (&b).record(t, p, false);
            }
        };
        let t0 = Instant::now();
        assert!(fleet.sync(t0));
        // Five failures while the fleet is followed, then the round that would push them
        // fails: they are dropped.
        fail(t0 + Duration::from_millis(50), 5);
        store.set_down(true);
        assert!(!fleet.sync(t0 + Duration::from_millis(100)));
        // Thirty failures during the outage, after the last failed round (the sync thread
        // waits up to `max_reconnect_delay` between two): counted locally only.
        fail(t0 + Duration::from_secs(1), 30);
        assert_eq!(b.local().state(), BreakerState::Closed);
        // Ten minutes later Redis is back: the fleet's window holds none of them.
        store.set_down(false);
        let t1 = t0 + Duration::from_secs(600);
        assert!(fleet.sync(t1));
        assert_eq!(b.fleet_state(t1), Some(BreakerState::Closed));
        assert_eq!(b.fleet_counts(), (0, 0));
        assert!(fleet.sync(t1 + Duration::from_millis(100)));
        assert_eq!(b.fleet_counts(), (0, 0));
        // Outcomes recorded once the fleet is followed again are pushed.
        fail(t1 + Duration::from_millis(150), 3);
        assert!(fleet.sync(t1 + Duration::from_millis(200)));
        assert_eq!(b.fleet_counts(), (3, 3));
    }

    #[test]
    fn a_round_that_overruns_stale_after_falls_back() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let b = breaker(&fleet);
        let budget = fleet
            .budget(
                "dep",
                RetryBudget::new(5.0, 0.0, 1.0).unwrap(),
                RetryBudget::new(1.0, 0.0, 1.0).unwrap(),
            )
            .unwrap();
        let t0 = Instant::now();
        assert!(fleet.sync(t0));
        assert!(
            !budget.try_withdraw(),
            "no lease before a retry is asked for"
        );
        let stale = fleet.shared.options.stale();
        let mut backend = MemoryBackend(store.clone());
        // A round that ends within `stale_after` of its start: followed until `stale_after`
        // after its end.
        let t1 = t0 + Duration::from_millis(100);
        let end = t1 + stale;
        let r = fleet.shared.sync_round(&mut backend, t1, &|| end);
        fleet.shared.report(&r);
        assert!(r.is_ok());
        assert!(
            b.fleet_state(end + stale - Duration::from_millis(1))
                .is_some()
        );
        assert!(b.fleet_state(end + stale).is_none());
        assert_eq!(budget.lease(), 1.0);
        // One that took longer: its answers are not followed, and the fleet falls back (its
        // grants are kept: the lease holds real tokens).
        budget.try_withdraw();
        let t2 = end;
        let late = t2 + stale + Duration::from_millis(1);
        let r = fleet.shared.sync_round(&mut backend, t2, &|| late);
        fleet.shared.report(&r);
        assert!(r.is_err());
        assert_eq!(fleet.status(), FleetStatus::Fallback);
        assert_eq!(fleet.fallbacks(), 1);
        assert!(b.fleet_state(late).is_none());
        assert_eq!(budget.lease(), 1.0);
        assert!(fleet.sync(late));
        assert_eq!(fleet.status(), FleetStatus::Connected);
        assert!(b.fleet_state(late).is_some());
    }

    #[test]
    fn idle_instances_hold_no_tokens() {
        let store = MemoryStore::new();
        let fleets: Vec<Fleet> = (0..50)
            .map(|_| Fleet::manual(&store, options()).unwrap())
            .collect();
        let budgets: Vec<SharedBudget> = fleets
            .iter()
            .map(|f| {
                let fleet = RetryBudget::new(10.0, 0.0, 1.0).unwrap();
                let fallback = RetryBudget::new(1.0, 0.0, 1.0).unwrap();
                f.budget("dep", fleet, fallback).unwrap()
            })
            .collect();
        let mut t = Instant::now();
        // Not known before the first sync (not the capacity it was made with).
        assert_eq!(budgets[0].fleet_tokens(), None);
        let sync_all = |t: Instant| fleets.iter().for_each(|f| assert!(f.sync(t)));
        for _ in 0..10 {
            sync_all(t);
            t += Duration::from_millis(100);
        }
        // Fifty idle instances: the bucket is untouched.
        assert!(budgets.iter().all(|b| b.lease() == 0.0));
        assert_eq!(budgets[0].fleet_tokens(), Some(10.0));
        // One needs a retry: refused (no lease yet), leased at the next sync, then paid.
        let b = &budgets[7];
        assert!(!b.try_withdraw());
        sync_all(t);
        assert_eq!(b.lease(), 1.0);
        assert_eq!(b.fleet_tokens(), Some(9.0));
        assert!(b.try_withdraw());
        // It keeps asking: its lease is topped up at each sync.
        t += Duration::from_millis(100);
        sync_all(t);
        assert_eq!(b.lease(), 1.0);
        // Then it goes quiet: after IDLE_SYNCS syncs the unspent token goes back.
        for _ in 0..budget::IDLE_SYNCS {
            assert_eq!(b.lease(), 1.0);
            t += Duration::from_millis(100);
            sync_all(t);
        }
        assert_eq!(b.lease(), 0.0);
        t += Duration::from_millis(100);
        sync_all(t);
        assert_eq!(
            budgets[0].fleet_tokens(),
            Some(9.0),
            "ten tokens, one retry spent"
        );
        // A retry now, long after the last: refused, its lease given back.
        assert!(!b.try_withdraw());

        // An instance that keeps its lease for good is granted it at the next round without
        // asking, and still holds it after many idle rounds: its rare retry is paid.
        let keeper = &budgets[11];
        keeper.keep_lease(u32::MAX);
        t += Duration::from_millis(100);
        sync_all(t);
        assert_eq!(keeper.lease(), 1.0);
        for _ in 0..3 * budget::IDLE_SYNCS {
            t += Duration::from_millis(100);
            sync_all(t);
        }
        assert_eq!(keeper.lease(), 1.0);
        assert!(keeper.try_withdraw());
        t += Duration::from_millis(100);
        sync_all(t);
        assert_eq!(keeper.lease(), 1.0, "topped up");
        // A lease lowered by `set_lease` gives its excess back at the next round, kept for
        // good or not.
        keeper.set_lease(3);
        keeper.try_withdraw();
        t += Duration::from_millis(100);
        sync_all(t);
        assert_eq!(keeper.lease(), 3.0);
        let before = keeper.fleet_tokens().unwrap();
        keeper.set_lease(1);
        t += Duration::from_millis(100);
        sync_all(t);
        assert_eq!(keeper.lease(), 1.0);
        assert_eq!(
            keeper.fleet_tokens(),
            Some(before + 2.0),
            "the excess is back"
        );
        // One that keeps it for 8 idle rounds gives it back after the eighth.
        let longer = &budgets[12];
        longer.keep_lease(8);
        assert!(!longer.try_withdraw());
        t += Duration::from_millis(100);
        sync_all(t);
        assert_eq!(longer.lease(), 1.0);
        for round in 1..=8 {
            assert_eq!(longer.lease(), 1.0, "idle round {round}");
            t += Duration::from_millis(100);
            sync_all(t);
        }
        assert_eq!(longer.lease(), 0.0);
    }

    #[test]
    fn one_bad_key_makes_only_its_guard_decide_locally() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let good = breaker(&fleet);
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(5), 1).unwrap();
        let bad = fleet
            .breaker("bad", local, Duration::from_secs(10), 10)
            .unwrap();
        let budget = fleet
            .budget(
                "bad",
                RetryBudget::new(5.0, 0.0, 1.0).unwrap(),
                RetryBudget::new(1.0, 0.0, 1.0).unwrap(),
            )
            .unwrap();
        store.set_broken("robust:breaker:bad", true);
        store.set_broken("robust:budget:bad", true);
        let t0 = Instant::now();
        assert!(fleet.sync(t0), "the round itself succeeds");
        assert_eq!(fleet.status(), FleetStatus::Connected);
        assert_eq!(fleet.fallbacks(), 0);
        assert_eq!(good.fleet_state(t0), Some(BreakerState::Closed));
        assert_eq!(
            bad.fleet_state(t0),
            None,
            "the bad key's guard decides locally"
        );
        assert!(budget.try_withdraw());
        assert_eq!(budget.spent(), 0, "paid by the fallback budget");
        store.set_broken("robust:breaker:bad", false);
        let t1 = t0 + Duration::from_millis(100);
        assert!(fleet.sync(t1));
        assert_eq!(bad.fleet_state(t1), Some(BreakerState::Closed));
    }

    /// A breaker `name` of `fleet` (a 1 s break; the local breaker needs 10 attempts, so it
    /// stays closed) that two failures at `t0` open for the fleet.
    fn opened(fleet: &Fleet, name: &str, min_calls: u32, t0: Instant) -> SharedBreaker {
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(1), 1).unwrap();
        opened_with(fleet, name, local, min_calls, 2, t0)
    }

    /// [`opened`] with the local breaker `local`, opened by `failures` failures.
    fn opened_with(
        fleet: &Fleet,
        name: &str,
        local: CircuitBreaker,
        min_calls: u32,
        failures: u32,
        t0: Instant,
    ) -> SharedBreaker {
        let b = fleet
            .breaker(name, local, Duration::from_secs(10), min_calls)
            .unwrap();
        assert!(fleet.sync(t0));
        for _ in 0..failures {
            let p = b.acquire(t0).unwrap();
            (&b).record(t0, p, false);
        }
        assert!(fleet.sync(t0));
        assert_eq!(b.fleet_state(t0), Some(BreakerState::Open));
        b
    }

    /// A probe for `b` at `t` (its break over): a round makes the fleet half-open, an attempt
    /// asks, the next round grants.
    fn probe(fleet: &Fleet, b: &SharedBreaker, t: Instant) -> crate::guard::Permit {
        assert!(fleet.sync(t));
        assert!(b.acquire(t).is_none(), "no probe granted yet: asks for one");
        assert!(fleet.sync(t));
        b.acquire(t).expect("a probe")
    }

    #[test]
    fn a_probe_answer_counts_only_in_its_own_round() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let t0 = Instant::now();
        let b = opened(&fleet, "dep", 2, t0);
        // Round 1: a probe granted, not answered before the round times out.
        let t1 = t0 + Duration::from_secs(1);
        let old = probe(&fleet, &b, t1);
        let t2 = t1 + Duration::from_secs(1);
        let new = probe(&fleet, &b, t2);
        // The late answer of round 1, a failure, is dropped; round 2's success closes.
        (&b).record(t2, old, false);
        (&b).record(t2, new, true);
        assert!(fleet.sync(t2 + Duration::from_millis(100)));
        assert_eq!(
            b.fleet_state(t2 + Duration::from_millis(100)),
            Some(BreakerState::Closed)
        );
    }

    /// Attempts admitted before the fleet's breaker opened that answer after it closed again
    /// (they hung meanwhile) report failures from before: they do not go into the window the
    /// closed breaker starts anew (before, ten of them reopened it at once).
    #[test]
    fn outcomes_from_before_the_fleet_opened_stay_out_of_its_next_window() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let t0 = Instant::now();
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(1), 1).unwrap();
        let b = fleet
            .breaker("dep", local, Duration::from_secs(10), 2)
            .unwrap();
        assert!(fleet.sync(t0));
        let late: Vec<_> = (0..10).map(|_| b.acquire(t0).unwrap()).collect();
        for _ in 0..2 {
            let p = b.acquire(t0).unwrap();
            (&b).record(t0, p, false);
        }
        assert!(fleet.sync(t0));
        assert_eq!(b.fleet_state(t0), Some(BreakerState::Open));
        // After the break, one probe closes it.
        let t1 = t0 + Duration::from_secs(1);
        let p = probe(&fleet, &b, t1);
        (&b).record(t1, p, true);
        assert!(fleet.sync(t1));
        assert_eq!(b.fleet_state(t1), Some(BreakerState::Closed));
        // The ten attempts of before fail now.
        for p in late {
            (&b).record(t1, p, false);
        }
        assert!(fleet.sync(t1 + Duration::from_millis(100)));
        assert_eq!(
            b.fleet_state(t1 + Duration::from_millis(100)),
            Some(BreakerState::Closed)
        );
        assert_eq!(b.fleet_counts(), (0, 0));
    }

    /// When the fleet's breaker closes again, the local breaker goes on with an empty window,
    /// as a breaker that has just closed: failures it recorded before the fleet's opened (too
    /// few to open it then) do not open it at the first success after (they did: three
    /// failures and a success, 3 of 4 with a minimum of 4 and a ratio of 0.5).
    #[test]
    fn the_local_window_starts_anew_when_the_fleet_s_breaker_closes() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let t0 = Instant::now();
        let local = CircuitBreaker::new(20, 4, 0.5, Duration::from_secs(1), 1).unwrap();
        let b = opened_with(&fleet, "dep", local, 3, 3, t0);
        // (3 failures, under its minimum: it opened with the fleet's.)
        assert_eq!(b.local().state(), BreakerState::Open);
        let t1 = t0 + Duration::from_secs(1);
        let p = probe(&fleet, &b, t1);
        (&b).record(t1, p, true);
        assert!(fleet.sync(t1));
        assert_eq!(b.fleet_state(t1), Some(BreakerState::Closed));
        for _ in 0..4 {
            let p = b.acquire(t1).expect("closed, the local breaker too");
            (&b).record(t1, p, true);
        }
        assert_eq!(b.local().state(), BreakerState::Closed);
    }

    /// An instance that first finds the fleet's breaker half-open has its own breaker open
    /// with its break over: when it stops following the fleet (the store goes away), it lets
    /// one probe through, not everything.
    #[test]
    fn an_instance_that_joins_a_half_open_round_probes_alone_when_it_falls_back() {
        let store = MemoryStore::new();
        let (fa, fb) = (
            Fleet::manual(&store, options()).unwrap(),
            Fleet::manual(&store, options()).unwrap(),
        );
        let t0 = Instant::now();
        let _a = opened(&fa, "dep", 2, t0);
        let t1 = t0 + Duration::from_secs(1);
        assert!(fa.sync(t1));
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(1), 1).unwrap();
        let b = fb
            .breaker("dep", local, Duration::from_secs(10), 2)
            .unwrap();
        assert!(fb.sync(t1));
        assert_eq!(b.fleet_state(t1), Some(BreakerState::HalfOpen));
        store.set_down(true);
        let t2 = t1 + Duration::from_millis(100);
        assert!(!fb.sync(t2));
        assert!(b.acquire(t2).is_some(), "its own probe");
        assert!(b.acquire(t2).is_none());
    }

    /// A local breaker that closed on its own during an outage (its probe succeeded, after
    /// the break it held) opens again when the instance rejoins a fleet whose breaker is not
    /// closed: at the next outage it probes again instead of letting everything through. (The
    /// fleet's state had not changed since the last answer, and the local breaker stayed
    /// closed.)
    #[test]
    fn a_local_breaker_closed_during_an_outage_follows_the_fleet_again() {
        let store = MemoryStore::new();
        let t0 = Instant::now();
        let (fleets, breakers) = tripped(&store, t0, t0);
        let b = &breakers[0];
        store.set_down(true);
        assert!(!fleets[0].sync(t0 + Duration::from_millis(100)));
        // After the break it held, its own probe succeeds: its breaker closes.
        let t1 = t0 + Duration::from_millis(5_100);
        let p = b.acquire(t1).expect("its own probe");
        (&b).record(t1, p, true);
        assert_eq!(b.local().state(), BreakerState::Closed);
        // Redis is back: the fleet's breaker is half-open (its break is over), not closed.
        store.set_down(false);
        let t2 = t1 + Duration::from_millis(100);
        assert!(fleets[0].sync(t2));
        assert_eq!(b.fleet_state(t2), Some(BreakerState::HalfOpen));
        assert_ne!(b.local().state(), BreakerState::Closed);
        // Gone again: one probe, not everything.
        store.set_down(true);
        let t3 = t2 + Duration::from_millis(100);
        assert!(!fleets[0].sync(t3));
        assert!(b.acquire(t3).is_some());
        assert!(b.acquire(t3).is_none());
    }

    /// Two instances, a and b, of a fleet whose breaker "dep" opened (1 s break); at `t1`,
    /// after the break, a's call asked for the half-open round's one probe and a's next round
    /// granted it.
    fn a_holds_the_probe() -> (
        MemoryStore,
        Fleet,
        Fleet,
        SharedBreaker,
        SharedBreaker,
        Instant,
    ) {
        let store = MemoryStore::new();
        let (fa, fb) = (
            Fleet::manual(&store, options()).unwrap(),
            Fleet::manual(&store, options()).unwrap(),
        );
        let t0 = Instant::now();
        let a = opened(&fa, "dep", 2, t0);
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(1), 1).unwrap();
        let b = fb
            .breaker("dep", local, Duration::from_secs(10), 2)
            .unwrap();
        assert!(fb.sync(t0));
        assert_eq!(b.fleet_state(t0), Some(BreakerState::Open));
        let t1 = t0 + Duration::from_secs(1);
        assert!(fa.sync(t1));
        assert!(a.acquire(t1).is_none());
        assert!(fa.sync(t1));
        (store, fa, fb, a, b, t1)
    }

    /// A probe granted to an instance that does not call again before the half-open round
    /// restarts (a quiet instance, calling less often than the break) is granted again in the
    /// next round: its next call probes and closes the breaker. Before, each restart voided
    /// the grant, its next call was refused and asked again, and the breaker of a fleet whose
    /// instances all call less often than the break never closed.
    #[test]
    fn an_unused_probe_is_granted_again_when_its_round_restarts() {
        let (_store, fa, fb, a, b, t1) = a_holds_the_probe();
        // `a` does not call for 1.5 s. Nobody answered: b's round 1.1 s later restarts the
        // half-open round; a's round after it grants a its probe again.
        let t2 = t1 + Duration::from_millis(1100);
        assert!(fb.sync(t2));
        assert!(fa.sync(t2 + Duration::from_millis(20)));
        let t3 = t1 + Duration::from_millis(1500);
        assert!(fa.sync(t3));
        let p = a.acquire(t3).expect("the probe, granted again");
        (&a).record(t3, p, true);
        assert!(fa.sync(t3));
        assert_eq!(a.fleet_state(t3), Some(BreakerState::Closed));
        assert!(fb.sync(t3));
        assert_eq!(b.fleet_state(t3), Some(BreakerState::Closed));
    }

    /// A probe granted again does not take the restarted round's own: an instance that asks
    /// gets one too, so that one that holds a probe and no longer calls (it still syncs), or
    /// that is gone, does not keep the fleet's breaker half-open. (Only the round's first
    /// answer decides it.)
    #[test]
    fn a_held_probe_does_not_keep_the_others_from_probing() {
        let (_store, fa, fb, _a, b, t1) = a_holds_the_probe();
        let mut closed_at = None;
        for k in 1..=40u32 {
            let t = t1 + Duration::from_millis(100) * k;
            assert!(fa.sync(t));
            assert!(fb.sync(t));
            if let Some(p) = b.acquire(t) {
                (&b).record(t, p, true);
                assert!(fb.sync(t));
                assert_eq!(b.fleet_state(t), Some(BreakerState::Closed));
                closed_at = Some(t - t1);
                break;
            }
        }
        // The first round restarts 1 s after it began, and b's request, made then, gets the
        // new round's probe at its next sync.
        let took = closed_at.expect("b probes and closes the breaker");
        assert!(took <= Duration::from_millis(1200), "{took:?}");
    }

    /// One probe held here is granted again when its round restarts, however many are held: a
    /// probe given back by an attempt that was never made (refused by a full queue, a hedge
    /// cancelled) can leave two here, and granting both again beside each round's own would
    /// let one instance gather more probes round after round.
    #[test]
    fn at_most_one_held_probe_is_granted_again() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let t0 = Instant::now();
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(1), 2).unwrap();
        let b = opened_with(&fleet, "dep", local, 2, 2, t0);
        // Half-open with two probes: one taken by an attempt that waits, one granted after.
        let t1 = t0 + Duration::from_secs(1);
        let taken = probe(&fleet, &b, t1);
        assert!(b.acquire(t1).is_none());
        assert!(fleet.sync(t1));
        // The waiting attempt is never made: its probe comes back. Two are held.
        b.release_permit(taken);
        // Nobody answered: the round restarts, and one probe is granted again.
        let t2 = t1 + Duration::from_millis(1100);
        assert!(fleet.sync(t2));
        assert!(b.acquire(t2).is_some());
        assert!(
            b.acquire(t2).is_none(),
            "one held probe granted again, not two"
        );
    }

    /// An attempt that finds the fleet half-open asks for a probe at the next round; a round
    /// that fails for the key keeps the request for the round after (it was lost: no probe
    /// until another attempt asked again).
    #[test]
    fn a_probe_request_outlives_a_failed_round() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let t0 = Instant::now();
        let b = opened(&fleet, "dep", 1, t0);
        let t1 = t0 + Duration::from_secs(1);
        assert!(fleet.sync(t1));
        assert_eq!(b.fleet_state(t1), Some(BreakerState::HalfOpen));
        assert!(
            b.acquire(t1).is_none(),
            "no probe granted yet: asks for one"
        );
        store.set_broken("robust:breaker:dep", true);
        assert!(fleet.sync(t1), "the round succeeds, the key fails");
        store.set_broken("robust:breaker:dep", false);
        assert!(fleet.sync(t1));
        assert!(b.acquire(t1).is_some(), "the request was kept");
    }

    #[test]
    fn a_probe_given_back_goes_to_the_next_attempt() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options()).unwrap();
        let t0 = Instant::now();
        let b = opened(&fleet, "dep", 1, t0);
        // Half-open, with the one probe granted here.
        let t1 = t0 + Duration::from_secs(1);
        let p = probe(&fleet, &b, t1);
        assert!(b.acquire(t1).is_none(), "one probe");
        // Its attempt is never made: the probe comes back, and the next attempt takes it.
        b.release_permit(p);
        let again = b.acquire(t1).expect("the probe, given back");
        (&b).record(t1, again, true);
        assert!(fleet.sync(t1 + Duration::from_millis(100)));
        assert_eq!(
            b.fleet_state(t1 + Duration::from_millis(100)),
            Some(BreakerState::Closed)
        );
        // A probe of a round that is over is not given back to the next one.
        let c = opened(&fleet, "other", 1, t1);
        let t2 = t1 + Duration::from_secs(1);
        let old = probe(&fleet, &c, t2);
        let t3 = t2 + Duration::from_secs(1);
        let new = probe(&fleet, &c, t3);
        c.release_permit(old);
        assert!(c.acquire(t3).is_none(), "round 1's probe is void");
        c.release_permit(new);
        assert!(c.acquire(t3).is_some());
    }

    /// A key lost (expired while no instance synced it, or Redis restarted without it) comes
    /// back numbering its rounds from the clock: a probe granted in a round of the lost key
    /// never counts in a round of the new one (both were round 1 before, and the old probe's
    /// late success closed the new round's breaker while its own probe still ran).
    #[test]
    fn a_probe_of_a_lost_key_does_not_count_for_its_successor() {
        let store = MemoryStore::new();
        let fleet = Fleet::manual(&store, options().ttl(Duration::from_secs(2))).unwrap();
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_millis(200), 1).unwrap();
        let b = fleet
            .breaker("dep", local, Duration::from_secs(1), 1)
            .unwrap();
        let open_at = |t: Instant| {
            assert!(fleet.sync(t));
            for _ in 0..2 {
                let p = b.acquire(t).unwrap();
                (&b).record(t, p, false);
            }
            assert!(fleet.sync(t));
            assert_eq!(b.fleet_state(t), Some(BreakerState::Open));
        };
        let t0 = Instant::now();
        open_at(t0);
        let old = probe(&fleet, &b, t0 + Duration::from_millis(300));
        // Nobody syncs for 3 s: the key expires; then it is made again, open for 1 ms (the
        // instance's local breaker, open with the fleet's, has not closed since), then
        // half-open in a round of its own.
        let t2 = t0 + Duration::from_secs(3);
        assert!(fleet.sync(t2));
        assert_eq!(b.fleet_state(t2), Some(BreakerState::Open));
        let t3 = t2 + Duration::from_millis(300);
        let _running = probe(&fleet, &b, t3);
        (&b).record(t3, old, true);
        assert!(fleet.sync(t3));
        assert_eq!(b.fleet_state(t3), Some(BreakerState::HalfOpen));
    }

    /// `wait_connected` asks the sync thread for a round at once: with a 10 s interval, a
    /// guard made after the first round follows the fleet in well under a second (before, the
    /// wait lasted until the next interval, and a 5 s wait failed).
    #[test]
    fn wait_connected_does_not_wait_for_the_interval() {
        let store = MemoryStore::new();
        let o = FleetOptions::new()
            .interval(Duration::from_secs(10))
            .max_reconnect_delay(Duration::from_secs(10));
        let fleet = Fleet::in_memory(&store, o).unwrap();
        assert!(fleet.wait_connected(Duration::from_secs(5)));
        let rounds = fleet.shared.started.load(Ordering::Acquire);
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(20), 1).unwrap();
        let b = fleet
            .breaker("late", local, Duration::from_secs(10), 10)
            .unwrap();
        let start = Instant::now();
        assert!(fleet.wait_connected(Duration::from_secs(5)));
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert!(fleet.shared.started.load(Ordering::Acquire) > rounds);
        assert_eq!(b.fleet_state(Instant::now()), Some(BreakerState::Closed));
    }

    #[test]
    fn the_sync_thread_stops_when_the_last_handle_goes() {
        let store = MemoryStore::new();
        // A 10 s interval: the thread sleeps long after each round.
        let o = FleetOptions::new()
            .interval(Duration::from_secs(10))
            .max_reconnect_delay(Duration::from_secs(10));
        let fleet = Fleet::in_memory(&store, o).unwrap();
        // (A break longer than an interval and a round.)
        let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(20), 1).unwrap();
        let b = fleet
            .breaker("dep", local, Duration::from_secs(10), 10)
            .unwrap();
        assert!(fleet.wait_connected(Duration::from_secs(5)));
        assert_eq!(store.handles(), 2, "the store and the thread's backend");
        drop(fleet);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(store.handles(), 2, "a guard keeps the thread");
        drop(b);
        let start = Instant::now();
        while store.handles() > 1 && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(store.handles(), 1);
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn reconnect_waits_are_spread_between_half_and_all_of_the_delay() {
        use rand::SeedableRng;
        let d = Duration::from_secs(1);
        let waits: Vec<Duration> = (0..200)
            .map(|seed| jittered(d, &mut rand::rngs::SmallRng::seed_from_u64(seed)))
            .collect();
        assert!(waits.iter().all(|w| (d / 2..=d).contains(w)));
        let (lo, hi) = (waits.iter().min().unwrap(), waits.iter().max().unwrap());
        assert!(*hi - *lo > Duration::from_millis(400), "{lo:?}..{hi:?}");
        // Under a nanosecond to split: 0 or 1 ns.
        assert!(jittered(Duration::from_nanos(1), &mut rand::rng()) <= Duration::from_nanos(1));
    }
}
