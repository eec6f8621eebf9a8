//! A concurrency limit (SPEC section 16): `limit = MY_LIMIT` and `PolicyBuilder::limit`. An
//! attempt holds a slot while it runs, not while backing off; attempts wait in FIFO order;
//! when the queue is full the attempt fails at once with `E::from(Rejected)`, not retried.

use std::cell::Cell;
use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use retry_runtime::{ConcurrencyLimit, Policy, Rejected, robust};
use tokio::time::Instant;

mod common;
use common::*;

fn is_rejected(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Rejected>())
}

/// The most attempts seen running at once.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
static MOST: AtomicUsize = AtomicUsize::new(0);

fn enter() {
    let now = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
    MOST.fetch_max(now, Ordering::SeqCst);
}
fn leave() {
    RUNNING.fetch_sub(1, Ordering::SeqCst);
}

static TWO: ConcurrencyLimit = match ConcurrencyLimit::new(2, 1) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};

#[robust(retries = 0, limit = TWO)]
async fn slow() -> io::Result<u32> {
    enter();
    tokio::time::sleep(secs(1)).await;
    leave();
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn two_run_one_waits_in_line_and_the_next_is_rejected_at_once() {
    let start = Instant::now();
    let (a, b, c, d) = tokio::join!(
        slow(),
        slow(),
        async {
            tokio::task::yield_now().await;
            let r = slow().await;
            (r, start.elapsed())
        },
        async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            let r = slow().await;
            (r, start.elapsed())
        }
    );
    assert_eq!((a.unwrap(), b.unwrap()), (1, 1));
    // The third waited for a slot (1 s) and ran (1 s).
    assert_eq!(c.0.unwrap(), 1);
    assert_eq!(c.1, secs(2));
    // The fourth found the queue full: rejected at once, not retried.
    assert!(is_rejected(&d.0.unwrap_err()));
    assert_eq!(d.1, Duration::ZERO);
    assert_eq!(MOST.load(Ordering::SeqCst), 2);
    assert_eq!((TWO.in_flight(), TWO.queued()), (0, 0));
}

static ONE: ConcurrencyLimit = match ConcurrencyLimit::new(1, 0) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};

#[robust(retries = 1, backoff = constant(base = 10s), jitter = none, limit = ONE)]
async fn fails_once(n: &Cell<u32>) -> io::Result<u32> {
    n.set(n.get() + 1);
    if n.get() == 1 {
        Err(ErrorKind::ConnectionReset.into())
    } else {
        Ok(n.get())
    }
}

#[robust(retries = 0, limit = ONE)]
async fn quick() -> io::Result<u32> {
    Ok(7)
}

#[tokio::test(start_paused = true)]
async fn the_slot_is_free_while_a_call_backs_off() {
    let n = Cell::new(0);
    let (a, b) = tokio::join!(fails_once(&n), async {
        tokio::time::sleep(secs(1)).await; // during the first call's 10 s backoff
        quick().await
    });
    assert_eq!(a.unwrap(), 2);
    assert_eq!(
        b.unwrap(),
        7,
        "not rejected: the backing-off call held no slot"
    );
}

static BLOCKING: ConcurrencyLimit = match ConcurrencyLimit::new(2, 64) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};
static B_RUNNING: AtomicUsize = AtomicUsize::new(0);
static B_MOST: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static FIRST_WORK: Cell<bool> = const { Cell::new(true) };
}

#[robust(retries = 0, limit = BLOCKING)]
fn work() -> io::Result<()> {
    let now = B_RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
    B_MOST.fetch_max(now, Ordering::SeqCst);
    // A thread's first call waits (a bounded while) for a second call to run beside it: the
    // limit must let two run at once, not only keep a third out.
    if FIRST_WORK.with(|f| f.replace(false)) {
        for _ in 0..1_000_000 {
            if B_RUNNING.load(Ordering::SeqCst) >= 2 {
                break;
            }
            std::thread::yield_now();
        }
    }
    for _ in 0..50 {
        std::thread::yield_now();
    }
    B_RUNNING.fetch_sub(1, Ordering::SeqCst);
    Ok(())
}

#[test]
fn blocking_calls_on_many_threads_never_exceed_the_limit() {
    let threads: Vec<_> = (0..8)
        .map(|_| std::thread::spawn(|| (0..200).all(|_| work().is_ok())))
        .collect();
    for t in threads {
        assert!(
            t.join().unwrap(),
            "the queue (64) holds every waiting thread"
        );
    }
    assert_eq!(B_MOST.load(Ordering::SeqCst), 2, "two at once, never three");
    assert_eq!(BLOCKING.in_flight(), 0);
}

