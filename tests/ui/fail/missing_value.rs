use retry_runtime::robust;

#[robust(retries)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
