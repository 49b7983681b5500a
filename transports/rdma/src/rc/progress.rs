//! Progress of the RC iface: completions, connection events, credits.

use crate::uct::ucs::{Error, PeerMisbehaved};
use crate::uct::{AmSink, EpId, SrcId, AM_ID_MAX};
use crate::verbs::{
    CmEvent, ConnParam, ConnReqId, QpId, QpInit, SendFlags, SendOp, SendWr, Sge, Wc, WcStatus,
};

use super::bufs::Owner;
use super::config::MAX_RX_QUEUE;
use super::iface::{EpState, Notice, Op, RcIface, RcSrc, Role, SRC_TX_QUEUE, WC_BATCH};
use super::ops::RECV_BIT;
use super::wire::{self, ConnRep, ConnReq};

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
    /// Everything `Iface::progress` does.
    pub(crate) fn progress_all(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
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
        while let Some(ev) = self.verbs.poll_cm() {
            n += 1;
            self.handle_cm(ev);
        }
        while let Some(ev) = self.verbs.poll_async() {
            n += 1;
            tracing::debug!(qp = ev.qp.0, kind = ?ev.kind, detail = %ev.detail, "rc: async event");
        }
        for qp in std::mem::take(&mut self.closing) {
            self.drop_qp(qp);
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
    /// failed).
    fn give_back_pending(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        let mut ready = std::mem::take(&mut self.ready);
        ready.sort_unstable();
        ready.dedup();
        for ep in ready {
            let Some(e) = self.eps.get_mut(ep) else {
                continue;
            };
            let room = match e.state {
                EpState::Failed(_) => usize::MAX,
                _ => e.credits.min(e.sq_free) as usize,
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

    fn handle_wc(&mut self, wc: &Wc, sink: &mut dyn AmSink) {
        if wc.wr_id & RECV_BIT != 0 {
            self.handle_recv(wc, sink);
            return;
        }
        let Some(op) = self.ops.remove(wc.wr_id as u32) else {
            return;
        };
        self.op_finished(&op);
        self.release_op_resources(&op);
        let mut err = wc.status.to_error(&self.tl_name);
        if let Some(e) = &err {
            let fatal = wc.status != WcStatus::WrFlushErr;
            let failed = match self.role_mut(op.qp) {
                Some(Role::Ep(ep)) => {
                    let ep = *ep;
                    match self.eps.get(ep).map(|e| &e.state) {
                        Some(EpState::Failed(f)) => Some(f.duplicate()),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let (Some(f), false) = (&failed, fatal) {
                err = Some(f.duplicate());
            } else if fatal {
                let e = e.duplicate();
                self.fail_qp(op.qp, e);
            }
        }
        self.group_done(op.group, err);
    }

    /// Gives a finished send's queue entry back.
    fn op_finished(&mut self, op: &Op) {
        match self.role_mut(op.qp) {
            Some(Role::Ep(ep)) => {
                let ep = *ep;
                if let Some(e) = self.eps.get_mut(ep) {
                    e.sq_free += 1;
                    e.in_flight = e.in_flight.saturating_sub(1);
                    if !e.pending.is_empty() {
                        self.ready.push(ep);
                    }
                }
            }
            Some(Role::Src(s)) => s.sq_free += 1,
            None => {}
        }
    }

    fn handle_recv(&mut self, wc: &Wc, sink: &mut dyn AmSink) {
        let buf = wc.wr_id as u32;
        let Some(qp) = wc.qp else {
            self.bufs.give(buf);
            return;
        };
        if self.bufs.owner(buf) != Owner::Rx(qp) {
            return;
        }
        if wc.status != WcStatus::Success {
            self.bufs.give(buf);
            if wc.status != WcStatus::WrFlushErr {
                let e = wc.status.to_error(&self.tl_name).unwrap_or(Error::Canceled);
                self.fail_qp(qp, e);
            }
            return;
        }
        // Not posted any more: the provider no longer writes it.
        self.bufs.set_owner(buf, Owner::Tx(qp));
        let len = wc.byte_len as usize;
        let quarter = (self.limits.rx_queue / 4).max(1);
        match self.role_mut(qp) {
            Some(Role::Src(_)) => {
                let data = self.bufs.slice(buf, len);
                match data.first() {
                    Some(&id) if id < AM_ID_MAX => {
                        sink.am(id, Self::src_of(qp), &data[1..]);
                    }
                    _ => {
                        let d = format!("message of {len} bytes with id {:?}", data.first());
                        self.bufs.give(buf);
                        self.fail_qp(qp, misbehaved(d));
                        return;
                    }
                }
                let grant = match self.role_mut(qp) {
                    Some(Role::Src(s)) => {
                        s.delivered = true;
                        s.to_return += 1;
                        (s.to_return >= quarter && s.sq_free > 0).then(|| {
                            let n = s.to_return;
                            s.to_return = 0;
                            s.sq_free -= 1;
                            n
                        })
                    }
                    _ => None,
                };
                self.bufs.set_owner(buf, Owner::Rx(qp));
                if let Err(e) = self.post_recv_buf(qp, buf) {
                    self.fail_qp(qp, e);
                    return;
                }
                if let Some(n) = grant {
                    self.send_grant(qp, n);
                }
            }
            Some(Role::Ep(ep)) => {
                let ep = *ep;
                let credits = wire::parse_grant(self.bufs.slice(buf, len));
                self.bufs.set_owner(buf, Owner::Rx(qp));
                let Some(c) = credits else {
                    self.bufs.give(buf);
                    self.fail_qp(qp, misbehaved(format!("{len}-byte message to an endpoint")));
                    return;
                };
                if let Err(e) = self.post_recv_buf(qp, buf) {
                    self.fail_qp(qp, e);
                    return;
                }
                if let Some(e) = self.eps.get_mut(ep) {
                    e.credits = e.credits.saturating_add(u32::from(c));
                    if !e.pending.is_empty() {
                        self.ready.push(ep);
                    }
                }
            }
            None => self.bufs.give(buf),
        }
    }

    /// Returns `n` credits to the peer of accepted queue pair `qp`.
    fn send_grant(&mut self, qp: QpId, n: u32) {
        let msg = wire::grant(n.min(u32::from(u16::MAX)) as u16);
        let sge = [Sge {
            addr: msg.as_ptr() as u64,
            len: msg.len() as u32,
            lkey: 0,
        }];
        let wr = SendWr {
            wr_id: 0,
            op: SendOp::Send,
            sges: &sge,
            flags: SendFlags::INLINE | SendFlags::SIGNALED,
        };
        let op = Op {
            qp,
            ep: None,
            buf: None,
            mr: None,
            group: None,
        };
        let idx = self.ops.insert(op);
        let wr = SendWr {
            wr_id: u64::from(idx),
            ..wr
        };
        // SAFETY: an inline send copies `msg` before returning.
        if let Err(e) = unsafe { self.verbs.post_send(qp, &wr) } {
            self.ops.remove(idx);
            self.fail_qp(qp, e);
        }
    }

    fn handle_cm(&mut self, ev: CmEvent) {
        match ev {
            CmEvent::ConnectRequest { req, param, .. } => self.on_request(req, &param),
            CmEvent::Established { qp, param } => {
                let Some(Role::Ep(ep)) = self.role_mut(qp) else {
                    return;
                };
                let ep = *ep;
                let seg = self.bufs.seg() as u32;
                let assumed = self.limits.rx_queue;
                match ConnRep::decode(&param.private_data) {
                    Ok(rep) if rep.seg == seg && rep.credits >= assumed => {
                        if let Some(e) = self.eps.get_mut(ep) {
                            e.state = EpState::Ready;
                            self.ready.push(ep);
                        }
                    }
                    Ok(rep) => {
                        let d = format!(
                            "buffer size {} (ours {seg}), {} credits",
                            rep.seg, rep.credits
                        );
                        self.fail_qp(qp, misbehaved(d));
                    }
                    Err(e) => self.fail_qp(qp, e),
                }
            }
            CmEvent::Rejected { qp, .. } => {
                let e = Error::Unreachable(format!("{}: connection rejected", self.tl_name));
                self.fail_qp(qp, e);
            }
            CmEvent::ConnectError { qp, reason } => {
                let e = Error::Unreachable(format!("{}: {reason}", self.tl_name));
                self.fail_qp(qp, e);
            }
            CmEvent::Disconnected { qp } => {
                let e = Error::ConnectionLost {
                    peer: self.tl_name.clone(),
                    reason: "disconnected".into(),
                };
                self.fail_qp(qp, e);
            }
        }
    }

    /// Accepts a peer's connection with a queue pair whose receives are
    /// posted, or rejects it.
    fn on_request(&mut self, req: ConnReqId, param: &ConnParam) {
        let seg = self.bufs.seg() as u32;
        let rx = match ConnReq::decode(&param.private_data) {
            Ok(r) if r.seg == seg && r.credits <= MAX_RX_QUEUE => {
                r.credits.max(self.limits.rx_queue)
            }
            other => {
                tracing::debug!(?other, "rc: connection request refused");
                if let Err(e) = self.verbs.reject(req, b"rucx rc: bad request") {
                    tracing::debug!(error = %e, "rc: reject failed");
                }
                return;
            }
        };
        let dattr = self.device.attr();
        let init = QpInit {
            pd: self.pd,
            send_cq: self.cq,
            recv_cq: self.cq,
            max_send_wr: SRC_TX_QUEUE,
            max_recv_wr: rx,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline: self.max_inline as u32,
            sq_sig_all: true,
        };
        let accept = ConnParam {
            private_data: ConnRep { credits: rx, seg }.encode(),
            ord: param.ird.min(self.limits.ord).min(dattr.max_qp_rd_atom),
            ird: param.ord.min(dattr.max_qp_init_rd_atom),
        };
        let qp = match self.verbs.create_qp(&init) {
            Ok(qp) => qp,
            Err(e) => {
                tracing::warn!(error = %e, "rc: no queue pair for a connection");
                let _ = self.verbs.reject(req, b"rucx rc: no resources");
                return;
            }
        };
        self.set_role(
            qp,
            Some(Role::Src(RcSrc {
                to_return: 0,
                sq_free: SRC_TX_QUEUE,
                delivered: false,
                closing: false,
            })),
        );
        let r = self
            .post_recvs(qp, rx)
            .and_then(|()| self.verbs.accept(req, qp, &accept));
        if let Err(e) = r {
            tracing::warn!(error = %e, "rc: connection not accepted");
            let _ = self.verbs.reject(req, b"rucx rc: no resources");
            self.drop_qp(qp);
        }
    }

    /// A queue pair failed: its endpoint fails (once), or its source ends
    /// and the queue pair is destroyed.
    pub(crate) fn fail_qp(&mut self, qp: QpId, error: Error) {
        match self.role_mut(qp) {
            Some(Role::Ep(ep)) => {
                let ep: EpId = *ep;
                if let Some(e) = self.eps.get_mut(ep) {
                    if !matches!(e.state, EpState::Failed(_)) {
                        tracing::debug!(ep = ep.0, error = %error, "rc: endpoint failed");
                        e.state = EpState::Failed(error.duplicate());
                        self.notices.push_back(Notice::EpFailed(ep, error));
                        self.ready.push(ep);
                    }
                }
            }
            Some(Role::Src(s)) if !s.closing => {
                s.closing = true;
                if s.delivered {
                    let src: SrcId = Self::src_of(qp);
                    self.notices.push_back(Notice::SrcFailed(src, error));
                }
                self.closing.push(qp);
            }
            _ => {}
        }
    }
}
