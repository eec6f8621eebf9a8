// Neighbours of `tests/ui/fail/kinds_that_add_nothing.rs` that are fine: `Timeout` beside `Io`
// for an `io::Error` (they name what is meant), `_` as the last `when`, a top-level setting a
// `when` inherits, a closure that reads its argument, and a deadline that bounds hedges or
// retries.
use std::io;
use std::time::Duration;

use retry_runtime::robust;

#[robust(timeout = 2s, on = [Timeout, Io])]
async fn timeout_and_io() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

#[robust(timeout = 1s, when(Timeout, retries = 10), when(_, retries = 1))]
async fn wildcard_last() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// The `when` sets its own `retries` but inherits the top level's `backoff`.
#[robust(backoff = constant(base = 10ms), on = [Io], when(Io, retries = 2))]
fn inherited_backoff() -> io::Result<()> { Ok(()) }

// The `on` rule still takes the errors no `when` takes (`BrokenPipe`).
#[robust(retries = 7, on = [Io(ConnectionReset), Io(BrokenPipe)],
         when(Io(ConnectionReset), retries = 2))]
fn on_rule_still_acts() -> io::Result<()> { Ok(()) }

#[robust(on = [Ok(|v: &u16| *v == 503), |e: &io::Error| e.raw_os_error().is_some()])]
fn closures_that_read() -> io::Result<u16> { Ok(1) }

// With hedges, or with retries, the deadline bounds the call.
#[robust(retries = 0, timeout = 1s, deadline = 5s, hedge(after = 100ms))]
async fn deadline_bounds_hedges() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

#[robust(retries = 2, timeout = 1s, deadline = 5s)]
async fn deadline_bounds_retries() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// Without a timeout, the deadline is the only attempt's limit.
#[robust(retries = 0, deadline = 5s)]
async fn deadline_alone() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

fn main() {
    let _ = (Duration::ZERO, inherited_backoff(), closures_that_read());
}

// A kind of `on` that is also a `when`'s says it is retried with the `when`'s settings, even
// beside a wider kind.
#[robust(on = [Io, Io(ConnectionReset)], when(Io(ConnectionReset), retries = 5))]
fn on_kind_of_a_when_beside_a_wider_one() -> io::Result<()> { Ok(()) }
