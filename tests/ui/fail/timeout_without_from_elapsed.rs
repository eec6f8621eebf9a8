use retry_runtime::robust;

#[derive(Debug)]
struct MyError;

#[robust(timeout = "1s")]
async fn f() -> Result<(), MyError> { Ok(()) }

fn main() {}
