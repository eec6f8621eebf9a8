// A guard behind a pointer made by the call is one per call too, however the pointer is
// copied (a clone of it, `Arc::clone` of it), and so is a `const` declared in the guard's
// expression. Each is an error at the expression (or the `const`).
use std::io;
use std::sync::Arc;
use std::time::Duration;

use retry_runtime::{CircuitBreaker, ConcurrencyLimit, robust};

#[robust(retries = 0, breaker = Arc::new(CircuitBreaker::new(4, 2, 0.5, Duration::from_secs(30), 1).unwrap()).clone())]
fn clone_of_a_new_arc() -> io::Result<()> { Ok(()) }

#[robust(retries = 0, breaker = Arc::clone(&Arc::new(CircuitBreaker::new(4, 2, 0.5, Duration::from_secs(30), 1).unwrap())))]
fn arc_clone_of_a_new_arc() -> io::Result<()> { Ok(()) }

#[robust(limit = { const L: ConcurrencyLimit = match ConcurrencyLimit::new(1, 0) { Ok(l) => l, Err(_) => panic!() }; &L })]
async fn const_in_a_block() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// (Fine: a clone of a shared `Arc`; a `static` declared in the block.)
static SHARED: std::sync::LazyLock<Arc<CircuitBreaker>> = std::sync::LazyLock::new(|| {
    Arc::new(CircuitBreaker::new(4, 2, 0.5, Duration::from_secs(30), 1).unwrap())
});
#[robust(retries = 0, breaker = Arc::clone(&SHARED))]
fn clone_of_a_shared_arc() -> io::Result<()> { Ok(()) }
#[robust(retries = 0, breaker = SHARED.clone())]
fn method_clone_of_a_shared_arc() -> io::Result<()> { Ok(()) }
#[robust(limit = { static L: ConcurrencyLimit = match ConcurrencyLimit::new(1, 0) { Ok(l) => l, Err(_) => panic!() }; &L })]
async fn static_in_a_block() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// (Fine too: a method called on a `const` key, which returns a shared guard.)
static FREE: ConcurrencyLimit = match ConcurrencyLimit::new(1, 0) { Ok(l) => l, Err(_) => panic!() };
#[derive(Clone, Copy)]
pub enum Tier { Free }
impl Tier {
    fn limit(self) -> &'static ConcurrencyLimit { match self { Tier::Free => &FREE } }
}
#[robust(limit = { const T: Tier = Tier::Free; T.limit() })]
async fn method_of_a_const_key() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

fn main() {}
