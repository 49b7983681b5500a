//! What the protocols ask the worker to do once an iface's `progress`
//! has returned.
//!
//! Protocol code runs inside an iface's `progress` (as its sink) or inside
//! an API call, where it may not hold the ifaces; work that needs them is
//! recorded as a [`Command`] in the worker's one queue and carried out, in
//! the order recorded, by the executor (`worker/exec.rs`) right after the
//! iface returns. Commands recorded while carrying one out join the end of
//! the queue and run in the same pass. `dispatch.rs` hands each to its
//! protocol.

use crate::proto::peer::{AckTo, PutOffer, RemoteBuf};
use crate::ucs;
use crate::ucs::slab::SlabId;
use crate::uct::{EpId, SrcId};
use crate::wireup::address::WorkerAddress;

/// One piece of deferred protocol work.
#[derive(Debug)]
pub(crate) enum Command {
    /// Transport endpoint `uct_ep` of iface `iface` has room again: resume
    /// what waits on it.
    Resume { iface: usize, uct_ep: EpId },
    /// Answer a keepalive ping on endpoint `ep` (`keepalive.rs`).
    KeepaliveAnswer { ep: crate::ucs::slab::SlabId },
    /// The peer behind source `src` of iface `iface` asked for eager
    /// credit, having charged `sent`, a message charged `need` not fitting
    /// (`credit.rs`).
    CreditRequest {
        iface: usize,
        src: SrcId,
        sent: u64,
        need: u64,
    },
    /// The peer behind source `src` of iface `iface` allows eager sends
    /// up to `limit` bytes charged (`credit.rs`).
    CreditGranted {
        iface: usize,
        src: SrcId,
        limit: u64,
    },
    /// Grant endpoint `ep`'s peer what the budget allows (`credit.rs`).
    CreditGrant { ep: SlabId },
    /// Ask the transport to say when transport endpoint `uct_ep` of iface
    /// `iface` has room (`pending_add`; see `room.rs`).
    AwaitRoom { iface: usize, uct_ep: EpId },
    /// Transport endpoint `uct_ep` of iface `iface` failed: fail the
    /// protocol endpoint it serves.
    FailLane {
        iface: usize,
        uct_ep: EpId,
        error: ucs::Error,
    },
    /// The worker behind source `src` of iface `iface` announced itself:
    /// find or make the endpoint back to it.
    Wireup {
        iface: usize,
        src: SrcId,
        addr: WorkerAddress,
    },
    /// A receive matched a synchronous send: acknowledge it.
    AckSync(AckTo),
    /// Answer an emulated one-sided operation from source `src`.
    RmaReply {
        iface: usize,
        src: SrcId,
        msg: Vec<u8>,
    },
    /// Ask the sender `to` for the data of receive `rreq` as active
    /// messages (`RNDV_RTR`).
    SendRtr { to: AckTo, rreq: u64 },
    /// The receiver of send `sreq` asked for its data (`RNDV_RTR`).
    DataRequested { sreq: u64, rreq: u64 },
    /// Read the sender's buffer into matched receive `req`.
    StartGet {
        req: SlabId,
        to: AckTo,
        rb: RemoteBuf,
    },
    /// Every read of receive `req` has completed.
    ReadsDone(SlabId),
    /// Offer matched receive `rreq`'s buffer to sender `to` for its
    /// writes (`RNDV_RTR_PUT`).
    OfferBuffer { to: AckTo, rreq: u64 },
    /// A receiver offered its buffer: write into it.
    StartPut(PutOffer),
    /// Every write of put send `id` completed: tell the receiver (`ATP`),
    /// then complete.
    SendAtp(SlabId),
    /// Post the next step of RMA request `id`, an atomic built from a
    /// device's operations (`rma/amo_built.rs`).
    AmoStep(SlabId),
}
