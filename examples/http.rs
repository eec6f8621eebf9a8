//! Retries against a real HTTP server (issue 12): a fault-injecting server on 127.0.0.1 and
//! two clients under the same rules, one a `reqwest` call in an `async fn` under `#[robust]`,
//! the other a `hyper-util` client wrapped in `RobustLayer`.
//!
//! The server (`support/http_server.rs`) answers `/ok`; `/unavailable` with 503 and
//! `Retry-After: 1` twice; `/throttled` with 429 once; `/hang` by sleeping past the clients'
//! 500 ms timeout once; `/close` by closing the connection without an answer once; `/reset`
//! by resetting it (an RST) without an answer once; and a port with no listener refuses the
//! connection. The clients and their rules are in
//! `support/http_clients.rs`. Every fault is run by both clients at once, each with a request
//! id of its own, and the table shows the attempts each client made, how many the server saw,
//! the time taken and the outcome.
//!
//! Run it with `cargo run --example http` (about 2 s). Everything stays on loopback, and the
//! server is shut down at the end.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use tokio::time::Instant;
use tower::ServiceExt;

#[path = "support/http_clients.rs"]
mod http_clients;
#[path = "support/http_server.rs"]
mod http_server;

use http_clients::{get, hyper_client, reqwest_client};
use http_server::{FaultServer, refused_port};

/// The faults, by name, with the path and query that inject each one.
const FAULTS: [(&str, &str); 7] = [
    ("ok", "/ok?"),
    ("unavailable", "/unavailable?n=2&"),
    ("throttled", "/throttled?"),
    ("hang", "/hang?"),
    ("close", "/close?"),
    ("reset", "/reset?"),
    ("refused", ""),
];

/// One line of the table.
struct Row {
    fault: &'static str,
    client: &'static str,
    attempts: u32,
    server_saw: Option<u32>,
    time: Duration,
    outcome: String,
}

/// The outcome in a few words: the status, or the innermost cause of the error.
fn outcome<T>(
    r: Result<T, &(dyn Error + 'static)>,
    status: impl Fn(&T) -> http::StatusCode,
) -> String {
    match r {
        Ok(v) => status(&v).to_string(),
        Err(e) => {
            let mut cause = e;
            while let Some(inner) = cause.source() {
                cause = inner;
            }
            format!("error: {cause}")
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let server = FaultServer::start().await?;
    let refused = refused_port()?;
    let mut runs = Vec::new();
    for (fault, path) in FAULTS {
        for client in ["reqwest", "hyper"] {
            let id = format!("{fault}-{client}");
            let url = if fault == "refused" {
                format!("http://127.0.0.1:{}/ok?id={id}", refused.port)
            } else {
                server.url(&format!("{path}id={id}"))
            };
            runs.push(tokio::spawn(async move {
                let attempts = Arc::new(AtomicU32::new(0));
                let start = Instant::now();
                let outcome = if client == "reqwest" {
                    let http = reqwest_client()?;
                    let r = get(&http, &url, &attempts).await;
                    outcome(r.as_ref().map_err(|e| e as _), |r| r.status())
                } else {
                    let svc = hyper_client(Arc::clone(&attempts))?;
                    let req = http::Request::get(&url).body(Full::new(Bytes::new()))?;
                    let r = svc.oneshot(req).await;
                    outcome(r.as_ref().map_err(|e| &**e as _), |r| r.status())
                };
                Ok::<_, Box<dyn Error + Send + Sync>>((
                    id,
                    Row {
                        fault,
                        client,
                        attempts: attempts.load(Ordering::Relaxed),
                        server_saw: None,
                        time: start.elapsed(),
                        outcome,
                    },
                ))
            }));
        }
    }
    let mut rows = Vec::new();
    for run in runs {
        let (id, mut row) = run.await?.map_err(|e| e as Box<dyn Error>)?;
        row.server_saw = (row.fault != "refused").then(|| server.hits(&id));
        rows.push(row);
    }
    server.shutdown().await;

    println!("| fault       | client  | attempts | server saw |    time | outcome");
    println!("|-------------|---------|---------:|-----------:|--------:|--------");
    for r in rows {
        let saw = r.server_saw.map_or("-".to_owned(), |n| n.to_string());
        let time = format!("{} ms", r.time.as_millis());
        println!(
            "| {:<11} | {:<7} | {:>8} | {saw:>10} | {time:>7} | {}",
            r.fault, r.client, r.attempts, r.outcome
        );
    }
    Ok(())
}
