//! Guards shared by a fleet on a real Redis (issue 14): each test starts its own
//! `redis-server` on a free loopback port; each client is a `Fleet` of its own (its own
//! connection and sync thread), as separate processes would be.
//!
//! Without `redis-server` on the PATH these tests pass after saying on stderr that they were
//! skipped and why; with `ROBUST_REQUIRE_REDIS=1` (CI) they fail instead.

#[path = "common/fleet_guards.rs"]
mod fleet_guards;
#[path = "../retry-runtime/src/guard/fleet/redis_server.rs"]
mod redis_server;
use fleet_guards::shared_guards;

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use redis_server::RedisServer;
use retry_runtime::guard::fleet::{Fleet, FleetOptions, FleetStatus, SharedBreaker, SharedBudget};
use retry_runtime::{BreakerState, CircuitBreaker, NoBackoff, Open, Policy, RetryBudget, robust};

/// The server, or `None` (after saying why on stderr, past the test harness's capture) when
/// `redis-server` is missing and `ROBUST_REQUIRE_REDIS` is not `1`.
fn server(test: &str) -> Option<RedisServer> {
    redis_server::for_test(&format!("redis_fleet::{test}"))
}

fn options() -> FleetOptions {
    FleetOptions::new()
        .interval(Duration::from_millis(50))
        .timeout(Duration::from_millis(200))
        .max_reconnect_delay(Duration::from_millis(200))
}

fn connect(s: &RedisServer, options: FleetOptions) -> Fleet {
    connect_url(&s.url(), options)
}

fn connect_url(url: &str, options: FleetOptions) -> Fleet {
    let f = Fleet::connect(url, options).expect("valid");
    assert!(
        f.wait_connected(Duration::from_secs(5)),
        "the fleet connects"
    );
    f
}

/// Waits until a round that began after this call has synced every guard of each fleet (a
/// guard follows the fleet from its first sync on).
fn synced<'a>(fleets: impl IntoIterator<Item = &'a Fleet>) {
    for f in fleets {
        assert!(f.wait_connected(Duration::from_secs(5)), "the guards sync");
    }
}

fn redis(s: &RedisServer) -> redis::Connection {
    redis::Client::open(s.url())
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap()
}

