//! The operations of the RC iface: active messages over SEND, put over
//! RDMA WRITE, get over RDMA READ, flush through a zero-length READ.

use std::os::fd::RawFd;

use crate::uct::ucs::{Error, Result};
use crate::uct::{
    Access, AmId, AmSink, Armed, EpId, Iface, IfaceAttr, Iov, Posted, RemoteKey, Token, AM_ID_MAX,
};
use crate::verbs::{ConnParam, Mr, QpId, QpInit, SendFlags, SendOp, SendWr, Sge};

use super::bufs::Owner;
use super::iface::{
    no_ep, EpState, Group, Notice, Op, RcEp, RcIface, Role, GRANT_RECVS, INLINE_CAP,
};
use super::md::key_stag;
use super::wire::ConnReq;

/// Most gather entries of one operation (header buffer + iov).
const MAX_SGES: usize = 9;
/// Steering tag of a zero-length READ (a flush): never 0 on the wire, and
/// not checked by the responder for zero bytes.
const FLUSH_STAG: u32 = 1;

fn check_id(id: AmId) -> Result<()> {
    if id >= AM_ID_MAX {
        return Err(Error::InvalidParam(format!(
            "rc: active message id {id} >= {AM_ID_MAX}"
        )));
    }
    Ok(())
}

impl RcIface {
    /// The queue pair of `ep` if it can take a send now (`credit`: one
    /// that consumes a peer's receive); `None` for "no resources".
    fn send_slot(&mut self, ep: EpId, credit: bool, sq: u32) -> Result<Option<QpId>> {
        let e = self.eps.get(ep).ok_or_else(|| no_ep(ep))?;
        // While connecting, the provider holds the sends until the
        // connection is up; the peer posts the receives we count on before
        // it accepts.
        match &e.state {
            EpState::Failed(err) => Err(err.duplicate()),
            _ if (credit && e.credits == 0) || e.sq_free < sq => Ok(None),
            _ => Ok(Some(e.qp)),
        }
    }

    /// Posts `wr` (its `wr_id` replaced by the operation's) on `qp` and
    /// records `op`; charges the endpoint's queues.
    ///
    /// # Safety
    ///
    /// As [`crate::Verbs::post_send`].
    unsafe fn post_op(&mut self, qp: QpId, wr: SendWr<'_>, op: Op, credit: bool) -> Result<()> {
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
        if let Some(e) = ep.and_then(|ep| self.eps.get_mut(ep)) {
            e.sq_free -= 1;
            e.in_flight += 1;
            if credit {
                e.credits -= 1;
            }
        }
        Ok(())
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

    fn new_group(&mut self, token: Token, left: u32) -> u32 {
        self.groups.insert(Group {
            token,
            left,
            error: None,
            silent: false,
        })
    }

    /// Posts the remote-access check of a zero-copy put or get.
    fn check_remote(
        &self,
        rkey: &RemoteKey,
        addr: u64,
        len: usize,
        need: Access,
        max: usize,
    ) -> Result<u32> {
        let stag =
            key_stag(rkey).ok_or_else(|| Error::InvalidParam("rc: not an rc remote key".into()))?;
        if len > max {
            return Err(Error::InvalidParam(format!("rc: {len} bytes > {max}")));
        }
        if !rkey.covers(addr, len) || !rkey.access.contains(need) {
            return Err(Error::RemoteAccess(format!(
                "rc: {len} bytes at {addr:#x} outside the key's range or rights"
            )));
        }
        Ok(stag)
    }

    /// Flushes one endpoint with a zero-length READ counted in `group`.
    fn flush_ep(&mut self, ep: EpId, group: u32) -> Result<bool> {
        let Some(e) = self.eps.get(ep) else {
            return Err(no_ep(ep));
        };
        if let EpState::Failed(err) = &e.state {
            return Err(err.duplicate());
        }
        if e.in_flight == 0 {
            return Ok(false);
        }
        let qp = e.qp;
        self.post_flush_read(qp, ep, group)?;
        Ok(true)
    }

    /// Posts a zero-length READ on `ep`'s queue pair, counted in `group`:
    /// it completes after every earlier WRITE was placed at the target.
    fn post_flush_read(&mut self, qp: QpId, ep: EpId, group: u32) -> Result<()> {
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
            ep: Some(ep),
            buf: None,
            mr: None,
            group: Some(group),
        };
        // SAFETY: no memory is named.
        unsafe { self.post_op(qp, wr, op, false) }
    }
}

impl Iface for RcIface {
    fn tl_name(&self) -> &str {
        &self.tl_name
    }

    fn dev_name(&self) -> &str {
        &self.dev_name
    }

    fn attr(&self) -> &IfaceAttr {
        &self.attr
    }

    fn device_addr(&self) -> &[u8] {
        &self.dev_addr
    }

    fn iface_addr(&self) -> &[u8] {
        &self.iface_addr
    }

