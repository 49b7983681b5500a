//! Active messages, sending and receiving rendezvous data: the copying,
//! owned and raw sends, and `am_recv_data` (the protocols are
//! `proto/am.rs` and `proto/am_rndv.rs`).
#![allow(unsafe_code)]

use super::am::{AmMsg, AmParams};
use super::Worker;
use crate::proto::eager_rx::RecvStarted;
use crate::proto::eager_tx::Started;
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::{Info, IoBuf, IoBufMut, Op, Posted, ReqId};
use crate::{Ep, Result};
use std::sync::atomic::Ordering;

fn posted(s: Started) -> Posted<()> {
    match s {
        Started::Done(info) => Posted::Done(info, ()),
        Started::InFlight(id) => Posted::InFlight(ReqId(id)),
    }
}

fn recv_posted(s: RecvStarted) -> Posted<()> {
    match s {
        RecvStarted::Done(info) => Posted::Done(info, ()),
        RecvStarted::InFlight(id) => Posted::InFlight(ReqId(id)),
    }
}

impl Worker {
    /// Sends active message `id` with `header` and `data` on `ep`. The
    /// data is copied: `data` may be reused once this returns. Done at
    /// once, or in flight (test, wait or release the id) while the
    /// endpoint's earlier sends hold it up; waiting bounds what a fast
    /// sender queues. Header and data together are at most 256 MiB; a
    /// rendezvous message's header must fit one copy send of the lane.
    pub fn am_send(
        &mut self,
        ep: Ep,
        id: u16,
        header: &[u8],
        data: &[u8],
        params: AmParams,
    ) -> Result<Posted<()>> {
        if self.core.am_is_rndv(ep.0, data.len(), params.proto) {
            // The data must outlive the call: a copy the request owns.
            return match self.am_send_owned(ep, id, header, data.to_vec(), params, Op::new())? {
                Posted::Done(info, _) => Ok(Posted::Done(info, ())),
                Posted::InFlight(r) => Ok(Posted::InFlight(r)),
            };
        }
        // SAFETY: an eager message is copied before this returns.
        let sb = unsafe { SendBuf::new(data.as_ptr(), data.len()) };
        let s = self.am_post(ep, (id, header, sb), params, Op::new())?;
        Ok(posted(s))
    }

    /// Sends active message `id` with `header` and the data in `buf`,
    /// which the worker keeps until the send completes (a rendezvous
    /// reads it in place); get it back with [`Worker::take`].
    pub fn am_send_owned<B: IoBuf>(
        &mut self,
        ep: Ep,
        id: u16,
        header: &[u8],
        buf: B,
        params: AmParams,
        op: Op,
    ) -> Result<Posted<B>> {
        // SAFETY: the buffer moves into the request below (before any
        // progress can run) and stays there until completion; IoBuf
        // promises its memory does not move with it.
        let sb = unsafe { SendBuf::new(buf.as_ptr(), buf.len()) };
        let s = self.am_post(ep, (id, header, sb), params, op)?;
        Ok(self.hold(s, buf, None))
    }

