// `breaker_per` and `budget_per` give each request its key's breaker or budget; a policy built
// with a breaker or a budget of its own would never use it, so that is an error at the call.
use std::sync::LazyLock;
use std::time::Duration;

use retry_runtime::guard::{Keyed, KeyedBreaker, KeyedBudget};
use retry_runtime::hedge::Hedge;
use retry_runtime::tower::RobustLayer;
use retry_runtime::{CircuitBreaker, DynPolicy, Policy, RetryBudget};

static BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
    let template = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap();
    Keyed::new(100, template).unwrap()
});
static BUDGETS: LazyLock<KeyedBudget<String>> =
    LazyLock::new(|| Keyed::new(100, RetryBudget::new(10.0, 0.1, 1.0).unwrap()).unwrap());
static OWN_BREAKER: LazyLock<CircuitBreaker> =
    LazyLock::new(|| CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap());
static OWN_BUDGET: LazyLock<RetryBudget> =
    LazyLock::new(|| RetryBudget::new(10.0, 0.1, 1.0).unwrap());

fn host(request: &http::Request<String>) -> String {
    request.uri().host().unwrap_or_default().to_owned()
}

fn main() {
    let with_breaker = Policy::builder().breaker(&*OWN_BREAKER).build().unwrap();
    let _ = RobustLayer::new(with_breaker).breaker_per(&*BREAKERS, host);

    let with_budget = Policy::builder()
        .budget(&*OWN_BUDGET)
        .hedge(Hedge::after(Duration::from_millis(10), 1).unwrap())
        .build()
        .unwrap();
    let _ = RobustLayer::hedged(with_budget).budget_per(&*BUDGETS, host);

    let erased = DynPolicy::<http::Response<String>, std::io::Error>::new(Policy::builder().build().unwrap());
    let _ = RobustLayer::new(erased).breaker_per(&*BREAKERS, host);
}
