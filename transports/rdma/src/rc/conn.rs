//! Connections of the RC iface: one queue pair per pair of ifaces, used in
//! both directions and shared by every endpoint between them.
//!
//! An endpoint to a peer iface uses the connection that already exists to
//! it (one this iface opened, or one the peer opened to us); otherwise it
//! opens one. When both sides open one at once, both keep the connection
//! opened by the iface with the smaller listening address: an endpoint
//! that was sending on the other one first waits for a zero-length READ
//! on it, so everything it sent there has arrived before it sends on the
//! winner (the peer's single completion queue keeps that order), then
//! moves. The losing connection stays, idle.

use std::net::SocketAddr;

use crate::verbs::{ConnParam, ConnReqId, QpId, QpInit};
use uct::ucs::{EndpointCause, Error, Result};
use uct::EpId;

use super::bufs::Owner;
use super::config::MAX_RX_QUEUE;
use super::iface::{Conn, Notice, RcEp, RcIface};
use super::ops::RECV_BIT;
use super::wire::{ConnRep, ConnReq, RESERVE};

/// The order of listening addresses that settles simultaneous
/// connections: by IP, then port (the same on both sides).
fn addr_key(a: SocketAddr) -> (std::net::IpAddr, u16) {
    (a.ip(), a.port())
}

impl RcIface {
    /// A queue pair for a connection whose peer may send `peer_sends`
    /// messages before its first grant, with the receives for them (and
    /// the grant reserve) posted.
    fn new_qp(&mut self, peer_sends: u32) -> Result<QpId> {
        let dattr = self.device.attr();
        let init = QpInit {
            pd: self.pd,
            send_cq: self.cq,
            recv_cq: self.cq,
            max_send_wr: self.limits.tx_queue,
            max_recv_wr: peer_sends + RESERVE,
            max_send_sge: (self.info.attr.max_iov as u32 + 1).min(dattr.max_sge),
            max_recv_sge: 1,
            max_inline: self.max_inline as u32,
            sq_sig_all: true,
        };
        let qp = self.verbs.create_qp(&init)?;
        if let Err(e) = self.post_recvs(qp, peer_sends + RESERVE) {
            self.drop_qp(qp, Error::Canceled);
            return Err(e);
        }
        Ok(qp)
    }

    fn new_conn(&mut self, peer: SocketAddr, initiated: bool, credits: u32) -> Conn {
        Conn {
            peer,
            initiated,
            failed: false,
            fatal: None,
            credits,
            max_credits: credits,
            to_return: 0,
            sq_free: self.limits.tx_queue,
            src: self.src_for(peer),
        }
    }

