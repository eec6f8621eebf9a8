//! Two signatures of this edition that syn does not read: a parameter without a name (allowed
//! in a trait's method) and one named by a later keyword. Each is refused with a message that
//! says why, at the token syn stopped at.
extern crate retry_runtime;

use retry_runtime::robust;
use std::io;

trait Get {
    #[robust(retries = 1)]
    fn get(&self, u32) -> io::Result<u32> { Ok(1) }
}

#[robust(retries = 1)]
fn keyword(dyn: u32) -> io::Result<u32> { Ok(dyn) }

fn main() {}
