//! Multi-producer single-consumer receive FIFO in a shared memory region.
//!
//! # Layout
//!
//! A region of [`FifoConfig::region_size`] bytes, 64-byte aligned, holding
//! only integers (offsets, counters; no pointers), so it works at any mapping
//! address:
//!
//! ```text
//! 0    head  u64   producers' claim counter, own cache line
//! 64   tail  u64   consumer's released position; then magic u32,
//!                  elem_size u32, capacity u32 (written once at init)
//! 128  capacity elements of elem_size bytes:
//!        ctl u64   owner | inline/desc/pad | am id << 8 | source << 16
//!                  | length << 32
//!        payload   elem_size - 8 bytes
//! then capacity descriptors of desc_size bytes (optional): descriptor i
//! belongs to element i and carries its payload when it is too long to
//! travel inline
//! ```
//!
//! (Byte offsets and the flag bits in detail: `layout.rs`.)
//!
//! `head` and `tail` are free-running 64-bit positions; position `p` lives
//! in element `p % capacity` and belongs to lap `p / capacity`. An element
//! written for lap `l` carries owner bit `(l & 1) ^ 1` (lap 0 writes 1, so a
//! zeroed region is empty).
//!
//! # Protocol
//!
//! * **Claim** (producer): load `head`; if `head - tail >= capacity`
//!   with a locally cached `tail`, reload `tail` (Acquire), then `head`
//!   again, and report "full" if still no space; otherwise CAS `head` to `head + 1`. A CAS and not a
//!   `fetch_add`: the claim is conditional on space, and a `fetch_add` that
//!   overshoots a full FIFO cannot be undone once other producers have
//!   claimed behind it (UCX makes the same choice). The CAS also leaves the
//!   high bits of `head` free for a later "consumer armed" flag.
//! * **Write and publish** (producer): copy the payload into the claimed
//!   element (or its descriptor, which the claim makes the producer's as
//!   well), then store its control word with **Release**.
//! * **Consume** (consumer): load the control word of the element at the read
//!   position with **Acquire**; it is ready iff its owner bit equals the
//!   parity expected for this lap. Check flags and length, call the handler
//!   on the payload, advance the read position. The consumer never reads
//!   `head` and never writes elements: the owner bit of the next lap marks
//!   an element consumed.
//! * **Release** (consumer): every `release_every` elements store the read
//!   position to `tail` with **Release**.
//! * **Sleep and wake**: before sleeping the consumer releases `tail`, then
//!   sets bit 63 of `head` (ARMED) with a CAS that expects `head` to equal
//!   its read position: nothing claimed and unconsumed. The claim CAS of
//!   the next producer clears the bit (it writes `position + 1` without
//!   it) and, having seen it, that producer wakes the consumer after
//!   publishing ([`Push::Sent`] with `wake`). Both are read-modify-writes
//!   of `head`, so either the producer's claim comes first (the arming CAS
//!   fails: do not sleep) or it sees the bit: no wake-up is lost.
//! * **Dead producers**: a producer that dies between claim and publish
//!   leaves a hole the consumer would wait at forever.
//!   [`Consumer::is_stuck`] tells that case apart (nothing ready at the read
//!   position although `head` is past it) and [`Consumer::skip_stuck`]
//!   writes a padding word for the position and moves on; the caller uses
//!   it only once it knows the claimer died.
//!
//! # Memory ordering
//!
//! * Payload → consumer: the producer's payload writes are sequenced before
//!   its Release store of the control word; the consumer's Acquire load that
//!   sees that word synchronises with it, so the payload reads see the data.
//!   The owner bit makes a stale word from the previous lap distinguishable:
//!   the consumer reaches lap `l + 1` of an element only after consuming lap
//!   `l` of it.
//! * Consumer → next producer of the same element: the consumer's payload
//!   reads (the handler has returned) are sequenced before its Release store
//!   of `tail`; a producer claims position `p` only after observing with
//!   Acquire a `tail > p - capacity`, i.e. a release covering the previous
//!   use of the element, so its writes happen after those reads. A producer's
//!   cached `tail` was loaded with Acquire by that same producer, so it is
//!   sound to reuse, and being monotonic it only errs towards "full".
//!   After refreshing `tail` the producer reloads `head`: the claims of all
//!   released positions happen-before that Acquire, so the new `head` is at
//!   least `tail`; a `head` loaded earlier could be older than the fresh
//!   `tail` and report a spurious "full".
//! * Producer ↔ producer: the CAS on `head` is a read-modify-write, so all
//!   claims are totally ordered and each position is claimed exactly once.
//!   It needs no ordering of its own (Relaxed): what one producer wrote to an
//!   element reaches the next producer of it through the consumer, as above.
//!
//! # Corrupted regions
//!
//! Another process may scribble over the region. Nothing read from it is
//! used unchecked: indices are positions masked by the local capacity, the
//! geometry is the local copy, a control word with unknown flags or a length
//! beyond the element gives [`FifoError::Corrupt`] (and the element is
//! skipped). Memory outside the region is never touched. What a corrupting
//! peer can still do is make the payload bytes garbage or make producers
//! collide on a slot; it cannot make this process read or write out of
//! bounds.

