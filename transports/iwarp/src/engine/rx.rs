//! The receive path: FPDUs parsed from the stream, their payload placed
//! straight into its destination (a peer's RDMA WRITE target, a READ's
//! sink, a posted receive), then checked and acted upon.
//!
//! An FPDU's header is read into a small buffer; a read of the buffer
//! takes at most [`RXBUF`] bytes, and payload bytes that came with a
//! header are copied from it. The rest of a payload is read with `readv`
//! into the destination itself, followed by the buffer (which so gets the
//! trailer and, often, the next header). The CRC is computed over the
//! placed bytes, as siw does: data is placed before the CRC is checked,
//! and a bad CRC ends the connection with a Terminate.
//!
//! Nothing a peer sends can make the engine write outside a destination
//! it validated: a tagged WRITE's range is checked against the region
//! table (and checked again, under the table's read lock, for every piece
//! placed); a Read Response must match the oldest outstanding READ; a
//! SEND must fit the posted receive.

use std::os::fd::AsRawFd;

use rucx_rdma::{Access, CmEvent, QpState, WcOpcode, WcStatus};
use uct::ucs::sock::{self, Recv};

use super::qp::{sge_ranges, Env, Failure, Phase, Qp, ReadResp, Rtr};
use crate::mr::RemoteRefusal;
use crate::shared::MAX_SGE;
use crate::wire::crc::Crc32c;
use crate::wire::ddp::{self, DdpHeader, MAX_HDR_LEN, QN_READ_REQ, QN_SEND, QN_TERMINATE};
use crate::wire::fpdu;
use crate::wire::rdmap::{Opcode, ReadRequest, READ_REQ_LEN};
use crate::wire::{TermCause, Terminate, WireError};

/// The header buffer.
const RXBUF: usize = 512;
/// Largest Read Request or Terminate body accepted.
const SMALL: usize = 128;
/// Reads per call, so one busy connection does not starve the others.
const MAX_READS: usize = 16;

/// Where an FPDU's payload goes.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// No payload.
    Nothing,
    /// The zero-length WRITE that is the awaited ready-to-receive message.
    RtrWrite,
    /// Contiguous memory; `stag` is checked again before each piece (a
    /// peer's WRITE), `None` for a READ's sink (kept valid by the posting
    /// contract).
    Mem { addr: u64, stag: Option<u32> },
    /// The posted receive at the head of the queue, from message offset
    /// `mo`.
    Recv { mo: u64 },
    /// The small buffer (Read Request, Terminate).
    Small,
}

/// The FPDU being received.
#[derive(Debug)]
struct Fpdu {
    /// Length field and DDP header as received.
    hdr: [u8; fpdu::PREFIX_LEN + MAX_HDR_LEN],
    hlen: usize,
    ddp: DdpHeader,
    ulpdu: usize,
    payload: usize,
    got: usize,
    crc: Crc32c,
    target: Target,
    small: [u8; SMALL],
}

impl Fpdu {
    fn ddp_bytes(&self) -> &[u8] {
        &self.hdr[fpdu::PREFIX_LEN..self.hlen]
    }

    fn trailer_len(&self) -> usize {
        fpdu::pad_len(self.ulpdu) + fpdu::CRC_LEN
    }

    /// A Terminate naming this segment (M and D), with `rdmap` (R).
    fn term(&self, cause: TermCause, rdmap: Option<&[u8]>) -> Failure {
        term_for(cause, self.ddp_bytes(), self.ulpdu, rdmap)
    }
}

fn term_for(cause: TermCause, ddp_hdr: &[u8], ulpdu: usize, rdmap: Option<&[u8]>) -> Failure {
    Failure::Terminate(Terminate {
        cause,
        ddp_seg_len: Some(ulpdu.saturating_sub(ddp_hdr.len()) as u16),
        ddp_hdr: Some(ddp_hdr.to_vec()),
        rdmap_hdr: rdmap.map(<[u8]>::to_vec),
    })
}

/// The receive state of a queue pair.
#[derive(Debug)]
pub(crate) struct Rx {
    buf: Box<[u8; RXBUF]>,
    start: usize,
    end: usize,
    cur: Option<Box<Fpdu>>,
    /// The last FPDU's box, reused for the next (no allocation per FPDU).
    spare: Option<Box<Fpdu>>,
    /// Expected MSN on queues 0 and 1.
    msn_send: u32,
    msn_rreq: u32,
    /// Bytes of the SEND being received so far.
    send_mo: u64,
    /// Bytes of the Read Response being received so far.
    rresp_off: u64,
    /// The ready-to-receive message the responder waits for.
    pub(crate) rtr: Option<Rtr>,
    /// The last read of this progress pass came back short.
    drained: bool,
}

