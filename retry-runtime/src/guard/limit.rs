//! A concurrency limit: at most `max_in_flight` attempts run at once, the others wait their
//! turn in one FIFO queue of bounded length, and an attempt that finds the queue full is
//! rejected at once.
//!
//! The limit itself is plain data, so that `static LIMIT: ConcurrencyLimit = match
//! ConcurrencyLimit::new(..) { Ok(l) => l, Err(_) => panic!() };` compiles on every platform
//! (a type with a destructor cannot be matched out of a `Result` in a `static`, and a std
//! `Mutex` has one on some platforms). Its slots are counted in one atomic word: taking or
//! giving back a slot while nobody waits is one compare-and-swap. The waiters live in a
//! process-wide table of queues, one per limit that has waiters, keyed by an id the limit
//! takes the first time it needs one, sharded, each shard behind a mutex held for one short
//! critical section: never across an `.await`, nor while a waiter is woken. Async and
//! blocking waiters share a limit's queue, so they are served in the order they arrived,
//! whichever kind they are.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use crate::ConfigError;

/// The error of an attempt turned away by a guard before it ran: by a
/// [`ConcurrencyLimit`] whose queue is full, or by an
/// [`AdaptiveThrottle`](crate::AdaptiveThrottle) shedding load. The body was not run.
///
/// With `limit = ...` or `throttle = ...`, the error type `E` must implement
/// `From<Rejected>`; the conversion is provided for `std::io::Error` (kind `Other`), and
/// `Rejected` implements `std::error::Error`, so boxed errors and `anyhow::Error` have it too.
///
/// ```
/// use retry_runtime::Rejected;
///
/// let io: std::io::Error = Rejected::new().into();
/// assert_eq!(io.kind(), std::io::ErrorKind::Other);
/// let boxed: Box<dyn std::error::Error + Send + Sync> = Rejected::new().into();
/// assert_eq!(boxed.to_string(), "rejected locally to shed load: the attempt was not made");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rejected(());

impl Rejected {
    /// A new `Rejected` value.
    pub const fn new() -> Self {
        Self(())
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("rejected locally to shed load: the attempt was not made")
    }
}

impl std::error::Error for Rejected {}

impl From<Rejected> for std::io::Error {
    fn from(e: Rejected) -> Self {
        std::io::Error::other(e)
    }
}

/// The largest `max_in_flight` and `max_queued` accepted: 2^20.
const MAX: usize = 1 << 20;

/// One waiter in the state word (the slots taken are counted below it).
const ONE_QUEUED: u64 = 1 << 32;

/// The slots taken, in a state word.
const fn slots(word: u64) -> usize {
    (word & (ONE_QUEUED - 1)) as usize
}

/// The waiters, in a state word.
const fn waiters(word: u64) -> usize {
    (word >> 32) as usize
}

/// How to wake a waiter once a slot is handed to it.
#[derive(Debug)]
enum Wake {
    /// An [`Acquire`] future: the waker of its last poll.
    Task(Waker),
    /// A thread in [`ConcurrencyLimit::acquire_blocking`], parked.
    Thread(Thread),
}

impl Wake {
    fn wake(self) {
        match self {
            Wake::Task(w) => w.wake(),
            Wake::Thread(t) => t.unpark(),
        }
    }
}

#[derive(Debug)]
struct Waiter {
    ticket: u64,
    wake: Wake,
}

/// One shard of the table of waiters.
#[derive(Debug)]
struct Shard {
    /// The ticket of the next waiter of any limit of this shard: tickets only grow, so a
    /// limit's queue is ordered by ticket, even across the times its queue is emptied and
    /// removed (2^64 tickets do not run out).
    next_ticket: u64,
    /// The waiters of each limit that has some, oldest first, by the limit's id.
    queues: BTreeMap<u64, VecDeque<Waiter>>,
}

const SHARDS: usize = 16;

/// The waiters of every limit.
static TABLE: [Mutex<Shard>; SHARDS] = [const {
    Mutex::new(Shard {
        next_ticket: 0,
        queues: BTreeMap::new(),
    })
}; SHARDS];

impl Shard {
    /// Whether the waiter of limit `key` with `ticket` (queued, and not cancelled) was handed
    /// a slot: it has left the queue, which only a hand-over does, oldest first.
    fn granted(&self, key: u64, ticket: u64) -> bool {
        self.queues
            .get(&key)
            .and_then(VecDeque::front)
            .is_none_or(|w| w.ticket > ticket)
    }

    /// The queued waiter of limit `key` with `ticket`.
    fn waiter(&mut self, key: u64, ticket: u64) -> Option<&mut Waiter> {
        let queue = self.queues.get_mut(&key)?;
        let i = queue.binary_search_by_key(&ticket, |w| w.ticket).ok()?;
        queue.get_mut(i)
    }

    /// Takes the waiter of limit `key` with `ticket` out of its queue, and the queue out of
    /// the table once it is empty.
    fn remove(&mut self, key: u64, ticket: Option<u64>) -> Option<Waiter> {
        let queue = self.queues.get_mut(&key)?;
        let waiter = match ticket {
            None => queue.pop_front(),
            Some(t) => {
                let i = queue.binary_search_by_key(&t, |w| w.ticket).ok()?;
                queue.remove(i)
            }
        };
        if queue.is_empty() {
            self.queues.remove(&key);
        }
        waiter
    }
}

