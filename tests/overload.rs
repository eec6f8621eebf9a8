//! Overload protection: retry budget, circuit breaker, server-hinted delays and `on_retry`,
//! through the builder and the attribute.

use std::cell::{Cell, RefCell};
use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

mod common;
use common::*;

use retry_runtime::time::{Clock, VirtualTime};
use retry_runtime::{
    BreakerState, CircuitBreaker, Constant, NoJitter, Open, Policy, RetryBudget, RetryInfo, RuleId,
    robust,
};

#[test]
fn budget_tokens_are_never_lost_or_double_counted_under_contention() {
    let budget = RetryBudget::new(1000.0, 0.0, 1.0).unwrap();
    let granted = AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                while budget.try_withdraw() {
                    granted.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(granted.load(Ordering::Relaxed), 1000);
    assert_eq!(budget.tokens(), 0.0);

    // 8 threads x 1000 calls x 0.01 token = 80 tokens, under the capacity of 1000.
    let budget = RetryBudget::new(1000.0, 0.01, 1.0).unwrap();
    while budget.try_withdraw() {}
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..1000 {
                    budget.deposit();
                }
            });
        }
    });
    assert_eq!(budget.tokens(), 80.0);
}

#[test]
fn breaker_counts_every_outcome_under_contention() {
    let b = CircuitBreaker::new(1000, 1000, 0.5, secs(60), 1).unwrap();
    let t = std::time::Instant::now();
    std::thread::scope(|s| {
        for i in 0..8 {
            let b = &b;
            s.spawn(move || {
                for j in 0..120 {
                    // 499 of the first 998 outcomes are failures: below the ratio.
                    b.record(t, (i * 120 + j) % 2 == 0 || i * 120 + j >= 998);
                }
            });
        }
    });
    // 960 outcomes recorded, fewer than min_calls: still closed.
    assert_eq!(b.state(), BreakerState::Closed);
    for _ in 0..40 {
        b.record(t, false);
    }
    // 1000 outcomes, at least 500 failures: open.
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn an_empty_budget_stops_retries_through_the_builder() {
    let budget = RetryBudget::new(2.0, 0.0, 1.0).unwrap();
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(10)
        .backoff(Constant::new(secs(1)))
        .budget(&budget)
        .env(time.clone())
        .build()
        .unwrap();
    let mut attempts = 0;
    let r: io::Result<()> = p.call(|_| {
        attempts += 1;
        Err(ErrorKind::Other.into())
    });
    assert!(r.is_err());
    assert_eq!(attempts, 3, "two tokens: two retries");
    let mut attempts = 0;
    let _: io::Result<()> = p.call(|_| {
        attempts += 1;
        Err(ErrorKind::Other.into())
    });
    assert_eq!(attempts, 1, "the budget is empty: no retry at all");
}

#[test]
fn an_open_breaker_fails_fast_without_running_the_body() {
    let breaker = CircuitBreaker::new(4, 2, 0.5, secs(30), 1).unwrap();
    let time = VirtualTime::new();
    let seen = AtomicU32::new(0);
    let p = Policy::builder()
        .retries(5)
        .backoff(Constant::new(secs(1)))
        .jitter(NoJitter)
        .breaker(&breaker)
        .env(time.clone())
        .on_error(|_: &io::Error, _| {
            seen.fetch_add(1, Ordering::Relaxed);
        })
        .build()
        .unwrap();
    let mut attempts = 0;
    let r: io::Result<()> = p.call(|_| {
        attempts += 1;
        Err(ErrorKind::ConnectionReset.into())
    });
    // Two failures open the breaker; the third attempt is rejected before the body runs.
    assert_eq!(attempts, 2);
    let e = r.unwrap_err();
    assert!(e.get_ref().is_some_and(|i| i.is::<Open>()), "{e}");
    assert_eq!(breaker.state(), BreakerState::Open);
    // `on_error` saw the two attempts' failures, not the rejection (no attempt ran).
    assert_eq!(seen.load(Ordering::Relaxed), 2);

    // Later calls fail fast too, until the break is over.
    let mut ran = false;
    let r: io::Result<()> = p.call(|_| {
        ran = true;
        Ok(())
    });
    assert!(r.is_err() && !ran);
    assert_eq!(seen.load(Ordering::Relaxed), 2);
    time.advance(secs(30));
    assert!(
        p.call(|_| Ok::<_, io::Error>(())).is_ok(),
        "a probe goes through"
    );
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[test]
fn a_hint_replaces_the_backoff_but_not_the_budget() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(5)
        .backoff(Constant::new(secs(1)))
        .jitter(NoJitter)
        .scale(2.0)
        .max_delay(secs(20))
        .hint(|e: &(u64, bool)| e.1.then(|| secs(e.0)))
        .env(time.clone())
        .build()
        .unwrap();
    let mut n = 0;
    let script = [(7, true), (0, false), (9, true), (30, true)];
    let r: Result<(), (u64, bool)> = p.call(|_| {
        n += 1;
        Err(script[n - 1])
    });
    // 7 s hinted (not scaled), 2 s from the backoff (1 s scaled by 2), 9 s hinted (18 s
    // elapsed); 30 s would pass max_delay.
    assert_eq!(r, Err((30, true)));
    assert_eq!(time.sleeps(), [secs(7), secs(2), secs(9)]);
}

#[test]
fn the_hint_reads_only_failures_a_rule_retries() {
    let time = VirtualTime::new();
    let reads = RefCell::new(Vec::new());
    let p = Policy::builder()
        .retries(2)
        .on(retry_runtime::kind::Predicate(|e: &u32| *e != 0))
        .backoff(Constant::new(secs(1)))
        .jitter(NoJitter)
        .hint(|e: &u32| {
            reads.borrow_mut().push(*e);
            Some(secs(u64::from(*e)))
        })
        .env(time.clone())
        .build()
        .unwrap();
    // Retried twice, then the retries are used up: the third failure is not read.
    let mut n = 0;
    let r: Result<(), u32> = p.call(|_| {
        n += 1;
        Err(n)
    });
    assert_eq!(r, Err(3));
    assert_eq!(*reads.borrow(), [1, 2]);
    assert_eq!(time.sleeps(), [secs(1), secs(2)]);
    // A failure no rule matches is not read either.
    reads.borrow_mut().clear();
    let r: Result<(), u32> = p.call(|_| Err(0));
    assert_eq!(r, Err(0));
    assert!(reads.borrow().is_empty());
}

#[test]
fn on_retry_reports_count_delay_elapsed_and_rule() {
    let time = VirtualTime::new();
    let log = RefCell::new(Vec::new());
    let p = Policy::builder()
        .retries(3)
        .backoff(Constant::new(secs(2)))
        .jitter(NoJitter)
        .when(retry_runtime::kind::Predicate(|e: &u32| *e == 0), |s| {
            s.backoff(Constant::new(secs(5)))
        })
        .on_retry(|r: &Result<(), u32>, info: &RetryInfo| {
            log.borrow_mut().push((*r.as_ref().unwrap_err(), *info))
        })
        .env(time.clone())
        .build()
        .unwrap();
    let t = time.clone();
    let mut n = 0;
    let _: Result<(), u32> = p.call(|_| {
        n += 1;
        t.advance(secs(1));
        Err(if n == 2 { 0 } else { n })
    });
    let log = log.borrow();
    assert_eq!(log.len(), 3);
    // Retries are numbered from 1.
    let expect = [
        (1, 1, 2, 1, RuleId::On),
        (0, 2, 5, 4, RuleId::When(0)),
        (3, 3, 2, 10, RuleId::On),
    ];
    for ((e, info), (ee, retry, delay, elapsed, rule)) in log.iter().zip(expect) {
        assert_eq!(*e, ee);
        assert_eq!(info.retry, retry);
        assert_eq!(info.delay, secs(delay));
        assert_eq!(info.elapsed, secs(elapsed));
        assert_eq!(info.rule, rule);
        assert!(!info.hinted);
    }
}

static BUDGET: RetryBudget = match RetryBudget::new(3.0, 0.5, 1.0) {
    Ok(b) => b,
    Err(_) => panic!("invalid budget"),
};

static BREAKER: std::sync::LazyLock<CircuitBreaker> =
    std::sync::LazyLock::new(|| CircuitBreaker::new(10, 3, 1.0, secs(60), 1).unwrap());

thread_local! {
    static ATTEMPTS: Cell<u32> = const { Cell::new(0) };
    static RETRIES: RefCell<Vec<(u32, Duration, bool)>> = const { RefCell::new(Vec::new()) };
}

#[robust(retries = 10, backoff = constant(base = "1s"), jitter = none, budget = BUDGET)]
fn budgeted() -> io::Result<()> {
    ATTEMPTS.with(|a| a.set(a.get() + 1));
    Err(ErrorKind::Other.into())
}

#[test]
fn the_attribute_shares_a_static_budget() {
    let time = VirtualTime::new();
    let _g = time.install();
    assert!(budgeted().is_err());
    // The call earned 0.5 on a full bucket (capped at 3): three retries.
    assert_eq!(ATTEMPTS.with(Cell::get), 4);
    ATTEMPTS.with(|a| a.set(0));
    assert!(budgeted().is_err());
    // 0.5 earned, less than one retry's cost: no retry.
    assert_eq!(ATTEMPTS.with(Cell::get), 1);
}

#[robust(retries = 5, backoff = none, breaker = BREAKER)]
fn guarded(run: &Cell<u32>) -> io::Result<()> {
    run.set(run.get() + 1);
    Err(ErrorKind::ConnectionRefused.into())
}

#[test]
fn the_attribute_fails_fast_on_an_open_breaker() {
    let time = VirtualTime::new();
    let _g = time.install();
    let run = Cell::new(0);
    let e = guarded(&run).unwrap_err();
    assert_eq!(run.get(), 3, "three failures open the breaker");
    assert!(e.get_ref().is_some_and(|i| i.is::<Open>()));
    assert!(guarded(&run).is_err());
    assert_eq!(run.get(), 3, "the body does not run while open");
}

#[robust(
    retries = 3,
    backoff = constant(base = "1s"),
    jitter = none,
    hint = |e: &io::Error| (e.kind() == ErrorKind::WouldBlock).then(|| Duration::from_secs(4)),
    on_retry = |_r: &io::Result<()>, info: &RetryInfo| RETRIES.with(|r| r.borrow_mut().push((info.retry, info.delay, info.hinted))),
)]
fn hinted(script: &[ErrorKind]) -> io::Result<()> {
    scripted(script)
}

