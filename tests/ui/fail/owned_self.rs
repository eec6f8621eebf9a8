use retry_runtime::robust;

struct S;
impl S {
    #[robust(retries = 3)]
    fn consume(self) -> Result<(), String> { Ok(()) }
}

fn main() {}
