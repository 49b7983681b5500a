//! A registration cache: user address ranges mapped to memory
//! registrations, so that zero-copy and rendezvous transfers do not register
//! and deregister each buffer every time (UCX's `ucs_rcache`).
//!
//! What it does: [`Rcache::get`] returns a region covering a range and takes
//! a reference on it, registering on a miss. The range is widened to
//! [`RcacheConfig::alignment`] and merged with every cached region it
//! overlaps or touches, so neighbouring buffers end up in one registration.
//! [`Rcache::put`] drops the reference; an unreferenced region stays
//! registered for later gets until it is evicted, least recently released
//! first, to keep the cache within [`RcacheConfig::max_size`] and
//! [`RcacheConfig::max_regions`], or until [`Rcache::invalidate`] says its
//! memory is gone.
//!
//! What it does not do: watch the memory. UCX hooks malloc, mmap and munmap
//! to learn when registered memory goes back to the system; this cache does
//! not. Memory that is unmapped without a call to [`Rcache::invalidate`]
//! stays registered (pinned, if the registrar pins), and a later get at the
//! same address returns the old registration. Telling the cache is the
//! caller's contract.
//!
//! Map: [`Registrar`] is what the cache registers with (a memory domain);
//! regions live in a [`Slab`] and are named by generational [`RegionRef`]s;
//! the cached ones are also in an ordered map by start address; `lru` is the
//! intrusive list of unreferenced ones.
//!
//! Invariants, after every call:
//! * cached regions (those a get can return) are disjoint and not adjacent,
//!   since a miss absorbs every region it overlaps or touches; a lookup is
//!   then one ordered-map probe, O(log n);
//! * each region owns one registration, deregistered exactly once: when it is
//!   evicted, invalidated or merged while unreferenced, on its last put after
//!   that, or when the cache is dropped;
//! * the LRU list holds exactly the unreferenced cached regions;
//! * the cache is within its limits, or no cached region is unreferenced.
//!
//! A referenced region that a miss merges stays registered for its holders
//! and the new region covers it, as in UCX: it leaves the lookup (later gets
//! find the new region) and is deregistered on its last put.
//!
//! Single-threaded: every method takes `&mut self`. The protocol layer
//! shares one cache per memory domain and right between the workers of a
//! context, under a lock, behind each thread's front cache.

mod lru;
mod types;

pub use types::{RcacheConfig, RcacheError, RcacheStats, RegionInfo, RegionRef, Registrar};

use crate::slab::{Slab, SlabId};
use lru::{Linked, Links, Lru};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// In the lookup map: gets may return it.
    Cached,
    /// Absorbed by a larger region while referenced; still valid.
    Superseded,
    /// Invalidated while referenced.
    Invalid,
}

#[derive(Debug)]
struct Region<H> {
    start: usize,
    end: usize,
    refs: usize,
    state: State,
    links: Links,
    handle: H,
}

impl<H> Linked for Region<H> {
    fn links(&mut self) -> &mut Links {
        &mut self.links
    }
}

/// A registration cache over a [`Registrar`]; see the [module](self) doc.
pub struct Rcache<R: Registrar> {
    registrar: R,
    config: RcacheConfig,
    regions: Slab<Region<R::Handle>>,
    /// Cached regions by start address.
    cached: BTreeMap<usize, SlabId>,
    /// Superseded regions, to find them on invalidation.
    superseded: BTreeSet<SlabId>,
    lru: Lru,
    bytes: usize,
    stats: RcacheStats,
}

impl<R: Registrar> Rcache<R> {
    /// An empty cache over `registrar`.
    ///
    /// # Panics
    ///
    /// If `config.alignment` is not a power of two.
    pub fn new(registrar: R, config: RcacheConfig) -> Rcache<R> {
        assert!(
            config.alignment.is_power_of_two(),
            "rcache alignment {} is not a power of two",
            config.alignment
        );
        Rcache {
            registrar,
            config,
            regions: Slab::new(),
            cached: BTreeMap::new(),
            superseded: BTreeSet::new(),
            lru: Lru::default(),
            bytes: 0,
            stats: RcacheStats::default(),
        }
    }

