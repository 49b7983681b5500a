//! Rendezvous by put: the sender writes into the receiver's registered
//! buffer.
//!
//! The sender's `RNDV_RTS_PUT` is matched like any request to send. The
//! receive that matched it registers its buffer (as much of it as the
//! message fills) for remote writes with the memory domain of the iface
//! the request came on, and answers `RNDV_RTR_PUT` with the address, the
//! length and the packed key. The sender splits the data over its data
//! lanes in proportion to their bandwidth, writes it with `put_zcopy` in
//! fragments of at most `RUCX_RNDV_FRAG_SIZE`, and once every write has
//! completed at the receiver sends `RNDV_ATP`; the receiver deregisters and
//! completes. A receiver that cannot register answers a plain `RNDV_RTR`
//! and the sender falls back to active-message fragments.
//!
//! Everything from the wire is checked: the ATP must come from the source
//! that sent the request, for an open put receive; the key is unpacked
//! (validated) by the sender's domain, and the receiver's domain checks
//! every write against the live registration.

use super::eager_tx::Step;
use super::rndv_zcopy::{all_posted, data_lanes, post_segments, split, Local, Remote};
use super::wire::{self, AM_RNDV_ATP, AM_RNDV_RTR_PUT};
use crate::proto::command::Command;
use crate::proto::core::{AckTo, Core, Offered, PutOffer, PutTarget};
use crate::proto::lanes::Lanes;
use crate::proto::lazy_lanes::LAZY;
use crate::proto::select::ProtocolId;
use crate::request::{
    GetPhase, Info, Kind, PutPhase, RecvPhase, Request, RndvPhase, RndvRecv, WritePhase,
};
use crate::ucs::slab::SlabId;
use crate::ucs::{self, PeerMisbehaved, Status};
use crate::uct::{SrcId, Token};
use crate::Error;

fn invalid(what: &'static str, detail: String) -> PeerMisbehaved {
    PeerMisbehaved::Invalid { what, detail }
}

impl Core {
    /// Receive `req` matched a rendezvous by put: register and answer once
    /// progress ends.
    pub(crate) fn rndv_put_matched(
        &mut self,
        req: SlabId,
        tag: u64,
        total: usize,
        to: AckTo,
    ) -> crate::proto::eager_rx::RecvStarted {
        if total == 0 {
            // Nothing to write: the active-message answer finishes it.
            return self.rndv_matched(req, tag, total, to);
        }
        if let Some(r) = self.recv_state(req) {
            let (from, by) = ((to.iface, to.src), RndvRecv::Put);
            r.matched(tag, total, RecvPhase::Rndv { from, by });
        }
        self.commands.push_back(Command::OfferBuffer {
            to,
            rreq: req.to_u64(),
        });
        crate::proto::eager_rx::RecvStarted::InFlight(req)
    }

    /// An offer of the receiver's buffer arrived: all of it (`RTR_PUT`),
    /// or the part of a split rendezvous by get that the receiver does
    /// not read (`RTR_SPLIT`, `RTR_SPLIT_HEAD`).
    pub(crate) fn rx_rtr_put(&mut self, data: &[u8], part: Offered) -> Result<(), PeerMisbehaved> {
        let ([sreq, rreq, addr, len], key) = wire::decode_rtr_put(data)?;
        if part != Offered::Whole {
            // From now on the send waits for its writes as well as for the
            // receiver's ATS, which may come before the writes start.
            let id = SlabId::from_u64(sreq);
            match self.reqs.get_mut(id).map(|r| &mut r.kind) {
                Some(Kind::Send(s)) if s.rndv == RndvPhase::Get(GetPhase::AwaitAts) => {
                    s.rndv = RndvPhase::Get(GetPhase::Tail(WritePhase::Writing));
                    self.puts.insert(id, PutTarget::noted_tail(rreq));
                }
                _ => {
                    return Err(invalid(
                        "rendezvous split",
                        format!("{sreq:#x} is not open"),
                    ))
                }
            }
        }
        self.commands.push_back(Command::StartPut(PutOffer {
            sreq,
            rreq,
            addr,
            len,
            key: key.to_vec(),
            part,
        }));
        Ok(())
    }

