//! Sending side of the eager tag protocol.
//!
//! A message that fits one active message goes as `am_short` or `am_bcopy`
//! and completes at once. A larger one becomes a request that sends an
//! `EAGER_FIRST` fragment and then `EAGER_MIDDLE` fragments, zero-copy
//! where the lane can, stopping when the transport runs out of resources and
//! resuming when it reports the endpoint ready. Sends on one endpoint leave
//! in posting order: once one waits, later ones queue behind it.

use super::lanes::Lanes;
use super::select::ProtocolId;
use super::wire::{
    FirstHdr, MiddleHdr, AM_EAGER_FIRST, AM_EAGER_MIDDLE, AM_EAGER_ONLY, AM_EAGER_SYNC_FIRST,
    AM_EAGER_SYNC_ONLY, AM_RNDV_DATA, AM_STREAM, SYNC_FIRST_HDR, SYNC_ONLY_HDR,
};
use crate::proto::command::Command;
use crate::proto::core::{Core, EpConfig};
use crate::proto::credit::charge_of;
use crate::proto::send_gate::GateMark;
use crate::request::buf::SendBuf;
use crate::request::{
    AmPhase, GetPhase, Info, Kind, Op, PutPhase, Request, RndvPhase, SendState, SyncState,
};
use crate::ucs::slab::SlabId;
use crate::uct::{Posted, Token};
use crate::{Error, Result};

/// How far a send got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Everything is with the transport.
    Handed,
    /// The transport is out of resources; wait for the endpoint.
    Blocked,
    /// The send failed and was completed with an error.
    Failed,
    /// A data lane other than the endpoint's first is full and will say
    /// when it has room; the send stays first in the queue.
    Waiting,
}

/// A fragment header on the stack.
struct HdrBuf {
    bytes: [u8; SYNC_FIRST_HDR],
    len: usize,
}

impl HdrBuf {
    /// First-fragment header; with the sender's request for a sync send.
    fn first(h: FirstHdr, sreq: Option<u64>) -> HdrBuf {
        let mut bytes = [0u8; SYNC_FIRST_HDR];
        bytes[..super::wire::FIRST_HDR].copy_from_slice(&h.encode());
        let len = match sreq {
            Some(r) => {
                bytes[super::wire::FIRST_HDR..].copy_from_slice(&r.to_le_bytes());
                SYNC_FIRST_HDR
            }
            None => super::wire::FIRST_HDR,
        };
        HdrBuf { bytes, len }
    }

    fn middle(h: MiddleHdr) -> HdrBuf {
        let mut bytes = [0u8; SYNC_FIRST_HDR];
        bytes[..super::wire::MIDDLE_HDR].copy_from_slice(&h.encode());
        HdrBuf {
            bytes,
            len: super::wire::MIDDLE_HDR,
        }
    }

    /// A header of one `u64` (a stream fragment's offset).
    fn word(v: u64) -> HdrBuf {
        let mut bytes = [0u8; SYNC_FIRST_HDR];
        bytes[..8].copy_from_slice(&v.to_le_bytes());
        HdrBuf { bytes, len: 8 }
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Outcome of starting a send.
#[derive(Debug)]
pub(crate) enum Started {
    Done(Info),
    InFlight(SlabId),
}

/// How one send goes out, from the endpoint's selection table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// One active message; `short` allows `am_short`, `zcopy` sends it
    /// from the user's buffer.
    Single { short: bool, zcopy: bool },
    /// Eager fragments, copied or zero-copy.
    Multi { zcopy: bool },
    /// A request to send first, the data when the receiver asks: by its
    /// reads (`Get`), by this side's writes (`Put`), or as active messages.
    Rndv(Rndv),
}

/// The rendezvous scheme of a [`Plan::Rndv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rndv {
    Am,
    Get,
    Put,
}

