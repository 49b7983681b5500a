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

use super::wire::{self, AM_RNDV_ATS, RTS_GET_HDR};
use crate::proto::eager_rx::RecvStarted;
use crate::proto::rndv_put::split;
use crate::proto::select::ProtocolId;
use crate::request::{AtsTo, Kind, RndvPhase};
use crate::ucs::slab::SlabId;
use crate::ucs::{self, PeerMisbehaved};
use crate::uct::{Iface, Iov, Posted, SrcId, Token};
use crate::worker::core::{AckTo, Core, RemoteBuf, Rts};
use crate::Error;

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
        let packed = &data[RTS_GET_HDR..];
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
        let rb = RemoteBuf { addr, rkey };
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
            r.tag = tag;
            r.total = total;
            r.received = 0;
            r.rndv_src = Some((to.iface, to.src));
        }
        self.deferred.gets.push((req, to, rb));
        RecvStarted::InFlight(req)
    }

    /// Posts the reads of matched rendezvous-by-get receives.
    pub(crate) fn run_gets(&mut self, ifaces: &mut [Box<dyn Iface>]) -> usize {
        let gets = std::mem::take(&mut self.deferred.gets);
        let n = gets.len();
        for (req, to, rb) in gets {
            let Some(&ep) = self.src_eps.get(&(to.iface, to.src)) else {
                let e = ucs::Error::EndpointFailed("no endpoint back to the sender".into());
                self.complete(req, Err(Error::endpoint(e)));
                continue;
            };
            let Some(st) = self.eps.get(ep) else {
                continue;
            };
            let Some(r) = self.recv_state_ref(req) else {
                continue;
            };
            let want = r.total.min(r.buf.capacity());
            let buf = r.buf;
            // The lanes selection chose for this size, among those of the
            // domain that unpacked the key; else the first lane.
            let md = self.iface_md.get(to.iface).copied();
            let choice = st.tables[0].lookup(want);
            let mut lanes: Vec<(usize, f64)> = if choice.proto == ProtocolId::RndvGetZcopy {
                choice
                    .lanes
                    .iter()
                    .filter(|&(l, _)| {
                        st.lanes
                            .get(l)
                            .is_some_and(|&(i, _)| self.iface_md.get(i).copied() == md)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            if lanes.is_empty() {
                lanes.push((0, 1.0));
            }
            let frag_cfg = self.select.config().rndv_frag_size;
            let mut inflight = 0;
            let mut failure = None;
            'segs: for (lane, start, end) in split(want, &lanes) {
                let Some(&(ifi, uct_ep)) = st.lanes.get(lane) else {
                    continue;
                };
                let iface = &mut ifaces[ifi];
                let max = iface.attr().max_get_zcopy.max(1);
                let frag = match frag_cfg {
                    0 => max,
                    f => f.min(max),
                };
                let mut off = start;
                while off < end {
                    let len = (end - off).min(frag);
                    let iov = [Iov {
                        ptr: buf.ptr_at(off),
                        len,
                    }];
                    // SAFETY: the range lies in the receive's buffer, which
                    // stays valid and exclusively the request's until it
                    // completes; it completes only after these reads did
                    // (get_inflight counts them).
                    #[allow(unsafe_code)]
                    let posted = unsafe {
                        iface.get_zcopy(
                            uct_ep,
                            &iov,
                            rb.addr.wrapping_add(off as u64),
                            &rb.rkey,
                            Token(req.to_u64()),
                        )
                    };
                    match posted {
                        Ok(Posted::Done) => {}
                        Ok(Posted::InFlight) => inflight += 1,
                        Ok(Posted::NoResource) => {
                            failure = Some(Error::Unsupported("get_zcopy out of resources".into()));
                            break 'segs;
                        }
                        Err(e) => {
                            failure = Some(Error::endpoint(e));
                            break 'segs;
                        }
                    }
                    off += len;
                }
            }
            if let Some(r) = self.recv_state(req) {
                r.received = r.total;
                r.get_inflight += inflight;
                r.ats_to = Some(AtsTo { ep, sreq: to.sreq });
            }
            if inflight == 0 {
                self.get_done(ifaces, req, failure);
            } else if let Some(e) = failure {
                // The reads in flight finish it; remember why it failed.
                self.deferred.get_errors.push((req, e));
            }
        }
        n
    }

    /// A read of receive `id` completed (from the transport).
    pub(crate) fn get_completed(&mut self, id: SlabId, result: ucs::Result<()>) {
        let Some(r) = self.recv_state(id) else {
            return;
        };
        r.get_inflight = r.get_inflight.saturating_sub(1);
        if let Err(e) = result {
            self.deferred.get_errors.push((id, Error::endpoint(e)));
        }
        if self.recv_state(id).is_some_and(|r| r.get_inflight == 0) {
            self.deferred.get_done.push(id);
        }
    }

    /// Finishes receives whose reads all completed during progress.
    pub(crate) fn run_get_done(&mut self, ifaces: &mut [Box<dyn Iface>]) -> usize {
        let done = std::mem::take(&mut self.deferred.get_done);
        let n = done.len();
        for id in done {
            let err = self
                .deferred
                .get_errors
                .iter()
                .position(|(r, _)| *r == id)
                .map(|i| self.deferred.get_errors.swap_remove(i).1);
            self.get_done(ifaces, id, err);
        }
        n
    }

    fn send_ats(&mut self, ifaces: &mut [Box<dyn Iface>], req: SlabId) {
        let Some(to) = self.recv_state(req).and_then(|r| r.ats_to.take()) else {
            return;
        };
        self.send_ctrl(ifaces, to.ep, AM_RNDV_ATS, to.sreq.to_le_bytes().to_vec());
    }

    /// The sender's buffer was read (or reading failed): acknowledge, so
    /// the sender can release it, and complete.
    fn get_done(&mut self, ifaces: &mut [Box<dyn Iface>], req: SlabId, err: Option<Error>) {
        self.send_ats(ifaces, req);
        if let Some(r) = self.recv_state(req) {
            r.rndv_src = None;
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
            if s.rndv == RndvPhase::WaitAts {
                s.rndv = RndvPhase::No;
                s.offset = s.buf.len();
                s.acked = true;
                self.finish_send(id);
            }
        }
    }
}
