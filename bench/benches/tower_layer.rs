//! What a retry layer costs a tower service when nothing fails (issue 12): a `service_fn` that
//! answers at once, bare and under `RobustLayer`, `tower::retry::RetryLayer` and
//! tower-resilience's retry layer with the same limits, without and with a 2 s per-attempt
//! timeout. Ratios are computed from one run by `bench/tower_ratios.py` (see
//! docs/BENCHMARKS.md).
//!
//! Every variant does the same work per iteration: a copy of one request, then
//! `service.ready().await?.call(request).await` on a service built once, in one loop per
//! criterion batch on a tokio current-thread runtime (what `to_async` does, without its
//! borrowing limits). The request is an `http::Request<String>` (groups `tower_layer` and
//! `tower_layer_timeout`) or a `u32` (`tower_layer_u32`: the layers' own work, with no request
//! to copy or move). Before measuring, each variant runs on a service that always fails (it must
//! call it 4 times: 3 retries) and, with a timeout, on one whose first attempt hangs (cut at
//! 2 s, then retried), so that the compared layers really retry alike.

use std::fmt::Debug;
use std::hint::black_box;
use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group};
use http::{Method, Request, Response};
use retry_runtime::hedge::Hedge;
use retry_runtime::tower::{RetryRequest, RobustLayer};
use retry_runtime::{Exponential, FullJitter, Policy, PolicyBuilder};
use tower::retry::backoff::{Backoff, ExponentialBackoff, ExponentialBackoffMaker, MakeBackoff};
use tower::timeout::TimeoutLayer;
use tower::util::rng::HasherRng;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tower_resilience::retry::{ExponentialRandomBackoff, RetryLayer as ResilienceRetryLayer};
use tower_resilience::timelimiter::{TimeLimiterError, TimeLimiterLayer};

type HttpReq = Request<String>;
type HttpResp = Response<String>;

// The limits of every variant: 3 retries (4 attempts), exponential backoff from 100 ms doubling
// up to 20 s with random jitter, every error retried, no budget, no breaker; a 2 s per-attempt
// timeout in the `_timeout` group.
const RETRIES: u32 = 3;
const BASE: Duration = Duration::from_millis(100);
const MAX: Duration = Duration::from_secs(20);
const TIMEOUT: Duration = Duration::from_secs(2);

/// The request every iteration copies: a small POST with one header.
fn template() -> HttpReq {
    Request::builder()
        .method(Method::POST)
        .uri("http://example.invalid/items/7")
        .header("content-type", "text/plain")
        .body("ping".to_owned())
        .expect("a valid request")
}

/// The measured service: answers at once, echoing the body (no allocation of its own).
fn echo()
-> impl Service<HttpReq, Response = HttpResp, Error = io::Error, Future: Send> + Clone + Send + 'static
{
    tower::service_fn(|req: HttpReq| std::future::ready(Ok(Response::new(req.into_body()))))
}

/// The same with a `u32` request and response.
fn echo_u32()
-> impl Service<u32, Response = u32, Error = io::Error, Future: Send> + Clone + Send + 'static {
    tower::service_fn(|req: u32| std::future::ready(Ok(req)))
}

// --- the policies -------------------------------------------------------------------------------

/// `RobustLayer::new(robust_builder().build()?)`: the limits above (the SPEC defaults, written
/// out).
fn robust_builder() -> PolicyBuilder {
    let exponential = Exponential::new(BASE, MAX, 2.0).expect("valid backoff");
    Policy::builder()
        .retries(RETRIES)
        .backoff(exponential)
        .jitter(FullJitter)
}

/// tower's `Policy` as its docs write it: the retries left (no budget) and a backoff from
/// `ExponentialBackoffMaker` (jitter: up to +100% of each delay); `clone_request` clones.
#[derive(Clone, Debug)]
struct Attempts {
    left: u32,
    backoff: ExponentialBackoff,
}

impl Attempts {
    fn new() -> Self {
        let mut maker = ExponentialBackoffMaker::new(BASE, MAX, 1.0, HasherRng::default())
            .expect("valid backoff");
        Attempts {
            left: RETRIES,
            backoff: maker.make_backoff(),
        }
    }
}