    /// Posts active message `id` with `header` and the `len` data bytes
    /// at `ptr`.
    ///
    /// # Safety
    ///
    /// As [`Worker::tag_send_raw`]: unless this returns `Posted::Done` or
    /// an error, the bytes must stay readable and unmodified until the
    /// request's completion has been observed or the worker is dropped.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn am_send_raw(
        &mut self,
        ep: Ep,
        id: u16,
        header: &[u8],
        (ptr, len): (*const u8, usize),
        params: AmParams,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        let sb = unsafe { SendBuf::new(ptr, len) };
        let s = self.am_post(ep, (id, header, sb), params, op)?;
        Ok(posted(s))
    }

    fn am_post(
        &mut self,
        ep: Ep,
        msg: (u16, &[u8], SendBuf),
        params: AmParams,
        op: Op,
    ) -> Result<Started> {
        let how = (params.reply, params.proto);
        self.core.am_start(&mut self.ifaces, ep.0, msg, how, op)
    }

    /// Receives the data of `msg` into `buf` (`ucp_am_recv_data_nbx`): a
    /// rendezvous message's data moves from the sender now; an eager
    /// message's is copied at once. The worker keeps the buffer until
    /// then; get it back with [`Worker::take`]. A buffer shorter than the
    /// data completes with [`Error::Truncated`](crate::Error::Truncated).
    pub fn am_recv_data<B: IoBufMut>(
        &mut self,
        mut msg: AmMsg,
        mut buf: B,
        op: Op,
    ) -> Result<Posted<B>> {
        // SAFETY: as in am_send_owned; the buffer is exclusively the
        // request's until it is taken back.
        let rb = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
        let Some((pid, _)) = msg.take_rndv() else {
            return Ok(Posted::Done(copy_eager(&msg, rb)?, buf));
        };
        let s = Started::from(self.core.msg_recv_start(pid, rb, op)?);
        Ok(self.hold(s, buf, None))
    }

    /// Receives the data of `msg` into `buf` and waits for it.
    pub fn am_recv_data_blocking(&mut self, msg: AmMsg, buf: &mut [u8]) -> Result<Info> {
        // SAFETY: `buf` is exclusively borrowed for this whole call, which
        // returns only once the request completed.
        match unsafe { self.am_recv_data_raw(msg, buf.as_mut_ptr(), buf.len(), Op::new())? } {
            Posted::Done(info, ()) => Ok(info),
            Posted::InFlight(id) => self.wait_borrowed(id),
        }
    }

    /// Posts the receive of `msg`'s data into the `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// As [`Worker::tag_recv_raw`].
    pub unsafe fn am_recv_data_raw(
        &mut self,
        mut msg: AmMsg,
        ptr: *mut u8,
        len: usize,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        let rb = unsafe { RecvBuf::new(ptr, len) };
        let Some((pid, _)) = msg.take_rndv() else {
            return Ok(Posted::Done(copy_eager(&msg, rb)?, ()));
        };
        Ok(recv_posted(self.core.msg_recv_start(pid, rb, op)?))
    }

    /// Receives the data of rendezvous messages dropped unreceived into
    /// buffers of the worker's, discarded when done.
    pub(crate) fn discard_dropped_am(&mut self) {
        // A load first: the swap's read-modify-write costs on every
        // round of handlers, and almost always nothing was dropped.
        if !self.am_dropped.any.load(Ordering::Relaxed)
            || !self.am_dropped.any.swap(false, Ordering::Acquire)
        {
            return;
        }
        let pids = match self.am_dropped.list.lock() {
            Ok(mut d) => std::mem::take(&mut *d),
            Err(_) => return,
        };
        for pid in pids {
            tracing::debug!("rendezvous active message dropped unreceived: discarding its data");
            let Some(len) = self.core.probed_len(pid) else {
                continue;
            };
            let mut sink = vec![0u8; len].into_boxed_slice();
            // SAFETY: the buffer moves into the request (its owner) below,
            // before any progress, and its heap memory does not move.
            let rb = unsafe { RecvBuf::new(sink.as_mut_ptr(), sink.len()) };
            if let Ok(RecvStarted::InFlight(id)) = self.core.msg_recv_start(pid, rb, Op::new()) {
                if let Some(r) = self.core.reqs.get_mut(id) {
                    r.owner = Some(crate::request::Owner::new(sink));
                    r.detached = true;
                }
            }
        }
    }
}

/// Copies an eager message's data into `rb`.
pub(crate) fn copy_eager(msg: &AmMsg, rb: RecvBuf) -> Result<Info> {
    let data = msg.data();
    let n = rb.write(0, data);
    if n < data.len() {
        return Err(crate::Error::Truncated {
            length: data.len(),
            capacity: rb.capacity(),
        });
    }
    Ok(Info { tag: 0, length: n })
}
