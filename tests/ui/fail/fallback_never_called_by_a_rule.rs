// Every error reaches a rule that retries it for ever, through rules that all do: `on = [_]`,
// a `when(_, ..)`, or, for a fn written to return `std::io::Result`, `Io` (every `io::Error`
// is one). The call returns only a success, and the fallback is never called.
use retry_runtime::robust;

#[derive(Debug)]
pub enum E { A, B }

#[robust(retries = -1, on = [_], fallback = |_e: E| Ok(0))]
fn every_error_on_the_list() -> Result<u32, E> { Ok(1) }

#[robust(when(_, retries = -1), fallback = |_e: E| Ok(0))]
fn a_when_for_every_error() -> Result<u32, E> { Ok(1) }

#[robust(retries = -1, on = [Io], fallback = |_e: std::io::Error| Ok(0))]
fn io_on_an_io_error() -> std::io::Result<u32> { Ok(1) }

#[robust(when(Io, retries = -1), fallback = |_e: std::io::Error| Ok(0))]
fn a_when_on_io() -> std::io::Result<u32> { Ok(1) }

#[robust(retries = -1, on = [|_: &E| true], fallback = |_e: E| Ok(0))]
fn a_closure_that_always_says_yes() -> Result<u32, E> { Ok(1) }

// (Fine: an earlier `when` gives up; the top level's retries are bounded; `Io` on an error
// that may not be an `io::Error`.)
#[robust(when(E::A, retries = 2), when(_, retries = -1), fallback = |_e: E| Ok(0))]
fn an_earlier_when_gives_up() -> Result<u32, E> { let _ = E::B; Ok(1) }
#[robust(retries = 3, on = [_], fallback = |_e: E| Ok(0))]
fn bounded() -> Result<u32, E> { Ok(1) }
#[robust(retries = -1, on = [Io], fallback = |_e: Box<dyn std::error::Error + Send + Sync>| Ok(0))]
fn io_on_a_boxed_error() -> Result<u32, Box<dyn std::error::Error + Send + Sync>> { Ok(1) }

fn main() {}
