//! Shared-memory transports for rucx: processes on one host talk through
//! memory they share, in the manner of UCX's `mm` and `cma` transports.
//!
//! What it does:
//!
//! * [`Fifo`]: a multi-producer single-consumer FIFO of fixed-size elements
//!   that lives entirely inside a caller-provided memory region. The layout is
//!   position independent (offsets only, no pointers), all shared state is
//!   atomic, producers claim slots with a CAS on `head`, the consumer
//!   recognises ready elements by an owner bit that flips every lap and
//!   releases `tail` in batches. See [`fifo`] for the layout and the
//!   memory-ordering argument.
//! * Every value read back from shared memory (lengths, flags, counters) is
//!   checked before use: a peer that corrupts the region produces
//!   [`FifoError`]s or garbage payload bytes, never an out-of-bounds access or
//!   a panic.
//! * `proc_id`: process identity (pid + start time) for liveness checks
//!   and the host identity that decides reachability.
//!
//! Map: `fifo` (public types and the producer/consumer protocol), `layout`
//! (offsets, geometry validation, element control word), `error` (the
//! [`FifoError`] both of them report), `region` (raw
//! memory access; in loom tests a model-checked stand-in), `sync` (std or
//! loom atomics); `segment` (shared memory segments), `proc_id`, `cma`
//! and the transports (`posix`, `component`, `md_*`). The FIFO is public
//! API; `segment`, `proc_id` and `cma` are public only with the `fuzzing`
//! feature (or `--cfg fuzzing`), for this crate's tests and fuzz targets.

uct::ucs::internal_mod!(cma);
// The loom build of this crate's tests models the FIFO alone: the
// transports on top need raw shared memory.
#[cfg(not(all(loom, test)))]
mod component;
mod error;
pub mod fifo;
mod layout;
#[cfg(not(all(loom, test)))]
mod md_alloc;
mod md_keys;
#[cfg(not(all(loom, test)))]
mod posix;
uct::ucs::internal_mod!(proc_id);
mod region;
uct::ucs::internal_mod!(segment);
mod sync;

#[cfg(not(all(loom, test)))]
pub use component::{ShmComponent, COMPONENT};
pub use fifo::{AlignedBlock, Consumer, Fifo, FifoConfig, FifoError, Message, Producer, Push};
