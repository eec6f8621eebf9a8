//! A `tower::Layer` from a built policy (feature `tower`, SPEC section 17).
//!
//! [`RobustLayer::new(policy)`](RobustLayer::new) wraps a service so that each request runs
//! under the policy: the service is called once per attempt, each with its own copy of the
//! request (the first with the request itself when it is sent from `call`, below); its
//! errors and its `Ok` responses are classified by the policy's rules (an
//! [`OkIf`](crate::kind::OkIf) rule retries a 503 response), with the policy's timeout,
//! deadline, hints, budget, breaker, callbacks and fallback. A policy that hedges (SPEC
//! section 15) goes through [`RobustLayer::hedged`].
//!
//! ```
//! use std::time::Duration;
//! use http::{Request, Response, StatusCode};
//! use retry_runtime::kind::{NoError, OkIf};
//! use retry_runtime::tower::RobustLayer;
//! use retry_runtime::{Constant, NoJitter, Policy};
//! use tower::ServiceExt;
//! use tower_layer::Layer;
//! use tower_service::Service;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let policy = Policy::builder()
//!     .timeout(Duration::from_secs(2))
//!     .retries(3)
//!     .backoff(Constant::new(Duration::from_millis(100)))
//!     .jitter(NoJitter)
//!     .on_ok(OkIf(|r: &Response<String>| r.status() == StatusCode::SERVICE_UNAVAILABLE))
//!     .build()?;
//!
//! // A service that is unavailable twice, then answers.
//! let mut calls = 0;
//! let flaky = tower::service_fn(move |_req: Request<String>| {
//!     calls += 1;
//!     let status = if calls < 3 { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
//!     async move { Ok::<_, std::io::Error>(Response::builder().status(status).body(String::new()).unwrap()) }
//! });
//!
//! let mut client = RobustLayer::new(policy).layer(flaky);
//! // `ready()` first, as tower's contract asks of every caller.
//! let response = client.ready().await?.call(Request::new("ping".to_owned())).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! # Ok(()) }
//! ```
//!
//! The layer's timers and backoffs run on tokio's clock (with the default environment): call
//! it inside a tokio runtime whose time driver is enabled (`#[tokio::main]`, or
//! `Builder::enable_time`); without one, the first timer it makes panics, as tokio's own
//! `sleep` does. A delay read from a response (an [`OkIf::hint`](crate::kind::OkIf::hint) on
//! `Retry-After`) is waited whatever its length unless a `max_delay` or a deadline bounds it:
//! give the policy one when the server's number is not to be trusted.
//!
//! # Errors and timeouts
//!
//! With a timeout (or a deadline) the service's error type needs `From<Elapsed>`. When it has
//! none, rustc reports that `oneshot` or `ready` "exists but its trait bounds were not
//! satisfied": map the error first (`ServiceBuilder::new().layer(RobustLayer::new(policy))
//! .map_err(BoxError::from).service(client)`, a boxed error has `From<Elapsed>`). The same
//! words come for a request whose body has no [`RetryBody`] (see above), for an `OkIf`
//! closure over another response type than the service's, and for a wrapped service that is
//! not `Clone` (tower's `RateLimit` and `BoxService` are not: put a `Buffer` between, or use
//! `BoxCloneService`); calling the service once as
//! `tower::Service::call(&mut service, request)` makes rustc name the missing bound. tower's
//! own `timeout` under the layer fails an attempt with `tower::timeout::error::Elapsed`,
//! which the [`Timeout`](crate::kind::Timeout) kind matches as it matches this crate's
//! `Elapsed`. The attempt
//! ends with the response head: a body read later by the caller is outside it. An error from
//! the service's `poll_ready` is the call's error and is not retried (tower's contract: such a
//! service is to be dropped). No request was sent, so it is no attempt: the breaker and the
//! throttle do not count it and no callback sees it (a fallback still answers it, when the
//! response future met it); under
//! [`RobustLayer::hedged`] it ends the call at once, whichever attempt met it (a timeout or
//! hedge due in the same wake is not acted on), and the round's other attempts are dropped as
//! a dropped call's are (their permits given back, a failure the round
//! kept recorded). The attempt's timeout covers a retry's wait for the service to be ready (and
//! a first attempt's that waited for a slot of the concurrency limit): a service not ready in
//! time makes a timed-out attempt (counted and retried as one). A retry's rule's `max_delay`
//! bounds that wait too: a retry is made only if it can start before its `max_delay` is spent,
//! and it starts when its service is ready, so a retry whose service is not ready by then is
//! not sent, and the call returns the failure the retry follows (as when a backoff would end
//! past the `max_delay`); a retry sent in time keeps its attempt's own timeout. (Under
//! [`RobustLayer::hedged`], a retry's round none of whose attempts was sent, or ended, by
//! then is not made; once made, it sends its hedges whenever their service is ready.) The
//! first attempt's readiness
//! is the caller's, as with any tower layer: `ready()` (or `oneshot`) polls the layer's
//! `poll_ready`, which polls the service's, before `call` and outside any timer, guard or
//! fallback (an error there is returned by `poll_ready` itself). Bound that wait above the
//! layer (`tower::timeout::TimeoutLayer` outside it, or `tokio::time::timeout` around
//! `ready()`). (Under [`RobustLayer::hedged`] with a concurrency limit, the service made ready
//! by the caller is dropped at `call` and the first attempt makes a clone ready once it has
//! its slot, within its timeout, as its hedges do: the attempts of a round take their slots in
//! the round, so the ready service cannot wait with the request.) The
//! deadline counts from the first attempt's start (when it is
//! sent, after any wait for a slot of the concurrency limit), not from `call`; a retry does
//! not wait for a slot past it (nor past its rule's `max_delay`: the call then returns the
//! failure the retry follows), and one whose time is up when its slot comes is not sent.
//!
//! A request's first attempt is sent from `call` when nothing has to admit, queue or time it:
//! a policy without breaker (its own or one per key), throttle, concurrency limit, timeout or
//! deadline (a `NoTimeout` policy: a [`DynPolicy`](crate::DynPolicy) never is), and without
//! anything that needs the first attempt's start (a `max_delay`, `on_retry`, the `tracing`
//! feature); a retry budget does not stand in the way. The service was made ready by
//! `poll_ready` (tower's contract: call `ready()` before `call`), so it is called at once with
//! the request itself, and a copy is kept for the retries, which send copies of it, as tower's
//! `Retry` does. Otherwise the first attempt is sent from the response future's first poll,
//! once the guards admit it, and every attempt sends a copy of the request. A future dropped
//! before it is polled has called the service in the first case, and not in the second.
//! Either way (and under [`RobustLayer::hedged`] too), `call` credits the retry budget for the
//! request, once.
//!
//! # Holding the policy
//!
//! [`RobustLayer::new`] keeps the policy in an `Arc`: each request takes a share in `call` and
//! gives it back when its future is dropped, two atomic operations. On a request that succeeds
//! at once they can cost more than the rest of the layer's work (docs/BENCHMARKS.md, section 9:
//! on one host, a `u32` request through the layer took 20 ns with them and 7 without, 3 of
//! which were the service's own).
//! [`RobustLayer::from_static`] takes a `&'static` policy (in a `static` `LazyLock`, or leaked
//! once at start-up) and each request copies the reference. Both behave alike in every other
//! way.
//!
//! A request that must wait for a slot of the policy's concurrency limit first gives up what
//! the service reserved for it when it was made ready: the service is dropped for a clone,
//! made ready once the slot is the request's. A service that reserves capacity in
//! `poll_ready` (tower's `ConcurrencyLimit`, a `Buffer`) would otherwise keep it from the
//! request holding the slot, which may need it, and the two would wait for each other.
//!
//! # Requests that are not safe to repeat
//!
//! The layer retries any request its policy's rules say to, whatever its method: a timeout, a
//! reset connection or a connection closed before the answer can come after the server
//! received the request and acted on it, so a retried `POST` may be applied twice. Send
//! through the layer the requests that are safe to repeat (`GET`, `PUT`, `DELETE`, a `POST`
//! with an idempotency key the server honours), and mark the others [`SendOnce`] (in the
//! request's extensions: it is then sent once, under the policy's timeout and guards), or
//! send them through a layer whose policy retries only the failures that come before the
//! request is sent (a refused connection: hyper-util's `Error::is_connect`).
//!
//! # Requests that cannot be copied
//!
//! A retry resends the request, so each attempt needs its own copy: the request type implements
//! [`RetryRequest`]. `http::Request<B>` does when its body does ([`RetryBody`]: `String`,
//! `Vec<u8>`, `Bytes`, `()`, `&str`, `&[u8]`, `http_body_util::Full` and `Empty` are copied;
//! `http_body_util`'s `BoxBody`, `UnsyncBoxBody` and `StreamBody` cannot be). A body that can
//! only be read once returns `None` from [`RetryBody::try_clone_body`]: that request is sent
//! once and never retried, whatever the policy says, so it is never sent twice. To make such a
//! request retryable, buffer its body first (`http_body_util::BodyExt::collect(body).await?
//! .to_bytes()` into a `Full<Bytes>`). A body type of another crate without an impl (hyper's
//! `Incoming`, `axum::body::Body`) is boxed (`BoxBody`) or buffered first; a body type of your own implements
//! `RetryBody`. A client whose body type is fixed and cannot be copied (a hyper-util client
//! over `BoxBody`, tonic's `Channel`) goes below a conversion, so that the layer copies a
//! buffered request and each attempt converts its copy:
//!
//! ```
//! # use std::convert::Infallible;
//! # use bytes::Bytes;
//! # use http_body_util::{BodyExt, Full, combinators::BoxBody};
//! # use retry_runtime::{Policy, tower::RobustLayer};
//! # fn client() -> impl tower::Service<http::Request<BoxBody<Bytes, Infallible>>,
//! #     Response = http::Response<String>, Error = std::io::Error> + Clone {
//! #     tower::service_fn(|_| async { Ok(http::Response::new(String::new())) })
//! # }
//! let policy = Policy::builder().retries(3).build()?;
//! let client = tower::ServiceBuilder::new()
//!     .layer(RobustLayer::new(policy))
//!     .map_request(|r: http::Request<Full<Bytes>>| r.map(BodyExt::boxed))
//!     .service(client());
//! # let _ = client;
//! # Ok::<(), retry_runtime::ConfigError>(())
//! ```

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use crate::call::{Call, CallState, Settled, StateOf, Step, Timed};
use crate::guard::{Breaker, Budget, Keyed};
use crate::kind::Failure;
use crate::policy::rules::PlanVisitor;
use crate::policy::{AsyncRetryPolicy, PolicyCore, RetryPolicy};
use crate::time::AsyncSleep;
use crate::timeout::AttemptTimeout;

/// A request the layer can send more than once: [`try_clone`](Self::try_clone) makes the copy
/// for the next attempt, or returns `None` for a request that can be sent only once (it is
/// then not retried).
///
/// A copy must answer as its original does: the layer may keep a copy and make the next
/// attempts' copies from it (see the [module docs](self)).
///
/// The answer must not change for a request: one that gives a copy, then `None`, leaves the
/// retry or hedge it was asked for without a request; under [`RobustLayer::hedged`] that
/// attempt never answers, and only the policy's timeout (or deadline) ends it.
#[diagnostic::on_unimplemented(
    message = "`RobustLayer` needs to copy the request `{Self}` for each attempt",
    label = "`{Self}` does not implement `retry_runtime::tower::RetryRequest`",
    note = "`http::Request<B>` implements it when the body `B` implements `RetryBody` (buffer a streaming body into `http_body_util::Full<Bytes>`); implement `RetryRequest` for your own request types"
)]
pub trait RetryRequest: Sized {
    /// A copy of this request for another attempt, or `None` if it can be sent only once.
    fn try_clone(&self) -> Option<Self>;
}

/// A request body that can be sent again (see [`RetryRequest`]).
#[diagnostic::on_unimplemented(
    message = "the body `{Self}` cannot be copied for a retry",
    label = "`{Self}` does not implement `retry_runtime::tower::RetryBody`",
    note = "buffer a streaming body into `http_body_util::Full<Bytes>` (or implement `RetryBody` for your body type, returning `None` when it cannot be read twice)"
)]
pub trait RetryBody: Sized {
    /// A copy of this body, or `None` if it can be read only once.
    fn try_clone_body(&self) -> Option<Self>;

    /// A copy of a request with this body: its head and [`try_clone_body`](Self::try_clone_body).
    /// (A body that is `Clone` may return `Some(request.clone())`, which is faster.)
    fn try_clone_request(request: &http::Request<Self>) -> Option<http::Request<Self>> {
        let body = request.body().try_clone_body()?;
        let mut copy = http::Request::new(body);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }
}

macro_rules! cloned_bodies {
    ($($t:ty),*) => {$(
        impl RetryBody for $t {
            #[inline]
            fn try_clone_body(&self) -> Option<Self> {
                Some(self.clone())
            }
            #[inline]
            fn try_clone_request(request: &http::Request<Self>) -> Option<http::Request<Self>> {
                Some(request.clone())
            }
        }
    )*};
}
cloned_bodies!(String, Vec<u8>, bytes::Bytes, (), &str, &[u8]);

impl<D: Clone> RetryBody for http_body_util::Full<D> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        Some(self.clone())
    }
    #[inline]
    fn try_clone_request(request: &http::Request<Self>) -> Option<http::Request<Self>> {
        Some(request.clone())
    }
}

