use std::time::Duration;
use retry_runtime::robust;

#[derive(Debug, PartialEq)]
enum Status { Busy }

// A closure over another type than the fn's `Ok` value.
#[robust(on = [Ok(|s: &String| s.is_empty())])]
fn closure() -> std::io::Result<u16> { Ok(200) }

// A pattern of another type.
#[robust(on = [Ok(Status::Busy)])]
fn pattern() -> std::io::Result<u16> { Ok(200) }

// A closure that does not return `bool`.
#[robust(when(Ok(|s: &u16| *s), retries = 1))]
fn not_bool() -> std::io::Result<u16> { Ok(200) }

// A hint over the error instead of the value.
#[robust(when(Ok(|s: &u16| *s == 503), hint = |e: &std::io::Error| Some(Duration::ZERO)))]
fn hint_of_error() -> std::io::Result<u16> { Ok(200) }

fn main() {}
