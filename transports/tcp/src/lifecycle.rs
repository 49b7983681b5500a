//! Connections coming and going: connect, accept, the hello/accept/reject
//! exchange, and failure.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::time::Instant;

use uct::ucs::{Error, PeerMisbehaved, Result};
use uct::{AmSink, EpId};

use crate::conn::{Conn, ConnState, Waiter};
use crate::iface::{conn_tag, EpFailure, GlobalFlush, Notice, TcpIface};
use crate::slots::Slots;
use crate::sys;
use crate::wire::{self, Ctrl, CTRL_ACCEPT, CTRL_REJECT};

/// Connections accepted per listener event.
const ACCEPT_BUDGET: usize = 64;
/// Most connections per iface: a source id holds the slot index in 16 bits.
const MAX_CONNS: usize = 0xffff;

/// One connection fewer for an iface-wide flush to wait for.
pub(crate) fn global_done(
    flushes: &mut Slots<GlobalFlush>,
    notices: &mut VecDeque<Notice>,
    g: u32,
) {
    let done = match flushes.get_mut(g) {
        Some(f) => {
            f.left = f.left.saturating_sub(1);
            f.left == 0
        }
        None => false,
    };
    if done {
        if let Some(f) = flushes.remove(g) {
            notices.push_back(Notice::Completed(f.token, Ok(())));
        }
    }
}

impl TcpIface {
    fn deadline(&self) -> Option<Instant> {
        self.opts
            .conn_timeout
            .and_then(|t| Instant::now().checked_add(t))
    }

    /// Adds a connection to the table and to epoll; one not open yet gives
    /// up at its deadline.
    fn insert_conn(&mut self, conn: Conn) -> Result<u32> {
        if self.conns.len() >= MAX_CONNS {
            return Err(Error::NoMemory(format!(
                "tcp: {MAX_CONNS} connections on {}",
                self.info.dev_name
            )));
        }
        let open = conn.is_open();
        let (ci, gen) = self.conns.insert(conn);
        let tag = conn_tag(ci, gen);
        let res = match self.conns.get_mut(ci) {
            Some(c) => {
                c.tag = tag;
                c.register(&self.epoll)
            }
            None => Ok(()),
        };
        if let Err(e) = res {
            self.conns.remove(ci);
            return Err(e);
        }
        if !open {
            self.unopened += 1;
        }
        if let Some(d) = self.deadline().filter(|_| !open) {
            self.deadlines.push_back((d, ci, tag));
        }
        self.touch(ci);
        Ok(ci)
    }

    /// Removes a connection (closing its socket) and forgets it as the
    /// connection to its peer.
    fn remove_conn(&mut self, ci: u32) -> Option<Conn> {
        if let Some(k) = self.conns.get(ci).and_then(Conn::key) {
            self.forget_peer_conn(&k, ci);
        }
        let c = self.conns.remove(ci)?;
        if !c.is_open() {
            self.unopened -= 1;
        }
        Some(c)
    }

    /// Opens a connection to the iface listening at `addr`.
    pub(crate) fn connect(&mut self, addr: SocketAddr, key: wire::Key) -> Result<u32> {
        let fd = sys::tcp_socket(addr.ip())?;
        self.opts.apply(&fd)?;
        let connected =
            sys::connect(&fd, addr).map_err(|e| Error::io(format!("connect {addr}"), e))?;
        let mut c = Conn::connector(fd, addr, key, self.hello.len(), connected, &self.limits);
        if connected {
            c.send_hello(&self.hello)
                .map_err(|e| Error::io(format!("send to {addr}"), e))?;
        }
        let ci = self.insert_conn(c)?;
        self.set_peer_conn(&key, ci);
        Ok(ci)
    }

    pub(crate) fn accept_all(&mut self) {
        for _ in 0..ACCEPT_BUDGET {
            match sys::accept(&self.listener) {
                Ok(Some((fd, peer))) => {
                    if let Err(e) = self.add_accepted(fd, peer) {
                        tracing::warn!(%peer, error = %e, "tcp: refusing a connection");
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, dev = %self.info.dev_name, "tcp: accept failed");
                    break;
                }
            }
        }
    }

