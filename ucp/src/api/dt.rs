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
use crate::proto::eager_rx::RecvStarted;
use crate::proto::eager_tx::Started;
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::staged::{unpack_into, Staged};
use crate::request::{Op, Posted, ReqId};
use crate::worker::{AmMsg, AmParams};
use crate::{Ep, Error, Message, Result, Worker};

fn started(s: RecvStarted) -> Started {
    match s {
        RecvStarted::Done(info) => Started::Done(info),
        RecvStarted::InFlight(id) => Started::InFlight(id),
    }
}

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
            w.core.recv_start(rb, tag, mask, op).map(started)
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
            w.core.msg_recv_start(pid, rb, op).map(started)
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
            Some((pid, _)) => w.core.msg_recv_start(pid, rb, op).map(started),
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
        let (sb, staged) = match data.contiguous() {
            // SAFETY: only `Iov` makes a `Contig`, of memory that its
            // `IoBuf`s keep valid and unchanged while the value is owned
            // and not touched through `&mut`: the value moves into the
            // request below, before any progress, and stays there until
            // the request completes.
            Some(c) => (unsafe { SendBuf::new(c.ptr, c.len) }, None),
            None => {
                let n = data.packed_size();
                let mut bounce = vec![0u8; n];
                let wrote = data.pack(0, &mut bounce);
                if wrote != n {
                    return Err(Error::InvalidParam(format!(
                        "datatype packed {wrote} of its {n} bytes"
                    )));
                }
                // SAFETY: the bounce buffer moves into the request (its
                // heap memory does not move) and is dropped only at
                // completion or with the request.
                let sb = unsafe { SendBuf::new(bounce.as_ptr(), n) };
                let staged = Staged {
                    bounce,
                    unpack: None,
                };
                (sb, Some(staged))
            }
        };
        match start(self, sb, op)? {
            Started::Done(info) => Ok(Posted::Done(info, data)),
            Started::InFlight(id) => {
                if let Some(r) = self.core.reqs.get_mut(id) {
                    r.owner = Some(Box::new(data));
                    r.staged = staged.map(Box::new);
                }
                Ok(Posted::InFlight(ReqId(id)))
            }
        }
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
            return match start(self, rb, op)? {
                Started::Done(info) => Ok(Posted::Done(info, data)),
                Started::InFlight(id) => {
                    if let Some(r) = self.core.reqs.get_mut(id) {
                        r.owner = Some(Box::new(data));
                    }
                    Ok(Posted::InFlight(ReqId(id)))
                }
            };
        }
        let cap = data.packed_size();
        let mut bounce = vec![0u8; cap];
        // SAFETY: the bounce buffer is the request's alone: it moves into
        // the request below (its heap memory does not move) and is
        // dropped only at completion, after the unpack, or with the
        // request (leaked instead if a peer may still write into it).
        let rb = unsafe { RecvBuf::new(bounce.as_mut_ptr(), cap) };
        match start(self, rb, op)? {
            Started::Done(info) => {
                data.unpack(0, &bounce[..info.length.min(cap)])?;
                Ok(Posted::Done(info, data))
            }
            Started::InFlight(id) => {
                if let Some(r) = self.core.reqs.get_mut(id) {
                    r.owner = Some(Box::new(data));
                    r.staged = Some(Box::new(Staged {
                        bounce,
                        unpack: Some(unpack_into::<D>),
                    }));
                }
                Ok(Posted::InFlight(ReqId(id)))
            }
        }
    }
}
