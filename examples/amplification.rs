//! Load amplification: how much extra work retries put on a failing server, and what a retry
//! budget, a circuit breaker and adaptive throttling do about it, in virtual time.
//!
//! 100 clients each send requests at Poisson times, 10 per second, for 60 s. The server fails
//! each request with probability p (p in 0.05, 0.1, 0.2, 0.5, 0.75, 1.0) and answers in 10 ms.
//! Six client policies:
//! - no retries;
//! - 3 retries (exponential backoff 10 ms .. 1 s, full jitter);
//! - 3 retries under a shared retry budget (capacity 5, 0.1 token earned per call, 1 per retry);
//! - 3 retries behind a shared circuit breaker (window 100 attempts, at least 20, opens at a
//!   50% failure ratio, 5 s break, then 5 probes that close it again below a 50% failure ratio);
//! - 3 retries under a shared adaptive throttle (k = 2 over the last 10 s: each attempt, first
//!   or retry, is rejected locally with probability max(0, (requests − 2·accepts) / (requests +
//!   1)));
//! - 3 retries under a shared concurrency limit of 16 attempts in flight and no queue (about
//!   10 are in flight without failures): an attempt that finds no free slot is rejected at
//!   once, not retried.
//!
//! Every retry decision, budget withdrawal, breaker transition, throttle rejection and limit
//! slot is `retry_runtime`'s own: each request is a [`retry_runtime::Call`] of a real policy on
//! a virtual clock, and an attempt holds a slot of the policy's limit
//! ([`retry_runtime::Call::try_slot`], which is what waiting for a slot does when the limit has
//! no queue: a call that finds none free ends with `Rejected`) until its answer arrives.
//!
//! The six policies see the same draws at each p (common random numbers): the same arrivals,
//! the same jitter seed for each request, and the same outcome for each request's n-th attempt
//! (drawn from the request's number and n, not from a stream the other requests' attempts
//! also consume), so that a difference between two columns is the guards', not the luck of
//! the draw.
//!
//! `cargo run --release --example amplification` prints the table and writes
//! `docs/amplification.svg`; `-- --check` verifies the committed picture instead.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::error::Error;
use std::time::{Duration, Instant};

use plotters::prelude::*;

mod support;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp};
use retry_runtime::policy::PolicyCore;
use retry_runtime::time::{Clock, VirtualTime};
use retry_runtime::{
    AdaptiveThrottle, CircuitBreaker, ConcurrencyLimit, Exponential, FullJitter, Policy,
    RetryBudget, RetryPolicy, Step,
};
use support::{PALETTE, legend, line, write_or_check};

const CLIENTS: usize = 100;
const RATE_PER_CLIENT: f64 = 10.0;
const HORIZON: Duration = Duration::from_secs(60);
const LATENCY: Duration = Duration::from_millis(10);
const FAILURE_RATES: [f64; 6] = [0.05, 0.1, 0.2, 0.5, 0.75, 1.0];

/// A failed request.
#[derive(Debug)]
enum Failure {
    /// The server failed it.
    Server,
    /// The breaker or the throttle rejected it before it was sent.
    Rejected,
}

impl From<retry_runtime::Open> for Failure {
    fn from(_: retry_runtime::Open) -> Self {
        Failure::Rejected
    }
}

