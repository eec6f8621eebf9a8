// A jitter that does not read what the strategy says, or a strategy that leaves the jitter
// nothing to do, is a setting with no effect.
use retry_runtime::robust;

// `aws_decorrelated` draws from the strategy's `base` and `max` (and the previous delay) only.
#[robust(backoff = exponential(base = 100ms, max = 10s, m = 4), jitter = aws_decorrelated)]
fn aws_ignores_m() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = linear(base = 100ms, max = 10s, interval = 1s), jitter = aws_decorrelated)]
fn aws_ignores_interval() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = polynomial(base = 0, max = 10s, p = 3), jitter = aws_decorrelated)]
fn aws_ignores_p() -> std::io::Result<()> { Ok(()) }
// (A `when` that writes both.)
#[robust(when(Io, backoff = fibonacci(base = 100ms, max = 10s, unit = 100ms), jitter = aws_decorrelated))]
fn aws_in_a_when() -> std::io::Result<()> { Ok(()) }

// Nor the growth of a strategy chosen for it, parameters written or not.
#[robust(backoff = fibonacci(base = 100ms, max = 10s), jitter = aws_decorrelated)]
fn aws_ignores_fibonacci() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = linear(base = 100ms, max = 10s), jitter = aws_decorrelated)]
fn aws_ignores_linear() -> std::io::Result<()> { Ok(()) }
// A custom strategy's delays are never read: only its `base()` and `max()`, 0 and unbounded
// by default (every delay 0).
struct Steps;
impl retry_runtime::Backoff for Steps {
    fn delay(&self, x: u32, _: &mut dyn rand::Rng) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(x.min(60)))
    }
}
#[robust(backoff = custom(Steps), jitter = aws_decorrelated, retries = -1)]
fn aws_reads_no_custom_delay() -> std::io::Result<()> { Ok(()) }
// (Fine, said explicitly: the jitter as a custom one, for a strategy that defines both.)
struct Bounded;
impl retry_runtime::Backoff for Bounded {
    fn delay(&self, _: u32, _: &mut dyn rand::Rng) -> std::time::Duration { std::time::Duration::from_secs(1) }
    fn base(&self) -> std::time::Duration { std::time::Duration::from_secs(1) }
    fn max(&self) -> std::time::Duration { std::time::Duration::from_secs(30) }
}
#[robust(backoff = custom(Bounded), jitter = custom(retry_runtime::AwsDecorrelated))]
fn fine_custom_aws() -> std::io::Result<()> { Ok(()) }

// `decorrelated` only moves the exponent, which these strategies do not read.
#[robust(backoff = constant(base = 1s), jitter = decorrelated)]
fn decorrelated_constant() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = random(base = 1s, max = 2s), jitter = decorrelated)]
fn decorrelated_random() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = exponential(base = 1s, max = 10s, m = 1), jitter = decorrelated)]
fn decorrelated_flat_exponential() -> std::io::Result<()> { Ok(()) }
// Beside several rules, each of which retries with a strategy that does not read it.
#[robust(retries = 5, backoff = constant(base = 1s), jitter = decorrelated,
         on = [Io(ConnectionReset)], when(Io(BrokenPipe), retries = 5))]
fn decorrelated_every_rule_flat() -> std::io::Result<()> { Ok(()) }

// `aws_decorrelated` between a constant's `base` and `max`, the same.
#[robust(backoff = constant(base = 1s), jitter = aws_decorrelated)]
fn aws_constant() -> std::io::Result<()> { Ok(()) }

// `aws_decorrelated` from a `base` of 0: [0, 3 x 0] is 0, for every retry.
#[robust(backoff = random(base = 0, max = 10s), jitter = aws_decorrelated)]
fn aws_from_zero() -> std::io::Result<()> { Ok(()) }

// (A top level that never retries, read by a `when` that does.)
#[robust(retries = 0, backoff = constant(base = 1s), jitter = aws_decorrelated, when(Io, retries = 2))]
fn aws_constant_inherited() -> std::io::Result<()> { Ok(()) }

// With `backoff = none` every delay is zero.
#[robust(backoff = none, jitter = equal, scale = 3)]
fn none_jittered_and_scaled() -> std::io::Result<()> { Ok(()) }
// `random`'s draw is not read by `aws_decorrelated` either.
#[robust(backoff = random(base = 100ms, max = 10s), jitter = aws_decorrelated)]
fn aws_random() -> std::io::Result<()> { Ok(()) }

