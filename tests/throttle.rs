//! Client-side throttling (SPEC section 16): `throttle = MY_THROTTLE` and
//! `PolicyBuilder::throttle`. Before each attempt the call is rejected locally with the
//! throttle's probability; a rejected first attempt fails with `E::from(Rejected)`, a rejected
//! retry returns the last failure. Draws come from the call's seed (a seeded `VirtualTime`) and
//! the count of throttle draws made on the thread.

use std::cell::Cell;
use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use retry_runtime::time::{Clock, VirtualTime};
use retry_runtime::{AdaptiveThrottle, NoBackoff, Policy, Rejected, robust};

fn is_rejected(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Rejected>())
}

static OVERLOADED: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    Ok(t) => t,
    Err(_) => panic!("invalid throttle"),
};

/// The failures `on_error` saw in `always_failing`.
static SEEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[robust(retries = 0, throttle = OVERLOADED,
         on_error = |_: &io::Error, _| { SEEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed); })]
fn always_failing(ran: &Cell<u32>) -> io::Result<()> {
    ran.set(ran.get() + 1);
    Err(ErrorKind::ConnectionReset.into())
}

/// Makes `n` calls of `call`, each of which fails: the number the throttle rejected before any
/// attempt (every other one returned an error of `kind`).
fn rejections(n: u32, kind: ErrorKind, call: impl Fn() -> io::Result<()>) -> u32 {
    let mut rejected = 0;
    for _ in 0..n {
        let e = call().unwrap_err();
        if is_rejected(&e) {
            rejected += 1;
        } else {
            assert_eq!(e.kind(), kind);
        }
    }
    rejected
}

#[test]
fn a_service_that_keeps_failing_is_mostly_not_called() {
    let _t = VirtualTime::seeded(7).install();
    let ran = Cell::new(0);
    let rejected = rejections(1000, ErrorKind::ConnectionReset, || always_failing(&ran));
    // Nothing is accepted, so the probability is requests / (requests + 1): after the first
    // few calls nearly every attempt is rejected locally. (Every call is a request, the
    // rejected ones too, as in the SRE book.)
    assert_eq!(ran.get() + rejected, 1000);
    assert!(ran.get() >= 1, "the first call has nothing to reject it");
    assert!(ran.get() < 20, "ran {} of 1000", ran.get());
    assert!(OVERLOADED.reject_probability(Instant::now()) > 0.99);
    // `on_error` saw the attempts that ran and failed, not the rejections.
    assert_eq!(SEEN.load(std::sync::atomic::Ordering::Relaxed), ran.get());
}

static COARSE: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    Ok(t) => t,
    Err(_) => panic!("invalid throttle"),
};

#[robust(retries = 0, throttle = COARSE)]
fn always_failing_on_the_system_clock(ran: &Cell<u32>) -> io::Result<()> {
    ran.set(ran.get() + 1);
    Err(ErrorKind::ConnectionReset.into())
}

/// The same on the system's clock, which a blocking fn's throttle reads coarsely (a 60 s
/// window's buckets are 6 s wide): its counts land where an exact reading sees them. The draws
/// are not seeded: the body runs about ln(1000) ≈ 7 times on average (a standard deviation
/// near 2.5), and the bound of 60 is more than 20 deviations away.
#[test]
fn a_blocking_fn_on_the_system_clock_is_throttled_too() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    assert!(COARSE.coarse_now().is_some(), "the coarse clock is read");
    let ran = Cell::new(0);
    let mut rejected = 0;
    for _ in 0..1000 {
        if is_rejected(&always_failing_on_the_system_clock(&ran).unwrap_err()) {
            rejected += 1;
        }
    }
    assert_eq!(ran.get() + rejected, 1000);
    assert!(
        ran.get() >= 1 && ran.get() < 60,
        "ran {} of 1000",
        ran.get()
    );
    assert!(COARSE.reject_probability(Instant::now()) > 0.99);
}

