use retry_runtime::robust;

#[robust(on_retry = |e: &String| ())]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
