//! `RobustLayer` (feature `tower`, SPEC section 17): the wrapped service is called once per
//! attempt with a copy of the request; errors and `Ok` responses are classified by the
//! policy's rules, with its timeout, hints, budget, breaker and fallback. A request whose body
//! cannot be copied is sent once.

use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use retry_runtime::kind::{Io, OkIf};
use retry_runtime::tower::{RetryBody, RobustLayer};
use retry_runtime::{
    AdaptiveThrottle, CircuitBreaker, Constant, NoBackoff, NoJitter, Policy, RetryBudget,
};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

mod common;
use common::*;

type Resp = Response<String>;

fn status(code: StatusCode) -> Resp {
    Response::builder()
        .status(code)
        .body(String::new())
        .unwrap()
}

fn retry_after(secs: u64) -> Resp {
    Response::builder()
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .header("retry-after", secs.to_string())
        .body(String::new())
        .unwrap()
}

fn retry_after_of(r: &Resp) -> Option<Duration> {
    let s = r.headers().get("retry-after")?.to_str().ok()?;
    s.parse().ok().map(Duration::from_secs)
}

/// A service answering each call with the script's next step (the last repeats); counts calls.
fn scripted<B: Send + 'static>(
    script: Vec<io::Result<Resp>>,
) -> (
    impl Service<Request<B>, Response = Resp, Error = io::Error, Future: Send> + Clone + Send,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let script = Arc::new(script);
    let counter = Arc::clone(&calls);
    let svc = tower::service_fn(move |_req: Request<B>| {
        let n = counter.fetch_add(1, Ordering::SeqCst) as usize;
        let step = match &script[n.min(script.len() - 1)] {
            Ok(r) => Ok(clone_resp(r)),
            Err(e) => Err(io::Error::from(e.kind())),
        };
        async move { step }
    });
    (svc, calls)
}

fn clone_resp(r: &Resp) -> Resp {
    let mut c = Response::new(r.body().clone());
    *c.status_mut() = r.status();
    *c.headers_mut() = r.headers().clone();
    c
}

/// The answers of `unavailable_responses_are_retried_after_the_delay_the_server_asks_for`.
fn unavailable_twice() -> Vec<io::Result<Resp>> {
    vec![
        Ok(retry_after(3)),
        Ok(status(StatusCode::TOO_MANY_REQUESTS)),
        Ok(retry_after(2)),
        Ok(status(StatusCode::OK)),
    ]
}

/// `layer` over `svc` (answering [`unavailable_twice`]) retries each answer after the delay
/// asked for, or its backoff, and returns the 200.
async fn retries_after_the_delays_asked<L, S>(layer: L, svc: S, calls: &AtomicU32)
where
    L: Layer<S>,
    L::Service: Service<Request<String>, Response = Resp, Error = io::Error>,
{
    let mut client = layer.layer(svc);
    let start = Instant::now();
    let r = client
        .ready()
        .await
        .unwrap()
        .call(Request::new("ping".to_owned()))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    // 3 s (Retry-After), 1 s (backoff), 2 s (Retry-After).
    assert_eq!(start.elapsed(), secs(6));
}

/// A 503's `Retry-After`, a 429's backoff; the same through a `DynPolicy` of the policy (one
/// type for policies built at run time).
#[tokio::test(start_paused = true)]
async fn unavailable_responses_are_retried_after_the_delay_the_server_asks_for() {
    let policy = Policy::builder()
        .retries(5)
        .backoff(Constant::new(secs(1)))
        .jitter(NoJitter)
        .when_ok(
            OkIf(|r: &Resp| r.status() == StatusCode::SERVICE_UNAVAILABLE).hint(retry_after_of),
            |s| s,
        )
        .on_ok(OkIf(|r: &Resp| r.status() == StatusCode::TOO_MANY_REQUESTS))
        .build()
        .unwrap();
    let (svc, calls) = scripted(unavailable_twice());
    retries_after_the_delays_asked(RobustLayer::new(policy), svc, &calls).await;
    let dynamic = retry_runtime::DynPolicy::<Resp, io::Error>::new(policy);
    let (svc, calls) = scripted(unavailable_twice());
    retries_after_the_delays_asked(RobustLayer::new(dynamic), svc, &calls).await;
    // The same policy held by a `&'static` reference.
    let (svc, calls) = scripted(unavailable_twice());
    let leaked = Box::leak(Box::new(policy));
    retries_after_the_delays_asked(RobustLayer::from_static(&*leaked), svc, &calls).await;
}

/// Under the hedged layer, an answer that asks for a delay sends no hedge (the server asked to
/// be left alone) and decides its round's backoff: the 503 at 0 s waits its 3 s; the 429 at
/// 3 s asks nothing and starts a hedge at once, whose 503 asks for 2 s; the 200 comes at 5 s.
/// (Before, each 503 was followed by a hedge at once: the answers came in one second.)
#[tokio::test(start_paused = true)]
async fn a_hedged_request_waits_the_delay_the_server_asks_for() {
    let policy = Policy::builder()
        .retries(5)
        .backoff(Constant::new(secs(1)))
        .jitter(NoJitter)
        .when_ok(
            OkIf(|r: &Resp| r.status() == StatusCode::SERVICE_UNAVAILABLE).hint(retry_after_of),
            |s| s,
        )
        .on_ok(OkIf(|r: &Resp| r.status() == StatusCode::TOO_MANY_REQUESTS))
        .hedge(retry_runtime::hedge::Hedge::after(ms(500), 1).unwrap())
        .build()
        .unwrap();
    let (svc, calls) = scripted(unavailable_twice());
    let start = Instant::now();
    let r = RobustLayer::hedged(policy)
        .layer(svc)
        .oneshot(Request::new("ping".to_owned()))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(start.elapsed(), secs(5));
}

/// Under the hedged layer, a failure whose rule never retries (`retries(0)`) wins at once and
/// sends no hedge (it started one at once before: three requests in 3 ms).
#[tokio::test(start_paused = true)]
async fn a_hedged_request_is_not_resent_after_a_failure_no_rule_retries() {
    let policy = Policy::builder()
        .retries(0)
        .hedge(retry_runtime::hedge::Hedge::after(ms(50), 2).unwrap())
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&calls);
    let svc = tower::service_fn(move |_: u32| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(ms(1)).await;
            Err::<u32, _>(io::Error::new(
                ErrorKind::ConnectionRefused,
                format!("e{n}"),
            ))
        }
    });
    let start = Instant::now();
    let r = RobustLayer::hedged(policy).layer(svc).oneshot(7).await;
    assert_eq!(r.unwrap_err().to_string(), "e0");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(start.elapsed(), ms(1));
}

/// Both layers credit the budget once per request, in `call`: a future dropped before it is
/// polled still counts as a call, and one that runs credits nothing more. (The hedged layer
/// credited it at the future's first poll before.)
#[tokio::test(start_paused = true)]
async fn both_layers_credit_the_budget_once_per_request_in_call() {
    static PLAIN: RetryBudget = match RetryBudget::new(10.0, 1.0, 10.0) {
        Ok(b) => b,
        Err(_) => panic!(),
    };
    static HEDGED: RetryBudget = match RetryBudget::new(10.0, 1.0, 10.0) {
        Ok(b) => b,
        Err(_) => panic!(),
    };
    for (budget, hedged) in [(&PLAIN, false), (&HEDGED, true)] {
        // Emptied: each request's deposit shows.
        assert!(budget.try_withdraw());
        assert_eq!(budget.tokens(), 0.0);
        let builder = Policy::builder()
            .retries(1)
            .backoff(NoBackoff)
            .budget(budget);
        let (svc, calls) = scripted::<String>(vec![Ok(status(StatusCode::OK))]);
        let mut service = if hedged {
            let policy = builder
                .hedge(retry_runtime::hedge::Hedge::after(ms(500), 1).unwrap())
                .build()
                .unwrap();
            tower::util::BoxService::new(RobustLayer::hedged(policy).layer(svc))
        } else {
            let policy = builder.build().unwrap();
            tower::util::BoxService::new(RobustLayer::new(policy).layer(svc))
        };
        for _ in 0..2 {
            let dropped = service
                .ready()
                .await
                .unwrap()
                .call(Request::new(String::new()));
            drop(dropped);
        }
        assert_eq!(budget.tokens(), 2.0, "hedged: {hedged}");
        let ran = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(String::new()));
        assert_eq!(ran.await.unwrap().status(), StatusCode::OK);
        assert_eq!(budget.tokens(), 3.0, "hedged: {hedged}");
        assert!(calls.load(Ordering::SeqCst) >= 1);
    }
}

/// With a budget per key, both layers credit the budget of the request's key once per request,
/// in `call`: a future dropped before it is polled counts, one that runs credits nothing more,
/// and a request sent once (its body cannot be copied) is credited as any other, under the
/// hedged layer too (where it takes a path of its own). Another key's budget is not touched.
#[tokio::test(start_paused = true)]
async fn both_layers_credit_the_budget_of_the_requests_key_once_in_call() {
    use retry_runtime::guard::{Keyed, KeyedBudget};
    use retry_runtime::hedge::Hedge;
    static BUDGETS: std::sync::LazyLock<KeyedBudget<String>> = std::sync::LazyLock::new(|| {
        Keyed::new(16, RetryBudget::new(10.0, 1.0, 10.0).expect("valid")).expect("capacity")
    });
    fn key<B>(r: &Request<B>) -> String {
        r.uri().path().to_owned()
    }
    fn to<B>(path: &str, body: B) -> Request<B> {
        Request::builder().uri(path).body(body).unwrap()
    }
    let base = || Policy::builder().retries(1).backoff(NoBackoff);
    let plain = || RobustLayer::new(base().build().unwrap());
    let hedged = || {
        RobustLayer::hedged(
            base()
                .hedge(Hedge::after(ms(500), 1).unwrap())
                .build()
                .unwrap(),
        )
    };
    macro_rules! credits_once {
        ($layer:expr, $mine:literal, $other:literal) => {{
            for k in [$mine, $other] {
                // Emptied: each request's deposit shows.
                assert!(BUDGETS.get(k).try_withdraw());
                assert_eq!(BUDGETS.get(k).tokens(), 0.0);
            }
            let (svc, calls) = scripted::<String>(vec![Ok(status(StatusCode::OK))]);
            let mut service = $layer.budget_per(&*BUDGETS, key::<String>).layer(svc);
            for _ in 0..2 {
                drop(
                    service
                        .ready()
                        .await
                        .unwrap()
                        .call(to($mine, String::new())),
                );
            }
            assert_eq!(BUDGETS.get($mine).tokens(), 2.0, $mine);
            let r = service
                .ready()
                .await
                .unwrap()
                .call(to($mine, String::new()));
            assert_eq!(r.await.unwrap().status(), StatusCode::OK);
            assert_eq!(BUDGETS.get($mine).tokens(), 3.0, $mine);
            // (A dropped future's attempt was sent if `call` sent it: without a guard,
            // timeout or start instant to read, it does.)
            assert!((1..=3).contains(&calls.load(Ordering::SeqCst)));
            let (once, once_calls) = scripted::<Stream>(vec![Ok(status(StatusCode::OK))]);
            let service = $layer.budget_per(&*BUDGETS, key::<Stream>).layer(once);
            let r = service.oneshot(to($mine, Stream)).await;
            assert_eq!(r.unwrap().status(), StatusCode::OK);
            assert_eq!(once_calls.load(Ordering::SeqCst), 1);
            assert_eq!(BUDGETS.get($mine).tokens(), 4.0, $mine);
            assert_eq!(BUDGETS.get($other).tokens(), 0.0, $other);
        }};
    }
    credits_once!(plain(), "/plain", "/plain-other");
    credits_once!(hedged(), "/hedged", "/hedged-other");
}

#[tokio::test(start_paused = true)]
async fn the_last_response_is_returned_when_the_retries_are_used_up() {
    let policy = Policy::builder()
        .retries(2)
        .backoff(NoBackoff)
        .on_ok(OkIf(|r: &Resp| r.status().is_server_error()))
        .build()
        .unwrap();
    let (svc, calls) = scripted(vec![Ok(status(StatusCode::BAD_GATEWAY))]);
    let r = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn errors_follow_the_rules_and_a_hung_attempt_is_cut_by_the_timeout() {
    let policy = Policy::builder()
        .retries(3)
        .timeout(ms(500))
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .on(retry_runtime::kind::ClassifyExt::or(
            retry_runtime::kind::Timeout,
            Io::of([ErrorKind::ConnectionReset]),
        ))
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = tower::service_fn(move |_req: Request<String>| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            match n {
                0 => Err(io::Error::from(ErrorKind::ConnectionReset)),
                1 => {
                    tokio::time::sleep(secs(60)).await; // hangs: cut at 500 ms
                    Ok(status(StatusCode::OK))
                }
                2 => Err(io::Error::from(ErrorKind::PermissionDenied)), // not retried
                _ => Ok(status(StatusCode::OK)),
            }
        }
    });
    let start = Instant::now();
    let e = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // reset, 100 ms, hang cut at 500 ms, 100 ms, denied.
    assert_eq!(start.elapsed(), ms(700));
}

/// A body that can be read only once.
struct Stream;
impl RetryBody for Stream {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_whose_body_cannot_be_copied_is_sent_once() {
    let policy = Policy::builder()
        .retries(5)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    let (svc, calls) = scripted::<Stream>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let e = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(Stream))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "never sent twice");

    // A copyable body of the same service is retried.
    let policy = Policy::builder()
        .retries(5)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    let (svc, calls) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let _ = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await;
    assert_eq!(calls.load(Ordering::SeqCst), 6);
}

/// A request sent once (its body cannot be copied) counts for the throttle as any attempt
/// does: accepted unless it failed with an error a rule retries.
#[tokio::test(start_paused = true)]
async fn a_request_sent_once_counts_for_the_throttle_as_any_attempt() {
    // k = 1: one request not accepted gives 1/2, accepted gives 0.
    let probability = |kind: ErrorKind| async move {
        let throttle = AdaptiveThrottle::new(1.0, Duration::from_secs(60)).unwrap();
        let policy = Policy::builder()
            .retries(5)
            .on(Io::of([ErrorKind::ConnectionReset]))
            .throttle(&throttle)
            .build()
            .unwrap();
        let (svc, calls) = scripted::<Stream>(vec![Err(kind.into())]);
        let e = RobustLayer::new(policy)
            .layer(svc)
            .oneshot(Request::new(Stream))
            .await
            .unwrap_err();
        assert_eq!((e.kind(), calls.load(Ordering::SeqCst)), (kind, 1));
        throttle.reject_probability(std::time::Instant::now())
    };
    // An error no rule retries is the service's answer: accepted.
    assert_eq!(probability(ErrorKind::PermissionDenied).await, 0.0);
    // One a rule retries is not.
    assert_eq!(probability(ErrorKind::ConnectionReset).await, 0.5);
}

