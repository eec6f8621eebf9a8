// A method `#[async_trait]` rewrote before `#[robust]` ran: on a trait's impl, it turns each
// `async fn` into a fn returning `Pin<Box<dyn Future>>`, which is not a `Result` (written here
// as `#[async_trait]` leaves it, without the dependency). The error says what happened and
// what to write instead.
use std::future::Future;
use std::pin::Pin;

use retry_runtime::robust;

struct Client;

impl Client {
    #[robust(retries = 2)]
    fn fetch<'a>(&'a self) -> Pin<Box<dyn Future<Output = std::io::Result<u32>> + Send + 'a>> {
        Box::pin(async move { Ok(1) })
    }
}

fn main() {}
