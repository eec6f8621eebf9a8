//! The README's main example: a flaky resource made resilient.
//!
//! A simulated resource times out about 30% of the time and fails about 30% of the time;
//! the policy retries both with exponential backoff and full jitter, scaled down so the whole
//! demo finishes in well under ten seconds.
//!
//! Run it with `cargo run --example quickstart`.

use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use retry_runtime::kind::{ClassifyExt, Io, Timeout};
use retry_runtime::{Exponential, FullJitter, Policy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let stamp = move || format!("[{:>6.3}s]", start.elapsed().as_secs_f64());

    let policy = Policy::builder()
        .timeout(Duration::from_millis(200))
        .backoff(Exponential::new(
            Duration::from_secs(1),
            Duration::from_secs(32),
            2.0,
        )?)
        .jitter(FullJitter)
        .retries(5)
        .scale(0.05) // 1 s, 2 s, 4 s ... become 50 ms, 100 ms, 200 ms ...
        .on(Timeout.or(Io::ANY))
        .on_success(|| println!("{} success", stamp()))
        .on_error(|e: &io::Error, retries| {
            println!("{} attempt {} failed: {e}", stamp(), retries + 1)
        })
        .build()?;

    let mut rng = rand::rngs::SmallRng::seed_from_u64(2026);
    for request in 1..=5 {
        println!("request {request}:");
        let result = policy.call(|attempt| {
            let roll: f64 = rng.random();
            if roll < 0.3 {
                // A slow answer: the cooperative timeout turns the late error into a Timeout.
                std::thread::sleep(attempt.remaining().unwrap_or_default());
                Err(io::Error::new(ErrorKind::TimedOut, "resource too slow"))
            } else if roll < 0.6 {
                Err(io::Error::new(
                    ErrorKind::ConnectionReset,
                    "connection reset",
                ))
            } else {
                Ok(format!(
                    "payload #{request} after {} attempt(s)",
                    attempt.number()
                ))
            }
        });
        match result {
            Ok(v) => println!("  -> {v}"),
            Err(e) => println!("  -> gave up: {e}"),
        }
    }
    println!("{} done", stamp());
    Ok(())
}
