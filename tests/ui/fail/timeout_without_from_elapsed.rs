use retry_runtime::robust;

#[derive(Debug)]
struct MyError;

#[robust(timeout = "1s")]
async fn f() -> Result<(), MyError> { tokio::task::yield_now().await; Ok(()) }

fn main() {}
