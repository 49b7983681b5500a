//! Operations on datatypes that need not be contiguous (`crate::dt`), in
//! the owned tier: the datatype value moves into the request and comes
//! back with [`Worker::take`].
//!
//! A layout that is contiguous ([`Pack::contiguous`]) goes the way an
//! owned buffer does. Any other is packed into a bounce buffer that the
//! request holds (a send) or received into one that is unpacked into the
//! value when the request completes, before anyone learns of it (a
//! receive).
#![allow(unsafe_code)]

use crate::dt::{Pack, Unpack};
use crate::proto::eager_tx::Started;
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::staged::{unpack_into, Staged, UnpackFn};
use crate::request::{Op, Posted};
use crate::worker::{AmMsg, AmParams};
use crate::{Ep, Error, Message, Result, Worker};

impl Worker {
    /// Sends the message `data` packs with `tag` (`ucp_tag_send_nbx` with
    /// an iovec or generic datatype). As [`Worker::tag_send`] otherwise.
    pub fn tag_send_dt<D: Pack>(&mut self, ep: Ep, data: D, tag: u64, op: Op) -> Result<Posted<D>> {
        self.send_dt(data, op, |w, sb, op| {
            w.core.send_start(&mut w.ifaces, ep.0, sb, tag, op)
        })
    }

    /// Receives a message matching `(tag, mask)` into `data`'s layout. As
    /// [`Worker::tag_recv`] otherwise.
    pub fn tag_recv_dt<D: Unpack>(
        &mut self,
        data: D,
        tag: u64,
        mask: u64,
        op: Op,
    ) -> Result<Posted<D>> {
        self.recv_dt(data, op, |w, rb, op| {
            w.core.recv_start(rb, tag, mask, op).map(Started::from)
        })
    }

    /// Receives probed message `msg` into `data`'s layout.
    pub fn tag_msg_recv_dt<D: Unpack>(
        &mut self,
        msg: Message,
        data: D,
        op: Op,
    ) -> Result<Posted<D>> {
        let pid = msg.id();
        self.recv_dt(data, op, |w, rb, op| {
            w.core.msg_recv_start(pid, rb, op).map(Started::from)
        })
    }

    /// Sends what `data` packs on `ep`'s stream.
    pub fn stream_send_dt<D: Pack>(&mut self, ep: Ep, data: D, op: Op) -> Result<Posted<D>> {
        self.send_dt(data, op, |w, sb, op| {
            w.core.stream_start(&mut w.ifaces, ep.0, sb, op)
        })
    }

    /// Receives what has arrived on `ep`'s stream (at least one byte, at
    /// most `data.packed_size()`) into `data`'s layout.
    pub fn stream_recv_dt<D: Unpack>(&mut self, ep: Ep, data: D, op: Op) -> Result<Posted<D>> {
        self.recv_dt(data, op, |w, rb, op| {
            w.core.stream_recv_start(ep.0, rb, false, op)
        })
    }

    /// Receives exactly `data.packed_size()` bytes of `ep`'s stream into
    /// `data`'s layout.
    pub fn stream_recv_all_dt<D: Unpack>(&mut self, ep: Ep, data: D, op: Op) -> Result<Posted<D>> {
        self.recv_dt(data, op, |w, rb, op| {
            w.core.stream_recv_start(ep.0, rb, true, op)
        })
    }

    /// Sends active message `id` with `header` and the data `data` packs.
    /// As [`Worker::am_send_owned`] otherwise.
    pub fn am_send_dt<D: Pack>(
        &mut self,
        ep: Ep,
        id: u16,
        header: &[u8],
        data: D,
        params: AmParams,
        op: Op,
    ) -> Result<Posted<D>> {
        let how = (params.reply, params.proto);
        self.send_dt(data, op, |w, sb, op| {
            w.core
                .am_start(&mut w.ifaces, ep.0, (id, header, sb), how, op)
        })
    }

