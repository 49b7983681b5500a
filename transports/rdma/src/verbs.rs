//! The data types of verbs semantics: identifiers, memory regions, work
//! requests, work completions, connection-manager and asynchronous events.
//!
//! They follow libibverbs and librdmacm (`ibv_send_wr`, `ibv_wc`,
//! `rdma_cm_event`) in meaning, with Rust types in place of unions and
//! flag words that can disagree.

use std::net::SocketAddr;
use uct::ucs::{AccessDenied, EndpointCause, Error};

mod cause;
pub use cause::{QpFatal, TerminateCause};

pub use uct::Access;

/// A protection domain of a [`Device`](crate::Device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PdId(pub u32);

/// A completion queue of a [`Verbs`](crate::Verbs) context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CqId(pub u32);

/// A queue pair of a [`Verbs`](crate::Verbs) context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpId(pub u32);

/// A shared receive queue of a [`Verbs`](crate::Verbs) context
/// (`ibv_srq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrqId(pub u32);

/// A connection request waiting for [`Verbs::accept`](crate::Verbs::accept)
/// or [`Verbs::reject`](crate::Verbs::reject).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnReqId(pub u32);

/// The wire protocol family of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// InfiniBand.
    Ib,
    /// RDMA over Converged Ethernet.
    Roce,
    /// iWARP (RDMAP/DDP/MPA over TCP).
    Iwarp,
}

impl TransportKind {
    /// Name as `rucx-info -d` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Ib => "InfiniBand",
            TransportKind::Roce => "RoCE",
            TransportKind::Iwarp => "iWARP",
        }
    }
}

/// A device a provider found: what `Provider::open_device` takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name, e.g. `"iwarp_lo"`.
    pub name: String,
    /// The network interface it runs on, e.g. `"lo"`.
    pub netdev: String,
    /// Its IPv4 or IPv6 address (connections are made to and from it).
    pub addr: std::net::IpAddr,
}

/// What a device offers (`ibv_query_device`, trimmed to what rucx uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttr {
    /// Device name.
    pub name: String,
    /// Network interface.
    pub netdev: String,
    /// The interface's address the device uses, IPv4 or IPv6
    /// (connections are made to and from it).
    pub addr: std::net::IpAddr,
    /// Wire protocol.
    pub transport: TransportKind,
    /// Most outstanding work requests per queue.
    pub max_qp_wr: u32,
    /// Most completions a completion queue holds.
    pub max_cqe: u32,
    /// Most receives posted on a shared receive queue.
    pub max_srq_wr: u32,
    /// Most scatter entries per receive of a shared receive queue.
    pub max_srq_sge: u32,
    /// Most scatter/gather entries per send or receive.
    pub max_sge: u32,
    /// Most scatter/gather entries of an RDMA READ's sink (1 on iWARP).
    pub max_sge_rd: u32,
    /// Largest inline send (data copied at post time).
    pub max_inline: u32,
    /// Largest message (SEND, WRITE or READ).
    pub max_msg_size: u64,
    /// Largest memory region.
    pub max_mr_size: u64,
    /// Most RDMA READs a QP may have outstanding as requester (ORD).
    pub max_qp_rd_atom: u32,
    /// Most RDMA READs a QP serves at once as responder (IRD).
    pub max_qp_init_rd_atom: u32,
    /// Whether 64-bit fetch-and-add and compare-and-swap are offered.
    pub atomics: bool,
    /// Largest private data in a connection request or reply.
    pub max_private_data: usize,
    /// A key valid for any memory of this process as a *local* scatter/
    /// gather entry (a userspace engine has one; hardware does not, and
    /// local buffers must then be registered).
    pub local_lkey: Option<u32>,
}

/// A registered memory region (`ibv_mr`).
///
/// `lkey` names it in local scatter/gather entries, `rkey` (the steering
/// tag) in a peer's RDMA operations. Keys are never 0; their low byte is a
/// key byte that changes with every registration of the same slot, so a
/// stale key is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mr {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Rights granted.
    pub access: Access,
    /// Its protection domain.
    pub pd: PdId,
    /// Local key.
    pub lkey: u32,
    /// Remote key (steering tag).
    pub rkey: u32,
}

/// One scatter/gather entry (`ibv_sge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// Start address in this process.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of a region covering the range (or the device's
    /// [`DeviceAttr::local_lkey`]).
    pub lkey: u32,
}