impl<D> RetryBody for http_body_util::Empty<D> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        Some(http_body_util::Empty::new())
    }
}

// Bodies read as a stream: a request with one is sent once.
impl<D, E> RetryBody for http_body_util::combinators::BoxBody<D, E> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

impl<D, E> RetryBody for http_body_util::combinators::UnsyncBoxBody<D, E> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

impl<St> RetryBody for http_body_util::StreamBody<St> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

impl<B: RetryBody> RetryRequest for http::Request<B> {
    /// A copy of the request (its head and [`RetryBody::try_clone_request`]), or `None` for a
    /// request marked [`SendOnce`] or whose body cannot be copied.
    #[inline]
    fn try_clone(&self) -> Option<Self> {
        if self.extensions().get::<SendOnce>().is_some() {
            return None;
        }
        B::try_clone_request(self)
    }
}

/// In an `http::Request`'s extensions, marks a request to send once: it is never retried nor
/// hedged, as a request whose body cannot be copied (it still runs under the policy's
/// timeout, guards and fallback). Insert it above the layer (the layer reads it when it
/// copies the request); a request type of your own says the same by returning `None` from
/// its [`RetryRequest::try_clone`]. For a request that is not safe to repeat (a `POST` without
/// an idempotency key) on a client whose other requests are retried; marked above the layer,
/// every request whose method is not idempotent is sent once:
///
/// ```
/// use http::Request;
/// use retry_runtime::Policy;
/// use retry_runtime::tower::{RobustLayer, SendOnce};
///
/// # fn client() -> impl tower::Service<Request<String>, Response = http::Response<String>,
/// #     Error = std::io::Error, Future: Send> + Clone + Send + 'static {
/// #     tower::service_fn(|_| async { Ok(http::Response::new(String::new())) })
/// # }
/// let policy = Policy::builder().retries(3).build()?;
/// let client = tower::ServiceBuilder::new()
///     .map_request(|mut r: Request<String>| {
///         if !r.method().is_idempotent() {
///             r.extensions_mut().insert(SendOnce);
///         }
///         r
///     })
///     .layer(RobustLayer::new(policy))
///     .service(client());
/// # let _ = client;
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SendOnce;

macro_rules! cloned_requests {
    ($($t:ty),*) => {$(
        impl RetryRequest for $t {
            #[inline]
            fn try_clone(&self) -> Option<Self> {
                Some(self.clone())
            }
        }
    )*};
}
cloned_requests!(
    String,
    Vec<u8>,
    bytes::Bytes,
    (),
    &str,
    &[u8],
    u8,
    u16,
    u32,
    u64,
    usize,
    i32,
    i64
);

/// A `tower::Layer` that runs every request of the service it wraps under `policy` (see the
/// [module docs](self)). Clones share the policy (and so its budget and breaker).
///
/// [`breaker_per`](Self::breaker_per) and [`budget_per`](Self::budget_per) give each request the
/// breaker and the budget of its key (its host, its gRPC method, its tenant) instead of the
/// policy's own.
///
/// The layer and its requests hold the policy by `H`: an `Arc` ([`RobustLayer::new`]) or a
/// `&'static` reference ([`RobustLayer::from_static`], which saves each request the `Arc`'s
/// two atomic operations).
#[derive(Debug)]
pub struct RobustLayer<P, G = PerKey, H = Arc<P>> {
    policy: H,
    guards: G,
    _policy: PhantomData<fn() -> P>,
}

impl<P, G: Clone, H: Clone> Clone for RobustLayer<P, G, H> {
    fn clone(&self) -> Self {
        RobustLayer {
            policy: self.policy.clone(),
            guards: self.guards.clone(),
            _policy: PhantomData,
        }
    }
}

/// How a [`RobustLayer`], its services and each request's future hold the policy
/// ([`Policy`](Self::Policy)): an `Arc<P>` ([`RobustLayer::new`]: each request takes a share,
/// an atomic increment, and gives it back when its future is dropped) or a `&'static P`
/// ([`RobustLayer::from_static`]: each request copies the reference). Sealed: no other type
/// can be one.
pub trait PolicyHandle: Clone + handle::Sealed {
    /// The policy held.
    type Policy;
    /// The policy.
    fn policy(&self) -> &Self::Policy;
}

mod handle {
    pub trait Sealed {}
    impl<P> Sealed for std::sync::Arc<P> {}
    impl<P> Sealed for &P {}

    /// Only [`PerKey`](super::PerKey) implements [`Guards`](super::Guards).
    pub trait SealedGuards {}
    impl<Br, Bu> SealedGuards for super::PerKey<Br, Bu> {}
}

impl<P> PolicyHandle for Arc<P> {
    type Policy = P;
    #[inline(always)]
    fn policy(&self) -> &P {
        self
    }
}

impl<P> PolicyHandle for &P {
    type Policy = P;
    #[inline(always)]
    fn policy(&self) -> &P {
        self
    }
}

impl<P> RobustLayer<P> {
    /// A layer from a built policy (a [`Policy`](crate::Policy) or a
    /// [`DynPolicy`](crate::DynPolicy)) whose rules classify the wrapped service's errors and
    /// responses. A hedged policy is a compile error here ([`Unhedged`]): it goes through
    /// [`RobustLayer::hedged`].
    pub fn new(policy: P) -> Self
    where
        P: PolicyCore<Timeout: Unhedged>,
    {
        RobustLayer {
            policy: Arc::new(policy),
            guards: PerKey::default(),
            _policy: PhantomData,
        }
    }
}

impl<P: 'static> RobustLayer<P, PerKey, &'static P> {
    /// A layer whose requests hold `policy` by a `&'static` reference instead of an `Arc`: as
    /// [`RobustLayer::new`], without the two atomic operations (an increment in `call`, a
    /// decrement when the request's future is dropped) that each request makes on the `Arc`'s
    /// count. Worth it on a hot path: on a request that succeeds at once, those two
    /// operations can cost more than all the rest of the layer's work (docs/BENCHMARKS.md,
    /// section 9). The policy lives in a `static` (a `LazyLock`) or is leaked once, at start-up
    /// (`Box::leak`).
    ///
    /// ```
    /// use std::sync::LazyLock;
    /// use retry_runtime::tower::RobustLayer;
    /// use retry_runtime::Policy;
    /// use tower::ServiceExt;
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// static POLICY: LazyLock<Policy> =
    ///     LazyLock::new(|| Policy::builder().retries(3).build().expect("a valid policy"));
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let echo = tower::service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n) });
    /// let mut client = RobustLayer::from_static(&*POLICY).layer(echo);
    /// assert_eq!(client.ready().await?.call(7).await?, 7);
    /// # Ok(()) }
    /// ```
    pub fn from_static(policy: &'static P) -> Self
    where
        P: PolicyCore<Timeout: Unhedged>,
    {
        RobustLayer {
            policy,
            guards: PerKey::default(),
            _policy: PhantomData,
        }
    }
}

impl<P, Bu, H> RobustLayer<P, PerKey<(), Bu>, H> {
    /// Each request uses the circuit breaker of its key, `key(&request)`, taken from
    /// `breakers` (a [`KeyedBreaker`](crate::guard::KeyedBreaker), by reference or in an `Arc`), instead of the policy's
    /// own breaker: a host that keeps failing is cut off while the others are served. While a
    /// key's breaker is open, its requests fail at once with `E::from(Open)` (and the
    /// policy's fallback, if any, answers). The policy has no breaker of its own (it would
    /// never be used): one built with [`breaker`](crate::PolicyBuilder::breaker) is a compile
    /// error here ([`NoOwnBreaker`]).
    ///
    /// ```
    /// use std::sync::LazyLock;
    /// use std::time::Duration;
    /// use retry_runtime::guard::{Keyed, KeyedBreaker};
    /// use retry_runtime::tower::RobustLayer;
    /// use retry_runtime::{CircuitBreaker, Policy};
    ///
    /// static BREAKERS: LazyLock<KeyedBreaker<String>> = LazyLock::new(|| {
    ///     let template = CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1).expect("valid");
    ///     Keyed::new(1000, template).expect("at least one key")
    /// });
    ///
    /// // The host and port: two services on one host get a breaker each (a request without an
    /// // authority, a relative URI, shares the "" key).
    /// let layer = RobustLayer::new(Policy::builder().retries(2).build()?).breaker_per(
    ///     &*BREAKERS,
    ///     |req: &http::Request<String>| {
    ///         req.uri().authority().map(|a| a.as_str().to_owned()).unwrap_or_default()
    ///     },
    /// );
    /// # let _ = layer;
    /// # Ok::<(), retry_runtime::ConfigError>(())
    /// ```
    pub fn breaker_per<M, F, Req, K>(
        self,
        breakers: M,
        key: F,
    ) -> RobustLayer<P, PerKey<ByKey<M, F>, Bu>, H>
    where
        P: PolicyCore<Breaker: NoOwnBreaker>,
        F: Fn(&Req) -> K,
    {
        RobustLayer {
            policy: self.policy,
            guards: self.guards.breaker_per(breakers, key),
            _policy: PhantomData,
        }
    }
}

impl<P, Br, H> RobustLayer<P, PerKey<Br, ()>, H> {
    /// Each request spends the retry budget of its key, `key(&request)`, taken from `budgets`
    /// (a [`KeyedBudget`](crate::guard::KeyedBudget), by reference or in an `Arc`), instead of
    /// the policy's own budget: one tenant's retries cannot empty another's. The policy has no
    /// budget of its own (it would never be used): one built with
    /// [`budget`](crate::PolicyBuilder::budget) is a compile error here ([`NoOwnBudget`]).
    ///
    /// ```
    /// use std::sync::LazyLock;
    /// use retry_runtime::guard::{Keyed, KeyedBudget};
    /// use retry_runtime::tower::RobustLayer;
    /// use retry_runtime::{Policy, RetryBudget};
    ///
    /// static BUDGETS: LazyLock<KeyedBudget<String>> = LazyLock::new(|| {
    ///     Keyed::new(1000, RetryBudget::new(10.0, 0.1, 1.0).expect("valid")).expect("at least one key")
    /// });
    ///
    /// let layer = RobustLayer::new(Policy::builder().retries(2).build()?).budget_per(
    ///     &*BUDGETS,
    ///     |req: &http::Request<String>| req.headers().get("x-tenant").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned(),
    /// );
    /// # let _ = layer;
    /// # Ok::<(), retry_runtime::ConfigError>(())
    /// ```
    pub fn budget_per<M, F, Req, K>(
        self,
        budgets: M,
        key: F,
    ) -> RobustLayer<P, PerKey<Br, ByKey<M, F>>, H>
    where
        P: PolicyCore<Budget: NoOwnBudget>,
        F: Fn(&Req) -> K,
    {
        RobustLayer {
            policy: self.policy,
            guards: self.guards.budget_per(budgets, key),
            _policy: PhantomData,
        }
    }
}

impl<P, G, H: PolicyHandle<Policy = P>> RobustLayer<P, G, H> {
    /// The policy.
    pub fn policy(&self) -> &P {
        self.policy.policy()
    }
}

impl<S, P, G: Clone, H: Clone> Layer<S> for RobustLayer<P, G, H> {
    type Service = Robust<S, P, G, H>;

    fn layer(&self, inner: S) -> Robust<S, P, G, H> {
        Robust {
            inner,
            policy: self.policy.clone(),
            guards: self.guards.clone(),
            _policy: PhantomData,
        }
    }
}

/// The service [`RobustLayer`] makes: `S` with every request run under the policy `P` (and
/// the guards `G` choose for it).
#[derive(Debug)]
pub struct Robust<S, P, G = PerKey, H = Arc<P>> {
    inner: S,
    policy: H,
    guards: G,
    _policy: PhantomData<fn() -> P>,
}

impl<S: Clone, P, G: Clone, H: Clone> Clone for Robust<S, P, G, H> {
    fn clone(&self) -> Self {
        Robust {
            inner: self.inner.clone(),
            policy: self.policy.clone(),
            guards: self.guards.clone(),
            _policy: PhantomData,
        }
    }
}

impl<S, P, G, H> Robust<S, P, G, H> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// The guards a [`Robust`] service chooses for each request: [`PerKey`], the breaker and the
/// budget of the request's key or the policy's own. Sealed: [`PerKey`] is the only one (generic
/// code names the trait in bounds; its items may grow).
pub trait Guards<Req, P, R, E>: handle::SealedGuards {
    /// What is chosen for one request (kept by its future).
    type Chosen;
    /// The policy's environment (its clock and sleepers).
    type Env: crate::time::Env + AsyncSleep + Clone + Send + Sync + 'static;
    /// The policy's concurrency limit.
    type Limit: crate::guard::Limit;
    /// Where a request's future keeps its attempts' timer ([`TimerOf`]).
    type Timer: TimerSlot;
    /// Whether the policy hedges ([`RobustLayer::hedged`] runs such a policy).
    const HEDGED: bool;
    /// The policy a request runs under, with the chosen guards.
    type View<'a>: AsyncRetryPolicy<R, E, Env = Self::Env> + PolicyCore<Limit = Self::Limit>
    where
        Self: 'a,
        P: 'a;
    /// Chooses for `request`.
    fn choose(&self, request: &Req) -> Self::Chosen;
    /// `policy` with what was chosen.
    fn view<'a>(policy: &'a P, chosen: &'a Self::Chosen) -> Self::View<'a>
    where
        Self: 'a;
}

