//! Fleet guards without Redis (issue 14): on a `MemoryStore`, the same rules in this process.
//! The hot path allocates nothing; the shared guards plug into an async fn's attribute and
//! into `RobustLayer` like local ones.

use std::io;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use http::{Request, Response};
use retry_runtime::guard::fleet::{
    Fleet, FleetOptions, FleetStatus, MemoryStore, SharedBreaker, SharedBudget,
};
use retry_runtime::time::{Clock, Sleep, VirtualTime};
use retry_runtime::tower::RobustLayer;
use retry_runtime::{NoBackoff, Open, Policy, robust};
use tower::{Layer, Service, ServiceExt};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::allocations;
#[path = "common/fleet_guards.rs"]
mod fleet_guards;
use fleet_guards::shared_guards;

fn options() -> FleetOptions {
    FleetOptions::new()
        .interval(Duration::from_millis(20))
        .timeout(Duration::from_millis(50))
}

fn guards(fleet: &Fleet, name: &str) -> (SharedBreaker, SharedBudget) {
    // Opens locally at a 90% failure ratio, for the fleet at 50%.
    let (breaker, budget) = shared_guards(fleet, name, 0.9);
    budget.set_lease(10);
    (breaker, budget)
}

/// On a virtual clock (`Fleet::manual_on`, the policy's environment the same clock): the
/// guards judge the fleet's view stale after 150 ms of that clock without a sync, although
/// almost no real time passed.
#[test]
fn the_hot_path_allocates_nothing_with_the_fleet_or_without() {
    let store = MemoryStore::new();
    let time = VirtualTime::new();
    let fleet = Fleet::manual_on(&store, options(), time.clone()).unwrap();
    let (breaker, budget) = guards(&fleet, "alloc");
    let policy = Policy::builder()
        .retries(2)
        .backoff(NoBackoff)
        .breaker(&breaker)
        .budget(&budget)
        .env(time.clone())
        .build()
        .unwrap();
    // The virtual clock records every sleep, the retries' zero delays too, in a `Vec`: it is
    // grown here (to 32 entries), so that the measurements below see the guards' allocations.
    for _ in 0..17 {
        time.sleep(Duration::ZERO);
    }
    assert!(fleet.sync(time.now()));
    assert_eq!(fleet.status(), FleetStatus::Connected);
    // An instance leases tokens once it needs a retry: the first is refused, the lease
    // arrives at the next sync.
    assert!(!budget.try_withdraw());
    time.advance(Duration::from_millis(20));
    assert!(fleet.sync(time.now()));
    assert_eq!(budget.lease(), 10.0);
    let mut n = 0;
    let call = |n: &mut u32| -> io::Result<u32> {
        policy.call(|_| {
            *n += 1;
            if n.is_multiple_of(3) {
                Ok(*n)
            } else {
                Err(io::ErrorKind::ConnectionReset.into())
            }
        })
    };
    // Following the fleet: calls, retries paid from the lease, outcomes recorded.
    let (r, allocs) = allocations(|| (0..5).all(|_| call(&mut n).is_ok()));
    assert!(r);
    assert_eq!(allocs, 0);
    assert_eq!(budget.spent(), 10, "two retries per call from the lease");
    // Without a fresh view (no sync for 150 ms of the virtual clock, while almost no real
    // time passes): the local guards, still no allocation.
    time.advance(Duration::from_millis(150));
    assert_eq!(breaker.fleet_state(time.now()), None);
    let (r, allocs) = allocations(|| call(&mut n));
    assert!(r.is_ok());
    assert_eq!(allocs, 0);
    assert_eq!(budget.spent(), 10, "the fallback budget paid");
}

static STORE: LazyLock<MemoryStore> = LazyLock::new(MemoryStore::new);
static FLEET: LazyLock<Fleet> = LazyLock::new(|| Fleet::in_memory(&STORE, options()).unwrap());
static GUARDS: LazyLock<(SharedBreaker, SharedBudget)> = LazyLock::new(|| guards(&FLEET, "async"));

#[robust(retries = 1, backoff = none, breaker = GUARDS.0, budget = GUARDS.1)]
async fn fetch(calls: &AtomicU32) -> io::Result<u32> {
    let n = calls.fetch_add(1, Ordering::Relaxed);
    if n == 0 {
        Err(io::ErrorKind::ConnectionReset.into())
    } else {
        Ok(n)
    }
}

#[tokio::test]
async fn an_async_fn_and_a_tower_service_take_shared_guards() {
    LazyLock::force(&GUARDS);
    assert!(FLEET.wait_connected(Duration::from_secs(5)));
    // A first retry asked for (refused: no lease yet) makes the next sync lease tokens.
    assert!(!GUARDS.1.try_withdraw());
    let deadline = Instant::now() + Duration::from_secs(5);
    while GUARDS.1.lease() < 1.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let calls = AtomicU32::new(0);
    assert_eq!(fetch(&calls).await.unwrap(), 1);
    assert_eq!(GUARDS.1.spent(), 1);

    // A tower service behind the same breaker: two failures per request, until the breaker
    // opens (the local one after 10 attempts, or the fleet's after 20), then rejected with
    // `Open` without a call.
    let policy = Policy::builder()
        .retries(1)
        .backoff(NoBackoff)
        .breaker(&GUARDS.0)
        .build()
        .unwrap();
    static SENT: AtomicU32 = AtomicU32::new(0);
    let svc = tower::service_fn(|_: Request<String>| async {
        SENT.fetch_add(1, Ordering::Relaxed);
        Err::<Response<String>, io::Error>(io::ErrorKind::ConnectionRefused.into())
    });
    let mut client = RobustLayer::new(policy).layer(svc);
    let mut open = false;
    for _ in 0..200 {
        let e = client
            .ready()
            .await
            .unwrap()
            .call(Request::new(String::new()))
            .await
            .unwrap_err();
        if e.get_ref().is_some_and(|e| e.is::<Open>()) {
            open = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(open, "the breaker opened");
    let sent = SENT.load(Ordering::Relaxed);
    assert!((2..=40).contains(&sent), "{sent} attempts sent");
}
