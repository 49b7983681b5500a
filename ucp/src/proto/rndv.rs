//! Rendezvous over active messages (RTS, RTR, data).
//!
//! The sender's `RNDV_RTS` (tag, its request id, total length) is matched
//! like an eager message, also while unexpected. When a receive matched
//! it, the receiver answers `RNDV_RTR` with its own request id on the
//! endpoint back to the sender (wireup made one); the sender then sends
//! the data as `RNDV_DATA` fragments addressed to that receive. Request ids
//! from the wire are generational slab ids: a stale or forged one finds
//! nothing, and data is accepted only from the source that sent the RTS,
//! within the announced length.

use super::eager_tx::Step;
use super::wire::{self, AM_RNDV_RTR, AM_RNDV_RTS, AM_RNDV_RTS_PUT};
use crate::proto::am_wire::AM_USER_RTS;
use crate::proto::command::Command;
use crate::proto::core::{AckTo, Core, Rts, Unexp};
use crate::proto::lanes::Lanes;
use crate::request::{AmPhase, Kind, PutPhase, RecvPhase, Request, RndvPhase, RndvRecv, SendState};
use crate::ucs::slab::SlabId;
use crate::ucs::{self, PeerMisbehaved};
use crate::uct::{AmId, EpId, Posted, SrcId};
use crate::Error;

fn invalid(what: &'static str, detail: String) -> PeerMisbehaved {
    PeerMisbehaved::Invalid { what, detail }
}

impl Core {
    /// A request to send arrived (`kind` says which rendezvous).
    pub(crate) fn rx_rts(
        &mut self,
        src: SrcId,
        data: &[u8],
        put: bool,
    ) -> Result<(), PeerMisbehaved> {
        let [tag, sreq, total] = wire::decode_u64x3("rendezvous RTS", data)?;
        let total =
            usize::try_from(total).map_err(|_| invalid("rendezvous length", format!("{total}")))?;
        let to = AckTo {
            iface: self.cur_iface,
            src,
            sreq,
        };
        let kind = if put { Rts::Put } else { Rts::Am };
        self.rts_arrived(tag, total, to, kind);
        Ok(())
    }

    /// Matches a request to send, or keeps it as unexpected.
    pub(crate) fn rts_arrived(&mut self, tag: u64, total: usize, to: AckTo, kind: Rts) {
        if let Some(am) = self.am_rts.take() {
            // It announces an active message: for its handler.
            return self.am_rts_arrived(am, total, to, kind);
        }
        if let Some(req) = self.matcher.arrive(tag) {
            if let Some(r) = self.recv_state(req) {
                r.take_post();
            }
            self.rts_matched(req, tag, total, to, kind);
        } else {
            let u = Unexp {
                tag,
                data: Vec::new(),
                total,
                received: 0,
                key: None,
                ack: None,
                rts: Some(Box::new((to, kind))),
            };
            // Counted (its entry), though no credit paid for it: it is
            // what a sender out of credit sends.
            self.unexp_added(&u);
            self.matcher.push_unexpected(tag, u);
        }
    }

    /// Receive `req` matched a request to send of `kind`.
    pub(crate) fn rts_matched(
        &mut self,
        req: SlabId,
        tag: u64,
        total: usize,
        to: AckTo,
        kind: Rts,
    ) -> crate::proto::eager_rx::RecvStarted {
        match kind {
            Rts::Am => self.rndv_matched(req, tag, total, to),
            Rts::Put => self.rndv_put_matched(req, tag, total, to),
            Rts::Get(rb) => self.rndv_get_matched(req, tag, total, to, rb),
        }
    }

    /// Receive `req` matched a request to send: ask for the data.
    pub(crate) fn rndv_matched(
        &mut self,
        req: SlabId,
        tag: u64,
        total: usize,
        to: AckTo,
    ) -> crate::proto::eager_rx::RecvStarted {
        if let Some(r) = self.recv_state(req) {
            let (from, by) = ((to.iface, to.src), RndvRecv::Am);
            r.matched(tag, total, RecvPhase::Rndv { from, by });
        }
        self.commands.push_back(Command::SendRtr {
            to,
            rreq: req.to_u64(),
        });
        if total == 0 {
            self.finish_recv(req);
        }
        crate::proto::eager_rx::RecvStarted::InFlight(req)
    }

    pub(crate) fn rx_rtr(&mut self, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let (sreq, rreq, _) = wire::decode_u64x2("rendezvous RTR", data)?;
        self.commands
            .push_back(Command::DataRequested { sreq, rreq });
        Ok(())
    }

    pub(crate) fn rx_rndv_data(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let (rreq, offset, payload) = wire::decode_u64x2("rendezvous data", data)?;
        let id = SlabId::from_u64(rreq);
        let from = (self.cur_iface, src);
        let Some(r) = self.recv_state(id) else {
            // A receive canceled or failed meanwhile, or a forged id.
            return Err(invalid(
                "rendezvous request",
                format!("{rreq:#x} is not open"),
            ));
        };
        if r.fed_by() != Some(from) {
            return Err(invalid("rendezvous data", "from a foreign source".into()));
        }
        let offset = usize::try_from(offset)
            .map_err(|_| invalid("rendezvous offset", format!("{offset}")))?;
        if offset
            .checked_add(payload.len())
            .is_none_or(|end| end > r.total)
        {
            return Err(invalid(
                "rendezvous fragment",
                format!("{offset}+{} beyond {}", payload.len(), r.total),
            ));
        }
        r.buf.write(offset, payload);
        r.received += payload.len();
        if r.received >= r.total {
            r.sender_done();
            self.finish_recv(id);
        }
        Ok(())
    }

