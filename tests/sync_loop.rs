//! The blocking retry loop, driven by a virtual clock: no test here sleeps for real.

use std::cell::RefCell;
use std::io::{self, ErrorKind};
use std::time::Duration;

mod common;
use common::*;

use retry_runtime::kind::{ClassifyExt, Io, Predicate, Timeout};
use retry_runtime::time::{Clock, VirtualTime};
use retry_runtime::{
    Constant, EqualJitter, Exponential, FullJitter, Linear, NoBackoff, NoJitter, Policy,
};

fn exp_1_60() -> Exponential {
    Exponential::new(secs(1), secs(60), 2.0).unwrap()
}

#[test]
fn zero_retries_means_one_attempt() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(0)
        .env(time.clone())
        .build()
        .unwrap();
    let mut attempts = 0;
    let r: io::Result<()> = p.call(|_| {
        attempts += 1;
        Err(ErrorKind::Other.into())
    });
    assert!(r.is_err());
    assert_eq!(attempts, 1);
    assert!(time.sleeps().is_empty());
}

#[test]
fn n_retries_means_n_plus_one_attempts_with_exact_delays() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(5)
        .backoff(exp_1_60())
        .jitter(NoJitter)
        .env(time.clone())
        .build()
        .unwrap();
    let mut attempts = 0;
    let r: io::Result<()> = p.call(|_| {
        attempts += 1;
        Err(ErrorKind::Other.into())
    });
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Other);
    assert_eq!(attempts, 6);
    assert_eq!(
        time.sleeps(),
        vec![secs(1), secs(2), secs(4), secs(8), secs(16)]
    );
}

#[test]
fn negative_retries_retry_until_success() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(-1)
        .backoff(NoBackoff)
        .env(time.clone())
        .build()
        .unwrap();
    let mut body = failing(1000, ErrorKind::Other);
    assert_eq!(p.call(|_| body()).unwrap(), 1001);
    assert_eq!(time.sleeps().len(), 1000);
}

#[test]
fn success_at_first_attempt_does_not_sleep() {
    let time = VirtualTime::new();
    let p = Policy::builder().env(time.clone()).build().unwrap();
    assert_eq!(p.call(|_| Ok::<_, io::Error>(7)).unwrap(), 7);
    assert!(time.sleeps().is_empty());
}

#[test]
fn max_delay_stops_a_retry_that_cannot_start_in_budget() {
    let time = VirtualTime::new();
    // Delays 1, 2, 4, 8: after 1 + 2 + 4 = 7 s elapsed, the next retry would start at 15 s.
    let p = Policy::builder()
        .retries(-1)
        .backoff(exp_1_60())
        .jitter(NoJitter)
        .max_delay(secs(10))
        .env(time.clone())
        .build()
        .unwrap();
    let mut attempts = 0;
    let r: io::Result<()> = p.call(|_| {
        attempts += 1;
        Err(ErrorKind::Other.into())
    });
    assert!(r.is_err());
    assert_eq!(time.sleeps(), vec![secs(1), secs(2), secs(4)]);
    assert_eq!(attempts, 4);
}

#[test]
fn max_delay_counts_time_spent_in_attempts() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(-1)
        .backoff(Constant::new(secs(1)))
        .jitter(NoJitter)
        .max_delay(secs(10))
        .env(time.clone())
        .build()
        .unwrap();
    let t = time.clone();
    let mut attempts = 0;
    let _: io::Result<()> = p.call(|_| {
        attempts += 1;
        t.advance(secs(3)); // each attempt takes 3 s
        Err(ErrorKind::Other.into())
    });
    // Attempt ends at 3 s: 3+1 < 10, retry; ends at 7 s: 7+1 < 10, retry; ends at 11 s: stop.
    assert_eq!(attempts, 3);
}