impl<Req: Clone, Res, E> tower::retry::Policy<Req, Res, E> for Attempts {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, _req: &mut Req, result: &mut Result<Res, E>) -> Option<Self::Future> {
        match result {
            Ok(_) => None,
            Err(_) if self.left == 0 => None,
            Err(_) => {
                self.left -= 1;
                Some(self.backoff.next_backoff())
            }
        }
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

/// tower-resilience's retry: 4 attempts in all, exponential backoff (randomised by +-100%).
fn resilience_layer<Req, Res, E>() -> ResilienceRetryLayer<Req, Res, E> {
    let backoff = ExponentialRandomBackoff::new(BASE, 1.0)
        .and_then(|b| b.multiplier(2.0))
        .expect("valid backoff")
        .max_interval(MAX);
    ResilienceRetryLayer::builder()
        .max_attempts(RETRIES as usize + 1)
        .backoff(backoff)
        .build()
}

// --- the services, each built once -------------------------------------------------------------

/// A service (any of the variants) whose errors can be printed.
trait Client<Req>: Service<Req, Error: Debug> {}
impl<Req, S: Service<Req, Error: Debug>> Client<Req> for S {}

/// What the wrapped services are: an echo, or a scripted service for the check.
trait Inner<Req, Res>:
    Service<Req, Response = Res, Error = io::Error, Future: Send> + Clone + Send + 'static
{
}
impl<Req, Res, S> Inner<Req, Res> for S where
    S: Service<Req, Response = Res, Error = io::Error, Future: Send> + Clone + Send + 'static
{
}

fn robust<Req, Res, S>(inner: S) -> impl Client<Req, Response = Res>
where
    Req: RetryRequest,
    S: Inner<Req, Res>,
{
    let policy = robust_builder().build().expect("a valid policy");
    RobustLayer::new(policy).layer(inner)
}

fn robust_timeout<Req, Res, S>(inner: S) -> impl Client<Req, Response = Res>
where
    Req: RetryRequest,
    S: Inner<Req, Res>,
{
    let policy = robust_builder()
        .timeout(TIMEOUT)
        .build()
        .expect("a valid policy");
    RobustLayer::new(policy).layer(inner)
}

/// `RobustLayer::from_static` with the policy of [`robust`] (leaked once per service: the
/// bench builds a handful).
fn robust_static<Req, Res, S>(inner: S) -> impl Client<Req, Response = Res>
where
    Req: RetryRequest,
    S: Inner<Req, Res>,
{
    let policy = Box::leak(Box::new(robust_builder().build().expect("a valid policy")));
    RobustLayer::from_static(&*policy).layer(inner)
}

/// `RobustLayer::from_static` with the policy of [`robust_timeout`].
fn robust_static_timeout<Req, Res, S>(inner: S) -> impl Client<Req, Response = Res>
where
    Req: RetryRequest,
    S: Inner<Req, Res>,
{
    let policy = robust_builder()
        .timeout(TIMEOUT)
        .build()
        .expect("a valid policy");
    RobustLayer::from_static(Box::leak(Box::new(policy))).layer(inner)
}

/// `RobustLayer::hedged` with the same limits and `hedge(after = 50 ms)`: no hedge is sent
/// (the service answers at once); the layer boxes each request's future.
fn robust_hedged<Req, Res, S>(inner: S) -> impl Client<Req, Response = Res>
where
    Req: RetryRequest + Send + 'static,
    Res: Send + 'static,
    S: Inner<Req, Res>,
{
    let hedge = Hedge::after(Duration::from_millis(50), 1).expect("a valid hedge");
    let policy = robust_builder()
        .hedge(hedge)
        .build()
        .expect("a valid policy");
    RobustLayer::hedged(policy).layer(inner)
}

fn tower_retry<Req, Res, S>(inner: S) -> impl Client<Req, Response = Res>
where
    Req: Clone,
    S: Inner<Req, Res>,
{
    tower::retry::RetryLayer::new(Attempts::new()).layer(inner)
}

fn tower_retry_timeout<Req, Res, S>(inner: S) -> impl Client<Req, Response = Res>
where
    Req: Clone,
    S: Inner<Req, Res>,
{
    ServiceBuilder::new()
        .layer(tower::retry::RetryLayer::new(Attempts::new()))
        .layer(TimeoutLayer::new(TIMEOUT))
        .service(inner)
}

fn resilience<Req, Res, S>(inner: S) -> impl Client<Req, Response = Res>
where
    Req: Clone + Send + 'static,
    Res: Send + 'static,
    S: Inner<Req, Res>,
{
    resilience_layer::<Req, Res, io::Error>().layer(inner)
}

fn resilience_timeout<Req, Res, S>(inner: S) -> impl Client<Req, Response = Res>
where
    Req: Clone + Send + 'static,
    Res: Send + 'static,
    S: Inner<Req, Res>,
{
    ServiceBuilder::new()
        .layer(resilience_layer::<Req, Res, TimeLimiterError<io::Error>>())
        .layer(
            TimeLimiterLayer::builder()
                .timeout_duration(TIMEOUT)
                .build(),
        )
        .service(inner)
}

// --- the same-behaviour check -------------------------------------------------------------------

/// A service that fails (`ConnectionReset`) in its first `fails` calls and hangs for a minute in
/// its first `hangs` calls, then echoes; counts its calls.
fn scripted(fails: u32, hangs: u32) -> (impl Inner<HttpReq, HttpResp>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = tower::service_fn(move |req: HttpReq| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            if n < hangs {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            if n < fails {
                return Err(io::Error::from(ErrorKind::ConnectionReset));
            }
            Ok(Response::new(req.into_body()))
        }
    });
    (svc, calls)
}

