//! A socket connection manager: how two processes that know only a host
//! and port meet, as UCX's `uct_cm` (`tcp_sockcm`) serves `ucp_listener`.
//!
//! A [`CmListener`] listens on a socket address (IPv4 or IPv6; port 0 for
//! an ephemeral one). A client ([`CmClient::connect`]) connects and sends
//! a hello carrying its private data (a worker address, to the protocol
//! layer); the listener's [`CmListener::progress`] hands each complete
//! hello out as a [`CmRequest`], which the server accepts with private
//! data of its own or rejects, and the client's [`CmClient::poll`] gets
//! the answer. The socket carries the handshake only and is closed after
//! it: the endpoints it leads to are made by the transports.
//!
//! The listener is a port open to the network. A connection that sends
//! nothing within the timeout, sends anything but a well-formed hello
//! (see `wire`), closes early, or arrives while [`CmConfig::max_pending`]
//! handshakes are in progress is logged and closed; none of this stops the
//! listener from serving well-formed clients. Nothing blocks but the
//! client's connect and the small writes of the handshake, each bounded by
//! the timeout.

crate::ucs::internal_mod!(wire);

use crate::ucs::{Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};
use wire::Kind;

/// Limits of a connection manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmConfig {
    /// How long a handshake may take, each side.
    pub timeout: Duration,
    /// Most handshakes a listener has in progress at once; more are
    /// closed as they arrive.
    pub max_pending: usize,
}

impl Default for CmConfig {
    fn default() -> CmConfig {
        CmConfig {
            timeout: Duration::from_secs(10),
            max_pending: 1024,
        }
    }
}

/// A connection whose hello has not all arrived.
#[derive(Debug)]
struct Incoming {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    deadline: Instant,
}

/// Listens for clients (see the module documentation).
#[derive(Debug)]
pub struct CmListener {
    sock: TcpListener,
    incoming: Vec<Incoming>,
    cfg: CmConfig,
}

/// A client's complete hello: accept or reject it.
#[derive(Debug)]
pub struct CmRequest {
    stream: TcpStream,
    peer: SocketAddr,
    data: Vec<u8>,
    timeout: Duration,
}