/// Which breaker and budget each request uses (see [`RobustLayer::breaker_per`] and
/// [`RobustLayer::budget_per`]): `()` for the policy's own, [`ByKey`] for the key's.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerKey<Br = (), Bu = ()> {
    breaker: Br,
    budget: Bu,
}

/// The timeout setting of a policy [`RobustLayer::new`] takes: one that does not hedge. A hedged
/// policy runs rounds of attempts, which [`RobustLayer::hedged`]'s layer does.
#[diagnostic::on_unimplemented(
    message = "a hedged policy needs a hedging layer: `RobustLayer::hedged(policy)` instead of `RobustLayer::new(policy)` or `RobustLayer::from_static(policy)`",
    label = "this policy hedges (its timeout setting is `{Self}`)",
    note = "the hedging layer takes the policy by value (it keeps it in an `Arc`)"
)]
pub trait Unhedged {}
impl Unhedged for crate::timeout::NoTimeout {}
impl Unhedged for crate::timeout::PerAttempt {}
impl Unhedged for crate::timeout::Adaptive<'_> {}
impl Unhedged for crate::policy::dynamic::DynTimeout {}
impl<T: Unhedged> Unhedged for crate::timeout::WithDeadline<T> {}

/// The timeout setting of a policy [`RobustLayer::hedged`] takes: one built with
/// [`hedge`](crate::PolicyBuilder::hedge).
#[diagnostic::on_unimplemented(
    message = "`RobustLayer::hedged` takes a policy built with `.hedge(..)`; without one, use `RobustLayer::new(policy)`",
    label = "this policy does not hedge (its timeout setting is `{Self}`)"
)]
pub trait Hedges {}
impl<T> Hedges for crate::hedge::Hedged<'_, T> {}
impl<T: Hedges> Hedges for crate::timeout::WithDeadline<T> {}

/// The breaker of a policy that [`breaker_per`](RobustLayer::breaker_per) accepts: none (`()`).
/// A breaker set on the policy would never be used once each request takes its key's, so a
/// policy built with [`breaker`](crate::PolicyBuilder::breaker) is a compile error there.
#[diagnostic::on_unimplemented(
    message = "`breaker_per` takes a policy without a breaker of its own (this one's is `{Self}`)",
    label = "each request would use its key's breaker, never the policy's",
    note = "build the policy without `.breaker(..)`: the breakers come from the map given to `breaker_per`",
    note = "a `DynPolicy` may hold a breaker: build the layer from the concrete `Policy`"
)]
pub trait NoOwnBreaker {}
impl NoOwnBreaker for () {}

/// The budget of a policy that [`budget_per`](RobustLayer::budget_per) accepts: none (`()`).
/// A budget set on the policy would never be used once each request takes its key's, so a
/// policy built with [`budget`](crate::PolicyBuilder::budget) is a compile error there.
#[diagnostic::on_unimplemented(
    message = "`budget_per` takes a policy without a retry budget of its own (this one's is `{Self}`)",
    label = "each request would spend its key's budget, never the policy's",
    note = "build the policy without `.budget(..)`: the budgets come from the map given to `budget_per`",
    note = "a `DynPolicy` may hold a budget: build the layer from the concrete `Policy`"
)]
pub trait NoOwnBudget {}
impl NoOwnBudget for () {}

impl<Bu> PerKey<(), Bu> {
    /// These choices with each request's breaker taken from `map` by `key(&request)`.
    fn breaker_per<M, F>(self, map: M, key: F) -> PerKey<ByKey<M, F>, Bu> {
        PerKey {
            breaker: ByKey { map, key },
            budget: self.budget,
        }
    }
}

impl<Br> PerKey<Br, ()> {
    /// These choices with each request's budget taken from `map` by `key(&request)`.
    fn budget_per<M, F>(self, map: M, key: F) -> PerKey<Br, ByKey<M, F>> {
        PerKey {
            breaker: self.breaker,
            budget: ByKey { map, key },
        }
    }
}

/// A guard chosen by the request's key: `map` is a [`Keyed`] map (by reference or in an
/// `Arc`), `key` makes the key of a request.
#[derive(Debug, Clone, Copy)]
pub struct ByKey<M, F> {
    map: M,
    key: F,
}

/// What [`PerKey`] picks for a request: nothing (`()`, the policy's own guard) or the guard of
/// its key ([`ByKey`]).
pub trait Pick<Req> {
    /// What is picked.
    type Chosen: 'static;
    /// Picks for `request`.
    fn pick(&self, request: &Req) -> Self::Chosen;
}

impl<Req> Pick<Req> for () {
    type Chosen = ();
    #[inline(always)]
    fn pick(&self, _: &Req) {}
}

impl<Req, M, K, G, F> Pick<Req> for ByKey<M, F>
where
    M: std::ops::Deref<Target = Keyed<K, G>>,
    K: std::hash::Hash + Eq + Clone,
    G: crate::guard::Template + 'static,
    F: Fn(&Req) -> K,
{
    type Chosen = Arc<G>;
    fn pick(&self, request: &Req) -> Arc<G> {
        self.map.get(&(self.key)(request))
    }
}

/// The breaker a request runs with, from what was picked: the policy's own (`()`) or a key's
/// (`Arc<CircuitBreaker>`, whose rejection is `E::from(Open)`).
pub trait BreakerChoice<P: PolicyCore, E> {
    /// The breaker.
    type Handle<'a>: Breaker
    where
        Self: 'a,
        P: 'a;
    /// The breaker of `policy`'s call.
    fn handle<'a>(&'a self, policy: &'a P) -> Self::Handle<'a>;
    /// The error of a rejected attempt.
    fn reject<R>(policy: &P) -> Option<E>
    where
        P: RetryPolicy<R, E>;
}

impl<P: PolicyCore, E> BreakerChoice<P, E> for () {
    type Handle<'a>
        = Own<'a, P::Breaker>
    where
        P: 'a;
    #[inline(always)]
    fn handle<'a>(&'a self, policy: &'a P) -> Own<'a, P::Breaker> {
        Own(policy.breaker())
    }
    #[inline(always)]
    fn reject<R>(policy: &P) -> Option<E>
    where
        P: RetryPolicy<R, E>,
    {
        policy.reject()
    }
}

impl<P: PolicyCore, E: From<crate::Open>> BreakerChoice<P, E> for Arc<crate::CircuitBreaker> {
    type Handle<'a>
        = &'a crate::CircuitBreaker
    where
        P: 'a;
    #[inline(always)]
    fn handle<'a>(&'a self, _: &'a P) -> &'a crate::CircuitBreaker {
        self
    }
    #[inline(always)]
    fn reject<R>(_: &P) -> Option<E>
    where
        P: RetryPolicy<R, E>,
    {
        Some(E::from(crate::Open::new()))
    }
}

/// The budget a request runs with, from what was picked: the policy's own (`()`) or a key's
/// (`Arc<RetryBudget>`).
pub trait BudgetChoice<P: PolicyCore> {
    /// The budget.
    type Handle<'a>: Budget
    where
        Self: 'a,
        P: 'a;
    /// The budget of `policy`'s call.
    fn handle<'a>(&'a self, policy: &'a P) -> Self::Handle<'a>;
}

impl<P: PolicyCore> BudgetChoice<P> for () {
    type Handle<'a>
        = Own<'a, P::Budget>
    where
        P: 'a;
    #[inline(always)]
    fn handle<'a>(&'a self, policy: &'a P) -> Own<'a, P::Budget> {
        Own(policy.budget())
    }
}

impl<P: PolicyCore> BudgetChoice<P> for Arc<crate::RetryBudget> {
    type Handle<'a>
        = &'a crate::RetryBudget
    where
        P: 'a;
    #[inline(always)]
    fn handle<'a>(&'a self, _: &'a P) -> &'a crate::RetryBudget {
        self
    }
}

/// A policy's own guard, borrowed.
#[derive(Debug)]
pub struct Own<'a, G: ?Sized>(&'a G);

impl<G: Breaker + ?Sized> Breaker for Own<'_, G> {
    const ACTIVE: bool = G::ACTIVE;
    type Pending = G::Pending;
    #[inline(always)]
    fn acquire(&self, now: std::time::Instant) -> Option<crate::guard::Permit> {
        self.0.acquire(now)
    }
    #[inline(always)]
    fn release(&self, permit: crate::guard::Permit) {
        self.0.release(permit)
    }
    #[inline(always)]
    fn record(&self, now: std::time::Instant, permit: crate::guard::Permit, success: bool) {
        self.0.record(now, permit, success)
    }
    #[inline(always)]
    fn would_admit(&self, now: std::time::Instant) -> bool {
        self.0.would_admit(now)
    }
}

impl<G: Budget + ?Sized> Budget for Own<'_, G> {
    #[inline(always)]
    fn deposit(&self) {
        self.0.deposit()
    }
    #[inline(always)]
    fn try_withdraw(&self) -> bool {
        self.0.try_withdraw()
    }
}

impl<Req, P, R, E, Br, Bu> Guards<Req, P, R, E> for PerKey<Br, Bu>
where
    P: AsyncRetryPolicy<R, E, Env: Clone + Send + 'static>,
    Br: Pick<Req>,
    Bu: Pick<Req>,
    Br::Chosen: BreakerChoice<P, E>,
    Bu::Chosen: BudgetChoice<P>,
    P::Timeout: TimerOf,
{
    type Chosen = (Br::Chosen, Bu::Chosen);
    type Env = P::Env;
    type Limit = P::Limit;
    type Timer = <P::Timeout as TimerOf>::Slot;
    const HEDGED: bool = <P::Timeout as AttemptTimeout>::HEDGED;
    type View<'a>
        = Guarded<'a, P, E, Br::Chosen, Bu::Chosen>
    where
        Self: 'a,
        P: 'a;
    #[inline(always)]
    fn choose(&self, request: &Req) -> Self::Chosen {
        (self.breaker.pick(request), self.budget.pick(request))
    }
    #[inline(always)]
    fn view<'a>(policy: &'a P, chosen: &'a Self::Chosen) -> Self::View<'a>
    where
        Self: 'a,
    {
        Guarded {
            policy,
            breaker: chosen.0.handle(policy),
            budget: chosen.1.handle(policy),
            _error: std::marker::PhantomData,
        }
    }
}

/// A policy with the breaker and budget chosen for a request.
pub struct Guarded<'a, P, E, Cb, Cu>
where
    P: PolicyCore,
    Cb: BreakerChoice<P, E> + 'a,
    Cu: BudgetChoice<P> + 'a,
{
    policy: &'a P,
    breaker: Cb::Handle<'a>,
    budget: Cu::Handle<'a>,
    _error: std::marker::PhantomData<fn() -> E>,
}

impl<'a, P, E, Cb, Cu> std::fmt::Debug for Guarded<'a, P, E, Cb, Cu>
where
    P: PolicyCore + 'a,
    Cb: BreakerChoice<P, E> + 'a,
    Cu: BudgetChoice<P> + 'a,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guarded")
    }
}

impl<'a, P, E, Cb, Cu> crate::policy::sealed::Sealed for Guarded<'a, P, E, Cb, Cu>
where
    P: PolicyCore + 'a,
    Cb: BreakerChoice<P, E> + 'a,
    Cu: BudgetChoice<P> + 'a,
{
}

impl<'a, P, E, Cb, Cu> PolicyCore for Guarded<'a, P, E, Cb, Cu>
where
    P: PolicyCore + 'a,
    Cb: BreakerChoice<P, E> + 'a,
    Cu: BudgetChoice<P> + 'a,
{
    type Env = P::Env;
    type Timeout = P::Timeout;
    type Budget = Cu::Handle<'a>;
    type Breaker = Cb::Handle<'a>;
    type Throttle = P::Throttle;
    type Limit = P::Limit;

    #[inline(always)]
    fn env(&self) -> &P::Env {
        self.policy.env()
    }
    #[inline(always)]
    fn timeout_setting(&self) -> &P::Timeout {
        self.policy.timeout_setting()
    }
    #[inline(always)]
    fn budget(&self) -> &Self::Budget {
        &self.budget
    }
    #[inline(always)]
    fn breaker(&self) -> &Self::Breaker {
        &self.breaker
    }
    #[inline(always)]
    fn throttle(&self) -> &P::Throttle {
        self.policy.throttle()
    }
    #[inline(always)]
    fn limit(&self) -> &P::Limit {
        self.policy.limit()
    }
}

