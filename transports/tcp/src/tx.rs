//! The sending half of a connection: its backlog.
//!
//! Frames go straight to the socket. What the socket does not take stays in
//! the backlog: copied bytes in `buf` (at most the limit given to
//! [`TxState::new`]) followed, for a zero-copy send, by the caller's
//! remaining iov. While there is a backlog
//! (or the connection is not open yet), copy sends are appended to `buf`
//! if they fit, without a system call, and zero-copy sends are refused;
//! [`TxState::flush_out`] writes the backlog with one `sendmsg` per call.
//!
//! Invariant: nothing is appended behind a zero-copy tail, so the tail is
//! the last thing in the backlog and completes exactly when the backlog
//! drains.
//!
//! Memory: `buf` is allocated only when something must wait (the socket is
//! full, or the connection is not open yet), grows on demand up to the
//! limit, and is kept while the connection is busy; [`TxState::release`]
//! frees it once the backlog is gone. A young connection (fewer than
//! [`YOUNG_DRAINS`] drained backlogs, such as the frames queued while it
//! was being established) frees it as soon as it drains. Small sends with
//! no backlog are assembled on the stack, so a connection that never backs
//! up holds no send buffer.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;

use uct::{EpId, Iov, Token};

use crate::config::MAX_IOV;
use crate::idle::YOUNG_DRAINS;
use crate::sys;
use crate::wire::FRAME_HDR;

/// Copy sends at most this long are assembled in `buf` and sent with one
/// `send`; longer ones are written with `sendmsg` from the caller's parts.
const COPY_MAX: usize = 2048;
/// Most parts of a copy send written without assembling them.
const MAX_PARTS: usize = 8;
/// The first allocation of a backlog.
const BACKLOG_FIRST: usize = 1024;

const NO_IOVEC: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};
const NO_IOV: Iov = Iov {
    ptr: std::ptr::null(),
    len: 0,
};

fn iovec_of(r: &Iov) -> libc::iovec {
    libc::iovec {
        iov_base: r.ptr.cast_mut().cast(),
        iov_len: r.len,
    }
}

/// Whom the caller memory in a zero-copy tail belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZcOwner {
    /// An `am_zcopy` of this endpoint: complete when its bytes have left.
    Am(EpId, Token),
    /// The data of a put of this endpoint: the put completes on its
    /// acknowledgement, not when the bytes have left.
    Put(EpId),
}

impl ZcOwner {
    fn ep(self) -> EpId {
        match self {
            ZcOwner::Am(ep, _) | ZcOwner::Put(ep) => ep,
        }
    }

    /// The operation to complete once the bytes have left.
    fn am(self) -> Option<(EpId, Token)> {
        match self {
            ZcOwner::Am(ep, t) => Some((ep, t)),
            ZcOwner::Put(_) => None,
        }
    }
}

/// The caller memory of a zero-copy send not yet written.
#[derive(Debug)]
struct ZcopyTail {
    iov: [Iov; MAX_IOV],
    /// First entry not yet fully written.
    idx: usize,
    count: usize,
    /// Whose memory it is; `None` once detached (copied).
    owner: Option<ZcOwner>,
    /// The rest of a detached send, copied (see `detach_zcopy`).
    owned: Vec<u8>,
}

/// What [`TxState::flush_out`] achieved.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flushed {
    /// The socket is full; more remains.
    Partial,
    /// The backlog is gone; an `am_zcopy` in it completed.
    Drained(Option<(EpId, Token)>),
}

/// The backlog of a connection.
#[derive(Debug)]
pub(crate) struct TxState {
    /// Unsent bytes are `buf[off..]`.
    buf: Vec<u8>,
    off: usize,
    /// Most bytes `buf` may hold for copy sends appended to a backlog
    /// (the iface's `tx_buf`, well below 4 GiB).
    cap: u32,
    /// Boxed: most connections never have one. The box of a finished
    /// tail stays for the next one, so it is the tail only while `zc_live`.
    zc: Option<Box<ZcopyTail>>,
    zc_live: bool,
    /// Backlogs drained so far, counted up to [`YOUNG_DRAINS`].
    drains: u8,
}

impl TxState {
    /// A backlog taking copy sends up to `cap` bytes; nothing allocated.
    pub(crate) fn new(cap: usize) -> TxState {
        TxState {
            buf: Vec::new(),
            off: 0,
            cap: u32::try_from(cap).unwrap_or(u32::MAX),
            zc: None,
            zc_live: false,
            drains: 0,
        }
    }

