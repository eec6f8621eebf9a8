use retry_runtime::robust;

#[robust(attempt = 3)]
fn f() -> Result<(), String> { Ok(()) }

// `_` binds nothing (a blocking fn's `timeout` would then go unread, silently).
#[robust(timeout = "2s", attempt = _)]
fn g() -> std::io::Result<()> { Err(std::io::ErrorKind::Other.into()) }

// A path keyword cannot be bound: `self` (in a method too), `Self`, `crate`, `super`.
#[robust(timeout = "2s", attempt = self)]
fn h() -> std::io::Result<()> { Ok(()) }
struct S;
impl S {
    #[robust(timeout = "2s", attempt = self)]
    fn method(&self) -> std::io::Result<()> { Ok(()) }
    #[robust(timeout = "2s", attempt = Self)]
    fn type_name(&self) -> std::io::Result<()> { Ok(()) }
}
#[robust(timeout = "2s", attempt = crate)]
fn k() -> std::io::Result<()> { Ok(()) }

fn main() {}