impl<'a, P, R, E, Cb, Cu> RetryPolicy<R, E> for Guarded<'a, P, E, Cb, Cu>
where
    P: RetryPolicy<R, E> + 'a,
    Cb: BreakerChoice<P, E> + 'a,
    Cu: BudgetChoice<P> + 'a,
{
    const ON_RETRY: bool = P::ON_RETRY;
    const VALUES: bool = P::VALUES;

    #[inline(always)]
    fn reject(&self) -> Option<E> {
        Cb::reject::<R>(self.policy)
    }
    #[inline(always)]
    fn refuse(&self) -> Option<E> {
        self.policy.refuse()
    }
    #[inline(always)]
    fn on_success(&self) {
        self.policy.on_success()
    }
    #[inline(always)]
    fn on_error(&self, error: &E, retries: u32) {
        self.policy.on_error(error, retries)
    }
    #[inline(always)]
    fn hint(&self, error: &E) -> Option<std::time::Duration> {
        self.policy.hint(error)
    }
    #[inline(always)]
    fn on_retry(&self, outcome: &Result<R, E>, info: &crate::RetryInfo) {
        self.policy.on_retry(outcome, info)
    }
    #[inline(always)]
    fn fallback(&self, error: E) -> Result<R, E> {
        self.policy.fallback(error)
    }
    #[inline(always)]
    fn name(&self) -> Option<&'static str> {
        self.policy.name()
    }
    #[inline]
    fn write_error(&self, error: &E, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.policy.write_error(error, f)
    }
    #[inline(always)]
    fn select<V: PlanVisitor>(&self, failure: &Failure<'_, E>, visitor: V) -> Option<V::Out> {
        self.policy.select(failure, visitor)
    }
    #[inline(always)]
    fn select_value<V: PlanVisitor>(&self, value: &R, visitor: V) -> Option<V::Out> {
        self.policy.select_value(value, visitor)
    }
    #[inline(always)]
    fn needs_start(&self) -> bool {
        self.policy.needs_start()
    }
    #[inline(always)]
    fn needs_call_start(&self) -> bool {
        self.policy.needs_call_start()
    }
    #[inline(always)]
    fn may_bound_start(&self) -> bool {
        self.policy.may_bound_start()
    }
}

// `P` is not named in the bounds: it is only the name the type is written with (the handle
// holds that policy, as the constructors make sure). A bound tying `H`'s policy to `P` would
// tie two copies of the policy's lifetimes, which rustc cannot prove when it checks that an
// `async` block holding a request's future is `Send` (rust-lang/rust#64552: a request spawned
// from an `async move` block, whose policy borrows a `static` budget, would not compile).
impl<S, P, Req, G, H> Service<Req> for Robust<S, P, G, H>
where
    S: Service<Req> + Clone,
    Req: RetryRequest,
    G: Guards<Req, H::Policy, S::Response, S::Error>,
    H: PolicyHandle,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S, Req, G, H>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // (A hedged policy cannot get here: `RobustLayer::new` refuses it.)
        debug_assert!(!G::HEDGED);
        // The service that was made ready goes with this request; this one keeps a clone.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let policy = self.policy.clone();
        let chosen = self.guards.choose(&req);
        // When nothing admits, queues or times the first attempt (known when the code is
        // compiled) and the call needs no start instant, the first attempt is sent now: the
        // service is ready. A copy of the request is kept for a retry (a request that cannot
        // be copied is sent itself, its only attempt).
        let unguarded = !<<G::View<'_> as PolicyCore>::Breaker as Breaker>::ACTIVE
            && !<<G::View<'_> as PolicyCore>::Throttle as crate::guard::Throttle>::ACTIVE
            && !<G::Limit as crate::guard::Limit>::ACTIVE
            && <<G::View<'_> as PolicyCore>::Timeout as AttemptTimeout>::UNLIMITED;
        let eager = {
            let view = G::view(policy.policy(), &chosen);
            // The request credits its budget once, here (a new call's state, made where it
            // is used until one is kept, does not).
            view.budget().deposit();
            unguarded && !view.needs_start()
        };
        if eager {
            let copy = req.try_clone();
            let single = copy.is_none();
            let attempt = inner.call(req);
            return ResponseFuture {
                policy,
                chosen,
                inner,
                state: None,
                request: copy,
                phase: Phase::Calling { single },
                attempt: Some(attempt),
                wait: None,
                slot: None,
                timer: Default::default(),
                backoff: ColdSlot::default(),
                started: None,
            };
        }
        ResponseFuture {
            policy,
            chosen,
            inner,
            state: None,
            request: Some(req),
            phase: Phase::Admit,
            attempt: None,
            wait: None,
            slot: None,
            timer: Default::default(),
            backoff: ColdSlot::default(),
            started: None,
        }
    }
}

/// A request's retry, from its decision until it is sent: its backoff's sleep, and what it
/// keeps of its rule's `max_delay`. Boxed, made by the request's first retry and reused by
/// the next (the future stays smaller by the size of a pointer than with the sleep's own box
/// in it), and held in a [`ColdSlot`].
struct Retrying<R, E> {
    sleep: Pin<Box<dyn Future<Output = ()> + Send>>,
    kept: Option<KeptRetry<R, E>>,
}

/// An optional value of a request's future that is dropped out of line: the drop of a future
/// that never made one (a success at once, with no retry) stays a test of one pointer. (With
/// the drop of a retry's state, and of the failure it keeps, in the future's own drop, that
/// drop grew past what is inlined into the caller, and a success cost 1 ns more, 10% of the
/// layer on a `u32` request: docs/BENCHMARKS.md, section 9.)
struct ColdSlot<T>(std::mem::ManuallyDrop<Option<T>>);

impl<T> Default for ColdSlot<T> {
    #[inline(always)]
    fn default() -> Self {
        ColdSlot(std::mem::ManuallyDrop::new(None))
    }
}

impl<T> std::ops::Deref for ColdSlot<T> {
    type Target = Option<T>;
    #[inline(always)]
    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

impl<T> std::ops::DerefMut for ColdSlot<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Option<T> {
        &mut self.0
    }
}

impl<T> Drop for ColdSlot<T> {
    #[inline(always)]
    fn drop(&mut self) {
        #[cold]
        #[inline(never)]
        fn drop_held<T>(slot: &mut Option<T>) {
            drop(slot.take());
        }
        if self.0.is_some() {
            drop_held(&mut self.0);
        }
    }
}

/// What a request's future keeps of a retry whose rule has a `max_delay`, from its decision
/// until it is sent: the retry is not sent once the `max_delay` is spent (its
/// service not ready by then), and the call then returns the failure the retry follows, as it
/// does when a backoff would end past the `max_delay` (SPEC section 2: a retry is made only
/// if it can start before its `max_delay` is spent).
struct KeptRetry<R, E> {
    /// The retry's latest start, on the call's clock.
    by: std::time::Instant,
    /// The failure the retry follows (taken when the call returns it).
    failure: Option<Result<R, E>>,
    /// How `by` bounds the retry's wait for its service, once its attempt is armed.
    bound: Bound,
}

/// How a retry's `max_delay` bounds its wait for its service ([`KeptRetry`]).
#[derive(Debug, Clone, Copy)]
enum Bound {
    /// Not yet known: the retry's backoff runs.
    Unset,
    /// The attempt's timer is armed for the `max_delay` (sooner than the attempt's own time
    /// would end): the end of the attempt's own time on tokio's clock (`None`: it has no
    /// limit), which the timer takes when the attempt is sent.
    Timer(Option<tokio::time::Instant>),
    /// The `max_delay` was spent when the attempt was armed (its backoff ended late): it is
    /// sent only if its service is ready at once, as a free slot of a concurrency limit is
    /// still taken then (its timer is the attempt's own).
    Spent,
}

/// Where a [`ResponseFuture`] is in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before an attempt: the throttle and the breaker admit it.
    Admit,
    /// Waiting for a slot of the concurrency limit (`timed`: a retry, whose wait ends at the
    /// call's deadline, on the timer).
    Queued { timed: bool },
    /// The attempt starts: its time is read and its timer armed.
    Arm,
    /// Waiting for the service to be ready (within the attempt's time, and a retry's
    /// `max_delay`).
    Ready,
    /// The service's future is running.
    Calling { single: bool },
    /// Sleeping before the next attempt.
    Backoff,
    /// The response was returned.
    Done,
}

pin_project_lite::pin_project! {
    /// The future of a [`Robust`] service's response: the retry loop of one request. It
    /// allocates for each backoff's sleep, once for its retries' state (at its first retry:
    /// it keeps the failure a retry whose rule has a `max_delay` follows, returned if the
    /// retry's service is not ready before the `max_delay` is spent), and for a timer only
    /// when its policy has no timeout (nor deadline): once for each retry that waits, with a
    /// `max_delay` to end the wait, for a slot of its concurrency limit or for its service
    /// (when it is not ready at once). It holds the failure a retry follows: it is `Send` when
    /// the service's response and error are, as well as its future and the request. A policy
    /// with a timeout keeps its timer in the future, which is then not `Unpin` (as tower's
    /// `Timeout`'s): pin it (`Box::pin`, `std::pin::pin!`) to poll it by reference.
    pub struct ResponseFuture<S: Service<Req>, Req, G: Guards<Req, H::Policy, S::Response, S::Error>, H: PolicyHandle> {
        policy: H,
        chosen: G::Chosen,
        inner: S,
        // The call's state, once one must be kept (`None`: a new call's).
        state: Option<CallState<Timed, <G::Limit as crate::guard::Limit>::StartBy>>,
        // The request (or, when `call` sent the request itself, its copy): a copy of it is
        // sent by each attempt (it is sent itself, once, when it cannot be copied).
        request: Option<Req>,
        phase: Phase,
        #[pin]
        attempt: Option<S::Future>,
        // Waiting for a slot of the concurrency limit, and the slot held while the attempt runs.
        #[pin]
        wait: Option<<G::Limit as crate::guard::Limit>::Wait>,
        slot: Option<<G::Limit as crate::guard::Limit>::Slot>,
        // The attempt's timer, made the first time an attempt has a limit and reset after: in
        // the future when the policy has a timeout, boxed when it has none (its future stays
        // small; only a retry that waits, with a `max_delay` to end the wait, for a slot of its
        // concurrency limit or for its service makes one).
        #[pin]
        timer: G::Timer,
        // The retry's backoff, and what it keeps of its `max_delay`, boxed (made by the first
        // retry, reused by the next).
        backoff: ColdSlot<Box<Retrying<S::Response, S::Error>>>,
        // When the attempt started, for an adaptive timeout, which learns from latencies.
        started: Option<std::time::Instant>,
    }

    // Dropped while an attempt was admitted and not settled (waiting for a slot, for the
    // service, or for its answer), the request gives its breaker permit back: a half-open
    // breaker's probe would otherwise stay taken until the probes go stale.
    impl<S: Service<Req>, Req, G: Guards<Req, H::Policy, S::Response, S::Error>, H: PolicyHandle> PinnedDrop for ResponseFuture<S, Req, G, H> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let admitted = matches!(
                *this.phase,
                Phase::Queued { .. } | Phase::Arm | Phase::Ready | Phase::Calling { .. }
            );
            if admitted && <<G::View<'_> as PolicyCore>::Breaker as Breaker>::ACTIVE {
                let view = G::view(this.policy.policy(), this.chosen);
                resumed(this.state, &view).release();
            }
        }
    }
}

impl<S, P, Req, G, H> std::fmt::Debug for ResponseFuture<S, Req, G, H>
where
    S: Service<Req>,
    G: Guards<Req, P, S::Response, S::Error>,
    H: PolicyHandle<Policy = P>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

impl<S, P, Req, G, H> Future for ResponseFuture<S, Req, G, H>
where
    S: Service<Req> + Clone,
    Req: RetryRequest,
    G: Guards<Req, P, S::Response, S::Error>,
    H: PolicyHandle<Policy = P>,
{
    type Output = Result<S::Response, S::Error>;

    // Out of line, with the loop in another fn (`poll_loop`): on the interleaved bench (docs/
    // BENCHMARKS.md section 9) the success path below then runs without the loop's stack frame
    // and spills, and the caller reads its answer without a stalled load (inlined, the answer
    // went through a stack slot written as 8 + 4 bytes and read back as 4 + 8).
    #[inline(never)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // A policy with nothing to admit, queue or time an attempt, and no value rule (known
        // when the code is compiled), whose attempt is running: its answer is looked at here,
        // and a success returned at once, settled as the loop settles one; anything else goes
        // to the loop (a failure with the answer taken).
        let fast = !<<G::View<'_> as PolicyCore>::Breaker as Breaker>::ACTIVE
            && !<<G::View<'_> as PolicyCore>::Throttle as crate::guard::Throttle>::ACTIVE
            && !<G::Limit as crate::guard::Limit>::ACTIVE
            && <<G::View<'_> as PolicyCore>::Timeout as AttemptTimeout>::UNLIMITED
            && !<G::View<'_> as RetryPolicy<S::Response, S::Error>>::VALUES;
        if fast && self.phase == (Phase::Calling { single: false }) {
            let mut this = self.as_mut().project();
            if let Some(attempt) = this.attempt.as_mut().as_pin_mut() {
                match attempt.poll(cx) {
                    // (Such a policy arms no timer: nothing else to poll.)
                    Poll::Pending if !this.timer.is_armed() => return Poll::Pending,
                    Poll::Pending => {}
                    Poll::Ready(r) => {
                        this.attempt.set(None);
                        if r.is_ok() {
                            let view = G::view(this.policy.policy(), this.chosen);
                            let mut call = attempt_over(
                                &view,
                                this.slot,
                                state_of(this.state, &view),
                                this.started,
                                &r,
                                false,
                            );
                            *this.phase = Phase::Done;
                            call.success::<S::Response, S::Error>();
                            return Poll::Ready(r);
                        }
                        // (Not timed out: such a policy arms no timer.)
                        return self.poll_loop(cx, Some((r, false, false)));
                    }
                }
            }
        }
        self.poll_loop(cx, None)
    }
}