    pub(crate) fn rx_atp(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let (rreq, status) = wire::decode_atp(data)?;
        let id = SlabId::from_u64(rreq);
        let from = (self.cur_iface, src);
        let Some(r) = self.recv_state(id) else {
            return Err(invalid("rendezvous ATP", format!("{rreq:#x} is not open")));
        };
        if r.fed_by() != Some(from) || r.memh.is_none() {
            return Err(invalid(
                "rendezvous ATP",
                "not for a put receive fed by this source".into(),
            ));
        }
        let written = (status != 0).then(|| {
            let s = i8::try_from(status as i64)
                .ok()
                .and_then(Status::from_code)
                .unwrap_or(Status::IoError);
            Error::endpoint(crate::error::peer_failed(format!(
                "the sender could not write: {s:?}"
            )))
        });
        let tail = r.tail_due();
        let reading = match &mut r.phase {
            RecvPhase::Rndv {
                by: RndvRecv::Get { tail, ats_to, .. },
                ..
            } => {
                *tail = false;
                ats_to.is_some()
            }
            _ => false,
        };
        if tail && reading {
            // The receiver's own reads of a split rendezvous are still
            // going: they finish it.
            if let Some(e) = written {
                self.note_read_error(id, e);
            }
            return Ok(());
        }
        r.sender_done();
        r.received = r.total.min(r.buf.capacity());
        // A failed read of a split rendezvous counts first.
        let err = if tail { self.take_read_error(id) } else { None };
        match err.or(written) {
            None => self.finish_recv(id),
            Some(e) => self.complete(id, Err(e)),
        }
        Ok(())
    }

    /// Registers receive `req`'s buffer and sends RTR_PUT; on any failure
    /// asks for active-message data instead.
    pub(crate) fn answer_put(&mut self, tx: &mut dyn Lanes, to: AckTo, req: SlabId) {
        let Some(&ep) = self.src_eps.get(&(to.iface, to.src)) else {
            let e = crate::error::peer_failed("no endpoint back to the sender".into());
            self.complete(req, Err(Error::endpoint(e)));
            return;
        };
        let Some(r) = self.recv_state(req) else {
            return;
        };
        let (buf, len) = (r.buf, r.total.min(r.buf.capacity()));
        match self.offer_for_writes(to.iface, req, 0, len) {
            Ok((reg, key)) => {
                // The buffer's own address: a cached registration may
                // start before it.
                let addr = buf.ptr_at(0) as u64;
                if let Some(r) = self.recv_state(req) {
                    r.memh = Some(Box::new(reg));
                }
                let d = wire::encode_rtr_put([to.sreq, req.to_u64(), addr, len as u64], &key);
                self.send_ctrl(tx, ep, AM_RNDV_RTR_PUT, d);
            }
            Err(e) => {
                tracing::debug!("rendezvous by put: {e}; asking for fragments");
                self.commands.push_back(Command::SendRtr {
                    to,
                    rreq: req.to_u64(),
                });
            }
        }
    }

    /// Registers bytes `start..end` of receive `req`'s buffer for remote
    /// writes with the memory domain of iface `iface`, and packs the key.
    pub(crate) fn offer_for_writes(
        &mut self,
        iface: usize,
        req: SlabId,
        start: usize,
        end: usize,
    ) -> ucs::Result<(crate::reg::BufReg, Vec<u8>)> {
        let buf = match self.recv_state_ref(req) {
            Some(r) if start < end && end <= r.buf.capacity() => r.buf,
            _ => return Err(ucs::Error::Unsupported("nothing to register".into())),
        };
        let mdi = self.iface_md.get(iface).copied();
        match (mdi.and_then(|m| self.ctx.md(m)), mdi) {
            (Some(md), Some(mdi)) if md.can_register() => {
                // Kept in the request, whose completion releases it.
                let m = buf.register_for_writes(&self.ctx, mdi, start, end)?;
                match md.mkey_pack(&m.memh) {
                    Ok(k) => Ok((m, k)),
                    Err(e) => {
                        self.ctx.release_buffer(m);
                        Err(e)
                    }
                }
            }
            _ => Err(ucs::Error::Unsupported("no registration".into())),
        }
    }

