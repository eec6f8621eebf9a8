//! The `Io` kind walks the error's `source()` chain looking for an `std::io::Error`. A
//! thiserror variant marked `#[error(transparent)]` forwards `source()` to the wrapped error's
//! own source, so the chain skips the `io::Error` itself and `Io` never matches it. The two
//! forms that work: a pattern naming the variant, or a variant with a message of its own. (An
//! `io::Error` in an `Arc` or a `Box`, which forward `source()` the same way, is looked through.)

use std::cell::Cell;
use std::io::{self, ErrorKind};

use retry_runtime::robust;

#[derive(Debug, thiserror::Error)]
enum Transparent {
    #[error(transparent)]
    Io(#[from] io::Error),
}

#[derive(Debug, thiserror::Error)]
enum Described {
    #[error("io: {0}")]
    Io(#[from] io::Error),
}

fn reset() -> io::Error {
    ErrorKind::ConnectionReset.into()
}

#[robust(retries = 2, backoff = none, on = [Io])]
fn transparent_with_io_kind(attempts: &Cell<u32>) -> Result<(), Transparent> {
    attempts.set(attempts.get() + 1);
    Err(reset())?
}

#[robust(retries = 2, backoff = none, on = [Transparent::Io(_)])]
fn transparent_with_pattern(attempts: &Cell<u32>) -> Result<(), Transparent> {
    attempts.set(attempts.get() + 1);
    Err(reset())?
}

#[robust(retries = 2, backoff = none, on = [Io(ConnectionReset)])]
fn described_with_io_kind(attempts: &Cell<u32>) -> Result<(), Described> {
    attempts.set(attempts.get() + 1);
    Err(reset())?
}

#[test]
fn a_transparent_wrapper_hides_the_io_error_from_the_io_kind() {
    let attempts = Cell::new(0);
    let e = transparent_with_io_kind(&attempts).unwrap_err();
    assert_eq!(
        attempts.get(),
        1,
        "not retried: `Io` never sees the io::Error"
    );
    // What the kind sees: the wrapper, then the io::Error's own source (none).
    assert!(std::error::Error::source(&e).is_none());
}

#[test]
fn a_pattern_matches_the_transparent_variant() {
    let attempts = Cell::new(0);
    assert!(transparent_with_pattern(&attempts).is_err());
    assert_eq!(attempts.get(), 3, "retried twice");
}

#[test]
fn a_variant_with_its_own_message_shows_the_io_error() {
    let attempts = Cell::new(0);
    let e = described_with_io_kind(&attempts).unwrap_err();
    assert_eq!(attempts.get(), 3, "retried twice");
    let source = std::error::Error::source(&e).unwrap();
    assert!(source.is::<io::Error>());
}

// An `io::Error` shared in an `Arc` (or boxed) is the error type itself: `Arc` and `Box`
// forward `source()` to the io::Error's own source too, so `Io` and `Timeout` look through
// them.
#[robust(retries = 2, backoff = none, on = [Io(ConnectionReset)])]
fn shared_io_error(attempts: &Cell<u32>) -> Result<(), std::sync::Arc<io::Error>> {
    attempts.set(attempts.get() + 1);
    Err(std::sync::Arc::new(reset()))
}

#[robust(retries = 2, backoff = none, on = [Timeout])]
fn boxed_timed_out(attempts: &Cell<u32>, kind: ErrorKind) -> Result<(), Box<io::Error>> {
    attempts.set(attempts.get() + 1);
    Err(Box::new(kind.into()))
}

#[test]
fn the_io_and_timeout_kinds_see_an_io_error_in_an_arc_or_a_box() {
    let attempts = Cell::new(0);
    assert!(shared_io_error(&attempts).is_err());
    assert_eq!(attempts.get(), 3, "retried twice");

    let attempts = Cell::new(0);
    assert!(boxed_timed_out(&attempts, ErrorKind::TimedOut).is_err());
    assert_eq!(attempts.get(), 3, "retried twice");
    // Another kind is not a timeout.
    let attempts = Cell::new(0);
    assert!(boxed_timed_out(&attempts, ErrorKind::ConnectionReset).is_err());
    assert_eq!(attempts.get(), 1);
}
