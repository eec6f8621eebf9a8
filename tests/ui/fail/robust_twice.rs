// Two `#[robust]` on one fn: the outer one would retry the inner one's whole call, and the
// attempts multiply (two `retries = 2` make 9 attempts). Under `cfg_attr` too.
use retry_runtime::robust;

#[robust(retries = 2)]
#[robust(retries = 2)]
fn twice() -> Result<u32, String> { Ok(1) }

#[robust(retries = 1)]
#[cfg_attr(all(), retry_runtime::robust(retries = 1))]
async fn twice_under_cfg_attr() -> Result<u32, String> { Ok(1) }

// (Fine: one attribute; a `cfg_attr` whose attribute only mentions `robust`.)
#[robust(retries = 1)]
#[cfg_attr(all(), doc = "robust")]
fn once() -> Result<u32, String> { Ok(1) }

fn main() {}
