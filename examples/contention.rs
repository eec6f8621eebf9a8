//! Jitter against a crowd: the optimistic-concurrency simulation from the published study of
//! backoff and jitter, in virtual time.
//!
//! N clients start at the same moment; each must make one successful conditional write to a
//! single shared row: read the version, then write if it is unchanged. A write that finds a
//! newer version fails and the client retries after its backoff. Every message takes
//! |Normal(10 ms, 2 ms)| to cross the network. Backoff base 5 ms, cap 2000 ms. Each point is the
//! mean of 100 runs; N goes from 10 to 190.
//!
//! The retry decisions and delays come from `retry_runtime` itself: every client is a
//! [`retry_runtime::Call`] of a real [`Policy`], driven by a simulated clock.
//!
//! `cargo run --release --example contention` prints the table for N = 100 and writes
//! `docs/contention-calls.svg` and `docs/contention-time.svg`; `-- --check` verifies the
//! committed pictures instead of writing them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use plotters::prelude::*;

mod support;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Normal};
use retry_runtime::time::{Clock, Sleep};
use retry_runtime::{
    AwsDecorrelated, Backoff, Decorrelated, EqualJitter, Exponential, FullJitter, Jitter,
    NoBackoff, NoJitter, Policy, Step,
};
use support::{PALETTE, legend, line, write_or_check};

const RUNS: u64 = 100;
const CLIENTS: [usize; 19] = [
    10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190,
];

/// The simulation's clock: the retry loop reads time from it; sleeping is scheduled as events.
#[derive(Clone)]
struct SimClock {
    epoch: Instant,
    nanos: Arc<AtomicU64>,
}

impl SimClock {
    fn new() -> Self {
        SimClock {
            epoch: Instant::now(),
            nanos: Arc::new(AtomicU64::new(0)),
        }
    }
    fn set(&self, nanos: u64) {
        self.nanos.store(nanos, Ordering::Relaxed);
    }
}

impl Clock for SimClock {
    fn now(&self) -> Instant {
        self.epoch + Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}

impl Sleep for SimClock {
    fn sleep(&self, _: Duration) {
        // Never called: the simulation turns each backoff into a future event.
    }
}

/// What happens next to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The client starts an attempt: it sends a read.
    Start,
    /// The read reaches the server.
    ReadAtServer,
    /// The version read reaches the client, which sends its conditional write.
    ReadBack(u64),
    /// The conditional write reaches the server.
    WriteAtServer(u64),
    /// The write's outcome reaches the client.
    WriteBack(bool),
}

/// A conflicting write.
#[derive(Debug)]
struct Conflict;

#[derive(Debug, Clone, Copy, Default)]
struct Outcome {
    /// Attempts (a read and a conditional write each).
    calls: f64,
    /// When the last client succeeded, in ms.
    time_ms: f64,
}

/// One run: `n` clients until every one has written once.
fn run_once<B: Backoff, J: Jitter>(n: usize, backoff: &B, jitter: &J, seed: u64) -> Outcome {
    let clock = SimClock::new();
    let policy = Policy::builder()
        .retries(-1)
        .backoff(backoff)
        .jitter(jitter)
        .env(clock.clone())
        .build()
        .expect("a valid policy");
    let network = Normal::<f64>::new(10.0, 2.0).expect("valid normal distribution");
    let mut net_rng = SmallRng::seed_from_u64(seed);
    let mut hop = move || network.sample(&mut net_rng).abs() * 1e6; // ns

    let mut clients: Vec<_> = (0..n as u64)
        .map(|i| policy.start_seeded(seed.wrapping_mul(1_000_003).wrapping_add(i)))
        .collect();
    let mut queue = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |queue: &mut BinaryHeap<_>, at: u64, client: usize, ev: Event| {
        seq += 1;
        queue.push(Reverse((at, seq, client, ev)));
    };
    for c in 0..n {
        push(&mut queue, 0, c, Event::Start);
    }
    let (mut version, mut calls, mut done, mut last) = (0u64, 0u64, 0usize, 0u64);
    while let Some(Reverse((now, _, c, ev))) = queue.pop() {
        clock.set(now);
        let after = |d: f64| now + d as u64;
        match ev {
            Event::Start => {
                calls += 1;
                clients[c].attempt();
                push(&mut queue, after(hop()), c, Event::ReadAtServer);
            }
            Event::ReadAtServer => push(&mut queue, after(hop()), c, Event::ReadBack(version)),
            Event::ReadBack(v) => push(&mut queue, after(hop()), c, Event::WriteAtServer(v)),
            Event::WriteAtServer(v) => {
                let ok = v == version;
                if ok {
                    version += 1;
                }
                push(&mut queue, after(hop()), c, Event::WriteBack(ok));
            }
            Event::WriteBack(ok) => {
                let result = if ok { Ok(()) } else { Err(Conflict) };
                match clients[c].settle(result, false) {
                    Step::Retry(delay) => {
                        let at =
                            now.saturating_add(delay.as_nanos().min(u128::from(u64::MAX)) as u64);
                        push(&mut queue, at, c, Event::Start);
                    }
                    Step::Return(_) => {
                        done += 1;
                        last = now;
                    }
                }
            }
        }
    }
    assert_eq!(done, n, "every client finishes: retries are unlimited");
    Outcome {
        calls: calls as f64,
        time_ms: last as f64 / 1e6,
    }
}