/// Polls `f` every 10 ms for at most `limit`; the time it took, or `None`.
fn within(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if f() {
            return Some(start.elapsed());
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A breaker named `name` for each fleet: locally 10 attempts at least before opening, at a
/// failure ratio of 0.5, with a break of `break_for`; for the fleet, `min_calls` in `window`.
fn breakers(
    fleets: &[Fleet],
    name: &str,
    break_for: Duration,
    window: Duration,
    min_calls: u32,
) -> Vec<SharedBreaker> {
    fleets
        .iter()
        .map(|f| {
            let local = CircuitBreaker::new(20, 10, 0.5, break_for, 1).unwrap();
            f.breaker(name, local, window, min_calls).unwrap()
        })
        .collect()
}

/// Whether every one of `breakers` sees the fleet's breaker in `state` now.
fn all_see(breakers: &[SharedBreaker], state: BreakerState) -> bool {
    breakers
        .iter()
        .all(|b| b.fleet_state(Instant::now()) == Some(state))
}

#[test]
fn many_quiet_clients_open_the_breaker_for_the_whole_fleet() {
    let Some(s) = server("many_quiet_clients_open_the_breaker_for_the_whole_fleet") else {
        return;
    };
    const CLIENTS: usize = 30;
    let fleets: Vec<Fleet> = (0..CLIENTS).map(|_| connect(&s, options())).collect();
    // For the fleet: 20 attempts in 5 s.
    let breakers = breakers(
        &fleets,
        "payments",
        Duration::from_secs(30),
        Duration::from_secs(5),
        20,
    );
    synced(&fleets);
    let runs = AtomicU32::new(0);
    let call = |b: &SharedBreaker| -> io::Result<()> {
        let p = Policy::builder().retries(0).breaker(b).build().unwrap();
        p.call(|_| {
            runs.fetch_add(1, Ordering::Relaxed);
            Err(io::ErrorKind::ConnectionRefused.into())
        })
    };
    // One failed call per client: each is far below its own minimum.
    let mut failed_at = Vec::new();
    for b in &breakers {
        assert_eq!(
            call(b).unwrap_err().kind(),
            io::ErrorKind::ConnectionRefused
        );
        failed_at.push(Instant::now());
        assert_eq!(b.local().state(), BreakerState::Closed);
    }
    // The 20th failure tips the ratio (20 attempts, all failed). The bound: every failure
    // is pushed within interval + timeout (one pipeline per round), and the open state read
    // by every client within interval + timeout more.
    let tipping = failed_at[19];
    let bound = 2 * (Duration::from_millis(50) + Duration::from_millis(200));
    within(Duration::from_secs(3), || {
        all_see(&breakers, BreakerState::Open)
    })
    .expect("every client sees the fleet's breaker open");
    // Measured from the tipping failure (`within` polls every 10 ms: slack for that).
    let took = tipping.elapsed();
    assert!(
        took <= bound + Duration::from_millis(100),
        "{took:?} > {bound:?}"
    );
    // Now every client fails fast without running its body.
    let before = runs.load(Ordering::Relaxed);
    for b in &breakers {
        let e = call(b).unwrap_err();
        assert!(e.get_ref().is_some_and(|e| e.is::<Open>()), "{e}");
    }
    assert_eq!(runs.load(Ordering::Relaxed), before);
    // The key holds the open state.
    let mut con = redis(&s);
    let state: Option<u8> = redis::cmd("HGET")
        .arg("robust:breaker:payments")
        .arg("state")
        .query(&mut con)
        .unwrap();
    assert_eq!(state, Some(1));
}

#[test]
fn one_probe_for_the_fleet_closes_its_breaker() {
    let Some(s) = server("one_probe_for_the_fleet_closes_its_breaker") else {
        return;
    };
    const CLIENTS: usize = 5;
    let fleets: Vec<Fleet> = (0..CLIENTS).map(|_| connect(&s, options())).collect();
    let breakers = breakers(
        &fleets,
        "probe",
        Duration::from_millis(300),
        Duration::from_secs(2),
        5,
    );
    synced(&fleets);
    // Each run of a call's body reads the fleet's state in Redis: a run while it is not
    // closed can only be a probe (nobody sees the breaker closed before Redis holds it).
    let state = Mutex::new(redis(&s));
    let probes = AtomicU32::new(0);
    let call = |b: &SharedBreaker, ok: bool| -> io::Result<()> {
        let p = Policy::builder().retries(0).breaker(b).build().unwrap();
        p.call(|_| {
            let fleet_state: Option<u8> = redis::cmd("HGET")
                .arg("robust:breaker:probe")
                .arg("state")
                .query(&mut *state.lock().unwrap())
                .unwrap();
            if fleet_state != Some(0) {
                probes.fetch_add(1, Ordering::Relaxed);
            }
            if ok {
                Ok(())
            } else {
                Err(io::ErrorKind::ConnectionRefused.into())
            }
        })
    };
    for b in &breakers {
        let _ = call(b, false);
    }
    within(Duration::from_secs(3), || {
        all_see(&breakers, BreakerState::Open)
    })
    .expect("open for all");
    // The dependency is back: every client keeps calling; after the break the fleet grants
    // one probe in all, whose success closes the breaker for everyone.
    probes.store(0, Ordering::Relaxed);
    let closed = within(Duration::from_secs(5), || {
        for b in &breakers {
            let _ = call(b, true);
        }
        all_see(&breakers, BreakerState::Closed)
    });
    closed.expect("the probe closes the fleet's breaker");
    assert_eq!(
        probes.load(Ordering::Relaxed),
        1,
        "one probe for the whole fleet"
    );
    for b in &breakers {
        assert!(call(b, true).is_ok());
    }
}

/// Instances that each call less often than the break still close the fleet's breaker: a
/// probe granted to one that has not called again when its half-open round restarts is
/// granted to it again, beside the new round's own, so its next call probes. Before, each
/// restart voided the probe (or gave it to another quiet instance, with the same fate) and the
/// breaker never closed.
#[test]
fn quiet_instances_close_the_fleet_s_breaker() {
    let Some(s) = server("quiet_instances_close_the_fleet_s_breaker") else {
        return;
    };
    const CLIENTS: usize = 3;
    let fleets: Vec<Fleet> = (0..CLIENTS).map(|_| connect(&s, options())).collect();
    // A 300 ms break: at least the sync interval plus the round's timeout (250 ms).
    let breakers = breakers(
        &fleets,
        "quiet",
        Duration::from_millis(300),
        Duration::from_secs(2),
        3,
    );
    synced(&fleets);
    let call = |b: &SharedBreaker, ok: bool| -> io::Result<()> {
        let p = Policy::builder().retries(0).breaker(b).build().unwrap();
        p.call(|_| {
            if ok {
                Ok(())
            } else {
                Err(io::ErrorKind::ConnectionRefused.into())
            }
        })
    };
    for b in &breakers {
        let _ = call(b, false);
    }
    within(Duration::from_secs(3), || {
        all_see(&breakers, BreakerState::Open)
    })
    .expect("open for all");
    // The dependency is back. Each instance calls once every 510 ms (one of them every
    // 170 ms), longer than the break; at most 8 s.
    let start = Instant::now();
    let mut closed = false;
    'calls: for _ in 0..16 {
        for b in &breakers {
            let _ = call(b, true);
            if all_see(&breakers, BreakerState::Closed) {
                closed = true;
                break 'calls;
            }
            std::thread::sleep(Duration::from_millis(170));
        }
    }
    assert!(closed, "still not closed after {:?}", start.elapsed());
}

/// A breaker's key deleted while the fleet's breaker is half-open (as an eviction or a
/// failover that missed it would lose it) comes back half-open, not closed: the next
/// instance remakes it open for 1 ms, and the round after makes it half-open. So does a key
/// lost with a restart of Redis without persistence (the rounds fail first: the instances'
/// local breakers, open with the fleet's, say the dependency has not answered since). No
/// instance sees it closed before a probe answers.
#[test]
fn a_key_deleted_while_half_open_comes_back_half_open() {
    let Some(mut s) = server("a_key_deleted_while_half_open_comes_back_half_open") else {
        return;
    };
    const CLIENTS: usize = 3;
    let fleets: Vec<Fleet> = (0..CLIENTS).map(|_| connect(&s, options())).collect();
    let breakers = breakers(
        &fleets,
        "lost",
        Duration::from_millis(300),
        Duration::from_secs(2),
        3,
    );
    synced(&fleets);
    for b in &breakers {
        let p = Policy::builder().retries(0).breaker(b).build().unwrap();
        let _ = p.call(|_| -> io::Result<()> { Err(io::ErrorKind::ConnectionRefused.into()) });
    }
    // After the break, with no call asking for a probe, the fleet's breaker stays half-open.
    within(Duration::from_secs(3), || {
        all_see(&breakers, BreakerState::HalfOpen)
    })
    .expect("half-open for all");
    // Waits until the key is remade and half-open again for every instance, within `limit`
    // (rounds are 50 ms apart), checking that nobody sees it closed meanwhile and that the
    // key never holds `state 0`.
    let comes_back_half_open = |s: &RedisServer, limit: Duration, when: &str| {
        let mut con = redis(s);
        let mut seen = Vec::new();
        let back = within(limit, || {
            let now: Option<u8> = redis::cmd("HGET")
                .arg("robust:breaker:lost")
                .arg("state")
                .query(&mut con)
                .unwrap();
            if seen.last() != Some(&now) {
                seen.push(now);
            }
            assert!(
                !breakers
                    .iter()
                    .any(|b| b.fleet_state(Instant::now()) == Some(BreakerState::Closed))
            );
            now == Some(2) && all_see(&breakers, BreakerState::HalfOpen)
        });
        assert!(back.is_some(), "{when}, the key's states: {seen:?}");
        assert!(
            !seen.contains(&Some(0)),
            "{when}, the key's states: {seen:?}"
        );
    };
    let () = redis::cmd("DEL")
        .arg("robust:breaker:lost")
        .query(&mut redis(&s))
        .unwrap();
    comes_back_half_open(&s, Duration::from_secs(2), "after the DEL");
    // Redis killed and restarted empty: every instance falls back, then rejoins.
    s.kill();
    within(Duration::from_secs(5), || {
        fleets.iter().all(|f| f.status() == FleetStatus::Fallback)
    })
    .expect("the fleet falls back");
    s.restart().unwrap();
    comes_back_half_open(&s, Duration::from_secs(5), "after the restart");
}

#[test]
fn calls_in_one_instance_earn_retries_for_another() {
    let Some(s) = server("calls_in_one_instance_earn_retries_for_another") else {
        return;
    };
    let (a, b) = (connect(&s, options()), connect(&s, options()));
    let budget = |f: &Fleet| {
        let fleet = RetryBudget::new(2.0, 0.5, 1.0).unwrap();
        let fallback = RetryBudget::new(1.0, 0.0, 1.0).unwrap();
        f.budget("earn", fleet, fallback).unwrap()
    };
    let (earner, spender) = (budget(&a), budget(&b));
    synced([&a, &b]);
    let spend_all = |n: &mut u32| {
        within(Duration::from_secs(2), || {
            *n += u32::from(spender.try_withdraw());
            spender.fleet_tokens() == Some(0.0) && spender.lease() == 0.0
        })
    };
    let mut made = 0;
    spend_all(&mut made).expect("the bucket is emptied");
    // The earner never asked for a retry: it leased nothing, the spender had both tokens.
    assert_eq!(made, 2);
    assert_eq!(earner.lease(), 0.0);
    // Four calls in the earner: 4 × 0.5 = 2 tokens for the fleet.
    for _ in 0..4 {
        earner.deposit();
    }
    let mut more = 0;
    within(Duration::from_secs(2), || {
        more += u32::from(spender.try_withdraw());
        more == 2
    })
    .expect("the spender retries with what the earner's calls earned");
}

/// A lease is a whole number of retries: half a token earned stays in the bucket (where the
/// next half completes it) instead of going to a lease that could pay for nothing.
#[test]
fn a_lease_holds_whole_retries() {
    let Some(s) = server("a_lease_holds_whole_retries") else {
        return;
    };
    let (a, b) = (connect(&s, options()), connect(&s, options()));
    let budget = |f: &Fleet| {
        let fleet = RetryBudget::new(1.0, 0.5, 1.0).unwrap();
        let fallback = RetryBudget::new(1.0, 0.0, 1.0).unwrap();
        f.budget("whole", fleet, fallback).unwrap()
    };
    let (earner, spender) = (budget(&a), budget(&b));
    synced([&a, &b]);
    within(Duration::from_secs(2), || {
        spender.try_withdraw();
        spender.fleet_tokens() == Some(0.0) && spender.lease() == 0.0
    })
    .expect("the bucket is emptied");
    // Half a token: asked for by the spender, kept in the bucket.
    earner.deposit();
    within(Duration::from_secs(2), || {
        assert!(!spender.try_withdraw(), "no retry paid by half a token");
        spender.fleet_tokens() == Some(0.5)
    })
    .expect("the half token reaches the bucket");
    synced([&a, &b]);
    assert_eq!(spender.lease(), 0.0);
    // The other half: a whole retry.
    earner.deposit();
    within(Duration::from_secs(2), || spender.try_withdraw()).expect("one retry");
}

#[test]
fn budget_tokens_are_conserved_across_clients() {
    let Some(s) = server("budget_tokens_are_conserved_across_clients") else {
        return;
    };
    const CLIENTS: usize = 10;
    const CAPACITY: f64 = 20.0;
    let fleets: Vec<Fleet> = (0..CLIENTS).map(|_| connect(&s, options())).collect();
    let budgets: Vec<SharedBudget> = fleets
        .iter()
        .map(|f| {
            // One token earned per call: whole tokens, none stranded in a lease as a fraction.
            let fleet = RetryBudget::new(CAPACITY, 1.0, 1.0).unwrap();
            let fallback = RetryBudget::new(1.0, 0.0, 1.0).unwrap();
            let b = f.budget("search", fleet, fallback).unwrap();
            b.set_lease(2);
            b
        })
        .collect();
    synced(&fleets);
    let made = AtomicU32::new(0);
    // Every client tries a retry every 4 ms, `tries` times, all at once; each also makes
    // `calls` calls, one every 50 tries (earnings credited to the bucket across syncs).
    let run = |tries: u32, calls: u32| {
        std::thread::scope(|scope| {
            for b in &budgets {
                let made = &made;
                scope.spawn(move || {
                    for i in 0..tries {
                        if i % 50 == 0 && i / 50 < calls {
                            b.deposit();
                        }
                        if retry_runtime::guard::Budget::try_withdraw(&b) {
                            made.fetch_add(1, Ordering::Relaxed);
                        }
                        std::thread::sleep(Duration::from_millis(4));
                    }
                });
            }
        });
    };
    let mut con = redis(&s);
    // Tokens in Redis + in the leases + spent = the capacity plus the earnings credited,
    // exactly, once no round is in flight (the cap clipped nothing: the bucket was empty
    // before any call earned a token).
    let mut conserved = |total: f64| {
        within(Duration::from_secs(2), || {
            let in_redis: u64 = redis::cmd("HGET")
                .arg("robust:budget:search")
                .arg("tokens")
                .query(&mut con)
                .unwrap();
            let leased: f64 = budgets.iter().map(SharedBudget::lease).sum();
            let spent: u64 = budgets.iter().map(SharedBudget::spent).sum();
            in_redis as f64 / 1000.0 + leased + spent as f64 == total
        })
        .is_some()
    };
    // 10 clients × 150 tries against 20 tokens (more tries, for at most 10 s, should the
    // leases lag behind these 0.6 s).
    run(150, 0);
    for _ in 0..40 {
        if made.load(Ordering::Relaxed) >= 20 {
            break;
        }
        run(60, 0);
    }
    assert_eq!(
        made.load(Ordering::Relaxed),
        20,
        "twenty tokens for the whole fleet: twenty retries"
    );
    assert!(conserved(CAPACITY));
    // Then 2 calls per client earn 20 tokens, spent by everyone while they are credited
    // (and, should the syncs lag behind these 1.2 s, by more tries, for at most 10 s: the
    // count must reach forty, and never pass it).
    run(300, 2);
    for _ in 0..40 {
        if made.load(Ordering::Relaxed) >= 40 {
            break;
        }
        run(60, 0);
    }
    let made = made.load(Ordering::Relaxed);
    assert_eq!(made, 40, "twenty tokens, and twenty earned: forty retries");
    let spent: u64 = budgets.iter().map(SharedBudget::spent).sum();
    assert_eq!(spent, u64::from(made), "all paid from leases");
    assert!(fleets.iter().all(|f| f.fallbacks() == 0));
    assert!(conserved(CAPACITY + 20.0));
}

/// WARN events of the `retry_runtime` target, captured from every thread (tests run in
/// parallel: each test gives its fleet a namespace of its own, and looks only at the events
/// of that namespace).
fn events() -> &'static Mutex<Vec<Event>> {
    static EVENTS: OnceLock<Arc<Mutex<Vec<Event>>>> = OnceLock::new();
    EVENTS.get_or_init(|| {
        let events = Arc::new(Mutex::new(Vec::new()));
        let _ = tracing::subscriber::set_global_default(Capture(Arc::clone(&events)));
        events
    })
}

