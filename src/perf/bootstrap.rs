//! The TCP connection between client and server that carries everything
//! but the test traffic: parameters, worker addresses, setup status,
//! barriers and aborts.
//!
//! # Frames
//!
//! Every message is a frame: kind (`u8`), payload length (`u32`,
//! little-endian, at most [`MAX_FRAME`]), payload.
//!
//! | kind | name | payload |
//! |---|---|---|
//! | 1 | params | the parameter block ([`TestParams::encode`]) |
//! | 2 | accept | `u8` 0 = accepted, 1 = rejected; then the reason (UTF-8) |
//! | 3 | wireup | [`Wireup`] |
//! | 4 | status | `u8` 0 = setup ok, 1 = failed; then the reason (UTF-8) |
//! | 5 | barrier | `u32` barrier number, counted from 0 on each side |
//! | 6 | abort | why the sender stops (UTF-8) |
//!
//! The wireup payload is described with [`Wireup`].
//!
//! Every read has a deadline, and while it waits it calls a progress
//! function (the worker's, so that the peer's operations can finish).
//!
//! [`TestParams::encode`]: super::params::TestParams::encode

use super::error::{PerfError, Result};
use super::runner::Watch;
use super::wire::Reader;
pub use super::wireup::Wireup;
pub use listener::Listener;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

/// Largest frame payload.
pub const MAX_FRAME: usize = 1 << 20;
/// Largest packed remote key in a wireup payload.
pub const MAX_RKEY: usize = 1 << 16;
/// How long a read waits before it calls the progress function again.
const POLL_SLICE: Duration = Duration::from_millis(1);
/// Deadline of writes.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a [`BootWatch`] looks at the connection.
const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// Frame kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// Test parameters, client to server.
    Params = 1,
    /// Server's answer to the parameters.
    Accept = 2,
    /// Worker address and friends.
    Wireup = 3,
    /// Outcome of the local setup.
    Status = 4,
    /// Barrier.
    Barrier = 5,
    /// The sender stops the test.
    Abort = 6,
}

impl FrameKind {
    fn from_u8(v: u8) -> Option<FrameKind> {
        Some(match v {
            1 => FrameKind::Params,
            2 => FrameKind::Accept,
            3 => FrameKind::Wireup,
            4 => FrameKind::Status,
            5 => FrameKind::Barrier,
            6 => FrameKind::Abort,
            _ => return None,
        })
    }
}

/// The connected bootstrap socket.
#[derive(Debug)]
pub struct Bootstrap {
    stream: TcpStream,
    peer: String,
    peer_addr: SocketAddr,
    local_addr: SocketAddr,
    barriers_sent: u32,
    barriers_seen: u32,
}

impl Bootstrap {
    pub(super) fn from_stream(stream: TcpStream, peer: SocketAddr) -> Result<Bootstrap> {
        let setup = |r: io::Result<()>| r.map_err(|e| PerfError::bootstrap("configure socket", e));
        setup(stream.set_nonblocking(false))?;
        setup(stream.set_nodelay(true))?;
        setup(stream.set_write_timeout(Some(WRITE_TIMEOUT)))?;
        setup(stream.set_read_timeout(Some(POLL_SLICE)))?;
        let local_addr = stream
            .local_addr()
            .map_err(|e| PerfError::bootstrap("query socket address", e))?;
        Ok(Bootstrap {
            stream,
            peer: peer.to_string(),
            peer_addr: peer,
            local_addr,
            barriers_sent: 0,
            barriers_seen: 0,
        })
    }

