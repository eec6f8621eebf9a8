use retry_runtime::robust;

// `M` is humantime's month: in a string as well as a suffix, it is refused.
#[robust(max_delay = "10M", retries = 3)]
fn f() -> std::io::Result<()> { Ok(()) }

#[robust(max_delay = 10M, retries = 3)]
fn g() -> std::io::Result<()> { Ok(()) }

// Spelled out, a month is what it says.
#[robust(max_delay = "1month", retries = 3)]
fn h() -> std::io::Result<()> { Ok(()) }

fn main() {}
