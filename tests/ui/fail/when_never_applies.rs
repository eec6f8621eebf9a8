// Rules are tried in the order written: a `when` an earlier one always takes first never
// applies. With an `io::Error` and a timeout, a timed-out attempt is an `Io` error of kind
// `TimedOut`, so `when(Timeout, ..)` goes before `when(Io, ..)`.
use std::io;

use retry_runtime::robust;

#[robust(when(Io, retries = 1), when(Io(ConnectionReset), retries = 5))]
fn any_io_first() -> io::Result<()> { Ok(()) }

#[robust(when(Io(ConnectionReset, TimedOut), retries = 1), when(Io(TimedOut), retries = 5))]
fn wider_io_first() -> io::Result<()> { Ok(()) }

#[robust(timeout = 1s, when(Io, retries = 2), when(Timeout, retries = 10))]
async fn io_before_timeout() -> io::Result<()> { Ok(()) }

#[robust(deadline = 5s, when(Io(TimedOut), retries = 2), when(Timeout, retries = 10))]
async fn timed_out_kind_before_timeout() -> Result<(), std::io::Error> { Ok(()) }

// Fine: the narrower first; and `Timeout` after `Io` when no timeout applies.
#[robust(timeout = 1s, when(Timeout, retries = 10), when(Io(ConnectionReset), retries = 5), when(Io, retries = 1))]
async fn narrow_first() -> io::Result<()> { Ok(()) }

fn main() {}