static AHEAD: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    Ok(t) => t,
    Err(_) => panic!("invalid throttle"),
};

#[robust(retries = 0, throttle = AHEAD)]
fn failing_ahead() -> io::Result<()> {
    Err(ErrorKind::ConnectionReset.into())
}

/// An installed `VirtualTime` is a blocking fn's clock for its throttle too (the coarse system
/// clock stands in only when no clock is installed): counts made an hour ahead of the system's
/// clock are in the window at the virtual now, and forgotten a window later.
#[test]
fn an_installed_virtual_time_is_the_throttles_clock() {
    let time = VirtualTime::seeded(5);
    let _t = time.install();
    time.advance(Duration::from_secs(3600));
    for _ in 0..5 {
        assert!(failing_ahead().is_err());
    }
    // Five requests, none accepted: 5 / 6.
    assert!(AHEAD.reject_probability(time.now()) > 0.8);
    time.advance(Duration::from_secs(60));
    assert_eq!(AHEAD.reject_probability(time.now()), 0.0);
}

/// A retry is decided before its backoff, and counted in the bucket it starts in: with a 10 s
/// window (1 s buckets), a retry that starts 9.5 s after its decision and fails is still in
/// the window at 10.2 s, where the first attempt's bucket has left it. (It was counted in the
/// bucket of its decision, the latest the throttle had seen, and forgotten with it.) Ten
/// accepted requests at the start keep the probability at 0 when the retry is decided.
#[test]
fn a_retry_is_counted_in_the_bucket_it_starts_in() {
    let throttle = AdaptiveThrottle::new(2.0, Duration::from_secs(10)).unwrap();
    let time = VirtualTime::new();
    let t0 = time.now();
    for _ in 0..10 {
        throttle.record(t0, true);
    }
    let policy = Policy::builder()
        .retries(1)
        .backoff(retry_runtime::Constant::new(Duration::from_millis(9500)))
        .jitter(retry_runtime::NoJitter)
        .throttle(&throttle)
        .env(time.clone())
        .build()
        .unwrap();
    let ran = Cell::new(0);
    let r: io::Result<()> = policy.call(|_| {
        ran.set(ran.get() + 1);
        Err(ErrorKind::ConnectionReset.into())
    });
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(ran.get(), 2, "the retry was made");
    assert_eq!(time.now() - t0, Duration::from_millis(9500));
    // At 10.2 s the window holds the retry's bucket (9 s) only: one request, not accepted.
    let later = t0 + Duration::from_millis(10_200);
    assert_eq!(throttle.reject_probability(later), 0.5);
}

static QUIET: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    Ok(t) => t,
    Err(_) => panic!("invalid throttle"),
};

#[robust(retries = 3, backoff = none, on = [Io(ConnectionReset)], throttle = QUIET)]
fn not_found(ran: &Cell<u32>) -> io::Result<()> {
    ran.set(ran.get() + 1);
    Err(ErrorKind::NotFound.into())
}

#[test]
fn errors_no_rule_matches_count_as_accepted_and_never_throttle() {
    let _t = VirtualTime::seeded(3).install();
    let ran = Cell::new(0);
    for _ in 0..500 {
        assert_eq!(not_found(&ran).unwrap_err().kind(), ErrorKind::NotFound);
    }
    assert_eq!(ran.get(), 500);
    assert_eq!(QUIET.reject_probability(Instant::now()), 0.0);
}

static REFUSED: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    Ok(t) => t,
    Err(_) => panic!("invalid throttle"),
};

static ANSWERED: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    Ok(t) => t,
    Err(_) => panic!("invalid throttle"),
};

/// `NotFound` taken by a rule that never retries it: a retryable kind (a rule matches it)
/// whose retries are used up at once, so not accepted.
#[robust(retries = 3, backoff = none, when(Io(NotFound), retries = 0), throttle = REFUSED)]
fn not_found_never_retried(ran: &Cell<u32>) -> io::Result<()> {
    ran.set(ran.get() + 1);
    Err(ErrorKind::NotFound.into())
}

