//! Large stream sends by rendezvous: where the endpoint's selection table
//! would send a tag message of that size by a zero-copy rendezvous (a
//! read of the sender's buffer, or a write into the receiver's), a stream
//! send does the same instead of copying its bytes through the lane.
//!
//! The sender makes a rendezvous send whose request to send goes out
//! wrapped as a rendezvous active message's does (`am_rndv.rs`), with
//! [`FLAG_STREAM`] and the send's stream offset as the user header; it
//! holds its place in the endpoint's queue, so the stream stays in order.
//! The receiver keeps the wrapped request as a probed message and
//! receives it at once, whether or not the program waits for bytes (so
//! that the send completes as an eager one would, and two programs that
//! each send before they receive do not wait for each other): straight
//! into the oldest posted receive when nothing is ahead of it and the
//! receive has room for all of it, else into a buffer of the stream's
//! that becomes a kept fragment. Until the data is in, everything that
//! arrives behind it waits (`StreamRx::held`), and a receive it goes into
//! can neither complete nor be canceled. A fetch that fails breaks the
//! stream: the endpoint fails with it.
//!
//! Weak: data for which no receive with room is posted yet (or a receive
//! smaller than the send) goes through the stream's buffer, a second
//! copy, as eager fragments do.

use super::am_state::AmRtsIn;
use super::am_wire::{AM_MAX, FLAG_STREAM};
use super::core::{Core, ProbedMsg, Rts, Unexp};
use super::eager_rx::RecvStarted;
use super::eager_tx::Started;
use super::ep::EpState;
use super::lanes::Lanes;
use super::peer::AckTo;
use super::select::ProtocolId;
use super::stream_rx::{FetchTo, StreamRx};
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::{AmSendInfo, GetPhase, Info, Kind, Op, PutPhase, Request, RndvPhase};
use crate::ucs::hash::FxHashMap;
use crate::ucs::slab::{Slab, SlabId};
use crate::uct::SrcId;
use crate::{Error, Result};

/// Where a stream is: under its endpoint, or under the source it came
/// from (its endpoint's, once that is known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamAt {
    Ep(SlabId),
    Src((usize, SrcId)),
}

/// A fetch of a rendezvous stream send's data, until it completes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamFetch {
    pub(crate) at: StreamAt,
    /// The receive the data goes straight into, if it does.
    pub(crate) into: Option<SlabId>,
    pub(crate) len: usize,
}

/// The stream at `at` and its endpoint, if known (from the fields of the
/// core it lives in); `None` for an endpoint that is gone.
fn stream_of<'a>(
    eps: &'a mut Slab<EpState>,
    early: &'a mut FxHashMap<(usize, SrcId), StreamRx>,
    src_eps: &FxHashMap<(usize, SrcId), SlabId>,
    at: StreamAt,
) -> Option<(Option<SlabId>, &'a mut StreamRx)> {
    let ep = match at {
        StreamAt::Ep(e) => Some(e),
        StreamAt::Src(from) => src_eps.get(&from).copied(),
    };
    match (ep, at) {
        (Some(e), _) if eps.get(e).is_some() => {
            let st = eps.get_mut(e)?;
            Some((Some(e), st.stream.get_or_insert_with(Default::default)))
        }
        (_, StreamAt::Src(from)) => Some((None, early.entry(from).or_default())),
        (_, StreamAt::Ep(_)) => None,
    }
}

impl Core {
    /// The phase a stream send of `len` bytes on `ep` starts its
    /// rendezvous in, if it goes by one.
    pub(crate) fn stream_rndv_phase(&self, ep: SlabId, len: usize) -> Option<RndvPhase> {
        if len as u64 > AM_MAX {
            // The receiver may have to hold it whole: larger ones go in
            // fragments.
            return None;
        }
        match self.eps.get(ep)?.tables[0].lookup(len).proto {
            ProtocolId::RndvGetZcopy => Some(RndvPhase::Get(GetPhase::Rts)),
            ProtocolId::RndvPutZcopy => Some(RndvPhase::Put(PutPhase::Rts)),
            _ => None,
        }
    }

