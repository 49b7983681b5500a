//! `progress`: epoll events, reading and writing connections, reports.

use std::time::{Duration, Instant};

use uct::ucs::{Error, PeerMisbehaved};
use uct::{AmSink, EpId, Token};

use crate::conn::ConnState;
use crate::iface::{Notice, TcpIface, EVENT_BATCH, LISTENER_TAG};
use crate::rx::{Event, Filled, RxLimits};
use crate::tx::Flushed;

/// Most `recv` calls on one connection per event, so that one busy
/// connection cannot hold up the others.
const RECV_BUDGET: usize = 4;
/// How often connection deadlines are checked.
const TIMEOUT_CHECK: Duration = Duration::from_millis(10);

const EV_IN: u32 = libc::EPOLLIN as u32;
const EV_OUT: u32 = libc::EPOLLOUT as u32;
const EV_ERR: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;

impl TcpIface {
    pub(crate) fn run_progress(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut count = 0;
        if !self.ready.is_empty() {
            count += self.dispatch_ready(sink);
        }
        let n = match self.epoll.wait(&mut self.events, 0) {
            Ok(n) => n.min(EVENT_BATCH),
            Err(e) => {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    tracing::warn!(error = %e, dev = %self.info.dev_name, "tcp: epoll_wait failed");
                }
                0
            }
        };
        for i in 0..n {
            let ev = self.events[i];
            let (bits, tag) = (ev.events, ev.u64);
            if tag == LISTENER_TAG {
                self.accept_all();
            } else {
                count += self.on_conn(tag, bits, sink);
            }
        }
        if !self.deadlines.is_empty() {
            self.check_timeouts();
        }
        if !self.holders.is_empty() {
            self.tick_sweep();
        }
        while let Some(notice) = self.notices.pop_front() {
            match notice {
                Notice::EpFailed(ep, e) => sink.ep_failed(ep, e),
                Notice::SrcFailed(src, e) => sink.src_failed(src, e),
                Notice::Completed(token, r) => sink.completed(token, r),
                Notice::Ready(ep, token) => sink.pending_ready(ep, token),
                Notice::AmEnded(token, e) => sink.am_end(token, Err(e)),
            }
            count += 1;
        }
        count
    }

    /// Hands back the pending tokens of connections that can take work.
    fn dispatch_ready(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        for i in 0..self.ready.len() {
            let ci = self.ready[i];
            if let Some(c) = self.conns.get_mut(ci) {
                if c.is_free() {
                    while let Some((ep, token)) = c.pop_pending() {
                        sink.pending_ready(ep, token);
                        n += 1;
                    }
                }
            }
        }
        self.ready.clear();
        n
    }

    fn on_conn(&mut self, tag: u64, bits: u32, sink: &mut dyn AmSink) -> usize {
        let ci = tag as u32;
        self.visits += 1;
        let Some(c) = self.conns.get_mut(ci) else {
            return 0;
        };
        if c.tag != tag || c.raw_fd().is_none() {
            return 0;
        }
        if c.state == ConnState::Connecting {
            if bits & (EV_OUT | EV_ERR) == 0 {
                return 0;
            }
            if let Err(e) = c.finish_connect().and_then(|()| c.send_hello(&self.hello)) {
                let err = Error::io(format!("connect {}", c.peer()), e);
                self.fail_conn(ci, err);
                return 0;
            }
        }
        let mut n = 0;
        if bits & (EV_IN | EV_ERR) != 0 {
            n += self.read_conn(ci, sink);
        }
        if bits & EV_OUT != 0 {
            n += self.kick(ci, sink);
        } else if let Some(c) = self.conns.get_mut(ci) {
            if let Err(e) = c.sync_interest(&self.epoll) {
                let err = self.lost(ci, &e.to_string());
                self.fail_conn(ci, err);
            }
        }
        if self.conns.get(ci).is_some_and(|c| c.tag == tag) {
            self.touch(ci);
        }
        n
    }

    /// A connection-lost error for connection `ci`.
    pub(crate) fn lost(&self, ci: u32, reason: &str) -> Error {
        Error::ConnectionLost {
            peer: self
                .conns
                .get(ci)
                .map(|c| c.peer().to_string())
                .unwrap_or_default(),
            reason: reason.to_string(),
        }
    }

    /// Reads a connection and handles what came.
    fn read_conn(&mut self, ci: u32, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        for _ in 0..RECV_BUDGET {
            let Some(c) = self.conns.get_mut(ci) else {
                return n;
            };
            let Some(fd) = c.raw_fd() else {
                return n;
            };
            let more = match c.rx.fill(fd) {
                Ok(Filled::Data { more }) => more,
                Ok(Filled::WouldBlock) => break,
                Ok(Filled::Eof) => {
                    self.conn_eof(ci);
                    return n;
                }
                Err(e) => {
                    let err = self.lost(ci, &e.to_string());
                    self.fail_conn(ci, err);
                    return n;
                }
            };
            if !self.parse_conn(ci, sink, &mut n) || !more {
                break;
            }
        }
        n
    }

    /// Parses what a connection received; false when it is gone.
    fn parse_conn(&mut self, ci: u32, sink: &mut dyn AmSink, n: &mut usize) -> bool {
        let limits = RxLimits {
            max_frame: self.limits.max_frame,
            max_put: self.limits.max_put,
        };
        loop {
            let Some(c) = self.conns.get_mut(ci) else {
                return false;
            };
            let alive = match c.rx.parse(c.src(), limits, sink, n) {
                Ok(None) => return true,
                Ok(Some(Event::Ctrl(ctrl))) => self.on_ctrl(ci, ctrl, sink, n),
                Ok(Some(Event::PutDone(seq, status))) => self.on_put_done(ci, seq, status),
                Ok(Some(Event::PutAck(seq, status))) => self.on_put_ack(ci, seq, status, sink, n),
                Err(what) => {
                    self.misbehaved(ci, what);
                    return false;
                }
            };
            if !alive {
                return false;
            }
        }
    }

    /// Fails a connection whose peer broke the protocol.
    pub(crate) fn misbehaved(&mut self, ci: u32, what: PeerMisbehaved) {
        let peer = self.conns.get(ci).map(|c| c.peer().to_string());
        let err = Error::PeerMisbehaved {
            peer: peer.unwrap_or_default(),
            what,
        };
        tracing::warn!(error = %err, dev = %self.info.dev_name, "tcp: closing a connection");
        self.fail_conn(ci, err);
    }

    /// Writes what an open connection has buffered (or its hello) and
    /// reports a drained backlog.
    pub(crate) fn kick(&mut self, ci: u32, sink: &mut dyn AmSink) -> usize {
        let Some(c) = self.conns.get_mut(ci) else {
            return 0;
        };
        let res = match (c.state, c.raw_fd()) {
            (ConnState::AwaitAccept, _) => c.send_hello(&self.hello).map(|()| Flushed::Partial),
            (ConnState::Open, Some(fd)) => c.tx.flush_out(fd),
            _ => Ok(Flushed::Partial),
        };
        let res = res.and_then(|f| c.sync_interest(&self.epoll).map(|()| f));
        match res {
            Ok(Flushed::Partial) => 0,
            Ok(Flushed::Drained(owner)) => self.drained(ci, owner, sink),
            Err(e) => {
                let err = self.lost(ci, &e.to_string());
                self.fail_conn(ci, err);
                0
            }
        }
    }

    /// Writes the backlogs of the connections with sends held back by the
    /// cork (one `sendmsg` each), arming EPOLLOUT for what the socket does
    /// not take; the number of events reported.
    pub(crate) fn write_corked(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut conns = std::mem::take(&mut self.corked_conns);
        let mut n = 0;
        for &ci in &conns {
            n += self.kick(ci, sink);
        }
        conns.clear();
        self.corked_conns = conns;
        n
    }

    /// A connection's backlog is gone: completes its zero-copy send and
    /// the flushes with no put to wait for, sends the acknowledgements that
    /// waited, and hands back its pending tokens.
    fn drained(&mut self, ci: u32, owner: Option<(EpId, Token)>, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        if let Some((_, t)) = owner {
            sink.completed(t, Ok(()));
            n += 1;
        }
        n += self.settle(ci, sink);
        if !self.send_acks(ci) {
            return n;
        }
        let Some(c) = self.conns.get_mut(ci) else {
            return n;
        };
        while let Some((ep, t)) = c.pop_pending() {
            sink.pending_ready(ep, t);
            n += 1;
        }
        n
    }

    /// Fails the connections whose deadline passed before they opened,
    /// looking only at the deadlines that are due.
    fn check_timeouts(&mut self) {
        let now = Instant::now();
        if now < self.next_timeout_check {
            return;
        }
        self.next_timeout_check = now + TIMEOUT_CHECK;
        while let Some(&(due, ci, tag)) = self.deadlines.front() {
            if now < due {
                break;
            }
            self.deadlines.pop_front();
            self.visits += 1;
            // Its deadline is `due`; it holds while the connection is not
            // open.
            let expired = self
                .conns
                .get(ci)
                .is_some_and(|c| c.tag == tag && !c.is_open());
            if expired {
                self.conn_timed_out(ci);
            }
        }
    }
}