    /// Asks the sender `to` for the data of receive `rreq` as active
    /// messages (`RNDV_RTR`), on the endpoint back to it.
    pub(crate) fn send_rtr(&mut self, tx: &mut dyn Lanes, to: AckTo, rreq: u64) {
        match self.src_eps.get(&(to.iface, to.src)) {
            Some(&ep) => {
                let mut d = to.sreq.to_le_bytes().to_vec();
                d.extend_from_slice(&rreq.to_le_bytes());
                self.send_ctrl(tx, ep, AM_RNDV_RTR, d);
            }
            None => {
                let e = crate::error::peer_failed("no endpoint back to the sender".into());
                self.complete(SlabId::from_u64(rreq), Err(Error::endpoint(e)));
            }
        }
    }

    /// The receiver asked for the data of send `sreq` (from the wire: may
    /// be stale or forged): queue it on its endpoint.
    pub(crate) fn data_requested(&mut self, tx: &mut dyn Lanes, sreq: u64, rreq: u64) {
        let id = SlabId::from_u64(sreq);
        let ep = match self.reqs.get_mut(id).map(|r| &mut r.kind) {
            Some(Kind::Send(s))
                if matches!(
                    s.rndv,
                    RndvPhase::Am(AmPhase::AwaitRtr) | RndvPhase::Put(PutPhase::AwaitOffer)
                ) =>
            {
                // (A receiver that could not register answers a
                // rendezvous by put this way too.)
                s.rndv = RndvPhase::Am(AmPhase::Data { rreq });
                // The receiver matched: a synchronous send is answered.
                s.sync.ack();
                s.ep
            }
            _ => {
                tracing::warn!("dropping a ready-to-receive for unknown send {sreq:#x}");
                return;
            }
        };
        self.enqueue(tx, ep, id);
    }

    /// Whether a rendezvous send on `ep` is still under way (its buffer is
    /// not free before the receiver took the data).
    pub(crate) fn rndv_sends_on(&self, ep: SlabId) -> bool {
        self.reqs.iter().any(|(_, r)| {
            r.result.is_none()
                && matches!(&r.kind, Kind::Send(s) if s.ep == ep && s.rndv != RndvPhase::No)
        })
    }

    /// Rendezvous receives fed by a source that is gone fail.
    pub(crate) fn rndv_source_failed(&mut self, src: SrcId, err: &ucs::Error) {
        let from = Some((self.cur_iface, src));
        let dead: Vec<SlabId> = self
            .reqs
            .iter()
            .filter(|(_, r)| {
                matches!(&r.kind, Kind::Recv(s) if s.fed_by() == from) && r.result.is_none()
            })
            .map(|(id, _)| id)
            .collect();
        for id in dead {
            let e = Error::endpoint(err.duplicate());
            self.get_plans.remove(&id);
            let reading = match self.recv_state(id) {
                Some(r) => {
                    // A dead sender writes no more of a split tail; reads
                    // in flight drain.
                    r.sender_done();
                    r.reads() > 0
                }
                None => continue,
            };
            if reading {
                // Reads still own the buffer: their completions finish it.
                self.note_read_error(id, e);
            } else {
                self.take_read_error(id);
                self.complete(id, Err(e));
            }
        }
    }

    /// Sends the request to send of rendezvous send `id` over active
    /// messages or by put (`rndv`, its first phase) on lane `lane`.
    pub(crate) fn push_rts(
        &mut self,
        tx: &mut dyn Lanes,
        id: SlabId,
        lane: (usize, EpId),
        rndv: RndvPhase,
    ) -> Step {
        let (am_id, next) = if rndv == RndvPhase::Am(AmPhase::Rts) {
            (AM_RNDV_RTS, RndvPhase::Am(AmPhase::AwaitRtr))
        } else {
            (AM_RNDV_RTS_PUT, RndvPhase::Put(PutPhase::AwaitOffer))
        };
        let Some(Request {
            kind: Kind::Send(s),
            ..
        }) = self.reqs.get(id)
        else {
            return Step::Failed;
        };
        let (t, r, l) = (
            s.tag.to_le_bytes(),
            id.to_u64().to_le_bytes(),
            (s.buf.len() as u64).to_le_bytes(),
        );
        self.send_rts(tx, id, lane, am_id, &[&t, &r, &l], next)
    }

    /// Sends request to send `parts` (active message `am_id`) of send
    /// `id` on `lane`; once it left, the send is in phase `next`, off the
    /// endpoint's queue until the receiver answers.
    pub(crate) fn send_rts(
        &mut self,
        tx: &mut dyn Lanes,
        id: SlabId,
        (ifi, uct_ep): (usize, EpId),
        am_id: AmId,
        parts: &[&[u8]],
        next: RndvPhase,
    ) -> Step {
        let r = match self.reqs.get(id).map(|r| &r.kind) {
            Some(Kind::Send(SendState { am: Some(am), .. })) => {
                // A rendezvous active message: the request, wrapped.
                let w = am.wrapper(am_id);
                let mut all: Vec<&[u8]> = vec![&w, &am.header];
                all.extend_from_slice(parts);
                tx.am_bcopy(ifi, uct_ep, AM_USER_RTS, &all)
            }
            _ => tx.am_bcopy(ifi, uct_ep, am_id, parts),
        };
        match r {
            Ok((Posted::NoResource, _)) => Step::Blocked,
            Ok(_) => {
                if let Some(Request {
                    kind: Kind::Send(s),
                    ..
                }) = self.reqs.get_mut(id)
                {
                    s.rndv = next;
                }
                Step::Handed
            }
            Err(e) => {
                self.fail_send(id, Error::endpoint(e));
                Step::Failed
            }
        }
    }
}
