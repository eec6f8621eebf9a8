// A call driven by hand makes one attempt at a time: starting one on a hedged policy, which
// would then never hedge, is an error that points at `call_async`.
use std::time::Duration;
use retry_runtime::hedge::Hedge;
use retry_runtime::Policy;

fn main() {
    let hedge = Hedge::after(Duration::from_millis(50), 1).unwrap();
    let policy = Policy::builder().hedge(hedge).build().unwrap();
    let _call = policy.start();
}
