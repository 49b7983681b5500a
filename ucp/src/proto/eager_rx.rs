//! Receiving side of the eager tag protocol.
//!
//! An arriving message (or first fragment) is matched against posted
//! receives; without a match it waits in the unexpected queue, copied out of
//! the transport's buffer. Later fragments find their message by
//! [`FragKey`] and land in the matched receive or the unexpected entry.
//! Every length and offset from the wire is checked against the message's
//! announced total before any byte is written. Fragments of a message that
//! is still unexpected must arrive in order (memory for it grows only with
//! bytes received); fragments of a matched message may come in any order.

use super::wire::{
    self, FirstHdr, MiddleHdr, AM_EAGER_FIRST, AM_EAGER_MIDDLE, AM_EAGER_ONLY, AM_EAGER_SYNC_FIRST,
    AM_EAGER_SYNC_ONLY, AM_RNDV_ATP, AM_RNDV_ATS, AM_RNDV_DATA, AM_RNDV_RTR, AM_RNDV_RTR_PUT,
    AM_RNDV_RTR_SPLIT, AM_RNDV_RTS, AM_RNDV_RTS_GET, AM_RNDV_RTS_PUT, AM_SYNC_ACK, AM_WIREUP,
};
use super::FragKey;
use crate::proto::core::{AckTo, Core, FragTarget, Offered, Unexp};
use crate::request::buf::RecvBuf;
use crate::request::{Completion, Info, Kind, Notify, Op, RecvPhase, RecvState, Request};
use crate::tag::PostOutcome;
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;
use crate::uct::{AmId, SrcId};
use crate::{ucs, Error, Result};

/// Outcome of posting a receive.
#[derive(Debug)]
pub(crate) enum RecvStarted {
    Done(Info),
    InFlight(SlabId),
}

impl From<RecvStarted> for crate::proto::eager_tx::Started {
    fn from(s: RecvStarted) -> Self {
        match s {
            RecvStarted::Done(info) => Self::Done(info),
            RecvStarted::InFlight(id) => Self::InFlight(id),
        }
    }
}

/// Most bytes reserved up front for an unexpected multi-fragment message;
/// the rest grows as fragments arrive, so a peer's claimed length alone
/// cannot make the receiver allocate.
const UNEXP_RESERVE_MAX: usize = 1 << 20;

fn invalid(what: &'static str, detail: String) -> PeerMisbehaved {
    PeerMisbehaved::Invalid { what, detail }
}

impl Core {
    /// Dispatches an eager active message.
    #[inline(never)]
    pub(crate) fn eager_arrived(&mut self, id: AmId, src: SrcId, data: &[u8]) {
        let iface = self.cur_iface;
        let ack = |sreq| AckTo { iface, src, sreq };
        let r = match id {
            AM_EAGER_ONLY => wire::decode_only(data).map(|(tag, p)| self.rx_whole(tag, p, None)),
            AM_EAGER_SYNC_ONLY => wire::decode_sync_only(data)
                .map(|(tag, sreq, p)| self.rx_whole(tag, p, Some(ack(sreq)))),
            AM_EAGER_FIRST => {
                FirstHdr::decode(data).and_then(|(h, f)| self.rx_first(src, h, f, None))
            }
            AM_EAGER_SYNC_FIRST => wire::decode_sync_first(data)
                .and_then(|(h, sreq, f)| self.rx_first(src, h, f, Some(ack(sreq)))),
            AM_EAGER_MIDDLE => self.rx_middle(src, data),
            AM_WIREUP => self.rx_wireup(src, data),
            AM_SYNC_ACK => self.rx_sync_ack(data),
            AM_RNDV_RTS => self.rx_rts(src, data, false),
            AM_RNDV_RTS_PUT => self.rx_rts(src, data, true),
            AM_RNDV_RTR_PUT => self.rx_rtr_put(data, Offered::Whole),
            AM_RNDV_RTR_SPLIT => self.rx_rtr_put(data, Offered::Tail),
            crate::proto::wire::AM_RNDV_RTR_SPLIT_HEAD => self.rx_rtr_put(data, Offered::Head),
            AM_RNDV_ATP => self.rx_atp(src, data),
            AM_RNDV_RTR => self.rx_rtr(data),
            AM_RNDV_DATA => self.rx_rndv_data(src, data),
            AM_RNDV_RTS_GET => self.rx_rts_get(src, data),
            AM_RNDV_ATS => wire::decode_ack(data).map(|r| self.rndv_ats(SlabId::from_u64(r))),
            crate::proto::am_wire::AM_USER_ONLY => self.rx_am_user_only(src, data),
            crate::proto::am_wire::AM_USER => self.rx_am_user(src, data),
            crate::proto::am_wire::AM_USER_RTS => self.rx_am_rts(src, data),
            crate::proto::wire::AM_STREAM => self.rx_stream(src, data),
            crate::proto::keepalive::AM_KEEPALIVE => self.rx_keepalive(src, data),
            crate::proto::credit::AM_CREDIT => self.rx_credit(src, data),
            crate::proto::close::AM_EP_CLOSE => self.rx_ep_close(src, data),
            other => self
                .rma_arrived(other, src, data)
                .unwrap_or(Err(PeerMisbehaved::UnknownId(other))),
        };
        if let Err(what) = r {
            tracing::warn!("dropping message from source {}: {what}", src.0);
            let e = ucs::Error::PeerMisbehaved {
                peer: format!("source {} of iface {}", src.0, self.cur_iface),
                what,
            };
            self.source_failed(src, e);
        }
    }

