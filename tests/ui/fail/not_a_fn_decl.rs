use retry_runtime::robust;

trait T {
    #[robust]
    fn f(&self) -> std::io::Result<()>;
}

#[robust]
impl Clone for Box<u8> {}

fn main() {}