    /// Connects to `host:port`, retrying refused connections until
    /// `retry_for` has passed (the server may still be starting).
    pub fn connect(host: &str, port: u16, retry_for: Duration) -> Result<Bootstrap> {
        let what = format!("connect to {host}:{port}");
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|e| PerfError::bootstrap(format!("resolve {host}"), e))?
            .collect();
        if addrs.is_empty() {
            return Err(PerfError::bootstrap(
                format!("resolve {host}"),
                io::Error::new(ErrorKind::NotFound, "no address"),
            ));
        }
        let deadline = Instant::now() + retry_for;
        loop {
            let mut last = None;
            for addr in &addrs {
                let left = deadline.saturating_duration_since(Instant::now());
                let timeout = left.max(Duration::from_millis(100));
                match TcpStream::connect_timeout(addr, timeout) {
                    Ok(stream) => return Bootstrap::from_stream(stream, *addr),
                    Err(e) => last = Some(e),
                }
            }
            let err = last.unwrap_or_else(|| io::Error::from(ErrorKind::NotFound));
            let retry = matches!(
                err.kind(),
                ErrorKind::ConnectionRefused | ErrorKind::TimedOut | ErrorKind::WouldBlock
            );
            if !retry || Instant::now() >= deadline {
                return Err(PerfError::bootstrap(what, err));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The peer's socket address, for messages.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The peer's IP address: where its listener is (`--sockaddr`).
    pub fn peer_ip(&self) -> IpAddr {
        self.peer_addr.ip()
    }

    /// This side's IP address of the connection: the one the peer reached,
    /// hence the one to listen on (`--sockaddr`).
    pub fn local_ip(&self) -> IpAddr {
        self.local_addr.ip()
    }

    fn gone(&self, e: &io::Error) -> bool {
        matches!(
            e.kind(),
            ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
                | ErrorKind::UnexpectedEof
        )
    }

    /// Sends one frame.
    pub fn send(&mut self, kind: FrameKind, payload: &[u8]) -> Result<()> {
        if payload.len() > MAX_FRAME {
            return Err(PerfError::Params(format!(
                "bootstrap frame of {} bytes exceeds {MAX_FRAME}",
                payload.len()
            )));
        }
        let mut frame = Vec::with_capacity(5 + payload.len());
        frame.push(kind as u8);
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(payload);
        self.stream.write_all(&frame).map_err(|e| {
            if self.gone(&e) {
                PerfError::PeerGone(format!("connection to {} lost: {e}", self.peer))
            } else {
                PerfError::bootstrap(format!("send to {}", self.peer), e)
            }
        })
    }

    /// Reads exactly `buf.len()` bytes, calling `progress` between tries.
    fn read_full(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
        what: &str,
        progress: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.stream.read(&mut buf[filled..]) {
                Ok(0) => {
                    return Err(PerfError::PeerGone(format!(
                        "{} closed the bootstrap connection",
                        self.peer
                    )))
                }
                Ok(n) => filled += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    progress()?;
                    if Instant::now() >= deadline {
                        return Err(PerfError::Timeout(format!(
                            "no {what} from {} in time",
                            self.peer
                        )));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if self.gone(&e) => {
                    return Err(PerfError::PeerGone(format!(
                        "connection to {} lost: {e}",
                        self.peer
                    )))
                }
                Err(e) => return Err(PerfError::bootstrap(format!("read from {}", self.peer), e)),
            }
        }
        Ok(())
    }

    /// Reads the next frame, which must be of kind `expect` (an abort
    /// frame becomes [`PerfError::PeerAborted`]).
    pub fn recv(
        &mut self,
        expect: FrameKind,
        timeout: Duration,
        progress: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let what = format!("{expect:?} frame").to_lowercase();
        let mut header = [0u8; 5];
        self.read_full(&mut header, deadline, &what, progress)?;
        let mut r = Reader::new(&header, "frame header");
        let kind = r.u8()?;
        let len = r.u32()? as usize;
        if len > MAX_FRAME {
            return Err(PerfError::Protocol(format!(
                "frame of {len} bytes exceeds {MAX_FRAME}"
            )));
        }
        let kind = FrameKind::from_u8(kind)
            .ok_or_else(|| PerfError::Protocol(format!("unknown frame kind {kind}")))?;
        let mut payload = vec![0u8; len];
        self.read_full(&mut payload, deadline, &what, progress)?;
        if kind == FrameKind::Abort {
            return Err(PerfError::PeerAborted(
                String::from_utf8_lossy(&payload).into_owned(),
            ));
        }
        if kind != expect {
            return Err(PerfError::Protocol(format!(
                "expected a {expect:?} frame, got {kind:?}"
            )));
        }
        Ok(payload)
    }

    /// Sends an ok/failed answer (accept or status frame).
    pub fn send_outcome(&mut self, kind: FrameKind, outcome: Result<(), String>) -> Result<()> {
        let payload = match outcome {
            Ok(()) => vec![0u8],
            Err(reason) => {
                let mut p = vec![1u8];
                p.extend_from_slice(reason.as_bytes());
                p
            }
        };
        self.send(kind, &payload)
    }

    /// Reads an ok/failed answer: `Ok(Err(reason))` when the peer failed.
    pub fn recv_outcome(
        &mut self,
        kind: FrameKind,
        timeout: Duration,
        progress: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Result<(), String>> {
        let payload = self.recv(kind, timeout, progress)?;
        match payload.split_first() {
            Some((0, [])) => Ok(Ok(())),
            Some((1, reason)) => Ok(Err(String::from_utf8_lossy(reason).into_owned())),
            _ => Err(PerfError::Protocol(format!("malformed {kind:?} frame"))),
        }
    }

    /// Waits until the peer reaches its barrier of the same number.
    pub fn barrier(
        &mut self,
        timeout: Duration,
        progress: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let n = self.barriers_sent;
        self.send(FrameKind::Barrier, &n.to_le_bytes())?;
        self.barriers_sent += 1;
        let payload = self.recv(FrameKind::Barrier, timeout, progress)?;
        let mut r = Reader::new(&payload, "barrier");
        let got = r.u32()?;
        r.finish()?;
        if got != self.barriers_seen {
            return Err(PerfError::Protocol(format!(
                "peer is at barrier {got}, this side at {}",
                self.barriers_seen
            )));
        }
        self.barriers_seen += 1;
        Ok(())
    }

    /// Tells the peer the test stops, if the connection still works.
    pub fn abort(&mut self, reason: &str) {
        let _ = self.send(FrameKind::Abort, reason.as_bytes());
    }

    /// Fails if the peer closed the connection or sent an abort frame;
    /// leaves any other pending frame for the next read.
    pub fn check_alive(&mut self) -> Result<()> {
        let mut first = [0u8; 1];
        let peeked = self
            .stream
            .set_nonblocking(true)
            .and_then(|()| self.stream.peek(&mut first));
        let restore = self.stream.set_nonblocking(false);
        match peeked {
            Ok(0) => Err(PerfError::PeerGone(format!(
                "{} closed the bootstrap connection",
                self.peer
            ))),
            Ok(_) if first[0] == FrameKind::Abort as u8 => {
                // The payload follows at once; give it a moment.
                let err = self.recv(FrameKind::Abort, Duration::from_secs(2), &mut || Ok(()));
                Err(err
                    .err()
                    .unwrap_or_else(|| PerfError::PeerAborted(String::new())))
            }
            Ok(_) => restore.map_err(|e| PerfError::bootstrap("configure socket", e)),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                restore.map_err(|e| PerfError::bootstrap("configure socket", e))
            }
            Err(e) if self.gone(&e) => Err(PerfError::PeerGone(format!(
                "connection to {} lost: {e}",
                self.peer
            ))),
            Err(e) => Err(PerfError::bootstrap("check connection", e)),
        }
    }
}

/// A [`Watch`] on the bootstrap connection, looking at it at most every
/// 100 ms.
#[derive(Debug)]
pub struct BootWatch<'a> {
    boot: &'a mut Bootstrap,
    last: Instant,
}

impl<'a> BootWatch<'a> {
    /// Watches `boot`.
    pub fn new(boot: &'a mut Bootstrap) -> BootWatch<'a> {
        BootWatch {
            boot,
            last: Instant::now(),
        }
    }
}

impl Watch for BootWatch<'_> {
    fn check(&mut self, force: bool) -> Result<()> {
        let now = Instant::now();
        if !force && now.duration_since(self.last) < WATCH_INTERVAL {
            return Ok(());
        }
        self.last = now;
        self.boot.check_alive()
    }
}

#[path = "bootstrap_listener.rs"]
mod listener;

#[cfg(test)]
#[path = "bootstrap_tests.rs"]
mod tests;