/// The operation of a send work request (`ibv_wr_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND: consumes a receive posted by the peer.
    Send,
    /// SEND with Invalidate: the peer's region `rkey` is invalidated before
    /// the receive completes.
    SendInv {
        /// The peer's steering tag to invalidate.
        rkey: u32,
    },
    /// RDMA WRITE of the gather list to the peer's memory.
    Write {
        /// Destination address in the peer's region.
        remote_addr: u64,
        /// The peer's steering tag.
        rkey: u32,
    },
    /// RDMA READ of the peer's memory into the scatter list.
    Read {
        /// Source address in the peer's region.
        remote_addr: u64,
        /// The peer's steering tag.
        rkey: u32,
    },
    /// 64-bit fetch-and-add (only with [`DeviceAttr::atomics`]).
    FetchAdd {
        /// Address of the 8-byte word.
        remote_addr: u64,
        /// The peer's steering tag.
        rkey: u32,
        /// Value added.
        add: u64,
    },
    /// 64-bit compare-and-swap (only with [`DeviceAttr::atomics`]).
    CmpSwap {
        /// Address of the 8-byte word.
        remote_addr: u64,
        /// The peer's steering tag.
        rkey: u32,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
}

bitflags::bitflags! {
    /// Flags of a send work request (`ibv_send_flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct SendFlags: u32 {
        /// Wait for earlier RDMA READs (and atomics) to complete first.
        const FENCE = 1 << 0;
        /// Generate a completion (always on unless the QP was created with
        /// `sq_sig_all == false`; errors are always reported).
        const SIGNALED = 1 << 1;
        /// Solicited event at the receiver (SEND only).
        const SOLICITED = 1 << 2;
        /// Copy the data at post time (at most `max_inline` bytes); the
        /// gather list needs no valid lkey.
        const INLINE = 1 << 3;
    }
}

/// A send work request (`ibv_send_wr`).
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Caller's id, returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub op: SendOp,
    /// Gather list (sources of SEND and WRITE; for READ the sink, one entry
    /// at most `max_sge_rd`; for atomics the 8-byte result buffer).
    pub sges: &'a [Sge],
    /// Flags.
    pub flags: SendFlags,
}

/// A receive work request (`ibv_recv_wr`).
#[derive(Debug, Clone, Copy)]
pub struct RecvWr<'a> {
    /// Caller's id, returned in the completion.
    pub wr_id: u64,
    /// Scatter list the incoming SEND fills in order.
    pub sges: &'a [Sge],
}

/// Status of a work completion (`ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WcStatus {
    /// Done.
    #[default]
    Success,
    /// A received message was longer than the receive's buffers.
    LocLenErr,
    /// A local scatter/gather entry named no region, or lacked the rights.
    LocProtErr,
    /// The QP went to error before the request was done.
    WrFlushErr,
    /// The peer refused a remote access (key, bounds, rights).
    RemAccessErr,
    /// The peer refused the request as invalid (e.g. no receive posted).
    RemInvReqErr,
    /// The peer could not carry out the operation.
    RemOpErr,
    /// The connection broke.
    FatalErr,
}

impl WcStatus {
    /// The status as an error (`None` for success).
    pub fn to_error(self, what: &str) -> Option<Error> {
        Some(match self {
            WcStatus::Success => return None,
            WcStatus::RemAccessErr => Error::remote_access(
                what.to_string(),
                AccessDenied::Refused("the peer reported a remote access error".into()),
            ),
            WcStatus::LocProtErr => Error::InvalidParam(format!("{what}: local protection error")),
            WcStatus::LocLenErr => Error::InvalidParam(format!("{what}: local length error")),
            WcStatus::WrFlushErr => Error::Canceled,
            s => Error::endpoint_failed(what.to_string(), EndpointCause::transport(s)),
        })
    }
}

/// Which request a completion belongs to (`ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WcOpcode {
    /// A SEND (of any kind) was sent.
    #[default]
    Send,
    /// An RDMA WRITE was sent.
    RdmaWrite,
    /// An RDMA READ's data arrived.
    RdmaRead,
    /// A fetch-and-add's result arrived.
    FetchAdd,
    /// A compare-and-swap's result arrived.
    CmpSwap,
    /// A receive was filled.
    Recv,
}

