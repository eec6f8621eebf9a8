use retry_runtime::robust;

// No `timeout`, and `String` has no `std::error::Error` view: `Timeout` could never match.
#[robust(on = [Timeout])]
fn f() -> Result<(), String> { Err("no".into()) }

#[robust(timeout = none, when(Timeout, retries = 1))]
fn g() -> Result<(), String> { Err("no".into()) }

// A `deadline` alone: an attempt it cuts is never retried (no time is left), so `Timeout`
// could only match a timeout inside the error, which `String` cannot show.
#[robust(deadline = 2s, on = [Timeout])]
fn h() -> Result<(), String> { Err("no".into()) }

#[robust(deadline = 2s, when(Timeout, retries = 3))]
fn i() -> Result<(), String> { Err("no".into()) }

fn main() {}