static PAIR: ConcurrencyLimit = match ConcurrencyLimit::new(2, 2) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};
static PAIR_INSIDE: AtomicUsize = AtomicUsize::new(0);

/// Enters, and waits (5 s at most) until another attempt is inside too: whether two ran at once.
#[robust(retries = 0, limit = PAIR)]
fn meet() -> io::Result<bool> {
    PAIR_INSIDE.fetch_add(1, Ordering::SeqCst);
    let start = std::time::Instant::now();
    while PAIR_INSIDE.load(Ordering::SeqCst) < 2 && start.elapsed() < secs(5) {
        std::thread::yield_now();
    }
    Ok(PAIR_INSIDE.load(Ordering::SeqCst) >= 2)
}

/// The limit lets as many attempts run at once as it has slots: two blocking calls on two
/// threads meet inside a limit of two (one that let one run at a time would keep the second
/// out for the first's 5 s, and neither would see the other).
#[test]
fn two_slots_let_two_blocking_attempts_run_at_once() {
    let threads: Vec<_> = (0..2).map(|_| std::thread::spawn(meet)).collect();
    for t in threads {
        assert!(t.join().unwrap().unwrap(), "the two attempts met");
    }
    assert_eq!(PAIR.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_builder_takes_a_limit_for_blocking_and_async_calls() {
    let limit = ConcurrencyLimit::new(1, 0).unwrap();
    let policy = Policy::builder().retries(0).limit(&limit).build().unwrap();
    let r: io::Result<usize> = policy.call(|_| Ok(limit.in_flight()));
    assert_eq!(r.unwrap(), 1);
    let held = limit.try_acquire().expect("free");
    let r: io::Result<()> = policy.call_async(|_| async { Ok(()) }).await;
    assert!(is_rejected(&r.unwrap_err()), "no slot and no queue");
    drop(held);
    let r: io::Result<usize> = policy.call_async(|_| async { Ok(limit.in_flight()) }).await;
    assert_eq!(r.unwrap(), 1);
}

static FULL: ConcurrencyLimit = match ConcurrencyLimit::new(1, 0) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};
static FULL_CALLS: AtomicUsize = AtomicUsize::new(0);

#[robust(retries = 5, backoff = constant(base = 1s), jitter = none, limit = FULL)]
async fn full_async() -> io::Result<u32> {
    FULL_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(1)
}

#[robust(retries = 5, backoff = constant(base = 1s), jitter = none, limit = FULL)]
fn full_blocking() -> io::Result<u32> {
    FULL_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(1)
}

/// A rejection is the call's outcome at once, with retries left: no backoff, no other try,
/// the body never run (async, blocking, and a built policy's loops).
#[tokio::test(start_paused = true)]
async fn a_rejection_is_not_retried_with_retries_left() {
    let held = FULL.try_acquire().expect("a free slot");
    let start = Instant::now();
    assert!(is_rejected(&full_async().await.unwrap_err()));
    assert_eq!(start.elapsed(), Duration::ZERO, "no backoff");
    // (A blocking backoff would sleep on the thread's virtual clock.)
    let time = retry_runtime::time::VirtualTime::new();
    let clock = time.install();
    assert!(is_rejected(&full_blocking().unwrap_err()));
    assert_eq!(time.sleeps(), [], "no backoff");
    drop(clock);
    // (`on_error` sees attempts' failures: a rejection, before any attempt, is not one.)
    let seen = AtomicU32::new(0);
    let policy = Policy::builder()
        .retries(5)
        .backoff(retry_runtime::Constant::new(secs(1)))
        .limit(&FULL)
        .on_error(|_: &io::Error, _| {
            seen.fetch_add(1, Ordering::Relaxed);
        })
        .build()
        .unwrap();
    let r: io::Result<()> = policy
        .call_async(|_| async {
            FULL_CALLS.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await;
    assert!(is_rejected(&r.unwrap_err()));
    assert_eq!(start.elapsed(), Duration::ZERO, "no backoff");
    let r: io::Result<()> = policy.call(|_| {
        FULL_CALLS.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    assert!(is_rejected(&r.unwrap_err()));
    assert_eq!(FULL_CALLS.load(Ordering::SeqCst), 0, "no body ran");
    assert_eq!(seen.load(Ordering::Relaxed), 0, "no attempt failed");
    drop(held);
    assert_eq!(full_async().await.unwrap(), 1);
    assert_eq!(full_blocking().unwrap(), 1);
    assert_eq!(FULL_CALLS.load(Ordering::SeqCst), 2);
}

/// A half-open breaker's probe that the limit refuses (its queue full) is given back: the next
/// attempt probes, instead of every attempt being rejected until another break has passed.
#[test]
fn a_probe_the_limit_refuses_goes_to_the_next_attempt() {
    use retry_runtime::time::VirtualTime;
    use retry_runtime::{BreakerState, CircuitBreaker};

    let time = VirtualTime::new();
    let breaker = CircuitBreaker::new(2, 1, 0.5, Duration::from_secs(10), 1).unwrap();
    let limit = ConcurrencyLimit::new(1, 0).unwrap();
    let policy = Policy::builder()
        .retries(0)
        .breaker(&breaker)
        .limit(&limit)
        .env(time.clone())
        .build()
        .unwrap();
    // Open the breaker, then let its break pass: half-open, with one probe.
    let r: io::Result<()> = policy.call(|_| Err(ErrorKind::ConnectionReset.into()));
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(breaker.state(), BreakerState::Open);
    time.advance(Duration::from_secs(11));
    // The limit's one slot is taken and its queue holds none: the probe is refused there.
    let held = limit.try_acquire().unwrap();
    let r: io::Result<()> = policy.call(|_| Ok(()));
    assert!(is_rejected(&r.unwrap_err()));
    drop(held);
    // The probe came back: the next attempt is admitted, and its success closes the breaker.
    let r: io::Result<()> = policy.call(|_| Ok(()));
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(breaker.state(), BreakerState::Closed);
}

// --- a retry does not wait for a slot past the call's deadline ---------------------------------

/// The builder of the policies below: 5 retries, 100 ms apart.
fn every_100ms() -> retry_runtime::PolicyBuilder<
    (),
    retry_runtime::kind::AnyError,
    retry_runtime::Constant,
    retry_runtime::NoJitter,
> {
    Policy::builder()
        .retries(5)
        .backoff(retry_runtime::Constant::new(ms(100)))
        .jitter(retry_runtime::NoJitter)
}

/// Another caller takes the limit's only slot at 50 ms and keeps it for 10 s.
async fn hold_the_slot(limit: &ConcurrencyLimit) {
    tokio::time::sleep(ms(50)).await;
    let _slot = limit.acquire().await.unwrap();
    tokio::time::sleep(secs(10)).await;
}

/// The call's first attempt fails at 0, its retry (100 ms later) finds the slot taken: with a
/// 1 s deadline from the first attempt's start, the call ends at 1 s with `Elapsed` (it ended
/// at 10 s, when the slot came, before).
async fn ends_at_the_deadline<F: std::future::Future<Output = io::Result<()>>>(
    limit: &ConcurrencyLimit,
    call: F,
) {
    ends_at_one_second(limit, call, |e| e.kind() == ErrorKind::TimedOut).await;
}

/// The same with a 1 s `max_delay`: the call ends at 1 s with `E::from(Rejected)` (the limit
/// gave the retry no slot in time).
async fn ends_at_the_max_delay<F: std::future::Future<Output = io::Result<()>>>(
    limit: &ConcurrencyLimit,
    call: F,
) {
    ends_at_one_second(limit, call, is_rejected).await;
}

async fn ends_at_one_second<F: std::future::Future<Output = io::Result<()>>>(
    limit: &ConcurrencyLimit,
    call: F,
    ended: fn(&io::Error) -> bool,
) {
    let t0 = Instant::now();
    let call = async {
        let r = call.await;
        (r, t0.elapsed())
    };
    let ((r, took), ()) = tokio::join!(call, hold_the_slot(limit));
    let e = r.unwrap_err();
    assert!(ended(&e), "{e:?}");
    assert_eq!(took, secs(1));
    assert_eq!(
        (limit.in_flight(), limit.queued()),
        (0, 0),
        "the wait left the queue"
    );
}

static DEADLINE_LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};

#[robust(deadline = 1s, limit = DEADLINE_LIMIT, retries = 5, backoff = constant(base = 100ms), jitter = none)]
async fn reset_under_a_deadline() -> io::Result<()> {
    Err(ErrorKind::ConnectionReset.into())
}

#[tokio::test(start_paused = true)]
async fn a_retry_does_not_wait_for_a_slot_past_the_deadline() {
    // The attribute.
    ends_at_the_deadline(&DEADLINE_LIMIT, reset_under_a_deadline()).await;
    // The builder.
    let limit = ConcurrencyLimit::new(1, 4).unwrap();
    // `on_error` sees the first attempt's failure, not the `Elapsed` the call ends with while
    // its retry waits for a slot (no attempt ran, so none failed).
    let seen = std::sync::Mutex::new(Vec::new());
    let policy = every_100ms()
        .deadline(secs(1))
        .limit(&limit)
        .on_error(|e: &io::Error, retries| seen.lock().unwrap().push((e.kind(), retries)))
        .build()
        .unwrap();
    let call = policy.call_async(|_| async { Err(ErrorKind::ConnectionReset.into()) });
    ends_at_the_deadline(&limit, call).await;
    assert_eq!(*seen.lock().unwrap(), [(ErrorKind::ConnectionReset, 0)]);
}

static MAX_DELAY_LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};

#[robust(max_delay = 1s, limit = MAX_DELAY_LIMIT, retries = 5, backoff = constant(base = 100ms), jitter = none)]
async fn reset_under_a_max_delay() -> io::Result<()> {
    Err(ErrorKind::ConnectionReset.into())
}

/// A retry does not start after its rule's `max_delay` is spent, even when a slot of the limit
/// is what it waits for (it waited for the slot, 10 s, before).
#[tokio::test(start_paused = true)]
async fn a_retry_does_not_wait_for_a_slot_past_its_max_delay() {
    // The attribute.
    ends_at_the_max_delay(&MAX_DELAY_LIMIT, reset_under_a_max_delay()).await;
    // The builder.
    let limit = ConcurrencyLimit::new(1, 4).unwrap();
    let policy = every_100ms()
        .max_delay(secs(1))
        .limit(&limit)
        .build()
        .unwrap();
    let call = policy.call_async(|_| async { Err(ErrorKind::ConnectionReset.into()) });
    ends_at_the_max_delay(&limit, call).await;
}

/// The `max_delay` that bounds a retry's wait is its own rule's: a `when` rule's 1 s (the `on`
/// rule has none) ends the wait at 1 s with `E::from(Rejected)`.
#[tokio::test(start_paused = true)]
async fn a_when_rules_max_delay_bounds_its_retrys_wait() {
    let limit = ConcurrencyLimit::new(1, 4).unwrap();
    let policy = every_100ms()
        .when(retry_runtime::kind::Io::ANY, |s| s.max_delay(secs(1)))
        .limit(&limit)
        .build()
        .unwrap();
    let call = policy.call_async(|_| async { Err(ErrorKind::ConnectionReset.into()) });
    ends_at_the_max_delay(&limit, call).await;
}

/// A hedged call's retry round waits for its slot as a plain retry does, within its rule's
/// `max_delay`: the first round (its attempt and the hedge its failure starts at once) fails
/// at 0, the second round's attempt finds the slot taken at 100 ms and the call ends at 1 s
/// with `E::from(Rejected)`.
#[tokio::test(start_paused = true)]
async fn a_hedged_rounds_wait_for_a_slot_ends_at_its_max_delay() {
    // Two slots (a hedge beside a limit of one is refused), one held by another caller all
    // along.
    let limit = ConcurrencyLimit::new(2, 4).unwrap();
    let other = limit.try_acquire().expect("a free slot");
    let policy = every_100ms()
        .max_delay(secs(1))
        .hedge(retry_runtime::hedge::Hedge::after(ms(500), 1).unwrap())
        .limit(&limit)
        .build()
        .unwrap();
    let attempts = AtomicU32::new(0);
    let call = policy.call_async(|_| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), io::Error>(ErrorKind::ConnectionReset.into()) }
    });
    let t0 = Instant::now();
    let call = async {
        let r = call.await;
        (r, t0.elapsed())
    };
    let ((r, took), ()) = tokio::join!(call, hold_the_slot(&limit));
    let e = r.unwrap_err();
    assert!(is_rejected(&e), "{e:?}");
    assert_eq!(took, secs(1));
    assert_eq!(
        (limit.in_flight(), limit.queued()),
        (1, 0),
        "the wait left the queue: only the other caller's slot is held"
    );
    drop(other);
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "the first round's attempt and hedge"
    );
}