mod consumer;
mod producer;
#[cfg(all(test, not(loom)))]
mod tests;
#[cfg(all(test, loom))]
mod tests_loom;

use std::fmt;
#[cfg(not(all(loom, test)))]
use std::ptr::NonNull;

pub use crate::error::FifoError;
pub use consumer::{Consumer, Message};
pub use producer::{Producer, Push};

use crate::layout::Geometry;
use crate::region::Region;
use crate::sync::AtomicBool;

/// Shape of a FIFO. Every process using one region must agree on it; it is
/// exchanged out of band (in the transport's address) and checked against
/// the region's header on attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FifoConfig {
    /// Bytes per element, a power of two in `16..=65536`; the inline payload
    /// is 8 bytes less.
    pub elem_size: usize,
    /// Number of elements, a power of two in `2..=2^20`.
    pub capacity: usize,
    /// The consumer publishes `tail` after this many elements, `1..=capacity`.
    pub release_every: usize,
    /// Bytes of the descriptor each element owns, for payloads longer than
    /// the inline room: 0 (none) or a multiple of 64 up to 1 MiB.
    pub desc_size: usize,
}

impl Default for FifoConfig {
    /// The `posix` transport's defaults: 64 elements of 128 bytes (UCX's
    /// mm FIFO shape), release every 8, 8 KiB descriptors.
    fn default() -> Self {
        Self {
            elem_size: 128,
            capacity: 64,
            release_every: 8,
            desc_size: 8192,
        }
    }
}

impl FifoConfig {
    /// Bytes a region for this configuration needs.
    pub fn region_size(&self) -> Result<usize, FifoError> {
        Ok(self.geometry()?.region_size())
    }

    /// Largest payload one element carries inline.
    pub fn max_inline(&self) -> Result<usize, FifoError> {
        Ok(self.geometry()?.max_inline())
    }

    /// Largest payload of one message, inline or in a descriptor.
    pub fn max_payload(&self) -> Result<usize, FifoError> {
        Ok(self.geometry()?.max_payload())
    }

    fn geometry(&self) -> Result<Geometry, FifoError> {
        Geometry::new(
            self.elem_size,
            self.capacity,
            self.release_every,
            self.desc_size,
        )
    }
}

/// 64 bytes aligned to 64: the unit of an owned FIFO buffer.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
pub struct AlignedBlock(pub [u8; 64]);

impl AlignedBlock {
    /// A zeroed buffer of at least `bytes` bytes.
    pub fn zeroed_buffer(bytes: usize) -> Box<[AlignedBlock]> {
        vec![AlignedBlock([0; 64]); bytes.div_ceil(64)].into_boxed_slice()
    }
}

/// A receive FIFO over a memory region. Shared by reference between any
/// number of [`Producer`]s and at most one [`Consumer`].
pub struct Fifo {
    region: Region,
    geom: Geometry,
    /// Whether this handle has a live consumer (process-local).
    consumer_taken: AtomicBool,
}

impl fmt::Debug for Fifo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fifo")
            .field("elem_size", &self.geom.elem_size)
            .field("capacity", &self.geom.capacity)
            .field("release_every", &self.geom.release_every)
            .field("desc_size", &self.geom.desc_size)
            .finish_non_exhaustive()
    }
}