#[derive(Debug, Default)]
struct Event {
    namespace: String,
    key: String,
    message: String,
}

struct Capture(Arc<Mutex<Vec<Event>>>);

impl tracing::field::Visit for Event {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let v = format!("{value:?}");
        match field.name() {
            "message" => self.message = v,
            "namespace" => self.namespace = v,
            "key" => self.key = v,
            _ => {}
        }
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        m.target() == "retry_runtime" && *m.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        let mut ev = Event::default();
        e.record(&mut ev);
        self.0.lock().unwrap().push(ev);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// How many events of `namespace` (and `key`, if not empty) say `needle`.
fn seen(namespace: &str, key: &str, needle: &str) -> usize {
    events()
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.namespace == namespace && (key.is_empty() || e.key == key))
        .filter(|e| e.message.contains(needle))
        .count()
}

/// A call that waited for Redis would take at least the command timeout, 1 s in the two tests
/// below; half of it leaves a descheduled thread on 2 busy shared cores room without
/// blurring the difference.
const NEVER_WAITS: Duration = Duration::from_millis(500);

fn slow_options(namespace: &str) -> FleetOptions {
    options()
        .namespace(namespace)
        .timeout(Duration::from_secs(1))
}

/// [`shared_guards`] opening locally at 50%.
fn breaker_and_budget(fleet: &Fleet, name: &str) -> (SharedBreaker, SharedBudget) {
    shared_guards(fleet, name, 0.5)
}