    /// `Iface::ep_create`: an endpoint on the connection to the remote
    /// iface, opening one if there is none.
    pub(crate) fn create_ep(&mut self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<EpId> {
        let remote = uct::ip_addr::unpack(dev_addr, iface_addr)
            .filter(|r| self.local.reaches(r))
            .ok_or_else(|| Error::Unreachable(format!("{}: address", self.info.tl_name)))?;
        let qp = match self.peers.get(&remote.addr) {
            Some(&qp) if self.conn(qp).is_some_and(|c| !c.failed) => qp,
            _ => self.open_conn(remote.addr)?,
        };
        let ep = self.eps.insert(RcEp {
            conn: qp,
            switch_to: None,
            failed: None,
            pending: Default::default(),
            in_flight: 0,
        })?;
        Ok(ep)
    }

    /// Connects a new queue pair to the iface listening at `peer`.
    fn open_conn(&mut self, peer: SocketAddr) -> Result<QpId> {
        let rx = self.limits.rx_queue;
        let qp = self.new_qp(rx)?;
        let dattr = self.device.attr();
        let param = ConnParam {
            private_data: ConnReq {
                seg: self.bufs.seg() as u32,
                uuid: self.worker_uuid,
                credits: rx,
                posted: rx,
                listen: self.listen,
            }
            .encode(),
            ord: self.limits.ord.min(dattr.max_qp_rd_atom),
            ird: dattr.max_qp_init_rd_atom,
        };
        if let Err(e) = self.verbs.connect(qp, peer, &param) {
            self.drop_qp(qp, Error::Canceled);
            return Err(e);
        }
        // We send up to the receives we ask the peer to post.
        let conn = self.new_conn(peer, true, rx);
        self.set_conn(qp, Some(conn));
        self.peers.insert(peer, qp);
        Ok(qp)
    }

    /// A peer's connection request: accepted on a queue pair whose
    /// receives are posted, or rejected.
    pub(crate) fn on_request(&mut self, req: ConnReqId, param: &ConnParam) {
        let seg = self.bufs.seg() as u32;
        let r = match ConnReq::decode(&param.private_data) {
            Ok(r) if r.seg == seg && r.credits <= MAX_RX_QUEUE && r.posted <= MAX_RX_QUEUE => r,
            other => {
                tracing::debug!(?other, "rc: connection request refused");
                if let Err(e) = self.verbs.reject(req, b"rucx rc: bad request") {
                    tracing::debug!(error = %e, "rc: reject failed");
                }
                return;
            }
        };
        let rx = r.credits.max(self.limits.rx_queue);
        let dattr = self.device.attr();
        let accept = ConnParam {
            private_data: ConnRep { credits: rx, seg }.encode(),
            ord: param.ird.min(self.limits.ord).min(dattr.max_qp_rd_atom),
            ird: param.ord.min(dattr.max_qp_init_rd_atom),
        };
        let accepted = self
            .new_qp(rx)
            .and_then(|qp| match self.verbs.accept(req, qp, &accept) {
                Ok(()) => Ok(qp),
                Err(e) => {
                    self.drop_qp(qp, Error::Canceled);
                    Err(e)
                }
            });
        let qp = match accepted {
            Ok(qp) => qp,
            Err(e) => {
                tracing::warn!(error = %e, "rc: connection not accepted");
                let _ = self.verbs.reject(req, b"rucx rc: no resources");
                return;
            }
        };
        let conn = self.new_conn(r.listen, false, r.posted);
        self.set_conn(qp, Some(conn));
        let ours = self.peers.get(&r.listen).copied();
        match ours {
            Some(q0) if self.conn(q0).is_some_and(|c| !c.failed) => {
                // Both sides connected at once: the connection opened by the
                // smaller address wins.
                if addr_key(r.listen) < addr_key(self.listen) {
                    self.peers.insert(r.listen, qp);
                    self.move_eps(q0, qp);
                }
            }
            _ => {
                self.peers.insert(r.listen, qp);
            }
        }
    }

    /// Moves the endpoints sending on `from` to `to`, each once what it
    /// sent on `from` has arrived.
    fn move_eps(&mut self, from: QpId, to: QpId) {
        let movers: Vec<EpId> = self
            .eps
            .iter()
            .filter(|(_, e)| e.conn == from && e.failed.is_none())
            .map(|(id, _)| id)
            .collect();
        for ep in movers {
            if let Some(e) = self.eps.get_mut(ep) {
                e.switch_to = Some(to);
            }
            if self.post_flush_read(from, Some(ep), None, true).is_err() {
                self.finish_move(ep);
            }
        }
    }

    /// Ends an endpoint's move: it sends on its new connection from now on.
    pub(crate) fn finish_move(&mut self, ep: EpId) {
        let Some(e) = self.eps.get_mut(ep) else {
            return;
        };
        if let Some(to) = e.switch_to.take() {
            e.conn = to;
        }
        let (conn, ok) = (e.conn, e.failed.is_none());
        let failed = self.conn(conn).is_none_or(|c| c.failed);
        if failed && ok {
            let err =
                Error::endpoint_failed(self.info.tl_name.clone(), EndpointCause::ConnectionLost);
            self.fail_ep(ep, err);
        }
        self.ready.push(ep);
    }

    /// `Iface::ep_destroy`. The connection stays for other endpoints and
    /// later ones. The endpoint's operations still with the provider may
    /// still read or write the caller's memory, so they report `Canceled`
    /// when the provider is done with them, not before.
    pub(crate) fn destroy_ep(&mut self, ep: EpId) {
        if self.eps.remove(ep).is_none() {
            return;
        }
        for i in self.ops.find(|op| op.ep == Some(ep)) {
            let Some(op) = self.ops.get_mut(i) else {
                continue;
            };
            op.ep = None;
            if let Some(g) = op.group.and_then(|g| self.groups.get_mut(g)) {
                g.error = Some(Error::Canceled);
            }
        }
        self.reap_conns();
    }

    /// Fails one endpoint (once): its pending tokens go back.
    pub(crate) fn fail_ep(&mut self, ep: EpId, error: Error) {
        if let Some(e) = self.eps.get_mut(ep) {
            if e.failed.is_none() {
                tracing::debug!(ep = ep.0, error = %error, "rc: endpoint failed");
                e.failed = Some(error.duplicate());
                self.notices.push_back(Notice::EpFailed(ep, error));
                self.ready.push(ep);
            }
        }
    }

    /// A connection failed: its endpoints fail, its source ends, and it is
    /// destroyed once no endpoint uses it.
    pub(crate) fn fail_conn(&mut self, qp: QpId, error: Error) {
        let Some(c) = self.conn_mut(qp) else {
            return;
        };
        if c.failed {
            return;
        }
        c.failed = true;
        let (peer, src) = (c.peer, c.src);
        if self.peers.get(&peer) == Some(&qp) {
            self.peers.remove(&peer);
        }
        self.src_conn_ended(src, &error);
        let users: Vec<EpId> = self
            .eps
            .iter()
            .filter(|(_, e)| e.conn == qp || e.switch_to == Some(qp))
            .map(|(id, _)| id)
            .collect();
        for ep in users {
            self.fail_ep(ep, error.duplicate());
        }
        self.closing.push(qp);
    }

    /// Destroys failed connections no endpoint uses any more.
    pub(crate) fn reap_conns(&mut self) {
        let closing = std::mem::take(&mut self.closing);
        for qp in closing {
            let used = self
                .eps
                .iter()
                .any(|(_, e)| e.conn == qp || e.switch_to == Some(qp));
            if used {
                self.closing.push(qp);
            } else {
                self.drop_qp(qp, Error::Canceled);
            }
        }
    }

    /// Posts `n` receive buffers on `qp`.
    pub(crate) fn post_recvs(&mut self, qp: QpId, n: u32) -> Result<()> {
        for _ in 0..n {
            let buf = self
                .bufs
                .take(Owner::Rx(qp))
                .ok_or_else(|| Error::NoMemory("rc: receive buffers".into()))?;
            self.post_recv_buf(qp, buf)?;
        }
        Ok(())
    }

    /// Posts buffer `buf` (owned for `qp`) as a receive.
    pub(crate) fn post_recv_buf(&mut self, qp: QpId, buf: u32) -> Result<()> {
        let sge = [self.bufs.sge(buf, self.bufs.seg())];
        let wr = crate::verbs::RecvWr {
            wr_id: RECV_BIT | u64::from(buf),
            sges: &sge,
        };
        // SAFETY: the buffer is the pool's and stays posted (owned for
        // `qp`) until its completion or the queue pair's destruction.
        let r = unsafe { self.verbs.post_recv(qp, &wr) };
        if r.is_err() {
            self.bufs.give(buf);
        }
        r
    }

    /// Destroys `qp` and releases everything it held; its operations
    /// complete with `error`.
    pub(crate) fn drop_qp(&mut self, qp: QpId, error: Error) {
        if let Err(e) = self.verbs.destroy_qp(qp) {
            tracing::debug!(error = %e, "rc: queue pair not destroyed");
        }
        if let Some(c) = self.conn(qp) {
            let (peer, src, failed) = (c.peer, c.src, c.failed);
            if self.peers.get(&peer) == Some(&qp) {
                self.peers.remove(&peer);
            }
            if !failed {
                self.src_conn_ended(src, &error);
            }
        }
        self.set_conn(qp, None);
        for b in self.bufs.held_by(qp) {
            self.bufs.give(b);
        }
        for i in self.ops.find(|op| op.qp == qp) {
            if let Some(op) = self.ops.remove(i) {
                self.release_op_resources(&op);
                if let Some(e) = op.ep.and_then(|ep| self.eps.get_mut(ep)) {
                    e.in_flight = e.in_flight.saturating_sub(1);
                }
                self.group_done(op.group, Some(error.duplicate()));
            }
        }
    }
}