/// An attempt's outcome: its result, whether it timed out, and whether it was the call's only
/// attempt.
type Outcome<R, E> = (Result<R, E>, bool, bool);

impl<S, P, Req, G, H> ResponseFuture<S, Req, G, H>
where
    S: Service<Req> + Clone,
    Req: RetryRequest,
    G: Guards<Req, P, S::Response, S::Error>,
    H: PolicyHandle<Policy = P>,
{
    /// The request's loop, from its phase, or from the outcome of the attempt that was running
    /// (`answered`: `poll` took it).
    #[inline(never)]
    fn poll_loop(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut answered: Option<Outcome<S::Response, S::Error>>,
    ) -> Poll<Result<S::Response, S::Error>> {
        let mut this = self.project();
        let view = G::view(this.policy.policy(), this.chosen);
        let policy = &view;
        // The phase is kept in a local while the loop runs (its next step is then known, not
        // read back through a jump table), and written back when the poll returns; with a
        // breaker, also at each step, so that the future dropped after a panic still gives its
        // permit back.
        let mut phase = *this.phase;
        // Whether this poll resumes a wait for the service to be ready: time has passed since
        // the attempt's timer was armed, and the timer may be due by the clock before tokio's
        // driver has fired it (below).
        let mut resumed_wait = phase == Phase::Ready;
        let breaker = <<G::View<'_> as PolicyCore>::Breaker as Breaker>::ACTIVE;
        macro_rules! to {
            ($next:expr) => {{
                phase = $next;
                if breaker {
                    *this.phase = phase;
                }
            }};
        }
        // A retry not made because its rule's `max_delay` was spent before its service was
        // ready: the call returns the failure it follows; the attempt's breaker permit and
        // slot are given back.
        macro_rules! not_made {
            () => {{
                if let Some(failure) = this
                    .backoff
                    .as_mut()
                    .and_then(|r| r.kept.as_mut())
                    .and_then(|k| k.failure.take())
                {
                    *this.slot = None;
                    *this.started = None;
                    to!(Phase::Done);
                    break Poll::Ready(retry_not_made(policy, this.state, failure));
                }
            }};
        }
        // A retry whose time to start ran out while it waited for a slot of the limit: at its
        // rule's `max_delay`, the call returns the failure the retry follows, as when its
        // service is not ready in time; at the deadline, `E::from(Elapsed)`, as when the
        // deadline cuts an attempt. `$done` runs before the call ends. (With no error to end
        // it with, the wait goes on.)
        // While it decides, the call holds the attempt's breaker permit, not the future (whose
        // stored phase is set to one its drop gives nothing back in): a conversion of the
        // user's (`E::from(Rejected)`, `E::from(Elapsed)`) that panics before the permit is
        // given back drops the call, which gives it back; one that panics after gives nothing
        // back twice.
        macro_rules! slot_missed {
            ($done:block) => {{
                let stored = *this.phase;
                let mut call = resumed(this.state, policy);
                if breaker {
                    call.owns_permit();
                    *this.phase = Phase::Admit;
                }
                let kept = this.backoff.as_mut().and_then(|r| r.kept.as_mut());
                if let Some(r) = crate::call::missed_slot(&mut call, || kept.and_then(|k| k.failure.take())) {
                    $done
                    to!(Phase::Done);
                    break Poll::Ready(crate::call::finish(policy, r));
                }
                // The wait goes on (no error to end it with): the future holds the permit.
                let _ = call.into_state();
                if breaker {
                    *this.phase = stored;
                }
            }};
        }
        // The phases run in order, one block after the other (a block that moves the phase on
        // falls through to the next), so that a first poll that goes through them all takes
        // no jump table; the loop comes back only after a backoff is set.
        let polled = loop {
            if phase == Phase::Done {
                break Poll::Pending;
            }
            if phase == Phase::Backoff {
                if let Some(retrying) = this.backoff.as_mut()
                    && retrying.sleep.as_mut().poll(cx).is_pending()
                {
                    break Poll::Pending;
                }
                to!(Phase::Admit);
            }
            if phase == Phase::Admit {
                // The throttle and the breaker decide (the call's state is read back only
                // when there is one of them).
                if <<G::View<'_> as PolicyCore>::Breaker as Breaker>::ACTIVE
                    || <<G::View<'_> as PolicyCore>::Throttle as crate::guard::Throttle>::ACTIVE
                {
                    let mut call = resumed(this.state, policy);
                    if let Some(rejected) = call.admit() {
                        to!(Phase::Done);
                        break Poll::Ready(crate::call::finish(policy, rejected));
                    }
                    // (The permit is kept with the state: given back if the future is
                    // dropped before the attempt is settled.)
                    *this.state = Some(call.into_state());
                }
                if !<G::Limit as crate::guard::Limit>::ACTIVE {
                    to!(Phase::Arm);
                } else if let Some(slot) = crate::guard::Limit::try_slot(policy.limit()) {
                    // A free slot is taken at once.
                    *this.slot = Some(slot);
                    to!(Phase::Arm);
                } else {
                    // No slot is waited for while the service keeps what it reserved when it
                    // was made ready (a permit of an inner `ConcurrencyLimit`, a `Buffer`'s
                    // slot): the request holding our slot may need it to be ready, and the two
                    // would wait for each other. The ready service is dropped for a clone,
                    // made ready once a slot is ours.
                    // A retry does not wait past the call's deadline (before the first
                    // attempt has started, the deadline has not begun) nor past its rule's
                    // `max_delay`, and one with no time left is not made, whether or not the
                    // queue has room.
                    let left = resumed(this.state, policy).start_left();
                    if left.is_some_and(|l| l.is_zero()) {
                        slot_missed!({});
                    }
                    // Admitted, the request holds its breaker permit: a future dropped from
                    // here on (the service's `clone` may panic) gives it back.
                    if breaker {
                        *this.phase = Phase::Queued {
                            timed: left.is_some(),
                        };
                    }
                    let fresh = this.inner.clone();
                    *this.inner = fresh;
                    this.wait
                        .set(Some(crate::guard::Limit::wait(policy.limit())));
                    if let Some(left) = left {
                        this.timer.as_mut().arm_in(left);
                    }
                    to!(Phase::Queued {
                        timed: left.is_some(),
                    });
                }
            }
            if let Phase::Queued { timed } = phase {
                let waited = match this.wait.as_mut().as_pin_mut() {
                    Some(w) => w.poll(cx),
                    None => Poll::Pending,
                };
                match waited {
                    Poll::Pending if timed => {
                        // The deadline passed while the retry waited, or its rule's
                        // `max_delay` was spent; the attempt's breaker permit is given back.
                        if this.timer.as_mut().fired(cx) {
                            slot_missed!({
                                this.wait.set(None);
                            });
                        }
                        break Poll::Pending;
                    }
                    Poll::Pending => break Poll::Pending,
                    Poll::Ready(Ok(slot)) => {
                        this.wait.set(None);
                        *this.slot = Some(slot);
                        // A slot that came once the retry's `max_delay` was spent is not
                        // taken (tokio's timer may fire a little late).
                        if timed && resumed(this.state, policy).start_passed() {
                            slot_missed!({
                                *this.slot = None;
                            });
                        }
                        to!(Phase::Arm);
                    }
                    Poll::Ready(Err(_)) => {
                        this.wait.set(None);
                        // The queue is full: rejected at once, not retried.
                        let mut call = resumed(this.state, policy);
                        if let Some(r) = crate::call::refused(&mut call) {
                            to!(Phase::Done);
                            break Poll::Ready(crate::call::finish(policy, r));
                        }
                        to!(Phase::Arm);
                    }
                }
            }
            if phase == Phase::Arm {
                // The attempt's time: read from the clock when the call must know when its
                // attempts start (a deadline, a `max_delay`, `on_retry`, tracing: the first
                // attempt's start is read here); otherwise it is the timeout and no clock is
                // read.
                let limit = if policy.needs_start() {
                    let mut call = resumed(this.state, policy);
                    let attempt = call.attempt();
                    *this.state = Some(call.state());
                    *this.started = Some(attempt.started());
                    attempt.limit()
                } else {
                    policy.timeout_setting().limit()
                };
                // An attempt with no time left (the deadline passed while it waited for a
                // slot) is not sent: a timer armed now would only tell after the next poll.
                if let Some(e) = resumed(this.state, policy).out_of_time(limit) {
                    *this.slot = None;
                    to!(Phase::Done);
                    break Poll::Ready(crate::call::finish(policy, Err(e)));
                }
                // A retry whose rule's `max_delay` ends before the attempt's own time does
                // not wait for its service past it: its timer is armed for the `max_delay`
                // (and set to the attempt's own end when it is sent). One whose `max_delay`
                // is already spent (its backoff ended late) is sent only if its service is
                // ready at once, as it takes a free slot of a concurrency limit.
                let mut limit = limit;
                if let Some(retrying) = this.backoff.as_mut()
                    && let Some(kept) = retrying.kept.as_mut()
                {
                    let left = resumed(this.state, policy).left_until(kept.by);
                    if left.is_zero() {
                        // (A timer armed for no time may be fired at once, or on the
                        // driver's next turn: the wait is not left to it.)
                        kept.bound = Bound::Spent;
                    } else if let Some(l) = limit
                        && left < l
                    {
                        let now = tokio::time::Instant::now();
                        kept.bound = Bound::Timer(Some(crate::timeout::after(now, l)));
                        limit = Some(left);
                    } else if limit.is_none() {
                        // An attempt with no limit: the timer is made only if its service is
                        // not ready at once (a policy without a timeout boxes it).
                        kept.bound = Bound::Timer(None);
                    } else {
                        // The attempt's own time ends first, and bounds the wait.
                        retrying.kept = None;
                    }
                }
                match limit {
                    Some(limit) => this.timer.as_mut().arm_in(limit),
                    // (A timer armed for a retry's wait for a slot, bounded by its `max_delay`,
                    // does not time an attempt that has no limit.)
                    None => this.timer.as_mut().clear(),
                }
                resumed_wait = false;
                to!(Phase::Ready);
            }
            // The attempt's outcome, once there is one (`poll` may have taken it).
            let mut outcome = answered.take();
            if outcome.is_none() && phase == Phase::Ready {
                // An attempt whose time is over is not sent (below). Judged by the timer when
                // it was armed in this poll, and by the clock when the service became ready
                // in a later one (a reading only when a retry had to wait for its service).
                let over = |timer: &G::Timer| {
                    if resumed_wait {
                        timer.is_late()
                    } else {
                        timer.is_elapsed()
                    }
                };
                match this.inner.poll_ready(cx) {
                    Poll::Ready(Ok(())) if !over(&this.timer) => {
                        // A retry whose service became ready in a later poll is sent only
                        // before its `max_delay` is spent by the policy's clock too (which may
                        // not be tokio's: a virtual one), as a slot is taken.
                        if resumed_wait
                            && let Some(KeptRetry {
                                by,
                                bound: Bound::Timer(_),
                                ..
                            }) = this.backoff.as_ref().and_then(|r| r.kept.as_ref())
                            && resumed(this.state, policy).left_until(*by).is_zero()
                        {
                            not_made!();
                        }
                        // A copy is sent and the request kept for the next attempt; a request
                        // that cannot be copied is sent itself, once: its only attempt.
                        let copy = match this.request.as_ref() {
                            Some(request) => request.try_clone(),
                            None => {
                                to!(Phase::Done);
                                break Poll::Pending;
                            }
                        };
                        let (request, single) = match copy {
                            Some(copy) => (Some(copy), false),
                            None => (this.request.take(), true),
                        };
                        // A retry sent before its `max_delay` is spent: its timer takes the
                        // attempt's own end.
                        if let Some(KeptRetry {
                            bound: Bound::Timer(end),
                            ..
                        }) = this.backoff.as_mut().and_then(|r| r.kept.take())
                        {
                            match end {
                                Some(end) => this.timer.as_mut().arm_in(
                                    end.saturating_duration_since(tokio::time::Instant::now()),
                                ),
                                None => this.timer.as_mut().clear(),
                            }
                        }
                        if let Some(request) = request {
                            this.attempt.set(Some(this.inner.call(request)));
                        }
                        to!(Phase::Calling { single });
                    }
                    // A service that fails to be ready is not called again (tower's contract:
                    // it is to be discarded): its error is the call's, not retried. The request
                    // was not sent: no attempt for the breaker (its permit goes back), the
                    // throttle, the histogram or the callbacks.
                    Poll::Ready(Err(e)) => {
                        *this.slot = None;
                        *this.started = None;
                        to!(Phase::Done);
                        if breaker {
                            resumed(this.state, policy).release();
                        }
                        let r = Err(e);
                        #[cfg(feature = "tracing")]
                        crate::call::trace_not_ready(policy, &r);
                        break Poll::Ready(crate::call::finish(policy, r));
                    }
                    // Not ready yet, or ready when the attempt's time was already over.
                    ready @ (Poll::Ready(Ok(())) | Poll::Pending) => {
                        // A retry whose `max_delay` bounds its wait: not sent once it is spent.
                        match this
                            .backoff
                            .as_ref()
                            .and_then(|r| r.kept.as_ref())
                            .map(|k| (k.by, k.bound))
                        {
                            Some((by, Bound::Timer(_))) => {
                                if ready.is_ready() {
                                    not_made!();
                                }
                                // An attempt with no limit makes its timer now, for the time
                                // left.
                                if !this.timer.is_armed() {
                                    let left = resumed(this.state, policy).left_until(by);
                                    if left.is_zero() {
                                        not_made!();
                                    }
                                    this.timer.as_mut().arm_in(left);
                                }
                                if this.timer.as_mut().fired(cx) {
                                    not_made!();
                                }
                                break Poll::Pending;
                            }
                            Some((_, Bound::Spent)) => not_made!(),
                            Some(_) | None => {}
                        }
                        match expired::<_, S::Response, S::Error, _>(
                            policy,
                            this.timer.as_mut(),
                            cx,
                        ) {
                            Some(e) => {
                                // What the service reserved, or the readiness wait the attempt
                                // gave up (a queued permit of an inner `ConcurrencyLimit`,
                                // which would be handed to it and held, unused, through its
                                // backoff), is dropped with the service; the next attempt
                                // makes a clone ready.
                                *this.inner = this.inner.clone();
                                outcome = Some((Err(e), true, cannot_copy(this.request)));
                            }
                            None => break Poll::Pending,
                        }
                    }
                }
            }
            if let (None, Phase::Calling { single }) = (&outcome, phase) {
                let polled = match this.attempt.as_mut().as_pin_mut() {
                    Some(f) => f.poll(cx),
                    None => Poll::Pending,
                };
                match polled {
                    Poll::Ready(r) => {
                        this.attempt.set(None);
                        // A success no value rule can match is settled here and returned as
                        // it came (not moved through the settling below).
                        if !single
                            && !<G::View<'_> as RetryPolicy<S::Response, S::Error>>::VALUES
                            && r.is_ok()
                        {
                            let mut call = attempt_over(
                                policy,
                                this.slot,
                                state_of(this.state, policy),
                                this.started,
                                &r,
                                false,
                            );
                            // Settled from here: the call holds the permit until it records
                            // it (see `attempt_over`).
                            to!(Phase::Done);
                            call.success::<S::Response, S::Error>();
                            break Poll::Ready(r);
                        }
                        // An error returned when the attempt's time is up counts as a
                        // timeout, as in `call_async`: judged by the clock (one reading, on
                        // errors only), since the timer may not have fired yet.
                        let late = r.is_err() && this.timer.is_late();
                        outcome = Some((r, late, single));
                    }
                    Poll::Pending => {
                        match expired::<_, S::Response, S::Error, _>(
                            policy,
                            this.timer.as_mut(),
                            cx,
                        ) {
                            Some(e) => {
                                // Dropping the attempt's future cancels it.
                                this.attempt.set(None);
                                outcome = Some((Err(e), true, single));
                            }
                            None => break Poll::Pending,
                        }
                    }
                }
            }
            // (Every phase above ends in an outcome, a return or a later phase.)
            let Some((result, fired, single)) = outcome else {
                continue;
            };
            let mut call = attempt_over(
                policy,
                this.slot,
                state_of(this.state, policy),
                this.started,
                &result,
                fired,
            );
            // Settled from here: the call holds the permit until it records it (see
            // `attempt_over`).
            to!(Phase::Done);
            if single {
                let r = call.settle_once(result, fired);
                break Poll::Ready(crate::call::finish(policy, r));
            }
            // A retry whose rule has a `max_delay` keeps the failure it follows: the call
            // returns it if the retry's service is not ready before the `max_delay` is spent.
            let (delay, kept) = if policy.may_bound_start() {
                match call.settle_keeping_start(result, fired) {
                    (Settled::Return(r), _) => {
                        break Poll::Ready(crate::call::finish(policy, r));
                    }
                    (Settled::Retry(delay, failure), by) => (
                        delay,
                        by.map(|by| KeptRetry {
                            by,
                            failure: Some(failure),
                            bound: Bound::Unset,
                        }),
                    ),
                }
            } else {
                match call.settle(result, fired) {
                    Step::Return(r) => {
                        break Poll::Ready(crate::call::finish(policy, r));
                    }
                    Step::Retry(delay) => (delay, None),
                }
            };
            *this.state = Some(call.state());
            let env: G::Env = policy.env().clone();
            let sleep = Box::pin(async move { env.sleep_async(delay).await });
            match this.backoff.as_mut() {
                Some(retrying) => **retrying = Retrying { sleep, kept },
                None => **this.backoff = Some(Box::new(Retrying { sleep, kept })),
            }
            to!(Phase::Backoff);
        };
        *this.phase = phase;
        polled
    }
}

