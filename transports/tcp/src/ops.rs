//! The [`Iface`] of the TCP iface and its operation families: [`AmOps`],
//! [`AmZcopyOps`] and [`PutOps`] (it has no `get_zcopy`).

use std::os::fd::RawFd;

use uct::ucs::{EndpointCause, Error, Result};
use uct::{
    limits, AmId, AmOps, AmSink, AmZcopyOps, Armed, EpId, Iface, Iov, Posted, PutOps, RemoteKey,
    Token,
};

use crate::config::MAX_IOV;
use crate::conn::Waiter;
use crate::iface::{no_ep, Ep, GlobalFlush, Notice, TcpIface};
use crate::tx::ZcOwner;
use crate::wire;
use uct::ip_addr as addr;

/// Largest copy send (frame payload) that `RUCX_TCP_TX_BATCH` holds back.
const BATCH_MAX: usize = 1024;

impl TcpIface {
    /// The connection of a live endpoint, or the error of a failed one.
    pub(crate) fn ep_conn(&self, ep: EpId) -> Result<u32> {
        let e = self.eps.get(ep.0).ok_or_else(|| no_ep(ep))?;
        match (&e.failed, e.conn) {
            (None, Some(c)) => Ok(c),
            (Some(f), _) => Err(Error::endpoint_failed(
                format!("tcp {}", f.peer),
                EndpointCause::Earlier(f.err.duplicate().into()),
            )),
            (None, None) => Err(Error::endpoint_failed("tcp", EndpointCause::ConnectionLost)),
        }
    }

    /// Ends an operation whose socket call failed: fails the connection and
    /// returns the error for the caller.
    pub(crate) fn op_failed<T>(&mut self, ci: u32, e: std::io::Error) -> Result<T> {
        let peer = self.conns.get(ci).map(|c| c.peer().to_string());
        let err = Error::ConnectionLost {
            peer: peer.unwrap_or_default(),
            reason: e.to_string(),
        };
        self.fail_conn(ci, err.duplicate());
        Err(err)
    }

    fn copy_send(&mut self, ep: EpId, id: AmId, parts: &[&[u8]], total: usize) -> Result<Posted> {
        limits::check_am_id(id)?;
        let ci = self.ep_conn(ep)?;
        let Some(c) = self.conns.get_mut(ci) else {
            return Err(no_ep(ep));
        };
        // Nothing for another process is buffered before it accepts the
        // connection (as UCX's tcp waits for its connection): a send
        // reported done is in the kernel, not lost if this process dies
        // right after. The pending queue holds the send until then.
        let fd = c.open_fd();
        if fd.is_none() && !c.key().is_some_and(crate::local::is_local) {
            return Ok(Posted::NoResource);
        }
        if c.pending_len() > 0 {
            return Ok(Posted::NoResource);
        }
        let hdr = wire::frame_hdr(id, total as u32);
        // Corked: a small frame joins the backlog, written by `uncork`
        // with the others (EPOLLOUT is not armed for it).
        let hold = self.corked && fd.is_some() && c.tx.can_hold(wire::FRAME_HDR + total);
        if !hold && self.batch && c.wrote_in == self.epoch && total <= BATCH_MAX && fd.is_some() {
            // A second small send since the last progress: it waits for
            // the next one, which writes the batch (`pending_ready`, then
            // the worker's corked resumption).
            return Ok(Posted::NoResource);
        }
        match c
            .tx
            .post_copy(if hold { None } else { fd }, &hdr, parts, total)
        {
            Ok(true) if hold => {
                c.active = true;
                let unlisted = !c.listed;
                if !self.corked_conns.contains(&ci) {
                    self.corked_conns.push(ci);
                }
                if unlisted {
                    self.touch(ci);
                }
                Ok(Posted::Done)
            }
            Ok(true) => {
                c.active = true;
                c.wrote_in = self.epoch;
                let unlisted = !c.listed && c.tx.held() > 0;
                match c.sync_interest(&self.epoll) {
                    Ok(()) => {
                        if unlisted {
                            self.touch(ci);
                        }
                        Ok(Posted::Done)
                    }
                    Err(e) => self.op_failed(ci, e),
                }
            }
            Ok(false) => Ok(Posted::NoResource),
            Err(e) => self.op_failed(ci, e),
        }
    }
}

