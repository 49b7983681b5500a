//! What the worker keeps of active messages on their way in: whole ones
//! waiting for their handlers, ones still arriving in fragments, and a
//! rendezvous announcement while its wrapped request is decoded (the
//! protocols are `am.rs` and `am_rndv.rs`).

use super::am_wire::{AmFrag, AmRts};
use crate::ucs::slab::SlabId;
use crate::uct::SrcId;

/// An active message that arrived whole, until its handler runs.
#[derive(Debug)]
pub(crate) struct AmArrival {
    pub(crate) id: u16,
    /// The user header, then the data.
    pub(crate) bytes: Vec<u8>,
    pub(crate) hdr_len: usize,
    /// Where the sender's messages come from, if it asked for the
    /// endpoint back to it: `(iface, source)`, resolved when the handler
    /// runs (the endpoint may be made by a wireup carried out after this
    /// message arrived).
    pub(crate) reply_from: Option<(usize, SrcId)>,
    /// A rendezvous message: the probed message that holds its data, and
    /// the data's length (`bytes` is then the user header only).
    pub(crate) rndv: Option<(SlabId, usize)>,
}

/// A message whose fragments are still arriving.
#[derive(Debug)]
pub(crate) struct AmPartial {
    pub(crate) first: AmFrag,
    pub(crate) bytes: Vec<u8>,
}

/// An announcement being decoded: its wrapper and user header, until the
/// wrapped request reaches `rts_arrived`.
#[derive(Debug)]
pub(crate) struct AmRtsIn {
    pub(crate) rts: AmRts,
    pub(crate) header: Vec<u8>,
}
