//! Rendezvous by get: the receiver reads the sender's registered buffer.
//!
//! The sender registers its buffer for remote reads with the memory domain
//! of its lane and sends `RNDV_RTS_GET` (tag, request id, length, address,
//! packed key). A receive that matches it reads the data straight into
//! the user's buffer with `get_zcopy` on the endpoint back to the sender,
//! then answers `RNDV_ATS`; the sender deregisters and completes. The key
//! from the wire is unpacked (validated) by the receiver's memory domain,
//! and the sender's domain checks every read against the live
//! registration, so a forged key reads nothing.
//!
//! # Split
//!
//! From `RUCX_RNDV_SPLIT_THRESH` bytes, when the lanes are within the host
//! (CMA), can also write, and the receive holds the whole message, the
//! receiver registers one half of its buffer (split at a page boundary)
//! for remote writes and sends its key, `RNDV_RTR_SPLIT` for the second
//! half or `RNDV_RTR_SPLIT_HEAD` for the first, before it reads the other
//! half. Which half is whose depends on the pair, not on the direction
//! (`Core::reads_head`). The sender writes its half as in a rendezvous
//! by put and answers `RNDV_ATP`; the receiver's `RNDV_ATS` still says
//! its reads are done.
//! The receive completes once it has both, the send once its writes are
//! done and the ATS came (which may come first). Both processes copy at
//! once, but the receive now needs the sender to progress.

use super::eager_tx::Step;
use super::wire::{
    self, AM_RNDV_ATS, AM_RNDV_RTR_SPLIT, AM_RNDV_RTR_SPLIT_HEAD, AM_RNDV_RTS_GET, RTS_GET_HDR,
};
use crate::proto::command::Command;
use crate::proto::core::{AckTo, Core, GetPlan, RemoteBuf, Rts};
use crate::proto::eager_rx::RecvStarted;
use crate::proto::lanes::Lanes;
use crate::proto::lazy_lanes::LAZY;
use crate::proto::rndv_zcopy::{all_posted, data_lanes, post_segments, split, Local, Remote};
use crate::proto::select::ProtocolId;
use crate::request::{AtsTo, GetPhase, Kind, RecvPhase, Request, RndvPhase, RndvRecv};
use crate::ucs::slab::SlabId;
use crate::ucs::{self, PeerMisbehaved};
use crate::uct::{Caps, DeviceType, RemoteKey, SrcId, Token};
use crate::Error;

/// Where a split rendezvous divides a message: a page boundary.
const SPLIT_ALIGN: usize = 4096;

fn invalid(what: &'static str, detail: String) -> PeerMisbehaved {
    PeerMisbehaved::Invalid { what, detail }
}

impl Core {
    pub(crate) fn rx_rts_get(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let [tag, sreq, total] = wire::decode_u64x3("rendezvous RTS", data)?;
        if data.len() < RTS_GET_HDR {
            return Err(invalid("rendezvous RTS", format!("{} bytes", data.len())));
        }
        let mut a = [0u8; 8];
        a.copy_from_slice(&data[24..RTS_GET_HDR]);
        let addr = u64::from_le_bytes(a);
        let (packed, more) = wire::decode_rts_keys(&data[RTS_GET_HDR..])?;
        let total =
            usize::try_from(total).map_err(|_| invalid("rendezvous length", format!("{total}")))?;
        let md = self
            .iface_md
            .get(self.cur_iface)
            .and_then(|&i| self.ctx.md(i))
            .ok_or_else(|| invalid("rendezvous key", "no memory domain".into()))?;
        let rkey = md
            .rkey_unpack(packed)
            .map_err(|e| invalid("rendezvous key", e.to_string()))?;
        let to = AckTo {
            iface: self.cur_iface,
            src,
            sreq,
        };
        let more = more
            .into_iter()
            .map(|(name, key)| (name.to_string(), key.to_vec()))
            .collect();
        let rb = RemoteBuf { addr, rkey, more };
        self.rts_arrived(tag, total, to, Rts::Get(rb));
        Ok(())
    }