/// Only the wait is bounded: a blocking retry whose backoff ended after its `max_delay` (an
/// `on_retry` that takes 200 ms, past a 100 ms `max_delay`) still starts when a slot is free,
/// as it would without a limit.
#[test]
fn a_retry_past_its_max_delay_takes_a_free_slot() {
    let time = retry_runtime::time::VirtualTime::new();
    let _guard = time.install();
    let clock = time.clone();
    let limit = ConcurrencyLimit::new(1, 4).unwrap();
    let policy = Policy::builder()
        .retries(1)
        .backoff(retry_runtime::Constant::new(ms(10)))
        .jitter(retry_runtime::NoJitter)
        .max_delay(ms(100))
        .on_retry(move |_: &io::Result<()>, _| clock.advance(ms(200)))
        .limit(&limit)
        .build()
        .unwrap();
    let attempts = Cell::new(0);
    let r: io::Result<()> = policy.call(|_| {
        attempts.set(attempts.get() + 1);
        Err(ErrorKind::ConnectionReset.into())
    });
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(attempts.get(), 2, "the retry was made");
}

/// On a policy whose clock is virtual (`time`: its backoffs advance it at once, tokio's timer
/// does not move), the time left is read on that clock: after a 900 ms backoff under a 1 s
/// bound (the deadline or a `max_delay`), the retry waits for a slot at most the 100 ms left
/// (on tokio's timer, as attempts' timeouts are), not a second, and the call then ends with
/// the error `ended` accepts, though the policy's clock has not moved meanwhile.
async fn waits_the_time_left_on_the_policys_clock<
    P: retry_runtime::AsyncRetryPolicy<(), io::Error>,
