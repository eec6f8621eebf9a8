// A fleet's guard made in the attribute is made for each call: `Fleet::breaker` and
// `Fleet::budget` register a new shared guard (with a new local one) every time they are
// called, whose counts end with the call, directly or through a fn. A handle taken by value
// from an expression is refused as a guard is (a clone shares its guard, but the value alone
// cannot say whether it was made here): name a `static`, or a reference a fn returns.
use std::io;
use std::sync::LazyLock;
use std::time::Duration;

use retry_runtime::guard::fleet::{Fleet, FleetOptions, MemoryStore, SharedBreaker};
use retry_runtime::{CircuitBreaker, RetryBudget, robust};

static FLEET: LazyLock<Fleet> = LazyLock::new(|| {
    Fleet::in_memory(&MemoryStore::new(), FleetOptions::new()).expect("valid options")
});

#[robust(breaker = FLEET
    .breaker(
        "payments",
        CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap(),
        Duration::from_secs(10),
        20,
    )
    .unwrap())]
fn breaker_made_here() -> io::Result<()> { Ok(()) }

#[robust(budget = Fleet::budget(
    &FLEET,
    "retries",
    RetryBudget::new(100.0, 0.1, 1.0).unwrap(),
    RetryBudget::new(10.0, 0.1, 1.0).unwrap(),
)
.expect("a valid budget"))]
fn budget_made_here() -> io::Result<()> { Ok(()) }

fn payments() -> SharedBreaker {
    FLEET
        .breaker(
            "payments",
            CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap(),
            Duration::from_secs(10),
            20,
        )
        .unwrap()
}

#[robust(breaker = payments())]
fn breaker_made_by_a_fn() -> io::Result<()> { Ok(()) }

// A shared handle named through a `static` or a reference is fine.
static PAYMENTS: LazyLock<SharedBreaker> = LazyLock::new(payments);

fn payments_ref() -> &'static SharedBreaker {
    &PAYMENTS
}

#[robust(breaker = PAYMENTS)]
fn named() -> io::Result<()> { Ok(()) }

#[robust(breaker = payments_ref())]
fn by_reference() -> io::Result<()> { Ok(()) }

// So is one handed out in an `Arc` (a registry of one per host).
fn for_host(_host: &str) -> std::sync::Arc<SharedBreaker> {
    std::sync::Arc::new(PAYMENTS.clone())
}

#[robust(breaker = for_host(host))]
fn by_arc(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

// (What the fns would need, had they compiled.)
const _: (Duration, Option<CircuitBreaker>, Option<RetryBudget>) = (Duration::ZERO, None, None);

fn main() {}
