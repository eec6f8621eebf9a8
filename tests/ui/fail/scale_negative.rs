use retry_runtime::robust;

#[robust(scale = -2.5)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