    fn cap(&self) -> usize {
        self.cap as usize
    }

    /// Bytes of heap memory held.
    pub(crate) fn held(&self) -> usize {
        let boxes = usize::from(self.zc.is_some());
        let owned = self.tail().map_or(0, |z| z.owned.capacity());
        self.buf.capacity() + owned + boxes * size_of::<ZcopyTail>()
    }

    /// The zero-copy tail, if there is one.
    fn tail(&self) -> Option<&ZcopyTail> {
        self.zc.as_deref().filter(|_| self.zc_live)
    }

    /// Ends the zero-copy tail, keeping its box; returns its owner.
    fn take_zc(&mut self) -> Option<ZcOwner> {
        if !std::mem::replace(&mut self.zc_live, false) {
            return None;
        }
        let z = self.zc.as_mut()?;
        z.owned = Vec::new();
        z.owner
    }

    /// Frees the buffers if nothing waits in them. Returns whether none
    /// is held.
    pub(crate) fn release(&mut self) -> bool {
        if !self.has_backlog() && !self.zc_live {
            self.buf = Vec::new();
            self.off = 0;
            self.zc = None;
        }
        self.held() == 0
    }

    /// Makes room for `extra` more bytes in `buf`: doubling, from
    /// [`BACKLOG_FIRST`], but not past the limit unless one frame needs it.
    fn reserve(&mut self, extra: usize) {
        let want = self.buf.len() + extra;
        if want > self.buf.capacity() {
            let target = (self.buf.capacity() * 2)
                .max(BACKLOG_FIRST)
                .min(self.cap())
                .max(want);
            self.buf.reserve_exact(target - self.buf.len());
        }
    }

    /// Whether a copy frame of `need` bytes (header included) may join
    /// the backlog now: small, no zero-copy tail, and room left.
    pub(crate) fn can_hold(&self, need: usize) -> bool {
        need <= FRAME_HDR + COPY_MAX
            && !self.zc_live
            && self.buf.len() - self.off + need <= self.cap()
    }

    /// Whether bytes of posted operations are still in this process.
    pub(crate) fn has_backlog(&self) -> bool {
        self.off < self.buf.len() || self.tail().is_some_and(|z| z.idx < z.count)
    }

    /// Sends or buffers one frame of `hdr` and `parts` (`total` bytes after
    /// the header). `fd` is `None` while the connection is not open: the
    /// frame is only buffered. `Ok(false)`: no room, nothing done.
    pub(crate) fn post_copy(
        &mut self,
        fd: Option<RawFd>,
        hdr: &[u8; FRAME_HDR],
        parts: &[&[u8]],
        total: usize,
    ) -> io::Result<bool> {
        let need = FRAME_HDR + total;
        let fd = match fd {
            Some(fd) if !self.has_backlog() => fd,
            _ => {
                if self.zc_live {
                    // Nothing goes behind a zero-copy tail.
                    return Ok(false);
                }
                if self.buf.len() + need > self.cap() {
                    if self.buf.len() - self.off + need > self.cap() {
                        return Ok(false);
                    }
                    self.buf.drain(..self.off);
                    self.off = 0;
                }
                if self.buf.capacity() == 0 {
                    // Not open yet (an open connection with a backlog
                    // holds a buffer): the frames queued while it opens
                    // are few, so the first takes just its size.
                    self.buf.reserve_exact(need);
                } else {
                    self.reserve(need);
                }
                self.append(hdr, parts);
                return Ok(true);
            }
        };
        if total <= COPY_MAX {
            return self.send_small(fd, hdr, parts, need);
        }
        if parts.len() >= MAX_PARTS {
            self.buf.clear();
            self.off = 0;
            self.reserve(need);
            self.append(hdr, parts);
            let n = sys::send(fd, &self.buf)?;
            if n == self.buf.len() {
                self.buf.clear();
            } else {
                self.off = n;
            }
            return Ok(true);
        }
        let mut v = [NO_IOVEC; MAX_PARTS];
        v[0] = sys::iovec(hdr);
        let mut k = 1;
        for p in parts.iter().filter(|p| !p.is_empty()) {
            v[k] = sys::iovec(p);
            k += 1;
        }
        // SAFETY: every iovec describes `hdr` or a part, borrowed for the
        // call.
        let n = unsafe { sys::sendv(fd, &v[..k]) }?;
        if n < need {
            // Keep what the socket did not take.
            self.buf.clear();
            self.off = 0;
            self.reserve(need - n);
            let mut skip = n;
            for chunk in std::iter::once(&hdr[..]).chain(parts.iter().copied()) {
                if skip >= chunk.len() {
                    skip -= chunk.len();
                } else {
                    self.buf.extend_from_slice(&chunk[skip..]);
                    skip = 0;
                }
            }
        }
        Ok(true)
    }

