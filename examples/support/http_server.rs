//! A small HTTP/1 server on loopback that injects faults on demand, shared by
//! `examples/http.rs` and `tests/http.rs` (`#[path = ...] mod http_server;` in each).
//!
//! The path picks the fault; the query says for whom and how often:
//!
//! | path | the first `n` requests of an `id` (`n = 1` by default) | after that |
//! |---|---|---|
//! | `/ok` | 200 | 200 |
//! | `/unavailable` | 503 with `Retry-After: {retry_after}` (seconds, 1 by default), and `retry-after-ms: {retry_after_ms}` when given | 200 |
//! | `/throttled` | 429, no `Retry-After` | 200 |
//! | `/hang` | sleeps `hang_ms` (10 s by default), then 200 | 200 |
//! | `/close` | closes the connection without answering (a FIN: the client reads an end) | 200 |
//! | `/reset` | resets the connection without answering (an RST: the client's read fails with `ConnectionReset`) | 200 |
//!
//! Requests are counted per `id` ([`FaultServer::hits`], with the instant each arrived on
//! tokio's clock in [`FaultServer::arrivals`]), so concurrent callers with their own ids do not
//! see each other's faults. [`refused_port`] gives a port with no listener.
//! [`FaultServer::shutdown`] stops accepting and aborts every open connection (a hanging one
//! included).

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// When each request arrived, per `id`.
type Hits = Mutex<HashMap<String, Vec<Instant>>>;

/// The fault server; see the [module docs](self).
#[derive(Debug)]
pub struct FaultServer {
    addr: SocketAddr,
    hits: Arc<Hits>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl FaultServer {
    /// Listens on 127.0.0.1 on a port the OS chooses and serves in a task of the current
    /// tokio runtime.
    pub async fn start() -> io::Result<FaultServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let hits = Arc::new(Hits::default());
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(serve(listener, Arc::clone(&hits), stopped));
        Ok(FaultServer {
            addr,
            hits,
            stop,
            task,
        })
    }

    /// `http://127.0.0.1:PORT{path_and_query}`.
    pub fn url(&self, path_and_query: &str) -> String {
        format!("http://{}{path_and_query}", self.addr)
    }

    /// How many requests with this `id` reached the server.
    pub fn hits(&self, id: &str) -> u32 {
        u32::try_from(self.arrivals(id).len()).unwrap_or(u32::MAX)
    }

    /// When each request with this `id` arrived (on tokio's clock), in order.
    pub fn arrivals(&self, id: &str) -> Vec<Instant> {
        let hits = self.hits.lock().unwrap_or_else(|e| e.into_inner());
        hits.get(id).cloned().unwrap_or_default()
    }

    /// Stops accepting, aborts every open connection and waits until they are gone.
    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// A port on 127.0.0.1 that refuses connections: a socket bound to it and not listening,
/// held as long as this is, so that nothing else (another test's server) takes the port.
pub struct RefusedPort {
    _socket: tokio::net::TcpSocket,
    /// The port.
    pub port: u16,
}

/// A [`RefusedPort`] the OS chose.
pub fn refused_port() -> io::Result<RefusedPort> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind((Ipv4Addr::LOCALHOST, 0).into())?;
    let port = socket.local_addr()?.port();
    Ok(RefusedPort {
        _socket: socket,
        port,
    })
}

async fn serve(listener: TcpListener, hits: Arc<Hits>, mut stopped: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // A connection that failed before it was accepted, or no file descriptor
                    // left: pause rather than spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            // Reap finished connections as we go, so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let hits = Arc::clone(&hits);
        let stream = Resettable {
            stream,
            reset: Arc::new(AtomicBool::new(false)),
        };
        let reset = Arc::clone(&stream.reset);
        let service = service_fn(move |req| {
            let (hits, reset) = (Arc::clone(&hits), Arc::clone(&reset));
            async move {
                let answer = answer(req, hits).await;
                if let Err(Fault::Reset) = answer {
                    reset.store(true, Ordering::SeqCst);
                }
                answer
            }
        });
        connections.spawn(async move {
            // A `/close` or `/reset` request ends here with the service's error: the
            // connection is dropped without a response (reset when `/reset` asked for it).
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
    connections.shutdown().await;
}

/// The errors that make the server drop a connection without answering.
#[derive(Debug)]
enum Fault {
    /// Closed: the client reads the end of the stream.
    Close,
    /// Reset: the client's read fails.
    Reset,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Close => f.write_str("fault: connection closed without an answer"),
            Fault::Reset => f.write_str("fault: connection reset without an answer"),
        }
    }
}

impl std::error::Error for Fault {}

/// A connection that is reset (`SO_LINGER` 0, so that closing it sends an RST) instead of
/// closed when it is dropped after `reset` was set.
struct Resettable {
    stream: TcpStream,
    reset: Arc<AtomicBool>,
}

impl Drop for Resettable {
    fn drop(&mut self) {
        if self.reset.load(Ordering::SeqCst) {
            let _ = self.stream.set_zero_linger();
        }
    }
}

impl AsyncRead for Resettable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Resettable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

async fn answer(req: Request<Incoming>, hits: Arc<Hits>) -> Result<Response<Full<Bytes>>, Fault> {
    let query = |key: &str| param(req.uri().query(), key);
    let number =
        |key: &str, default: u64| query(key).and_then(|v| v.parse().ok()).unwrap_or(default);
    let id = query("id").unwrap_or_default();
    let hit = {
        let mut hits = hits.lock().unwrap_or_else(|e| e.into_inner());
        let arrivals = hits.entry(id.to_owned()).or_default();
        arrivals.push(Instant::now());
        arrivals.len()
    };
    let faulty = hit as u64 <= number("n", 1);
    let path = req.uri().path();
    let response = match path {
        "/unavailable" if faulty => {
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, "unavailable\n");
            let h = r.headers_mut();
            h.insert("retry-after", number("retry_after", 1).into());
            if let Some(ms) = query("retry_after_ms").and_then(|v| v.parse::<u64>().ok()) {
                h.insert("retry-after-ms", ms.into());
            }
            r
        }
        "/throttled" if faulty => text(StatusCode::TOO_MANY_REQUESTS, "slow down\n"),
        "/hang" if faulty => {
            tokio::time::sleep(Duration::from_millis(number("hang_ms", 10_000))).await;
            text(StatusCode::OK, "late\n")
        }
        "/close" if faulty => return Err(Fault::Close),
        "/reset" if faulty => return Err(Fault::Reset),
        "/ok" | "/unavailable" | "/throttled" | "/hang" | "/close" | "/reset" => {
            text(StatusCode::OK, "ok\n")
        }
        _ => text(StatusCode::NOT_FOUND, "no such fault\n"),
    };
    Ok(response)
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r
}

/// The value of `key` in a query string `a=1&b=2` (no percent-decoding: ids are plain).
fn param<'q>(query: Option<&'q str>, key: &str) -> Option<&'q str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find_map(|(k, v)| (k == key).then_some(v))
}
