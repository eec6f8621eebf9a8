// A name a parameter's pattern binds can be read by the attribute's expressions: bound there as
// each attempt binds it (from a clone of an owned argument, or the reference passed in), so
// every pattern that compiles without the attribute compiles with it, and the names have the
// body's types.
use std::io;
use std::marker::PhantomData;

use retry_runtime::robust;

// An or-pattern whose binding is `Copy`.
#[robust(retries = 2, on_retry = |_, _| eprintln!("{n}"))]
fn or_pattern((Ok(n) | Err(n)): Result<u32, u32>) -> io::Result<u32> { Ok(n) }

// A pattern through a reference it does not write (`lo`, `hi`: `&u16`).
#[robust(retries = 2, on_retry = |_, _| eprintln!("{id} {lo} {hi}"))]
fn through_a_reference((id, (lo, hi)): (u32, &(u16, u16))) -> io::Result<u32> {
    Ok(id + u32::from(*lo) + u32::from(*hi))
}

// A unit struct in the pattern.
#[robust(retries = 2, on_retry = |_, _| eprintln!("{id}"))]
fn unit_struct<T>((id, PhantomData): (u32, PhantomData<T>)) -> io::Result<u32> { Ok(id) }

// An unsized binding, and `mut`, `ref` and `@` bindings.
#[robust(retries = 2, on_retry = |_, _| eprintln!("{} {} {all:?}", rest.len(), first))]
fn bindings([rest @ ..]: &[u8], (mut first, ref second): (u8, String), all @ (_, _): (u8, u8)) -> io::Result<u8> {
    first += second.len() as u8;
    Ok(first + rest.len() as u8 + all.0)
}

// A hedged fn, and a key of the guard read from the pattern.
#[derive(Clone)]
struct State<S>(S);
static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(4, 4) {
    Ok(l) => l,
    Err(_) => panic!(),
};
#[robust(retries = 2, hedge(after = 10ms), limit = LIMIT, on_retry = |_, _| eprintln!("{}", app.len()))]
async fn hedged(State(app): State<String>, (host, port): (String, u16)) -> io::Result<String> {
    Ok(format!("{app}{host}{port}"))
}

fn main() {
    let _ = or_pattern(Ok(1));
    let _ = through_a_reference((1, &(2, 3)));
    let _ = unit_struct::<u8>((1, PhantomData));
    let _ = bindings(&[1], (1, "x".into()), (1, 2));
    let _ = hedged(State("a".into()), ("b".into(), 1));
}
