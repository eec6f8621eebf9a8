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

// A borrowed error that gives its view through `Inspect` (an owned source): no downcast of
// the error itself.
#[derive(Debug)]
struct RequestError<'a> {
    url: &'a str,
    source: io::Error,
}
impl retry_runtime::Inspect for RequestError<'_> {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}
#[robust(retries = 2, on = [Io(ConnectionReset)])]
fn inspected<'a>(url: &'a str) -> Result<u32, RequestError<'a>> {
    Err(RequestError { url, source: io::ErrorKind::ConnectionReset.into() })
}

// A type that names a lifetime but does not borrow it (`TryFromSliceError`), and an elided
// output lifetime that is `'static`.
#[robust(retries = 2, on = [Io])]
fn header<'a>(b: &'a [u8]) -> Result<u32, <[u8; 4] as TryFrom<&'a [u8]>>::Error> {
    <[u8; 4]>::try_from(b).map(u32::from_le_bytes)
}
static STATIC_ERROR: std::sync::LazyLock<io::Error> =
    std::sync::LazyLock::new(|| io::Error::other("static"));
#[allow(mismatched_lifetime_syntaxes)]
#[robust(retries = 2, on = [Io])]
fn elided_static(_name: &'static str) -> Result<u32, &io::Error> {
    Err(&STATIC_ERROR)
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
    let _ = inspected("http://127.0.0.1/").map_err(|e| e.url.len());
    let _ = header(&[1, 2, 3, 4]);
    let _ = elided_static("x");
}
