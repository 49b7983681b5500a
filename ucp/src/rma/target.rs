//! The target side of emulated one-sided operations, and the initiator's
//! handling of the replies.
//!
//! Requests execute in the AM handler, in arrival order, against
//! [`RMA_REGS`](super::mem::RMA_REGS) (through `rma/mem.rs`, which
//! touches the memory): the live registration must exist, carry the key's secret,
//! contain the whole range and grant the right, or nothing is touched and
//! the reply carries the refusal's status.

use super::atomic::AtomicValue;
use super::mem::{remote_atomic, remote_read, remote_write};
use super::wire::{self, AtomicReq, GetReq, KeyRef, Reply, AM_RMA_REPLY};
use super::RmaSink;
use crate::proto::command::Command;
use crate::proto::core::Core;
use crate::proto::lanes::Lanes;
use crate::proto::rndv_zcopy::Local;
use crate::request::{Info, Kind, Request};
use crate::ucs::slab::SlabId;
use crate::ucs::{PeerMisbehaved, Status};
use crate::uct::{process_nonce, Access, KeyFields, Posted as UctPosted, SrcId, Token};
use crate::Error;

/// Largest read one `RMA_GET` may ask for: the reply travels in one
/// active message, so initiators split reads; this caps what a peer can
/// make the target allocate.
pub(crate) const MAX_GET_FRAGMENT: u64 = 1 << 20;

fn fields(k: &KeyRef) -> Result<KeyFields, Status> {
    if k.owner != process_nonce() {
        return Err(Status::InvalidParam);
    }
    Ok(KeyFields {
        index: k.index,
        generation: k.generation,
        secret: k.secret,
        addr: 0,
        len: 0,
        access: Access::empty(),
    })
}

fn code(s: Status) -> i32 {
    i32::from(s.code())
}

impl Core {
    /// Dispatches an emulated RMA message; `false` if `id` is not one.
    pub(crate) fn rma_arrived(
        &mut self,
        id: crate::uct::AmId,
        src: SrcId,
        data: &[u8],
    ) -> Option<Result<(), PeerMisbehaved>> {
        Some(match id {
            wire::AM_RMA_PUT => wire::decode_put(data).map(|(req, key, addr, d)| {
                let status =
                    fields(&key).and_then(|f| remote_write(&f, addr, d).map_err(|e| e.status()));
                self.rma_reply(
                    src,
                    Reply {
                        req,
                        offset: 0,
                        value: 0,
                        status: status.err().map_or(0, code),
                    },
                    Vec::new(),
                );
            }),
            wire::AM_RMA_GET => GetReq::decode(data).map(|g| self.rx_get(src, g)),
            wire::AM_RMA_ATOMIC => AtomicReq::decode(data).map(|a| self.rx_atomic(src, a)),
            AM_RMA_REPLY => Reply::decode(data).map(|(r, d)| self.rx_reply(src, r, d)),
            _ => return None,
        })
    }

    fn rx_get(&mut self, src: SrcId, g: GetReq) {
        let mut out = Vec::new();
        let status = if g.len > MAX_GET_FRAGMENT {
            Err(Status::InvalidParam)
        } else {
            fields(&g.key).and_then(|f| {
                out = remote_read(&f, g.addr, g.len as usize).map_err(|e| e.status())?;
                Ok(())
            })
        };
        let status = status.err().map_or(0, code);
        if status != 0 {
            out.clear();
        }
        self.rma_reply(
            src,
            Reply {
                req: g.req,
                offset: g.offset,
                value: 0,
                status,
            },
            out,
        );
    }

    fn rx_atomic(&mut self, src: SrcId, a: AtomicReq) {
        let width = a.value.width();
        let r = if a.addr % width as u64 != 0 {
            Err(Status::InvalidAddr)
        } else {
            fields(&a.key).and_then(|f| {
                remote_atomic(&f, a.addr, a.op, a.value, a.compare).map_err(|e| e.status())
            })
        };
        let (value, status) = match r {
            Ok(old) => (old.as_u64(), 0),
            Err(s) => (0, code(s)),
        };
        self.rma_reply(
            src,
            Reply {
                req: a.req,
                offset: 0,
                value,
                status,
            },
            Vec::new(),
        );
    }

    fn rma_reply(&mut self, src: SrcId, r: Reply, data: Vec<u8>) {
        let mut m = r.encode();
        m.extend_from_slice(&data);
        self.commands.push_back(Command::RmaReply {
            iface: self.cur_iface,
            src,
            msg: m,
        });
    }