#[test]
fn redis_killed_and_restarted_mid_run() {
    let Some(mut s) = server("redis_killed_and_restarted_mid_run") else {
        return;
    };
    events();
    let fleet = connect(&s, slow_options("killed"));
    let (breaker, budget) = breaker_and_budget(&fleet, "inventory");
    let policy = Policy::builder()
        .retries(1)
        .backoff(NoBackoff)
        .breaker(&breaker)
        .budget(&budget)
        .build()
        .unwrap();
    // Calls succeed at once, whatever Redis does: no call waits on it.
    let slowest = Cell::new(Duration::ZERO);
    let calls = Cell::new(0u32);
    let run = |until: &mut dyn FnMut() -> bool| {
        within(Duration::from_secs(10), || {
            let t = Instant::now();
            let r: io::Result<u32> = policy.call(|_| Ok(7));
            slowest.set(slowest.get().max(t.elapsed()));
            calls.set(calls.get() + 1);
            assert_eq!(r.unwrap(), 7);
            until()
        })
    };
    run(&mut || calls.get() > 20).unwrap();
    assert_eq!(fleet.status(), FleetStatus::Connected);
    s.kill();
    run(&mut || fleet.status() == FleetStatus::Fallback).expect("the fleet falls back");
    // Past the staleness bound the guards decide locally.
    run(&mut || breaker.fleet_state(Instant::now()).is_none()).unwrap();
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(seen("killed", "", "fall back to their local state"), 1);
    s.restart().unwrap();
    run(&mut || fleet.status() == FleetStatus::Connected).expect("the fleet rejoins");
    assert_eq!(seen("killed", "", "rejoin the fleet"), 1);
    assert_eq!(fleet.fallbacks(), 1);
    assert_eq!(
        breaker.fleet_state(Instant::now()),
        Some(BreakerState::Closed)
    );
    let (slowest, calls) = (slowest.get(), calls.get());
    assert!(
        slowest < NEVER_WAITS,
        "the slowest of {calls} calls took {slowest:?} (the Redis timeout is 1 s)"
    );
    // The restarted server has the keys again.
    let mut con = redis(&s);
    let exists: u32 = redis::cmd("EXISTS")
        .arg("killed:breaker:inventory")
        .arg("killed:budget:inventory")
        .query(&mut con)
        .unwrap();
    assert_eq!(exists, 2);
}

