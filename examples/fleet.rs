//! A fleet: 50 instances of a client, each sending 1 request per second to a dependency that
//! goes down for 30 s, with per-process guards and with guards shared on Redis (issue 14).
//!
//! Each client retries up to 3 times (exponential backoff 100 ms .. 1 s, no jitter), under a
//! retry budget and behind a circuit breaker:
//! - **per-process**: each client has its own breaker (window 50 attempts, at least 20, opens
//!   at a 50% failure ratio, 10 s break, 1 probe) and its own budget (5 tokens, 0.1 earned per
//!   call, 1 per retry);
//! - **shared**: the same breaker and budget locally, shared by the fleet
//!   (`retry_runtime::guard::fleet`): the breaker opens for all when, over the last 10 s, the
//!   fleet's attempts reach 20 with a 50% failure ratio; the budget is 10 tokens for the whole
//!   fleet (0.1 per call, 1 per retry), each client leasing one retry at a time once it
//!   retries; every client syncs every 200 ms.
//!
//! Two runs:
//! 1. **the picture and the first table** come from a deterministic simulation: virtual time,
//!    the real guards and policies (each request a [`retry_runtime::Call`]), the fleet on a
//!    [`MemoryStore`] (the Redis scripts' rules in this process), synced by hand every 200 ms;
//! 2. **the second table** is a live run in real time, 10 times faster (10 requests per
//!    second per client, a 3 s outage, every duration divided by 10, syncs every 20 ms), each
//!    client a thread with a `Fleet` of its own on a real `redis-server` started on a free
//!    loopback port, or, when none is installed, on an embedded [`MemoryStore`] (the output
//!    says which). Its numbers depend on the machine's timing.
//!
//! `cargo run --release --example fleet` prints both tables and writes `docs/fleet.svg`;
//! `-- --check` runs only the simulation and verifies the committed picture.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::error::Error;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use plotters::prelude::*;

#[path = "../retry-runtime/src/guard/fleet/redis_server.rs"]
mod redis_server;
mod support;

use retry_runtime::guard::fleet::{Fleet, FleetOptions, MemoryStore, SharedBreaker, SharedBudget};
use retry_runtime::time::{Clock, VirtualTime};
use retry_runtime::{
    CircuitBreaker, Exponential, NoJitter, Policy, RetryBudget, RetryPolicy, Step,
};
use support::{PALETTE, legend, line, write_or_check};

const CLIENTS: usize = 50;
/// Seconds (divided by the time scale in the live run).
const DOWN_FROM: u64 = 20;
const DOWN_UNTIL: u64 = 50;
const HORIZON: u64 = 80;

/// A failed request.
#[derive(Debug)]
enum Failure {
    /// The dependency refused it.
    Down,
    /// The breaker rejected it before it was sent.
    Rejected,
}

impl From<retry_runtime::Open> for Failure {
    fn from(_: retry_runtime::Open) -> Self {
        Failure::Rejected
    }
}

/// Every duration of the scenario, divided by `scale`.
#[derive(Debug, Clone, Copy)]
struct Scale(u32);

impl Scale {
    fn d(self, d: Duration) -> Duration {
        d / self.0
    }
    fn secs(self, s: u64) -> Duration {
        self.d(Duration::from_secs(s))
    }
    fn ms(self, ms: u64) -> Duration {
        self.d(Duration::from_millis(ms))
    }
    fn local_breaker(self) -> CircuitBreaker {
        CircuitBreaker::new(50, 20, 0.5, self.secs(10), 1).expect("valid")
    }
    fn local_budget(self) -> RetryBudget {
        RetryBudget::new(5.0, 0.1, 1.0).expect("valid")
    }
    fn options(self) -> FleetOptions {
        FleetOptions::new()
            .interval(self.ms(200))
            .timeout(Duration::from_millis(100))
            .max_reconnect_delay(Duration::from_secs(1))
    }
    fn shared(self, fleet: &Fleet) -> (SharedBreaker, SharedBudget) {
        let breaker = fleet
            .breaker("dependency", self.local_breaker(), self.secs(10), 20)
            .expect("valid");
        let budget = fleet
            .budget(
                "dependency",
                RetryBudget::new(10.0, 0.1, 1.0).expect("valid"),
                self.local_budget(),
            )
            .expect("valid");
        (breaker, budget)
    }
    fn backoff(self) -> Exponential {
        Exponential::new(self.ms(100), self.secs(1), 2.0).expect("valid")
    }
}

