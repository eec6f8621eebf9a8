use retry_runtime::robust;

static NOT_A_BUDGET: u32 = 3;

#[robust(budget = NOT_A_BUDGET)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}
