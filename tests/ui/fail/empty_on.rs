use retry_runtime::robust;

#[robust(on = [])]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
