use retry_runtime::robust;

struct S;

impl S {
    #[robust(retrys = 1)]
    fn owned(self) -> std::io::Result<()> { Ok(()) }

    #[robust(jitter = ful)]
    fn no_return(&self) {}
}

#[robust(backof = none)]
fn opaque() -> Result<impl std::fmt::Display, std::io::Error> { Ok(1) }

fn main() {}
