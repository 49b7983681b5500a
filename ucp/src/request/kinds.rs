//! The state of the stream and active message requests (their protocols
//! are `proto/stream.rs` and `proto/am_rndv.rs`).

use super::buf::RecvBuf;
use crate::proto::am_wire::{AmRts, AM_RTS_HDR};
use crate::ucs::slab::SlabId;
use crate::uct::AmId;

/// A posted stream receive.
#[derive(Debug)]
pub(crate) struct StreamRecvState {
    pub(crate) ep: SlabId,
    pub(crate) buf: RecvBuf,
    /// Bytes written so far.
    pub(crate) filled: usize,
    /// Complete once a multiple of this many bytes is filled (1: any
    /// byte; the capacity: a full buffer, `WAITALL`), or the buffer is
    /// full.
    pub(crate) unit: usize,
    /// A rendezvous send's data is being fetched into the buffer: the
    /// receive cannot complete or be canceled until that is over.
    pub(crate) fetching: bool,
}

impl StreamRecvState {
    /// The unit of a receive into `capacity` bytes: the whole buffer with
    /// `wait_all`, else `elem` (at least 1).
    pub(crate) fn unit_of(capacity: usize, elem: usize, wait_all: bool) -> usize {
        match wait_all {
            true => capacity.max(1),
            false => elem.max(1),
        }
    }

    /// Whether what it holds completes it.
    pub(crate) fn satisfied(&self) -> bool {
        Self::satisfied_by(self.filled, self.buf.capacity(), self.unit)
    }

    /// Whether `filled` bytes complete a receive into `capacity` bytes in
    /// units of `unit`.
    pub(crate) fn satisfied_by(filled: usize, capacity: usize, unit: usize) -> bool {
        filled == capacity || (filled > 0 && (unit == 1 || filled % unit == 0))
    }
}

/// What wraps a rendezvous active message's request to send.
#[derive(Debug)]
pub(crate) struct AmSendInfo {
    pub(crate) id: u16,
    pub(crate) flags: u8,
    pub(crate) header: Vec<u8>,
}

impl AmSendInfo {
    /// The wrapper for a request to send with active message id `inner`.
    pub(crate) fn wrapper(&self, inner: AmId) -> [u8; AM_RTS_HDR] {
        AmRts {
            inner,
            flags: self.flags,
            id: self.id,
            hdr_len: self.header.len() as u32,
        }
        .encode()
    }
}