#[test]
fn a_slow_redis_is_not_waited_for() {
    let Some(s) = server("a_slow_redis_is_not_waited_for") else {
        return;
    };
    events();
    let fleet = connect(&s, slow_options("slow"));
    let (breaker, budget) = breaker_and_budget(&fleet, "slow");
    let policy = Policy::builder()
        .retries(1)
        .backoff(NoBackoff)
        .breaker(&breaker)
        .budget(&budget)
        .build()
        .unwrap();
    synced([&fleet]);
    // Redis stops answering: the sync thread waits for its 1 s timeout, the calls do not.
    s.freeze(true).unwrap();
    let mut slowest = Duration::ZERO;
    let fell_back = within(Duration::from_secs(5), || {
        let t = Instant::now();
        let failing = std::cell::Cell::new(true);
        let r: io::Result<()> = policy.call(|_| {
            if failing.replace(false) {
                Err(io::ErrorKind::ConnectionReset.into())
            } else {
                Ok(())
            }
        });
        slowest = slowest.max(t.elapsed());
        // The retry is made if the lease (or, once fallen back, the fallback budget) pays.
        let _ = r;
        fleet.status() == FleetStatus::Fallback && breaker.fleet_state(Instant::now()).is_none()
    });
    fell_back.expect("the fleet falls back");
    assert!(
        slowest < NEVER_WAITS,
        "a call took {slowest:?} (the Redis timeout is 1 s)"
    );
    assert_eq!(seen("slow", "", "fall back to their local state"), 1);
    s.freeze(false).unwrap();
    within(Duration::from_secs(5), || {
        fleet.status() == FleetStatus::Connected
    })
    .expect("the fleet rejoins");
    assert_eq!(fleet.fallbacks(), 1);
}

