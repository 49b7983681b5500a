//! The send path: work requests and Read Responses framed as FPDUs into a
//! batch of iovecs that point at the data where it lies, written with one
//! `sendmsg` for many FPDUs.
//!
//! A batch is refilled only once it is completely sent, so the iovecs and
//! the header slots they point into stay put across partial writes. Send
//! and RDMA WRITE requests complete when their last byte was taken by the
//! socket (as siw does); each leaves a [`Mark`] at that stream position.

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;

use rucx_rdma::{Access, SendOp, Sge, WcOpcode, WcStatus};
use uct::ucs::sock;

use super::qp::{sge_ranges, Env, Failure, Phase, Qp, ReadOut, Rtr};
use crate::mr::Tables;
use crate::shared::{MAX_INLINE, MAX_SGE};
use crate::wire::ddp::{DdpHeader, MAX_HDR_LEN, QN_READ_REQ, QN_SEND};
use crate::wire::fpdu;
use crate::wire::rdmap::{Opcode, ReadRequest, READ_REQ_LEN};
use crate::wire::{TermCause, Terminate};

/// FPDUs per batch.
const BATCH_FPDUS: usize = 64;
/// Room for an FPDU's length field, DDP header and Read Request.
const HDR_SLOT: usize = fpdu::PREFIX_LEN + MAX_HDR_LEN + READ_REQ_LEN;
/// Empty batches a context keeps for its queue pairs.
pub(crate) const SPARE_BATCHES: usize = 4;
/// iovecs per batch (the kernel's IOV_MAX).
const IOV_CAP: usize = 1024;
/// Copies of inline data and Terminate bodies in a batch: room for an
/// inline send in every FPDU.
const ARENA: usize = BATCH_FPDUS * MAX_INLINE;
/// The STag of ready-to-receive messages and of READ sinks without a
/// scatter entry (zero-length): never 0 on the wire.
pub(crate) const DUMMY_STAG: u32 = 1;

/// Where a framed send request completes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    /// Stream position just after its last byte.
    pub(crate) pos: u64,
    pub(crate) seq: u64,
    pub(crate) wr_id: u64,
    pub(crate) opcode: WcOpcode,
    pub(crate) signaled: bool,
}

/// A contiguous piece of payload.
#[derive(Debug, Clone, Copy)]
struct Part {
    ptr: *const u8,
    len: usize,
}

/// FPDUs ready to be written.
#[derive(Debug)]
pub(crate) struct Batch {
    hdrs: Box<[[u8; HDR_SLOT]; BATCH_FPDUS]>,
    trailers: Box<[[u8; 8]; BATCH_FPDUS]>,
    /// Not initialized up front: a page of it costs memory once a copy
    /// is written there; only written bytes are ever read.
    arena: Box<[MaybeUninit<u8>]>,
    arena_used: usize,
    nfpdu: usize,
    iov: Vec<libc::iovec>,
    /// Whether `iov[i]` starts an FPDU.
    starts: Vec<bool>,
    /// First iovec not completely written.
    pos: usize,
    /// `iov[pos]` was written in part (its base was moved).
    partial: bool,
    /// Source STags of Read Responses in the batch, each with the end of
    /// its last iovec: those not completely written are checked again
    /// under the table lock before every write. (A response written in
    /// full may complete the requester's READ, and its source may then be
    /// deregistered while the batch is still being written.)
    rresp: Vec<(u32, usize)>,
}

// SAFETY: the raw pointers of the iovecs point into the batch's own boxes,
// or at memory that the posting contracts (send sources) or the region
// table under its lock (Read Response sources) keep valid; none of it is
// tied to a thread.
unsafe impl Send for Batch {}