impl From<retry_runtime::Rejected> for Failure {
    fn from(_: retry_runtime::Rejected) -> Self {
        Failure::Rejected
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Outcome {
    /// Requests the server saw / requests the clients made.
    load: f64,
    /// Client requests that eventually succeeded.
    success: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A client makes a new request.
    Arrive { client: usize },
    /// A request starts an attempt (first or retry).
    Attempt { call: usize },
    /// The server's answer to an attempt reaches the client.
    Answer { call: usize, ok: bool },
}

/// Which guards the policy has.
#[derive(Debug, Clone, Copy)]
enum Guard {
    NoRetries,
    Retries,
    Budget,
    Breaker,
    Throttle,
    Limit,
}

/// One simulation on `time`, a virtual clock shared by all of them that started at `start`.
fn simulate(time: &VirtualTime, start: Instant, p: f64, guard: Guard, seed: u64) -> Outcome {
    // Each simulation starts a whole number of seconds after the first: a throttle counts in
    // buckets on a grid that the first instant any throttle sees fixes for the process, so
    // every run (and `--check`) cuts the window at the same instants.
    let elapsed = time.now() - start;
    time.advance(Duration::from_secs(elapsed.as_secs() + 1) - elapsed);
    let budget = RetryBudget::new(5.0, 0.1, 1.0).expect("valid budget");
    let breaker =
        CircuitBreaker::new(100, 20, 0.5, Duration::from_secs(5), 5).expect("valid breaker");
    let throttle = AdaptiveThrottle::new(2.0, Duration::from_secs(10)).expect("valid throttle");
    let limit = ConcurrencyLimit::new(16, 0).expect("valid limit");
    let backoff = Exponential::new(Duration::from_millis(10), Duration::from_secs(1), 2.0)
        .expect("valid backoff");
    let base = Policy::builder()
        .retries(3)
        .backoff(backoff)
        .jitter(FullJitter)
        .env(time.clone());
    // The four shapes of policy differ in type; run the same simulation with each.
    match guard {
        Guard::Budget => run(p, seed, time, &base.budget(&budget).build().expect("valid")),
        Guard::Breaker => run(
            p,
            seed,
            time,
            &base.breaker(&breaker).build().expect("valid"),
        ),
        Guard::Throttle => run(
            p,
            seed,
            time,
            &base.throttle(&throttle).build().expect("valid"),
        ),
        Guard::Limit => run(p, seed, time, &base.limit(&limit).build().expect("valid")),
        Guard::Retries => run(p, seed, time, &base.build().expect("valid")),
        // (No backoff or jitter to write: no retry is made.)
        Guard::NoRetries => {
            let policy = Policy::builder().retries(0).env(time.clone());
            run(p, seed, time, &policy.build().expect("valid"))
        }
    }
}

/// Drives one simulation with `policy`: any policy that retries `Failure`s, whatever the
/// guards made its type.
fn run<P>(p: f64, seed: u64, time: &VirtualTime, policy: &P) -> Outcome
where
    P: RetryPolicy<(), Failure> + PolicyCore,
{
    // The arrivals: one stream, drawn only by arrivals.
    let mut rng = SmallRng::seed_from_u64(seed);
    let gap = Exp::new(RATE_PER_CLIENT).expect("valid rate");
    let mut queue = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |queue: &mut BinaryHeap<_>, at: Duration, ev: Event| {
        seq += 1;
        queue.push(Reverse((at, seq, ev)));
    };
    for client in 0..CLIENTS {
        let first = Duration::from_secs_f64(gap.sample(&mut rng));
        push(&mut queue, first, Event::Arrive { client });
    }
    let mut calls = Vec::new();
    // The limit's slot each call's running attempt holds, and the attempts each call sent.
    let mut slots = Vec::new();
    let mut tries = Vec::new();
    let (mut made, mut sent, mut succeeded) = (0u64, 0u64, 0u64);
    let mut now = Duration::ZERO;
    while let Some(Reverse((at, _, ev))) = queue.pop() {
        time.advance(at - now);
        now = at;
        match ev {
            Event::Arrive { client } => {
                made += 1;
                calls.push(policy.start_seeded(seed ^ made.wrapping_mul(0x9E37_79B9)));
                slots.push(None);
                tries.push(0u64);
                push(
                    &mut queue,
                    now,
                    Event::Attempt {
                        call: calls.len() - 1,
                    },
                );
                let next = now + Duration::from_secs_f64(gap.sample(&mut rng));
                if next < HORIZON {
                    push(&mut queue, next, Event::Arrive { client });
                }
            }
            Event::Attempt { call } => {
                if calls[call].admit::<(), Failure>().is_some() {
                    // Rejected by the open breaker or the throttle: the call has failed.
                    continue;
                }
                match calls[call].try_slot::<(), Failure>() {
                    Ok(slot) => slots[call] = slot,
                    // No free slot and no queue: the call has failed (`Rejected`, not retried).
                    Err(_) => continue,
                }
                sent += 1;
                tries[call] += 1;
                let ok = attempt_succeeds(seed, call as u64, tries[call], p);
                push(&mut queue, now + LATENCY, Event::Answer { call, ok });
            }
            Event::Answer { call, ok } => {
                slots[call] = None;
                let result = if ok { Ok(()) } else { Err(Failure::Server) };
                match calls[call].settle(result, false) {
                    Step::Retry(delay) => push(&mut queue, now + delay, Event::Attempt { call }),
                    Step::Return(Ok(())) => succeeded += 1,
                    Step::Return(Err(_)) => {}
                }
            }
        }
    }
    Outcome {
        load: sent as f64 / made as f64,
        success: succeeded as f64 / made as f64,
    }
}

/// Whether the `attempt`-th attempt (from 1) of call number `call` succeeds, under failure
/// probability `p`: a draw of its own, the same whatever the policy (and whatever the other
/// calls' attempts drew).
fn attempt_succeeds(seed: u64, call: u64, attempt: u64, p: f64) -> bool {
    let key = seed
        ^ call.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ attempt.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    SmallRng::seed_from_u64(key).random::<f64>() >= p
}

type Series = (&'static str, Vec<Outcome>);

fn all() -> Vec<Series> {
    let time = VirtualTime::new();
    let start = time.now();
    // One seed per failure rate, the same for every policy (common random numbers).
    let sweep = |g: Guard| {
        FAILURE_RATES
            .iter()
            .enumerate()
            .map(|(i, p)| simulate(&time, start, *p, g, 0xA3 << 8 | i as u64))
            .collect::<Vec<_>>()
    };
    vec![
        ("no retries", sweep(Guard::NoRetries)),
        ("3 retries", sweep(Guard::Retries)),
        ("3 retries + budget", sweep(Guard::Budget)),
        ("3 retries + breaker", sweep(Guard::Breaker)),
        ("3 retries + throttle", sweep(Guard::Throttle)),
        ("3 retries + limit", sweep(Guard::Limit)),
    ]
}

fn picture(series: &[Series]) -> Result<String, Box<dyn Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 460)).into_drawing_area();
        root.fill(&WHITE)?;
        let (left, right) = root.split_horizontally(500);
        for (area, title, y_max, value) in [
            (
                &left,
                "Load multiplier (server requests / client requests)",
                4.2,
                0usize,
            ),
            (&right, "Client success rate", 1.05, 1usize),
        ] {
            let mut chart = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 17))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(44)
                .build_cartesian_2d(0f64..1.02, 0f64..y_max)?;
            chart
                .configure_mesh()
                .x_desc("server failure probability p")
                .x_label_formatter(&|x| format!("{x:.1}"))
                .y_label_formatter(&|y| format!("{y:.1}"))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()?;
            if value == 0 {
                let theory = (0..=100).map(|i| {
                    let p = f64::from(i) / 100.0;
                    (p, 1.0 + p + p * p + p * p * p)
                });
                chart
                    .draw_series(LineSeries::new(theory, BLACK.mix(0.4).stroke_width(1)))?
                    .label("1 + p + p² + p³")
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.4)));
            }
            for (i, (name, values)) in series.iter().enumerate() {
                let points: Vec<(f64, f64)> = FAILURE_RATES
                    .iter()
                    .zip(values)
                    .map(|(p, o)| (*p, if value == 0 { o.load } else { o.success }))
                    .collect();
                line(&mut chart, name, PALETTE[i % PALETTE.len()], &points)?;
            }
            let position = if value == 0 {
                SeriesLabelPosition::UpperLeft
            } else {
                SeriesLabelPosition::LowerLeft
            };
            legend(&mut chart, position)?;
        }
        root.present()?;
    }
    Ok(svg)
}

fn main() -> Result<(), Box<dyn Error>> {
    let check = std::env::args().any(|a| a == "--check");
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR"))?;
    std::fs::create_dir_all("docs")?;
    let series = all();

    println!("Load multiplier (server requests / client requests), client success rate:\n");
    print!("| p | 1 + p + p² + p³ |");
    for (name, _) in &series {
        print!(" {name}: load | success |");
    }
    println!();
    print!("|---:|---:|");
    for _ in &series {
        print!("---:|---:|");
    }
    println!();
    for (i, p) in FAILURE_RATES.iter().enumerate() {
        print!("| {p} | {:.2} |", 1.0 + p + p * p + p * p * p);
        for (_, values) in &series {
            print!(
                " {:.2} | {:.1}% |",
                values[i].load,
                100.0 * values[i].success
            );
        }
        println!();
    }
    println!();

    write_or_check(
        "docs/amplification.svg",
        &picture(&series)?,
        check,
        "amplification",
    )
}