/// A frozen Redis (it accepts, and answers nothing) fails the round at the first reply that
/// does not come within the timeout, however many keys the round holds: the fleet falls back
/// within about `interval + timeout`. (redis-rs's pipeline would wait the timeout again for
/// each reply still due: 60 keys at 200 ms, twelve seconds.)
#[test]
fn a_frozen_redis_is_found_within_one_timeout_whatever_the_keys() {
    let Some(s) = server("a_frozen_redis_is_found_within_one_timeout_whatever_the_keys") else {
        return;
    };
    let fleet = connect(&s, options().namespace("frozen"));
    let guards: Vec<_> = (0..30)
        .map(|i| breaker_and_budget(&fleet, &format!("key{i}")))
        .collect();
    synced([&fleet]);
    s.freeze(true).unwrap();
    // interval 50 ms + timeout 200 ms, and the round in progress when Redis froze.
    let took = within(Duration::from_secs(5), || {
        fleet.status() == FleetStatus::Fallback
    });
    s.freeze(false).unwrap();
    let took = took.expect("the fleet falls back");
    assert!(
        took < Duration::from_millis(1500),
        "fell back after {took:?}"
    );
    within(Duration::from_secs(5), || {
        fleet.status() == FleetStatus::Connected
    })
    .expect("the fleet rejoins");
    assert!(
        guards
            .iter()
            .all(|(b, _)| b.fleet_state(Instant::now()).is_some())
    );
}

/// A RESP3 push message sent to the fleet's connection (here a client-tracking invalidation,
/// redirected to it by another client) answers no command: it is skipped, and each key keeps
/// its own reply. (Counted as a reply, it shifted every later reply onto the next key, a
/// breaker's onto a budget, round after round.)
#[test]
fn a_push_message_does_not_shift_the_replies() {
    let Some(s) = server("a_push_message_does_not_shift_the_replies") else {
        return;
    };
    let url = format!("{}?protocol=resp3", s.url());
    let fleet = connect_url(&url, options().namespace("resp3"));
    let (breaker, budget) = breaker_and_budget(&fleet, "k");
    synced([&fleet]);
    let tokens = budget.fleet_tokens().expect("synced");
    let mut con = redis(&s);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    let id = list
        .lines()
        .find(|l| l.contains("cmd=evalsha"))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .expect("the fleet's connection")
        .to_owned();
    let () = redis::cmd("CLIENT")
        .arg(&["TRACKING", "ON", "REDIRECT", id.as_str(), "BCAST"][..])
        .query(&mut con)
        .unwrap();
    let () = redis::cmd("SET")
        .arg("unrelated")
        .arg(1)
        .query(&mut con)
        .unwrap();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(budget.fleet_tokens(), Some(tokens));
        assert!(breaker.fleet_state(Instant::now()).is_some());
        assert_eq!(fleet.status(), FleetStatus::Connected);
    }
}

#[test]
fn keys_expire() {
    let Some(s) = server("keys_expire") else {
        return;
    };
    let fleet = connect(&s, options().ttl(Duration::from_millis(1200)));
    let local = CircuitBreaker::new(4, 2, 0.5, Duration::from_millis(500), 1).unwrap();
    let breaker = fleet
        .breaker("ledger", local, Duration::from_millis(500), 4)
        .unwrap();
    let budget = fleet
        .budget(
            "ledger",
            RetryBudget::new(10.0, 0.1, 1.0).unwrap(),
            RetryBudget::new(1.0, 0.1, 1.0).unwrap(),
        )
        .unwrap();
    assert_eq!(breaker.key(), "robust:breaker:ledger");
    assert_eq!(budget.key(), "robust:budget:ledger");
    let mut con = redis(&s);
    within(Duration::from_secs(2), || {
        redis::cmd("EXISTS")
            .arg(breaker.key())
            .arg(budget.key())
            .query::<u32>(&mut con)
            .unwrap()
            == 2
    })
    .expect("the keys are written");
    for key in [breaker.key(), budget.key()] {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query(&mut con).unwrap();
        assert!(ttl > 0 && ttl <= 1200, "{key}: PTTL {ttl}");
    }
    // The layout of the breaker's hash.
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(breaker.key())
        .query(&mut con)
        .unwrap();
    for f in ["state", "until", "round", "left", "e0", "a9", "f5"] {
        assert!(fields.iter().any(|x| x == f), "{f} in {fields:?}");
    }
    // Nobody syncs any more: both keys are gone once their TTL has passed.
    drop((breaker, budget, fleet));
    let gone = within(Duration::from_secs(3), || {
        redis::cmd("EXISTS")
            .arg("robust:breaker:ledger")
            .arg("robust:budget:ledger")
            .query::<u32>(&mut con)
            .unwrap()
            == 0
    });
    let gone = gone.expect("the keys expire");
    assert!(gone >= Duration::from_millis(900), "{gone:?}");
}

/// The attribute takes shared guards in its `breaker =` and `budget =` keys.
static SHARED: OnceLock<(Fleet, SharedBreaker, SharedBudget)> = OnceLock::new();

/// The shared guards, by reference (a handle taken by value from an expression could be one
/// made by the call: the attribute refuses it).
fn shared_breaker() -> &'static SharedBreaker {
    &SHARED.get().expect("set").1
}
fn shared_budget() -> &'static SharedBudget {
    &SHARED.get().expect("set").2
}