    /// A whole message arrived. The common case, a polled receive waiting
    /// for it, is finished here; the rest is out of line.
    #[inline]
    pub(crate) fn rx_whole(&mut self, tag: u64, payload: &[u8], ack: Option<AckTo>) {
        let Some(req) = self.matcher.arrive(tag) else {
            return self.rx_whole_unexpected(tag, payload, ack);
        };
        self.matched_sync(ack);
        // A polled receive: the whole message finishes it here, in one
        // lookup (what `finish_recv` and `complete` do for it, none of
        // their rendezvous cleanup applying to an eager receive). One its
        // owner released is counted and freed at once, unless the message
        // does not fit (the slow path records that failure). A receive
        // with a bounce buffer to unpack takes the slow path.
        if let Some(Request {
            kind: Kind::Recv(r),
            notify: Notify::Poll | Notify::Scope,
            result,
            detached,
            staged: None,
            ..
        }) = self.reqs.get_mut(req)
        {
            let (n, cap) = (payload.len(), r.buf.capacity());
            if !*detached || n <= cap {
                self.done.completed = self.done.completed.wrapping_add(1);
                r.take_whole(tag, payload);
                if *detached {
                    self.done.released_done = self.done.released_done.wrapping_add(1);
                    self.reqs
                        .take_map_forget(req, |_| Some(()), Request::owns_nothing);
                    return;
                }
                *result = Some(if n > cap {
                    Err(Error::Truncated {
                        length: n,
                        capacity: cap,
                    })
                } else {
                    Ok(Info { tag, length: n })
                });
                return;
            }
        }
        // A receive that reports through the completion queue (the C API's
        // requests) and owns nothing: finished here too, its slot freed in
        // place, as `complete` would.
        if let Some(Request {
            kind: Kind::Recv(r),
            notify,
            user_data,
            result: None,
            owner: None,
            detached: false,
            staged: None,
        }) = self.reqs.get_mut(req)
        {
            if matches!(notify, Notify::Queue) && r.memh.is_none() && r.read_error.is_none() {
                // A `Queue` holds nothing to drop.
                std::mem::forget(std::mem::replace(notify, Notify::Poll));
                let (n, cap) = (payload.len(), r.buf.capacity());
                let user_data = *user_data;
                self.done.completed = self.done.completed.wrapping_add(1);
                r.take_whole(tag, payload);
                let result = if n > cap {
                    Err(Error::Truncated {
                        length: n,
                        capacity: cap,
                    })
                } else {
                    Ok(Info { tag, length: n })
                };
                // Checked above: it owns nothing (`Request::owns_nothing`).
                self.reqs.take_map_forget(req, |_| Some(()), |_| true);
                self.done.queue(Completion {
                    id: crate::ReqId(req),
                    user_data,
                    result,
                });
                return;
            }
        }
        self.rx_whole_matched(req, tag, payload);
    }

