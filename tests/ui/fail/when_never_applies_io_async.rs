// An async fn whose error type is `std::io::Error`, imported as `Error`: every `io::Error` is an
// `Io` error, so the `Timeout` rule after `Io` never applies. The compiler checks it where it
// builds the fn's code, and an async fn's body is built where its future is polled (`main`).
use std::io::Error;

use retry_runtime::robust;

#[robust(timeout = 1s, when(Io, retries = 2), when(Timeout, retries = 9))]
async fn imported() -> Result<(), Error> { tokio::task::yield_now().await; Ok(()) }

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let _ = rt.block_on(imported());
}
