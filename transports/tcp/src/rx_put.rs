//! The target side of a put: the data of a PUT frame, written into the
//! registered memory its key names.
//!
//! When the header arrives, the key is checked as a whole (owner, live
//! registration, range, remote write right), so that a refused put writes
//! nothing. Then each piece of data is written as it arrives, from the
//! connection's buffer or received straight from the socket into the
//! destination, each time under [`RegTable::with_range`], which checks
//! again that the registration is live and holds the table's read lock
//! only for that copy or that one `recv`: a deregistration (on another
//! thread, or on this one between two `progress` calls) waits at most for
//! one of them, and no piece is written after it. If the key is refused
//! midway, the rest is read and dropped, and what was written stays.
//!
//! [`RegTable::with_range`]: uct::RegTable::with_range

use std::io;
use std::os::fd::RawFd;

use uct::{Access, KeyFields};

use crate::mem::REGS;
use crate::rx_am::SCRATCH;
use crate::sys::{self, Recv};
use crate::wire::{PutHdr, PutStatus};

/// A put whose data is arriving.
#[derive(Debug)]
pub(crate) struct PutRx {
    seq: u64,
    /// The registration named (only index, generation and secret are
    /// used).
    key: KeyFields,
    addr: u64,
    len: usize,
    /// Bytes consumed so far (written or dropped).
    done: usize,
    status: PutStatus,
}

impl PutRx {
    /// Starts a put announced by `h`, checking its key.
    pub(crate) fn begin(h: &PutHdr) -> PutRx {
        let key = KeyFields {
            index: h.index,
            generation: h.generation,
            secret: h.secret,
            addr: 0,
            len: 0,
            access: Access::empty(),
        };
        let len = h.len as usize;
        let status = if !h.owner.is_me() {
            PutStatus::Foreign
        } else {
            match REGS.with_range(&key, h.addr, len, Access::REMOTE_WRITE, |_| ()) {
                Ok(()) => PutStatus::Ok,
                Err(e) => PutStatus::of_refusal(&e),
            }
        };
        PutRx {
            seq: h.seq,
            key,
            addr: h.addr,
            len,
            done: 0,
            status,
        }
    }

    /// Bytes of data still to come.
    pub(crate) fn left(&self) -> usize {
        self.len - self.done
    }

    /// The put's seq and status, once all its data came.
    pub(crate) fn finished(&self) -> Option<(u64, PutStatus)> {
        (self.done == self.len).then_some((self.seq, self.status))
    }

    /// Where the next byte goes. Cannot wrap while the status is `Ok`
    /// (the whole range lies in a registration).
    fn at(&self) -> u64 {
        self.addr.wrapping_add(self.done as u64)
    }

    /// Takes the next `data.len()` (at most [`PutRx::left`]) bytes, which
    /// arrived in the connection's buffer.
    pub(crate) fn absorb(&mut self, data: &[u8]) {
        debug_assert!(data.len() <= self.left());
        if data.is_empty() {
            return;
        }
        if self.status == PutStatus::Ok {
            let r = REGS.with_range(
                &self.key,
                self.at(),
                data.len(),
                Access::REMOTE_WRITE,
                |dst| {
                    // SAFETY: `with_range` found `data.len()` bytes at `dst`
                    // inside a live registration with remote write rights and
                    // holds the table lock until this returns, so `mem_dereg`
                    // cannot end it meanwhile; `mem_reg`'s caller keeps the
                    // memory valid, and free of Rust references, while it is
                    // registered. `data` is in the connection's own buffer,
                    // which no registration can cover (registered memory
                    // belongs to the caller), so the ranges do not overlap.
                    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) }
                },
            );
            if let Err(e) = r {
                self.status = PutStatus::of_refusal(&e);
            }
        }
        self.done += data.len();
    }

    /// Receives what is left straight into the destination with one
    /// `recv`; when the key is refused, into a scratch buffer on the stack,
    /// to be dropped. Never reads past the put's data.
    pub(crate) fn recv(&mut self, fd: RawFd) -> io::Result<Recv> {
        let want = self.left();
        if want == 0 {
            // Nothing to read into: a recv of 0 bytes would look like EOF.
            return Ok(Recv::WouldBlock);
        }
        if self.status == PutStatus::Ok {
            let r = REGS.with_range(&self.key, self.at(), want, Access::REMOTE_WRITE, |dst| {
                // SAFETY: as in `absorb`: `[dst, dst + want)` lies in a
                // live registration with remote write rights, which stays
                // live (the table is locked) during this one non-blocking
                // `recv`, and whose memory `mem_reg`'s caller keeps valid.
                unsafe { sys::recv_raw(fd, dst, want) }
            });
            match r {
                Ok(got) => {
                    if let Ok(Recv::Data(n)) = got {
                        self.done += n;
                    }
                    return got;
                }
                Err(e) => self.status = PutStatus::of_refusal(&e),
            }
        }
        let mut scratch = [0u8; SCRATCH];
        let n = want.min(SCRATCH);
        let got = sys::recv(fd, &mut scratch[..n]);
        if let Ok(Recv::Data(k)) = got {
            self.done += k;
        }
        got
    }
}
