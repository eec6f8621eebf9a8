use retry_runtime::robust;

#[robust(crate = "crate::nowhere")]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
