// An owned argument that is not `Clone` is reported at its type when a pattern binds it
// (each attempt destructures a clone), or when a hedged fn holds it (each hedge gets a
// clone), as it is at its name otherwise (`non_clone_arg.rs`), not at the whole attribute.
use retry_runtime::robust;

struct Token(u32);

struct Wrapped(Token);

#[robust(retries = 3)]
fn pattern(Wrapped(token): Wrapped) -> Result<u32, String> {
    Ok(token.0)
}

#[robust(retries = 3)]
fn tuple((token, n): (Token, u32)) -> Result<u32, String> {
    Ok(token.0 + n)
}

#[robust(retries = 3, hedge(after = 10ms))]
async fn hedged(token: Token) -> Result<u32, String> {
    std::future::ready(()).await;
    Ok(token.0)
}

fn main() {}
