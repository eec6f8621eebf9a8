use retry_runtime::robust;

// Returns neither the fn's `Result` nor a future of it.
#[robust(fallback = |_e: std::io::Error| 0u32)]
async fn not_a_result() -> std::io::Result<u32> { Ok(1) }

// A future of another type.
#[robust(fallback = |_e: std::io::Error| async { Ok::<_, std::io::Error>("zero") })]
async fn wrong_future() -> std::io::Result<u32> { Ok(1) }

// Takes the error by reference.
#[robust(fallback = |e: &std::io::Error| async { Ok(0) })]
async fn by_ref() -> std::io::Result<u32> { Ok(1) }

fn main() {}