impl Batch {
    fn new() -> Batch {
        Batch {
            hdrs: Box::new([[0; HDR_SLOT]; BATCH_FPDUS]),
            trailers: Box::new([[0; 8]; BATCH_FPDUS]),
            arena: Box::new_uninit_slice(ARENA),
            arena_used: 0,
            nfpdu: 0,
            // Grown as batches fill (at most to IOV_CAP) and kept: a
            // context's batches are reused, so this allocates only while
            // the largest batch so far grows.
            iov: Vec::new(),
            starts: Vec::new(),
            pos: 0,
            partial: false,
            rresp: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.pos >= self.iov.len()
    }

    fn reset(&mut self) {
        self.arena_used = 0;
        self.nfpdu = 0;
        self.iov.clear();
        self.starts.clear();
        self.pos = 0;
        self.partial = false;
        self.rresp.clear();
    }

    /// Room for one more FPDU (with `arena` bytes of copies).
    fn has_room(&self, arena: usize) -> bool {
        self.nfpdu < BATCH_FPDUS
            && self.iov.len() + 2 + MAX_SGE <= IOV_CAP
            && self.arena_used + arena <= ARENA
    }

    /// Copies `data` into the arena; the part points at the copy.
    fn copy(&mut self, data: &[u8]) -> Part {
        let at = self.arena_used;
        let dst = &mut self.arena[at..at + data.len()];
        // SAFETY: `dst` has room for `data.len()` bytes (the slice was
        // bounds-checked), `MaybeUninit<u8>` has the layout of `u8`, and
        // `data` (caller memory) cannot overlap the batch's own arena.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst.as_mut_ptr().cast::<u8>(), data.len())
        };
        self.arena_used += data.len();
        Part {
            ptr: self.arena[at..].as_ptr().cast::<u8>(),
            len: data.len(),
        }
    }

    /// Frames one FPDU: `hdr`, then `extra` (a Read Request), then the
    /// payload parts. Returns its length on the wire.
    fn push(&mut self, hdr: &DdpHeader, extra: &[u8], parts: &[Part], crc: bool) -> usize {
        let slot = &mut self.hdrs[self.nfpdu];
        let mut h = [0u8; MAX_HDR_LEN];
        let hlen = hdr.encode(&mut h);
        let payload: usize = parts.iter().map(|p| p.len).sum();
        let ulpdu = hlen + extra.len() + payload;
        let p = fpdu::PREFIX_LEN;
        slot[..p].copy_from_slice(&fpdu::prefix(ulpdu));
        slot[p..p + hlen].copy_from_slice(&h[..hlen]);
        slot[p + hlen..p + hlen + extra.len()].copy_from_slice(extra);
        let head = &slot[..p + hlen + extra.len()];
        let mut slices: [&[u8]; 1 + MAX_SGE] = [&[]; 1 + MAX_SGE];
        slices[0] = &head[p..];
        for (s, part) in slices[1..].iter_mut().zip(parts) {
            // SAFETY: each part points at memory valid for reads while the
            // batch holds it (see `unsafe impl Send for Batch`).
            *s = unsafe { std::slice::from_raw_parts(part.ptr, part.len) };
        }
        let (trailer, tlen) = fpdu::trailer(&slices[..1 + parts.len()], crc);
        self.trailers[self.nfpdu] = trailer;
        self.iov.push(sock::iovec(head));
        self.starts.push(true);
        for part in parts.iter().filter(|p| p.len > 0) {
            self.iov.push(libc::iovec {
                iov_base: part.ptr.cast_mut().cast(),
                iov_len: part.len,
            });
            self.starts.push(false);
        }
        self.iov
            .push(sock::iovec(&self.trailers[self.nfpdu][..tlen]));
        self.starts.push(false);
        self.nfpdu += 1;
        fpdu::fpdu_len(ulpdu)
    }

    /// Accounts for `n` bytes written.
    fn advance(&mut self, mut n: usize) {
        while n > 0 && self.pos < self.iov.len() {
            let v = &mut self.iov[self.pos];
            if n >= v.iov_len {
                n -= v.iov_len;
                self.pos += 1;
                self.partial = false;
            } else {
                // SAFETY: moving within the range the iovec describes.
                v.iov_base = unsafe { v.iov_base.cast::<u8>().add(n) }.cast();
                v.iov_len -= n;
                self.partial = true;
                n = 0;
            }
        }
    }

    /// Drops the FPDUs not started yet; keeps the one being written.
    /// Returns the bytes still to write.
    fn truncate_unstarted(&mut self) -> u64 {
        let mut cut = self.pos;
        if self.partial || (cut < self.iov.len() && !self.starts[cut]) {
            cut += 1;
            while cut < self.iov.len() && !self.starts[cut] {
                cut += 1;
            }
        }
        self.iov.truncate(cut);
        self.starts.truncate(cut);
        self.iov[self.pos..].iter().map(|v| v.iov_len as u64).sum()
    }
}

