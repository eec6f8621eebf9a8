// A growth that a `base` of 0 cancels: every delay is 0, and `max` is never reached.
use retry_runtime::robust;

#[robust(backoff = exponential(base = 0, max = 60, m = 3))]
fn exponential_from_zero() -> std::io::Result<()> { Ok(()) }

// A unit dropped the other way: `0` instead of `0.5`.
#[robust(when(Io, backoff = exponential(base = 0, max = 10s), jitter = none))]
fn exponential_from_zero_in_a_when() -> std::io::Result<()> { Ok(()) }

// `interval` defaults to `base`.
#[robust(backoff = linear(base = 0, max = 10s))]
fn linear_from_zero() -> std::io::Result<()> { Ok(()) }

// A `max` of 0 forces every delay to 0, whatever the strategy.
#[robust(backoff = linear(base = 0, max = 0, interval = 1s))]
fn max_zero() -> std::io::Result<()> { Ok(()) }

// A Fibonacci strategy from 0 that grows by a `unit` of 0.
#[robust(backoff = fibonacci(base = 0, max = 10s, unit = 0))]
fn fibonacci_unit_zero() -> std::io::Result<()> { Ok(()) }

// A custom jitter elsewhere does not excuse a rule whose own jitter is built in.
struct Pad;
impl retry_runtime::Jitter for Pad {
    fn jitter(&self, _: &dyn retry_runtime::Backoff, _: &mut retry_runtime::JitterState,
              _: &mut dyn rand::Rng) -> std::time::Duration {
        std::time::Duration::from_millis(5)
    }
}
#[robust(jitter = custom(Pad), when(Io, backoff = exponential(base = 0, max = 10s), jitter = none))]
fn custom_jitter_elsewhere() -> std::io::Result<()> { Ok(()) }

// (Where no retry is made, the strategy has no effect at all: that one error is reported.)
#[robust(retries = 0, backoff = exponential(base = 0, max = 10s))]
fn never_retries() -> std::io::Result<()> { Ok(()) }

// Fine: a custom jitter may make a delay of its own from 0.
#[robust(backoff = exponential(base = 0, max = 10s), jitter = custom(Pad))]
fn fine_custom_jitter() -> std::io::Result<()> { Ok(()) }

// Fine: strategies that grow from 0, or a zero delay written as such.
#[robust(backoff = linear(base = 0, max = 10s, interval = 1s))]
fn fine_linear_interval() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = fibonacci(base = 0, max = 10s))]
fn fine_fibonacci() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = random(base = 0, max = 10s))]
fn fine_random() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = none)]
fn fine_none() -> std::io::Result<()> { Ok(()) }

fn main() {}
