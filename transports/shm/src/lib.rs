//! Shared-memory transport building blocks for rucx.
//!
//! This crate will hold the intra-node transport in the manner of UCX's `mm`
//! transport: every receiver owns one receive FIFO in a shared memory segment
//! and any number of senders (other processes mapping that segment) push
//! active messages into it.
//!
//! What it does now:
//!
//! * [`Fifo`]: a multi-producer single-consumer FIFO of fixed-size elements
//!   that lives entirely inside a caller-provided memory region. The layout is
//!   `#[repr(C)]`-like and position independent (offsets only, no pointers),
//!   all shared state is atomic, producers claim slots with a CAS on `head`,
//!   the consumer recognises ready elements by an owner bit that flips every
//!   lap and releases `tail` in batches. See [`fifo`] for the layout and the
//!   memory-ordering argument.
//! * Every value read back from the region (lengths, flags, counters) is
//!   checked before use: a peer that corrupts the region produces
//!   [`FifoError`]s or garbage payload bytes, never an out-of-bounds access or
//!   a panic.
//!
//! What it does not do yet:
//!
//! * no segment creation or mapping (posix `/dev/shm`, sysv, xpmem): the
//!   caller provides the memory ([`Fifo::new_in`] for an owned buffer,
//!   [`Fifo::from_raw`] / [`Fifo::attach_raw`] for mapped memory);
//! * no `uct` `Iface` / `Endpoint` implementation, no registration in the
//!   transport registry, no bcopy receive descriptors, no CMA zero-copy;
//! * no sleep/wake-up signalling (the "armed" bit on `head` and the
//!   datagram socket of UCX), no peer-liveness checks.
//!
//! Map: `fifo` (public types and the producer/consumer protocol), `layout`
//! (offsets, geometry validation, element control word), `region` (raw
//! memory access; in loom tests a model-checked stand-in), `sync` (std or
//! loom atomics).

pub mod fifo;
mod layout;
mod region;
mod sync;

pub use fifo::{AlignedBlock, Consumer, Fifo, FifoConfig, FifoError, Producer};
