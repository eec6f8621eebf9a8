use retry_runtime::robust;

// An async attempt cut by the deadline fails with `E::from(Elapsed)`: `String` has no such
// conversion.
#[robust(deadline = 2s)]
async fn f() -> Result<(), String> { tokio::task::yield_now().await; Ok(()) }

fn main() {}