#[test]
fn max_delay_zero_never_retries_and_negative_is_infinite() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .max_delay_secs(0.0)
        .env(time.clone())
        .build()
        .unwrap();
    let mut body = failing(1, ErrorKind::Other);
    assert!(p.call(|_| body()).is_err());

    let p = Policy::builder()
        .max_delay_secs(-1.0)
        .retries(3)
        .env(time.clone())
        .build()
        .unwrap();
    let mut body = failing(3, ErrorKind::Other);
    assert_eq!(p.call(|_| body()).unwrap(), 4);
}

#[test]
fn errors_outside_the_on_list_return_at_once() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .on(Io::of([ErrorKind::ConnectionReset]))
        .env(time.clone())
        .build()
        .unwrap();
    let mut body = failing(5, ErrorKind::PermissionDenied);
    let e = p.call(|_| body()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    assert!(time.sleeps().is_empty());
}

#[test]
fn when_rules_are_tried_in_order_and_share_the_retry_count() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(5)
        .backoff(Constant::new(secs(1)))
        .jitter(NoJitter)
        .on(Timeout.or(Io::ANY))
        .when(Io::of([ErrorKind::ConnectionRefused]), |s| s.retries(0))
        .when(Timeout, |s| {
            s.retries(10)
                .backoff(Constant::new(Duration::from_millis(200)))
        })
        .env(time.clone())
        .build()
        .unwrap();

    // Refused: its own rule allows no retry.
    let mut body = failing(3, ErrorKind::ConnectionRefused);
    assert_eq!(
        p.call(|_| body()).unwrap_err().kind(),
        ErrorKind::ConnectionRefused
    );
    assert!(time.sleeps().is_empty());

    // Timeouts: up to 10 retries of 200 ms.
    let mut body = failing(8, ErrorKind::TimedOut);
    assert_eq!(p.call(|_| body()).unwrap(), 9);
    assert_eq!(time.sleeps(), vec![Duration::from_millis(200); 8]);

    // Mixed: 4 resets (on rule, limit 5) then timeouts: the shared count reaches 5 after one
    // timeout retry, the Timeout rule still allows it (limit 10), then the next reset stops
    // at the `on` rule's limit of 5.
    let mut n = 0;
    let r: io::Result<()> = p.call(|_| {
        n += 1;
        let kind = match n {
            1..=4 => ErrorKind::ConnectionReset,
            5 => ErrorKind::TimedOut,
            _ => ErrorKind::ConnectionReset,
        };
        Err(kind.into())
    });
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(
        n, 6,
        "5 retries shared across both rules, then the reset rule's limit"
    );
}

#[test]
fn callbacks_run_in_spec_order_with_arguments() {
    let log = RefCell::new(Vec::<String>::new());
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(2)
        .backoff(NoBackoff)
        .on_error(|e: &io::Error, x| log.borrow_mut().push(format!("error {x} {}", e.kind())))
        .on_success(|| log.borrow_mut().push("success".into()))
        .env(time.clone())
        .build()
        .unwrap();
    let mut n = 0;
    let r = p.call(|a| {
        n += 1;
        log.borrow_mut().push(format!("attempt {}", a.retries()));
        if n < 3 {
            Err(io::Error::from(ErrorKind::Interrupted))
        } else {
            Ok(())
        }
    });
    assert!(r.is_ok());
    assert_eq!(
        *log.borrow(),
        [
            "attempt 0",
            "error 0 operation interrupted",
            "attempt 1",
            "error 1 operation interrupted",
            "attempt 2",
            "success"
        ]
    );

    // on_error is called for the last failure too; on_success never.
    log.borrow_mut().clear();
    let r: io::Result<()> = p.call(|_| Err(ErrorKind::Other.into()));
    assert!(r.is_err());
    assert_eq!(
        *log.borrow(),
        [
            "error 0 other error",
            "error 1 other error",
            "error 2 other error"
        ]
    );
}

#[derive(Debug, PartialEq)]
enum AppError {
    Busy(u32),
    Fatal(&'static str),
}

#[test]
fn the_last_error_is_returned_unchanged_and_predicates_select() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(3)
        .backoff(NoBackoff)
        .on(Predicate(|e: &AppError| matches!(e, AppError::Busy(_))))
        .env(time.clone())
        .build()
        .unwrap();
    let mut n = 0;
    let r: Result<(), AppError> = p.call(|_| {
        n += 1;
        Err(AppError::Busy(n))
    });
    assert_eq!(r, Err(AppError::Busy(4)));

