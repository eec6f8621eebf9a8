// A hedged policy, or one with an adaptive timeout, cannot be erased into a `DynPolicy`: the
// error says which timeout setting and what to keep instead.
use std::io;
use std::time::Duration;

use retry_runtime::hedge::Hedge;
use retry_runtime::{DynPolicy, Policy};

fn main() {
    let hedged = Policy::builder()
        .hedge(Hedge::after(Duration::from_millis(10), 1).unwrap())
        .build()
        .unwrap();
    let _ = DynPolicy::<u32, io::Error>::new(hedged);
}
