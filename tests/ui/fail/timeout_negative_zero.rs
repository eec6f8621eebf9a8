use retry_runtime::robust;

// The sign is the value's: `-0` is zero, and a timeout of zero is an error.
#[robust(timeout = -0)]
fn f() -> std::io::Result<()> { Ok(()) }

#[robust(timeout = -0.0ms)]
fn g() -> std::io::Result<()> { Ok(()) }

fn main() {}