    /// The target answered one step of request `req`.
    fn rx_reply(&mut self, src: SrcId, r: Reply, data: &[u8]) {
        let id = SlabId::from_u64(r.req);
        let from = self.src_eps.get(&(self.cur_iface, src)).copied();
        let Some(req) = self.reqs.get_mut(id) else {
            tracing::debug!("RMA reply for a request that is gone");
            return;
        };
        let Kind::Rma(s) = &mut req.kind else {
            tracing::warn!("RMA reply names a request that is not an RMA operation");
            return;
        };
        if req.result.is_some() {
            // Already failed (endpoint error): the buffers are the caller's
            // again, so late replies touch nothing.
            return;
        }
        if from.is_some_and(|e| e != s.ep) {
            // Only the peer the request went to may answer it. (A source
            // not known yet is accepted: its wireup may be waiting in this
            // very progress call.)
            tracing::warn!("RMA reply from another peer than the request's: ignored");
            return;
        }
        let result = if r.status != 0 {
            let st = i8::try_from(r.status).ok().and_then(Status::from_code);
            Err(super::refused(format!(
                "the target answered {}",
                st.map_or_else(|| format!("status {}", r.status), |s| s.to_string())
            )))
        } else {
            match &s.sink {
                RmaSink::None => Ok(()),
                RmaSink::DeviceFetch { .. } | RmaSink::DeviceBuilt(_) => Err(super::refused(
                    "the target answered an atomic that a device executes".into(),
                )),
                RmaSink::Get { segs } => {
                    let len: usize = segs.iter().map(|b| b.capacity()).sum();
                    // The range of the operation's local ranges the reply
                    // fills (a reply never spans two: fragments are cut at
                    // their ends).
                    let fits = usize::try_from(r.offset).ok().and_then(|o| {
                        let end = o.checked_add(data.len())?;
                        let mut start = 0;
                        segs.iter().find_map(|b| {
                            let n = b.capacity();
                            let here = (o >= start && end <= start + n).then(|| (b, o - start));
                            start += n;
                            here
                        })
                    });
                    match fits {
                        Some((buf, o)) => {
                            // Inside the range (checked); the request has
                            // no result yet.
                            buf.write(o, data);
                            Ok(())
                        }
                        None => Err(super::refused(format!(
                            "the target answered {} bytes at offset {} of a {len}-byte read",
                            data.len(),
                            r.offset
                        ))),
                    }
                }
                &RmaSink::Fetch { word, width } => match AtomicValue::of_width(width, r.value) {
                    Some(v) if width == 8 || r.value <= u64::from(u32::MAX) => {
                        word.write(v.as_u64());
                        Ok(())
                    }
                    _ => Err(super::refused(format!("bad atomic result {:#x}", r.value))),
                },
            }
        };
        self.rma_step_done(id, result);
    }

    /// One step (fragment, zero-copy operation, reply) of RMA request `id`
    /// finished; completes the request after its last step.
    pub(crate) fn rma_step_done(&mut self, id: SlabId, result: crate::Result<()>) {
        let Some(req) = self.reqs.get_mut(id) else {
            return;
        };
        let Kind::Rma(s) = &mut req.kind else { return };
        if req.result.is_some() {
            return;
        }
        s.pending = s.pending.saturating_sub(1);
        if let Err(e) = result {
            s.error.get_or_insert(e);
        }
        let unposted = s.zcopy.iter().any(|z| z.off < z.len) || s.amo.is_some();
        if s.pending == 0 && !s.posting && !unposted {
            let (len, err) = (s.len, s.error.take());
            self.complete(
                id,
                err.map_or(
                    Ok(Info {
                        tag: 0,
                        length: len,
                    }),
                    Err,
                ),
            );
        }
    }

    /// Fails the RMA requests of endpoint `ep` still waiting.
    pub(crate) fn fail_rma(&mut self, ep: SlabId, err: &Error) {
        let ids: Vec<SlabId> = self
            .reqs
            .iter()
            .filter(|(_, r)| r.result.is_none() && matches!(&r.kind, Kind::Rma(s) if s.ep == ep))
            .map(|(id, _)| id)
            .collect();
        for id in ids {
            if let Some(Request {
                kind: Kind::Rma(s), ..
            }) = self.reqs.get_mut(id)
            {
                // Nothing more is posted, and no reply will come; what the
                // transport holds still finishes first.
                s.error.get_or_insert_with(|| err.clone());
                s.zcopy.iter_mut().for_each(|z| z.off = z.len);
                s.amo = None;
                if s.zcopy_inflight > 0 {
                    s.pending = s.zcopy_inflight;
                    continue;
                }
            }
            self.complete(id, Err(err.clone()));
        }
    }

