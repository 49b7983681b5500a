//! Streams: an ordered byte stream per endpoint, as UCX's
//! `ucp_stream_send_nbx` / `ucp_stream_recv_nbx`.
//!
//! A stream send is an eager send without a tag and without message
//! boundaries: it goes out as `STREAM` active messages on the endpoint's
//! active message lane, in order with the endpoint's other sends, from
//! the caller's buffer with zero-copy sends where the selection table
//! would use them for a tag send of that size. Where the table would send
//! a tag message by a zero-copy rendezvous, a stream send does too
//! (`stream_rndv.rs`; UCX's streams have none). Every fragment carries
//! the stream offset of its first byte (`u64`, wrapping), so the receiver
//! checks that nothing was lost or reordered: a gap is the peer's
//! protocol violation.
//!
//! The receiver attributes a fragment to the endpoint back to its sender
//! (learned from wireup). Bytes go straight into the oldest posted
//! receive of that endpoint; what no receive takes is kept, in the
//! fragments it came in, until a receive or [`Core::stream_take_chunk`]
//! takes it. Bytes that arrive before the endpoint back is known (its
//! wireup is being carried out) wait under their source and join it
//! then. A receive completes once it holds any bytes, or with
//! `wait_all` once its buffer is full.

use super::core::Core;
use super::eager_tx::Started;
use super::lanes::Lanes;
use super::stream_rndv::StreamAt;
use super::wire::{AM_STREAM, STREAM_HDR};
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::{Info, Kind, Notify, Op, Request, SendState, StreamRecvState, SyncState};
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;
use crate::uct::SrcId;
use crate::{Error, Result};

impl Core {
    /// Starts a stream send of `buf` on endpoint `ep`.
    pub(crate) fn stream_start(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        buf: SendBuf,
        op: Op,
    ) -> Result<Started> {
        self.wake_ep(tx, ep);
        let Some(st) = self.eps.get_mut(ep) else {
            return Err(Error::InvalidHandle);
        };
        if let Some(e) = &st.failed {
            return Err(Error::clone(e));
        }
        let len = buf.len();
        let info = Info {
            tag: 0,
            length: len,
        };
        if len == 0 {
            return Ok(Started::Done(info));
        }
        let base = st.stream_tx;
        st.stream_tx = base.wrapping_add(len as u64);
        let cfg = self.ep_cfgs[st.iface];
        if st.queue.is_empty() && len + STREAM_HDR <= cfg.max_bcopy {
            let r = super::eager_tx::send_single(
                tx,
                (st.iface, st.uct_ep),
                &cfg,
                true,
                (AM_STREAM, base),
                buf.slice(0, len),
            );
            if let Some(done) = super::eager_tx::single_outcome(r, info) {
                return done;
            }
        }
        if op.immediate {
            // Nothing left: the stream's offset is given back.
            if let Some(st) = self.eps.get_mut(ep) {
                st.stream_tx = base;
            }
            return Err(Error::NoResource);
        }
        if let Some(rndv) = self.stream_rndv_phase(ep, len) {
            return self.stream_rndv_send(tx, ep, (base, buf), rndv, op);
        }
        let Some(st) = self.eps.get(ep) else {
            return Err(Error::InvalidHandle);
        };
        // Zero-copy where a tag send of this size would use it.
        let zcopy = cfg.max_zcopy > 0 && st.tables[0].lookup(len).proto.zcopy();
        let single = if zcopy {
            len <= cfg.max_zcopy
        } else {
            len + STREAM_HDR <= cfg.max_bcopy
        };
        let msg_id = if single {
            0
        } else {
            self.next_msg_id += 1;
            self.next_msg_id
        };
        let id = self.reqs.insert(Request::new(
            Kind::Send(SendState {
                ep,
                tag: base,
                buf,
                offset: 0,
                msg_id,
                zcopy_inflight: 0,
                error: None,
                sync: SyncState::No,
                zcopy,
                rndv: crate::request::RndvPhase::No,
                memh: None,
                stream: true,
                am: None,
            }),
            op,
        ));
        self.queue_send(tx, ep, id)
    }

