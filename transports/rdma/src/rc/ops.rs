//! The operations of the RC iface: active messages over SEND, put over
//! RDMA WRITE, get over RDMA READ, flush through a zero-length READ.

use std::os::fd::RawFd;

use crate::verbs::{Mr, QpId, SendFlags, SendOp, SendWr, Sge};
use uct::ucs::{AccessDenied, EndpointCause, Error, Result};
use uct::{
    limits, Access, AmId, AmOps, AmSink, AmZcopyOps, Armed, EpId, GetOps, Iface, Iov, Posted,
    PutOps, RemoteKey, Token,
};

use super::bufs::Owner;
use super::iface::{no_ep, Group, Notice, Op, RcIface, INLINE_CAP};
use super::md::key_stag;
use super::wire::{self, HDR};

/// Most gather entries of one operation (header buffer + iov).
const MAX_SGES: usize = 9;
/// Steering tag of a zero-length READ (a flush): never 0 on the wire, and
/// not checked by the responder for zero bytes.
const FLUSH_STAG: u32 = 1;

impl RcIface {
    /// The queue pair of `ep` if it can take a send now (`credit`: one
    /// that consumes a peer's receive); `None` for "no resources".
    pub(super) fn send_slot(&mut self, ep: EpId, credit: bool, sq: u32) -> Result<Option<QpId>> {
        let e = self.eps.get(ep).ok_or_else(|| no_ep(ep))?;
        if let Some(err) = &e.failed {
            return Err(err.duplicate());
        }
        if e.switch_to.is_some() {
            return Ok(None);
        }
        let qp = e.conn;
        // While connecting, the provider holds the sends until the
        // connection is up; the peer posts the receives we count on before
        // it accepts.
        match self.conn(qp) {
            Some(c) if (credit && c.cr.credits == 0) || c.sq_free < sq => Ok(None),
            Some(_) => Ok(Some(qp)),
            None => Err(Error::endpoint_failed(
                self.info.tl_name.clone(),
                EndpointCause::ConnectionLost,
            )),
        }
    }

    /// The header of an active message on `qp`, returning the credits
    /// piled up for the peer.
    fn am_header(&mut self, qp: QpId, id: AmId) -> [u8; HDR] {
        let field = self.conn_mut(qp).map_or(0, |c| c.cr.outgoing(true));
        wire::header(id, field)
    }

    /// Takes back the credits of a header whose send was refused.
    fn unsent_header(&mut self, qp: QpId, hdr: &[u8; HDR]) {
        if let (Some(c), Some((_, field))) = (self.conn_mut(qp), wire::parse_header(hdr)) {
            c.cr.unsent(field);
        }
    }

    /// Posts `wr` (its `wr_id` replaced by the operation's) on `qp` and
    /// records `op`; charges the endpoint's queues.
    ///
    /// # Safety
    ///
    /// As [`crate::Verbs::post_send`].
    pub(super) unsafe fn post_op(
        &mut self,
        qp: QpId,
        wr: SendWr<'_>,
        op: Op,
        credit: bool,
    ) -> Result<()> {
        let ep = op.ep;
        let idx = self.ops.insert(op);
        let wr = SendWr {
            wr_id: u64::from(idx),
            ..wr
        };
        // SAFETY: forwarded under the caller's contract.
        if let Err(e) = unsafe { self.verbs.post_send(qp, &wr) } {
            if let Some(op) = self.ops.remove(idx) {
                self.release_op_resources(&op);
            }
            return Err(e);
        }
        if let Some(c) = self.conn_mut(qp) {
            c.sq_free -= 1;
            if credit {
                c.cr.credits -= 1;
            }
        }
        if let Some(e) = ep.and_then(|ep| self.eps.get_mut(ep)) {
            e.in_flight += 1;
        }
        Ok(())
    }

