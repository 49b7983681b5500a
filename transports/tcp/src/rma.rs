//! Put emulation, both sides: posting a put and completing it on its
//! acknowledgement (initiator), answering a peer's put (target), and the
//! flushes that wait for acknowledgements.
//!
//! A put is a PUT frame sent like an `am_zcopy`, from the caller's memory
//! (`wire.rs` has the layout). It is `InFlight` until the target's PUT_ACK
//! arrives, which the target sends only once the data is in its memory:
//! a completed put is remotely complete. Puts on one connection are
//! acknowledged in order, so the outstanding ones are a queue
//! ([`Conn::puts`](crate::conn::Conn)) and an acknowledgement must match
//! its front.

use uct::ucs::{PeerMisbehaved, Result};
use uct::{AmSink, EpId, Iov, Posted, RemoteKey, Token};

use crate::config::MAX_IOV;
use crate::conn::{PutOut, Waiter};
use crate::iface::{no_ep, TcpIface};
use crate::tx::ZcOwner;
use crate::wire::{self, PutHdr, PutStatus, ACK_LEN, CTRL_PUT, CTRL_PUT_ACK, MAX_PUTS, PUT_HDR};

impl TcpIface {
    /// `put_zcopy` (see [`uct::PutOps::put_zcopy`]).
    ///
    /// # Safety
    ///
    /// As for `put_zcopy`: when this returns `InFlight`, the ranges of
    /// `iov` stay valid and unchanged until the put completes.
    pub(crate) unsafe fn post_put(
        &mut self,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted> {
        let total = uct::limits::check_iov("put_zcopy", iov, MAX_IOV, self.limits.max_put)?;
        let key = crate::mem::put_key(rkey)?;
        let ci = self.ep_conn(ep)?;
        let Some(c) = self.conns.get_mut(ci) else {
            return Err(no_ep(ep));
        };
        let Some(fd) = c.open_fd() else {
            return Ok(Posted::NoResource);
        };
        if c.pending_len() > 0 || c.puts_len() >= MAX_PUTS {
            return Ok(Posted::NoResource);
        }
        let seq = c.queues().map_or(0, |m| m.put_seq);
        let put = PutHdr {
            seq,
            addr: remote_addr,
            owner: key.owner,
            index: key.fields.index,
            generation: key.fields.generation,
            secret: key.fields.secret,
            // total <= max_put <= 64 MiB (config.rs).
            len: total as u32,
        }
        .encode();
        let hdr = wire::frame_hdr(CTRL_PUT, (PUT_HDR + total) as u32);
        // SAFETY: the caller of put_zcopy vouches for `iov` until the put
        // completes; the put completes (its acknowledgement, ep_destroy,
        // or the connection's failure) only after the backlog holding the
        // iov drained, was copied out (ep_destroy) or was dropped (failure).
        match unsafe { c.tx.post_zcopy(fd, &hdr, &put, iov, ZcOwner::Put(ep)) } {
            Ok(None) => Ok(Posted::NoResource),
            Ok(Some(_)) => {
                let m = c.more();
                m.put_seq += 1;
                m.puts.push_back(PutOut {
                    seq,
                    ep,
                    token: Some(token),
                });
                match c.sync_interest(&self.epoll) {
                    Ok(()) => {
                        self.touch(ci);
                        Ok(Posted::InFlight)
                    }
                    Err(e) => self.op_failed(ci, e),
                }
            }
            Err(e) => self.op_failed(ci, e),
        }
    }

    /// The peer acknowledged a put on connection `ci`: completes it, and
    /// the flushes and pending tokens that waited for it. False when the
    /// connection is gone (a wrong acknowledgement fails it).
    pub(crate) fn on_put_ack(
        &mut self,
        ci: u32,
        seq: u64,
        status: PutStatus,
        sink: &mut dyn AmSink,
        n: &mut usize,
    ) -> bool {
        let Some(c) = self.conns.get_mut(ci) else {
            return false;
        };
        let p = match c.queues().and_then(|m| m.puts.front()) {
            Some(p) if p.seq == seq => *p,
            front => {
                let detail = match front {
                    Some(p) => format!("seq {seq}, expected {}", p.seq),
                    None => format!("seq {seq} with no put outstanding"),
                };
                self.misbehaved(
                    ci,
                    PeerMisbehaved::Invalid {
                        what: "put acknowledgement",
                        detail,
                    },
                );
                return false;
            }
        };
        c.more().puts.pop_front();
        if let Some(t) = p.token {
            sink.completed(t, status.result(&c.peer()));
            *n += 1;
        }
        *n += self.settle(ci, sink);
        if let Some(c) = self.conns.get_mut(ci) {
            if c.puts_len() == MAX_PUTS - 1 && c.is_free() {
                while let Some((ep, t)) = c.pop_pending() {
                    sink.pending_ready(ep, t);
                    *n += 1;
                }
            }
        }
        true
    }

    /// The data of the peer's put `seq` is in (or was dropped): answers
    /// it. False when the connection is gone.
    pub(crate) fn on_put_done(&mut self, ci: u32, seq: u64, status: PutStatus) -> bool {
        let Some(c) = self.conns.get_mut(ci) else {
            return false;
        };
        if c.queues().map_or(0, |m| m.acks.len()) >= MAX_PUTS {
            self.misbehaved(
                ci,
                PeerMisbehaved::Invalid {
                    what: "put",
                    detail: format!("more than {MAX_PUTS} puts whose answers it does not read"),
                },
            );
            return false;
        }
        c.more().acks.push_back((seq, status));
        self.send_acks(ci)
    }

    /// Moves queued acknowledgements to the backlog while it takes them.
    /// False when the connection failed.
    pub(crate) fn send_acks(&mut self, ci: u32) -> bool {
        let Some(c) = self.conns.get_mut(ci) else {
            return false;
        };
        while let Some(&(seq, status)) = c.queues().and_then(|m| m.acks.front()) {
            let hdr = wire::frame_hdr(CTRL_PUT_ACK, ACK_LEN as u32);
            let body = wire::ack_body(seq, status);
            match c.tx.post_copy(c.open_fd(), &hdr, &[&body], ACK_LEN) {
                Ok(true) => {
                    c.more().acks.pop_front();
                }
                Ok(false) => break,
                Err(e) => {
                    let err = self.lost(ci, &e.to_string());
                    self.fail_conn(ci, err);
                    return false;
                }
            }
        }
        if let Err(e) = c.sync_interest(&self.epoll) {
            let err = self.lost(ci, &e.to_string());
            self.fail_conn(ci, err);
            return false;
        }
        self.touch(ci);
        true
    }

    /// Completes the flushes of connection `ci` that have nothing more to
    /// wait for.
    pub(crate) fn settle(&mut self, ci: u32, sink: &mut dyn AmSink) -> usize {
        let Some(c) = self.conns.get_mut(ci) else {
            return 0;
        };
        let mut n = 0;
        let mut i = 0;
        while let Some(&f) = c.queues().and_then(|m| m.waiters.get(i)) {
            if !c.flushed(f.puts_before) {
                i += 1;
                continue;
            }
            c.more().waiters.remove(i);
            match f.waiter {
                Waiter::Ep(_, t) => {
                    sink.completed(t, Ok(()));
                    n += 1;
                }
                Waiter::Global(g) => {
                    crate::lifecycle::global_done(&mut self.flushes, &mut self.notices, g)
                }
            }
        }
        n
    }
}