/// `NotFound` kept out of the kinds by a predicate: the service's answer, accepted.
#[robust(retries = 3, backoff = none,
         on = [|e: &io::Error| e.kind() != ErrorKind::NotFound], throttle = ANSWERED)]
fn not_found_answered(ran: &Cell<u32>) -> io::Result<()> {
    ran.set(ran.get() + 1);
    Err(ErrorKind::NotFound.into())
}

/// An error a rule matches is not accepted, even when that rule's `retries` is 0 (it says how
/// often to retry the kind, not that the service accepted it: a refused connection); one kept
/// out of every rule is accepted (README, `throttle`).
#[test]
fn an_error_a_rule_with_no_retries_takes_is_not_accepted_one_no_rule_matches_is() {
    let _t = VirtualTime::seeded(5).install();
    let ran = Cell::new(0);
    let rejected = rejections(500, ErrorKind::NotFound, || not_found_never_retried(&ran));
    assert_eq!(ran.get() + rejected, 500);
    assert!(ran.get() < 20, "ran {} of 500", ran.get());
    assert!(REFUSED.reject_probability(Instant::now()) > 0.99);

    let ran = Cell::new(0);
    for _ in 0..500 {
        assert_eq!(
            not_found_answered(&ran).unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }
    assert_eq!(ran.get(), 500, "no call rejected");
    assert_eq!(ANSWERED.reject_probability(Instant::now()), 0.0);
}

#[test]
fn a_rejected_retry_returns_the_last_failure_and_a_rejected_first_attempt_rejected() {
    // A fresh throttle at probability 1/2 (one request, none accepted) for every seed: some
    // calls are rejected before any attempt, some after their first attempt's failure.
    let mut first_rejected = 0;
    let mut retry_rejected = 0;
    for seed in 0..64 {
        let throttle = AdaptiveThrottle::new(2.0, Duration::from_secs(60)).unwrap();
        let time = VirtualTime::seeded(seed);
        throttle.record(time.now(), false);
        let policy = Policy::builder()
            .retries(5)
            .backoff(NoBackoff)
            .throttle(&throttle)
            .env(time.clone())
            .build()
            .unwrap();
        let mut attempts = 0;
        let r: io::Result<()> = policy.call(|_| {
            attempts += 1;
            Err(io::Error::new(
                ErrorKind::ConnectionReset,
                format!("attempt {attempts}"),
            ))
        });
        let e = r.unwrap_err();
        if attempts == 0 {
            assert!(is_rejected(&e), "seed {seed}: rejected before any attempt");
            first_rejected += 1;
        } else if attempts < 6 {
            // Given up because the throttle rejected the next retry: the last failure.
            assert!(!is_rejected(&e));
            assert_eq!(e.to_string(), format!("attempt {attempts}"));
            retry_rejected += 1;
        }
    }
    assert!(first_rejected > 10, "{first_rejected} of 64");
    assert!(retry_rejected > 10, "{retry_rejected} of 64");
}

static SHARED: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    Ok(t) => t,
    Err(_) => panic!("invalid throttle"),
};

/// Succeeds for one `n` in four.
#[robust(retries = 0, throttle = SHARED)]
async fn one_in_four(n: u32, ran: &std::sync::atomic::AtomicU32) -> io::Result<()> {
    ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    tokio::task::yield_now().await;
    if n.is_multiple_of(4) {
        Ok(())
    } else {
        Err(ErrorKind::ConnectionReset.into())
    }
}

