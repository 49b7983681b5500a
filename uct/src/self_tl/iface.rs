//! The `self` iface: endpoints, operations and progress.

use super::mailbox::{self, Shared};
use super::{addr, SelfConfig, MAX_BCOPY, MAX_HDR, MAX_IOV, MAX_SHORT, MAX_ZCOPY, PROGRESS_BATCH};
use crate::{
    limits, AmId, AmOps, AmSink, AmZcopyOps, Armed, EpId, Error, GetOps, Iface, IfaceInfo, Iov,
    Posted, PutOps, RemoteKey, Result, SrcId, Token,
};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One endpoint: a target mailbox and this endpoint's source id there.
#[derive(Debug)]
struct Ep {
    /// `None` once the endpoint failed.
    target: Option<Arc<Shared>>,
    src: u32,
    pending: VecDeque<Token>,
    in_pending_list: bool,
}

/// An iface of the `self` transport.
#[derive(Debug)]
pub(super) struct SelfIface {
    shared: Arc<Shared>,
    info: IfaceInfo,
    eps: Vec<Option<Ep>>,
    free_eps: Vec<u32>,
    /// Endpoints with pending tokens.
    pending_eps: Vec<u32>,
    /// Spare list swapped with `pending_eps` while dispatching.
    pending_scratch: Vec<u32>,
}

fn no_ep(ep: EpId) -> Error {
    Error::UnknownEndpoint {
        transport: "self".into(),
        ep: ep.0.into(),
    }
}

fn failed() -> Error {
    Error::endpoint_failed("self", crate::ucs::EndpointCause::PeerGone)
}

impl SelfIface {
    pub(super) fn open(cfg: &SelfConfig) -> Result<SelfIface> {
        let id = addr::next_iface_id();
        let shared = Arc::new(Shared::new(id, cfg)?);
        mailbox::register(&shared);
        let mut iface = SelfIface {
            shared,
            info: IfaceInfo {
                tl_name: "self".into(),
                dev_name: super::DEV_NAME.into(),
                device_addr: addr::device_addr().to_vec(),
                iface_addr: id.to_le_bytes().to_vec(),
                attr: super::iface_attr(),
            },
            eps: Vec::new(),
            free_eps: Vec::new(),
            pending_eps: Vec::new(),
            pending_scratch: Vec::new(),
        };
        iface.info.attr.caps = crate::derive_caps(&mut iface);
        Ok(iface)
    }

    fn ep_mut(&mut self, ep: EpId) -> Result<&mut Ep> {
        self.eps
            .get_mut(ep.0 as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| no_ep(ep))
    }

    /// Fails unless `ep` exists and its target iface is open: one-sided
    /// operations do not need the target, but fail with the endpoint like
    /// every other operation.
    fn check_live(&mut self, ep: EpId) -> Result<()> {
        let e = self.ep_mut(ep)?;
        match &e.target {
            Some(t) if !t.is_closed() => Ok(()),
            _ => Err(failed()),
        }
    }