/// The next attempt's outcome (counted in `ATTEMPTS`): the errors of `script` in turn, then
/// `Ok`.
fn scripted(script: &[ErrorKind]) -> io::Result<()> {
    let n = ATTEMPTS.with(|a| {
        a.set(a.get() + 1);
        a.get()
    });
    match script.get(n as usize - 1) {
        Some(k) => Err((*k).into()),
        None => Ok(()),
    }
}

#[test]
fn the_attribute_takes_hints_and_reports_retries() {
    let time = VirtualTime::new();
    let _g = time.install();
    ATTEMPTS.with(|a| a.set(0));
    hinted(&[ErrorKind::WouldBlock, ErrorKind::Other]).unwrap();
    assert_eq!(time.sleeps(), [secs(4), secs(1)]);
    RETRIES.with(|r| {
        assert_eq!(*r.borrow(), [(1, secs(4), true), (2, secs(1), false)]);
    });
    let _ = time.now();
}

thread_local! {
    static HINT_READS: RefCell<Vec<ErrorKind>> = const { RefCell::new(Vec::new()) };
}

#[robust(
    retries = 1,
    on = [Io(WouldBlock)],
    backoff = constant(base = "1s"),
    jitter = none,
    hint = |e: &io::Error| {
        HINT_READS.with(|r| r.borrow_mut().push(e.kind()));
        None
    },
)]
fn hint_counted(script: &[ErrorKind]) -> io::Result<()> {
    scripted(script)
}

