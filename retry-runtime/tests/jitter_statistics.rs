//! Distribution checks with fixed seeds. With 100 000 draws, the standard error of a mean of
//! a uniform variable on [0, v] is about 0.0009 v, and of a rate of 1/2 about 0.0016; the
//! tolerances below are about ten standard errors, so a correct algorithm does not fail by
//! chance, while a wrong one (off by a factor, or a biased coin) does.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use retry_runtime::{
    Backoff, Constant, Decorrelated, EqualJitter, Exponential, FullJitter, Jitter, JitterState,
};

const N: usize = 100_000;

fn draws(j: &dyn Jitter, b: &dyn Backoff, exponent: u32, seed: u64) -> Vec<f64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..N)
        .map(|_| {
            let mut s = JitterState {
                exponent,
                previous: None,
            };
            j.jitter(b, &mut s, &mut rng).as_secs_f64()
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn full_jitter_is_uniform_on_zero_to_v() {
    let b = Constant::new(Duration::from_secs(8));
    let d = draws(&FullJitter, &b, 0, 1);
    assert!(d.iter().all(|s| (0.0..=8.0).contains(s)));
    let m = mean(&d);
    assert!((m - 4.0).abs() < 0.08, "mean {m}, expected 4 ± 0.08");
    // Quartiles of a uniform distribution.
    let below_2 = d.iter().filter(|s| **s < 2.0).count() as f64 / N as f64;
    assert!((below_2 - 0.25).abs() < 0.01, "P(< v/4) = {below_2}");
}

#[test]
fn equal_jitter_is_uniform_on_half_v_to_v() {
    let b = Constant::new(Duration::from_secs(8));
    let d = draws(&EqualJitter, &b, 0, 2);
    assert!(d.iter().all(|s| (4.0..=8.0).contains(s)));
    let m = mean(&d);
    assert!((m - 6.0).abs() < 0.04, "mean {m}, expected 3v/4 = 6 ± 0.04");
}

#[test]
fn decorrelated_resets_the_exponent_half_of_the_time() {
    let b = Exponential::new(Duration::from_secs(1), Duration::from_secs(600), 2.0).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut resets = 0usize;
    for _ in 0..N {
        let mut s = JitterState {
            exponent: 5,
            previous: None,
        };
        let d = Decorrelated.jitter(&b, &mut s, &mut rng);
        if s.exponent == 0 {
            resets += 1;
            assert_eq!(d, Duration::from_secs(1));
        } else {
            assert_eq!(d, Duration::from_secs(32));
        }
    }
    let rate = resets as f64 / N as f64;
    assert!(
        (rate - 0.5).abs() < 0.016,
        "reset rate {rate}, expected 0.5 ± 0.016"
    );
}

#[test]
fn decorrelated_exponent_walk_over_a_call() {
    // Over a sequence of retries the exponent grows by one after each retry and falls to 0
    // on a reset, so its long-run mean is about 1 (a geometric walk with p = 1/2).
    let b = Exponential::new(Duration::from_secs(1), Duration::from_secs(600), 2.0).unwrap();
    let mut rng = SmallRng::seed_from_u64(4);
    let mut s = JitterState::default();
    let mut sum = 0u64;
    for _ in 0..N {
        Decorrelated.jitter(&b, &mut s, &mut rng);
        sum += u64::from(s.exponent);
        s.exponent += 1;
    }
    let m = sum as f64 / N as f64;
    assert!(
        (m - 1.0).abs() < 0.05,
        "mean exponent {m}, expected 1 ± 0.05"
    );
}
