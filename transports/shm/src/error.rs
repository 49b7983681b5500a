//! Errors of FIFO construction and use. A leaf: `layout` (which checks
//! geometries) and `fifo` both use it, and `fifo` alone uses `layout`.

/// What went wrong building or using a [`crate::Fifo`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FifoError {
    /// Element size not a power of two in `16..=65536`.
    #[error("FIFO element size {elem_size} is not a power of two in 16..=65536")]
    BadElemSize {
        /// The rejected size.
        elem_size: usize,
    },
    /// Capacity not a power of two in `2..=2^20`.
    #[error("FIFO capacity {capacity} is not a power of two in 2..=1048576")]
    BadCapacity {
        /// The rejected capacity.
        capacity: usize,
    },
    /// Release interval outside `1..=capacity`.
    #[error("FIFO release interval {release_every} is not in 1..={capacity}")]
    BadReleaseInterval {
        /// The rejected interval.
        release_every: usize,
        /// The FIFO's capacity.
        capacity: usize,
    },
    /// Descriptor size not a multiple of 64 up to 1 MiB.
    #[error("FIFO descriptor size {desc_size} is not a multiple of 64 up to 1048576")]
    BadDescSize {
        /// The rejected size.
        desc_size: usize,
    },
    /// The region is smaller than the configuration needs.
    #[error("FIFO region of {len} bytes is smaller than the {needed} bytes needed")]
    RegionTooSmall {
        /// Bytes provided.
        len: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// The region does not start on a 64-byte boundary.
    #[error("FIFO region at {addr:#x} is not 64-byte aligned")]
    Misaligned {
        /// Address of the region.
        addr: usize,
    },
    /// Attaching found no initialised FIFO.
    #[error("no FIFO in region (magic {found:#010x})")]
    BadMagic {
        /// The magic number found.
        found: u32,
    },
    /// Attaching found a FIFO of another shape.
    #[error("FIFO in region has element size {elem_size}, capacity {capacity} and descriptors of {desc_size} bytes, not the expected ones")]
    GeometryMismatch {
        /// Element size in the region's header.
        elem_size: usize,
        /// Capacity in the region's header.
        capacity: usize,
        /// Descriptor size in the region's header.
        desc_size: usize,
    },
    /// A message does not fit in one element.
    #[error("payload of {len} bytes exceeds the FIFO's largest message of {max} bytes")]
    PayloadTooLong {
        /// Total length of the parts.
        len: usize,
        /// Largest payload (inline or in a descriptor).
        max: usize,
    },
    /// This FIFO handle already has a consumer.
    #[error("FIFO already has a consumer")]
    ConsumerTaken,
    /// A ready element carried unknown flags or a length beyond the element;
    /// it was skipped.
    #[error("corrupt FIFO element at position {position}: control word {word:#018x}")]
    Corrupt {
        /// Position of the element.
        position: u64,
        /// Its control word.
        word: u64,
    },
}