#[tokio::test(start_paused = true)]
async fn each_attempt_gets_a_copy_of_the_whole_request() {
    let policy = Policy::builder()
        .retries(2)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let svc = tower::service_fn(move |req: Request<String>| {
        let mut v = log.lock().unwrap();
        v.push((
            req.method().clone(),
            req.uri().to_string(),
            req.headers()["x-id"].to_str().unwrap().to_owned(),
            req.body().clone(),
        ));
        let fail = v.len() < 3;
        async move {
            if fail {
                Err(io::Error::from(ErrorKind::ConnectionReset))
            } else {
                Ok(status(StatusCode::OK))
            }
        }
    });
    let req = Request::post("http://127.0.0.1/jobs")
        .header("x-id", "42")
        .body("payload".to_owned())
        .unwrap();
    let r = RobustLayer::new(policy).layer(svc).oneshot(req).await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for s in seen.iter() {
        assert_eq!(
            s,
            &(
                http::Method::POST,
                "http://127.0.0.1/jobs".to_owned(),
                "42".to_owned(),
                "payload".to_owned()
            )
        );
    }
}

/// A request marked `SendOnce` in its extensions is sent once, under either layer, and the
/// others are retried: marked above the layer for every method that is not idempotent, a
/// `POST` to a failing service is one call, a `GET` four (three retries).
#[tokio::test(start_paused = true)]
async fn a_request_marked_send_once_is_sent_once() {
    use retry_runtime::hedge::Hedge;
    use retry_runtime::tower::SendOnce;
    let failing = || {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let svc = tower::service_fn(move |_: Request<String>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Err::<Resp, _>(io::Error::from(ErrorKind::ConnectionReset)) }
        });
        (svc, calls)
    };
    let mark = |mut r: Request<String>| {
        if !r.method().is_idempotent() {
            r.extensions_mut().insert(SendOnce);
        }
        r
    };
    let request = |method: http::Method| {
        Request::builder()
            .method(method)
            .uri("http://127.0.0.1/jobs")
            .body("payload".to_owned())
            .unwrap()
    };
    let builder = || Policy::builder().retries(3).backoff(NoBackoff);
    for (method, expected) in [(http::Method::POST, 1), (http::Method::GET, 4)] {
        let (svc, calls) = failing();
        let policy = builder().build().unwrap();
        let client = tower::ServiceBuilder::new()
            .map_request(mark)
            .layer(RobustLayer::new(policy))
            .service(svc);
        let r = client.oneshot(request(method.clone())).await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
        assert_eq!(calls.load(Ordering::SeqCst), expected, "{method}");
        // Hedged: no hedge either (one would go out at once after the failure).
        let (svc, calls) = failing();
        let policy = builder()
            .hedge(Hedge::after(ms(10), 1).unwrap())
            .build()
            .unwrap();
        let client = tower::ServiceBuilder::new()
            .map_request(mark)
            .layer(RobustLayer::hedged(policy))
            .service(svc);
        let r = client.oneshot(request(method.clone())).await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
        // (Unmarked: each of the four rounds sends its attempt and, at its failure, a hedge.)
        assert_eq!(
            calls.load(Ordering::SeqCst),
            if expected == 1 { 1 } else { 8 },
            "hedged {method}"
        );
    }
}

static BREAKER: std::sync::LazyLock<CircuitBreaker> = std::sync::LazyLock::new(|| {
    CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1).expect("valid breaker")
});

#[tokio::test(start_paused = true)]
async fn an_open_breaker_rejects_without_calling_and_the_fallback_answers() {
    let policy = Policy::builder()
        .retries(1)
        .backoff(NoBackoff)
        .breaker(&BREAKER)
        .fallback(|e: io::Error| {
            if e.kind() == ErrorKind::Other {
                Ok(status(StatusCode::NON_AUTHORITATIVE_INFORMATION)) // a cached answer
            } else {
                Err(e)
            }
        })
        .build()
        .unwrap();
    let (svc, calls) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let mut client = RobustLayer::new(policy).layer(svc);
    let e = client
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Open now: the request is rejected with E::from(Open) and the fallback answers.
    let r = client
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NON_AUTHORITATIVE_INFORMATION);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "no call while open");
}

static BUDGET: RetryBudget = match RetryBudget::new(20.0, 0.0, 1.0) {
    Ok(b) => b,
    Err(_) => panic!("invalid budget"),
};

static STATIC_BUDGET: RetryBudget = match RetryBudget::new(20.0, 0.0, 1.0) {
    Ok(b) => b,
    Err(_) => panic!("invalid budget"),
};

/// 64 requests spawned on 4 threads, each failing, spend exactly the budget's 20 retries: with
/// the policy in an `Arc` ([`RobustLayer::new`]) and by a `&'static` reference
/// ([`RobustLayer::from_static`]; the futures are `Send` with a policy that borrows a `static`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_share_the_budget_exactly() {
    let policy = |budget: &'static RetryBudget| {
        Policy::builder()
            .retries(3)
            .backoff(NoBackoff)
            .budget(budget)
            .build()
            .unwrap()
    };
    let (svc, calls) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    share_the_budget_exactly(RobustLayer::new(policy(&BUDGET)), svc, &calls).await;
    let (svc, calls) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let leaked = Box::leak(Box::new(policy(&STATIC_BUDGET)));
    share_the_budget_exactly(RobustLayer::from_static(&*leaked), svc, &calls).await;
}

async fn share_the_budget_exactly<L, S>(layer: L, svc: S, calls: &AtomicU32)
where
    L: Layer<S>,
    L::Service:
        Service<Request<String>, Response = Resp, Error = io::Error> + Clone + Send + 'static,
    <L::Service as Service<Request<String>>>::Future: Send,
{
    let client = layer.layer(svc);
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            c.oneshot(Request::new(String::new())).await.is_err()
        }));
    }
    for t in tasks {
        assert!(t.await.unwrap());
    }
    // 64 first attempts, and exactly the budget's 20 tokens of retries among them.
    assert_eq!(calls.load(Ordering::SeqCst), 64 + 20);
}

static VALUE_BREAKER: std::sync::LazyLock<CircuitBreaker> = std::sync::LazyLock::new(|| {
    CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1).expect("valid breaker")
});

#[tokio::test(start_paused = true)]
async fn a_matched_response_to_a_request_sent_once_is_a_failure_for_the_breaker() {
    let successes = Arc::new(AtomicU32::new(0));
    let s2 = Arc::clone(&successes);
    let policy = Policy::builder()
        .retries(0)
        .breaker(&VALUE_BREAKER)
        .on_ok(OkIf(|r: &Resp| {
            r.status() == StatusCode::SERVICE_UNAVAILABLE
        }))
        .on_success(move || {
            s2.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let (svc, calls) = scripted::<Stream>(vec![Ok(status(StatusCode::SERVICE_UNAVAILABLE))]);
    let client = RobustLayer::new(policy).layer(svc);
    for _ in 0..2 {
        let r = client.clone().oneshot(Request::new(Stream)).await.unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        successes.load(Ordering::SeqCst),
        0,
        "a matched value is no success"
    );
    assert_eq!(VALUE_BREAKER.state(), retry_runtime::BreakerState::Open);
}

static SHARED: std::sync::LazyLock<CircuitBreaker> = std::sync::LazyLock::new(|| {
    CircuitBreaker::new(10, 2, 0.5, Duration::from_secs(30), 1).expect("valid breaker")
});

#[tokio::test(start_paused = true)]
async fn a_value_retry_is_rejected_when_the_breaker_opened_during_its_backoff() {
    let policy = Policy::builder()
        .retries(1)
        .backoff(Constant::new(secs(10)))
        .jitter(NoJitter)
        .breaker(&SHARED)
        .on_ok(OkIf(|r: &Resp| {
            r.status() == StatusCode::SERVICE_UNAVAILABLE
        }))
        .build()
        .unwrap();
    let (svc, calls) = scripted::<String>(vec![
        Ok(status(StatusCode::SERVICE_UNAVAILABLE)),
        Ok(status(StatusCode::OK)),
    ]);
    let call = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()));
    let opener = async {
        // One second into the backoff, other calls' failures open the breaker.
        tokio::time::sleep(secs(1)).await;
        let now = std::time::Instant::now();
        SHARED.record(now, false);
        SHARED.record(now, false);
        assert_eq!(SHARED.state(), retry_runtime::BreakerState::Open);
    };
    let (r, ()) = tokio::join!(call, opener);
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Other, "E::from(Open)");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no attempt while open");
}

#[tokio::test(start_paused = true)]
async fn the_deadline_counts_from_the_first_attempt_and_an_error_at_the_timeout_is_a_timeout() {
    let policy = Policy::builder()
        .retries(3)
        .backoff(NoBackoff)
        .deadline(secs(1))
        .build()
        .unwrap();
    let svc = tower::service_fn(|_r: Request<String>| async {
        tokio::time::sleep(ms(100)).await;
        Ok::<_, io::Error>(status(StatusCode::OK))
    });
    let mut client = RobustLayer::new(policy).layer(svc);
    let fut = client
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()));
    tokio::time::sleep(secs(2)).await; // the future is made, not yet polled
    assert_eq!(fut.await.unwrap().status(), StatusCode::OK);

    // An error returned just as the attempt's timeout ends counts as a `Timeout`.
    let (r, calls) = late_error_then_ok(secs(1), || async {
        tokio::time::sleep(secs(1)).await;
        Err(io::Error::other("upstream gave up"))
    })
    .await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(calls, 2);
}

/// A request through a layer whose policy retries once, on `Timeout` only, each attempt
/// limited to `limit`: the service answers its first attempt with `first()`'s error and the
/// second with a 200. The result and the attempts made.
async fn late_error_then_ok<F>(
    limit: Duration,
    first: impl Fn() -> F + Clone + Send + 'static,
) -> (io::Result<Resp>, u32)
where
    F: std::future::Future<Output = io::Result<Resp>> + Send + 'static,
{
    let policy = Policy::builder()
        .retries(1)
        .backoff(NoBackoff)
        .timeout(limit)
        .on(retry_runtime::kind::Timeout)
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = tower::service_fn(move |_r: Request<String>| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let first = first.clone();
        async move {
            if n == 0 {
                first().await
            } else {
                Ok(status(StatusCode::OK))
            }
        }
    });
    let r = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await;
    (r, calls.load(Ordering::SeqCst))
}

/// An error that comes after the attempt's timeout, before tokio's driver has fired the timer
/// (here the service held the thread past it: the driver cannot have run), is a `Timeout` all
/// the same, as `call_async` judges it: by the clock. (On tokio's real clock, for a body that
/// blocks; 30 ms of real time.)
#[tokio::test]
async fn an_error_after_the_timeout_is_a_timeout_before_the_timer_fires() {
    let (r, calls) = late_error_then_ok(ms(10), || async {
        std::thread::sleep(ms(30));
        Err(io::Error::other("answered after the timeout"))
    })
    .await;
    assert_eq!(
        r.unwrap().status(),
        StatusCode::OK,
        "the late error was not retried as a timeout"
    );
    assert_eq!(calls, 2);
}

#[tokio::test(start_paused = true)]
async fn a_boxed_streaming_body_is_sent_once_and_a_readiness_error_is_not_retried() {
    use http_body_util::BodyExt;
    type Boxed = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;
    let policy = Policy::builder()
        .retries(5)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    let (svc, calls) = scripted::<Boxed>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let body: Boxed = http_body_util::Full::new(bytes::Bytes::from_static(b"x")).boxed();
    let r = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(body))
        .await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // The retry's readiness error is the call's, and the service is neither called nor asked
    // again.
    let broken = Broken::default();
    let mut svc = RobustLayer::new(policy).layer(broken.clone());
    let fut = svc.ready().await.unwrap().call(Request::new(String::new()));
    assert_eq!(fut.await.unwrap_err().kind(), ErrorKind::BrokenPipe);
    assert_eq!(broken.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        broken.refusals.load(Ordering::SeqCst),
        1,
        "not polled again"
    );
}

