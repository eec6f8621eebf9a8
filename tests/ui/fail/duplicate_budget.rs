use retry_runtime::robust;

static B: retry_runtime::RetryBudget = match retry_runtime::RetryBudget::new(1.0, 0.1, 1.0) { Ok(b) => b, Err(_) => panic!() };

#[robust(budget = B, budget = B)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