>(
    policy: &P,
    limit: &ConcurrencyLimit,
    time: &retry_runtime::time::VirtualTime,
    ended: fn(&io::Error) -> bool,
) {
    let t0 = Instant::now();
    let call = async {
        // The first attempt takes 10 ms of tokio's time (none of the policy's) and fails.
        let r: io::Result<()> = policy
            .call_async(|_| async {
                tokio::time::sleep(ms(10)).await;
                Err(ErrorKind::ConnectionReset.into())
            })
            .await;
        (r, t0.elapsed())
    };
    // Another caller queues for the slot meanwhile: it gets it when the first attempt ends.
    let hold = async {
        let _slot = limit.acquire().await.unwrap();
        tokio::time::sleep(secs(10)).await;
    };
    let ((r, took), ()) = tokio::join!(call, hold);
    let e = r.unwrap_err();
    assert!(ended(&e), "{e:?}");
    assert_eq!(took, ms(110));
    assert_eq!(time.slept(), ms(900));
}

#[tokio::test(start_paused = true)]
async fn the_time_left_is_read_on_the_policys_clock() {
    let time = retry_runtime::time::VirtualTime::new();
    let limit = ConcurrencyLimit::new(1, 4).unwrap();
    let policy = Policy::builder()
        .retries(5)
        .backoff(retry_runtime::Constant::new(ms(900)))
        .jitter(retry_runtime::NoJitter)
        .deadline(secs(1))
        .limit(&limit)
        .env(time.clone())
        .build()
        .unwrap();
    let timed_out = |e: &io::Error| e.kind() == ErrorKind::TimedOut;
    waits_the_time_left_on_the_policys_clock(&policy, &limit, &time, timed_out).await;
    // A `max_delay` ends the wait with `E::from(Rejected)`.
    let time = retry_runtime::time::VirtualTime::new();
    let limit = ConcurrencyLimit::new(1, 4).unwrap();
    let policy = Policy::builder()
        .retries(5)
        .backoff(retry_runtime::Constant::new(ms(900)))
        .jitter(retry_runtime::NoJitter)
        .max_delay(secs(1))
        .limit(&limit)
        .env(time.clone())
        .build()
        .unwrap();
    waits_the_time_left_on_the_policys_clock(&policy, &limit, &time, is_rejected).await;
}