/// A client whose request body type is fixed and cannot be copied (a hyper-util client over
/// `BoxBody`, tonic's `Channel` over its own body) is retried when the layer sits above a
/// conversion: it copies a buffered `Full<Bytes>` request, which `map_request` turns into the
/// client's body type for each attempt.
#[tokio::test(start_paused = true)]
async fn a_client_with_a_fixed_body_type_is_retried_below_a_conversion() {
    use http_body_util::BodyExt;
    type Boxed = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;
    type Buffered = http_body_util::Full<bytes::Bytes>;
    let policy = Policy::builder()
        .retries(5)
        .backoff(NoBackoff)
        .build()
        .unwrap();
    let (svc, calls) = scripted::<Boxed>(vec![
        Err(ErrorKind::ConnectionReset.into()),
        Err(ErrorKind::ConnectionReset.into()),
        Ok(status(StatusCode::OK)),
    ]);
    let client = tower::ServiceBuilder::new()
        .layer(RobustLayer::new(policy))
        .map_request(|r: Request<Buffered>| r.map(BodyExt::boxed))
        .service(svc);
    let body = Buffered::new(bytes::Bytes::from_static(b"x"));
    let r = client.oneshot(Request::new(body)).await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

static LAYER_LIMIT: retry_runtime::ConcurrencyLimit =
    match retry_runtime::ConcurrencyLimit::new(1, 1) {
        Ok(l) => l,
        Err(_) => panic!("invalid limit"),
    };

#[tokio::test(start_paused = true)]
async fn the_layer_holds_a_slot_of_the_limit_per_attempt() {
    let policy = Policy::builder()
        .retries(0)
        .limit(&LAYER_LIMIT)
        .build()
        .unwrap();
    let svc = tower::service_fn(|_r: Request<String>| async {
        tokio::time::sleep(secs(1)).await;
        Ok::<_, io::Error>(status(StatusCode::OK))
    });
    let client = RobustLayer::new(policy).layer(svc);
    let start = Instant::now();
    let one = client.clone().oneshot(Request::new(String::new()));
    let two = client.clone().oneshot(Request::new(String::new()));
    let three = async {
        tokio::task::yield_now().await;
        let r = client.clone().oneshot(Request::new(String::new())).await;
        (r, start.elapsed())
    };
    let (a, b, (c, at)) = tokio::join!(one, two, three);
    assert_eq!(a.unwrap().status(), StatusCode::OK);
    // The second waited in line for the first's slot.
    assert_eq!(b.unwrap().status(), StatusCode::OK);
    assert_eq!(start.elapsed(), secs(2));
    // The third found one running and one waiting: rejected at once.
    let e = c.unwrap_err();
    assert!(
        e.get_ref()
            .is_some_and(|i| i.is::<retry_runtime::Rejected>())
    );
    assert_eq!(at, Duration::ZERO);
    assert_eq!(LAYER_LIMIT.in_flight(), 0);
}

/// A service whose calls take the script's latency (ms) and answer with its status; counts
/// calls and the ones dropped before they answered.
fn slow<B: Send + 'static>(
    script: Vec<(u64, StatusCode)>,
) -> (
    impl Service<Request<B>, Response = Resp, Error = io::Error, Future: Send> + Clone + Send,
    Arc<AtomicU32>,
    Arc<AtomicU32>,
) {
    struct Dropped(Arc<AtomicU32>, bool);
    impl Drop for Dropped {
        fn drop(&mut self) {
            if !self.1 {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let calls = Arc::new(AtomicU32::new(0));
    let dropped = Arc::new(AtomicU32::new(0));
    let (counter, drops) = (Arc::clone(&calls), Arc::clone(&dropped));
    let script = Arc::new(script);
    let svc = tower::service_fn(move |_req: Request<B>| {
        let n = counter.fetch_add(1, Ordering::SeqCst) as usize;
        let (wait, code) = script[n.min(script.len() - 1)];
        let guard = Dropped(Arc::clone(&drops), false);
        async move {
            let mut guard = guard;
            tokio::time::sleep(ms(wait)).await;
            guard.1 = true;
            Ok(status(code))
        }
    });
    (svc, calls, dropped)
}

#[tokio::test(start_paused = true)]
async fn a_hedged_layer_sends_a_hedge_and_the_first_answer_wins() {
    use retry_runtime::hedge::Hedge;
    let policy = || {
        Policy::builder()
            .retries(1)
            .backoff(NoBackoff)
            .on_ok(OkIf(|r: &Resp| {
                r.status() == StatusCode::SERVICE_UNAVAILABLE
            }))
            .hedge(Hedge::after(ms(50), 1).unwrap())
            .build()
            .unwrap()
    };
    // The first call hangs for a second; the hedge, sent at 50 ms, answers in 10 ms; the first
    // is dropped.
    let (svc, calls, dropped) = slow::<String>(vec![(1000, StatusCode::OK), (10, StatusCode::OK)]);
    let t0 = Instant::now();
    let r = RobustLayer::hedged(policy())
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(t0.elapsed(), ms(60));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);

    // A 503 (matched by the `Ok(..)` rule) at 10 ms starts the hedge at once.
    let (svc, calls, _) = slow::<String>(vec![
        (10, StatusCode::SERVICE_UNAVAILABLE),
        (10, StatusCode::OK),
    ]);
    let t0 = Instant::now();
    let r = RobustLayer::hedged(policy())
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(t0.elapsed(), ms(20));
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // A round of two 503s is one failed attempt: one retry, one more round of two.
    let (svc, calls, _) = slow::<String>(vec![(10, StatusCode::SERVICE_UNAVAILABLE)]);
    let r = RobustLayer::hedged(policy())
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 4);

    // A request whose body cannot be copied is sent once: no hedge, no retry.
    let (svc, calls, _) = slow::<Stream>(vec![(1000, StatusCode::SERVICE_UNAVAILABLE)]);
    let t0 = Instant::now();
    let r = RobustLayer::hedged(policy())
        .layer(svc)
        .oneshot(Request::new(Stream))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(t0.elapsed(), ms(1000));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "never sent twice");
}

static SUCCESS_BREAKER: std::sync::LazyLock<CircuitBreaker> = std::sync::LazyLock::new(|| {
    CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1).expect("valid breaker")
});
static SUCCESS_LATENCIES: retry_runtime::latency::Latencies =
    retry_runtime::latency::Latencies::new();

/// A success (settled by the layer without moving the response through the retry loop) is
/// recorded as one by everything that watches: the breaker's probe closes it, `on_success`
/// runs once, and the adaptive timeout learns the attempt's latency.
#[tokio::test(start_paused = true)]
async fn a_success_closes_a_half_open_breaker_calls_on_success_and_is_measured() {
    use retry_runtime::BreakerState;
    use retry_runtime::timeout::Adaptive;
    let successes = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&successes);
    let policy = Policy::builder()
        .retries(0)
        .breaker(&*SUCCESS_BREAKER)
        .adaptive_timeout(
            Adaptive::new(
                &SUCCESS_LATENCIES,
                90.0,
                1.0,
                Duration::from_millis(1),
                secs(1),
            )
            .unwrap(),
        )
        .on_success(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    // Two failures open the breaker; 30 s later it lets one probe through.
    let (failing, _) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let mut failing = RobustLayer::new(policy.clone()).layer(failing);
    for _ in 0..2 {
        let r = failing
            .ready()
            .await
            .unwrap()
            .call(Request::new(String::new()))
            .await;
        assert!(r.is_err());
    }
    assert_eq!(SUCCESS_BREAKER.state(), BreakerState::Open);
    tokio::time::advance(secs(30)).await;
    assert_eq!(SUCCESS_LATENCIES.samples(), 0);
    let svc = tower::service_fn(|_req: Request<String>| async {
        tokio::time::sleep(Duration::from_millis(7)).await;
        Ok::<_, io::Error>(status(StatusCode::OK))
    });
    let mut client = RobustLayer::new(policy).layer(svc);
    let r = client
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()))
        .await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(
        SUCCESS_BREAKER.state(),
        BreakerState::Closed,
        "the probe's success closes it"
    );
    assert_eq!(successes.load(Ordering::SeqCst), 1);
    assert_eq!(
        SUCCESS_LATENCIES.samples(),
        1,
        "the success's latency is learned"
    );
}

/// Under the hedged layer, a request that cannot be copied (sent once, outside the rounds) is
/// measured as any attempt is: its latency goes into the histogram that `hedge(after = pNN)`
/// and the adaptive timeout read. (Before, such requests never fed it.)
#[tokio::test(start_paused = true)]
async fn a_hedged_request_sent_once_is_measured() {
    use retry_runtime::hedge::Hedge;
    static LATENCIES: retry_runtime::latency::Latencies = retry_runtime::latency::Latencies::new();
    let policy = Policy::builder()
        .retries(1)
        .hedge(Hedge::percentile(&LATENCIES, 95.0, 1).unwrap())
        .build()
        .unwrap();
    let svc = tower::service_fn(|_req: Request<Stream>| async {
        tokio::time::sleep(Duration::from_millis(7)).await;
        Ok::<_, io::Error>(status(StatusCode::OK))
    });
    let client = RobustLayer::hedged(policy).layer(svc).boxed_clone();
    for n in 1..=3 {
        let r = client.clone().oneshot(Request::new(Stream)).await;
        assert_eq!(r.unwrap().status(), StatusCode::OK);
        assert_eq!(LATENCIES.samples(), n);
    }
}

static FULL_LIMIT: retry_runtime::ConcurrencyLimit =
    match retry_runtime::ConcurrencyLimit::new(1, 0) {
        Ok(l) => l,
        Err(_) => panic!("invalid limit"),
    };

/// A request the limit rejects is answered at once with the rejection, retries left or not:
/// the service is never called and no backoff is slept.
#[tokio::test(start_paused = true)]
async fn a_rejected_request_is_not_retried() {
    let policy = Policy::builder()
        .retries(5)
        .backoff(Constant::new(secs(1)))
        .limit(&FULL_LIMIT)
        .build()
        .unwrap();
    let (svc, calls) = scripted::<String>(vec![Ok(status(StatusCode::OK))]);
    let client = RobustLayer::new(policy).layer(svc);
    let held = FULL_LIMIT.try_acquire().expect("a free slot");
    let start = Instant::now();
    let e = client
        .clone()
        .oneshot(Request::new(String::new()))
        .await
        .unwrap_err();
    assert!(
        e.get_ref()
            .is_some_and(|i| i.is::<retry_runtime::Rejected>())
    );
    assert_eq!(
        (start.elapsed(), calls.load(Ordering::SeqCst)),
        (Duration::ZERO, 0)
    );
    drop(held);
    let r = client.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(
        (r.status(), calls.load(Ordering::SeqCst)),
        (StatusCode::OK, 1)
    );
}

/// The first attempt (and, hedged, its hedge) fails at 0, after `sent` calls; its retry
/// (100 ms later) finds every slot of `limit` taken (by another caller, at 50 ms, for 10 s):
/// with a 1 s bound from the first attempt's start (the deadline, or a `max_delay`), the call
/// ends at 1 s with the error `ended` accepts, and the wait leaves the queue.
async fn a_slot_wait_ends_at_one_second(
    call: impl std::future::Future<Output = io::Result<Resp>>,
    (calls, sent): (&AtomicU32, u32),
    limit: &retry_runtime::ConcurrencyLimit,
    ended: fn(&io::Error) -> bool,
) {
    let t0 = Instant::now();
    let call = async {
        let r = call.await;
        (r, t0.elapsed())
    };
    let hold = async {
        tokio::time::sleep(ms(50)).await;
        let mut slots = Vec::new();
        for _ in 0..limit.max_in_flight() {
            slots.push(limit.acquire().await.unwrap());
        }
        tokio::time::sleep(secs(10)).await;
    };
    let ((r, took), ()) = tokio::join!(call, hold);
    let e = r.unwrap_err();
    assert!(ended(&e), "{e:?}");
    assert_eq!((took, calls.load(Ordering::SeqCst)), (secs(1), sent));
    assert_eq!((limit.in_flight(), limit.queued()), (0, 0));
}

/// A retry waiting for a slot of the limit does not wait past the call's deadline (it ends
/// with `Elapsed`), nor past its rule's `max_delay` (the call returns the failure the retry
/// follows, as when its service is not ready in time: it waited for the slot, 10 s, before,
/// then ended with `E::from(Rejected)`).
#[tokio::test(start_paused = true)]
async fn a_retry_does_not_wait_for_a_slot_past_the_deadline_or_its_max_delay() {
    static DEADLINE: retry_runtime::ConcurrencyLimit =
        match retry_runtime::ConcurrencyLimit::new(1, 4) {
            Ok(l) => l,
            Err(_) => panic!(),
        };
    static MAX_DELAY: retry_runtime::ConcurrencyLimit =
        match retry_runtime::ConcurrencyLimit::new(1, 4) {
            Ok(l) => l,
            Err(_) => panic!(),
        };
    let policy = Policy::builder()
        .retries(5)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .deadline(secs(1))
        .limit(&DEADLINE)
        .build()
        .unwrap();
    let (svc, calls) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let call = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()));
    let timed_out = |e: &io::Error| e.kind() == ErrorKind::TimedOut;
    a_slot_wait_ends_at_one_second(call, (&calls, 1), &DEADLINE, timed_out).await;
    let policy = Policy::builder()
        .retries(5)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .max_delay(secs(1))
        .limit(&MAX_DELAY)
        .build()
        .unwrap();
    let reset = |e: &io::Error| e.kind() == ErrorKind::ConnectionReset;
    let (svc, calls) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let call = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()));
    a_slot_wait_ends_at_one_second(call, (&calls, 1), &MAX_DELAY, reset).await;
}

/// A hedged retry's round that was made (its first attempt sent in time) sends its hedge
/// whenever the hedge's service becomes ready, even past the `max_delay`: behind tower's own
/// `ConcurrencyLimit` of one, the retry's attempt (sent at 100 ms) holds the permit until it
/// answers 503 at 1.6 s, and the hedge made at 150 ms, ready then, is sent and answers 200.
/// (It was held back for ever, and the call hung.)
#[tokio::test(start_paused = true)]
async fn a_hedged_round_made_in_time_sends_its_late_hedge() {
    use retry_runtime::hedge::Hedge;
    let policy = Policy::builder()
        .retries(3)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .max_delay(secs(1))
        .on_ok(OkIf(|r: &Resp| {
            r.status() == StatusCode::SERVICE_UNAVAILABLE
        }))
        .hedge(Hedge::after(ms(50), 1).unwrap())
        .build()
        .unwrap();
    let unavailable = StatusCode::SERVICE_UNAVAILABLE;
    let (svc, calls, _) = slow::<String>(vec![
        (0, unavailable),
        (0, unavailable),
        (1500, unavailable),
        (0, StatusCode::OK),
    ]);
    let svc = tower::limit::ConcurrencyLimit::new(svc, 1);
    let t0 = Instant::now();
    let r = one_request(RobustLayer::hedged(policy), svc).await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (ms(1600), 4));
}

/// Under the hedged layer, a retry's round judges its latest start by the policy's clock too:
/// the clock is virtual (backoffs take no time on tokio's), and another task moves it 2 s on
/// at 200 ms while the retry's round's attempt and hedge wait for their service: when it is
/// ready, at 500 ms, neither is sent, and the call returns the failure the retry follows then;
/// the same when the move comes from a future polled with the call, which ends the call at
/// that poll. (The retry was sent at 500 ms.)
#[tokio::test(start_paused = true)]
async fn a_hedged_retry_ready_after_its_max_delay_by_the_policys_clock_is_not_sent() {
    use retry_runtime::hedge::Hedge;
    let time = retry_runtime::time::VirtualTime::new();
    let clock = time.clone();
    let policy = Policy::builder()
        .retries(3)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .max_delay(secs(1))
        .hedge(Hedge::after(ms(50), 1).unwrap())
        .env(time)
        .build()
        .unwrap();
    let layer = RobustLayer::hedged(policy);
    for spawned in [true, false] {
        let t0 = Instant::now();
        let (mut svc, calls) = LateReady::new(t0 + ms(500), Duration::ZERO);
        svc.failures = 2;
        let call = tokio::time::timeout(
            secs(60),
            layer.layer(svc).oneshot(Request::new(String::new())),
        );
        let clock = clock.clone();
        let mover = async move {
            tokio::time::sleep(ms(200)).await;
            clock.advance(secs(2));
        };
        let r = if spawned {
            let mover = tokio::spawn(mover);
            let r = call.await;
            mover.await.unwrap();
            r
        } else {
            tokio::join!(call, mover).0
        };
        let r = r.expect("the request ended");
        assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
        let took = if spawned { ms(500) } else { ms(200) };
        assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (took, 2));
    }
}