    /// A `STREAM` fragment arrived from `src`.
    pub(crate) fn rx_stream(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let Some((hdr, bytes)) = data.split_first_chunk::<STREAM_HDR>() else {
            return Err(PeerMisbehaved::Invalid {
                what: "stream fragment",
                detail: format!("{} bytes, shorter than its header", data.len()),
            });
        };
        let off = u64::from_le_bytes(*hdr);
        let key = (self.cur_iface, src);
        let ep = self.src_eps.get(&key).copied();
        let rx = match ep.and_then(|e| self.eps.get_mut(e)) {
            Some(st) => st.stream.get_or_insert_with(Default::default),
            None => self.stream_early.entry(key).or_default(),
        };
        let was_empty = rx.chunks.is_empty();
        let mut done = std::mem::take(&mut self.stream_done);
        match rx.arrive(&mut self.reqs, off, bytes, &mut done) {
            Ok(()) => {}
            Err(what) => {
                // The stream is broken: so is its endpoint.
                if let Some(ep) = ep {
                    let e = crate::ucs::Error::PeerMisbehaved {
                        peer: format!("stream of endpoint {ep:?}"),
                        what: what.clone(),
                    };
                    self.fail_ep(ep, Error::endpoint(e));
                }
                return Err(what);
            }
        }
        let kept = !rx.chunks.is_empty();
        self.stream_done(done);
        // Once in the list: it may be there still from bytes taken since
        // (the poll drops endpoints that have none left).
        if let (Some(ep), true, true) = (ep, was_empty, kept) {
            if !self.stream_ready.contains(&ep) {
                self.stream_ready.push(ep);
            }
        }
        Ok(())
    }

    /// The endpoint back to `src` of iface `iface` is known: bytes that
    /// arrived before join its stream.
    pub(crate) fn stream_adopt(&mut self, iface: usize, src: SrcId, ep: SlabId) {
        let Some(early) = self.stream_early.remove(&(iface, src)) else {
            return;
        };
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        let rx = st.stream.get_or_insert_with(Default::default);
        let mut done = std::mem::take(&mut self.stream_done);
        rx.adopt(&mut self.reqs, early, &mut done);
        let kept = rx.has_data();
        self.stream_done(done);
        self.stream_pump(StreamAt::Ep(ep));
        if kept && !self.stream_ready.contains(&ep) {
            self.stream_ready.push(ep);
        }
    }

    /// Completes the receives in `done` (kept for reuse, emptied).
    pub(crate) fn stream_done(&mut self, mut done: Vec<SlabId>) {
        for &id in &done {
            if let Some(Request {
                kind: Kind::StreamRecv(r),
                ..
            }) = self.reqs.get(id)
            {
                let length = r.filled;
                self.complete(id, Ok(Info { tag: 0, length }));
            }
        }
        done.clear();
        self.stream_done = done;
    }

    /// Posts a stream receive into `buf` on endpoint `ep`: completes at
    /// once with the bytes kept if they satisfy it.
    pub(crate) fn stream_recv_start(
        &mut self,
        ep: SlabId,
        buf: RecvBuf,
        wait_all: bool,
        op: Op,
    ) -> Result<Started> {
        let unit = StreamRecvState::unit_of(buf.capacity(), 1, wait_all);
        self.stream_recv_start_unit(ep, buf, unit, op)
    }

