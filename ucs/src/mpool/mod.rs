//! Pools of fixed-size objects and buffers.
//!
//! Map:
//! * [`Mpool`]: objects of one type in chunks, named by [`MpoolIdx`]; each
//!   object is built once when its chunk is made and keeps its state (and
//!   its allocations) across uses, like UCX's `obj_init`. Single-threaded.
//! * [`BufPool`]: owned `Vec<u8>` buffers of one capacity, recycled
//!   (bounce buffers, unexpected messages). [`ChunkedBufPool`]: byte slots
//!   carved from large chunks, named by [`PoolBuf`], for memory that must
//!   be registered once per chunk.
//! * [`SharedMpool`] and [`SharedBufPool`]: thread-safe variants with a
//!   lock-free free list (`crossbeam_queue::ArrayQueue`).
//!
//! Invariants: objects never move once made (chunks are boxed slices that
//! are never reallocated); an index is handed out at most once until it is
//! put back (a second `put` is refused); `get`/`put` and `take`/`give`
//! allocate only when the pool grows, never in the steady state.

mod buf;
mod index;
mod shared;

pub use buf::{BufPool, ChunkedBufPool, PoolBuf};
pub use shared::{Pooled, SharedBufPool, SharedMpool};

use index::IndexAlloc;
use std::fmt;

/// Sizes of a pool.
#[derive(Debug, Clone, Copy)]
pub struct MpoolParams {
    /// Name, for messages.
    pub name: &'static str,
    /// Objects made at a time (rounded up to a power of two).
    pub elems_per_chunk: usize,
    /// Most objects ever made; `get` returns `None` beyond it. `usize::MAX`
    /// for no limit (index pools are capped at `u32::MAX` objects).
    pub max_elems: usize,
}

impl MpoolParams {
    /// A pool named `name`, 64 objects per chunk, no limit.
    pub const fn new(name: &'static str) -> MpoolParams {
        MpoolParams {
            name,
            elems_per_chunk: 64,
            max_elems: usize::MAX,
        }
    }

    /// The same with `n` objects per chunk.
    pub const fn elems_per_chunk(mut self, n: usize) -> MpoolParams {
        self.elems_per_chunk = n;
        self
    }

    /// The same with at most `n` objects.
    pub const fn max_elems(mut self, n: usize) -> MpoolParams {
        self.max_elems = n;
        self
    }
}

/// An object handed out by an [`Mpool`].
///
/// Its 32-bit value can travel as a transport token and come back with
/// [`MpoolIdx::from_u32`]; the pool refuses indices it has not handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MpoolIdx(u32);

impl MpoolIdx {
    /// The index as a number.
    pub fn as_u32(self) -> u32 {
        self.0
    }

    /// An index from a number made by [`MpoolIdx::as_u32`].
    pub fn from_u32(v: u32) -> MpoolIdx {
        MpoolIdx(v)
    }
}

/// A single-threaded pool of `T`s, made in chunks by an init function.
pub struct Mpool<T> {
    name: &'static str,
    chunks: Vec<Box<[T]>>,
    index: IndexAlloc,
    init: Box<dyn FnMut() -> T + Send>,
}

impl<T> Mpool<T> {
    /// A pool whose objects are made by `init`, a chunk at a time, when the
    /// free list runs dry. Nothing is made before the first `get`.
    pub fn new(params: MpoolParams, init: impl FnMut() -> T + Send + 'static) -> Mpool<T> {
        Mpool {
            name: params.name,
            chunks: Vec::new(),
            index: IndexAlloc::new(params.elems_per_chunk, params.max_elems),
            init: Box::new(init),
        }
    }

    /// Hands out a free object, making a chunk if none is free; `None` at
    /// the limit. The object is as the last user left it (or as `init`
    /// made it).
    #[inline]
    pub fn get(&mut self) -> Option<MpoolIdx> {
        if let Some(i) = self.index.pop() {
            return Some(MpoolIdx(i));
        }
        self.grow_and_get()
    }

    #[cold]
    fn grow_and_get(&mut self) -> Option<MpoolIdx> {
        let n = self.index.grow();
        if n == 0 {
            return None;
        }
        let chunk: Vec<T> = (0..n).map(|_| (self.init)()).collect();
        self.chunks.push(chunk.into_boxed_slice());
        self.index.pop().map(MpoolIdx)
    }

    /// Hands out a free object and a reference to it.
    #[inline]
    pub fn get_entry(&mut self) -> Option<(MpoolIdx, &mut T)> {
        let idx = self.get()?;
        let (c, o) = self.index.locate(idx.0);
        Some((idx, &mut self.chunks[c][o]))
    }

    /// The object `idx` if it is handed out.
    #[inline]
    pub fn get_ref(&self, idx: MpoolIdx) -> Option<&T> {
        if !self.index.is_used(idx.0) {
            return None;
        }
        let (c, o) = self.index.locate(idx.0);
        self.chunks.get(c)?.get(o)
    }

    /// The object `idx`, mutably, if it is handed out.
    #[inline]
    pub fn get_mut(&mut self, idx: MpoolIdx) -> Option<&mut T> {
        if !self.index.is_used(idx.0) {
            return None;
        }
        let (c, o) = self.index.locate(idx.0);
        self.chunks.get_mut(c)?.get_mut(o)
    }

    /// Returns `idx` to the pool. `false`, and nothing happens, if it is
    /// not handed out (a double put or a forged index).
    #[inline]
    pub fn put(&mut self, idx: MpoolIdx) -> bool {
        self.index.release(idx.0)
    }

    /// Makes chunks until at least `n` objects exist (or the limit).
    pub fn reserve(&mut self, n: usize) {
        while self.index.allocated() < n {
            let grown = self.index.grow();
            if grown == 0 {
                break;
            }
            let chunk: Vec<T> = (0..grown).map(|_| (self.init)()).collect();
            self.chunks.push(chunk.into_boxed_slice());
        }
    }

    /// Objects handed out.
    pub fn in_use(&self) -> usize {
        self.index.in_use()
    }

    /// Objects made so far.
    pub fn capacity(&self) -> usize {
        self.index.allocated()
    }

    /// The pool's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl<T: Default + 'static> Mpool<T> {
    /// A pool of `T::default()` objects.
    pub fn with_default(params: MpoolParams) -> Mpool<T> {
        Mpool::new(params, T::default)
    }
}

impl<T> fmt::Debug for Mpool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mpool")
            .field("name", &self.name)
            .field("in_use", &self.in_use())
            .field("capacity", &self.capacity())
            .field("max", &self.index.max())
            .finish()
    }
}

impl<T> Drop for Mpool<T> {
    fn drop(&mut self) {
        let n = self.in_use();
        if n > 0 {
            tracing::debug!(
                "mpool {}: {n} of {} objects still in use at destruction",
                self.name,
                self.capacity()
            );
        }
    }
}

#[cfg(test)]
mod tests;
