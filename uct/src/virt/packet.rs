//! What a test can see of the traffic: packet descriptions for filters,
//! the verdicts filters give, and the delivery trace.

use super::config::NodeId;
use crate::{AmId, SrcId};

/// Which operation put a packet on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `am_short`.
    Short,
    /// `am_bcopy`.
    Bcopy,
    /// `am_zcopy`.
    Zcopy,
    /// `put_zcopy`: the request, carrying the data, initiator to target.
    Put,
    /// `get_zcopy`: the request, initiator to target (no data).
    Get,
    /// The target's answer to a put: the outcome of the access.
    PutAck,
    /// The target's answer to a get: the data, or the refusal.
    GetReply,
}

impl Op {
    /// Whether the packet belongs to a one-sided operation.
    pub fn is_rma(self) -> bool {
        matches!(self, Op::Put | Op::Get | Op::PutAck | Op::GetReply)
    }

    /// Name for messages, e.g. `"put_zcopy"`.
    pub fn name(self) -> &'static str {
        match self {
            Op::Short => "am_short",
            Op::Bcopy => "am_bcopy",
            Op::Zcopy => "am_zcopy",
            Op::Put => "put_zcopy",
            Op::Get => "get_zcopy",
            Op::PutAck => "put_zcopy acknowledgement",
            Op::GetReply => "get_zcopy reply",
        }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A packet about to go on the wire, as a filter sees it.
#[derive(Debug, Clone, Copy)]
pub struct PacketInfo<'a> {
    /// Sending iface.
    pub from: NodeId,
    /// Receiving iface.
    pub to: NodeId,
    /// Source id the receiver will see; for the packets of a one-sided
    /// operation (both ways), the source id of the initiating endpoint.
    pub src: SrcId,
    /// Active message id; 0 for one-sided operations.
    pub id: AmId,
    /// Operation.
    pub op: Op,
    /// Number of the packet on this net (0, 1, ... in send order).
    pub seq: u64,
    /// Send time.
    pub time: u64,
    /// The message as the receiver would get it; the data of a put or of
    /// a successful get reply; empty for get requests, acknowledgements
    /// and refusals.
    pub data: &'a [u8],
}

/// What a filter decides for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send as the link settings say.
    Pass,
    /// Lose it (breaks the transport contract, like
    /// [`LinkConfig::loss`](super::LinkConfig::loss)).
    Drop,
    /// Add this many nanoseconds of delay (reorders only where the link
    /// allows reordering).
    Delay(u64),
}

/// A test's hook over every packet sent: `net.set_filter(...)`. It runs
/// with the net locked and must not call back into the net.
pub type Filter = Box<dyn FnMut(&PacketInfo<'_>) -> Verdict + Send>;

/// What became of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Handed to the receiver's sink (a message), or carried out at the
    /// target (an RMA request), or applied at the initiator (an RMA reply).
    Delivered,
    /// Lost on the wire (loss or filter).
    Dropped,
    /// Discarded because an endpoint or iface went away first.
    Lost,
}

/// One entry of the delivery trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEvent {
    /// Virtual time of the event.
    pub time: u64,
    /// Number of the packet on the net.
    pub seq: u64,
    /// Sender.
    pub from: NodeId,
    /// Receiver.
    pub to: NodeId,
    /// Source id at the receiver (see [`PacketInfo::src`]).
    pub src: SrcId,
    /// Active message id (0 for one-sided operations).
    pub id: AmId,
    /// Operation.
    pub op: Op,
    /// Length as delivered (see [`PacketInfo::data`]).
    pub len: usize,
    /// What happened.
    pub fate: Fate,
}