async fn call_once<S: Client<HttpReq>>(mut svc: S) -> Result<S::Response, S::Error> {
    svc.ready().await?.call(template()).await
}

/// Each variant calls a service that always fails 4 times and returns its error; with a
/// timeout, it cuts an attempt that hangs at 2 s and retries. The variants run concurrently,
/// on real time (about 2 s in all, the backoffs included).
fn check_same_behaviour(rt: &tokio::runtime::Runtime) {
    rt.block_on(async {
        let failing: [_; 8] = std::array::from_fn(|_| scripted(u32::MAX, 0));
        let hanging: [_; 4] = std::array::from_fn(|_| scripted(0, 1));
        let [
            (f1, _),
            (f2, _),
            (f3, _),
            (f4, _),
            (f5, _),
            (f6, _),
            (f7, _),
            (f8, _),
        ] = failing.clone();
        let [(h1, _), (h2, _), (h3, _), (h4, _)] = hanging.clone();
        let start = Instant::now();
        let ((r1, r2, r3, r4, r5, r6, r7, r8), (t1, t2, t3, t4)) = tokio::join!(
            async {
                tokio::join!(
                    call_once(robust(f1)),
                    call_once(tower_retry(f2)),
                    call_once(resilience(f3)),
                    call_once(robust_timeout(f4)),
                    call_once(tower_retry_timeout(f5)),
                    call_once(resilience_timeout(f6)),
                    call_once(robust_static(f7)),
                    call_once(robust_static_timeout(f8)),
                )
            },
            async {
                tokio::join!(
                    call_once(robust_timeout(h1)),
                    call_once(tower_retry_timeout(h2)),
                    call_once(resilience_timeout(h3)),
                    call_once(robust_static_timeout(h4)),
                )
            },
        );
        let calls = failing.map(|(_, c)| c.load(Ordering::SeqCst));
        let errors = [r1.is_err(), r2.is_err(), r3.is_err(), r7.is_err()];
        let errors_timeout = [r4.is_err(), r5.is_err(), r6.is_err(), r8.is_err()];
        assert_eq!(
            errors, [true; 4],
            "robust, tower, resilience, robust (static) return the error"
        );
        assert_eq!(errors_timeout, [true; 4], "the same with a timeout");
        assert_eq!(
            calls,
            [RETRIES + 1; 8],
            "robust, tower, resilience (then with timeout), robust (static, without and with)"
        );
        let calls = hanging.map(|(_, c)| c.load(Ordering::SeqCst));
        let answered = [t1.is_ok(), t2.is_ok(), t3.is_ok(), t4.is_ok()];
        assert_eq!(
            answered, [true; 4],
            "a hung attempt is cut, the retry answers"
        );
        assert_eq!(
            calls, [2; 4],
            "robust, tower, resilience, robust (static): the hung attempt and one more"
        );
        assert!(start.elapsed() >= TIMEOUT);
    });
}

// --- the measurement ----------------------------------------------------------------------------

/// `iters` calls of `svc`, each with a copy of `request`.
async fn run<Req: Clone, S: Client<Req>>(svc: &mut S, request: &Req, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        let request = black_box(request).clone();
        let response = svc
            .ready()
            .await
            .expect("ready")
            .call(request)
            .await
            .expect("a response");
        black_box(response);
    }
    start.elapsed()
}

fn variant<Req: Clone, S: Client<Req>>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    rt: &tokio::runtime::Runtime,
    name: &str,
    request: Req,
    mut svc: S,
) {
    g.bench_function(name, |b| {
        b.iter_custom(|iters| rt.block_on(run(&mut svc, &request, iters)))
    });
}

