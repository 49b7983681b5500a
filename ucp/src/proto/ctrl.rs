//! The worker's own protocol messages (wireup, acknowledgements, answers
//! to rendezvous and one-sided operations): queued on their endpoint
//! behind earlier sends, so that they keep its order, and sent with
//! `am_bcopy`. Nobody waits for them: a message that cannot go is
//! dropped (its endpoint failed, and the endpoint's failure is what the
//! application learns).

use super::core::Core;
use super::eager_tx::Step;
use super::lanes::Lanes;
use crate::request::{CtrlState, Kind, Op, Request};
use crate::ucs::slab::SlabId;
use crate::uct::{AmId, Posted};

impl Core {
    /// Queues a protocol message on endpoint `ep`, behind earlier sends.
    pub(crate) fn send_ctrl(&mut self, tx: &mut dyn Lanes, ep: SlabId, am_id: AmId, data: Vec<u8>) {
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        if st.failed.is_some() {
            return;
        }
        let mut req = Request::new(
            Kind::Ctrl(CtrlState {
                ep,
                am_id,
                data,
                report_len: 0,
            }),
            Op::new(),
        );
        req.detached = true;
        let id = self.reqs.insert(req);
        let idle = self.eps.get(ep).is_some_and(|s| s.queue.is_empty());
        if let Some(st) = self.eps.get_mut(ep) {
            st.queue.push_back(id);
        }
        if idle {
            self.resume_ep(tx, ep);
        }
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
        let length = c.report_len;
        match r {
            Ok((Posted::NoResource, _)) => Step::Blocked,
            Ok(_) if !self.reqs.get(id).is_some_and(|r| r.detached) => {
                // The application's request: its message has left.
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
