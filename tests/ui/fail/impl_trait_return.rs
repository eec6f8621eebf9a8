use retry_runtime::robust;

#[robust(retries = 3)]
fn f() -> Result<impl std::fmt::Display, String> {
    Ok(3)
}

fn main() {}
