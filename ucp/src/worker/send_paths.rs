//! [`SendPaths`]: the endpoints' own send paths of a worker that threads
//! share, as a handle those threads use without the worker.
//!
//! A [`SharedWorker`](crate::SharedWorker) holds one and tries it on every
//! short send. A program that shares a plain [`Worker`] between threads
//! under a lock of its own (the C API's `UCS_THREAD_MODE_MULTI`) takes one
//! with [`Worker::send_paths`] and tries it before it takes its lock. How
//! the paths open and close, and why messages keep their order, is in
//! `proto/send_gate.rs`.

use super::Worker;
use crate::proto::send_gate::{gate_sends, GateTable, SendGate};
use crate::Ep;
use std::sync::Arc;

/// The endpoints' own send paths of one worker: `Clone + Send + Sync`,
/// usable from any thread while another uses the worker. Once the worker
/// is dropped every path is closed.
#[derive(Debug, Clone)]
pub struct SendPaths {
    table: Arc<GateTable>,
}

impl Worker {
    /// Turns on the endpoints' own send paths of this worker (for good)
    /// and returns a handle to them. A worker that one thread uses gains
    /// nothing from them: each of its short sends then also tops up the
    /// endpoint's path.
    pub fn send_paths(&mut self) -> SendPaths {
        SendPaths {
            table: self.core.gates_enable(),
        }
    }
}

impl SendPaths {
    /// Sends `data` with `tag` on `ep` now, by the endpoint's own path, if
    /// it is open for it: `true` once sent (the send is complete: `data`
    /// was copied). `false` sends nothing: post the message the usual way,
    /// on the worker.
    ///
    /// The path is open for a short message (one `am_short`) on an
    /// endpoint whose transport offers it (shared memory), once a send of
    /// the endpoint took the worker's fast path: nothing queued on the
    /// endpoint, its eager credit quiet. Every other send on the endpoint
    /// closes it until then, so a thread's messages keep their order
    /// whichever way each went, as long as the thread's earlier sends were
    /// posted (not just queued somewhere for another thread to post).
    #[inline]
    pub fn try_tag_send_short(&self, ep: Ep, data: &[u8], tag: u64) -> bool {
        !data.is_empty() && self.with_gate(ep, |g| g.try_tag_send(ep.0, data, tag))
    }

    /// Sends `data` as active message `id` without a user header on `ep`
    /// now, by the endpoint's own path, as [`SendPaths::try_tag_send_short`]
    /// does a tag message; `reply`: the receiver gets a reply endpoint.
    /// For a message that may go eagerly (not one that must go by
    /// rendezvous).
    #[inline]
    pub fn try_am_send_short(&self, ep: Ep, id: u16, data: &[u8], reply: bool) -> bool {
        !data.is_empty() && self.with_gate(ep, |g| g.try_am_send(ep.0, id, data, reply))
    }

    /// How many messages went by the paths of the endpoints still open.
    pub fn sends(&self) -> u64 {
        gate_sends(&self.table)
    }

    /// `f` of `ep`'s path; `false` if it has none.
    #[inline]
    fn with_gate(&self, ep: Ep, f: impl FnOnce(&SendGate) -> bool) -> bool {
        match self.table.slot(ep.0.index() as usize) {
            Some(g) => f(g),
            None => false,
        }
    }
}
