use retry_runtime::{robust, ConcurrencyLimit};

static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(8, 100) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};

// An error type without `From<Rejected>`.
#[robust(limit = LIMIT)]
fn no_conversion() -> Result<(), String> { Ok(()) }

// Not a limit.
#[robust(limit = 8)]
fn not_a_limit() -> std::io::Result<()> { Ok(()) }

// Per call, and given once; a near miss.
#[robust(when(Io, retries = 1, limit = LIMIT), limit = LIMIT, limit = LIMIT, limt = LIMIT)]
fn in_when_and_twice() -> std::io::Result<()> { Ok(()) }

fn main() {}