// --- a blocking retry does not wait for a slot past the call's deadline ------------------------

/// Runs `call` on this thread, whose clock is virtual, with `limit` (one slot, free): its body's
/// first attempt queues a holder thread for the slot and fails; the holder gets the slot when
/// the attempt ends and keeps it until the call has returned (5 s at most). The retry, 10 ms
/// later on the virtual clock, finds the slot taken: the call must end when its deadline
/// (100 ms from the first attempt) passes, with the first attempt's error and no second
/// attempt. (Before, it waited for the holder, then made the retry.)
fn blocking_retry_ends_at_the_deadline(
    limit: &'static ConcurrencyLimit,
    call: impl FnOnce(&dyn Fn() -> io::Result<()>) -> io::Result<()>,
) {
    use std::sync::{Mutex, mpsc};

    let _clock = retry_runtime::time::VirtualTime::new().install();
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(Some(released));
    let holder = Mutex::new(None);
    let attempts = AtomicU32::new(0);
    let body = || {
        if attempts.fetch_add(1, Ordering::SeqCst) == 0
            && let Some(released) = released.lock().unwrap().take()
        {
            *holder.lock().unwrap() = Some(std::thread::spawn(move || {
                let _slot = limit.acquire_blocking().unwrap();
                let _ = released.recv_timeout(secs(5));
            }));
            // The holder waits in the queue before this attempt's slot is freed.
            let start = std::time::Instant::now();
            while limit.queued() == 0 && start.elapsed() < secs(5) {
                std::thread::yield_now();
            }
        }
        Err(ErrorKind::ConnectionReset.into())
    };
    let start = std::time::Instant::now();
    let r = call(&body);
    let took = start.elapsed();
    let _ = release.send(());
    if let Some(h) = holder.lock().unwrap().take() {
        h.join().unwrap();
    }
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "no retry once the deadline passed"
    );
    assert!(took < secs(5), "the call waited for the holder: {took:?}");
    // The retry waited for the slot until the deadline (90 ms of the system's clock, for the
    // 90 ms left on the call's), rather than giving up at once.
    assert!(
        took >= ms(90),
        "the retry did not wait for a slot: {took:?}"
    );
    assert_eq!((limit.in_flight(), limit.queued()), (0, 0));
}

