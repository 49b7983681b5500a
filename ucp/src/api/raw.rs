//! The raw tier: `unsafe` posts with a "valid until completion" contract.
#![allow(unsafe_code)]

use crate::proto::eager_rx::RecvStarted;
use crate::proto::eager_tx::Started;
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::{Op, Posted, ReqId};
use crate::{Ep, Result, Worker};

impl Worker {
    /// Posts a tag send of `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// Unless this returns `Posted::Done` or an error, the `len` bytes at
    /// `ptr` must stay readable and unmodified until the request's
    /// completion has been observed (test, wait, completion queue or
    /// callback) or the worker is dropped.
    #[inline]
    pub unsafe fn tag_send_raw(
        &mut self,
        ep: Ep,
        ptr: *const u8,
        len: usize,
        tag: u64,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        let buf = unsafe { SendBuf::new(ptr, len) };
        Ok(
            match self.core.send_start(&mut self.ifaces, ep.0, buf, tag, op)? {
                Started::Done(info) => Posted::Done(info, ()),
                Started::InFlight(id) => Posted::InFlight(ReqId(id)),
            },
        )
    }

    /// Posts a tag receive of up to `len` bytes into `ptr`, matching tags
    /// `t` with `(t ^ tag) & mask == 0`.
    ///
    /// # Safety
    ///
    /// Unless this returns `Posted::Done` or an error, the `len` bytes at
    /// `ptr` must stay writable, and untouched by anyone else, until the
    /// request's completion has been observed or the worker is dropped.
    /// (A receive whose sender writes into it directly, a rendezvous by put
    /// over `cma`, is not over when the worker is dropped: the drop waits
    /// for it, or aborts the process; see [`Worker`]'s `Drop`.)
    #[inline(always)]
    pub unsafe fn tag_recv_raw(
        &mut self,
        ptr: *mut u8,
        len: usize,
        tag: u64,
        mask: u64,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        let buf = unsafe { RecvBuf::new(ptr, len) };
        Ok(match self.core.recv_start(buf, tag, mask, op)? {
            RecvStarted::Done(info) => Posted::Done(info, ()),
            RecvStarted::InFlight(id) => Posted::InFlight(ReqId(id)),
        })
    }
}
