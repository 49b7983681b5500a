//! Front caches: each thread's own short list of the cached registrations
//! it used last, in front of the context's shared caches.
//!
//! A lookup that a thread's front cache answers takes only that front's
//! lock, which no other thread takes on its own lookups: workers driven by
//! different threads do not serialize on the context (UCX's shared
//! registration cache lock does, openucx/ucx#11034). A front miss goes to
//! the shared cache under the context's lock and leaves the region in the
//! front.
//!
//! Each front entry holds one reference on its region in the shared cache,
//! whatever the number of transfers using the entry, so the shared cache
//! never deregisters a region a front can still return. What a front holds
//! is given back to the shared cache:
//! * when the front has [`FRONT_ENTRIES`] entries and needs room (its least
//!   recently used unused entry);
//! * when the shared cache is over its limits after a miss (every unused
//!   entry of that cache, in every front), so that it can evict them;
//! * on invalidation (unused entries at once; entries in use leave the
//!   lookup and are given back on their last release);
//! * when the thread exits (unused entries; the rest on their last
//!   release).
//!
//! Locks: the shared caches' lock is taken before a front's, never while
//! holding one.

use crate::ucs::rcache::RegionRef;
use crate::uct::{Access, MemHandle};
use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// Most entries of a front cache.
pub(crate) const FRONT_ENTRIES: usize = 16;

/// What names a shared cache: memory domain and right.
pub(crate) type CacheKey = (usize, Access);

/// A region held by a front entry or a transfer: the shared cache's index
/// and the region there.
pub(crate) type Held = (usize, RegionRef);

/// One thread's front cache of one context.
#[derive(Debug, Default)]
pub(crate) struct Front(parking_lot::Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// What lookups search, at most [`FRONT_ENTRIES`].
    entries: Vec<Entry>,
    /// Entries invalidated while in use, until their last release.
    detached: Vec<Entry>,
    /// The thread has exited: nothing new is kept.
    retired: bool,
    /// Lookups answered here.
    hits: u64,
    /// Use counter, for least-recently-used replacement.
    tick: u64,
}

#[derive(Debug)]
struct Entry {
    key: CacheKey,
    held: Held,
    start: usize,
    end: usize,
    memh: MemHandle,
    /// Transfers using the entry.
    refs: usize,
    /// `tick` at the last use.
    used: u64,
}

/// A region from the shared cache that a front is asked to keep.
#[derive(Debug)]
pub(crate) struct NewEntry {
    pub(crate) key: CacheKey,
    pub(crate) held: Held,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) memh: MemHandle,
}

/// What [`Front::insert`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Inserted {
    /// Kept, in use once; the replaced unused entry's region, if any, is
    /// to be given back to the shared cache.
    Kept(Option<Held>),
    /// Not kept (the front is retired, or full of entries in use): the
    /// caller's transfer holds the region itself.
    No,
}

impl Front {
    /// A cached registration of `key` covering `[addr, addr + len)`, now
    /// in use once more (to be given back with [`Front::release`]).
    pub(crate) fn lookup(
        &self,
        key: CacheKey,
        addr: usize,
        len: usize,
    ) -> Option<(Held, MemHandle)> {
        let end = addr.checked_add(len)?;
        let mut s = self.0.lock();
        s.tick += 1;
        let tick = s.tick;
        let e = s
            .entries
            .iter_mut()
            .find(|e| e.key == key && e.start <= addr && end <= e.end)?;
        e.refs += 1;
        e.used = tick;
        let found = (e.held, e.memh.clone());
        s.hits += 1;
        Some(found)
    }

