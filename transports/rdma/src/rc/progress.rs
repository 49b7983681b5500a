//! Progress of the RC iface: completions, connection events, credits.

use crate::verbs::{
    AsyncEventKind, CmEvent, QpFatal, QpId, SendFlags, SendOp, SendWr, Sge, Wc, WcStatus,
};
use uct::ucs::{EndpointCause, Error, PeerMisbehaved};
use uct::{AmSink, AM_ID_MAX};

use super::bufs::Owner;
use super::config::MAX_RX_QUEUE;
use super::credits::{ACK, COUNT};
use super::iface::{Notice, Op, RcIface, WC_BATCH};
use super::ops::RECV_BIT;
use super::wire::{self, ConnRep, GRANT, HDR};

fn misbehaved(detail: String) -> Error {
    Error::PeerMisbehaved {
        peer: "rc peer".into(),
        what: PeerMisbehaved::Invalid {
            what: "rc message",
            detail,
        },
    }
}

impl RcIface {
    /// Handles the provider's asynchronous events; returns how many.
    ///
    /// Runs before completions and connection events are handled, and
    /// again before an error completion fails a connection: the Terminate
    /// that ended a queue pair names the cause better than the error
    /// completions and the disconnection that follow it, and so does a
    /// fatal event that says why the connection broke (kept for them).
    ///
    /// `now`: look for new events now ([`Verbs::poll_async_now`]), where a
    /// failure needs its cause; otherwise as the provider sees fit.
    ///
    /// [`Verbs::poll_async_now`]: crate::Verbs::poll_async_now
    fn drain_async(&mut self, now: bool) -> usize {
        let mut n = 0;
        loop {
            let ev = if now {
                self.verbs.poll_async_now()
            } else {
                self.verbs.poll_async()
            };
            let Some(ev) = ev else {
                break;
            };
            n += 1;
            tracing::debug!(qp = ev.qp.0, kind = ?ev.kind, detail = %ev.detail, "rc: async event");
            if let Some(t) = ev.terminate {
                let cause = EndpointCause::transport(t);
                let e = Error::endpoint_failed(self.info.tl_name.clone(), cause);
                self.fail_conn(ev.qp, e);
            } else if ev.kind == AsyncEventKind::QpFatal {
                if let Some(c) = self.conn_mut(ev.qp) {
                    c.fatal.get_or_insert(ev.detail);
                }
            }
        }
        n
    }

    /// The failure of connection `qp` that an error completion of
    /// `status` (or, with none, its disconnection) reports: the queue
    /// pair's fatal event when there was one, else the status's error
    /// (or `None`).
    fn conn_failure(&self, qp: QpId, status: Option<WcStatus>) -> Option<Error> {
        let tl = &self.info.tl_name;
        let fatal = self.conn(qp).and_then(|c| c.fatal.clone());
        match (fatal, status) {
            (Some(detail), None | Some(WcStatus::FatalErr)) => {
                let cause = EndpointCause::transport(QpFatal { detail, status });
                Some(Error::endpoint_failed(tl.clone(), cause))
            }
            (_, Some(s)) => s.to_error(tl),
            (None, None) => None,
        }
    }

    /// Everything `Iface::progress` does.
    pub(crate) fn progress_all(&mut self, sink: &mut dyn AmSink) -> usize {
        // Connections that failed before this call: their filled receives
        // are in the completion queue, drained below.
        let due = std::mem::take(&mut self.releasing);
        let mut n = self.drain_async(false);
        loop {
            let mut wcs = std::mem::take(&mut self.wcs);
            let k = self.verbs.poll_cq(self.cq, &mut wcs);
            for wc in &wcs[..k] {
                self.handle_wc(wc, sink);
            }
            self.wcs = wcs;
            n += k;
            if k < WC_BATCH {
                break;
            }
        }
        self.pool.release(due);
        while let Some(ev) = self.verbs.poll_cm() {
            n += 1;
            self.handle_cm(ev);
        }
        if !self.closing.is_empty() {
            self.reap_conns();
        }
        while let Some(notice) = self.notices.pop_front() {
            n += 1;
            match notice {
                Notice::EpFailed(ep, e) => sink.ep_failed(ep, e),
                Notice::SrcFailed(src, e) => sink.src_failed(src, e),
                Notice::Completed(t, r) => sink.completed(t, r),
            }
        }
        if !self.ready.is_empty() {
            n += self.give_back_pending(sink);
        }
        n
    }