    fn add_accepted(&mut self, fd: OwnedFd, peer: SocketAddr) -> Result<()> {
        self.opts.apply(&fd)?;
        let c = Conn::acceptor(fd, peer, &self.limits);
        self.insert_conn(c).map(drop)
    }

    /// Handles a control frame; false when the connection is gone.
    pub(crate) fn on_ctrl(
        &mut self,
        ci: u32,
        ctrl: Ctrl,
        sink: &mut dyn AmSink,
        n: &mut usize,
    ) -> bool {
        let Some(c) = self.conns.get_mut(ci) else {
            return false;
        };
        match (ctrl, c.state) {
            (Ctrl::Hello(key), ConnState::AwaitHello) => self.on_hello(ci, key, sink, n),
            (Ctrl::Accept, ConnState::AwaitAccept) => {
                self.set_open(ci);
                *n += self.kick(ci, sink);
                self.conns.get(ci).is_some()
            }
            (Ctrl::Reject, ConnState::AwaitAccept) => {
                // The peer's connection to us wins; it will bring our
                // endpoints along when it arrives (or the deadline fails
                // them).
                c.state = ConnState::Rejected;
                c.close_socket();
                false
            }
            _ => {
                self.misbehaved(
                    ci,
                    PeerMisbehaved::Invalid {
                        what: "control frame",
                        detail: format!("{ctrl:?} unexpected"),
                    },
                );
                false
            }
        }
    }

    /// Opens a connection; the buffers of the handshake go back unless
    /// frames wait in them.
    fn set_open(&mut self, ci: u32) {
        if let Some(c) = self.conns.get_mut(ci) {
            if !c.is_open() {
                self.unopened -= 1;
            }
            c.state = ConnState::Open;
            c.rx.data_ok = true;
            c.release();
        }
    }

    /// Decides on a new connection from the iface `key`.
    fn on_hello(&mut self, ci: u32, key: wire::Key, sink: &mut dyn AmSink, n: &mut usize) -> bool {
        if let Some(c) = self.conns.get_mut(ci) {
            c.set_key(key);
        }
        if key == self.own_key {
            // Our own endpoint's connection: it stays the one in `peers`.
            return self.accept_conn(ci, None);
        }
        let other = self.peer_conn(&key);
        match other.map(|o| self.conns.get(o).map(|c| c.is_open())) {
            None | Some(None) => self.accept_conn(ci, Some(key)),
            Some(Some(true)) => self.reject_conn(ci),
            Some(Some(false)) if self.own_key < key => self.reject_conn(ci),
            Some(Some(false)) => {
                // Both sides connected at once and the peer's connection
                // wins: ours never sent a frame, so its queue moves over.
                if !self.accept_conn(ci, Some(key)) {
                    return false;
                }
                if let Some(o) = other {
                    self.migrate(o, ci);
                }
                *n += self.kick(ci, sink);
                self.conns.get(ci).is_some()
            }
        }
    }

    fn accept_conn(&mut self, ci: u32, key: Option<wire::Key>) -> bool {
        self.set_open(ci);
        let Some(c) = self.conns.get_mut(ci) else {
            return false;
        };
        let hdr = wire::frame_hdr(CTRL_ACCEPT, 0);
        if let Err(e) = c.tx.post_copy(c.open_fd(), &hdr, &[], 0) {
            let err = self.lost(ci, &e.to_string());
            self.fail_conn(ci, err);
            return false;
        }
        if let Some(k) = key {
            self.set_peer_conn(&k, ci);
        }
        true
    }

    fn reject_conn(&mut self, ci: u32) -> bool {
        if let Some(fd) = self.conns.get(ci).and_then(|c| c.raw_fd()) {
            // Best effort: the peer also learns from our own connection.
            let _ = sys::send(fd, &wire::frame_hdr(CTRL_REJECT, 0));
        }
        self.remove_conn(ci);
        false
    }

