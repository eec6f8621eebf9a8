use retry_runtime::robust;

#[robust(retries = 3)]
fn f() -> u32 { 3 }

fn main() {}