    /// Keeps `n`, in use once. Called under the shared caches' lock, so
    /// that an invalidation sees the entry.
    pub(crate) fn insert(&self, n: NewEntry) -> Inserted {
        let mut s = self.0.lock();
        if s.retired {
            return Inserted::No;
        }
        let mut replaced = None;
        if s.entries.len() >= FRONT_ENTRIES {
            let lru = s
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.refs == 0)
                .min_by_key(|(_, e)| e.used)
                .map(|(i, _)| i);
            match lru {
                Some(i) => replaced = Some(s.entries.swap_remove(i).held),
                None => return Inserted::No,
            }
        }
        s.tick += 1;
        let used = s.tick;
        s.entries.push(Entry {
            key: n.key,
            held: n.held,
            start: n.start,
            end: n.end,
            memh: n.memh,
            refs: 1,
            used,
        });
        Inserted::Kept(replaced)
    }

    /// Ends a transfer's use of an entry. Returns the region to give back
    /// to the shared cache if that was the last use of an entry that left
    /// the front (invalidated, or the thread exited).
    pub(crate) fn release(&self, held: Held) -> Option<Held> {
        let mut s = self.0.lock();
        let retired = s.retired;
        if let Some(i) = s.entries.iter().position(|e| e.held == held) {
            let e = &mut s.entries[i];
            e.refs = e.refs.saturating_sub(1);
            if e.refs == 0 && retired {
                return Some(s.entries.swap_remove(i).held);
            }
            return None;
        }
        if let Some(i) = s.detached.iter().position(|e| e.held == held) {
            let e = &mut s.detached[i];
            e.refs = e.refs.saturating_sub(1);
            if e.refs == 0 {
                return Some(s.detached.swap_remove(i).held);
            }
            return None;
        }
        tracing::warn!("registration cache: release of an entry no front holds");
        None
    }

    /// Takes the unused entries of shared cache `ci` out, for the shared
    /// cache to evict: their regions.
    pub(crate) fn take_unused(&self, ci: usize) -> Vec<Held> {
        let mut s = self.0.lock();
        let mut out = Vec::new();
        s.entries.retain(|e| {
            let take = e.refs == 0 && e.held.0 == ci;
            if take {
                out.push(e.held);
            }
            !take
        });
        out
    }

    /// Takes every entry overlapping `[start, end)` out of the lookup:
    /// returns the regions of the unused ones; those in use are given back
    /// on their last release.
    pub(crate) fn invalidate(&self, start: usize, end: usize) -> Vec<Held> {
        let mut guard = self.0.lock();
        let s = &mut *guard;
        let mut out = Vec::new();
        let mut i = 0;
        while i < s.entries.len() {
            let e = &s.entries[i];
            if e.start < end && e.end > start {
                let e = s.entries.swap_remove(i);
                if e.refs == 0 {
                    out.push(e.held);
                } else {
                    s.detached.push(e);
                }
            } else {
                i += 1;
            }
        }
        out
    }

    /// The thread is gone: keeps nothing new and returns the regions of
    /// the unused entries and the lookups answered.
    pub(crate) fn retire(&self) -> (Vec<Held>, u64) {
        let mut s = self.0.lock();
        s.retired = true;
        let mut out = Vec::new();
        s.entries.retain(|e| {
            if e.refs == 0 {
                out.push(e.held);
            }
            e.refs > 0
        });
        (out, s.hits)
    }

    /// Lookups answered here.
    pub(crate) fn hits(&self) -> u64 {
        self.0.lock().hits
    }

    /// Entries (searched, and detached in use).
    #[cfg(test)]
    pub(crate) fn len(&self) -> (usize, usize) {
        let s = self.0.lock();
        (s.entries.len(), s.detached.len())
    }
}

/// The shared caches of a context.
pub(crate) type Shared = parking_lot::Mutex<super::RegCaches>;

/// This thread's front caches, one per context it used; retired when the
/// thread exits.
struct ThreadFronts(Vec<(Weak<Shared>, Arc<Front>)>);

impl Drop for ThreadFronts {
    fn drop(&mut self) {
        for (shared, front) in self.0.drain(..) {
            if let Some(shared) = shared.upgrade() {
                shared.lock().retire(&front);
            }
        }
    }
}

thread_local! {
    static FRONTS: RefCell<ThreadFronts> = const { RefCell::new(ThreadFronts(Vec::new())) };
}

/// This thread's front cache in front of `shared`, made (and registered
/// with it) on first use; `None` while the thread is exiting.
pub(crate) fn this_thread(shared: &Arc<Shared>) -> Option<Arc<Front>> {
    FRONTS
        .try_with(|t| {
            let mut t = t.try_borrow_mut().ok()?;
            if let Some((_, f)) = t.0.iter().find(|(w, _)| w.as_ptr() == Arc::as_ptr(shared)) {
                return Some(f.clone());
            }
            // Fronts of contexts that are gone.
            t.0.retain(|(w, _)| w.strong_count() > 0);
            let f = Arc::new(Front::default());
            shared.lock().add_front(f.clone());
            t.0.push((Arc::downgrade(shared), f.clone()));
            Some(f)
        })
        .ok()
        .flatten()
}