/// Reads what is there of `s` into `buf`, up to `max` bytes in all.
/// `Ok(true)`: the peer closed its side.
fn read_some(s: &mut TcpStream, buf: &mut Vec<u8>, max: usize) -> std::io::Result<bool> {
    let mut chunk = [0u8; 4096];
    while buf.len() < max {
        let room = (max - buf.len()).min(chunk.len());
        match s.read(&mut chunk[..room]) {
            Ok(0) => return Ok(true),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

/// Writes handshake message `msg` to `s`, waiting at most `timeout`.
fn write_msg(s: &mut TcpStream, msg: &[u8], timeout: Duration) -> Result<()> {
    let r = s
        .set_nonblocking(false)
        .and_then(|()| s.set_write_timeout(Some(timeout.max(Duration::from_millis(1)))))
        .and_then(|()| s.write_all(msg))
        .and_then(|()| s.set_nonblocking(true));
    r.map_err(|e| Error::io("connection manager: write handshake", e))
}

impl CmListener {
    /// Listens on `addr`.
    pub fn bind(addr: SocketAddr, cfg: CmConfig) -> Result<CmListener> {
        let sock =
            TcpListener::bind(addr).map_err(|e| Error::io(format!("listen on {addr}"), e))?;
        sock.set_nonblocking(true)
            .map_err(|e| Error::io("listener: set non-blocking", e))?;
        Ok(CmListener {
            sock,
            incoming: Vec::new(),
            cfg,
        })
    }

    /// The address it listens on (with the port chosen, for port 0).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.sock
            .local_addr()
            .map_err(|e| Error::io("listener: local address", e))
    }

    /// The listening socket, readable when a client connects.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Handshakes in progress.
    pub fn pending(&self) -> usize {
        self.incoming.len()
    }

    /// Accepts new connections, reads their hellos, and appends each
    /// complete one to `out`; closes those that break the rules (module
    /// documentation). Returns how many connections it took or closed.
    pub fn progress(&mut self, out: &mut Vec<CmRequest>) -> usize {
        let mut n = 0;
        let now = Instant::now();
        loop {
            match self.sock.accept() {
                Ok((stream, peer)) => {
                    n += 1;
                    if self.incoming.len() >= self.cfg.max_pending {
                        tracing::warn!(
                            "listener: {} handshakes in progress; closing {peer}",
                            self.incoming.len()
                        );
                        continue;
                    }
                    if let Err(e) = stream.set_nonblocking(true) {
                        tracing::warn!("listener: {peer}: {e}; closing");
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    self.incoming.push(Incoming {
                        stream,
                        peer,
                        buf: Vec::new(),
                        deadline: now + self.cfg.timeout,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // A connection that died in the backlog, or no fds
                    // left: try again on the next call.
                    tracing::warn!("listener: accept: {e}");
                    break;
                }
            }
        }
        let mut i = 0;
        while i < self.incoming.len() {
            let step = step(&mut self.incoming[i], now);
            if let Step::Wait = step {
                i += 1;
                continue;
            }
            n += 1;
            let c = self.incoming.swap_remove(i);
            match step {
                Step::Hello(data) => out.push(CmRequest {
                    stream: c.stream,
                    peer: c.peer,
                    data,
                    timeout: self.cfg.timeout,
                }),
                Step::Close(why) => tracing::warn!("listener: {}: {why}; closing", c.peer),
                Step::Wait => {}
            }
        }
        n
    }
}

enum Step {
    Wait,
    Close(String),
    Hello(Vec<u8>),
}

/// Reads what arrived of `c`'s hello and judges it.
fn step(c: &mut Incoming, now: Instant) -> Step {
    let closed = match read_some(&mut c.stream, &mut c.buf, wire::HDR + wire::MAX_DATA + 1) {
        Ok(closed) => closed,
        Err(e) => return Step::Close(e.to_string()),
    };
    match wire::decode(&c.buf) {
        Err(e) => Step::Close(format!("bad handshake: {e}")),
        Ok(Some((Kind::Hello, data, used))) if used == c.buf.len() => Step::Hello(data.to_vec()),
        Ok(Some((Kind::Hello, ..))) => Step::Close("bytes after the hello".into()),
        Ok(Some((kind, ..))) => Step::Close(format!("a {kind:?} where a hello belongs")),
        Ok(None) if closed => Step::Close(format!("closed after {} bytes", c.buf.len())),
        Ok(None) if now >= c.deadline => Step::Close("no complete hello in time".into()),
        Ok(None) => Step::Wait,
    }
}

impl CmRequest {
    /// The client's address, as the listener saw it.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The client's private data.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The listener's end of the connection (`None` if the socket cannot
    /// tell).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.stream.local_addr().ok()
    }

    /// Accepts, answering with `data`; the socket closes.
    pub fn accept(mut self, data: &[u8]) -> Result<()> {
        let msg = wire::encode(Kind::Accept, data)
            .ok_or_else(|| Error::limit("connection manager data", data.len(), wire::MAX_DATA))?;
        write_msg(&mut self.stream, &msg, self.timeout)
    }

    /// Rejects: the client learns it; the socket closes.
    pub fn reject(mut self) -> Result<()> {
        let msg = wire::encode(Kind::Reject, &[]).unwrap_or_default();
        write_msg(&mut self.stream, &msg, self.timeout)
    }
}

/// A client's side of a handshake.
#[derive(Debug)]
pub struct CmClient {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    deadline: Instant,
}

impl CmClient {
    /// Connects to the listener at `addr` and sends `data`; waits at most
    /// `timeout` for the connection.
    pub fn connect(addr: SocketAddr, data: &[u8], timeout: Duration) -> Result<CmClient> {
        let msg = wire::encode(Kind::Hello, data)
            .ok_or_else(|| Error::limit("connection manager data", data.len(), wire::MAX_DATA))?;
        let mut stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| Error::io(format!("connect to listener {addr}"), e))?;
        let _ = stream.set_nodelay(true);
        write_msg(&mut stream, &msg, timeout)?;
        Ok(CmClient {
            stream,
            peer: addr,
            buf: Vec::new(),
            deadline: Instant::now() + timeout,
        })
    }

    /// The client's end of the connection and the listener's address
    /// (`None` if the socket cannot tell its own).
    pub fn addrs(&self) -> Option<(SocketAddr, SocketAddr)> {
        Some((self.stream.local_addr().ok()?, self.peer))
    }

    /// The server's answer once it is here: its private data if it
    /// accepted; [`Error::Rejected`] if it rejected; another error if the
    /// connection broke, the answer was malformed or did not come in time.
    pub fn poll(&mut self) -> Option<Result<Vec<u8>>> {
        let peer = self.peer.to_string();
        let closed = match read_some(&mut self.stream, &mut self.buf, wire::HDR + wire::MAX_DATA) {
            Ok(c) => c,
            Err(e) => return Some(Err(Error::io(format!("listener {peer}"), e))),
        };
        match wire::decode(&self.buf) {
            Err(what) => Some(Err(Error::PeerMisbehaved { peer, what })),
            Ok(Some((Kind::Accept, data, _))) => Some(Ok(data.to_vec())),
            Ok(Some((Kind::Reject, ..))) => {
                Some(Err(Error::Rejected(format!("by listener {peer}"))))
            }
            Ok(Some((Kind::Hello, ..))) => Some(Err(Error::PeerMisbehaved {
                peer,
                what: crate::ucs::PeerMisbehaved::Invalid {
                    what: "handshake answer",
                    detail: "a hello".into(),
                },
            })),
            Ok(None) if closed => Some(Err(Error::ConnectionLost {
                peer,
                reason: "closed before answering".into(),
            })),
            Ok(None) if Instant::now() >= self.deadline => Some(Err(Error::TimedOut(format!(
                "listener {peer} did not answer"
            )))),
            Ok(None) => None,
        }
    }
}

#[cfg(test)]
mod tests;
