//! An owned parameter that is not `Clone`, read by the body and by a `move` callback (which
//! gets a clone of its own) or by the callbacks alone: one error, at the parameter.
use retry_runtime::robust;

struct Token(u32);

#[robust(retries = 3, on_error = move |_e: &String, _n| { let _ = token.0; })]
fn body_and_callback(token: Token) -> Result<u32, String> { Ok(token.0) }

#[robust(
    retries = 3,
    on_error = move |_e: &String, _n| { let _ = token.0; },
    hint = move |_e: &String| { let _ = token.0; None }
)]
fn callbacks_only(token: Token) -> Result<u32, String> { Ok(0) }

fn main() {}