/// What one run measured.
#[derive(Debug, Clone, Default)]
struct Outcome {
    /// Requests the clients made while the dependency was down.
    made_down: u64,
    /// Attempts that reached the dead dependency.
    sent_down: u64,
    /// Per client: when (since the outage began) the breaker first rejected a request.
    stopped: Vec<Option<Duration>>,
    /// Attempts that reached the dependency in each second (simulation only).
    per_second: Vec<u64>,
    /// Requests that succeeded, of all made.
    succeeded: u64,
    made: u64,
}

impl Outcome {
    fn all_stopped(&self) -> Option<Duration> {
        self.stopped
            .iter()
            .try_fold(Duration::ZERO, |m, s| s.map(|s| m.max(s)))
    }
    fn row(&self, name: &str) -> String {
        let stop = match self.all_stopped() {
            Some(d) => format!("{:.1} s", d.as_secs_f64()),
            None => {
                let n = self.stopped.iter().filter(|s| s.is_some()).count();
                format!("never ({n} of {CLIENTS} stopped)")
            }
        };
        format!(
            "| {name} | {} | {} | {stop} | {:.2} |",
            self.made_down,
            self.sent_down,
            self.sent_down as f64 / self.made_down.max(1) as f64
        )
    }
}

fn table(title: &str, rows: &[(&str, &Outcome)]) {
    println!("{title}\n");
    println!(
        "| guards | requests during the outage | attempts that reached the dead dependency | time until every client stopped sending | load multiplier |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (name, o) in rows {
        println!("{}", o.row(name));
    }
    println!();
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Each client's fleet syncs (shared guards only).
    Sync { client: usize },
    /// A client makes a new request.
    Arrive { client: usize },
    /// A request starts an attempt (first or retry).
    Attempt { call: usize },
}

/// The deterministic simulation: `policies[i]` is client i's, `fleets` the manual fleets to
/// sync (none for per-process guards).
fn simulate<P: RetryPolicy<(), Failure>>(
    time: &VirtualTime,
    policies: &[P],
    fleets: &[Fleet],
) -> Outcome {
    let start = time.now();
    let down =
        |t: Duration| t >= Duration::from_secs(DOWN_FROM) && t < Duration::from_secs(DOWN_UNTIL);
    let mut queue = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |queue: &mut BinaryHeap<_>, at: Duration, ev: Event| {
        seq += 1;
        queue.push(Reverse((at, seq, ev)));
    };
    let horizon = Duration::from_secs(HORIZON);
    for client in 0..CLIENTS {
        // The clients' requests are spread evenly over each second, their syncs over 200 ms.
        let offset = Duration::from_millis(1000 * client as u64 / CLIENTS as u64);
        push(&mut queue, offset, Event::Arrive { client });
        if !fleets.is_empty() {
            let sync = Duration::from_millis(4 * client as u64);
            push(&mut queue, sync, Event::Sync { client });
        }
    }
    let mut o = Outcome {
        stopped: vec![None; CLIENTS],
        per_second: vec![0; HORIZON as usize],
        ..Outcome::default()
    };
    let mut calls = Vec::new();
    let mut owner = Vec::new();
    let mut now = Duration::ZERO;
    while let Some(Reverse((at, _, ev))) = queue.pop() {
        time.advance(at - now);
        now = at;
        match ev {
            Event::Sync { client } => {
                fleets[client].sync(start + now);
                if now + Duration::from_millis(200) < horizon {
                    push(
                        &mut queue,
                        now + Duration::from_millis(200),
                        Event::Sync { client },
                    );
                }
            }
            Event::Arrive { client } => {
                o.made += 1;
                if down(now) {
                    o.made_down += 1;
                }
                calls.push(policies[client].start_seeded(o.made));
                owner.push(client);
                push(
                    &mut queue,
                    now,
                    Event::Attempt {
                        call: calls.len() - 1,
                    },
                );
                if now + Duration::from_secs(1) < horizon {
                    push(
                        &mut queue,
                        now + Duration::from_secs(1),
                        Event::Arrive { client },
                    );
                }
            }
            Event::Attempt { call } => {
                let client = owner[call];
                if calls[call].admit::<(), Failure>().is_some() {
                    // Rejected by the open breaker: the call has failed without being sent.
                    if down(now) && o.stopped[client].is_none() {
                        o.stopped[client] = Some(now - Duration::from_secs(DOWN_FROM));
                    }
                    continue;
                }
                // (An attempt past the horizon, a retry's, is not drawn.)
                if let Some(n) = o.per_second.get_mut(now.as_secs() as usize) {
                    *n += 1;
                }
                let result = if down(now) {
                    o.sent_down += 1;
                    Err(Failure::Down)
                } else {
                    Ok(())
                };
                match calls[call].settle(result, false) {
                    Step::Retry(delay) => push(&mut queue, now + delay, Event::Attempt { call }),
                    Step::Return(Ok(())) => o.succeeded += 1,
                    Step::Return(Err(_)) => {}
                }
            }
        }
    }
    o
}

