// A rule that never applies because the error type is `std::io::Error`, whatever it is called:
// imported as `Error`, or through an alias. (Written `io::Result`, the attribute sees it
// itself: `when_never_applies.rs`.) (An async fn: `when_never_applies_io_async.rs`.)
use std::io::Error;

use retry_runtime::robust;

type Res<T> = std::io::Result<T>;

// Nor does any rule after a bare `Io`: a closure's, a pattern's, a kind of `on`.
#[robust(when(Io, retries = 2), when(|e: &std::io::Error| e.raw_os_error() == Some(11), retries = 10))]
fn aliased() -> Res<()> { Ok(()) }

#[robust(when(Io, retries = 2), on = [|_: &Error| true])]
fn in_on() -> Result<(), Error> { Ok(()) }

// Fine: another error type, and a generic one.
#[derive(Debug)]
struct Mine;
impl std::fmt::Display for Mine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("mine") }
}
impl std::error::Error for Mine {}
#[robust(when(Io, retries = 2), when(|_: &Mine| true, retries = 10))]
fn fine_mine() -> Result<(), Mine> { Ok(()) }
#[robust(when(Io, retries = 2), when(|_: &E| true, retries = 10))]
fn fine_generic<E: std::error::Error + 'static>(e: fn() -> Result<(), E>) -> Result<(), E> { e() }

// Fine: an `io` module that is not std's (`use rustix::io;`, say), whose `Result` has another
// error type.
mod other {
    pub mod io {
        pub type Result<T> = std::result::Result<T, crate::Mine>;
    }
}
use other::io;
#[robust(when(Io, retries = 2), when(|_: &Mine| true, retries = 10))]
fn fine_other_io() -> io::Result<()> { Ok(()) }

fn main() {}