static BLOCKING_DEADLINE_LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};

#[robust(deadline = 100ms, limit = BLOCKING_DEADLINE_LIMIT, retries = 5, backoff = constant(base = 10ms), jitter = none)]
fn blocking_under_a_deadline(body: &dyn Fn() -> io::Result<()>) -> io::Result<()> {
    body()
}

#[test]
fn a_blocking_retry_does_not_wait_for_a_slot_past_the_deadline() {
    blocking_retry_ends_at_the_deadline(&BLOCKING_DEADLINE_LIMIT, |body| {
        blocking_under_a_deadline(body)
    });
}

#[test]
fn a_blocking_retry_of_the_builder_does_not_wait_for_a_slot_past_the_deadline() {
    static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    let policy = Policy::builder()
        .retries(5)
        .backoff(retry_runtime::Constant::new(ms(10)))
        .jitter(retry_runtime::NoJitter)
        .deadline(ms(100))
        .limit(&LIMIT)
        .build()
        .unwrap();
    blocking_retry_ends_at_the_deadline(&LIMIT, |body| policy.call(|_| body()));
}

static BLOCKING_MAX_DELAY_LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};

#[robust(max_delay = 100ms, limit = BLOCKING_MAX_DELAY_LIMIT, retries = 5, backoff = constant(base = 10ms), jitter = none)]
fn blocking_under_a_max_delay(body: &dyn Fn() -> io::Result<()>) -> io::Result<()> {
    body()
}

/// The same with a 100 ms `max_delay` instead of the deadline: no retry starts once it is
/// spent, and the call returns the failure the retry follows.
#[test]
fn a_blocking_retry_does_not_wait_for_a_slot_past_its_max_delay() {
    blocking_retry_ends_at_the_deadline(&BLOCKING_MAX_DELAY_LIMIT, |body| {
        blocking_under_a_max_delay(body)
    });
    static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    let policy = Policy::builder()
        .retries(5)
        .backoff(retry_runtime::Constant::new(ms(10)))
        .jitter(retry_runtime::NoJitter)
        .max_delay(ms(100))
        .limit(&LIMIT)
        .build()
        .unwrap();
    blocking_retry_ends_at_the_deadline(&LIMIT, |body| policy.call(|_| body()));
}

// --- a retry with no time left is not made, even when the queue is full -----------------------

/// A policy on a virtual clock with a 100 ms deadline and a 10 ms backoff, whose `on_retry`
/// takes the limit's only slot (it has no queue) and moves the clock 200 ms on: the retry,
/// decided in time, finds no time left when its backoff ends, and the queue full. Before, the
/// retry asked the full queue and the call ended with `Rejected`; it now ends as when the
/// deadline passes during a wait: the blocking call returns the failure the retry follows,
/// the async one `Elapsed`, and no second attempt is made.
#[tokio::test(start_paused = true)]
async fn a_retry_with_no_time_left_is_not_rejected_by_a_full_queue() {
    use retry_runtime::time::VirtualTime;

    for blocking in [true, false] {
        let time = VirtualTime::new();
        let limit = ConcurrencyLimit::new(1, 0).unwrap();
        let taken = std::sync::Mutex::new(None);
        let budget = retry_runtime::RetryBudget::new(1.0, 0.0, 1.0).unwrap();
        let policy = Policy::builder()
            .budget(&budget)
            .retries(5)
            .backoff(retry_runtime::Constant::new(ms(10)))
            .jitter(retry_runtime::NoJitter)
            .deadline(ms(100))
            .limit(&limit)
            .env(time.clone())
            .on_retry(|_: &io::Result<()>, _: &retry_runtime::RetryInfo| {
                *taken.lock().unwrap() = limit.acquire_blocking_timeout(Duration::ZERO).unwrap();
                assert!(taken.lock().unwrap().is_some(), "the slot was free");
                time.advance(ms(200));
            })
            .build()
            .unwrap();
        let attempts = AtomicU32::new(0);
        let r: io::Result<()> = if blocking {
            policy.call(|_| {
                attempts.fetch_add(1, Ordering::SeqCst);
                Err(ErrorKind::ConnectionReset.into())
            })
        } else {
            policy
                .call_async(|_| async {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    Err(ErrorKind::ConnectionReset.into())
                })
                .await
        };
        let e = r.unwrap_err();
        assert!(!is_rejected(&e), "blocking: {blocking}: {e}");
        let expected = if blocking {
            ErrorKind::ConnectionReset
        } else {
            ErrorKind::TimedOut
        };
        assert_eq!(e.kind(), expected, "blocking: {blocking}");
        assert_eq!(attempts.load(Ordering::SeqCst), 1, "blocking: {blocking}");
        // The retry was decided (announced, and paid: the budget's only token) before it
        // found no time left.
        assert!(
            taken.lock().unwrap().take().is_some(),
            "on_retry was called"
        );
        assert_eq!(budget.tokens(), 0.0, "blocking: {blocking}");
        assert_eq!((limit.in_flight(), limit.queued()), (0, 0));
    }
}