    /// Posts one signaled work request of `op` with `sges` on `qp` for
    /// endpoint `ep`, holding copy buffer `buf` (and, for an atomic, where
    /// its old value goes) until it completes `token`; `credit` as in
    /// [`RcIface::post_op`]. On an error nothing stays behind but `buf`,
    /// which `post_op` has given back.
    ///
    /// # Safety
    ///
    /// As [`crate::Verbs::post_send`].
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn post_one(
        &mut self,
        (qp, ep): (QpId, EpId),
        op: SendOp,
        sges: &[Sge],
        buf: u32,
        amo: Option<u64>,
        token: Token,
        credit: bool,
    ) -> Result<()> {
        let group = self.new_group(token, 1);
        let wr = SendWr {
            wr_id: 0,
            op,
            sges,
            flags: SendFlags::SIGNALED,
        };
        let rec = Op {
            qp,
            ep: Some(ep),
            switch: false,
            buf: Some(buf),
            mr: None,
            group: Some(group),
            amo,
        };
        // SAFETY: forwarded under the caller's contract.
        let posted = unsafe { self.post_op(qp, wr, rec, credit) };
        if posted.is_err() {
            self.groups.remove(group);
        }
        posted
    }

    /// Frees an operation's buffer and registrations.
    pub(crate) fn release_op_resources(&mut self, op: &Op) {
        if let Some(b) = op.buf {
            self.bufs.give(b);
        }
        if let Some(mr) = &op.mr {
            if let Err(e) = self.device.dereg_mr(mr) {
                tracing::debug!(error = %e, "rc: operation region not deregistered");
            }
        }
    }

    /// A gather entry for caller memory: the device-wide local key, or a
    /// registration for this operation.
    fn local_sge(&self, ptr: *const u8, len: usize, access: Access) -> Result<(Sge, Option<Mr>)> {
        let len32 = u32::try_from(len)
            .map_err(|_| Error::InvalidParam(format!("rc: {len}-byte entry too long")))?;
        if let (Some(lkey), false) = (self.local_lkey, access.contains(Access::REMOTE_WRITE)) {
            let sge = Sge {
                addr: ptr as u64,
                len: len32,
                lkey,
            };
            return Ok((sge, None));
        }
        // SAFETY: the caller's zero-copy contract keeps the memory valid
        // until the operation completes, when the region is deregistered.
        let mr = unsafe { self.device.reg_mr(self.pd, ptr as *mut u8, len, access) }?;
        let sge = Sge {
            addr: ptr as u64,
            len: len32,
            lkey: mr.lkey,
        };
        Ok((sge, Some(mr)))
    }

    pub(super) fn new_group(&mut self, token: Token, left: u32) -> u32 {
        self.groups.insert(Group {
            token,
            left,
            error: None,
            silent: false,
        })
    }

    /// Checks a zero-copy put or get before posting: the key is an rc key,
    /// the iov within limits, the range inside the key's and its rights
    /// the ones needed. Returns the steering tag and the total length.
    fn check_remote(
        &self,
        rkey: &RemoteKey,
        addr: u64,
        iov: &[Iov],
        need: Access,
        max: usize,
    ) -> Result<(u32, usize)> {
        let stag =
            key_stag(rkey).ok_or_else(|| Error::InvalidParam("rc: not an rc remote key".into()))?;
        let op = if need.contains(Access::REMOTE_WRITE) {
            "put_zcopy"
        } else {
            "get_zcopy"
        };
        let len = limits::check_iov(op, iov, self.info.attr.max_iov, max)?;
        if !rkey.covers(addr, len) {
            return Err(Error::remote_access(
                self.info.tl_name.clone(),
                AccessDenied::OutOfRange {
                    addr,
                    len,
                    reg_addr: rkey.addr,
                    reg_len: usize::try_from(rkey.len).unwrap_or(usize::MAX),
                },
            ));
        }
        if !rkey.access.contains(need) {
            return Err(Error::remote_access(
                self.info.tl_name.clone(),
                AccessDenied::Rights {
                    granted: format!("{:?}", rkey.access),
                    needed: format!("{need:?}"),
                },
            ));
        }
        Ok((stag, len))
    }

