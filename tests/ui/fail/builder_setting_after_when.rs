// A `when` rule starts from the `on` rule's settings as they are when it is added: a setting
// of the `on` rule made after it would silently not reach it, so it is an error there.
use std::io::ErrorKind;
use std::time::Duration;

use retry_runtime::kind::Io;
use retry_runtime::{Constant, Policy};

fn main() {
    let _ = Policy::builder()
        .when(Io::of([ErrorKind::TimedOut]), |s| s.backoff(Constant::new(Duration::from_millis(200))))
        .retries(10);
    let _ = Policy::builder()
        .retries(10)
        .when(Io::of([ErrorKind::TimedOut]), |s| s.retries(2))
        .max_delay(Duration::from_secs(30));
}