/// Every client's policy: 3 retries on `scale`'s backoff, no jitter, the budget and breaker
/// given (local or shared ones, of other types: a fn would have to name the policy's type for
/// each), and an `env` if one is given.
macro_rules! client_policy {
    ($scale:expr, $budget:expr, $breaker:expr $(, env = $env:expr)?) => {
        Policy::builder()
            .retries(3)
            .backoff($scale.backoff())
            .jitter(NoJitter)
            $(.env($env))?
            .budget($budget)
            .breaker($breaker)
            .build()
            .expect("valid")
    };
}

fn simulations() -> (Outcome, Outcome) {
    let one = Scale(1);
    let time = VirtualTime::new();
    let policy = |b, br| client_policy!(one, b, br, env = time.clone());
    let local: Vec<(RetryBudget, CircuitBreaker)> = (0..CLIENTS)
        .map(|_| (one.local_budget(), one.local_breaker()))
        .collect();
    let policies: Vec<_> = local.iter().map(|(b, br)| policy(b, br)).collect();
    let per_process = simulate(&time, &policies, &[]);

    // The fleets read the simulation's clock, as its policies do: whether a fleet's view is
    // fresh is judged on it, not on the real time the simulation takes.
    let time = VirtualTime::new();
    let store = MemoryStore::new();
    let fleets: Vec<Fleet> = (0..CLIENTS)
        .map(|_| Fleet::manual_on(&store, one.options(), time.clone()).expect("valid"))
        .collect();
    let guards: Vec<(SharedBreaker, SharedBudget)> = fleets.iter().map(|f| one.shared(f)).collect();
    let policy = |b, br| client_policy!(one, b, br, env = time.clone());
    let policies: Vec<_> = guards.iter().map(|(br, b)| policy(b, br)).collect();
    let shared = simulate(&time, &policies, &fleets);
    (per_process, shared)
}

/// The live run: one thread per client, real time divided by `scale`.
fn live<P: RetryPolicy<(), Failure> + Sync>(scale: Scale, policies: &[P]) -> Outcome {
    let start = Instant::now() + Duration::from_millis(50);
    let down_from = scale.secs(DOWN_FROM);
    let down_until = scale.secs(DOWN_UNTIL);
    let sent_down = AtomicU64::new(0);
    let made_down = AtomicU64::new(0);
    let succeeded = AtomicU64::new(0);
    let stopped = Mutex::new(vec![None; CLIENTS]);
    let period = scale.secs(1);
    std::thread::scope(|s| {
        for (client, policy) in policies.iter().enumerate() {
            let (sent_down, made_down, succeeded, stopped) =
                (&sent_down, &made_down, &succeeded, &stopped);
            s.spawn(move || {
                let offset = period * client as u32 / CLIENTS as u32;
                for k in 0..HORIZON as u32 {
                    let at = start + offset + period * k;
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    let t = Instant::now() - start;
                    let is_down = |t: Duration| t >= down_from && t < down_until;
                    if is_down(t) {
                        made_down.fetch_add(1, Ordering::Relaxed);
                    }
                    let r = policy.call(|_| {
                        if is_down(Instant::now() - start) {
                            sent_down.fetch_add(1, Ordering::Relaxed);
                            Err(Failure::Down)
                        } else {
                            Ok(())
                        }
                    });
                    match r {
                        Ok(()) => {
                            succeeded.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Failure::Rejected) if is_down(t) => {
                            let mut s = stopped.lock().unwrap();
                            if s[client].is_none() {
                                // In the scenario's seconds.
                                s[client] = Some((t - down_from) * scale.0);
                            }
                        }
                        Err(_) => {}
                    }
                }
            });
        }
    });
    Outcome {
        made_down: made_down.into_inner(),
        sent_down: sent_down.into_inner(),
        stopped: stopped.into_inner().unwrap(),
        per_second: Vec::new(),
        succeeded: succeeded.into_inner(),
        made: (CLIENTS as u64) * HORIZON,
    }
}