    /// Receive `req` matched a rendezvous by get: read once progress ends.
    pub(crate) fn rndv_get_matched(
        &mut self,
        req: SlabId,
        tag: u64,
        total: usize,
        to: AckTo,
        rb: RemoteBuf,
    ) -> RecvStarted {
        if let Some(r) = self.recv_state(req) {
            let from = (to.iface, to.src);
            let by = RndvRecv::Get {
                reads: 0,
                ats_to: None,
                tail: false,
            };
            r.matched(tag, total, RecvPhase::Rndv { from, by });
        }
        self.commands.push_back(Command::StartGet { req, to, rb });
        RecvStarted::InFlight(req)
    }

    /// Plans the reads of matched rendezvous-by-get receive `req` over
    /// the data lanes, and posts them.
    pub(crate) fn start_get(&mut self, tx: &mut dyn Lanes, req: SlabId, to: AckTo, rb: RemoteBuf) {
        let Some(&ep) = self.src_eps.get(&(to.iface, to.src)) else {
            let e = crate::error::peer_failed("no endpoint back to the sender".into());
            self.complete(req, Err(Error::endpoint(e)));
            return;
        };
        let Some(r) = self.recv_state_ref(req) else {
            return;
        };
        let want = r.total.min(r.buf.capacity());
        self.connect_lanes(tx, ep, 0, (want, ProtocolId::RndvGetZcopy));
        let Some(st) = self.eps.get(ep) else {
            return;
        };
        // The lanes selection chose for this size, among those of the
        // domain that unpacked the key and those the sender sent a key of
        // their remote domain for.
        let md = self.iface_md.get(to.iface).copied();
        let keys = self.lane_keys(ep, md, &rb);
        let lanes = data_lanes(&st.tables[0], want, ProtocolId::RndvGetZcopy, |l| {
            st.lanes.get(l).is_some_and(|&(i, e)| {
                e != LAZY
                    && (self.iface_md.get(i).copied() == md
                        || keys.get(l).is_some_and(Option::is_some))
            })
        });
        let (from, end) = self.split_tail(tx, ep, to, req, &lanes);
        let segs = split(end - from, &lanes)
            .into_iter()
            .map(|(l, a, b)| (l, from + a, from + b))
            .collect();
        if let Some(r) = self.recv_state(req) {
            r.received = r.total;
            if let RecvPhase::Rndv {
                by: RndvRecv::Get { ats_to, .. },
                ..
            } = &mut r.phase
            {
                *ats_to = Some(AtsTo { ep, sreq: to.sreq });
            }
        }
        self.get_plans.insert(req, GetPlan { ep, rb, keys, segs });
        self.push_get(tx, req);
    }

    /// For a message of at least `RUCX_RNDV_SPLIT_THRESH` bytes, offers
    /// one part of receive `req`'s buffer to the sender
    /// (`RNDV_RTR_SPLIT` for the tail, `RNDV_RTR_SPLIT_HEAD` for the
    /// head), which writes it while this side reads the other part (see
    /// [`Core::reads_head`]). Returns the range of the message to read:
    /// all of it when the message is small, truncated, or the lanes
    /// cannot write.
    fn split_tail(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        to: AckTo,
        req: SlabId,
        lanes: &[(usize, f64)],
    ) -> (usize, usize) {
        let (total, buf) = match self.recv_state_ref(req) {
            Some(r) if r.total <= r.buf.capacity() => (r.total, r.buf),
            Some(r) => return (0, r.buf.capacity()),
            None => return (0, 0),
        };
        // Page-aligned halves: each side pins only its own pages. The
        // nearest boundary, not the one below, so that neither side copies
        // much more than half (40000 bytes split 20480 + 19520, not
        // 16384 + 23616).
        let head = (total / 2 + SPLIT_ALIGN / 2) & !(SPLIT_ALIGN - 1);
        let splits = self.can_split(tx, ep, lanes.iter().map(|&(l, _)| l));
        if total < self.select.config().rndv_split_thresh || !splits || head == 0 || head >= total {
            return (0, total);
        }
        let reads_head = self
            .eps
            .get(ep)
            .is_none_or(|st| self.reads_head(st.remote_uuid));
        let (offered, read, am) = if reads_head {
            ((head, total), (0, head), AM_RNDV_RTR_SPLIT)
        } else {
            ((0, head), (head, total), AM_RNDV_RTR_SPLIT_HEAD)
        };
        match self.offer_for_writes(to.iface, req, offered.0, offered.1) {
            Ok((reg, key)) => {
                if let Some(r) = self.recv_state(req) {
                    r.memh = Some(Box::new(reg));
                    if let RecvPhase::Rndv {
                        by: RndvRecv::Get { tail, .. },
                        ..
                    } = &mut r.phase
                    {
                        *tail = true;
                    }
                }
                let len = (offered.1 - offered.0) as u64;
                let addr = buf.ptr_at(offered.0) as u64;
                let d = wire::encode_rtr_put([to.sreq, req.to_u64(), addr, len], &key);
                self.send_ctrl(tx, ep, am, d);
                read
            }
            Err(e) => {
                tracing::debug!("rendezvous split: {e}; reading all of it");
                (0, total)
            }
        }
    }

