//! The shared guards the fleet tests use (included with `#[path]` by `fleet_memory.rs` and
//! `redis_fleet.rs`).

use std::time::Duration;

use retry_runtime::guard::fleet::{Fleet, SharedBreaker, SharedBudget};
use retry_runtime::{CircuitBreaker, RetryBudget};

/// A shared breaker (locally: the last 20 attempts, at least 10, opening at
/// `local_failure_ratio`; for the fleet: the last 5 s, at least 20 attempts, at 50%) and a
/// shared budget (100 tokens, 5 alone) named `name` on `fleet`.
pub fn shared_guards(
    fleet: &Fleet,
    name: &str,
    local_failure_ratio: f64,
) -> (SharedBreaker, SharedBudget) {
    let local = CircuitBreaker::new(20, 10, local_failure_ratio, Duration::from_secs(30), 1)
        .expect("a valid breaker");
    let breaker = fleet
        .breaker(name, local, Duration::from_secs(5), 20)
        .expect("a valid shared breaker");
    let budget = fleet
        .budget(
            name,
            RetryBudget::new(100.0, 0.1, 1.0).expect("a valid budget"),
            RetryBudget::new(5.0, 0.1, 1.0).expect("a valid budget"),
        )
        .expect("a valid shared budget");
    (breaker, budget)
}
