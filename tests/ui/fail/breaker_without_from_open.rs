use retry_runtime::robust;

static BREAKER: std::sync::LazyLock<retry_runtime::CircuitBreaker> = std::sync::LazyLock::new(|| {
    retry_runtime::CircuitBreaker::new(10, 5, 0.5, std::time::Duration::from_secs(1), 1).unwrap()
});

#[derive(Debug)]
struct MyError;

#[robust(breaker = BREAKER)]
fn f() -> Result<(), MyError> { Ok(()) }

fn main() {}