    /// Whether this worker, receiving a split rendezvous from the worker
    /// `remote_uuid`, reads the head (and the sender writes the tail)
    /// rather than the other way round.
    ///
    /// Each worker of a pair copies the same half whichever way a message
    /// goes: the one with the smaller uuid the head, the other the tail
    /// (on a tie, the receiver reads the head). A process that sends back
    /// the buffer it received into (a ping-pong, an MPI echo) then copies
    /// bytes its own core wrote last: from the half of its buffer it
    /// filled, into the half of the peer's it filled. Had the receiver
    /// always read the head, every copy would read lines the other core
    /// had just written.
    pub(crate) fn reads_head(&self, remote_uuid: u64) -> bool {
        self.uuid <= remote_uuid
    }

    /// Whether a rendezvous by get over `lanes` (of endpoint `ep`) may be
    /// split: every lane is within the host and can also write. There
    /// each process's CPU copies its half; over a network the NIC or the
    /// kernel's stack moves the data whichever side asks, and splitting
    /// only adds messages.
    pub(crate) fn can_split(
        &self,
        tx: &dyn Lanes,
        ep: SlabId,
        mut lanes: impl Iterator<Item = usize>,
    ) -> bool {
        self.eps.get(ep).is_some_and(|st| {
            lanes.all(|l| {
                st.lanes.get(l).is_some_and(|&(i, _)| {
                    self.iface_dev.get(i) == Some(&DeviceType::Shm)
                        && tx.attr(i).is_some_and(|a| a.caps.contains(Caps::PUT_ZCOPY))
                })
            })
        })
    }

    /// The smallest message a rendezvous by get on endpoint `ep` splits
    /// (by the non-synchronous table), if any.
    pub(crate) fn split_from(&self, tx: &dyn Lanes, ep: SlabId) -> Option<usize> {
        let thresh = self.select.config().rndv_split_thresh.max(2 * SPLIT_ALIGN);
        if thresh == usize::MAX {
            return None;
        }
        let st = self.eps.get(ep)?;
        st.tables[0].choices().iter().find_map(|c| {
            let lanes = c.lanes.iter().map(|(l, _)| l);
            (c.proto == ProtocolId::RndvGetZcopy
                && c.end >= thresh
                && self.can_split(tx, ep, lanes))
            .then(|| c.start.max(thresh))
        })
    }

    /// The receives with reads still to post through endpoint `ep`.
    fn reading_on(&self, ep: SlabId) -> Vec<SlabId> {
        let on_ep = self.get_plans.iter().filter(|(_, p)| p.ep == ep);
        on_ep.map(|(&id, _)| id).collect()
    }

