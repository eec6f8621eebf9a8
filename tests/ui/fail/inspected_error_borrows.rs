// `Io` (and `Timeout` where it must look into the error) downcasts the error and its
// `source()` chain through `std::error::Error`, which needs a `'static` error type: an error
// type that borrows, with no `Inspect` impl, is rustc's lifetime error at the kind (not on the
// whole attribute).
use retry_runtime::robust;

#[derive(Debug)]
struct ParseError<'a>(&'a str);
impl std::fmt::Display for ParseError<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}
impl std::error::Error for ParseError<'_> {}

#[robust(retries = 2, on = [Io])]
fn io_kind<'a>(s: &'a str) -> Result<u32, ParseError<'a>> {
    Err(ParseError(s))
}

#[robust(retries = 2, on = [Io(ConnectionReset)])]
fn boxed<'a>(s: &'a str) -> Result<u32, Box<dyn std::error::Error + 'a>> {
    Err(s.into())
}

// A generic error type with no `'static` bound: E0310 and its `+ 'static`, at the kind.
#[robust(retries = 2, on = [Io])]
fn generic<E: std::error::Error + From<std::io::Error>>() -> Result<u32, E> {
    Err(std::io::Error::other("x").into())
}

fn main() {}
