use retry_runtime::robust;

// Takes the error by reference.
#[robust(fallback = |e: &std::io::Error| Ok(0))]
fn by_ref() -> std::io::Result<u32> { Ok(1) }

// Returns another type.
#[robust(fallback = |_e: std::io::Error| Ok("zero"))]
fn wrong_ok() -> std::io::Result<u32> { Ok(1) }

// An async fallback on a blocking fn.
#[robust(fallback = |_e: std::io::Error| async { Ok(0) })]
fn async_on_blocking() -> std::io::Result<u32> { Ok(1) }

// Not a closure.
#[robust(fallback = 5)]
fn not_callable() -> std::io::Result<u32> { Ok(1) }

// Per call, not per kind; and given once.
#[robust(when(Io, retries = 1, fallback = |e: std::io::Error| Err(e)),
         fallback = |e: std::io::Error| Err(e), fallback = |e: std::io::Error| Err(e))]
fn in_when_and_twice() -> std::io::Result<u32> { Ok(1) }

// A misspelled key.
#[robust(fallbak = |e: std::io::Error| Err(e))]
fn misspelled() -> std::io::Result<u32> { Ok(1) }

fn main() {}
