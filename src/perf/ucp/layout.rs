//! The iovec layout of `-D iov`: a message at one address split into
//! entries of the `-s` sizes, sent and received with the protocol layer's
//! datatype calls (`rucx_ucp::dt`).
#![allow(unsafe_code)]

use rucx_ucp::dt::{for_each_piece, Pack, Unpack};

/// The entries of a message of `len` bytes at `base`: the `-s` sizes in
/// order (their sum is the length; a last entry takes what is left).
fn entries<P: Copy>(
    base: P,
    len: usize,
    sizes: &[usize],
    at: impl Fn(P, usize) -> P,
) -> Vec<(P, usize)> {
    let mut out = Vec::with_capacity(sizes.len());
    let mut off = 0;
    for &s in sizes {
        let n = s.min(len - off);
        out.push((at(base, off), n));
        off += n;
    }
    if off < len {
        out.push((at(base, off), len - off));
    }
    out
}

/// A send's iovec over memory the caller keeps valid.
#[derive(Debug)]
pub(super) struct SendIov(Vec<(*const u8, usize)>);

// SAFETY: only read, on the worker's thread, while the caller's contract
// (`PerfWorker::tag_send`) keeps the memory valid and unchanged.
unsafe impl Send for SendIov {}

impl SendIov {
    /// # Safety
    /// `ptr..ptr + len` stays readable and unchanged while the value lives.
    pub(super) unsafe fn new(ptr: *const u8, len: usize, sizes: &[usize]) -> SendIov {
        SendIov(entries(ptr, len, sizes, |p, o| p.wrapping_add(o)))
    }
}

impl Pack for SendIov {
    fn packed_size(&self) -> usize {
        self.0.iter().map(|e| e.1).sum()
    }

    fn pack(&mut self, offset: usize, dest: &mut [u8]) -> usize {
        let parts = &self.0;
        for_each_piece(
            parts.iter().map(|e| e.1),
            offset,
            dest.len(),
            |i, at, to, n| {
                // SAFETY: `at + n` lies inside entry `i` (`for_each_piece`),
                // readable by the constructor's contract.
                let src = unsafe { std::slice::from_raw_parts(parts[i].0.add(at), n) };
                dest[to..to + n].copy_from_slice(src);
            },
        )
    }
}

/// A receive's iovec over memory the caller keeps valid and lends it.
#[derive(Debug)]
pub(super) struct RecvIov(Vec<(*mut u8, usize)>);

// SAFETY: only written, on the worker's thread, while the caller's
// contract (`PerfWorker::tag_recv`) keeps the memory valid and its own.
unsafe impl Send for RecvIov {}

impl RecvIov {
    /// # Safety
    /// `ptr..ptr + len` stays writable, and untouched by anyone else,
    /// while the value lives.
    pub(super) unsafe fn new(ptr: *mut u8, len: usize, sizes: &[usize]) -> RecvIov {
        RecvIov(entries(ptr, len, sizes, |p, o| p.wrapping_add(o)))
    }
}

impl Unpack for RecvIov {
    fn packed_size(&self) -> usize {
        self.0.iter().map(|e| e.1).sum()
    }

    fn unpack(&mut self, offset: usize, src: &[u8]) -> rucx_ucp::Result<()> {
        let parts = &self.0;
        for_each_piece(
            parts.iter().map(|e| e.1),
            offset,
            src.len(),
            |i, at, from, n| {
                // SAFETY: `at + n` lies inside entry `i` (`for_each_piece`),
                // writable and ours by the constructor's contract.
                let dst = unsafe { std::slice::from_raw_parts_mut(parts[i].0.add(at), n) };
                dst.copy_from_slice(&src[from..from + n]);
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{RecvIov, SendIov};
    use rucx_ucp::dt::{Pack, Unpack};

    #[test]
    fn entries_follow_the_sizes_and_carry_every_byte() {
        let src: Vec<u8> = (0..100u8).collect();
        // SAFETY: `src` and `dst` outlive the values.
        let mut s = unsafe { SendIov::new(src.as_ptr(), 100, &[16, 48, 8]) };
        assert_eq!(s.0.iter().map(|e| e.1).collect::<Vec<_>>(), [16, 48, 8, 28]);
        let mut packed = vec![0u8; 100];
        assert_eq!(s.pack(0, &mut packed), 100);
        assert_eq!(packed, src);
        let mut dst = vec![0u8; 100];
        // SAFETY: as above.
        let mut r = unsafe { RecvIov::new(dst.as_mut_ptr(), 100, &[7, 50, 43]) };
        assert_eq!(r.packed_size(), 100);
        r.unpack(30, &packed[30..]).unwrap();
        r.unpack(0, &packed[..30]).unwrap();
        assert_eq!(dst, src);
    }
}
