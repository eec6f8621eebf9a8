use retry_runtime::robust;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Status {
    Busy,
    Done,
}

// A `when` over values takes a `hint` too, and the messages say so.
#[robust(when(Ok(Status::Busy)))]
fn no_override() -> std::io::Result<Status> { Ok(Status::Done) }
#[robust(when(Ok(Status::Busy), retries = 2, deadline = 1s))]
fn a_key_of_the_whole_call() -> std::io::Result<Status> { Ok(Status::Done) }
#[robust(when(Ok(Status::Busy), retries = 2, hnt = |_s: &Status| None))]
fn a_misspelled_key() -> std::io::Result<Status> { Ok(Status::Done) }

fn main() {}