#[test]
fn the_attributes_hint_reads_only_failures_a_rule_retries() {
    let time = VirtualTime::new();
    let _g = time.install();
    // A failure the `on` list does not take is returned unread.
    ATTEMPTS.with(|a| a.set(0));
    let r = hint_counted(&[ErrorKind::Other]);
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Other);
    assert!(HINT_READS.with(|r| r.borrow().is_empty()));
    // One retry: the first failure is read, the last (its rule's retries used up) is not.
    ATTEMPTS.with(|a| a.set(0));
    let r = hint_counted(&[ErrorKind::WouldBlock, ErrorKind::WouldBlock]);
    assert_eq!(r.unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(HINT_READS.with(|r| r.take()), [ErrorKind::WouldBlock]);
    assert_eq!(time.sleeps(), [secs(1)]);
}

// --- a probe taken by a call that is dropped goes back ----------------------------------------

/// A breaker opened at once and half-open after its 10 s break, with one probe.
fn half_open() -> &'static CircuitBreaker {
    let b = Box::leak(Box::new(
        CircuitBreaker::new(2, 1, 0.5, Duration::from_secs(10), 1).unwrap(),
    ));
    b.record(tokio::time::Instant::now().into_std(), false);
    b
}

static DROPPED_BREAKER: std::sync::LazyLock<&'static CircuitBreaker> =
    std::sync::LazyLock::new(half_open);