    let mut n = 0;
    let r: Result<(), AppError> = p.call(|_| {
        n += 1;
        Err(if n == 1 {
            AppError::Busy(1)
        } else {
            AppError::Fatal("disk")
        })
    });
    assert_eq!(r, Err(AppError::Fatal("disk")));
    assert_eq!(n, 2);
}

#[test]
fn cooperative_timeout_marks_late_errors_as_timeouts() {
    let time = VirtualTime::new();
    let t = time.clone();
    // Only timeouts are retried; an attempt that overruns its 1 s and then fails with a
    // non-timeout error still counts as a timeout.
    let p = Policy::builder()
        .timeout(secs(1))
        .retries(2)
        .backoff(NoBackoff)
        .on(Timeout)
        .env(time.clone())
        .build()
        .unwrap();
    let mut n = 0;
    let r: io::Result<u32> = p.call(|a| {
        n += 1;
        assert_eq!(a.remaining(), Some(secs(1)));
        t.advance(Duration::from_millis(1500));
        assert!(a.is_expired());
        if n < 3 {
            Err(ErrorKind::Other.into())
        } else {
            Ok(n)
        }
    });
    // A late success is still returned.
    assert_eq!(r.unwrap(), 3);

    // The same errors without overrunning are not timeouts and are returned at once.
    let mut n = 0;
    let r: io::Result<u32> = p.call(|_| {
        n += 1;
        Err(ErrorKind::Other.into())
    });
    assert!(r.is_err());
    assert_eq!(n, 1);
}

#[test]
fn attempt_context_reports_counts_deadlines_and_elapsed_time() {
    let time = VirtualTime::new();
    let t = time.clone();
    let p = Policy::builder()
        .timeout(secs(5))
        .retries(2)
        .backoff(Constant::new(secs(2)))
        .jitter(NoJitter)
        .env(time.clone())
        .build()
        .unwrap();
    let start = time.now();
    let mut seen = Vec::new();
    let _: io::Result<()> = p.call(|a| {
        seen.push((a.retries(), a.number(), a.elapsed(), a.timeout()));
        assert_eq!(a.deadline(), Some(a.started() + secs(5)));
        t.advance(secs(1));
        assert_eq!(a.remaining(), Some(secs(4)));
        Err(ErrorKind::Other.into())
    });
    assert_eq!(
        seen,
        [
            (0, 1, secs(0), Some(secs(5))),
            (1, 2, secs(3), Some(secs(5))),
            (2, 3, secs(6), Some(secs(5)))
        ]
    );
    assert_eq!(time.now() - start, secs(7)); // 3 attempts of 1 s, 2 sleeps of 2 s
}

#[test]
fn scale_multiplies_the_jittered_delay() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(3)
        .backoff(Linear::new(secs(1), secs(60)).unwrap())
        .jitter(NoJitter)
        .scale(0.25)
        .env(time.clone())
        .build()
        .unwrap();
    let mut body = failing(3, ErrorKind::Other);
    p.call(|_| body()).unwrap();
    assert_eq!(
        time.sleeps(),
        [250, 500, 750].map(Duration::from_millis).to_vec()
    );
}

#[test]
fn seeded_jitter_is_reproducible_and_bounded() {
    let run = |seed| {
        let time = VirtualTime::new();
        let p = Policy::builder()
            .retries(6)
            .backoff(exp_1_60())
            .jitter(FullJitter)
            .seed(seed)
            .env(time.clone())
            .build()
            .unwrap();
        let mut body = failing(6, ErrorKind::Other);
        p.call(|_| body()).unwrap();
        time.sleeps()
    };
    let a = run(1);
    assert_eq!(a, run(1));
    assert_ne!(a, run(2));
    for (x, d) in a.iter().enumerate() {
        assert!(*d <= secs(1 << x), "retry {x}: {d:?}");
    }

    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(6)
        .backoff(exp_1_60())
        .jitter(EqualJitter)
        .env(time.clone())
        .build()
        .unwrap();
    let mut body = failing(6, ErrorKind::Other);
    p.call(|_| body()).unwrap();
    for (x, d) in time.sleeps().iter().enumerate() {
        let v = secs(1 << x);
        assert!(*d >= v / 2 && *d <= v, "retry {x}: {d:?}");
    }
}

