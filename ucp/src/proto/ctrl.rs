//! The worker's own protocol messages (wireup, acknowledgements, answers
//! to rendezvous and one-sided operations): queued on their endpoint
//! behind earlier sends, so that they keep its order, and sent with
//! `am_bcopy`. Nobody waits for them: a message that cannot go is
//! dropped (its endpoint failed, and the endpoint's failure is what the
//! application learns).

use super::core::Core;
use super::eager_tx::Step;
use super::lanes::Lanes;
use super::wire::AM_WIREUP;
use crate::request::{CtrlState, Kind, Op, Request};
use crate::ucs::slab::SlabId;
use crate::uct::{AmId, Posted};

impl Core {
    /// Queues a protocol message on endpoint `ep`, behind earlier sends.
    pub(crate) fn send_ctrl(&mut self, tx: &mut dyn Lanes, ep: SlabId, am_id: AmId, data: Vec<u8>) {
        if let Some(id) = self.ctrl_request(ep, am_id, data) {
            self.enqueue(tx, ep, id);
        }
    }

    /// Sends the wireup of endpoint `ep` (and, from a worker without a
    /// limit on unexpected data, its credit grant) if they have not left
    /// yet ([`Core::announce`]): an operation is about to use it, and they
    /// go ahead of it.
    pub(crate) fn wake_ep(&mut self, tx: &mut dyn Lanes, ep: SlabId) {
        // A send past the fast path: what the endpoint's gate sent goes
        // first (`send_gate.rs`).
        self.gate_close(ep);
        match self.eps.get_mut(ep) {
            Some(st) if st.announce_due => st.announce_due = false,
            _ => return,
        }
        let me = self.address.clone();
        let first = [Some((AM_WIREUP, me)), self.credit_announced(ep)];
        for (am_id, data) in first.into_iter().flatten().rev() {
            if let Some(id) = self.ctrl_request(ep, am_id, data) {
                if let Some(st) = self.eps.get_mut(ep) {
                    st.queue.push_front(id);
                }
            }
        }
        self.resume_ep(tx, ep);
    }

    /// Forgets the wireup of endpoint `ep` if it has not left (the
    /// endpoint closes before anything used it, so its peer never needs
    /// to hear of it); whether it had not.
    pub(crate) fn drop_deferred(&mut self, ep: SlabId) -> bool {
        match self.eps.get_mut(ep) {
            Some(st) if st.announce_due => {
                st.announce_due = false;
                true
            }
            _ => false,
        }
    }

    /// A detached protocol request for `am_id` with `data` on `ep`, unless
    /// the endpoint is gone or failed.
    fn ctrl_request(&mut self, ep: SlabId, am_id: AmId, data: Vec<u8>) -> Option<SlabId> {
        if self.eps.get(ep)?.failed.is_some() {
            return None;
        }
        let mut req = Request::new(
            Kind::Ctrl(CtrlState {
                ep,
                am_id,
                data,
                report_len: 0,
                app: false,
            }),
            Op::new(),
        );
        req.detached = true;
        Some(self.reqs.insert(req))
    }

    /// Sends a queued protocol message.
    pub(crate) fn push_ctrl(&mut self, tx: &mut dyn Lanes, id: SlabId) -> Step {
        let Some(Request {
            kind: Kind::Ctrl(c),
            ..
        }) = self.reqs.get(id)
        else {
            return Step::Failed;
        };
        let Some(st) = self.eps.get(c.ep) else {
            self.reqs.remove(id);
            return Step::Failed;
        };
        let r = tx.am_bcopy(st.iface, st.uct_ep, c.am_id, &[&c.data]);
        let (length, app) = (c.report_len, c.app);
        match r {
            Ok((Posted::NoResource, _)) => Step::Blocked,
            Ok(_) if app => {
                // The application's request, released or not: its
                // message has left (a released one is counted).
                self.complete(id, Ok(crate::request::Info { tag: 0, length }));
                Step::Handed
            }
            Ok(_) => {
                self.reqs.remove(id);
                Step::Handed
            }
            Err(e) => {
                tracing::debug!("protocol message failed: {e}");
                self.fail_send(id, crate::Error::endpoint(e));
                Step::Failed
            }
        }
    }
}
