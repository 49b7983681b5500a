//! Thread-safe pools on a lock-free free list.

use super::MpoolParams;
use crossbeam_queue::ArrayQueue;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Objects kept on the free list at most when the pool has no limit.
const DEFAULT_MAX_FREE: usize = 4096;

/// Counts objects made against a limit.
#[derive(Debug)]
struct Quota {
    made: AtomicUsize,
    max: usize,
}

impl Quota {
    /// Claims one object; `false` at the limit.
    fn claim(&self) -> bool {
        self.made
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                (m < self.max).then_some(m + 1)
            })
            .is_ok()
    }

    /// Gives a claim back (an object was dropped).
    fn release(&self) {
        let _ = self
            .made
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| m.checked_sub(1));
    }
}

/// Free-list size for a pool: its limit, or [`DEFAULT_MAX_FREE`] without one.
fn free_capacity(params: &MpoolParams) -> usize {
    params
        .max_elems
        .clamp(1, DEFAULT_MAX_FREE.max(params.elems_per_chunk))
}

/// A thread-safe pool of boxed `T`s.
///
/// Objects are made one at a time by `init` when the free list is empty
/// (up to `max_elems`) and keep their state across uses. The free list is a
/// bounded lock-free queue of `min(max_elems, max(4096, elems_per_chunk))`
/// entries, allocated once; an object returned to a full list is dropped.
pub struct SharedMpool<T> {
    name: &'static str,
    free: ArrayQueue<Box<T>>,
    quota: Quota,
    init: Box<dyn Fn() -> T + Send + Sync>,
}

impl<T> SharedMpool<T> {
    /// A pool whose objects are made by `init`.
    pub fn new(params: MpoolParams, init: impl Fn() -> T + Send + Sync + 'static) -> Self {
        SharedMpool {
            name: params.name,
            free: ArrayQueue::new(free_capacity(&params)),
            quota: Quota {
                made: AtomicUsize::new(0),
                max: params.max_elems,
            },
            init: Box::new(init),
        }
    }

    /// An object, owned; `None` at the limit. Give it back with
    /// [`SharedMpool::put`].
    #[inline]
    pub fn take(&self) -> Option<Box<T>> {
        if let Some(obj) = self.free.pop() {
            return Some(obj);
        }
        self.make()
    }

    #[cold]
    fn make(&self) -> Option<Box<T>> {
        self.quota.claim().then(|| Box::new((self.init)()))
    }

    /// An object that returns to the pool when dropped; `None` at the limit.
    #[inline]
    pub fn get(&self) -> Option<Pooled<'_, T>> {
        self.take().map(|obj| Pooled {
            pool: self,
            obj: Some(obj),
        })
    }

    /// Returns an object. One from elsewhere is accepted if the free list
    /// has room; otherwise it is dropped.
    #[inline]
    pub fn put(&self, obj: Box<T>) {
        if self.free.push(obj).is_err() {
            self.quota.release();
        }
    }

    /// Objects made and not dropped.
    pub fn made(&self) -> usize {
        self.quota.made.load(Ordering::Relaxed)
    }

    /// Objects waiting on the free list.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// The pool's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl<T: Default + 'static> SharedMpool<T> {
    /// A pool of `T::default()` objects.
    pub fn with_default(params: MpoolParams) -> Self {
        SharedMpool::new(params, T::default)
    }
}

impl<T> fmt::Debug for SharedMpool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedMpool")
            .field("name", &self.name)
            .field("made", &self.made())
            .field("free", &self.free_count())
            .field("max", &self.quota.max)
            .finish()
    }
}

/// An object of a [`SharedMpool`]; it goes back to the pool when dropped.
pub struct Pooled<'a, T> {
    pool: &'a SharedMpool<T>,
    /// Always `Some` until drop or [`Pooled::into_box`].
    obj: Option<Box<T>>,
}

impl<T> Pooled<'_, T> {
    /// Detaches the object from the pool; it still counts against the
    /// pool's limit until given back with [`SharedMpool::put`].
    pub fn into_box(mut self) -> Box<T> {
        match self.obj.take() {
            Some(obj) => obj,
            None => unreachable!("Pooled holds its object until dropped"),
        }
    }
}

impl<T> Deref for Pooled<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match &self.obj {
            Some(obj) => obj,
            None => unreachable!("Pooled holds its object until dropped"),
        }
    }
}

impl<T> DerefMut for Pooled<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        match &mut self.obj {
            Some(obj) => obj,
            None => unreachable!("Pooled holds its object until dropped"),
        }
    }
}

impl<T> Drop for Pooled<'_, T> {
    fn drop(&mut self) {
        if let Some(obj) = self.obj.take() {
            self.pool.put(obj);
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Pooled<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Pooled").field(&**self).finish()
    }
}

/// A thread-safe [`BufPool`](super::BufPool): owned `Vec<u8>` buffers of
/// one capacity on a lock-free free list.
#[derive(Debug)]
pub struct SharedBufPool {
    name: &'static str,
    elem_size: usize,
    free: ArrayQueue<Vec<u8>>,
    quota: Quota,
}

impl SharedBufPool {
    /// A pool of `elem_size`-byte buffers; `params.max_elems` limits the
    /// buffers in existence.
    pub fn new(params: MpoolParams, elem_size: usize) -> SharedBufPool {
        SharedBufPool {
            name: params.name,
            elem_size,
            free: ArrayQueue::new(free_capacity(&params)),
            quota: Quota {
                made: AtomicUsize::new(0),
                max: params.max_elems,
            },
        }
    }

    /// An empty buffer with capacity for at least `elem_size` bytes; `None`
    /// at the limit.
    #[inline]
    pub fn take(&self) -> Option<Vec<u8>> {
        if let Some(buf) = self.free.pop() {
            return Some(buf);
        }
        self.make()
    }

    #[cold]
    fn make(&self) -> Option<Vec<u8>> {
        self.quota
            .claim()
            .then(|| Vec::with_capacity(self.elem_size))
    }

    /// Gives a buffer back; kept (cleared) if its capacity is between
    /// `elem_size` and twice that and the free list has room, else dropped.
    #[inline]
    pub fn give(&self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap >= self.elem_size && cap <= self.elem_size.saturating_mul(2) {
            buf.clear();
            if self.free.push(buf).is_ok() {
                return;
            }
        }
        self.quota.release();
    }

    /// Capacity of each buffer.
    pub fn elem_size(&self) -> usize {
        self.elem_size
    }

    /// Buffers made and not dropped.
    pub fn made(&self) -> usize {
        self.quota.made.load(Ordering::Relaxed)
    }

    /// Buffers waiting on the free list.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// The pool's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}