/// Under the hedged layer, a retry's slot wait is judged by the policy's clock: with a virtual
/// clock, the wait for a slot (both taken by `on_retry`) ends when the `max_delay` is spent on
/// it, and the call returns the failure the retry follows. (It ended with `E::from(Rejected)`:
/// the end was judged by the virtual clock, which the wait did not move.)
#[tokio::test(start_paused = true)]
async fn a_hedged_retry_slot_wait_with_a_virtual_clock_returns_the_failure() {
    use retry_runtime::hedge::Hedge;
    use std::sync::Mutex;
    type Held = Vec<retry_runtime::guard::LimitPermit<'static>>;
    static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(2, 4)
    {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    static TAKEN: Mutex<Held> = Mutex::new(Vec::new());
    let policy = Policy::builder()
        .retries(3)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .max_delay(secs(1))
        .hedge(Hedge::after(ms(50), 1).unwrap())
        .limit(&LIMIT)
        .env(retry_runtime::time::VirtualTime::new())
        .on_retry(
            |_: &Result<Resp, io::Error>, _: &retry_runtime::RetryInfo| {
                let mut taken = TAKEN.lock().unwrap();
                while let Ok(Some(slot)) = LIMIT.acquire_blocking_timeout(Duration::ZERO) {
                    taken.push(slot);
                }
            },
        )
        .build()
        .unwrap();
    let (svc, calls) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let t0 = Instant::now();
    let r = one_request(RobustLayer::hedged(policy), svc).await;
    let taken = std::mem::take(&mut *TAKEN.lock().unwrap());
    assert_eq!(taken.len(), 2, "on_retry took both slots");
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (ms(900), 2));
}

/// A hedged retry's round is made when one of its attempts ends before the `max_delay` is
/// spent, even unsent: the retry's attempt (at 100 ms) waits for its service until the 800 ms
/// timeout cuts it at 900 ms, which makes the round; its hedge (made at 600 ms) finds its
/// service ready at 1.2 s, past the `max_delay` (1 s), and is sent. (The round ended at 1 s,
/// not made, with the failure the retry followed.)
#[tokio::test(start_paused = true)]
async fn a_hedged_round_made_by_a_cut_attempt_sends_its_hedge() {
    use retry_runtime::hedge::Hedge;
    let policy = Policy::builder()
        .retries(3)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .max_delay(secs(1))
        .timeout(ms(800))
        .hedge(Hedge::after(ms(500), 1).unwrap())
        .build()
        .unwrap();
    let t0 = Instant::now();
    let (mut svc, calls) = LateReady::new(t0 + ms(1200), Duration::ZERO);
    svc.failures = 2;
    let r = one_request(RobustLayer::hedged(policy), svc).await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (ms(1200), 3));
}

/// Under the hedged layer, a retry's wait for a slot past its rule's `max_delay` ends the call
/// with the failure the retry follows too, as when its round sends nothing in time: the first
/// round's attempt and its hedge fail at once, the retry (at 100 ms) finds both slots taken by
/// another caller (from 50 ms, for 10 s), and the call returns at 1 s. (It ended with
/// `E::from(Rejected)`.)
#[tokio::test(start_paused = true)]
async fn a_hedged_retry_does_not_wait_for_a_slot_past_its_max_delay() {
    use retry_runtime::hedge::Hedge;
    static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(2, 4)
    {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    let policy = Policy::builder()
        .retries(5)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .max_delay(secs(1))
        .hedge(Hedge::after(ms(50), 1).unwrap())
        .limit(&LIMIT)
        .build()
        .unwrap();
    let (svc, calls) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let call = RobustLayer::hedged(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()));
    let reset = |e: &io::Error| e.kind() == ErrorKind::ConnectionReset;
    a_slot_wait_ends_at_one_second(call, (&calls, 2), &LIMIT, reset).await;
}

/// One request through `svc` under `layer`, on the paused clock, which must end within 60 s.
async fn one_request<L, S>(layer: L, svc: S) -> io::Result<Resp>
where
    L: Layer<S>,
    L::Service: Service<Request<String>, Response = Resp, Error = io::Error>,
{
    tokio::time::timeout(
        secs(60),
        layer.layer(svc).oneshot(Request::new(String::new())),
    )
    .await
    .expect("the request ended")
}

/// The answer of a call to a service whose first call fails and every later one succeeds.
fn fails_first(calls: &AtomicU32) -> std::future::Ready<io::Result<Resp>> {
    let n = calls.fetch_add(1, Ordering::SeqCst);
    std::future::ready(if n == 0 {
        Err(ErrorKind::ConnectionReset.into())
    } else {
        Ok(status(StatusCode::OK))
    })
}

/// A service whose first `failures` calls fail (one, from `new`), and which is not ready after
/// them until `until`; its later calls succeed after `answer_after`.
struct LateReady {
    calls: Arc<AtomicU32>,
    failures: u32,
    until: Instant,
    answer_after: Duration,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl LateReady {
    /// The service, not ready after its first call until `until`, and its call count.
    fn new(until: Instant, answer_after: Duration) -> (LateReady, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let svc = LateReady {
            calls: Arc::clone(&calls),
            failures: 1,
            until,
            answer_after,
            sleep: None,
        };
        (svc, calls)
    }
}

impl Clone for LateReady {
    fn clone(&self) -> Self {
        LateReady {
            calls: Arc::clone(&self.calls),
            failures: self.failures,
            until: self.until,
            answer_after: self.answer_after,
            sleep: None,
        }
    }
}

impl Service<Request<String>> for LateReady {
    type Response = Resp;
    type Error = io::Error;
    type Future = std::pin::Pin<Box<dyn Future<Output = io::Result<Resp>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        if self.calls.load(Ordering::SeqCst) >= self.failures && Instant::now() < self.until {
            let until = self.until;
            let sleep = self
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(until)));
            if sleep.as_mut().poll(cx).is_pending() {
                return std::task::Poll::Pending;
            }
        }
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        let answer = if self.calls.fetch_add(1, Ordering::SeqCst) < self.failures {
            Err(io::Error::from(ErrorKind::ConnectionReset))
        } else {
            Ok(status(StatusCode::OK))
        };
        let after = self.answer_after;
        Box::pin(async move {
            if answer.is_ok() {
                tokio::time::sleep(after).await;
            }
            answer
        })
    }
}

/// A service whose first call fails, and which is not ready after it (or, with `after_ready`,
/// after its first ready answer, the caller's) until its gate opens (from the test's own task:
/// no timer wakes it).
#[derive(Clone)]
struct Gated {
    calls: Arc<AtomicU32>,
    after_ready: bool,
    readies: Arc<AtomicU32>,
    gate: Gate,
}

/// A gate's state: whether it is open, and the waker of the service waiting at it.
type Gate = Arc<std::sync::Mutex<(bool, Option<std::task::Waker>)>>;

impl Gated {
    /// A closed gate's service (`after_ready`: see the type), its call count and its gate.
    fn new(after_ready: bool) -> (Gated, Arc<AtomicU32>, Gate) {
        let svc = Gated {
            calls: Arc::new(AtomicU32::new(0)),
            after_ready,
            readies: Arc::default(),
            gate: Arc::default(),
        };
        let (calls, gate) = (Arc::clone(&svc.calls), Arc::clone(&svc.gate));
        (svc, calls, gate)
    }
}

impl<B> Service<Request<B>> for Gated {
    type Response = Resp;
    type Error = io::Error;
    type Future = std::future::Ready<io::Result<Resp>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        let mut gate = self.gate.lock().unwrap();
        let closed = if self.after_ready {
            self.readies.load(Ordering::SeqCst) >= 1
        } else {
            self.calls.load(Ordering::SeqCst) >= 1
        };
        if closed && !gate.0 {
            gate.1 = Some(cx.waker().clone());
            return std::task::Poll::Pending;
        }
        self.readies.fetch_add(1, Ordering::SeqCst);
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<B>) -> Self::Future {
        fails_first(&self.calls)
    }
}

/// A retry whose service becomes ready after the attempt's time is over by the clock, in a
/// poll before tokio's driver has fired the attempt's timer, is not sent: the attempt timed
/// out waiting for its service, as it does when the timer fires first. (It was sent with no
/// time left, and its success returned.)
#[tokio::test(start_paused = true)]
async fn a_retry_whose_service_is_ready_after_its_time_is_not_sent() {
    use std::future::poll_fn;
    use std::task::Poll;

    let policy = Policy::builder()
        .retries(1)
        .backoff(NoBackoff)
        .timeout(ms(100))
        .build()
        .unwrap();
    let (svc, calls, gate) = Gated::new(false);
    let t0 = Instant::now();
    let mut call = std::pin::pin!(
        RobustLayer::new(policy)
            .layer(svc)
            .oneshot(Request::new(String::new()))
    );
    // Until the retry waits for its service (a bounded number of polls).
    for _ in 0..100 {
        if gate.lock().unwrap().1.is_some() {
            break;
        }
        let polled = poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        assert!(polled.is_pending(), "the call ended before its retry");
        tokio::task::yield_now().await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(
        gate.lock().unwrap().1.is_some(),
        "the retry waits for its service"
    );
    // The gate opens and the clock moves past the attempt's timeout; the request is polled in
    // the same poll of this task, before the driver fires the attempt's timer (`advance` moves
    // the clock at its first poll, and yields to the driver after).
    let waker = {
        let mut g = gate.lock().unwrap();
        g.0 = true;
        g.1.take()
    };
    drop(waker);
    let mut advance = std::pin::pin!(tokio::time::advance(ms(150)));
    let polled = poll_fn(|cx| {
        let _ = advance.as_mut().poll(cx);
        Poll::Ready(call.as_mut().poll(cx))
    })
    .await;
    assert!(polled.is_pending(), "the retry was sent with no time left");
    let r = tokio::time::timeout(secs(60), call)
        .await
        .expect("the request ended");
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(t0.elapsed() >= ms(150));
}

/// Polls `call` until `gate` holds a waker (its service waits), a bounded number of times.
async fn until_waiting<F: Future + Unpin>(
    call: &mut F,
    gate: &std::sync::Mutex<(bool, Option<std::task::Waker>)>,
) {
    use std::future::poll_fn;
    use std::task::Poll;
    for _ in 0..100 {
        if gate.lock().unwrap().1.is_some() {
            return;
        }
        let polled = poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *call).poll(cx))).await;
        assert!(
            polled.is_pending(),
            "the call ended before its service waited"
        );
        tokio::task::yield_now().await;
    }
    panic!("the service never waited");
}

/// Opens `gate` and moves the clock by `by` in one poll of `call`, before tokio's driver fires
/// the timers that move passes: what that poll of `call` gives.
async fn open_and_advance<F: Future + Unpin>(
    call: &mut F,
    gate: &std::sync::Mutex<(bool, Option<std::task::Waker>)>,
    by: Duration,
) -> std::task::Poll<F::Output> {
    use std::future::poll_fn;
    use std::task::Poll;
    let waker = {
        let mut g = gate.lock().unwrap();
        g.0 = true;
        g.1.take()
    };
    drop(waker);
    let mut advance = std::pin::pin!(tokio::time::advance(by));
    poll_fn(|cx| {
        let _ = advance.as_mut().poll(cx);
        Poll::Ready(std::pin::Pin::new(&mut *call).poll(cx))
    })
    .await
}

/// Under the hedged layer too, an attempt whose service becomes ready after its time is over
/// by the clock, before the round cuts it, is not sent: here a hedge, sent at once when the
/// first attempt fails, waits for its service past its 100 ms. The round cuts it in the same
/// poll (it reads the clock once its attempts are pending), not tokio's driver. (It was sent,
/// and its success returned.) The first failure's rule retries (a failure whose rule never
/// does would win); the hedge's timeout's does not, and ends the call.
#[tokio::test(start_paused = true)]
async fn a_hedge_whose_service_is_ready_after_its_time_is_not_sent() {
    use retry_runtime::hedge::Hedge;
    let policy = Policy::builder()
        .retries(1)
        .when(retry_runtime::kind::Timeout, |s| s.retries(0))
        .timeout(ms(100))
        .hedge(Hedge::after(ms(50), 1).unwrap())
        .build()
        .unwrap();
    let (svc, calls, gate) = Gated::new(false);
    let mut call = Box::pin(
        RobustLayer::hedged(policy)
            .layer(svc)
            .oneshot(Request::new(String::new())),
    );
    until_waiting(&mut call, &gate).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the first attempt failed");
    let r = match open_and_advance(&mut call, &gate, ms(150)).await {
        std::task::Poll::Ready(r) => r,
        std::task::Poll::Pending => panic!("the round did not cut its hedge"),
    };
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the hedge was sent with no time left"
    );
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
}