// Fine: the defaults; `aws_decorrelated` with `base` and `max` only; `decorrelated` with a
// growing strategy; a `when` that changes the strategy away from the conflict.
#[robust(backoff = exponential(base = 100ms, max = 10s), jitter = aws_decorrelated)]
fn fine_aws() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = fibonacci(base = 0, max = 10s), jitter = decorrelated)]
fn fine_decorrelated() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = constant(base = 1s), when(Io, backoff = exponential(base = 1s, max = 9s), jitter = decorrelated))]
fn fine_when() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = none)]
fn fine_none() -> std::io::Result<()> { Ok(()) }
// (Fine: a setting of the top level that another rule reads: the `when`'s full jitter reads
// `m`; the `when`'s exponential reads `decorrelated`; and its backoff, the `scale`.)
#[robust(backoff = exponential(base = 100ms, max = 5s, m = 3), jitter = aws_decorrelated,
         when(Timeout, jitter = full))]
fn fine_m_read_by_a_when() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = constant(base = 1s), jitter = decorrelated,
         when(Io, backoff = exponential(base = 1s, max = 9s)))]
fn fine_decorrelated_read_by_a_when() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = none, scale = 2, when(Io, backoff = exponential(base = 1s, max = 9s)))]
fn fine_scale_read_by_a_when() -> std::io::Result<()> { Ok(()) }
// A `when` with its own `scale` only reads the same strategy and jitter.
#[robust(backoff = constant(base = 1s), jitter = aws_decorrelated, when(Io, retries = 10, scale = 2))]
fn a_when_scales_the_same_pair() -> std::io::Result<()> { Ok(()) }

// A `when`'s own jitter beside the strategy it inherits: `backoff = none` makes every delay
// zero, and `aws_decorrelated` over a constant always gives `base`.
#[robust(backoff = none, timeout = 1s, when(Timeout, retries = 5, jitter = full))]
async fn when_jitter_beside_inherited_none() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(backoff = constant(base = 1s), when(Io, retries = 3, jitter = aws_decorrelated))]
fn when_aws_beside_inherited_constant() -> std::io::Result<()> { Ok(()) }
// The top level's jitter or scale, where every rule that reads it waits zero (the `when`
// sets its own jitter, or its own scale).
#[robust(backoff = none, jitter = full, timeout = 1s, when(Timeout, retries = 2, jitter = none))]
async fn top_jitter_read_only_beside_none() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(backoff = none, scale = 2, timeout = 1s, when(Timeout, retries = 2, jitter = none, scale = 3))]
async fn top_scale_read_only_beside_none() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
// (Fine: the inherited strategy waits, and the top level's jitter is read by a `when` whose
// strategy waits.)
#[robust(backoff = constant(base = 1s), when(Io, retries = 3, jitter = full))]
fn fine_when_jitter_beside_inherited_constant() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = none, jitter = full, when(Io, retries = 2, backoff = constant(base = 1s)))]
fn fine_top_jitter_read_by_a_when() -> std::io::Result<()> { Ok(()) }
// (Fine: beside other rules, a `when`'s AWS jitter over a strategy from 0 may start from
// another rule's delay; and over a growing strategy it inherits, which the top level reads.)
#[robust(retries = 6, backoff = random(base = 0, max = 10s), jitter = none, timeout = 1s,
         when(Timeout, jitter = aws_decorrelated))]
async fn fine_when_aws_beside_a_random_from_zero() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(backoff = linear(base = 1s, max = 30s), when(Io, jitter = aws_decorrelated))]
fn fine_when_aws_beside_an_inherited_linear() -> std::io::Result<()> { Ok(()) }

// (Fine: beside rules that all wait a constant, a jitter of the user's reads the exponent
// `decorrelated` resets.)
struct ByExponent;
impl retry_runtime::Jitter for ByExponent {
    fn jitter(&self, backoff: &dyn retry_runtime::Backoff, state: &mut retry_runtime::JitterState,
              _: &mut dyn rand::Rng) -> std::time::Duration {
        backoff.base() * (state.exponent.min(10) + 1)
    }
}
#[robust(retries = 5, backoff = constant(base = 1s), jitter = decorrelated,
         on = [Io(ConnectionReset)], when(Io(BrokenPipe), retries = 5, jitter = custom(ByExponent)))]
fn fine_decorrelated_read_by_a_custom_jitter() -> std::io::Result<()> { Ok(()) }

// (Fine: a custom jitter may add to a zero delay, which the scale then scales.)
struct Pad;
impl retry_runtime::Jitter for Pad {
    fn jitter(&self, _: &dyn retry_runtime::Backoff, _: &mut retry_runtime::JitterState,
              _: &mut dyn rand::Rng) -> std::time::Duration {
        std::time::Duration::from_millis(5)
    }
}
#[robust(backoff = none, jitter = custom(Pad), scale = 2)]
fn fine_custom_jitter_scaled() -> std::io::Result<()> { Ok(()) }

fn main() {}