/// The mean over `RUNS` runs.
fn mean<B: Backoff, J: Jitter>(n: usize, backoff: &B, jitter: &J, algo: u64) -> Outcome {
    let mut sum = Outcome::default();
    for run in 0..RUNS {
        let o = run_once(n, backoff, jitter, algo << 32 | (n as u64) << 16 | run);
        sum.calls += o.calls;
        sum.time_ms += o.time_ms;
    }
    Outcome {
        calls: sum.calls / RUNS as f64,
        time_ms: sum.time_ms / RUNS as f64,
    }
}

type Series = (&'static str, Vec<Outcome>);

fn simulate() -> Vec<Series> {
    let exp = Exponential::new(Duration::from_millis(5), Duration::from_millis(2000), 2.0)
        .expect("valid strategy");
    let sweep = |f: &dyn Fn(usize) -> Outcome| CLIENTS.iter().map(|n| f(*n)).collect::<Vec<_>>();
    vec![
        ("no backoff", sweep(&|n| mean(n, &NoBackoff, &NoJitter, 1))),
        (
            "exponential, no jitter",
            sweep(&|n| mean(n, &exp, &NoJitter, 2)),
        ),
        ("full jitter", sweep(&|n| mean(n, &exp, &FullJitter, 3))),
        ("equal jitter", sweep(&|n| mean(n, &exp, &EqualJitter, 4))),
        (
            "decorrelated (SPEC)",
            sweep(&|n| mean(n, &exp, &Decorrelated, 5)),
        ),
        (
            "aws_decorrelated",
            sweep(&|n| mean(n, &exp, &AwsDecorrelated, 6)),
        ),
    ]
}

/// A line chart of `value` against N; `log` gives a logarithmic y axis.
fn chart(
    series: &[Series],
    title: &str,
    y_desc: &str,
    value: fn(&Outcome) -> f64,
    log: bool,
) -> Result<String, Box<dyn Error>> {
    let values = || series.iter().flat_map(|(_, v)| v.iter().map(value));
    let y_max = values().fold(0.0f64, f64::max) * 1.08;
    let y_min = if log {
        values().fold(f64::MAX, f64::min) * 0.8
    } else {
        0.0
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(70);
        if log {
            let chart = builder.build_cartesian_2d(0f64..200.0, (y_min..y_max).log_scale())?;
            draw(chart, series, y_desc, value, log).map_err(|e| e.to_string())?;
        } else {
            let chart = builder.build_cartesian_2d(0f64..200.0, y_min..y_max)?;
            draw(chart, series, y_desc, value, log).map_err(|e| e.to_string())?;
        }
        root.present()?;
    }
    Ok(svg)
}

/// Draws the series, the last-listed first so that the first ones stay on top.
fn draw<'a, Y>(
    mut chart: ChartContext<
        'a,
        SVGBackend<'a>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
    series: &[Series],
    y_desc: &str,
    value: fn(&Outcome) -> f64,
    log: bool,
) -> Result<(), Box<dyn Error + 'a>>
where
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    {
        chart
            .configure_mesh()
            .x_desc("clients (N)")
            .y_desc(y_desc)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (i, (name, values)) in series.iter().enumerate().rev() {
            let points: Vec<(f64, f64)> = CLIENTS
                .iter()
                .zip(values)
                .map(|(n, o)| (*n as f64, value(o)))
                .collect();
            line(&mut chart, name, PALETTE[i % PALETTE.len()], &points)?;
        }
        let position = if log {
            SeriesLabelPosition::LowerRight
        } else {
            SeriesLabelPosition::UpperLeft
        };
        legend(&mut chart, position)?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let check = std::env::args().any(|a| a == "--check");
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR"))?;
    std::fs::create_dir_all("docs")?;
    let series = simulate();

    let at = CLIENTS
        .iter()
        .position(|n| *n == 100)
        .expect("N = 100 is simulated");
    println!("N = 100 clients, mean of {RUNS} runs:\n");
    println!("| algorithm | calls | completion time (ms) |");
    println!("|---|---:|---:|");
    for (name, values) in &series {
        println!(
            "| {name} | {:.0} | {:.0} |",
            values[at].calls, values[at].time_ms
        );
    }
    println!();

    let calls = chart(
        &series,
        "Work: calls until every client has written (mean of 100 runs)",
        "calls",
        |o| o.calls,
        false,
    )?;
    let time = chart(
        &series,
        "Completion time until every client has written (mean of 100 runs)",
        "time (ms, log scale)",
        |o| o.time_ms,
        true,
    )?;
    write_or_check("docs/contention-calls.svg", &calls, check, "contention")?;
    write_or_check("docs/contention-time.svg", &time, check, "contention")?;
    Ok(())
}