#[robust(retries = 0, breaker = *DROPPED_BREAKER)]
async fn probed(hang: bool) -> io::Result<u32> {
    if hang {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    Ok(1)
}

/// A call holding the half-open breaker's only probe is dropped while its attempt runs (the
/// caller's own timeout): the probe goes back, the next call probes and closes the breaker.
/// (Before, every call was rejected until the probe went stale, a break later.)
#[tokio::test(start_paused = true)]
async fn a_dropped_call_gives_its_probe_back() {
    use retry_runtime::BreakerState;

    // The attribute.
    let breaker = *DROPPED_BREAKER;
    tokio::time::advance(Duration::from_secs(11)).await;
    assert!(tokio::time::timeout(ms(100), probed(true)).await.is_err());
    assert_eq!(probed(false).await.unwrap(), 1);
    assert_eq!(breaker.state(), BreakerState::Closed);

    // The builder.
    let breaker = half_open();
    tokio::time::advance(Duration::from_secs(11)).await;
    let policy = Policy::builder()
        .retries(0)
        .breaker(breaker)
        .build()
        .unwrap();
    let hung = policy.call_async(|_| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok::<u32, io::Error>(1)
    });
    assert!(tokio::time::timeout(ms(100), hung).await.is_err());
    let r = policy
        .call_async(|_| async { Ok::<u32, io::Error>(2) })
        .await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

static RULE_BREAKER: std::sync::LazyLock<&'static CircuitBreaker> =
    std::sync::LazyLock::new(half_open);
static RULE_PANICS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn busy(v: u32) -> bool {
    if RULE_PANICS.swap(false, Ordering::SeqCst) {
        panic!("the rule panics");
    }
    v == 0
}

#[robust(retries = 0, breaker = *RULE_BREAKER, on = [Ok(|v: &u32| busy(*v))])]
async fn ruled() -> io::Result<u32> {
    Ok(1)
}

/// A call whose value rule panics before the breaker recorded its probe's outcome gives the
/// probe back as it unwinds: the next call probes and closes the breaker. (The call had let
/// the probe go at the start of settling, and kept it taken until it went stale.)
#[tokio::test(start_paused = true)]
async fn a_call_whose_rule_panics_gives_its_probe_back() {
    use retry_runtime::BreakerState;

    let breaker = *RULE_BREAKER;
    tokio::time::advance(Duration::from_secs(11)).await;
    RULE_PANICS.store(true, Ordering::SeqCst);
    assert!(tokio::spawn(ruled()).await.unwrap_err().is_panic());
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert_eq!(ruled().await.unwrap(), 1);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

static MANY_BREAKER: std::sync::LazyLock<&'static CircuitBreaker> =
    std::sync::LazyLock::new(|| {
        let b = Box::leak(Box::new(
            CircuitBreaker::new(2, 1, 0.5, Duration::from_secs(10), 3).unwrap(),
        ));
        b.record(tokio::time::Instant::now().into_std(), false);
        b
    });

#[robust(retries = 0, breaker = *MANY_BREAKER)]
async fn many_probed(hang_ms: u64) -> io::Result<u32> {
    tokio::time::sleep(Duration::from_millis(hang_ms)).await;
    Ok(1)
}

/// Many tasks call through a half-open breaker with three probes; most are cancelled by their
/// caller's timeout while their attempt runs, the others answer or are rejected. Whatever the
/// interleaving, no probe is lost: once all are done, healthy calls close the breaker at once
/// (three of them), instead of being rejected until the probes go stale.
#[tokio::test(start_paused = true)]
async fn probes_survive_many_cancelled_calls() {
    use retry_runtime::BreakerState;

    let breaker = *MANY_BREAKER;
    tokio::time::advance(Duration::from_secs(11)).await;
    let tasks: Vec<_> = (0..60u64)
        .map(|i| {
            tokio::spawn(async move {
                // Attempts of 0 to 29 ms under timeouts of 0 to 19 ms.
                let hang = (i * 7) % 30;
                let limit = (i * 11) % 20;
                tokio::time::timeout(ms(limit), many_probed(hang)).await
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await.unwrap();
    }
    let mut answered = 0;
    for _ in 0..3 {
        if many_probed(0).await.is_ok() {
            answered += 1;
        }
    }
    assert_eq!(
        breaker.state(),
        BreakerState::Closed,
        "{answered} of 3 answered"
    );
}
