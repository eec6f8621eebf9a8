// A top-level setting no rule reads: `when`s take first every error the top level's rule
// would retry, and each sets its own value of that key. Through `Io` on a fn written for
// `std::io::Result` (every error there is an `Io` one), and through a `when` whose pattern
// lists the kinds of `on` as its alternatives.
use retry_runtime::robust;

#[robust(when(Io, retries = 2), retries = 5)]
fn io_when() -> std::io::Result<()> { Ok(()) }

#[derive(Debug)]
pub enum E { A, B, C }

#[robust(when(E::A | E::B, retries = 2), on = [E::A, E::B], retries = 7, backoff = none)]
fn alternatives_of_one_when() -> Result<(), E> { Ok(()) }

// (Fine: the top level's rule retries `E::C`, which no `when` takes; `Io` on an error that
// may not be an `io::Error`.)
#[robust(when(E::A | E::B, retries = 2), on = [E::A, E::B, E::C], retries = 7)]
fn the_top_level_retries_another() -> Result<(), E> { let _ = E::C; Ok(()) }
#[robust(when(Io, retries = 2), retries = 5)]
fn io_when_on_a_boxed_error() -> Result<(), Box<dyn std::error::Error + Send + Sync>> { Ok(()) }

fn main() {}
