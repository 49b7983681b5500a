//! Active messages, the worker's side: handlers by id, sending, and
//! running the handlers after `progress` (the protocol is `proto/am.rs`).

use super::Worker;
use crate::api::WorkerMut;
use crate::proto::am_rndv::AmProto;
pub use crate::proto::am_state::AmInlineHandler;
use crate::proto::am_state::{AmArrival, AmBytes};
use crate::ucs::slab::SlabId;
use crate::Ep;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// An active message handler: runs after `progress` for each message of
/// its id, with the worker (to reply or post anything), and the message.
pub type AmHandler = Box<dyn FnMut(&mut WorkerMut<'_>, AmMsg) + Send>;

/// The handlers of a worker, by id (few: a list). A handler is `None`
/// while it runs.
#[derive(Default)]
pub(crate) struct AmHandlers(Vec<(u16, Option<AmHandler>)>);

impl AmHandlers {
    fn slot(&mut self, id: u16) -> Option<&mut Option<AmHandler>> {
        self.0.iter_mut().find(|(i, _)| *i == id).map(|(_, h)| h)
    }

    fn set(&mut self, id: u16, h: AmHandler) {
        match self.slot(id) {
            Some(s) => *s = Some(h),
            None => self.0.push((id, Some(h))),
        }
    }

    fn clear(&mut self, id: u16) {
        self.0.retain(|(i, _)| *i != id);
    }
}

/// Descriptors of rendezvous messages dropped without their data being
/// received, until the worker discards the data; `any` says whether to
/// look (so that running handlers takes no lock when none was dropped).
#[derive(Debug, Default)]
pub(crate) struct DroppedList {
    pub(crate) any: AtomicBool,
    pub(crate) list: Mutex<Vec<SlabId>>,
}

pub(crate) type Dropped = Arc<DroppedList>;

/// The data of a rendezvous active message, still at the sender.
#[derive(Debug)]
struct RndvDesc {
    pid: SlabId,
    len: usize,
    /// Where a dropped descriptor goes; `None` once received.
    dropped: Option<Dropped>,
}

impl Drop for RndvDesc {
    fn drop(&mut self) {
        // Never received: the worker receives it into nothing, so that
        // the sender's request completes.
        if let Some(d) = self.dropped.take() {
            if let Ok(mut l) = d.list.lock() {
                l.push(self.pid);
                d.any.store(true, Ordering::Release);
            }
        }
    }
}

/// An active message as its handler gets it: the sender's user header
/// and, for an eager message, its data, owned. A handler that wants the
/// data later keeps it ([`AmMsg::into_data`]); dropping it releases it.
///
/// A rendezvous message ([`AmMsg::is_rndv`]) carries only its length: the
/// data is fetched into a buffer of the receiver's choice with
/// [`Worker::am_recv_data`], from the handler or later (the message may
/// be kept). Dropping it unreceived discards the data (the sender's send
/// still completes).
#[derive(Debug)]
pub struct AmMsg {
    id: u16,
    bytes: AmBytes,
    hdr_len: u32,
    reply_ep: Option<Ep>,
    /// Boxed: the rare case, kept out of the common message's size.
    rndv: Option<Box<RndvDesc>>,
}

impl AmMsg {
    /// The id it was sent to.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The user header.
    pub fn header(&self) -> &[u8] {
        &self.bytes.as_slice()[..self.hdr_len as usize]
    }

    /// The data of an eager message; empty for a rendezvous one.
    pub fn data(&self) -> &[u8] {
        &self.bytes.as_slice()[self.hdr_len as usize..]
    }

    /// The length of the data, also of a rendezvous message.
    pub fn data_len(&self) -> usize {
        match &self.rndv {
            Some(r) => r.len,
            None => self.bytes.as_slice().len() - self.hdr_len as usize,
        }
    }

    /// Whether the data is still at the sender (UCX's
    /// `UCP_AM_RECV_ATTR_FLAG_RNDV`).
    pub fn is_rndv(&self) -> bool {
        self.rndv.is_some()
    }

    /// The endpoint back to the sender, if it asked for one
    /// ([`AmParams::reply`]).
    pub fn reply_ep(&self) -> Option<Ep> {
        self.reply_ep
    }

    /// Takes the rendezvous data's descriptor out, disarmed.
    pub(crate) fn take_rndv(&mut self) -> Option<(SlabId, usize)> {
        let mut d = self.rndv.take()?;
        d.dropped = None;
        Some((d.pid, d.len))
    }

    /// Keeps the data of an eager message beyond the handler (the header
    /// is dropped). A rendezvous message's data is discarded.
    pub fn into_data(mut self) -> Vec<u8> {
        if self.rndv.is_some() {
            return Vec::new();
        }
        let b = std::mem::replace(&mut self.bytes, AmBytes::Heap(Vec::new()));
        b.into_vec_from(self.hdr_len as usize)
    }
}

/// How an active message is sent (`ucp_am_send_nbx`'s flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmParams {
    pub(crate) reply: bool,
    pub(crate) proto: AmProto,
}

