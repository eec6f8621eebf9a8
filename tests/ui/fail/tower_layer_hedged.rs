// A hedged policy needs the hedging layer: `RobustLayer::new` or `RobustLayer::from_static` with
// one is an error pointing at `RobustLayer::hedged`; and the hedging layer with a policy that does not hedge (`.hedge(..)`
// forgotten) is an error pointing at `RobustLayer::new`. (A blocking `call` of a hedged policy:
// `hedged_blocking_call.rs`.)
use std::time::Duration;
use retry_runtime::hedge::Hedge;
use retry_runtime::tower::RobustLayer;
use retry_runtime::Policy;
use tower::{Layer, Service};

fn main() {
    let hedge = Hedge::after(Duration::from_millis(50), 1).unwrap();
    let policy = Policy::builder().hedge(hedge).build().unwrap();
    let echo = tower::service_fn(|r: String| async move { Ok::<_, std::io::Error>(r) });
    let mut svc = RobustLayer::new(policy).layer(echo);
    let _ = svc.call(String::new());

    let hedge = Hedge::after(Duration::from_millis(50), 1).unwrap();
    let leaked = Box::leak(Box::new(Policy::builder().hedge(hedge).build().unwrap()));
    let _ = RobustLayer::from_static(&*leaked);

    let plain = Policy::builder().retries(2).build().unwrap();
    let _ = RobustLayer::hedged(plain);
}
