//! The README's main example: a flaky resource made resilient with one attribute.
//!
//! The simulated resource times out about 30% of the time and fails about 30% of the time.
//! `#[robust]` retries both with exponential backoff (base 1 s, max 32 s, m = 2), full
//! jitter and 5 retries; `scale = 0.03` shrinks every delay to 3%, so the whole demo stays
//! under ten seconds even in the worst case: 4 requests x (6 attempts x 200 ms + 31 s x 0.03)
//! = 8.5 s. Each failure and success is printed with a timestamp.
//!
//! The second part polls jobs: a value can be a failure too. `Ok(Job::Pending)` is retried like
//! an error, the whole call has a 1 s `deadline`, and a `fallback` answers when it gives up
//! with an error (a pending job is returned as it is). It takes about 3 s.
//!
//! Run it with `cargo run --example quickstart`.

use std::io::{self, ErrorKind};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rand::RngExt;
use retry_runtime::{RetryInfo, robust};

/// When the demo started, for timestamps.
fn stamp() -> String {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    format!("[{:>6.3}s]", start.elapsed().as_secs_f64())
}

/// A resource that answers slowly (past the timeout) 30% of the time and fails 30% of the time.
async fn flaky_resource(request: u32) -> io::Result<String> {
    let roll: f64 = rand::rng().random();
    if roll < 0.3 {
        tokio::time::sleep(Duration::from_secs(5)).await; // cancelled by the timeout
        Ok(format!("slow answer to #{request}"))
    } else if roll < 0.6 {
        Err(io::Error::new(
            ErrorKind::ConnectionReset,
            "connection reset by peer",
        ))
    } else {
        Ok(format!("answer to request #{request}"))
    }
}

#[robust(
    timeout = "200ms",
    backoff = exponential(base = "1s", max = "32s", m = 2),
    jitter = full,
    retries = 5,
    scale = 0.03,
    on = [Timeout, Io],
    on_success = || println!("{} success", stamp()),
    on_error = |e: &io::Error, retries| println!("{} attempt {} failed: {e}", stamp(), retries + 1),
)]
async fn fetch(request: u32) -> io::Result<String> {
    flaky_resource(request).await
}

/// The state of a job on a remote server.
#[derive(Debug)]
enum Job {
    Pending,
    Ready(String),
}

/// Job 1 is ready at its third poll, job 2 stays pending, job 3's server never answers in time.
async fn job_status(job: u32, poll: u32) -> io::Result<Job> {
    match job {
        1 if poll >= 3 => Ok(Job::Ready("report.pdf".into())),
        1 | 2 => Ok(Job::Pending),
        _ => {
            tokio::time::sleep(Duration::from_secs(5)).await; // cut by the timeout
            Ok(Job::Ready("too late".into()))
        }
    }
}

#[robust(
    deadline = "1s",
    timeout = "200ms",
    backoff = constant(base = "150ms"),
    jitter = none,
    retries = -1,
    on = [Timeout, Io, Ok(Job::Pending)],
    attempt = attempt,
    on_retry = |r: &io::Result<Job>, info: &RetryInfo| {
        let why = match r {
            Ok(job) => format!("{job:?}"),
            Err(e) => e.to_string(),
        };
        println!("{} retry {} in {:?}: {why}", stamp(), info.retry, info.delay);
    },
    fallback = |e: io::Error| Ok(Job::Ready(format!("the cached report ({e})"))),
)]
async fn poll(job: u32) -> io::Result<Job> {
    job_status(job, attempt.retries() + 1).await
}

#[tokio::main]
async fn main() {
    println!("{} start", stamp());
    for request in 1..=4 {
        println!("request {request}:");
        match fetch(request).await {
            Ok(answer) => println!("  -> {answer}"),
            Err(e) => println!("  -> gave up: {e}"),
        }
    }
    for job in 1..=3 {
        println!("job {job}:");
        match poll(job).await {
            Ok(Job::Ready(report)) => println!("  -> ready: {report}"),
            Ok(Job::Pending) => println!("  -> still pending at the deadline"),
            Err(e) => println!("  -> failed: {e}"),
        }
    }
    println!("{} done", stamp());
}