/// The same for the call's first attempt when it waits for its service (with a concurrency
/// limit, it makes a clone of the service ready once it holds its slot, after the caller made
/// the service ready): its 100 ms count from its first wait. At 120 ms, when the service is
/// ready, the hedge sent at 50 ms is sent and the first attempt is not.
#[tokio::test(start_paused = true)]
async fn a_first_hedged_attempt_whose_service_is_ready_after_its_time_is_not_sent() {
    use retry_runtime::hedge::Hedge;
    static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(4, 4)
    {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    let policy = Policy::builder()
        .retries(0)
        .timeout(ms(100))
        .limit(&LIMIT)
        .hedge(Hedge::after(ms(50), 1).unwrap())
        .build()
        .unwrap();
    let (svc, calls, gate) = Gated::new(true);
    let t0 = Instant::now();
    let mut call = Box::pin(
        RobustLayer::hedged(policy)
            .layer(svc)
            .oneshot(Request::new(String::new())),
    );
    until_waiting(&mut call, &gate).await;
    // At 50 ms the hedge is sent, and waits for its service too.
    gate.lock().unwrap().1 = None;
    tokio::time::advance(ms(50)).await;
    until_waiting(&mut call, &gate).await;
    assert_eq!(t0.elapsed(), ms(50));
    // The hedge's request, the service's first, fails; the first attempt is cut, in the same
    // poll: the round has failed.
    let r = match open_and_advance(&mut call, &gate, ms(70)).await {
        std::task::Poll::Ready(r) => r,
        std::task::Poll::Pending => panic!("the round did not end"),
    };
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only the hedge is sent");
    assert!(r.is_err());
}

/// Under the hedged layer, a request that cannot be copied is sent once, outside the rounds:
/// when it waited for a slot of its concurrency limit and then for its service, past its
/// 100 ms, it is not sent either; its timer cuts it on the driver's next turn.
#[tokio::test(start_paused = true)]
async fn a_hedged_request_sent_once_is_not_sent_after_its_time() {
    use retry_runtime::hedge::Hedge;
    static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(2, 4)
    {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    let policy = Policy::builder()
        .retries(0)
        .timeout(ms(100))
        .limit(&LIMIT)
        .hedge(Hedge::after(ms(50), 1).unwrap())
        .build()
        .unwrap();
    let (svc, calls, gate) = Gated::new(true);
    // Other callers hold both slots: the request waits for one, then makes a clone of the
    // service ready.
    let held = (
        LIMIT.try_acquire().expect("a free slot"),
        LIMIT.try_acquire().expect("a free slot"),
    );
    let mut call = Box::pin(
        RobustLayer::hedged(policy)
            .layer(svc)
            .oneshot(Request::new(Stream)),
    );
    let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(call.as_mut().poll(cx))).await;
    assert!(polled.is_pending(), "it waits for the slot");
    drop(held);
    until_waiting(&mut call, &gate).await;
    let polled = open_and_advance(&mut call, &gate, ms(150)).await;
    assert!(polled.is_pending(), "the timer fires on the driver's turn");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "sent with no time left");
    let r = tokio::time::timeout(secs(60), call)
        .await
        .expect("the request ended");
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

/// A retry's wait for a slot, bounded by its `max_delay` (1 s), does not time the attempt that
/// follows it when the policy has no timeout: the retry gets its slot at 500 ms, its service is
/// ready at 800 ms, and it is sent then and answers at 1.5 s. (The wait's timer was left
/// armed: the attempt found it expired when its service was ready, and the request hung for
/// ever.)
#[tokio::test(start_paused = true)]
async fn a_retry_that_waited_for_a_slot_is_not_timed_by_its_wait() {
    static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(1, 4)
    {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    let policy = Policy::builder()
        .retries(3)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .max_delay(secs(1))
        .limit(&LIMIT)
        .build()
        .unwrap();
    let t0 = Instant::now();
    let (svc, calls) = LateReady::new(t0 + ms(800), ms(700));
    let call = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()));
    // Another caller holds the only slot from 50 to 500 ms.
    let hold = async {
        tokio::time::sleep(ms(50)).await;
        let _slot = LIMIT.acquire().await.unwrap();
        tokio::time::sleep(ms(450)).await;
    };
    let (r, ()) = tokio::join!(tokio::time::timeout(secs(60), call), hold);
    let r = r.expect("the request ended");
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (ms(1500), 2));
}

/// A retry is made only if it can start before its rule's `max_delay` is spent (SPEC section
/// 2), and under the layer it starts when its service is ready: a retry decided at once, whose
/// service is not ready until 5 s, is not sent, and the call returns the failure it follows
/// when the `max_delay` (1 s) is spent, with or without a timeout longer than that. (The retry
/// was sent at 5 s, and its success returned.)
#[tokio::test(start_paused = true)]
async fn a_retry_whose_service_is_not_ready_by_its_max_delay_is_not_sent() {
    for timeout in [None, Some(secs(10))] {
        let builder = Policy::builder()
            .retries(3)
            .backoff(Constant::new(ms(100)))
            .jitter(NoJitter)
            .max_delay(secs(1));
        let t0 = Instant::now();
        let (svc, calls) = LateReady::new(t0 + secs(5), Duration::ZERO);
        let r = match timeout {
            None => one_request(RobustLayer::new(builder.build().unwrap()), svc).await,
            Some(t) => {
                let policy = builder.timeout(t).build().unwrap();
                one_request(RobustLayer::new(policy), svc).await
            }
        };
        assert_eq!(
            r.unwrap_err().kind(),
            ErrorKind::ConnectionReset,
            "timeout {timeout:?}"
        );
        assert_eq!(
            (t0.elapsed(), calls.load(Ordering::SeqCst)),
            (secs(1), 1),
            "timeout {timeout:?}"
        );
    }
}

/// Under the hedged layer too, a retry's round that has sent no attempt when its rule's
/// `max_delay` is spent is not made: the first round's attempt and its hedge (sent at once
/// when the attempt fails) fail; the retry's round's attempt and its hedge (made 50 ms after
/// it) wait for their service until 5 s, and the call returns the failure the retry follows at
/// 1 s, with or without a timeout longer than that, also when the service is ready at 1 s; a
/// service ready at 500 ms is sent the retry. (The round waited until 5 s, and its success
/// was returned.)
#[tokio::test(start_paused = true)]
async fn a_hedged_retry_round_that_sends_nothing_by_its_max_delay_is_not_made() {
    use retry_runtime::hedge::Hedge;
    for timeout in [None, Some(secs(10))] {
        for (ready_at, answer, took) in [
            (secs(5), Err(ErrorKind::ConnectionReset), secs(1)),
            // Ready as the `max_delay` is spent: too late.
            (secs(1), Err(ErrorKind::ConnectionReset), secs(1)),
            (ms(500), Ok(StatusCode::OK), ms(500)),
        ] {
            let builder = Policy::builder()
                .retries(3)
                .backoff(Constant::new(ms(100)))
                .jitter(NoJitter)
                .max_delay(secs(1))
                .hedge(Hedge::after(ms(50), 1).unwrap());
            let t0 = Instant::now();
            let (mut svc, calls) = LateReady::new(t0 + ready_at, Duration::ZERO);
            svc.failures = 2;
            let r = match timeout {
                None => one_request(RobustLayer::hedged(builder.build().unwrap()), svc).await,
                Some(t) => {
                    let policy = builder.timeout(t).build().unwrap();
                    one_request(RobustLayer::hedged(policy), svc).await
                }
            };
            let case = format!("timeout {timeout:?}, ready at {ready_at:?}");
            assert_eq!(
                r.map(|r| r.status()).map_err(|e| e.kind()),
                answer,
                "{case}"
            );
            assert_eq!(t0.elapsed(), took, "{case}");
            let sent = calls.load(Ordering::SeqCst);
            if answer.is_ok() {
                // (The hedge, ready at the same time, may be sent too.)
                assert!(sent >= 3, "{case}: {sent} calls");
            } else {
                assert_eq!(sent, 2, "{case}");
            }
        }
    }
}

/// A retry whose service is ready before its `max_delay` is spent is sent, and keeps its own
/// time, counted from when its wait began (after its 100 ms backoff): its service is ready at
/// 500 ms and answers 1.5 s later, past the `max_delay` (1 s) and within the attempt's 2 s
/// timeout; when it answers 5 s later, the timeout cuts it at 2.1 s. (The wait's timer, armed
/// for the `max_delay`, cut the attempt at 1 s.)
#[tokio::test(start_paused = true)]
async fn a_retry_sent_before_its_max_delay_keeps_its_own_time() {
    for (answer_after, answer, took) in [
        (ms(1500), Ok(StatusCode::OK), secs(2)),
        (secs(5), Err(ErrorKind::TimedOut), ms(2100)),
    ] {
        let policy = Policy::builder()
            .retries(3)
            .backoff(Constant::new(ms(100)))
            .jitter(NoJitter)
            .max_delay(secs(1))
            .timeout(secs(2))
            .build()
            .unwrap();
        let t0 = Instant::now();
        let (svc, calls) = LateReady::new(t0 + ms(500), answer_after);
        let r = one_request(RobustLayer::new(policy), svc).await;
        assert_eq!(r.map(|r| r.status()).map_err(|e| e.kind()), answer);
        assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (took, 2));
    }
}

/// A retry that follows a matched value: the value is what the call returns when the retry's
/// service is not ready before its rule's `max_delay` (a `when_ok` rule's own: the top level
/// has none) is spent, at 1 s; the same through a `DynPolicy`.
#[tokio::test(start_paused = true)]
async fn a_value_is_returned_when_its_retry_cannot_start_in_time() {
    let policy = Policy::builder()
        .retries(3)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .when_ok(
            OkIf(|r: &Resp| r.status() == StatusCode::SERVICE_UNAVAILABLE),
            |s| s.max_delay(secs(1)),
        )
        .build()
        .unwrap();
    // The first answer is a 503; the service is not ready after it until 5 s.
    let unavailable_then_late = |t0: Instant| {
        let (svc, calls) = LateReady::new(t0 + secs(5), Duration::ZERO);
        let svc = svc.map_result(|r| match r {
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                Ok(status(StatusCode::SERVICE_UNAVAILABLE))
            }
            r => r,
        });
        (svc, calls)
    };
    let t0 = Instant::now();
    let (svc, calls) = unavailable_then_late(t0);
    let r = one_request(RobustLayer::new(policy), svc).await;
    assert_eq!(r.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (secs(1), 1));
    let t0 = Instant::now();
    let (svc, calls) = unavailable_then_late(t0);
    let dynamic = retry_runtime::DynPolicy::<Resp, io::Error>::new(policy);
    let r = one_request(RobustLayer::new(dynamic), svc).await;
    assert_eq!(r.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (secs(1), 1));
}

/// A retry whose `max_delay` is spent when its backoff ends (the policy's clock is virtual,
/// and `on_retry` moves it 2 s on after the retry was decided) is sent only if its service is
/// ready at once, as it takes a free slot of a concurrency limit: here it is not ready until
/// 5 s, and the call returns the failure the retry follows without waiting; a service ready
/// at once is sent the retry.
#[tokio::test(start_paused = true)]
async fn a_retry_whose_max_delay_is_spent_when_its_backoff_ends_does_not_wait() {
    let policy = || {
        let time = retry_runtime::time::VirtualTime::new();
        let clock = time.clone();
        Policy::builder()
            .retries(3)
            .backoff(Constant::new(ms(100)))
            .jitter(NoJitter)
            .max_delay(secs(1))
            .env(time)
            .on_retry(
                move |_: &Result<Resp, io::Error>, _: &retry_runtime::RetryInfo| {
                    clock.advance(secs(2));
                },
            )
            .build()
            .unwrap()
    };
    let t0 = Instant::now();
    let (svc, calls) = LateReady::new(t0 + secs(5), Duration::ZERO);
    let r = one_request(RobustLayer::new(policy()), svc).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(
        (t0.elapsed(), calls.load(Ordering::SeqCst)),
        (Duration::ZERO, 1)
    );
    let (svc, calls) = scripted::<String>(vec![
        Err(ErrorKind::ConnectionReset.into()),
        Ok(status(StatusCode::OK)),
    ]);
    let r = RobustLayer::new(policy())
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// A retry whose service becomes ready after its `max_delay` was spent by the policy's clock,
/// a virtual one that another task moves on while the retry waits, is not sent, although
/// tokio's timer (armed for the time that was left) has not fired.
#[tokio::test(start_paused = true)]
async fn a_retry_ready_after_its_max_delay_by_the_policys_clock_is_not_sent() {
    let time = retry_runtime::time::VirtualTime::new();
    let clock = time.clone();
    let policy = Policy::builder()
        .retries(3)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .max_delay(secs(1))
        .env(time)
        .build()
        .unwrap();
    let t0 = Instant::now();
    let (svc, calls) = LateReady::new(t0 + ms(500), Duration::ZERO);
    let call = tokio::time::timeout(
        secs(60),
        RobustLayer::new(policy)
            .layer(svc)
            .oneshot(Request::new(String::new())),
    );
    let mover = async {
        tokio::time::sleep(ms(200)).await;
        clock.advance(secs(2));
    };
    let (r, ()) = tokio::join!(call, mover);
    let r = r.expect("the request ended");
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (ms(500), 1));
}

/// A retry whose `max_delay` ends after the attempt's own time: the attempt's timeout bounds
/// the wait for its service, as before (a timed-out attempt, retried): the timeout (300 ms)
/// cuts the retries' waits at 400 and 800 ms, and the third retry, at 900 ms, waits until
/// the `max_delay` (1 s) is spent; the call returns the failure it follows, a timeout.
#[tokio::test(start_paused = true)]
async fn a_timeout_shorter_than_the_max_delay_still_bounds_the_wait() {
    let policy = Policy::builder()
        .retries(5)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .max_delay(secs(1))
        .timeout(ms(300))
        .build()
        .unwrap();
    let t0 = Instant::now();
    let (svc, calls) = LateReady::new(t0 + secs(5), Duration::ZERO);
    let r = one_request(RobustLayer::new(policy), svc).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!((t0.elapsed(), calls.load(Ordering::SeqCst)), (secs(1), 1));
}

/// A retry that finds no time left before the call's deadline when its backoff ends ends the
/// call with `Elapsed`, even when the limit's queue is full (it ended with `Rejected` before):
/// the policy's clock is virtual, and `on_retry` takes the only slot (the limit has no queue)
/// and moves the clock past the deadline after the retry was decided.
#[tokio::test(start_paused = true)]
async fn a_retry_with_no_time_left_is_not_rejected_by_a_full_queue() {
    use std::sync::Mutex;

    static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(1, 0)
    {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    static TAKEN: Mutex<Option<retry_runtime::guard::LimitPermit<'static>>> = Mutex::new(None);
    let time = retry_runtime::time::VirtualTime::new();
    let clock = time.clone();
    let policy = Policy::builder()
        .retries(5)
        .backoff(Constant::new(ms(10)))
        .jitter(NoJitter)
        .deadline(ms(100))
        .limit(&LIMIT)
        .env(time)
        .on_retry(
            move |_: &Result<Resp, io::Error>, _: &retry_runtime::RetryInfo| {
                *TAKEN.lock().unwrap() = LIMIT.acquire_blocking_timeout(Duration::ZERO).unwrap();
                clock.advance(ms(200));
            },
        )
        .build()
        .unwrap();
    let (svc, calls) = scripted::<String>(vec![Err(ErrorKind::ConnectionReset.into())]);
    let r = RobustLayer::new(policy)
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await;
    assert!(
        TAKEN.lock().unwrap().take().is_some(),
        "on_retry took the slot"
    );
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!((LIMIT.in_flight(), LIMIT.queued()), (0, 0));
}

/// A service that fails its first `failures` calls at once and answers every later one after
/// 20 ms, behind tower's own `ConcurrencyLimit` of one (which takes its permit when made ready
/// and keeps it until the call's response), and the number of calls.
fn one_at_a_time(
    failures: u32,
) -> (
    tower::limit::ConcurrencyLimit<
        impl Service<Request<String>, Response = Resp, Error = io::Error, Future: Send>
        + Clone
        + Send
        + 'static,
    >,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = tower::service_fn(move |_r: Request<String>| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            if n < failures {
                return Err(io::Error::from(ErrorKind::ConnectionReset));
            }
            tokio::time::sleep(ms(20)).await;
            Ok(status(StatusCode::OK))
        }
    });
    (tower::limit::ConcurrencyLimit::new(svc, 1), calls)
}