    /// [`Core::stream_recv_start`] that completes once a multiple of
    /// `unit` bytes arrived (or the buffer is full): UCX's receive into
    /// elements of `unit` bytes.
    pub(crate) fn stream_recv_start_unit(
        &mut self,
        ep: SlabId,
        buf: RecvBuf,
        unit: usize,
        op: Op,
    ) -> Result<Started> {
        let Some(st) = self.eps.get_mut(ep) else {
            return Err(Error::InvalidHandle);
        };
        let rx = st.stream.get_or_insert_with(Default::default);
        if buf.capacity() == 0 {
            return Ok(Started::Done(Info { tag: 0, length: 0 }));
        }
        if op.immediate && !rx.completes_at_once(buf.capacity(), unit) {
            return Err(st.failed.as_deref().cloned().unwrap_or(Error::NoResource));
        }
        let mut filled = 0;
        if rx.recvs.is_empty() && !rx.chunks.is_empty() {
            let mut r = StreamRecvState {
                ep,
                buf,
                filled: 0,
                unit,
                fetching: false,
            };
            if rx.fill(&mut r) {
                return Ok(Started::Done(Info {
                    tag: 0,
                    length: r.filled,
                }));
            }
            filled = r.filled;
        }
        if let Some(e) = &st.failed {
            // What arrived before the failure was taken above.
            return Err(Error::clone(e));
        }
        // Built in its slot from scalars, as the tag receive does
        // (`recv_start`): from `op` only the two fields a receive uses, and
        // no state built on the stack first, whose narrow stores a wide
        // copy would wait on (a store-forwarding stall).
        let Op {
            user_data, notify, ..
        } = op;
        #[allow(clippy::needless_match)] // not needless: see `recv_start`
        let notify = match notify {
            Notify::Poll => Notify::Poll,
            other => other,
        };
        let id = self.reqs.insert_with(|_| {
            let r = StreamRecvState {
                ep,
                buf,
                filled,
                unit,
                fetching: false,
            };
            Request::with_notify(Kind::StreamRecv(r), notify, user_data)
        });
        rx.recvs.push_back(id);
        if !rx.held.is_empty() {
            // Data at the sender may be next: fetch it, maybe into this.
            self.stream_pump(StreamAt::Ep(ep));
        }
        Ok(Started::InFlight(id))
    }

    /// The oldest fragment kept for endpoint `ep`, without a copy.
    pub(crate) fn stream_take_chunk(&mut self, ep: SlabId) -> Result<Option<Vec<u8>>> {
        let Some(st) = self.eps.get_mut(ep) else {
            return Err(Error::InvalidHandle);
        };
        let c = st.stream.as_mut().and_then(|rx| {
            // Receives posted first get the bytes first.
            rx.recvs.is_empty().then(|| rx.take_chunk()).flatten()
        });
        if c.is_none() {
            if let Some(e) = &st.failed {
                return Err(Error::clone(e));
            }
        }
        Ok(c)
    }

    /// Endpoints with stream bytes kept, at most `max`.
    pub(crate) fn stream_poll(&mut self, max: usize) -> Vec<SlabId> {
        let eps = &self.eps;
        self.stream_ready.retain(|&e| {
            eps.get(e)
                .and_then(|s| s.stream.as_ref())
                .is_some_and(|rx| rx.has_data())
        });
        self.stream_ready.iter().take(max).copied().collect()
    }

    /// Cancels stream receive `id`; whether it was one still posted.
    pub(crate) fn stream_recv_cancel(&mut self, id: SlabId) -> bool {
        let Some(Request {
            kind: Kind::StreamRecv(r),
            result: None,
            ..
        }) = self.reqs.get(id)
        else {
            return false;
        };
        if r.fetching {
            // A transport is writing into its buffer.
            return false;
        }
        let (ep, length) = (r.ep, r.filled);
        if let Some(rx) = self.eps.get_mut(ep).and_then(|s| s.stream.as_mut()) {
            rx.recvs.retain(|&q| q != id);
        }
        // Bytes it took are the caller's: report them, as UCX does.
        let res = if length > 0 {
            Ok(Info { tag: 0, length })
        } else {
            Err(Error::Canceled)
        };
        self.complete(id, res);
        true
    }

    /// Endpoint `ep` failed: its posted stream receives fail with `err`
    /// (bytes kept stay for the program to take).
    pub(crate) fn fail_streams(&mut self, ep: SlabId, err: &Error) {
        let Some(rx) = self.eps.get_mut(ep).and_then(|s| s.stream.as_mut()) else {
            return;
        };
        for id in std::mem::take(&mut rx.recvs) {
            if let Some(Request {
                kind: Kind::StreamRecv(StreamRecvState { fetching: true, .. }),
                ..
            }) = self.reqs.get(id)
            {
                // Its fetch completes it (with the failure, or its data).
                continue;
            }
            self.complete(id, Err(err.clone()));
        }
    }

    /// Source `src` of the current iface failed: bytes kept under it go.
    pub(crate) fn stream_source_failed(&mut self, src: SrcId) {
        self.stream_early.remove(&(self.cur_iface, src));
    }
}