impl Fifo {
    /// Initialises an empty FIFO in an owned buffer of at least
    /// [`FifoConfig::region_size`] bytes.
    #[cfg(not(all(loom, test)))]
    pub fn new_in(buf: Box<[AlignedBlock]>, config: FifoConfig) -> Result<Self, FifoError> {
        let geom = config.geometry()?;
        let fifo = Self::with_region(Region::owned(buf, geom)?, geom);
        fifo.region.init();
        Ok(fifo)
    }

    /// Initialises an empty FIFO in memory the caller provides (the
    /// receiver's side of a shared segment).
    ///
    /// # Safety
    ///
    /// * `ptr..ptr + len` is readable and writable memory that stays mapped
    ///   for the lifetime of the returned `Fifo` (in every process using it);
    /// * within this process, that memory is accessed only through `Fifo`s
    ///   (no Rust references to it exist elsewhere);
    /// * no other party uses the region while it is being initialised.
    ///
    /// Alignment (64 bytes) and size are checked and give errors. Other
    /// processes writing garbage into the region is allowed (see the module
    /// doc).
    #[cfg(not(all(loom, test)))]
    pub unsafe fn from_raw(
        ptr: NonNull<u8>,
        len: usize,
        config: FifoConfig,
    ) -> Result<Self, FifoError> {
        let geom = config.geometry()?;
        // SAFETY: forwarded from this function's contract.
        let region = unsafe { Region::raw(ptr, len, geom)? };
        let fifo = Self::with_region(region, geom);
        fifo.region.init();
        Ok(fifo)
    }

    /// Attaches to a FIFO another party initialised (a sender's side of a
    /// shared segment); checks its magic number and geometry.
    ///
    /// # Safety
    ///
    /// As [`Fifo::from_raw`], except that the region is already initialised
    /// and may be in use.
    #[cfg(not(all(loom, test)))]
    pub unsafe fn attach_raw(
        ptr: NonNull<u8>,
        len: usize,
        config: FifoConfig,
    ) -> Result<Self, FifoError> {
        let geom = config.geometry()?;
        // SAFETY: forwarded from this function's contract.
        let region = unsafe { Region::raw(ptr, len, geom)? };
        region.check()?;
        Ok(Self::with_region(region, geom))
    }

    /// A FIFO over loom-modelled memory.
    #[cfg(all(loom, test))]
    pub(crate) fn new_model(config: FifoConfig) -> Result<Self, FifoError> {
        let geom = config.geometry()?;
        Ok(Self::with_region(Region::model(geom), geom))
    }

    fn with_region(region: Region, geom: Geometry) -> Self {
        Self {
            region,
            geom,
            consumer_taken: AtomicBool::new(false),
        }
    }

    /// The configuration this FIFO was built with.
    pub fn config(&self) -> FifoConfig {
        FifoConfig {
            elem_size: self.geom.elem_size,
            capacity: self.geom.capacity,
            release_every: self.geom.release_every as usize,
            desc_size: self.geom.desc_size,
        }
    }

    /// Largest payload [`Producer::try_push`] accepts.
    pub fn max_payload(&self) -> usize {
        self.geom.max_payload()
    }

    /// Positions claimed so far by all producers (`head` without the ARMED
    /// bit): every message a producer published before this load is below
    /// it.
    pub fn claimed(&self) -> u64 {
        self.region.head().load(crate::sync::Ordering::Acquire) & !crate::layout::ARMED
    }

    /// Largest payload that travels inline in the element.
    pub fn max_inline(&self) -> usize {
        self.geom.max_inline()
    }

    /// A new producer. Producers are cheap; each caches the last `tail` it
    /// saw.
    pub fn producer(&self) -> Producer<&Fifo> {
        Producer::new(self)
    }

    /// The consumer. Only one may exist per handle at a time
    /// ([`FifoError::ConsumerTaken`] otherwise); across processes the
    /// protocol requires that only the FIFO's owner consumes.
    pub fn consumer(&self) -> Result<Consumer<&Fifo>, FifoError> {
        Consumer::new(self)
    }
}
