//! rucx protocols (ucp): the API applications use.
//!
//! A [`Context`] opens the transports of a [`uct::Registry`] (filtered by
//! `RUCX_TLS`); a [`Worker`] opens one iface per transport resource and
//! drives them; an [`Ep`] connects to a remote worker's address over the
//! best lane both share; tag-matched sends and receives move messages of
//! any size with MPI ordering.
//!
//! This crate depends on the transport API ([`uct`]) alone: it knows no
//! transport, and uses what the registry's components provide (one-sided
//! access to memory a peer allocated, for one, goes through the memory
//! domains' `mem_alloc_ops` and `rkey_ptr_ops`). The `rucx` crate holds the
//! registry of built-in transports and a `Context::new` over it. The
//! example uses the in-process `self` transport of [`uct`]:
//!
//! ```
//! # fn main() -> rucx_ucp::Result<()> {
//! use rucx_ucp::uct::{self_tl, Registry};
//! let registry = Registry::new().with(&self_tl::COMPONENT);
//! let ctx = rucx_ucp::Context::from_env(&registry)?;
//! let mut a = ctx.create_worker()?;
//! let mut b = ctx.create_worker()?;
//! let ep = a.connect(&b.address())?;
//! let mut buf = [0u8; 5];
//! let info = a.scope(|s| {
//!     let send = s.tag_send(ep, b"hello", 42);
//!     let (r, _) = s.wait(send);
//!     r
//! })?;
//! assert_eq!(info.length, 5);
//! loop {
//!     a.progress();
//!     if b.tag_probe(42, u64::MAX).is_some() { break; }
//!     b.progress();
//! }
//! let got = b.tag_recv_blocking(&mut buf, 42, u64::MAX)?;
//! assert_eq!((got.tag, &buf), (42, b"hello"));
//! # Ok(()) }
//! ```
//!
//! # Map
//! * `context.rs`, `config.rs`: resources (from the registry the
//!   application passes) and settings; `reg.rs`: registration of
//!   rendezvous buffers, through a registration cache where that pays;
//! * `worker/`: the worker: its ifaces (`ifaces.rs`, which implement the
//!   protocols' [`Lanes`](proto) port), the progress loop, endpoint
//!   creation (`connect.rs`), client–server connections through a
//!   listener (`listener.rs`), endpoint error handlers (`ep_errors.rs`),
//!   active message handlers (`am.rs`, `am_send.rs`), streams
//!   (`stream.rs`), the keepalive clock (`keepalive.rs`), closing
//!   endpoints in flush or force mode (`close.rs`),
//!   handing owned buffers to their requests (`hold.rs`),
//!   the executor of the protocols' commands (`exec.rs`) and sleeping and
//!   waking from another thread (`wakeup.rs`). The only code that holds an
//!   iface;
//! * `proto/`: the protocols, which touch no iface, socket, clock or
//!   thread, and hold no `unsafe`: the protocol state (`core.rs`) and
//!   endpoints (`ep.rs`), the one way to the transports (`lanes.rs`), the
//!   commands left for the executor (`command.rs`) and their dispatch
//!   (`dispatch.rs`), waiting for room on a full lane (`room.rs`: a
//!   command; only the executor asks the transport), what peers' messages
//!   name (`peer.rs`), wire formats (`wire.rs`), protocol selection
//!   (`select/`), one module per protocol: eager send and receive
//!   (`eager_tx.rs`, `eager_rx.rs`, `direct.rs` for payloads a transport
//!   writes straight into a receive), synchronous-send acknowledgement
//!   (`sync.rs`), wireup announcements (`wireup.rs`), the worker's own
//!   protocol messages (`ctrl.rs`), active messages (`am.rs`, wire format
//!   `am_wire.rs`, rendezvous ones `am_rndv.rs`), byte streams
//!   (`stream.rs`), keepalive rounds (`keepalive.rs`), rendezvous by active messages
//!   (`rndv.rs`), get (`rndv_get.rs`, split with a write by the sender on
//!   one host) and put (`rndv_put.rs`) over one or more lanes
//!   (`rndv_zcopy.rs`), matched probes (`probed.rs`); protocol-level tests
//!   over a recording `Lanes` (`testing/`, `tests/`);
//! * `wireup/`: worker addresses and lane selection;
//! * `tag/`: the tag matcher (sans-IO);
//! * `request/`: the request slab, each request's state as phases (a
//!   receive's in `recv.rs`), completion reporting, and the one module that
//!   dereferences user buffers and lends them to transports (`buf.rs`);
//! * `api/`: the four tiers of operations (blocking, scoped, owned, raw);
//! * `rma/`: one-sided operations: mapped memory (allocated by a memory
//!   domain that can, else private), remote keys (mapped into this process
//!   by a domain that can), put, get, atomics, fence (see its
//!   documentation for how each travels); `target.rs` answers the
//!   emulated ones (without `unsafe`: `mem.rs` reads, writes and applies
//!   atomics to registered memory for it);
//! * `dt/`: datatypes that need not be contiguous (iovecs, generic
//!   pack/unpack); `api/dt.rs` posts operations on them, through the
//!   bounce buffers of `request/staged.rs` where the layout is not
//!   contiguous.
//!
//! With the `fuzzing` feature (or `--cfg fuzzing`), the wire codecs
//! (`proto::wire`, `proto::am_wire`, `rma::wire`), worker addresses (`wireup`) and the tag
//! matcher (`tag`) are public, for fuzz targets, decoder tests and benches;
//! they are not a stable API.
//!
//! # What it does not do (yet)
//! Iovecs handed to the transports as gather lists (they are packed);
//! eager zero-copy active messages;
//! bandwidth-oriented
//! protocol selection (the tables minimise one message's latency).
#![deny(unsafe_code)]

