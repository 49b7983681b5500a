//! What a peer's protocol messages name: where to answer it, and the
//! buffers it offers. Carried by [`crate::proto::command::Command`]s and
//! kept in the protocol state; a leaf, importing no protocol module.

use crate::uct::SrcId;

/// Where to send the acknowledgement of a synchronous send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AckTo {
    pub(crate) iface: usize,
    pub(crate) src: SrcId,
    pub(crate) sreq: u64,
}

/// A sender's buffer offered for reading (rendezvous by get).
#[derive(Debug, Clone)]
pub(crate) struct RemoteBuf {
    pub(crate) addr: u64,
    pub(crate) rkey: crate::uct::RemoteKey,
}

/// A receiver's offer of (part of) its buffer, from the wire
/// (`RNDV_RTR_PUT`, or `RNDV_RTR_SPLIT` for a tail).
#[derive(Debug)]
pub(crate) struct PutOffer {
    /// The send it answers, and the receive request on the other side.
    pub(crate) sreq: u64,
    pub(crate) rreq: u64,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) key: Vec<u8>,
    /// The tail of a split rendezvous by get, not a whole buffer.
    pub(crate) is_tail: bool,
}