    fn is_reachable(&self, dev_addr: &[u8], iface_addr: &[u8]) -> bool {
        self.local.is_reachable(dev_addr, iface_addr)
    }

    fn ep_create(&mut self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<EpId> {
        let remote = crate::uct::ip_addr::unpack(dev_addr, iface_addr)
            .filter(|r| self.local.reaches(r))
            .ok_or_else(|| Error::Unreachable(format!("{}: address", self.tl_name)))?;
        let dattr = self.device.attr();
        let init = QpInit {
            pd: self.pd,
            send_cq: self.cq,
            recv_cq: self.cq,
            max_send_wr: self.limits.tx_queue,
            max_recv_wr: GRANT_RECVS,
            max_send_sge: (self.attr.max_iov as u32 + 1).min(dattr.max_sge),
            max_recv_sge: 1,
            max_inline: self.max_inline as u32,
            sq_sig_all: true,
        };
        let qp = self.verbs.create_qp(&init)?;
        let param = ConnParam {
            private_data: ConnReq {
                seg: self.bufs.seg() as u32,
                uuid: self.worker_uuid,
                credits: self.limits.rx_queue,
            }
            .encode(),
            ord: self.limits.ord.min(dattr.max_qp_rd_atom),
            ird: dattr.max_qp_init_rd_atom,
        };
        let started = self
            .post_recvs(qp, GRANT_RECVS)
            .and_then(|()| self.verbs.connect(qp, remote.addr.into(), &param));
        if let Err(e) = started {
            self.drop_qp(qp);
            return Err(e);
        }
        let id = self.eps.insert(RcEp {
            qp,
            state: EpState::Connecting,
            credits: self.limits.rx_queue,
            sq_free: self.limits.tx_queue,
            pending: Default::default(),
            in_flight: 0,
        })?;
        self.set_role(qp, Some(Role::Ep(id)));
        Ok(id)
    }

    fn ep_destroy(&mut self, ep: EpId) {
        if let Some(e) = self.eps.remove(ep) {
            self.drop_qp(e.qp);
        }
    }

    fn am_short(&mut self, ep: EpId, id: AmId, header: u64, payload: &[u8]) -> Result<Posted> {
        check_id(id)?;
        if payload.len() > self.attr.max_short {
            return Err(Error::InvalidParam(format!(
                "rc: am_short of {} bytes > {}",
                payload.len(),
                self.attr.max_short
            )));
        }
        let Some(qp) = self.send_slot(ep, true, 1)? else {
            return Ok(Posted::NoResource);
        };
        let mut msg = [0u8; INLINE_CAP];
        msg[0] = id;
        msg[1..9].copy_from_slice(&header.to_le_bytes());
        msg[9..9 + payload.len()].copy_from_slice(payload);
        let sge = [Sge {
            addr: msg.as_ptr() as u64,
            len: (9 + payload.len()) as u32,
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
            buf: None,
            mr: None,
            group: None,
        };
        // SAFETY: an inline send copies `msg` before returning.
        unsafe { self.post_op(qp, wr, op, true) }?;
        Ok(Posted::Done)
    }

    fn am_bcopy(&mut self, ep: EpId, id: AmId, parts: &[&[u8]]) -> Result<(Posted, usize)> {
        check_id(id)?;
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total > self.attr.max_bcopy {
            return Err(Error::InvalidParam(format!(
                "rc: am_bcopy of {total} bytes > {}",
                self.attr.max_bcopy
            )));
        }
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
        let idb = [id];
        all[0] = &idb;
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
            buf: Some(buf),
            mr: None,
            group: None,
        };
        // SAFETY: the buffer is the pool's, held by the operation.
        unsafe { self.post_op(qp, wr, op, true) }?;
        Ok((Posted::Done, total))
    }

    unsafe fn am_zcopy(
        &mut self,
        ep: EpId,
        id: AmId,
        header: &[u8],
        iov: &[Iov],
        token: Token,
    ) -> Result<Posted> {
        check_id(id)?;
        let total: usize = iov.iter().map(|v| v.len).sum();
        if header.len() > self.attr.max_hdr
            || iov.len() > self.attr.max_iov
            || total > self.attr.max_zcopy
        {
            return Err(Error::InvalidParam(format!(
                "rc: am_zcopy of {} header bytes, {} entries, {total} bytes",
                header.len(),
                iov.len()
            )));
        }
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
        let len = self.bufs.fill(buf, &[&[id], header]).unwrap_or(0);
        let mut sges = [Sge::default(); MAX_SGES];
        sges[0] = self.bufs.sge(buf, len);
        let mut n = 1;
        for v in iov.iter().filter(|v| v.len > 0) {
            let (sge, _) = self.local_sge(v.ptr, v.len, Access::empty())?;
            sges[n] = sge;
            n += 1;
        }
        let group = self.new_group(token, 1);
        let wr = SendWr {
            wr_id: 0,
            op: SendOp::Send,
            sges: &sges[..n],
            flags: SendFlags::SIGNALED,
        };
        let op = Op {
            qp,
            ep: Some(ep),
            buf: Some(buf),
            mr: None,
            group: Some(group),
        };
        // SAFETY: the iov stays valid until completion (caller's contract).
        if let Err(e) = unsafe { self.post_op(qp, wr, op, true) } {
            self.groups.remove(group);
            return Err(e);
        }
        Ok(Posted::InFlight)
    }

    unsafe fn put_zcopy(
        &mut self,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted> {
        let total: usize = iov.iter().map(|v| v.len).sum();
        let max = self.attr.max_put_zcopy;
        let stag = self.check_remote(rkey, remote_addr, total, Access::REMOTE_WRITE, max)?;
        if iov.len() > self.attr.max_iov {
            return Err(Error::InvalidParam(
                "rc: put_zcopy: too many entries".into(),
            ));
        }
        if total == 0 {
            return Ok(Posted::Done);
        }
        let Some(qp) = self.send_slot(ep, false, 2)? else {
            return Ok(Posted::NoResource);
        };
        let mut sges = [Sge::default(); MAX_SGES];
        let mut n = 0;
        let mut mr = None;
        for v in iov.iter().filter(|v| v.len > 0) {
            let (sge, m) = self.local_sge(v.ptr, v.len, Access::empty())?;
            if m.is_some() && mr.is_some() {
                return Err(Error::Unsupported(
                    "rc: put_zcopy of several entries without a local key".into(),
                ));
            }
            mr = mr.or(m);
            sges[n] = sge;
            n += 1;
        }
        // The WRITE, then a zero-length READ that completes only once the
        // WRITE was placed (or fails when the target refused it): the put
        // completes with the READ, so a completed put is in the target's
        // memory and a refused one fails, as the uct contract says.
        let group = self.new_group(token, 2);
        let wr = SendWr {
            wr_id: 0,
            op: SendOp::Write {
                remote_addr,
                rkey: stag,
            },
            sges: &sges[..n],
            flags: SendFlags::SIGNALED,
        };
        let op = Op {
            qp,
            ep: Some(ep),
            buf: None,
            mr,
            group: Some(group),
        };
        // SAFETY: the iov stays valid until completion (caller's contract).
        if let Err(e) = unsafe { self.post_op(qp, wr, op, false) } {
            self.groups.remove(group);
            return Err(e);
        }
        if let Err(e) = self.post_flush_read(qp, ep, group) {
            if let Some(g) = self.groups.get_mut(group) {
                g.left = 1;
                g.silent = true;
            }
            return Err(e);
        }
        Ok(Posted::InFlight)
    }

    unsafe fn get_zcopy(
        &mut self,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted> {
        let total: usize = iov.iter().map(|v| v.len).sum();
        let max = self.attr.max_get_zcopy;
        let stag = self.check_remote(rkey, remote_addr, total, Access::REMOTE_READ, max)?;
        if iov.len() > self.attr.max_iov {
            return Err(Error::InvalidParam(
                "rc: get_zcopy: too many entries".into(),
            ));
        }
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
                    buf: None,
                    mr,
                    group: Some(group),
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
    }

    fn pending_add(&mut self, ep: EpId, token: Token) -> Result<()> {
        let e = self.eps.get_mut(ep).ok_or_else(|| no_ep(ep))?;
        if let EpState::Failed(err) = &e.state {
            return Err(err.duplicate());
        }
        e.pending.push_back(token);
        self.ready.push(ep);
        Ok(())
    }

    fn flush(&mut self, ep: Option<EpId>, token: Token) -> Result<Posted> {
        let targets: Vec<EpId> = match ep {
            Some(ep) => vec![ep],
            None => self
                .eps
                .iter()
                .filter(|(_, e)| !matches!(e.state, EpState::Failed(_)))
                .map(|(id, _)| id)
                .collect(),
        };
        for &t in &targets {
            let e = self.eps.get(t).ok_or_else(|| no_ep(t))?;
            if let EpState::Failed(err) = &e.state {
                return Err(err.duplicate());
            }
            if e.sq_free == 0 {
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

impl RcIface {
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
    /// complete with `Canceled` on the next progress.
    pub(crate) fn drop_qp(&mut self, qp: QpId) {
        if let Err(e) = self.verbs.destroy_qp(qp) {
            tracing::debug!(error = %e, "rc: queue pair not destroyed");
        }
        self.set_role(qp, None);
        for b in self.bufs.held_by(qp) {
            self.bufs.give(b);
        }
        for i in self.ops.find(|op| op.qp == qp) {
            if let Some(op) = self.ops.remove(i) {
                self.release_op_resources(&op);
                self.group_done(op.group, Some(Error::Canceled));
            }
        }
    }

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