    /// Receives the data of `msg` into `data`'s layout. As
    /// [`Worker::am_recv_data`] otherwise.
    pub fn am_recv_data_dt<D: Unpack>(
        &mut self,
        mut msg: AmMsg,
        data: D,
        op: Op,
    ) -> Result<Posted<D>> {
        self.recv_dt(data, op, |w, rb, op| match msg.take_rndv() {
            None => Ok(Started::Done(crate::worker::copy_eager(&msg, rb)?)),
            Some((pid, _)) => w.core.msg_recv_start(pid, rb, op).map(Started::from),
        })
    }

    /// Starts a send of `data`: in place if contiguous, else from a
    /// bounce buffer it is packed into now.
    fn send_dt<D: Pack>(
        &mut self,
        mut data: D,
        op: Op,
        start: impl FnOnce(&mut Worker, SendBuf, Op) -> Result<Started>,
    ) -> Result<Posted<D>> {
        if let Some(c) = data.contiguous() {
            // SAFETY: only `Iov` makes a `Contig`, of memory that its
            // `IoBuf`s keep valid and unchanged while the value is owned
            // and not touched through `&mut`: the value moves into the
            // request (`hold`), before any progress, and stays there until
            // the request completes.
            let sb = unsafe { SendBuf::new(c.ptr, c.len) };
            let s = start(self, sb, op)?;
            return Ok(self.hold(s, data, None));
        }
        let n = data.packed_size();
        let mut bounce = self.bounce(n)?;
        let wrote = data.pack(0, &mut bounce);
        if wrote != n {
            self.core.give_spare(bounce);
            return Err(Error::InvalidParam(format!(
                "datatype packed {wrote} of its {n} bytes"
            )));
        }
        // SAFETY: the bounce buffer moves into the request (`hold`; its
        // heap memory does not move) and is dropped or reused only at
        // completion or with the request.
        let sb = unsafe { SendBuf::new(bounce.as_ptr(), n) }.bounce();
        let s = start(self, sb, op)?;
        Ok(self.hold(
            s,
            data,
            Some(Staged {
                bounce,
                unpack: None,
            }),
        ))
    }

    /// Starts a receive into `data`: in place if contiguous, else into a
    /// bounce buffer unpacked into it at completion.
    fn recv_dt<D: Unpack>(
        &mut self,
        mut data: D,
        op: Op,
        start: impl FnOnce(&mut Worker, RecvBuf, Op) -> Result<Started>,
    ) -> Result<Posted<D>> {
        if let Some(c) = data.contiguous_mut() {
            // SAFETY: as in `send_dt`, and the memory is the value's
            // alone: nobody touches the value while the request has it.
            let rb = unsafe { RecvBuf::new(c.ptr, c.len) };
            let s = start(self, rb, op)?;
            return Ok(self.hold(s, data, None));
        }
        let cap = data.packed_size();
        let mut bounce = self.bounce(cap)?;
        // SAFETY: the bounce buffer is the request's alone: it moves into
        // the request (`hold`; its heap memory does not move) and is
        // dropped or reused only at completion, after the unpack, or with
        // the request (leaked instead if a peer may still write into it).
        let rb = unsafe { RecvBuf::new(bounce.as_mut_ptr(), cap) }.bounce();
        let s = start(self, rb, op)?;
        if let Started::Done(info) = s {
            let unpacked = data.unpack(0, &bounce[..info.length.min(cap)]);
            self.core.give_spare(bounce);
            unpacked?;
            return Ok(Posted::Done(info, data));
        }
        let unpack = Some(unpack_into::<D> as UnpackFn);
        Ok(self.hold(s, data, Some(Staged { bounce, unpack })))
    }

    /// A zeroed bounce buffer of `n` bytes, from the core's spares; an
    /// error, not an abort, if it cannot be had.
    fn bounce(&mut self, n: usize) -> Result<Vec<u8>> {
        let mut v = self.core.take_spare(0);
        v.try_reserve_exact(n).map_err(|_| {
            Error::InvalidParam(format!("a {n}-byte bounce buffer cannot be allocated"))
        })?;
        v.resize(n, 0);
        Ok(v)
    }
}