/// What [`ConcurrencyLimit::enter`] gave an attempt.
enum Entry {
    /// A free slot, taken.
    Slot,
    /// No free slot and no room in the queue.
    Full,
    /// Queued with this ticket.
    Queued(u64),
}

/// A limit on the attempts running at once, shared by every call that names it (SPEC section
/// 16: `limit = MY_LIMIT` in the attribute).
///
/// An attempt holds a slot, a [`LimitPermit`], while it runs (not while it backs off). When
/// every slot is taken, [`acquire`](Self::acquire) and
/// [`acquire_blocking`](Self::acquire_blocking) wait for one, in FIFO order, async and
/// blocking waiters in one queue; when `max_queued` attempts already wait, they fail at once
/// with [`Rejected`]. A released slot is handed straight to the oldest waiter, so a newcomer
/// (or [`try_acquire`](Self::try_acquire)) never overtakes the queue.
///
/// While nobody waits, taking and giving back a slot is one compare-and-swap; waiting, and
/// handing a slot to a waiter, take one short critical section. A waiter that finds its
/// limit's queue empty allocates the queue (in a table shared by every limit; it is freed when
/// it empties again): waiting, blocking or async, is the one path of a limit that allocates.
///
/// ```
/// use retry_runtime::ConcurrencyLimit;
///
/// static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(2, 100) {
///     Ok(l) => l,
///     Err(_) => panic!("invalid limit"), // evaluated at compile time
/// };
///
/// let a = LIMIT.try_acquire().expect("a free slot");
/// let b = LIMIT.acquire_blocking().expect("a free slot");
/// assert_eq!(LIMIT.in_flight(), 2);
/// assert!(LIMIT.try_acquire().is_none()); // both slots are taken
/// drop(a); // the slot is free again
/// assert!(LIMIT.try_acquire().is_some());
/// # drop(b);
/// ```
///
/// Async code awaits its turn; a future dropped while it waits (a timeout, a `select!`) leaves
/// the queue, and if a slot had just been handed to it, passes it on to the next waiter:
///
/// ```
/// use retry_runtime::{ConcurrencyLimit, Rejected};
///
/// static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 1) {
///     Ok(l) => l,
///     Err(_) => panic!("invalid limit"),
/// };
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let held = LIMIT.acquire().await.unwrap();
/// let waiter = tokio::spawn(async {
///     let _permit = LIMIT.acquire().await.unwrap(); // waits for `held`
/// });
/// tokio::task::yield_now().await; // the task queues
/// assert_eq!(LIMIT.queued(), 1);
/// assert_eq!(LIMIT.acquire().await.unwrap_err(), Rejected::new()); // the queue is full
/// drop(held);
/// waiter.await.unwrap();
/// assert_eq!(LIMIT.in_flight(), 0);
/// # }
/// ```
pub struct ConcurrencyLimit {
    max_in_flight: usize,
    max_queued: usize,
    /// The slots taken (low 32 bits: by permits, and by waiters handed one that have not yet
    /// seen it) and the waiters (high 32 bits). The waiters change only under the limit's
    /// shard lock, together with its queue; while there are waiters every slot is taken, and
    /// a released slot goes to one of them.
    state: AtomicU64,
    /// The limit's key in the table of waiters; 0 until it needs one.
    id: AtomicU64,
}

// What lets a `static` take a limit out of `new`'s `Result` on every platform.
const _: () = assert!(!std::mem::needs_drop::<ConcurrencyLimit>());

impl fmt::Debug for ConcurrencyLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.state.load(Ordering::Acquire);
        f.debug_struct("ConcurrencyLimit")
            .field("max_in_flight", &self.max_in_flight)
            .field("max_queued", &self.max_queued)
            .field("in_flight", &slots(word))
            .field("queued", &waiters(word))
            .finish()
    }
}

impl ConcurrencyLimit {
    /// A limit of `max_in_flight` attempts running at once, with at most `max_queued` more
    /// waiting for a slot (0: none waits, an attempt without a free slot is rejected).
    /// Errors: `max_in_flight` not in 1..=2^20; `max_queued` above 2^20 (1,048,576).
    pub const fn new(max_in_flight: usize, max_queued: usize) -> Result<Self, ConfigError> {
        if max_in_flight == 0 || max_in_flight > MAX {
            return Err(ConfigError::new(
                "max_in_flight",
                "must be between 1 and 2^20 (1,048,576) attempts",
            ));
        }
        if max_queued > MAX {
            return Err(ConfigError::new(
                "max_queued",
                "must be at most 2^20 (1,048,576) attempts",
            ));
        }
        Ok(Self {
            max_in_flight,
            max_queued,
            state: AtomicU64::new(0),
            id: AtomicU64::new(0),
        })
    }