    /// Returns a region covering `[addr, addr + len)` and takes a reference
    /// on it, to be given back with [`Rcache::put`].
    ///
    /// A hit if a cached region covers the aligned range. Otherwise the
    /// aligned range, widened to every cached region it overlaps or touches,
    /// is registered as a new region; the absorbed regions are deregistered,
    /// or (those still referenced) left to their holders. Then unreferenced
    /// regions are evicted until the cache is within its limits.
    ///
    /// Referenced regions are never evicted, so while everything is in use
    /// the cache may exceed its limits. On a registration failure the cache
    /// is unchanged. An empty range is an error: there is nothing to
    /// register.
    pub fn get(&mut self, addr: usize, len: usize) -> Result<RegionRef, RcacheError<R::Error>> {
        let end = addr
            .checked_add(len)
            .filter(|_| len > 0)
            .and_then(|e| self.align_up(e))
            .ok_or(RcacheError::Range { addr, len })?;
        let start = self.align_down(addr);
        match self.lookup(start, end) {
            Some(id) => {
                self.hold(id);
                self.stats.hits += 1;
                Ok(RegionRef(id))
            }
            None => self.miss(start, end),
        }
    }

    /// Drops a reference taken by [`Rcache::get`]. A region left without
    /// references stays cached (most recently used) unless the cache is over
    /// its limits, or it was superseded or invalidated, in which case it is
    /// deregistered now.
    ///
    /// A stale reference, or one whose region has no references left, is
    /// ignored (with a warning): the count never underflows and a stale id
    /// never reaches another region.
    pub fn put(&mut self, r: RegionRef) {
        let Some(region) = self.regions.get_mut(r.0) else {
            tracing::warn!("rcache: put of a stale region reference {r:?}");
            return;
        };
        if region.refs == 0 {
            tracing::warn!("rcache: put of an unreferenced region {r:?}");
            return;
        }
        region.refs -= 1;
        if region.refs > 0 {
            return;
        }
        match region.state {
            State::Cached => {
                self.lru.push_back(&mut self.regions, r.0);
                self.evict();
            }
            State::Superseded => {
                self.superseded.remove(&r.0);
                self.release(r.0);
            }
            State::Invalid => self.release(r.0),
        }
    }

    /// Invalidates every region overlapping `[addr, addr + len)` widened to
    /// the alignment, because that memory is being unmapped: unreferenced
    /// regions are deregistered now, referenced ones are marked invalid and
    /// deregistered on their last put. Later gets never return them. A range
    /// running past the address space is cut at its end.
    pub fn invalidate(&mut self, addr: usize, len: usize) {
        if len == 0 {
            return;
        }
        let start = self.align_down(addr);
        let end = addr
            .checked_add(len)
            .and_then(|e| self.align_up(e))
            .unwrap_or(usize::MAX);
        let mut hit: Vec<SlabId> = Vec::new();
        if let Some((_, &id)) = self.cached.range(..start).next_back() {
            if self.region(id).end > start {
                hit.push(id);
            }
        }
        hit.extend(self.cached.range(start..end).map(|(_, &id)| id));
        for id in hit {
            self.stats.invalidations += 1;
            self.uncache(id, State::Invalid);
        }
        let held: Vec<SlabId> = self
            .superseded
            .iter()
            .copied()
            .filter(|&id| {
                let r = self.region(id);
                r.start < end && r.end > start
            })
            .collect();
        for id in held {
            self.stats.invalidations += 1;
            self.superseded.remove(&id);
            self.region_mut(id).state = State::Invalid;
        }
    }

    /// The registration of `r`'s region, while `r` is live (including after
    /// invalidation, until the last put).
    pub fn handle(&self, r: RegionRef) -> Option<&R::Handle> {
        self.regions.get(r.0).map(|region| &region.handle)
    }

    /// What `r`'s region covers, while `r` is live.
    pub fn region_info(&self, r: RegionRef) -> Option<RegionInfo> {
        self.regions.get(r.0).map(|region| RegionInfo {
            start: region.start,
            len: region.end - region.start,
            refs: region.refs,
            valid: region.state != State::Invalid,
        })
    }

    /// Counters, and the registrations live now.
    pub fn stats(&self) -> RcacheStats {
        RcacheStats {
            regions: self.regions.len(),
            bytes: self.bytes,
            ..self.stats
        }
    }

    /// Whether the live registrations exceed a limit: all unreferenced
    /// regions were evicted and the referenced ones are too many or too
    /// large.
    pub fn over_limits(&self) -> bool {
        self.bytes > self.config.max_size || self.regions.len() > self.config.max_regions
    }

