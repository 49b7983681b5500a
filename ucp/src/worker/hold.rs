//! The owned tier's hand-over: a buffer or datatype value moves into its
//! request until [`Worker::take`] gives it back.

use super::Worker;
use crate::proto::eager_tx::Started;
use crate::request::staged::Staged;
use crate::request::{Posted, ReqId};

impl Worker {
    /// The outcome of a started owned-tier operation: `data` (a buffer or
    /// a datatype value) back if it is done, else moved into the request,
    /// with its bounce buffer if any, until [`Worker::take`].
    #[inline]
    pub(crate) fn hold<D: Send + 'static>(
        &mut self,
        s: Started,
        data: D,
        staged: Option<Staged>,
    ) -> Posted<D> {
        match s {
            Started::Done(info) => {
                if let Some(st) = staged {
                    self.core.give_spare(st.bounce);
                }
                Posted::Done(info, data)
            }
            Started::InFlight(id) => {
                if let Some(r) = self.core.reqs.get_mut(id) {
                    r.owner = Some(crate::request::Owner::new(data));
                    r.staged = staged.map(Box::new);
                }
                Posted::InFlight(ReqId(id))
            }
        }
    }
}

impl Worker {
    /// [`Worker::hold`] for operations posted through a raw entry point:
    /// `data` back if `p` is done, else moved into its request.
    pub(crate) fn hold_posted<D: Send + 'static>(&mut self, p: Posted<()>, data: D) -> Posted<D> {
        match p {
            Posted::Done(info, ()) => Posted::Done(info, data),
            Posted::InFlight(id) => self.hold(Started::InFlight(id.0), data, None),
        }
    }
}