/// The send state of a queue pair.
#[derive(Debug)]
pub(crate) struct Tx {
    /// MPA frame bytes to write before any FPDU.
    raw: Vec<u8>,
    raw_off: usize,
    /// Held only while FPDUs wait to be written: an idle queue pair gives
    /// it back to its context's spares ([`Env::batches`]).
    batch: Option<Batch>,
    sent_pos: u64,
    framed_pos: u64,
    marks: VecDeque<Mark>,
    /// Payload offset in the message being framed (the head of `irq` if
    /// `cur_rresp`, else of `sq`).
    cur_off: Option<u64>,
    cur_rresp: bool,
    /// MSN of the next untagged message on queues 0 and 1.
    msn_send: u32,
    msn_rreq: u32,
    /// A Terminate's ULPDU (header included) to frame next.
    term: Option<Vec<u8>>,
    term_framed: bool,
    /// Ready-to-receive message to send first (initiator).
    pub(crate) rtr: Option<Rtr>,
    /// Send no FPDU yet (responder waiting for the ready-to-receive
    /// message).
    pub(crate) hold: bool,
    /// The socket refused bytes: wait until writable.
    blocked: bool,
}

impl Tx {
    pub(crate) fn new() -> Tx {
        Tx {
            raw: Vec::new(),
            raw_off: 0,
            batch: None,
            sent_pos: 0,
            framed_pos: 0,
            marks: VecDeque::new(),
            cur_off: None,
            cur_rresp: false,
            msn_send: 1,
            msn_rreq: 1,
            term: None,
            term_framed: false,
            rtr: None,
            hold: false,
            blocked: false,
        }
    }

    pub(crate) fn wants_write(&self) -> bool {
        self.blocked
    }

    pub(crate) fn batch_is_empty(&self) -> bool {
        self.batch.as_ref().is_none_or(|b| b.is_empty())
    }

    /// The batch being framed (taken by `tx_progress` before framing).
    fn batch_mut(&mut self) -> &mut Batch {
        self.batch.get_or_insert_with(Batch::new)
    }

    /// Queues an MPA frame.
    pub(crate) fn queue_raw(&mut self, bytes: &[u8]) {
        self.raw.extend_from_slice(bytes);
    }

    pub(crate) fn take_marks(&mut self) -> VecDeque<Mark> {
        std::mem::take(&mut self.marks)
    }

    /// Forgets the batch (the connection is gone).
    pub(crate) fn drop_batch(&mut self) {
        self.batch = None;
        self.cur_off = None;
        self.blocked = false;
    }

    /// Sends `t` after the FPDU being written (if any); nothing else is
    /// framed after it.
    pub(crate) fn queue_terminate(&mut self, t: &Terminate, _crc: bool) {
        let left = self.batch.as_mut().map_or(0, |b| b.truncate_unstarted());
        self.framed_pos = self.sent_pos + left;
        self.cur_off = None;
        self.term = Some(t.encode_ulpdu());
    }
}

/// The pieces of `len` bytes at offset `off` of a gather list.
fn gather(sges: &[Sge], off: u64, len: usize, out: &mut [Part; MAX_SGE]) -> usize {
    let mut iov = [sock::iovec(&[]); MAX_SGE];
    let n = sge_ranges(sges, off, len, &mut iov);
    for (p, v) in out.iter_mut().zip(&iov[..n]) {
        *p = Part {
            ptr: v.iov_base.cast_const().cast(),
            len: v.iov_len,
        };
    }
    n
}

