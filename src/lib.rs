//! rucx: a unified communication framework in the style of UCX.
//!
//! Tag-matched messages, one-sided operations and atomics between
//! processes over whatever transport they share: in-process (`self`),
//! shared memory (`posix` FIFO and `cma` zero-copy), TCP, and RDMA through
//! the RC transport over a userspace iWARP provider (`rc_iwarp`).
//!
//! This crate is the facade: it holds the list of built-in transports
//! ([`registry`]), a [`Context`] over them, and re-exports the protocol
//! layer ([`ucp`], which depends on the transport API alone) whose
//! [`Worker`] and [`Ep`] are the API; and the `rucx-perftest` and
//! `rucx-info` tools ([`perf`]).
//!
//! ```
//! # fn main() -> rucx::Result<()> {
//! let ctx = rucx::Context::new()?;
//! let mut server = ctx.create_worker()?;
//! let mut client = ctx.create_worker()?;
//! let ep = client.connect(&server.address())?;
//! let msg = b"hello".to_vec();
//! // The owned tier: the buffer moves into the worker while in flight.
//! let _ = client.tag_send(ep, msg, 7, rucx::Op::new())?;
//! let mut buf = vec![0u8; 16];
//! let info = loop {
//!     client.progress();
//!     server.progress();
//!     if server.tag_probe(7, rucx::TAG_MASK_ALL).is_some() {
//!         break server.tag_recv_blocking(&mut buf, 7, rucx::TAG_MASK_ALL)?;
//!     }
//! };
//! assert_eq!(&buf[..info.length], b"hello");
//! # Ok(()) }
//! ```

mod context;
pub mod perf;
pub mod scale;

pub use context::{config_tables, registry, Context};

/// Why an endpoint failed or a remote access was refused, as typed values.
///
/// [`Error::EndpointFailed`] has the transport's error as its source, and
/// that error an [`EndpointCause`](cause::EndpointCause); a transport's own
/// report (an iWARP [`TerminateCause`](cause::TerminateCause), an RDMA
/// [`WcStatus`](cause::WcStatus), a queue pair's fatal event
/// [`QpFatal`](cause::QpFatal) such as a broken connection) is the source
/// of that, found with `downcast_ref`:
///
/// ```
/// use std::error::Error as _;
///
/// fn terminate(e: &rucx::Error) -> Option<rucx::cause::TerminateCause> {
///     let mut next = e.source();
///     while let Some(s) = next {
///         if let Some(t) = s.downcast_ref::<rucx::cause::TerminateCause>() {
///             return Some(*t);
///         }
///         next = s.source();
///     }
///     None
/// }
/// # let _ = terminate;
/// ```
pub mod cause {
    pub use rucx_rdma::{QpFatal, TerminateCause, WcStatus};
    pub use rucx_ucp::ucs::{AccessDenied, EndpointCause};
}
pub use rucx_ucp as ucp;
pub use rucx_ucp::dt;
pub use rucx_ucp::{
    Access, AccessDenied, AmMsg, AmParams, AtomicOp, AtomicValue, Completion, Ep, EpParams,
    ErrMode, Error, Info, MemMap, Message, Op, OpError, Pending, Posted, ReqId, Result, Rkey,
    Scope, Waker, Worker, WorkerMut, TAG_MASK_ALL, TAG_MASK_ANY,
};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
