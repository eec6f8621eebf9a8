// A limit rejects an attempt with `E::from(Rejected)` when its queue is full: a built policy
// with a limit, called with an error type that has no such conversion, is an error that names
// the limit (not only the throttle).
use retry_runtime::{ConcurrencyLimit, Policy};

#[derive(Debug)]
struct MyError;

static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(4, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};

fn main() {
    let policy = Policy::builder().limit(&LIMIT).build().unwrap();
    let _: Result<(), MyError> = policy.call(|_| Err(MyError));
}
