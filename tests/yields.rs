//! A call that retries at once (no backoff, an attempt that fails on its first poll, retries
//! without end) yields to the runtime when its task's cooperative budget is spent, as a call
//! whose backoff waits on tokio's timer does, instead of holding its thread until it ends.
//! Each case runs on one thread beside another task spawned after it, and counts the attempts
//! made before that task first runs: all of them, had the call run to its end in one poll.

use std::future::Future;
use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use retry_runtime::hedge::Hedge;
use retry_runtime::tower::RobustLayer;
use retry_runtime::{NoBackoff, Policy, robust};
use tower::{Layer, Service, ServiceExt};

/// The attempts every call makes: all but the last fail at once.
const ATTEMPTS: u32 = 10_000;

/// One attempt: fails until it is the `ATTEMPTS`-th.
fn attempt(made: &AtomicU32) -> io::Result<u32> {
    let n = made.fetch_add(1, Ordering::SeqCst) + 1;
    if n < ATTEMPTS {
        Err(ErrorKind::ConnectionReset.into())
    } else {
        Ok(n)
    }
}

/// Runs the call `make` returns on a one-thread runtime (tokio's paused clock) beside a task
/// spawned after it; returns the attempts made when that task first ran.
fn attempts_before_the_other_task<F>(make: impl FnOnce(Arc<AtomicU32>) -> F) -> u32
where
    F: Future<Output = io::Result<u32>> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let made = Arc::new(AtomicU32::new(0));
    let call = make(Arc::clone(&made));
    rt.block_on(async move {
        let call = tokio::spawn(call);
        let seen = Arc::clone(&made);
        let other = tokio::spawn(async move { seen.load(Ordering::SeqCst) });
        let when_other_ran = other.await.unwrap();
        assert_eq!(
            call.await.unwrap().unwrap(),
            ATTEMPTS,
            "the call ends with its success"
        );
        assert_eq!(made.load(Ordering::SeqCst), ATTEMPTS);
        when_other_ran
    })
}

/// The other task ran before the call had made its attempts (about 128 attempts run in a
/// poll, tokio's budget per poll of a task; the bound leaves room for the budget to change).
fn assert_yields(case: &str, make_then_count: u32) {
    assert!(
        make_then_count < ATTEMPTS / 10,
        "{case}: the other task first ran after {make_then_count} of {ATTEMPTS} attempts"
    );
}

// The attribute's three backoff paths: no timer (no timeout), the call's timer (a timeout),
// and the call's timer made on demand (a timeout beside a `max_delay`, which needs the
// call's start); and its hedged rounds.
#[robust(retries = -1, backoff = none)]
async fn untimed(made: Arc<AtomicU32>) -> io::Result<u32> {
    std::future::ready(()).await;
    attempt(&made)
}

#[robust(retries = -1, backoff = none, timeout = 1s)]
async fn timed(made: Arc<AtomicU32>) -> io::Result<u32> {
    std::future::ready(()).await;
    attempt(&made)
}

#[robust(retries = -1, backoff = none, timeout = 1s, max_delay = 1h)]
async fn timed_with_max_delay(made: Arc<AtomicU32>) -> io::Result<u32> {
    std::future::ready(()).await;
    attempt(&made)
}

#[robust(retries = -1, backoff = none, hedge(after = 1s, max = 1))]
async fn hedged(made: Arc<AtomicU32>) -> io::Result<u32> {
    std::future::ready(()).await;
    attempt(&made)
}

#[test]
fn the_attributes_loops_yield_when_their_budget_is_spent() {
    assert_yields("untimed", attempts_before_the_other_task(untimed));
    assert_yields("timed", attempts_before_the_other_task(timed));
    assert_yields(
        "timed, max_delay",
        attempts_before_the_other_task(timed_with_max_delay),
    );
    assert_yields("hedged", attempts_before_the_other_task(hedged));
}

#[test]
fn call_async_yields_when_its_budget_is_spent() {
    let seen = attempts_before_the_other_task(|made| async move {
        let policy = Policy::builder()
            .retries(-1)
            .backoff(NoBackoff)
            .build()
            .unwrap();
        policy
            .call_async(|_| {
                let made = Arc::clone(&made);
                async move { attempt(&made) }
            })
            .await
    });
    assert_yields("call_async", seen);
}

/// A service whose every call fails at once until the `ATTEMPTS`-th.
fn failing_service(
    made: Arc<AtomicU32>,
) -> impl Service<u32, Response = u32, Error = io::Error, Future: Send> + Clone + Send + 'static {
    tower::service_fn(move |_: u32| std::future::ready(attempt(&made)))
}

#[test]
fn the_tower_layers_yield_when_their_budget_is_spent() {
    let plain = attempts_before_the_other_task(|made| async move {
        let policy = Policy::builder()
            .retries(-1)
            .backoff(NoBackoff)
            .build()
            .unwrap();
        let mut svc = RobustLayer::new(policy).layer(failing_service(made));
        svc.ready().await?.call(0).await
    });
    assert_yields("RobustLayer::new", plain);
    let hedged = attempts_before_the_other_task(|made| async move {
        let policy = Policy::builder()
            .retries(-1)
            .backoff(NoBackoff)
            .hedge(Hedge::after(std::time::Duration::from_secs(1), 1).unwrap())
            .build()
            .unwrap();
        let mut svc = RobustLayer::hedged(policy).layer(failing_service(made));
        svc.ready().await?.call(0).await
    });
    assert_yields("RobustLayer::hedged", hedged);
}
