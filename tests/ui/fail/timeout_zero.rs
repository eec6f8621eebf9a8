use retry_runtime::robust;

#[robust(timeout = 0)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