impl Plan {
    fn of(proto: ProtocolId, cfg: &EpConfig, len: usize, sync: bool) -> Plan {
        use ProtocolId::*;
        let can_zcopy = cfg.max_zcopy > 0;
        let (short, zcopy) = match proto {
            EagerShort => (true, false),
            EagerBcopySingle | EagerSyncBcopySingle => (false, false),
            EagerZcopySingle | EagerSyncZcopySingle => (false, can_zcopy),
            EagerBcopyMulti | EagerSyncBcopyMulti => return Plan::Multi { zcopy: false },
            EagerZcopyMulti | EagerSyncZcopyMulti => return Plan::Multi { zcopy: can_zcopy },
            RndvGetZcopy => return Plan::Rndv(Rndv::Get),
            RndvPutZcopy => return Plan::Rndv(Rndv::Put),
            RndvAm => return Plan::Rndv(Rndv::Am),
        };
        // The table follows the same limits; stay safe if it did not.
        let hdr = if sync { SYNC_ONLY_HDR } else { 8 };
        let fits = if zcopy {
            len <= cfg.max_zcopy
        } else {
            len <= cfg.max_bcopy - hdr
        };
        if fits {
            Plan::Single { short, zcopy }
        } else {
            Plan::Multi { zcopy: can_zcopy }
        }
    }

    /// Whether the data goes with zero-copy operations.
    fn zcopy(self) -> bool {
        matches!(
            self,
            Plan::Single { zcopy: true, .. } | Plan::Multi { zcopy: true }
        )
    }
}

/// Sends one whole message with active message `am_id` and an 8-byte
/// header `hdr`: `am_short` if `short` allows it and it fits, else
/// `am_bcopy`.
pub(super) fn send_single(
    tx: &mut dyn Lanes,
    (ifi, uct_ep): (usize, crate::uct::EpId),
    cfg: &EpConfig,
    short: bool,
    (am_id, hdr): (crate::uct::AmId, u64),
    data: &[u8],
) -> crate::ucs::Result<Posted> {
    if short && data.len() <= cfg.max_short {
        tx.am_short(ifi, uct_ep, am_id, hdr, data)
    } else {
        let t = hdr.to_le_bytes();
        tx.am_bcopy(ifi, uct_ep, am_id, &[&t, data]).map(|(p, _)| p)
    }
}

/// What one attempt to send a whole message at once means for
/// `send_start`: finished (`info`), failed, or `None`: no room now, so the
/// send takes the queued way.
#[inline]
pub(super) fn single_outcome(r: crate::ucs::Result<Posted>, info: Info) -> Option<Result<Started>> {
    match r {
        Ok(Posted::Done) | Ok(Posted::InFlight) => Some(Ok(Started::Done(info))),
        Ok(Posted::NoResource) => None,
        Err(e) => Some(Err(Error::endpoint(e))),
    }
}

impl Core {
    /// Starts a tag send of `buf` on endpoint `ep`.
    ///
    /// The fast path (eager short, nothing queued ahead, credit left
    /// without reaching the point of asking for more) stays small; the
    /// rest is [`Core::send_slow`], out of line, so that the message-rate
    /// path pays for neither its code nor its registers.
    #[inline]
    pub(crate) fn send_start(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        buf: SendBuf,
        tag: u64,
        op: Op,
    ) -> Result<Started> {
        if let Some(st) = self.eps.get_mut(ep) {
            let len = buf.len();
            let charge = charge_of(len);
            if len < st.short_end
                && !op.sync
                && st.failed.is_none()
                && st.queue.is_empty()
                && !st.announce_due
                && st.credit.fits_quietly(charge)
            {
                let r = tx.am_short(st.iface, st.uct_ep, AM_EAGER_ONLY, tag, buf.slice(0, len));
                if let Some(done) = single_outcome(r, Info { tag, length: len }) {
                    let sent = done.is_ok();
                    if sent {
                        st.credit.sent += charge;
                    }
                    // A shared worker: open the endpoint's own path (none
                    // on a transport that has none).
                    let top_up = sent && st.gate != GateMark::None && self.gates.is_some();
                    if !matches!(op.notify, crate::request::Notify::Callback(_)) {
                        // Nothing to drop: skip the drop code.
                        std::mem::forget(op);
                    }
                    if top_up {
                        self.gate_top_up(tx, ep);
                    }
                    return done;
                }
            }
        }
        self.send_slow(tx, ep, buf, tag, op)
    }

    /// `send_start` past its fast path, which also asks for credit when
    /// the endpoint is due to.
    #[inline(never)]
    fn send_slow(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        buf: SendBuf,
        tag: u64,
        op: Op,
    ) -> Result<Started> {
        let r = self.send_planned(tx, ep, buf, tag, op);
        self.credit_check(tx, ep);
        r
    }