mod api;
mod config;
mod context;
pub mod dt;
mod error;
pub mod local;
pub mod proto;
mod reg;
mod request;
pub mod rma;
mod shared;
crate::ucs::internal_mod!(tag);
crate::ucs::internal_mod!(wireup);
mod worker;

pub use api::{Message, OpError, Pending, Scope, WorkerMut};
pub use config::{config_tables, UcpConfig, UCP_TABLE};
pub use context::{Context, WeakContext};
pub use error::{Error, Result};
pub use local::{
    LocalAccepting, LocalFlush, LocalFuture, LocalListener, LocalPolling, LocalWorker,
};
pub use reg::RcacheMode;
pub use request::{Callback, Completion, CompletionHook, Info, IoBuf, IoBufMut, Op, Posted, ReqId};
pub use rma::{AtomicMode, AtomicOp, AtomicValue, MemMap, Rkey};
#[cfg(feature = "tokio")]
pub use shared::tokio;
pub use shared::{
    Accepting, AmNext, AmReceiver, Fetched, Handed, OpFuture, OpResult, Polling, Queued,
    SharedListener, SharedWorker,
};
pub use uct::ucs::AccessDenied;
pub use uct::Access;
pub use worker::{
    AmHandler, AmInlineHandler, AmMsg, AmParams, Armed, CloseMode, Closing, ConnHandler,
    ConnRequest, Connecting, EpParams, ErrHandler, ErrMode, Flushing, Listener, SendPaths, Waker,
    Worker, DROP_WRITES_TIMEOUT, MAX_SLEEP,
};

/// The crate `rucx-uct`.
pub use rucx_uct as uct;
/// The crate `rucx-ucs`.
pub use uct::ucs;
use uct::ucs::slab::SlabId;

/// Tag mask that matches only the exact tag.
pub const TAG_MASK_ALL: u64 = u64::MAX;
/// Tag mask that matches any tag.
pub const TAG_MASK_ANY: u64 = 0;

/// An endpoint of a worker: a connection to one remote worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ep(pub(crate) SlabId);

impl Ep {
    /// The id as 64 bits (for C handles and user tables).
    pub fn to_u64(self) -> u64 {
        self.0.to_u64()
    }

    /// The endpoint whose [`Ep::to_u64`] is `v`. Any value is accepted: a
    /// forged one names no endpoint, and operations on it fail.
    pub fn from_u64(v: u64) -> Ep {
        Ep(SlabId::from_u64(v))
    }
}