    fn send(
        &mut self,
        ep: EpId,
        id: AmId,
        len: usize,
        fill: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Posted> {
        let e = self.ep_mut(ep)?;
        let target = e.target.as_ref().ok_or_else(failed)?;
        target.push(e.src, id, len, fill)
    }

    /// Fails every endpoint whose target closed: `ep_failed` once, then its
    /// pending tokens.
    fn fail_closed_eps(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        for (i, slot) in self.eps.iter_mut().enumerate() {
            let Some(ep) = slot else { continue };
            if !ep.target.as_ref().is_some_and(|t| t.is_closed()) {
                continue;
            }
            ep.target = None;
            let id = EpId(i as u32);
            sink.ep_failed(id, failed());
            n += 1;
            while let Some(t) = ep.pending.pop_front() {
                sink.pending_ready(id, t);
                n += 1;
            }
        }
        n
    }

    /// Hands back the pending tokens of endpoints whose target has room.
    fn dispatch_pending(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        let list = std::mem::take(&mut self.pending_eps);
        let mut keep = std::mem::take(&mut self.pending_scratch);
        for &i in &list {
            let Some(Some(ep)) = self.eps.get_mut(i as usize) else {
                continue;
            };
            let ready = match &ep.target {
                None => true,
                Some(t) => !t.is_closed() && t.has_room(),
            };
            if !ready {
                keep.push(i);
                continue;
            }
            while let Some(t) = ep.pending.pop_front() {
                sink.pending_ready(EpId(i), t);
                n += 1;
            }
            ep.in_pending_list = false;
        }
        self.pending_scratch = list;
        self.pending_scratch.clear();
        self.pending_eps = keep;
        n
    }

    /// [`Iface::progress`] when something may be there: closed peers,
    /// pending endpoints, queued messages.
    #[inline(never)]
    fn progress_some(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        let closed = &self.shared.peer_closed;
        if closed.load(Ordering::Relaxed) && closed.swap(false, Ordering::AcqRel) {
            n += self.fail_closed_eps(sink);
        }
        if !self.pending_eps.is_empty() {
            n += self.dispatch_pending(sink);
        }
        n + self.drain(sink)
    }

    /// Delivers up to a batch of queued messages.
    fn drain(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        while n < PROGRESS_BATCH {
            let Some(msg) = self.shared.pop() else { break };
            sink.am(msg.id, SrcId(msg.src), &msg.buf);
            self.shared.recycle(msg.buf);
            n += 1;
        }
        if n > 0 {
            self.shared.wake_waiters();
        }
        n
    }
}

impl Drop for SelfIface {
    fn drop(&mut self) {
        mailbox::unregister(self.shared.id);
        self.shared.close();
    }
}

impl Iface for SelfIface {
    fn info(&self) -> &IfaceInfo {
        &self.info
    }

    fn is_reachable(&self, dev_addr: &[u8], iface_addr: &[u8]) -> bool {
        addr::check_dev(dev_addr).is_ok()
            && addr::decode_iface(iface_addr).is_ok_and(|id| mailbox::lookup(id).is_some())
    }

