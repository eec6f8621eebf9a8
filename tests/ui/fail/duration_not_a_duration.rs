use retry_runtime::robust;

#[robust(max_delay = [1, 2])]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
