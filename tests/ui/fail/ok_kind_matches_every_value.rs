// An `Ok(..)` kind whose pattern every value matches would make every success a failed
// attempt (retried, then returned as the last failure): an error at the pattern (said by the
// attribute for patterns that match anything, by rustc's unreachable-pattern lint for those
// that match every value of their type: nothing is left after them). Kinds that together
// match every value are one such mistake too: the same lint says so, at the last of them.
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

#[robust(retries = 2, on = [Ok(v @ _)])]
fn bound() -> io::Result<u32> { Ok(1) }

#[derive(Debug, PartialEq)]
pub enum Load {
    Busy,
    Fine,
}

#[robust(retries = 2, on = [Ok(Load::Busy), Ok(Load::Fine)])]
fn split_over_two_kinds() -> io::Result<Load> { Ok(Load::Fine) }

#[robust(retries = 2, on = [Ok(true)], when(Ok(false), retries = 1))]
fn split_over_a_when() -> io::Result<bool> { Ok(true) }

// Fine: a pattern some values do not match, bare names and patterns together.
#[robust(retries = 2, on = [Ok(Response { status: 503 | 429 })])]
fn busy() -> io::Result<Response> { Ok(Response { status: 200 }) }
#[robust(retries = 2, on = [Ok(None | Some(0))])]
fn none_or_zero() -> io::Result<Option<u32>> { Ok(Some(1)) }
#[robust(on = [Ok(Load::Busy)], when(Ok(Load::Busy), retries = 1))]
fn one_value_twice() -> io::Result<Load> { Ok(Load::Fine) }

fn main() {}