impl Iface for TcpIface {
    fn info(&self) -> &uct::IfaceInfo {
        &self.info
    }

    fn is_reachable(&self, dev_addr: &[u8], iface_addr: &[u8]) -> bool {
        self.local.is_reachable(dev_addr, iface_addr)
    }

    /// A peer of this host and network namespace is reached through the
    /// kernel's loopback, from any device.
    fn loops_back(&self, dev_addr: &[u8]) -> bool {
        self.local.same_host(dev_addr)
    }

    /// Reuses the connection to the remote iface if there is one (opened by
    /// either side), else opens one.
    fn ep_create(&mut self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<EpId> {
        let remote = addr::unpack(dev_addr, iface_addr)
            .ok_or_else(|| Error::InvalidAddr("tcp: malformed device or iface address".into()))?;
        if !self.local.reaches(&remote) {
            return Err(Error::Unreachable(format!(
                "tcp: {} from device {}",
                remote.addr, self.info.dev_name
            )));
        }
        let key = wire::key(remote.addr);
        let ci = match self.peer_conn(&key) {
            Some(ci) => ci,
            None => self.connect(remote.addr, key)?,
        };
        let (idx, _) = self.eps.insert(Ep {
            conn: Some(ci),
            failed: None,
        });
        if let Some(c) = self.conns.get_mut(ci) {
            c.eps.push(idx);
        }
        Ok(EpId(idx))
    }

    /// The connection stays (for other endpoints, and the peer's).
    fn ep_destroy(&mut self, ep: EpId) {
        let Some(e) = self.eps.remove(ep.0) else {
            return;
        };
        let Some(c) = e.conn.and_then(|ci| self.conns.get_mut(ci)) else {
            return;
        };
        c.eps.remove(ep.0);
        let notices = &mut self.notices;
        if let Some(m) = c.queues_mut() {
            m.pending.retain(|&(x, _)| x != ep);
            m.waiters.retain(|w| match w.waiter {
                Waiter::Ep(x, t) if x == ep => {
                    notices.push_back(Notice::Completed(t, Err(Error::Canceled)));
                    false
                }
                _ => true,
            });
        }
        if let Some(t) = c.tx.detach_zcopy(ep) {
            notices.push_back(Notice::Completed(t, Err(Error::Canceled)));
        }
        // Its puts stay in the queue (their acknowledgements still come)
        // but are reported now.
        let puts = c.queues_mut().map(|m| m.puts.iter_mut());
        for p in puts.into_iter().flatten().filter(|p| p.ep == ep) {
            if let Some(t) = p.token.take() {
                notices.push_back(Notice::Completed(t, Err(Error::Canceled)));
            }
        }
    }

    fn am(&mut self) -> Option<&mut dyn AmOps> {
        Some(self)
    }

    fn zcopy(&mut self) -> Option<&mut dyn AmZcopyOps> {
        Some(self)
    }

    fn put(&mut self) -> Option<&mut dyn PutOps> {
        Some(self)
    }

    fn pending_add(&mut self, ep: EpId, token: Token) -> Result<()> {
        let ci = self.ep_conn(ep)?;
        let Some(c) = self.conns.get_mut(ci) else {
            return Err(no_ep(ep));
        };
        c.more().pending.push_back((ep, token));
        if c.pending_len() == 1 && c.is_free() {
            self.ready.push(ci);
        }
        // Listed, so that a sweep frees its queues once empty.
        self.touch(ci);
        Ok(())
    }

    fn flush(&mut self, ep: Option<EpId>, token: Token) -> Result<Posted> {
        if let Some(ep) = ep {
            let ci = self.ep_conn(ep)?;
            let Some(c) = self.conns.get_mut(ci) else {
                return Err(no_ep(ep));
            };
            if !c.busy() {
                return Ok(Posted::Done);
            }
            let f = c.flush_mark(Waiter::Ep(ep, token));
            c.more().waiters.push(f);
            self.touch(ci);
            return Ok(Posted::InFlight);
        }
        let busy: Vec<u32> = self
            .conns
            .indices()
            .filter(|&i| self.conns.get(i).is_some_and(|c| c.busy()))
            .collect();
        if busy.is_empty() {
            return Ok(Posted::Done);
        }
        let (g, _) = self.flushes.insert(GlobalFlush {
            token,
            left: busy.len() as u32,
        });
        for i in busy {
            if let Some(c) = self.conns.get_mut(i) {
                let f = c.flush_mark(Waiter::Global(g));
                c.more().waiters.push(f);
                self.touch(i);
            }
        }
        Ok(Posted::InFlight)
    }

    fn progress(&mut self, sink: &mut dyn AmSink) -> usize {
        self.epoch = self.epoch.wrapping_add(1);
        let n = if self.corked_conns.is_empty() {
            0
        } else {
            self.write_corked(sink)
        };
        n + self.run_progress(sink)
    }

    fn corks(&self) -> bool {
        true
    }

    fn cork(&mut self) {
        self.corked = true;
    }

    fn uncork(&mut self, sink: &mut dyn AmSink) -> usize {
        self.corked = false;
        if self.corked_conns.is_empty() {
            return 0;
        }
        self.write_corked(sink)
    }

    fn visits(&self) -> u64 {
        self.visits
    }

    fn event_fd(&self) -> Option<RawFd> {
        Some(self.epoll.raw())
    }

    fn arm(&mut self) -> Result<Armed> {
        if self.notices.is_empty() && self.ready.is_empty() && self.corked_conns.is_empty() {
            Ok(Armed::Sleep)
        } else {
            Ok(Armed::Busy)
        }
    }
}

impl AmOps for TcpIface {
    fn am_short(&mut self, ep: EpId, id: AmId, header: u64, payload: &[u8]) -> Result<Posted> {
        limits::check_short(payload.len(), self.limits.max_short)?;
        let h = header.to_le_bytes();
        self.copy_send(ep, id, &[&h, payload], 8 + payload.len())
    }

