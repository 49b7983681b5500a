//! Active messages: a user header and data for the handler registered
//! under an id on the receiving worker, as UCX's `ucp_am_send_nbx` and
//! `ucp_worker_set_am_recv_handler`.
//!
//! Sending copies the message into fragments of the endpoint's largest
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

use super::am_state::{AmArrival, AmPartial};
use super::am_wire::{AmFrag, AM_HDR, AM_MAX, AM_USER, FLAG_REPLY};
use super::core::Core;
use super::eager_tx::Started;
use super::lanes::Lanes;
use super::FragKey;
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
        let st = self.eps.get(ep).ok_or(Error::InvalidHandle)?;
        if let Some(e) = &st.failed {
            return Err(e.clone());
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
        let frag = st.cfg.max_bcopy.saturating_sub(AM_HDR);
        let (iface, uct_ep, idle) = (st.iface, st.uct_ep, st.queue.is_empty());
        if frag == 0 {
            return Err(Error::Unsupported(
                "active messages: the lane's copy sends are too small".into(),
            ));
        }
        self.next_msg_id += 1;
        let mut f = AmFrag {
            id,
            flags: if reply { FLAG_REPLY } else { 0 },
            hdr_len,
            msg_id: self.next_msg_id,
            total: total as u64,
            offset: 0,
        };
        if total <= frag && idle {
            // Fast path: one fragment, nothing queued ahead of it.
            let hdr = f.encode();
            match tx.am_bcopy(iface, uct_ep, AM_USER, &[&hdr, header, data]) {
                Ok((Posted::NoResource, _)) => {}
                Ok(_) => {
                    let length = data.len();
                    return Ok(Started::Done(crate::request::Info { tag: 0, length }));
                }
                Err(e) => return Err(Error::endpoint(e)),
            }
        }
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
            };
            let rid = self.reqs.insert(Request::new(Kind::Ctrl(c), op));
            return self.queue_send(tx, ep, rid);
        }
    }

    /// An `AM_USER` fragment arrived from `src`.
    pub(crate) fn rx_am_user(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let (f, bytes) = AmFrag::decode(data)?;
        if f.offset == 0 && bytes.len() as u64 == f.total {
            // A whole message, the common case: no reassembly.
            self.am_arrived(src, f, bytes.to_vec());
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
        self.am_arrived(src, f, whole);
        Ok(())
    }

    /// Message `f` from `src` is whole: record it for its handler.
    fn am_arrived(&mut self, src: SrcId, f: AmFrag, whole: Vec<u8>) {
        let reply_from = (f.flags & FLAG_REPLY != 0).then_some((self.cur_iface, src));
        self.done.am_arrivals.push(AmArrival {
            id: f.id,
            bytes: whole,
            hdr_len: f.hdr_len as usize,
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
