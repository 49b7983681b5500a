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
    /// Complete only once the buffer is full.
    pub(crate) wait_all: bool,
    /// A rendezvous send's data is being fetched into the buffer: the
    /// receive cannot complete or be canceled until that is over.
    pub(crate) fetching: bool,
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
