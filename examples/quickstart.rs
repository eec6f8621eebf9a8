//! The README's main example: a flaky resource made resilient with one attribute.
//!
//! The simulated resource times out about 30% of the time and fails about 30% of the time.
//! `#[robust]` retries both with exponential backoff (base 1 s, max 32 s, m = 2), full
//! jitter and 5 retries; `scale = 0.03` shrinks every delay to 3%, so the whole demo stays
//! under ten seconds even in the worst case: 4 requests x (6 attempts x 200 ms + 31 s x 0.03)
//! = 8.5 s. Each failure and success is printed with a timestamp.
//!
//! Run it with `cargo run --example quickstart`.

use std::io::{self, ErrorKind};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rand::RngExt;
use retry_runtime::robust;

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
    println!("{} done", stamp());
}
