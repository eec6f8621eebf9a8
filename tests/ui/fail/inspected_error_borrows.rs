// `Io` (and `Timeout` where it must look into the error) downcasts the error and its
// `source()` chain through `std::error::Error`, which needs a `'static` error type: an error
// type written with a borrow is an error at the kind, not a lifetime error on the attribute.
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

// A blocking fn without a timeout: `Timeout` can only find one in the error.
#[robust(retries = 2, when(Timeout, retries = 1))]
fn untimed_timeout(s: &str) -> Result<u32, &ParseError<'static>> {
    let _ = s;
    Err(&ParseError("static"))
}

#[robust(retries = 2, on = [Io(ConnectionReset)])]
fn boxed<'a>(s: &'a str) -> Result<u32, Box<dyn std::error::Error + 'a>> {
    Err(s.into())
}

// A generic error type with no `'static` bound: rustc's error, at the kind.
#[robust(retries = 2, on = [Io])]
fn generic<E: std::error::Error + From<std::io::Error>>() -> Result<u32, E> {
    Err(std::io::Error::other("x").into())
}

fn main() {}
