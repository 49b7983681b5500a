//! `put_zcopy` and `get_zcopy` as packets on the virtual wire.
//!
//! * Post: the initiator's endpoint must be live and its link must have
//!   room in the window (else `NoResource`); the operation then holds one
//!   message and its length in bytes of the window until it finishes. A put
//!   copies its data into the request when posted (so its iov may be
//!   reused at once, though the contract does not promise it); a get keeps
//!   its iov to write the reply into. Both return `InFlight`.
//! * At the target, when the request arrives: the access is checked and
//!   carried out at once, without the target's `progress`, as an RDMA NIC
//!   would: the key must be of the memory domain the target iface was
//!   opened from (else `RemoteAccess`), and the live registration must
//!   cover the range and grant the right ([`RegTable::with_range`]:
//!   `InvalidParam` for a registration that ended or a key with another
//!   secret, `RemoteAccess` for a range or a right). A put writes its
//!   data, a get reads. The reply (an
//!   acknowledgement, or the data) then travels back over the link
//!   `target -> initiator`, with that link's delay, bandwidth and faults;
//!   it takes no window.
//! * At the initiator, when the reply arrives: a get's data is written into
//!   its iov, then the operation finishes with the target's verdict,
//!   reported as a completion at the initiator's next `progress`.
//! * A request or reply lost on the wire (loss, filter) finishes the
//!   operation with `TimedOut`, at the time it would have arrived, as a
//!   reliable transport gives up after its retries; the target may or may
//!   not have carried out the access. Peer death, `ep_destroy` and the
//!   failure of the endpoint take both off the wire and finish the
//!   operation with the endpoint's error (`Canceled` for `ep_destroy`).
//! * Dropping the initiator's iface forgets its operations: a request
//!   still on the wire is carried out, its reply is discarded, nothing is
//!   written into the iov after the drop.
//!
//! [`RegTable::with_range`]: crate::RegTable::with_range

use super::net::{Body, Net, Packet, Report, State};
use super::packet::{Fate, Op};
use super::rkey::VirtKey;
use super::send::Slot;
use crate::ucs::AccessDenied;
use crate::{Access, EpId, Error, Iov, Posted, Result, Token};
use std::sync::Arc;

/// What a packet of a one-sided operation carries.
#[derive(Debug)]
pub(super) enum RmaMsg {
    /// Write `data` at `addr` of the memory `key` names.
    Put {
        key: VirtKey,
        addr: u64,
        data: Vec<u8>,
    },
    /// Read `len` bytes at `addr` of the memory `key` names.
    Get { key: VirtKey, addr: u64, len: usize },
    /// The target's verdict, with the data read by a get.
    Reply(Result<Vec<u8>>),
}

impl RmaMsg {
    /// Bytes of data carried.
    pub(super) fn data_len(&self) -> usize {
        match self {
            RmaMsg::Put { data, .. } | RmaMsg::Reply(Ok(data)) => data.len(),
            RmaMsg::Get { .. } | RmaMsg::Reply(Err(_)) => 0,
        }
    }
}

/// A one-sided operation in flight, kept by its initiator.
#[derive(Debug)]
pub(super) struct RmaOp {
    /// Uid of the initiating endpoint.
    pub(super) ep: u64,
    pub(super) token: Token,
    /// Target node.
    pub(super) to: usize,
    /// Bytes of window held.
    pub(super) len: usize,
    /// Where a get's data goes; empty for a put.
    pub(super) iov: Vec<Iov>,
}

/// What the iface hands over to post an operation.
#[derive(Debug, Clone, Copy)]
pub(super) struct RmaPost {
    pub(super) key: VirtKey,
    pub(super) addr: u64,
    /// Total length of the iov.
    pub(super) len: usize,
    pub(super) token: Token,
}

