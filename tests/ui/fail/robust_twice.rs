// Two `#[robust]` on one fn that both retry: the outer one would retry the inner one's whole
// call, and the attempts multiply (two `retries = 2` make 9 attempts). Under `cfg_attr` too.
use retry_runtime::robust;

#[robust(retries = 2)]
#[robust(retries = 2)]
fn twice() -> Result<u32, String> { Ok(1) }

#[robust(retries = 1)]
#[cfg_attr(all(), retry_runtime::robust(retries = 1))]
async fn twice_under_cfg_attr() -> Result<u32, String> { tokio::task::yield_now().await; Ok(1) }

// The default retries (3) retry too.
#[robust(retries = 1)]
#[robust(timeout = 1s)]
async fn the_inner_one_by_default() -> Result<u32, retry_runtime::Elapsed> { tokio::task::yield_now().await; Ok(1) }

// (Fine: one of the two never retries, and only adds its guard around the other's calls or
// attempts, as the two nest; a `cfg_attr` whose attribute only mentions `robust`.)
static BREAKER: retry_runtime::CircuitBreaker = match retry_runtime::CircuitBreaker::new(10, 5, 0.5, std::time::Duration::from_secs(30), 1) {
    Ok(b) => b,
    Err(_) => panic!(),
};
#[robust(retries = 0, breaker = BREAKER)]
#[robust(retries = 2)]
fn a_breaker_counting_calls() -> std::io::Result<u32> { Ok(1) }
#[robust(retries = 2)]
#[robust(retries = 0, breaker = BREAKER)]
fn retries_around_a_guarded_call() -> std::io::Result<u32> { Ok(1) }
#[robust(retries = 1)]
#[cfg_attr(all(), doc = "robust")]
fn once() -> Result<u32, String> { Ok(1) }

fn main() {}