    fn am_bcopy(&mut self, ep: EpId, id: AmId, parts: &[&[u8]]) -> Result<(Posted, usize)> {
        let total = limits::bcopy_len(parts, self.limits.max_bcopy)?;
        self.copy_send(ep, id, parts, total).map(|p| (p, total))
    }
}

impl AmZcopyOps for TcpIface {
    unsafe fn am_zcopy(
        &mut self,
        ep: EpId,
        id: AmId,
        header: &[u8],
        iov: &[Iov],
        token: Token,
    ) -> Result<Posted> {
        let max_hdr = self.info.attr.max_hdr;
        let total = limits::check_zcopy(header, iov, max_hdr, MAX_IOV, self.limits.max_zcopy)?;
        limits::check_am_id(id)?;
        let ci = self.ep_conn(ep)?;
        let Some(c) = self.conns.get_mut(ci) else {
            return Err(no_ep(ep));
        };
        let Some(fd) = c.open_fd() else {
            return Ok(Posted::NoResource);
        };
        if c.pending_len() > 0 {
            return Ok(Posted::NoResource);
        }
        let hdr = wire::frame_hdr(id, (header.len() + total) as u32);
        // SAFETY: the caller of am_zcopy vouches for `iov` until completion;
        // the iface reports completion exactly when the backlog holding it
        // drains, or copies it out (ep_destroy) or drops it (failure)
        // before reporting.
        match unsafe {
            c.tx.post_zcopy(fd, &hdr, header, iov, ZcOwner::Am(ep, token))
        } {
            Ok(None) => Ok(Posted::NoResource),
            Ok(Some(false)) => Ok(Posted::Done),
            Ok(Some(true)) => match c.sync_interest(&self.epoll) {
                Ok(()) => {
                    self.touch(ci);
                    Ok(Posted::InFlight)
                }
                Err(e) => self.op_failed(ci, e),
            },
            Err(e) => self.op_failed(ci, e),
        }
    }
}

impl PutOps for TcpIface {
    /// Sends a PUT frame from `iov`; `InFlight` until the target answers
    /// that the data is in its memory (see `rma.rs`).
    unsafe fn put_zcopy(
        &mut self,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted> {
        // SAFETY: the same contract as put_zcopy's.
        unsafe { self.post_put(ep, iov, remote_addr, rkey, token) }
    }
}