    /// Starts a rendezvous stream send of `buf`, whose first byte is at
    /// stream offset `base`.
    pub(crate) fn stream_rndv_send(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        (base, buf): (u64, SendBuf),
        rndv: RndvPhase,
        op: Op,
    ) -> Result<Started> {
        let am = AmSendInfo {
            id: 0,
            flags: FLAG_STREAM,
            header: base.to_le_bytes().to_vec(),
        };
        self.rndv_wrapped_send(tx, (ep, buf), rndv, am, op)
    }

    /// Keeps a wrapped request to send as a probed message.
    pub(crate) fn probe_rts(&mut self, total: usize, to: AckTo, kind: Rts) -> SlabId {
        self.probed.insert(ProbedMsg {
            msg: Some(Unexp {
                tag: 0,
                data: Vec::new(),
                total,
                received: 0,
                key: None,
                ack: None,
                rts: Some(Box::new((to, kind))),
            }),
            error: None,
        })
    }

    /// The wrapped request of stream rendezvous `am` arrived: its data
    /// waits at the sender for a receive.
    pub(crate) fn stream_rts_arrived(&mut self, am: AmRtsIn, total: usize, to: AckTo, kind: Rts) {
        // Checked by `AmRts::decode`: the header is the offset.
        let off = <[u8; 8]>::try_from(&am.header[..]).map_or(0, u64::from_le_bytes);
        let at = StreamAt::Src((to.iface, to.src));
        let pid = self.probe_rts(total, to, kind);
        let Some((ep, rx)) = stream_of(&mut self.eps, &mut self.stream_early, &self.src_eps, at)
        else {
            return;
        };
        // No sender announces more (`stream_rndv_phase`); the receiver
        // may have to hold it whole.
        let r = match total as u64 > AM_MAX {
            true => Err(crate::ucs::PeerMisbehaved::FrameTooLong {
                len: total,
                max: AM_MAX as usize,
            }),
            false => rx.arrive_remote(off, pid, total),
        };
        if let Err(what) = r {
            self.probed.remove(pid);
            tracing::warn!(error = %what, "stream rendezvous refused");
            if let Some(ep) = ep {
                let e = crate::ucs::Error::PeerMisbehaved {
                    peer: format!("stream of endpoint {ep:?}"),
                    what,
                };
                self.fail_ep(ep, Error::endpoint(e));
            }
            return;
        }
        if let Some(ep) = ep {
            if !self.stream_ready.contains(&ep) {
                self.stream_ready.push(ep);
            }
        }
        self.stream_pump(at);
    }

    /// Hands out what the stream at `at` holds that no longer waits, and
    /// starts the fetch of the next data still at its sender.
    pub(crate) fn stream_pump(&mut self, at: StreamAt) {
        loop {
            let Some((_, rx)) = stream_of(&mut self.eps, &mut self.stream_early, &self.src_eps, at)
            else {
                return;
            };
            if rx.held.is_empty() {
                return;
            }
            let mut done = std::mem::take(&mut self.stream_done);
            let step = rx.pump(&mut self.reqs, &mut done, &mut self.stream_spare);
            self.stream_done(done);
            let Some((pid, len, to)) = step else {
                return;
            };
            if !self.stream_fetch_start(at, pid, len, to) {
                return;
            }
        }
    }

