use retry_runtime::robust;

struct Token(u32);

#[robust(retries = 3)]
fn f(token: Token) -> Result<u32, String> { Ok(token.0) }

fn main() {}
