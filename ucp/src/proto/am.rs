//! Active messages: a user header and data for the handler registered
//! under an id on the receiving worker, as UCX's `ucp_am_send_nbx` and
//! `ucp_worker_set_am_recv_handler`.
//!
//! A message that fits one send of the lane, with nothing queued ahead of
//! it, leaves whole as `AM_USER_ONLY` (a short send when it has no user
//! header and the selection makes its size a short one). Otherwise
//! sending copies the message into fragments of the endpoint's largest
//! copy send (`am_wire` has the layout) queued on the endpoint behind
//! earlier sends, like the worker's own messages (`ctrl.rs`): the call
//! completes at once and the fragments leave in order as the lane takes
//! them. The receiver puts a message's fragments together (they arrive in
//! order on the lane) and, once it is whole, records it
//! (`Reports::am_arrivals`); the worker hands it to the handler after
//! `progress`. A fragment out of order or inconsistent with its message
//! is a peer's protocol violation; a source that fails takes its
//! unfinished messages with it.
//!
//! The call completes at once unless the endpoint's queue holds sends
//! ahead of its last fragment; then that fragment is the application's
//! request, complete when it leaves (so a program that waits for it does
//! not queue without bound). Large messages go by rendezvous instead
//! (`am_rndv.rs`). Not yet: zero-copy eager sends.

use super::am_state::{AmArrival, AmBytes, AmPartial};
use super::am_wire::{
    AmFrag, AmOnly, AM_HDR, AM_MAX, AM_ONLY_HDR, AM_USER, AM_USER_ONLY, FLAG_REPLY,
};
use super::core::Core;
use super::eager_tx::{single_outcome, Started};
use super::lanes::Lanes;
use super::FragKey;
use crate::request::buf::SendBuf;
use crate::request::{CtrlState, Kind, Op, Request};
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;
use crate::uct::{Posted, SrcId};
use crate::{Error, Result};

impl Core {
    /// Sends active message `id` with `header` and `data` on endpoint
    /// `ep` eagerly, copied; `reply` asks for the endpoint back to this
    /// worker to be given to the handler.
    pub(crate) fn am_send(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        id: u16,
        (header, data): (&[u8], &[u8]),
        reply: bool,
        op: Op,
    ) -> Result<Started> {
        let Some(st) = self.eps.get(ep) else {
            return Err(Error::InvalidHandle);
        };
        if let Some(e) = &st.failed {
            return Err(Error::clone(e));
        }
        let total = header.len() + data.len();
        if total as u64 > AM_MAX {
            return Err(Error::Limit {
                op: "active message header and data",
                len: total,
                max: AM_MAX as usize,
            });
        }
        let hdr_len = u32::try_from(header.len()).map_err(|_| Error::Limit {
            op: "active message header",
            len: header.len(),
            max: u32::MAX as usize,
        })?;
        let frag = self.ep_cfgs[st.iface].max_bcopy.saturating_sub(AM_HDR);
        let (iface, uct_ep, idle) = (st.iface, st.uct_ep, st.queue.is_empty());
        if frag == 0 {
            return Err(Error::Unsupported(
                "active messages: the lane's copy sends are too small".into(),
            ));
        }
        let flags = if reply { FLAG_REPLY } else { 0 };
        if idle && AM_ONLY_HDR + total <= self.ep_cfgs[st.iface].max_bcopy {
            // Fast path: the whole message in one copy send, nothing
            // queued ahead of it (`am_send_short` took the short ones).
            let only = AmOnly { id, flags, hdr_len }.encode();
            match tx.am_bcopy(iface, uct_ep, AM_USER_ONLY, &[&only, header, data]) {
                Ok((Posted::NoResource, _)) => {}
                Ok(_) => {
                    let length = data.len();
                    return Ok(Started::Done(crate::request::Info { tag: 0, length }));
                }
                Err(e) => return Err(Error::endpoint(e)),
            }
        }
        if op.immediate {
            return Err(Error::NoResource);
        }
        self.next_msg_id += 1;
        let mut f = AmFrag {
            id,
            flags,
            hdr_len,
            msg_id: self.next_msg_id,
            total: total as u64,
            offset: 0,
        };
        let mut off = 0;
        loop {
            let n = frag.min(total - off);
            let mut m = Vec::with_capacity(AM_HDR + n);
            f.offset = off as u64;
            m.extend_from_slice(&f.encode());
            // The fragment's bytes of header ++ data.
            let (a, b) = (off.min(header.len()), (off + n).min(header.len()));
            m.extend_from_slice(&header[a..b]);
            let (c, d) = (off.max(header.len()) - header.len(), off + n - b);
            m.extend_from_slice(&data[c..d]);
            off += n;
            if off < total {
                self.send_ctrl(tx, ep, AM_USER, m);
                continue;
            }
            // The last fragment is the application's request.
            let c = CtrlState {
                ep,
                am_id: AM_USER,
                data: m,
                report_len: data.len(),
                app: true,
            };
            let rid = self.reqs.insert(Request::new(Kind::Ctrl(c), op));
            return self.queue_send(tx, ep, rid);
        }
    }