/// The call's state: a new call's (its first attempt's start unread) until one is kept.
/// Nothing is written to the future for a call that never needs to keep it (a success on
/// its first attempt without a breaker). (A new call's state credits no budget: `call` did.)
#[inline(always)]
fn state_of<P: PolicyCore>(state: &Option<StateOf<P, Timed>>, policy: &P) -> StateOf<P, Timed> {
    match state {
        Some(state) => *state,
        None => crate::call::start_credited(policy, Timed::default()).state(),
    }
}

/// The end of a call whose retry was not made because its rule's `max_delay` was spent before
/// its service was ready ([`crate::call::not_made`]), with the fallback, if any. Out of line:
/// off the loop's success path.
#[cold]
#[inline(never)]
fn retry_not_made<P, R, E>(
    policy: &P,
    state: &Option<StateOf<P, Timed>>,
    failure: Result<R, E>,
) -> Result<R, E>
where
    P: AsyncRetryPolicy<R, E>,
{
    let r = crate::call::not_made(&mut resumed(state, policy), failure);
    crate::call::finish(policy, r)
}

/// The call, resumed from its state ([`state_of`]).
#[inline(always)]
fn resumed<'p, P: PolicyCore>(
    state: &Option<StateOf<P, Timed>>,
    policy: &'p P,
) -> Call<'p, P, Timed> {
    Call::resume(policy, state_of(state, policy))
}

/// Where a request's future keeps the timer of its attempts: in the future
/// ([`InlineTimer`]) or boxed ([`BoxedTimer`]), by the policy's timeout setting ([`TimerOf`]).
#[doc(hidden)]
pub trait TimerSlot: Default {
    /// Sets the timer to fire `after` from now: made the first time, reset after.
    fn arm_in(self: Pin<&mut Self>, after: std::time::Duration);
    /// No timer (an attempt without a limit).
    fn clear(self: Pin<&mut Self>);
    /// Whether there is a timer and it has fired (registering `cx` if not).
    fn fired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool;
    /// The timer, if there is one.
    fn sleep(&self) -> Option<&tokio::time::Sleep>;
    /// Whether there is a timer and tokio's driver has fired it (no clock reading).
    #[inline]
    fn is_elapsed(&self) -> bool {
        self.sleep().is_some_and(tokio::time::Sleep::is_elapsed)
    }
    /// Whether there is a timer and its deadline has passed by the clock, fired or not (the
    /// driver fires a timer on its next turn, after the tasks it woke: an answer that came at
    /// or after the deadline, in a poll before that turn, is late all the same).
    #[inline]
    fn is_late(&self) -> bool {
        self.sleep()
            .is_some_and(|t| t.is_elapsed() || tokio::time::Instant::now() >= t.deadline())
    }
    /// Whether there is a timer.
    #[inline]
    fn is_armed(&self) -> bool {
        self.sleep().is_some()
    }
}

pin_project_lite::pin_project! {
    /// A timer kept in the request's future (no allocation): the slot of a policy whose
    /// timeout setting can limit an attempt (a timeout, a deadline, a `DynTimeout`), armed
    /// for each attempt that has a limit.
    #[doc(hidden)]
    #[derive(Debug, Default)]
    pub struct InlineTimer {
        #[pin]
        sleep: Option<tokio::time::Sleep>,
    }
}

impl TimerSlot for InlineTimer {
    #[inline]
    fn arm_in(self: Pin<&mut Self>, after: std::time::Duration) {
        let deadline = crate::timeout::deadline_in(after);
        let mut sleep = self.project().sleep;
        match sleep.as_mut().as_pin_mut() {
            Some(timer) => timer.reset(deadline),
            None => sleep.set(Some(tokio::time::sleep_until(deadline))),
        }
    }
    #[inline]
    fn clear(self: Pin<&mut Self>) {
        self.project().sleep.set(None);
    }
    #[inline]
    fn fired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool {
        self.project()
            .sleep
            .as_pin_mut()
            .is_some_and(|t| t.poll(cx).is_ready())
    }
    #[inline]
    fn sleep(&self) -> Option<&tokio::time::Sleep> {
        self.sleep.as_ref()
    }
}

/// A boxed timer: the slot of a policy without a timeout, whose requests make one only for a
/// retry that waits, with a `max_delay` to end the wait, for a slot of the concurrency limit or
/// for its service (its future stays smaller by the size of a `tokio::time::Sleep`).
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct BoxedTimer(Option<Pin<Box<tokio::time::Sleep>>>);

impl TimerSlot for BoxedTimer {
    #[inline]
    fn arm_in(self: Pin<&mut Self>, after: std::time::Duration) {
        let deadline = crate::timeout::deadline_in(after);
        let timer = &mut self.get_mut().0;
        match timer.as_mut() {
            Some(timer) => timer.as_mut().reset(deadline),
            None => *timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
    }
    #[inline]
    fn clear(self: Pin<&mut Self>) {
        self.get_mut().0 = None;
    }
    #[inline]
    fn fired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool {
        self.get_mut()
            .0
            .as_mut()
            .is_some_and(|t| t.as_mut().poll(cx).is_ready())
    }
    #[inline]
    fn sleep(&self) -> Option<&tokio::time::Sleep> {
        self.0.as_deref()
    }
}

/// The timer slot ([`TimerSlot`]) of a timeout setting: [`BoxedTimer`] for
/// [`NoTimeout`](crate::timeout::NoTimeout), [`InlineTimer`] for every setting that can limit
/// an attempt.
#[doc(hidden)]
pub trait TimerOf {
    /// The slot.
    type Slot: TimerSlot;
}

impl TimerOf for crate::timeout::NoTimeout {
    type Slot = BoxedTimer;
}

macro_rules! inline_timers {
    ($({$($g:tt)*} $t:ty;)*) => {$(
        impl<$($g)*> TimerOf for $t {
            type Slot = InlineTimer;
        }
    )*};
}
inline_timers!(
    {} crate::timeout::PerAttempt;
    {} crate::timeout::Adaptive<'_>;
    {} crate::policy::dynamic::DynTimeout;
    {T} crate::timeout::WithDeadline<T>;
    {T, E} crate::timeout::AsyncDeadline<T, E>;
    {E} crate::timeout::AsyncLimit<E>;
    {T, E} crate::timeout::ElapsedAs<T, E>;
    {T} crate::hedge::Hedged<'_, T>;
);

/// An attempt is over with `result`: its slot of the concurrency limit is freed, its latency
/// measured (for an adaptive timeout, from `started`), and its call resumed from `state`,
/// holding the attempt's breaker permit until it records it (the future, marked done before
/// the call settles, no longer gives it back: a call dropped by a panic in a rule or callback
/// gives it back if it was not recorded, and only then).
#[inline(always)]
fn attempt_over<'p, P, R, E, S>(
    policy: &'p P,
    slot: &mut Option<S>,
    state: StateOf<P, Timed>,
    started: &mut Option<std::time::Instant>,
    result: &Result<R, E>,
    fired: bool,
) -> Call<'p, P, Timed>
where
    P: RetryPolicy<R, E>,
{
    *slot = None;
    let mut call = Call::resume(policy, state);
    // Measured before the call takes the permit: a value rule that panics there (it is asked
    // whether the value is a failure) leaves the permit to the request's future, whose phase
    // still says it is out, and which gives it back once (both did).
    if let Some(started) = started.take() {
        call.measure(started, result, fired);
    }
    call.owns_permit();
    call
}

/// Whether the request kept for the attempts cannot be copied: it is sent once, and never
/// retried, even when its only attempt timed out before the service was ready (and it was not
/// sent), as under the hedged layer. Asked only then (it makes a copy, dropped at once).
#[cold]
fn cannot_copy<Req: RetryRequest>(request: &Option<Req>) -> bool {
    request.as_ref().is_some_and(|r| r.try_clone().is_none())
}