#[robust(retries = 2, backoff = none, breaker = shared_breaker(), budget = shared_budget())]
fn flaky(calls: &AtomicU32) -> io::Result<u32> {
    let n = calls.fetch_add(1, Ordering::Relaxed);
    if n == 0 {
        Err(io::ErrorKind::ConnectionReset.into())
    } else {
        Ok(n)
    }
}

#[test]
fn the_attribute_takes_shared_guards() {
    let Some(s) = server("the_attribute_takes_shared_guards") else {
        return;
    };
    let fleet = connect(&s, options());
    let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap();
    let breaker = fleet
        .breaker("attr", local, Duration::from_secs(5), 20)
        .unwrap();
    let budget = fleet
        .budget(
            "attr",
            RetryBudget::new(10.0, 0.1, 1.0).unwrap(),
            RetryBudget::new(1.0, 0.1, 1.0).unwrap(),
        )
        .unwrap();
    SHARED.set((fleet, breaker, budget)).ok().unwrap();
    let (fleet, _, budget) = SHARED.get().unwrap();
    synced([fleet]);
    // A first retry asked for (refused: no lease yet), then the lease it brings.
    assert!(!budget.try_withdraw());
    within(Duration::from_secs(2), || budget.lease() >= 1.0).expect("a lease");
    let calls = AtomicU32::new(0);
    assert_eq!(flaky(&calls).unwrap(), 1);
    assert_eq!(
        budget.spent(),
        1,
        "the retry was paid from the fleet's lease"
    );
    assert_eq!(fleet.status(), FleetStatus::Connected);
}

#[test]
fn a_port_taken_by_another_server_is_not_taken_for_ours() {
    let Some(s) = server("a_port_taken_by_another_server_is_not_taken_for_ours") else {
        return;
    };
    // `s` answers PING on its port, but it is not the server a second start there would
    // spawn: that start fails instead of handing out `s` (`start` then tries another port).
    let e = RedisServer::on_port(s.port()).unwrap_err();
    assert!(e.to_string().contains(&s.port().to_string()), "{e}");
}

#[test]
fn a_key_of_the_wrong_type_fails_alone() {
    let Some(s) = server("a_key_of_the_wrong_type_fails_alone") else {
        return;
    };
    events();
    let mut con = redis(&s);
    redis::cmd("SET")
        .arg("wrongtype:breaker:bad")
        .arg("not a hash")
        .exec(&mut con)
        .unwrap();
    let fleet = connect(&s, options().namespace("wrongtype"));
    // No guard yet: the rounds still check that Redis answers, and do not fail.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(fleet.fallbacks(), 0);
    let local = || CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap();
    let good = fleet
        .breaker("good", local(), Duration::from_secs(5), 20)
        .unwrap();
    let bad = fleet
        .breaker("bad", local(), Duration::from_secs(5), 20)
        .unwrap();
    synced([&fleet]);
    std::thread::sleep(Duration::from_millis(200));
    // WRONGTYPE on one key: its guard decides locally, the other follows the fleet.
    assert_eq!(good.fleet_state(Instant::now()), Some(BreakerState::Closed));
    assert_eq!(bad.fleet_state(Instant::now()), None);
    assert_eq!(fleet.status(), FleetStatus::Connected);
    assert_eq!(fleet.fallbacks(), 0);
    assert_eq!(
        seen("wrongtype", "wrongtype:breaker:bad", "this key fails"),
        1,
        "one event per change"
    );
    assert_eq!(seen("wrongtype", "wrongtype:breaker:good", "fails"), 0);
    redis::cmd("DEL")
        .arg("wrongtype:breaker:bad")
        .exec(&mut con)
        .unwrap();
    within(Duration::from_secs(2), || {
        bad.fleet_state(Instant::now()).is_some()
    })
    .expect("the key works again");
    assert_eq!(
        seen("wrongtype", "wrongtype:breaker:bad", "answers again"),
        1
    );
}

/// A server that refuses every key's script whatever the key (here a replica: a failover
/// that left the connection on the demoted node) fails the round: the fleet falls back, says
/// so, and reconnects; once the server takes writes again it rejoins. (Before, each key
/// failed alone and the fleet reported itself connected, on the same connection.)
#[test]
fn a_server_that_refuses_every_key_fails_the_round() {
    let Some(s) = server("a_server_that_refuses_every_key_fails_the_round") else {
        return;
    };
    let mut con = redis(&s);
    let fleet = connect(&s, options().namespace("readonly"));
    let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap();
    let b = fleet
        .breaker("dep", local, Duration::from_secs(5), 20)
        .unwrap();
    synced([&fleet]);
    within(Duration::from_secs(2), || {
        b.fleet_state(Instant::now()).is_some()
    })
    .expect("the guard follows the fleet");
    assert_eq!(fleet.fallbacks(), 0);
    // A replica of a primary that is not there (a refused port on loopback): read-only.
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(1)
        .exec(&mut con)
        .unwrap();
    within(Duration::from_secs(3), || {
        fleet.status() != FleetStatus::Connected
            && fleet.fallbacks() >= 1
            && b.fleet_state(Instant::now()).is_none()
    })
    .expect("the round fails and the guard decides locally");
    redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .exec(&mut con)
        .unwrap();
    within(Duration::from_secs(3), || {
        fleet.status() == FleetStatus::Connected && b.fleet_state(Instant::now()).is_some()
    })
    .expect("it rejoins once the server takes writes");
}

