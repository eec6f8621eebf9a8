use retry_runtime::robust;

#[robust(scale = 0)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