/// The error of an attempt whose timer fired, if it did (and the attempt has a limit).
fn expired<P, R, E, T: TimerSlot>(policy: &P, timer: Pin<&mut T>, cx: &mut Context<'_>) -> Option<E>
where
    P: AsyncRetryPolicy<R, E>,
{
    if timer.fired(cx) {
        crate::timeout::AsyncTimeout::elapsed(policy.timeout_setting(), crate::Elapsed::new())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use tower::{Layer, Service, ServiceExt};

    use super::RobustLayer;
    use crate::{Constant, NoJitter, Policy, RetryPolicy};

    /// Each request credits its retry budget once, whatever its attempts and whether the
    /// policy needs its first attempt's start (without `tracing`, no state is kept for a
    /// success on the first attempt, and a new call's state must not credit it again), and
    /// when it is made, even if its future is never polled.
    #[tokio::test(start_paused = true)]
    async fn each_request_credits_the_budget_once() {
        static BUDGET: crate::RetryBudget = match crate::RetryBudget::new(100.0, 1.0, 10.0) {
            Ok(b) => b,
            Err(_) => panic!("invalid budget"),
        };
        while BUDGET.try_withdraw() {}
        assert_eq!(BUDGET.tokens(), 0.0);
        let policy = Policy::builder()
            .retries(2)
            .backoff(Constant::new(Duration::from_millis(10)))
            .jitter(NoJitter)
            .budget(&BUDGET)
            .build()
            .unwrap();
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let svc = tower::service_fn(move |req: u32| {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 5 {
                    return Err(std::io::Error::other("once"));
                }
                Ok::<_, std::io::Error>(req)
            }
        });
        let mut svc = RobustLayer::new(policy).layer(svc);
        // Five successes on their first attempt: five tokens.
        for i in 0..5 {
            assert_eq!(svc.ready().await.unwrap().call(i).await.unwrap(), i);
        }
        assert_eq!(BUDGET.tokens(), 5.0);
        // A request whose first attempt fails: one token earned, none left for its retry
        // (which costs 10): the failure is returned.
        assert!(svc.ready().await.unwrap().call(9).await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 6);
        assert_eq!(BUDGET.tokens(), 6.0);
        // A request made and never polled.
        drop(svc.ready().await.unwrap().call(1));
        assert_eq!(BUDGET.tokens(), 7.0);
    }

    /// A request that cannot be copied: sent once, its failure returned.
    #[derive(Debug)]
    struct Once;

    impl super::RetryRequest for Once {
        fn try_clone(&self) -> Option<Self> {
            None
        }
    }

    /// A request that counts the copies it descends from (0: the request the caller made).
    #[derive(Debug)]
    struct Tagged(u32);

    impl super::RetryRequest for Tagged {
        fn try_clone(&self) -> Option<Self> {
            Some(Tagged(self.0 + 1))
        }
    }

    /// Awaits `future` for at most a minute of tokio's (paused) time: a future that would
    /// never answer fails the test instead of hanging it.
    async fn within_a_minute<F: std::future::Future>(future: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(60), future)
            .await
            .expect("answered within a minute")
    }

    /// Without a guard, timeout or start instant to wait for (and without `tracing`, which
    /// the workspace's tests enable: CI runs this crate's tests without it too), `call` sends
    /// the first attempt itself, with the request the caller made, and keeps a copy; the
    /// retries go through the future's loop with copies of that copy, after their backoffs. A
    /// request that cannot be copied is sent once. With `tracing` the first attempt waits for
    /// the first poll, and every attempt sends a copy of the request.
    #[tokio::test(start_paused = true)]
    async fn an_unguarded_policy_sends_the_first_attempt_from_call() {
        let policy = || {
            Policy::builder()
                .retries(2)
                .backoff(Constant::new(Duration::from_millis(100)))
                .jitter(NoJitter)
                .build()
                .unwrap()
        };
        let eager = !cfg!(feature = "tracing");
        assert_eq!(
            RetryPolicy::<u32, std::io::Error>::needs_start(&policy()),
            !eager
        );
        let sent = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&sent);
        let svc = tower::service_fn(move |req: Tagged| {
            let mut log = log.lock().unwrap();
            log.push(req.0);
            let n = log.len();
            async move {
                if n < 3 {
                    return Err(std::io::Error::other("not yet"));
                }
                Ok::<_, std::io::Error>(n)
            }
        });
        let mut svc = RobustLayer::new(policy()).layer(svc);
        let future = svc.ready().await.unwrap().call(Tagged(0));
        let first: &[u32] = if eager { &[0] } else { &[] };
        assert_eq!(*sent.lock().unwrap(), first);
        let start = tokio::time::Instant::now();
        assert_eq!(within_a_minute(future).await.unwrap(), 3);
        assert_eq!(start.elapsed(), Duration::from_millis(200));
        // The request itself and copies of the copy kept, or a copy of the request each time.
        let each: &[u32] = if eager { &[0, 2, 2] } else { &[1, 1, 1] };
        assert_eq!(*sent.lock().unwrap(), each);
        // Made and dropped unpolled: sent (by `call`) or not.
        drop(svc.ready().await.unwrap().call(Tagged(0)));
        assert_eq!(sent.lock().unwrap().len(), 3 + usize::from(eager));

        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let once = tower::service_fn(move |_: Once| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Err::<u32, _>(std::io::Error::other("refused")) }
        });
        let mut once = RobustLayer::new(policy()).layer(once);
        let future = once.ready().await.unwrap().call(Once);
        assert_eq!(calls.load(Ordering::SeqCst), u32::from(eager));
        let error = within_a_minute(future).await.unwrap_err();
        assert_eq!(error.to_string(), "refused");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    /// A readiness error on a retry (the first attempt sent from `call` without `tracing`) is
    /// the call's error: not retried, the service neither called nor asked again.
    #[tokio::test(start_paused = true)]
    async fn a_retrys_readiness_error_ends_the_call() {
        #[derive(Clone)]
        struct Broken {
            calls: Arc<AtomicU32>,
            refusals: Arc<AtomicU32>,
        }
        impl tower::Service<u32> for Broken {
            type Response = u32;
            type Error = std::io::Error;
            type Future = std::future::Ready<std::io::Result<u32>>;
            fn poll_ready(
                &mut self,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                if self.calls.load(Ordering::SeqCst) == 0 {
                    std::task::Poll::Ready(Ok(()))
                } else {
                    self.refusals.fetch_add(1, Ordering::SeqCst);
                    std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
                }
            }
            fn call(&mut self, _: u32) -> Self::Future {
                self.calls.fetch_add(1, Ordering::SeqCst);
                std::future::ready(Err(std::io::ErrorKind::ConnectionReset.into()))
            }
        }
        let broken = Broken {
            calls: Arc::new(AtomicU32::new(0)),
            refusals: Arc::new(AtomicU32::new(0)),
        };
        let policy = Policy::builder().retries(5).build().unwrap();
        let mut svc = RobustLayer::new(policy).layer(broken.clone());
        let future = svc.ready().await.unwrap().call(1);
        let error = within_a_minute(future).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe);
        assert_eq!(broken.calls.load(Ordering::SeqCst), 1);
        assert_eq!(broken.refusals.load(Ordering::SeqCst), 1);
    }

    /// A policy with something to admit, queue or time the first attempt (its own breaker, a
    /// breaker per key, a throttle, a concurrency limit, a timeout) sends nothing from `call`:
    /// the attempt goes out at the first poll, once admitted, with or without `tracing`.
    #[tokio::test(start_paused = true)]
    async fn a_guarded_policy_sends_the_first_attempt_at_the_first_poll() {
        static BREAKER: crate::CircuitBreaker =
            match crate::CircuitBreaker::new(10, 10, 0.5, Duration::from_secs(30), 1) {
                Ok(b) => b,
                Err(_) => panic!("invalid breaker"),
            };
        static THROTTLE: crate::AdaptiveThrottle =
            match crate::AdaptiveThrottle::new(2.0, Duration::from_secs(10)) {
                Ok(t) => t,
                Err(_) => panic!("invalid throttle"),
            };
        static LIMIT: crate::ConcurrencyLimit = match crate::ConcurrencyLimit::new(4, 4) {
            Ok(l) => l,
            Err(_) => panic!("invalid limit"),
        };
        static KEYED: std::sync::LazyLock<crate::guard::KeyedBreaker<u32>> =
            std::sync::LazyLock::new(|| {
                let template =
                    crate::CircuitBreaker::new(10, 10, 0.5, Duration::from_secs(30), 1).unwrap();
                crate::guard::Keyed::new(8, template).unwrap()
            });
        let builder = || {
            Policy::builder()
                .retries(1)
                .backoff(Constant::new(Duration::from_millis(10)))
                .jitter(NoJitter)
        };
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let svc = tower::service_fn(move |req: u32| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, std::io::Error>(req) }
        });
        /// `call` sends nothing; the first poll does.
        async fn first_poll_sends<S>(mut svc: S, calls: &AtomicU32)
        where
            S: tower::Service<u32, Response = u32, Error = std::io::Error>,
        {
            let before = calls.load(Ordering::SeqCst);
            let future = svc.ready().await.unwrap().call(7);
            assert_eq!(calls.load(Ordering::SeqCst), before);
            assert_eq!(within_a_minute(future).await.unwrap(), 7);
            assert_eq!(calls.load(Ordering::SeqCst), before + 1);
        }
        let own = builder().breaker(&BREAKER).build().unwrap();
        first_poll_sends(RobustLayer::new(own).layer(svc.clone()), &calls).await;
        let keyed = RobustLayer::new(builder().build().unwrap()).breaker_per(&*KEYED, |r: &u32| *r);
        first_poll_sends(keyed.layer(svc.clone()), &calls).await;
        let throttled = builder().throttle(&THROTTLE).build().unwrap();
        first_poll_sends(RobustLayer::new(throttled).layer(svc.clone()), &calls).await;
        let limited = builder().limit(&LIMIT).build().unwrap();
        first_poll_sends(RobustLayer::new(limited).layer(svc.clone()), &calls).await;
        let timed = builder().timeout(Duration::from_secs(1)).build().unwrap();
        first_poll_sends(RobustLayer::new(timed).layer(svc), &calls).await;
    }

    /// Without `max_delay`, deadline, `on_retry` or tracing, the layer reads no clock on its
    /// own (`needs_start` is false): timeouts and backoffs still follow tokio's clock. (The
    /// workspace's tests enable `tracing`; CI also runs this crate's tests without it.)
    #[tokio::test(start_paused = true)]
    async fn a_policy_that_needs_no_start_instant_still_times_out_and_backs_off() {
        let policy = Policy::builder()
            .retries(2)
            .timeout(Duration::from_millis(500))
            .backoff(Constant::new(Duration::from_millis(100)))
            .jitter(NoJitter)
            .build()
            .unwrap();
        assert_eq!(
            RetryPolicy::<u32, std::io::Error>::needs_start(&policy),
            cfg!(feature = "tracing")
        );
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let svc = tower::service_fn(move |req: u32| {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    tokio::time::sleep(Duration::from_secs(60)).await; // cut at 500 ms
                }
                Ok::<_, std::io::Error>(req + 1)
            }
        });
        let start = tokio::time::Instant::now();
        let r = RobustLayer::new(policy).layer(svc).oneshot(41).await;
        assert_eq!(r.unwrap(), 42);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(start.elapsed(), Duration::from_millis(600));
    }
}

/// A layer that hedges (SPEC sections 15 and 17): [`RobustLayer::hedged`]. Like
/// [`RobustLayer`], it takes a breaker and a budget per key ([`breaker_per`](Self::breaker_per),
/// [`budget_per`](Self::budget_per)): a request's hedges and retries use its key's.
#[derive(Debug)]
pub struct HedgedLayer<P, G = PerKey> {
    policy: Arc<P>,
    guards: G,
}

impl<P, G: Clone> Clone for HedgedLayer<P, G> {
    fn clone(&self) -> Self {
        HedgedLayer {
            policy: Arc::clone(&self.policy),
            guards: self.guards.clone(),
        }
    }
}

impl<P, Bu> HedgedLayer<P, PerKey<(), Bu>> {
    /// Each request (its hedges and its retries) uses the circuit breaker of its key,
    /// `key(&request)`, taken from `breakers`: as [`RobustLayer::breaker_per`].
    pub fn breaker_per<M, F, Req, K>(
        self,
        breakers: M,
        key: F,
    ) -> HedgedLayer<P, PerKey<ByKey<M, F>, Bu>>
    where
        P: PolicyCore<Breaker: NoOwnBreaker>,
        F: Fn(&Req) -> K,
    {
        HedgedLayer {
            policy: self.policy,
            guards: self.guards.breaker_per(breakers, key),
        }
    }
}

impl<P, Br> HedgedLayer<P, PerKey<Br, ()>> {
    /// Each request (its hedges and its retries) spends the retry budget of its key,
    /// `key(&request)`, taken from `budgets`: as [`RobustLayer::budget_per`].
    pub fn budget_per<M, F, Req, K>(
        self,
        budgets: M,
        key: F,
    ) -> HedgedLayer<P, PerKey<Br, ByKey<M, F>>>
    where
        P: PolicyCore<Budget: NoOwnBudget>,
        F: Fn(&Req) -> K,
    {
        HedgedLayer {
            policy: self.policy,
            guards: self.guards.budget_per(budgets, key),
        }
    }
}