    /// Resumes the reads waiting for room on endpoint `ep`'s lanes.
    pub(crate) fn resume_gets(&mut self, tx: &mut dyn Lanes, ep: SlabId) -> usize {
        let ids = self.reading_on(ep);
        let n = ids.len();
        for id in ids {
            self.push_get(tx, id);
        }
        n
    }

    /// Endpoint `ep` failed: the receives reading through it post no more
    /// reads, and fail once those in flight have finished.
    pub(crate) fn fail_reads_on(&mut self, ep: SlabId, err: &Error) {
        let ids = self.reading_on(ep);
        for id in ids {
            self.get_plans.remove(&id);
            self.note_read_error(id, err.clone());
            if self.recv_state(id).is_some_and(|r| r.reads() == 0) {
                self.commands.push_back(Command::ReadsDone(id));
            }
        }
    }

    /// Posts what it can of receive `req`'s reads; finishes the receive
    /// once all are posted and completed.
    fn push_get(&mut self, tx: &mut dyn Lanes, req: SlabId) {
        let frag = self.select.config().rndv_frag_size;
        let buf = match self.reqs.get(req).map(|r| &r.kind) {
            Some(Kind::Recv(r)) => r.buf,
            _ => {
                self.get_plans.remove(&req);
                return;
            }
        };
        let Some(plan) = self.get_plans.get_mut(&req) else {
            return;
        };
        let Some(st) = self.eps.get(plan.ep) else {
            self.get_plans.remove(&req);
            self.get_done(tx, req, Some(Error::InvalidHandle));
            return;
        };
        let remote = Remote {
            addr: plan.rb.addr,
            rkey: &plan.rb.rkey,
            lane_keys: &plan.keys,
        };
        // The segments lie in the receive's buffer (they split at most its
        // capacity); it completes only after these reads did (the phase
        // counts them, and the plan stays until all are posted).
        let posted = post_segments(
            tx,
            &st.lanes,
            &mut plan.segs,
            frag,
            Local::Recv(buf),
            remote,
            Token(req.to_u64()),
        );
        let all = posted.failure.is_some() || all_posted(&plan.segs);
        let waiting = match (all, posted.blocked) {
            (false, Some(l)) => st.lanes.get(l).copied().map(|lane| (plan.ep, lane)),
            _ => None,
        };
        if all {
            self.get_plans.remove(&req);
        }
        let inflight = match self.recv_state(req) {
            Some(r) => {
                r.add_reads(posted.inflight);
                r.reads()
            }
            None => return,
        };
        if let Some((ep, (ifi, uct_ep))) = waiting {
            self.await_room(ep, ifi, uct_ep);
            return;
        }
        match posted.failure {
            Some(e) if inflight == 0 => self.get_done(tx, req, Some(e)),
            // The reads in flight finish it; remember why it failed.
            Some(e) => self.note_read_error(req, e),
            None if all && inflight == 0 => self.get_done(tx, req, None),
            None => {}
        }
    }

    /// A read of receive `id` completed (from the transport).
    pub(crate) fn get_completed(&mut self, id: SlabId, result: ucs::Result<()>) {
        let Some(r) = self.recv_state(id) else {
            return;
        };
        r.read_done();
        if let Err(e) = result {
            self.note_read_error(id, Error::endpoint(e));
        }
        let posted = !self.get_plans.contains_key(&id);
        if posted && self.recv_state(id).is_some_and(|r| r.reads() == 0) {
            self.commands.push_back(Command::ReadsDone(id));
        }
    }

    /// Finishes receive `id`, whose reads all completed.
    pub(crate) fn reads_done(&mut self, tx: &mut dyn Lanes, id: SlabId) {
        let err = self.take_read_error(id);
        // A receive whose sender failed meanwhile is over already.
        if self.reqs.get(id).is_none_or(|r| r.result.is_some()) {
            return;
        }
        self.get_done(tx, id, err);
    }

    fn send_ats(&mut self, tx: &mut dyn Lanes, req: SlabId) {
        let Some(to) = self.recv_state(req).and_then(|r| match &mut r.phase {
            RecvPhase::Rndv {
                by: RndvRecv::Get { ats_to, .. },
                ..
            } => ats_to.take(),
            _ => None,
        }) else {
            return;
        };
        self.send_ctrl(tx, to.ep, AM_RNDV_ATS, to.sreq.to_le_bytes().to_vec());
    }

