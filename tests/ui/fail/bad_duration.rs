use retry_runtime::robust;

#[robust(timeout = "2 parsecs")]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
