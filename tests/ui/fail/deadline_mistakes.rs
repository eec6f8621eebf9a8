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

fn main() {}
