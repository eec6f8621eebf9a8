// With `base` equal to `max` every delay is `base`: a growth written beside them (`m`,
// `interval`, `unit`, `p`) is read by nothing.
use retry_runtime::robust;

#[robust(backoff = exponential(base = 1s, max = 1s, m = 3))]
fn exponential() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = linear(base = 1s, max = 1s, interval = 2s))]
fn linear() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = fibonacci(base = 1s, max = 1s, unit = 2s))]
fn fibonacci() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = polynomial(base = 1s, max = 1s, p = [3]))]
fn polynomial() -> std::io::Result<()> { Ok(()) }

// The dual: a growth of zero from a `base` below `max` keeps every delay at `base`, and the
// `max` is read by nothing.
#[robust(backoff = exponential(base = 1s, max = 60s, m = 1))]
fn exponential_flat() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = linear(base = 1s, max = 60s, interval = 0), jitter = equal)]
fn linear_flat() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = fibonacci(base = 1s, max = 60s, unit = 0))]
fn fibonacci_flat() -> std::io::Result<()> { Ok(()) }
#[robust(when(Io, retries = 2, backoff = polynomial(base = 1s, max = 60s, unit = 0)))]
fn polynomial_flat() -> std::io::Result<()> { Ok(()) }

// (Fine: a custom jitter may read `max`.)
struct UpToMax;
impl retry_runtime::Jitter for UpToMax {
    fn jitter(&self, backoff: &dyn retry_runtime::Backoff, _: &mut retry_runtime::JitterState,
              _: &mut dyn rand::Rng) -> std::time::Duration {
        backoff.max()
    }
}
#[robust(backoff = exponential(base = 1s, max = 60s, m = 1), jitter = custom(UpToMax))]
fn flat_beside_a_custom_jitter() -> std::io::Result<()> { Ok(()) }

// (Fine: room to grow; equal bounds with nothing else written.)
#[robust(backoff = exponential(base = 1s, max = 2s, m = 3))]
fn grows() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = exponential(base = 1s, max = 1s))]
fn equal_bounds() -> std::io::Result<()> { Ok(()) }

fn main() {}
