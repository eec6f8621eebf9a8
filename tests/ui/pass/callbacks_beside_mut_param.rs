// Expressions of the attribute beside a parameter each attempt borrows mutably, which compile:
// the fallback (made after the retries), a guard chosen from the parameter (bound before the
// loop, borrowing nothing of it), a closure parameter that shadows the name, a path segment of
// the same name, and a value computed before a `move` closure is made (in an async fn, and in
// a blocking one, which then makes its callbacks before the first attempt too), and names a
// closure binds in its own body; and callbacks that read a unique borrow the body never names
// (no attempt borrows it). (`tests/ui/fail/callback_reads_mut_param.rs` has the ones that do
// not.)
use std::io;

use retry_runtime::{robust, CircuitBreaker};

pub struct Conn { sent: u32, host: String }

impl Conn {
    #[robust(retries = 1, fallback = |_e: io::Error| Ok(self.sent))]
    fn fallback_reads_self(&mut self) -> io::Result<u32> { self.sent += 1; Err(io::ErrorKind::Other.into()) }
}

static BREAKER: CircuitBreaker = match CircuitBreaker::new(10, 5, 0.5, std::time::Duration::from_secs(5), 1) {
    Ok(b) => b,
    Err(_) => panic!(),
};
fn breaker_for(_host: &str) -> &'static CircuitBreaker { &BREAKER }

#[robust(retries = 1, breaker = breaker_for(&conn.host), on_error = |conn: &io::Error, _| eprintln!("{conn}"))]
fn guard_from_mut(conn: &mut Conn) -> io::Result<()> { conn.sent += 1; Err(io::ErrorKind::Other.into()) }

#[robust(retries = 1, on_error = { let n = buf.len(); move |_e: &io::Error, _| eprintln!("{n}") })]
async fn computed_before(buf: &mut Vec<u8>) -> io::Result<()> { buf.push(1); Err(io::ErrorKind::Other.into()) }

#[robust(retries = 1, on_error = { let n = buf.len(); move |_e: &io::Error, _| eprintln!("{n}") })]
fn computed_before_blocking(buf: &mut Vec<u8>) -> io::Result<()> { buf.push(1); Err(io::ErrorKind::Other.into()) }

#[robust(retries = 1, hint = { let n = buf.len() as u64; move |_e: &io::Error| Some(std::time::Duration::from_millis(n)) })]
fn hint_computed_before(buf: &mut Vec<u8>) -> io::Result<()> { buf.push(1); Err(io::ErrorKind::Other.into()) }

mod conn {
    pub fn log(e: &std::io::Error) { eprintln!("{e}") }
}

#[robust(retries = 1, on_error = |e: &io::Error, _| conn::log(e))]
fn path_segment(conn: &mut Conn) -> io::Result<()> { conn.sent += 1; Err(io::ErrorKind::Other.into()) }

// Names the closure binds in its body (a `let`, an `if let`) are its own, not the parameter.
#[robust(retries = 1, on_error = |_e: &io::Error, _| { let v = 1; let _ = v; })]
fn let_in_callback(v: &mut Vec<u8>) -> io::Result<usize> { v.push(1); Ok(v.len()) }

#[robust(retries = 1, on_retry = |r, _| { if let Err(buf) = r { eprintln!("{buf}") } })]
fn if_let_in_callback(buf: &mut Vec<u8>) -> io::Result<usize> { buf.push(1); Ok(buf.len()) }

// An async `&mut self` method whose guard is a field of `self` (borrowed for the whole call):
// its attempts borrow `self` as the body does, not uniquely.
pub struct Client { breaker: CircuitBreaker, sent: u32 }

impl Client {
    #[robust(retries = 1, breaker = self.breaker)]
    async fn send(&mut self) -> io::Result<u32> {
        tokio::task::yield_now().await;
        Ok(self.sent)
    }
}

#[robust(retries = 1, on_error = |_e: &io::Error, _| eprintln!("{}", seen.len()),
         on_retry = |_, _| eprintln!("{:?}", more.as_deref()))]
async fn reads_unnamed(seen: &mut Vec<u8>, more: Option<&mut u32>, n: u32) -> io::Result<u32> {
    tokio::task::yield_now().await;
    if n > 0 { return Err(io::ErrorKind::Other.into()); }
    Ok(n)
}

fn main() {
    let mut client = Client { breaker: CircuitBreaker::new(10, 5, 0.5, std::time::Duration::from_secs(5), 1).unwrap(), sent: 0 };
    let _ = client.send();
    let _ = let_in_callback(&mut Vec::new());
    let _ = if_let_in_callback(&mut Vec::new());
    let mut c = Conn { sent: 0, host: "h".into() };
    let _ = c.fallback_reads_self();
    let _ = guard_from_mut(&mut c);
    let _ = path_segment(&mut c);
    let _ = computed_before(&mut Vec::new());
    let _ = computed_before_blocking(&mut Vec::new());
    let _ = hint_computed_before(&mut Vec::new());
    let _ = reads_unnamed(&mut Vec::new(), None, 1);
}
