// A guard must be one for every call: a `const` (a new guard each time it is named) or an
// expression that builds one (a new guard for each call) would never run dry, open, throttle
// or limit anything. Each is an error at the expression.
use std::io;
use std::sync::LazyLock;
use std::time::Duration;

use retry_runtime::guard::{Keyed, KeyedBreaker};
use retry_runtime::{AdaptiveThrottle, CircuitBreaker, ConcurrencyLimit, RetryBudget, robust};

const LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(4, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};

#[robust(limit = LIMIT)]
async fn const_limit() -> io::Result<()> { Ok(()) }

#[robust(breaker = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap())]
fn new_breaker() -> io::Result<()> { Ok(()) }

#[robust(budget = &RetryBudget::new(10.0, 0.1, 1.0).unwrap())]
fn new_budget() -> io::Result<()> { Ok(()) }

#[robust(throttle = { let t = AdaptiveThrottle::new(2.0, Duration::from_secs(60)); t.unwrap() })]
fn new_throttle() -> io::Result<()> { Ok(()) }

// A field of a `const` is a new guard too, and so is one behind an `Arc` made by the call.
pub struct Guards {
    pub limit: ConcurrencyLimit,
}
const GUARDS: Guards = Guards { limit: LIMIT };

#[robust(limit = GUARDS.limit)]
async fn field_of_a_const() -> io::Result<()> { Ok(()) }

#[robust(breaker = std::sync::Arc::new(CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap()))]
fn new_arc() -> io::Result<()> { Ok(()) }

// Behind `&*` too: a `Box` or an `Arc` made by the call holds a guard made by the call.
#[robust(breaker = &*Box::new(CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap()))]
fn new_box_behind_a_reference() -> io::Result<()> { Ok(()) }

// A field of a struct of guards built for each call.
pub struct Made {
    pub breaker: CircuitBreaker,
}
fn make_guards() -> Made {
    Made { breaker: CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap() }
}
#[robust(breaker = make_guards().breaker)]
fn field_of_a_new_struct() -> io::Result<()> { Ok(()) }

// A keyed map that is a `const`: each call names a new map, whose guards are all new.
const CONST_BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
    Keyed::new(10, CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap()).unwrap()
});
#[robust(breaker = CONST_BREAKERS.get(host))]
fn keyed_by_a_const(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = &*CONST_BREAKERS.get(host))]
fn keyed_by_a_const_behind_a_reference(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

// The same map's method called by its path.
#[robust(breaker = KeyedBreaker::get(&CONST_BREAKERS, host))]
fn keyed_by_a_const_through_the_path(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

// A `const` given by a branch of an `if`, a `match` or a block.
const OTHER_LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(2, 2) {
    Ok(l) => l,
    Err(_) => panic!(),
};
#[robust(limit = if fast { &LIMIT } else { &OTHER_LIMIT })]
async fn const_in_a_branch(fast: bool) -> io::Result<()> { let _ = fast; Ok(()) }

#[robust(limit = { &LIMIT })]
async fn const_in_a_block() -> io::Result<()> { Ok(()) }

#[robust(limit = match n { 0 => &SHARED, _ => &OTHER_LIMIT })]
async fn const_in_a_match_arm(n: u32) -> io::Result<()> { let _ = n; Ok(()) }

// A pinned `Box` made by the call holds a guard made by the call as `Box::new`'s does.
#[robust(breaker = &*Box::pin(CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap()))]
fn new_pinned_box() -> io::Result<()> { Ok(()) }

// A lazy value made by the call makes its guard for the call; a `Box` leaked by the call
// leaks a new guard for each call.
#[robust(breaker = &*LazyLock::new(|| CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap()))]
fn new_lazy_behind_a_reference() -> io::Result<()> { Ok(()) }

#[robust(breaker = &*Box::leak(Box::new(CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap())))]
fn leaked_box_behind_a_reference() -> io::Result<()> { Ok(()) }

// What is fine: a `static`, a `LazyLock` behind `&*`, a keyed map's guard, a parameter, a
// macro that names a static, a choice between `static`s.
static SHARED: ConcurrencyLimit = match ConcurrencyLimit::new(4, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};
static BREAKER: LazyLock<CircuitBreaker> =
    LazyLock::new(|| CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap());
static BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
    Keyed::new(10, CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap()).unwrap()
});

#[robust(limit = SHARED, breaker = &*BREAKER)]
fn fine(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = BREAKERS.get(host))]
fn keyed(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = &*BREAKERS.get(host))]
fn keyed_behind_a_reference(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(budget = budget)]
fn given(budget: &RetryBudget) -> io::Result<()> { let _ = budget; Ok(()) }

// A guard reached through a fn that returns a reference to it.
pub struct Registry {
    pub breaker: CircuitBreaker,
}
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry {
    breaker: CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap(),
});
fn registry_breaker() -> &'static CircuitBreaker {
    &REGISTRY.breaker
}
#[robust(breaker = registry_breaker())]
fn from_a_registry() -> io::Result<()> { Ok(()) }

static SLOW: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};
#[robust(limit = if fast { &SHARED } else { &SLOW })]
async fn a_choice_of_statics(fast: bool) -> io::Result<()> { let _ = fast; Ok(()) }

#[robust(breaker = KeyedBreaker::get(&BREAKERS, host))]
fn keyed_through_the_path(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(limit = { let chosen = &SLOW; chosen })]
async fn a_static_bound_in_a_block() -> io::Result<()> { Ok(()) }

#[robust(limit = { static OWN: ConcurrencyLimit = match ConcurrencyLimit::new(1, 1) { Ok(l) => l, Err(_) => panic!() }; &OWN })]
async fn a_static_declared_in_the_block() -> io::Result<()> { Ok(()) }

// An `Arc` converted into itself is the same shared guard.
#[robust(breaker = std::sync::Arc::<CircuitBreaker>::from(BREAKERS.get(host)))]
fn keyed_converted(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

macro_rules! shared {
    () => {
        SHARED
    };
}
#[robust(limit = shared!())]
async fn from_a_macro() -> io::Result<()> { Ok(()) }

fn main() {}
