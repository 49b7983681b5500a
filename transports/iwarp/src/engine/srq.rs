//! Shared receive queues: receives posted once for many queue pairs.
//!
//! A queue pair attached to one takes a receive from it when the first
//! segment of an incoming SEND arrives (verbs promise no order; this one
//! takes the receive posted last, so that a small working set of buffers
//! is reused and memory behind receives posted but never needed is never
//! touched). The receive then belongs to that queue pair until the SEND's
//! last segment completes it; a queue pair that fails flushes it, and one
//! destroyed gives it back.

use rucx_rdma::{PdId, RecvWr, Sge, SrqId, SrqInit};
use uct::ucs::{Error, Result};

use super::qp::RecvReq;
use super::{bad, Context};
use crate::shared::{MAX_SRQ_SGE, MAX_SRQ_WR};

/// A posted receive of one scatter entry (the most a shared receive queue
/// takes), kept small: a pool may post many.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SrqEntry {
    pub(crate) wr_id: u64,
    /// `None` for a receive without a scatter entry.
    pub(crate) sge: Option<Sge>,
}

impl SrqEntry {
    fn to_req(self) -> RecvReq {
        let mut r = RecvReq {
            wr_id: self.wr_id,
            sges: Default::default(),
            nsge: 0,
            len: 0,
        };
        if let Some(s) = self.sge {
            r.sges[0] = s;
            r.nsge = 1;
            r.len = u64::from(s.len);
        }
        r
    }
}

/// A shared receive queue.
#[derive(Debug)]
pub(crate) struct Srq {
    pub(crate) init: SrqInit,
    /// Posted receives, the next one taken last.
    pub(crate) posted: Vec<SrqEntry>,
    /// Queue pairs attached.
    pub(crate) users: u32,
}

impl Srq {
    pub(crate) fn new(init: SrqInit) -> Srq {
        Srq {
            init,
            posted: Vec::new(),
            users: 0,
        }
    }

    pub(crate) fn pd(&self) -> PdId {
        self.init.pd
    }

    /// The receive the next SEND takes.
    pub(crate) fn take(&mut self) -> Option<RecvReq> {
        self.posted.pop().map(SrqEntry::to_req)
    }

    /// Puts back a receive a queue pair took and did not fill.
    pub(crate) fn give_back(&mut self, r: RecvReq) {
        let sge = (r.nsge > 0).then_some(r.sges[0]);
        self.posted.push(SrqEntry {
            wr_id: r.wr_id,
            sge,
        });
    }
}

/// How many more entries a shared receive queue holding `len` makes room
/// for when full: a quarter more, at least 64.
fn wr_batch(len: usize) -> usize {
    (len / 4).max(64)
}

impl Context {
    /// `Verbs::create_srq`.
    pub(super) fn srq_create(&mut self, init: &SrqInit) -> Result<SrqId> {
        if init.max_wr == 0 || init.max_wr > MAX_SRQ_WR || init.max_sge > MAX_SRQ_SGE {
            return Err(bad("create_srq: limits beyond the device's"));
        }
        if !self.shared.tables.write().pd_use(init.pd, true) {
            return Err(bad("create_srq: unknown protection domain"));
        }
        let id = self
            .srqs
            .insert_with(|_| Srq::new(*init))
            .ok_or_else(|| Error::NoMemory("iwarp: too many shared receive queues".into()))?;
        Ok(SrqId(id))
    }

    /// `Verbs::destroy_srq`.
    pub(super) fn srq_destroy(&mut self, srq: SrqId) -> Result<()> {
        if self.srqs.get(srq.0).is_some_and(|s| s.users > 0) {
            return Err(bad("shared receive queue in use"));
        }
        let s = self
            .srqs
            .remove(srq.0)
            .ok_or_else(|| bad("unknown shared receive queue"))?;
        self.shared.tables.write().pd_use(s.pd(), false);
        Ok(())
    }

    /// `Verbs::post_srq_recv`.
    ///
    /// # Safety
    ///
    /// As `Verbs::post_srq_recv`: the engine writes the receive's memory
    /// when a SEND takes it.
    pub(super) unsafe fn srq_post(&mut self, srq: SrqId, wr: &RecvWr<'_>) -> Result<()> {
        let s = self
            .srqs
            .get(srq.0)
            .ok_or_else(|| bad("unknown shared receive queue"))?;
        if wr.sges.len() > s.init.max_sge.max(1) as usize || wr.sges.len() > MAX_SRQ_SGE as usize {
            return Err(bad("post_srq_recv: too many scatter entries"));
        }
        if s.posted.len() >= s.init.max_wr as usize {
            return Err(Error::NoMemory("iwarp: shared receive queue full".into()));
        }
        let pd = s.pd();
        let ok = {
            let tables = self.shared.tables.read();
            wr.sges.iter().all(|s| tables.check_local(s, pd, true))
        };
        if !ok {
            // No queue pair to name in a completion: refused at once.
            return Err(bad(
                "post_srq_recv: a scatter entry is not registered for writing",
            ));
        }
        let r = SrqEntry {
            wr_id: wr.wr_id,
            sge: wr.sges.first().copied(),
        };
        let Some(s) = self.srqs.get_mut(srq.0) else {
            return Err(bad("unknown shared receive queue"));
        };
        if s.posted.capacity() == s.posted.len() {
            // Grown in steps the caller's posting pattern sets, not
            // doubled: a queue posted to chunk by chunk holds no spare.
            s.posted.reserve_exact(wr_batch(s.posted.len()));
        }
        s.posted.push(r);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(wr_id: u64) -> SrqEntry {
        SrqEntry {
            wr_id,
            sge: Some(Sge {
                addr: 4096 * wr_id,
                len: 64,
                lkey: 1,
            }),
        }
    }

    #[test]
    fn takes_the_last_posted_and_gets_back_what_was_not_filled() {
        let mut s = Srq::new(SrqInit {
            pd: PdId(1),
            max_wr: 4,
            max_sge: 1,
        });
        assert!(s.take().is_none());
        s.posted.push(req(1));
        s.posted.push(req(2));
        let r = s.take().unwrap();
        assert_eq!((r.wr_id, r.nsge, r.len, r.sges[0].addr), (2, 1, 64, 8192));
        s.give_back(r);
        assert_eq!(s.take().unwrap().wr_id, 2);
        assert_eq!(s.take().unwrap().wr_id, 1);
        assert!(s.take().is_none());
    }
}