/// The size of the future `svc.call(request)` returns.
fn future_size<Req, S: Service<Req>>(mut svc: S, request: Req) -> usize {
    std::mem::size_of_val(&svc.call(request))
}

fn success(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    check_same_behaviour(&rt);
    {
        let _in_runtime = rt.enter(); // the timeout layers make their timer in `call`
        let t = template;
        println!(
            "response future sizes (bytes), http request: bare {}, robust {}, robust_static {}, \
             tower_retry {}, resilience {}; with a timeout: robust {}, tower_retry {}, \
             resilience {}; u32 request: robust {}, tower_retry {}",
            future_size(echo(), t()),
            future_size(robust(echo()), t()),
            future_size(robust_static(echo()), t()),
            future_size(tower_retry(echo()), t()),
            future_size(resilience(echo()), t()),
            future_size(robust_timeout(echo()), t()),
            future_size(tower_retry_timeout(echo()), t()),
            future_size(resilience_timeout(echo()), t()),
            future_size(robust(echo_u32()), 7),
            future_size(tower_retry(echo_u32()), 7),
        );
    }

    let request = template();
    let mut g = c.benchmark_group("tower_layer");
    variant(&mut g, &rt, "bare", request.clone(), echo());
    variant(&mut g, &rt, "robust", request.clone(), robust(echo()));
    let svc = robust_static(echo());
    variant(&mut g, &rt, "robust_static", request.clone(), svc);
    variant(
        &mut g,
        &rt,
        "tower_retry",
        request.clone(),
        tower_retry(echo()),
    );
    variant(
        &mut g,
        &rt,
        "resilience",
        request.clone(),
        resilience(echo()),
    );
    g.finish();

    let mut g = c.benchmark_group("tower_layer_timeout");
    variant(&mut g, &rt, "bare", request.clone(), echo());
    variant(
        &mut g,
        &rt,
        "robust",
        request.clone(),
        robust_timeout(echo()),
    );
    let svc = robust_static_timeout(echo());
    variant(&mut g, &rt, "robust_static", request.clone(), svc);
    let svc = tower_retry_timeout(echo());
    variant(&mut g, &rt, "tower_retry", request.clone(), svc);
    let svc = resilience_timeout(echo());
    variant(&mut g, &rt, "resilience", request.clone(), svc);
    g.finish();

    // The hedged layer against the plain one: what a hedge that is not sent costs.
    let mut g = c.benchmark_group("tower_layer_hedged");
    variant(&mut g, &rt, "robust", request.clone(), robust(echo()));
    variant(
        &mut g,
        &rt,
        "robust_hedged",
        request.clone(),
        robust_hedged(echo()),
    );
    variant(&mut g, &rt, "robust_u32", 7u32, robust(echo_u32()));
    variant(
        &mut g,
        &rt,
        "robust_hedged_u32",
        7u32,
        robust_hedged(echo_u32()),
    );
    g.finish();

    let mut g = c.benchmark_group("tower_layer_u32");
    variant(&mut g, &rt, "bare", 7u32, echo_u32());
    variant(&mut g, &rt, "robust", 7u32, robust(echo_u32()));
    variant(
        &mut g,
        &rt,
        "robust_static",
        7u32,
        robust_static(echo_u32()),
    );
    variant(&mut g, &rt, "tower_retry", 7u32, tower_retry(echo_u32()));
    variant(&mut g, &rt, "resilience", 7u32, resilience(echo_u32()));
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = success
}

/// Criterion's run, or, with `ROBUST_AB=<rounds>` in the environment, the interleaved
/// comparison ([`interleaved`]).
fn main() {
    match std::env::var("ROBUST_AB") {
        Ok(rounds) => interleaved(rounds.parse().unwrap_or(200)),
        Err(_) => {
            benches();
            Criterion::default().configure_from_args().final_summary();
        }
    }
}

