//! The server's listening socket of the bootstrap connection.

use super::Bootstrap;
use crate::perf::error::{PerfError, Result};
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

/// A listening server socket.
#[derive(Debug)]
pub struct Listener {
    inner: TcpListener,
}

impl Listener {
    /// Listens on `port` of every IPv4 address, or of 127.0.0.1 only.
    /// Port 0 picks a free port.
    pub fn bind(port: u16, loopback_only: bool) -> Result<Listener> {
        let ip = if loopback_only {
            Ipv4Addr::LOCALHOST
        } else {
            Ipv4Addr::UNSPECIFIED
        };
        let inner = TcpListener::bind((ip, port))
            .map_err(|e| PerfError::bootstrap(format!("listen on port {port}"), e))?;
        Ok(Listener { inner })
    }

    /// The port listened on.
    pub fn port(&self) -> Result<u16> {
        self.inner
            .local_addr()
            .map(|a| a.port())
            .map_err(|e| PerfError::bootstrap("query listening port", e))
    }

    /// Waits for a client, for ever or until `timeout`.
    pub fn accept(&self, timeout: Option<Duration>) -> Result<Bootstrap> {
        let (stream, peer) = match timeout {
            None => self
                .inner
                .accept()
                .map_err(|e| PerfError::bootstrap("accept", e))?,
            Some(t) => self.accept_until(Instant::now() + t)?,
        };
        Bootstrap::from_stream(stream, peer)
    }

    fn accept_until(&self, deadline: Instant) -> Result<(TcpStream, SocketAddr)> {
        let nb = |on| {
            self.inner
                .set_nonblocking(on)
                .map_err(|e| PerfError::bootstrap("set listener mode", e))
        };
        nb(true)?;
        let result = loop {
            match self.inner.accept() {
                Ok(conn) => break Ok(conn),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        break Err(PerfError::Timeout("no client connected".into()));
                    }
                    thread::sleep(Duration::from_millis(5));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Err(PerfError::bootstrap("accept", e)),
            }
        };
        nb(false)?;
        result
    }
}
