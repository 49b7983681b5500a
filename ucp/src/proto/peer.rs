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
    /// Keys of further domains of the sender (name, packed), for lanes on
    /// other devices; unpacked by the lanes that read.
    pub(crate) more: Vec<(String, Vec<u8>)>,
}

/// Which part of a message a receiver's offer covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offered {
    /// All of it: a rendezvous by put (`RNDV_RTR_PUT`).
    Whole,
    /// Its first bytes, of a split rendezvous by get (`RNDV_RTR_SPLIT_HEAD`).
    Head,
    /// Its last bytes, of a split rendezvous by get (`RNDV_RTR_SPLIT`).
    Tail,
}

/// A receiver's offer of (part of) its buffer, from the wire.
#[derive(Debug)]
pub(crate) struct PutOffer {
    /// The send it answers, and the receive request on the other side.
    pub(crate) sreq: u64,
    pub(crate) rreq: u64,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) key: Vec<u8>,
    /// What the offer covers.
    pub(crate) part: Offered,
}
