use retry_runtime::robust;

// No `timeout`, and `String` has no `std::error::Error` view: `Timeout` could never match.
#[robust(on = [Timeout])]
fn f() -> Result<(), String> { Err("no".into()) }

#[robust(timeout = none, when(Timeout, retries = 1))]
fn g() -> Result<(), String> { Err("no".into()) }

fn main() {}
