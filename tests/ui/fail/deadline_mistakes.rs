use retry_runtime::robust;

#[robust(deadline = 0)]
fn zero() -> std::io::Result<()> { Ok(()) }

#[robust(deadline = "soon", deadlin = 1)]
fn misread() -> std::io::Result<()> { Ok(()) }

#[robust(deadline = 1s, deadline = 2s)]
fn twice() -> std::io::Result<()> { Ok(()) }

#[robust(when(Io, deadline = 1s))]
fn per_kind() -> std::io::Result<()> { Ok(()) }

#[robust(deadline = -1min)]
fn unit() -> std::io::Result<()> { Ok(()) }

// Bounds the deadline makes dead: a timeout (or an adaptive timeout's `min`) or a `max_delay`
// no shorter than the deadline never applies.
#[robust(deadline = 2s, timeout = 5s)]
async fn timeout_past_the_deadline() -> std::io::Result<()> { Ok(()) }
#[robust(deadline = 2s, timeout = adaptive(p = 99, min = 2s, max = 5s))]
async fn adaptive_min_at_the_deadline() -> std::io::Result<()> { Ok(()) }
#[robust(deadline = 2s, max_delay = 10s, when(Io, max_delay = 2s))]
async fn max_delay_past_the_deadline() -> std::io::Result<()> { Ok(()) }

fn main() {}