    /// `send_start` past its fast path: picks the protocol (rendezvous if
    /// the message would be eager but exceeds the endpoint's credit) and
    /// charges an eager message.
    fn send_planned(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        buf: SendBuf,
        tag: u64,
        op: Op,
    ) -> Result<Started> {
        let sync = op.sync;
        self.wake_ep(tx, ep);
        let Some(st) = self.eps.get_mut(ep) else {
            return Err(Error::InvalidHandle);
        };
        if let Some(e) = &st.failed {
            return Err(Error::clone(e));
        }
        if op.immediate {
            // Only the fast path completes while posted.
            return Err(Error::NoResource);
        }
        let len = buf.len();
        let (iface_idx, uct_ep, cfg) = (st.iface, st.uct_ep, self.ep_cfgs[st.iface]);
        let proto = st.tables[usize::from(sync)].lookup(len).proto;
        let mut plan = Plan::of(proto, &cfg, len, sync);
        if len > 0 && !matches!(plan, Plan::Rndv(_)) {
            let (charge, c) = (charge_of(len), &mut st.credit);
            if c.fits(charge) {
                c.sent += charge;
            } else {
                // Beyond what the receiver allows (`credit.rs`): only the
                // announcement goes now; ask for more if not yet asked.
                plan = Plan::Rndv(Rndv::Am);
                if c.ask_at != u64::MAX || c.sent > c.asked {
                    c.ask_at = c.sent;
                    c.need = charge;
                }
            }
        }
        let single = matches!(plan, Plan::Single { .. });
        if let (
            Plan::Single {
                short,
                zcopy: false,
            },
            false,
            true,
        ) = (plan, sync, st.queue.is_empty())
        {
            let r = send_single(
                tx,
                (iface_idx, uct_ep),
                &cfg,
                short,
                (AM_EAGER_ONLY, tag),
                buf.slice(0, len),
            );
            if let Some(done) = single_outcome(r, Info { tag, length: len }) {
                return done;
            }
        }
        let msg_id = if single {
            0
        } else {
            let m = self.next_msg_id;
            self.next_msg_id += 1;
            m
        };
        let id = self.reqs.insert(Request::new(
            Kind::Send(SendState {
                ep,
                tag,
                buf,
                offset: 0,
                msg_id,
                zcopy_inflight: 0,
                error: None,
                sync: SyncState::new(sync),
                zcopy: plan.zcopy(),
                rndv: match plan {
                    Plan::Rndv(Rndv::Get) => RndvPhase::Get(GetPhase::Rts),
                    Plan::Rndv(Rndv::Put) => RndvPhase::Put(PutPhase::Rts),
                    Plan::Rndv(Rndv::Am) => RndvPhase::Am(AmPhase::Rts),
                    Plan::Single { .. } | Plan::Multi { .. } => RndvPhase::No,
                },
                memh: None,
                stream: false,
                am: None,
            }),
            op,
        ));
        self.queue_send(tx, ep, id)
    }

    /// Queues new send `id` on endpoint `ep` and sends what it can.
    pub(super) fn queue_send(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        id: SlabId,
    ) -> Result<Started> {
        self.enqueue(tx, ep, id);
        if self.reqs.get(id).is_some_and(|r| r.result.is_none()) {
            return Ok(Started::InFlight(id));
        }
        // Finished within this call (all fragments went out at once).
        match self.reqs.remove(id).and_then(|r| r.result) {
            Some(Ok(info)) => Ok(Started::Done(info)),
            Some(Err(e)) => Err(e),
            None => Ok(Started::InFlight(id)),
        }
    }

    /// Sends what the endpoint's queue holds until the transport refuses.
    /// Returns the number of sends that left the queue.
    pub(crate) fn resume_ep(&mut self, tx: &mut dyn Lanes, ep: SlabId) -> usize {
        let mut n = 0;
        loop {
            let Some(st) = self.eps.get(ep) else {
                return n;
            };
            let Some(&id) = st.queue.front() else {
                return n;
            };
            match self.push_send(tx, id) {
                Step::Handed | Step::Failed => {
                    if let Some(st) = self.eps.get_mut(ep) {
                        st.queue.pop_front();
                    }
                    n += 1;
                }
                Step::Blocked => {
                    self.wait_for_room(ep);
                    return n;
                }
                Step::Waiting => return n,
            }
        }
    }