/// A breaker's hash holding a state this version does not know (written by hand, or by
/// another version) makes its guard decide locally, instead of rejecting every call.
#[test]
fn an_unknown_state_in_redis_falls_back_to_the_local_breaker() {
    let Some(s) = server("an_unknown_state_in_redis_falls_back_to_the_local_breaker") else {
        return;
    };
    let mut con = redis(&s);
    redis::cmd("HSET")
        .arg("unknown:breaker:dep")
        .arg("state")
        .arg(7)
        .exec(&mut con)
        .unwrap();
    let fleet = connect(&s, options().namespace("unknown"));
    let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap();
    let b = fleet
        .breaker("dep", local, Duration::from_secs(5), 20)
        .unwrap();
    synced([&fleet]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(b.fleet_state(Instant::now()), None, "decided locally");
    assert!(
        b.acquire(Instant::now()).is_some(),
        "the local breaker admits"
    );
}

#[test]
fn scripts_flushed_from_redis_are_loaded_again() {
    let Some(s) = server("scripts_flushed_from_redis_are_loaded_again") else {
        return;
    };
    let fleet = connect(&s, options().namespace("flush"));
    let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap();
    let b = fleet
        .breaker("dep", local, Duration::from_secs(5), 20)
        .unwrap();
    synced([&fleet]);
    let mut con = redis(&s);
    redis::cmd("SCRIPT").arg("FLUSH").exec(&mut con).unwrap();
    // The next round meets NOSCRIPT, loads the scripts and sends the round again.
    let now = Instant::now();
    let p = b.acquire(now).unwrap();
    b.record_permit(now, p, false);
    within(Duration::from_secs(2), || b.fleet_counts() == (1, 1)).expect("pushed");
    assert_eq!(fleet.fallbacks(), 0);
    assert_eq!(b.fleet_state(Instant::now()), Some(BreakerState::Closed));
}

/// A loopback proxy to `port` that, while `slow` is set, passes the server's replies on one
/// byte every 5 ms: every read gets a byte well within the timeout, a round takes long.
struct SlowProxy {
    port: u16,
    slow: Arc<std::sync::atomic::AtomicBool>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl SlowProxy {
    fn start(target: u16) -> SlowProxy {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::sync::atomic::AtomicBool;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let slow = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (slow2, stop2) = (Arc::clone(&slow), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = io::copy(&mut c_in, &mut s_out);
                    let _ = s_out.shutdown(Shutdown::Both);
                });
                let (mut s_in, mut c_out, slow) = (server, client, Arc::clone(&slow2));
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = s_in.read(&mut buf) {
                        let sent = if slow.load(Ordering::Relaxed) {
                            buf[..n].iter().all(|b| {
                                std::thread::sleep(Duration::from_millis(5));
                                c_out.write_all(&[*b]).is_ok()
                            })
                        } else {
                            c_out.write_all(&buf[..n]).is_ok()
                        };
                        if !sent {
                            break;
                        }
                    }
                    let _ = c_out.shutdown(Shutdown::Both);
                });
            }
        });
        SlowProxy { port, slow, stop }
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_round_longer_than_stale_after_falls_back() {
    let Some(s) = server("a_round_longer_than_stale_after_falls_back") else {
        return;
    };
    events();
    let proxy = SlowProxy::start(s.port());
    // Each read waits 5 ms (timeout 80 ms), but a round's reply (a few dozen bytes) takes
    // longer than stale_after (100 ms, the least for a 20 ms interval and that timeout) to
    // arrive: its answers are too old to follow.
    let o = FleetOptions::new()
        .namespace("overrun")
        .interval(Duration::from_millis(20))
        .timeout(Duration::from_millis(80))
        .stale_after(Duration::from_millis(100))
        .max_reconnect_delay(Duration::from_millis(100));
    let fleet = Fleet::connect(&format!("redis://127.0.0.1:{}/", proxy.port), o).unwrap();
    let local = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).unwrap();
    let b = fleet
        .breaker("dep", local, Duration::from_secs(5), 20)
        .unwrap();
    synced([&fleet]);
    proxy.slow.store(true, Ordering::Relaxed);
    within(Duration::from_secs(5), || {
        fleet.status() == FleetStatus::Fallback
    })
    .expect("the fleet falls back");
    assert_eq!(b.fleet_state(Instant::now()), None);
    assert_eq!(fleet.fallbacks(), 1);
    assert_eq!(seen("overrun", "", "too slow"), 1);
    proxy.slow.store(false, Ordering::Relaxed);
    within(Duration::from_secs(5), || {
        fleet.status() == FleetStatus::Connected && b.fleet_state(Instant::now()).is_some()
    })
    .expect("the fleet rejoins");
}