    /// Hands pending tokens back to endpoints that can take work (or
    /// failed): as many as their connection has credits and send queue
    /// entries for.
    fn give_back_pending(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        let mut ready = std::mem::take(&mut self.ready);
        ready.sort_unstable();
        ready.dedup();
        for ep in ready {
            let Some(e) = self.eps.get(ep) else {
                continue;
            };
            let room = if e.failed.is_some() {
                usize::MAX
            } else if e.switch_to.is_some() {
                0
            } else {
                self.conn(e.conn)
                    .map_or(0, |c| c.cr.credits.min(c.sq_free) as usize)
            };
            let Some(e) = self.eps.get_mut(ep) else {
                continue;
            };
            for _ in 0..room {
                let Some(t) = e.pending.pop_front() else {
                    break;
                };
                sink.pending_ready(ep, t);
                n += 1;
            }
        }
        n
    }

    /// Endpoints on `qp` with pending tokens get a chance to send.
    fn wake_eps(&mut self, qp: QpId) {
        let eps = &self.eps;
        self.pending_eps
            .retain(|&id| eps.get(id).is_some_and(|e| !e.pending.is_empty()));
        for &id in &self.pending_eps {
            if self.eps.get(id).is_some_and(|e| e.conn == qp) {
                self.ready.push(id);
            }
        }
    }

    fn handle_wc(&mut self, wc: &Wc, sink: &mut dyn AmSink) {
        if wc.wr_id & RECV_BIT != 0 {
            self.handle_recv(wc, sink);
            return;
        }
        let Some(op) = self.ops.remove(wc.wr_id as u32) else {
            return;
        };
        if let Some(c) = self.conn_mut(op.qp) {
            c.sq_free += 1;
            if c.cr.to_return > 0 {
                self.maybe_grant(op.qp);
            }
        }
        if let Some(ep) = op.ep {
            if let Some(e) = self.eps.get_mut(ep) {
                e.in_flight = e.in_flight.saturating_sub(1);
                if !e.pending.is_empty() {
                    self.ready.push(ep);
                }
            }
        }
        if wc.status == WcStatus::Success {
            self.deliver_atomic(&op);
        }
        self.release_op_resources(&op);
        if op.switch {
            if let Some(ep) = op.ep {
                self.finish_move(ep);
            }
        }
        let mut err = wc.status.to_error(&self.info.tl_name);
        if err.is_some() {
            // An operation flushed after its endpoint failed reports why.
            let failed = op
                .ep
                .and_then(|ep| self.eps.get(ep))
                .and_then(|e| e.failed.as_ref().map(Error::duplicate));
            if let (Some(f), true) = (failed, wc.status == WcStatus::WrFlushErr) {
                err = Some(f);
            } else if wc.status != WcStatus::WrFlushErr {
                self.drain_async(true);
                let e = self.conn_failure(op.qp, Some(wc.status));
                let e = e.unwrap_or(Error::Canceled);
                err = Some(e.duplicate());
                self.fail_conn(op.qp, e);
            }
        }
        self.group_done(op.group, err);
    }

    fn handle_recv(&mut self, wc: &Wc, sink: &mut dyn AmSink) {
        let buf = wc.wr_id as u32;
        if self.rx.owner(buf) != Owner::Srq {
            return;
        }
        let qp = match wc.qp {
            Some(qp) if wc.status == WcStatus::Success => qp,
            other => {
                // Flushed from a failed queue pair: back to the shared queue.
                self.repost(buf);
                if let Some(qp) = other {
                    if wc.status != WcStatus::WrFlushErr {
                        self.drain_async(true);
                        let e = self.conn_failure(qp, Some(wc.status));
                        self.fail_conn(qp, e.unwrap_or(Error::Canceled));
                    }
                }
                return;
            }
        };
        if self.conn(qp).is_none_or(|c| c.failed) {
            self.repost(buf);
            return;
        }
        let len = wc.byte_len as usize;
        // Not posted any more: the provider no longer writes it until it
        // is reposted below.
        let Some((id, field)) = wire::parse_header(self.rx.slice(buf, len)) else {
            self.repost(buf);
            self.fail_conn(qp, misbehaved(format!("{len}-byte message")));
            return;
        };
        if id >= AM_ID_MAX && id != GRANT {
            self.repost(buf);
            self.fail_conn(qp, misbehaved(format!("message id {id}")));
            return;
        }
        let Some(c) = self.conn_mut(qp) else {
            self.repost(buf);
            return;
        };
        let arrival = match c.cr.arrived(id == GRANT, field) {
            Ok(a) => a,
            Err(v) => {
                self.repost(buf);
                self.fail_conn(qp, misbehaved(v.to_string()));
                return;
            }
        };
        if id != GRANT {
            let src = c.src;
            if let Some(s) = self.srcs.get_mut(&src.0) {
                s.delivered = true;
            }
            sink.am(id, src, &self.rx.slice(buf, len)[HDR..]);
        }
        self.repost(buf);
        // Endpoints wait for credits only when there were none (those
        // waiting for send queue entries are woken by completions).
        if field & COUNT > 0 && arrival.was_starved {
            self.wake_eps(qp);
        }
        if id != GRANT {
            self.returned(qp, arrival.last);
        } else if field & ACK != 0 {
            self.maybe_grant(qp);
        }
    }

