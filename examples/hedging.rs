//! The slow tail: hedging and timeouts from measured latency, on tokio's paused clock.
//!
//! Part 1, hedging (SPEC section 15). A service whose latency has a heavy tail: 98% of
//! attempts take 5 ms + an exponential of mean 5 ms (about 10 ms), 2% take 1 s + an
//! exponential of mean 100 ms. 100,000 requests, one after the other, through three `#[robust]`
//! fns: no hedging, `hedge(after = 50ms)`, and `hedge(after = p95)`: the p50, p99 and p99.9 of
//! the requests' latency and the extra load (attempts / requests − 1). Dean and Barroso ("The
//! Tail at Scale", 2013) cut a p99.9 of 1,800 ms to 74 ms for 2% more requests by hedging after
//! a fixed 10 ms, and suggest hedging after the p95, for about 5% more load.
//!
//! Part 2, timeouts (SPEC section 15b). 20,000 calls, each with up to 2 retries; 0.5% of
//! attempts hang (they would answer after 10 s). For the first 10,000 calls the service
//! answers in about 10 ms (5 ms + exp(5 ms)), then it slows down to about 60 ms (30 ms +
//! exp(30 ms)). A fixed `timeout = 2s` against `timeout = adaptive(p = 99, factor = 2, min =
//! 20ms, max = 2s)`: how long a hung attempt runs before it is cut, how many attempts that
//! would have answered are cut by mistake, and the calls' p99 and p99.9.
//!
//! Every decision (when a hedge starts, which attempt wins, each attempt's limit) is the
//! runtime's own: the fns are `#[robust]` fns, run on tokio's paused clock, so the times are
//! exact and every run is the same.
//!
//! `cargo run --release --example hedging` prints the tables and writes `docs/hedging.svg`;
//! `-- --check` verifies the committed picture instead.

use std::cell::{Cell, RefCell};
use std::error::Error;
use std::io;
use std::time::Duration;

use plotters::prelude::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp};
use retry_runtime::robust;
use tokio::time::Instant;

mod support;
use support::{PALETTE, curve, legend, line, write_or_check};

const REQUESTS: usize = 100_000;
const CALLS: usize = 20_000;

thread_local! {
    static RNG: RefCell<SmallRng> = RefCell::new(SmallRng::seed_from_u64(2013));
    /// Attempts started.
    static ATTEMPTS: Cell<u64> = const { Cell::new(0) };
}

/// `base` + an exponential of mean `mean`.
fn draw(base: f64, mean: f64) -> Duration {
    RNG.with(|r| {
        let e = Exp::new(1.0 / mean)
            .expect("valid mean")
            .sample(&mut *r.borrow_mut());
        Duration::from_secs_f64((base + e) / 1000.0)
    })
}

/// One attempt on the heavy-tailed service.
async fn heavy_tail() -> io::Result<()> {
    ATTEMPTS.with(|a| a.set(a.get() + 1));
    let slow = RNG.with(|r| r.borrow_mut().random::<f64>() < 0.02);
    let latency = if slow {
        draw(1000.0, 100.0)
    } else {
        draw(5.0, 5.0)
    };
    tokio::time::sleep(latency).await;
    Ok(())
}

#[robust(retries = 0)]
async fn plain() -> io::Result<()> {
    heavy_tail().await
}

#[robust(hedge(after = 50ms, max = 1), retries = 0)]
async fn hedged_fixed() -> io::Result<()> {
    heavy_tail().await
}

#[robust(hedge(after = p95, max = 1), retries = 0)]
async fn hedged_p95() -> io::Result<()> {
    heavy_tail().await
}

/// Latency percentiles in ms.
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1000.0
}

/// The hedging percentiles shown.
const SHOWN: [f64; 5] = [50.0, 90.0, 95.0, 99.0, 99.9];

struct Hedging {
    name: &'static str,
    /// Latency (ms) at each of `SHOWN`.
    latencies: Vec<f64>,
    extra_load: f64,
}

