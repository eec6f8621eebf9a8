use retry_runtime::robust;

#[robust(hint = |e: &String| 5)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