    /// The receiver of send `id` (from the wire: may be stale or forged)
    /// offered its buffer: plan the writes over the data lanes.
    pub(crate) fn start_put(&mut self, tx: &mut dyn Lanes, offer: PutOffer) {
        let PutOffer {
            sreq,
            rreq,
            addr,
            len,
            key,
            part,
        } = offer;
        let is_part = part != Offered::Whole;
        let id = SlabId::from_u64(sreq);
        // A whole buffer answers a rendezvous by put; a part, one by get
        // whose receiver is reading the rest.
        let (phase, proto) = if is_part {
            (
                RndvPhase::Get(GetPhase::Tail(WritePhase::Writing)),
                ProtocolId::RndvGetZcopy,
            )
        } else {
            (
                RndvPhase::Put(PutPhase::AwaitOffer),
                ProtocolId::RndvPutZcopy,
            )
        };
        // A send that failed meanwhile (its endpoint did) writes nothing:
        // its buffer may be back with the user.
        let (ep, size, sync) = match self.reqs.get(id).map(|r| (&r.kind, r.result.is_none())) {
            Some((Kind::Send(s), true)) if s.rndv == phase && s.error.is_none() => {
                (s.ep, s.buf.len(), s.sync.is_sync())
            }
            _ => {
                tracing::warn!("dropping a put offer for unknown send {:#x}", id.to_u64());
                return;
            }
        };
        self.connect_lanes(tx, ep, usize::from(sync), (size, proto));
        let Some(st) = self.eps.get(ep) else {
            return;
        };
        let md = self.iface_md.get(st.iface).copied();
        let rkey = md
            .and_then(|m| self.ctx.md(m))
            .ok_or_else(|| ucs::Error::Unsupported("no memory domain".into()))
            .and_then(|m| m.rkey_unpack(&key));
        // Lanes of the selected protocol that share the key's domain.
        let lanes = data_lanes(&st.tables[usize::from(sync)], size, proto, |l| {
            st.lanes
                .get(l)
                .is_some_and(|&(i, e)| e != LAZY && self.iface_md.get(i).copied() == md)
        });
        let limit = size.min(usize::try_from(len).unwrap_or(usize::MAX));
        // A tail ends where the message does; a head or a whole buffer
        // starts where it does.
        let base = if part == Offered::Tail {
            size - limit
        } else {
            0
        };
        // Whether the receiver's ATS came already (rx_rtr_put noted the
        // tail).
        let tail = is_part.then(|| self.puts.get(&id).and_then(|p| p.tail) == Some(true));
        let Some(Request {
            kind: Kind::Send(s),
            ..
        }) = self.reqs.get_mut(id)
        else {
            return;
        };
        // The receiver matched: a synchronous send is answered.
        s.sync.ack();
        s.offset = 0;
        if !is_part {
            s.rndv = RndvPhase::Put(PutPhase::Write(WritePhase::Writing));
        }
        match rkey {
            Ok(rkey) => {
                let segs = split(limit, &lanes);
                self.puts.insert(
                    id,
                    PutTarget {
                        rreq,
                        addr,
                        rkey: Some(rkey),
                        segs,
                        base,
                        tail,
                    },
                );
                self.enqueue(tx, ep, id);
            }
            Err(e) => {
                // Tell the receiver, so it does not wait for the data.
                s.error = Some(Error::transport(e));
                s.offset = s.buf.len();
                self.puts.insert(
                    id,
                    PutTarget {
                        rreq,
                        addr,
                        rkey: None,
                        segs: Vec::new(),
                        base,
                        tail,
                    },
                );
                self.finish_send(id);
            }
        }
    }

