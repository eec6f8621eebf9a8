use std::time::Duration;
use retry_runtime::{robust, AdaptiveThrottle};

static THROTTLE: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    Ok(t) => t,
    Err(_) => panic!("invalid throttle"),
};

// An error type without `From<Rejected>`.
#[robust(throttle = THROTTLE)]
fn no_conversion() -> Result<(), String> { Ok(()) }

// Not a throttle.
#[robust(throttle = 2.0)]
fn not_a_throttle() -> std::io::Result<()> { Ok(()) }

// Per call, and given once.
#[robust(when(Io, retries = 1, throttle = THROTTLE), throttle = THROTTLE, throttle = THROTTLE)]
fn in_when_and_twice() -> std::io::Result<()> { Ok(()) }

fn main() {}
