//! Requests of a thread's posts on a [`SharedWorker`]: posted by the
//! thread itself, or handed to the thread that held the worker's lock
//! ([`SharedWorker::post_with`]) and parked here until they ran.

use super::{op_error, started};
use crate::perf::error::Result;
use crate::perf::worker::Started;
use rucx_ucp::{Handed, Posted, Queued, ReqId, SharedWorker, Worker};
use rucx_ucs::slab::{Slab, SlabId};

/// What the handed post of a raw operation gives.
type Post = rucx_ucp::Result<Posted<()>>;

/// A thread's request handle.
#[derive(Debug, Clone, Copy)]
pub enum ThreadReq {
    /// Posted in flight.
    Id(ReqId),
    /// Parked: this entry of the thread's [`Parked`].
    Parked(SlabId),
}

#[derive(Debug)]
enum Entry {
    /// Handed, maybe not run yet.
    Queued(Queued<Post>),
    /// Run, in flight.
    Posted(ReqId),
}

/// The parked requests of one thread.
#[derive(Debug, Default)]
pub(super) struct Parked {
    entries: Slab<Entry>,
    /// Entries not run yet: one that completes when it runs does not move
    /// the worker's count of completed requests.
    queued: usize,
}

impl Parked {
    /// Posts `f` on `w` (now, or handed to the lock's holder); `what`
    /// names the operation in errors.
    pub(super) fn post(
        &mut self,
        w: &SharedWorker,
        what: &'static str,
        f: impl FnOnce(&mut Worker) -> Post + Send + 'static,
    ) -> Result<Started<ThreadReq>> {
        match w.post_with(f) {
            Handed::Done(r) => Ok(match started(r.map_err(|e| op_error(what, e))?) {
                Started::Done(n) => Started::Done(n),
                Started::InFlight(id) => Started::InFlight(ThreadReq::Id(id)),
            }),
            Handed::Queued(q) => {
                self.queued += 1;
                Ok(Started::InFlight(self.park(Entry::Queued(q))))
            }
        }
    }

    /// Whether every request must be tested, whatever the worker's count
    /// of completed requests says: some are not run yet.
    pub(super) fn look_all(&self) -> bool {
        self.queued > 0
    }

    fn park(&mut self, e: Entry) -> ThreadReq {
        ThreadReq::Parked(self.entries.insert(e))
    }

    /// Whether `req` completed (its length or error): `None` while in
    /// flight (or not run yet).
    pub(super) fn test(
        &mut self,
        w: &SharedWorker,
        req: ThreadReq,
    ) -> Option<rucx_ucp::Result<usize>> {
        let i = match req {
            ThreadReq::Id(id) => return self.test_id(w, id),
            ThreadReq::Parked(i) => i,
        };
        let slot = self.entries.get_mut(i)?;
        let id = match slot {
            Entry::Posted(id) => *id,
            Entry::Queued(q) => {
                let r = q.take()?;
                self.queued -= 1;
                match r {
                    Ok(Posted::InFlight(id)) => {
                        *slot = Entry::Posted(id);
                        id
                    }
                    Ok(Posted::Done(info, ())) => return Some(self.end(i, Ok(info.length))),
                    Err(e) => return Some(self.end(i, Err(e))),
                }
            }
        };
        let r = self.test_id(w, id)?;
        Some(self.end(i, r))
    }

    fn test_id(&self, w: &SharedWorker, id: ReqId) -> Option<rucx_ucp::Result<usize>> {
        w.with(|w| w.request_test(id))
            .map(|r| r.map(|info| info.length))
    }

    /// Frees entry `i`, passing `r` on.
    fn end(&mut self, i: SlabId, r: rucx_ucp::Result<usize>) -> rucx_ucp::Result<usize> {
        self.entries.remove(i);
        r
    }
}
