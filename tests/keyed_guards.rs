//! Guards per key (issue 12): a breaker and a budget per host, chosen by an expression of the
//! fn's arguments in the attribute, or by a closure over the request in `RobustLayer`.

use std::cell::Cell;
use std::io::{self, ErrorKind};
use std::sync::LazyLock;
use std::time::Duration;

use retry_runtime::guard::{Keyed, KeyedBreaker, KeyedBudget};
use retry_runtime::time::VirtualTime;
use retry_runtime::{BreakerState, CircuitBreaker, RetryBudget, robust};

static BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
    let template = CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1).expect("valid");
    Keyed::new(100, template).expect("capacity")
});

#[robust(retries = 1, backoff = none, breaker = BREAKERS.get(host))]
fn fetch(host: &str, calls: &Cell<u32>) -> io::Result<&'static str> {
    calls.set(calls.get() + 1);
    if host == "down.example" {
        Err(ErrorKind::ConnectionRefused.into())
    } else {
        Ok("ok")
    }
}

#[test]
fn each_host_has_its_own_breaker() {
    let _t = VirtualTime::new().install();
    let calls = Cell::new(0);
    // Two failed attempts open the breaker of the failing host.
    assert!(fetch("down.example", &calls).is_err());
    assert_eq!(calls.get(), 2);
    assert_eq!(BREAKERS.get("down.example").state(), BreakerState::Open);
    // Rejected without an attempt, while another host is served.
    assert_eq!(
        fetch("down.example", &calls).unwrap_err().kind(),
        ErrorKind::Other
    );
    assert_eq!(calls.get(), 2);
    assert_eq!(fetch("up.example", &calls).unwrap(), "ok");
    assert_eq!(calls.get(), 3);
    assert_eq!(BREAKERS.get("up.example").state(), BreakerState::Closed);
}

static BUDGETS: LazyLock<KeyedBudget<u32>> = LazyLock::new(|| {
    Keyed::new(16, RetryBudget::new(2.0, 0.0, 1.0).expect("valid")).expect("capacity")
});

#[robust(retries = 10, backoff = none, budget = BUDGETS.get(&tenant))]
async fn for_tenant(tenant: u32, calls: &Cell<u32>) -> io::Result<()> {
    let _ = tenant;
    calls.set(calls.get() + 1);
    Err(ErrorKind::ConnectionReset.into())
}

#[tokio::test(start_paused = true)]
async fn each_tenant_spends_its_own_budget() {
    let calls = Cell::new(0);
    assert!(for_tenant(1, &calls).await.is_err());
    assert_eq!(calls.get(), 3, "two tokens: two retries");
    assert!(for_tenant(1, &calls).await.is_err());
    assert_eq!(calls.get(), 4, "tenant 1's budget is empty");
    assert!(for_tenant(2, &calls).await.is_err());
    assert_eq!(calls.get(), 7, "tenant 2 has its own");
}

static PAIR_BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
    let template = CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1).expect("valid");
    Keyed::new(100, template).expect("capacity")
});

thread_local! {
    /// What `on_retry` of `fetch_pair` printed, one line per retry.
    static RETRIED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

// Names bound by a parameter's pattern are read by the attribute's expressions, with the types
// the body sees (`host: &str`, `port: u16`), in a format string too.
#[robust(
    retries = 1,
    backoff = none,
    breaker = PAIR_BREAKERS.get(host),
    on_retry = |_, _| RETRIED.with(|r| r.borrow_mut().push(format!("{host}:{port}")))
)]
fn fetch_pair((host, port): (&str, u16), calls: &Cell<u32>) -> io::Result<u16> {
    calls.set(calls.get() + 1);
    if host == "down.example" {
        Err(ErrorKind::ConnectionRefused.into())
    } else {
        Ok(port)
    }
}

