use retry_runtime::robust;

#[robust(timeout = "18446744073709551615s 1000000000ns", max_delay = 18446744073709551615h)]
fn f() -> std::io::Result<()> { Ok(()) }

// Just above 10^18 seconds: an `f64` would round each to 10^18, the largest value allowed.
#[robust(timeout = "1000000000000000001s", max_delay = 1000000000000000001s)]
fn g() -> std::io::Result<()> { Ok(()) }

fn main() {}
