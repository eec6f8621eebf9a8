use retry_runtime::robust;

#[robust(retrys = 3)]
fn f() -> Result<u32, String> { Ok(3) }

fn g() -> u32 {
    f().unwrap()
}

fn main() {
    let _ = g();
}