#[test]
fn a_name_bound_by_a_parameters_pattern_keys_the_guard() {
    let _t = VirtualTime::new().install();
    let calls = Cell::new(0);
    assert!(fetch_pair(("down.example", 80), &calls).is_err());
    assert_eq!(calls.get(), 2);
    assert_eq!(
        RETRIED.with(|r| r.borrow().clone()),
        ["down.example:80"],
        "on_retry read both names"
    );
    assert_eq!(
        PAIR_BREAKERS.get("down.example").state(),
        BreakerState::Open
    );
    assert_eq!(fetch_pair(("up.example", 443), &calls).unwrap(), 443);
    assert_eq!(calls.get(), 3);
    assert_eq!(
        PAIR_BREAKERS.get("up.example").state(),
        BreakerState::Closed
    );
}

/// An axum-style extractor: the fn takes it apart in its parameter (`State(app)`).
#[derive(Clone)]
struct State<S>(S);

#[derive(Clone)]
struct App {
    tenant: u32,
    budgets: &'static KeyedBudget<u32>,
}

static APP_BUDGETS: LazyLock<KeyedBudget<u32>> = LazyLock::new(|| {
    Keyed::new(16, RetryBudget::new(1.0, 0.0, 1.0).expect("valid")).expect("capacity")
});

thread_local! {
    /// The labels `on_retry` of `for_app` saw, one per retry.
    static LABELS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

// An owned argument's names are read from one clone of it per call (`app: App`), a reference's
// from the reference passed in (`label: &String`, through a `&` pattern, beside a `mut`
// binding).
#[robust(retries = 10, backoff = none, budget = app.budgets.get(&app.tenant),
         on_retry = |_, _| LABELS.with(|l| l.borrow_mut().push(format!("{label}/{tries}"))))]
async fn for_app(
    State(app): State<App>,
    &(ref label, mut tries): &(String, u32),
    calls: &Cell<u32>,
) -> io::Result<()> {
    tries += 1;
    let _ = (label, tries, &app.tenant);
    calls.set(calls.get() + 1);
    Err(ErrorKind::ConnectionReset.into())
}

#[tokio::test(start_paused = true)]
async fn a_name_bound_by_an_extractor_pattern_keys_the_guard() {
    let calls = Cell::new(0);
    let app = |tenant| {
        State(App {
            tenant,
            budgets: &APP_BUDGETS,
        })
    };
    let label = ("x".to_owned(), 0);
    assert!(for_app(app(1), &label, &calls).await.is_err());
    assert_eq!(calls.get(), 2, "one token: one retry");
    assert!(for_app(app(1), &label, &calls).await.is_err());
    assert_eq!(calls.get(), 3, "tenant 1's budget is empty");
    assert!(for_app(app(2), &label, &calls).await.is_err());
    assert_eq!(calls.get(), 5, "tenant 2 has its own");
    assert_eq!(LABELS.with(|l| l.borrow().clone()), ["x/0", "x/0"]);
}

static HOST_BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
    let template = CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1).expect("valid");
    Keyed::new(100, template).expect("capacity")
});

/// A service that refuses the requests to `down.example` (and other hosts named `down...`)
/// after `delay` and answers the others at once, and the count of its calls.
fn hosts(
    delay: Duration,
) -> (
    impl tower::Service<
        http::Request<String>,
        Response = http::Response<String>,
        Error = io::Error,
        Future: Send,
    > + Clone
    + Send
    + 'static,
    std::sync::Arc<std::sync::atomic::AtomicU32>,
) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = tower::service_fn(move |req: http::Request<String>| {
        counter.fetch_add(1, Ordering::SeqCst);
        let down = req.uri().host().is_some_and(|h| h.starts_with("down"));
        async move {
            if down {
                tokio::time::sleep(delay).await;
                Err(io::Error::from(ErrorKind::ConnectionRefused))
            } else {
                Ok(http::Response::new(String::new()))
            }
        }
    });
    (svc, calls)
}

/// The key of a request: its host.
fn host(r: &http::Request<String>) -> String {
    r.uri().host().unwrap_or_default().to_owned()
}

/// A GET of `http://{host}/`.
fn to(host: &str) -> http::Request<String> {
    http::Request::get(format!("http://{host}/"))
        .body(String::new())
        .unwrap()
}