    /// Posts the writes of put send `id` until done or a lane is full.
    pub(crate) fn push_put(&mut self, tx: &mut dyn Lanes, id: SlabId) -> Step {
        let (ep, buf) = match self.reqs.get(id).map(|r| (&r.kind, r.result.is_none())) {
            Some((Kind::Send(s), true)) if s.error.is_none() => (s.ep, s.buf),
            _ => return Step::Failed,
        };
        let Some(st) = self.eps.get(ep) else {
            self.fail_send(id, Error::InvalidHandle);
            return Step::Failed;
        };
        let frag = self.select.config().rndv_frag_size;
        let Some(pt) = self.puts.get_mut(&id) else {
            return Step::Failed;
        };
        let Some(rkey) = &pt.rkey else {
            return Step::Failed;
        };
        let remote = Remote {
            addr: pt.addr,
            rkey,
            lane_keys: &[],
        };
        // The segments lie in the send buffer (they split at most its
        // length less `base`); it completes only after every write did
        // (zcopy_inflight counts them).
        let posted = post_segments(
            tx,
            &st.lanes,
            &mut pt.segs,
            frag,
            Local::Send(buf, pt.base),
            remote,
            Token(id.to_u64()),
        );
        let (inflight, failure, blocked) = (posted.inflight, posted.failure, posted.blocked);
        let done = failure.is_some() || all_posted(&pt.segs);
        if failure.is_some() {
            pt.segs.clear();
        }
        let lanes = st.lanes.clone();
        let Some(Request {
            kind: Kind::Send(s),
            ..
        }) = self.reqs.get_mut(id)
        else {
            return Step::Failed;
        };
        s.zcopy_inflight += inflight;
        if let Some(e) = failure {
            if s.error.is_none() {
                s.error = Some(e);
            }
        }
        if done {
            s.offset = s.buf.len();
            self.finish_send(id);
            return Step::Handed;
        }
        match blocked {
            Some(0) | None => Step::Blocked,
            Some(lane) => {
                // A data lane is full: wait on it, the send stays first.
                let (ifi, uct_ep) = lanes[lane];
                self.await_room(ep, ifi, uct_ep);
                Step::Waiting
            }
        }
    }

    /// Every write of put send `id` completed: tell the receiver, then
    /// complete (the tail of a split rendezvous: once the receiver's ATS
    /// says its reads are done too).
    pub(crate) fn send_atp(&mut self, tx: &mut dyn Lanes, id: SlabId) {
        let (ep, result) = match self.reqs.get_mut(id).map(|r| &mut r.kind) {
            Some(Kind::Send(s)) if s.rndv.atp_due() => {
                s.rndv = RndvPhase::No;
                let r = match s.error.take() {
                    Some(e) => Err(e),
                    None => Ok(Info {
                        tag: s.tag,
                        length: s.buf.len(),
                    }),
                };
                (s.ep, r)
            }
            _ => return,
        };
        let mut tail = None;
        if let Some(pt) = self.puts.get(&id) {
            tail = pt.tail;
            let status = match &result {
                Ok(_) => 0u64,
                Err(e) => i64::from(e.status().code()) as u64,
            };
            let mut d = pt.rreq.to_le_bytes().to_vec();
            d.extend_from_slice(&status.to_le_bytes());
            self.send_ctrl(tx, ep, AM_RNDV_ATP, d);
        }
        let failed = self.eps.get(ep).and_then(|s| s.failed.clone());
        if let (Some(false), None) = (tail, &failed) {
            // The receiver is still reading the head: wait for its ATS.
            self.puts.remove(&id);
            if let Some(Request {
                kind: Kind::Send(s),
                ..
            }) = self.reqs.get_mut(id)
            {
                s.rndv = RndvPhase::Get(GetPhase::TailWritten);
                s.error = result.err();
            }
            return;
        }
        let result = match (tail, failed) {
            (Some(false), Some(e)) => result.and(Err(*e)),
            _ => result,
        };
        self.complete(id, result);
    }
}