impl Default for AmParams {
    fn default() -> AmParams {
        AmParams::new()
    }
}

impl AmParams {
    /// The defaults: no reply endpoint; eager or rendezvous by size, as
    /// the endpoint's protocol selection decides.
    pub fn new() -> AmParams {
        AmParams {
            reply: false,
            proto: AmProto::Auto,
        }
    }

    /// Give the receiver's handler the endpoint back to this worker
    /// (`UCP_AM_SEND_FLAG_REPLY`).
    pub fn reply(self) -> AmParams {
        AmParams {
            reply: true,
            ..self
        }
    }

    /// Send eagerly, whatever the size (`UCP_AM_SEND_FLAG_EAGER`).
    pub fn eager(self) -> AmParams {
        AmParams {
            proto: AmProto::Eager,
            ..self
        }
    }

    /// Send by rendezvous, whatever the size (`UCP_AM_SEND_FLAG_RNDV`).
    pub fn rndv(self) -> AmParams {
        AmParams {
            proto: AmProto::Rndv,
            ..self
        }
    }
}

impl Worker {
    /// Registers `f` as the handler of active message id `id` (replacing
    /// any earlier one). Messages of an id without a handler are dropped
    /// with a log line.
    pub fn am_set_handler(
        &mut self,
        id: u16,
        f: impl FnMut(&mut WorkerMut<'_>, AmMsg) + Send + 'static,
    ) {
        self.am_handlers.set(id, Box::new(f));
    }

    /// Registers `f` as the inline handler of active message id `id`
    /// (replacing any earlier one): it sees each whole eager message of
    /// that id first, inside the transport's receive, with the user
    /// header and data where they arrived, and returns `true` when it
    /// consumed the message (UCX's handler returning `UCS_OK` on a
    /// `UCP_AM_FLAG_WHOLE_MSG` message); `false` passes the message on,
    /// copied, to the regular handler. It cannot reach the worker (so
    /// cannot send) and must not block. Rendezvous messages and messages
    /// that asked for a reply endpoint always go to the regular handler.
    pub fn am_set_inline_handler(
        &mut self,
        id: u16,
        f: impl FnMut(&[u8], &[u8]) -> bool + Send + 'static,
    ) {
        let h: AmInlineHandler = Box::new(f);
        match self.core.am_inline.iter_mut().find(|(i, _)| *i == id) {
            Some(slot) => slot.1 = h,
            None => self.core.am_inline.push((id, h)),
        }
    }

    /// Removes the handlers of `id`, regular and inline.
    pub fn am_clear_handler(&mut self, id: u16) {
        self.am_handlers.clear(id);
        self.core.am_inline.retain(|(i, _)| *i != id);
    }

    /// The handler's view of message `a`.
    #[inline]
    fn am_msg(&self, a: AmArrival) -> AmMsg {
        let AmArrival {
            id,
            bytes,
            hdr_len,
            reply_from,
            rndv,
        } = a;
        let reply_ep =
            reply_from.and_then(|(i, s)| self.core.src_eps.get(&(i as usize, s)).copied());
        AmMsg {
            id,
            bytes,
            hdr_len,
            reply_ep: reply_ep.map(Ep),
            rndv: rndv.map(|r| {
                let (pid, len) = *r;
                Box::new(RndvDesc {
                    pid,
                    len,
                    dropped: Some(Arc::clone(&self.am_dropped)),
                })
            }),
        }
    }

    /// Runs the handlers of the active messages that arrived; returns how
    /// many messages it took.
    pub(crate) fn run_am_handlers(&mut self) -> usize {
        if self.core.done.am_arrivals.len() == 1 {
            // The common case of one message per round: no list swap.
            if let Some(a) = self.core.done.am_arrivals.pop() {
                self.run_am_handler(a);
            }
            self.discard_dropped_am();
            return 1;
        }
        // Swapped with a kept list, so that neither allocates anew.
        let mut arrived = std::mem::take(&mut self.am_batch);
        std::mem::swap(&mut arrived, &mut self.core.done.am_arrivals);
        let n = arrived.len();
        for a in arrived.drain(..) {
            self.run_am_handler(a);
        }
        self.am_batch = arrived;
        self.discard_dropped_am();
        n
    }

    /// Runs the handler of message `a`.
    #[inline]
    fn run_am_handler(&mut self, a: AmArrival) {
        // Taken out while it runs: a handler may replace itself.
        let h = match self.am_handlers.slot(a.id) {
            Some(slot) => slot.take(),
            None => {
                tracing::warn!("active message {}: no handler; dropped", a.id);
                // Dropping the message discards rendezvous data, so that
                // the sender's send still completes.
                drop(self.am_msg(a));
                return;
            }
        };
        let Some(mut h) = h else {
            // Its handler is running (it waits for something, which
            // progresses): the message waits for the next round.
            self.core.done.am_arrivals.push(a);
            return;
        };
        let id = a.id;
        let msg = self.am_msg(a);
        h(&mut WorkerMut::new(self), msg);
        if let Some(slot @ None) = self.am_handlers.slot(id) {
            *slot = Some(h);
        }
    }
}
