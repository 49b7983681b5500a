//! The blocking tier: post and wait in one call.
#![allow(unsafe_code)]

use crate::request::{Info, Op, Posted, ReqId};
use crate::{Ep, Result, Worker};

/// Makes sure a request posted on borrowed memory never outlives the
/// borrow, even if progress panics: cancel it, or abort the process.
struct InFlightGuard<'a> {
    worker: &'a mut Worker,
    id: ReqId,
}

impl InFlightGuard<'_> {
    fn wait(self) -> Result<Info> {
        let r = self.worker.request_wait(self.id);
        std::mem::forget(self);
        r
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        // Only reached when request_wait unwound.
        if self.worker.request_is_active(self.id) && !self.worker.request_cancel(self.id) {
            eprintln!("rucx: panic while a transfer used a borrowed buffer; aborting");
            std::process::abort();
        }
    }
}

impl Worker {
    /// Waits for request `id`, which uses borrowed memory: cancels it or
    /// aborts if waiting unwinds.
    pub(crate) fn wait_borrowed(&mut self, id: ReqId) -> Result<Info> {
        InFlightGuard { worker: self, id }.wait()
    }

    /// Sends `buf` with `tag` and waits until the buffer may be reused.
    pub fn tag_send_blocking(&mut self, ep: Ep, buf: &[u8], tag: u64) -> Result<Info> {
        self.send_blocking(ep, buf, tag, Op::new())
    }

    /// Sends `buf` with `tag` and waits until a receive on the other side
    /// has matched it (`MPI_Ssend`).
    pub fn tag_send_sync_blocking(&mut self, ep: Ep, buf: &[u8], tag: u64) -> Result<Info> {
        self.send_blocking(ep, buf, tag, Op::new().sync())
    }

    fn send_blocking(&mut self, ep: Ep, buf: &[u8], tag: u64, op: Op) -> Result<Info> {
        // SAFETY: `buf` stays borrowed for this whole call, and the call
        // returns only after the request completed (or aborts).
        match unsafe { self.tag_send_raw(ep, buf.as_ptr(), buf.len(), tag, op)? } {
            Posted::Done(info, ()) => Ok(info),
            Posted::InFlight(id) => InFlightGuard { worker: self, id }.wait(),
        }
    }

    /// Receives a message matching `(tag, mask)` into `buf` and waits for
    /// it. The result's `length` is the sender's length.
    pub fn tag_recv_blocking(&mut self, buf: &mut [u8], tag: u64, mask: u64) -> Result<Info> {
        // SAFETY: as for tag_send_blocking; `buf` is exclusively borrowed.
        match unsafe { self.tag_recv_raw(buf.as_mut_ptr(), buf.len(), tag, mask, Op::new())? } {
            Posted::Done(info, ()) => Ok(info),
            Posted::InFlight(id) => InFlightGuard { worker: self, id }.wait(),
        }
    }
}