    /// This limit's key in the table of waiters, taken the first time it is needed: an id no
    /// other limit has had (an address could be reused by a later limit, which would then
    /// inherit the waiters of leaked futures).
    fn key(&self) -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        match self.id.load(Ordering::Relaxed) {
            0 => {
                let fresh = NEXT.fetch_add(1, Ordering::Relaxed);
                match self
                    .id
                    .compare_exchange(0, fresh, Ordering::Relaxed, Ordering::Relaxed)
                {
                    Ok(_) => fresh,
                    Err(taken) => taken,
                }
            }
            id => id,
        }
    }

    /// The shard of the table that holds this limit's waiters, locked.
    fn shard(&self) -> MutexGuard<'static, Shard> {
        let shard = &TABLE[(self.key() % SHARDS as u64) as usize];
        // Every update of a shard is complete before any code that could panic runs (wakers
        // are cloned before the lock is taken, and woken, or replaced ones dropped, after it
        // is released).
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn permit(&self) -> LimitPermit<'_> {
        LimitPermit { limit: self }
    }

    /// Takes a free slot if nobody waits.
    fn take_free_slot(&self) -> bool {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (waiters(w) == 0 && slots(w) < self.max_in_flight).then_some(w + 1)
            })
            .is_ok()
    }

    /// Under the shard lock: takes a free slot, or queues a waiter woken by `wake` if there is
    /// room. (An unused `wake` is dropped under the lock: it is a fresh clone of the waker of
    /// the task being polled, or a thread handle, so dropping it runs no task's destructor.)
    fn enter(&self, shard: &mut Shard, wake: Wake) -> Entry {
        let mut word = self.state.load(Ordering::Acquire);
        let slot = loop {
            let (slot, next) = if waiters(word) == 0 && slots(word) < self.max_in_flight {
                (true, word + 1)
            } else if waiters(word) >= self.max_queued {
                return Entry::Full;
            } else {
                (false, word + ONE_QUEUED)
            };
            match self
                .state
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break slot,
                Err(actual) => word = actual,
            }
        };
        if slot {
            return Entry::Slot;
        }
        let ticket = shard.next_ticket;
        shard.next_ticket = shard.next_ticket.wrapping_add(1);
        shard
            .queues
            .entry(self.key())
            .or_default()
            .push_back(Waiter { ticket, wake });
        Entry::Queued(ticket)
    }

    /// Under the shard lock: gives a slot up, to the oldest waiter (returned, to be woken once
    /// the lock is released), or back to the free ones.
    #[must_use]
    fn hand_over(&self, shard: &mut Shard) -> Option<Waiter> {
        let next = shard.remove(self.key(), None);
        if next.is_some() {
            // The slot stays taken, by that waiter.
            self.state.fetch_sub(ONE_QUEUED, Ordering::AcqRel);
        } else {
            let _ = self
                .state
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                    (slots(w) > 0).then(|| w - 1)
                });
        }
        next
    }

    /// Gives a slot up: back to the free ones if nobody waits, else to the oldest waiter.
    fn release(&self) {
        let freed = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (waiters(w) == 0 && slots(w) > 0).then(|| w - 1)
            })
            .is_ok();
        if freed {
            return;
        }
        let next = self.hand_over(&mut self.shard());
        if let Some(next) = next {
            next.wake.wake();
        }
    }

    /// A free slot now, or `None` (every slot is taken, or attempts are waiting for one).
    pub fn try_acquire(&self) -> Option<LimitPermit<'_>> {
        self.take_free_slot().then(|| self.permit())
    }

    /// Waits for a slot, in FIFO order; fails at once with [`Rejected`] when `max_queued`
    /// attempts are already waiting. Needs no particular runtime.
    ///
    /// The future is `Unpin` and `Send`. Dropped while it waits, it leaves the queue; if a
    /// slot had been handed to it already, the slot goes on to the next waiter (or back to
    /// the free ones), so cancelling never loses a wake-up or a slot. Polled again after it
    /// completed, it stays pending.
    pub fn acquire(&self) -> Acquire<'_> {
        Acquire {
            limit: self,
            state: AcquireState::Start,
        }
    }

    /// Blocks the thread until a slot is free, in FIFO order with the other waiters, async
    /// ones included; fails at once with [`Rejected`] when `max_queued` attempts are already
    /// waiting. The thread is parked while it waits, and unparked when a slot is handed to
    /// it (do not call this on an async runtime's worker thread).
    pub fn acquire_blocking(&self) -> Result<LimitPermit<'_>, Rejected> {
        if self.take_free_slot() {
            return Ok(self.permit());
        }
        // (A wait without an end never gives `None`: it is asked again if it does.)
        loop {
            if let Some(permit) = self.acquire_blocking_until(None)? {
                return Ok(permit);
            }
        }
    }

    /// [`acquire_blocking`](Self::acquire_blocking) for at most `timeout` (of the system's
    /// monotonic clock): `Ok(None)` when it ran out first; the thread has then left the queue
    /// (a slot handed to it at the last moment is taken: `Ok(Some(..))`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::ConcurrencyLimit;
    ///
    /// static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
    ///     Ok(l) => l,
    ///     Err(_) => panic!("invalid limit"),
    /// };
    /// let held = LIMIT.acquire_blocking().expect("a free slot");
    /// assert!(LIMIT.acquire_blocking_timeout(Duration::from_millis(10)).expect("room to wait").is_none());
    /// assert_eq!(LIMIT.queued(), 0);
    /// drop(held);
    /// assert!(LIMIT.acquire_blocking_timeout(Duration::ZERO).expect("room to wait").is_some());
    /// ```
    pub fn acquire_blocking_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Option<LimitPermit<'_>>, Rejected> {
        // (A timeout past the clock's range is no timeout.)
        self.acquire_blocking_until(Instant::now().checked_add(timeout))
    }

    /// [`acquire_blocking_timeout`](Self::acquire_blocking_timeout) for `Some` time left,
    /// [`acquire_blocking`](Self::acquire_blocking) for `None`.
    pub(crate) fn acquire_blocking_for(
        &self,
        left: Option<Duration>,
    ) -> Result<Option<LimitPermit<'_>>, Rejected> {
        match left {
            Some(left) => self.acquire_blocking_timeout(left),
            None => self.acquire_blocking().map(Some),
        }
    }

    /// Blocks until a slot is handed to this thread or `end` passes (never, without one).
    #[inline(never)]
    fn acquire_blocking_until(
        &self,
        end: Option<Instant>,
    ) -> Result<Option<LimitPermit<'_>>, Rejected> {
        if self.take_free_slot() {
            return Ok(Some(self.permit()));
        }
        let wake = Wake::Thread(thread::current());
        let key = self.key();
        let mut shard = self.shard();
        let ticket = match self.enter(&mut shard, wake) {
            Entry::Slot => return Ok(Some(self.permit())),
            Entry::Full => return Err(Rejected::new()),
            Entry::Queued(ticket) => ticket,
        };
        // Parking may end spuriously, and an unpark may come before the park: the queue,
        // read under the lock, decides.
        while !shard.granted(key, ticket) {
            let left = end.map(|end| end.saturating_duration_since(Instant::now()));
            if left.is_some_and(|left| left.is_zero()) {
                // Out of time, and not handed a slot (that is decided under this lock): the
                // thread leaves the queue.
                let own = shard.remove(key, Some(ticket));
                if own.is_some() {
                    self.state.fetch_sub(ONE_QUEUED, Ordering::AcqRel);
                }
                drop(shard);
                drop(own);
                return Ok(None);
            }
            drop(shard);
            match left {
                Some(left) => thread::park_timeout(left),
                None => thread::park(),
            }
            shard = self.shard();
        }
        Ok(Some(self.permit()))
    }

    /// The slots taken now (by running attempts, and by waiters just handed one).
    pub fn in_flight(&self) -> usize {
        slots(self.state.load(Ordering::Acquire))
    }

    /// The attempts waiting for a slot now.
    pub fn queued(&self) -> usize {
        waiters(self.state.load(Ordering::Acquire))
    }

    /// The number of slots.
    pub const fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// The most attempts that may wait for a slot.
    pub const fn max_queued(&self) -> usize {
        self.max_queued
    }
}