    /// The sender's buffer was read (or reading failed): acknowledge, so
    /// the sender can release it, and complete, or for a split
    /// rendezvous wait for the sender's ATP.
    fn get_done(&mut self, tx: &mut dyn Lanes, req: SlabId, err: Option<Error>) {
        self.send_ats(tx, req);
        if let Some(r) = self.recv_state(req) {
            if r.tail_due() {
                // The sender still writes the tail; its ATP finishes this.
                if let Some(e) = err {
                    self.note_read_error(req, e);
                }
                return;
            }
            r.sender_done();
        }
        match err {
            Some(e) => self.complete(req, Err(e)),
            None => self.finish_recv(req),
        }
    }

    /// The receiver read send `id` (from the wire: may be stale or forged).
    pub(crate) fn rndv_ats(&mut self, id: SlabId) {
        if let Some(crate::request::Request {
            kind: Kind::Send(s),
            ..
        }) = self.reqs.get_mut(id)
        {
            match s.rndv {
                RndvPhase::Get(GetPhase::AwaitAts | GetPhase::TailWritten) => {
                    s.rndv = RndvPhase::No;
                    s.offset = s.buf.len();
                    s.sync.ack();
                    self.finish_send(id);
                }
                // Still writing the tail of a split rendezvous.
                RndvPhase::Get(GetPhase::Tail(_)) => {
                    if let Some(pt) = self.puts.get_mut(&id) {
                        pt.tail = pt.tail.map(|_| true);
                    }
                }
                _ => {}
            }
        }
    }

    /// Records that a read of receive `id` failed; the first failure is
    /// the one the receive reports.
    pub(crate) fn note_read_error(&mut self, id: SlabId, e: Error) {
        if let Some(r) = self.recv_state(id) {
            r.read_error.get_or_insert_with(|| Box::new(e));
        }
    }

    /// The first recorded read failure of receive `id`, if any.
    pub(crate) fn take_read_error(&mut self, id: SlabId) -> Option<Error> {
        self.recv_state(id)
            .and_then(|r| r.read_error.take())
            .map(|e| *e)
    }

