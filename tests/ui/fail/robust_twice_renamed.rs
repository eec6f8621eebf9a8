// Two `#[robust]` on one fn that both retry, the upper one imported under another name: the
// lower one sees that the fn is already the expansion of one that retries, and says so (the
// upper one cannot tell the other is a `#[robust]` by its name).
use retry_runtime::robust;
use retry_runtime::robust as resilient;

#[resilient(retries = 2)]
#[robust(retries = 2)]
fn renamed_above() -> Result<u32, String> { Ok(1) }

#[resilient(retries = 2)]
#[resilient(hedge(after = 10ms))]
async fn both_renamed() -> Result<u32, String> { tokio::task::yield_now().await; Ok(1) }

// (Fine: the upper one never retries, and only adds its guard around the lower one's call.)
static BREAKER: retry_runtime::CircuitBreaker = match retry_runtime::CircuitBreaker::new(10, 5, 0.5, std::time::Duration::from_secs(30), 1) {
    Ok(b) => b,
    Err(_) => panic!(),
};
#[resilient(retries = 0, breaker = BREAKER)]
#[resilient(retries = 2)]
fn a_breaker_around_retries() -> std::io::Result<u32> { Ok(1) }

fn main() {}
