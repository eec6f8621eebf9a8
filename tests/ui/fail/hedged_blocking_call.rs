// Hedging runs attempts at the same time: a blocking `call` of a hedged policy is an error that
// points at `call_async`.
use std::time::Duration;
use retry_runtime::hedge::Hedge;
use retry_runtime::Policy;

fn main() {
    let hedge = Hedge::after(Duration::from_millis(50), 1).unwrap();
    let policy = Policy::builder().hedge(hedge).build().unwrap();
    let _: std::io::Result<()> = policy.call(|_| Ok(()));
}
