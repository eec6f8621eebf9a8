// A `when` that writes its strategy reads the jitter and the scale it inherits from the top
// level: what they leave unread of it, or make of its delays, is an error at that strategy.
use retry_runtime::robust;
use std::io;

#[derive(Debug)]
struct Doubling;
impl retry_runtime::Backoff for Doubling {
    fn delay(&self, _: u32, _: &mut dyn rand::Rng) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }
}

// `aws_decorrelated` (inherited) reads only `base` and `max`.
#[robust(retries = 0, jitter = aws_decorrelated,
         when(Io(NotFound), retries = 6, backoff = fibonacci(base = 1, max = 60)))]
fn inherited_jitter_growth() -> io::Result<()> { Ok(()) }
#[robust(retries = 0, jitter = aws_decorrelated,
         when(Io(NotFound), retries = 4, backoff = exponential(base = 1, max = 600, m = 10)))]
fn inherited_jitter_param() -> io::Result<()> { Ok(()) }
#[robust(retries = 0, jitter = aws_decorrelated,
         when(Io(NotFound), retries = 4, backoff = custom(Doubling)))]
fn inherited_jitter_custom() -> io::Result<()> { Ok(()) }
// The other way: the top level's strategy, read only by a `when` with its own
// `aws_decorrelated`.
#[robust(retries = 0, backoff = exponential(base = 1, max = 60, m = 3),
         when(Io(NotFound), jitter = aws_decorrelated, retries = 2))]
fn strategy_read_only_by_aws() -> io::Result<()> { Ok(()) }
// `random`'s draw is not read either.
#[robust(retries = 8, backoff = random(base = 10, max = 11), jitter = aws_decorrelated)]
fn random_beside_aws() -> io::Result<()> { Ok(()) }

// The top level's `scale`, inherited by a `when`'s own strategy.
#[robust(scale = 0.0000001, backoff = exponential(base = 1, max = 60), on = [Io],
         when(Io(NotFound), backoff = constant(base = 1ms), retries = 3))]
fn inherited_scale_rounds_to_zero() -> io::Result<()> { Ok(()) }
#[robust(scale = 100000000000000000, backoff = constant(base = 1ms), on = [Io],
         when(Io(NotFound), backoff = constant(base = 100), retries = 1))]
fn inherited_scale_too_large() -> io::Result<()> { Ok(()) }
// Both inherited, where the top level does not retry: at the `scale`.
#[robust(retries = 0, scale = 0.0000001, backoff = constant(base = 1ms),
         when(Io(NotFound), retries = 3))]
fn both_inherited() -> io::Result<()> { Ok(()) }

// Fine: each strategy's parameters are read by some rule.
#[robust(retries = 0, jitter = aws_decorrelated,
         when(Io(NotFound), retries = 4, backoff = exponential(base = 1, max = 600)))]
fn fine_base_and_max() -> io::Result<()> { Ok(()) }
#[robust(retries = 2, backoff = exponential(base = 1, max = 60, m = 3),
         when(Io(NotFound), jitter = aws_decorrelated, retries = 2))]
fn fine_top_level_reads_m() -> io::Result<()> { Ok(()) }
#[robust(scale = 0.5, backoff = exponential(base = 1, max = 60), on = [Io],
         when(Io(NotFound), backoff = constant(base = 1ms), retries = 3))]
fn fine_scale() -> io::Result<()> { Ok(()) }

fn main() {}