/// Under the hedged layer with a concurrency limit, the service the caller made ready is
/// dropped in `call`, not at the future's first poll: a future made and not polled yet keeps
/// no permit of tower's `ConcurrencyLimit` inside, so another clone of the client can be made
/// ready meanwhile. (Before, that clone waited for ever: the permit was the unpolled
/// future's.) The request is then sent by a clone made ready at its first poll.
#[tokio::test(start_paused = true)]
async fn a_hedged_future_not_polled_yet_keeps_no_permit_of_the_service() {
    use retry_runtime::hedge::Hedge;
    static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(2, 4)
    {
        Ok(l) => l,
        Err(_) => panic!(),
    };
    let policy = Policy::builder()
        .retries(0)
        .limit(&LIMIT)
        .hedge(Hedge::after(ms(50), 1).unwrap())
        .build()
        .unwrap();
    let (inner, calls) = one_at_a_time(0);
    let mut client = RobustLayer::hedged(policy).layer(inner);
    client.ready().await.unwrap();
    let unpolled = client.call(Request::new(String::new()));
    let mut other = client.clone();
    tokio::time::timeout(secs(1), other.ready())
        .await
        .expect("the inner permit is free")
        .unwrap();
    drop(other);
    let r = tokio::time::timeout(secs(1), unpolled)
        .await
        .expect("the request ends");
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Three requests through `client` (whose layer has a limit of one slot and retries after
/// 10 ms) over [`one_at_a_time`]: A fails at once (its round, hedged) and retries at 10 ms, while C holds the slot until
/// 20 ms and B, made ready at 1 ms, waits for the inner permit C's call holds. At 20 ms the
/// slot goes to A (queued first) and the permit to B. Before, B waited for the slot holding
/// the permit that A, holding the slot, needed: neither ever answered. Now B gives the permit
/// up while it waits: A's retry answers at 40 ms, B at 60 ms. (A and C start together: which
/// is sent first, and fails, depends on the layer.)
async fn no_request_holds_readiness_while_it_waits_for_a_slot<S>(
    client: S,
    calls: Arc<AtomicU32>,
    expected_calls: u32,
) where
    S: Service<Request<String>, Response = Resp, Error = io::Error> + Clone,
{
    let start = Instant::now();
    let timed = |svc: S, after: Duration| async move {
        tokio::time::sleep(after).await;
        let r = svc.oneshot(Request::new(String::new())).await;
        (r.map(|r| r.status()).map_err(|e| e.kind()), start.elapsed())
    };
    let (a, c, b) = tokio::time::timeout(secs(10), async {
        tokio::join!(
            timed(client.clone(), Duration::ZERO),
            timed(client.clone(), Duration::ZERO),
            timed(client.clone(), ms(1)),
        )
    })
    .await
    .expect("the requests waited for each other");
    // (Whichever of A and C is sent first fails and retries.)
    let mut first_two = [a, c];
    first_two.sort_by_key(|(_, at)| *at);
    assert_eq!(
        first_two,
        [(Ok(StatusCode::OK), ms(20)), (Ok(StatusCode::OK), ms(40))]
    );
    assert_eq!(b, (Ok(StatusCode::OK), ms(60)));
    assert_eq!(calls.load(Ordering::SeqCst), expected_calls);
}

#[tokio::test(start_paused = true)]
async fn a_request_waiting_for_a_slot_gives_up_what_the_service_reserved_for_it() {
    let limit = Box::leak(Box::new(
        retry_runtime::ConcurrencyLimit::new(1, 4).unwrap(),
    ));
    let policy = Policy::builder()
        .retries(1)
        .backoff(Constant::new(ms(10)))
        .jitter(NoJitter)
        .limit(limit)
        .build()
        .unwrap();
    let (svc, calls) = one_at_a_time(1);
    let client = RobustLayer::new(policy).layer(svc);
    no_request_holds_readiness_while_it_waits_for_a_slot(client, calls, 4).await;
    assert_eq!((limit.in_flight(), limit.queued()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_hedged_request_waiting_for_a_slot_gives_up_what_the_service_reserved_for_it() {
    // Two slots (a hedge beside a limit of one is refused), one held by another caller: one
    // slot for the requests, as in the plain layer's test above.
    let limit = Box::leak(Box::new(
        retry_runtime::ConcurrencyLimit::new(2, 4).unwrap(),
    ));
    let other = limit.try_acquire().expect("a free slot");
    let policy = Policy::builder()
        .retries(1)
        .backoff(Constant::new(ms(10)))
        .jitter(NoJitter)
        .limit(limit)
        .hedge(retry_runtime::hedge::Hedge::after(ms(500), 1).unwrap())
        .build()
        .unwrap();
    // A's first call fails, and so does the hedge it starts at once: its round failed.
    let (svc, calls) = one_at_a_time(2);
    let client = RobustLayer::hedged(policy).layer(svc).boxed_clone();
    no_request_holds_readiness_while_it_waits_for_a_slot(client, calls, 5).await;
    drop(other);
    assert_eq!((limit.in_flight(), limit.queued()), (0, 0));
}

/// A retry whose attempt timed out waiting for the service to be ready gives up what it was
/// waiting for. Behind tower's `ConcurrencyLimit` of one: A's first call fails at once; B (a
/// call made around the layer) holds the permit from 5 to 305 ms; A's retry, due at 10 ms,
/// waits for it and is cut at 110 ms (its next retry, after a timeout, is due at 1110 ms); C
/// comes at 200 ms. When B's call ends, the permit goes to C, whose call answers at 315 ms,
/// and A's last retry answers at 1120 ms. (Before, A's queued wait stayed with the service A
/// kept: the permit went to A, asleep in its backoff, and C waited for A until 1130 ms.)
#[tokio::test(start_paused = true)]
async fn a_readiness_wait_cut_by_the_timeout_is_given_up_for_the_backoff() {
    let policy = Policy::builder()
        .retries(2)
        .timeout(ms(100))
        .backoff(Constant::new(ms(10)))
        .jitter(NoJitter)
        .when(retry_runtime::kind::Timeout, |s| {
            s.backoff(Constant::new(secs(1)))
        })
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = tower::service_fn(move |_r: Request<String>| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            match n {
                0 => return Err(io::Error::from(ErrorKind::ConnectionReset)),
                1 => tokio::time::sleep(ms(300)).await,
                _ => tokio::time::sleep(ms(10)).await,
            }
            Ok(status(StatusCode::OK))
        }
    });
    let inner = tower::limit::ConcurrencyLimit::new(svc, 1);
    let client = RobustLayer::new(policy).layer(inner.clone());
    let start = Instant::now();
    let timed = |svc, after: Duration| async move {
        tokio::time::sleep(after).await;
        let r: io::Result<Resp> =
            ServiceExt::<Request<String>>::oneshot(svc, Request::new(String::new())).await;
        (r.map(|r| r.status()).map_err(|e| e.kind()), start.elapsed())
    };
    let (a, b, c) = tokio::time::timeout(secs(10), async {
        tokio::join!(
            timed(client.clone(), Duration::ZERO),
            async {
                tokio::time::sleep(ms(5)).await;
                let r = inner.oneshot(Request::new(String::new())).await;
                (r.map(|r| r.status()).map_err(|e| e.kind()), start.elapsed())
            },
            timed(client.clone(), ms(200)),
        )
    })
    .await
    .expect("the requests ended");
    assert_eq!(b, (Ok(StatusCode::OK), ms(305)));
    assert_eq!(c, (Ok(StatusCode::OK), ms(315)));
    assert_eq!(a, (Ok(StatusCode::OK), ms(1120)));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

/// A half-open breaker's probe taken by a request whose future is dropped while its attempt
/// runs (a caller's own timeout) goes back: the next request probes, and closes the breaker.
/// (Before, every request was rejected until the probe went stale, a break later.) The same
/// with the policy held by a `&'static` reference.
#[tokio::test(start_paused = true)]
async fn a_dropped_request_gives_its_probe_back() {
    dropped_request_gives_its_probe_back(false).await;
    dropped_request_gives_its_probe_back(true).await;
}

async fn dropped_request_gives_its_probe_back(from_static: bool) {
    use retry_runtime::BreakerState;

    let breaker = Box::leak(Box::new(
        CircuitBreaker::new(2, 1, 0.5, secs(10), 1).unwrap(),
    ));
    breaker.record(Instant::now().into_std(), false);
    assert_eq!(breaker.state(), BreakerState::Open);
    tokio::time::advance(secs(11)).await;
    let policy = Policy::builder()
        .retries(0)
        .breaker(&*breaker)
        .build()
        .unwrap();
    // The first call hangs; the next ones answer at once.
    let (svc, calls, _) = slow::<String>(vec![(60_000, StatusCode::OK), (0, StatusCode::OK)]);
    async fn probe<S>(client: S, calls: &AtomicU32)
    where
        S: Service<Request<String>, Response = Resp, Error = io::Error> + Clone,
    {
        let hung = client.clone().oneshot(Request::new(String::new()));
        assert!(
            tokio::time::timeout(ms(100), hung).await.is_err(),
            "cut by the caller"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let r = client.oneshot(Request::new(String::new())).await;
        assert_eq!(r.unwrap().status(), StatusCode::OK);
    }
    if from_static {
        let leaked = Box::leak(Box::new(policy));
        probe(RobustLayer::from_static(&*leaked).layer(svc), &calls).await;
    } else {
        probe(RobustLayer::new(policy).layer(svc), &calls).await;
    }
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A service whose call fails with a retryable error, and which fails to be ready once it was
/// called (its clones too).
#[derive(Clone, Default)]
struct Broken {
    calls: Arc<AtomicU32>,
    refusals: Arc<AtomicU32>,
}

impl Service<Request<String>> for Broken {
    type Response = Resp;
    type Error = io::Error;
    type Future = std::future::Ready<io::Result<Resp>>;
    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        if self.calls.load(Ordering::SeqCst) == 0 {
            std::task::Poll::Ready(Ok(()))
        } else {
            self.refusals.fetch_add(1, Ordering::SeqCst);
            std::task::Poll::Ready(Err(ErrorKind::BrokenPipe.into()))
        }
    }
    fn call(&mut self, _: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Err(ErrorKind::ConnectionReset.into()))
    }
}

/// A readiness error is no attempt, under both layers: the request was not sent, so the
/// breaker does not count it (at most one failure recorded, of the two its minimum needs:
/// still closed; counted, the readiness error would have made two), `on_error` does not see
/// it, and it ends the call, not retried (under the hedged layer, the hedge sent at once after
/// the first failure meets it, and the call ends there instead of retrying).
#[tokio::test(start_paused = true)]
async fn a_readiness_error_is_no_attempt() {
    use retry_runtime::BreakerState;

    for hedged in [false, true] {
        let breaker = Box::leak(Box::new(
            CircuitBreaker::new(10, 2, 0.5, secs(10), 1).unwrap(),
        ));
        let errors = Arc::new(AtomicU32::new(0));
        let seen = Arc::clone(&errors);
        let builder = Policy::builder()
            .retries(5)
            .backoff(NoBackoff)
            .breaker(&*breaker)
            .on_error(move |_: &io::Error, _| {
                seen.fetch_add(1, Ordering::SeqCst);
            });
        let broken = Broken::default();
        let request = Request::new(String::new());
        let r = if hedged {
            let policy = builder
                .hedge(retry_runtime::hedge::Hedge::after(ms(500), 1).unwrap())
                .build()
                .unwrap();
            let mut svc = RobustLayer::hedged(policy).layer(broken.clone());
            svc.ready().await.unwrap().call(request).await
        } else {
            let mut svc = RobustLayer::new(builder.build().unwrap()).layer(broken.clone());
            svc.ready().await.unwrap().call(request).await
        };
        assert_eq!(
            r.unwrap_err().kind(),
            ErrorKind::BrokenPipe,
            "hedged {hedged}"
        );
        assert_eq!(broken.calls.load(Ordering::SeqCst), 1, "hedged {hedged}");
        assert_eq!(broken.refusals.load(Ordering::SeqCst), 1, "hedged {hedged}");
        assert_eq!(breaker.state(), BreakerState::Closed, "hedged {hedged}");
        // The breaker counted the first attempt's failure under both layers (the hedged
        // round the error abandoned undecided records the failure it kept, as when a caller
        // drops a call mid-round): one more opens it. `on_error` saw it under the plain layer
        // only (a round's callbacks see the outcome that decides it, and none did).
        breaker.record(Instant::now().into_std(), false);
        assert_eq!(breaker.state(), BreakerState::Open, "hedged {hedged}");
        let seen = if hedged { 0 } else { 1 };
        assert_eq!(errors.load(Ordering::SeqCst), seen, "hedged {hedged}");
    }
}

/// A service whose calls never answer. A clone first asked to be ready from 5 to 50 ms after
/// `start` (the hedge, sent at 10 ms) fails to be ready at 110 ms; any other is ready at once.
struct RefusedLate {
    calls: Arc<AtomicU32>,
    start: Instant,
    wait: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl Clone for RefusedLate {
    fn clone(&self) -> Self {
        RefusedLate {
            calls: Arc::clone(&self.calls),
            start: self.start,
            wait: None,
        }
    }
}

impl Service<Request<String>> for RefusedLate {
    type Response = Resp;
    type Error = io::Error;
    type Future = std::future::Pending<io::Result<Resp>>;
    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        use std::future::Future;
        if self.wait.is_none() {
            if !(ms(5)..=ms(50)).contains(&self.start.elapsed()) {
                return std::task::Poll::Ready(Ok(()));
            }
            let at = self.start + ms(110);
            self.wait = Some(Box::pin(tokio::time::sleep_until(at)));
        }
        match self.wait.as_mut().map(|w| w.as_mut().poll(cx)) {
            Some(std::task::Poll::Pending) => std::task::Poll::Pending,
            _ => std::task::Poll::Ready(Err(ErrorKind::BrokenPipe.into())),
        }
    }
    fn call(&mut self, _: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::pending()
    }
}

/// A hedge's readiness error that comes in the same wake as a timer still ends the call there,
/// under the hedged layer: at 110 ms the hedge's service fails to be ready as the hedge's
/// 100 ms timeout comes due (the first attempt was cut at 100 ms). Before, the round polled
/// the hedge (which kept the error), then cut it by the clock, settled the round as a
/// timeout (`on_error` saw it), and, with no backoff, sent the retry's first attempt to a
/// ready clone before the call returned the readiness error: a request sent by a call that
/// had already ended.
#[tokio::test(start_paused = true)]
async fn a_hedges_readiness_error_beside_a_due_timer_ends_the_call_there() {
    use retry_runtime::hedge::Hedge;

    let errors = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&errors);
    let policy = Policy::builder()
        .retries(3)
        .backoff(NoBackoff)
        .timeout(ms(100))
        .hedge(Hedge::after(ms(10), 1).unwrap())
        .on_error(move |_: &io::Error, _| {
            seen.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let start = Instant::now();
    let inner = RefusedLate {
        calls: Arc::new(AtomicU32::new(0)),
        start,
        wait: None,
    };
    let mut svc = RobustLayer::hedged(policy).layer(inner.clone());
    let r = svc
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()))
        .await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::BrokenPipe);
    assert_eq!(start.elapsed(), ms(110));
    assert_eq!(
        inner.calls.load(Ordering::SeqCst),
        1,
        "the first attempt only"
    );
    assert_eq!(errors.load(Ordering::SeqCst), 0, "no round was decided");
}

/// A service ready until it is first called; never again after (its clones too).
#[derive(Clone, Default)]
struct ReadyOnce {
    calls: Arc<AtomicU32>,
}

impl<B> Service<Request<B>> for ReadyOnce {
    type Response = Resp;
    type Error = io::Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<Resp>> + Send>>;
    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        if self.calls.load(Ordering::SeqCst) == 0 {
            std::task::Poll::Ready(Ok(()))
        } else {
            std::task::Poll::Pending
        }
    }
    fn call(&mut self, _: Request<B>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            tokio::time::sleep(ms(50)).await;
            Ok(status(StatusCode::OK))
        })
    }
}

