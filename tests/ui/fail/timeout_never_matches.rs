use retry_runtime::robust;

// No `timeout`, and `String` has no `std::error::Error` view: `Timeout` could never match.
#[robust(on = [Timeout])]
fn f() -> Result<(), String> { Err("no".into()) }

#[robust(timeout = none, when(Timeout, retries = 1))]
fn g() -> Result<(), String> { Err("no".into()) }

// A `deadline` alone: an attempt it cuts is never retried (no time is left), so `Timeout`
// could only match a timeout inside the error, which `String` cannot show.
#[robust(deadline = 2s, on = [Timeout])]
fn h() -> Result<(), String> { Err("no".into()) }

#[robust(deadline = 2s, when(Timeout, retries = 3))]
fn i() -> Result<(), String> { Err("no".into()) }

// Beside a throttle a deadline alone is enough: a `Timeout` rule makes an attempt the
// deadline cuts count as not accepted (fine).
static THROTTLE: retry_runtime::AdaptiveThrottle =
    match retry_runtime::AdaptiveThrottle::new(2.0, std::time::Duration::from_secs(10)) {
        Ok(t) => t,
        Err(_) => panic!(),
    };
#[derive(Debug)]
pub struct MyErr;
impl From<retry_runtime::Rejected> for MyErr {
    fn from(_: retry_runtime::Rejected) -> Self { MyErr }
}
#[robust(deadline = 2s, throttle = THROTTLE, on = [Timeout])]
fn throttled() -> Result<(), MyErr> { Err(MyErr) }

fn main() {}
