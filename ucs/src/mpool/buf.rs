//! Byte buffers: owned and recycled ([`BufPool`]) or carved from chunks
//! ([`ChunkedBufPool`]).

use super::index::IndexAlloc;
use super::MpoolParams;

/// Recycles owned `Vec<u8>` buffers of one capacity.
///
/// [`BufPool::take`] hands out an empty `Vec` with at least `elem_size`
/// bytes of capacity; [`BufPool::give`] takes one back. An owned buffer can
/// sit in an unexpected-message queue, move into a request and come back
/// much later, without borrowing the pool.
#[derive(Debug)]
pub struct BufPool {
    name: &'static str,
    elem_size: usize,
    /// Buffers handed out and not given back.
    outstanding: usize,
    /// Most buffers handed out at once.
    max: usize,
    /// Free buffers. Its capacity covers every buffer ever made, so `give`
    /// does not allocate.
    free: Vec<Vec<u8>>,
    /// Buffers made and not dropped.
    made: usize,
}

impl BufPool {
    /// A pool of `elem_size`-byte buffers; `params.max_elems` limits the
    /// buffers handed out at once. Nothing is allocated before the first
    /// `take`.
    pub fn new(params: MpoolParams, elem_size: usize) -> BufPool {
        BufPool {
            name: params.name,
            elem_size,
            outstanding: 0,
            max: params.max_elems,
            free: Vec::new(),
            made: 0,
        }
    }

    /// An empty buffer with capacity for at least `elem_size` bytes; `None`
    /// if `max_elems` buffers are out.
    #[inline]
    pub fn take(&mut self) -> Option<Vec<u8>> {
        if self.outstanding >= self.max {
            return None;
        }
        self.outstanding += 1;
        Some(match self.free.pop() {
            Some(buf) => buf,
            None => self.make(),
        })
    }

    #[cold]
    fn make(&mut self) -> Vec<u8> {
        self.made += 1;
        self.free.reserve(self.made.saturating_sub(self.free.len()));
        Vec::with_capacity(self.elem_size)
    }

    /// A buffer holding a copy of `data`; `None` if `data` is longer than
    /// `elem_size` or at the limit.
    #[inline]
    pub fn take_copy(&mut self, data: &[u8]) -> Option<Vec<u8>> {
        if data.len() > self.elem_size {
            return None;
        }
        let mut buf = self.take()?;
        buf.extend_from_slice(data);
        Some(buf)
    }

    /// Gives a buffer back. It is cleared and kept if its capacity is
    /// between `elem_size` and twice that (a buffer that grew a lot, or a
    /// foreign small one, is dropped instead).
    #[inline]
    pub fn give(&mut self, mut buf: Vec<u8>) {
        self.outstanding = self.outstanding.saturating_sub(1);
        let cap = buf.capacity();
        if cap >= self.elem_size && cap <= self.elem_size.saturating_mul(2) {
            buf.clear();
            if self.free.len() < self.free.capacity() {
                self.free.push(buf);
                return;
            }
        }
        self.made = self.made.saturating_sub(1);
    }

    /// Makes buffers until `n` are free (within the limit).
    pub fn prefill(&mut self, n: usize) {
        let room = self.max.saturating_sub(self.outstanding);
        while self.free.len() < n.min(room) {
            let buf = self.make();
            self.free.push(buf);
        }
    }

    /// Capacity of each buffer.
    pub fn elem_size(&self) -> usize {
        self.elem_size
    }

    /// Buffers handed out and not given back.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Buffers waiting in the pool.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// The pool's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// A buffer slot of a [`ChunkedBufPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PoolBuf(u32);

impl PoolBuf {
    /// The slot as a number (e.g. a transport token).
    pub fn as_u32(self) -> u32 {
        self.0
    }

    /// A slot from a number made by [`PoolBuf::as_u32`].
    pub fn from_u32(v: u32) -> PoolBuf {
        PoolBuf(v)
    }
}

/// Fixed-size byte slots carved from large chunks.
///
/// Every chunk is one allocation that never moves, so a transport can
/// register each chunk once with a memory domain (see
/// [`ChunkedBufPool::chunks`]) and then post slots by address.
#[derive(Debug)]
pub struct ChunkedBufPool {
    name: &'static str,
    elem_size: usize,
    chunks: Vec<Box<[u8]>>,
    index: IndexAlloc,
}

impl ChunkedBufPool {
    /// A pool of `elem_size`-byte slots, `params.elems_per_chunk` per chunk
    /// (rounded up to a power of two). Slots start zeroed.
    pub fn new(params: MpoolParams, elem_size: usize) -> ChunkedBufPool {
        ChunkedBufPool {
            name: params.name,
            elem_size,
            chunks: Vec::new(),
            index: IndexAlloc::new(params.elems_per_chunk, params.max_elems),
        }
    }

    /// Hands out a free slot; `None` at the limit, or if a chunk of the
    /// requested size does not fit `usize`.
    #[inline]
    pub fn get(&mut self) -> Option<PoolBuf> {
        if let Some(i) = self.index.pop() {
            return Some(PoolBuf(i));
        }
        self.grow_and_get()
    }

    #[cold]
    fn grow_and_get(&mut self) -> Option<PoolBuf> {
        let bytes = self.index.per_chunk().checked_mul(self.elem_size)?;
        let n = self.index.grow();
        if n == 0 {
            return None;
        }
        // A short last chunk gets the bytes of its slots only.
        let bytes = bytes / self.index.per_chunk() * n;
        self.chunks.push(vec![0u8; bytes].into_boxed_slice());
        self.index.pop().map(PoolBuf)
    }

    fn range(&self, b: PoolBuf) -> Option<(usize, std::ops::Range<usize>)> {
        if !self.index.is_used(b.0) {
            return None;
        }
        let (c, o) = self.index.locate(b.0);
        let start = o * self.elem_size;
        Some((c, start..start + self.elem_size))
    }

    /// The bytes of slot `b` if it is handed out.
    #[inline]
    pub fn buf(&self, b: PoolBuf) -> Option<&[u8]> {
        let (c, r) = self.range(b)?;
        self.chunks.get(c)?.get(r)
    }

    /// The bytes of slot `b`, mutably, if it is handed out.
    #[inline]
    pub fn buf_mut(&mut self, b: PoolBuf) -> Option<&mut [u8]> {
        let (c, r) = self.range(b)?;
        self.chunks.get_mut(c)?.get_mut(r)
    }

    /// Returns slot `b`; `false` if it is not handed out.
    #[inline]
    pub fn put(&mut self, b: PoolBuf) -> bool {
        self.index.release(b.0)
    }

    /// Every chunk made so far, in order (for memory registration), with
    /// the index of its first slot.
    pub fn chunks(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        let per = self.index.per_chunk() as u32;
        self.chunks
            .iter()
            .enumerate()
            .map(move |(i, c)| (i as u32 * per, &c[..]))
    }

    /// The chunk holding slot `b` (handed out or not) and the slot's byte
    /// offset in it.
    pub fn chunk_of(&self, b: PoolBuf) -> Option<(usize, usize)> {
        let (c, o) = self.index.locate(b.0);
        (c < self.chunks.len() && (b.0 as usize) < self.index.allocated())
            .then_some((c, o * self.elem_size))
    }

    /// Bytes per slot.
    pub fn elem_size(&self) -> usize {
        self.elem_size
    }

    /// Slots handed out.
    pub fn in_use(&self) -> usize {
        self.index.in_use()
    }

    /// Slots made so far.
    pub fn capacity(&self) -> usize {
        self.index.allocated()
    }

    /// The pool's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}