    fn flush_ep(&mut self, ep: EpId, group: u32) -> Result<bool> {
        let Some(e) = self.eps.get(ep) else {
            return Err(no_ep(ep));
        };
        if let Some(err) = &e.failed {
            return Err(err.duplicate());
        }
        if e.in_flight == 0 {
            return Ok(false);
        }
        let qp = e.conn;
        self.post_flush_read(qp, Some(ep), Some(group), false)?;
        Ok(true)
    }

    /// Posts a zero-length READ on `qp` for `ep`, counted in `group`: it
    /// completes after everything sent before on `qp` was placed at the
    /// target (SENDs included: their receive completions come first).
    pub(crate) fn post_flush_read(
        &mut self,
        qp: QpId,
        ep: Option<EpId>,
        group: Option<u32>,
        switch: bool,
    ) -> Result<()> {
        let wr = SendWr {
            wr_id: 0,
            op: SendOp::Read {
                remote_addr: 0,
                rkey: FLUSH_STAG,
            },
            sges: &[],
            flags: SendFlags::SIGNALED,
        };
        let op = Op {
            qp,
            ep,
            switch,
            buf: None,
            mr: None,
            group,
            amo: None,
        };
        // SAFETY: no memory is named.
        unsafe { self.post_op(qp, wr, op, false) }
    }
}

impl Iface for RcIface {
    fn info(&self) -> &uct::IfaceInfo {
        &self.info
    }

    fn is_reachable(&self, dev_addr: &[u8], iface_addr: &[u8]) -> bool {
        self.local.is_reachable(dev_addr, iface_addr)
    }

    /// A peer of this host and network namespace is reached through the
    /// kernel's loopback, from any device (the provider, userspace iWARP,
    /// runs over the host's TCP; a NIC provider would loop back in the
    /// NIC instead, and must say so here).
    fn loops_back(&self, dev_addr: &[u8]) -> bool {
        self.local.same_host(dev_addr)
    }