    /// The receive of a message from the peer of `qp` is posted again:
    /// its credit can go back, with more if the peer ran dry (`dry`) and
    /// the pool has room.
    fn returned(&mut self, qp: QpId, dry: bool) {
        let limit = self.limits.rx_queue;
        let Some(c) = self.conn_mut(qp) else {
            return;
        };
        c.cr.reposted();
        if dry {
            let want = c.cr.growth(limit);
            if want > 0 {
                let got = self.commit_rx_upto(want);
                if let Some(c) = self.conn_mut(qp) {
                    c.cr.grow(got);
                }
            }
        }
        self.maybe_grant(qp);
    }

    /// Sends a grant to the peer of `qp` if more than half of its window
    /// waits to be returned, or it has nothing left, and a grant and a
    /// send queue entry are free. Runs after every message and send
    /// completion on `qp`, so a grant held back for want of either goes
    /// once it can.
    pub(crate) fn maybe_grant(&mut self, qp: QpId) {
        let Some(c) = self.conn_mut(qp) else {
            return;
        };
        if c.failed || c.sq_free == 0 || !c.cr.wants_grant() {
            return;
        }
        if let Some(field) = c.cr.grant() {
            c.sq_free -= 1;
            self.send_grant(qp, field);
        }
    }

    /// Sends a grant with credit field `field` to the peer of `qp`.
    fn send_grant(&mut self, qp: QpId, field: u16) {
        let msg = wire::header(GRANT, field);
        let sge = [Sge {
            addr: msg.as_ptr() as u64,
            len: msg.len() as u32,
            lkey: 0,
        }];
        let op = Op {
            qp,
            ep: None,
            switch: false,
            buf: None,
            mr: None,
            group: None,
            amo: None,
        };
        let idx = self.ops.insert(op);
        let wr = SendWr {
            wr_id: u64::from(idx),
            op: SendOp::Send,
            sges: &sge,
            flags: SendFlags::INLINE | SendFlags::SIGNALED,
        };
        // SAFETY: an inline send copies `msg` before returning.
        if let Err(e) = unsafe { self.verbs.post_send(qp, &wr) } {
            self.ops.remove(idx);
            if let Some(c) = self.conn_mut(qp) {
                c.sq_free += 1;
                c.cr.grant_unsent(field);
            }
            self.fail_conn(qp, e);
        }
    }

    fn handle_cm(&mut self, ev: CmEvent) {
        match ev {
            CmEvent::ConnectRequest { req, param, .. } => self.on_request(req, &param),
            CmEvent::Established { qp, param } => {
                let Some(c) = self.conn(qp) else {
                    return;
                };
                if c.initiated {
                    let seg = self.bufs.seg() as u32;
                    let asked = self.limits.rx_window;
                    match ConnRep::decode(&param.private_data) {
                        Ok(rep)
                            if rep.seg == seg
                                && rep.credits >= asked
                                && (asked..=MAX_RX_QUEUE).contains(&rep.max_window) =>
                        {
                            if let Some(c) = self.conn_mut(qp) {
                                c.cr.max_credits = rep.max_window;
                            }
                        }
                        Ok(rep) => {
                            let d = format!(
                                "buffer size {} (ours {seg}), {} receives (asked {asked})",
                                rep.seg, rep.credits
                            );
                            self.fail_conn(qp, misbehaved(d));
                            return;
                        }
                        Err(e) => {
                            self.fail_conn(qp, e);
                            return;
                        }
                    }
                }
                self.wake_eps(qp);
            }
            CmEvent::Rejected { qp, .. } => {
                let e = Error::Unreachable(format!("{}: connection rejected", self.info.tl_name));
                self.fail_conn(qp, e);
            }
            CmEvent::ConnectError { qp, reason } => {
                let e = Error::Unreachable(format!("{}: {reason}", self.info.tl_name));
                self.fail_conn(qp, e);
            }
            CmEvent::Disconnected { qp } => {
                // The fatal event that says why may have come since the
                // last drain (the provider progresses as it is polled).
                self.drain_async(true);
                let e = self
                    .conn_failure(qp, None)
                    .unwrap_or(Error::ConnectionLost {
                        peer: self.info.tl_name.clone(),
                        reason: "disconnected".into(),
                    });
                self.fail_conn(qp, e);
            }
        }
    }
}
