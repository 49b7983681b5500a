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

use super::config::MAX_RX_QUEUE;
use super::credits::{Credits, GRANT_SLOT};
use super::iface::{Conn, Notice, RcEp, RcIface};
use super::wire::{ConnRep, ConnReq};

/// The order of listening addresses that settles simultaneous
/// connections: by IP, then port (the same on both sides).
fn addr_key(a: SocketAddr) -> (std::net::IpAddr, u16) {
    (a.ip(), a.port())
}

impl RcIface {
    /// A queue pair on the shared receive queue, for a connection whose
    /// peer starts with `window` credits: that many receives (and the
    /// grant slot) are committed in the pool first, which grows if it
    /// must; a full pool fails this connection only.
    fn new_qp(&mut self, window: u32) -> Result<QpId> {
        self.commit_rx(window + GRANT_SLOT)?;
        let dattr = self.device.attr();
        let init = QpInit {
            pd: self.pd,
            send_cq: self.cq,
            recv_cq: self.cq,
            max_send_wr: self.limits.tx_queue,
            max_recv_wr: 0,
            max_send_sge: (self.info.attr.max_iov as u32 + 1).min(dattr.max_sge),
            max_recv_sge: 1,
            max_inline: self.max_inline as u32,
            sq_sig_all: true,
            srq: Some(self.srq),
        };
        match self.verbs.create_qp(&init) {
            Ok(qp) => Ok(qp),
            Err(e) => {
                self.pool.release(window + GRANT_SLOT);
                Err(e)
            }
        }
    }

    fn new_conn(&mut self, peer: SocketAddr, initiated: bool, cr: Credits) -> Conn {
        Conn {
            peer,
            initiated,
            failed: false,
            fatal: None,
            cr,
            in_pool: true,
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
        let window = self.limits.rx_window;
        let qp = self.new_qp(window)?;
        let dattr = self.device.attr();
        let param = ConnParam {
            private_data: ConnReq {
                seg: self.bufs.seg() as u32,
                uuid: self.worker_uuid,
                credits: window,
                posted: window,
                listen: self.listen,
                max_window: self.limits.rx_queue,
            }
            .encode(),
            ord: self.limits.ord.min(dattr.max_qp_rd_atom),
            ird: dattr.max_qp_init_rd_atom,
        };
        // The window the peer is asked to commit is ours to send with;
        // the peer may grow it up to the limit it replies with.
        let cr = Credits::new(window, MAX_RX_QUEUE, window);
        let conn = self.new_conn(peer, true, cr);
        self.set_conn(qp, Some(conn));
        if let Err(e) = self.verbs.connect(qp, peer, &param) {
            self.drop_qp(qp, Error::Canceled);
            return Err(e);
        }
        self.peers.insert(peer, qp);
        Ok(qp)
    }

    /// A peer's connection request: accepted on a queue pair whose
    /// receives are committed, or rejected.
    pub(crate) fn on_request(&mut self, req: ConnReqId, param: &ConnParam) {
        let seg = self.bufs.seg() as u32;
        let sane = |n: u32| (1..=MAX_RX_QUEUE).contains(&n);
        let r = match ConnReq::decode(&param.private_data) {
            Ok(r)
                if r.seg == seg
                    && sane(r.credits)
                    && sane(r.posted)
                    && r.max_window >= r.posted
                    && r.max_window <= MAX_RX_QUEUE =>
            {
                r
            }
            other => {
                tracing::debug!(?other, "rc: connection request refused");
                if let Err(e) = self.verbs.reject(req, b"rucx rc: bad request") {
                    tracing::debug!(error = %e, "rc: reject failed");
                }
                return;
            }
        };
        let window = r.credits;
        let dattr = self.device.attr();
        let accept = ConnParam {
            private_data: ConnRep {
                credits: window,
                seg,
                max_window: self.limits.rx_queue.max(window),
            }
            .encode(),
            ord: param.ird.min(self.limits.ord).min(dattr.max_qp_rd_atom),
            ird: param.ord.min(dattr.max_qp_init_rd_atom),
        };
        let qp = match self.new_qp(window) {
            Ok(qp) => qp,
            Err(e) => {
                tracing::warn!(error = %e, "rc: connection not accepted");
                let _ = self.verbs.reject(req, b"rucx rc: no resources");
                return;
            }
        };
        let cr = Credits::new(r.posted, r.max_window, window);
        let conn = self.new_conn(r.listen, false, cr);
        self.set_conn(qp, Some(conn));
        if let Err(e) = self.verbs.accept(req, qp, &accept) {
            tracing::warn!(error = %e, "rc: connection not accepted");
            self.drop_qp(qp, Error::Canceled);
            let _ = self.verbs.reject(req, b"rucx rc: no resources");
            return;
        }
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
        // The queue pair stops taking receives from the shared queue; its
        // window goes back to the pool once the receives it filled were
        // polled and reposted.
        if let Err(e) = self.verbs.disconnect(qp) {
            tracing::debug!(error = %e, "rc: disconnect failed");
        }
        self.defer_release(qp);
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

    /// Destroys `qp` and releases everything it held; its operations
    /// complete with `error`.
    pub(crate) fn drop_qp(&mut self, qp: QpId, error: Error) {
        if let Err(e) = self.verbs.destroy_qp(qp) {
            tracing::debug!(error = %e, "rc: queue pair not destroyed");
        }
        self.release_window(qp);
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
