//! Flush and fence as requests to poll (`ucp_worker_flush_nbx`,
//! `ucp_ep_flush_nbx`, and a fence that waits without blocking), and the
//! blocking calls on top of them.

use super::Worker;
use crate::{Ep, Error, ReqId, Result};

/// A flush or fence in progress ([`Worker::flush_start`],
/// [`Worker::ep_flush_start`], [`Worker::fence_start`]); poll it with
/// [`Worker::flush_poll`] while progressing.
#[derive(Debug)]
#[must_use = "a flush in progress must be polled to its end"]
pub struct Flushing {
    /// Endpoints still to flush, last first.
    todo: Vec<Ep>,
    /// The endpoint being flushed and the transport's flush, once posted.
    cur: Option<(Ep, Option<ReqId>)>,
    /// A fence: wait for one-sided operations only.
    fence: bool,
    first_error: Option<Error>,
}

impl Worker {
    /// Starts flushing every endpoint: done once everything posted so
    /// far has left this process (as [`Worker::flush`]).
    pub fn flush_start(&mut self) -> Flushing {
        let mut todo: Vec<Ep> = self.core.eps.ids().into_iter().map(Ep).collect();
        todo.reverse();
        Flushing {
            todo,
            cur: None,
            fence: false,
            first_error: None,
        }
    }

    /// Starts flushing `ep` (as [`Worker::ep_flush`]).
    pub fn ep_flush_start(&mut self, ep: Ep) -> Result<Flushing> {
        if self.core.eps.get(ep.0).is_none() {
            return Err(Error::InvalidHandle);
        }
        Ok(Flushing {
            todo: vec![ep],
            cur: None,
            fence: false,
            first_error: None,
        })
    }

    /// Starts a fence: done once the one-sided operations posted so far
    /// completed (as [`Worker::fence`]).
    pub fn fence_start(&mut self) -> Flushing {
        Flushing {
            todo: Vec::new(),
            cur: None,
            fence: true,
            first_error: None,
        }
    }

    /// Moves `f` on (it does not progress the worker); `Some` once it is
    /// over, with the first error an endpoint's flush met.
    pub fn flush_poll(&mut self, f: &mut Flushing) -> Option<Result<()>> {
        if f.fence {
            return (!self.core.rma_waiting(None)).then_some(Ok(()));
        }
        loop {
            let (ep, posted) = match f.cur {
                Some(c) => c,
                None => match f.todo.pop() {
                    Some(ep) => (ep, None),
                    None => return Some(f.first_error.take().map_or(Ok(()), Err)),
                },
            };
            f.cur = Some((ep, posted));
            match self.ep_flush_step(ep, posted) {
                Ok(None) => return None,
                Ok(Some(id)) => {
                    f.cur = Some((ep, Some(id)));
                    return None;
                }
                Err(done) => {
                    f.cur = None;
                    if let (Err(e), None) = (done, &f.first_error) {
                        f.first_error = Some(e);
                    }
                }
            }
        }
    }

    /// One look at the flush of `ep`: `Ok(None)` to wait, `Ok(Some(id))`
    /// when the transport's flush `id` was just posted, `Err(result)` once
    /// this endpoint is done.
    fn ep_flush_step(
        &mut self,
        ep: Ep,
        posted: Option<ReqId>,
    ) -> std::result::Result<Option<ReqId>, Result<()>> {
        if let Some(id) = posted {
            return match self.request_test(id) {
                None => Ok(None),
                Some(r) => Err(r.map(|_| ())),
            };
        }
        let st = self.core.eps.get(ep.0).ok_or(Err(Error::InvalidHandle))?;
        if let Some(e) = &st.failed {
            // The peer closed its end after taking what it was sent: with
            // nothing left here (queued sends failed with the close), the
            // flush of a quiet endpoint succeeds, as UCX's does.
            if st.closed_by_peer && !self.core.ep_busy(ep.0) {
                return Err(Ok(()));
            }
            return Err(Err(Error::clone(e)));
        }
        if self.core.ep_busy(ep.0) {
            return Ok(None);
        }
        let lane = (st.iface, st.uct_ep);
        match self.flush_lane(lane) {
            Ok(Some(id)) => Ok(Some(id)),
            Ok(None) => Err(Ok(())),
            Err(None) => Ok(None),
            Err(Some(e)) => Err(Err(e)),
        }
    }

    /// Runs `f` to its end, progressing.
    pub(crate) fn flush_wait(&mut self, mut f: Flushing) -> Result<()> {
        loop {
            if let Some(r) = self.flush_poll(&mut f) {
                return r;
            }
            self.progress();
        }
    }
}
