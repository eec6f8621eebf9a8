// A hedge on an async fn whose body never awaits: each attempt runs to its end at its first
// poll, so no hedge ever runs beside one, and a failure only sends the next attempt at once,
// a retry without backoff (`after` does nothing).
use retry_runtime::robust;

#[robust(hedge(after = 10s), retries = 2)]
async fn answers_at_once() -> std::io::Result<u8> { Err(std::io::ErrorKind::Other.into()) }

// (Fine: the body awaits.)
#[robust(hedge(after = 10s), retries = 2)]
async fn awaits() -> std::io::Result<u8> { tokio::task::yield_now().await; Ok(1) }

fn main() {}