async fn hedging<F: Future<Output = io::Result<()>>>(
    name: &'static str,
    f: impl Fn() -> F,
) -> Hedging {
    ATTEMPTS.with(|a| a.set(0));
    let mut took = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let t0 = Instant::now();
        f().await.expect("the service never fails");
        took.push(t0.elapsed());
    }
    took.sort();
    let attempts = ATTEMPTS.with(Cell::get);
    Hedging {
        name,
        latencies: SHOWN.iter().map(|p| percentile(&took, *p)).collect(),
        extra_load: attempts as f64 / REQUESTS as f64 - 1.0,
    }
}

// Part 2.

thread_local! {
    /// The service's phase: `false` fast (~10 ms), `true` slow (~60 ms).
    static SLOWER: Cell<bool> = const { Cell::new(false) };
    static CUT_BY_MISTAKE: Cell<u64> = const { Cell::new(0) };
    static HUNG: Cell<u64> = const { Cell::new(0) };
    /// Total time hung attempts ran before they were cut.
    static HUNG_TIME: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// Records how an attempt ended when it is dropped unfinished (cut by its timeout).
struct Watch {
    hung: bool,
    started: Instant,
    done: bool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if self.hung {
            HUNG_TIME.with(|t| t.set(t.get() + self.started.elapsed()));
        } else {
            CUT_BY_MISTAKE.with(|c| c.set(c.get() + 1));
        }
    }
}

async fn shifting() -> io::Result<()> {
    let hung = RNG.with(|r| r.borrow_mut().random::<f64>() < 0.005);
    if hung {
        HUNG.with(|h| h.set(h.get() + 1));
    }
    let mut watch = Watch {
        hung,
        started: Instant::now(),
        done: false,
    };
    let latency = if hung {
        Duration::from_secs(10)
    } else if SLOWER.with(Cell::get) {
        draw(30.0, 30.0)
    } else {
        draw(5.0, 5.0)
    };
    tokio::time::sleep(latency).await;
    watch.done = true;
    Ok(())
}

#[robust(timeout = 2s, retries = 2, backoff = none, attempt = ctx)]
async fn fixed_timeout(limits: &RefCell<Vec<f64>>) -> io::Result<()> {
    limits
        .borrow_mut()
        .push(ctx.timeout().unwrap_or_default().as_secs_f64() * 1000.0);
    shifting().await
}

#[robust(timeout = adaptive(p = 99, factor = 2, min = 20ms, max = 2s), retries = 2,
         backoff = none, attempt = ctx)]
async fn adaptive_timeout(limits: &RefCell<Vec<f64>>) -> io::Result<()> {
    limits
        .borrow_mut()
        .push(ctx.timeout().unwrap_or_default().as_secs_f64() * 1000.0);
    shifting().await
}

/// One phase of one timeout policy.
struct Phase {
    hung: u64,
    /// Mean time a hung attempt ran (ms).
    hung_ran: f64,
    cut_by_mistake: u64,
    failed: u64,
    p99: f64,
    p999: f64,
}

struct Timeouts {
    name: &'static str,
    phases: Vec<Phase>,
    /// The first attempt's limit (ms) of every 100th call.
    limits: Vec<f64>,
}

async fn timeouts<'a, F: Future<Output = io::Result<()>>>(
    name: &'static str,
    f: impl Fn(&'a RefCell<Vec<f64>>) -> F,
    limits: &'a RefCell<Vec<f64>>,
) -> Timeouts {
    let mut phases = Vec::new();
    let mut sampled = Vec::new();
    for phase in 0..2 {
        SLOWER.with(|s| s.set(phase == 1));
        CUT_BY_MISTAKE.with(|c| c.set(0));
        HUNG.with(|c| c.set(0));
        HUNG_TIME.with(|c| c.set(Duration::ZERO));
        let mut took = Vec::new();
        let mut failed = 0;
        for i in 0..CALLS / 2 {
            limits.borrow_mut().clear();
            let t0 = Instant::now();
            if f(limits).await.is_err() {
                failed += 1;
            }
            took.push(t0.elapsed());
            if i % 100 == 0 {
                sampled.push(limits.borrow()[0]);
            }
        }
        took.sort();
        let hung = HUNG.with(Cell::get);
        phases.push(Phase {
            hung,
            hung_ran: HUNG_TIME.with(Cell::get).as_secs_f64() * 1000.0 / hung.max(1) as f64,
            cut_by_mistake: CUT_BY_MISTAKE.with(Cell::get),
            failed,
            p99: percentile(&took, 99.0),
            p999: percentile(&took, 99.9),
        });
    }
    Timeouts {
        name,
        phases,
        limits: sampled,
    }
}

