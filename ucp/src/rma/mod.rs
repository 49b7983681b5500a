//! One-sided operations: mapped memory, remote keys, put, get, atomics.
//!
//! A process maps memory ([`crate::Context::mem_map`] /
//! [`crate::Context::mem_alloc`]) and hands the packed key
//! ([`MemMap::rkey_pack`]) to peers out of band (or in a message); a peer
//! unpacks it on its endpoint ([`crate::Worker::rkey_unpack`]) and reads,
//! writes and updates the memory without the owner's code taking part in
//! the call.
//!
//! # How each operation travels
//!
//! * **mapped memory**: memory a peer on this host allocated with
//!   [`crate::Context::mem_alloc`] while its context has a shared-memory
//!   transport is a shared segment, which `rkey_unpack` maps into this
//!   process. Put and get are then a copy, atomics the CPU's atomic
//!   instruction on the shared word, all done at once without the peer;
//!   [`Rkey::ptr`] gives the address for loads and stores of one's own.
//! * **put / get** otherwise go over a lane of the endpoint that reaches the remote
//!   memory itself when there is one and the peer's map was registered with
//!   the memory domain of that lane's remote iface: CMA between processes
//!   of one host (the kernel copies; the target's CPU does nothing), the
//!   TCP transport's put emulation (the target's progress writes), RDMA
//!   WRITE and READ over RC, `self` in one process.
//!   Otherwise they are **emulated over active messages**: the target's
//!   worker executes them when it progresses.
//! * **atomics** on memory its owner mapped in cpu mode (the default,
//!   `RUCX_ATOMIC_MODE`) are executed by the target's worker (active
//!   messages), with the CPU's atomic instructions on the word, so they
//!   are atomic against each other from any number of peers and against
//!   the owner's own atomic accesses ([`MemMap::load_u64`]). On memory
//!   mapped in device mode they are executed by the devices (RDMA
//!   atomics over RC) and only by them: an operation the device lacks is
//!   built by the initiator from the device's 64-bit fetch-and-add and
//!   compare-and-swap (`amo_built.rs`), and fails as unsupported only
//!   where no lane of the endpoint has those. A word never sees both
//!   kinds: `amo.rs` has the rule and [`AtomicMode`] the setting.
//!
//! Emulated operations need the target to call `progress`; device
//! atomics, built ones included, do not.
//!
//! # Completion and ordering
//!
//! * A put completes once the data is in the target's memory (remote
//!   completion, stronger than UCX's local completion); a get once the data
//!   is in the local buffer; an atomic once the target executed it (and,
//!   fetching, the old value is in the result).
//! * Operations of one endpoint that travel over active messages are
//!   executed in the order they were posted. Zero-copy operations may
//!   overtake them. [`crate::Worker::fence`] waits until every operation
//!   posted before it has completed, so operations after it see their
//!   effects; [`crate::Worker::ep_flush`] and [`crate::Worker::flush`] wait
//!   for the endpoint's (every endpoint's) operations as well.
//!
//! # Protection
//!
//! The initiator checks every access against the range and rights the key
//! declares ([`crate::Error::RemoteAccess`] before anything is sent). The
//! target checks what it executes (emulated operations, the TCP put
//! emulation) against its live registration: the key's secret, the range,
//! the rights; a forged, stale or out-of-range access is refused with an
//! error to the initiator and touches nothing. Over CMA and through a
//! mapped segment the access does not involve the target, and only the
//! initiator's checks apply: both need the rights of a process that may
//! `ptrace` the target (same user), which could read and write all of its
//! memory anyway. A segment stays mapped in the peer after the owner
//! unmapped it; late writes then reach memory the owner no longer uses.
//!
//! # Not yet
//!
//! Non-blocking `fence` and `flush` requests (both wait, progressing the
//! worker); memory registered with `mem_map` (rather than
//! allocated by `mem_alloc`) is never mapped into peers.

mod amo;
mod amo_built;
#[cfg(test)]
mod amo_steps;
mod atomic;
mod info;
mod mem;
mod ops;
mod rkey;
mod target;
crate::ucs::internal_mod!(wire);

pub use amo::AtomicMode;
pub(crate) use amo::BASE as AMO_BASE;
pub use atomic::{AtomicOp, AtomicValue};
pub use info::RmaProtocol;
pub use mem::MemMap;
pub use rkey::Rkey;

use crate::ucs::slab::SlabId;
use crate::Error;

/// Where the result of an RMA request goes.
#[derive(Debug, Clone)]
pub(crate) enum RmaSink {
    /// Nothing comes back (put, atomic post).
    None,
    /// A get's local ranges, in the order the remote data fills them.
    Get {
        segs: Box<[crate::request::buf::RecvBuf]>,
    },
    /// A fetching atomic's result word (8 bytes, or exactly its width).
    Fetch {
        word: crate::request::buf::ResultWord,
        width: usize,
    },
    /// A fetching atomic executed by a device: the transport writes the
    /// old value into `slot` (the request's own, so it outlives an early
    /// failure), copied to `word` when the transport completes it.
    DeviceFetch {
        word: crate::request::buf::ResultWord,
        width: usize,
        slot: Box<[u8; 8]>,
    },
    /// An atomic built from a device's operations, step by step
    /// (`amo_built.rs`): its state, result word and the 8 bytes each step's
    /// old value goes to.
    DeviceBuilt(Box<amo_built::BuiltState>),
}

/// State of a one-sided operation.
#[derive(Debug)]
pub(crate) struct RmaState {
    pub(crate) ep: SlabId,
    /// Steps (fragments, zero-copy operations, replies) still to finish.
    pub(crate) pending: u32,
    /// Still being posted: do not complete yet.
    pub(crate) posting: bool,
    /// Bytes the operation moves (reported as the completion's length).
    pub(crate) len: usize,
    pub(crate) error: Option<Error>,
    pub(crate) sink: RmaSink,
    /// Zero-copy steps, one plan per local range, posted as the lane
    /// takes them.
    pub(crate) zcopy: Vec<ZcopyPlan>,
    /// Zero-copy steps with the transport (counted in `pending` too): the
    /// request does not complete before they do, even if its endpoint
    /// fails.
    pub(crate) zcopy_inflight: u32,
    /// An atomic for a device, still to post (its lane had no room).
    pub(crate) amo: Option<Box<amo::AmoPlan>>,
}

/// The zero-copy steps of a put or get, posted as the lane takes them.
#[derive(Debug)]
pub(crate) struct ZcopyPlan {
    /// The local range: written to the peer (put) or read into (get).
    pub(crate) local: crate::proto::rndv_zcopy::Local,
    pub(crate) iface: usize,
    pub(crate) uct_ep: crate::uct::EpId,
    pub(crate) key: crate::uct::RemoteKey,
    /// Largest step.
    pub(crate) max: usize,
    pub(crate) len: usize,
    pub(crate) remote: u64,
    /// Next byte to post.
    pub(crate) off: usize,
}

/// The target refused an operation, or answered it in a way that cannot be
/// right, for `why`.
pub(crate) fn refused(why: String) -> Error {
    Error::remote_access(crate::ucs::AccessDenied::Refused(why.into()))
}

/// A transport's error on a one-sided step: a refused access stays a
/// refusal (the endpoint is fine); anything else is the endpoint's error.
pub(crate) fn transport_error(e: crate::ucs::Error) -> Error {
    match e {
        crate::ucs::Error::RemoteAccess { reason, .. } => Error::remote_access(reason),
        e => Error::endpoint(e),
    }
}
