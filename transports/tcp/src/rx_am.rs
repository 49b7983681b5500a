//! The data of an active message received straight into the place the
//! sink named (`AmSink::am_begin`), instead of into the connection's
//! buffer and copied from there.
//!
//! The sink vouches for the destination until `am_end`; bytes beyond its
//! length are read into a scratch buffer on the stack and dropped.

use std::io;
use std::os::fd::RawFd;

use uct::{AmDest, Token};

use crate::sys::{self, Recv};

/// Smallest message whose data is received straight into a destination
/// (smaller ones are as cheap to copy as to place).
pub(crate) const DIRECT_MIN: usize = 16 * 1024;

/// Bytes read per `recv` of data that is dropped (beyond a destination, or
/// of a refused put): a connection keeps no buffer for it.
pub(crate) const SCRATCH: usize = 4096;

/// An active message whose data is arriving into the sink's destination.
#[derive(Debug)]
pub(crate) struct AmRx {
    dest: AmDest,
    /// Bytes of the message still to come.
    left: usize,
    /// Bytes written to (or dropped beyond) the destination so far.
    done: usize,
}

impl AmRx {
    /// `left` more bytes of the message go to `dest`.
    pub(crate) fn new(dest: AmDest, left: usize) -> AmRx {
        AmRx {
            dest,
            left,
            done: 0,
        }
    }

    /// Bytes still to come.
    pub(crate) fn left(&self) -> usize {
        self.left
    }

    /// The sink's token.
    pub(crate) fn token(&self) -> Token {
        self.dest.token()
    }

    /// Room left in the destination.
    fn room(&self) -> usize {
        self.dest.len().saturating_sub(self.done)
    }

    /// Takes the next `data.len()` (at most [`AmRx::left`]) bytes, which
    /// arrived in the connection's buffer.
    pub(crate) fn absorb(&mut self, data: &[u8]) {
        debug_assert!(data.len() <= self.left);
        let n = data.len().min(self.room());
        if n > 0 {
            // SAFETY: `done + n <= dest.len()`, memory the sink vouches
            // for until `am_end` (AmDest::new's contract); `data` is in the
            // connection's own buffer, which the sink cannot have named.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), self.dest.ptr().add(self.done), n)
            };
        }
        self.done += data.len();
        self.left -= data.len();
    }

    /// Receives what is left with one `recv`: into the destination while
    /// it has room, else into a scratch buffer on the stack, to be dropped. Never
    /// reads past the message.
    pub(crate) fn recv(&mut self, fd: RawFd) -> io::Result<Recv> {
        if self.left == 0 {
            return Ok(Recv::WouldBlock);
        }
        let room = self.room();
        let got = if room > 0 {
            let n = room.min(self.left);
            // SAFETY: `n` bytes at `done` lie in the destination (`n <=
            // room`), valid for writes until `am_end` by AmDest::new's
            // contract.
            unsafe { sys::recv_raw(fd, self.dest.ptr().add(self.done), n) }
        } else {
            let mut scratch = [0u8; SCRATCH];
            let n = self.left.min(SCRATCH);
            sys::recv(fd, &mut scratch[..n])
        };
        if let Ok(Recv::Data(k)) = got {
            self.done += k;
            self.left -= k;
        }
        got
    }
}