    /// Starts the fetch of probed message `pid` (`len` bytes) of the
    /// stream at `at` into `to`; whether it is over already (and the
    /// stream can move on).
    fn stream_fetch_start(&mut self, at: StreamAt, pid: SlabId, len: usize, to: FetchTo) -> bool {
        let (buf, kept) = match to {
            FetchTo::Recv(r, filled) => match self.reqs.get(r).map(|q| &q.kind) {
                Some(Kind::StreamRecv(s)) => (s.buf.sub(filled, len), None),
                _ => return false,
            },
            FetchTo::Kept => {
                // A buffer that held earlier data is reused as it is: its
                // bytes are all written before they are read.
                let mut v = self.stream_spare.pop().unwrap_or_default();
                if v.len() < len {
                    v.resize(len, 0);
                }
                v.truncate(len);
                // SAFETY: the vector's heap memory goes to the request
                // below, before any progress, and does not move; nothing
                // else touches it until the request completes.
                #[allow(unsafe_code)]
                let buf = unsafe { RecvBuf::new(v.as_mut_ptr(), len) };
                (buf, Some(v))
            }
        };
        let f = StreamFetch {
            at,
            into: match to {
                FetchTo::Recv(r, _) => Some(r),
                FetchTo::Kept => None,
            },
            len,
        };
        match self.msg_recv_start(pid, buf, Op::new()) {
            Ok(RecvStarted::InFlight(rid)) => {
                if let (Some(v), Some(q)) = (kept, self.reqs.get_mut(rid)) {
                    q.owner = Some(crate::request::Owner::new(v));
                }
                if let Some((_, rx)) =
                    stream_of(&mut self.eps, &mut self.stream_early, &self.src_eps, at)
                {
                    rx.fetching(Some(rid), None);
                }
                self.stream_fetches.insert(rid, f);
                false
            }
            Ok(RecvStarted::Done(info)) => {
                if let Some((_, rx)) =
                    stream_of(&mut self.eps, &mut self.stream_early, &self.src_eps, at)
                {
                    rx.fetching(None, kept);
                }
                self.stream_fetch_over(f, None, Ok(info), None)
            }
            Err(e) => {
                if let Some((_, rx)) =
                    stream_of(&mut self.eps, &mut self.stream_early, &self.src_eps, at)
                {
                    rx.fetching(None, None);
                }
                self.stream_fetch_over(f, None, Err(e), None)
            }
        }
    }

    /// Fetch `rid` (`None`: one over as it started, recorded already) of
    /// `f` is over with `result`; `data` is the stream's buffer it filled.
    /// Whether the stream can move on.
    pub(crate) fn stream_fetch_over(
        &mut self,
        f: StreamFetch,
        rid: Option<SlabId>,
        result: Result<Info>,
        data: Option<Vec<u8>>,
    ) -> bool {
        let mut done = std::mem::take(&mut self.stream_done);
        let mut failed = None;
        if let Some(r) = f.into {
            if let Some(Request {
                kind: Kind::StreamRecv(s),
                result: None,
                ..
            }) = self.reqs.get_mut(r)
            {
                s.fetching = false;
                if result.is_ok() {
                    s.filled += f.len;
                }
                if result.is_err() || s.satisfied() {
                    let ep = s.ep;
                    if let Some(rx) = self.eps.get_mut(ep).and_then(|e| e.stream.as_mut()) {
                        // The oldest receive, but for one that failed.
                        if rx.recvs.front() == Some(&r) {
                            rx.recvs.pop_front();
                        } else {
                            rx.recvs.retain(|&q| q != r);
                        }
                    }
                    match &result {
                        Ok(_) => done.push(r),
                        Err(e) => failed = Some((r, e.clone())),
                    }
                }
            }
        }
        self.stream_done(done);
        if let Some((r, e)) = failed {
            self.complete(r, Err(e));
        }
        let Some((ep, rx)) = stream_of(&mut self.eps, &mut self.stream_early, &self.src_eps, f.at)
        else {
            return false;
        };
        if let Some(rid) = rid {
            rx.fetched(rid, if result.is_ok() { data } else { None });
        }
        if let Err(e) = result {
            // A hole in the stream: nothing after it can be trusted.
            if let Some(ep) = ep {
                self.fail_ep(ep, e);
            }
            return false;
        }
        if rid.is_some() {
            self.stream_pump(f.at);
        }
        if let Some(ep) = ep {
            let ready = self
                .eps
                .get(ep)
                .and_then(|s| s.stream.as_ref())
                .is_some_and(|rx| rx.has_data());
            if ready && !self.stream_ready.contains(&ep) {
                self.stream_ready.push(ep);
            }
        }
        true
    }
}
