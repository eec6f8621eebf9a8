//! The success path measured as a whole process: `success_path VARIANT N` calls the variant
//! N times (a body that never fails, which the optimiser cannot prove) and prints the sum.
//! `bench/success_path.py` runs the variants interleaved and prints the ratios.

use std::hint::black_box;

use robust_bench::*;

fn main() {
    let mut args = std::env::args().skip(1);
    let variant = args.next().unwrap_or_default();
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000_000);
    let sync: Option<fn(u64) -> std::io::Result<u64>> = match variant.as_str() {
        "robust_sync_io" => Some(robust_sync_io),
        "hand_sync_io" => Some(hand_sync_io),
        _ => None,
    };
    let mut sum = 0u64;
    if let Some(f) = sync {
        for i in 0..n {
            sum = sum.wrapping_add(f(black_box(i)).unwrap_or(0));
        }
    } else {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        sum = rt.block_on(async {
            let mut sum = 0u64;
            for i in 0..n {
                let r = match variant.as_str() {
                    "robust_async_io" => robust_async_io(black_box(i)).await,
                    "hand_async_io" => hand_async_io(black_box(i)).await,
                    "robust_async_plain_io" => robust_async_plain_io(black_box(i)).await,
                    "hand_async_plain_io" => hand_async_plain_io(black_box(i)).await,
                    other => panic!("unknown variant {other}"),
                };
                sum = sum.wrapping_add(r.unwrap_or(0));
            }
            sum
        });
    }
    println!("{sum}");
}