/// 400 tasks on four threads share one throttle: every call is counted once (run or rejected),
/// every success as accepted, and the probability is the formula's over those counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_on_many_threads_are_all_counted() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    let ran = Arc::new(AtomicU32::new(0));
    let tasks: Vec<_> = (0..400u32)
        .map(|task| {
            let ran = Arc::clone(&ran);
            tokio::spawn(async move {
                let (mut ok, mut rejected) = (0u32, 0u32);
                for i in 0..10 {
                    match one_in_four(task + i, &ran).await {
                        Ok(()) => ok += 1,
                        Err(e) if is_rejected(&e) => rejected += 1,
                        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset),
                    }
                }
                (ok, rejected)
            })
        })
        .collect();
    let (mut ok, mut rejected) = (0u32, 0u32);
    for t in tasks {
        let (o, r) = t.await.unwrap();
        ok += o;
        rejected += r;
    }
    let calls = 4_000u32;
    assert_eq!(ran.load(Ordering::SeqCst) + rejected, calls);
    assert!(rejected > 0, "a service that refuses 3 in 4 is throttled");
    let expected =
        ((f64::from(calls) - 2.0 * f64::from(ok)) / (f64::from(calls) + 1.0)).clamp(0.0, 1.0);
    assert_eq!(SHARED.reject_probability(Instant::now()), expected);
}

/// With one seed for every call (`VirtualTime::seeded`, `PolicyBuilder::seed`), each call's
/// decision still draws its own number: a throttle held near probability 1/2 rejects about
/// half of 2,000 calls (the same draw for every call, as before, rejected all or none).
/// The state is 400,000 requests with 100,000 accepted (k = 2: p = 200,000 / 400,001); after
/// n calls of which r were rejected, p = (200,000 + 2r − n) / (400,001 + n), between 0.4925
/// and 0.5025 over the 2,000 calls (about 0.4975 with half rejected), so the expected count is
/// about 995, and the bounds 900..1100 are more than four standard deviations (22.4) away.
#[test]
fn one_seed_for_every_call_still_draws_each_decision() {
    for seeded in [true, false] {
        let throttle = AdaptiveThrottle::new(2.0, Duration::from_secs(60)).unwrap();
        let time = if seeded {
            VirtualTime::seeded(11)
        } else {
            VirtualTime::new()
        };
        let now = time.now();
        for i in 0..400_000 {
            throttle.record(now, i % 4 == 0);
        }
        let builder = Policy::builder()
            .retries(0)
            .throttle(&throttle)
            .env(time.clone());
        let policy = if seeded {
            builder.build().unwrap()
        } else {
            builder.seed(11).build().unwrap()
        };
        let mut rejected = 0;
        for _ in 0..2000 {
            let r: io::Result<()> = policy.call(|_| Ok(()));
            if r.is_err_and(|e| is_rejected(&e)) {
                rejected += 1;
            }
        }
        assert!(
            (900..=1100).contains(&rejected),
            "seeded env {seeded}: {rejected} of 2000 rejected"
        );
    }
}

/// A retry's chance counts the attempt it follows (SPEC 16: requests are the attempts made
/// before it): on a fresh throttle (k = 2), a failed first attempt makes one request and no
/// accept, so its retry is rejected with probability 1 / 2. (It was drawn before the failure
/// was counted, on an empty window: never rejected.) 2000 calls, each on a throttle of its own,
/// with a seeded clock: about 1000 retries made (a binomial's deviation is 22; the bounds are
/// four and a half of them).
#[test]
fn a_retrys_chance_counts_the_attempt_it_follows() {
    let time = VirtualTime::seeded(5);
    let mut retried = 0;
    for _ in 0..2000 {
        let throttle = AdaptiveThrottle::new(2.0, Duration::from_secs(60)).unwrap();
        let policy = Policy::builder()
            .retries(1)
            .backoff(NoBackoff)
            .throttle(&throttle)
            .env(time.clone())
            .build()
            .unwrap();
        let ran = Cell::new(0);
        let r: io::Result<()> = policy.call(|_| {
            ran.set(ran.get() + 1);
            Err(ErrorKind::ConnectionReset.into())
        });
        assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
        retried += ran.get() - 1;
    }
    assert!((900..=1100).contains(&retried), "{retried} of 2000 retried");
}
