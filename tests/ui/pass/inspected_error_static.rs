// Error types the `Io` and `Timeout` kinds can look into, and borrowed ones where no kind
// needs to: no error.
use retry_runtime::robust;
use std::io;

#[derive(Debug)]
struct ParseError<'a>(&'a str);
impl std::fmt::Display for ParseError<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}
impl std::error::Error for ParseError<'_> {}

// A lifetime declared to outlive `'static` is `'static`.
#[robust(retries = 2, on = [Io])]
fn outlives_static<'a: 'static>(s: &'a str) -> Result<u32, ParseError<'a>> {
    Err(ParseError(s))
}

#[robust(retries = 2, on = [Io])]
fn static_borrow() -> Result<u32, &'static ParseError<'static>> {
    Err(&ParseError("static"))
}

#[robust(retries = 2, on = [Io])]
fn generic<E: std::error::Error + 'static + From<io::Error>>() -> Result<u32, E> {
    Err(io::Error::other("x").into())
}

// A borrowed error matched by a pattern or a closure: nothing looks into it.
#[robust(retries = 2, on = [ParseError(""), |e: &ParseError<'_>| e.0.len() > 3])]
fn by_pattern<'a>(s: &'a str) -> Result<u32, ParseError<'a>> {
    Err(ParseError(s))
}

// The ok type's borrow does not matter.
#[robust(retries = 2, on = [Io])]
fn borrowed_ok<'a>(s: &'a str) -> Result<&'a str, io::Error> {
    Ok(s)
}

fn main() {
    let _ = outlives_static("x");
    let _ = static_borrow();
    let _ = generic::<io::Error>();
    let _ = by_pattern("x");
    let _ = borrowed_ok("x");
}