fn picture(hedging: &[Hedging], timeouts: &[Timeouts]) -> Result<String, Box<dyn Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 460)).into_drawing_area();
        root.fill(&WHITE)?;
        let (left, right) = root.split_horizontally(500);
        // Left: the latency percentiles of each hedging policy, on a log scale.
        let mut chart = ChartBuilder::on(&left)
            .caption(
                "Request latency by percentile (hedging)",
                ("sans-serif", 17),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(54)
            .build_cartesian_2d(0f64..4.2, (5f64..3000.0).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("latency (ms)")
            .x_labels(5)
            .x_label_formatter(&|x| {
                let i = x.round() as usize;
                if (x - x.round()).abs() < 1e-9 && i < SHOWN.len() {
                    format!("p{}", SHOWN[i])
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (i, h) in hedging.iter().enumerate() {
            let points: Vec<(f64, f64)> = h
                .latencies
                .iter()
                .enumerate()
                .map(|(x, ms)| (x as f64, *ms))
                .collect();
            let label = format!("{} (+{:.1}% load)", h.name, 100.0 * h.extra_load);
            line(&mut chart, &label, PALETTE[i % PALETTE.len()], &points)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;

        // Right: each timeout's limit over the calls, as the service slows down.
        let mut chart = ChartBuilder::on(&right)
            .caption("Attempt timeout as latency shifts", ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(54)
            .build_cartesian_2d(0f64..CALLS as f64, (10f64..5000.0).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("call (the service slows from 10 to 60 ms at call 10,000)")
            .y_desc("timeout (ms)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (i, t) in timeouts.iter().enumerate() {
            let points: Vec<(f64, f64)> = t
                .limits
                .iter()
                .enumerate()
                .map(|(k, ms)| (k as f64 * 100.0, *ms))
                .collect();
            curve(
                &mut chart,
                t.name,
                PALETTE[(i + 1) % PALETTE.len()],
                &points,
            )?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        root.present()?;
    }
    Ok(svg)
}

fn main() -> Result<(), Box<dyn Error>> {
    let check = std::env::args().any(|a| a == "--check");
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR"))?;
    std::fs::create_dir_all("docs")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    let (hedges, times) = rt.block_on(async {
        let hedges = vec![
            hedging("no hedging", plain).await,
            hedging("hedge(after = 50ms)", hedged_fixed).await,
            hedging("hedge(after = p95)", hedged_p95).await,
        ];
        let limits = RefCell::new(Vec::new());
        let times = vec![
            timeouts("timeout = 2s", fixed_timeout, &limits).await,
            timeouts(
                "timeout = adaptive(p = 99, factor = 2, min = 20ms, max = 2s)",
                adaptive_timeout,
                &limits,
            )
            .await,
        ];
        (hedges, times)
    });

    println!("Hedging: {REQUESTS} requests, 98% ~10 ms and 2% ~1 s (latency in ms):\n");
    println!("| policy | p50 | p90 | p95 | p99 | p99.9 | extra load |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for h in &hedges {
        print!("| {} |", h.name);
        for ms in &h.latencies {
            print!(" {ms:.1} |");
        }
        println!(" +{:.2}% |", 100.0 * h.extra_load);
    }
    println!();
    println!(
        "Timeouts: {CALLS} calls (2 retries), 0.5% of attempts hang; the service slows from ~10 ms to ~60 ms after {}:\n",
        CALLS / 2
    );
    println!(
        "| timeout | phase | hung attempts | a hung attempt ran (ms) | good attempts cut | calls failed | p99 (ms) | p99.9 (ms) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for t in &times {
        for (i, p) in t.phases.iter().enumerate() {
            println!(
                "| {} | {} | {} | {:.0} | {} | {} | {:.1} | {:.1} |",
                t.name,
                if i == 0 { "~10 ms" } else { "~60 ms" },
                p.hung,
                p.hung_ran,
                p.cut_by_mistake,
                p.failed,
                p.p99,
                p.p999
            );
        }
    }
    println!();
    write_or_check(
        "docs/hedging.svg",
        &picture(&hedges, &times)?,
        check,
        "hedging",
    )
}