/// A slot of a [`ConcurrencyLimit`], held while an attempt runs; dropping it hands the slot to
/// the oldest waiter, or frees it.
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct LimitPermit<'a> {
    limit: &'a ConcurrencyLimit,
}

impl fmt::Debug for LimitPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitPermit")
            .field("max_in_flight", &self.limit.max_in_flight)
            .finish_non_exhaustive()
    }
}

impl Drop for LimitPermit<'_> {
    fn drop(&mut self) {
        self.limit.release();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AcquireState {
    /// Not polled yet.
    Start,
    /// In the queue with this ticket.
    Queued(u64),
    /// Completed (or rejected).
    Done,
}

/// The future of [`ConcurrencyLimit::acquire`].
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a> {
    limit: &'a ConcurrencyLimit,
    state: AcquireState,
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<LimitPermit<'a>, Rejected>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let limit = self.limit;
        match self.state {
            AcquireState::Start => {
                if limit.take_free_slot() {
                    self.state = AcquireState::Done;
                    return Poll::Ready(Ok(limit.permit()));
                }
                // Cloned before the lock is taken, so that no waker code runs under it.
                let wake = Wake::Task(cx.waker().clone());
                let entry = limit.enter(&mut limit.shard(), wake);
                match entry {
                    Entry::Slot => {
                        self.state = AcquireState::Done;
                        Poll::Ready(Ok(limit.permit()))
                    }
                    Entry::Full => {
                        self.state = AcquireState::Done;
                        Poll::Ready(Err(Rejected::new()))
                    }
                    Entry::Queued(ticket) => {
                        self.state = AcquireState::Queued(ticket);
                        Poll::Pending
                    }
                }
            }
            AcquireState::Queued(ticket) => {
                let key = limit.key();
                // Cloned before the lock is taken (a waiter polled again, off the fast path),
                // so that no waker code runs under it.
                let waker = cx.waker().clone();
                let mut shard = limit.shard();
                if shard.granted(key, ticket) {
                    drop(shard);
                    self.state = AcquireState::Done;
                    return Poll::Ready(Ok(limit.permit()));
                }
                // Polled by another task, or with a new waker: the hand-over wakes the last.
                // The old waker (or the unused clone) is dropped once the lock is released.
                let old = match shard.waiter(key, ticket) {
                    Some(Waiter {
                        wake: Wake::Task(w),
                        ..
                    }) if !w.will_wake(&waker) => std::mem::replace(w, waker),
                    _ => waker,
                };
                drop(shard);
                drop(old);
                Poll::Pending
            }
            AcquireState::Done => Poll::Pending,
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let AcquireState::Queued(ticket) = self.state else {
            return;
        };
        let limit = self.limit;
        let key = limit.key();
        let mut shard = limit.shard();
        let (next, own) = if shard.granted(key, ticket) {
            // A slot was handed to this future, which will never take it: pass it on.
            (limit.hand_over(&mut shard), None)
        } else {
            let own = shard.remove(key, Some(ticket));
            if own.is_some() {
                limit.state.fetch_sub(ONE_QUEUED, Ordering::AcqRel);
            }
            (None, own)
        };
        drop(shard);
        drop(own);
        if let Some(next) = next {
            next.wake.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl std::task::Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A future under test, polled by hand with its own counting waker.
    struct Probe<'a> {
        fut: Acquire<'a>,
        wakes: Arc<Counter>,
    }

    impl<'a> Probe<'a> {
        fn new(limit: &'a ConcurrencyLimit) -> Self {
            Self {
                fut: limit.acquire(),
                wakes: Arc::default(),
            }
        }

        fn poll(&mut self) -> Poll<Result<LimitPermit<'a>, Rejected>> {
            let waker = Waker::from(self.wakes.clone());
            Pin::new(&mut self.fut).poll(&mut Context::from_waker(&waker))
        }

        fn woken(&self) -> usize {
            self.wakes.0.load(Ordering::SeqCst)
        }
    }

    fn limit(max_in_flight: usize, max_queued: usize) -> ConcurrencyLimit {
        ConcurrencyLimit::new(max_in_flight, max_queued).unwrap()
    }

    #[test]
    fn futures_and_permits_can_cross_threads() {
        fn check<T: Send + Sync + Unpin>() {}
        check::<ConcurrencyLimit>();
        check::<Acquire<'static>>();
        check::<LimitPermit<'static>>();
    }

    #[test]
    fn rejects_invalid_values() {
        let p = |r: Result<ConcurrencyLimit, ConfigError>| r.unwrap_err().parameter();
        assert_eq!(p(ConcurrencyLimit::new(0, 10)), "max_in_flight");
        assert_eq!(p(ConcurrencyLimit::new(MAX + 1, 10)), "max_in_flight");
        assert_eq!(p(ConcurrencyLimit::new(usize::MAX, 10)), "max_in_flight");
        assert_eq!(p(ConcurrencyLimit::new(1, MAX + 1)), "max_queued");
        assert_eq!(p(ConcurrencyLimit::new(1, usize::MAX)), "max_queued");
        let l = ConcurrencyLimit::new(MAX, MAX).unwrap();
        assert_eq!((l.max_in_flight(), l.max_queued()), (MAX, MAX));
        assert!(ConcurrencyLimit::new(1, 0).is_ok());
    }

    #[test]
    fn slots_are_taken_and_given_back() {
        static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(2, 0) {
            Ok(l) => l,
            Err(_) => panic!(),
        };
        let a = LIMIT.try_acquire().unwrap();
        let b = LIMIT.try_acquire().unwrap();
        assert!(LIMIT.try_acquire().is_none());
        assert_eq!(LIMIT.in_flight(), 2);
        // No room to wait: rejected at once, async or blocking.
        assert_eq!(LIMIT.acquire_blocking().unwrap_err(), Rejected::new());
        assert!(matches!(Probe::new(&LIMIT).poll(), Poll::Ready(Err(_))));
        drop(a);
        assert_eq!(LIMIT.in_flight(), 1);
        let c = LIMIT.acquire_blocking().unwrap();
        drop((b, c));
        assert_eq!((LIMIT.in_flight(), LIMIT.queued()), (0, 0));
    }

    /// A waiter polled again with another waker (its task moved) is woken through the last
    /// one; polled again with the same, the waker it has is kept.
    #[test]
    fn a_waiter_polled_with_a_new_waker_is_woken_through_it() {
        let l = limit(1, 10);
        let held = l.try_acquire().unwrap();
        let mut p = Probe::new(&l);
        assert!(p.poll().is_pending());
        assert!(p.poll().is_pending(), "the same waker again");
        let first = std::mem::take(&mut p.wakes);
        assert!(p.poll().is_pending(), "a new waker");
        drop(held);
        assert_eq!((first.0.load(Ordering::SeqCst), p.woken()), (0, 1));
        assert!(matches!(p.poll(), Poll::Ready(Ok(_))));
        assert_eq!((l.in_flight(), l.queued()), (0, 0));
    }

    #[test]
    fn async_waiters_are_served_in_fifo_order() {
        let l = limit(1, 10);
        let held = l.try_acquire().unwrap();
        let mut w: Vec<Probe<'_>> = (0..4).map(|_| Probe::new(&l)).collect();
        // Queued in the order 0, 1, 2, 3 (polled in that order), though later polled in
        // reverse: the order of arrival decides.
        for p in &mut w {
            assert!(p.poll().is_pending());
        }
        for p in w.iter_mut().rev() {
            assert!(p.poll().is_pending());
        }
        assert_eq!(l.queued(), 4);
        assert!(l.try_acquire().is_none(), "no overtaking the queue");
        let mut permit = held;
        for i in 0..4 {
            drop(permit);
            // The slot goes to waiter i, and only to it.
            assert_eq!(l.in_flight(), 1, "handed over, not freed");
            for (j, p) in w.iter_mut().enumerate().skip(i) {
                assert_eq!(
                    p.woken(),
                    usize::from(j == i),
                    "waiter {j} after release {i}"
                );
                if j != i {
                    assert!(p.poll().is_pending(), "waiter {j} after release {i}");
                }
            }
            permit = match w[i].poll() {
                Poll::Ready(Ok(p)) => p,
                other => panic!("waiter {i}: {other:?}"),
            };
            assert!(w[i].poll().is_pending(), "completed: stays pending");
        }
        drop(permit);
        drop(w);
        assert_eq!((l.in_flight(), l.queued()), (0, 0));
    }

    #[test]
    fn a_full_queue_rejects_at_once() {
        let l = limit(1, 2);
        let _held = l.try_acquire().unwrap();
        let (mut a, mut b, mut c) = (Probe::new(&l), Probe::new(&l), Probe::new(&l));
        assert!(a.poll().is_pending() && b.poll().is_pending());
        assert!(matches!(c.poll(), Poll::Ready(Err(Rejected(())))));
        assert_eq!(l.acquire_blocking().unwrap_err(), Rejected::new());
        assert_eq!(l.queued(), 2);
        // A cancelled waiter makes room.
        drop(a);
        assert_eq!(l.queued(), 1);
        assert!(Probe::new(&l).poll().is_pending());
        assert_eq!(l.queued(), 1, "that new waiter was dropped too");
        assert!(b.poll().is_pending());
    }

    #[test]
    fn a_cancelled_waiter_leaves_the_queue() {
        let l = limit(1, 10);
        let held = l.try_acquire().unwrap();
        let (mut a, mut b, mut c) = (Probe::new(&l), Probe::new(&l), Probe::new(&l));
        assert!(a.poll().is_pending() && b.poll().is_pending() && c.poll().is_pending());
        drop(b); // from the middle
        assert_eq!(l.queued(), 2);
        drop(held);
        assert_eq!((a.woken(), c.woken()), (1, 0));
        let p = a.poll();
        assert!(matches!(p, Poll::Ready(Ok(_))));
        drop(p);
        assert_eq!(c.woken(), 1, "b's turn went to c");
        assert!(matches!(c.poll(), Poll::Ready(Ok(_))));
        assert_eq!((l.in_flight(), l.queued()), (0, 0));
    }

    #[test]
    fn a_cancelled_waiter_passes_a_slot_it_was_handed_on() {
        let l = limit(1, 10);
        let held = l.try_acquire().unwrap();
        let (mut a, mut b) = (Probe::new(&l), Probe::new(&l));
        assert!(a.poll().is_pending() && b.poll().is_pending());
        drop(held);
        assert_eq!((a.woken(), b.woken()), (1, 0));
        // `a` was handed the slot but is dropped before it sees it: `b` gets it.
        drop(a);
        assert_eq!(b.woken(), 1);
        assert_eq!(l.in_flight(), 1);
        let permit = b.poll();
        assert!(matches!(permit, Poll::Ready(Ok(_))));
        drop(permit);
        assert_eq!(l.in_flight(), 0);
        // With no one left to pass it to, the slot is freed.
        let held = l.try_acquire().unwrap();
        let mut c = Probe::new(&l);
        assert!(c.poll().is_pending());
        drop(held);
        drop(c);
        assert_eq!((l.in_flight(), l.queued()), (0, 0));
        assert!(l.try_acquire().is_some(), "no slot leaked");
    }

    #[test]
    fn dropping_a_future_before_or_after_it_completes_changes_nothing() {
        let l = limit(1, 10);
        drop(l.acquire()); // never polled
        let mut a = Probe::new(&l);
        let p = a.poll();
        assert!(matches!(p, Poll::Ready(Ok(_))));
        drop(a); // completed
        assert_eq!(l.in_flight(), 1, "the permit holds the slot");
        drop(p);
        assert_eq!(l.in_flight(), 0);
    }

    #[test]
    fn a_leaked_waiter_stays_with_its_limit() {
        fn leak_a_waiter() {
            let l = limit(1, 10);
            let held = l.try_acquire().unwrap();
            let mut leaked = Probe::new(&l);
            assert!(leaked.poll().is_pending());
            std::mem::forget(leaked);
            // Like a leaked permit, the leaked waiter keeps the slot it is handed.
            let mut next = Probe::new(&l);
            assert!(next.poll().is_pending());
            drop(held);
            assert!(next.poll().is_pending());
            assert_eq!((l.in_flight(), l.queued()), (1, 1));
        }
        leak_a_waiter();
        leak_a_waiter();
        // A later limit, at the same address or not, has none of those waiters.
        let l = limit(1, 10);
        let held = l.try_acquire().unwrap();
        let mut a = Probe::new(&l);
        assert!(a.poll().is_pending());
        drop(held);
        assert!(matches!(a.poll(), Poll::Ready(Ok(_))));
    }

    #[test]
    fn the_latest_waker_is_woken() {
        let l = limit(1, 10);
        let held = l.try_acquire().unwrap();
        let mut a = Probe::new(&l);
        assert!(a.poll().is_pending());
        let old = a.wakes.clone();
        a.wakes = Arc::default(); // polled from another task
        assert!(a.poll().is_pending());
        drop(held);
        assert_eq!((old.0.load(Ordering::SeqCst), a.woken()), (0, 1));
    }

    #[test]
    fn blocking_and_async_waiters_share_one_queue() {
        let l = limit(1, 10);
        let held = l.try_acquire().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let l = &l;
            let thread = scope.spawn(move || {
                let permit = l.acquire_blocking().unwrap();
                rx.recv().unwrap(); // hold the slot until told
                drop(permit);
            });
            while l.queued() == 0 {
                std::thread::yield_now();
            }
            // The async waiter comes after the thread.
            let mut a = Probe::new(l);
            assert!(a.poll().is_pending());
            assert_eq!(l.queued(), 2);
            drop(held);
            while l.queued() == 2 {
                std::thread::yield_now();
            }
            assert_eq!(l.in_flight(), 1);
            assert!(a.poll().is_pending(), "the thread was first");
            assert_eq!(a.woken(), 0);
            tx.send(()).unwrap();
            thread.join().unwrap();
            assert_eq!(a.woken(), 1);
            assert!(matches!(a.poll(), Poll::Ready(Ok(_))));
        });
        assert_eq!((l.in_flight(), l.queued()), (0, 0));
    }

    #[test]
    fn blocking_waiters_are_served_in_fifo_order() {
        let l = limit(1, 10);
        let held = l.try_acquire().unwrap();
        let order = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for i in 0..4 {
                let (l, order) = (&l, &order);
                scope.spawn(move || {
                    let _permit = l.acquire_blocking().unwrap();
                    order.lock().unwrap().push(i);
                });
                // Thread i queues before thread i + 1 starts.
                while l.queued() <= i {
                    std::thread::yield_now();
                }
            }
            drop(held);
        });
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
        assert_eq!((l.in_flight(), l.queued()), (0, 0));
    }

    /// Counts the attempts inside their slot, and the most seen at once.
    #[derive(Default)]
    struct Occupancy {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl Occupancy {
        fn enter(&self, max: usize) {
            let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            assert!(n <= max, "{n} attempts in {max} slots");
            self.most.fetch_max(n, Ordering::SeqCst);
        }
        fn leave(&self) {
            self.now.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn slots_never_exceed_the_limit_across_threads() {
        static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(3, 8) {
            Ok(l) => l,
            Err(_) => panic!(),
        };
        let seen = Occupancy::default();
        std::thread::scope(|scope| {
            for t in 0..8 {
                let seen = &seen;
                scope.spawn(move || {
                    for i in 0..10_000 {
                        // Mostly waiting, sometimes trying.
                        let permit = if (i + t) % 7 == 0 {
                            match LIMIT.try_acquire() {
                                Some(p) => p,
                                None => continue,
                            }
                        } else {
                            LIMIT.acquire_blocking().expect("8 threads fit the queue")
                        };
                        seen.enter(3);
                        if i % 16 == 0 {
                            std::thread::yield_now();
                        }
                        seen.leave();
                        drop(permit);
                    }
                });
            }
        });
        assert_eq!((LIMIT.in_flight(), LIMIT.queued()), (0, 0));
        // The slots were shared: a limit that let one thread in at a time would pass the
        // check in `enter` (80,000 entries by 8 threads: two of them overlap, on two cores or
        // by preemption while one holds a slot).
        let most = seen.most.load(Ordering::SeqCst);
        assert!(most >= 2, "at most {most} slot(s) held at once");
    }

    /// Waits that time out, mixed with ones that get a slot, on many threads: a thread that
    /// gives up leaves the queue, and a slot handed to it as it gives up is taken, never lost.
    #[test]
    fn waits_that_time_out_leave_the_queue_and_lose_no_slot() {
        static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(2, 8) {
            Ok(l) => l,
            Err(_) => panic!(),
        };
        let seen = Occupancy::default();
        let (got, timed_out) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for t in 0..8u64 {
                let (seen, got, timed_out) = (&seen, &got, &timed_out);
                scope.spawn(move || {
                    for i in 0..2_000u64 {
                        // Zero to 20 microseconds.
                        let timeout = Duration::from_micros((i * 7 + t * 3) % 21);
                        let permit = match LIMIT.acquire_blocking_timeout(timeout) {
                            Ok(Some(p)) => p,
                            Ok(None) => {
                                timed_out.fetch_add(1, Ordering::SeqCst);
                                continue;
                            }
                            Err(_) => panic!("8 threads fit the queue"),
                        };
                        got.fetch_add(1, Ordering::SeqCst);
                        seen.enter(2);
                        std::thread::yield_now();
                        seen.leave();
                        drop(permit);
                    }
                });
            }
        });
        assert_eq!((LIMIT.in_flight(), LIMIT.queued()), (0, 0));
        let (got, timed_out) = (got.into_inner(), timed_out.into_inner());
        assert_eq!(got + timed_out, 16_000);
        assert!(
            got > 0 && timed_out > 0,
            "both outcomes happened: {got} / {timed_out}"
        );
    }

    #[test]
    fn slots_never_exceed_the_limit_across_tasks() {
        static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(4, 64) {
            Ok(l) => l,
            Err(_) => panic!(),
        };
        static SEEN: Occupancy = Occupancy {
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let tasks: Vec<_> = (0..64)
                .map(|t| {
                    tokio::spawn(async move {
                        let mut cancelled = 0;
                        for i in 0..500 {
                            let acquire = LIMIT.acquire();
                            let permit = if (t + i) % 5 == 0 {
                                // Cancelled if it waits past the timeout.
                                match tokio::time::timeout(
                                    std::time::Duration::from_micros(50),
                                    acquire,
                                )
                                .await
                                {
                                    Ok(p) => p,
                                    Err(_) => {
                                        cancelled += 1;
                                        continue;
                                    }
                                }
                            } else {
                                acquire.await
                            };
                            let permit = permit.expect("64 tasks fit the queue");
                            SEEN.enter(4);
                            tokio::task::yield_now().await;
                            SEEN.leave();
                            drop(permit);
                        }
                        cancelled
                    })
                })
                .collect();
            let all = async {
                let mut cancelled = 0;
                for t in tasks {
                    cancelled += t.await.unwrap();
                }
                cancelled
            };
            // A lost wake-up or a leaked slot would hang a task.
            let cancelled = tokio::time::timeout(std::time::Duration::from_secs(60), all)
                .await
                .expect("every task finished");
            eprintln!("{cancelled} waits cancelled");
        });
        assert_eq!((LIMIT.in_flight(), LIMIT.queued()), (0, 0));
        assert_eq!(
            SEEN.most.load(Ordering::SeqCst),
            4,
            "the slots were all used"
        );
    }

    /// Tokio tasks that queue in spawn order are served in that order.
    #[tokio::test(flavor = "current_thread")]
    async fn tokio_tasks_are_served_in_fifo_order() {
        static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(2, 100) {
            Ok(l) => l,
            Err(_) => panic!(),
        };
        let order = Arc::new(Mutex::new(Vec::new()));
        let a = LIMIT.acquire().await.unwrap();
        let b = LIMIT.acquire().await.unwrap();
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let order = order.clone();
                tokio::spawn(async move {
                    let _permit = LIMIT.acquire().await.unwrap();
                    order.lock().unwrap().push(i);
                    tokio::task::yield_now().await;
                })
            })
            .collect();
        tokio::task::yield_now().await;
        assert_eq!(LIMIT.queued(), 20);
        drop((a, b));
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
    }

    mod model {
        //! Random interleavings of every operation, checked against a model of the queue.
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            TryAcquire,
            Start,
            Poll(usize),
            DropFuture(usize),
            DropPermit(usize),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                1 => Just(Op::TryAcquire),
                2 => Just(Op::Start),
                3 => (0..16usize).prop_map(Op::Poll),
                1 => (0..16usize).prop_map(Op::DropFuture),
                2 => (0..16usize).prop_map(Op::DropPermit),
            ]
        }

        proptest! {
            #[test]
            fn the_limit_follows_its_model(
                max_in_flight in 1..4usize,
                max_queued in 0..4usize,
                ops in prop::collection::vec(op(), 1..80),
            ) {
                let l = limit(max_in_flight, max_queued);
                // The live futures, in the order they were started (id, probe).
                let mut futures: Vec<(usize, Probe<'_>)> = Vec::new();
                let mut permits: Vec<LimitPermit<'_>> = Vec::new();
                // The model: ids waiting, oldest first; ids handed a slot not yet seen.
                let mut waiting: VecDeque<usize> = VecDeque::new();
                let mut granted: Vec<usize> = Vec::new();
                let mut next_id = 0;
                let hand_over = |waiting: &mut VecDeque<usize>, granted: &mut Vec<usize>| {
                    if let Some(id) = waiting.pop_front() {
                        granted.push(id);
                    }
                };
                for op in ops {
                    match op {
                        Op::TryAcquire => {
                            let free = permits.len() + granted.len() < max_in_flight;
                            let got = l.try_acquire();
                            prop_assert_eq!(got.is_some(), free && waiting.is_empty());
                            permits.extend(got);
                        }
                        Op::Start => {
                            let id = next_id;
                            next_id += 1;
                            let mut p = Probe::new(&l);
                            let free = permits.len() + granted.len() < max_in_flight;
                            match p.poll() {
                                Poll::Ready(Ok(permit)) => {
                                    prop_assert!(free && waiting.is_empty());
                                    permits.push(permit);
                                }
                                Poll::Ready(Err(Rejected(()))) => {
                                    prop_assert!(!free && waiting.len() >= max_queued);
                                }
                                Poll::Pending => {
                                    prop_assert!(!free && waiting.len() < max_queued);
                                    waiting.push_back(id);
                                    futures.push((id, p));
                                }
                            }
                        }
                        Op::Poll(i) if !futures.is_empty() => {
                            let i = i % futures.len();
                            let id = futures[i].0;
                            match futures[i].1.poll() {
                                Poll::Ready(Ok(permit)) => {
                                    let at = granted.iter().position(|&g| g == id);
                                    prop_assert!(at.is_some(), "{} was not handed a slot", id);
                                    granted.retain(|&g| g != id);
                                    permits.push(permit);
                                    futures.remove(i);
                                }
                                Poll::Pending => prop_assert!(waiting.contains(&id)),
                                Poll::Ready(Err(_)) => {
                                    prop_assert!(false, "a queued future rejected")
                                }
                            }
                        }
                        Op::DropFuture(i) if !futures.is_empty() => {
                            let (id, _) = futures.remove(i % futures.len());
                            if granted.contains(&id) {
                                granted.retain(|&g| g != id);
                                hand_over(&mut waiting, &mut granted);
                            } else {
                                waiting.retain(|&w| w != id);
                            }
                        }
                        Op::DropPermit(i) if !permits.is_empty() => {
                            drop(permits.remove(i % permits.len()));
                            hand_over(&mut waiting, &mut granted);
                        }
                        _ => {}
                    }
                    prop_assert_eq!(l.in_flight(), permits.len() + granted.len());
                    prop_assert!(l.in_flight() <= max_in_flight);
                    prop_assert_eq!(l.queued(), waiting.len());
                    // Every future handed a slot has been woken, and no waiting one has.
                    for (id, p) in &futures {
                        prop_assert_eq!(p.woken() > 0, granted.contains(id), "future {}", id);
                    }
                }
                drop(futures);
                drop(permits);
                prop_assert_eq!((l.in_flight(), l.queued()), (0, 0));
            }
        }
    }
}