    /// The configuration.
    pub fn config(&self) -> &RcacheConfig {
        &self.config
    }

    /// The registrar.
    pub fn registrar(&self) -> &R {
        &self.registrar
    }

    fn align_down(&self, addr: usize) -> usize {
        addr & !(self.config.alignment - 1)
    }

    fn align_up(&self, addr: usize) -> Option<usize> {
        addr.checked_add(self.config.alignment - 1)
            .map(|a| self.align_down(a))
    }

    fn region(&self, id: SlabId) -> &Region<R::Handle> {
        self.regions
            .get(id)
            .expect("indexed regions are in the slab")
    }

    fn region_mut(&mut self, id: SlabId) -> &mut Region<R::Handle> {
        self.regions
            .get_mut(id)
            .expect("indexed regions are in the slab")
    }

    /// The cached region covering `[start, end)`: only the last one starting
    /// at or before `start` can, as cached regions are disjoint.
    fn lookup(&self, start: usize, end: usize) -> Option<SlabId> {
        let (_, &id) = self.cached.range(..=start).next_back()?;
        (self.region(id).end >= end).then_some(id)
    }

    fn hold(&mut self, id: SlabId) {
        if self.region(id).refs == 0 {
            self.lru.remove(&mut self.regions, id);
        }
        self.region_mut(id).refs += 1;
    }

    #[cold]
    fn miss(&mut self, start: usize, end: usize) -> Result<RegionRef, RcacheError<R::Error>> {
        self.stats.misses += 1;
        // Cached regions overlapping or touching [start, end): at most one
        // starting before `start`, and those starting up to `end`.
        let mut absorbed: Vec<SlabId> = Vec::new();
        let (mut ustart, mut uend) = (start, end);
        if let Some((_, &id)) = self.cached.range(..start).next_back() {
            let r = self.region(id);
            if r.end >= start {
                ustart = r.start;
                uend = uend.max(r.end);
                absorbed.push(id);
            }
        }
        for (_, &id) in self.cached.range(start..=end) {
            uend = uend.max(self.region(id).end);
            absorbed.push(id);
        }
        let handle = self
            .registrar
            .register(ustart, uend - ustart)
            .map_err(RcacheError::Register)?;
        for id in absorbed {
            self.stats.merges += 1;
            self.uncache(id, State::Superseded);
        }
        let id = self.regions.insert(Region {
            start: ustart,
            end: uend,
            refs: 1,
            state: State::Cached,
            links: Links::default(),
            handle,
        });
        self.cached.insert(ustart, id);
        self.bytes += uend - ustart;
        self.evict();
        Ok(RegionRef(id))
    }

    /// Takes the cached region `id` out of the lookup: deregisters it if
    /// unreferenced, else leaves it to its holders in `state`.
    fn uncache(&mut self, id: SlabId, state: State) {
        let (start, refs) = {
            let r = self.region(id);
            (r.start, r.refs)
        };
        self.cached.remove(&start);
        if refs == 0 {
            self.lru.remove(&mut self.regions, id);
            self.release(id);
        } else {
            self.region_mut(id).state = state;
            if state == State::Superseded {
                self.superseded.insert(id);
            }
        }
    }

    /// Removes region `id`, no longer cached nor on the LRU list, and
    /// deregisters it.
    fn release(&mut self, id: SlabId) {
        let Some(r) = self.regions.remove(id) else {
            debug_assert!(false, "released a region that is not in the slab");
            return;
        };
        self.bytes -= r.end - r.start;
        self.registrar.deregister(r.handle);
    }

    /// Evicts least recently used unreferenced regions while over a limit.
    fn evict(&mut self) {
        while self.over_limits() {
            let Some(id) = self.lru.pop_front(&mut self.regions) else {
                break;
            };
            let start = self.region(id).start;
            self.cached.remove(&start);
            self.release(id);
            self.stats.evictions += 1;
        }
    }
}

impl<R: Registrar> fmt::Debug for Rcache<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rcache")
            .field("config", &self.config)
            .field("stats", &self.stats())
            .field("unreferenced", &self.lru.len())
            .finish_non_exhaustive()
    }
}

impl<R: Registrar> Drop for Rcache<R> {
    /// Deregisters every region, referenced or not; outstanding
    /// [`RegionRef`]s die with the cache.
    fn drop(&mut self) {
        for id in self.regions.ids() {
            self.release(id);
        }
    }
}

#[cfg(test)]
mod tests;
