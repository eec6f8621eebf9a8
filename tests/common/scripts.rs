//! Scripted attempts for the property tests (`#[path]`-included by them): each attempt answers
//! after a delay with a success, a reset (retried by every rule of those tests) or a refusal
//! (retried only where every error is), and a call's outcome is compared with a model's or
//! another path's.
#![allow(dead_code)] // not every test uses every helper

use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use retry_runtime::AsyncRetryPolicy;

/// What an attempt answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Ok,
    Reset,
    Refused,
}

impl Answer {
    /// The attempt's result: `value` on a success, the error's kind otherwise.
    pub fn result(self, value: u32) -> Result<u32, ErrorKind> {
        match self {
            Answer::Ok => Ok(value),
            Answer::Reset => Err(ErrorKind::ConnectionReset),
            Answer::Refused => Err(ErrorKind::ConnectionRefused),
        }
    }
}

/// An attempt: its answer, after `after_ms` from its start (a multiple of 10 ms).
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub after_ms: u64,
    pub answer: Answer,
}

/// What a call gave: its result (an error by its kind), the attempts made, the time it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub result: Result<u32, ErrorKind>,
    pub attempts: u32,
    pub elapsed: Duration,
}

/// From 1 to `max - 1` steps, each answering after 0 to 60 ms (in tens), a success, a reset or
/// a refusal drawn with the weights `[ok, reset, refused]`.
pub fn steps(max: usize, [ok, reset, refused]: [u32; 3]) -> impl Strategy<Value = Vec<Step>> {
    let step = (
        0u64..=6,
        prop_oneof![
            ok => Just(Answer::Ok),
            reset => Just(Answer::Reset),
            refused => Just(Answer::Refused)
        ],
    )
        .prop_map(|(tens, answer)| Step {
            after_ms: tens * 10,
            answer,
        });
    prop::collection::vec(step, 1..max)
}

/// Attempt number `n` (from 0) of `steps`: the last step repeats.
pub fn step_at(steps: &[Step], n: u32) -> Step {
    steps[(n as usize).min(steps.len() - 1)]
}

/// Attempt number `n`'s answer, after its delay on tokio's clock: `value` on a success.
pub async fn answer(steps: &[Step], n: u32, value: u32) -> io::Result<u32> {
    let step = step_at(steps, n);
    tokio::time::sleep(Duration::from_millis(step.after_ms)).await;
    step.answer.result(value).map_err(io::Error::from)
}

/// `steps` through `policy.call_async`, on tokio's clock (run it on a paused one): attempt
/// number `n` answers `first + n` on a success.
pub async fn through_call_async<P: AsyncRetryPolicy<u32, io::Error>>(
    policy: &P,
    steps: &[Step],
    first: u32,
) -> Outcome {
    let calls = AtomicU32::new(0);
    let start = tokio::time::Instant::now();
    let result = policy
        .call_async(|_| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            answer(steps, n, first + n)
        })
        .await
        .map_err(|e| e.kind());
    Outcome {
        result,
        attempts: calls.load(Ordering::SeqCst),
        elapsed: start.elapsed(),
    }
}

/// A boxed service of `u32` requests.
pub type Svc = tower::util::BoxCloneSyncService<u32, u32, io::Error>;

/// A service whose call number `n` answers as attempt `n` of `steps` (`request + n` on a
/// success), and the count of its calls.
pub fn service(steps: &[Step]) -> (Svc, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let steps: Arc<[Step]> = steps.into();
    let svc = tower::service_fn(move |request: u32| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let steps = Arc::clone(&steps);
        async move { answer(&steps, n, request + n).await }
    });
    (Svc::new(svc), calls)
}

/// `request` through `layer` over the [`service`] of `steps`, on tokio's clock (run it on a
/// paused one).
pub async fn through_layer<L>(layer: L, steps: &[Step], request: u32) -> Outcome
where
    L: tower::Layer<Svc>,
    L::Service: tower::Service<u32, Response = u32, Error = io::Error>,
{
    use tower::ServiceExt;
    let (svc, calls) = service(steps);
    let start = tokio::time::Instant::now();
    let result = layer
        .layer(svc)
        .oneshot(request)
        .await
        .map_err(|e| e.kind());
    Outcome {
        result,
        attempts: calls.load(Ordering::SeqCst),
        elapsed: start.elapsed(),
    }
}

/// `f` on a current-thread runtime whose clock is paused.
pub fn paused<T>(f: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
        .block_on(f)
}