    /// Queues send `id` behind the earlier ones of endpoint `ep` (and its
    /// wireup, if that has not left yet) and, if nothing was ahead of it,
    /// sends what it can.
    pub(crate) fn enqueue(&mut self, tx: &mut dyn Lanes, ep: SlabId, id: SlabId) {
        self.wake_ep(tx, ep);
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        let idle = st.queue.is_empty();
        st.queue.push_back(id);
        if idle {
            self.resume_ep(tx, ep);
        }
    }

    fn wait_for_room(&mut self, ep: SlabId) {
        if let Some(st) = self.eps.get(ep) {
            let (iface, uct_ep) = (st.iface, st.uct_ep);
            self.await_room(ep, iface, uct_ep);
        }
    }

    /// Hands as much of send `id` to the transport as it takes.
    fn push_send(&mut self, tx: &mut dyn Lanes, id: SlabId) -> Step {
        let (ep, tag, buf, msg_id, mut offset, sync, zcopy, rndv, stream) =
            match self.reqs.get(id).map(|r| &r.kind) {
                Some(Kind::Send(s)) => (
                    s.ep,
                    s.tag,
                    s.buf,
                    s.msg_id,
                    s.offset,
                    s.sync.is_sync(),
                    s.zcopy,
                    s.rndv,
                    s.stream,
                ),
                Some(Kind::Ctrl(_)) => return self.push_ctrl(tx, id),
                _ => return Step::Failed,
            };
        let Some(st) = self.eps.get(ep) else {
            self.fail_send(id, Error::InvalidHandle);
            return Step::Failed;
        };
        let (ifi, uct_ep, cfg) = (st.iface, st.uct_ep, self.ep_cfgs[st.iface]);
        let sreq = sync.then_some(id.to_u64());
        let rreq = match rndv {
            RndvPhase::No => None,
            RndvPhase::Am(AmPhase::Rts) | RndvPhase::Put(PutPhase::Rts) => {
                return self.push_rts(tx, id, (ifi, uct_ep), rndv);
            }
            RndvPhase::Am(AmPhase::Data { rreq }) => Some(rreq),
            RndvPhase::Get(GetPhase::Rts) => return self.push_rts_get(tx, id),
            p if p.writing() => return self.push_put(tx, id),
            // Waiting for the receiver, or for the ATP to go out.
            _ => return Step::Handed,
        };
        let len = buf.len();
        let mut step = Step::Handed;
        let mut inflight = 0;
        let mut failure = None;
        if msg_id == 0 {
            // A single-fragment message that could not leave at once.
            let (t, q) = (tag.to_le_bytes(), sreq.unwrap_or(0).to_le_bytes());
            let (am_id, hdr): (_, &[u8]) = match sreq {
                Some(_) => (AM_EAGER_SYNC_ONLY, &[t, q].concat()),
                // A stream fragment's header is its stream offset.
                None if stream => (AM_STREAM, &t),
                None => (AM_EAGER_ONLY, &t),
            };
            let r = if zcopy && len > 0 {
                // The request completes only after the zero-copy
                // completion (zcopy_inflight counts it).
                let data = buf.lend(0, len);
                let r = tx.am_zcopy(ifi, uct_ep, am_id, hdr, data, Token(id.to_u64()));
                if matches!(r, Ok(Posted::InFlight)) {
                    inflight += 1;
                }
                r
            } else if sreq.is_some() {
                tx.am_bcopy(ifi, uct_ep, am_id, &[hdr, buf.slice(0, len)])
                    .map(|(p, _)| p)
            } else {
                send_single(
                    tx,
                    (ifi, uct_ep),
                    &cfg,
                    len <= cfg.max_short,
                    (am_id, tag),
                    buf.slice(0, len),
                )
            };
            match r {
                Ok(Posted::Done) | Ok(Posted::InFlight) => offset = len,
                Ok(Posted::NoResource) => step = Step::Blocked,
                Err(e) => failure = Some(e),
            }
        } else {
            while offset < len {
                let (am_id, hdr) = if stream {
                    let at = tag.wrapping_add(offset as u64);
                    (AM_STREAM, HdrBuf::word(at))
                } else if let Some(rreq) = rreq {
                    let h = MiddleHdr {
                        msg_id: rreq,
                        offset: offset as u64,
                    };
                    (AM_RNDV_DATA, HdrBuf::middle(h))
                } else if offset == 0 {
                    let h = FirstHdr {
                        tag,
                        total: len as u64,
                        msg_id,
                    };
                    let id = if sync {
                        AM_EAGER_SYNC_FIRST
                    } else {
                        AM_EAGER_FIRST
                    };
                    (id, HdrBuf::first(h, sreq))
                } else {
                    let h = MiddleHdr {
                        msg_id,
                        offset: offset as u64,
                    };
                    (AM_EAGER_MIDDLE, HdrBuf::middle(h))
                };
                let hdr = hdr.as_slice();
                let remaining = len - offset;
                let (frag, r) = if zcopy {
                    let frag = remaining.min(cfg.max_zcopy);
                    // As above: zcopy_inflight counts the fragment.
                    let data = buf.lend(offset, frag);
                    let r = tx.am_zcopy(ifi, uct_ep, am_id, hdr, data, Token(id.to_u64()));
                    (frag, r)
                } else {
                    let frag = remaining.min(cfg.max_bcopy - hdr.len());
                    let r = tx
                        .am_bcopy(ifi, uct_ep, am_id, &[hdr, buf.slice(offset, frag)])
                        .map(|(p, _)| p);
                    (frag, r)
                };
                match r {
                    Ok(Posted::Done) => offset += frag,
                    Ok(Posted::InFlight) => {
                        offset += frag;
                        inflight += 1;
                    }
                    Ok(Posted::NoResource) => {
                        step = Step::Blocked;
                        break;
                    }
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
        }
        let Some(Request {
            kind: Kind::Send(s),
            ..
        }) = self.reqs.get_mut(id)
        else {
            return Step::Failed;
        };
        s.offset = offset;
        s.zcopy_inflight += inflight;
        if let Some(e) = failure {
            self.fail_send(id, Error::endpoint(e));
            return Step::Failed;
        }
        if step == Step::Handed {
            self.finish_send(id);
        }
        step
    }

    /// Completes send `id` if all of it left and, for a synchronous send,
    /// the receiver has matched it.
    pub(crate) fn finish_send(&mut self, id: SlabId) {
        let Some(Request {
            kind: Kind::Send(s),
            ..
        }) = self.reqs.get_mut(id)
        else {
            return;
        };
        if s.rndv.writing() {
            // The receiver learns the outcome before the send completes.
            if s.offset >= s.buf.len() && s.zcopy_inflight == 0 {
                s.rndv = s.rndv.writes_done();
                self.commands.push_back(Command::SendAtp(id));
            }
            return;
        }
        // A rendezvous send completes when its data went as active
        // messages; the other schemes complete on the receiver's answer.
        let rndv_waiting = !matches!(s.rndv, RndvPhase::No | RndvPhase::Am(AmPhase::Data { .. }));
        if s.offset < s.buf.len()
            || s.zcopy_inflight > 0
            || s.sync == SyncState::AwaitAck
            || rndv_waiting
        {
            return;
        }
        let r = match s.error.take() {
            Some(e) => Err(e),
            None => Ok(Info {
                tag: s.tag,
                length: s.buf.len(),
            }),
        };
        self.complete(id, r);
    }

    /// Cancels send `id` if none of it has reached the transport yet (it
    /// waits in its endpoint's queue); it completes with `Canceled`.
    pub(crate) fn send_cancel(&mut self, id: SlabId) -> bool {
        let ep = match self.reqs.get(id).map(|r| &r.kind) {
            // Once the receiver asked for the data it waits for it: too
            // late to cancel.
            Some(Kind::Send(s))
                if s.offset == 0 && s.zcopy_inflight == 0 && s.rndv.not_started() =>
            {
                s.ep
            }
            _ => return false,
        };
        let Some(st) = self.eps.get_mut(ep) else {
            return false;
        };
        // The queue's head may be partly handed over already (a
        // multi-fragment send blocked after its first pieces).
        let Some(pos) = st.queue.iter().position(|&q| q == id) else {
            return false;
        };
        st.queue.remove(pos);
        self.complete(id, Err(Error::Canceled));
        true
    }

    /// A zero-copy fragment of send `id` left the transport.
    pub(crate) fn zcopy_completed(&mut self, id: SlabId, result: crate::ucs::Result<()>) {
        let Some(req) = self.reqs.get_mut(id) else {
            return;
        };
        let s = match &mut req.kind {
            Kind::Send(s) => s,
            Kind::Flush => {
                let r = result.map(|()| Info { tag: 0, length: 0 });
                self.complete(id, r.map_err(Error::endpoint));
                return;
            }
            Kind::Recv(_) => {
                self.get_completed(id, result);
                return;
            }
            Kind::Ctrl(_) | Kind::StreamRecv(_) => return,
            Kind::Rma(_) => {
                self.rma_zcopy_done(id, result.map_err(crate::rma::transport_error));
                return;
            }
        };
        s.zcopy_inflight = s.zcopy_inflight.saturating_sub(1);
        if let Err(e) = result {
            if s.error.is_none() {
                s.error = Some(Error::endpoint(e));
            }
            // A send that failed does not wait for an acknowledgement.
            s.sync.ack();
        }
        self.finish_send(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: EpConfig = EpConfig {
        max_short: 100,
        max_bcopy: 1000,
        max_zcopy: 4000,
    };
    const NO_ZCOPY: EpConfig = EpConfig {
        max_zcopy: 0,
        ..CFG
    };

    #[test]
    fn each_protocol_maps_to_its_plan() {
        use ProtocolId::*;
        let single = |short, zcopy| Plan::Single { short, zcopy };
        for (proto, want) in [
            (EagerShort, single(true, false)),
            (EagerBcopySingle, single(false, false)),
            (EagerSyncBcopySingle, single(false, false)),
            (EagerZcopySingle, single(false, true)),
            (EagerSyncZcopySingle, single(false, true)),
            (EagerBcopyMulti, Plan::Multi { zcopy: false }),
            (EagerSyncBcopyMulti, Plan::Multi { zcopy: false }),
            (EagerZcopyMulti, Plan::Multi { zcopy: true }),
            (EagerSyncZcopyMulti, Plan::Multi { zcopy: true }),
            (RndvGetZcopy, Plan::Rndv(Rndv::Get)),
            (RndvPutZcopy, Plan::Rndv(Rndv::Put)),
            (RndvAm, Plan::Rndv(Rndv::Am)),
        ] {
            assert_eq!(Plan::of(proto, &CFG, 50, false), want, "{proto:?}");
        }
    }

    #[test]
    fn a_single_message_that_does_not_fit_goes_in_fragments() {
        use ProtocolId::*;
        // Copied: the tag (8 bytes, 16 with the sender's request when
        // synchronous) shares max_bcopy with the data.
        let copied = |len, sync| Plan::of(EagerBcopySingle, &CFG, len, sync);
        assert_eq!(
            copied(992, false),
            Plan::Single {
                short: false,
                zcopy: false
            }
        );
        assert_eq!(copied(993, false), Plan::Multi { zcopy: true });
        assert!(matches!(copied(992, true), Plan::Multi { .. }));
        // Zero-copy: up to max_zcopy.
        let z = |len| Plan::of(EagerZcopySingle, &CFG, len, false);
        assert_eq!(
            z(4000),
            Plan::Single {
                short: false,
                zcopy: true
            }
        );
        assert_eq!(z(4001), Plan::Multi { zcopy: true });
        // Without zero-copy on the lane nothing is planned zero-copy.
        assert_eq!(
            Plan::of(EagerZcopySingle, &NO_ZCOPY, 50, false),
            Plan::Single {
                short: false,
                zcopy: false
            }
        );
        assert_eq!(
            Plan::of(EagerBcopySingle, &NO_ZCOPY, 5000, false),
            Plan::Multi { zcopy: false }
        );
        assert_eq!(
            Plan::of(EagerZcopyMulti, &NO_ZCOPY, 5000, false),
            Plan::Multi { zcopy: false }
        );
        // A rendezvous never falls back to eager.
        assert_eq!(Plan::of(RndvAm, &CFG, 1 << 30, true), Plan::Rndv(Rndv::Am));
    }

    #[test]
    fn zero_copy_is_what_the_plan_says() {
        assert!(Plan::Single {
            short: false,
            zcopy: true
        }
        .zcopy());
        assert!(Plan::Multi { zcopy: true }.zcopy());
        assert!(!Plan::Multi { zcopy: false }.zcopy());
        assert!(!Plan::Rndv(Rndv::Get).zcopy());
    }
}