    /// Registers the buffer of send `id` and offers it to the receiver.
    pub(crate) fn push_rts_get(&mut self, tx: &mut dyn Lanes, id: SlabId) -> Step {
        let Some(Request {
            kind: Kind::Send(s),
            ..
        }) = self.reqs.get(id)
        else {
            return Step::Failed;
        };
        let (ep, tag, buf, sync) = (s.ep, s.tag, s.buf, s.sync.is_sync());
        let have = s.memh.as_ref().map(|r| r.memh.clone());
        let Some(st) = self.eps.get(ep) else {
            self.fail_send(id, Error::InvalidHandle);
            return Step::Failed;
        };
        let (ifi, uct_ep) = (st.iface, st.uct_ep);
        // The other domains of the lanes selection reads this size over.
        let mut other_mds: Vec<usize> = Vec::new();
        let lanes = data_lanes(
            &st.tables[usize::from(sync)],
            buf.len(),
            ProtocolId::RndvGetZcopy,
            |_| true,
        );
        for (l, _) in lanes {
            let m = st.lanes.get(l).and_then(|&(i, _)| self.iface_md.get(i));
            if let Some(&m) = m {
                if Some(m) != self.iface_md.get(ifi).copied() && !other_mds.contains(&m) {
                    other_mds.push(m);
                }
            }
        }
        let Some(mdi) = self.iface_md.get(ifi).copied() else {
            self.fail_send(id, Error::InvalidHandle);
            return Step::Failed;
        };
        let Some(md) = self.ctx.md(mdi) else {
            self.fail_send(id, Error::InvalidHandle);
            return Step::Failed;
        };
        let memh = match have {
            Some(m) => m,
            None => {
                // Kept in the request, whose completion releases it.
                let r = buf.register_for_reads(&self.ctx, mdi);
                match r {
                    Ok(mut r) => {
                        // A domain that cannot register leaves its lanes
                        // out: the receiver reads over those it has keys
                        // for.
                        for &m in &other_mds {
                            match buf.register_for_reads(&self.ctx, m) {
                                Ok(more) => r.more.push(more),
                                Err(e) => tracing::debug!(
                                    "rendezvous by get: no registration with domain {m}: {e}"
                                ),
                            }
                        }
                        let m = r.memh.clone();
                        if let Some(Request {
                            kind: Kind::Send(s),
                            ..
                        }) = self.reqs.get_mut(id)
                        {
                            s.memh = Some(Box::new(r));
                        }
                        m
                    }
                    Err(e) => {
                        self.fail_send(id, Error::transport(e));
                        return Step::Failed;
                    }
                }
            }
        };
        let packed = match md.mkey_pack(&memh) {
            Ok(p) => p,
            Err(e) => {
                // The registration ends with the request.
                self.fail_send(id, Error::transport(e));
                return Step::Failed;
            }
        };
        let more = self.more_read_keys(id);
        let Some(packed) = wire::encode_rts_keys(&packed, &more) else {
            let e = Error::Unsupported("rendezvous keys too long to send".into());
            self.fail_send(id, e);
            return Step::Failed;
        };
        // The buffer's own address: a cached registration may start
        // before it.
        let (t, r, l, a) = (
            tag.to_le_bytes(),
            id.to_u64().to_le_bytes(),
            (buf.len() as u64).to_le_bytes(),
            (buf.ptr_at(0) as u64).to_le_bytes(),
        );
        let parts: [&[u8]; 5] = [&t, &r, &l, &a, &packed];
        let next = RndvPhase::Get(GetPhase::AwaitAts);
        self.send_rts(tx, id, (ifi, uct_ep), AM_RNDV_RTS_GET, &parts, next)
    }

    /// The keys of send `id`'s registrations with further domains (for
    /// lanes on other devices): (domain name, packed key).
    fn more_read_keys(&self, id: SlabId) -> Vec<(&str, Vec<u8>)> {
        let Some(Request {
            kind: Kind::Send(s),
            ..
        }) = self.reqs.get(id)
        else {
            return Vec::new();
        };
        let Some(reg) = s.memh.as_deref() else {
            return Vec::new();
        };
        reg.more
            .iter()
            .filter_map(|r| {
                let md = self.ctx.md(r.md)?;
                match md.mkey_pack(&r.memh) {
                    Ok(k) => Some((md.name(), k)),
                    Err(e) => {
                        tracing::debug!("rendezvous by get: no key of {}: {e}", md.name());
                        None
                    }
                }
            })
            .collect()
    }

    /// Per lane of endpoint `ep`, the key to read `rb` with when the lane's
    /// domain is not `md` (the one that unpacked `rb.rkey`): the sender's
    /// key of the lane's remote domain, unpacked by the lane's own; `None`
    /// where there is none (the lane reads with `rb.rkey` if of `md`, else
    /// not at all).
    fn lane_keys(&self, ep: SlabId, md: Option<usize>, rb: &RemoteBuf) -> Vec<Option<RemoteKey>> {
        let Some(st) = self.eps.get(ep) else {
            return Vec::new();
        };
        if rb.more.is_empty() {
            return Vec::new();
        }
        st.lanes
            .iter()
            .zip(&st.remote_mds)
            .map(|(&(i, _), remote_md)| {
                let m = self.iface_md.get(i).copied();
                if m == md {
                    return None;
                }
                let local = self.ctx.md(m?)?;
                let (_, key) = rb.more.iter().find(|(n, _)| **n == **remote_md)?;
                match local.rkey_unpack(key) {
                    Ok(k) => Some(k),
                    Err(e) => {
                        tracing::debug!("rendezvous key of {remote_md}: {e}");
                        None
                    }
                }
            })
            .collect()
    }
}