    fn ep_create(&mut self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<EpId> {
        addr::check_dev(dev_addr)?;
        let id = addr::decode_iface(iface_addr)?;
        let target = mailbox::lookup(id)
            .ok_or_else(|| Error::Unreachable(format!("self: no iface {id:#018x} here")))?;
        target.add_sender(&self.shared)?;
        let ep = Ep {
            src: target.next_src(),
            target: Some(target),
            pending: VecDeque::new(),
            in_pending_list: false,
        };
        let index = match self.free_eps.pop() {
            Some(i) => {
                self.eps[i as usize] = Some(ep);
                i
            }
            None => {
                let i = u32::try_from(self.eps.len())
                    .map_err(|_| Error::NoMemory("self: endpoint table full".into()))?;
                self.eps.push(Some(ep));
                i
            }
        };
        Ok(EpId(index))
    }

    fn ep_destroy(&mut self, ep: EpId) {
        let Some(slot) = self.eps.get_mut(ep.0 as usize) else {
            return;
        };
        if slot.take().is_some() {
            self.pending_eps.retain(|&i| i != ep.0);
            self.free_eps.push(ep.0);
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

    fn get(&mut self) -> Option<&mut dyn GetOps> {
        Some(self)
    }

    fn pending_add(&mut self, ep: EpId, token: Token) -> Result<()> {
        let me = Arc::clone(&self.shared);
        let e = self.ep_mut(ep)?;
        let target = e.target.as_ref().ok_or_else(failed)?;
        if !target.has_room() {
            target.add_waiter(&me);
        }
        e.pending.push_back(token);
        if !e.in_pending_list {
            e.in_pending_list = true;
            self.pending_eps.push(ep.0);
        }
        Ok(())
    }

    fn flush(&mut self, ep: Option<EpId>, _token: Token) -> Result<Posted> {
        if let Some(ep) = ep {
            self.ep_mut(ep)?.target.as_ref().ok_or_else(failed)?;
        }
        Ok(Posted::Done)
    }

    #[inline]
    fn progress(&mut self, sink: &mut dyn AmSink) -> usize {
        // Nothing to do, the common case of a polled iface: a few loads.
        if self.pending_eps.is_empty()
            && !self.shared.peer_closed.load(Ordering::Relaxed)
            && self.shared.is_empty()
        {
            return 0;
        }
        self.progress_some(sink)
    }

    fn event_fd(&self) -> Option<RawFd> {
        Some(self.shared.event_fd())
    }

    fn arm(&mut self) -> Result<Armed> {
        if !self.shared.arm() {
            return Ok(Armed::Busy);
        }
        for &i in &self.pending_eps {
            let Some(Some(ep)) = self.eps.get(i as usize) else {
                continue;
            };
            match &ep.target {
                Some(t) if !t.is_closed() => {
                    t.add_waiter(&self.shared);
                    if t.has_room() {
                        self.shared.disarm();
                        return Ok(Armed::Busy);
                    }
                }
                // Failed or about to be reported: progress has work.
                _ => {
                    self.shared.disarm();
                    return Ok(Armed::Busy);
                }
            }
        }
        Ok(Armed::Sleep)
    }
}

impl AmOps for SelfIface {
    fn am_short(&mut self, ep: EpId, id: AmId, header: u64, payload: &[u8]) -> Result<Posted> {
        limits::check_short(payload.len(), MAX_SHORT)?;
        self.send(ep, id, 8 + payload.len(), |b| {
            b.extend_from_slice(&header.to_le_bytes());
            b.extend_from_slice(payload);
        })
    }

    fn am_bcopy(&mut self, ep: EpId, id: AmId, parts: &[&[u8]]) -> Result<(Posted, usize)> {
        let total = limits::bcopy_len(parts, MAX_BCOPY)?;
        let posted = self.send(ep, id, total, |b| {
            for p in parts {
                b.extend_from_slice(p);
            }
        })?;
        Ok(posted.with_len(total))
    }
}

impl AmZcopyOps for SelfIface {
    /// Copies the iov at post time and returns `Done`: within one process
    /// that is as cheap as any deferred scheme, and the caller may reuse
    /// its buffers at once, which trivially meets the zero-copy contract.
    unsafe fn am_zcopy(
        &mut self,
        ep: EpId,
        id: AmId,
        header: &[u8],
        iov: &[Iov],
        _token: Token,
    ) -> Result<Posted> {
        let data = limits::check_zcopy(header, iov, MAX_HDR, MAX_IOV, MAX_ZCOPY)?;
        self.send(ep, id, header.len() + data, |b| {
            b.extend_from_slice(header);
            for v in iov.iter().filter(|v| v.len > 0) {
                // SAFETY: the caller of `am_zcopy` promises each range is
                // valid for reads until the operation completes; it
                // completes (`Done`) before this call returns. Empty ranges
                // are skipped, so their pointer may be anything.
                b.extend_from_slice(unsafe { std::slice::from_raw_parts(v.ptr, v.len) });
            }
        })
    }
}

impl PutOps for SelfIface {
    /// Checks the key against the live registration and copies at post
    /// time (see `rma.rs`); `Done` or an error, never `InFlight`.
    unsafe fn put_zcopy(
        &mut self,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        _token: Token,
    ) -> Result<Posted> {
        self.check_live(ep)?;
        // SAFETY: the caller of `put_zcopy` keeps each range valid for
        // reads until the operation completes, which is before this
        // returns.
        unsafe { super::rma::put(iov, remote_addr, rkey) }?;
        Ok(Posted::Done)
    }
}

impl GetOps for SelfIface {
    /// As `put_zcopy`, in the other direction.
    unsafe fn get_zcopy(
        &mut self,
        ep: EpId,
        iov: &[crate::IovMut],
        remote_addr: u64,
        rkey: &RemoteKey,
        _token: Token,
    ) -> Result<Posted> {
        crate::with_iovs(iov, |iov| {
            self.check_live(ep)?;
            // SAFETY: the caller of `get_zcopy` keeps each range valid for
            // writes, and untouched by others, until the operation completes,
            // which is before this returns.
            unsafe { super::rma::get(iov, remote_addr, rkey) }?;
            Ok(Posted::Done)
        })
    }
}