/// The same variants, measured in turn in short batches (`BATCH` calls each, the order rotated
/// each round) for `rounds` rounds, so that a machine whose speed drifts from one second to the
/// next (a shared VM) slows every variant alike: per group, the median time per call of each
/// variant, and the median, first and third quartiles of the per-round ratio robust / tower,
/// and of the difference robust - robust (static), beside one `Arc` share timed alone.
/// Criterion measures one variant after the other, for seconds each; on such a machine its
/// ratios move by more than the differences measured here.
fn interleaved(rounds: usize) {
    const BATCH: u64 = 2000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let _in_runtime = rt.enter();
    type Variant<'a> = (&'static str, Box<dyn FnMut(u64) -> Duration + 'a>);
    fn variant<'a, Req: Clone + 'a, S: Client<Req> + 'a>(
        rt: &'a tokio::runtime::Runtime,
        name: &'static str,
        request: Req,
        mut svc: S,
    ) -> Variant<'a> {
        (
            name,
            Box::new(move |iters| rt.block_on(run(&mut svc, &request, iters))),
        )
    }
    // What `RobustLayer::new` pays per request beyond `from_static`: one share of an `Arc`
    // taken and given back (two atomic operations), measured in the same rounds.
    fn arc_share<'a>() -> Variant<'a> {
        let policy = Arc::new(robust_builder().build().expect("a valid policy"));
        (
            "arc_share",
            Box::new(move |iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    drop(black_box(Arc::clone(&policy)));
                }
                start.elapsed()
            }),
        )
    }
    let http = template;
    let groups: Vec<(&str, Vec<Variant<'_>>)> = vec![
        (
            "http, none",
            vec![
                variant(&rt, "bare", http(), echo()),
                variant(&rt, "robust", http(), robust(echo())),
                variant(&rt, "tower_retry", http(), tower_retry(echo())),
                variant(&rt, "resilience", http(), resilience(echo())),
                variant(&rt, "robust_static", http(), robust_static(echo())),
                arc_share(),
            ],
        ),
        (
            "http, 2 s",
            vec![
                variant(&rt, "bare", http(), echo()),
                variant(&rt, "robust", http(), robust_timeout(echo())),
                variant(&rt, "tower_retry", http(), tower_retry_timeout(echo())),
                variant(&rt, "resilience", http(), resilience_timeout(echo())),
                variant(&rt, "robust_static", http(), robust_static_timeout(echo())),
                arc_share(),
            ],
        ),
        (
            "u32, none",
            vec![
                variant(&rt, "bare", 7u32, echo_u32()),
                variant(&rt, "robust", 7u32, robust(echo_u32())),
                variant(&rt, "tower_retry", 7u32, tower_retry(echo_u32())),
                variant(&rt, "resilience", 7u32, resilience(echo_u32())),
                variant(&rt, "robust_static", 7u32, robust_static(echo_u32())),
                arc_share(),
            ],
        ),
    ];
    let median = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q).round() as usize]
    };
    println!(
        "| request, timeout | bare | robust | robust (static) | tower retry | tower-resilience | robust / tower (q1, median, q3) | robust / resilience (q1, median, q3) | static / tower (q1, median, q3) | static / resilience (q1, median, q3) | robust - static (q1, median, q3) | one `Arc` share |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // `ROBUST_AB_ONLY=u32` (a prefix of the groups' labels) runs one group.
    let only = std::env::var("ROBUST_AB_ONLY").unwrap_or_default();
    for (label, mut variants) in groups {
        if !label.starts_with(&only) {
            continue;
        }
        let n = variants.len();
        let mut times = vec![Vec::with_capacity(rounds); n];
        for (_, f) in &mut variants {
            f(BATCH); // warm-up
        }
        for round in 0..rounds {
            for k in 0..n {
                let i = (round + k) % n;
                let took = (variants[i].1)(BATCH);
                times[i].push(took.as_nanos() as f64 / BATCH as f64);
            }
        }
        // The per-round ratios of variant `a` (robust: 1, robust static: 4) to the variant `b`,
        // as "median (first quartile, third quartile)".
        let ratio = |a: usize, b: usize| {
            let mut ratios: Vec<f64> = times[a].iter().zip(&times[b]).map(|(r, t)| r / t).collect();
            let [q1, q2, q3] = [0.25, 0.5, 0.75].map(|q| median(&mut ratios, q));
            format!("{q2:.3} ({q1:.3}, {q3:.3})")
        };
        let ratios = [ratio(1, 2), ratio(1, 3), ratio(4, 2), ratio(4, 3)];
        // The per-round difference robust - robust static, in ns per call.
        let mut gaps: Vec<f64> = times[1].iter().zip(&times[4]).map(|(r, s)| r - s).collect();
        let [g1, g2, g3] = [0.25, 0.5, 0.75].map(|q| median(&mut gaps, q));
        let m: Vec<f64> = times.iter_mut().map(|t| median(t, 0.5)).collect();
        println!(
            "| {label} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {g2:.1} ({g1:.1}, {g3:.1}) | {:.1} |",
            m[0],
            m[1],
            m[4],
            m[2],
            m[3],
            ratios.join(" | "),
            m[5],
        );
    }
}
