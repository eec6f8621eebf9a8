use retry_runtime::robust;

#[robust(retries = 3)]
struct NotAFunction;

// An item with a body and `fn` among its tokens (in a type), which is not a fn either.
struct Wrapper(u8);

#[robust(retries = 3)]
impl From<fn() -> u8> for Wrapper {
    fn from(f: fn() -> u8) -> Self {
        Wrapper(f())
    }
}

fn main() {}