/// A request that cannot be copied and waited for a slot makes its service ready within its
/// attempt's time: the service that never becomes ready again is cut by the 100 ms timeout,
/// 100 ms after the slot came (at 50 ms), and the request, which was never sent, is not
/// retried either (it is sent once, whatever the policy says), under both layers. (Before,
/// the hedged layer's readiness wait had no timer, and the request waited for ever; the plain
/// layer retried it.)
#[tokio::test(start_paused = true)]
async fn a_request_sent_once_is_made_ready_within_its_timeout() {
    type Boxed = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;
    use http_body_util::BodyExt;

    async fn check<S>(make: impl FnOnce(ReadyOnce) -> S, limit: &retry_runtime::ConcurrencyLimit)
    where
        S: Service<Request<Boxed>, Response = Resp, Error = io::Error> + Clone,
    {
        let inner = ReadyOnce::default();
        let svc = make(inner.clone());
        let body =
            || -> Boxed { http_body_util::Full::new(bytes::Bytes::from_static(b"x")).boxed() };
        let start = Instant::now();
        // Both are made ready before either is called.
        let mut a = svc.clone();
        let mut b = svc;
        ServiceExt::<Request<Boxed>>::ready(&mut a).await.unwrap();
        ServiceExt::<Request<Boxed>>::ready(&mut b).await.unwrap();
        let a = a.call(Request::new(body()));
        let b = b.call(Request::new(body()));
        let timed = |f| async move {
            let r: io::Result<Resp> = f.await;
            (r.map(|r| r.status()).map_err(|e| e.kind()), start.elapsed())
        };
        let (a, b) = tokio::time::timeout(secs(10), async { tokio::join!(timed(a), timed(b)) })
            .await
            .expect("the readiness wait ended");
        assert_eq!(a, (Ok(StatusCode::OK), ms(50)));
        assert_eq!(b, (Err(ErrorKind::TimedOut), ms(150)));
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            (limit.in_flight(), limit.queued()),
            (1, 0),
            "the other caller's slot only"
        );
    }

    // Two slots (a hedge beside a limit of one is refused), one held by another caller all
    // along: one for the requests.
    let limit = Box::leak(Box::new(
        retry_runtime::ConcurrencyLimit::new(2, 4).unwrap(),
    ));
    let other = limit.try_acquire().expect("a free slot");
    let builder = || {
        Policy::builder()
            .retries(1)
            .backoff(Constant::new(ms(10)))
            .jitter(NoJitter)
            .timeout(ms(100))
            .limit(&*limit)
    };
    let plain = builder().build().unwrap();
    check(|inner| RobustLayer::new(plain).layer(inner), limit).await;
    let hedged = builder()
        .hedge(retry_runtime::hedge::Hedge::after(ms(80), 1).unwrap())
        .build()
        .unwrap();
    check(|inner| RobustLayer::hedged(hedged).layer(inner), limit).await;
    drop(other);
}

/// A breaker of `probes` probes, opened by a failure and half-open now: its 10 s break is
/// over (on tokio's paused clock).
async fn half_open(probes: u32) -> &'static CircuitBreaker {
    let breaker = Box::leak(Box::new(
        CircuitBreaker::new(10, 1, 0.5, secs(10), probes).unwrap(),
    ));
    breaker.record(Instant::now().into_std(), false);
    assert_eq!(breaker.state(), retry_runtime::BreakerState::Open);
    tokio::time::advance(secs(11)).await;
    breaker
}

/// A value rule that takes 503 as busy, and panics once `panic` is set (clearing it).
fn busy_unless_panicking(r: &Resp, panic: &std::sync::atomic::AtomicBool) -> bool {
    if panic.swap(false, Ordering::SeqCst) {
        panic!("the rule panics");
    }
    r.status() == StatusCode::SERVICE_UNAVAILABLE
}

/// Two requests through `client`, whose service's first call hangs and whose next answers at
/// once (`slow`, counting its calls in `calls`): the first (a probe of a half-open breaker) is
/// left running, and the second, sent with `panic` set, panics in a callback or rule of the
/// client's policy. The hung request's task.
async fn one_probe_out_and_one_panicked<C>(
    client: &C,
    calls: &AtomicU32,
    panic: &std::sync::atomic::AtomicBool,
) -> tokio::task::JoinHandle<io::Result<Resp>>
where
    C: Service<Request<String>, Response = Resp, Error = io::Error> + Clone + Send + 'static,
    C::Future: Send,
{
    let hung = tokio::spawn(client.clone().oneshot(Request::new(String::new())));
    tokio::task::yield_now().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    panic.store(true, Ordering::SeqCst);
    let panicked = tokio::spawn(client.clone().oneshot(Request::new(String::new()))).await;
    assert!(panicked.unwrap_err().is_panic());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    hung
}

/// A request whose `on_success` panics after its probe's success was recorded does not give
/// that probe back as it unwinds (it would count twice): with two probes, one still running and
/// one recorded, a third request is rejected. (Before, the dropped future gave the recorded
/// probe back, and a third probe went out while the first still ran.)
#[tokio::test(start_paused = true)]
async fn a_panicking_callback_gives_no_recorded_probe_back() {
    use retry_runtime::{BreakerState, Open};
    use std::sync::atomic::AtomicBool;

    let breaker = half_open(2).await;
    static PANIC: AtomicBool = AtomicBool::new(false);
    let policy = Policy::builder()
        .retries(0)
        .breaker(breaker)
        .on_success(|| {
            if PANIC.swap(false, Ordering::SeqCst) {
                panic!("on_success panics");
            }
        })
        .build()
        .unwrap();
    // The first call hangs; the next ones answer at once.
    let (svc, calls, _) = slow::<String>(vec![(60_000, StatusCode::OK), (0, StatusCode::OK)]);
    let client = RobustLayer::new(policy).layer(svc);
    // The second probe: its success is recorded, then `on_success` panics.
    let hung = one_probe_out_and_one_panicked(&client, &calls, &PANIC).await;
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    // Both probes are taken: the third request is rejected without a call.
    let r = client.clone().oneshot(Request::new(String::new())).await;
    let e = r.unwrap_err();
    assert!(e.get_ref().is_some_and(|i| i.is::<Open>()), "{e:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    hung.abort();
}

/// A request whose value rule panics, before its probe's outcome was recorded, gives the probe
/// back as it unwinds: the next request probes, and closes the breaker. (Marking the future
/// settled before the rules ran, without the call holding the permit, kept the probe taken
/// until it went stale.)
#[tokio::test(start_paused = true)]
async fn a_panicking_value_rule_gives_its_probe_back() {
    use retry_runtime::BreakerState;
    use std::sync::atomic::AtomicBool;

    let breaker = half_open(1).await;
    static PANIC: AtomicBool = AtomicBool::new(false);
    let policy = Policy::builder()
        .retries(0)
        .breaker(breaker)
        .on_ok(OkIf(|r: &Resp| busy_unless_panicking(r, &PANIC)))
        .build()
        .unwrap();
    let (svc, calls) = scripted(vec![Ok(status(StatusCode::OK))]);
    let client = RobustLayer::new(policy).layer(svc);
    PANIC.store(true, Ordering::SeqCst);
    let panicked = tokio::spawn(client.clone().oneshot(Request::new(String::new()))).await;
    assert!(panicked.unwrap_err().is_panic());
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    let r = client.oneshot(Request::new(String::new())).await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// Under an adaptive timeout, a value rule is first asked while the attempt's latency is
/// measured: a request whose rule panics there gives its probe back once. With two probes, one
/// still out and one given back by the panic, one more probe may go out, and no second one.
/// (Before, the call made to settle the attempt and the request's future both gave it back,
/// and a third probe went out beside the two.)
#[tokio::test(start_paused = true)]
async fn a_value_rule_that_panics_while_measured_gives_its_probe_back_once() {
    use retry_runtime::BreakerState;
    use retry_runtime::timeout::Adaptive;
    use std::sync::atomic::AtomicBool;

    static LATENCIES: retry_runtime::latency::Latencies = retry_runtime::latency::Latencies::new();
    static PANIC: AtomicBool = AtomicBool::new(false);
    let breaker = half_open(2).await;
    let policy = Policy::builder()
        .retries(0)
        .breaker(breaker)
        .adaptive_timeout(Adaptive::new(&LATENCIES, 99.0, 2.0, ms(10), secs(100)).unwrap())
        .on_ok(OkIf(|r: &Resp| busy_unless_panicking(r, &PANIC)))
        .build()
        .unwrap();
    // The first call hangs; the next one answers at once.
    let (svc, calls, _) = slow::<String>(vec![(60_000, StatusCode::OK), (0, StatusCode::OK)]);
    let client = RobustLayer::new(policy).layer(svc);
    let hung = one_probe_out_and_one_panicked(&client, &calls, &PANIC).await;
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    let now = Instant::now().into_std();
    assert!(
        breaker.try_acquire(now),
        "the probe given back goes out again"
    );
    assert!(!breaker.try_acquire(now), "two probes are out: no third");
    hung.abort();
}

/// A service that answers `Ok(())` at once, and whose `clone` panics while `PANIC` is set.
#[derive(Debug)]
struct PanicsOnClone(&'static std::sync::atomic::AtomicBool);

impl Clone for PanicsOnClone {
    fn clone(&self) -> Self {
        if self.0.load(Ordering::SeqCst) {
            panic!("the service's clone panics");
        }
        PanicsOnClone(self.0)
    }
}

impl Service<u32> for PanicsOnClone {
    type Response = u32;
    type Error = io::Error;
    type Future = std::future::Ready<io::Result<u32>>;
    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, n: u32) -> Self::Future {
        std::future::ready(Ok(n))
    }
}

/// A request admitted by a half-open breaker that finds no slot of its limit swaps its ready
/// service for a clone before it waits; a panic in that clone gives the probe back: the next
/// request probes, and closes the breaker. (Before, the future dropped in that step held the
/// probe until it went stale, a break later.)
#[tokio::test(start_paused = true)]
async fn a_service_clone_that_panics_before_a_wait_for_a_slot_gives_the_probe_back() {
    use retry_runtime::{BreakerState, ConcurrencyLimit};
    use std::sync::atomic::AtomicBool;

    static PANIC: AtomicBool = AtomicBool::new(false);
    static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(1, 4) {
        Ok(l) => l,
        Err(_) => panic!("invalid limit"),
    };
    let breaker = half_open(1).await;
    let policy = Policy::builder()
        .retries(0)
        .breaker(breaker)
        .limit(&LIMIT)
        .build()
        .unwrap();
    let client = RobustLayer::new(policy).layer(PanicsOnClone(&PANIC));
    // The only slot is taken: the request must wait for it.
    let held = LIMIT.try_acquire().expect("a free slot");
    let mut ready = client.clone();
    ready.ready().await.unwrap();
    let request = ready.call(1);
    PANIC.store(true, Ordering::SeqCst);
    assert!(tokio::spawn(request).await.unwrap_err().is_panic());
    PANIC.store(false, Ordering::SeqCst);
    drop(held);
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert_eq!(
        client.oneshot(2).await.unwrap(),
        2,
        "the probe was given back"
    );
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A request that cannot be copied.
struct Once;

impl retry_runtime::tower::RetryRequest for Once {
    fn try_clone(&self) -> Option<Self> {
        None
    }
}

/// Under the hedged layer, a request that cannot be copied (sent once) and must wait for a
/// slot of the layer's limit does not keep the inner service's permit while it waits (tower's
/// `ConcurrencyLimit` takes it when made ready): another user of the inner service gets it.
/// (Before, it stayed with the waiting request, which could deadlock as in the tests above.)
#[tokio::test(start_paused = true)]
async fn a_request_sent_once_waits_for_a_slot_without_the_inner_permit() {
    // (Two slots: a hedge beside a limit of one is refused.)
    let limit = Box::leak(Box::new(
        retry_runtime::ConcurrencyLimit::new(2, 4).unwrap(),
    ));
    let policy = Policy::builder()
        .retries(1)
        .limit(limit)
        .hedge(retry_runtime::hedge::Hedge::after(ms(500), 1).unwrap())
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let inner = tower::limit::ConcurrencyLimit::new(
        tower::service_fn(move |_: Once| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, io::Error>(status(StatusCode::OK)) }
        }),
        1,
    );
    let client = RobustLayer::hedged(policy).layer(inner.clone());
    // The layer's slots are taken: the request waits for one.
    let held = (limit.try_acquire().unwrap(), limit.try_acquire().unwrap());
    let waiting = tokio::spawn(client.oneshot(Once));
    tokio::time::sleep(ms(10)).await;
    assert_eq!(limit.queued(), 1);
    // The inner permit is free meanwhile.
    let mut other = inner.clone();
    let ready = tokio::time::timeout(ms(10), std::future::poll_fn(|cx| other.poll_ready(cx))).await;
    assert!(ready.is_ok(), "the waiting request kept the inner permit");
    drop(other);
    drop(held);
    let r = waiting.await.unwrap();
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// A policy with nothing to admit, queue or time an attempt (no breaker, throttle, limit,
/// timeout or value rule) has its running attempt's answer looked at first by the future's
/// `poll`, which returns a success at once and hands a failure to the retry loop: failures
/// answered at once and after a wait are both retried after their backoff, and the success
/// after them returned, through both handles of the policy; `on_error` sees each failure and
/// `on_success` the success. (A failure lost there would leave the request pending: the test's
/// own timeout would end it.) That `poll` sees an attempt's answer when the attempt was
/// pending at an earlier poll (`wait` 10 ms), or when `call` sent the first attempt (not with
/// the `tracing` feature, whose events need the call's start).
#[tokio::test(start_paused = true)]
async fn failures_of_an_unguarded_policy_are_retried_whether_answered_at_once_or_later() {
    for wait in [0, 10] {
        for from_static in [false, true] {
            let (errors, successes) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
            let (e, s) = (Arc::clone(&errors), Arc::clone(&successes));
            let policy = Policy::builder()
                .retries(3)
                .backoff(Constant::new(ms(100)))
                .jitter(NoJitter)
                .on_error(move |_: &io::Error, _| {
                    e.fetch_add(1, Ordering::SeqCst);
                })
                .on_success(move || {
                    s.fetch_add(1, Ordering::SeqCst);
                })
                .build()
                .unwrap();
            let calls = Arc::new(AtomicU32::new(0));
            let counter = Arc::clone(&calls);
            let svc = tower::service_fn(move |_req: Request<String>| {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    tokio::time::sleep(ms(wait)).await;
                    if n < 2 {
                        Err(io::Error::from(ErrorKind::ConnectionReset))
                    } else {
                        Ok(status(StatusCode::OK))
                    }
                }
            });
            async fn send<S>(client: S) -> io::Result<Resp>
            where
                S: Service<Request<String>, Response = Resp, Error = io::Error>,
            {
                let request = client.oneshot(Request::new("ping".to_owned()));
                tokio::time::timeout(secs(60), request)
                    .await
                    .expect("the request ended")
            }
            let start = Instant::now();
            let r = if from_static {
                let leaked = Box::leak(Box::new(policy));
                send(RobustLayer::from_static(&*leaked).layer(svc)).await
            } else {
                send(RobustLayer::new(policy).layer(svc)).await
            };
            assert_eq!(r.unwrap().status(), StatusCode::OK, "wait {wait} ms");
            assert_eq!(calls.load(Ordering::SeqCst), 3);
            assert_eq!(errors.load(Ordering::SeqCst), 2);
            assert_eq!(successes.load(Ordering::SeqCst), 1);
            // Three attempts of `wait` each, two backoffs of 100 ms.
            assert_eq!(start.elapsed(), ms(3 * wait + 200), "wait {wait} ms");
        }
    }
}

/// A fallback beside rules that retry every error for ever, which the attribute refuses as
/// never called, answers under the layer: a readiness error ends the call (tower's contract),
/// and the fallback answers it. (So the builder accepts that policy.)
#[tokio::test(start_paused = true)]
async fn a_fallback_beside_endless_retries_answers_a_readiness_error() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kinds = Arc::clone(&seen);
    let policy = Policy::builder()
        .retries(-1)
        .backoff(NoBackoff)
        .fallback(move |e: io::Error| {
            kinds.lock().unwrap().push(e.kind());
            Ok(status(StatusCode::NON_AUTHORITATIVE_INFORMATION))
        })
        .build()
        .unwrap();
    let broken = Broken::default();
    let r = RobustLayer::new(policy)
        .layer(broken.clone())
        .oneshot(Request::new(String::new()));
    let r = tokio::time::timeout(secs(60), r)
        .await
        .expect("the call ended");
    assert_eq!(
        r.unwrap().status(),
        StatusCode::NON_AUTHORITATIVE_INFORMATION
    );
    assert_eq!(*seen.lock().unwrap(), [ErrorKind::BrokenPipe]);
    assert_eq!(broken.calls.load(Ordering::SeqCst), 1);
}

