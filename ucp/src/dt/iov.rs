//! Scatter-gather lists of owned buffers.
#![allow(unsafe_code)]

use super::{for_each_piece, Contig, ContigMut, Pack, Unpack};
use crate::request::{IoBuf, IoBufMut};
use crate::{Error, Result};

/// A scatter-gather list: the message is the concatenation of the
/// buffers, in order (`UCP_DATATYPE_IOV`). Empty buffers are allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Iov<B>(pub Vec<B>);

impl<B> Iov<B> {
    /// The list of `bufs`.
    pub fn new(bufs: Vec<B>) -> Iov<B> {
        Iov(bufs)
    }

    /// The buffers, back.
    pub fn into_inner(self) -> Vec<B> {
        self.0
    }
}

impl<B: IoBuf> Iov<B> {
    /// Total length of the buffers.
    pub fn len(&self) -> usize {
        self.0.iter().map(|b| b.len()).sum()
    }

    /// Whether the buffers hold no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The one buffer holding bytes, if at most one does.
    fn only(&self) -> Option<usize> {
        let mut full = self.0.iter().enumerate().filter(|(_, b)| !b.is_empty());
        match (full.next(), full.next()) {
            (Some((i, _)), None) => Some(i),
            _ => None,
        }
    }

    /// Bytes of buffer `i`.
    fn bytes(&self, i: usize) -> &[u8] {
        let b = &self.0[i];
        if b.is_empty() {
            return &[];
        }
        // SAFETY: IoBuf promises `len()` readable bytes at `as_ptr()`,
        // unmodified while the value is not touched through `&mut`; the
        // slice borrows `self`.
        unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) }
    }
}

impl<B: IoBuf> Pack for Iov<B> {
    fn packed_size(&self) -> usize {
        self.len()
    }

    fn pack(&mut self, offset: usize, dest: &mut [u8]) -> usize {
        let lens: Vec<usize> = self.0.iter().map(|b| b.len()).collect();
        for_each_piece(lens.into_iter(), offset, dest.len(), |i, at, to, n| {
            dest[to..to + n].copy_from_slice(&self.bytes(i)[at..at + n]);
        })
    }

    fn contiguous(&self) -> Option<Contig> {
        match self.only() {
            Some(i) => Some(Contig {
                ptr: self.0[i].as_ptr(),
                len: self.0[i].len(),
            }),
            None if self.0.is_empty() || self.is_empty() => Some(Contig {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            }),
            None => None,
        }
    }
}

impl<B: IoBufMut> Unpack for Iov<B> {
    fn packed_size(&self) -> usize {
        self.len()
    }

    fn unpack(&mut self, offset: usize, src: &[u8]) -> Result<()> {
        let cap = self.len();
        if offset.saturating_add(src.len()) > cap {
            return Err(Error::Truncated {
                length: offset.saturating_add(src.len()),
                capacity: cap,
            });
        }
        let lens: Vec<usize> = self.0.iter().map(|b| b.len()).collect();
        let bufs = &mut self.0;
        for_each_piece(lens.into_iter(), offset, src.len(), |i, at, from, n| {
            let b = &mut bufs[i];
            // SAFETY: IoBufMut promises `len()` writable bytes at
            // `as_mut_ptr()`; `at + n <= len()` by `for_each_piece`, and the
            // exclusive borrow of `self` keeps anyone else out.
            let dst = unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr(), b.len()) };
            dst[at..at + n].copy_from_slice(&src[from..from + n]);
        });
        Ok(())
    }

    fn contiguous_mut(&mut self) -> Option<ContigMut> {
        match self.only() {
            Some(i) => {
                let len = self.0[i].len();
                Some(ContigMut {
                    ptr: self.0[i].as_mut_ptr(),
                    len,
                })
            }
            None if self.is_empty() => Some(ContigMut {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            }),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Iov, Pack, Unpack};

    #[test]
    fn an_iov_packs_and_unpacks_any_range() {
        let parts = vec![b"ab".to_vec(), Vec::new(), b"cdef".to_vec(), b"g".to_vec()];
        let mut src = Iov::new(parts);
        assert_eq!(Pack::packed_size(&src), 7);
        assert!(src.contiguous().is_none(), "spread over three buffers");
        let mut whole = [0u8; 7];
        assert_eq!(src.pack(0, &mut whole), 7);
        assert_eq!(&whole, b"abcdefg");
        for off in 0..=7 {
            for len in 0..=(8 - off) {
                let mut d = vec![0u8; len];
                let n = src.pack(off, &mut d);
                assert_eq!(n, len.min(7 - off));
                assert_eq!(&d[..n], &whole[off..off + n]);
            }
        }
        let mut dst = Iov::new(vec![vec![0u8; 3], vec![0u8; 0], vec![0u8; 4]]);
        dst.unpack(2, b"cdefg").expect("fits");
        dst.unpack(0, b"ab").expect("fits");
        assert_eq!(dst.0.concat(), b"abcdefg");
        assert!(dst.unpack(5, b"xyz").is_err(), "beyond the capacity");
        assert_eq!(
            dst.0.concat(),
            b"abcdefg",
            "a refused unpack writes nothing"
        );
    }

    #[test]
    fn an_iov_with_one_full_buffer_is_contiguous() {
        let mut one = Iov::new(vec![Vec::new(), vec![7u8; 5], Vec::new()]);
        let c = one.contiguous().expect("one buffer holds every byte");
        assert_eq!((c.ptr, c.len), (one.0[1].as_ptr(), 5));
        let m = one.contiguous_mut().expect("also for receiving");
        assert_eq!(m.len, 5);
        let none: Iov<Vec<u8>> = Iov::new(Vec::new());
        assert_eq!(none.contiguous().map(|c| c.len), Some(0));
    }
}