    /// A whole message for receive `req`, not the fast case.
    #[inline(never)]
    fn rx_whole_matched(&mut self, req: SlabId, tag: u64, payload: &[u8]) {
        if let Some(r) = self.recv_state(req) {
            r.take_whole(tag, payload);
        }
        self.finish_recv(req);
    }

    /// A whole message no receive was waiting for.
    #[inline(never)]
    fn rx_whole_unexpected(&mut self, tag: u64, payload: &[u8], ack: Option<AckTo>) {
        let mut v = self.take_spare(payload.len());
        v.extend_from_slice(payload);
        let u = Unexp {
            tag,
            data: v,
            total: payload.len(),
            received: payload.len(),
            key: None,
            ack,
            rts: None,
        };
        self.unexp_added(&u);
        self.matcher.push_unexpected(tag, u);
    }

    fn rx_first(
        &mut self,
        src: SrcId,
        h: FirstHdr,
        frag: &[u8],
        ack: Option<AckTo>,
    ) -> Result<(), PeerMisbehaved> {
        let total = usize::try_from(h.total)
            .map_err(|_| invalid("message length", format!("{}", h.total)))?;
        let key = FragKey {
            iface: self.cur_iface as u16,
            src: src.0,
            msg_id: h.msg_id,
        };
        if self.frags.contains_key(&key) {
            return Err(invalid("message id", format!("{} reused", h.msg_id)));
        }
        let done = frag.len() == total;
        if let Some(req) = self.matcher.arrive(h.tag) {
            if let Some(r) = self.recv_state(req) {
                let phase = match done {
                    true => RecvPhase::Matched,
                    false => RecvPhase::Frags(key),
                };
                r.matched(h.tag, total, phase);
                r.buf.write(0, frag);
                r.received = frag.len();
            }
            self.matched_sync(ack);
            if done {
                self.finish_recv(req);
            } else {
                self.frags.insert(key, FragTarget::Req(req));
            }
        } else {
            let mut v = self.take_spare(total.min(UNEXP_RESERVE_MAX));
            v.extend_from_slice(frag);
            let u = Unexp {
                tag: h.tag,
                data: v,
                total,
                received: frag.len(),
                key: (!done).then_some(key),
                ack,
                rts: None,
            };
            self.unexp_added(&u);
            let uid = self.matcher.push_unexpected(h.tag, u);
            if !done {
                self.frags.insert(key, FragTarget::Unexp(uid));
            }
        }
        Ok(())
    }

    fn rx_middle(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let (h, frag) = MiddleHdr::decode(data)?;
        let key = FragKey {
            iface: self.cur_iface as u16,
            src: src.0,
            msg_id: h.msg_id,
        };
        let Some(&target) = self.frags.get(&key) else {
            return Err(invalid("message id", format!("{} is not open", h.msg_id)));
        };
        let offset = usize::try_from(h.offset)
            .map_err(|_| invalid("fragment offset", format!("{}", h.offset)))?;
        let check = |total: usize| {
            if offset.checked_add(frag.len()).is_none_or(|end| end > total) {
                Err(invalid(
                    "fragment",
                    format!("{}+{} beyond {total}", offset, frag.len()),
                ))
            } else {
                Ok(())
            }
        };
        match target {
            FragTarget::Req(req) => {
                let Some(r) = self.recv_state(req) else {
                    self.frags.remove(&key);
                    return Ok(());
                };
                check(r.total)?;
                r.buf.write(offset, frag);
                r.received += frag.len();
                if r.received >= r.total {
                    r.phase = RecvPhase::Matched;
                    self.frags.remove(&key);
                    self.finish_recv(req);
                }
            }
            FragTarget::Unexp(_) | FragTarget::Probed(_) => {
                let u = match target {
                    FragTarget::Unexp(uid) => self.matcher.unexpected_mut(uid),
                    FragTarget::Probed(pid) => {
                        self.probed.get_mut(pid).and_then(|p| p.msg.as_mut())
                    }
                    FragTarget::Req(_) => None,
                };
                let Some(u) = u else {
                    self.frags.remove(&key);
                    return Ok(());
                };
                check(u.total)?;
                // Unexpected data is kept contiguous: a fragment must follow
                // what arrived, so memory grows only with bytes received,
                // never with a length or offset the peer merely claims.
                if offset != u.data.len() {
                    return Err(invalid(
                        "fragment offset",
                        format!("{offset}, expected {}", u.data.len()),
                    ));
                }
                u.data.extend_from_slice(frag);
                u.received += frag.len();
                if u.received >= u.total {
                    u.key = None;
                    self.frags.remove(&key);
                }
            }
        }
        Ok(())
    }

