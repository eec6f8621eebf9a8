use retry_runtime::robust;

#[robust]
const fn f() -> Result<u32, ()> { Ok(1) }

fn main() {}