// --- a retry whose slot comes as the deadline passes is not sent ------------------------------

/// Another caller takes the limit's only slot at 50 ms and gives it back at 1 s, the instant
/// the call's deadline passes.
async fn hold_the_slot_until_the_deadline(limit: &ConcurrencyLimit) {
    tokio::time::sleep(ms(50)).await;
    let slot = limit.acquire().await.unwrap();
    tokio::time::sleep(ms(950)).await;
    drop(slot);
}

/// The call's retry (at 100 ms) waits for the slot, which comes at 1 s, the deadline: the
/// retry, with no time left, is not sent (its body never runs), and the call ends with
/// `Elapsed` at 1 s. (Before, the body ran once more, to be cut at once.)
async fn no_attempt_without_time<F: std::future::Future<Output = io::Result<()>>>(
    limit: &ConcurrencyLimit,
    sent: &AtomicU32,
    call: F,
) {
    let t0 = Instant::now();
    let call = async {
        let r = call.await;
        (r, t0.elapsed())
    };
    // The holder is polled first at each wake (at 1 s, the slot is handed over before the
    // call sees its deadline); `tokio::join!` would rotate the order.
    let mut hold = std::pin::pin!(hold_the_slot_until_the_deadline(limit));
    let mut call = std::pin::pin!(call);
    let mut held = false;
    let (r, took) = std::future::poll_fn(|cx| {
        if !held {
            held = hold.as_mut().poll(cx).is_ready();
        }
        call.as_mut().poll(cx)
    })
    .await;
    assert!(held);
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!((took, sent.load(Ordering::SeqCst)), (secs(1), 1));
    assert_eq!((limit.in_flight(), limit.queued()), (0, 0));
}

static EDGE_LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};

#[robust(deadline = 1s, limit = EDGE_LIMIT, retries = 5, backoff = constant(base = 100ms), jitter = none)]
async fn sent_under_a_deadline(sent: &AtomicU32) -> io::Result<()> {
    sent.fetch_add(1, Ordering::SeqCst);
    Err(ErrorKind::ConnectionReset.into())
}

#[tokio::test(start_paused = true)]
async fn a_retry_whose_slot_comes_at_the_deadline_is_not_sent() {
    // The attribute.
    let sent = AtomicU32::new(0);
    no_attempt_without_time(&EDGE_LIMIT, &sent, sent_under_a_deadline(&sent)).await;
    // The builder.
    let limit = ConcurrencyLimit::new(1, 4).unwrap();
    let policy = every_100ms()
        .deadline(secs(1))
        .limit(&limit)
        .build()
        .unwrap();
    let sent = AtomicU32::new(0);
    let call = policy.call_async(|_| async {
        sent.fetch_add(1, Ordering::SeqCst);
        Err(ErrorKind::ConnectionReset.into())
    });
    no_attempt_without_time(&limit, &sent, call).await;
}

static TIMED_ONE: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};

#[robust(retries = 0, timeout = 100ms, limit = TIMED_ONE)]
async fn timed_holder(runs: Duration) -> io::Result<Duration> {
    tokio::time::sleep(runs).await;
    Ok(runs)
}

/// The same under a deadline, which makes the fn read each attempt's start (and arm its timer
/// from it). (It succeeds at once: its retry, there for the deadline to bound, is never made.)
#[robust(retries = 1, timeout = 100ms, deadline = 10s, limit = TIMED_ONE)]
async fn timed_holder_with_a_deadline(runs: Duration) -> io::Result<Duration> {
    tokio::time::sleep(runs).await;
    Ok(runs)
}

/// Runs `holder` and, once it holds the slot, `waiter`: their results, and when the waiter
/// ended.
async fn in_line<A, B>(
    holder: impl std::future::Future<Output = A>,
    waiter: impl std::future::Future<Output = B>,
) -> (A, B, Duration) {
    let start = Instant::now();
    let (a, (b, took)) = tokio::join!(holder, async {
        tokio::task::yield_now().await;
        let b = waiter.await;
        (b, start.elapsed())
    });
    (a, b, took)
}

