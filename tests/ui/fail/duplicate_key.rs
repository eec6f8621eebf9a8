use retry_runtime::robust;

#[robust(retries = 3, retries = 4)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
