use retry_runtime::robust;

#[derive(Debug)]
enum MyError {
    ServerBusy,
    Other,
}

// `ServerBusy` is not in scope (it is `MyError::ServerBusy`): as a pattern it would bind
// every error.
#[robust(on = [ServerBusy])]
fn f() -> Result<(), MyError> { Err(MyError::Other) }

fn main() {}