impl Net {
    /// Posts a put of `req.len` bytes that `fill` copies from the iov.
    pub(super) fn put(
        &mut self,
        me: usize,
        ep: EpId,
        req: RmaPost,
        fill: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Posted> {
        self.start(me, ep, req, Vec::new(), |req| {
            let mut data = Vec::with_capacity(req.len);
            fill(&mut data);
            RmaMsg::Put {
                key: req.key,
                addr: req.addr,
                data,
            }
        })
    }

    /// Posts a get into `iov` (of `req.len` bytes in total).
    pub(super) fn get(
        &mut self,
        me: usize,
        ep: EpId,
        req: RmaPost,
        iov: Vec<Iov>,
    ) -> Result<Posted> {
        self.start(me, ep, req, iov, |req| RmaMsg::Get {
            key: req.key,
            addr: req.addr,
            len: req.len,
        })
    }

    fn start(
        &mut self,
        me: usize,
        ep: EpId,
        req: RmaPost,
        iov: Vec<Iov>,
        msg: impl FnOnce(&RmaPost) -> RmaMsg,
    ) -> Result<Posted> {
        let Some((to, src, uid)) = self.sendable(me, ep)? else {
            return Ok(Posted::NoResource);
        };
        let msg = msg(&req);
        let kind = match msg {
            RmaMsg::Put { .. } => Op::Put,
            _ => Op::Get,
        };
        let data: &[u8] = match &msg {
            RmaMsg::Put { data, .. } => data,
            _ => &[],
        };
        let slot = self.transmit(me, to, src, 0, kind, data);
        self.occupy(me, to, req.len);
        let op = self.next_rma;
        self.next_rma += 1;
        self.nodes[me].rma.insert(
            op,
            RmaOp {
                ep: uid,
                token: req.token,
                to,
                len: req.len,
                iov,
            },
        );
        let packet = Packet {
            from: me,
            ep: Some(uid),
            to,
            src,
            body: Body::Rma {
                op,
                kind,
                msg,
                dropped: slot.dropped,
            },
        };
        self.wire.insert((slot.arrival, slot.seq), packet);
        self.settle();
        Ok(Posted::InFlight)
    }

    /// A packet of a one-sided operation is due.
    pub(super) fn rma_arrive(&mut self, time: u64, seq: u64, p: Packet) {
        let Body::Rma {
            op,
            kind,
            msg,
            dropped,
        } = &p.body
        else {
            return;
        };
        let (op, kind) = (*op, *kind);
        let reply = matches!(msg, RmaMsg::Reply(_));
        let initiator = if reply { p.to } else { p.from };
        if *dropped {
            self.record(time, seq, &p, Fate::Dropped);
            let e = Error::TimedOut(format!("virt: {kind} lost on the wire"));
            self.finish_rma(initiator, op, Err(e));
            return;
        }
        if !reply && !self.is_open(p.to) {
            self.record(time, seq, &p, Fate::Lost);
            let e = Error::ConnectionLost {
                peer: super::NodeId(p.to as u64).to_string(),
                reason: "iface gone".into(),
            };
            self.finish_rma(initiator, op, Err(e));
            return;
        }
        // A reply whose operation is gone (its iface dropped) is lost.
        let fate = if reply && !self.nodes[initiator].rma.contains_key(&op) {
            Fate::Lost
        } else {
            Fate::Delivered
        };
        self.record(time, seq, &p, fate);
        let Body::Rma { msg, .. } = p.body else {
            return;
        };
        let (result, back) = match msg {
            RmaMsg::Reply(result) => return self.rma_reply(initiator, op, result),
            RmaMsg::Put { key, addr, data } => {
                let r = self.access(p.to, &key, addr, data.len(), Access::REMOTE_WRITE, |dst| {
                    if !data.is_empty() {
                        // SAFETY: `dst` starts `data.len()` bytes that
                        // `with_range` found inside a live registration
                        // with remote write rights; `mem_reg`'s caller keeps
                        // that memory valid, and free of Rust references,
                        // until `mem_dereg`, which waits for the table lock
                        // held around this closure. `data` is this packet's
                        // own buffer, so the ranges do not overlap.
                        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
                    }
                    Vec::new()
                });
                (r, Op::PutAck)
            }
            RmaMsg::Get { key, addr, len } => {
                let r = self.access(p.to, &key, addr, len, Access::REMOTE_READ, |src| {
                    let mut v = vec![0u8; len];
                    if len > 0 {
                        // SAFETY: `src` starts `len` bytes inside a live
                        // registration with remote read rights (checked by
                        // `with_range`), valid until `mem_dereg`, which
                        // waits for the table lock held around this
                        // closure; `v` is a fresh buffer of `len` bytes.
                        unsafe { std::ptr::copy_nonoverlapping(src, v.as_mut_ptr(), len) };
                    }
                    v
                });
                (r, Op::GetReply)
            }
        };
        let data: &[u8] = result.as_deref().unwrap_or(&[]);
        let slot: Slot = self.transmit(p.to, p.from, p.src, 0, back, data);
        let packet = Packet {
            from: p.to,
            ep: p.ep,
            to: p.from,
            src: p.src,
            body: Body::Rma {
                op,
                kind: back,
                msg: RmaMsg::Reply(result),
                dropped: slot.dropped,
            },
        };
        self.wire.insert((slot.arrival, slot.seq), packet);
    }

    /// Checks an access of `len` bytes at `addr` with `key` at `target`
    /// and runs `op` on the memory if it is allowed.
    fn access(
        &self,
        target: usize,
        key: &VirtKey,
        addr: u64,
        len: usize,
        need: Access,
        op: impl FnOnce(*mut u8) -> Vec<u8>,
    ) -> Result<Vec<u8>> {
        let md = self.nodes[target].md;
        if key.md != md {
            return Err(Error::remote_access(
                "virt",
                AccessDenied::InvalidKey(
                    format!("a key of memory domain {}, the target's is {md}", key.md).into(),
                ),
            ));
        }
        let table = Arc::clone(&self.mds[md as usize]);
        table.with_range(&key.fields, addr, len, need, op)
    }

    /// The reply of operation `op` reached its initiator.
    fn rma_reply(&mut self, node: usize, op: u64, result: Result<Vec<u8>>) {
        let Some(rec) = self.take_rma(node, op) else {
            // The initiator was dropped: nothing to write, no one to tell.
            return;
        };
        let result = result.and_then(|data| scatter(&rec.iov, &data));
        self.report(node, Report::Completed(rec.token, result));
        self.check_flushes(node);
    }

    /// Operation `op` of `node` ended with `result` (a failure on the
    /// wire): reported, then waiting flushes checked.
    fn finish_rma(&mut self, node: usize, op: u64, result: Result<()>) {
        if let Some(rec) = self.take_rma(node, op) {
            self.report(node, Report::Completed(rec.token, result));
            self.check_flushes(node);
        }
    }

    /// Operation `op` of `node` as it is canceled with its endpoint:
    /// reported with `error`; flushes are the canceller's business.
    pub(super) fn cancel_rma(&mut self, node: usize, op: u64, error: Error) {
        if let Some(rec) = self.take_rma(node, op) {
            self.report(node, Report::Completed(rec.token, Err(error)));
        }
    }

    /// Removes operation `op` of `node` and gives its window back.
    fn take_rma(&mut self, node: usize, op: u64) -> Option<RmaOp> {
        let n = self.nodes.get_mut(node)?;
        if n.state == State::Closed {
            return None;
        }
        let rec = n.rma.remove(&op)?;
        self.release(node, rec.to, rec.len);
        if !self.nodes[node].pending_eps.is_empty() {
            self.wake(node);
        }
        Some(rec)
    }
}

/// Writes `data` into the ranges of `iov`, in order.
fn scatter(iov: &[Iov], data: &[u8]) -> Result<()> {
    let total: usize = iov.iter().map(|v| v.len).sum();
    if total != data.len() {
        // Cannot happen: the target reads exactly the length asked for.
        return Err(Error::InvalidParam(format!(
            "virt: get reply of {} bytes for {total}",
            data.len()
        )));
    }
    let mut at = 0;
    for v in iov.iter().filter(|v| v.len > 0) {
        // SAFETY: the caller of `get_zcopy` keeps each range valid for
        // writes, and untouched by anyone else, until the operation
        // completes, which is reported only after this returns; the
        // operation was still in its initiator's table, so neither its
        // endpoint nor its iface went away. `data` is the reply's own
        // buffer and `at + v.len <= data.len()` (the lengths add up).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(at), v.ptr.cast_mut(), v.len) };
        at += v.len;
    }
    Ok(())
}
