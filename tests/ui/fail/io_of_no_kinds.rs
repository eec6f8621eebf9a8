// `Io::of([])` would match every I/O error (`Io<0>` is `Io::ANY`): a build error that says to
// list the kinds or write `Io::ANY`.
use retry_runtime::kind::Io;
use retry_runtime::Policy;

fn main() {
    let policy = Policy::builder().on(Io::of([])).build();
    let _ = policy;
}
