// The layer copies the request for each attempt: a request type without `RetryRequest`, and an
// `http::Request` whose body type has no `RetryBody` (a streaming body of another crate), are
// errors that say how to make them retryable (here where the layer is handed on as a
// `Service`; a method call on it lists the same missing trait).
use retry_runtime::tower::RobustLayer;
use retry_runtime::Policy;
use tower::{Layer, Service};

struct Job;

struct Stream;

fn serve<R, S: Service<R>>(_: S) {}

fn main() {
    let jobs = tower::service_fn(|_: Job| async { Ok::<_, std::io::Error>(()) });
    serve::<Job, _>(RobustLayer::new(Policy::builder().build().unwrap()).layer(jobs));

    let streams = tower::service_fn(|_: http::Request<Stream>| async { Ok::<_, std::io::Error>(()) });
    serve::<http::Request<Stream>, _>(RobustLayer::new(Policy::builder().build().unwrap()).layer(streams));
}