impl<P> RobustLayer<P> {
    /// A layer from a policy built with [`hedge`](crate::PolicyBuilder::hedge): each request
    /// runs in rounds of attempts as [`crate::hedge`] describes (an attempt still running
    /// after the hedge's delay gets a sibling, sent to a clone of the service with another
    /// copy of the request; the first success wins and the others are dropped), with the
    /// policy's retries, timeouts, guards and fallback. [`RobustLayer::new`] with a hedged
    /// policy is a compile error that points here, and so is this fn with a policy that does
    /// not hedge (it was built without [`hedge`](crate::PolicyBuilder::hedge)).
    ///
    /// Its futures are boxed (one allocation per request), since a round holds a variable
    /// number of the service's futures; the service, its futures, responses and errors, and
    /// the request are `Send + 'static`. A request that cannot be copied
    /// ([`RetryRequest::try_clone`] gives `None`) is sent once, never hedged nor retried.
    ///
    /// Awaited inside an `async` block that must be `Send` (a task spawned from an `async
    /// move` block, an axum handler), a request through this service does not compile: the
    /// service needs a `'static` policy, and rustc's check of such a block cannot see that the
    /// lifetimes in the policy's type are `'static` (rust-lang/rust#64552; the error reads
    /// "implementation of `AttemptTimeout` is not general enough"). Box the service,
    /// `.layer(service).boxed_clone()` (its type names no policy), or spawn the request's future
    /// itself, `tokio::spawn(service.oneshot(request))`. [`RobustLayer::new`]'s service has no
    /// such limit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use retry_runtime::Policy;
    /// use retry_runtime::hedge::Hedge;
    /// use retry_runtime::tower::RobustLayer;
    /// use tower::ServiceExt;
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let policy = Policy::builder().retries(1).hedge(Hedge::after(Duration::from_millis(50), 1)?).build()?;
    /// // The first call hangs for a second; the hedge, sent at 50 ms, answers at once.
    /// let calls = Arc::new(AtomicU32::new(0));
    /// let service = tower::service_fn(move |req: String| {
    ///     let n = calls.fetch_add(1, Ordering::SeqCst);
    ///     async move {
    ///         if n == 0 {
    ///             tokio::time::sleep(Duration::from_secs(1)).await;
    ///         }
    ///         Ok::<_, std::io::Error>(format!("{req} {n}"))
    ///     }
    /// });
    /// let mut client = RobustLayer::hedged(policy).layer(service);
    /// let start = tokio::time::Instant::now();
    /// assert_eq!(client.ready().await?.call("ping".to_owned()).await?, "ping 1");
    /// assert_eq!(start.elapsed(), Duration::from_millis(50));
    /// # Ok(()) }
    /// ```
    pub fn hedged(policy: P) -> HedgedLayer<P>
    where
        P: PolicyCore<Timeout: Hedges>,
    {
        HedgedLayer {
            policy: Arc::new(policy),
            guards: PerKey::default(),
        }
    }
}

impl<S, P, G: Clone> Layer<S> for HedgedLayer<P, G> {
    type Service = HedgedService<S, P, G>;

    fn layer(&self, inner: S) -> HedgedService<S, P, G> {
        HedgedService {
            inner,
            policy: Arc::clone(&self.policy),
            guards: self.guards.clone(),
        }
    }
}

/// The service [`HedgedLayer`] makes.
#[derive(Debug)]
pub struct HedgedService<S, P, G = PerKey> {
    inner: S,
    policy: Arc<P>,
    guards: G,
}

impl<S: Clone, P, G: Clone> Clone for HedgedService<S, P, G> {
    fn clone(&self) -> Self {
        HedgedService {
            inner: self.inner.clone(),
            policy: Arc::clone(&self.policy),
            guards: self.guards.clone(),
        }
    }
}

impl<S, P, G, Req> Service<Req> for HedgedService<S, P, G>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    Req: RetryRequest + Send + 'static,
    P: Send + Sync + 'static,
    G: Guards<Req, P, S::Response, S::Error>,
    G::Chosen: Send + Sync + 'static,
    for<'a> G::View<'a>: Send + Sync,
    for<'a> <G::View<'a> as PolicyCore>::Timeout: Sync,
    G::Limit: Sync,
    <G::Limit as crate::guard::Limit>::Wait: Send,
    <G::Limit as crate::guard::Limit>::Slot: Send,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        // The service that was made ready sends the first attempt; hedges and retries go to
        // clones of it, each made ready first.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        // With a concurrency limit, the first attempt may wait for a slot: the service made
        // ready does not wait with it, keeping what it reserved (a permit of an inner
        // `ConcurrencyLimit`) from the request holding the slot, which may need it (the two
        // would wait for each other). It is dropped here, so that a future not polled yet
        // holds nothing either, and the attempt makes a clone ready once it has its slot, as
        // hedges and retries do.
        let ready = if <G::Limit as crate::guard::Limit>::ACTIVE {
            let template = self.inner.clone();
            drop(ready);
            Made::Dropped(template)
        } else {
            Made::Ready(ready)
        };
        let policy = Arc::clone(&self.policy);
        let chosen = self.guards.choose(&request);
        // The budget is credited here, as the plain layer credits it: a future dropped before
        // it is polled still counts as a call.
        G::view(&policy, &chosen).budget().deposit();
        Box::pin(async move {
            let view = G::view(&policy, &chosen);
            let policy = &view;
            // The first attempt's copy is made here; a request with none is sent once.
            let Some(copy) = request.try_clone() else {
                return match ready {
                    Made::Ready(ready) => send_once(policy, ready, true, request).await,
                    Made::Dropped(clone) => send_once(policy, clone, false, request).await,
                };
            };
            let (ready, template) = match ready {
                Made::Ready(ready) => {
                    let template = ready.clone();
                    (Some(ready), template)
                }
                Made::Dropped(template) => (None, template),
            };
            let mut first = Some((ready, copy));
            // Kept for an attempt whose copy fails after all (a `try_clone` that changed its
            // mind): it is sent itself, once.
            let mut original = Some(request);
            // The attempts' maker borrows the first attempt's and the kept request (they stay
            // in this future: no request is moved with the maker) and owns the template
            // service (so that `S` need not be `Sync`).
            let (first, original) = (&mut first, &mut original);
            // A service that fails to be ready ends the call with its error (no request was
            // sent: the attempt is not one, see `RobustLayer`): the attempt that met it leaves
            // the error here and never answers, and the loop, checked after each poll, is
            // dropped with its other attempts. The attempt also sets `stop`, which stops the
            // rounds where they are: no clock is acted on in that poll (a timer due in the same
            // wake would otherwise settle the round, and maybe send the next).
            let not_ready = std::sync::Mutex::new(None);
            let not_ready = &not_ready;
            let stop = std::sync::atomic::AtomicBool::new(false);
            let stop = &stop;
            // A retry's round sends its attempts only before its rule's `max_delay` is spent;
            // one that has sent none by then is not made, and the call returns the failure the
            // retry follows.
            // (Only for a policy with a `max_delay`: the others' rounds have no latest start.)
            let gate = policy
                .may_bound_start()
                .then(crate::call::StartGate::default);
            let gate = gate.as_ref();
            // (The budget was credited above: the rounds do not credit it again.)
            let looped = crate::call::hedged_rounds(
                policy,
                move |attempt: crate::Attempt<'_>| {
                    // The time this attempt may take: an attempt whose service becomes ready
                    // after it, by the clock, is not sent (as under `RobustLayer`), even if the
                    // round has not cut it yet (tokio's driver fires its timer on its next
                    // turn). Its time is counted from no later than the round counts it: from
                    // when it is made for a hedge or a later round (the round sets its cut
                    // after), from its first wait for the call's first attempt (the round sets
                    // that one's cut when the attempt is first pending). A reading of tokio's
                    // clock for each, off the success path of a first attempt (which reads
                    // nothing of its context when its service was made ready).
                    let (service, copy, made_ready, limit, since) = match first.take() {
                        Some((Some(s), copy)) => (s, Some(copy), true, None, None),
                        Some((None, copy)) => {
                            (template.clone(), Some(copy), false, attempt.limit(), None)
                        }
                        None => {
                            let limit = attempt.limit();
                            (
                                template.clone(),
                                original
                                    .as_ref()
                                    .and_then(RetryRequest::try_clone)
                                    .or_else(|| original.take()),
                                false,
                                limit,
                                limit.map(|_| tokio::time::Instant::now()),
                            )
                        }
                    };
                    let env = policy.env();
                    let bounded = gate.filter(|g| g.bounded());
                    async move {
                        let mut service = service;
                        if !made_ready {
                            // (Nor is an attempt sent once its round's latest start has passed
                            // with nothing sent: the round is not made, and ends then.)
                            let held_back = bounded.map(|g| move |now| g.holds_back(now, env));
                            match ready_in_time(&mut service, limit, since, held_back).await {
                                Ok(true) => {}
                                // Its time is over (the round cuts it), or its round was not
                                // made in time (the round ends): it never answers.
                                Ok(false) => return std::future::pending().await,
                                Err(e) => {
                                    *not_ready.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                                    return std::future::pending().await;
                                }
                            }
                        }
                        match copy {
                            // (Not once its round's start was missed: the round ends.)
                            Some(_) if gate.is_some_and(|g| g.closed()) => {
                                std::future::pending().await
                            }
                            Some(request) => {
                                if let Some(g) = gate {
                                    g.sent();
                                }
                                service.call(request).await
                            }
                            // No request left to send: this attempt never answers, and the round
                            // is decided by the others (or by its timeout).
                            None => std::future::pending().await,
                        }
                    }
                },
                true,
                true,
                gate,
                Some(stop),
            );
            let mut looped = std::pin::pin!(looped);
            let result = std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = looped.as_mut().poll(cx) {
                    return Poll::Ready(r);
                }
                match not_ready.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    Some(e) => {
                        let r = Err(e);
                        #[cfg(feature = "tracing")]
                        crate::call::trace_not_ready(policy, &r);
                        Poll::Ready(r)
                    }
                    None => Poll::Pending,
                }
            })
            .await;
            crate::call::finish(policy, result)
        })
    }
}

/// Makes `service` ready for an attempt that may take `limit`: `Ok(true)` to send it,
/// `Ok(false)` when it became ready after the attempt's time was over by the clock (judged
/// only when it had to wait, from `since`, or from its first wait when none is given: a
/// reading of tokio's clock then), or when `held_back` says so, given that instant (its round's
/// latest start has passed with nothing sent: a service ready at once is not asked, as a free
/// slot is taken past it), the service's error when it fails to be ready. With neither a limit
/// nor `held_back`, no clock is read.
async fn ready_in_time<S: Service<Req>, Req>(
    service: &mut S,
    limit: Option<std::time::Duration>,
    mut since: Option<tokio::time::Instant>,
    held_back: Option<impl FnOnce(tokio::time::Instant) -> bool>,
) -> Result<bool, S::Error> {
    let mut waited = false;
    std::future::poll_fn(|cx| {
        let poll = service.poll_ready(cx);
        if poll.is_pending() && !waited {
            waited = true;
            if limit.is_some() {
                since.get_or_insert_with(tokio::time::Instant::now);
            }
        }
        poll
    })
    .await?;
    if !waited || (limit.is_none() && held_back.is_none()) {
        return Ok(true);
    }
    let now = tokio::time::Instant::now();
    let in_time = match (since, limit) {
        (Some(since), Some(limit)) => now < crate::timeout::after(since, limit),
        _ => true,
    };
    Ok(in_time && !held_back.is_some_and(|held_back| held_back(now)))
}

/// The service a hedged request's first attempt starts from: the one the caller made ready,
/// or, beside a concurrency limit, a clone to make ready once the attempt has its slot (the
/// ready one was dropped in `call`).
enum Made<S> {
    Ready(S),
    Dropped(S),
}

/// A request that cannot be copied, under a hedged layer: sent once by `service` (made ready
/// for it, or, when not `made_ready`, made ready here once it has its slot), with the
/// policy's guards and timeout, never hedged nor retried.
async fn send_once<S, P, Req>(
    policy: &P,
    mut service: S,
    made_ready: bool,
    request: Req,
) -> Result<S::Response, S::Error>
where
    S: Service<Req> + Clone,
    P: AsyncRetryPolicy<S::Response, S::Error>,
{
    // (`call` credited the budget.)
    let mut call = crate::call::start_credited(policy, Timed::default());
    if let Some(rejected) = call.admit() {
        return crate::call::finish(policy, rejected);
    }
    let (slot, waited) = match crate::guard::Limit::try_slot(policy.limit()) {
        Some(slot) => (Some(slot), !made_ready),
        None => {
            // No slot is waited for while the service keeps what it reserved when it was made
            // ready (as in `RobustLayer`): the request waits with a clone, made ready once the
            // slot is its own, within the attempt's time.
            if made_ready {
                service = service.clone();
            }
            match crate::call::slot_for(&mut call).await {
                Ok(slot) => (slot, true),
                Err(r) => return crate::call::finish(policy, r),
            }
        }
    };
    let attempt = call.attempt();
    let started = attempt.started();
    let limit = attempt.limit();
    // A service made ready after the attempt's time is over, by the clock, is not sent the
    // request (as in the rounds): its time counts from before its timer is made (a reading
    // only when it waited for a slot).
    let since = (waited && limit.is_some()).then(tokio::time::Instant::now);
    let mut not_ready = false;
    let (result, fired) = crate::timeout::run_attempt(policy.timeout_setting(), limit, async {
        if waited {
            let never = None::<fn(tokio::time::Instant) -> bool>;
            match ready_in_time(&mut service, limit, since, never).await {
                Ok(true) => {}
                // Its time is over: it never answers, and its timer cuts it.
                Ok(false) => return std::future::pending().await,
                Err(e) => {
                    not_ready = true;
                    return Err(e);
                }
            }
        }
        service.call(request).await
    })
    .await;
    drop(slot);
    if not_ready {
        // Not sent: no attempt (the breaker's permit goes back); the error is the call's.
        call.release();
        #[cfg(feature = "tracing")]
        crate::call::trace_not_ready(policy, &result);
        return crate::call::finish(policy, result);
    }
    // Its latency counts for an adaptive timeout and `hedge(after = pNN)` as any attempt's.
    call.measure(started, &result, fired);
    let result = call.settle_once(result, fired);
    crate::call::finish(policy, result)
}
