//! A blocking call made inside a tokio runtime whose clock is paused reads the clock its
//! sleeper agrees with (the system's, since it sleeps with `std::thread::sleep`), so that its
//! `max_delay` is spent and its cooperative timeout counts down. (Before, it read tokio's
//! frozen clock: `retries = -1` with a `max_delay` never ended.)

use std::cell::{Cell, RefCell};
use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use retry_runtime::{Constant, NoJitter, Policy, robust};

/// Past this many attempts the body gives up by itself, so that a broken clock fails the test
/// instead of hanging it.
const CAP: u32 = 100;

#[robust(max_delay = "50ms", retries = -1, backoff = constant(base = "10ms"), jitter = none)]
fn always_fails(attempts: &Cell<u32>) -> io::Result<()> {
    attempts.set(attempts.get() + 1);
    if attempts.get() > CAP {
        return Ok(());
    }
    Err(ErrorKind::ConnectionRefused.into())
}

#[tokio::test(start_paused = true)]
async fn max_delay_is_spent_by_a_blocking_fn_in_a_paused_runtime() {
    let attempts = Cell::new(0);
    let real = Instant::now();
    let r = always_fails(&attempts);
    assert!(
        r.is_err(),
        "the call ended only because the body gave up after {CAP} attempts: max_delay never ran out"
    );
    // Attempts at about 0, 10, 20, 30 and 40 ms; a retry at 50 ms would end past the budget.
    // A slow machine oversleeps, which only makes fewer attempts.
    let n = attempts.get();
    assert!((2..=6).contains(&n), "{n} attempts");
    assert!(real.elapsed() < Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn max_delay_is_spent_by_policy_call_in_a_paused_runtime() {
    let policy = Policy::builder()
        .retries(-1)
        .max_delay(Duration::from_millis(50))
        .backoff(Constant::new(Duration::from_millis(10)))
        .jitter(NoJitter)
        .build()
        .unwrap();
    let mut attempts = 0;
    let r: io::Result<()> = policy.call(|_| {
        attempts += 1;
        if attempts > CAP {
            return Ok(());
        }
        Err(ErrorKind::ConnectionRefused.into())
    });
    assert!(r.is_err(), "max_delay never ran out");
    assert!((2..=6).contains(&attempts), "{attempts} attempts");
}

#[robust(timeout = "5ms", retries = 1, backoff = none, on = [Timeout], attempt = ctx)]
fn slow(seen: &RefCell<Vec<(Duration, Duration, Duration)>>) -> io::Result<()> {
    let before = ctx.remaining().unwrap();
    std::thread::sleep(Duration::from_millis(8));
    let after = ctx.remaining().unwrap();
    seen.borrow_mut().push((before, after, ctx.elapsed()));
    Err(io::Error::other("answered too late"))
}

#[tokio::test(start_paused = true)]
async fn the_cooperative_timeout_counts_real_time_in_a_paused_runtime() {
    let seen = RefCell::new(Vec::new());
    let r = slow(&seen);
    assert_eq!(r.unwrap_err().to_string(), "answered too late");
    let seen = seen.into_inner();
    // The error came after the 5 ms deadline: it counts as a `Timeout`, which is retried once.
    assert_eq!(
        seen.len(),
        2,
        "the late error was not seen as a timeout: {seen:?}"
    );
    for (before, after, elapsed) in &seen {
        assert!(after < before, "remaining() did not shrink: {seen:?}");
        assert_eq!(*after, Duration::ZERO, "8 ms slept past a 5 ms deadline");
        assert!(*elapsed >= Duration::from_millis(8));
    }
}

#[tokio::test(start_paused = true)]
async fn policy_call_attempt_context_counts_real_time_in_a_paused_runtime() {
    let policy = Policy::builder()
        .timeout(Duration::from_millis(50))
        .retries(0)
        .build()
        .unwrap();
    let r: io::Result<()> = policy.call(|attempt| {
        let before = attempt.remaining().unwrap();
        std::thread::sleep(Duration::from_millis(3));
        let after = attempt.remaining().unwrap();
        assert!(
            before - after >= Duration::from_millis(3),
            "{before:?} {after:?}"
        );
        Ok(())
    });
    r.unwrap();
}

/// The async loop keeps following tokio's clock: paused, a long backoff takes no real time.
#[robust(max_delay = "1h", retries = -1, backoff = constant(base = "10min"), jitter = none)]
async fn async_always_fails(attempts: &Cell<u32>) -> io::Result<()> {
    attempts.set(attempts.get() + 1);
    if attempts.get() > CAP {
        return Ok(());
    }
    Err(ErrorKind::ConnectionRefused.into())
}

#[tokio::test(start_paused = true)]
async fn the_async_loop_still_follows_the_paused_clock() {
    let attempts = Cell::new(0);
    let real = Instant::now();
    assert!(async_always_fails(&attempts).await.is_err());
    // Attempts at 0, 10, ..., 50 min; a retry at 60 min would end past the hour.
    assert_eq!(attempts.get(), 6);
    assert!(real.elapsed() < Duration::from_secs(5));
}