    fn ep_create(&mut self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<EpId> {
        self.create_ep(dev_addr, iface_addr)
    }

    fn ep_destroy(&mut self, ep: EpId) {
        self.destroy_ep(ep);
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

    fn atomic(&mut self) -> Option<&mut dyn uct::AtomicOps> {
        if self.device.attr().atomics {
            Some(self)
        } else {
            None
        }
    }

    fn pending_add(&mut self, ep: EpId, token: Token) -> Result<()> {
        let e = self.eps.get_mut(ep).ok_or_else(|| no_ep(ep))?;
        if let Some(err) = &e.failed {
            return Err(err.duplicate());
        }
        e.pending.push_back(token);
        self.pending_eps.insert(ep);
        self.ready.push(ep);
        Ok(())
    }

    fn flush(&mut self, ep: Option<EpId>, token: Token) -> Result<Posted> {
        let targets: Vec<EpId> = match ep {
            Some(ep) => vec![ep],
            None => self
                .eps
                .iter()
                .filter(|(_, e)| e.failed.is_none())
                .map(|(id, _)| id)
                .collect(),
        };
        for &t in &targets {
            let e = self.eps.get(t).ok_or_else(|| no_ep(t))?;
            if let Some(err) = &e.failed {
                return Err(err.duplicate());
            }
            let busy = e.switch_to.is_some() || self.conn(e.conn).is_none_or(|c| c.sq_free == 0);
            if e.in_flight > 0 && busy {
                return Ok(Posted::NoResource);
            }
        }
        let group = self.new_group(token, 0);
        let mut left = 0;
        for t in targets {
            match self.flush_ep(t, group) {
                Ok(true) => left += 1,
                Ok(false) => {}
                Err(e) => {
                    if left == 0 {
                        self.groups.remove(group);
                    } else if let Some(g) = self.groups.get_mut(group) {
                        g.left = left;
                        g.silent = true;
                    }
                    return Err(e);
                }
            }
        }
        if left == 0 {
            self.groups.remove(group);
            return Ok(Posted::Done);
        }
        if let Some(g) = self.groups.get_mut(group) {
            g.left = left;
        }
        Ok(Posted::InFlight)
    }

    fn progress(&mut self, sink: &mut dyn AmSink) -> usize {
        self.progress_all(sink)
    }

    fn event_fd(&self) -> Option<RawFd> {
        self.verbs.event_fd()
    }

    fn arm(&mut self) -> Result<Armed> {
        if !self.notices.is_empty() || !self.ready.is_empty() {
            return Ok(Armed::Busy);
        }
        self.verbs.arm()
    }
}

impl AmOps for RcIface {
    fn am_short(&mut self, ep: EpId, id: AmId, header: u64, payload: &[u8]) -> Result<Posted> {
        limits::check_am_id(id)?;
        limits::check_short(payload.len(), self.info.attr.max_short)?;
        let Some(qp) = self.send_slot(ep, true, 1)? else {
            return Ok(Posted::NoResource);
        };
        let mut msg = [0u8; INLINE_CAP];
        let hdr = self.am_header(qp, id);
        msg[..HDR].copy_from_slice(&hdr);
        msg[HDR..HDR + 8].copy_from_slice(&header.to_le_bytes());
        msg[HDR + 8..HDR + 8 + payload.len()].copy_from_slice(payload);
        let sge = [Sge {
            addr: msg.as_ptr() as u64,
            len: (HDR + 8 + payload.len()) as u32,
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
            ep: Some(ep),
            switch: false,
            buf: None,
            mr: None,
            group: None,
            amo: None,
        };
        // SAFETY: an inline send copies `msg` before returning.
        if let Err(e) = unsafe { self.post_op(qp, wr, op, true) } {
            self.unsent_header(qp, &hdr);
            return Err(e);
        }
        Ok(Posted::Done)
    }

    fn am_bcopy(&mut self, ep: EpId, id: AmId, parts: &[&[u8]]) -> Result<(Posted, usize)> {
        limits::check_am_id(id)?;
        let total = limits::bcopy_len(parts, self.info.attr.max_bcopy)?;
        let Some(qp) = self.send_slot(ep, true, 1)? else {
            return Ok((Posted::NoResource, 0));
        };
        let Some(buf) = self.bufs.take(Owner::Tx(qp)) else {
            return Ok((Posted::NoResource, 0));
        };
        let mut all: [&[u8]; 17] = [&[]; 17];
        if parts.len() > 16 {
            self.bufs.give(buf);
            return Err(Error::InvalidParam(
                "rc: am_bcopy of more than 16 parts".into(),
            ));
        }
        let hdr = self.am_header(qp, id);
        all[0] = &hdr;
        all[1..=parts.len()].copy_from_slice(parts);
        let len = self.bufs.fill(buf, &all[..=parts.len()]).unwrap_or(0);
        let sge = [self.bufs.sge(buf, len)];
        let wr = SendWr {
            wr_id: 0,
            op: SendOp::Send,
            sges: &sge,
            flags: SendFlags::SIGNALED,
        };
        let op = Op {
            qp,
            ep: Some(ep),
            switch: false,
            buf: Some(buf),
            mr: None,
            group: None,
            amo: None,
        };
        // SAFETY: the buffer is the pool's, held by the operation.
        if let Err(e) = unsafe { self.post_op(qp, wr, op, true) } {
            self.unsent_header(qp, &hdr);
            return Err(e);
        }
        Ok((Posted::Done, total))
    }
}

impl AmZcopyOps for RcIface {
    unsafe fn am_zcopy(
        &mut self,
        ep: EpId,
        id: AmId,
        header: &[u8],
        iov: &[Iov],
        token: Token,
    ) -> Result<Posted> {
        limits::check_am_id(id)?;
        let a = &self.info.attr;
        limits::check_zcopy(header, iov, a.max_hdr, a.max_iov, a.max_zcopy)?;
        let need_reg = self.local_lkey.is_none() && iov.iter().filter(|v| v.len > 0).count() > 0;
        if need_reg {
            // Without a device-wide local key, copy: the message is at most
            // one receive buffer.
            let parts: Vec<&[u8]> = std::iter::once(header)
                .chain(iov.iter().map(|v| {
                    // SAFETY: the caller's contract: each range is valid.
                    unsafe { std::slice::from_raw_parts(v.ptr, v.len) }
                }))
                .collect();
            return self.am_bcopy(ep, id, &parts).map(|(p, _)| p);
        }
        let Some(qp) = self.send_slot(ep, true, 1)? else {
            return Ok(Posted::NoResource);
        };
        let Some(buf) = self.bufs.take(Owner::Tx(qp)) else {
            return Ok(Posted::NoResource);
        };
        let hdr = self.am_header(qp, id);
        let len = self.bufs.fill(buf, &[&hdr, header]).unwrap_or(0);
        let mut sges = [Sge::default(); MAX_SGES];
        sges[0] = self.bufs.sge(buf, len);
        let mut n = 1;
        for v in iov.iter().filter(|v| v.len > 0) {
            let (sge, _) = self.local_sge(v.ptr, v.len, Access::empty())?;
            sges[n] = sge;
            n += 1;
        }
        // SAFETY: the iov stays valid until completion (caller's contract).
        let posted =
            unsafe { self.post_one((qp, ep), SendOp::Send, &sges[..n], buf, None, token, true) };
        if let Err(e) = posted {
            self.unsent_header(qp, &hdr);
            return Err(e);
        }
        Ok(Posted::InFlight)
    }
}

impl PutOps for RcIface {
    unsafe fn put_zcopy(
        &mut self,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted> {
        let max = self.info.attr.max_put_zcopy;
        let (stag, total) = self.check_remote(rkey, remote_addr, iov, Access::REMOTE_WRITE, max)?;
        if total == 0 {
            return Ok(Posted::Done);
        }
        // Without a device-wide local key each entry is registered for this
        // put and held by its own WRITE: one WRITE per entry.
        let entries = iov.iter().filter(|v| v.len > 0);
        let writes = if self.local_lkey.is_some() {
            1
        } else {
            entries.clone().count() as u32
        };
        let Some(qp) = self.send_slot(ep, false, writes + 1)? else {
            return Ok(Posted::NoResource);
        };
        // The WRITEs, then a zero-length READ that completes only once the
        // WRITEs were placed (or fails when the target refused one): the
        // put completes with the READ, so a completed put is in the
        // target's memory and a refused one fails, as the uct contract
        // says.
        let group = self.new_group(token, writes + 1);
        let mut posted = 0;
        let mut at = remote_addr;
        let mut sges = [Sge::default(); MAX_SGES];
        let mut n = 0;
        let mut entries = entries.peekable();
        while let Some(v) = entries.next() {
            let step = self.local_sge(v.ptr, v.len, Access::empty());
            let (sge, m) = match step {
                Ok(x) => x,
                Err(e) => return Err(self.put_failed(group, posted, e)),
            };
            sges[n] = sge;
            n += 1;
            if writes > 1 || entries.peek().is_none() {
                let wr = SendWr {
                    wr_id: 0,
                    op: SendOp::Write {
                        remote_addr: at,
                        rkey: stag,
                    },
                    sges: &sges[..n],
                    flags: SendFlags::SIGNALED,
                };
                let op = Op {
                    qp,
                    ep: Some(ep),
                    switch: false,
                    buf: None,
                    // Set only where each entry has its own WRITE.
                    mr: m,
                    group: Some(group),
                    amo: None,
                };
                // SAFETY: the iov stays valid until completion (caller's
                // contract).
                if let Err(e) = unsafe { self.post_op(qp, wr, op, false) } {
                    return Err(self.put_failed(group, posted, e));
                }
                posted += 1;
                at += sges[..n].iter().map(|s| u64::from(s.len)).sum::<u64>();
                n = 0;
            }
        }
        if let Err(e) = self.post_flush_read(qp, Some(ep), Some(group), false) {
            return Err(self.put_failed(group, posted, e));
        }
        Ok(Posted::InFlight)
    }
}

impl RcIface {
    /// A put failed after `posted` of its WRITEs: those complete into a
    /// group whose caller is told of the failure now, so nobody is told
    /// again. Returns `e`.
    fn put_failed(&mut self, group: u32, posted: u32, e: Error) -> Error {
        if posted == 0 {
            self.groups.remove(group);
        } else if let Some(g) = self.groups.get_mut(group) {
            g.left = posted;
            g.silent = true;
        }
        e
    }
}

impl GetOps for RcIface {
    unsafe fn get_zcopy(
        &mut self,
        ep: EpId,
        iov: &[uct::IovMut],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted> {
        uct::with_iovs(iov, |iov| {
            let max = self.info.attr.max_get_zcopy;
            let (stag, _) = self.check_remote(rkey, remote_addr, iov, Access::REMOTE_READ, max)?;
            let n = iov.iter().filter(|v| v.len > 0).count() as u32;
            if n == 0 {
                return Ok(Posted::Done);
            }
            let Some(qp) = self.send_slot(ep, false, n)? else {
                return Ok(Posted::NoResource);
            };
            let group = self.new_group(token, n);
            let mut at = remote_addr;
            for (posted, v) in iov.iter().filter(|v| v.len > 0).enumerate() {
                let posted = posted as u32;
                // iWARP: a READ's sink is written by the peer's Read Response,
                // so it is registered with remote write rights, for this READ
                // only.
                let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
                let step = self.local_sge(v.ptr, v.len, access).and_then(|(sge, mr)| {
                    let wr = SendWr {
                        wr_id: 0,
                        op: SendOp::Read {
                            remote_addr: at,
                            rkey: stag,
                        },
                        sges: &[sge],
                        flags: SendFlags::SIGNALED,
                    };
                    let op = Op {
                        qp,
                        ep: Some(ep),
                        switch: false,
                        buf: None,
                        mr,
                        group: Some(group),
                        amo: None,
                    };
                    // SAFETY: the sink stays valid until completion (caller's
                    // contract).
                    unsafe { self.post_op(qp, wr, op, false) }
                });
                if let Err(e) = step {
                    if posted == 0 {
                        self.groups.remove(group);
                    } else if let Some(g) = self.groups.get_mut(group) {
                        // The READs already posted complete into a group whose
                        // caller was told of the failure: nobody is told again.
                        g.left = posted;
                        g.silent = true;
                    }
                    return Err(e);
                }
                at += v.len as u64;
            }
            Ok(Posted::InFlight)
        })
    }
}

impl RcIface {
    /// Counts down a completion group; reports its token when done.
    pub(crate) fn group_done(&mut self, group: Option<u32>, error: Option<Error>) {
        let Some(gi) = group else { return };
        let Some(g) = self.groups.get_mut(gi) else {
            return;
        };
        if g.error.is_none() {
            g.error = error;
        }
        g.left = g.left.saturating_sub(1);
        if g.left == 0 {
            if let Some(g) = self.groups.remove(gi) {
                if !g.silent {
                    let result = g.error.map_or(Ok(()), Err);
                    self.notices.push_back(Notice::Completed(g.token, result));
                }
            }
        }
    }
}

/// Bit of a receive's `wr_id` (sends use operation indices below it).
pub(crate) const RECV_BIT: u64 = 1 << 63;
