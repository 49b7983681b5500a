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
//! Not yet: a rendezvous for large messages (a message is at most
//! [`AM_MAX`] bytes, all of it sent eagerly) and zero-copy sends.

use super::am_wire::{AmFrag, AM_HDR, AM_MAX, AM_USER, FLAG_REPLY};
use super::core::Core;
use super::lanes::Lanes;
use super::FragKey;
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;
use crate::uct::SrcId;
use crate::{Error, Result};

/// An active message that arrived whole, until its handler runs.
#[derive(Debug)]
pub(crate) struct AmArrival {
    pub(crate) id: u16,
    /// The user header, then the data.
    pub(crate) bytes: Vec<u8>,
    pub(crate) hdr_len: usize,
    /// The endpoint back to the sender, if it asked for one and there is.
    pub(crate) reply_ep: Option<SlabId>,
}

/// A message whose fragments are still arriving.
#[derive(Debug)]
pub(crate) struct AmPartial {
    first: AmFrag,
    bytes: Vec<u8>,
}

impl Core {
    /// Sends active message `id` with `header` and `data` on endpoint
    /// `ep`; `reply` asks for the endpoint back to this worker to be
    /// given to the handler.
    pub(crate) fn am_send(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        id: u16,
        (header, data): (&[u8], &[u8]),
        reply: bool,
    ) -> Result<()> {
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
            self.send_ctrl(tx, ep, AM_USER, m);
            off += n;
            if off == total {
                return Ok(());
            }
        }
    }

    /// An `AM_USER` fragment arrived from `src`.
    pub(crate) fn rx_am_user(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let (f, bytes) = AmFrag::decode(data)?;
        let key = FragKey {
            iface: self.cur_iface as u16,
            src: src.0,
            msg_id: f.msg_id,
        };
        let whole = match self.am_frags.remove(&key) {
            None if f.offset == 0 && bytes.len() as u64 == f.total => bytes.to_vec(),
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
        let reply_ep = match f.flags & FLAG_REPLY {
            0 => None,
            _ => self.src_eps.get(&(self.cur_iface, src)).copied(),
        };
        self.done.am_arrivals.push(AmArrival {
            id: f.id,
            bytes: whole,
            hdr_len: f.hdr_len as usize,
            reply_ep,
        });
        Ok(())
    }

    /// Source `src` of the current iface failed: its unfinished active
    /// messages are dropped.
    pub(crate) fn am_source_failed(&mut self, src: SrcId) {
        let iface = self.cur_iface as u16;
        self.am_frags
            .retain(|k, _| !(k.iface == iface && k.src == src.0));
    }
}