    /// Assembles a frame of `need <= FRAME_HDR + COPY_MAX` bytes on the
    /// stack and sends it with one `send`, with no backlog; what the socket
    /// does not take becomes the backlog.
    fn send_small(
        &mut self,
        fd: RawFd,
        hdr: &[u8; FRAME_HDR],
        parts: &[&[u8]],
        need: usize,
    ) -> io::Result<bool> {
        let mut frame = [MaybeUninit::<u8>::uninit(); FRAME_HDR + COPY_MAX];
        let mut at = 0;
        for p in std::iter::once(&hdr[..]).chain(parts.iter().copied()) {
            let n = p.len().min(frame.len() - at);
            // SAFETY: `at + n <= frame.len()`; `p` is borrowed, and cannot
            // overlap the local `frame`.
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr(), frame[at..].as_mut_ptr().cast(), n)
            };
            at += n;
        }
        debug_assert_eq!(at, need);
        // SAFETY: the first `at` bytes of `frame` were written above.
        let bytes = unsafe { std::slice::from_raw_parts(frame.as_ptr().cast::<u8>(), at) };
        let n = sys::send(fd, bytes)?;
        if n < at {
            self.buf.clear();
            self.off = 0;
            self.reserve(at - n);
            self.buf.extend_from_slice(&bytes[n..]);
        }
        Ok(true)
    }

    fn append(&mut self, hdr: &[u8; FRAME_HDR], parts: &[&[u8]]) {
        self.buf.extend_from_slice(hdr);
        for p in parts {
            self.buf.extend_from_slice(p);
        }
    }

    /// Sends `hdr`, `header` and the memory of `iov` as one frame on an open
    /// connection. `None`: there is a backlog, nothing done. `Some(false)`:
    /// all sent. `Some(true)`: the rest of `iov` stays in use until
    /// [`Flushed::Drained`] returns `(ep, token)` (or it is detached or
    /// aborted). Puts pass [`ZcOwner::Put`]: for them, nothing completes
    /// when the backlog drains.
    ///
    /// # Safety
    ///
    /// The ranges of `iov` are readable now and, when `Some(true)` is
    /// returned, stay valid and unchanged until then.
    pub(crate) unsafe fn post_zcopy(
        &mut self,
        fd: RawFd,
        hdr: &[u8; FRAME_HDR],
        header: &[u8],
        iov: &[Iov],
        owner: ZcOwner,
    ) -> io::Result<Option<bool>> {
        if self.has_backlog() {
            return Ok(None);
        }
        let mut v = [NO_IOVEC; 2 + MAX_IOV];
        v[0] = sys::iovec(hdr);
        v[1] = sys::iovec(header);
        let mut k = 2;
        let mut total = FRAME_HDR + header.len();
        for r in iov.iter().filter(|r| r.len > 0) {
            v[k] = iovec_of(r);
            k += 1;
            total += r.len;
        }
        // SAFETY: hdr and header are borrowed for the call; the caller
        // vouches for the ranges of `iov`.
        let n = unsafe { sys::sendv(fd, &v[..k]) }?;
        if n == total {
            return Ok(Some(false));
        }
        self.buf.clear();
        self.off = 0;
        let head = FRAME_HDR + header.len();
        if n < FRAME_HDR {
            self.buf.extend_from_slice(&hdr[n..]);
            self.buf.extend_from_slice(header);
        } else if n < head {
            self.buf.extend_from_slice(&header[n - FRAME_HDR..]);
        }
        let mut skip = n.saturating_sub(head);
        let mut tail = self.zc.take().unwrap_or_else(|| {
            Box::new(ZcopyTail {
                iov: [NO_IOV; MAX_IOV],
                idx: 0,
                count: 0,
                owner: None,
                owned: Vec::new(),
            })
        });
        tail.idx = 0;
        tail.count = 0;
        tail.owner = Some(owner);
        for r in iov.iter().filter(|r| r.len > 0) {
            if skip >= r.len {
                skip -= r.len;
                continue;
            }
            tail.iov[tail.count] = Iov {
                // skip < len keeps the pointer inside the range.
                ptr: r.ptr.wrapping_add(skip),
                len: r.len - skip,
            };
            tail.count += 1;
            skip = 0;
        }
        self.zc = Some(tail);
        self.zc_live = true;
        Ok(Some(true))
    }

    /// Writes the backlog with one `sendmsg`.
    pub(crate) fn flush_out(&mut self, fd: RawFd) -> io::Result<Flushed> {
        if self.has_backlog() {
            let mut v = [NO_IOVEC; 1 + MAX_IOV];
            let mut k = 0;
            if self.off < self.buf.len() {
                v[0] = sys::iovec(&self.buf[self.off..]);
                k = 1;
            }
            if let Some(z) = self.tail() {
                for r in &z.iov[z.idx..z.count] {
                    v[k] = iovec_of(r);
                    k += 1;
                }
            }
            // SAFETY: the first iovec is within `buf`; the others are the
            // rest of a zero-copy send, valid until it completes (contract
            // of `post_zcopy`) or within the tail's `owned` copy once detached.
            let n = unsafe { sys::sendv(fd, &v[..k]) }?;
            self.advance(n);
            if self.has_backlog() {
                return Ok(Flushed::Partial);
            }
        }
        self.buf.clear();
        self.off = 0;
        let owner = self.take_zc().and_then(ZcOwner::am);
        if self.drains < YOUNG_DRAINS && self.held() > 0 {
            // A young connection (its handshake, a few messages): what it
            // buffered goes back at once; a busy one keeps its buffers.
            self.drains += 1;
            self.buf = Vec::new();
            self.zc = None;
        }
        Ok(Flushed::Drained(owner))
    }

    fn advance(&mut self, mut n: usize) {
        let in_buf = (self.buf.len() - self.off).min(n);
        self.off += in_buf;
        n -= in_buf;
        if let Some(z) = self.zc.as_mut().filter(|_| self.zc_live) {
            while n > 0 && z.idx < z.count {
                let r = &mut z.iov[z.idx];
                let step = r.len.min(n);
                r.ptr = r.ptr.wrapping_add(step);
                r.len -= step;
                n -= step;
                if r.len == 0 {
                    z.idx += 1;
                }
            }
        }
    }

    /// Copies the rest of `ep`'s unfinished zero-copy send (an `am_zcopy`
    /// or a put's data), if any, so that the frame can still be finished
    /// without the caller's memory; returns the `am_zcopy`'s token.
    pub(crate) fn detach_zcopy(&mut self, ep: EpId) -> Option<Token> {
        if !self.zc_live {
            return None;
        }
        let z = self.zc.as_mut()?;
        let owner = z.owner?;
        if owner.ep() != ep {
            return None;
        }
        let mut rest = Vec::new();
        for r in &z.iov[z.idx..z.count] {
            // SAFETY: the range is still valid: its operation has not been
            // reported complete (contract of `post_zcopy`).
            rest.extend_from_slice(unsafe { std::slice::from_raw_parts(r.ptr, r.len) });
        }
        z.owned = rest;
        z.iov[0] = Iov::from_slice(&z.owned);
        z.idx = 0;
        z.count = usize::from(!z.owned.is_empty());
        z.owner = None;
        owner.am().map(|(_, t)| t)
    }

    /// Drops the backlog; returns the owner of an unfinished `am_zcopy`.
    pub(crate) fn abort(&mut self) -> Option<(EpId, Token)> {
        self.buf.clear();
        self.off = 0;
        self.take_zc().and_then(ZcOwner::am)
    }

    /// Appends the buffered frames of `other`, a connection that never sent
    /// any (it was not open), leaving it empty.
    pub(crate) fn absorb(&mut self, other: &mut TxState) {
        if !self.has_backlog() {
            self.buf.clear();
            self.off = 0;
            std::mem::swap(&mut self.buf, &mut other.buf);
        } else {
            self.buf.extend_from_slice(&other.buf[other.off..]);
            other.buf.clear();
        }
        other.off = 0;
    }
}
