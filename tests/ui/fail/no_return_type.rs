use retry_runtime::robust;

#[robust(retries = 3)]
fn f() {}

fn main() {}
