use retry_runtime::robust;

#[robust(attempt = 3)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