impl Rx {
    pub(crate) fn new() -> Rx {
        Rx {
            buf: Box::new([0; RXBUF]),
            start: 0,
            end: 0,
            cur: None,
            spare: None,
            msn_send: 1,
            msn_rreq: 1,
            send_mo: 0,
            rresp_off: 0,
            rtr: None,
            drained: false,
        }
    }

    fn avail(&self) -> usize {
        self.end - self.start
    }

    /// Reads into the buffer after what it holds. `Ok(false)` when nothing
    /// was there, or when the last read came back short: the socket was
    /// then drained, and reading again would only see `EAGAIN` (the
    /// level-triggered epoll set reports what arrives later).
    fn fill(&mut self, fd: i32) -> Result<bool, Failure> {
        if self.drained {
            return Ok(false);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let room = self.buf.len() - self.end;
        match sock::recv(fd, &mut self.buf[self.end..]) {
            Ok(Recv::Data(n)) => {
                self.end += n;
                self.drained = n < room;
                Ok(true)
            }
            Ok(Recv::WouldBlock) => Ok(false),
            Ok(Recv::Eof) => Err(self.eof()),
            Err(e) => Err(Failure::Lost {
                abrupt: true,
                why: format!("receive: {e}"),
            }),
        }
    }

    fn eof(&self) -> Failure {
        Failure::Lost {
            abrupt: self.cur.is_some() || self.avail() > 0,
            why: "the peer closed the connection".into(),
        }
    }
}

fn refusal_ddp(r: RemoteRefusal) -> TermCause {
    match r {
        // No DDP code exists for missing rights; siw sends "invalid STag".
        RemoteRefusal::InvalidStag | RemoteRefusal::AccessRights => {
            TermCause::DDP_TAGGED_INVALID_STAG
        }
        RemoteRefusal::NotAssociated => TermCause::DDP_TAGGED_STAG_NOT_ASSOC,
        RemoteRefusal::Bounds => TermCause::DDP_TAGGED_BASE_BOUNDS,
    }
}

fn refusal_rdmap(r: RemoteRefusal) -> TermCause {
    match r {
        RemoteRefusal::InvalidStag => TermCause::RDMAP_INVALID_STAG,
        RemoteRefusal::AccessRights => TermCause::RDMAP_ACCESS_RIGHTS,
        RemoteRefusal::NotAssociated => TermCause::RDMAP_STAG_NOT_ASSOC,
        RemoteRefusal::Bounds => TermCause::RDMAP_BASE_BOUNDS,
    }
}

fn header_error(e: &WireError, tagged: bool) -> TermCause {
    match e {
        WireError::BadDdpVersion(_) if tagged => TermCause::DDP_TAGGED_BAD_VERSION,
        WireError::BadDdpVersion(_) => TermCause::DDP_UNTAGGED_BAD_VERSION,
        WireError::BadRdmapVersion(_) => TermCause::RDMAP_BAD_VERSION,
        WireError::BadOpcode(_) | WireError::WrongBufferModel { .. } => {
            TermCause::RDMAP_UNEXPECTED_OPCODE
        }
        _ => TermCause::RDMAP_CATASTROPHIC_STREAM,
    }
}

impl Qp {
    /// Reads and handles what the socket has.
    pub(crate) fn rx_progress(&mut self, env: &mut Env<'_>) -> Result<usize, Failure> {
        let Some(conn) = self.conn.as_ref() else {
            return Ok(0);
        };
        let fd = conn.fd.as_raw_fd();
        if self.state == QpState::Error || matches!(conn.phase, Phase::Closing { .. }) {
            return self.drain(env, fd);
        }
        let mut reads = 0;
        let mut work = 0;
        self.rx.drained = false;
        loop {
            if self.state == QpState::Error {
                break;
            }
            let Some(cur) = self.rx.cur.as_ref() else {
                if self.rx.avail() > fpdu::PREFIX_LEN {
                    let first = self.rx.buf[self.rx.start + fpdu::PREFIX_LEN];
                    let hlen = fpdu::PREFIX_LEN + ddp::header_len_from_first_byte(first);
                    if self.rx.avail() >= hlen {
                        self.begin_fpdu(env, hlen)?;
                        work += 1;
                        continue;
                    }
                }
                if reads == MAX_READS || !self.rx.fill(fd)? {
                    break;
                }
                reads += 1;
                continue;
            };
            if cur.got < cur.payload {
                if self.rx.avail() > 0 {
                    self.place_buffered(env)?;
                } else if matches!(cur.target, Target::Small) {
                    if reads == MAX_READS || !self.rx.fill(fd)? {
                        break;
                    }
                    reads += 1;
                } else {
                    if reads == MAX_READS || !self.place_direct(env, fd)? {
                        break;
                    }
                    reads += 1;
                }
                continue;
            }
            if self.rx.avail() >= cur.trailer_len() {
                self.end_fpdu(env)?;
                work += 1;
                continue;
            }
            if reads == MAX_READS || !self.rx.fill(fd)? {
                break;
            }
            reads += 1;
        }
        Ok(work)
    }

