//! Guards per key: a circuit breaker (or a retry budget) for each host, gRPC method or tenant,
//! made on first use from a template and kept for a bounded number of keys, the least recently
//! used evicted first.

use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::{CircuitBreaker, RetryBudget};
use crate::ConfigError;

/// A guard that can make a fresh copy of itself: same settings, initial state (a closed
/// breaker, a full budget). Implemented for [`CircuitBreaker`] and [`RetryBudget`].
pub trait Template: Sized {
    /// A fresh guard with the settings of this one.
    fn fresh(&self) -> Self;
}

impl Template for CircuitBreaker {
    fn fresh(&self) -> Self {
        CircuitBreaker::fresh(self)
    }
}

impl Template for RetryBudget {
    fn fresh(&self) -> Self {
        RetryBudget::fresh(self)
    }
}

/// One guard `G` per key `K`, made from a template the first time a key is seen; at most
/// `capacity` keys are kept, the least recently used evicted first (an evicted key starts
/// again from a fresh guard). Calls that hold a guard keep it alive while they run: a key
/// evicted while calls still use its guard has two for a while, the old one counting those
/// calls' outcomes, the fresh one the new calls'. Give the map room for more keys than are in
/// use at once.
///
/// Key on what you control (the host you call, an authenticated tenant), not on raw client
/// input: a client that sends ever new keys gets a fresh guard (a full budget) each time, and
/// evicts the other keys' guards, an open breaker or an empty budget included.
///
/// ```
/// use std::sync::LazyLock;
/// use std::time::Duration;
/// use retry_runtime::guard::{KeyedBreaker, Keyed};
/// use retry_runtime::{BreakerState, CircuitBreaker};
///
/// // A breaker per host, for at most 1,000 hosts.
/// static BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
///     let template = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).expect("valid");
///     Keyed::new(1000, template).expect("a capacity of at least 1")
/// });
///
/// let a = BREAKERS.get("a.example");
/// let t0 = std::time::Instant::now();
/// for _ in 0..10 {
///     a.record(t0, false);
/// }
/// assert_eq!(a.state(), BreakerState::Open);
/// assert_eq!(BREAKERS.get("b.example").state(), BreakerState::Closed); // another host
/// assert_eq!(BREAKERS.get("a.example").state(), BreakerState::Open);   // the same breaker
/// ```
///
#[cfg_attr(
    feature = "macros",
    doc = r#"
In the attribute, the key is any expression of the fn's arguments:

```
# use std::sync::LazyLock;
# use std::time::Duration;
# use retry_runtime::guard::{KeyedBreaker, Keyed};
# use retry_runtime::{robust, CircuitBreaker};
# static BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
#     Keyed::new(1000, CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap()).unwrap()
# });
#[robust(retries = 2, breaker = BREAKERS.get(host))]
fn get(host: &str, path: &str) -> std::io::Result<String> {
    Ok(format!("{host}{path}"))
}
# assert_eq!(get("a.example", "/").unwrap(), "a.example/");
```
"#
)]
pub struct Keyed<K, G> {
    template: G,
    // Unbounded for the cache, which would allocate its whole capacity up front; `capacity`
    // is kept here.
    guards: Mutex<LruCache<K, Arc<G>>>,
    capacity: NonZeroUsize,
}

/// A circuit breaker per key.
pub type KeyedBreaker<K> = Keyed<K, CircuitBreaker>;
/// A retry budget per key.
pub type KeyedBudget<K> = Keyed<K, RetryBudget>;

impl<K: Hash + Eq, G: Template> Keyed<K, G> {
    /// Guards made from `template`, for at most `capacity` keys. Error: `capacity` = 0. Memory
    /// grows with the keys kept, not with `capacity` (any `usize` is taken).
    pub fn new(capacity: usize, template: G) -> Result<Self, ConfigError> {
        let capacity = NonZeroUsize::new(capacity)
            .ok_or(ConfigError::new("capacity", "must be at least 1 key"))?;
        Ok(Keyed {
            template,
            guards: Mutex::new(LruCache::unbounded()),
            capacity,
        })
    }

    /// The guard of `key`, made now if the key is new (evicting the least recently used key
    /// when `capacity` keys are kept).
    pub fn get<Q>(&self, key: &Q) -> Arc<G>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut guards = self.guards.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = guards.get(key) {
            return Arc::clone(g);
        }
        let g = Arc::new(self.template.fresh());
        if guards.len() >= self.capacity.get() {
            guards.pop_lru();
        }
        guards.put(key.to_owned(), Arc::clone(&g));
        g
    }

    /// The number of keys kept.
    pub fn len(&self) -> usize {
        self.guards.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no key is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys kept.
    pub fn capacity(&self) -> usize {
        self.capacity.get()
    }
}

impl<K, G> fmt::Debug for Keyed<K, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn breakers(capacity: usize) -> KeyedBreaker<String> {
        let t = CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1).unwrap();
        Keyed::new(capacity, t).unwrap()
    }

    #[test]
    fn one_guard_per_key_and_the_least_recently_used_is_evicted() {
        let k = breakers(2);
        let t0 = Instant::now();
        let a = k.get("a");
        a.record(t0, false);
        a.record(t0, false);
        assert_eq!(k.get("a").state(), crate::BreakerState::Open);
        assert_eq!(k.get("b").state(), crate::BreakerState::Closed);
        assert!(Arc::ptr_eq(&a, &k.get("a")));
        // "a" was used last: "b" is evicted by "c".
        let _ = k.get("a");
        let _ = k.get("c");
        assert_eq!(k.len(), 2);
        assert_eq!(k.get("a").state(), crate::BreakerState::Open);
        // "b" comes back fresh (and evicts "c", the least recently used now).
        assert_eq!(k.get("b").state(), crate::BreakerState::Closed);
        assert_eq!(k.capacity(), 2);
    }

    #[test]
    fn budgets_per_key_start_full_and_are_independent() {
        let k: KeyedBudget<u32> = Keyed::new(8, RetryBudget::new(1.0, 0.0, 1.0).unwrap()).unwrap();
        assert!(k.get(&1).try_withdraw());
        assert!(!k.get(&1).try_withdraw());
        assert!(k.get(&2).try_withdraw());
    }

    /// A capacity is a bound, not an allocation: the largest one is taken, without a panic
    /// or gigabytes reserved up front, and still evicts at the bound.
    #[test]
    fn any_capacity_is_a_bound_not_an_allocation() {
        let huge = breakers(usize::MAX);
        assert_eq!((huge.capacity(), huge.len()), (usize::MAX, 0));
        let a = huge.get("a");
        assert!(Arc::ptr_eq(&a, &huge.get("a")));
        assert_eq!(huge.len(), 1);
        let two = breakers(2);
        for key in ["a", "b", "c"] {
            two.get(key);
        }
        assert_eq!(two.len(), 2);
    }

    #[test]
    fn a_zero_capacity_is_an_error() {
        let e = Keyed::<u8, RetryBudget>::new(0, RetryBudget::new(1.0, 0.0, 1.0).unwrap());
        assert_eq!(e.unwrap_err().parameter(), "capacity");
    }

    #[test]
    fn many_threads_share_one_guard_per_key() {
        let k = Arc::new(breakers(64));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let k = Arc::clone(&k);
                std::thread::spawn(move || {
                    (0..1000)
                        .map(|i| Arc::as_ptr(&k.get(&format!("host{}", i % 16))) as usize)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let all: Vec<Vec<usize>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        // Every thread saw the same guard for the same key.
        for v in &all[1..] {
            assert_eq!(v, &all[0]);
        }
        assert_eq!(k.len(), 16);
    }
}
