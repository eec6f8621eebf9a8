// An expression of the attribute that reads a parameter each attempt borrows mutably: the
// retry loop holds the callbacks (and their borrows) across the attempts.
use std::io;

use retry_runtime::robust;

#[robust(retries = 1, on_error = |_e: &io::Error, _n| eprintln!("{}", buf.len()))]
fn on_error_reads(buf: &mut Vec<u8>) -> io::Result<()> { buf.push(1); Err(io::ErrorKind::Other.into()) }

struct Conn { sent: u32 }

impl Conn {
    #[robust(retries = 1, on = [|_e: &io::Error| self.sent < 3])]
    fn kind_reads_self(&mut self) -> io::Result<()> { self.sent += 1; Err(io::ErrorKind::Other.into()) }

    // Fine: the fallback is made after the retries.
    #[robust(retries = 1, fallback = |_e: io::Error| Ok(self.sent))]
    fn fallback_reads_self(&mut self) -> io::Result<u32> { self.sent += 1; Err(io::ErrorKind::Other.into()) }
}

// Nor a value computed from it when the callback is made: a blocking fn's first attempt may
// still hold its borrow then.
#[robust(retries = 1, on_error = { let n = buf.len(); move |_e: &io::Error, _| eprintln!("{n}") })]
fn computed_before(buf: &mut Vec<u8>) -> io::Result<()> { buf.push(1); Err(io::ErrorKind::Other.into()) }

fn main() {}
