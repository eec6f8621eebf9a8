use retry_runtime::robust;

#[robust(retries = 3)]
struct NotAFunction;

fn main() {}