    /// Reads and drops whatever comes (the queue pair failed); closes the
    /// connection when the peer does.
    fn drain(&mut self, env: &mut Env<'_>, fd: i32) -> Result<usize, Failure> {
        for _ in 0..MAX_READS {
            match sock::recv(fd, &mut self.rx.buf[..]) {
                Ok(Recv::Data(_)) => {}
                Ok(Recv::WouldBlock) => return Ok(1),
                Ok(Recv::Eof) | Err(_) => {
                    self.close_conn(env);
                    return Ok(1);
                }
            }
        }
        Ok(1)
    }

    /// Decodes the header at the buffer's start and decides where the
    /// payload goes.
    fn begin_fpdu(&mut self, env: &mut Env<'_>, hlen: usize) -> Result<(), Failure> {
        let rx = &mut self.rx;
        let mut hdr = [0u8; fpdu::PREFIX_LEN + MAX_HDR_LEN];
        hdr[..hlen].copy_from_slice(&rx.buf[rx.start..rx.start + hlen]);
        rx.start += hlen;
        let ulpdu = usize::from(u16::from_be_bytes([hdr[0], hdr[1]]));
        let ddp_bytes = &hdr[fpdu::PREFIX_LEN..hlen];
        let tagged = hlen - fpdu::PREFIX_LEN == ddp::TAGGED_HDR_LEN;
        if ulpdu < ddp_bytes.len() {
            return Err(Failure::Terminate(Terminate::new(
                TermCause::RDMAP_CATASTROPHIC_STREAM,
            )));
        }
        let ddp = match DdpHeader::decode(ddp_bytes) {
            Ok((h, _)) => h,
            Err(e) => return Err(term_for(header_error(&e, tagged), ddp_bytes, ulpdu, None)),
        };
        let mut crc = Crc32c::new();
        if self.conn.as_ref().is_some_and(|c| c.crc) {
            crc.update(&hdr[..hlen]);
        }
        let fresh = Fpdu {
            hdr,
            hlen,
            ddp,
            ulpdu,
            payload: ulpdu - (hlen - fpdu::PREFIX_LEN),
            got: 0,
            crc,
            target: Target::Nothing,
            small: [0; SMALL],
        };
        let mut f = match self.rx.spare.take() {
            Some(mut b) => {
                *b = fresh;
                b
            }
            None => Box::new(fresh),
        };
        f.target = self.classify(env, &f)?;
        self.rx.cur = Some(f);
        Ok(())
    }

