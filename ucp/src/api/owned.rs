//! The owned tier: buffers move into the worker and come back.
#![allow(unsafe_code)]

use crate::proto::eager_tx::Started;
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::{Info, IoBuf, IoBufMut, Op, Posted, ReqId};
use crate::{Ep, Error, Result, Worker};

/// A failed owned operation: the error and the buffer.
#[derive(Debug)]
pub struct OpError<B> {
    /// What went wrong.
    pub error: Error,
    /// The caller's buffer, back.
    pub buf: B,
}

impl Worker {
    /// Sends `buf` with `tag`. The worker keeps the buffer until the send
    /// completes; get it back with [`Worker::take`].
    pub fn tag_send<B: IoBuf>(&mut self, ep: Ep, buf: B, tag: u64, op: Op) -> Result<Posted<B>> {
        // SAFETY: the buffer moves into the request below (before any
        // progress can run) and stays there until completion; IoBuf
        // promises its memory does not move with it.
        let sb = unsafe { SendBuf::new(buf.as_ptr(), buf.len()) };
        let s = self.core.send_start(&mut self.ifaces, ep.0, sb, tag, op)?;
        Ok(self.hold(s, buf, None))
    }

    /// Receives a message matching `(tag, mask)` into `buf`; the worker
    /// keeps the buffer until then. Get it back with [`Worker::take`].
    pub fn tag_recv<B: IoBufMut>(
        &mut self,
        mut buf: B,
        tag: u64,
        mask: u64,
        op: Op,
    ) -> Result<Posted<B>> {
        // SAFETY: as in tag_send; the buffer is exclusively the request's.
        let rb = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
        let s = Started::from(self.core.recv_start(rb, tag, mask, op)?);
        Ok(self.hold(s, buf, None))
    }

    /// The result and buffer of a completed owned request, releasing it.
    /// `None` while it is in flight, if `id` is unknown, or if `B` is not
    /// the type it was posted with.
    pub fn take<B: 'static>(&mut self, id: ReqId) -> Option<Result<(Info, B), OpError<B>>> {
        // Taken in its slot: moving the whole request out to drop it
        // would copy it on every owned completion.
        self.core.reqs.take_map_forget(
            id.0,
            |r| {
                if r.result.is_none() || !r.owner.as_ref().is_some_and(|o| o.is::<B>()) {
                    return None;
                }
                let buf = r.owner.take()?.take::<B>().ok()?;
                match r.result.take()? {
                    Ok(info) => Some(Ok((info, buf))),
                    Err(error) => Some(Err(OpError { error, buf })),
                }
            },
            crate::request::Request::owns_nothing,
        )
    }

    /// [`Worker::take`] once request `id` is no longer in flight; before
    /// that only a look at its slot, which is most looks of a spinning
    /// future.
    #[inline]
    pub(crate) fn take_if_done<B: 'static>(
        &mut self,
        id: ReqId,
    ) -> Option<Result<(Info, B), OpError<B>>> {
        if self.request_is_active(id) {
            return None;
        }
        self.take::<B>(id)
    }
}
