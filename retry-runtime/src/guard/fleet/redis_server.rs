//! A throwaway `redis-server` on a free loopback port, for this crate's tests (the store's
//! scripts against its memory rules) and, through `#[path = ...] mod redis_server;`, for the
//! workspace's `examples/fleet.rs` and `tests/redis_fleet.rs`: no persistence, killed when
//! dropped. (Kept here, in the published crate, so that its own tests find it.)

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why there is no server: `redis-server` is not installed (or does not start).
pub fn unavailable() -> Option<String> {
    match Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("`redis-server --version` failed ({s})")),
        Err(e) => Some(format!("`redis-server` was not found on the PATH ({e})")),
    }
}

/// A server for the test named `test`, or `None` when `redis-server` is missing: the test
/// says so on stderr (past the test harness's capture) and passes, unless
/// `ROBUST_REQUIRE_REDIS=1` makes the absence a failure.
pub fn for_test(test: &str) -> Option<RedisServer> {
    if let Some(why) = unavailable() {
        assert!(
            std::env::var("ROBUST_REQUIRE_REDIS").as_deref() != Ok("1"),
            "ROBUST_REQUIRE_REDIS=1 but {why}"
        );
        let _ = writeln!(
            std::io::stderr(),
            "\n{test}: SKIPPED: {why}; install redis-server (Debian: apt-get install redis-server) to run it"
        );
        return None;
    }
    Some(RedisServer::start().expect("redis-server starts"))
}

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn spawn(port: u16) -> std::io::Result<Child> {
    Command::new("redis-server")
        .args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(["--appendonly", "no"])
        .args(["--daemonize", "no"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// The process id of the server that answers on `port` (`INFO server`, within 200 ms), if
/// one answers.
fn server_pid(port: u16) -> Option<u32> {
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
            .ok()?;
    s.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
    s.write_all(b"INFO server\r\n").ok()?;
    // A bulk string: `$LEN\r\n` then LEN bytes; read until `process_id:` and its line.
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while reply.len() < 64 * 1024 {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&reply);
        if let Some(rest) = text.split("process_id:").nth(1)
            && let Some((pid, _)) = rest.split_once("\r\n")
        {
            return pid.trim().parse().ok();
        }
    }
    None
}

impl RedisServer {
    /// Starts a server on a free port and waits (at most 5 s) until it answers. The server
    /// that answers must be ours (`INFO server` gives its pid): another process may take the
    /// port between our probe of it and the server's bind, and then another port is tried.
    pub fn start() -> std::io::Result<RedisServer> {
        let mut last = None;
        for _ in 0..5 {
            let mut server = RedisServer {
                child: None,
                port: free_port()?,
            };
            match server.launch(false) {
                Ok(()) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("redis-server did not start")))
    }

    /// Starts a server on `port` (an error if the port is taken, also by another
    /// `redis-server`).
    pub fn on_port(port: u16) -> std::io::Result<RedisServer> {
        let mut server = RedisServer { child: None, port };
        server.launch(false)?;
        Ok(server)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        let _ = self.freeze(false);
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops (`SIGSTOP`) or resumes (`SIGCONT`) the server: a stopped server still accepts
    /// connections (the kernel does) but answers nothing, as a server stuck or far away.
    pub fn freeze(&self, frozen: bool) -> std::io::Result<()> {
        let Some(c) = &self.child else {
            return Err(std::io::Error::other("the server is not running"));
        };
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = Command::new("kill")
            .args([signal, &c.id().to_string()])
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!("kill {signal} failed")))
        }
    }

    /// Starts the server again on the same port (empty), waiting until it answers. An error
    /// if another process answers on the port instead.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.launch(true)
    }

    /// Starts the server on its port; `again`: if it exits at start (its port still held a
    /// moment by the server just killed), start it again until 5 s have passed.
    fn launch(&mut self, again: bool) -> std::io::Result<()> {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut child = spawn(self.port)?;
            // Wait until our server answers; a server that exited (the port still held by
            // one of ours just killed) is started again.
            loop {
                match server_pid(self.port) {
                    Some(pid) if pid == child.id() => {
                        self.child = Some(child);
                        return Ok(());
                    }
                    Some(pid) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(std::io::Error::other(format!(
                            "port {} is taken by another redis-server (pid {pid})",
                            self.port
                        )));
                    }
                    None => {}
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(std::io::Error::other(
                        "redis-server did not answer within 5 s",
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !again || Instant::now() >= deadline {
                return Err(std::io::Error::other(format!(
                    "redis-server exited at start (port {} taken?)",
                    self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
