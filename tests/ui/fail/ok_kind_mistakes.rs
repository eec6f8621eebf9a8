use retry_runtime::robust;

#[derive(Debug, PartialEq)]
enum Status { Busy, Done }

#[robust(on = [Ok(), Ok, Ok(s), Ok(Timeout), Ok(Status::Busy, Status::Done)])]
fn kinds(s: u32) -> std::io::Result<Status> { let _ = s; Ok(Status::Done) }

#[robust(on = [Io, Ok(Status::Busy), Ok(Status::Busy), Ok(_)])]
fn duplicate() -> std::io::Result<Status> { Ok(Status::Done) }

#[robust(when(Io, retries = 2, hint = |e: &std::io::Error| None))]
fn hints() -> std::io::Result<Status> { Ok(Status::Done) }

fn main() {}
