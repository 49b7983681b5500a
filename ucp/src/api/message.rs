//! Matched probes: take a message out of the unexpected queue, look at its
//! length, then receive it into a buffer of the right size (`MPI_Mprobe` /
//! `MPI_Mrecv`, UCX's `ucp_tag_probe_nb` with `remove` and
//! `ucp_tag_msg_recv_nb`).
#![allow(unsafe_code)]

use crate::proto::eager_rx::RecvStarted;
use crate::proto::eager_tx::Started;
use crate::request::buf::RecvBuf;
use crate::request::{Info, IoBufMut, Op, Posted, ReqId};
use crate::ucs::slab::SlabId;
use crate::{Result, Worker};

/// A message removed from the unexpected queue by
/// [`Worker::tag_probe_remove`]. No receive matches it any more: give it
/// to [`Worker::tag_msg_recv`] (or the blocking form) to get its data. A
/// rendezvous sender waits until it is received, so a message that is
/// never received holds its sender's request (and a slot of the worker).
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a removed message is lost unless it is received"]
pub struct Message {
    id: SlabId,
    info: Info,
}

impl Message {
    /// The sender's tag and the message's full length.
    pub fn info(&self) -> Info {
        self.info
    }

    /// The probed message's slot in the core.
    pub(crate) fn id(&self) -> SlabId {
        self.id
    }
}

impl Worker {
    /// Removes the oldest unexpected message matching `(tag, mask)`, if
    /// one has arrived (its first part, at least).
    pub fn tag_probe_remove(&mut self, tag: u64, mask: u64) -> Option<Message> {
        self.core
            .probe_remove(tag, mask)
            .map(|(id, info)| Message { id, info })
    }

    /// Receives `msg` into `buf`; the worker keeps the buffer until the
    /// receive completes (get it back with [`Worker::take`]). A buffer
    /// shorter than the message completes with [`Error::Truncated`]
    /// (its first bytes filled).
    ///
    /// [`Error::Truncated`]: crate::Error::Truncated
    pub fn tag_msg_recv<B: IoBufMut>(
        &mut self,
        msg: Message,
        mut buf: B,
        op: Op,
    ) -> Result<Posted<B>> {
        // SAFETY: as in tag_recv: the buffer moves into the request before
        // any progress runs and its memory does not move with it.
        let rb = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
        let s = Started::from(self.core.msg_recv_start(msg.id, rb, op)?);
        Ok(self.hold(s, buf, None))
    }

    /// Receives `msg` into `buf` and waits for it.
    pub fn tag_msg_recv_blocking(&mut self, msg: Message, buf: &mut [u8]) -> Result<Info> {
        // SAFETY: `buf` is exclusively borrowed for this whole call, which
        // returns only once the request completed (it waits below).
        let rb = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
        match self.core.msg_recv_start(msg.id, rb, Op::new())? {
            RecvStarted::Done(info) => Ok(info),
            RecvStarted::InFlight(id) => self.wait_borrowed(ReqId(id)),
        }
    }

    /// Receives `msg` into the `len` bytes at `ptr` (the raw tier's
    /// [`Worker::tag_msg_recv`], for the C API's `ucp_tag_msg_recv_nbx`).
    ///
    /// # Safety
    ///
    /// As for [`Worker::tag_recv_raw`]: unless this returns `Posted::Done`
    /// or an error, the `len` bytes at `ptr` must stay writable, and
    /// untouched by anyone else, until the request's completion has been
    /// observed or the worker is dropped.
    pub unsafe fn tag_msg_recv_raw(
        &mut self,
        msg: Message,
        ptr: *mut u8,
        len: usize,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        let rb = unsafe { RecvBuf::new(ptr, len) };
        Ok(match self.core.msg_recv_start(msg.id, rb, op)? {
            RecvStarted::Done(info) => Posted::Done(info, ()),
            RecvStarted::InFlight(id) => Posted::InFlight(ReqId(id)),
        })
    }
}
