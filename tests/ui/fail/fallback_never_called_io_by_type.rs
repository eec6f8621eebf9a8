// A fallback never called because every error reaches a rule that retries it for ever, where
// `Io` takes every error because the error type is `std::io::Error`, written `io::Result` or
// through an alias: the type is checked where the fn is built (an error of `cargo build`).
use std::io;

use retry_runtime::robust;

#[robust(retries = -1, on = [Io], fallback = |_e| Ok(0))]
fn on_io() -> io::Result<u32> { Ok(1) }

#[robust(when(Io, retries = -1), fallback = |_e| Ok(0))]
fn a_when_on_io() -> io::Result<u32> { Ok(1) }

type Res<T> = Result<T, io::Error>;

#[robust(retries = -1, on = [Io], fallback = |_e| Ok(0))]
fn through_an_alias() -> Res<u32> { Ok(1) }

// (Fine: another error type, which `Io` does not take whole; or a bound on the retries.)
#[derive(Debug)]
struct Wrapped(io::Error);
impl std::fmt::Display for Wrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
impl std::error::Error for Wrapped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}
#[robust(retries = -1, on = [Io], fallback = |_e| Ok(0))]
fn another_error() -> Result<u32, Wrapped> { Ok(1) }
#[robust(retries = -1, on = [Io], max_delay = 10s, fallback = |_e| Ok(0))]
fn bounded() -> io::Result<u32> { Ok(1) }

fn main() {}
