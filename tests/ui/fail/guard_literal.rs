// A guard is a value shared by every call: a literal (`limit = 4` meant as the number of
// slots) is an error that shows how to declare one.
use retry_runtime::robust;

#[robust(limit = 4)]
async fn limit_as_a_number() -> std::io::Result<()> { Ok(()) }

#[robust(budget = 10.0, breaker = -1)]
fn budget_and_breaker_as_numbers() -> std::io::Result<()> { Ok(()) }

#[robust(throttle = "2.0")]
fn throttle_as_a_string() -> std::io::Result<()> { Ok(()) }

fn main() {}
