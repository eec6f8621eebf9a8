use retry_runtime::robust;

#[robust(retrys = 3)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
