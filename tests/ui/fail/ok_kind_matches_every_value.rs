// An `Ok(..)` kind whose pattern every value matches would make every success a failed
// attempt (retried, then returned as the last failure): rustc's irrefutable-pattern lint is an
// error there, at the pattern.
use std::io;

use retry_runtime::robust;

pub struct Response {
    pub status: u16,
}

#[robust(retries = 2, on = [Io, Ok(())])]
fn unit() -> io::Result<()> { Ok(()) }

#[robust(retries = 2, when(Ok(Response { .. }), retries = 5))]
fn any_response() -> io::Result<Response> { Ok(Response { status: 200 }) }

#[robust(retries = 2, on = [Ok(Some(_) | None)])]
fn any_option() -> io::Result<Option<u32>> { Ok(None) }

// Fine: a pattern some values do not match, bare names and patterns together.
#[robust(retries = 2, on = [Ok(Response { status: 503 | 429 })])]
fn busy() -> io::Result<Response> { Ok(Response { status: 200 }) }
#[robust(retries = 2, on = [Ok(None | Some(0))])]
fn none_or_zero() -> io::Result<Option<u32>> { Ok(Some(1)) }

fn main() {}