impl Qp {
    /// Writes what can be written; frames more when the batch is done.
    pub(crate) fn tx_progress(&mut self, env: &mut Env<'_>) -> Result<usize, Failure> {
        let Some(conn) = self.conn.as_ref() else {
            return Ok(0);
        };
        if matches!(conn.phase, Phase::TcpConnect { .. } | Phase::Closing { .. }) {
            return Ok(0);
        }
        let fd = conn.fd.as_raw_fd();
        let mut work = 0;
        self.tx.blocked = false;
        while self.tx.raw_off < self.tx.raw.len() {
            let n = sock::send(fd, &self.tx.raw[self.tx.raw_off..]).map_err(lost)?;
            if n == 0 {
                self.tx.blocked = true;
                return Ok(work);
            }
            self.tx.raw_off += n;
            work += 1;
        }
        self.tx.raw.clear();
        self.tx.raw_off = 0;
        loop {
            if self.tx.batch_is_empty() {
                let mut b = match self.tx.batch.take() {
                    Some(b) => b,
                    None => env.batches.pop().unwrap_or_else(Batch::new),
                };
                b.reset();
                self.tx.batch = Some(b);
                if let Err(t) = self.refill(env) {
                    return Err(Failure::Terminate(t));
                }
                if self.tx.batch_is_empty() {
                    break;
                }
            }
            let Some(b) = self.tx.batch.as_ref() else {
                break;
            };
            let n = {
                let guard = (!b.rresp.is_empty()).then(|| env.shared.tables.read());
                if let Some(g) = &guard {
                    let gone = |&(s, end): &(u32, usize)| end > b.pos && g.get(s).is_none();
                    if b.rresp.iter().any(gone) {
                        return Err(Failure::Lost {
                            abrupt: true,
                            why: "a Read Response's source was deregistered".into(),
                        });
                    }
                }
                // SAFETY: the iovecs describe memory valid for reads (see
                // `unsafe impl Send for Batch`); the region table's read
                // lock is held over Read Response sources.
                unsafe { sock::sendv(fd, &b.iov[b.pos..]) }.map_err(lost)?
            };
            if n == 0 {
                self.tx.blocked = true;
                break;
            }
            work += 1;
            self.tx.batch_mut().advance(n);
            self.tx.sent_pos += n as u64;
            while let Some(m) = self.tx.marks.front().copied() {
                if m.pos > self.tx.sent_pos {
                    break;
                }
                self.tx.marks.pop_front();
                self.complete_send(env.out, m.wr_id, m.signaled, WcStatus::Success, m.opcode, 0);
            }
            if !self.tx.batch_is_empty() {
                self.tx.blocked = true;
                break;
            }
        }
        if self.tx.batch_is_empty() {
            if let Some(b) = self.tx.batch.take() {
                if env.batches.len() < SPARE_BATCHES {
                    env.batches.push(b);
                }
            }
            if self.flush_pending {
                self.flush(env);
            }
            if self.tx.term_framed && self.tx.term.is_none() {
                self.tx.term_framed = false;
                self.linger(env);
            }
        }
        Ok(work)
    }

    /// Frames FPDUs into the (empty) batch.
    fn refill(&mut self, env: &mut Env<'_>) -> Result<(), Terminate> {
        let multi = self.next_needs_segments();
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        if multi {
            conn.refresh_mulpdu();
        }
        let (crc, mulpdu) = (conn.crc, conn.mulpdu);
        if let Some(t) = self.tx.term.take() {
            let (hdr, hlen) = match DdpHeader::decode(&t) {
                Ok(h) => h,
                Err(_) => return Ok(()),
            };
            let part = self.tx.batch_mut().copy(&t[hlen..]);
            self.tx.framed_pos += self.tx.batch_mut().push(&hdr, &[], &[part], crc) as u64;
            self.tx.term_framed = true;
            return Ok(());
        }
        if self.tx.term_framed || self.tx.hold {
            return Ok(());
        }
        if let Some(rtr) = self.tx.rtr.take() {
            self.frame_rtr(rtr, crc);
        }
        let tables = env.shared.tables.read();
        while self.tx.batch_mut().has_room(MAX_INLINE) {
            if self.tx.cur_off.is_none() {
                if !self.irq.is_empty() {
                    self.tx.cur_rresp = true;
                } else if let Some(head) = self.sq.front() {
                    let is_read = matches!(head.op, SendOp::Read { .. });
                    if self.state != rucx_rdma::QpState::Rts
                        || (is_read && self.orq.len() >= self.ord.max(1) as usize)
                        || (head.fence && !self.orq.is_empty())
                    {
                        break;
                    }
                    self.tx.cur_rresp = false;
                } else {
                    break;
                }
                self.tx.cur_off = Some(0);
            }
            if self.tx.cur_rresp {
                self.frame_rresp(&tables, mulpdu, crc)?;
            } else {
                self.frame_sq(mulpdu, crc);
            }
        }
        Ok(())
    }

    /// Whether the next message to frame from the start (a Read Response
    /// first, else the send queue's head) is longer than one FPDU at the
    /// current MULPDU: only then is the segment size worth asking again.
    fn next_needs_segments(&self) -> bool {
        let Some(conn) = self.conn.as_ref() else {
            return false;
        };
        if self.tx.cur_off.is_some() {
            return false;
        }
        let room = conn.mulpdu - crate::wire::ddp::UNTAGGED_HDR_LEN;
        match (self.irq.front(), self.sq.front()) {
            (Some(r), _) => r.size as usize > room,
            (None, Some(req)) => !matches!(req.op, SendOp::Read { .. }) && req.len > room as u64,
            (None, None) => false,
        }
    }