/// Through `RobustLayer::new` and, on other hosts, `RobustLayer::from_static` (the policy held
/// by a `&'static` reference).
#[tokio::test(start_paused = true)]
async fn the_layer_gives_each_request_the_breaker_of_its_host() {
    use tower::Layer;

    let policy = || {
        retry_runtime::Policy::builder()
            .retries(1)
            .backoff(retry_runtime::NoBackoff)
            .build()
            .unwrap()
    };
    let (svc, calls) = hosts(Duration::ZERO);
    let client = retry_runtime::tower::RobustLayer::new(policy())
        .breaker_per(&*HOST_BREAKERS, host)
        .layer(svc);
    breaker_of_its_host(client, &calls, "down.example", "up.example").await;
    let (svc, calls) = hosts(Duration::ZERO);
    let leaked = Box::leak(Box::new(policy()));
    let client = retry_runtime::tower::RobustLayer::from_static(&*leaked)
        .breaker_per(&*HOST_BREAKERS, host)
        .layer(svc);
    breaker_of_its_host(client, &calls, "down2.example", "up2.example").await;
}

async fn breaker_of_its_host<S>(
    client: S,
    calls: &std::sync::atomic::AtomicU32,
    down: &str,
    up: &str,
) where
    S: tower::Service<http::Request<String>, Response = http::Response<String>, Error = io::Error>
        + Clone,
{
    use std::sync::atomic::Ordering;
    use tower::ServiceExt;

    let get = |host: &str| client.clone().oneshot(to(host));
    assert!(get(down).await.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(HOST_BREAKERS.get(down).state(), BreakerState::Open);
    // The failing host is cut off: E::from(Open), no call made.
    assert_eq!(get(down).await.unwrap_err().kind(), ErrorKind::Other);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Another host is served, through its own (closed) breaker.
    assert!(get(up).await.is_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(HOST_BREAKERS.get(up).state(), BreakerState::Closed);
}

static TENANT_BUDGETS: LazyLock<KeyedBudget<String>> = LazyLock::new(|| {
    Keyed::new(16, RetryBudget::new(2.0, 0.0, 1.0).expect("valid")).expect("capacity")
});
static LAYER_BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
    let template = CircuitBreaker::new(100, 100, 1.0, Duration::from_secs(30), 1).expect("valid");
    Keyed::new(100, template).expect("capacity")
});

#[tokio::test(start_paused = true)]
async fn the_layer_gives_each_request_the_budget_of_its_tenant_beside_a_breaker_per_host() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tower::{Layer, ServiceExt};

    let policy = retry_runtime::Policy::builder()
        .retries(10)
        .backoff(retry_runtime::NoBackoff)
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = tower::service_fn(move |_req: http::Request<String>| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { Err::<http::Response<String>, _>(io::Error::from(ErrorKind::ConnectionReset)) }
    });
    let tenant = |r: &http::Request<String>| {
        r.headers()["x-tenant"]
            .to_str()
            .unwrap_or_default()
            .to_owned()
    };
    // A closure with no type written takes the request's type from the fn it calls.
    let client = retry_runtime::tower::RobustLayer::new(policy)
        .breaker_per(&*LAYER_BREAKERS, |req| host(req).to_ascii_lowercase())
        .budget_per(&*TENANT_BUDGETS, tenant)
        .layer(svc);
    let get = |t: &str| {
        let req = http::Request::get("http://api.example/")
            .header("x-tenant", t)
            .body(String::new())
            .unwrap();
        client.clone().oneshot(req)
    };
    assert!(get("a").await.is_err());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "tenant a: two tokens, two retries"
    );
    assert!(get("a").await.is_err());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "tenant a's budget is empty"
    );
    assert!(get("b").await.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 7, "tenant b has its own");
    // The host's breaker saw every attempt: its window (100 attempts, all failed to open it)
    // holds the layer's 7 failures, so 93 more open it (92 would not).
    let breaker = LAYER_BREAKERS.get("api.example");
    let now = std::time::Instant::now();
    for _ in 0..92 {
        breaker.record(now, false);
    }
    assert_eq!(breaker.state(), BreakerState::Closed);
    breaker.record(now, false);
    assert_eq!(breaker.state(), BreakerState::Open);
}

