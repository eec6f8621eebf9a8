use retry_runtime::robust;

// `Io(..)` names `std::io::ErrorKind` variants alone, not by their paths.
#[robust(on = [Io(ErrorKind::NotFound)])]
fn path() -> std::io::Result<()> { Ok(()) }
#[robust(on = [Io(ConnectionReset, std::io::ErrorKind::ConnectionRefused)])]
fn full_path() -> std::io::Result<()> { Ok(()) }

// One `Io` takes every kind: `Io(A) | Io(B)` is `Io(A, B)`.
#[robust(on = [Io(NotFound) | Io(BrokenPipe)])]
fn alternatives() -> std::io::Result<()> { Ok(()) }
#[robust(when(Io(NotFound) | Io(BrokenPipe), retries = 2))]
fn alternatives_in_a_when() -> std::io::Result<()> { Ok(()) }

fn main() {}