/// An attempt's timeout counts from when it holds its slot, not from the call's start: a call
/// that waits 80 ms in line and then runs 50 ms under a 100 ms timeout succeeds at 130 ms (its
/// timer, made before the wait, was once not started again after it, and cut the attempt at
/// 100 ms).
#[tokio::test(start_paused = true)]
async fn the_wait_for_a_slot_is_not_the_attempts_time() {
    for (first, second, took) in [
        in_line(timed_holder(ms(80)), timed_holder(ms(50))).await,
        in_line(
            timed_holder_with_a_deadline(ms(80)),
            timed_holder_with_a_deadline(ms(50)),
        )
        .await,
    ] {
        assert_eq!(first.unwrap(), ms(80));
        assert_eq!(second.unwrap(), ms(50));
        assert!(took >= ms(130) && took < ms(135), "{took:?}");
    }
    // The slot is still one: a call that runs past its timeout after the same wait is cut 100
    // ms after it got the slot.
    let (_, second, took) = in_line(timed_holder(ms(80)), timed_holder(ms(150))).await;
    assert_eq!(second.unwrap_err().kind(), ErrorKind::TimedOut);
    assert!(took >= ms(180) && took < ms(185), "{took:?}");
}

/// A caller's state, with its own limit and budget.
struct Conn {
    limit: ConcurrencyLimit,
    budget: retry_runtime::RetryBudget,
    sent: u32,
}

fn conn() -> Conn {
    Conn {
        limit: ConcurrencyLimit::new(1, 0).unwrap(),
        budget: retry_runtime::RetryBudget::new(1.0, 0.0, 1.0).unwrap(),
        sent: 0,
    }
}

/// The guard is a field of a `&mut` parameter whose other fields the body writes: the call
/// borrows `conn.limit` for its whole length, so the attempts cannot reborrow all of `conn`
/// (rustc refused it with E0502); they use the parameter itself, writing `conn.sent` only.
#[robust(retries = 2, backoff = none, limit = conn.limit)]
fn limited_through(conn: &mut Conn) -> io::Result<u32> {
    conn.sent += 1;
    assert_eq!(conn.limit.in_flight(), 1, "the attempt holds the slot");
    if conn.sent < 2 {
        Err(ErrorKind::ConnectionReset.into())
    } else {
        Ok(conn.sent)
    }
}

#[robust(retries = 5, backoff = none, budget = conn.budget, timeout = "1s")]
async fn budgeted_through(conn: &mut Conn, label: String) -> io::Result<usize> {
    tokio::task::yield_now().await;
    conn.sent += 1;
    Err(io::Error::other(label))
}

#[test]
fn a_guard_from_a_field_of_a_unique_borrow_beside_a_body_that_writes_another() {
    let mut c = conn();
    assert_eq!(limited_through(&mut c).unwrap(), 2);
    assert_eq!(c.limit.in_flight(), 0, "the slot given back");
}

#[tokio::test(start_paused = true)]
async fn the_same_in_an_async_fn_whose_future_is_send() {
    fn send<F: std::future::Future + Send>(f: F) -> F {
        f
    }
    let mut c = conn();
    let e = send(budgeted_through(&mut c, "reset".to_string()))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "reset");
    assert_eq!(c.sent, 2, "the budget paid for one retry");
}

static BY_INDEX: [ConcurrencyLimit; 1] = [match ConcurrencyLimit::new(1, 0) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
}];

struct Indexed {
    idx: usize,
    sent: u32,
}

/// Takes its argument by value (a `&mut` passed here moves: no implicit reborrow).
fn take<T>(t: T) -> T {
    t
}

/// A guard expression that only reads the parameter (`BY_INDEX[conn.idx]`, no borrow of it
/// kept), and a callback that names it in a string: each attempt still reborrows `conn`, so
/// the body may move its reborrow on.
#[robust(retries = 2, backoff = none, limit = BY_INDEX[conn.idx], on_error = |e: &io::Error, _| eprintln!("conn: {e}"))]
fn moves_it_on(conn: &mut Indexed) -> io::Result<u32> {
    let conn = take(conn);
    conn.sent += 1;
    if conn.sent < 2 {
        Err(ErrorKind::ConnectionReset.into())
    } else {
        Ok(conn.sent)
    }
}

#[test]
fn a_guard_that_only_reads_a_unique_borrow_leaves_each_attempt_its_reborrow() {
    let mut c = Indexed { idx: 0, sent: 0 };
    assert_eq!(moves_it_on(&mut c).unwrap(), 2);
    assert_eq!(BY_INDEX[0].in_flight(), 0);
}