fn live_runs() -> Result<(), Box<dyn Error>> {
    let scale = Scale(10);
    let policy = |b, br| client_policy!(scale, b, br);
    let local: Vec<(RetryBudget, CircuitBreaker)> = (0..CLIENTS)
        .map(|_| (scale.local_budget(), scale.local_breaker()))
        .collect();
    let policies: Vec<_> = local.iter().map(|(b, br)| policy(b, br)).collect();
    let per_process = live(scale, &policies);

    let server = match redis_server::unavailable() {
        None => Some(redis_server::RedisServer::start()?),
        Some(_) => None,
    };
    let store = MemoryStore::new();
    let fleets: Vec<Fleet> = (0..CLIENTS)
        .map(|_| match &server {
            Some(s) => Fleet::connect(&s.url(), scale.options()),
            None => Fleet::in_memory(&store, scale.options()),
        })
        .collect::<Result<_, _>>()?;
    for f in &fleets {
        if !f.wait_connected(Duration::from_secs(5)) {
            return Err("a fleet did not connect".into());
        }
    }
    let guards: Vec<(SharedBreaker, SharedBudget)> =
        fleets.iter().map(|f| scale.shared(f)).collect();
    // The same policy, with the shared guards (another type).
    let policy = |b, br| client_policy!(scale, b, br);
    let policies: Vec<_> = guards.iter().map(|(br, b)| policy(b, br)).collect();
    let shared = live(scale, &policies);
    let fallbacks: u64 = fleets.iter().map(Fleet::fallbacks).sum();
    let on = match &server {
        Some(_) => "a real redis-server (started on a free loopback port)",
        None => "the EMBEDDED MemoryStore: redis-server is not installed",
    };
    table(
        &format!(
            "Live run, real time / 10 (numbers in the scenario's seconds), the shared guards on {on}:"
        ),
        &[("per-process", &per_process), ("shared", &shared)],
    );
    println!("(fleet fallbacks to local guards during the live run: {fallbacks})\n");
    Ok(())
}

fn picture(per_process: &Outcome, shared: &Outcome) -> Result<String, Box<dyn Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let y_max = per_process
            .per_second
            .iter()
            .chain(&shared.per_second)
            .copied()
            .max()
            .unwrap_or(1) as f64
            * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "50 clients at 1 request/s, dependency down from 20 s to 50 s",
                ("sans-serif", 17),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(0f64..HORIZON as f64, 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("attempts reaching the dependency per second")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(DOWN_FROM as f64, 0.0), (DOWN_UNTIL as f64, y_max)],
            RGBColor(255, 0, 0).mix(0.06).filled(),
        )))?;
        for (i, (name, o)) in [
            ("per-process guards", per_process),
            ("guards shared by the fleet", shared),
        ]
        .iter()
        .enumerate()
        {
            let points: Vec<(f64, f64)> = o
                .per_second
                .iter()
                .enumerate()
                .map(|(s, n)| (s as f64 + 0.5, *n as f64))
                .collect();
            line(&mut chart, name, PALETTE[i + 1], &points)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present()?;
    }
    Ok(svg)
}

fn main() -> Result<(), Box<dyn Error>> {
    let check = std::env::args().any(|a| a == "--check");
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR"))?;
    std::fs::create_dir_all("docs")?;
    let (per_process, shared) = simulations();
    table(
        "Simulation (virtual time, the fleet on a MemoryStore synced every 200 ms; deterministic, drawn in docs/fleet.svg):",
        &[("per-process", &per_process), ("shared", &shared)],
    );
    println!(
        "(requests that succeeded, all run: per-process {} of {}, shared {} of {})\n",
        per_process.succeeded, per_process.made, shared.succeeded, shared.made
    );
    write_or_check(
        "docs/fleet.svg",
        &picture(&per_process, &shared)?,
        check,
        "fleet",
    )?;
    if !check {
        live_runs()?;
    }
    Ok(())
}
