//! A throwaway `redis-server` on a free loopback port, shared by `examples/fleet.rs` and
//! `tests/redis_fleet.rs` (`#[path = ...] mod redis_server;` in each): no persistence, killed
//! when dropped.

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

/// Whether the server on `port` answers `PING` (within 200 ms).
fn pings(port: u16) -> bool {
    let Ok(mut s) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
    else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

impl RedisServer {
    /// Starts a server on a free port and waits (at most 5 s) until it answers `PING`.
    pub fn start() -> std::io::Result<RedisServer> {
        let mut server = RedisServer {
            child: None,
            port: free_port()?,
        };
        server.restart()?;
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

    /// Starts the server again on the same port (empty), waiting until it answers.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut child = spawn(self.port)?;
            // Wait for PING; a server that exited (the port still held) is started again.
            loop {
                if pings(self.port) {
                    self.child = Some(child);
                    return Ok(());
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(std::io::Error::other(
                        "redis-server did not answer PING within 5 s",
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if Instant::now() >= deadline {
                return Err(std::io::Error::other("redis-server exited at start"));
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
