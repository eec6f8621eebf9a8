//! Pictures of every backoff strategy and jitter algorithm, drawn from the library's own code.
//!
//! `cargo run --release --example plots` writes `docs/backoff-strategies.svg` and
//! `docs/jitter.svg`; with `-- --check` it only verifies that the committed files are what it
//! would write (CI runs that).

use std::error::Error;
use std::time::Duration;

use plotters::prelude::*;

mod support;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use retry_runtime::time::VirtualTime;
use retry_runtime::{
    AwsDecorrelated, Backoff, Constant, Decorrelated, EqualJitter, Exponential, Fibonacci,
    FullJitter, Jitter, Linear, NoBackoff, NoJitter, Policy, Polynomial, Random,
};
use support::{legend, line, write_or_check};

/// x = 0..=15.
const STEPS: u32 = 16;
const SEED: u64 = 2026;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// v_x for x = 0..STEPS, straight from a strategy.
fn strategy_values(b: &dyn Backoff) -> Vec<f64> {
    let mut rng = SmallRng::seed_from_u64(SEED);
    (0..STEPS)
        .map(|x| b.delay(x, &mut rng).as_secs_f64())
        .collect()
}

/// The delays the retry loop sleeps for STEPS retries, under `jitter` (virtual time, fixed seed).
fn slept<J: Jitter>(jitter: J) -> Vec<f64> {
    let time = VirtualTime::new();
    let policy = Policy::builder()
        .retries(STEPS)
        .backoff(Exponential::new(secs(1), secs(60), 2.0).expect("valid"))
        .jitter(jitter)
        .seed(SEED)
        .env(time.clone())
        .build()
        .expect("valid policy");
    let _: Result<(), ()> = policy.call(|_| Err(()));
    time.sleeps().iter().map(Duration::as_secs_f64).collect()
}

const COLORS: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

fn strategies_svg() -> Result<String, Box<dyn Error>> {
    let series: Vec<(&str, Vec<f64>)> = vec![
        (
            "exponential (m = 2)",
            strategy_values(&Exponential::new(secs(1), secs(60), 2.0)?),
        ),
        (
            "linear (L = 2)",
            strategy_values(&Linear::with_interval(secs(1), secs(60), secs(2))?),
        ),
        (
            "fibonacci",
            strategy_values(&Fibonacci::new(secs(1), secs(60))?),
        ),
        (
            "polynomial (p = [2])",
            strategy_values(&Polynomial::new(secs(1), secs(60), [2.0])?),
        ),
        (
            "random (seeded)",
            strategy_values(&Random::new(secs(1), secs(60))?),
        ),
        ("constant", strategy_values(&Constant::new(secs(1)))),
        ("none", strategy_values(&NoBackoff)),
    ];
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Backoff strategies: v_x with v_base = 1 s, v_max = 60 s",
                ("sans-serif", 22),
            )
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..15.5, 0f64..90.0)?;
        chart
            .configure_mesh()
            .x_desc("retry x")
            .y_desc("delay (s)")
            .x_labels(16)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (i, (name, values)) in series.iter().enumerate() {
            let points: Vec<(f64, f64)> = values
                .iter()
                .enumerate()
                .map(|(x, v)| (x as f64, *v))
                .collect();
            line(&mut chart, name, COLORS[i % COLORS.len()], &points)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present()?;
    }
    Ok(svg)
}

fn jitter_svg() -> Result<String, Box<dyn Error>> {
    let reference = slept(NoJitter);
    let panels: Vec<(&str, Vec<f64>)> = vec![
        ("none", reference.clone()),
        ("full: uniform in [0, v]", slept(FullJitter)),
        ("equal: v/2 + uniform in [0, v/2]", slept(EqualJitter)),
        ("decorrelated: exponent reset w.p. 1/2", slept(Decorrelated)),
        (
            "aws_decorrelated: uniform in [base, 3 prev]",
            slept(AwsDecorrelated),
        ),
    ];
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 900)).into_drawing_area();
        root.fill(&WHITE)?;
        let (title, body) = root.split_vertically(50);
        title.titled(
            "Jitter on exponential backoff (base 1 s, max 60 s, m = 2); red dots: value changed by jitter",
            ("sans-serif", 20),
        )?;
        let areas = body.split_evenly((3, 2));
        for (i, (name, values)) in panels.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut chart = ChartBuilder::on(&areas[i])
                .caption(*name, ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(40)
                .build_cartesian_2d(0f64..15.5, 0f64..65.0)?;
            chart
                .configure_mesh()
                .x_desc("retry x")
                .y_desc("delay (s)")
                .x_labels(16)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y:.0}"))
                .light_line_style(RGBColor(240, 240, 240))
                .draw()?;
            let grey = RGBColor(170, 170, 170);
            chart.draw_series(LineSeries::new(
                reference.iter().enumerate().map(|(x, v)| (x as f64, *v)),
                grey.stroke_width(1),
            ))?;
            let points: Vec<(f64, f64)> = values
                .iter()
                .enumerate()
                .map(|(x, v)| (x as f64, *v))
                .collect();
            chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?;
            chart.draw_series(points.iter().zip(&reference).map(|(p, r)| {
                if (p.1 - r).abs() > 1e-9 {
                    Circle::new(*p, 4, RED.filled())
                } else {
                    Circle::new(*p, 3, color.filled())
                }
            }))?;
        }
        let legend = &areas[5];
        let lines = [
            "grey line: v_x without jitter",
            "colored line: the delay actually slept",
            "red dot: jitter changed the value",
            "same seed for every panel; drawn by",
            "the retry loop on a virtual clock",
        ];
        for (i, l) in lines.iter().enumerate() {
            legend.draw(&Text::new(
                *l,
                (20, 40 + 28 * i as i32),
                ("sans-serif", 16).into_font().color(&BLACK),
            ))?;
        }
        root.present()?;
    }
    Ok(svg)
}

fn main() -> Result<(), Box<dyn Error>> {
    let check = std::env::args().any(|a| a == "--check");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    std::fs::create_dir_all(&dir)?;
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR"))?;
    write_or_check(
        "docs/backoff-strategies.svg",
        &strategies_svg()?,
        check,
        "plots",
    )?;
    write_or_check("docs/jitter.svg", &jitter_svg()?, check, "plots")?;
    Ok(())
}