    fn frame_rtr(&mut self, rtr: Rtr, crc: bool) {
        match rtr {
            Rtr::Write => {
                let hdr = DdpHeader::Tagged {
                    last: true,
                    opcode: Opcode::Write,
                    stag: DUMMY_STAG,
                    to: 0,
                };
                self.tx.framed_pos += self.tx.batch_mut().push(&hdr, &[], &[], crc) as u64;
            }
            Rtr::Read => {
                let rr = ReadRequest {
                    sink_stag: DUMMY_STAG,
                    sink_to: 0,
                    size: 0,
                    src_stag: DUMMY_STAG,
                    src_to: 0,
                };
                self.push_read_request(&rr, crc);
                self.orq.push_back(ReadOut {
                    seq: 0,
                    wr_id: None,
                    signaled: false,
                    sink_stag: DUMMY_STAG,
                    sink_to: 0,
                    size: 0,
                });
            }
        }
    }

    fn push_read_request(&mut self, rr: &ReadRequest, crc: bool) {
        let hdr = DdpHeader::Untagged {
            last: true,
            opcode: Opcode::ReadRequest,
            inv_stag: 0,
            qn: QN_READ_REQ,
            msn: self.tx.msn_rreq,
            mo: 0,
        };
        self.tx.msn_rreq = self.tx.msn_rreq.wrapping_add(1);
        self.tx.framed_pos += self.tx.batch_mut().push(&hdr, &rr.encode(), &[], crc) as u64;
    }

    /// Frames the next FPDU of the Read Response at the head of `irq`.
    fn frame_rresp(&mut self, tables: &Tables, mulpdu: usize, crc: bool) -> Result<(), Terminate> {
        let off = self.tx.cur_off.unwrap_or(0);
        let r = self
            .irq
            .front()
            .cloned()
            .expect("a Read Response is being framed");
        let left = u64::from(r.size) - off;
        let seg = left.min((mulpdu - crate::wire::ddp::TAGGED_HDR_LEN) as u64) as usize;
        if seg > 0 {
            let ok = tables
                .check_remote(
                    r.src_stag,
                    self.init.pd,
                    Access::REMOTE_READ,
                    r.src_to + off,
                    seg as u64,
                )
                .is_ok();
            if !ok {
                let mut t = Terminate::new(TermCause::RDMAP_INVALID_STAG);
                t.rdmap_hdr = Some(
                    ReadRequest {
                        sink_stag: r.sink_stag,
                        sink_to: r.sink_to,
                        size: r.size,
                        src_stag: r.src_stag,
                        src_to: r.src_to,
                    }
                    .encode()
                    .to_vec(),
                );
                return Err(t);
            }
        }
        let last = seg as u64 == left;
        let hdr = DdpHeader::Tagged {
            last,
            opcode: Opcode::ReadResponse,
            stag: r.sink_stag,
            to: r.sink_to.wrapping_add(off),
        };
        let part = Part {
            ptr: (r.src_to + off) as *const u8,
            len: seg,
        };
        let parts: &[Part] = if seg > 0 { &[part] } else { &[] };
        self.tx.framed_pos += self.tx.batch_mut().push(&hdr, &[], parts, crc) as u64;
        if seg > 0 {
            let b = self.tx.batch_mut();
            let end = b.iov.len();
            match b.rresp.last_mut() {
                Some((stag, e)) if *stag == r.src_stag => *e = end,
                _ => b.rresp.push((r.src_stag, end)),
            }
        }
        if last {
            self.irq.pop_front();
            self.tx.cur_off = None;
        } else {
            self.tx.cur_off = Some(off + seg as u64);
        }
        Ok(())
    }