    /// Moves the endpoints and queued frames of `from` (never open) to `to`.
    fn migrate(&mut self, from: u32, to: u32) {
        let Some(mut old) = self.remove_conn(from) else {
            return;
        };
        for &e in old.eps.as_slice() {
            if let Some(ep) = self.eps.get_mut(e) {
                ep.conn = Some(to);
            }
        }
        let Some(c) = self.conns.get_mut(to) else {
            return;
        };
        c.tx.absorb(&mut old.tx);
        c.eps.append(&mut old.eps);
        let mut q = old.take_queues();
        if !q.is_idle() {
            let m = c.more();
            m.pending.append(&mut q.pending);
            m.waiters.append(&mut q.waiters);
        }
        self.touch(to);
    }

    /// The peer closed a connection.
    pub(crate) fn conn_eof(&mut self, ci: u32) {
        let Some(c) = self.conns.get(ci) else {
            return;
        };
        let idle = c.eps.is_empty() && !c.busy() && c.queues().is_none_or(|m| m.is_idle());
        if c.state == ConnState::AwaitHello || (idle && c.rx.at_boundary()) {
            // Nobody used it, or it ended between messages: not a failure,
            // but the layer above still learns that the source is gone.
            if let Some(c) = self.remove_conn(ci) {
                if c.rx.announced {
                    let err = Error::ConnectionLost {
                        peer: c.peer().to_string(),
                        reason: "closed by peer".into(),
                    };
                    self.notices.push_back(Notice::SrcFailed(c.src(), err));
                }
            }
            return;
        }
        let clean = c.rx.at_boundary();
        let reason = if clean {
            "closed by peer"
        } else {
            "closed in the middle of a message"
        };
        let err = self.lost(ci, reason);
        self.fail_conn(ci, err);
    }

    pub(crate) fn conn_timed_out(&mut self, ci: u32) {
        let Some(c) = self.conns.get(ci) else {
            return;
        };
        if c.state == ConnState::AwaitHello {
            self.remove_conn(ci);
            return;
        }
        let err = Error::TimedOut(format!("tcp: connection to {}", c.peer()));
        self.fail_conn(ci, err);
    }

    /// Fails a connection: closes it and queues the reports: the source's
    /// end (also after a clean close), every endpoint's
    /// failure, errors for in-flight operations, the pending tokens.
    pub(crate) fn fail_conn(&mut self, ci: u32, err: Error) {
        let Some(mut c) = self.remove_conn(ci) else {
            return;
        };
        tracing::debug!(peer = %c.peer(), error = %err, "tcp: connection failed");
        if let Some(t) = c.rx.take_direct() {
            self.notices.push_back(Notice::AmEnded(t, err.duplicate()));
        }
        // Reported even for a clean close between messages: the layer
        // above may be waiting for more pieces of a message from it.
        if c.rx.announced {
            self.notices
                .push_back(Notice::SrcFailed(c.src(), err.duplicate()));
        }
        for &e in c.eps.as_slice() {
            if let Some(ep) = self.eps.get_mut(e) {
                ep.conn = None;
                ep.failed = Some(Box::new(EpFailure {
                    err: err.duplicate(),
                    peer: c.peer(),
                }));
                self.notices
                    .push_back(Notice::EpFailed(EpId(e), err.duplicate()));
            }
        }
        if let Some((_, t)) = c.tx.abort() {
            self.notices
                .push_back(Notice::Completed(t, Err(err.duplicate())));
        }
        let q = c.take_queues();
        for t in q.puts.into_iter().filter_map(|p| p.token) {
            self.notices
                .push_back(Notice::Completed(t, Err(err.duplicate())));
        }
        for w in q.waiters {
            match w.waiter {
                Waiter::Ep(_, t) => self
                    .notices
                    .push_back(Notice::Completed(t, Err(err.duplicate()))),
                Waiter::Global(g) => global_done(&mut self.flushes, &mut self.notices, g),
            }
        }
        for (ep, t) in q.pending {
            self.notices.push_back(Notice::Ready(ep, t));
        }
    }
}
