//! rucx transport API (uct): what every transport provides, the in-process
//! `self` transport, and `virt`, a virtual network for deterministic tests
//! (delay, reordering, loss and peer death under a clock the test drives).
//!
//! # The contract
//!
//! A transport crate provides:
//! * a [`Component`]: a static object that names the transport family and
//!   opens its memory domains;
//! * one or more [`MemoryDomain`]s: each lists its transport resources
//!   ([`TlResource`]: transport name + device) and opens an [`Iface`] on one;
//! * the [`Iface`]: it owns every endpoint it creates (endpoints are
//!   [`EpId`]s into the iface, not separate objects), names itself
//!   ([`Iface::info`]), connects ([`Iface::is_reachable`],
//!   [`Iface::ep_create`], [`Iface::ep_destroy`]), queues for resources
//!   ([`Iface::pending_add`]) and flushes ([`Iface::flush`]), and in
//!   [`Iface::progress`] delivers what happened to an [`AmSink`]: arrived
//!   active messages, completions of in-flight operations, endpoints that
//!   can take more work, endpoints that failed;
//! * the operation families it offers, each a trait reached through an
//!   accessor of the iface that is `None` where the family is missing:
//!   [`AmOps`] (`am_short`, `am_bcopy`) through [`Iface::am`],
//!   [`AmZcopyOps`] (`am_zcopy`) through [`Iface::zcopy`], [`PutOps`]
//!   (`put_zcopy`) through [`Iface::put`] and [`GetOps`] (`get_zcopy`)
//!   through [`Iface::get`], [`AtomicOps`] (atomics executed by the
//!   device, which ones in [`AtomicCaps`]) through [`Iface::atomic`].
//!   There is no "unsupported" operation to call.
//!
//! Every operation has one of three typed outcomes ([`Posted`]): done at once,
//! accepted and completing later through the sink with the caller's
//! [`Token`], or refused for lack of resources (queue with `pending_add`).
//! Failures are [`Error`]s and are final for that operation. The checks
//! before an operation (sizes against the limits, iov entries, active
//! message ids) are shared by the transports in [`limits`].
//!
//! An iface describes itself in [`IfaceAttr`]: the operations it offers
//! ([`Caps`]), its size limits and its performance model ([`PerfModel`]).
//! The protocol layer chooses only from these numbers. The operation bits
//! of [`Caps`] ([`Caps::OPS`]) are not written by hand: a transport stores
//! [`derive_caps`] of its iface, which sets a family's bits where its
//! accessor gives an implementation and its limit is above zero
//! ([`op_caps`]), and the conformance suite checks that what an iface
//! reports is what it derives; the other bits (peer failure, event fd,
//! connection mode) are the transport's data.
//!
//! A memory domain that registers memory ([`MemoryDomain::can_register`])
//! packs keys for peers ([`MemoryDomain::mkey_pack`]) and unpacks theirs
//! ([`MemoryDomain::rkey_unpack`], [`RemoteKey`]). Two more capabilities
//! are optional and visible in the domain's type: allocating memory that
//! peers on its host can map ([`MemoryDomain::mem_alloc_ops`],
//! [`MemAllocOps`], UCX's `uct_md_mem_alloc`) and mapping such memory of a
//! peer from its key ([`MemoryDomain::rkey_ptr_ops`], [`RkeyPtrOps`],
//! UCX's `uct_rkey_ptr`). The protocol layer uses them without knowing
//! which transport provides them.
//!
//! Transports are found through a [`Registry`] that the layer above fills
//! with one line per transport crate.
//!
//! How processes that know only a host and port meet is the socket
//! connection manager's ([`sockcm`], as UCX's `uct_cm`): a listener and
//! clients exchange opaque private data (worker addresses, to the layer
//! above) over a socket that carries the handshake only; `ip_addr` holds
//! the address rules of the IP transports.
//!
//! # What uct does not do
//!
//! No protocols: no tag matching, no fragmentation beyond one AM, no
//! rendezvous. No threads: an iface moves only when its `progress` runs.

mod component;
mod ep_table;
mod iface;
pub mod ip_addr;
pub mod limits;
mod mem;
mod ops;
pub mod perf;
mod registry;
pub mod self_tl;
pub mod sockcm;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod virt;

pub use component::{Component, DeviceType, IfaceParams, MemoryDomain, TlResource};
pub use ep_table::EpTable;
pub use iface::{
    with_iovs, AmDest, AmId, AmSink, Armed, Caps, ConnectMode, EpId, Iface, IfaceAttr, IfaceInfo,
    Iov, IovMut, Posted, SrcId, Token, AM_HEAD_MIN, AM_ID_MAX,
};
pub use mem::{
    process_nonce, Access, KeyFields, KeyLayout, MemAlloc, MemAllocOps, MemHandle, MemOwner,
    RegCost, RegTable, RemoteKey, RkeyMapping, RkeyPtrOps,
};
pub use ops::{
    derive_caps, offered, op_caps, AmOps, AmZcopyOps, AtomicCaps, AtomicOp, AtomicOps, AtomicWord,
    GetOps, PutOps, ShortSender,
};
pub use perf::PerfModel;
pub use registry::Registry;
pub use ucs::{Error, Result, Status};

/// The crate `rucx-ucs`, re-exported under its layer name.
pub use rucx_ucs as ucs;
