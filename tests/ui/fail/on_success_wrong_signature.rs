use retry_runtime::robust;

#[robust(on_success = |n: u32| println!("{n}"))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