    /// Checks a segment's header against the queue pair's state.
    fn classify(&mut self, env: &mut Env<'_>, f: &Fpdu) -> Result<Target, Failure> {
        let len = f.payload;
        match f.ddp {
            DdpHeader::Tagged {
                opcode: Opcode::Write,
                stag,
                to,
                last,
            } => {
                if let Some(rtr) = self.rx.rtr {
                    if rtr == Rtr::Write && len == 0 && last {
                        return Ok(Target::RtrWrite);
                    }
                    return Err(f.term(TermCause::LLP_NO_RTR, None));
                }
                if len == 0 {
                    return Ok(Target::Nothing);
                }
                let tables = env.shared.tables.read();
                match tables.check_remote(stag, self.init.pd, Access::REMOTE_WRITE, to, len as u64)
                {
                    Ok(()) => Ok(Target::Mem {
                        addr: to,
                        stag: Some(stag),
                    }),
                    Err(r) => Err(f.term(refusal_ddp(r), None)),
                }
            }
            DdpHeader::Tagged { stag, to, last, .. } => {
                // A Read Response: it must continue the oldest READ.
                if self.rx.rtr.is_some() {
                    return Err(f.term(TermCause::LLP_NO_RTR, None));
                }
                let Some(r) = self.orq.front() else {
                    return Err(f.term(TermCause::RDMAP_UNEXPECTED_OPCODE, None));
                };
                let off = self.rx.rresp_off;
                let end = off + len as u64;
                if stag != r.sink_stag {
                    return Err(f.term(TermCause::DDP_TAGGED_INVALID_STAG, None));
                }
                if to != r.sink_to.wrapping_add(off)
                    || end > u64::from(r.size)
                    || (last && end != u64::from(r.size))
                {
                    return Err(f.term(TermCause::DDP_TAGGED_BASE_BOUNDS, None));
                }
                Ok(if len == 0 {
                    Target::Nothing
                } else {
                    Target::Mem {
                        addr: r.sink_to + off,
                        stag: None,
                    }
                })
            }
            DdpHeader::Untagged {
                opcode,
                qn,
                msn,
                mo,
                last,
                ..
            } => {
                if opcode.qn() != Some(qn) {
                    return Err(f.term(TermCause::DDP_UNTAGGED_INVALID_QN, None));
                }
                match qn {
                    QN_SEND => {
                        if self.rx.rtr.is_some() {
                            return Err(f.term(TermCause::LLP_NO_RTR, None));
                        }
                        if msn != self.rx.msn_send {
                            return Err(f.term(TermCause::DDP_UNTAGGED_INVALID_MSN, None));
                        }
                        if u64::from(mo) != self.rx.send_mo {
                            return Err(f.term(TermCause::DDP_UNTAGGED_INVALID_MO, None));
                        }
                        if self.rq.is_empty() && mo == 0 {
                            // A queue pair on a shared receive queue takes
                            // the SEND's receive as its first segment comes.
                            let srq = self.init.srq.and_then(|s| env.srqs.get_mut(s.0));
                            if let Some(r) = srq.and_then(|s| s.take()) {
                                self.rq.push_back(r);
                            }
                        }
                        let Some(r) = self.rq.front() else {
                            return Err(f.term(TermCause::DDP_UNTAGGED_NO_BUFFER, None));
                        };
                        if u64::from(mo) + len as u64 > r.len {
                            return Err(f.term(TermCause::DDP_UNTAGGED_TOO_LONG, None));
                        }
                        Ok(Target::Recv { mo: u64::from(mo) })
                    }
                    QN_READ_REQ => {
                        if self.rx.rtr == Some(Rtr::Write) {
                            return Err(f.term(TermCause::LLP_NO_RTR, None));
                        }
                        if msn != self.rx.msn_rreq {
                            return Err(f.term(TermCause::DDP_UNTAGGED_INVALID_MSN, None));
                        }
                        if mo != 0 || !last {
                            return Err(f.term(TermCause::DDP_UNTAGGED_INVALID_MO, None));
                        }
                        if len != READ_REQ_LEN {
                            return Err(f.term(TermCause::RDMAP_CATASTROPHIC_STREAM, None));
                        }
                        Ok(Target::Small)
                    }
                    QN_TERMINATE if len <= SMALL => Ok(Target::Small),
                    _ => Err(f.term(TermCause::RDMAP_CATASTROPHIC_STREAM, None)),
                }
            }
        }
    }

    /// Ranges for the next `len` payload bytes of the current FPDU.
    fn dest(&self, f: &Fpdu, len: usize, out: &mut [libc::iovec; MAX_SGE + 1]) -> usize {
        match f.target {
            Target::Mem { addr, .. } => {
                out[0] = libc::iovec {
                    iov_base: (addr + f.got as u64) as *mut libc::c_void,
                    iov_len: len,
                };
                1
            }
            Target::Recv { mo } => match self.rq.front() {
                Some(r) => sge_ranges(
                    &r.sges[..r.nsge],
                    mo + f.got as u64,
                    len,
                    &mut out[..MAX_SGE],
                ),
                None => 0,
            },
            Target::Small | Target::Nothing | Target::RtrWrite => 0,
        }
    }

    /// Checks again that a peer's WRITE target is registered (under the
    /// lock the caller holds).
    fn recheck(&self, tables: &crate::mr::Tables, f: &Fpdu, len: usize) -> Result<(), Failure> {
        if let Target::Mem {
            addr,
            stag: Some(stag),
        } = f.target
        {
            let at = addr + f.got as u64;
            if let Err(r) =
                tables.check_remote(stag, self.init.pd, Access::REMOTE_WRITE, at, len as u64)
            {
                return Err(f.term(refusal_ddp(r), None));
            }
        }
        Ok(())
    }

