use retry_runtime::robust;

#[robust(retries = 1.5)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
