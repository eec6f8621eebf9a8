//! Nanoseconds per backoff computation for every strategy and jitter algorithm.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use retry_runtime::{
    AwsDecorrelated, Backoff, Constant, Decorrelated, EqualJitter, Exponential, Fibonacci,
    FullJitter, Jitter, JitterState, Linear, NoBackoff, NoJitter, Polynomial, Random,
};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn strategies(c: &mut Criterion) {
    let all: Vec<(&str, Box<dyn Backoff>)> = vec![
        (
            "exponential",
            Box::new(Exponential::new(secs(1), secs(60), 2.0).unwrap()),
        ),
        (
            "linear",
            Box::new(Linear::with_interval(secs(1), secs(60), secs(2)).unwrap()),
        ),
        (
            "fibonacci",
            Box::new(Fibonacci::new(secs(1), secs(60)).unwrap()),
        ),
        (
            "polynomial",
            Box::new(Polynomial::new(secs(1), secs(60), [2.0]).unwrap()),
        ),
        ("random", Box::new(Random::new(secs(1), secs(60)).unwrap())),
        ("constant", Box::new(Constant::new(secs(1)))),
        ("none", Box::new(NoBackoff)),
    ];
    let mut g = c.benchmark_group("backoff");
    let mut rng = SmallRng::seed_from_u64(1);
    for (name, b) in &all {
        g.bench_function(*name, |bench| {
            let mut x = 0u32;
            bench.iter(|| {
                x = (x + 1) & 15;
                b.delay(black_box(x), &mut rng)
            })
        });
    }
    g.finish();

    let exp = Exponential::new(secs(1), secs(60), 2.0).unwrap();
    let jitters: Vec<(&str, Box<dyn Jitter>)> = vec![
        ("none", Box::new(NoJitter)),
        ("full", Box::new(FullJitter)),
        ("equal", Box::new(EqualJitter)),
        ("decorrelated", Box::new(Decorrelated)),
        ("aws_decorrelated", Box::new(AwsDecorrelated)),
    ];
    let mut g = c.benchmark_group("jitter");
    for (name, j) in &jitters {
        g.bench_function(*name, |bench| {
            let mut state = JitterState::default();
            bench.iter(|| {
                state.exponent = (state.exponent + 1) & 15;
                let d = j.jitter(&exp, &mut state, &mut rng);
                state.previous = Some(d);
                d
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1));
    targets = strategies
}
criterion_main!(benches);