/// A work completion (`ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// Kind of request.
    pub opcode: WcOpcode,
    /// Bytes received (receives) or transferred (READ).
    pub byte_len: u32,
    /// The queue pair.
    pub qp: Option<QpId>,
    /// For a receive of SEND with Invalidate: the steering tag invalidated.
    pub invalidated_rkey: Option<u32>,
    /// For a receive: the SEND asked for a solicited event.
    pub solicited: bool,
}

/// Queue pair creation attributes (`ibv_qp_init_attr`, RC only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInit {
    /// Protection domain: regions of other domains are refused.
    pub pd: PdId,
    /// Where send completions go.
    pub send_cq: CqId,
    /// Where receive completions go.
    pub recv_cq: CqId,
    /// Most outstanding send work requests.
    pub max_send_wr: u32,
    /// Most posted receives (ignored with `srq`).
    pub max_recv_wr: u32,
    /// Most gather entries per send.
    pub max_send_sge: u32,
    /// Most scatter entries per receive.
    pub max_recv_sge: u32,
    /// Largest inline send.
    pub max_inline: u32,
    /// Every send completes with a completion, whatever its flags.
    pub sq_sig_all: bool,
    /// The shared receive queue incoming SENDs take their receives from
    /// (`ibv_qp_init_attr.srq`); `None` for the queue pair's own receive
    /// queue. A queue pair with one refuses `post_recv`.
    pub srq: Option<SrqId>,
}

/// Shared receive queue creation attributes (`ibv_srq_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqInit {
    /// Protection domain of the receives' scatter entries.
    pub pd: PdId,
    /// Most posted receives.
    pub max_wr: u32,
    /// Most scatter entries per receive.
    pub max_sge: u32,
}

/// State of a queue pair (`ibv_qp_state`, as an RC QP under a connection
/// manager sees it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// Created; receives may be posted, sends wait for the connection.
    Init,
    /// Connecting (request sent, or accepted and waiting for the first
    /// message).
    Connecting,
    /// Connected: sends and receives run.
    Rts,
    /// Failed or disconnected: outstanding requests completed with
    /// [`WcStatus::WrFlushErr`], new ones are flushed at once.
    Error,
}

/// Connection parameters (`rdma_conn_param`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnParam {
    /// Private data carried by the request or reply
    /// (at most [`DeviceAttr::max_private_data`] bytes).
    pub private_data: Vec<u8>,
    /// RDMA READs this side issues at once (ORD, `initiator_depth`).
    pub ord: u32,
    /// RDMA READs this side serves at once (IRD, `responder_resources`).
    pub ird: u32,
}

/// Connection-manager event (`rdma_cm_event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmEvent {
    /// A peer asks to connect to our listener.
    ConnectRequest {
        /// Answer with `accept` or `reject`.
        req: ConnReqId,
        /// The peer's address.
        peer: SocketAddr,
        /// The peer's parameters (its private data, ORD and IRD).
        param: ConnParam,
    },
    /// A queue pair is connected. For the initiator, `param` is the reply's;
    /// for the responder, what it accepted with (after negotiation).
    Established {
        /// The queue pair.
        qp: QpId,
        /// The peer's (initiator) or negotiated (responder) parameters.
        param: ConnParam,
    },
    /// The peer refused our request.
    Rejected {
        /// Our queue pair (now in error).
        qp: QpId,
        /// Private data of the reject.
        private_data: Vec<u8>,
    },
    /// Connecting failed (unreachable, timeout, protocol error).
    ConnectError {
        /// Our queue pair (now in error).
        qp: QpId,
        /// Why, for logs and errors.
        reason: String,
    },
    /// An established connection ended (the peer closed, or either side
    /// terminated); the queue pair is in error.
    Disconnected {
        /// The queue pair.
        qp: QpId,
    },
}

/// Kind of an asynchronous event (`ibv_event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEventKind {
    /// The QP failed (catastrophic error, a Terminate sent or received).
    QpFatal,
    /// A remote access error on this QP (as responder or requester).
    QpAccessErr,
    /// The peer sent a request the QP could not accept.
    QpReqErr,
}

/// An asynchronous event on a queue pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsyncEvent {
    /// The queue pair.
    pub qp: QpId,
    /// Kind.
    pub kind: AsyncEventKind,
    /// What happened, for logs and errors (e.g. the Terminate's layer,
    /// type and code).
    pub detail: String,
    /// The Terminate sent or received, when one ended the queue pair.
    pub terminate: Option<TerminateCause>,
}