static SPAWN_BUDGET: RetryBudget = match RetryBudget::new(10.0, 0.5, 1.0) {
    Ok(b) => b,
    Err(_) => panic!("invalid budget"),
};
static SPAWN_LIMIT: retry_runtime::ConcurrencyLimit =
    match retry_runtime::ConcurrencyLimit::new(4, 4) {
        Ok(l) => l,
        Err(_) => panic!("invalid limit"),
    };
static SPAWN_BREAKER: std::sync::LazyLock<CircuitBreaker> = std::sync::LazyLock::new(|| {
    CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).expect("valid breaker")
});
static SPAWN_THROTTLE: std::sync::LazyLock<AdaptiveThrottle> =
    std::sync::LazyLock::new(|| AdaptiveThrottle::new(2.0, secs(60)).expect("valid throttle"));
static SPAWN_LATENCIES: retry_runtime::latency::Latencies =
    retry_runtime::latency::Latencies::new();

/// A request through the layer runs in a task spawned from an `async move` block, the way a
/// server's handler or a client's worker runs it, whatever `static` guards its policy
/// borrows. (Such a block's `Send` check cannot relate two copies of the policy's lifetimes,
/// rust-lang/rust#64552: a `Service` impl that tied the handle's policy to the type's named
/// one made this a compile error for every policy with a guard.) Each client answers after a
/// retry, so the loop ran. The hedged layer's service is boxed (`boxed_clone`), as its docs
/// say: its impl needs a `'static` policy, which that check cannot see either.
#[tokio::test(start_paused = true)]
async fn requests_run_in_tasks_spawned_from_async_blocks() {
    use retry_runtime::guard::{Keyed, KeyedBreaker, KeyedBudget};
    use retry_runtime::hedge::Hedge;
    use retry_runtime::timeout::Adaptive;
    static BREAKERS: std::sync::LazyLock<KeyedBreaker<String>> = std::sync::LazyLock::new(|| {
        let template =
            CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).expect("valid breaker");
        Keyed::new(8, template).expect("capacity")
    });
    static BUDGETS: std::sync::LazyLock<KeyedBudget<String>> = std::sync::LazyLock::new(|| {
        Keyed::new(8, RetryBudget::new(10.0, 1.0, 10.0).expect("valid")).expect("capacity")
    });
    fn host<B>(r: &Request<B>) -> String {
        r.uri().path().to_owned()
    }
    // A macro, not a generic fn: in a generic fn the client's type is a parameter, whose
    // lifetimes the check does not see.
    macro_rules! spawned {
        ($client:expr, $calls:expr) => {{
            let client = $client;
            let task = tokio::spawn(async move {
                let answer = client.oneshot(Request::new(String::from("body"))).await;
                answer.map(|r| r.status())
            });
            let status = task.await.unwrap().unwrap();
            assert_eq!($calls.load(Ordering::SeqCst), 2, "one retry ({status})");
            status
        }};
    }
    let once_unavailable = || {
        scripted::<String>(vec![
            Ok(status(StatusCode::SERVICE_UNAVAILABLE)),
            Ok(status(StatusCode::OK)),
        ])
    };
    let base = || {
        Policy::builder()
            .retries(2)
            .backoff(Constant::new(ms(10)))
            .on_ok(OkIf(|r: &Resp| {
                r.status() == StatusCode::SERVICE_UNAVAILABLE
            }))
    };

    let (svc, calls) = once_unavailable();
    let layer = RobustLayer::new(base().budget(&SPAWN_BUDGET).build().unwrap());
    assert_eq!(spawned!(layer.layer(svc), calls), StatusCode::OK);

    let (svc, calls) = once_unavailable();
    let policy = Box::leak(Box::new(base().budget(&SPAWN_BUDGET).build().unwrap()));
    let layer = RobustLayer::from_static(&*policy);
    assert_eq!(spawned!(layer.layer(svc), calls), StatusCode::OK);

    // Ten accepted requests: the throttle turns no retry away (its draw would be random).
    for _ in 0..10 {
        SPAWN_THROTTLE.record(Instant::now().into_std(), true);
    }
    let (svc, calls) = once_unavailable();
    let policy = base()
        .budget(&SPAWN_BUDGET)
        .limit(&SPAWN_LIMIT)
        .breaker(&*SPAWN_BREAKER)
        .throttle(&SPAWN_THROTTLE)
        .adaptive_timeout(Adaptive::new(&SPAWN_LATENCIES, 99.0, 2.0, ms(100), secs(5)).unwrap())
        .deadline(secs(10))
        .hint(|_: &io::Error| None)
        .fallback(|e: io::Error| Err(e))
        .build()
        .unwrap();
    assert_eq!(
        spawned!(RobustLayer::new(policy).layer(svc), calls),
        StatusCode::OK
    );

    let (svc, calls) = once_unavailable();
    let layer = RobustLayer::new(base().build().unwrap())
        .breaker_per(&*BREAKERS, host::<String>)
        .budget_per(&*BUDGETS, host::<String>);
    assert_eq!(spawned!(layer.layer(svc), calls), StatusCode::OK);

    let (svc, calls) = once_unavailable();
    let policy = base()
        .budget(&SPAWN_BUDGET)
        .hedge(Hedge::after(secs(1), 1).unwrap())
        .build()
        .unwrap();
    let client = RobustLayer::hedged(policy).layer(svc).boxed_clone();
    assert_eq!(spawned!(client, calls), StatusCode::OK);

    // Or built in a fn whose opaque return type shows only the bounds the block needs.
    fn hedged_client<S>(
        svc: S,
    ) -> impl Service<Request<String>, Response = Resp, Error = io::Error, Future: Send>
    + Clone
    + Send
    + 'static
    where
        S: Service<Request<String>, Response = Resp, Error = io::Error> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        let policy = Policy::builder()
            .retries(2)
            .backoff(Constant::new(ms(10)))
            .on_ok(OkIf(|r: &Resp| {
                r.status() == StatusCode::SERVICE_UNAVAILABLE
            }))
            .budget(&SPAWN_BUDGET)
            .hedge(Hedge::after(secs(1), 1).unwrap())
            .build()
            .unwrap();
        RobustLayer::hedged(policy).layer(svc)
    }
    let (svc, calls) = once_unavailable();
    assert_eq!(spawned!(hedged_client(svc), calls), StatusCode::OK);

    // A borrowed body (`&'static str`, copied as a reference): its `RetryBody` impl holds for
    // any lifetime, which the block's check needs too.
    // (A service of its own: an opaque or closure type fixes the body's lifetime itself.)
    #[derive(Clone)]
    struct UnavailableOnce(Arc<AtomicU32>);
    impl<'a> Service<Request<&'a str>> for UnavailableOnce {
        type Response = Resp;
        type Error = io::Error;
        type Future = std::future::Ready<io::Result<Resp>>;
        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: Request<&'a str>) -> Self::Future {
            let code = match self.0.fetch_add(1, Ordering::SeqCst) {
                0 => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::OK,
            };
            std::future::ready(Ok(status(code)))
        }
    }
    let calls = Arc::new(AtomicU32::new(0));
    let svc = UnavailableOnce(Arc::clone(&calls));
    let client = RobustLayer::new(base().build().unwrap()).layer(svc);
    let task = tokio::spawn(async move {
        let answer = client.oneshot(Request::new("body")).await;
        answer.map(|r| r.status())
    });
    assert_eq!(task.await.unwrap().unwrap(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one retry");
}

/// tower's own `timeout` under the layer fails an attempt with its `Elapsed` (boxed, by tower's
/// `Timeout`): the `Timeout` kind matches it, so the attempt is retried; a kind list without
/// `Timeout` leaves it the answer.
#[tokio::test(start_paused = true)]
async fn a_tower_timeout_under_the_layer_is_a_timeout() {
    use retry_runtime::kind::{Predicate, Timeout};
    let (svc, calls, _) = slow::<String>(vec![(1000, StatusCode::OK), (10, StatusCode::OK)]);
    let policy = Policy::builder()
        .retries(1)
        .backoff(NoBackoff)
        .on(Timeout)
        .build()
        .unwrap();
    let client = tower::ServiceBuilder::new()
        .layer(RobustLayer::new(policy))
        .timeout(ms(200))
        .service(svc);
    let t0 = Instant::now();
    let r = client.oneshot(Request::new(String::new())).await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(t0.elapsed(), ms(210));

    let (svc, calls, _) = slow::<String>(vec![(1000, StatusCode::OK), (10, StatusCode::OK)]);
    let policy = Policy::builder()
        .retries(1)
        .backoff(NoBackoff)
        .on(Predicate(|e: &tower::BoxError| e.is::<io::Error>()))
        .build()
        .unwrap();
    let client = tower::ServiceBuilder::new()
        .layer(RobustLayer::new(policy))
        .timeout(ms(200))
        .service(svc);
    let e = client
        .oneshot(Request::new(String::new()))
        .await
        .unwrap_err();
    assert!(e.is::<tower::timeout::error::Elapsed>(), "{e}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