    /// Frames the next FPDU of the send request at the head of `sq`.
    fn frame_sq(&mut self, mulpdu: usize, crc: bool) {
        let off = self.tx.cur_off.unwrap_or(0);
        let Some(req) = self.sq.front() else {
            self.tx.cur_off = None;
            return;
        };
        if let SendOp::Read { remote_addr, rkey } = req.op {
            let sink = req.sges().first().copied();
            let rr = ReadRequest {
                sink_stag: sink.map_or(DUMMY_STAG, |s| s.lkey),
                sink_to: sink.map_or(0, |s| s.addr),
                size: req.len as u32,
                src_stag: rkey,
                src_to: remote_addr,
            };
            let out = ReadOut {
                seq: req.seq,
                wr_id: Some(req.wr_id),
                signaled: req.signaled,
                sink_stag: rr.sink_stag,
                sink_to: rr.sink_to,
                size: rr.size,
            };
            self.push_read_request(&rr, crc);
            self.orq.push_back(out);
            self.sq.pop_front();
            self.tx.cur_off = None;
            return;
        }
        let tagged = matches!(req.op, SendOp::Write { .. });
        let hlen = if tagged {
            crate::wire::ddp::TAGGED_HDR_LEN
        } else {
            crate::wire::ddp::UNTAGGED_HDR_LEN
        };
        let left = req.len - off;
        let seg = left.min((mulpdu - hlen) as u64) as usize;
        let last = seg as u64 == left;
        let hdr = match req.op {
            SendOp::Write { remote_addr, rkey } => DdpHeader::Tagged {
                last,
                opcode: Opcode::Write,
                stag: rkey,
                to: remote_addr.wrapping_add(off),
            },
            op => {
                let (opcode, inv_stag) = match (op, req.solicited) {
                    (SendOp::SendInv { rkey }, false) => (Opcode::SendInv, rkey),
                    (SendOp::SendInv { rkey }, true) => (Opcode::SendSeInv, rkey),
                    (_, false) => (Opcode::Send, 0),
                    (_, true) => (Opcode::SendSe, 0),
                };
                DdpHeader::Untagged {
                    last,
                    opcode,
                    inv_stag,
                    qn: QN_SEND,
                    msn: self.tx.msn_send,
                    mo: off as u32,
                }
            }
        };
        let mut parts = [Part {
            ptr: std::ptr::null(),
            len: 0,
        }; MAX_SGE];
        let n = match &req.inline {
            Some((data, _)) => {
                let data = &data[off as usize..off as usize + seg];
                parts[0] = self.tx.batch_mut().copy(data);
                1
            }
            None => gather(req.sges(), off, seg, &mut parts),
        };
        self.tx.framed_pos += self.tx.batch_mut().push(&hdr, &[], &parts[..n], crc) as u64;
        if !last {
            self.tx.cur_off = Some(off + seg as u64);
            return;
        }
        let req = self.sq.pop_front().expect("the head was framed");
        if !tagged {
            self.tx.msn_send = self.tx.msn_send.wrapping_add(1);
        }
        self.tx.marks.push_back(Mark {
            pos: self.tx.framed_pos,
            seq: req.seq,
            wr_id: req.wr_id,
            opcode: req.wc_opcode(),
            signaled: req.signaled,
        });
        self.tx.cur_off = None;
    }
}

fn lost(e: std::io::Error) -> Failure {
    Failure::Lost {
        abrupt: true,
        why: format!("send: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_splits_across_entries() {
        let sges = [
            Sge {
                addr: 100,
                len: 10,
                lkey: 1,
            },
            Sge {
                addr: 200,
                len: 0,
                lkey: 1,
            },
            Sge {
                addr: 300,
                len: 5,
                lkey: 1,
            },
        ];
        let mut out = [Part {
            ptr: std::ptr::null(),
            len: 0,
        }; MAX_SGE];
        let n = gather(&sges, 8, 5, &mut out);
        assert_eq!(n, 2);
        assert_eq!((out[0].ptr as usize, out[0].len), (108, 2));
        assert_eq!((out[1].ptr as usize, out[1].len), (300, 3));
        assert_eq!(gather(&sges, 15, 0, &mut out), 0);
    }

    #[test]
    fn batch_advances_and_truncates_at_fpdu_boundaries() {
        let mut b = Batch::new();
        let data = [7u8; 10];
        let hdr = DdpHeader::Tagged {
            last: true,
            opcode: Opcode::Write,
            stag: 1,
            to: 0,
        };
        let p = b.copy(&data);
        let n1 = b.push(&hdr, &[], &[p], true);
        let n2 = b.push(&hdr, &[], &[p], true);
        assert_eq!(n1, fpdu::fpdu_len(14 + 10));
        assert_eq!(b.iov.len(), 6);
        b.advance(3);
        assert!(b.partial);
        // The first FPDU is being written: it stays, the second goes.
        assert_eq!(b.truncate_unstarted(), (n1 - 3) as u64);
        assert_eq!(b.iov.len(), 3);
        b.advance(n1 - 3);
        assert!(b.is_empty());
        let _ = n2;
    }
}