    /// Places payload bytes that are in the header buffer.
    fn place_buffered(&mut self, env: &mut Env<'_>) -> Result<(), Failure> {
        let mut f = self.rx.cur.take().expect("an FPDU is being received");
        let n = self.rx.avail().min(f.payload - f.got);
        let src = &self.rx.buf[self.rx.start..self.rx.start + n];
        let crc_on = self.conn.as_ref().is_some_and(|c| c.crc);
        if crc_on {
            f.crc.update(src);
        }
        if let Target::Small = f.target {
            f.small[f.got..f.got + n].copy_from_slice(src);
        } else {
            let tables = env.shared.tables.read();
            self.recheck(&tables, &f, n)?;
            let mut iov = [sock::iovec(&[]); MAX_SGE + 1];
            let k = self.dest(&f, n, &mut iov);
            let mut at = 0;
            for v in &iov[..k] {
                // SAFETY: the range was validated as a destination: a
                // registered region with REMOTE_WRITE (checked again under
                // the lock held here), a READ sink or a posted receive
                // (valid by the posting contract); `src` is the engine's
                // own buffer, which cannot overlap it.
                unsafe {
                    std::ptr::copy_nonoverlapping(src[at..].as_ptr(), v.iov_base.cast(), v.iov_len)
                };
                at += v.iov_len;
            }
        }
        f.got += n;
        self.rx.start += n;
        self.rx.cur = Some(f);
        Ok(())
    }

    /// Reads payload straight into its destination, and what follows into
    /// the header buffer. `Ok(false)` when nothing was there.
    fn place_direct(&mut self, env: &mut Env<'_>, fd: i32) -> Result<bool, Failure> {
        if self.rx.drained {
            return Ok(false);
        }
        let mut f = self.rx.cur.take().expect("an FPDU is being received");
        let want = f.payload - f.got;
        let tables = env.shared.tables.read();
        self.recheck(&tables, &f, want)?;
        let mut iov = [sock::iovec(&[]); MAX_SGE + 1];
        let k = self.dest(&f, want, &mut iov);
        self.rx.start = 0;
        self.rx.end = 0;
        iov[k] = libc::iovec {
            iov_base: self.rx.buf.as_mut_ptr().cast(),
            iov_len: RXBUF,
        };
        // SAFETY: the destination ranges were validated (see
        // `place_buffered`; the region table's read lock is held), the
        // last range is the engine's own buffer.
        let res = unsafe { sock::recvv(fd, &iov[..=k]) };
        let n = match res {
            Ok(Recv::Data(n)) => n,
            Ok(Recv::WouldBlock) => {
                self.rx.cur = Some(f);
                return Ok(false);
            }
            Ok(Recv::Eof) => {
                self.rx.cur = Some(f);
                return Err(self.rx.eof());
            }
            Err(e) => {
                return Err(Failure::Lost {
                    abrupt: true,
                    why: format!("receive: {e}"),
                })
            }
        };
        self.rx.drained = n < want + RXBUF;
        let placed = n.min(want);
        if self.conn.as_ref().is_some_and(|c| c.crc) {
            let mut left = placed;
            for v in &iov[..k] {
                let take = v.iov_len.min(left);
                // SAFETY: these bytes were just written by recvmsg into a
                // validated destination; the lock is still held.
                f.crc
                    .update(unsafe { std::slice::from_raw_parts(v.iov_base.cast::<u8>(), take) });
                left -= take;
            }
        }
        drop(tables);
        f.got += placed;
        self.rx.end = n - placed;
        self.rx.cur = Some(f);
        Ok(true)
    }

    /// Checks the trailer, then acts on the complete FPDU.
    fn end_fpdu(&mut self, env: &mut Env<'_>) -> Result<(), Failure> {
        let mut f = self.rx.cur.take().expect("an FPDU is being received");
        let pad = fpdu::pad_len(f.ulpdu);
        let s = self.rx.start;
        let trailer = [
            self.rx.buf[s + pad],
            self.rx.buf[s + pad + 1],
            self.rx.buf[s + pad + 2],
            self.rx.buf[s + pad + 3],
        ];
        if self.conn.as_ref().is_some_and(|c| c.crc) {
            f.crc.update(&self.rx.buf[s..s + pad]);
            if f.crc.finish() != fpdu::crc_from_trailer(trailer) {
                return Err(f.term(TermCause::LLP_CRC, None));
            }
        }
        self.rx.start += pad + fpdu::CRC_LEN;
        let res = self.finish(env, &f);
        self.rx.spare = Some(f);
        res
    }