#[test]
fn concurrent_calls_share_no_state() {
    let p = Policy::builder()
        .retries(3)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..100 {
                    let mut seen = Vec::new();
                    let r: io::Result<()> = p.call(|a| {
                        seen.push(a.retries());
                        Err(ErrorKind::Other.into())
                    });
                    assert!(r.is_err());
                    assert_eq!(seen, [0, 1, 2, 3]);
                }
            });
        }
    });
}

/// A clock that counts how often it is read.
#[derive(Clone, Default)]
struct CountingClock {
    time: VirtualTime,
    reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}
impl Clock for CountingClock {
    fn now(&self) -> std::time::Instant {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.time.now()
    }
}
impl retry_runtime::time::Sleep for CountingClock {
    fn sleep(&self, d: Duration) {
        retry_runtime::time::Sleep::sleep(&self.time, d)
    }
}
impl retry_runtime::time::AsyncSleep for CountingClock {
    fn sleep_async(&self, d: Duration) -> impl std::future::Future<Output = ()> + Send {
        retry_runtime::time::AsyncSleep::sleep_async(&self.time, d)
    }
}

#[test]
fn a_lazy_call_reads_no_clock_unless_a_rule_needs_it() {
    use retry_runtime::Step;
    let env = CountingClock::default();
    let reads = || env.reads.load(std::sync::atomic::Ordering::SeqCst);
    let p = Policy::builder()
        .retries(2)
        .backoff(Constant::new(secs(1)))
        .env(env.clone())
        .build()
        .unwrap();
    let mut call = p.start_untimed();
    assert!(matches!(
        call.settle(Err::<(), _>("busy"), false),
        Step::Retry(_)
    ));
    assert_eq!(call.settle(Ok::<_, &str>(1), false), Step::Return(Ok(1)));
    assert_eq!(reads(), 0);

    // With a budget the clock is read to check it.
    let p = Policy::builder()
        .retries(2)
        .max_delay(secs(10))
        .env(env.clone())
        .build()
        .unwrap();
    let mut call = p.start_untimed();
    let _ = call.settle(Err::<(), _>("busy"), false);
    assert!(reads() > 0);
}

/// A throttle counts on the caller's clock: a clock of its own is read for each first attempt
/// (the coarse system clock stands in only for the system's: `Clock::blocking_is_system`), and
/// its time decides what is forgotten.
#[test]
fn a_throttle_reads_a_clock_of_your_own() {
    use retry_runtime::AdaptiveThrottle;
    let env = CountingClock::default();
    let reads = || env.reads.load(std::sync::atomic::Ordering::SeqCst);
    let throttle = AdaptiveThrottle::new(2.0, secs(60)).unwrap();
    let p = Policy::builder()
        .retries(0)
        .throttle(&throttle)
        .env(env.clone())
        .build()
        .unwrap();
    // The custom clock runs an hour ahead of the system's: counts made on the system's
    // would be an hour old on it, out of the window.
    retry_runtime::time::Sleep::sleep(&env.time, secs(3600));
    for _ in 0..5 {
        assert!(p.call(|_| Err::<(), _>(io::Error::other("busy"))).is_err());
    }
    assert!(reads() >= 5, "{}", reads());
    // Five failures, no accept: the throttle rejects on the custom clock's now...
    assert!(throttle.reject_probability(env.time.now()) > 0.5);
    // ...and forgets them a window later on it.
    retry_runtime::time::Sleep::sleep(&env.time, secs(60));
    assert_eq!(throttle.reject_probability(env.time.now()), 0.0);
}
