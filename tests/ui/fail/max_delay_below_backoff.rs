use retry_runtime::robust;

// A retry is made only if its backoff ends before `max_delay` is spent: a rule whose shortest
// delay (with its jitter and scale) is not below its `max_delay` never retries.
#[robust(retries = 5, max_delay = 1s, backoff = constant(base = 2s), jitter = none)]
fn constant_past_max_delay() -> std::io::Result<()> { Ok(()) }

// A unit dropped: 2 seconds beside a 5 s base.
#[robust(max_delay = 2, backoff = exponential(base = 5s, max = 30s), jitter = equal)]
fn equal_jitter_past_max_delay() -> std::io::Result<()> { Ok(()) }

// A `when` rule's own `max_delay`, below the backoff it inherits.
#[robust(backoff = constant(base = 1s), jitter = none, when(Io, max_delay = 500ms))]
fn a_when_rules_max_delay() -> std::io::Result<()> { Ok(()) }

// A `when` rule's own backoff, past the `max_delay` it inherits.
#[robust(max_delay = 3s, when(Io, backoff = fibonacci(base = 3s, max = 9s), jitter = none))]
fn a_when_rules_backoff() -> std::io::Result<()> { Ok(()) }

// Scaled past it.
#[robust(max_delay = 1s, backoff = constant(base = 600ms), jitter = none, scale = 2)]
fn scaled_past_max_delay() -> std::io::Result<()> { Ok(()) }

// The default backoff (exponential from 100 ms) with no jitter, under a `max_delay` of 50 ms;
// and with equal jitter (from 50 ms) under one of 50 ms.
#[robust(max_delay = 50ms, jitter = none)]
fn default_backoff_past_max_delay() -> std::io::Result<()> { Ok(()) }
#[robust(max_delay = 50ms, when(Io, jitter = equal))]
fn default_backoff_in_a_when() -> std::io::Result<()> { Ok(()) }

// (Fine: full jitter can draw less; a hint may choose the delay; the delay is below.)
#[robust(max_delay = 1s, backoff = constant(base = 2s), jitter = full)]
fn fine_full_jitter() -> std::io::Result<()> { Ok(()) }
#[robust(max_delay = 1s, backoff = constant(base = 2s), jitter = none,
         hint = |_e: &std::io::Error| Some(std::time::Duration::from_millis(10)))]
fn fine_hinted() -> std::io::Result<()> { Ok(()) }
#[robust(max_delay = 1s, backoff = constant(base = 999ms), jitter = none)]
fn fine_below() -> std::io::Result<()> { Ok(()) }
#[robust(max_delay = 101ms, jitter = none)]
fn fine_default_below() -> std::io::Result<()> { Ok(()) }
#[robust(max_delay = 50ms)]
fn fine_default_full_jitter() -> std::io::Result<()> { Ok(()) }

fn main() {}