    /// Acts on a received FPDU.
    fn finish(&mut self, env: &mut Env<'_>, f: &Fpdu) -> Result<(), Failure> {
        let len = f.payload as u64;
        match f.ddp {
            DdpHeader::Tagged {
                opcode: Opcode::Write,
                ..
            } => {
                if let Target::RtrWrite = f.target {
                    self.rtr_received(env);
                }
            }
            DdpHeader::Tagged { last, .. } => {
                self.rx.rresp_off += len;
                if last {
                    self.rx.rresp_off = 0;
                    if let Some(r) = self.orq.pop_front() {
                        if let Some(wr_id) = r.wr_id {
                            self.complete_send(
                                env.out,
                                wr_id,
                                r.signaled,
                                WcStatus::Success,
                                WcOpcode::RdmaRead,
                                r.size,
                            );
                        }
                    }
                }
            }
            DdpHeader::Untagged {
                qn: QN_SEND,
                opcode,
                inv_stag,
                last,
                ..
            } => {
                self.rx.send_mo += len;
                if last {
                    let mut invalidated = None;
                    if opcode.invalidates() {
                        if !env.shared.tables.write().invalidate(inv_stag, self.init.pd) {
                            return Err(f.term(TermCause::RDMAP_CANT_INVALIDATE, None));
                        }
                        invalidated = Some(inv_stag);
                    }
                    let r = self.rq.pop_front().expect("the receive was checked");
                    let mut wc = self.wc(
                        r.wr_id,
                        WcStatus::Success,
                        WcOpcode::Recv,
                        self.rx.send_mo as u32,
                    );
                    wc.solicited = opcode.solicited();
                    wc.invalidated_rkey = invalidated;
                    env.out.complete(self.init.recv_cq, wc);
                    self.rx.send_mo = 0;
                    self.rx.msn_send = self.rx.msn_send.wrapping_add(1);
                }
            }
            DdpHeader::Untagged {
                qn: QN_READ_REQ, ..
            } => {
                let body = &f.small[..READ_REQ_LEN];
                let rr = ReadRequest::decode(body)
                    .map_err(|_| f.term(TermCause::RDMAP_CATASTROPHIC_STREAM, None))?;
                self.rx.msn_rreq = self.rx.msn_rreq.wrapping_add(1);
                let resp = ReadResp {
                    sink_stag: rr.sink_stag,
                    sink_to: rr.sink_to,
                    src_stag: rr.src_stag,
                    src_to: rr.src_to,
                    size: rr.size,
                };
                if self.rx.rtr == Some(Rtr::Read) {
                    if rr.size != 0 {
                        return Err(f.term(TermCause::LLP_NO_RTR, Some(body)));
                    }
                    self.irq.push_back(resp);
                    self.rtr_received(env);
                    return Ok(());
                }
                if self.irq.len() >= self.ird.max(1) as usize {
                    return Err(f.term(TermCause::RDMAP_CATASTROPHIC_STREAM, Some(body)));
                }
                let tables = env.shared.tables.read();
                let check = tables.check_remote(
                    rr.src_stag,
                    self.init.pd,
                    Access::REMOTE_READ,
                    rr.src_to,
                    u64::from(rr.size),
                );
                drop(tables);
                if let Err(r) = check {
                    return Err(f.term(refusal_rdmap(r), Some(body)));
                }
                self.irq.push_back(resp);
            }
            DdpHeader::Untagged { .. } => {
                // A Terminate (the only other queue classify lets through).
                return Err(match Terminate::decode(&f.small[..f.payload]) {
                    Ok(t) => Failure::Terminated(t.cause),
                    Err(e) => Failure::Lost {
                        abrupt: true,
                        why: format!("malformed Terminate: {e}"),
                    },
                });
            }
        }
        Ok(())
    }

    /// The awaited ready-to-receive message arrived: full operation.
    fn rtr_received(&mut self, env: &mut Env<'_>) {
        self.rx.rtr = None;
        self.tx.hold = false;
        if let Some(c) = self.conn.as_mut() {
            c.phase = Phase::Rts;
        }
        self.state = QpState::Rts;
        self.established = true;
        env.out.cm(CmEvent::Established {
            qp: self.id,
            param: self.param.clone(),
        });
    }
}