    /// A zero-copy step of RMA request `id` completed (from the
    /// transport).
    pub(crate) fn rma_zcopy_done(&mut self, id: SlabId, result: crate::Result<()>) {
        if let Some(Request {
            kind: Kind::Rma(s),
            result: None,
            ..
        }) = self.reqs.get_mut(id)
        {
            s.zcopy_inflight = s.zcopy_inflight.saturating_sub(1);
            if let (Ok(()), RmaSink::DeviceFetch { word, width, slot }) = (&result, &s.sink) {
                // A device atomic's old value (a 64-bit word: devices do
                // no narrower ones).
                let v = u64::from_ne_bytes(**slot);
                if AtomicValue::of_width(*width, v).is_some() {
                    word.write(v);
                } else {
                    let e = super::refused(format!("a device atomic of {width} bytes"));
                    s.error.get_or_insert(e);
                }
            }
            if result.is_ok() && matches!(s.sink, RmaSink::DeviceBuilt(_)) {
                // Done, or its next step queued (before this step counts
                // as finished, so the request waits for it).
                self.built_step_done(id);
            }
        } else if let Some(Request {
            kind: Kind::Rma(s), ..
        }) = self.reqs.get_mut(id)
        {
            s.zcopy_inflight = s.zcopy_inflight.saturating_sub(1);
        }
        self.rma_step_done(id, result);
    }

    /// Whether RMA requests of `ep` (or of any endpoint) are still waiting.
    pub(crate) fn rma_waiting(&self, ep: Option<SlabId>) -> bool {
        self.reqs.iter().any(|(_, r)| {
            r.result.is_none() && matches!(&r.kind, Kind::Rma(s) if ep.is_none_or(|e| s.ep == e))
        })
    }
}

impl Core {
    /// Posts the zero-copy steps of RMA request `id` until the lane refuses
    /// (then it asks to be told when there is room: `resume_rma`).
    pub(crate) fn push_rma_zcopy(&mut self, tx: &mut dyn Lanes, id: SlabId) {
        let token = Token(id.to_u64());
        loop {
            let Some(req) = self.reqs.get_mut(id) else {
                return;
            };
            if req.result.is_some() {
                return;
            }
            let Kind::Rma(s) = &mut req.kind else { return };
            let Some(z) = s.zcopy.iter_mut().find(|z| z.off < z.len) else {
                let done = s.pending == 0 && !s.posting;
                if done {
                    // The last step finished at once.
                    s.pending = 1;
                    self.rma_step_done(id, Ok(()));
                }
                return;
            };
            let n = z.max.min(z.len - z.off);
            let at = z.remote + z.off as u64;
            // The request waits for every step (each InFlight one is
            // counted and reported back).
            let r = match z.local {
                Local::Send(buf, base) => {
                    let src = buf.lend(base + z.off, n);
                    tx.put_zcopy(z.iface, z.uct_ep, src, at, &z.key, token)
                }
                Local::Recv(buf) => {
                    let dst = buf.lend(z.off, n);
                    tx.get_zcopy(z.iface, z.uct_ep, dst, at, &z.key, token)
                }
            };
            match r {
                Ok(UctPosted::Done) => z.off += n,
                Ok(UctPosted::InFlight) => {
                    z.off += n;
                    s.pending += 1;
                    s.zcopy_inflight += 1;
                }
                Ok(UctPosted::NoResource) => {
                    let (ep, iface, uct_ep) = (s.ep, z.iface, z.uct_ep);
                    self.await_room(ep, iface, uct_ep);
                    self.rma_parked += 1;
                    return;
                }
                Err(e) => {
                    // Nothing more of this operation is posted.
                    s.error.get_or_insert(super::transport_error(e));
                    s.zcopy.iter_mut().for_each(|z| z.off = z.len);
                }
            }
        }
    }

    /// Resumes the zero-copy RMA steps that waited for
    /// room (those of every endpoint: parking is rare, and a step that
    /// still finds no room parks again).
    pub(crate) fn resume_rma(&mut self, tx: &mut dyn Lanes) -> usize {
        self.rma_parked = 0;
        let ids: Vec<SlabId> = self
            .reqs
            .iter()
            .filter(|(_, r)| {
                r.result.is_none()
                    && matches!(&r.kind, Kind::Rma(s)
                        if s.zcopy.iter().any(|z| z.off < z.len) || s.amo.is_some())
            })
            .map(|(id, _)| id)
            .collect();
        let n = ids.len();
        for id in ids {
            let amo = matches!(self.reqs.get(id), Some(Request { kind: Kind::Rma(s), .. }) if s.amo.is_some());
            if amo {
                self.push_rma_amo(tx, id);
            } else {
                self.push_rma_zcopy(tx, id);
            }
        }
        n
    }
}