    pub(crate) fn recv_state(&mut self, id: SlabId) -> Option<&mut RecvState> {
        match self.reqs.get_mut(id) {
            Some(Request {
                kind: Kind::Recv(r),
                ..
            }) => Some(r),
            _ => None,
        }
    }

    /// The state of receive `id`, read-only.
    pub(crate) fn recv_state_ref(&self, id: SlabId) -> Option<&RecvState> {
        match self.reqs.get(id) {
            Some(Request {
                kind: Kind::Recv(r),
                ..
            }) => Some(r),
            _ => None,
        }
    }

    /// Completes a receive whose bytes have all arrived.
    pub(crate) fn finish_recv(&mut self, id: SlabId) {
        let Some(r) = self.recv_state(id) else {
            return;
        };
        let result = if r.total > r.buf.capacity() {
            Err(Error::Truncated {
                length: r.total,
                capacity: r.buf.capacity(),
            })
        } else {
            Ok(Info {
                tag: r.tag,
                length: r.total,
            })
        };
        self.complete(id, result);
    }

    /// Posts a tag receive into `buf`.
    pub(crate) fn recv_start(
        &mut self,
        buf: RecvBuf,
        tag: u64,
        mask: u64,
        op: Op,
    ) -> Result<RecvStarted> {
        if self.matcher.unexpected_len() == 0 {
            if op.immediate {
                return Err(Error::NoResource);
            }
            // Nothing to match: the receive is queued, its request built in
            // its slot with the queue position already in it.
            let matcher = &mut self.matcher;
            // Only these two fields of `op` matter to a receive. A polled
            // one (the common case) is rebuilt rather than copied: the
            // caller has just stored `op` piecewise, and a wide copy of it
            // would wait on those stores (a store-forwarding stall).
            let Op {
                user_data, notify, ..
            } = op;
            #[allow(clippy::needless_match)] // not needless: see above
            let notify = match notify {
                Notify::Poll => Notify::Poll,
                other => other,
            };
            let id = self.reqs.insert_with(|id| {
                let mut r = RecvState::new(buf);
                r.phase = RecvPhase::Posted(matcher.post_expected(tag, mask, id));
                Request::with_notify(Kind::Recv(r), notify, user_data)
            });
            return Ok(RecvStarted::InFlight(id));
        }
        // A whole eager message is already here: take it without creating
        // a request (what `post` would match first anyway).
        {
            if let Some((uid, _, u)) = self.matcher.probe(tag, mask) {
                if u.rts.is_none() && u.received == u.total {
                    if let Some(u) = self.matcher.take_unexpected(uid) {
                        self.unexp_taken(&u);
                        return self.take_whole(buf, u);
                    }
                }
            }
        }
        if op.immediate {
            // No whole message here: it would wait, or fetch.
            return Err(Error::NoResource);
        }
        let id = self
            .reqs
            .insert(Request::new(Kind::Recv(RecvState::new(buf)), op));
        match self.matcher.post(tag, mask, id) {
            PostOutcome::Queued(post) => {
                if let Some(r) = self.recv_state(id) {
                    r.phase = RecvPhase::Posted(post);
                }
                Ok(RecvStarted::InFlight(id))
            }
            PostOutcome::Matched { msg: u, .. } => {
                self.unexp_taken(&u);
                self.start_matched(id, buf, u)
            }
        }
    }

