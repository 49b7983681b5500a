//! Active messages, the worker's side: handlers by id, sending, and
//! running the handlers after `progress` (the protocol is `proto/am.rs`).

use super::Worker;
use crate::api::WorkerMut;
use crate::proto::am::AmArrival;
use crate::{Ep, Result};

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

/// An active message as its handler gets it: the sender's user header
/// and data, owned. A handler that wants the data later keeps it
/// ([`AmMsg::into_data`]); dropping it releases it.
#[derive(Debug)]
pub struct AmMsg {
    id: u16,
    bytes: Vec<u8>,
    hdr_len: usize,
    reply_ep: Option<Ep>,
}

impl AmMsg {
    /// The id it was sent to.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The user header.
    pub fn header(&self) -> &[u8] {
        &self.bytes[..self.hdr_len]
    }

    /// The data.
    pub fn data(&self) -> &[u8] {
        &self.bytes[self.hdr_len..]
    }

    /// The endpoint back to the sender, if it asked for one
    /// ([`AmParams::reply`]).
    pub fn reply_ep(&self) -> Option<Ep> {
        self.reply_ep
    }

    /// Keeps the data beyond the handler (the header is dropped).
    pub fn into_data(mut self) -> Vec<u8> {
        self.bytes.drain(..self.hdr_len);
        self.bytes
    }
}

/// How an active message is sent (`ucp_am_send_nbx`'s flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AmParams {
    reply: bool,
}

impl AmParams {
    /// The defaults: no reply endpoint.
    pub fn new() -> AmParams {
        AmParams::default()
    }

    /// Give the receiver's handler the endpoint back to this worker
    /// (`UCP_AM_SEND_FLAG_REPLY`).
    pub fn reply(self) -> AmParams {
        AmParams { reply: true }
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

    /// Removes the handler of `id`.
    pub fn am_clear_handler(&mut self, id: u16) {
        self.am_handlers.clear(id);
    }

    /// Sends active message `id` with `header` and `data` on `ep`. The
    /// message is copied: the call completes at once, and it leaves in
    /// order with the endpoint's other sends as the transport takes it.
    /// Header and data together are at most 256 MiB.
    pub fn am_send(
        &mut self,
        ep: Ep,
        id: u16,
        header: &[u8],
        data: &[u8],
        params: AmParams,
    ) -> Result<()> {
        self.core
            .am_send(&mut self.ifaces, ep.0, id, (header, data), params.reply)
    }

    /// Runs the handlers of the active messages that arrived; returns how
    /// many messages it took.
    pub(crate) fn run_am_handlers(&mut self) -> usize {
        let arrived = std::mem::take(&mut self.core.done.am_arrivals);
        let n = arrived.len();
        for AmArrival {
            id,
            bytes,
            hdr_len,
            reply_ep,
        } in arrived
        {
            let msg = AmMsg {
                id,
                bytes,
                hdr_len,
                reply_ep: reply_ep.map(Ep),
            };
            // Taken out while it runs: a handler may replace itself.
            let Some(mut h) = self.am_handlers.slot(id).and_then(Option::take) else {
                tracing::warn!("active message {id}: no handler; dropped");
                continue;
            };
            h(&mut WorkerMut::new(self), msg);
            if let Some(slot @ None) = self.am_handlers.slot(id) {
                *slot = Some(h);
            }
        }
        n
    }
}
