//! The cache's public types: the registrar contract, configuration,
//! region references and information, counters and errors.

#[cfg(doc)]
use super::Rcache;
use crate::slab::SlabId;

/// What the cache registers with: a memory domain in the layers above.
pub trait Registrar {
    /// What a registration yields, e.g. a memory handle.
    type Handle;
    /// Why a registration failed.
    type Error;

    /// Registers `[addr, addr + len)`. The cache passes ranges aligned to
    /// [`RcacheConfig::alignment`], possibly merged from several requests.
    fn register(&mut self, addr: usize, len: usize) -> Result<Self::Handle, Self::Error>;

    /// Deregisters what [`Registrar::register`] returned. Called exactly once
    /// per handle.
    fn deregister(&mut self, handle: Self::Handle);
}

/// Limits and granularity of an [`Rcache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RcacheConfig {
    /// Most registered bytes to keep; `usize::MAX` for no limit.
    pub max_size: usize,
    /// Most regions to keep; `usize::MAX` for no limit.
    pub max_regions: usize,
    /// Granularity of registrations, a power of two: requested ranges are
    /// widened to it.
    pub alignment: usize,
}

impl Default for RcacheConfig {
    /// No limits; the system's page size.
    fn default() -> RcacheConfig {
        RcacheConfig {
            max_size: usize::MAX,
            max_regions: usize::MAX,
            alignment: crate::sys::page_size(),
        }
    }
}

/// A reference to a region, returned by [`Rcache::get`] and given back to
/// [`Rcache::put`].
///
/// Generational: once its region is gone, the id finds nothing, even when
/// its slot holds another region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegionRef(pub(super) SlabId);

/// What a region covers, as seen through a [`RegionRef`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionInfo {
    /// First registered address.
    pub start: usize,
    /// Registered bytes.
    pub len: usize,
    /// Outstanding references (from every holder).
    pub refs: usize,
    /// `false` once [`Rcache::invalidate`] covered part of the region: its
    /// memory is gone and it must not be used for new transfers. It stays
    /// registered until its last reference is put.
    pub valid: bool,
}

/// Counters of an [`Rcache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RcacheStats {
    /// Gets that found a cached region.
    pub hits: u64,
    /// Gets that registered (including failed registrations).
    pub misses: u64,
    /// Cached regions absorbed into a larger one by a miss.
    pub merges: u64,
    /// Unreferenced regions deregistered to keep within the limits.
    pub evictions: u64,
    /// Regions invalidated by [`Rcache::invalidate`].
    pub invalidations: u64,
    /// Live registrations, cached or only held by references.
    pub regions: usize,
    /// Bytes in live registrations.
    pub bytes: usize,
}

impl std::ops::AddAssign for RcacheStats {
    /// Sums the counters of several caches.
    fn add_assign(&mut self, o: RcacheStats) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.merges += o.merges;
        self.evictions += o.evictions;
        self.invalidations += o.invalidations;
        self.regions += o.regions;
        self.bytes += o.bytes;
    }
}

/// Why [`Rcache::get`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RcacheError<E> {
    /// The range is empty, or its end (aligned up) is beyond the address
    /// space: the last aligned block of the address space cannot be
    /// registered, as its end is not a `usize`.
    #[error("invalid range: {len} bytes at {addr:#x}")]
    Range {
        /// Requested address.
        addr: usize,
        /// Requested length.
        len: usize,
    },
    /// The registrar refused the (aligned, merged) range.
    #[error("registration failed: {0}")]
    Register(#[source] E),
}