    /// A receive into `buf`, with no request yet, takes the whole
    /// unexpected message `u`.
    fn take_whole(&mut self, buf: RecvBuf, u: Unexp) -> Result<RecvStarted> {
        buf.write(0, &u.data);
        let (tag, total) = (u.tag, u.total);
        self.matched_sync(u.ack);
        self.give_spare(u.data);
        if total > buf.capacity() {
            return Err(Error::Truncated {
                length: total,
                capacity: buf.capacity(),
            });
        }
        Ok(RecvStarted::Done(Info { tag, length: total }))
    }

    /// Receive `id` (just created, into `buf`) takes unexpected message
    /// `u`: copy what arrived, then finish or wait for the rest.
    pub(crate) fn start_matched(
        &mut self,
        id: SlabId,
        buf: RecvBuf,
        u: Unexp,
    ) -> Result<RecvStarted> {
        buf.write(0, &u.data);
        let Unexp {
            tag: utag,
            data,
            total,
            received,
            key,
            ack,
            rts,
        } = u;
        self.give_spare(data);
        self.matched_sync(ack);
        if let Some((to, kind)) = rts.map(|b| *b) {
            return Ok(self.rts_matched(id, utag, total, to, kind));
        }
        match key {
            Some(key) if received < total => {
                if let Some(r) = self.recv_state(id) {
                    r.matched(utag, total, RecvPhase::Frags(key));
                    r.received = received;
                }
                self.frags.insert(key, FragTarget::Req(id));
                Ok(RecvStarted::InFlight(id))
            }
            _ => {
                self.reqs.remove(id);
                if total > buf.capacity() {
                    Err(Error::Truncated {
                        length: total,
                        capacity: buf.capacity(),
                    })
                } else {
                    Ok(RecvStarted::Done(Info {
                        tag: utag,
                        length: total,
                    }))
                }
            }
        }
    }

    /// Cancels receive `id` if it has not matched a message yet.
    pub(crate) fn recv_cancel(&mut self, id: SlabId) -> bool {
        let Some(post) = self.recv_state(id).and_then(|r| r.take_post()) else {
            return false;
        };
        self.matcher.cancel(post);
        self.complete(id, Err(Error::Canceled));
        true
    }

    /// The oldest unexpected message matching (tag, mask), if any.
    pub(crate) fn probe(&self, tag: u64, mask: u64) -> Option<Info> {
        self.matcher.probe(tag, mask).map(|(_, _, u)| Info {
            tag: u.tag,
            length: u.total,
        })
    }

    /// A transport source failed: messages it was still sending in pieces
    /// will not finish.
    pub(crate) fn source_failed(&mut self, src: SrcId, err: ucs::Error) {
        self.am_source_failed(src);
        let iface = self.cur_iface as u16;
        let keys: Vec<FragKey> = self
            .frags
            .keys()
            .filter(|k| k.iface == iface && k.src == src.0)
            .copied()
            .collect();
        if keys.is_empty() {
            return;
        }
        let err = Error::endpoint(err);
        for k in keys {
            match self.frags.remove(&k) {
                Some(FragTarget::Req(req)) => self.complete(req, Err(err.clone())),
                Some(FragTarget::Unexp(uid)) => {
                    if let Some(u) = self.matcher.take_unexpected(uid) {
                        self.unexp_taken(&u);
                        self.give_spare(u.data);
                    }
                }
                Some(FragTarget::Probed(pid)) => {
                    // The message will not complete; its handle says so.
                    if let Some(p) = self.probed.get_mut(pid) {
                        p.msg = None;
                        p.error = Some(err.clone());
                    }
                }
                None => {}
            }
        }
    }
}