static HEDGE_BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
    let template = CircuitBreaker::new(3, 3, 0.5, Duration::from_secs(30), 1).expect("valid");
    Keyed::new(100, template).expect("capacity")
});
static HEDGE_BUDGETS: LazyLock<KeyedBudget<String>> = LazyLock::new(|| {
    Keyed::new(16, RetryBudget::new(1.0, 0.0, 1.0).expect("valid")).expect("capacity")
});

/// The hedged layer takes guards per key too: a request's hedge is recorded by its host's
/// breaker and paid from its host's budget, and a host whose breaker opened is cut off while
/// another is served.
#[tokio::test(start_paused = true)]
async fn the_hedged_layer_gives_each_request_the_guards_of_its_host() {
    use std::sync::atomic::Ordering;
    use tower::{Layer, ServiceExt};

    // (A rule that retries, so that a failure does not win its round while the hedge runs;
    // the hosts' budgets, one token each, pay for the hedges and refuse every retry.)
    let policy = retry_runtime::Policy::builder()
        .retries(1)
        .hedge(retry_runtime::hedge::Hedge::after(Duration::from_millis(10), 1).unwrap())
        .build()
        .unwrap();
    // "down.example" hangs 50 ms, then refuses; "up.example" answers at once.
    let (svc, calls) = hosts(Duration::from_millis(50));
    let client = retry_runtime::tower::RobustLayer::hedged(policy)
        .breaker_per(&*HEDGE_BREAKERS, host)
        .budget_per(&*HEDGE_BUDGETS, host)
        .layer(svc);
    let get = |host: &str| client.clone().oneshot(to(host));
    // The first call hedges at 10 ms with the host's one budget token; both attempts fail,
    // and the host's breaker records both.
    assert!(get("down.example").await.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Its budget is spent: the second call sends no hedge. A third failure opens the breaker.
    assert!(get("down.example").await.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // Another failing host pays its hedge from a budget of its own (two attempts).
    assert!(get("down2.example").await.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    assert_eq!(
        HEDGE_BREAKERS.get("down.example").state(),
        BreakerState::Open
    );
    assert_eq!(
        get("down.example").await.unwrap_err().kind(),
        ErrorKind::Other,
        "E::from(Open), no call"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    // Another host: its own breaker.
    assert!(get("up.example").await.is_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    assert_eq!(
        HEDGE_BREAKERS.get("up.example").state(),
        BreakerState::Closed
    );
}

static CLONES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A value that counts its clones.
struct Counted(u32);
impl Clone for Counted {
    fn clone(&self) -> Self {
        CLONES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Counted(self.0)
    }
}

// The pattern binds names that are also the attribute's keys (`max_delay`, `retries`); no
// expression of the attribute reads them.
#[robust(retries = 1, backoff = none, max_delay = "1s")]
fn named_like_keys((max_delay, retries): (Counted, u32)) -> io::Result<u32> {
    Ok(max_delay.0 + retries)
}

// The same pattern, with a name the attribute's expression reads.
#[robust(retries = 1, backoff = none, max_delay = "1s",
         on_retry = |_, _| eprintln!("{}", max_delay.0))]
fn one_name_read((max_delay, retries): (Counted, u32)) -> io::Result<u32> {
    Ok(max_delay.0 + retries)
}

/// A parameter's pattern is bound once more (from one more clone of the argument) only when
/// the attribute's expressions may read one of its names: a key of the attribute written
/// before a `=` is not such a name.
#[test]
fn a_pattern_is_bound_again_only_for_names_the_expressions_read() {
    use std::sync::atomic::Ordering;
    let _t = VirtualTime::new().install();
    CLONES.store(0, Ordering::SeqCst);
    assert_eq!(named_like_keys((Counted(2), 3)).unwrap(), 5);
    let plain = CLONES.swap(0, Ordering::SeqCst);
    assert_eq!(one_name_read((Counted(2), 3)).unwrap(), 5);
    let read = CLONES.swap(0, Ordering::SeqCst);
    assert_eq!(
        (plain, read),
        (plain, plain + 1),
        "one more clone where a name is read"
    );
}
