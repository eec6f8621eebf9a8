use retry_runtime::robust;

#[robust(timeout = "0ms")]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