    /// The fast path of a message without a user header whose data fits
    /// a short send that the endpoint's selection makes eager, with
    /// nothing queued ahead of it: one `am_short`. `None` when the message
    /// does not take it (or the lane has no room now).
    #[inline]
    pub(crate) fn am_send_short(
        &self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        id: u16,
        buf: &SendBuf,
        reply: bool,
    ) -> Option<Result<Started>> {
        let st = self.eps.get(ep)?;
        let len = buf.len();
        if len >= st.short_end || st.failed.is_some() || !st.queue.is_empty() || st.announce_due {
            return None;
        }
        let hdr = u64::from_le_bytes(am_only_header(id, reply));
        let r = tx.am_short(st.iface, st.uct_ep, AM_USER_ONLY, hdr, buf.slice(0, len));
        single_outcome(
            r,
            crate::request::Info {
                tag: 0,
                length: len,
            },
        )
    }

    /// An `AM_USER_ONLY` message arrived from `src`, whole.
    #[inline]
    pub(crate) fn rx_am_user_only(
        &mut self,
        src: SrcId,
        data: &[u8],
    ) -> Result<(), PeerMisbehaved> {
        let (m, bytes) = AmOnly::decode(data)?;
        if !self.am_inline.is_empty() && self.am_run_inline(m.id, m.flags, bytes, m.hdr_len) {
            return Ok(());
        }
        let f = AmFrag {
            id: m.id,
            flags: m.flags,
            hdr_len: m.hdr_len,
            msg_id: 0,
            total: bytes.len() as u64,
            offset: 0,
        };
        self.am_arrived(src, f, AmBytes::copy(bytes));
        Ok(())
    }

    /// An `AM_USER` fragment arrived from `src`.
    pub(crate) fn rx_am_user(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let (f, bytes) = AmFrag::decode(data)?;
        if f.offset == 0 && bytes.len() as u64 == f.total {
            // A whole message, the common case: no reassembly.
            self.am_arrived(src, f, AmBytes::copy(bytes));
            return Ok(());
        }
        let key = FragKey {
            iface: self.cur_iface as u16,
            src: src.0,
            msg_id: f.msg_id,
        };
        let whole = match self.am_frags.remove(&key) {
            None if f.offset == 0 => {
                let mut b = Vec::with_capacity(f.total as usize);
                b.extend_from_slice(bytes);
                self.am_frags.insert(key, AmPartial { first: f, bytes: b });
                return Ok(());
            }
            None => {
                return Err(PeerMisbehaved::Invalid {
                    what: "active message fragment",
                    detail: format!("at {} of a message never begun", f.offset),
                })
            }
            Some(mut p) => {
                let same = p.first.id == f.id
                    && p.first.flags == f.flags
                    && p.first.hdr_len == f.hdr_len
                    && p.first.total == f.total;
                if !same || f.offset != p.bytes.len() as u64 {
                    return Err(PeerMisbehaved::Invalid {
                        what: "active message fragment",
                        detail: format!("at {} where {} was due", f.offset, p.bytes.len()),
                    });
                }
                p.bytes.extend_from_slice(bytes);
                if (p.bytes.len() as u64) < f.total {
                    self.am_frags.insert(key, p);
                    return Ok(());
                }
                p.bytes
            }
        };
        self.am_arrived(src, f, whole.into());
        Ok(())
    }

    /// Runs the inline handler of `id` on a whole eager message (`bytes`:
    /// its user header of `hdr_len` bytes, then its data), if it has one
    /// and the sender asked for no reply endpoint; whether the handler
    /// consumed it.
    #[inline]
    fn am_run_inline(&mut self, id: u16, flags: u8, bytes: &[u8], hdr_len: u32) -> bool {
        if flags & FLAG_REPLY != 0 {
            return false;
        }
        let Some((_, h)) = self.am_inline.iter_mut().find(|(i, _)| *i == id) else {
            return false;
        };
        let (header, data) = bytes.split_at((hdr_len as usize).min(bytes.len()));
        h(header, data)
    }

    /// Message `f` from `src` is whole: record it for its handler.
    fn am_arrived(&mut self, src: SrcId, f: AmFrag, whole: AmBytes) {
        if !self.am_inline.is_empty()
            && self.am_run_inline(f.id, f.flags, whole.as_slice(), f.hdr_len)
        {
            return;
        }
        let reply_from = (f.flags & FLAG_REPLY != 0).then_some((self.cur_iface as u32, src));
        self.done.am_arrivals.push(AmArrival {
            id: f.id,
            bytes: whole,
            hdr_len: f.hdr_len,
            reply_from,
            rndv: None,
        });
    }

    /// Source `src` of the current iface failed: its unfinished active
    /// messages are dropped.
    pub(crate) fn am_source_failed(&mut self, src: SrcId) {
        let iface = self.cur_iface as u16;
        self.am_frags
            .retain(|k, _| !(k.iface == iface && k.src == src.0));
    }
}

/// The 8-byte header of an `AM_USER_ONLY` message without a user header.
#[inline]
pub(crate) fn am_only_header(id: u16, reply: bool) -> [u8; 8] {
    let flags = if reply { FLAG_REPLY } else { 0 };
    AmOnly {
        id,
        flags,
        hdr_len: 0,
    }
    .encode()
}
