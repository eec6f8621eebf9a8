use retry_runtime::robust;

struct S;
impl S {
    #[robust(retries = 3)]
    fn consume(self) -> Result<(), String> { Ok(()) }
}


// A pointer to `self` is owned too: the expansion reborrows only a reference for each attempt.
struct P;
impl P {
    #[robust(retries = 3)]
    async fn pinned(self: std::pin::Pin<&mut Self>) -> Result<(), String> { tokio::task::yield_now().await; Ok(()) }

    #[robust(retries = 3)]
    fn shared(self: std::sync::Arc<Self>) -> Result<(), String> { Ok(()) }
}

fn main() {}
