// A guard made by the call stays one made by the call when it is converted into a pointer
// (`Arc::from(..)`, `Rc::from(..)`, `Box::from(..)`), and a keyed map made by the call
// (`Keyed::new(..)`, a fn returning one by value) makes new guards, one per key, for each
// call. Each is an error at the value made.
use std::io;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use retry_runtime::guard::fleet::{Fleet, FleetOptions, MemoryStore};
use retry_runtime::guard::{Keyed, KeyedBreaker};
use retry_runtime::{CircuitBreaker, RetryBudget, robust};

fn breaker() -> CircuitBreaker {
    CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap()
}

#[robust(breaker = Arc::from(CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap()))]
fn arc_from_a_new_breaker() -> io::Result<()> { Ok(()) }

#[robust(breaker = Rc::from(breaker()))]
fn rc_from_a_new_breaker() -> io::Result<()> { Ok(()) }

#[robust(budget = Arc::from(Box::new(RetryBudget::new(10.0, 0.1, 1.0).unwrap())))]
fn arc_from_a_new_box() -> io::Result<()> { Ok(()) }

static FLEET: LazyLock<Fleet> = LazyLock::new(|| {
    Fleet::in_memory(&MemoryStore::new(), FleetOptions::new()).expect("valid options")
});

#[robust(budget = Arc::from(FLEET.budget(
    "retries",
    RetryBudget::new(2.0, 0.0, 1.0).unwrap(),
    RetryBudget::new(1.0, 0.0, 1.0).unwrap(),
).unwrap()))]
fn arc_from_a_new_fleet_budget() -> io::Result<()> { Ok(()) }

#[robust(breaker = Keyed::new(10, breaker()).unwrap().get(host))]
fn a_new_keyed_map(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

fn make_map() -> KeyedBreaker<String> {
    Keyed::new(10, breaker()).unwrap()
}

#[robust(breaker = make_map().get(host))]
fn a_keyed_map_returned_by_value(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = Arc::new(make_map()).get(host))]
fn a_keyed_map_in_a_new_arc(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = Keyed::new(10, breaker())?.get(host))]
fn a_new_keyed_map_through_question_mark(host: &str) -> anyhow::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = make_map().get(host))]
async fn a_keyed_map_returned_by_value_async(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

// The same values written otherwise: awaited, a method called by its path or on a reference,
// a block, a qualified path, a field of a value made here converted into a pointer, and a
// box made from another (one error).
async fn make_map_async() -> KeyedBreaker<String> {
    make_map()
}
async fn breaker_async() -> CircuitBreaker {
    breaker()
}

#[robust(breaker = make_map_async().await.get(host))]
async fn an_awaited_keyed_map(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = Arc::<CircuitBreaker>::from(breaker_async().await))]
async fn arc_from_an_awaited_breaker() -> io::Result<()> { Ok(()) }

#[robust(breaker = KeyedBreaker::get(&make_map(), host))]
fn a_keyed_map_by_the_path(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = (&make_map()).get(host))]
fn a_keyed_map_behind_a_reference(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = { make_map() }.get(host))]
fn a_keyed_map_from_a_block(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = <Rc<CircuitBreaker> as From<CircuitBreaker>>::from(breaker()))]
fn rc_from_by_a_qualified_path() -> io::Result<()> { Ok(()) }

pub struct Pair {
    pub breaker: CircuitBreaker,
}
fn pair() -> Pair {
    Pair { breaker: breaker() }
}

#[robust(breaker = Arc::<CircuitBreaker>::from(pair().breaker))]
fn arc_from_a_field_of_a_new_value() -> io::Result<()> { Ok(()) }

fn make_box() -> Box<CircuitBreaker> {
    Box::new(breaker())
}

#[robust(breaker = Box::<CircuitBreaker>::from(make_box()))]
fn box_from_a_new_box() -> io::Result<()> { Ok(()) }

// What is fine: a pointer converted into itself, a map reached through a reference or an
// `Arc` a fn returns, and a value made from a parameter (which the attribute cannot probe
// without moving it).
static BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(make_map);
static SHARED: LazyLock<Arc<CircuitBreaker>> = LazyLock::new(|| Arc::new(breaker()));
static SHARED_MAP: LazyLock<Arc<KeyedBreaker<String>>> = LazyLock::new(|| Arc::new(make_map()));

fn shared() -> Arc<CircuitBreaker> {
    Arc::clone(&SHARED)
}
fn map_ref() -> &'static KeyedBreaker<String> {
    &BREAKERS
}
fn map_arc() -> Arc<KeyedBreaker<String>> {
    Arc::clone(&SHARED_MAP)
}
fn try_map() -> Result<&'static KeyedBreaker<String>, io::Error> {
    Ok(&BREAKERS)
}

#[robust(breaker = Arc::<CircuitBreaker>::from(shared()))]
fn arc_from_an_arc() -> io::Result<()> { Ok(()) }

#[robust(breaker = map_ref().get(host))]
fn a_map_by_reference(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = map_arc().get(host))]
fn a_map_by_arc(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

pub struct Registry {
    pub breakers: KeyedBreaker<String>,
}
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry { breakers: make_map() });
fn registry() -> &'static Registry {
    &REGISTRY
}
async fn map_async() -> &'static KeyedBreaker<String> {
    &BREAKERS
}

#[robust(breaker = registry().breakers.get(host))]
fn a_map_in_a_registry(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = map_async().await.get(host))]
async fn a_map_awaited_by_reference(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = try_map()?.get(host))]
async fn a_map_through_question_mark(host: &str) -> io::Result<()> { let _ = host; Ok(()) }

#[robust(breaker = Arc::<CircuitBreaker>::from(Arc::clone(given)))]
fn arc_from_a_parameter(given: &Arc<CircuitBreaker>) -> io::Result<()> { let _ = given; Ok(()) }

fn main() {}
