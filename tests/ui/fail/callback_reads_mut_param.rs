// A callback, written as a closure, that reads a parameter each attempt borrows mutably: the
// retry loop holds the closure (and its borrow) across the attempts.
use std::io;

use retry_runtime::robust;

#[robust(retries = 1, on_error = |_e: &io::Error, _n| eprintln!("{}", buf.len()))]
fn on_error_reads(buf: &mut Vec<u8>) -> io::Result<()> { buf.push(1); Err(io::ErrorKind::Other.into()) }

#[robust(retries = 1, on_error = |_e: &io::Error, _n| eprintln!("{:?}", buf))]
fn on_error_reads_option(buf: Option<&mut Vec<u8>>) -> io::Result<()> { let _ = buf; Err(io::ErrorKind::Other.into()) }

struct Conn { sent: u32 }

impl Conn {
    #[robust(retries = 1, on = [|_e: &io::Error| self.sent < 3])]
    fn kind_reads_self(&mut self) -> io::Result<()> { self.sent += 1; Err(io::ErrorKind::Other.into()) }

    #[robust(retries = 1, on_success = || eprintln!("{}", self.sent))]
    fn typed_receiver(self: &mut Self) -> io::Result<()> { self.sent += 1; Ok(()) }
}

fn main() {}
